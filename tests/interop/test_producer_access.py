"""Producer names and access modes through a real broker."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

from .conftest import Admin, topic_path

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
    # Pulsar answers a second exclusive producer ProducerFenced, a shared one
    # ProducerBusy.
    with pytest.raises(pulsar_mod.ProducerFenced):
        client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    with pytest.raises(pulsar_mod.ProducerBusy):
        client.create_producer(topic)  # Shared while an exclusive producer holds it
    first.close()
    client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive")).send(b"ok")


def test_shared_producers_block_exclusive(client: Any, pulsar_mod: Any, topic: str) -> None:
    client.create_producer(topic)
    with pytest.raises(pulsar_mod.ProducerFenced):
        client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))


def test_wait_for_exclusive_gets_access_when_holder_leaves(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    holder = client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    acquired = threading.Event()
    box: dict[str, Any] = {}

    def wait() -> None:
        box["p"] = client.create_producer(topic, access_mode=_mode(pulsar_mod, "WaitForExclusive"))
        acquired.set()

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    # The waiter is queued by the broker (PRODUCER_SUCCESS with producer_ready=false)
    # until the holder leaves; closing the holder is the event that must release it.
    _until_waiting(admin, topic)
    assert not acquired.is_set()
    holder.send(b"from-holder")
    holder.close()
    assert acquired.wait(20), "WaitForExclusive producer never got access"
    box["p"].send(b"from-waiter")
    t.join(5)
    reader = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    got = [reader.read_next(10_000).data() for _ in range(2)]
    assert got == [b"from-holder", b"from-waiter"]


def test_exclusive_with_fencing_takes_over(client: Any, pulsar_mod: Any, topic: str) -> None:
    old = client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    old.send(b"before")
    fencer = client.create_producer(topic, access_mode=_mode(pulsar_mod, "ExclusiveWithFencing"))
    fencer.send(b"fenced-in")
    # The broker closed the old producer; it comes back with its old topic epoch,
    # meets the new holder and is fenced: its sends fail from then on.
    with pytest.raises(pulsar_mod.ProducerFenced):
        old.send(b"after")
    fencer.send(b"still-in")
    reader = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    got = [reader.read_next(10_000).data() for _ in range(3)]
    assert got == [b"before", b"fenced-in", b"still-in"]


def test_fencing_fails_a_waiting_producer(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    holder = client.create_producer(topic, access_mode=_mode(pulsar_mod, "Exclusive"))
    failed = threading.Event()
    box: dict[str, Any] = {}

    def wait() -> None:
        try:
            client.create_producer(topic, access_mode=_mode(pulsar_mod, "WaitForExclusive"))
        except Exception as e:  # the assertion below names what was expected
            box["error"] = e
        failed.set()

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    _until_waiting(admin, topic)
    holder.send(b"x")
    client.create_producer(topic, access_mode=_mode(pulsar_mod, "ExclusiveWithFencing"))
    assert failed.wait(20), "the waiting producer was not failed"
    assert isinstance(box.get("error"), pulsar_mod.ProducerFenced), box
    t.join(5)


def _until_waiting(admin: Admin, topic: str) -> None:
    """Wait until the broker has queued a WaitForExclusive producer on ``topic``."""
    deadline = time.monotonic() + 20
    while admin.ok("GET", topic_path(topic) + "/stats")["waitingPublishers"] < 1:
        assert time.monotonic() < deadline, "the producer was never queued"
        time.sleep(0.02)


# -- on the wire (one run: no client library in between) -------------------------------
def _producer(raw: Raw, topic: str, pid: int, rid: int, mode: int,
              epoch: int | None = None) -> pb.BaseCommand:
    cmd = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id, p.producer_access_mode = topic, pid, rid, mode
    if epoch is not None:
        p.topic_epoch = epoch
    raw.send(cmd)
    return raw.recv()


def _close(raw: Raw, pid: int, rid: int) -> None:
    cmd = pb.BaseCommand(type=pb.BaseCommand.CLOSE_PRODUCER)
    cmd.close_producer.producer_id, cmd.close_producer.request_id = pid, rid
    raw.send(cmd)
    assert raw.recv_type(pb.BaseCommand.SUCCESS).success.request_id == rid


@pytest.mark.usefixtures("close_raw")
def test_wire_epochs_queueing_and_a_waiter_closed_while_queued(
    broker: BrokerProcess, topic: str
) -> None:
    holder, waiter, other = (Raw(broker.port) for _ in range(3))
    for raw in (holder, waiter, other):
        raw.connect()
    first = _producer(holder, topic, 1, 1, pb.Exclusive)
    assert first.producer_success.topic_epoch == 0
    queued = _producer(waiter, topic, 1, 1, pb.WaitForExclusive)
    assert queued.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert not queued.producer_success.producer_ready
    busy = _producer(other, topic, 1, 1, pb.Exclusive)
    assert busy.error.error == pb.ProducerFenced
    # The waiter gives up; when the holder leaves, nobody holds or waits any more.
    _close(waiter, 1, 2)
    _close(holder, 1, 2)
    second = _producer(other, topic, 2, 2, pb.Exclusive)
    assert second.producer_success.topic_epoch == 1
    _close(other, 2, 3)
    # The first holder comes back with its epoch: the topic moved on, it is fenced.
    stale = _producer(holder, topic, 1, 3, pb.Exclusive, epoch=0)
    assert stale.error.error == pb.ProducerFenced
    assert "Current epoch: 1, Producer epoch: 0" in stale.error.message
    shared = _producer(other, topic, 3, 4, pb.Shared)
    assert shared.type == pb.BaseCommand.PRODUCER_SUCCESS, shared
    assert shared.producer_success.topic_epoch == 1
