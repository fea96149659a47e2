"""The Key_Shared dispatcher keeps each key's order, on an in-memory ledger.

The dispatcher's collaborators are Protocols (``broker/api.py``); here they are small
stand-ins over a real in-memory managed ledger, so each scenario runs the real read
and replay paths without a broker process. Consumers record what they were given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from quasar.broker.compacted_read import CompactedReadState
from quasar.broker.consumer import Consumer
from quasar.broker.delayed_delivery import DelayedDelivery
from quasar.broker.entry_info import EntryInfoCache
from quasar.broker.key_shared import key_hash
from quasar.broker.key_shared_dispatcher import KeySharedDispatcher
from quasar.broker.read_limits import ReadLimits
from quasar.clock import ManualClock
from quasar.config import DelayedDeliveryConfig
from quasar.errors import ConsumerBusy
from quasar.protocol import make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore
from quasar.storage.api import InitialPosition, ManagedLedger, Position


class _Connection:
    remote_address = "test"
    client_version = "test"

    def write(self, frame: bytes) -> None:
        pass

    def close_consumer(self, consumer_id: int) -> None:
        raise AssertionError("not in these tests")


@dataclass(eq=False)
class _Recording(Consumer):
    got: list[Position] = field(default_factory=list)

    def deliver(self, deliveries: Any, track: bool = True) -> int:
        self.got.extend(d.entry.position for d in deliveries)
        return super().deliver(deliveries, track)


def _consumer(name: str, permits: int, **kw: Any) -> _Recording:
    c = _Recording(consumer_id=0, consumer_name=name, subscription_name="s",
                   sub_type=pb.CommandSubscribe.Key_Shared, connection=_Connection(), **kw)
    c.permits = permits
    return c


class _NoTxns:
    def is_pending(self, position: Position) -> bool:
        return False

    def pending_ack_set(self, position: Position) -> None:
        return None


class _Sub:
    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.txns = _NoTxns()
        self.compacted_read = CompactedReadState()

    def describe(self) -> str:
        return "t/s"

    def count_redelivery(self, position: Position) -> None:
        pass

    def redelivery_count(self, position: Position) -> int:
        return 0

    def check_end_of_topic(self) -> None:
        pass


class _Topic:
    def __init__(self, ledger: ManagedLedger, max_entries: int) -> None:
        self.ledger = ledger
        self.recent_infos = EntryInfoCache()
        self.read_limits = ReadLimits(max_entries, 5 * 1024 * 1024)
        self.terminated = False
        self.compaction = None
        self.delayed_delivery = DelayedDelivery(DelayedDeliveryConfig(), ManualClock())

    @property
    def max_read_position(self) -> Position:
        return self.ledger.last_confirmed_entry

    def is_aborted(self, info: Any, position: Position) -> bool:
        return False


@pytest.fixture
async def ledger() -> AsyncIterator[ManagedLedger]:
    factory = MemoryManagedLedgerFactory(MemoryMetadataStore())
    ml = await factory.open("t/ns/persistent/ks")
    yield ml
    await factory.close()


async def _publish(ml: ManagedLedger, keys: list[str]) -> list[Position]:
    out = []
    for i, key in enumerate(keys):
        md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1,
                                partition_key=key)
        out.append(await ml.add_entry(make_entry(md, b"x")))
    return out


async def _drain(d: KeySharedDispatcher) -> None:
    for _ in range(100):
        if not await d.dispatch_once():
            return
    raise AssertionError("dispatch kept moving")


def _key_of(d: KeySharedDispatcher, owner: Consumer) -> str:
    return next(k for n in range(1000) if d.selector.select(key_hash((k := f"k{n}").encode())) is owner)


async def test_an_entry_waiting_deep_in_the_replay_set_is_not_overtaken(
    ledger: ManagedLedger,
) -> None:
    cursor = ledger.open_cursor("s", InitialPosition.EARLIEST)
    # Reads of 4 entries: the replay set holds more entries than one read reaches.
    a, b = _consumer("a", permits=0), _consumer("b", permits=100)
    d = KeySharedDispatcher(_Sub(cursor), _Topic(ledger, max_entries=4), a, 10)
    d.add_consumer(a)
    d.add_consumer(b)
    key_a, key_b = _key_of(d, a), _key_of(d, b)
    positions = await _publish(ledger, [key_a] * 6 + [key_b] * 4)
    # The first seven were out and came back (say, their consumer left): their keys
    # are unknown until read again, and the key_b one sits behind six of a's, which
    # has no permits.
    cursor.seek(positions[7])
    d.add_replay(positions[:7], count_redelivery=False)
    await _drain(d)
    assert b.got == positions[6:]
    assert a.got == []
    a.add_permits(100)
    await _drain(d)
    assert a.got == positions[:6]


async def test_new_entries_of_a_key_wait_behind_its_replayed_ones(ledger: ManagedLedger) -> None:
    cursor = ledger.open_cursor("s", InitialPosition.EARLIEST)
    a = _consumer("a", permits=2)
    d = KeySharedDispatcher(_Sub(cursor), _Topic(ledger, max_entries=100), a, 10)
    d.add_consumer(a)
    positions = await _publish(ledger, ["k"] * 5)
    await _drain(d)
    assert a.got == positions[:2]  # then out of permits: the rest wait, in order
    a.add_permits(10)
    await _drain(d)
    assert a.got == positions


async def test_a_recently_joined_consumer_waits_for_mark_delete(ledger: ManagedLedger) -> None:
    cursor = ledger.open_cursor("s", InitialPosition.EARLIEST)
    first = _consumer("first", permits=100)
    d = KeySharedDispatcher(_Sub(cursor), _Topic(ledger, max_entries=100), first, 10)
    d.add_consumer(first)
    keys = [f"k{n}" for n in range(20)]
    before = await _publish(ledger, keys)
    await _drain(d)
    assert first.got == before  # all out, none acknowledged
    second = _consumer("second", permits=100)
    d.add_consumer(second)
    assert d.consumers_after_mark_delete() == {"second": str(cursor.read_position)}
    after = await _publish(ledger, keys)
    await _drain(d)
    moved = [p for p, k in zip(after, keys, strict=True)
             if d.selector.select(key_hash(k.encode())) is second]
    assert moved and second.got == []
    cursor.delete(before)
    for p in before:
        first.acked(p)
    await _drain(d)
    assert second.got == moved
    assert d.consumers_after_mark_delete() == {}


async def test_out_of_order_delivery_skips_the_recently_joined_rule(
    ledger: ManagedLedger,
) -> None:
    cursor = ledger.open_cursor("s", InitialPosition.EARLIEST)
    first = _consumer("first", permits=100, allow_out_of_order_delivery=True)
    d = KeySharedDispatcher(_Sub(cursor), _Topic(ledger, max_entries=100), first, 10)
    d.add_consumer(first)
    await _publish(ledger, [f"k{n}" for n in range(20)])
    await _drain(d)
    second = _consumer("second", permits=100, allow_out_of_order_delivery=True)
    d.add_consumer(second)
    assert d.consumers_after_mark_delete() == {}
    with pytest.raises(ConsumerBusy, match="allows out of order delivery"):
        d.add_consumer(_consumer("third", permits=1))
    with pytest.raises(ConsumerBusy, match="key_shared mode of 'AUTO_SPLIT'"):
        d.add_consumer(_consumer("fourth", permits=1, key_shared_mode=pb.STICKY,
                                 key_shared_ranges=((0, 10),),
                                 allow_out_of_order_delivery=True))
    assert [c.consumer_name for c in d.consumers] == ["first", "second"]



async def test_entries_of_a_leaving_consumer_go_to_a_recently_joined_one_at_once(
    ledger: ManagedLedger,
) -> None:
    cursor = ledger.open_cursor("s", InitialPosition.EARLIEST)
    first = _consumer("first", permits=100)
    d = KeySharedDispatcher(_Sub(cursor), _Topic(ledger, max_entries=3), first, 10)
    d.add_consumer(first)
    keys = [f"k{n}" for n in range(10)]
    before = await _publish(ledger, keys)
    await _drain(d)
    second = _consumer("second", permits=100)
    d.add_consumer(second)  # recently joined: waits for mark-delete past `before`
    after = await _publish(ledger, keys)
    await _drain(d)
    d.remove_consumer(first)
    # What "first" held was read before "second" joined: it goes out now, in order;
    # the newer entries still wait for those to be acknowledged.
    await _drain(d)
    assert second.got == before
    cursor.delete(before)
    for p in before:
        second.acked(p)
    await _drain(d)
    assert second.got == before + after
