"""Authentication and authorization: who is on the other end of a connection or an
admin request, and what that role may do.

``provider`` defines what a provider is (``AuthenticationProvider``, the
``AuthenticationState`` it answers, the ``Peer`` it is given); ``basic``, ``tls`` and
``token`` implement Pulsar's three providers; ``service`` assembles the configured ones
(``AuthenticationService``), which the binary protocol's CONNECT handling and the admin
app's middleware call. ``authorization`` answers what a role may do
(``AuthorizationService``). Nothing here touches a socket.
"""

from __future__ import annotations

from .authorization import AuthorizationService
from .provider import (
    AuthenticationError,
    AuthenticationFailure,
    AuthenticationProvider,
    AuthenticationState,
    Peer,
)
from .service import (
    AUTH_DATA_BYTES_MAX,
    PROVIDER_CLASSES,
    AuthenticationConfigError,
    AuthenticationService,
)

__all__ = [
    "AUTH_DATA_BYTES_MAX",
    "PROVIDER_CLASSES",
    "AuthenticationConfigError",
    "AuthenticationError",
    "AuthenticationFailure",
    "AuthenticationProvider",
    "AuthenticationService",
    "AuthenticationState",
    "AuthorizationService",
    "Peer",
]
