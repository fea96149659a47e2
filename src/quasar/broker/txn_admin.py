"""The transaction admin API's broker side (``quasar.admin.txn_api.TransactionAdminApi``).

Answers ``/admin/v3/transactions``: the coordinators, one transaction's metadata, the
slow (long-open) transactions, the transaction buffer and pending-ack views of a
topic or subscription, and an operator's abort. Every answer is shaped like Pulsar's
(``TransactionMetadata``, ``TransactionBufferStats``, ``TransactionPendingAckStats``
...); every query reads the broker's state in memory and changes nothing, except
``abort_transaction``, which ends the transaction through its coordinator exactly as
a client's END_TXN(ABORT) would.

Errors: transactions disabled → ``ServiceNotReady`` (503); unknown coordinator,
topic, subscription or transaction → 404 (``ResourceNotFoundError``,
``TopicNotFound``, ``SubscriptionNotFound``, ``TransactionNotFound``); a topic that is
not persistent → ``BadRequestError`` (400, as Pulsar's ``validateTopicName``).
"""

from __future__ import annotations

from typing import Any

from quasar.errors import (
    BadRequestError,
    InvalidTopicName,
    ResourceNotFoundError,
    ServiceNotReady,
    SubscriptionNotFound,
    TopicNotFound,
)
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedLedger, Position
from quasar.transaction.coordinator import TransactionCoordinator, TxnMeta
from quasar.transaction.coordinator.ownership import BROKER
from quasar.transaction.pending_ack import PendingAckHandle
from quasar.transaction.txn_status import TxnAction, check_preserved_end

from .service import BrokerService
from .topic import PersistentTopic
from .transactions import TransactionService


def ledger_internal_stats(ledger: ManagedLedger, metadata: bool) -> dict[str, Any]:
    """Pulsar's ``ManagedLedgerInternalStats`` of one of the broker's own logs; with
    ``metadata`` each ledger also carries its creation time as its metadata."""
    ledgers = ledger.ledgers()
    return {
        "entriesAddedCounter": ledger.number_of_entries,
        "numberOfEntries": ledger.number_of_entries,
        "totalSize": ledger.total_size,
        "currentLedgerEntries": ledgers[-1].entries if ledgers else 0,
        "currentLedgerSize": ledgers[-1].size if ledgers else 0,
        "lastConfirmedEntry": str(ledger.last_confirmed_entry),
        "state": "LedgerOpened",
        "ledgers": [
            {
                "ledgerId": li.ledger_id,
                "entries": li.entries,
                "size": li.size,
                "offloaded": False,
                **({"metadata": f"ctime={li.timestamp_ms}"} if metadata else {}),
            }
            for li in ledgers
        ],
        "cursors": {
            name: {
                "markDeletePosition": str(cursor.mark_delete_position),
                "readPosition": str(cursor.read_position),
                "properties": dict(cursor.properties),
            }
            for name, cursor in sorted(ledger.cursors().items())
        },
    }


class TransactionAdmin:
    """Read the transaction state of one broker for the admin API."""

    def __init__(self, service: BrokerService) -> None:
        self._service = service

    # -- coordinators --------------------------------------------------------------------
    def _transactions(self) -> TransactionService:
        transactions = self._service.transactions
        if transactions is None:
            raise ServiceNotReady("Transactions are not enabled on this broker")
        return transactions

    def check_enabled(self) -> None:
        self._transactions()

    def _check_coordinator(self, tc_id: int) -> TransactionService:
        transactions = self._transactions()
        if not 0 <= tc_id < transactions.coordinator_count:
            raise ResourceNotFoundError(f"Transaction coordinator with id {tc_id} not found")
        return transactions

    async def _coordinator(self, tc_id: int) -> TransactionCoordinator:
        """The ready coordinator, loading it as a TC_CLIENT_CONNECT would.

        Raises:
            ResourceNotFoundError: unknown id. TransactionCoordinatorNotFound: it
                cannot be loaded now (503, retryable).
        """
        return await self._check_coordinator(tc_id).registry.connect(tc_id)

    async def coordinators(self) -> list[dict[str, Any]]:
        transactions = self._transactions()
        broker = self._service.config.broker
        url, url_tls = broker.broker_service_url, broker.broker_service_url_tls
        return [
            {"id": tc_id, "brokerServiceUrl": url, "brokerServiceUrlTls": url_tls}
            for tc_id in range(transactions.coordinator_count)
        ]

    async def coordinator_internal_stats(self, tc_id: int, metadata: bool) -> dict[str, Any]:
        tc = await self._coordinator(tc_id)
        return {
            "transactionLogStats": {
                "managedLedgerName": tc.ledger.name,
                "managedLedgerInternalStats": ledger_internal_stats(tc.ledger, metadata),
            }
        }

    # -- transactions --------------------------------------------------------------------
    async def transaction_metadata(self, txn_id: TxnID) -> dict[str, Any]:
        tc = await self._coordinator(txn_id.most_bits)
        return self._metadata_json(tc.get_txn_meta(txn_id))

    async def slow_transactions(self, timeout_ms: int, tc_id: int | None) -> dict[str, Any]:
        """Live transactions open for longer than ``timeout_ms``, keyed "(m,l)"."""
        if tc_id is None:
            ids: list[int] = list(range(self._transactions().coordinator_count))
        else:
            self._check_coordinator(tc_id)
            ids = [tc_id]
        now_ms = self._service.clock.wall_ms()
        out: dict[str, Any] = {}
        for i in ids:
            tc = await self._coordinator(i)
            for meta in tc.transactions():
                if now_ms - meta.open_timestamp_ms > timeout_ms:
                    out[str(meta.txn_id)] = self._metadata_json(meta)
        return out

    async def abort_transaction(self, txn_id: TxnID) -> None:
        """Abort a live transaction as its coordinator would on a timeout; an ended
        one is answered with how it ended: aborted is done already (nothing to do),
        committed is ``InvalidTxnStatus`` (409).

        Raises:
            TransactionNotFound: unknown, or ended so long ago that its outcome is no
                longer preserved (404). InvalidTxnStatus: committed or committing (409).
        """
        tc = await self._coordinator(txn_id.most_bits)
        outcome = tc.ended_outcome(txn_id)
        if outcome is not None:
            check_preserved_end(outcome.status, TxnAction.ABORT, txn_id)
            return
        # BROKER: the operator acts for every owner (the route is for super-users).
        await tc.end_txn(txn_id, TxnAction.ABORT, caller=BROKER)

    def _metadata_json(self, meta: TxnMeta) -> dict[str, Any]:
        """Pulsar's ``TransactionMetadata`` (``timeoutAt`` is the absolute deadline in
        wall ms, as in ``clientTransactions``), plus the ``owner`` role."""
        produced: dict[str, Any] = {}
        for topic in meta.partitions():
            produced[topic] = self._in_buffer(topic, meta.txn_id)
        acked: dict[str, dict[str, Any]] = {}
        for topic, subscription in meta.subscriptions():
            acked.setdefault(topic, {})[subscription] = self._in_pending_ack(
                topic, subscription, meta.txn_id
            )
        return {
            "txnId": str(meta.txn_id),
            "status": meta.status.name,
            "openTimestamp": meta.open_timestamp_ms,
            "timeoutAt": meta.timeout_at_ms,
            "producedPartitions": produced,
            "ackedPartitions": acked,
            "owner": meta.owner,
        }

    def _in_buffer(self, topic: str, txn_id: TxnID) -> dict[str, Any]:
        loaded = self._service.topics.get(topic)
        if loaded is None or loaded.txn_buffer is None:
            return {"startPosition": None, "aborted": False}
        return loaded.txn_buffer.transaction_in_buffer_stats(txn_id)

    def _in_pending_ack(self, topic: str, subscription: str, txn_id: TxnID) -> dict[str, Any]:
        loaded = self._service.topics.get(topic)
        sub = loaded.subscriptions.get(subscription) if loaded is not None else None
        handle = sub.txns.handle if sub is not None else None
        if handle is None:
            return {"cumulativeAckPosition": None}
        return handle.transaction_stats(txn_id)

    # -- topics and subscriptions --------------------------------------------------------
    async def _topic(self, topic: str) -> PersistentTopic:
        """The loaded (or loadable) topic or partition.

        Raises:
            BadRequestError: not a persistent topic. TopicNotFound: it does not exist.
        """
        self._transactions()
        try:
            name = parse_topic(topic)
        except InvalidTopicName as exc:
            raise BadRequestError(str(exc)) from None
        if name.domain != PERSISTENT:
            raise BadRequestError(f"Topic {topic} is not a persistent topic")
        if not self._service.topic_exists(name):
            raise TopicNotFound(f"Topic {topic} not found")
        return await self._service.get_topic(name, create=False)

    async def _handle(self, topic: str, subscription: str) -> PendingAckHandle | None:
        """The subscription's pending-ack handle; None when no transaction ever
        acknowledged on it (nothing pending: an empty view, not an error)."""
        t = await self._topic(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound("Subscription not found")
        if sub.txns.failure is not None:
            raise sub.txns.not_ready("report pending acks")
        return sub.txns.handle

    async def transaction_buffer_stats(
        self, topic: str, low_watermarks: bool, segment_stats: bool
    ) -> dict[str, Any]:
        t = await self._topic(topic)
        if t.txn_buffer is None:
            raise BadRequestError(f"Topic {topic} has no transaction buffer (system topic)")
        return t.txn_buffer.stats(low_watermarks=low_watermarks, segment_stats=segment_stats)

    async def transaction_in_buffer_stats(self, topic: str, txn_id: TxnID) -> dict[str, Any]:
        t = await self._topic(topic)
        if t.txn_buffer is None:
            return {"startPosition": None, "aborted": False}
        return t.txn_buffer.transaction_in_buffer_stats(txn_id)

    async def pending_ack_stats(
        self, topic: str, subscription: str, low_watermarks: bool
    ) -> dict[str, Any]:
        handle = await self._handle(topic, subscription)
        if handle is None:
            out: dict[str, Any] = {
                "state": "None", "ongoingTxnSize": 0, "recoverStartTime": 0,
                "recoverEndTime": 0,
            }
            if low_watermarks:
                out["lowWaterMarks"] = {}
            return out
        stats = handle.stats()
        out = {
            "state": stats["state"],
            "ongoingTxnSize": stats["ongoingTxnSize"],
            "recoverStartTime": handle.recover_start_ms,
            "recoverEndTime": handle.recover_end_ms,
        }
        if low_watermarks:
            out["lowWaterMarks"] = stats["lowWaterMarks"]
        return out

    async def transaction_in_pending_ack_stats(
        self, topic: str, subscription: str, txn_id: TxnID
    ) -> dict[str, Any]:
        handle = await self._handle(topic, subscription)
        if handle is None:
            return {"cumulativeAckPosition": None}
        return handle.transaction_stats(txn_id)

    async def pending_ack_internal_stats(
        self, topic: str, subscription: str, metadata: bool
    ) -> dict[str, Any]:
        handle = await self._handle(topic, subscription)
        if handle is None:
            raise ResourceNotFoundError(
                f"Subscription {subscription} of {topic} has no pending-ack log"
            )
        ledger = handle.log.ledger
        return {
            "pendingAckLogStats": {
                "managedLedgerName": ledger.name,
                "managedLedgerInternalStats": ledger_internal_stats(ledger, metadata),
            }
        }

    async def position_stats_in_pending_ack(
        self, topic: str, subscription: str, position: Position, batch_index: int | None
    ) -> dict[str, Any]:
        handle = await self._handle(topic, subscription)
        if handle is None:
            # Nothing is pending: the position is either acknowledged or not held.
            if position.ledger_id < 0 or position.entry_id < 0 or (
                batch_index is not None and batch_index < 0
            ):
                return {"state": "InvalidPosition"}
            t = await self._topic(topic)
            cursor = t.subscriptions[subscription].cursor
            state = "MarkDelete" if cursor.is_acknowledged(position) else "NotInPendingAck"
            return {"state": state}
        return handle.position_stats(position, batch_index)

