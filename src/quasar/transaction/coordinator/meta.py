"""``TxnMeta``: what a coordinator knows about one live transaction."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from quasar.protocol.txn_id import TxnID

from ..txn_status import TxnStatus

Subscription = tuple[str, str]  # (topic, subscription)


@dataclass(slots=True)
class TxnMeta:
    """One transaction's coordinator-side metadata.

    Only ``CoordinatorState.apply`` changes an instance; everything else gets copies
    (``snapshot``). Times are wall-clock milliseconds since the epoch, because they are
    written to the log and must mean the same after a restart:

    * ``open_timestamp_ms``: when NEW was written (``start_time``);
    * ``timeout_at_ms``: the absolute deadline, ``open_timestamp_ms + timeout_ms``;
      after a restart the timeout is re-armed from it, not from the full timeout.
    """

    txn_id: TxnID
    open_timestamp_ms: int
    timeout_ms: int
    status: TxnStatus = TxnStatus.OPEN
    owner: str | None = None
    produced_partitions: set[str] = field(default_factory=set)
    acked_subscriptions: set[Subscription] = field(default_factory=set)
    last_modification_ms: int = 0
    # The name of the client that opened the transaction (NEW_TXN ``client_name``,
    # logged as ``clientName``); its outcome is preserved under that name (PIP-255).
    client_name: str | None = None

    @property
    def timeout_at_ms(self) -> int:
        return self.open_timestamp_ms + self.timeout_ms

    def partitions(self) -> list[str]:
        """Produced partitions, sorted (Pulsar returns them sorted)."""
        return sorted(self.produced_partitions)

    def subscriptions(self) -> list[Subscription]:
        """Acknowledged ``(topic, subscription)`` pairs, sorted."""
        return sorted(self.acked_subscriptions)

    def snapshot(self) -> TxnMeta:
        """An independent copy (callers outside the state never see live objects)."""
        return replace(
            self,
            produced_partitions=set(self.produced_partitions),
            acked_subscriptions=set(self.acked_subscriptions),
        )
