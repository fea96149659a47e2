"""``quasar admin``'s connection flags: pulsar-admin's global options for the admin
URL, credentials and TLS.

::

    --admin-url URL                       http://host:8080 or https://host:8443
    --auth-plugin NAME --auth-params STR  e.g. org.apache.pulsar.client.impl.auth.AuthenticationToken
                                          and token:<jwt> | file:///path/to/token
    --tls-trust-cert-path PEM             the CA an https:// admin URL must chain to
    --tls-allow-insecure                  accept any server certificate (tests only)
    --tls-enable-hostname-verification    also check the certificate names the host

Only the flags count: unlike pulsar-admin, nothing is read from ``client.conf``. The
plugin names and parameter formats are :func:`authentication_from_plugin`'s; a TLS
client certificate comes from the TLS plugin (``tlsCertFile:...,tlsKeyFile:...``).
"""

from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from quasar.client.admin import DEFAULT_ADMIN_URL
from quasar.client.authentication import (
    Authentication,
    AuthenticationTLS,
    authentication_from_plugin,
)
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.tls import ClientTlsOptions

__all__ = ["AdminConnection", "add_connection_arguments", "admin_connection"]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the connection flags on ``quasar admin``."""
    parser.add_argument(
        "--admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"the broker's admin URL (default {DEFAULT_ADMIN_URL})",
    )
    parser.add_argument(
        "--auth-plugin",
        metavar="NAME",
        help="authentication plugin: org.apache.pulsar.client.impl.auth."
        "AuthenticationToken, AuthenticationBasic or AuthenticationTls "
        "(or token, basic, tls)",
    )
    parser.add_argument(
        "--auth-params",
        metavar="PARAMS",
        help="the plugin's parameters, e.g. token:<jwt>, file:///path/to/token, "
        '{"userId":"u","password":"p"}, tlsCertFile:/c.pem,tlsKeyFile:/k.pem',
    )
    parser.add_argument(
        "--tls-trust-cert-path",
        metavar="PEM",
        help="CA certificates an https:// admin URL must chain to (default: the "
        "system's)",
    )
    parser.add_argument(
        "--tls-allow-insecure",
        action="store_true",
        help="accept any server certificate, unverified (for tests only)",
    )
    parser.add_argument(
        "--tls-enable-hostname-verification",
        action="store_true",
        help="also check that the server certificate names the admin URL's host",
    )


@dataclass(frozen=True)
class AdminConnection:
    """What every request of one ``quasar admin`` run is sent with."""

    admin_url: str
    authentication: Authentication | None
    ssl_context: ssl.SSLContext | None


def admin_connection(args: argparse.Namespace) -> AdminConnection:
    """The admin URL, credentials and TLS context the flags ask for.

    Raises:
        InvalidConfiguration: an unknown plugin, params not in its format, TLS flags
            with an ``http://`` admin URL, or a certificate file that cannot be used
            (the message never repeats a token or password).
    """
    url: str = args.admin_url
    plugin: str | None = args.auth_plugin
    params: str | None = args.auth_params
    if params is not None and plugin is None:
        raise InvalidConfiguration("--auth-params needs --auth-plugin")
    auth = None
    if plugin is not None:
        try:
            auth = authentication_from_plugin(plugin, params or "")
        except InvalidConfiguration as exc:
            raise InvalidConfiguration(f"--auth-plugin/--auth-params: {exc}") from None
    tls_flags = _tls_flags(args)
    https = urlparse(url).scheme == "https"
    if not https:
        if tls_flags:
            raise InvalidConfiguration(
                f"{', '.join(tls_flags)} given, but --admin-url {url} is not https://"
            )
        if isinstance(auth, AuthenticationTLS):
            raise InvalidConfiguration(
                f"the TLS auth plugin needs an https:// --admin-url, got {url}: the "
                "certificate is presented in the TLS handshake"
            )
        return AdminConnection(url, auth, None)
    cert = key = None
    if isinstance(auth, AuthenticationTLS):
        cert, key = auth.certificate_path, auth.private_key_path
    options = ClientTlsOptions(
        trust_certs_file_path=args.tls_trust_cert_path,
        allow_insecure_connection=args.tls_allow_insecure,
        validate_hostname=args.tls_enable_hostname_verification,
        certificate_file_path=cert,
        private_key_file_path=key,
    )
    return AdminConnection(url, auth, options.context())


def _tls_flags(args: Any) -> list[str]:
    flags = []
    if args.tls_trust_cert_path is not None:
        flags.append("--tls-trust-cert-path")
    if args.tls_allow_insecure:
        flags.append("--tls-allow-insecure")
    if args.tls_enable_hostname_verification:
        flags.append("--tls-enable-hostname-verification")
    return flags
