"""The certificates of a network over TLS: every file owner-only in an owner-only folder, each
switch's certificate for 127.0.0.1 and localhost, the controller's for client use, all chained
to the network's CA (whose key is never written)."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from innet.bmv2.launcher import BMv2Options
from innet.bmv2.tls import make_network_tls, network_tls
from innet.errors import InputError


def load(path: str | Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(Path(path).read_bytes())


def mode(path: str | Path) -> int:
    return stat.S_IMODE(Path(path).stat().st_mode)


def test_files_are_owner_only(tmp_path: Path) -> None:
    tls = make_network_tls(tmp_path / "tls", ["s1", "s2"])
    assert mode(tls.folder) == 0o700
    files = sorted(p.name for p in tls.folder.iterdir())
    assert files == ["ca.pem", "controller.key", "controller.pem", "switch-s1.key",
                     "switch-s1.pem", "switch-s2.key", "switch-s2.pem"]
    assert {mode(tls.folder / f) for f in files} == {0o600}
    # each key is its certificate's, and none is the CA's (whose key is never written:
    # nothing can sign another certificate the switches accept)
    ca_key = load(tls.ca).public_key()
    for name in ("switch-s1", "switch-s2", "controller"):
        key = serialization.load_pem_private_key((tls.folder / f"{name}.key").read_bytes(),
                                                 None)
        assert key.public_key() == load(tls.folder / f"{name}.pem").public_key()
        assert key.public_key() != ca_key
    assert network_tls(tls.folder).client() == tls.client()


def test_chains_verify_for_their_use(tmp_path: Path) -> None:
    tls = make_network_tls(tmp_path / "tls", ["s1", "s2"])
    store = Store([load(tls.ca)])
    now = datetime.datetime.now(datetime.UTC)
    policy = PolicyBuilder().store(store).time(now)
    for switch in ("s1", "s2"):
        cert = load(tls.server(switch).cert)
        for name in (x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                     x509.DNSName("localhost")):
            chain = policy.build_server_verifier(name).verify(cert, [])
            assert chain[-1] == load(tls.ca)
        with pytest.raises(VerificationError):  # not a certificate for another host
            policy.build_server_verifier(x509.DNSName("example.org")).verify(cert, [])
    client = load(tls.client().cert)
    policy.build_client_verifier().verify(client, [])
    with pytest.raises(VerificationError):  # a client certificate serves no switch
        policy.build_server_verifier(x509.DNSName("localhost")).verify(client, [])
    # another network's CA accepts none of them
    other = make_network_tls(tmp_path / "other", ["s1"])
    foreign = PolicyBuilder().store(Store([load(other.ca)])).time(now)
    with pytest.raises(VerificationError):
        foreign.build_client_verifier().verify(client, [])


def test_a_second_set_replaces_the_first(tmp_path: Path) -> None:
    first = make_network_tls(tmp_path / "tls", ["s1"])
    ca = first.ca.read_bytes()
    again = make_network_tls(tmp_path / "tls", ["s1"])
    assert again.ca.read_bytes() != ca and mode(again.folder) == 0o700


def test_refusals_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot be a file name"):
        make_network_tls(tmp_path / "tls", ["../s1"])
    (tmp_path / "half").mkdir()
    with pytest.raises(InputError, match=r"ca\.pem: no such certificate file"):
        network_tls(tmp_path / "half")


def test_the_switch_is_started_requiring_client_certificates(tmp_path: Path) -> None:
    tls = make_network_tls(tmp_path / "tls", ["s1"])
    server = tls.server("s1")
    args = BMv2Options(0, 9090, "127.0.0.1:50051", tmp_path / "log", tls=server).command_line()
    tail = args[args.index("--"):]
    assert tail == ["--", "--grpc-server-addr", "127.0.0.1:50051", "--grpc-server-ssl",
                    "--grpc-server-cacert", str(tls.ca), "--grpc-server-cert", server.cert,
                    "--grpc-server-key", server.key, "--grpc-server-with-client-auth"]
    plain = BMv2Options(0, 9090, "127.0.0.1:50051", tmp_path / "log").command_line()
    assert not any("ssl" in a for a in plain)
