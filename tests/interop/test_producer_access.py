"""Producer names and access modes through a real broker."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytestmark = pytest.mark.interop


def _mode(mod: Any, name: str) -> Any:
    return getattr(mod.ProducerAccessMode, name)


def test_generated_names_are_unique(client: Any, topic: str) -> None:
    names = {client.create_producer(topic).producer_name() for _ in range(3)}
    assert len(names) == 3


def test_user_name_cannot_be_used_twice(client: Any, pulsar_mod: Any, topic: str) -> None:
    client.create_producer(topic, producer_name="only-one")
    with pytest.raises(pulsar_mod.ProducerBusy):
        client.create_producer(topic, producer_name="only-one")


def test_exclusive_access(client: Any, pulsar_mod: Any, topic: str) -> None:
    first = client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    with pytest.raises(pulsar_mod.ProducerBusy):
        client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    with pytest.raises(pulsar_mod.ProducerBusy):
        client.create_producer(topic)  # Shared while an exclusive producer holds it
    first.close()
    client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive")).send(b"ok")


def test_shared_producers_block_exclusive(client: Any, pulsar_mod: Any, topic: str) -> None:
    client.create_producer(topic)
    with pytest.raises(pulsar_mod.ProducerBusy):
        client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))


def test_wait_for_exclusive_gets_access_when_holder_leaves(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    holder = client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    acquired = threading.Event()
    box: dict[str, Any] = {}

    def wait() -> None:
        box["p"] = client.create_producer(topic, access_mode=_mode(pulsar_mod, "WaitForExclusive"))
        acquired.set()

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    # The waiter is queued by the broker until the holder leaves; closing the holder is
    # the event that must release it.
    holder.send(b"from-holder")
    holder.close()
    assert acquired.wait(20), "WaitForExclusive producer never got access"
    box["p"].send(b"from-waiter")
    t.join(5)
    reader = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    got = [reader.read_next(10_000).data() for _ in range(2)]
    assert got == [b"from-holder", b"from-waiter"]


def test_exclusive_with_fencing_takes_over(client: Any, pulsar_mod: Any, topic: str) -> None:
    client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    fencer = client.create_producer(topic, access_mode=_mode(pulsar_mod, "ExclusiveWithFencing"))
    fencer.send(b"fenced-in")
