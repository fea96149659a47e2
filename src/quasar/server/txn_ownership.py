"""Who a connection is to the transaction coordinator, and the refusals that follow.

A transaction belongs to the role that opened it (``quasar.transaction.coordinator.
ownership``). The coordinator checks ownership on ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN and END_TXN, as Pulsar does; quasar also refuses a SEND or an
ACK that carries another role's transaction id, so a role can neither slip messages
into nor acknowledge inside a transaction it did not open.

A connection's ``Caller`` is its role and whether that role is a super-user. As in
Pulsar, a super-user overrides ownership only with authentication and authorization
both on: with authentication off there is no role to trust (``ANONYMOUS``), and with
authorization off ``AuthorizationService.is_superuser`` is true for everyone, which
must not make everyone the owner of everything.

Without authentication every check here costs one attribute read: no transaction
gets an owner then, so there is nothing to compare.
"""

from __future__ import annotations

import logging

from quasar.errors import TransactionCoordinatorNotFound
from quasar.protocol.txn_id import TxnID
from quasar.transaction.coordinator.ownership import ANONYMOUS, Caller

from .context import ConnectionContext
from .permissions import require

__all__ = ["TxnOwnership"]

log = logging.getLogger(__name__)


class TxnOwnership:
    """The ownership view of one connection (one per handler object)."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx
        self._caller = ANONYMOUS

    def caller(self) -> Caller:
        """The connection's current role as a ``Caller`` (kept until the role changes,
        which a credential refresh may do)."""
        role = self._ctx.principal
        if role is None:
            return ANONYMOUS
        caller = self._caller
        if caller.role != role:
            authorization = self._ctx.authorization
            superuser = authorization.enabled and authorization.is_superuser(role)
            caller = self._caller = Caller(role, superuser)
        return caller

    def refuses(self, txn_id: TxnID) -> Caller | None:
        """The caller, if it may not use ``txn_id`` in a SEND or ACK; else None.

        Only a live transaction of a local coordinator is checked; one the coordinator
        does not know (never opened, ended, or a coordinator that is not loaded) is left
        to the topic and subscription, which answer it as they would without
        authentication.
        """
        if self._ctx.principal is None:
            return None
        transactions = self._ctx.service.transactions
        if transactions is None:
            return None
        try:
            tc = transactions.registry.route(txn_id)
        except TransactionCoordinatorNotFound:
            return None
        caller = self.caller()
        if not tc.refuses(txn_id, caller):
            return None
        log.warning(
            "%s: role %r used transaction %s, which it does not own",
            self._ctx.remote_address, caller.role, txn_id,
        )
        return caller

    def require_superuser(self, operation: str) -> None:
        """Refuse a broker-to-broker command (END_TXN_ON_PARTITION,
        END_TXN_ON_SUBSCRIPTION) to a role that is not a super-user, when
        authorization is on.

        Raises:
            AuthorizationError: authorization is on and the role is not a super-user.
        """
        authorization = self._ctx.authorization
        if authorization.enabled:
            allowed = authorization.is_superuser(self._ctx.principal)
            require(self._ctx, allowed, operation, "the transaction's participants")
