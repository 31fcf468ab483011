"""The certificates of a network whose switches speak P4Runtime over TLS (`net up --tls`).

Without them, a local switch's P4Runtime port is open to every user of the machine: anyone who
connects with a higher election id becomes primary and rewrites the tables. With them, each
switch requires a client certificate signed by the network's own CA, and only the controller
(and whoever can read its key: root and the owner of the run folder) holds one.

One CA per network, made when the network starts. Its private key is never written: once the
switches' and the controller's certificates are signed it is dropped, so nobody can sign
another certificate the switches would accept. Every switch gets a server certificate for
127.0.0.1 and localhost (where local switches listen); the controller a client certificate.
Every file is owner-only (0600) in an owner-only folder (0700), `tls/` in the run folder.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from innet.bmv2.launcher import ServerTls
from innet.errors import InputError
from innet.p4rt.client import ClientTls

CA_FILE = "ca.pem"
CLIENT = "controller"
VALID = datetime.timedelta(days=365)
SKEW = datetime.timedelta(hours=1)  # not-before in the past: clocks of a VM may lag
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class NetworkTls:
    """Where a network's certificates are: `folder`/ca.pem, switch-NAME.pem/.key for each
    switch, controller.pem/.key."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / CA_FILE

    def server(self, switch: str) -> ServerTls:
        base = self.folder / f"switch-{switch}"
        return ServerTls(str(self.ca), f"{base}.pem", f"{base}.key")

    def client(self) -> ClientTls:
        base = self.folder / CLIENT
        return ClientTls(str(self.ca), f"{base}.pem", f"{base}.key")


def network_tls(folder: Path) -> NetworkTls:
    """The certificates a network made in `folder`; InputError naming the first missing or
    unreachable file (the files themselves are read when a session opens)."""
    tls = NetworkTls(folder)
    client = tls.client()
    for path in (client.ca, client.cert, client.key):
        try:
            os.stat(path)
        except FileNotFoundError:
            raise InputError(f"{path}: no such certificate file: the network's TLS folder is "
                             "incomplete (was it started with --tls?)") from None
        except PermissionError:
            raise InputError(f"{path}: the network's certificates are its owner's: run as "
                             "root (or as the user who started it)") from None
    return tls


def make_network_tls(folder: Path, switches: Iterable[str]) -> NetworkTls:
    """A fresh CA, a server certificate per switch and the controller's client certificate in
    `folder` (made 0700; an earlier set there is replaced)."""
    names = list(switches)
    for name in names:
        if not _SAFE_NAME.match(name):
            raise InputError(f"switch {name!r}: a name that cannot be a file name; TLS needs "
                             "letters, digits, '.', '_' and '-'")
    _fresh_private_folder(folder)
    tls = NetworkTls(folder)
    ca_key = _new_key()
    ca_cert = _ca_certificate(ca_key)
    _write(tls.ca, _pem_cert(ca_cert))
    for name in names:
        key = _new_key()
        cert = _leaf(ca_key, ca_cert, key, f"innet switch {name}", server=True)
        server = tls.server(name)
        _write(Path(server.key), _pem_key(key))
        _write(Path(server.cert), _pem_cert(cert))
    key = _new_key()
    cert = _leaf(ca_key, ca_cert, key, "innet controller", server=False)
    client = tls.client()
    _write(Path(client.key), _pem_key(key))
    _write(Path(client.cert), _pem_cert(cert))
    return tls


def _fresh_private_folder(folder: Path) -> None:
    if folder.is_symlink():
        raise InputError(f"{folder}: is a symbolic link; the TLS folder must be a real folder")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(mode=0o700, parents=True)
    os.chmod(folder, 0o700)  # mkdir's mode passes through the umask


def _write(path: Path, data: bytes) -> None:
    """Owner-only from the first byte: created 0600, never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)


def _new_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    data: bytes = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    return data


def _pem_cert(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    data: bytes = cert.public_bytes(serialization.Encoding.PEM)
    return data


def _builder(subject: str, issuer: str, public_key: Any) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - SKEW)
            .not_valid_after(now + VALID))


CA_NAME = "innet network CA"
CLIENT_NAME = "innet-controller"  # RFC 5280 profiles want a SAN on client certificates too


def _ca_certificate(key: Any) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    usage = x509.KeyUsage(digital_signature=False, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          key_cert_sign=True, crl_sign=True, encipher_only=False,
                          decipher_only=False)
    return (_builder(CA_NAME, CA_NAME, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(usage, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))


def _leaf(ca_key: Any, ca_cert: Any, key: Any, subject: str, *, server: bool) -> Any:
    """A switch's server certificate (SAN 127.0.0.1 and localhost) or the controller's
    client certificate, signed by the CA."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    usage = x509.KeyUsage(digital_signature=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          key_cert_sign=False, crl_sign=False, encipher_only=False,
                          decipher_only=False)
    purpose = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (_builder(subject, CA_NAME, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(usage, critical=True)
               .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
                   ski), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    names: list[x509.GeneralName] = (
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        if server else [x509.DNSName(CLIENT_NAME)])
    builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())
