"""CONNECT authentication and credential refresh of one connection, over a fake
connection and a virtual wall clock (Pulsar's rules: the reference's section 1.3-1.4)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

import pytest

from quasar.auth import AuthenticationError, AuthenticationService
from quasar.auth.token import TokenAuthenticationProvider
from quasar.auth.tokens import AuthenticatedToken
from quasar.errors import ProtocolError, ServerError
from quasar.protocol import pb
from quasar.server.authentication import (
    AUTH_REFRESH_CHALLENGE,
    ConnectionAuthentication,
)

T = pb.BaseCommand

# token -> (role, exp)
TOKENS = {"t1": ("svc", 100.0), "t2": ("svc", 200.0), "other": ("intruder", 300.0)}


def validate(token: str) -> AuthenticatedToken:
    if token not in TOKENS:
        raise AuthenticationError("bad token")
    role, exp = TOKENS[token]
    return AuthenticatedToken(role, int(exp * 1000))


class FakeConnection:
    def __init__(self) -> None:
        self.principal: str | None = None
        self.sent: list[pb.BaseCommand] = []
        self.aborted = False
        self.tasks: list[asyncio.Task[None]] = []

    @property
    def closed(self) -> bool:
        return self.aborted

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    async def settle(self) -> None:
        """Wait for what AUTH_RESPONSE started."""
        await asyncio.gather(*self.tasks)

    @property
    def remote_address(self) -> str:
        return "10.0.0.1:4242"

    @property
    def peer_certificate(self) -> Mapping[str, Any] | None:
        return None

    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.sent.append(cmd)

    def abort(self) -> None:
        self.aborted = True


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock) -> tuple[FakeConnection, ConnectionAuthentication]:
    service = AuthenticationService([("Token", TokenAuthenticationProvider(validate))])
    conn = FakeConnection()
    return conn, ConnectionAuthentication(conn, service, "quasar-test", 60.0, clock)


def connect(token: bytes, method: str = "token", refresh: bool = True) -> pb.CommandConnect:
    cmd = T(type=T.CONNECT)
    c = cmd.connect
    c.client_version = "test"
    c.protocol_version = 20
    c.auth_method_name = method
    c.auth_data = token
    c.feature_flags.supports_auth_refresh = refresh
    return c


def auth_response(token: bytes | None, method: str = "token") -> pb.BaseCommand:
    cmd = T(type=T.AUTH_RESPONSE)
    cmd.authResponse.client_version = "test"
    if token is not None:
        cmd.authResponse.response.auth_method_name = method
        cmd.authResponse.response.auth_data = token
    return cmd


def assert_refused(conn: FakeConnection) -> None:
    assert conn.aborted
    error = conn.sent[-1]
    assert error.type == T.ERROR
    assert error.error.error == ServerError.AuthenticationError
    assert error.error.request_id == (1 << 64) - 1


async def test_connect_sets_the_principal() -> None:
    conn, auth = make(Clock())
    assert await auth.on_connect(connect(b"t1"))
    assert conn.principal == "svc" and not conn.sent
    auth.stop()


@pytest.mark.parametrize(
    ("token", "method"), [(b"nope", "token"), (b"t1", "basic"), (b"", "none"), (b"\xff", "token")]
)
async def test_refused_connect_gets_authentication_error_and_closes(
    token: bytes, method: str
) -> None:
    conn, auth = make(Clock())
    assert not await auth.on_connect(connect(token, method))
    assert conn.principal is None
    assert_refused(conn)


async def test_expired_credentials_are_challenged_and_refreshed() -> None:
    clock = Clock()
    conn, auth = make(clock)
    assert await auth.on_connect(connect(b"t1"))
    clock.now = 50.0
    auth.check_expiry()
    assert not conn.sent  # not expired yet
    clock.now = 100.0
    auth.check_expiry()
    challenge = conn.sent[-1]
    assert challenge.type == T.AUTH_CHALLENGE
    assert challenge.authChallenge.challenge.auth_method_name == "token"
    assert challenge.authChallenge.challenge.auth_data == AUTH_REFRESH_CHALLENGE
    assert auth.challenge_pending
    auth.on_auth_response(auth_response(b"t2"), None)
    await conn.settle()
    assert not auth.challenge_pending and not conn.aborted
    assert auth.state is not None and auth.state.expires_at_s == 200.0
    assert conn.sent[-1].type == T.AUTH_CHALLENGE  # no second CONNECTED
    auth.stop()


async def test_unanswered_challenge_closes() -> None:
    clock = Clock()
    conn, auth = make(clock)
    await auth.on_connect(connect(b"t1"))
    clock.now = 150.0
    auth.check_expiry()
    assert auth.challenge_pending and not conn.aborted
    auth.check_expiry()
    assert conn.aborted


async def test_expiry_without_refresh_support_closes() -> None:
    clock = Clock()
    conn, auth = make(clock)
    await auth.on_connect(connect(b"t1", refresh=False))
    clock.now = 150.0
    auth.check_expiry()
    assert conn.aborted and not conn.sent


@pytest.mark.parametrize("token", [b"other", b"nope", None])
async def test_bad_refresh_closes(token: bytes | None) -> None:
    clock = Clock()
    conn, auth = make(clock)
    await auth.on_connect(connect(b"t1"))
    clock.now = 150.0
    auth.check_expiry()
    auth.on_auth_response(auth_response(token), None)
    await conn.settle()
    assert_refused(conn)


async def test_an_auth_response_without_a_challenge_is_a_protocol_error() -> None:
    clock = Clock()
    conn, auth = make(clock)
    await auth.on_connect(connect(b"t1"))
    with pytest.raises(ProtocolError):
        auth.on_auth_response(auth_response(b"t2"), None)
    clock.now = 150.0
    auth.check_expiry()
    auth.on_auth_response(auth_response(b"t2"), None)
    with pytest.raises(ProtocolError):  # one answer per challenge
        auth.on_auth_response(auth_response(b"t2"), None)
    await conn.settle()
    assert not conn.aborted
    auth.stop()
