"""Client credentials, with the official ``pulsar`` package's class names.

An ``Authentication`` gives what CONNECT and AUTH_RESPONSE carry (``auth_method_name``
and ``auth_data``) and the ``Authorization`` header the admin API takes:

=====================  ================  ======================  =========================
class                  auth_method_name  auth_data               HTTP header
=====================  ================  ======================  =========================
AuthenticationToken    ``token``         the JWT, bare           ``Bearer <jwt>``
AuthenticationBasic    ``basic``         ``user:password``       ``Basic base64(...)``
AuthenticationTLS      ``tls``           empty                   none (client certificate)
=====================  ================  ======================  =========================

A token may be a callable supplier: it is called again for every CONNECT and every
refresh challenge, so a rotated token is picked up, as the C++ client re-reads its
token source.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from quasar.client.exceptions import (
    ErrorGettingAuthenticationData,
    InvalidConfiguration,
)

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
]


class Authentication:
    """Credentials for one auth method (subclasses below)."""

    auth_method_name: str = "none"

    def auth_data(self) -> bytes:
        """The credentials as CONNECT carries them.

        Raises:
            ErrorGettingAuthenticationData: they cannot be produced now.
        """
        return b""

    def http_headers(self) -> dict[str, str]:
        """The headers the admin API authenticates (empty: none)."""
        return {}


class AuthenticationToken(Authentication):
    """A Pulsar JWT: a string, or a callable returning the current token."""

    auth_method_name = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise InvalidConfiguration("token must be a string or a callable returning one")
        self._token = token

    def token(self) -> str:
        """The current token (the supplier is called each time).

        Raises:
            ErrorGettingAuthenticationData: the supplier failed or returned no string.
        """
        if isinstance(self._token, str):
            return self._token
        try:
            value = self._token()
        except Exception as exc:
            raise ErrorGettingAuthenticationData(f"token supplier failed: {exc}") from exc
        if not isinstance(value, str):
            raise ErrorGettingAuthenticationData(
                f"token supplier returned {type(value).__name__}, not str"
            )
        return value

    def auth_data(self) -> bytes:
        return self.token().strip().encode()

    def http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token().strip()}"}


class AuthenticationBasic(Authentication):
    """User name and password (``method`` overrides the auth method name, as in the
    C++ client)."""

    def __init__(self, username: str, password: str, method: str = "basic") -> None:
        if not isinstance(username, str) or not isinstance(password, str):
            raise InvalidConfiguration("username and password must be strings")
        if ":" in username:
            raise InvalidConfiguration("a basic-auth username cannot contain ':'")
        self._credentials = f"{username}:{password}"
        self.auth_method_name = method

    def auth_data(self) -> bytes:
        return self._credentials.encode()

    def http_headers(self) -> dict[str, str]:
        encoded = base64.b64encode(self._credentials.encode()).decode()
        return {"Authorization": f"Basic {encoded}"}


class AuthenticationTLS(Authentication):
    """A client certificate and its private key (PEM files): the broker takes the
    role from the certificate's common name during the TLS handshake."""

    auth_method_name = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self.certificate_path = certificate_path
        self.private_key_path = private_key_path
