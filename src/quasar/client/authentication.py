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

:func:`authentication_from_plugin` builds one from what Pulsar's configuration files
and command lines carry: a plugin name (``authPluginClassName``, ``--auth-plugin``) and
its parameter string (``authParams``, ``--auth-params``). The plugin is a Java class
of ``org.apache.pulsar.client.impl.auth`` or the C++/Python client's short name:

* ``AuthenticationToken`` or ``token``: ``token:<jwt>``, ``file:///path/to/token``
  (read again on each use, so a rotated file is picked up), ``env:VARIABLE`` (read
  on each use), ``data:<jwt>``, or the bare JWT;
* ``AuthenticationBasic`` or ``basic``: JSON ``{"userId": "u", "password": "p"}``
  (Java's keys) or ``{"username": "u", "password": "p", "method": "basic"}`` (the
  C++ client's);
* ``AuthenticationTls`` or ``tls``: ``tlsCertFile:/p/cert.pem,tlsKeyFile:/p/key.pem``
  or the same keys as a JSON object.

Plugin names are matched case-insensitively, as the C++ client does.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

from quasar.client.exceptions import (
    ErrorGettingAuthenticationData,
    InvalidConfiguration,
)

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "authentication_from_plugin",
]

PLUGIN_PACKAGE = "org.apache.pulsar.client.impl.auth."


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


# Each accepted plugin name (lower case) -> the auth method it builds.
_PLUGIN_METHODS = {
    "token": "token",
    (PLUGIN_PACKAGE + "AuthenticationToken").lower(): "token",
    "basic": "basic",
    (PLUGIN_PACKAGE + "AuthenticationBasic").lower(): "basic",
    "tls": "tls",
    (PLUGIN_PACKAGE + "AuthenticationTls").lower(): "tls",
}

_TLS_KEYS = ("tlsCertFile", "tlsKeyFile")


def authentication_from_plugin(plugin: str, params: str) -> Authentication:
    """The credentials a Pulsar auth plugin name and its ``authParams`` string mean.

    See the module docstring for the accepted names and parameter formats. Error
    messages name what is wrong but never repeat a token or a password.

    Raises:
        InvalidConfiguration: ``plugin`` is not one of the supported plugins, or
            ``params`` is not in its format.
    """
    if not isinstance(plugin, str) or not isinstance(params, str):
        raise InvalidConfiguration("an auth plugin name and its params must be strings")
    method = _PLUGIN_METHODS.get(plugin.strip().lower())
    if method is None:
        raise InvalidConfiguration(
            f"unknown auth plugin {plugin!r}: supported are "
            f"{PLUGIN_PACKAGE}AuthenticationToken (token), "
            f"{PLUGIN_PACKAGE}AuthenticationBasic (basic) and "
            f"{PLUGIN_PACKAGE}AuthenticationTls (tls)"
        )
    if method == "token":
        return _token_from_params(params.strip())
    if method == "basic":
        return _basic_from_params(params)
    return _tls_from_params(params)


def _token_from_params(params: str) -> AuthenticationToken:
    """Pulsar's AuthenticationToken formats: ``token:``, ``data:``, ``file:`` and
    ``env:`` prefixes, else the whole string is the token."""
    if params.startswith("file:"):
        return AuthenticationToken(_token_file_reader(_file_url_path(params)))
    if params.startswith("env:"):
        variable = params[len("env:"):]
        if not variable:
            raise InvalidConfiguration("token auth params env: names no variable")
        return AuthenticationToken(_token_env_reader(variable))
    for prefix in ("token:", "data:"):
        if params.startswith(prefix):
            params = params[len(prefix):]
            break
    if not params:
        raise InvalidConfiguration("token auth params hold no token")
    if any(c.isspace() for c in params):
        # A JWT never contains white space: this is something else (a typo in a
        # prefix, a JSON object), and sending it would only be refused later.
        raise InvalidConfiguration(
            "token auth params must be token:<jwt>, file:///path, env:VARIABLE or a "
            "bare JWT; the value given contains white space"
        )
    return AuthenticationToken(params)


def _file_url_path(url: str) -> str:
    """The local path of a ``file:`` URL (``file:///p`` or ``file:/p``)."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost") or not parsed.path:
        raise InvalidConfiguration(
            "token auth params: a file: URL must name a local file "
            f"(file:///path/to/token), not one on host {parsed.netloc!r}"
        )
    return unquote(parsed.path)


def _token_file_reader(path: str) -> Callable[[], str]:
    def read() -> str:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ErrorGettingAuthenticationData(
                f"cannot read the token file {path}: {exc}"
            ) from exc

    return read


def _token_env_reader(variable: str) -> Callable[[], str]:
    def read() -> str:
        value = os.environ.get(variable)
        if value is None:
            raise ErrorGettingAuthenticationData(
                f"the token variable {variable} is not set"
            )
        return value.strip()

    return read


def _json_object(params: str, what: str) -> dict[str, object]:
    try:
        value = json.loads(params)
    except ValueError:
        raise InvalidConfiguration(f"{what} auth params are not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidConfiguration(f"{what} auth params must be a JSON object")
    return value


def _basic_from_params(params: str) -> AuthenticationBasic:
    """Java's JSON (``userId``, ``password``) or the C++ client's (``username``,
    ``password``, optional ``method``)."""
    fields = _json_object(params.strip(), "basic")
    unknown = sorted(set(fields) - {"userId", "username", "password", "method"})
    if unknown:
        raise InvalidConfiguration(
            f"basic auth params: unknown keys {unknown} "
            "(expected userId or username, password, and optionally method)"
        )
    if "userId" in fields and "username" in fields:
        raise InvalidConfiguration("basic auth params: give userId or username, not both")
    user = fields.get("userId", fields.get("username"))
    password = fields.get("password")
    method = fields.get("method", "basic")
    if not isinstance(user, str) or not user:
        raise InvalidConfiguration("basic auth params: userId must be a non-empty string")
    if not isinstance(password, str):
        raise InvalidConfiguration("basic auth params: password must be a string")
    if not isinstance(method, str) or not method:
        raise InvalidConfiguration("basic auth params: method must be a non-empty string")
    return AuthenticationBasic(user, password, method)


def _tls_from_params(params: str) -> AuthenticationTLS:
    """``tlsCertFile:<path>,tlsKeyFile:<path>`` (Pulsar's ``key:value`` list) or a
    JSON object with the same keys."""
    text = params.strip()
    fields: dict[str, object]
    if text.startswith("{"):
        fields = _json_object(text, "TLS")
    else:
        fields = {}
        for item in text.split(","):
            key, sep, value = item.partition(":")
            if not sep:
                raise InvalidConfiguration(
                    f"TLS auth params: {item.strip()!r} is not key:value "
                    "(expected tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem)"
                )
            fields[key.strip()] = value.strip()
    unknown = sorted(set(fields) - set(_TLS_KEYS))
    if unknown:
        raise InvalidConfiguration(
            f"TLS auth params: unknown keys {unknown} (expected tlsCertFile, tlsKeyFile)"
        )
    paths = [fields.get(key) for key in _TLS_KEYS]
    for key, path in zip(_TLS_KEYS, paths, strict=True):
        if not isinstance(path, str) or not path:
            raise InvalidConfiguration(f"TLS auth params: {key} is missing")
    cert, key_file = paths
    assert isinstance(cert, str) and isinstance(key_file, str)
    return AuthenticationTLS(cert, key_file)
