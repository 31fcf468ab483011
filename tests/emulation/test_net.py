"""Mininet runs leave nothing behind: after success, an error midway, and a signal.

Linux bridges stand in for the switches here (no P4 needed): what is tested is the harness's
life cycle, which is the same for BMv2 switches.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from innet.emulation.net import own_leftovers, require_mininet, running_network
from innet.topology import load_topology, topology_from_dict

pytestmark = [pytest.mark.dataplane,
              pytest.mark.skipif(require_mininet() is not None,
                                 reason=f"Mininet unavailable: {require_mininet()}")]

ROOT = Path(__file__).resolve().parents[2]

# names no other test or run uses, so a leftover can only be ours
SMALL: dict[str, Any] = {
    "name": "mnt",
    "hosts": {"mta": {"ip": "10.9.0.1", "mac": "08:00:00:09:00:01"},
              "mtb": {"ip": "10.9.0.2", "mac": "08:00:00:09:00:02"},
              "mtc": {"ip": "10.9.0.3", "mac": "08:00:00:09:00:03"}},
    "switches": {"mts1": {}, "mts2": {}},
    "links": [["mta", "mts1-p1"], ["mtb", "mts1-p2"], ["mts1-p3", "mts2-p1"],
              ["mtc", "mts2-p2"]],
}


def host_shells(names: list[str]) -> list[str]:
    out = subprocess.run(["pgrep", "-af", "mininet:"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if any(f"mininet:{n}" in line for n in names)]


def assert_nothing_left(topo: Any) -> None:
    assert own_leftovers(topo) == []
    assert host_shells(list(topo.hosts)) == []


def test_bridged_network_forwards_and_cleans_up(tmp_path: Path) -> None:
    topo = topology_from_dict(SMALL)
    with running_network(topo, tmp_path, switch_kind="bridge") as run:
        out = run.host("mta").cmd("ping -c 1 -W 2 10.9.0.3")
        assert " 0% packet loss" in out, out
        # offloads off and IPv6 off on every host
        assert "1" in run.host("mtb").cmd("sysctl -n net.ipv6.conf.all.disable_ipv6")
        offload = run.host("mtb").cmd("ethtool -k mtb-eth0 | grep tx-checksumming")
        assert "off" in offload
        # static ARP: the neighbour is known without asking
        assert "08:00:00:09:00:03" in run.host("mta").cmd("ip neigh show 10.9.0.3")
    assert_nothing_left(topo)


def test_processes_started_in_the_hosts_end_with_the_network(tmp_path: Path) -> None:
    """What runs in a host when the network stops ends with it: a process started beside
    the host's shell (a job's agent) and one sent to the background at its shell. Mininet
    ends the shells only; the rest would live on in namespaces without interfaces."""
    topo = topology_from_dict(SMALL)
    with running_network(topo, tmp_path, switch_kind="bridge") as run:
        agent = run.host("mta").popen(["sleep", "307"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        run.host("mtb").cmd("sleep 308 &")
        background = subprocess.run(["pgrep", "-f", "^sleep 308$"], capture_output=True,
                                    text=True).stdout.split()
        assert len(background) == 1 and agent.poll() is None
    assert agent.wait(10) == -signal.SIGKILL
    assert subprocess.run(["pgrep", "-f", "^sleep 30[78]$"], capture_output=True).returncode == 1
    assert_nothing_left(topo)


def test_nothing_left_after_a_run_that_fails_midway(tmp_path: Path) -> None:
    topo = load_topology(ROOT / "topologies" / "bt15.json")
    with pytest.raises(RuntimeError, match="midway"), \
            running_network(topo, tmp_path, switch_kind="bridge") as run:
        assert run.host("h1").cmd("echo alive").strip() == "alive"
        raise RuntimeError("the experiment failed midway")
    assert_nothing_left(topo)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_nothing_left_after_a_signal(tmp_path: Path, sig: int) -> None:
    topo_file = tmp_path / "t.json"
    topo_file.write_text(json.dumps(SMALL))
    # a run that does not stop says where it hangs: SIGUSR1 dumps every thread's stack
    script = textwrap.dedent(f"""
        import faulthandler, signal, sys, time
        from pathlib import Path
        from innet.emulation.net import running_network
        from innet.topology import load_topology
        topo = load_topology({str(topo_file)!r})
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        try:
            with running_network(topo, Path({str(tmp_path / 'run')!r}), switch_kind="bridge"):
                print("up", flush=True)
                time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "up"
        os.kill(proc.pid, sig)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the stacks of the hung run, on its stderr
            time.sleep(2)
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the run did not stop within 60 s of the signal; stderr:\n{err}")
        assert proc.returncode == 130, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        time.sleep(0.2)
        # a run killed above left its veths and shells: remove them whatever failed, so
        # that the next test starts on a clean machine instead of failing on leftovers
        left = own_leftovers(topology_from_dict(SMALL))
        for ifname in left:
            subprocess.run(["ip", "link", "del", ifname], capture_output=True)
        for line in host_shells(list(SMALL["hosts"])):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == []
    assert_nothing_left(topology_from_dict(SMALL))
