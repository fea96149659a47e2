"""Credential refresh end to end: quasar's client (token supplier) against the
broker's connection on loopback, with a token provider over a fake validator whose
tokens expire at once. The broker challenges at its first check; the client answers
with the supplier's next token; a token for another role closes the connection."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from quasar.auth import AuthenticationError, AuthenticationService
from quasar.auth.token import TokenAuthenticationProvider
from quasar.auth.tokens import AuthenticatedToken
from quasar.client import AuthenticationToken, aio
from quasar.config import ServiceConfiguration
from quasar.server.connection import ServerConnection


async def test_expired_token_is_refreshed_then_a_role_change_closes() -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()

    def validate(token: str) -> AuthenticatedToken:
        seen.put_nowait(token)
        if token.startswith("svc-"):
            return AuthenticatedToken("svc", int(time.time() * 1000))
        if token == "intruder":
            return AuthenticatedToken("intruder", int(time.time() * 1000))
        raise AuthenticationError("bad token")

    auth = AuthenticationService([("Token", TokenAuthenticationProvider(validate))])
    config = ServiceConfiguration.load(
        env={}, overrides={"authenticationRefreshCheckSeconds": 1}
    )
    service = SimpleNamespace(config=config)
    connections: list[ServerConnection] = []

    def accept() -> ServerConnection:
        conn = ServerConnection(service, keep_alive_s=0, authentication=auth)  # type: ignore[arg-type]
        connections.append(conn)
        return conn

    server = await asyncio.get_running_loop().create_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    tokens = iter(["svc-1", "svc-2", "intruder"])
    client = aio.Client(
        f"pulsar://127.0.0.1:{port}",
        authentication=AuthenticationToken(lambda: next(tokens)),
    )
    try:
        conn = await client.pool.get(client.config.service_url)
        async with asyncio.timeout(10):
            assert await seen.get() == "svc-1"
            assert connections[0].principal == "svc"
            assert await seen.get() == "svc-2"  # the answer to the first challenge
            assert await seen.get() == "intruder"  # the answer to the second
            while not conn.is_closed:
                await asyncio.sleep(0.01)
        assert connections[0].closed
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
