"""Who gets a non-persistent entry, and what is dropped (pure logic, no broker)."""

from __future__ import annotations

import pytest

from quasar.broker.consumer import Consumer, WriteState
from quasar.broker.entry_info import EntryInfo
from quasar.broker.non_persistent_subscription import NonPersistentSubscription
from quasar.broker.subscription import (
    SUB_EXCLUSIVE,
    SUB_FAILOVER,
    SUB_KEY_SHARED,
    SUB_SHARED,
)
from quasar.errors import ConsumerBusy, NotAllowedError
from quasar.protocol import FrameDecoder, pb
from quasar.storage.api import Position


class Connection:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, frame: bytes) -> None:
        self.frames.append(frame)

    def close_consumer(self, consumer_id: int) -> None:
        pass

    remote_address = "127.0.0.1:1"
    client_version = "test"


def consumer(cid: int, sub_type: int, permits: int = 100, name: str = "") -> Consumer:
    c = Consumer(cid, name or f"c{cid}", "s", sub_type, Connection(), write_state=WriteState())
    c.add_permits(permits)
    return c


def info(n: int = 1, key: bytes | None = None) -> EntryInfo:
    return EntryInfo(n, n > 1, key, 1, 0, None, None, "p", 0)


def test_shared_takes_turns_and_skips_a_consumer_without_permits() -> None:
    sub = NonPersistentSubscription("s", SUB_SHARED, -1)
    a, b, c = consumer(1, SUB_SHARED), consumer(2, SUB_SHARED, permits=0), consumer(3, SUB_SHARED)
    for x in (a, b, c):
        sub.add_consumer(x)
    for _ in range(4):
        sub.offer(b"data", info())
    assert (a.msg_out, b.msg_out, c.msg_out) == (2, 0, 2)
    assert sub.msg_dropped == 0
    assert not a.pending, "non-persistent deliveries are not tracked for acks"


def test_everything_is_dropped_when_no_consumer_can_take_it() -> None:
    sub = NonPersistentSubscription("s", SUB_SHARED, -1)
    full = consumer(1, SUB_SHARED)
    full.write_state.writable = False  # its connection's write buffer is full
    sub.add_consumer(full)
    sub.add_consumer(consumer(2, SUB_SHARED, permits=0))
    sub.offer(b"batch", info(n=5))
    assert sub.msg_dropped == 5
    assert sub.stats()["msgDropCounter"] == 5


def test_exclusive_sends_to_its_consumer_until_permits_run_out() -> None:
    sub = NonPersistentSubscription("s", SUB_EXCLUSIVE, -1)
    only = consumer(1, SUB_EXCLUSIVE, permits=2)
    sub.add_consumer(only)
    with pytest.raises(ConsumerBusy):
        sub.add_consumer(consumer(2, SUB_EXCLUSIVE))
    with pytest.raises(ConsumerBusy):
        sub.add_consumer(consumer(3, SUB_SHARED))
    for _ in range(5):
        sub.offer(b"x", info())
    assert (only.msg_out, sub.msg_dropped) == (2, 3)


def test_failover_delivers_to_the_active_consumer_only() -> None:
    sub = NonPersistentSubscription("s", SUB_FAILOVER, -1)
    second, first = consumer(1, SUB_FAILOVER, name="b"), consumer(2, SUB_FAILOVER, name="a")
    sub.add_consumer(second)
    sub.add_consumer(first)
    sub.offer(b"x", info())
    assert (first.msg_out, second.msg_out) == (1, 0)
    assert sub.stats()["activeConsumerName"] == "a"
    first.permits = 0
    sub.offer(b"y", info())  # the active consumer cannot take it: dropped, not passed on
    assert (second.msg_out, sub.msg_dropped) == (0, 1)


def active_changes(c: Consumer) -> list[bool]:
    assert isinstance(c.connection, Connection)
    frames = FrameDecoder(1 << 20).feed(b"".join(c.connection.frames))
    return [
        f.command.active_consumer_change.is_active
        for f in frames
        if f.command.type == pb.BaseCommand.ACTIVE_CONSUMER_CHANGE
    ]


def test_failover_tells_consumers_which_one_is_active() -> None:
    sub = NonPersistentSubscription("s", SUB_FAILOVER, -1)
    b, a = consumer(1, SUB_FAILOVER, name="b"), consumer(2, SUB_FAILOVER, name="a")
    sub.add_consumer(b)
    sub.add_consumer(a)  # sorts first: becomes the active one
    assert active_changes(b) == [True, False]
    assert active_changes(a) == [True]
    sub.remove_consumer(a)
    assert active_changes(b) == [True, False, True]


def test_key_shared_keeps_a_key_on_one_consumer() -> None:
    sub = NonPersistentSubscription("s", SUB_KEY_SHARED, -1)
    consumers = [consumer(i, SUB_KEY_SHARED) for i in range(3)]
    for c in consumers:
        sub.add_consumer(c)
    for key in (b"k1", b"k2", b"k3", b"k4"):
        before = [c.msg_out for c in consumers]
        for _ in range(3):
            sub.offer(b"x", info(key=key))
        gained = [c.msg_out - b for c, b in zip(consumers, before, strict=True)]
        assert sorted(gained) == [0, 0, 3], key


def test_acks_are_ignored_and_stored_state_operations_refused() -> None:
    sub = NonPersistentSubscription("s", SUB_SHARED, -1)
    c = consumer(1, SUB_SHARED)
    sub.add_consumer(c)
    sub.offer(b"x", info())
    sub.ack_individual(c, [(Position(0, 0), None)])
    sub.ack_cumulative(c, Position(0, 0))
    sub.redeliver(c, None)
    assert c.msg_out == 1 and sub.backlog() == 0
    with pytest.raises(NotAllowedError, match="non-persistent"):
        sub.reset_cursor(Position(0, 0))


def test_a_departed_consumer_still_counts_in_the_totals() -> None:
    sub = NonPersistentSubscription("s", SUB_SHARED, -1)
    c = consumer(1, SUB_SHARED)
    sub.add_consumer(c)
    sub.offer(b"abc", info())
    sub.remove_consumer(c)
    assert sub.out_counters() == (1, 3)
    assert sub.consumer_count == 0
