"""Who may act on a transaction: its owner, or a super-user (Pulsar's rule).

NEW_TXN records the connection's authenticated role as the transaction's owner
(``None`` when authentication is off). Adding a partition or a subscription to the
transaction, ending it, and reading its preserved outcome are then allowed to:

* anyone, when no owner was recorded (it was opened without authentication);
* the owner;
* a super-user, which the server decides (Pulsar: only with authentication and
  authorization both on, a role in ``superUserRoles``).

Everyone else is told ``TransactionNotFound`` (``TransactionNotOwned``), as Pulsar
answers, so that a role learns nothing about another role's transactions. The
coordinator knows nothing of authentication: the server hands it a ``Caller`` per
request; in-process callers act as ``BROKER``.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.protocol.txn_id import TxnID

from ..errors import TransactionNotOwned

__all__ = ["ANONYMOUS", "BROKER", "Caller", "not_owner"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the connection's role (``None``: no authentication) and whether that
    role is a super-user."""

    role: str | None
    superuser: bool = False

    def may_act_on(self, owner: str | None) -> bool:
        """Whether this caller may act on a transaction owned by ``owner``."""
        return owner is None or owner == self.role or self.superuser


#: The broker itself (admin tools, tests, recovery): may act on every transaction.
BROKER = Caller(None, superuser=True)
#: A connection without authentication: may act only on transactions without owner.
ANONYMOUS = Caller(None, superuser=False)


def not_owner(txn_id: TxnID, caller: Caller) -> TransactionNotOwned:
    """The answer to a caller that may not act on ``txn_id`` (Pulsar's code,
    ``TransactionNotFound``, and wording: the client is neither the owner nor a
    super-user)."""
    return TransactionNotOwned(
        f"Client ({caller.role}) is neither the owner of the transaction {txn_id} "
        "nor a super user"
    )
