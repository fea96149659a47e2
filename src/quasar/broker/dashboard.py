"""The dashboard's one snapshot of the broker: ``DashboardSnapshot``.

The web dashboard (``quasar.admin.dashboard``) refreshes every two seconds. Built
from the admin REST API alone it would need a stats request per topic and a
metadata request per transaction; this module reads the same in-memory state once
and answers one compact JSON document instead::

    {"broker": {version, cluster, state, statsUpdateFrequencyInSecs, statsUpdates,
                timestamp},
     "totals": {topics, producers, consumers, subscriptions, connections,
                msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut,
                msgBacklog, storageSize},
     "topics": [{topic, system, msgRateIn, msgRateOut, msgThroughputIn,
                 msgThroughputOut, msgBacklog, backlogSize, storageSize,
                 producerCount, consumerCount,
                 subscriptions: [{name, type, msgBacklog, unackedMessages,
                                  consumerCount, msgRateOut,
                                  blockedOnUnackedMessages}]}],
     "topicsTruncated": false,
     "transactions": {enabled, coordinators: [{id, loaded, activeCount}],
                      open: [{txnId, mostSigBits, leastSigBits, coordinatorId,
                              status, openTimestamp, timeoutAt, ageMs, owner,
                              clientName, producedPartitions, ackedPartitions}],
                      openTruncated: false},
     "heldBack": [{topic, heldBackEntries, ongoingTxnCount, oldestOpenAgeMs,
                   maxReadPosition}]}

Rates are the stats updater's (``statsUpdateFrequencyInSecs``), the same numbers as
the topic stats and ``/metrics``. Only loaded topics and loaded coordinators are
read: taking a snapshot never loads anything, so it costs one pass over memory.
Topics are listed by backlog, largest first, held-back topics by their held-back
entries, and open transactions oldest first; every list is bounded so that one
answer stays small on a broker with many.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quasar.protocol.topic_name import (
    SYSTEM_TENANT,
    TopicName,
    is_hidden_from_listings,
    is_system_topic,
)
from quasar.transaction.coordinator import TransactionCoordinator, TxnMeta
from quasar.transaction.metrics import held_back_entries

from .operations import BrokerOperations
from .service import BrokerService
from .subscription import SUB_TYPE_NAMES, Subscription
from .topic import PersistentTopic

__all__ = ["OPEN_TRANSACTIONS_MAX", "TOPICS_MAX", "DashboardSnapshot"]

# A page with more rows than these is no longer read by a person; the answer says
# when it was cut (``topicsTruncated``, ``openTruncated``) and the admin REST API
# still answers for every topic and transaction.
TOPICS_MAX = 500
OPEN_TRANSACTIONS_MAX = 500


class DashboardSnapshot:
    """Builds the dashboard's JSON document from the running broker."""

    def __init__(
        self,
        service: BrokerService,
        operations: BrokerOperations,
        connections: Callable[[], int],
        stats_updates: Callable[[], int],
    ) -> None:
        """``connections``: the binary-protocol connections open now (the server
        counts them); ``stats_updates``: how many stats updates have completed, so
        that the page can tell a fresh rate from a repeated one."""
        self._service = service
        self._operations = operations
        self._connections = connections
        self._stats_updates = stats_updates

    def snapshot(self) -> dict[str, Any]:
        service = self._service
        now_ms = service.clock.wall_ms()
        topics = [t for t in list(service.topics.values()) if not t.closed]
        rows = sorted(
            (_topic_row(t) for t in topics),
            key=lambda row: (-int(row["msgBacklog"]), str(row["topic"])),
        )
        return {
            "broker": self._broker(now_ms),
            "totals": self._totals(rows),
            "topics": rows[:TOPICS_MAX],
            "topicsTruncated": len(rows) > TOPICS_MAX,
            "transactions": self._transactions(now_ms),
            "heldBack": _held_back(topics, self._coordinators(), now_ms),
        }

    def _broker(self, now_ms: int) -> dict[str, Any]:
        operations = self._operations
        if operations.closing:
            state = "closing"
        elif operations.ready:
            state = "ready"
        else:
            state = "starting"
        return {
            "version": operations.version,
            "cluster": self._service.cluster_name,
            "state": state,
            "statsUpdateFrequencyInSecs":
                self._service.config.metrics.stats_update_frequency_in_secs,
            "statsUpdates": self._stats_updates(),
            "timestamp": now_ms,
        }

    def _totals(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        def total(key: str) -> Any:
            return sum(row[key] for row in rows)

        return {
            "topics": len(rows),
            "producers": total("producerCount"),
            "consumers": total("consumerCount"),
            "subscriptions": sum(len(row["subscriptions"]) for row in rows),
            "connections": self._connections(),
            "msgRateIn": total("msgRateIn"),
            "msgRateOut": total("msgRateOut"),
            "msgThroughputIn": total("msgThroughputIn"),
            "msgThroughputOut": total("msgThroughputOut"),
            "msgBacklog": total("msgBacklog"),
            "storageSize": total("storageSize"),
        }

    def _coordinators(self) -> list[TransactionCoordinator]:
        transactions = self._service.transactions
        return [] if transactions is None else transactions.registry.coordinators()

    def _transactions(self, now_ms: int) -> dict[str, Any]:
        if self._service.transactions is None:
            return {"enabled": False, "coordinators": [], "open": [], "openTruncated": False}
        coordinators = self._coordinators()
        live: list[tuple[int, TxnMeta]] = []
        for tc in coordinators:
            live.extend((tc.tc_id, meta) for meta in tc.transactions())
        live.sort(key=lambda item: (item[1].open_timestamp_ms, str(item[1].txn_id)))
        # Every coordinator this broker has, loaded or not: one that is not loaded
        # has no client yet (a client's TC_CLIENT_CONNECT loads it).
        loaded = {tc.tc_id: tc for tc in coordinators}
        count = self._service.transactions.coordinator_count
        return {
            "enabled": True,
            "coordinators": [
                {
                    "id": tc_id,
                    "loaded": tc_id in loaded,
                    "activeCount": len(loaded[tc_id].transactions()) if tc_id in loaded else 0,
                }
                for tc_id in range(count)
            ],
            "open": [
                _transaction_row(tc_id, meta, now_ms)
                for tc_id, meta in live[:OPEN_TRANSACTIONS_MAX]
            ],
            "openTruncated": len(live) > OPEN_TRANSACTIONS_MAX,
        }


def _is_system(name: TopicName) -> bool:
    """The broker's own topics, and every topic of Pulsar's system tenant (the
    health check's topics are there), which the page hides unless asked."""
    return (
        name.tenant == SYSTEM_TENANT
        or is_system_topic(name)
        or is_hidden_from_listings(name)
    )


def _topic_row(topic: PersistentTopic) -> dict[str, Any]:
    return {
        "topic": topic.name,
        "system": _is_system(topic.topic_name),
        "msgRateIn": topic.rate_in.msg_rate,
        "msgRateOut": topic.rate_out.msg_rate,
        "msgThroughputIn": topic.rate_in.byte_rate,
        "msgThroughputOut": topic.rate_out.byte_rate,
        "msgBacklog": topic.msg_backlog(),
        "backlogSize": topic.backlog_size(),
        "storageSize": topic.ledger.total_size,
        "producerCount": len(topic.producers),
        "consumerCount": topic.consumer_count(),
        "subscriptions": [
            _subscription_row(name, sub)
            for name, sub in sorted(topic.subscriptions.items())
        ],
    }


def _subscription_row(name: str, sub: Subscription) -> dict[str, Any]:
    return {
        "name": name,
        "type": SUB_TYPE_NAMES.get(sub.sub_type, "Exclusive"),
        "msgBacklog": sub.backlog(),
        "unackedMessages": sub.unacked_messages(),
        "consumerCount": sub.consumer_count,
        "msgRateOut": sub.rate_out.msg_rate,
        "blockedOnUnackedMessages": sub.blocked_on_unacked(),
    }


def _transaction_row(tc_id: int, meta: TxnMeta, now_ms: int) -> dict[str, Any]:
    txn_id = meta.txn_id
    return {
        "txnId": str(txn_id),
        "mostSigBits": txn_id.most_bits,
        "leastSigBits": txn_id.least_bits,
        "coordinatorId": tc_id,
        "status": meta.status.name,
        "openTimestamp": meta.open_timestamp_ms,
        "timeoutAt": meta.timeout_at_ms,
        "ageMs": max(0, now_ms - meta.open_timestamp_ms),
        "owner": meta.owner,
        "clientName": meta.client_name,
        "producedPartitions": meta.partitions(),
        "ackedPartitions": [
            {"topic": topic, "subscription": sub} for topic, sub in meta.subscriptions()
        ],
    }


def _held_back(
    topics: list[PersistentTopic], coordinators: list[TransactionCoordinator], now_ms: int
) -> list[dict[str, Any]]:
    """Topics whose readers wait for an open transaction: entries were written after
    the max-read position, which only moves when the oldest transaction on the topic
    ends (the ``quasar_txn_topic_held_back_entries`` series)."""
    opened: dict[Any, int] = {}
    for tc in coordinators:
        opened.update(tc.open_timestamps())
    out: list[dict[str, Any]] = []
    for topic in topics:
        buffer = topic.txn_buffer
        if buffer is None:
            continue
        held = held_back_entries(topic.ledger, buffer.max_read_position)
        if held == 0:
            continue
        ongoing = buffer.ongoing_transactions()
        ages = [now_ms - opened[txn] for txn in ongoing if txn in opened]
        out.append({
            "topic": topic.name,
            "heldBackEntries": held,
            "ongoingTxnCount": len(ongoing),
            "oldestOpenAgeMs": max(ages, default=0),
            "maxReadPosition": str(buffer.max_read_position),
        })
    out.sort(key=lambda row: (-int(row["heldBackEntries"]), str(row["topic"])))
    return out[:TOPICS_MAX]
