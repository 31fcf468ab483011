"""A BMv2 switch started over TLS with client certificates required: the controller's
certificate gets in (the program loaded, entries written and read back); a plain channel, a
TLS channel without a client certificate and one with another network's certificate are
refused at the handshake. Without TLS the switch answers a plain channel as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from innet.bmv2 import launcher
from innet.bmv2.launcher import BMv2Options, ServerTls
from innet.bmv2.local import free_port, log_tail, wait_for_port
from innet.bmv2.tls import make_network_tls
from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError
from innet.p4rt.deploy import deploy, status
from innet.p4rt.encode import normalise
from innet.plan.intent import IntentOptions, build_intent
from innet.plan.pipeline import load_pipeline
from innet.testing.bmv2 import missing_tools
from innet.topology import topology_from_dict

_missing = missing_tools("simple_switch_grpc")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2)"),
    pytest.mark.usefixtures("no_p4runtime_threads_left"),
]
PIPE = load_pipeline()
TOPO = topology_from_dict({
    "name": "one", "switches": {"s1": {}},
    "hosts": {"h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:00:01"},
              "h2": {"ip": "10.0.0.2", "mac": "08:00:00:00:00:02"}},
    "links": [["h1", "s1-p1"], ["h2", "s1-p2"]]})


@contextmanager
def switch(run: Path, tls: ServerTls | None) -> Iterator[SwitchAddress]:
    grpc_port, thrift_port = free_port(), free_port()
    address = f"127.0.0.1:{grpc_port}"
    options = BMv2Options(0, thrift_port, address, run / "s1.log", tls=tls)
    proc = launcher.launch(options, run / "s1.out")
    try:
        assert wait_for_port(grpc_port, 20.0, proc), log_tail(run / "s1.out")
        yield SwitchAddress("s1", address, 0, thrift_port)
    finally:
        launcher.stop(proc)


def read_pipeline(address: str, credentials: grpc.ChannelCredentials | None
                  ) -> grpc.StatusCode:
    """One RPC on a channel of our own making: how it ended (UNAVAILABLE: no session; a
    switch without a program answers FAILED_PRECONDITION)."""
    channel = (grpc.insecure_channel(address) if credentials is None
               else grpc.secure_channel(address, credentials))
    with channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        try:
            stub.GetForwardingPipelineConfig(
                p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0), timeout=5)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            return code
    return grpc.StatusCode.OK


def test_only_the_controllers_certificate_gets_in(tmp_path: Path) -> None:
    tls = make_network_tls(tmp_path / "tls", ["s1"])
    other = make_network_tls(tmp_path / "other", ["s1"])
    with switch(tmp_path, tls.server("s1")) as plain_address:
        address = replace(plain_address, tls=tls.client())
        entries = build_intent(IntentOptions(), TOPO).entries()
        result = deploy({"s1": address}, {"s1": entries["s1"]}, PIPE)
        assert not result.failed and result.switches["s1"].pipeline and result.writes > 0
        held = status({"s1": address}, PIPE)["s1"]
        assert held.error is None and held.runs_ours
        assert {normalise(PIPE.schema, e) for e in entries["s1"]} <= set(held.entries)

        with pytest.raises(SwitchError, match="cannot open a P4Runtime session"):
            SwitchClient(plain_address, PIPE.schema, writer=False)
        ca = tls.ca.read_bytes()
        foreign = other.client()
        for credentials in (None, grpc.ssl_channel_credentials(ca),
                            grpc.ssl_channel_credentials(
                                ca, Path(foreign.key).read_bytes(),
                                Path(foreign.cert).read_bytes())):
            assert read_pipeline(address.grpc, credentials) == grpc.StatusCode.UNAVAILABLE
        # the same call with the controller's certificate is answered
        mine = tls.client()
        assert read_pipeline(address.grpc, grpc.ssl_channel_credentials(
            ca, Path(mine.key).read_bytes(), Path(mine.cert).read_bytes())) == \
            grpc.StatusCode.OK


def test_without_tls_a_plain_channel_is_answered(tmp_path: Path) -> None:
    with switch(tmp_path, None) as address:
        assert read_pipeline(address.grpc, None) == grpc.StatusCode.FAILED_PRECONDITION
        with SwitchClient(address, PIPE.schema, writer=False) as c:
            assert c.pipeline_cookie() is None
