"""The periodic stats update: counters into rates, storage buckets into intervals.

Pulsar refreshes its topic stats every ``statsUpdateFrequencyInSecs`` (60 s by
default): rates are the counters' change over that period, and the storage
latency and entry-size buckets hold what that period saw. ``StatsUpdater`` does the
same for every loaded topic, in one pass on the event loop; the topic stats JSON and
the Prometheus collector (``metrics_topics.py``) read the results, so neither does
any arithmetic over time and both report the same numbers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from quasar.clock import Clock

from .topic import PersistentTopic

__all__ = ["StatsUpdater", "refresh_topic_stats"]

log = logging.getLogger(__name__)


def refresh_topic_stats(topic: PersistentTopic, elapsed_s: float) -> None:
    """Update the rates of ``topic``, its producers, subscriptions and consumers over
    the last ``elapsed_s`` seconds, and end its storage buckets' interval."""
    topic.rate_in.update(topic.msg_in, topic.bytes_in, elapsed_s)
    for producer in topic.producers.values():
        producer.rate_in.update(producer.msg_in, producer.bytes_in, elapsed_s)
    msg_rate_out = byte_rate_out = 0.0
    for sub in topic.subscriptions.values():
        for consumer in sub.dispatcher.consumers if sub.dispatcher else ():
            consumer.rate_out.update(consumer.msg_out, consumer.bytes_out, elapsed_s)
            consumer.rate_redeliver.update(consumer.msg_redelivered, 0, elapsed_s)
        msgs, size, redelivered = sub.out_counters()
        sub.rate_out.update(msgs, size, elapsed_s)
        sub.rate_redeliver.update(redelivered, 0, elapsed_s)
        sub.rate_expired.update(sub.total_msg_expired, 0, elapsed_s)
        msg_rate_out += sub.rate_out.msg_rate
        byte_rate_out += sub.rate_out.byte_rate
    # The topic's outbound rate is its subscriptions' sum, as in Pulsar.
    topic.rate_out.msg_rate = msg_rate_out
    topic.rate_out.byte_rate = byte_rate_out
    ledger_stats = topic.ledger.stats
    topic.storage_write.update(ledger_stats.entries_added, ledger_stats.bytes_added, elapsed_s)
    topic.storage_read.update(ledger_stats.entries_read, ledger_stats.bytes_read, elapsed_s)
    ledger_stats.refresh()


class StatsUpdater:
    """Runs ``refresh_topic_stats`` over every loaded topic once per period."""

    def __init__(
        self,
        topics: Callable[[], Iterable[PersistentTopic]],
        period_s: float,
        clock: Clock,
        also_refresh: Callable[[float], None] | None = None,
    ) -> None:
        """``topics``: the loaded topics at the time of the call; ``also_refresh``:
        called with the elapsed seconds on each update, for what is not a persistent
        topic (the non-persistent topics).

        Raises:
            ValueError: ``period_s`` is not positive.
        """
        if period_s <= 0:
            raise ValueError(f"stats update period must be positive, got {period_s}")
        self._topics = topics
        self._also_refresh = also_refresh
        self.period_s = period_s
        self._clock = clock
        self._last_ms = clock.monotonic_ms()
        self._task: asyncio.Task[None] | None = None
        # Completed updates; tests wait for it to move instead of sleeping a period.
        self.updates = 0
        self._updated = asyncio.Event()

    def update(self) -> None:
        """One update now, over the time since the previous one."""
        now = self._clock.monotonic_ms()
        elapsed_s = (now - self._last_ms) / 1000.0
        self._last_ms = now
        for topic in list(self._topics()):
            try:
                refresh_topic_stats(topic, elapsed_s)
            except Exception:
                # A stats bug must not stop the updates of every other topic.
                log.exception("stats update of %s failed", topic.name)
        if self._also_refresh is not None:
            try:
                self._also_refresh(elapsed_s)
            except Exception:
                log.exception("stats update failed")
        self.updates += 1
        self._updated.set()
        self._updated = asyncio.Event()

    async def next_update(self) -> None:
        """Return after the next completed update."""
        await self._updated.wait()

    def start(self) -> None:
        assert self._task is None, "stats updater already started"
        self._last_ms = self._clock.monotonic_ms()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            self.update()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
