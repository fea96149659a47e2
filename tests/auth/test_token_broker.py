"""Token authentication against a real broker process configured with Pulsar's keys
alone (``authenticationProviders``, ``tokenSecretKey``), driven by the official
``pulsar-client`` and by quasar's client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.client import AuthenticationToken, Client
from quasar.errors import AuthenticationError
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

SECRET = create_secret_key()
OTHER_SECRET = create_secret_key()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("token-broker")
    settings = token_settings(SECRET)
    proc = BrokerProcess(tmp / "data", settings=settings).start()
    yield proc
    proc.stop()


def topic() -> str:
    return f"persistent://public/default/token-{uuid.uuid4().hex[:12]}"


def test_official_client_with_a_valid_token(broker: BrokerProcess) -> None:
    name = topic()
    token = create_token("app", SECRET)
    client = pulsar.Client(broker.url, authentication=pulsar.AuthenticationToken(token))
    try:
        consumer = client.subscribe(name, "s")
        client.create_producer(name).send(b"hello")
        assert consumer.receive(10_000).data() == b"hello"
    finally:
        client.close()


@pytest.mark.parametrize(
    "token",
    [
        create_token("app", OTHER_SECRET),  # signed with another key
        create_token("app", SECRET, expiry_time_s=int(time.time()) - 60),  # expired
        "not-a-jwt",
    ],
    ids=["wrong-key", "expired", "malformed"],
)
def test_bad_tokens_are_refused(broker: BrokerProcess, token: str) -> None:
    official = pulsar.Client(
        broker.url,
        authentication=pulsar.AuthenticationToken(token),
        operation_timeout_seconds=2,
    )
    try:
        # The C++ client keeps retrying a refused connection until its operation
        # timeout, so it reports either AuthenticationError or Timeout.
        with pytest.raises((pulsar.AuthenticationError, pulsar.Timeout)):
            official.create_producer(topic())
    finally:
        official.close()
    ours = Client(
        broker.url, authentication=AuthenticationToken(token), operation_timeout_seconds=5
    )
    try:
        with pytest.raises(AuthenticationError):
            ours.create_producer(topic())
    finally:
        ours.close()


def test_quasar_client_with_a_token_supplier(broker: BrokerProcess) -> None:
    calls: list[int] = []

    def supply() -> str:
        calls.append(1)
        return create_token("app", SECRET)

    client = Client(broker.url, authentication=AuthenticationToken(supply))
    try:
        client.create_producer(topic()).send(b"x")
    finally:
        client.close()
    assert calls
