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
  with ``brokerClientAuthenticationPlugin=...AuthenticationTls`` the plugin's
  ``tlsCertFile`` / ``tlsKeyFile`` are presented instead, as in Pulsar, and name the
  member's role;
* ``tlsHostnameVerificationEnabled``: also check that a member's certificate names
  the host of its URL (off by default, as in Pulsar);
* ``tlsAllowInsecureConnection``: accept any certificate, as Pulsar's broker client
  does with that key (``quasar broker`` logs a warning at start-up);
* ``brokerClientTlsProtocols`` / ``brokerClientTlsCiphers``: the TLS versions and
  cipher suites a member offers the others, as ``tlsProtocols`` / ``tlsCiphers``
  restrict the listeners (empty: the TLS library's defaults).

Without ``brokerClientTlsEnabled`` there is no context and members use the plaintext
URLs; a member never falls back from one to the other.
"""

from __future__ import annotations

import json
import ssl

from quasar.config import AuthenticationConfig, TlsConfig

from .tls import (
    TlsConfigurationError,
    load_key_pair,
    load_trust_file,
    restrict_protocols_and_ciphers,
)

__all__ = ["TLS_PLUGINS", "broker_client_tls_context", "tls_plugin_files"]


TLS_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationTls", "tls")
_TLS_PARAMS = ("tlsCertFile", "tlsKeyFile")


def tls_plugin_files(params: str) -> tuple[str, str]:
    """The (certificate, key) files of Pulsar's TLS plugin parameters:
    ``tlsCertFile:/p/cert.pem,tlsKeyFile:/p/key.pem`` or the same keys as JSON.

    Raises:
        TlsConfigurationError: the parameters are not in that form.
    """
    params = params.strip()
    values: dict[str, str] = {}
    if params.startswith("{"):
        try:
            parsed = json.loads(params)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            values = {k: v for k, v in parsed.items() if isinstance(v, str)}
    else:
        for part in params.split(","):
            name, sep, value = part.partition(":")
            if sep:
                values[name.strip()] = value.strip()
    if not all(values.get(name) for name in _TLS_PARAMS):
        raise TlsConfigurationError(
            "brokerClientAuthenticationParameters of the TLS plugin must be "
            "tlsCertFile:<path>,tlsKeyFile:<path> (or the same keys as JSON)"
        )
    return values["tlsCertFile"], values["tlsKeyFile"]


def broker_client_tls_context(
    tls: TlsConfig, authentication: AuthenticationConfig | None = None
) -> ssl.SSLContext | None:
    """The client context for connections to other members; ``None`` when
    ``brokerClientTlsEnabled`` is false.

    Raises:
        TlsConfigurationError: naming the key whose value cannot be used (a missing
            trust file, a certificate without its key, a file that is not PEM,
            protocols that cannot be used together, no known cipher suite), or
            the TLS authentication plugin without ``brokerClientTlsEnabled``.
    """
    plugin_files = None
    if authentication is not None and (
        authentication.broker_client_authentication_plugin.strip() in TLS_PLUGINS
    ):
        plugin_files = tls_plugin_files(authentication.broker_client_authentication_parameters)
        if not tls.broker_client_tls_enabled:
            raise TlsConfigurationError(
                "brokerClientAuthenticationPlugin=AuthenticationTls needs "
                "brokerClientTlsEnabled=true: its certificate is presented in the TLS "
                "handshake with the other members"
            )
    if not tls.broker_client_tls_enabled:
        return None
    cert, key = tls.broker_client_certificate_file_path, tls.broker_client_key_file_path
    cert_keys = ("brokerClientCertificateFilePath", "brokerClientKeyFilePath")
    if plugin_files is not None:
        (cert, key), cert_keys = plugin_files, ("tlsCertFile", "tlsKeyFile")
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
        load_key_pair(ctx, (cert_keys[0], cert), (cert_keys[1], key))
    restrict_protocols_and_ciphers(
        ctx,
        ("brokerClientTlsProtocols", tls.broker_client_tls_protocols),
        ("brokerClientTlsCiphers", tls.broker_client_tls_ciphers),
    )
    return ctx


def _load_trust(ctx: ssl.SSLContext, path: str) -> None:
    if not path:
        raise TlsConfigurationError(
            "brokerClientTlsEnabled=true needs brokerClientTrustCertsFilePath: the CA "
            "certificates (PEM) the other members' certificates are signed by"
        )
    load_trust_file(ctx, "brokerClientTrustCertsFilePath", path)
