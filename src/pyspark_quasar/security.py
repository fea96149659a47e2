"""The query's credentials and TLS settings as the client and the admin client take
them.

:class:`~pyspark_quasar.options.ClientSecurity` travels as plain strings; each
process that connects (the driver's planner and sink, every executor task) builds
its ``Authentication`` and TLS context here, from the same settings, for the binary
protocol and for the admin API alike. Nothing here holds a connection.
"""

from __future__ import annotations

import ssl
from typing import Any

from pyspark_quasar.options import (
    AUTH_PARAMS,
    AUTH_PLUGIN,
    TLS_CERTIFICATE,
    TLS_KEY,
    ClientSecurity,
    ConnectionOptions,
)
from quasar.client.authentication import (
    Authentication,
    AuthenticationTLS,
    authentication_from_plugin,
)
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.tls import ClientTlsOptions

__all__ = ["admin_ssl_context", "authentication", "check_security", "client_options"]


def authentication(security: ClientSecurity) -> Authentication | None:
    """The credentials of the query's clients (None: none configured).

    Raises:
        InvalidConfiguration: an unknown plugin, or params not in its format.
    """
    if security.auth_plugin is None:
        return None
    return authentication_from_plugin(security.auth_plugin, security.auth_params or "")


def _tls_options(
    security: ClientSecurity, auth: Authentication | None
) -> ClientTlsOptions:
    """The TLS options; with the TLS auth plugin its certificate is the client
    certificate (given once: here or in ``tlsCertificateFilePath``).

    Raises:
        InvalidConfiguration: the options contradict each other.
    """
    cert, key = security.tls_certificate_file_path, security.tls_key_file_path
    if isinstance(auth, AuthenticationTLS):
        files = (auth.certificate_path, auth.private_key_path)
        if (cert, key) != (None, None) and (cert, key) != files:
            raise InvalidConfiguration(
                f"{TLS_CERTIFICATE}/{TLS_KEY} differ from the TLS auth plugin's "
                "tlsCertFile/tlsKeyFile: give the client certificate once"
            )
        cert, key = files
    return ClientTlsOptions(
        trust_certs_file_path=security.tls_trust_certs_file_path,
        allow_insecure_connection=security.tls_allow_insecure_connection,
        validate_hostname=security.tls_hostname_verification_enable,
        certificate_file_path=cert,
        private_key_file_path=key,
    )


def client_options(conn: ConnectionOptions) -> dict[str, Any]:
    """Keyword arguments of ``quasar.client.Client`` / ``aio.Client`` for the query:
    the credentials, the TLS options (for a ``pulsar+ssl://`` URL) and the admin URL
    the client's own admin calls use.

    Raises:
        InvalidConfiguration: as :func:`authentication`, or contradicting TLS options.
    """
    security = conn.security
    auth = authentication(security)
    out: dict[str, Any] = {"authentication": auth, "admin_url": conn.admin_url}
    if conn.service_tls:
        tls = _tls_options(security, auth)
        out.update(
            tls_trust_certs_file_path=tls.trust_certs_file_path,
            tls_allow_insecure_connection=tls.allow_insecure_connection,
            tls_validate_hostname=tls.validate_hostname,
            tls_certificate_file_path=tls.certificate_file_path,
            tls_private_key_file_path=tls.private_key_file_path,
        )
    return out


def admin_ssl_context(conn: ConnectionOptions) -> ssl.SSLContext | None:
    """The TLS context of the admin calls (None for an ``http://`` admin URL).

    Raises:
        InvalidConfiguration: as :func:`client_options`, or a TLS file that cannot
            be used.
    """
    if not conn.admin_tls:
        return None
    return _tls_options(conn.security, authentication(conn.security)).context()


def check_security(conn: ConnectionOptions) -> None:
    """Check the credentials and TLS settings when a query is defined, so that a
    misconfiguration fails there and not in every task.

    Builds the credentials and the TLS context (reading the certificate files) as
    the tasks will; a ``file:`` token is read only when used.

    Raises:
        ValueError: naming the option that is wrong (never a token or password).
    """
    try:
        auth = authentication(conn.security)
    except InvalidConfiguration as exc:
        raise ValueError(f"options {AUTH_PLUGIN}/{AUTH_PARAMS}: {exc}") from None
    if isinstance(auth, AuthenticationTLS) and not conn.service_tls:
        raise ValueError(
            f"option {AUTH_PLUGIN}: the TLS auth plugin needs a pulsar+ssl:// "
            "service.url (the certificate is presented in the TLS handshake)"
        )
    try:
        tls = _tls_options(conn.security, auth)
        if conn.service_tls or conn.admin_tls:
            tls.context()
    except InvalidConfiguration as exc:
        raise ValueError(f"options pulsar.client.tls*: {exc}") from None
