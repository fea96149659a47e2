"""What the transaction admin routes need from the broker: ``TransactionAdminApi``.

Transaction ids, topics and positions arrive validated by the routes
(``quasar.admin.transactions``); topics are full persistent names of a
non-partitioned topic or one partition. Errors are ``quasar.errors`` classes, whose
``http_status`` becomes the answer's status.
"""

from __future__ import annotations

from typing import Any, Protocol

from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

__all__ = ["TransactionAdminApi"]


class TransactionAdminApi(Protocol):
    """The broker's transactions as ``/admin/v3/transactions`` reads and ends them.

    Every method raises ``ServiceNotReady`` (503) when transactions are disabled.
    """

    def check_enabled(self) -> None:
        """Raises ServiceNotReady (503) when transactions are disabled: every route
        checks this first, as Pulsar's ``checkTransactionCoordinatorEnabled``."""
        ...

    async def coordinators(self) -> list[dict[str, Any]]:
        """``[{id, brokerServiceUrl, brokerServiceUrlTls}]``, one per coordinator."""
        ...

    async def coordinator_internal_stats(self, tc_id: int, metadata: bool) -> dict[str, Any]:
        """``{transactionLogStats: {managedLedgerName, managedLedgerInternalStats}}``.

        Raises:
            ResourceNotFoundError: unknown coordinator (404).
        """
        ...

    async def transaction_metadata(self, txn_id: TxnID) -> dict[str, Any]:
        """Pulsar's ``TransactionMetadata`` of a live transaction.

        Raises:
            ResourceNotFoundError: unknown coordinator. TransactionNotFound: not live.
        """
        ...

    async def slow_transactions(self, timeout_ms: int, tc_id: int | None) -> dict[str, Any]:
        """``{"(m,l)": TransactionMetadata}`` of the live transactions open longer
        than ``timeout_ms``, on one coordinator or all of them.

        Raises:
            ResourceNotFoundError: unknown coordinator.
        """
        ...

    async def abort_transaction(self, txn_id: TxnID) -> None:
        """Abort a live transaction (done already if it ended aborted).

        Raises:
            TransactionNotFound: unknown (404). InvalidTxnStatus: it committed or is
                committing (409).
        """
        ...

    async def transaction_buffer_stats(
        self, topic: str, low_watermarks: bool, segment_stats: bool
    ) -> dict[str, Any]:
        """Pulsar's ``TransactionBufferStats``. Raises TopicNotFound, BadRequestError."""
        ...

    async def transaction_in_buffer_stats(self, topic: str, txn_id: TxnID) -> dict[str, Any]:
        """``{startPosition, aborted}``. Raises TopicNotFound, BadRequestError."""
        ...

    async def pending_ack_stats(
        self, topic: str, subscription: str, low_watermarks: bool
    ) -> dict[str, Any]:
        """Pulsar's ``TransactionPendingAckStats``. Raises TopicNotFound,
        SubscriptionNotFound, BadRequestError."""
        ...

    async def transaction_in_pending_ack_stats(
        self, topic: str, subscription: str, txn_id: TxnID
    ) -> dict[str, Any]:
        """``{cumulativeAckPosition}``. Raises as ``pending_ack_stats``."""
        ...

    async def pending_ack_internal_stats(
        self, topic: str, subscription: str, metadata: bool
    ) -> dict[str, Any]:
        """``{pendingAckLogStats: {managedLedgerName, managedLedgerInternalStats}}``.
        Raises as ``pending_ack_stats``, and ResourceNotFoundError when the
        subscription has no pending-ack log."""
        ...

    async def position_stats_in_pending_ack(
        self, topic: str, subscription: str, position: Position, batch_index: int | None
    ) -> dict[str, Any]:
        """Pulsar's ``PositionInPendingAckStats`` ``{state}``. Raises as
        ``pending_ack_stats``."""
        ...
