"""The transaction coordinator played by the fake broker (:class:`FakeCoordinator`).

It answers TC_CLIENT_CONNECT, NEW_TXN, ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN
and END_TXN the way Pulsar does: TransactionNotFound for unknown transactions,
InvalidTxnStatus for the opposite end, and with ``preserve`` the PIP-255 answers from
the ended transactions kept per client name. Tests queue error answers per request
type and choose which coordinator ids are hosted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quasar.protocol import pb

T = pb.BaseCommand

# request type -> (response type, request field, response field)
TXN_REQUESTS: dict[int, tuple[int, str, str]] = {
    T.TC_CLIENT_CONNECT_REQUEST: (
        T.TC_CLIENT_CONNECT_RESPONSE,
        "tcClientConnectRequest",
        "tcClientConnectResponse",
    ),
    T.NEW_TXN: (T.NEW_TXN_RESPONSE, "newTxn", "newTxnResponse"),
    T.ADD_PARTITION_TO_TXN: (
        T.ADD_PARTITION_TO_TXN_RESPONSE,
        "addPartitionToTxn",
        "addPartitionToTxnResponse",
    ),
    T.ADD_SUBSCRIPTION_TO_TXN: (
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        "addSubscriptionToTxn",
        "addSubscriptionToTxnResponse",
    ),
    T.END_TXN: (T.END_TXN_RESPONSE, "endTxn", "endTxnResponse"),
}


@dataclass
class FakeTxn:
    status: str = "OPEN"  # OPEN, COMMITTED, ABORTED
    ttl_ms: int = 0
    client_name: str = ""  # PIP-255 client_name of NEW_TXN ("" when absent)
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    acks: list[Any] = field(default_factory=list)  # CommandAck received in the txn
    sends: list[Any] = field(default_factory=list)  # CommandSend received in the txn


class FakeCoordinator:
    """The transaction coordinators hosted by one fake broker."""

    def __init__(self) -> None:
        # False answers NotAllowedError to everything, like a broker without transactions.
        self.enabled = True
        self.hosted: set[int] | None = None  # coordinator ids hosted here (None: all)
        self.txns: dict[tuple[int, int], FakeTxn] = {}
        self.next_seq: dict[int, int] = {}
        # True forgets ended transactions as Pulsar does (a repeated END_TXN then
        # gets TransactionNotFound); False keeps them and answers the same action
        # again with success, as an idempotent coordinator does.
        self.forget_ended = False
        # request type -> ServerError codes to answer the next requests with, in order.
        self.errors: dict[int, list[int]] = {}
        # PIP-255 preserver: with forget_ended, an ended transaction's outcome is kept
        # here (txn key -> (client name, status)) when preserve is on, and a repeated
        # END_TXN carrying the same client name is answered from it.
        self.preserve = False
        self.preserved: dict[tuple[int, int], tuple[str, str]] = {}

    def handle(self, cmd: Any) -> tuple[int | None, str, dict[str, Any]]:
        """(error code or None, error message, response fields) for a request."""
        t = cmd.type
        req = getattr(cmd, TXN_REQUESTS[t][1])
        queued = self.errors.get(t)
        if queued:
            return queued.pop(0), "injected", {}
        if not self.enabled:
            return pb.NotAllowedError, "Transactions are not enabled", {}
        if t == T.TC_CLIENT_CONNECT_REQUEST:
            if self.hosted is not None and req.tc_id not in self.hosted:
                return pb.TransactionCoordinatorNotFound, "not here", {}
            return None, "", {}
        if t == T.NEW_TXN:
            tc = req.tc_id
            if self.hosted is not None and tc not in self.hosted:
                return pb.TransactionCoordinatorNotFound, "not here", {}
            seq = self.next_seq.get(tc, 0)
            self.next_seq[tc] = seq + 1
            self.txns[(tc, seq)] = FakeTxn(
                ttl_ms=req.txn_ttl_seconds, client_name=req.client_name
            )
            return None, "", {"txnid_most_bits": tc, "txnid_least_bits": seq}
        key = (req.txnid_most_bits, req.txnid_least_bits)
        ids = {"txnid_most_bits": key[0], "txnid_least_bits": key[1]}
        txn = self.txns.get(key)
        if txn is None:
            kept = self.preserved.get(key)
            if t == T.END_TXN and kept is not None and req.client_name == kept[0]:
                target = "COMMITTED" if req.txn_action == pb.COMMIT else "ABORTED"
                if kept[1] == target:
                    return None, "", ids
                return pb.InvalidTxnStatus, f"{key} is {kept[1]}", ids
            return pb.TransactionNotFound, f"transaction {key} not found", ids
        if t == T.END_TXN:
            target = "COMMITTED" if req.txn_action == pb.COMMIT else "ABORTED"
            if txn.status == "OPEN":
                txn.status = target
                if self.forget_ended:
                    del self.txns[key]
                    if self.preserve and txn.client_name:
                        self.preserved[key] = (txn.client_name, target)
                return None, "", ids
            if txn.status == target:
                return None, "", ids
            return pb.InvalidTxnStatus, f"{key} is {txn.status}", ids
        if txn.status != "OPEN":
            return pb.InvalidTxnStatus, f"{key} is {txn.status}", ids
        if t == T.ADD_PARTITION_TO_TXN:
            txn.partitions.extend(req.partitions)
        else:
            txn.subscriptions.extend(
                (s.topic, s.subscription) for s in req.subscription
            )
        return None, "", ids
