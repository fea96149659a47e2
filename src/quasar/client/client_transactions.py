"""A client name's transactions, as the admin REST API reports them (PIP-255).

``GET /admin/v3/transactions/clientTransactions/{clientName}`` (sent by
``quasar.client.admin.AdminClient.client_transactions``, behind
``client.get_client_transactions(client_name)``) answers,
for one client name, the transactions its coordinators hold open and the terminated
ones their preservers remember (the JSON is drawn in ``docs/transactions.md``).

``open``: live transactions (OPEN, COMMITTING, ABORTING); ``terminated``: the outcomes
the coordinators' preservers still hold (COMMITTED, ABORTED: the last
``transactionMetaPersistCount`` per client name and coordinator, for
``transactionMetaPersistTimeInHour``). A coordinator named in
``unavailableCoordinators`` could not be asked: the answer is then partial.

The result is returned as :class:`ClientTransactions` (plain dataclasses); every field
the broker sent for a transaction is kept in ``ClientTransaction.details``.

The admin URL is ``Client(admin_url=...)``; when not given it is
``http://<first host of service_url>:8080``, where Pulsar standalone (and ``quasar
standalone``) serve the admin API by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from quasar.errors import InvalidAdminResponse
from quasar.protocol.txn_id import TxnID

_TXN_ID = re.compile(r"^\(?\s*(\d+)\s*,\s*(\d+)\s*\)?$")


@dataclass(frozen=True)
class ClientTransaction:
    """One transaction of a client name, as the broker reported it.

    ``status``: the coordinator's status name (``OPEN``, ``COMMITTING``,
    ``ABORTING``, ``COMMITTED``, ``ABORTED``, ...). ``end_time_ms``: when it ended
    (terminated transactions), else None. ``details``: the broker's JSON object.
    """

    txn_id: TxnID
    status: str
    end_time_ms: int | None = None
    details: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ClientTransactions:
    """What the broker knows of one client name's transactions.

    ``unavailable_coordinators``: ids of coordinators that could not be asked; when
    not empty the lists are partial (absence from them proves nothing).
    """

    client_name: str
    open: list[ClientTransaction]
    terminated: list[ClientTransaction]
    unavailable_coordinators: list[int] = field(default_factory=list)

    def find(self, txn_id: TxnID | tuple[int, int]) -> ClientTransaction | None:
        """The entry of ``txn_id`` (open or terminated), or None."""
        wanted = (int(txn_id[0]), int(txn_id[1]))
        for txn in (*self.open, *self.terminated):
            if tuple(txn.txn_id) == wanted:
                return txn
        return None


def parse_txn_id(value: Any) -> TxnID:
    """``"(most,least)"``, ``[most, least]`` or ``{"mostSigBits":..,"leastSigBits":..}``.

    Raises:
        ValueError: none of those shapes.
    """
    if isinstance(value, str):
        m = _TXN_ID.match(value.strip())
        if m:
            return TxnID(int(m.group(1)), int(m.group(2)))
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        return TxnID(int(value[0]), int(value[1]))
    elif isinstance(value, dict):
        for most, least in (
            ("mostSigBits", "leastSigBits"),
            ("most_bits", "least_bits"),
            ("txnidMostBits", "txnidLeastBits"),
        ):
            if most in value and least in value:
                return TxnID(int(value[most]), int(value[least]))
    raise ValueError(f"not a transaction id: {value!r}")


def _entry(obj: dict[str, Any]) -> ClientTransaction:
    raw_id = obj.get("txnId", obj.get("txn_id"))
    end = obj.get("endTime", obj.get("end_time"))
    return ClientTransaction(
        txn_id=parse_txn_id(raw_id),
        status=str(obj.get("status", "")),
        end_time_ms=None if end in (None, "", -1) else int(end),
        details=dict(obj),
    )


def parse_client_transactions(body: Any, client_name: str) -> ClientTransactions:
    """The endpoint's JSON as :class:`ClientTransactions`.

    Raises:
        InvalidAdminResponse: the body does not have the documented shape.
    """
    try:
        return ClientTransactions(
            client_name=str(body.get("clientName", client_name)),
            open=[_entry(o) for o in body.get("open", [])],
            terminated=[_entry(o) for o in body.get("terminated", [])],
            unavailable_coordinators=[
                int(i) for i in body.get("unavailableCoordinators", [])
            ],
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise InvalidAdminResponse(
            f"unexpected clientTransactions answer: {exc}"
        ) from exc


__all__ = [
    "ClientTransaction",
    "ClientTransactions",
    "parse_client_transactions",
    "parse_txn_id",
]
