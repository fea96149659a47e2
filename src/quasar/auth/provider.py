"""What an authentication provider is: credentials in, a role out.

A provider serves one *auth method* (Pulsar's ``auth_method_name``: ``basic``,
``token``, ``tls``). ``authenticate`` checks one set of credentials and answers an
``AuthenticationState``: the role, and when the credentials stop being valid, so that
the broker can ask a connection for fresh ones (AUTH_CHALLENGE) before then.

Providers see only bytes and a ``Peer``: they never import the server, the admin app
or a socket, so they are tested without a network.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from quasar.errors import AuthenticationError, BrokerError

__all__ = [
    "AuthenticationError",
    "AuthenticationFailure",
    "AuthenticationProvider",
    "AuthenticationState",
    "Peer",
]


# AuthenticationError is built from the error table of quasar.errors, so mypy sees a
# variable rather than a class; at run time it is an ordinary class.
class AuthenticationFailure(AuthenticationError):  # type: ignore[misc,valid-type]
    """An ``AuthenticationError`` with a fixed ``reason`` code for the failure metric
    (a small set of values, unlike the message, which may name a user or a time)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def failure_reason(exc: BrokerError) -> str:
    """The metric's ``reason`` label of a failure."""
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, str) else "InvalidCredentials"


@dataclass(frozen=True)
class Peer:
    """Who sent the credentials: the remote address and, on TLS, the client
    certificate as ``ssl`` decodes it (``SSLObject.getpeercert()``)."""

    remote_address: str
    certificate: Mapping[str, Any] | None = field(default=None)


@dataclass(frozen=True)
class AuthenticationState:
    """The outcome of one successful authentication."""

    role: str
    # The auth method that produced the role (``none`` for the anonymous role).
    auth_method: str
    # Wall-clock seconds since the epoch after which the credentials are no longer
    # valid (a token's ``exp``); None: they never expire (basic, TLS).
    expires_at_s: float | None = None

    def is_expired(self, now_s: float) -> bool:
        return self.expires_at_s is not None and now_s >= self.expires_at_s


class AuthenticationProvider(Protocol):
    """One auth method. Implementations: ``basic``, ``tls``, ``token`` modules."""

    @property
    def auth_method_name(self) -> str:
        """The method name clients send (``basic``, ``token``, ``tls``)."""
        ...

    def authenticate(self, auth_data: bytes, peer: Peer) -> AuthenticationState:
        """Check the credentials.

        Raises:
            AuthenticationError: the credentials are missing, malformed or wrong; the
                message is short and safe to send to the client.
        """
        ...
