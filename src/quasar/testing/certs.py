"""Test certificates in the shape of Pulsar's: RSA 2048, signed by a test CA.

``make_test_certs(directory)`` writes, as PEM files:

* ``ca.cert.pem`` / ``ca.key.pem``: a self-signed CA;
* ``broker.cert.pem`` / ``broker.key.pem``: the broker's certificate, with the
  subject alternative names ``localhost`` and ``127.0.0.1`` (so hostname validation
  passes for both);
* ``<role>.cert.pem`` / ``<role>.key.pem``: a client certificate whose subject CN is
  the role name (Pulsar's TLS authentication takes the role from it).

Keys are unencrypted, certificates valid from a day ago for ten days.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TestCerts", "make_ca", "make_test_certs", "write_signed_cert"]

KEY_BITS = 2048
VALID_DAYS = 10


@dataclass(frozen=True)
class TestCerts:
    """Paths of the files ``make_test_certs`` wrote."""

    __test__ = False  # not a pytest test class, despite its name

    directory: Path
    ca_cert: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path
    client_role: str


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "quasar tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(
        now + datetime.timedelta(days=VALID_DAYS)
    )


def make_ca(directory: Path, name: str = "ca") -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    """A self-signed CA, written to ``<name>.cert.pem`` and ``<name>.key.pem``."""
    key = _key()
    subject = _name(f"quasar test CA {name}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                key_cert_sign=True, crl_sign=True, encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    )
    cert = _validity(builder).sign(key, hashes.SHA256())
    (directory / f"{name}.cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, directory / f"{name}.key.pem")
    return cert, key


def write_signed_cert(
    directory: Path,
    name: str,
    common_name: str,
    ca: tuple[x509.Certificate, rsa.RSAPrivateKey],
    *,
    server: bool,
    hostnames: Sequence[str] = ("localhost", "127.0.0.1"),
) -> tuple[Path, Path]:
    """A certificate for ``common_name`` signed by ``ca``; returns (cert, key) paths.

    A server certificate carries ``hostnames`` (names or IP addresses) as its
    subject alternative names.
    """
    ca_cert, ca_key = ca
    key = _key()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_alt_name(h) for h in hostnames]),
            critical=False,
        )
    cert = _validity(builder).sign(ca_key, hashes.SHA256())
    cert_path = directory / f"{name}.cert.pem"
    key_path = directory / f"{name}.key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return cert_path, key_path


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def make_test_certs(directory: Path, client_role: str = "client") -> TestCerts:
    """A CA, a broker certificate and a client certificate (CN = ``client_role``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca(directory)
    broker_cert, broker_key = write_signed_cert(
        directory, "broker", "localhost", ca, server=True
    )
    client_cert, client_key = write_signed_cert(
        directory, client_role, client_role, ca, server=False
    )
    return TestCerts(
        directory=directory,
        ca_cert=directory / "ca.cert.pem",
        ca_key=directory / "ca.key.pem",
        broker_cert=broker_cert,
        broker_key=broker_key,
        client_cert=client_cert,
        client_key=client_key,
        client_role=client_role,
    )
