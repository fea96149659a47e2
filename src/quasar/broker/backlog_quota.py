"""Backlog quotas: how much unconsumed data a topic may hold, and what happens beyond.

Two quota types, as in Pulsar (a namespace's ``backlog_quota_map``, else the broker's
``backlogQuotaDefault*`` keys):

* ``destination_storage``: the estimated bytes from the slowest durable subscription's
  mark-delete position to the end of the topic (ledger sizes, the first ledger pro rata
  by its average entry size, as Pulsar's estimated backlog size);
* ``message_age``: the age of the slowest subscription's oldest unacknowledged message,
  by its publish time (Pulsar's precise time-based check).

And three policies once one is exceeded:

* ``producer_request_hold``: new producers are refused with
  ``ProducerBlockedQuotaExceededError``, which Pulsar clients retry, so their sends wait
  (up to their send timeout) until the backlog shrinks; the periodic check disconnects
  the producers already attached, so they reconnect into that refusal;
* ``producer_exception``: the same with ``ProducerBlockedQuotaExceededException``, which
  clients do not retry: pending and new sends fail at once;
* ``consumer_backlog_eviction``: the periodic check moves the slowest subscriptions'
  cursors forward until the backlog fits: to 90% of the size limit (Pulsar's reduction
  factor), or past every message older than the age limit.

System topics have no quota, as in Pulsar.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from quasar.errors import (
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
)
from quasar.protocol.topic_name import is_system_topic
from quasar.resources.models import BacklogQuota
from quasar.storage.api import ManagedLedger, Position

from .message_expiry import expire_by_age, oldest_unacked_publish_time
from .periodic import Periodic
from .stats_rates import estimated_backlog_size
from .subscription import Subscription
from .topic import PersistentTopic

__all__ = [
    "DESTINATION_STORAGE",
    "MESSAGE_AGE",
    "BacklogQuotaManager",
    "TopicQuotaState",
    "estimated_backlog_bytes",
]

log = logging.getLogger(__name__)

DESTINATION_STORAGE = "destination_storage"
MESSAGE_AGE = "message_age"
# Size eviction stops at this fraction of the limit, so one check leaves room rather
# than evicting again on the next message (Pulsar's reduction factor).
SIZE_EVICTION_TARGET = 0.9

QuotasOf = Callable[[PersistentTopic], dict[str, BacklogQuota]]


@dataclass
class TopicQuotaState:
    """What the last check saw of one topic (its metrics)."""

    backlog_age_s: float = 0.0
    size_evictions: int = 0
    time_evictions: int = 0


def slowest_subscription(topic: PersistentTopic) -> Subscription | None:
    """The durable subscription with the earliest mark-delete position."""
    subs = [s for s in topic.subscriptions.values() if s.durable]
    if not subs:
        return None
    return min(subs, key=lambda s: s.cursor.mark_delete_position)


def estimated_backlog_bytes(ledger: ManagedLedger, mark_delete: Position) -> int:
    """Bytes of the entries after ``mark_delete`` (the stats' estimate, which the
    quota and ``backlogSize`` share)."""
    return estimated_backlog_size(ledger.ledgers(), mark_delete)


def _position_keeping(ledger: ManagedLedger, target_bytes: int) -> Position | None:
    """The mark-delete position after which about ``target_bytes`` remain; None when
    the whole topic already fits."""
    remaining = 0
    for info in reversed(ledger.ledgers()):
        if info.entries <= 0:
            continue
        if remaining + info.size <= target_bytes:
            remaining += info.size
            continue
        average = info.size / info.entries
        keep = int((target_bytes - remaining) // average) if average > 0 else info.entries
        keep = max(0, min(keep, info.entries))
        if keep == info.entries:
            return ledger.previous_position(Position(info.ledger_id, 0))
        return Position(info.ledger_id, info.entries - keep - 1)
    return None


class BacklogQuotaManager:
    """Checks loaded topics against their quotas and applies the quota's policy."""

    def __init__(
        self,
        topics: Callable[[], list[PersistentTopic]],
        quotas_of: QuotasOf,
        interval_s: float,
        check_enabled: bool,
        now_ms: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._quotas_of = quotas_of
        self._check_enabled = check_enabled
        self._now_ms = now_ms
        self._periodic = Periodic("backlog quota check", interval_s, self.check_all)
        # By topic name; entries of unloaded topics are dropped at the next check.
        self.states: dict[str, TopicQuotaState] = {}

    def quotas(self, topic: PersistentTopic) -> dict[str, BacklogQuota]:
        """The topic's effective quotas by type (only those with a limit)."""
        if is_system_topic(topic.topic_name):
            return {}
        return self._quotas_of(topic)

    # -- the checks ---------------------------------------------------------------------
    async def exceeded(self, topic: PersistentTopic) -> dict[str, BacklogQuota]:
        """The quotas ``topic`` exceeds now, by type."""
        quotas = self.quotas(topic)
        if not quotas:
            return {}
        slowest = slowest_subscription(topic)
        if slowest is None:
            return {}
        out: dict[str, BacklogQuota] = {}
        size = quotas.get(DESTINATION_STORAGE)
        if size is not None and estimated_backlog_bytes(
            topic.ledger, slowest.cursor.mark_delete_position
        ) > size.limit_size:
            out[DESTINATION_STORAGE] = size
        age = quotas.get(MESSAGE_AGE)
        if age is not None:
            published = await oldest_unacked_publish_time(topic, slowest)
            if published is not None and self._now_ms() - published > age.limit_time * 1000:
                out[MESSAGE_AGE] = age
        return out

    async def check_new_producer(self, topic: PersistentTopic) -> None:
        """Refuse a new producer while a producer-blocking quota is exceeded.

        Raises:
            ProducerBlockedQuotaExceededError: ``producer_request_hold``.
            ProducerBlockedQuotaExceededException: ``producer_exception``.
        """
        for kind, quota in (await self.exceeded(topic)).items():
            reason = f"Cannot create producer on topic with backlog quota exceeded ({kind})"
            if quota.policy == "producer_request_hold":
                raise ProducerBlockedQuotaExceededError(reason)
            if quota.policy == "producer_exception":
                raise ProducerBlockedQuotaExceededException(reason)

    async def check_topic(self, topic: PersistentTopic) -> None:
        """One periodic check of ``topic``: record its backlog age, apply policies."""
        state = self.states.setdefault(topic.name, TopicQuotaState())
        slowest = slowest_subscription(topic)
        published = (
            None if slowest is None else await oldest_unacked_publish_time(topic, slowest)
        )
        state.backlog_age_s = (
            0.0 if published is None else max(self._now_ms() - published, 0) / 1000
        )
        for kind, quota in (await self.exceeded(topic)).items():
            if quota.policy == "consumer_backlog_eviction":
                await self._evict(topic, kind, quota, state)
            else:
                log.info("%s: backlog quota %s exceeded, disconnecting producers",
                         topic.name, kind)
                for producer in list(topic.producers.values()):
                    producer.connection.close_producer(producer.producer_id)
                    topic.remove_producer(producer)

    async def _evict(
        self, topic: PersistentTopic, kind: str, quota: BacklogQuota, state: TopicQuotaState
    ) -> None:
        evicted = 0
        if kind == DESTINATION_STORAGE:
            target = _position_keeping(
                topic.ledger, int(quota.limit_size * SIZE_EVICTION_TARGET)
            )
            if target is not None:
                for sub in list(topic.subscriptions.values()):
                    if sub.durable:
                        evicted += sub.expire_up_to(target)
            if evicted:
                state.size_evictions += 1
        else:
            now = self._now_ms()
            for sub in list(topic.subscriptions.values()):
                if sub.durable:
                    evicted += await expire_by_age(topic, sub, quota.limit_time, now)
            if evicted:
                state.time_evictions += 1
        if evicted:
            log.info("%s: backlog quota %s exceeded, evicted %d entries",
                     topic.name, kind, evicted)

    async def check_all(self) -> None:
        topics = [t for t in self._topics() if not t.closed]
        for name in set(self.states) - {t.name for t in topics}:
            del self.states[name]
        for topic in topics:
            try:
                await self.check_topic(topic)
            except Exception:
                log.exception("backlog quota check of %s failed", topic.name)

    # -- the periodic task --------------------------------------------------------------
    def start(self) -> None:
        if self._check_enabled:
            self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()
