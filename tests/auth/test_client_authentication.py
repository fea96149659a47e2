"""quasar's client credentials: what CONNECT, AUTH_RESPONSE and the admin API carry,
and the client options that are refused instead of ignored."""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator

import pytest

from quasar.client import (
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
    Client,
    aio,
)
from quasar.client.exceptions import (
    ErrorGettingAuthenticationData,
    InvalidConfiguration,
)
from quasar.protocol import pb

from ..fakes.broker import FakeBroker, command

T = pb.BaseCommand


def test_credentials_as_sent() -> None:
    basic = AuthenticationBasic("alice", "pw:x")
    assert (basic.auth_method_name, basic.auth_data()) == ("basic", b"alice:pw:x")
    assert basic.http_headers() == {
        "Authorization": "Basic " + base64.b64encode(b"alice:pw:x").decode()
    }
    token = AuthenticationToken("abc")
    assert (token.auth_method_name, token.auth_data()) == ("token", b"abc")
    assert token.http_headers() == {"Authorization": "Bearer abc"}
    tls = AuthenticationTLS("c.pem", "k.pem")
    assert (tls.auth_method_name, tls.auth_data(), tls.http_headers()) == ("tls", b"", {})
    with pytest.raises(InvalidConfiguration):
        AuthenticationBasic("a:b", "pw")
    with pytest.raises(InvalidConfiguration):
        AuthenticationToken(42)  # type: ignore[arg-type]


def test_a_failing_token_supplier_is_an_authentication_data_error() -> None:
    def broken() -> str:
        raise OSError("token file gone")

    with pytest.raises(ErrorGettingAuthenticationData):
        AuthenticationToken(broken).auth_data()
    with pytest.raises(ErrorGettingAuthenticationData):
        AuthenticationToken(lambda: None).auth_data()  # type: ignore[arg-type,return-value]


def test_options_are_refused_rather_than_ignored() -> None:
    url = "pulsar://127.0.0.1:6650"
    with pytest.raises(InvalidConfiguration, match="unknown client option"):
        aio.Client(url, no_such_option=1)
    with pytest.raises(InvalidConfiguration, match="pulsar\\+ssl"):
        aio.Client(url, use_tls=True)
    with pytest.raises(InvalidConfiguration):
        aio.Client(url, authentication="user:pw")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="TLS"):
        Client(url, tls_trust_certs_file_path="/ca.pem")
    with pytest.raises(InvalidConfiguration):
        Client(url, authentication=object())  # type: ignore[arg-type]
    # Options without effect in this client are accepted, as documented.
    aio.Client(url, io_threads=4, logger=None, stats_interval_in_seconds=1)
    Client(url, io_threads=4, authentication=AuthenticationBasic("a", "b")).close()


@pytest.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    await broker.start()
    yield broker
    await broker.stop()


async def test_connect_carries_credentials_and_a_challenge_gets_fresh_ones(
    fake: FakeBroker,
) -> None:
    tokens = (f"token-{n}" for n in itertools.count(1))
    client = aio.Client(
        fake.url, authentication=AuthenticationToken(lambda: next(tokens))
    )
    try:
        await client.get_topic_partitions("persistent://public/default/t")
        connect = fake.commands(T.CONNECT)[0].connect
        assert (connect.auth_method_name, connect.auth_data) == ("token", b"token-1")
        assert connect.feature_flags.supports_auth_refresh
        challenge = command(T.AUTH_CHALLENGE, "authChallenge", server_version="fake")
        challenge.authChallenge.challenge.auth_method_name = "token"
        challenge.authChallenge.challenge.auth_data = b"PulsarAuthRefresh"
        fake.connections[0].send(challenge)
        assert await fake.wait_until(lambda: bool(fake.commands(T.AUTH_RESPONSE)))
        response = fake.commands(T.AUTH_RESPONSE)[0].authResponse.response
        assert (response.auth_method_name, response.auth_data) == ("token", b"token-2")
    finally:
        await client.close()
