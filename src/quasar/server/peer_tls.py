"""TLS of a cluster member's own connections to the other members.

With ``brokerClientTlsEnabled=true`` a member ends transactions on the others over
their ``pulsar+ssl://`` URLs and asks their transaction admin routes over ``https://``
(``cluster_transactions.py``, ``quasar.admin.txn_gather``); both use the one client
context built here from Pulsar's keys:

* ``brokerClientTrustCertsFilePath``: the CA certificates the other members'
  certificates must chain to (required: quasar does not fall back to the system's
  CAs for its own cluster);
* ``brokerClientCertificateFilePath`` / ``brokerClientKeyFilePath``: the certificate
  presented to members that require one (``tlsRequireTrustedClientCertOnConnect``);
* ``tlsHostnameVerificationEnabled``: also check that a member's certificate names
  the host of its URL (off by default, as in Pulsar);
* ``tlsAllowInsecureConnection``: accept any certificate, as Pulsar's broker client
  does with that key (``quasar broker`` logs a warning at start-up).

Without ``brokerClientTlsEnabled`` there is no context and members use the plaintext
URLs; a member never falls back from one to the other.
"""

from __future__ import annotations

import os
import ssl

from quasar.config import TlsConfig

from .tls import TlsConfigurationError

__all__ = ["broker_client_tls_context"]


def broker_client_tls_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """The client context for connections to other members; ``None`` when
    ``brokerClientTlsEnabled`` is false.

    Raises:
        TlsConfigurationError: naming the key whose value cannot be used (a missing
            trust file, a certificate without its key, a file that is not PEM).
    """
    if not tls.broker_client_tls_enabled:
        return None
    cert, key = tls.broker_client_certificate_file_path, tls.broker_client_key_file_path
    if bool(cert) != bool(key):
        raise TlsConfigurationError(
            "brokerClientCertificateFilePath and brokerClientKeyFilePath go together: "
            "a client certificate needs its private key"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if tls.tls_allow_insecure_connection:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = tls.tls_hostname_verification_enabled
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load_trust(ctx, tls.broker_client_trust_certs_file_path)
    if cert:
        for name, path in (
            ("brokerClientCertificateFilePath", cert), ("brokerClientKeyFilePath", key)
        ):
            if not os.access(path, os.R_OK):
                raise TlsConfigurationError(f"{name}={path}: the file cannot be read")
        try:
            ctx.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as e:
            raise TlsConfigurationError(
                f"brokerClientCertificateFilePath={cert} and brokerClientKeyFilePath="
                f"{key} are not a PEM certificate and its unencrypted private key: {e}"
            ) from None
    return ctx


def _load_trust(ctx: ssl.SSLContext, path: str) -> None:
    if not path:
        raise TlsConfigurationError(
            "brokerClientTlsEnabled=true needs brokerClientTrustCertsFilePath: the CA "
            "certificates (PEM) the other members' certificates are signed by"
        )
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigurationError(
            f"brokerClientTrustCertsFilePath={path}: not readable PEM CA certificates: {e}"
        ) from None
