"""Pulsar's token provider: a JWT in, its subject out.

The cryptography (key formats, signature and claim checks) lives in
``quasar.auth.tokens``; this module only adapts it to ``AuthenticationProvider``
through one injected function, ``ValidateToken``: it takes the compact JWT and
returns the role and the expiry, or raises ``AuthenticationError``. That keeps the
provider testable with a fake validator; ``validate_with_configured_key`` builds the
real one from the broker's token settings.
"""

from __future__ import annotations

from collections.abc import Callable

from quasar.config import ServiceConfiguration

from .provider import AuthenticationFailure, AuthenticationState, Peer
from .tokens import AuthenticatedToken, TokenValidator

__all__ = [
    "AUTH_METHOD_TOKEN",
    "TokenAuthenticationProvider",
    "ValidateToken",
    "validate_with_configured_key",
]

AUTH_METHOD_TOKEN = "token"
# HTTP and some clients prefix the token; on the binary protocol it comes bare, but a
# client library that adds the prefix there too is tolerated as Pulsar does.
_BEARER = "Bearer "


# Validates a compact JWT; raises AuthenticationError when it is not valid.
ValidateToken = Callable[[str], AuthenticatedToken]


def validate_with_configured_key(config: ServiceConfiguration) -> ValidateToken:
    """The broker's validator: ``tokenSecretKey`` or ``tokenPublicKey`` and the claim
    settings of ``config.token_authentication`` (``quasar.auth.tokens``).

    Raises:
        ValueError: no key configured, or a key that cannot be read.
    """
    return TokenValidator.from_config(config.token_authentication).validate


class TokenAuthenticationProvider:
    """``AuthenticationProvider`` for method ``token``."""

    def __init__(self, validate: ValidateToken) -> None:
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
        expiry_ms = result.expiry_time_ms
        return AuthenticationState(
            role=result.role,
            auth_method=AUTH_METHOD_TOKEN,
            expires_at_s=None if expiry_ms is None else expiry_ms / 1000,
        )
