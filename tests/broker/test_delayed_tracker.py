"""The delayed-delivery index and hold on a virtual clock, and the settings that refuse
what quasar does not implement."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.broker.delayed_delivery import INDEX_FULL_METRIC, DelayedDelivery
from quasar.broker.delayed_tracker import (
    INDEX_BYTES_PER_MESSAGE,
    DelayedDeliveryTracker,
)
from quasar.broker.entry_info import entry_info
from quasar.clock import ManualClock
from quasar.config import DelayedDeliveryConfig, ServiceConfiguration
from quasar.protocol import make_entry, pb
from quasar.storage.api import Entry, Position

T0 = 1_700_000_000_000


def tracker(
    tick: int = 1000, strict: bool = True, lookahead: int = 0, max_messages: int = 100
) -> DelayedDeliveryTracker:
    return DelayedDeliveryTracker(tick, strict, lookahead, max_messages)


def P(n: int) -> Position:
    return Position(1, n)


def test_strict_positions_come_out_when_due_in_position_order() -> None:
    t = tracker()
    t.add(P(3), T0 + 500)
    t.add(P(1), T0 + 2000)
    t.add(P(2), T0 + 500)
    assert len(t) == 3 and t.index_size_bytes == 3 * INDEX_BYTES_PER_MESSAGE
    assert t.pop_due(T0 + 499, 10) == []
    assert t.pop_due(T0 + 500, 10) == [P(2), P(3)]
    assert not t.has_due(T0 + 1999)
    assert t.pop_due(T0 + 2000, 10) == [P(1)]
    assert len(t) == 0


def test_is_delayed_follows_strictness_and_tick() -> None:
    strict, lenient = tracker(strict=True), tracker(strict=False)
    # No deliver_at_time (0) or one in the past: at once.
    for t in (strict, lenient):
        assert not t.is_delayed(0, T0)
        assert not t.is_delayed(T0 - 1, T0)
    assert strict.is_delayed(T0 + 1, T0)
    # Not strict: anything within one tick counts as due.
    assert not lenient.is_delayed(T0 + 1000, T0)
    assert lenient.is_delayed(T0 + 1001, T0)


def test_pop_due_takes_at_most_max() -> None:
    t = tracker()
    for n in range(5):
        t.add(P(n), T0 + 10)
    assert t.pop_due(T0 + 10, 2) == [P(0), P(1)]
    assert len(t) == 3


def test_adding_an_indexed_position_again_keeps_one_entry() -> None:
    t = tracker()
    t.add(P(1), T0 + 10)
    t.add(P(1), T0 + 10)
    assert len(t) == 1
    assert t.pop_due(T0 + 10, 10) == [P(1)]
    assert t.pop_due(T0 + 10, 10) == []


def test_discard_and_discard_up_to() -> None:
    t = tracker()
    for n in range(6):
        t.add(P(n), T0 + 10 + n)
    t.discard(P(4))
    t.discard_up_to(P(2))
    assert len(t) == 2 and P(4) not in t and P(5) in t
    assert t.pop_due(T0 + 100, 10) == [P(3), P(5)]


def test_stale_heap_entries_are_compacted() -> None:
    t = tracker(max_messages=1000)
    for n in range(100):
        t.add(P(n), T0 + n)
    for n in range(1, 100):
        t.discard(P(n))
    assert len(t._heap) <= 2 * len(t) + 1
    assert t.pop_due(T0 + 1000, 10) == [P(0)]


def test_clear_forgets_everything() -> None:
    t = tracker()
    t.add(P(1), T0 + 10)
    t.clear()
    assert len(t) == 0 and t.next_timer_ms() is None


def test_full_and_pause_at_the_bound() -> None:
    t = tracker(max_messages=2)
    t.add(P(1), T0 + 10)
    assert not t.full and not t.should_pause_reading(T0)
    t.add(P(2), T0 + 10)
    assert t.full and t.should_pause_reading(T0)
    with pytest.raises(AssertionError):
        t.add(P(3), T0 + 10)


def test_fixed_delay_lookahead_pauses_reading_until_one_is_due() -> None:
    t = tracker(lookahead=3)
    for n in range(3):
        t.add(P(n), T0 + 100 * (n + 1))  # in time order: one fixed delay
    assert t.should_pause_reading(T0)
    # Once the first is due, reading goes on (the due one is sent first).
    assert not t.should_pause_reading(T0 + 100)


def test_out_of_order_delays_disable_the_lookahead_pause() -> None:
    t = tracker(tick=10, lookahead=3)
    t.add(P(0), T0 + 5000)
    t.add(P(1), T0 + 100)  # earlier by more than a tick: not a fixed delay
    t.add(P(2), T0 + 6000)
    assert not t.should_pause_reading(T0)
    # An empty index starts detecting afresh.
    t.pop_due(T0 + 10_000, 10)
    for n in range(3, 6):
        t.add(P(n), T0 + 20_000 + n)
    assert t.should_pause_reading(T0 + 10_000)


def test_lookahead_zero_never_pauses_below_the_bound() -> None:
    t = tracker(lookahead=0, max_messages=10)
    for n in range(9):
        t.add(P(n), T0 + 100 + n)
    assert not t.should_pause_reading(T0)


def test_timer_fires_at_the_first_time_but_at_most_once_per_tick() -> None:
    t = tracker(tick=1000, strict=True)
    assert t.next_timer_ms() is None
    t.add(P(1), T0 + 200)
    t.add(P(2), T0 + 300)
    assert t.next_timer_ms() == T0 + 200
    t.on_timer(T0 + 200)
    t.pop_due(T0 + 200, 10)
    # The next one is due 100 ms later, but the timer waits out its tick.
    assert t.next_timer_ms() == T0 + 1200


def test_lenient_timer_fires_one_tick_before_the_time() -> None:
    t = tracker(tick=1000, strict=False)
    t.add(P(1), T0 + 5000)
    assert t.next_timer_ms() == T0 + 4000
    assert t.pop_due(T0 + 3999, 10) == []
    assert t.pop_due(T0 + 4000, 10) == [P(1)]


# -- the hold a dispatcher uses ---------------------------------------------------------


def item(n: int, deliver_at: int = 0, batch: int | None = None) -> tuple[Entry, object]:
    md = pb.MessageMetadata(producer_name="p", sequence_id=n, publish_time=T0)
    if deliver_at:
        md.deliver_at_time = deliver_at
    if batch is not None:
        md.num_messages_in_batch = batch
    data = make_entry(md, b"x" * (8 * (batch or 1)))
    return Entry(P(n), data), entry_info(data)


def policy(clock: ManualClock, registry: CollectorRegistry | None = None,
           **settings: object) -> DelayedDelivery:
    values: dict[str, object] = {"is_delayed_delivery_deliver_at_time_strict": True}
    values.update(settings)
    return DelayedDelivery(DelayedDeliveryConfig(**values), clock, registry)  # type: ignore[arg-type]


async def test_hold_keeps_back_what_is_not_due_and_wakes_when_it_is() -> None:
    clock = ManualClock(T0)
    woke = asyncio.Event()
    hold = policy(clock).new_hold(woke.set)
    now = clock.wall_ms()
    batch = [item(0), item(1, now + 50), item(2), item(3, now - 5)]
    send, rest = hold.hold_back(batch)  # type: ignore[arg-type]
    assert [e.position for e, _ in send] == [P(0), P(2), P(3)] and rest == []
    assert len(hold) == 1
    assert hold.take_due(10) == []
    # The timer runs on the loop's time; the index on the injected wall clock.
    clock.advance(50)
    await asyncio.wait_for(woke.wait(), 5)
    assert hold.take_due(10) == [P(1)]
    assert len(hold) == 0
    hold.close()


async def test_a_batch_is_held_back_whole_by_its_outer_metadata() -> None:
    clock = ManualClock(T0)
    hold = policy(clock).new_hold(lambda: None)
    send, _ = hold.hold_back([item(0, T0 + 1000, batch=3)])  # type: ignore[list-item]
    assert send == [] and len(hold) == 1
    hold.close()


async def test_hold_at_its_bound_returns_the_rest_and_counts() -> None:
    clock = ManualClock(T0)
    registry = CollectorRegistry()
    hold = policy(
        clock, registry, delayed_delivery_max_indexed_messages_per_subscription=2
    ).new_hold(lambda: None)
    batch = [item(0, T0 + 10), item(1), item(2, T0 + 10), item(3, T0 + 10), item(4)]
    send, rest = hold.hold_back(batch)  # type: ignore[arg-type]
    assert [e.position for e, _ in send] == [P(1)]
    assert [e.position for e, _ in rest] == [P(3), P(4)]
    assert hold.should_pause_reading()
    assert registry.get_sample_value(INDEX_FULL_METRIC + "_total") == 1
    hold.close()


async def test_disabled_delivers_everything_at_once() -> None:
    clock = ManualClock(T0)
    hold = policy(clock, delayed_delivery_enabled=False).new_hold(lambda: None)
    send, rest = hold.hold_back([item(0, T0 + 10_000)])  # type: ignore[list-item]
    assert len(send) == 1 and rest == [] and len(hold) == 0


# -- settings -------------------------------------------------------------------------


def test_the_bucket_tracker_is_refused() -> None:
    with pytest.raises(ValueError, match="delayedDeliveryTrackerFactoryClassName"):
        ServiceConfiguration.load(env={}, overrides={
            "delayedDeliveryTrackerFactoryClassName":
                "org.apache.pulsar.broker.delayed.BucketDelayedDeliveryTrackerFactory",
        })


def test_a_maximum_delivery_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="delayedDeliveryMaxDelayInMillis"):
        ServiceConfiguration.load(env={}, overrides={
            "delayedDeliveryMaxDelayInMillis": 60_000,
        })


def test_the_tick_must_be_positive() -> None:
    with pytest.raises(ValueError, match="delayedDeliveryTickTimeMillis"):
        ServiceConfiguration.load(env={}, overrides={"delayedDeliveryTickTimeMillis": 0})
