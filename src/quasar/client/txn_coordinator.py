"""The client's side of the transaction coordinators (TCs): discovery, handshake, routing.

Coordinators are the partitions of ``persistent://pulsar/system/
transaction_coordinator_assign``: partition *i* is coordinator *i*, hosted by the broker
that owns that partition. :class:`TransactionCoordinatorClient` (Pulsar's
``TransactionCoordinatorClientImpl``):

* reads the partition count N with PARTITIONED_METADATA (N == 0 means one coordinator,
  id 0, on the unpartitioned name);
* keeps one :class:`CoordinatorHandler` per coordinator. A handler looks its partition
  up, takes the pooled connection to the owner and, when the broker speaks protocol
  version 19 or later, sends TC_CLIENT_CONNECT_REQUEST{tc_id} on every new connection
  (that is what makes the broker load the coordinator);
* sends NEW_TXN to the coordinators in turn (round-robin) and every later request of a
  transaction to coordinator ``txnid_most_bits``;
* answers ``TransactionCoordinatorNotFound`` by looking the coordinator up again,
  handshaking again and resending (the coordinator moved or is not loaded yet).

NEW_TXN, ADD_PARTITION_TO_TXN and ADD_SUBSCRIPTION_TO_TXN are retried on any retryable
error within the operation timeout: registrations are set-adds on the coordinator, and
a NEW_TXN whose answer was lost only leaves an empty transaction that the coordinator
aborts at its timeout. END_TXN is sent once per call of :meth:`end_txn_once`; whether
and how long to retry it is the transaction's decision (see ``transaction.py``).

NEW_TXN and END_TXN carry the client's name (PIP-255 ``client_name``): the coordinator
remembers the outcomes of that name's recent transactions, so a repeated END_TXN of a
transaction that already ended is answered from them instead of TransactionNotFound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from quasar.client.backoff import Backoff
from quasar.client.config import ClientConfig
from quasar.client.connection import ClientConnection, ConnectionPool, make_command
from quasar.client.lookup import LookupService
from quasar.errors import (
    AlreadyClosed,
    ConnectError,
    QuasarError,
    TransactionCoordinatorNotFound,
)
from quasar.protocol import pb
from quasar.protocol.txn_id import TxnID

log = logging.getLogger(__name__)
T = pb.BaseCommand
R = TypeVar("R")

TC_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
# Brokers at protocol version 19+ expect TC_CLIENT_CONNECT before coordinator requests.
TC_CONNECT_MIN_PROTOCOL_VERSION = 19


def _retrieve(task: asyncio.Task[None]) -> None:
    # Waiters see the error through shield(); a start nobody waits for any more
    # must not be logged as "exception never retrieved".
    if not task.cancelled():
        task.exception()


class CoordinatorHandler:
    """One coordinator: where it lives, and a connection on which it was greeted."""

    def __init__(
        self,
        tc_id: int,
        topic: str,
        config: ClientConfig,
        pool: ConnectionPool,
        lookup: LookupService,
    ) -> None:
        self.tc_id = tc_id
        self.topic = topic
        self._config = config
        self._pool = pool
        self._lookup = lookup
        self._url: str | None = None
        self._conn: ClientConnection | None = None
        # Concurrent requests after a reconnect share one lookup and one handshake.
        self._lock = asyncio.Lock()

    async def connection(self) -> ClientConnection:
        """A ready connection to the owner broker on which TC_CLIENT_CONNECT succeeded.

        Raises:
            ConnectError, Timeout: the broker could not be reached.
            TransactionCoordinatorNotFound: the broker does not host this coordinator
                (yet); retryable.
            NotAllowedError: the broker has transactions disabled.
        """
        conn = self._conn
        if conn is not None and conn.is_ready:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.is_ready:
                return conn
            self._conn = None
            try:
                if self._url is None:
                    self._url = await self._lookup.lookup(self.topic)
                conn = await self._pool.get(self._url)
                if conn.server_protocol_version >= TC_CONNECT_MIN_PROTOCOL_VERSION:
                    rid = self._config.next_request_id()
                    await conn.request(
                        make_command(
                            T.TC_CLIENT_CONNECT_REQUEST,
                            "tcClientConnectRequest",
                            request_id=rid,
                            tc_id=self.tc_id,
                        ),
                        rid,
                    )
            except QuasarError:
                # The coordinator may have moved: look it up again next time.
                self._url = None
                raise
            self._conn = conn
            return conn

    def invalidate(self, conn: ClientConnection | None) -> None:
        """Forget the greeted connection and the owner: the next request looks up,
        reconnects and handshakes again (what Pulsar's client does on
        TransactionCoordinatorNotFound)."""
        if conn is None or self._conn is conn:
            self._conn = None
        self._url = None

    async def request(
        self, build: Callable[[int], Any], on_sent: Callable[[], None] | None = None
    ) -> Any:
        """One attempt: connect if needed, send ``build(request_id)``, await the answer.

        ``on_sent`` is called once the request is handed to the connection (from then
        on a lost answer leaves the outcome unknown).

        Raises:
            Whatever the connection or the coordinator answered (see ``connection``
            and ``ClientConnection.request``).
        """
        conn = await self.connection()
        rid = self._config.next_request_id()
        if on_sent is not None:
            on_sent()
        try:
            return await conn.request(build(rid), rid)
        except (TransactionCoordinatorNotFound, ConnectError):
            self.invalidate(conn)
            raise


class TransactionCoordinatorClient:
    """All coordinators of the cluster, started on first use."""

    def __init__(
        self, config: ClientConfig, pool: ConnectionPool, lookup: LookupService
    ) -> None:
        self._config = config
        self._pool = pool
        self._lookup = lookup
        self._handlers: list[CoordinatorHandler] = []
        self._starting: asyncio.Task[None] | None = None
        self._next_tc = 0
        self._closed = False

    @property
    def coordinator_count(self) -> int:
        return len(self._handlers)

    @property
    def handlers(self) -> list[CoordinatorHandler]:
        return list(self._handlers)

    async def start(self) -> None:
        """Discover the coordinators and greet every one of them.

        Idempotent; concurrent callers share one attempt, and a failed attempt is
        made again by the next call.

        Raises:
            NotAllowedError: the broker has transactions disabled.
            TransactionCoordinatorNotFound, ConnectError, Timeout: a coordinator
                stayed unreachable for the whole operation timeout.
            AlreadyClosed: the client is closed.
        """
        self._check_open()
        if self._handlers:
            return
        if self._starting is None or self._starting.done():
            # A failed attempt is not kept: the next call discovers again.
            self._starting = asyncio.get_running_loop().create_task(self._start())
            self._starting.add_done_callback(_retrieve)
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        n = await self._retry(
            lambda: self._lookup.partitioned_metadata(TC_ASSIGN_TOPIC),
            "partition metadata of the transaction coordinators",
        )
        names = (
            [f"{TC_ASSIGN_TOPIC}-partition-{i}" for i in range(n)]
            if n > 0
            else [TC_ASSIGN_TOPIC]
        )
        handlers = [
            CoordinatorHandler(i, name, self._config, self._pool, self._lookup)
            for i, name in enumerate(names)
        ]
        results = await asyncio.gather(
            *(
                self._retry(
                    h.connection, f"connect to transaction coordinator {h.tc_id}"
                )
                for h in handlers
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        log.info("connected to %d transaction coordinator(s)", len(handlers))
        self._handlers = handlers

    def close(self) -> None:
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("client is closed")

    def handler_for(self, txn_id: TxnID) -> CoordinatorHandler:
        """The coordinator that owns ``txn_id`` (``txnid_most_bits`` is its id).

        Raises:
            TransactionCoordinatorNotFound: no coordinator has that id.
        """
        most = txn_id.most_bits
        if not 0 <= most < len(self._handlers):
            raise TransactionCoordinatorNotFound(
                f"no transaction coordinator {most} for transaction {txn_id} "
                f"({len(self._handlers)} known)"
            )
        return self._handlers[most]

    async def _retry(self, operation: Callable[[], Awaitable[R]], what: str) -> R:
        """Run ``operation`` until it succeeds, fails for good, or the operation
        timeout passes; then the last error is raised as it is (so a caller sees
        ``TransactionCoordinatorNotFound``, not a generic timeout).

        Raises:
            AlreadyClosed: the client closed meanwhile.
            The last error of ``operation``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.operation_timeout_s
        backoff: Backoff | None = None  # only a failure needs one
        while True:
            self._check_open()
            try:
                return await operation()
            except QuasarError as exc:
                if not exc.retryable or self._closed:
                    raise
                if backoff is None:
                    backoff = Backoff(
                        self._config.initial_backoff_ms, self._config.max_backoff_ms
                    )
                delay = backoff.next_delay_ms() / 1000.0
                if loop.time() + delay >= deadline:
                    raise
                log.debug("%s failed (%s), retrying in %.3fs", what, exc, delay)
                await asyncio.sleep(delay)

    # --- requests ------------------------------------------------------------------------

    async def new_txn(self, timeout_ms: int, client_name: str | None = None) -> TxnID:
        """Open a transaction on the next coordinator in turn (for ``client_name``).

        Raises:
            See :meth:`start`; plus the coordinator's error (e.g. NotAllowedError).
        """
        await self.start()
        handler = self._handlers[self._next_tc % len(self._handlers)]
        self._next_tc += 1

        def build(rid: int) -> Any:
            # The field is named seconds, but Pulsar's Java client puts milliseconds
            # there and brokers read it as milliseconds: do the same.
            return make_command(
                T.NEW_TXN,
                "newTxn",
                request_id=rid,
                txn_ttl_seconds=timeout_ms,
                tc_id=handler.tc_id,
                **({"client_name": client_name} if client_name else {}),
            )

        resp = await self._retry(
            lambda: handler.request(build),
            f"new transaction on coordinator {handler.tc_id}",
        )
        r = resp.newTxnResponse
        return TxnID(int(r.txnid_most_bits), int(r.txnid_least_bits))

    async def add_partition(self, txn_id: TxnID, partition: str) -> None:
        """ADD_PARTITION_TO_TXN for one topic partition (full name).

        Raises:
            TransactionNotFound, InvalidTxnStatus, TransactionCoordinatorNotFound,
            ConnectError, Timeout, ...
        """
        handler = self.handler_for(txn_id)

        def build(rid: int) -> Any:
            return make_command(
                T.ADD_PARTITION_TO_TXN,
                "addPartitionToTxn",
                request_id=rid,
                txnid_most_bits=txn_id.most_bits,
                txnid_least_bits=txn_id.least_bits,
                partitions=[partition],
            )

        await self._retry(
            lambda: handler.request(build), f"add {partition} to transaction {txn_id}"
        )

    async def add_subscription(
        self, txn_id: TxnID, topic: str, subscription: str
    ) -> None:
        """ADD_SUBSCRIPTION_TO_TXN for one (topic partition, subscription).

        Raises:
            TransactionNotFound, InvalidTxnStatus, TransactionCoordinatorNotFound,
            ConnectError, Timeout, ...
        """
        handler = self.handler_for(txn_id)

        def build(rid: int) -> Any:
            return make_command(
                T.ADD_SUBSCRIPTION_TO_TXN,
                "addSubscriptionToTxn",
                request_id=rid,
                txnid_most_bits=txn_id.most_bits,
                txnid_least_bits=txn_id.least_bits,
                subscription=[pb.Subscription(topic=topic, subscription=subscription)],
            )

        await self._retry(
            lambda: handler.request(build),
            f"add subscription {subscription} on {topic} to transaction {txn_id}",
        )

    async def end_txn_once(
        self,
        txn_id: TxnID,
        action: int,
        on_sent: Callable[[], None] | None = None,
        client_name: str | None = None,
    ) -> None:
        """Send one END_TXN (``pb.COMMIT`` / ``pb.ABORT``) and await the answer.

        ``on_sent``: see :meth:`CoordinatorHandler.request`. ``client_name``: the
        name the transaction was opened with (PIP-255). Discovers the coordinators
        first if this client has not yet (a resumed transaction).

        Raises:
            AlreadyClosed: the client is closed.
            TransactionCoordinatorNotFound: not processed; retry (after the handler
                looked the coordinator up again).
            ConnectError, Timeout: the answer was lost; the outcome is unknown.
            TransactionNotFound, InvalidTxnStatus, ...: the coordinator's answer.
        """
        self._check_open()
        if not self._handlers:
            await self.start()
        handler = self.handler_for(txn_id)

        def build(rid: int) -> Any:
            return make_command(
                T.END_TXN,
                "endTxn",
                request_id=rid,
                txnid_most_bits=txn_id.most_bits,
                txnid_least_bits=txn_id.least_bits,
                txn_action=action,
                **({"client_name": client_name} if client_name else {}),
            )

        await handler.request(build, on_sent)
