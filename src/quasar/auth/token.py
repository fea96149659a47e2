"""Pulsar's token provider: a JWT in, its subject out.

The cryptography (key formats, signature and claim checks) lives in
``quasar.auth.tokens``; this module only adapts it to ``AuthenticationProvider``
through one injected function, ``TokenValidator``: it takes the compact JWT and
returns the role and the expiry, or raises ``AuthenticationError``. That keeps the
provider testable with a fake validator, and the broker's start-up is where the real
one is built from the configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .provider import AuthenticationFailure, AuthenticationState, Peer

__all__ = ["AUTH_METHOD_TOKEN", "TokenAuthenticationProvider", "ValidatedToken"]

AUTH_METHOD_TOKEN = "token"
# HTTP and some clients prefix the token; on the binary protocol it comes bare, but a
# client library that adds the prefix there too is tolerated as Pulsar does.
_BEARER = "Bearer "


@dataclass(frozen=True)
class ValidatedToken:
    """What a valid token grants: its role and its ``exp`` (None: no expiry)."""

    role: str
    expires_at_s: float | None = None


# Validates a compact JWT; raises AuthenticationError when it is not valid.
TokenValidator = Callable[[str], ValidatedToken]


class TokenAuthenticationProvider:
    """``AuthenticationProvider`` for method ``token``."""

    def __init__(self, validate: TokenValidator) -> None:
        self._validate = validate

    @property
    def auth_method_name(self) -> str:
        return AUTH_METHOD_TOKEN

    def authenticate(self, auth_data: bytes, peer: Peer) -> AuthenticationState:
        try:
            token = auth_data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise AuthenticationFailure("MalformedToken", "malformed token") from None
        if token.startswith(_BEARER):
            token = token[len(_BEARER):].strip()
        if not token:
            raise AuthenticationFailure("BlankToken", "blank token")
        result = self._validate(token)
        return AuthenticationState(
            role=result.role,
            auth_method=AUTH_METHOD_TOKEN,
            expires_at_s=result.expires_at_s,
        )
