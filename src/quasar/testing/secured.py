"""Broker settings for tests of a secured broker: token authentication with a secret
key, and optionally authorization, by Pulsar's keys alone."""

from __future__ import annotations

import base64

__all__ = ["TOKEN_PROVIDER", "token_settings"]

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"


def token_settings(
    secret: bytes, *, super_users: str | None = None, providers: str = TOKEN_PROVIDER
) -> dict[str, str]:
    """``broker.conf`` settings authenticating tokens signed with ``secret`` (HS256);
    with ``super_users`` (comma-separated roles), authorization is on too."""
    settings = {
        "authenticationEnabled": "true",
        "authenticationProviders": providers,
        "tokenSecretKey": "data:;base64," + base64.b64encode(secret).decode(),
    }
    if super_users is not None:
        settings |= {"authorizationEnabled": "true", "superUserRoles": super_users}
    return settings
