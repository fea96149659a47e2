"""Pulsar's basic provider: ``user:password`` checked against an htpasswd file.

The file (``basicAuthConf``) holds one ``user:hash`` entry per line. Hash formats, as
``htpasswd`` writes them:

* ``$apr1$...``: Apache's MD5 crypt (``htpasswd -m``), as Pulsar accepts;
* ``$2y$``/``$2b$``/``$2a$``: bcrypt (``htpasswd -B``). Pulsar's own provider reads
  these as DES crypt and so never matches them; quasar accepts them because bcrypt is
  ``htpasswd``'s recommended format and the reading cannot be mistaken;
* anything else: traditional DES crypt with a 2-character salt (``htpasswd -d``), as
  Pulsar does.

bcrypt is checked by the ``bcrypt`` package; apr1 and DES crypt by ``passlib``'s
maintained fork (``libpass``), whose implementations of both are pure Python, so no
deprecated ``crypt`` module is involved.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from pathlib import Path

import bcrypt
from passlib.hash import apr_md5_crypt, des_crypt

from .provider import AuthenticationFailure, AuthenticationState, Peer

__all__ = ["BasicAuthenticationProvider", "load_htpasswd", "read_basic_auth_conf", "verify_hash"]

log = logging.getLogger(__name__)

AUTH_METHOD_BASIC = "basic"
_BCRYPT_PREFIXES = ("$2y$", "$2b$", "$2a$")


class BasicAuthConfigError(ValueError):
    """``basicAuthConf`` is missing, unreadable or not an htpasswd file."""


def read_basic_auth_conf(value: str) -> bytes:
    """The htpasswd content named by ``basicAuthConf``: a ``data:`` URL, a ``file:``
    URL, a path, or the content in base64 (Pulsar's order).

    Raises:
        BasicAuthConfigError: empty, unreadable, or none of the above.
    """
    value = value.strip()
    if not value:
        raise BasicAuthConfigError(
            "basicAuthConf is empty: the basic provider needs an htpasswd file"
        )
    if value.startswith("data:"):
        _, sep, data = value.partition(",")
        if not sep:
            raise BasicAuthConfigError("basicAuthConf data: URL has no ','")
        if ";base64" in value[: value.index(",")]:
            return _b64(data)
        return data.encode()
    if value.startswith("file:"):
        path = Path(value[len("file://"):] if value.startswith("file://") else value[5:])
        return _read(path)
    path = Path(value)
    if path.is_file():
        return _read(path)
    return _b64(value)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BasicAuthConfigError(f"cannot read basicAuthConf {path}: {exc}") from exc


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BasicAuthConfigError(
            "basicAuthConf is neither an existing file nor base64 data"
        ) from exc


def load_htpasswd(content: bytes) -> dict[str, str]:
    """``{user: hash}`` from htpasswd lines; blank lines are skipped.

    Raises:
        BasicAuthConfigError: a line does not split into exactly ``user:hash``.
    """
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BasicAuthConfigError("basicAuthConf is not UTF-8 text") from exc
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        parts = line.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise BasicAuthConfigError(
                f"basicAuthConf line {number} is not 'user:hash'"
            )
        users[parts[0]] = parts[1]
    return users


def verify_hash(password: str, hashed: str) -> bool:
    """Whether ``password`` matches an htpasswd hash (formats in the module doc).
    A malformed hash never matches."""
    try:
        if hashed.startswith(_BCRYPT_PREFIXES):
            return bcrypt.checkpw(password.encode(), hashed.encode())
        if hashed.startswith("$apr1$"):
            return bool(apr_md5_crypt.verify(password, hashed))
        return bool(des_crypt.verify(password, hashed))
    except ValueError:
        return False


class BasicAuthenticationProvider:
    """``AuthenticationProvider`` for method ``basic``; the role is the user name."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)

    @classmethod
    def from_conf(cls, basic_auth_conf: str) -> BasicAuthenticationProvider:
        """Raises BasicAuthConfigError (see ``read_basic_auth_conf``)."""
        return cls(load_htpasswd(read_basic_auth_conf(basic_auth_conf)))

    @property
    def auth_method_name(self) -> str:
        return AUTH_METHOD_BASIC

    def authenticate(self, auth_data: bytes, peer: Peer) -> AuthenticationState:
        try:
            text = auth_data.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailure("MalformedCredentials", "malformed basic credentials") from None
        parts = text.split(":")
        if len(parts) != 2:
            raise AuthenticationFailure("MalformedCredentials", "malformed basic credentials")
        user, password = parts
        hashed = self._users.get(user)
        if hashed is None or not verify_hash(password, hashed):
            raise AuthenticationFailure("WrongCredentials", "unknown user or wrong password")
        return AuthenticationState(role=user, auth_method=AUTH_METHOD_BASIC)
