"""Transaction commands on a server connection.

Coordinator commands (TC_CLIENT_CONNECT, NEW_TXN, ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN, END_TXN) go to the coordinator registry; the participant
commands (END_TXN_ON_PARTITION, END_TXN_ON_SUBSCRIPTION) go to the topic and
subscription, the same methods the in-process coordinator calls. Every request is
answered in its own response type with the request id, the transaction id and, on
failure, Pulsar's error code and message; nothing here can crash the connection.

Messages and acknowledgments inside a transaction are SEND and ACK commands carrying a
transaction id; the producer and consumer handlers take those.

Who may do what (``txn_ownership.py``): ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN
and END_TXN are for the transaction's owner or a super-user, else
``TransactionNotFound`` (the coordinator decides, from the connection's ``Caller``);
adding a partition also needs the produce right on it and adding a subscription the
consume right on its topic and subscription, else ``AuthorizationError``, and nothing
of the request is registered. The broker's own topics cannot be added at all
(``NotAllowedError``), as they cannot be produced to or subscribed to. Neither can a
participant the transaction's end could never reach (``txn_participants.py``): a name
that is not V2 or too long, a non-persistent topic, a missing namespace or subscribed
topic; so a commit never leaves some participants committed and one failing for ever.
NEW_TXN is bounded by ``maxActiveTransactionsPerCoordinator``,
``maxActiveTransactionsPerConnection`` (``connection_transactions.py``) and
``transactionMaxTimeoutMillis``; each refusal is counted (``broker/txn_limits.py``).
END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION, which one broker sends another, are
for super-users when authorization is on. On a cluster member TC_CLIENT_CONNECT for a
coordinator whose bundle another broker owns is ``ServiceNotReady``. Every refusal
goes out in the request's response; the connection stays open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from quasar.broker.transactions import TC_ASSIGN_TOPIC, TransactionService
from quasar.broker.txn_limits import (
    MAX_ACTIVE,
    MAX_ACTIVE_PER_CONNECTION,
    TIMEOUT,
    reason_of,
)
from quasar.errors import (
    InvalidTopicName,
    NotAllowedError,
    QuasarError,
    TopicNotFound,
    TransactionCoordinatorNotFound,
    take_refusal,
)
from quasar.protocol import pb
from quasar.protocol.topic_name import SYSTEM_TENANT, TopicName
from quasar.protocol.txn_id import TxnID
from quasar.transaction.coordinator import TransactionCoordinator
from quasar.transaction.coordinator.ownership import ANONYMOUS, Caller, not_owner
from quasar.transaction.errors import (
    ReachMaxActiveTxn,
    TransactionNotOwned,
    TransactionTimeoutTooLong,
)
from quasar.transaction.txn_status import TxnAction

from .connection_transactions import ConnectionTransactions
from .context import CommandHandler, ConnectionContext
from .permissions import refuse_system_topic, require
from .replies import TRANSACTIONS_NOT_ENABLED, error_code_and_message
from .txn_ownership import TxnOwnership
from .txn_participants import participant_name, require_reachable, subscription_name
from .wire import topic_of

log = logging.getLogger(__name__)

T = pb.BaseCommand

# The timeout of a NEW_TXN that asks for none (0 or absent), as Pulsar's Java client
# defaults it.
DEFAULT_TXN_TIMEOUT_MS = 60_000

# request type -> (response type, request field, response field)
_FIELDS = {
    T.TC_CLIENT_CONNECT_REQUEST: (
        T.TC_CLIENT_CONNECT_RESPONSE, "tcClientConnectRequest", "tcClientConnectResponse"
    ),
    T.NEW_TXN: (T.NEW_TXN_RESPONSE, "newTxn", "newTxnResponse"),
    T.ADD_PARTITION_TO_TXN: (
        T.ADD_PARTITION_TO_TXN_RESPONSE, "addPartitionToTxn", "addPartitionToTxnResponse"
    ),
    T.ADD_SUBSCRIPTION_TO_TXN: (
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        "addSubscriptionToTxn",
        "addSubscriptionToTxnResponse",
    ),
    T.END_TXN: (T.END_TXN_RESPONSE, "endTxn", "endTxnResponse"),
    T.END_TXN_ON_PARTITION: (
        T.END_TXN_ON_PARTITION_RESPONSE, "endTxnOnPartition", "endTxnOnPartitionResponse"
    ),
    T.END_TXN_ON_SUBSCRIPTION: (
        T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
        "endTxnOnSubscription",
        "endTxnOnSubscriptionResponse",
    ),
}


def _echoes_txn(resp_type: int, req_field: str, resp_field: str) -> bool:
    """Whether the request and its response both carry a transaction id."""
    req = getattr(pb.BaseCommand(), req_field)
    resp = getattr(pb.BaseCommand(type=resp_type), resp_field)
    return hasattr(req, "txnid_most_bits") and hasattr(resp, "txnid_most_bits")


# ... plus whether the response echoes the request's transaction id (decided once).
_RESPONSES = {t: (*f, _echoes_txn(*f)) for t, f in _FIELDS.items()}


def _txn_of(req: Any) -> TxnID:
    return TxnID(req.txnid_most_bits, req.txnid_least_bits)


def _client_name(req: Any) -> str | None:
    # PIP-255: optional on NEW_TXN (4) and END_TXN (5); old clients do not send it.
    return req.client_name if req.HasField("client_name") else None


def _action(value: int) -> TxnAction:
    try:
        return TxnAction(value)
    except ValueError:
        raise NotAllowedError(f"unknown transaction action {value}") from None


@contextmanager
def _counted(transactions: TransactionService) -> Iterator[None]:
    """Count a participant ``txn_participants`` refuses, under its reason."""
    try:
        yield
    except (InvalidTopicName, TopicNotFound, NotAllowedError) as e:
        # A participant's refusal counts in quasar_txn_refused_total alone, so the
        # hostile-input tag its name check put on it is dropped.
        take_refusal(e)
        transactions.limit_metrics.refused(reason_of(e))
        raise


def _is_live(transactions: TransactionService, txn: TxnID) -> bool:
    """Whether ``txn`` is open, committing or aborting, or being opened; one whose
    coordinator is gone counts as ended (that coordinator's own bound applies when it
    is back)."""
    try:
        return transactions.registry.get(txn.most_bits).counts(txn)
    except TransactionCoordinatorNotFound:
        return False


def _future_failure(f: asyncio.Future[Any]) -> BaseException | None:
    if f.cancelled():  # the coordinator closed under the request: ask again
        return TransactionCoordinatorNotFound("Transaction coordinator closed")
    return f.exception()


# What a request handled by callback starts: the future to wait for (None: answered
# at once), the transaction id for the answer, and how to read a failure off the
# finished future.
_Started = tuple[
    "asyncio.Future[Any] | None",
    "TxnID | None",
    "Callable[[asyncio.Future[Any]], BaseException | None]",
]




class TransactionCommands:
    """The transaction coordinator's and the participants' side of the wire."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx
        self._ownership = TxnOwnership(ctx)
        # Made on the first NEW_TXN: most connections never open a transaction.
        self._opened: ConnectionTransactions | None = None

    def handlers(self) -> dict[int, CommandHandler]:
        # The coordinator's hot requests wait by callback on the future of their log
        # record (or of the end): no task per request, which cost 6-8 us more than a
        # callback each (a transaction makes three or four of them).
        by_callback: dict[int, Callable[[Any], _Started]] = {
            T.NEW_TXN: self._start_new_txn,
            T.ADD_PARTITION_TO_TXN: self._start_add_partitions,
            T.ADD_SUBSCRIPTION_TO_TXN: self._start_add_subscriptions,
            T.END_TXN: self._start_end_txn,
        }
        by_task: dict[int, Callable[[Any], Awaitable[Any]]] = {
            T.TC_CLIENT_CONNECT_REQUEST: self._tc_connect,
            T.END_TXN_ON_PARTITION: self._end_on_partition,
            T.END_TXN_ON_SUBSCRIPTION: self._end_on_subscription,
        }
        spawn = self._ctx.spawn

        def in_task(handler: Callable[[Any], Awaitable[Any]]) -> CommandHandler:
            return lambda c, f: spawn(self._request(c, handler))

        def by_callback_of(start: Callable[[Any], _Started]) -> CommandHandler:
            return lambda c, f: self._request_now(c, start)

        handlers = {t: in_task(h) for t, h in by_task.items()}
        handlers.update({t: by_callback_of(s) for t, s in by_callback.items()})
        return handlers

    def _transactions(self) -> TransactionService:
        """The broker's transaction service.

        Raises:
            NotAllowedError: transactions are not enabled on this broker.
        """
        transactions = self._ctx.service.transactions
        if transactions is None:
            raise NotAllowedError(TRANSACTIONS_NOT_ENABLED)
        return transactions

    async def _request(
        self, cmd: pb.BaseCommand, handler: Callable[[Any], Awaitable[Any]]
    ) -> None:
        req = getattr(cmd, _RESPONSES[cmd.type][1])
        try:
            self._transactions()
            result = await handler(req)
        except Exception as e:
            self._answer(cmd, req, None, e)
            return
        self._answer(cmd, req, result if isinstance(result, TxnID) else None, None)

    def _request_now(self, cmd: pb.BaseCommand, start: Callable[[Any], _Started]) -> None:
        req = getattr(cmd, _RESPONSES[cmd.type][1])
        try:
            self._transactions()
            pending, txn, failure = start(req)
        except Exception as e:
            self._answer(cmd, req, None, e)
            return
        if pending is None:
            self._answer(cmd, req, txn, None)
            return
        pending.add_done_callback(lambda f: self._answer(cmd, req, txn, failure(f)))

    def _answer(
        self,
        cmd: pb.BaseCommand,
        req: Any,
        txn: TxnID | None,
        error: BaseException | None,
    ) -> None:
        """Answer ``req`` in its response type: success (with ``txn`` when given) or
        ``error`` as Pulsar's code and message."""
        resp_type, _, resp_field, echoes_txn = _RESPONSES[cmd.type]
        out = pb.BaseCommand(type=resp_type)
        resp = getattr(out, resp_field)
        resp.request_id = req.request_id
        if echoes_txn:
            resp.txnid_most_bits = req.txnid_most_bits
            resp.txnid_least_bits = req.txnid_least_bits
        if error is None:
            if txn is not None:
                resp.txnid_most_bits, resp.txnid_least_bits = txn.most_bits, txn.least_bits
        else:
            if not isinstance(error, QuasarError):  # a bug: answer, log, keep the connection
                log.error("transaction request failed", exc_info=error)
            elif isinstance(error, TransactionNotOwned):
                log.warning("%s: %s", self._ctx.remote_address, error)
            elif cmd.type == T.NEW_TXN:
                resp.txnid_most_bits = req.tc_id  # as Pulsar: the coordinator that failed
            code, message = error_code_and_message(self._ctx.refusals.counted(error))
            resp.error = code
            resp.message = message
        self._ctx.send_command(out)

    # -- coordinator side, answered by callback ------------------------------------------
    def _start_new_txn(self, req: Any) -> _Started:
        # The Java client puts milliseconds in txn_ttl_seconds (see the reference).
        timeout_ms = req.txn_ttl_seconds if req.HasField("txn_ttl_seconds") else 0
        transactions = self._transactions()
        tc = transactions.registry.get(req.tc_id)
        opened = self._opened_on_connection()
        try:
            opened.admit(lambda txn: _is_live(transactions, txn))
        except ReachMaxActiveTxn:
            transactions.limit_metrics.refused(MAX_ACTIVE_PER_CONNECTION)
            raise
        try:
            txn, durable = tc.new_txn_nowait(
                timeout_ms or DEFAULT_TXN_TIMEOUT_MS,
                owner=self._ctx.principal,
                client_name=_client_name(req),
            )
        except ReachMaxActiveTxn:
            transactions.limit_metrics.refused(MAX_ACTIVE)
            raise
        except TransactionTimeoutTooLong:
            transactions.limit_metrics.refused(TIMEOUT)
            raise
        opened.opened(txn)
        return durable, txn, _future_failure

    def _opened_on_connection(self) -> ConnectionTransactions:
        if self._opened is None:
            coordinator = self._ctx.service.config.transaction.coordinator
            self._opened = ConnectionTransactions(
                coordinator.max_active_transactions_per_connection
            )
        return self._opened

    def _start_add_partitions(self, req: Any) -> _Started:
        txn = _txn_of(req)
        transactions = self._transactions()
        tc = transactions.registry.route(txn)
        ctx = self._ctx
        caller = ANONYMOUS if ctx.principal is None else self._ownership.caller()
        with _counted(transactions):
            names = [participant_name(p) for p in req.partitions]
        for name in names:
            # The broker's own topics take no markers: an end there would fail for
            # ever and hold the coordinator's low watermark back. The test is a
            # necessary condition in attribute reads first; the full rule builds
            # names and costs microseconds.
            if name.tenant == SYSTEM_TENANT or "__" in name.local_name:
                refuse_system_topic(ctx, name, "produce")
        authorization = ctx.authorization
        if authorization.enabled:
            self._check_owner(tc, txn, caller)
            for name in names:
                allowed = authorization.can_produce(name, caller.role)
                require(ctx, allowed, "Produce", name.full)
        tc.require_live(txn)  # an unknown transaction is that, whatever it adds
        with _counted(transactions):
            for name in names:
                require_reachable(ctx.service, name, must_exist=False)
        partitions = [name.full for name in names]
        return tc.add_partitions_nowait(txn, partitions, caller), None, _future_failure

    def _start_add_subscriptions(self, req: Any) -> _Started:
        txn = _txn_of(req)
        transactions = self._transactions()
        tc = transactions.registry.route(txn)
        ctx = self._ctx
        caller = ANONYMOUS if ctx.principal is None else self._ownership.caller()
        with _counted(transactions):
            subs = [
                (participant_name(s.topic), subscription_name(s.subscription))
                for s in req.subscription
            ]
        for name, _ in subs:
            if name.tenant == SYSTEM_TENANT or "__" in name.local_name:
                refuse_system_topic(ctx, name, "subscribe")
        authorization = ctx.authorization
        if authorization.enabled:
            self._check_owner(tc, txn, caller)
            for name, sub in subs:
                allowed = authorization.can_consume(name, caller.role, sub)
                require(ctx, allowed, "Consume", f"{name.full} ({sub})")
        tc.require_live(txn)
        with _counted(transactions):
            for name, _ in subs:
                require_reachable(ctx.service, name, must_exist=True)
        pairs = [(name.full, sub) for name, sub in subs]
        return tc.add_subscriptions_nowait(txn, pairs, caller), None, _future_failure

    @staticmethod
    def _check_owner(tc: TransactionCoordinator, txn: TxnID, caller: Caller) -> None:
        """Ownership before the rights on what is added, as the coordinator would
        answer it: another role learns nothing of its topics' rights from a refusal.

        Raises:
            TransactionNotOwned: ``caller`` is neither the owner nor a super-user.
        """
        if tc.refuses(txn, caller):
            raise not_owner(txn, caller)

    def _start_end_txn(self, req: Any) -> _Started:
        txn = _txn_of(req)
        tc = self._transactions().registry.route(txn)
        caller = ANONYMOUS if self._ctx.principal is None else self._ownership.caller()
        driver = tc.end_txn_nowait(txn, _action(req.txn_action), _client_name(req), caller)
        return driver, None, (lambda t: tc.end_failure(txn, t))

    # -- coordinator side, answered from a task ---------------------------------------
    async def _tc_connect(self, req: Any) -> None:
        registry = self._transactions().registry
        ownership = self._ctx.service.ownership
        if ownership is not None and 0 <= req.tc_id < registry.coordinator_count:
            # A cluster member hosts only the coordinators of the bundles it owns; as
            # Pulsar, another is ServiceNotReady, and the client looks it up again.
            ownership.check_serving(TopicName.parse(f"{TC_ASSIGN_TOPIC}-partition-{req.tc_id}"))
        await registry.connect(req.tc_id)

    # -- participant side (also reached in-process through LocalTransactionBufferClient)
    async def _end_on_partition(self, req: Any) -> None:
        self._ownership.require_superuser("end a transaction on a partition")
        topic_of(req.topic)  # a bad name is InvalidTopicName, answered on the request
        lwm = req.txnid_least_bits_of_low_watermark if req.HasField(
            "txnid_least_bits_of_low_watermark"
        ) else -1
        await self._transactions().buffer_client.end_txn_on_partition(
            req.topic, _txn_of(req), _action(req.txn_action), lwm
        )

    async def _end_on_subscription(self, req: Any) -> None:
        self._ownership.require_superuser("end a transaction on a subscription")
        topic_of(req.subscription.topic)  # as on END_TXN_ON_PARTITION
        lwm = req.txnid_least_bits_of_low_watermark if req.HasField(
            "txnid_least_bits_of_low_watermark"
        ) else -1
        await self._transactions().buffer_client.end_txn_on_subscription(
            req.subscription.topic,
            req.subscription.subscription,
            _txn_of(req),
            _action(req.txn_action),
            lwm,
        )
