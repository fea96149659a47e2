"""Pattern (regex) subscriptions with both clients: the topics that match when the
consumer subscribes, none that do not, and a matching topic created later, found by
the client's periodic GET_TOPICS_OF_NAMESPACE.

The official client's ``pulsar.Client.subscribe`` drops ``pattern_auto_discovery_period``
(pulsar-client 3.13 never passes it to its C++ core, which then re-lists every 60 s),
so the test builds that consumer through the core's own configuration with a period of
one second; everything else is the same consumer ``subscribe`` makes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from quasar.testing.process import BrokerProcess

from .conftest import make_client

NS = "persistent://public/default/"


class _PatternConsumer:
    """A pattern consumer of either client, with the one discovery period."""

    def __init__(self, mod: Any, client: Any, pattern: str) -> None:
        self.mod = mod
        if mod.__name__ == "pulsar":
            import _pulsar

            conf = _pulsar.ConsumerConfiguration()
            conf.pattern_auto_discovery_period(1)
            conf.subscription_initial_position(mod.InitialPosition.Earliest)
            self._consumer = client._client.subscribe_pattern(pattern, "rx", conf)
        else:
            self._consumer = client.subscribe(
                re.compile(pattern),
                "rx",
                pattern_auto_discovery_period=1,
                initial_position=mod.InitialPosition.Earliest,
            )

    def receive(self, timeout_ms: int) -> bytes:
        msg = self._consumer.receive(timeout_ms)
        self._consumer.acknowledge(msg)
        return bytes(msg.data())

    def close(self) -> None:
        self._consumer.close()


@pytest.fixture
def names() -> Iterator[tuple[str, str]]:
    """The prefix of matching topics and one topic that does not match."""
    tag = uuid.uuid4().hex[:10]
    yield f"{NS}rx-{tag}-", f"{NS}rx-{tag}"  # the second lacks the trailing '-'


def test_pattern_subscription_follows_matching_topics(
    pulsar_mod: Any, broker: BrokerProcess, names: tuple[str, str]
) -> None:
    prefix, other = names
    client = make_client(pulsar_mod, broker.url)
    try:
        first = client.create_producer(prefix + "a")
        outsider = client.create_producer(other)
        consumer = _PatternConsumer(pulsar_mod, client, re.escape(prefix) + ".*")
        first.send(b"a1")
        outsider.send(b"not for the pattern")
        assert consumer.receive(10_000) == b"a1"
        # A matching topic created after the subscription is found by the next
        # listing (one second later) and read from its start.
        late = client.create_producer(prefix + "b")
        late.send(b"b1")
        assert consumer.receive(10_000) == b"b1"
        first.send(b"a2")
        assert consumer.receive(10_000) == b"a2"
        # Nothing of the topic that does not match ever arrives.
        with pytest.raises(pulsar_mod.Timeout):
            consumer.receive(1_500)
        consumer.close()
    finally:
        client.close()
