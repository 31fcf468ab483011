"""The one BMv2 process launcher: build `simple_switch_grpc`'s command line, start it, stop it.

A switch runs in its own session (a Ctrl-C meant for the caller does not reach it), writes its
stdout and stderr to one file, and is stopped with SIGTERM, then SIGKILL after five seconds.
Without a program (`json_path` empty) it starts with `--no-p4` and waits for one over
P4Runtime. With `tls`, its P4Runtime server speaks only TLS and requires a client certificate
signed by the same CA (`innet.bmv2.tls` makes them). Whoever starts it waits for its gRPC port
(`innet.bmv2.local.wait_for_port`) and words its own error: the Mininet harness and the test
helpers say different things.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

STOP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The PEM files of a switch's TLS P4Runtime server: the CA that clients' certificates
    must chain to, and the switch's own certificate and key."""

    ca: str
    cert: str
    key: str

    def arguments(self) -> list[str]:
        return ["--grpc-server-ssl", "--grpc-server-cacert", self.ca, "--grpc-server-cert",
                self.cert, "--grpc-server-key", self.key, "--grpc-server-with-client-auth"]


@dataclass(frozen=True, slots=True)
class BMv2Options:
    """What one `simple_switch_grpc` is started with."""

    device_id: int
    thrift_port: int
    grpc_address: str  # host:port the P4Runtime server listens on
    log_file: Path  # BMv2's own log (-L level --log-file)
    log_level: str = "off"  # logging halves its packet rate
    interfaces: tuple[tuple[int, str], ...] = ()  # (port, interface name)
    pcap_dir: str | None = None
    json_path: str | None = None  # None or "": no program, --no-p4
    tls: ServerTls | None = None  # None: a plain gRPC server any local user can reach

    def command_line(self) -> list[str]:
        args = ["simple_switch_grpc", "--device-id", str(self.device_id), "--thrift-port",
                str(self.thrift_port), "-L", self.log_level, "--log-file", str(self.log_file)]
        for port, intf in sorted(self.interfaces):
            args += ["-i", f"{port}@{intf}"]
        if self.pcap_dir:
            args += ["--pcap", self.pcap_dir]
        args.append(self.json_path or "--no-p4")
        args += ["--", "--grpc-server-addr", self.grpc_address]
        if self.tls is not None:
            args += self.tls.arguments()
        return args


def launch(options: BMv2Options, out_path: Path) -> subprocess.Popen[bytes]:
    """Start the switch in its own session, its output going to `out_path`."""
    with out_path.open("wb") as out:
        return subprocess.Popen(options.command_line(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL if it has not gone within STOP_TIMEOUT; nothing if it is gone."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_TIMEOUT)
