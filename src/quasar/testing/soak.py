"""A memory soak: publish many times the entry cache past stalled consumers, watch RSS.

One topic, two subscriptions whose consumers are connected but take nothing more:

* ``never``: an Exclusive consumer that never calls ``receive``. Its client fills its
  receiver queue once and then grants no more permits;
* ``limited``: a Shared consumer that receives and does not acknowledge, so it stops at
  ``maxUnackedMessagesPerConsumer`` and the broker stops dispatching to it.

A producer publishes ``SoakPlan.multiple`` times the entry cache
(``managedLedgerCacheSizeMB``) through that topic while the broker's resident memory is
sampled. Every byte published is stored on disk and held back from both consumers,
so a broker that kept the backlog (or anything per message beyond the ledger's offset
index) in memory would grow with the bytes published. ``SoakPlan.memory_bound_bytes``
derives, from the same settings the broker runs with, how much the broker may grow
after the warm-up; afterwards both consumers read everything, in order, while the
samples go on (catching up reads from disk, which must not fill memory either).

The test suite (``tests/reliability/test_memory_soak.py``) runs a small plan with both
clients; ``make soak`` runs a large one (``benchmarks/memory_soak.py``) and prints the
samples as ratios of the cache size.
"""

from __future__ import annotations

import json
import statistics
import struct
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from quasar.testing.process import BrokerProcess

__all__ = ["SoakPlan", "SoakReport", "run_soak"]

MiB = 1024 * 1024

# What a SEND frame costs beyond its payload (command, metadata, checksum), rounded up.
_FRAME_OVERHEAD_BYTES = 512
# What the broker keeps per unacknowledged message of a consumer (its position in the
# pending-ack map and the redelivery bookkeeping), rounded up generously.
_UNACKED_MESSAGE_BYTES = 1024
# The parsed metadata of one recent entry (``broker/entry_info.py`` keeps about one per
# KiB of entry cache, at least 4096): the object, its key and its slot in the cache.
_ENTRY_INFO_BYTES = 512
_ENTRY_INFOS_MIN = 4096
# The ledger's in-memory offset index is 8 bytes per entry; its array over-allocates
# as it grows, so twice that is counted.
_OFFSET_INDEX_BYTES_PER_ENTRY = 16
# The allocator's own slack: freed blocks glibc and pymalloc keep for reuse rather than
# return to the kernel, which RSS still counts.
_ALLOCATOR_SLACK_BYTES = 8 * MiB
# Each consumer's connection may hold this much queued for its client
# (``pulsarChannelWriteBufferHighWaterMark``, the broker's default).
_WRITE_BUFFER_BYTES = 64 * 1024
# How long an idle consumer is given to prove it receives nothing more.
_NOTHING_MORE_MS = 500
_RECEIVE_TIMEOUT_MS = 10_000
_SEQUENCE = struct.Struct(">Q")


@dataclass(frozen=True)
class SoakPlan:
    """The broker's bounds and the load; every size is in bytes unless named so."""

    cache_mb: int = 4
    multiple: int = 16  # bytes published, as a multiple of the entry cache
    message_bytes: int = 64 * 1024
    max_unacked_per_consumer: int = 100
    dispatcher_read_bytes: int = 1 * MiB
    pending_publishes: int = 16
    never_receiver_queue: int = 10
    samples: int = 40  # RSS samples after the warm-up

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb * MiB

    @property
    def messages(self) -> int:
        return self.cache_bytes * self.multiple // self.message_bytes

    @property
    def warm_up_messages(self) -> int:
        """Two caches' worth: the cache is full and every path has run."""
        return 2 * self.cache_bytes // self.message_bytes

    def broker_settings(self) -> dict[str, str]:
        return {
            "managedLedgerCacheSizeMB": str(self.cache_mb),
            "maxUnackedMessagesPerConsumer": str(self.max_unacked_per_consumer),
            "dispatcherMaxReadSizeBytes": str(self.dispatcher_read_bytes),
            "maxPendingPublishRequestsPerConnection": str(self.pending_publishes),
        }

    def memory_bound_bytes(self) -> int:
        """How much the broker may grow from the warm-up to the end: what its settings
        let it hold, plus the ledger index of the entries published and the allocator's
        slack. Nothing in it scales with the bytes published."""
        subscriptions = 2
        infos = max(_ENTRY_INFOS_MIN, self.cache_bytes // 1024)
        return (
            self.cache_bytes
            + self.pending_publishes * (self.message_bytes + _FRAME_OVERHEAD_BYTES)
            + subscriptions * (self.dispatcher_read_bytes + _WRITE_BUFFER_BYTES)
            + self.max_unacked_per_consumer * _UNACKED_MESSAGE_BYTES
            + infos * _ENTRY_INFO_BYTES
            + self.messages * _OFFSET_INDEX_BYTES_PER_ENTRY
            + _ALLOCATOR_SLACK_BYTES
        )


@dataclass
class SoakReport:
    plan: SoakPlan
    published_bytes: int = 0
    start_rss: int = 0  # before anything was published
    warm_rss: int = 0  # after the warm-up
    # After the warm-up, through the publishing and the drain.
    rss: list[int] = field(default_factory=list)
    published_rss: int = 0  # when the last message was stored
    publish_s: float = 0.0
    drain_s: float = 0.0
    limited_held: int = 0  # messages the unacking consumer had when it stalled

    @property
    def growth_bytes(self) -> int:
        """The largest growth over the warm-up sample."""
        return max(self.rss) - self.warm_rss

    def lines(self) -> list[str]:
        cache = self.plan.cache_bytes

        def ratio(n: float) -> str:
            return f"{n / MiB:.1f} MiB ({n / cache:.2f}x cache)"

        return [
            f"entry cache {self.plan.cache_mb} MiB; published {ratio(self.published_bytes)} "
            f"in {self.plan.messages} messages of {self.plan.message_bytes} B, "
            f"{self.publish_s:.1f} s; drained in {self.drain_s:.1f} s",
            f"broker RSS: start {ratio(self.start_rss)}, after warm-up {ratio(self.warm_rss)}",
            f"  after warm-up, {len(self.rss)} samples: median "
            f"{ratio(statistics.median(self.rss))}, max {ratio(max(self.rss))}",
            f"  all published {ratio(self.published_rss)}, all drained {ratio(self.rss[-1])}",
            f"  growth over warm-up {ratio(self.growth_bytes)}; "
            f"bound {ratio(self.plan.memory_bound_bytes())}",
        ]


def _subscription_stats(broker: BrokerProcess, topic: str, name: str) -> dict[str, Any]:
    path = "/admin/v2/" + topic.replace("://", "/") + "/stats"
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as r:
        stats: dict[str, Any] = json.loads(r.read())
    sub: dict[str, Any] = stats["subscriptions"][name]
    return sub


def _receive_in_order(
    consumer: Any,
    first: int,
    last: int,
    ack: bool = True,
    sample: Callable[[], None] | None = None,
    every: int = 0,
) -> list[Any]:
    """Receive sequence numbers ``first`` .. ``last - 1`` in order, acknowledging each
    as it arrives (``ack``), else returning them unacknowledged; ``sample()`` runs
    after every ``every`` messages."""
    received = []
    for expected in range(first, last):
        if sample is not None and expected % every == 0:
            sample()
        msg = consumer.receive(_RECEIVE_TIMEOUT_MS)
        got = _SEQUENCE.unpack_from(msg.data())[0]
        if got != expected:
            raise AssertionError(f"expected message {expected}, got {got}")
        if ack:
            consumer.acknowledge(msg)
        else:
            received.append(msg)
    return received


def _assert_nothing_more(consumer: Any, mod: ModuleType) -> None:
    try:
        msg = consumer.receive(_NOTHING_MORE_MS)
    except mod.Timeout:
        return
    raise AssertionError(f"a stalled consumer was given more: {msg.data()[:8]!r}")


def run_soak(broker: BrokerProcess, mod: ModuleType, topic: str, plan: SoakPlan) -> SoakReport:
    """Run ``plan`` against ``broker`` (started with ``plan.broker_settings()``) with the
    client module ``mod`` (``pulsar`` or ``quasar.client``).

    Raises:
        AssertionError: a publish failed, a stalled consumer was given more than its
            bounds allow, or the drain lost, duplicated or reordered a message.
    """
    report = SoakReport(plan, start_rss=broker.rss_bytes())
    client = mod.Client(broker.url, operation_timeout_seconds=30)
    try:
        never = client.subscribe(
            topic, "never", receiver_queue_size=plan.never_receiver_queue
        )
        limited = client.subscribe(
            topic, "limited", consumer_type=mod.ConsumerType.Shared
        )
        # Blocking when the client's queue is full keeps the producer at the broker's
        # pace (maxPendingPublishRequestsPerConnection) however seldom it flushes.
        producer = client.create_producer(
            topic, batching_enabled=False, block_if_queue_full=True
        )
        failures: list[object] = []

        def sent(result: Any, _msg_id: Any) -> None:
            # pulsar passes Result.Ok (0), quasar passes None on success.
            if result is not None and result != 0:
                failures.append(result)

        filler = b"\x00" * (plan.message_bytes - _SEQUENCE.size)
        every = max(1, (plan.messages - plan.warm_up_messages) // plan.samples)
        start = time.monotonic()
        for seq in range(plan.messages):
            producer.send_async(_SEQUENCE.pack(seq) + filler, sent)
            done = seq + 1
            if done == plan.warm_up_messages or (
                done > plan.warm_up_messages
                and ((done - plan.warm_up_messages) % every == 0 or done == plan.messages)
            ):
                producer.flush()  # the broker has stored everything sent so far
                if failures:
                    raise AssertionError(f"publishes failed: {failures[:3]}")
                if done == plan.warm_up_messages:
                    report.warm_rss = broker.rss_bytes()
                else:
                    report.rss.append(broker.rss_bytes())
        report.publish_s = time.monotonic() - start
        report.published_rss = report.rss[-1]
        report.published_bytes = plan.messages * plan.message_bytes

        # Both consumers are stalled at their bounds, with the whole topic behind them.
        for name in ("never", "limited"):
            backlog = int(_subscription_stats(broker, topic, name)["msgBacklog"])
            if backlog != plan.messages:
                raise AssertionError(f"{name}: backlog {backlog}, not {plan.messages}")
        held = _subscription_stats(broker, topic, "limited")
        report.limited_held = int(held["unackedMessages"])
        if report.limited_held != plan.max_unacked_per_consumer:
            raise AssertionError(f"limited consumer holds {report.limited_held} unacked")

        start = time.monotonic()
        # What the unacking consumer was given, and nothing more until it acknowledges.
        given = _receive_in_order(limited, 0, plan.max_unacked_per_consumer, ack=False)
        _assert_nothing_more(limited, mod)
        for msg in given:
            limited.acknowledge(msg)
        # Catching up reads from disk; the samples go on through it.
        def sample() -> None:
            report.rss.append(broker.rss_bytes())

        drain_every = max(1, plan.messages // plan.samples)
        _receive_in_order(
            limited, plan.max_unacked_per_consumer, plan.messages, True, sample, drain_every
        )
        _receive_in_order(never, 0, plan.messages, True, sample, drain_every)
        report.drain_s = time.monotonic() - start
        for consumer in (limited, never):
            _assert_nothing_more(consumer, mod)
            consumer.close()
        producer.close()
    finally:
        client.close()
    return report
