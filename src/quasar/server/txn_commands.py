"""Transaction commands on a server connection.

Transactions (coordinator, transaction buffer, pending acks) are built in a later
step; until then every transaction command is answered with ``NotAllowedError`` in its
own response type, never with a crash or a silent drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quasar.errors import NotAllowedError
from quasar.protocol import pb

if TYPE_CHECKING:
    from .connection import ServerConnection

_NOT_ENABLED = "Transactions are not enabled on this broker"

# request command type -> (response command type, BaseCommand field of the request,
# BaseCommand field of the response)
_TXN_REQUESTS = {
    pb.BaseCommand.TC_CLIENT_CONNECT_REQUEST: (
        pb.BaseCommand.TC_CLIENT_CONNECT_RESPONSE,
        "tcClientConnectRequest",
        "tcClientConnectResponse",
    ),
    pb.BaseCommand.NEW_TXN: (pb.BaseCommand.NEW_TXN_RESPONSE, "newTxn", "newTxnResponse"),
    pb.BaseCommand.ADD_PARTITION_TO_TXN: (
        pb.BaseCommand.ADD_PARTITION_TO_TXN_RESPONSE,
        "addPartitionToTxn",
        "addPartitionToTxnResponse",
    ),
    pb.BaseCommand.ADD_SUBSCRIPTION_TO_TXN: (
        pb.BaseCommand.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        "addSubscriptionToTxn",
        "addSubscriptionToTxnResponse",
    ),
    pb.BaseCommand.END_TXN: (pb.BaseCommand.END_TXN_RESPONSE, "endTxn", "endTxnResponse"),
    pb.BaseCommand.END_TXN_ON_PARTITION: (
        pb.BaseCommand.END_TXN_ON_PARTITION_RESPONSE,
        "endTxnOnPartition",
        "endTxnOnPartitionResponse",
    ),
    pb.BaseCommand.END_TXN_ON_SUBSCRIPTION: (
        pb.BaseCommand.END_TXN_ON_SUBSCRIPTION_RESPONSE,
        "endTxnOnSubscription",
        "endTxnOnSubscriptionResponse",
    ),
}


class TransactionCommands:
    def transaction_handlers(self: ServerConnection) -> dict[int, Any]:  # type: ignore[misc]
        return {t: self._reject_txn_request for t in _TXN_REQUESTS}

    def _reject_txn_request(self: ServerConnection, cmd: pb.BaseCommand, frame: Any) -> None:  # type: ignore[misc]
        resp_type, req_field, resp_field = _TXN_REQUESTS[cmd.type]
        req = getattr(cmd, req_field)
        out = pb.BaseCommand(type=resp_type)
        resp = getattr(out, resp_field)
        resp.request_id = req.request_id
        for f in ("txnid_least_bits", "txnid_most_bits"):
            if hasattr(req, f) and hasattr(resp, f) and req.HasField(f):
                setattr(resp, f, getattr(req, f))
        resp.error = pb.NotAllowedError
        resp.message = _NOT_ENABLED
        self.send_command(out)

    def publish_transactional(self: ServerConnection, producer: Any, topic: Any, c: pb.CommandSend, payload: bytes) -> None:  # type: ignore[misc]
        self._send_error(c.producer_id, c.sequence_id, NotAllowedError(_NOT_ENABLED))

    def ack_transactional(self: ServerConnection, consumer: Any, topic: Any, c: pb.CommandAck) -> None:  # type: ignore[misc]
        if c.HasField("request_id"):
            self.send_ack_response(c, NotAllowedError(_NOT_ENABLED))

    def on_connection_lost(self: ServerConnection) -> None:  # type: ignore[misc]
        pass
