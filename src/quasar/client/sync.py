"""The synchronous facade with the `pulsar` package's names and signatures.

One event loop runs in a daemon thread per :class:`Client`; every blocking method
submits a coroutine of the asyncio core (:mod:`quasar.client.aio`) to it and waits for
the result. Message listeners and ``send_async`` callbacks run on a separate worker
thread (``message_listener_threads``), never on the loop thread, so they may call
blocking methods such as ``consumer.acknowledge``.

Transactions (``Client(url, enable_transaction=True)``)::

    txn = client.new_transaction(timeout_ms=60000)
    producer.send(b"out", txn=txn)
    consumer.acknowledge(msg, txn=txn)
    txn.commit()                  # blocks; or txn.commit_async() -> Future

Idempotent commit (PIP-255): a commit or abort whose outcome could not be learned
raises ``TransactionOutcomeUnknown`` with ``txn_id``; ``client.resume_transaction(
txn_id).commit()`` asks again (see :mod:`quasar.client.transaction`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import re
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

import quasar.client.aio as aio
from quasar.client.authentication import Authentication
from quasar.client.client_transactions import ClientTransactions
from quasar.client.config import DEFAULT_TRANSACTION_END_TIMEOUT_MS
from quasar.client.enums import (
    BatchingType,
    CompressionType,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from quasar.client.memory_limit import DEFAULT_MEMORY_LIMIT_BYTES
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.options import (
    DEFAULT_SCHEMA,
    ConsumerOptions,
    ProducerOptions,
    ReaderOptions,
)
from quasar.client.receipts import checked_send_callback
from quasar.client.schema import Schema
from quasar.client.send_pipe import CallbackRunner, SendPipe
from quasar.client.table_view import TableView, open_table_view
from quasar.client.transaction import TransactionImpl
from quasar.client.txn_journal import JournalEntry
from quasar.client.txn_state import TransactionState
from quasar.errors import AlreadyClosed
from quasar.protocol.txn_id import TxnID

R = TypeVar("R")
_LISTENER_PREFIX = "quasar-listener"

_SEND_KWARGS = (
    "properties",
    "partition_key",
    "ordering_key",
    "sequence_id",
    "replication_clusters",
    "disable_replication",
    "event_timestamp",
    "deliver_at",
    "deliver_after",
    "txn",
)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the I/O throughput), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _LoopThread:
    """An event loop in a daemon thread, and a way to run coroutines on it."""

    def __init__(self, name: str) -> None:
        self.loop = _new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._started = threading.Event()
        self._thread.start()
        self._started.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()
        # Cancel whatever is left (timers, reconnect tasks) before closing the loop.
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(
                asyncio.gather(*pending, return_exceptions=True)
            )
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the loop and wait for its result (re-raising its error)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "blocking quasar.client call from inside its own event loop"
            )
        if not self._thread.is_alive():
            coro.close()
            raise AlreadyClosed("client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()
            raise

    def submit(self, coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Start ``coro`` on the loop without waiting for it."""
        if not self._thread.is_alive():
            coro.close()
            raise AlreadyClosed("client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout=10)


class Producer:
    """Blocking producer (see ``pulsar.Producer``)."""

    def __init__(self, client: Client, impl: aio.Producer) -> None:
        self._client = client
        self._impl = impl
        self._pipe = SendPipe(
            client._loop.loop,
            impl.send_message_async,
            client._callbacks,
            impl.max_pending_messages,
            impl.options.block_if_queue_full,
        )

    def topic(self) -> str:
        return self._impl.topic()

    def producer_name(self) -> str | None:
        return self._impl.producer_name()

    def last_sequence_id(self) -> int:
        return self._impl.last_sequence_id()

    def is_connected(self) -> bool:
        return self._impl.is_connected()

    def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        """Publish and block until the broker stored the message; returns its id.

        ``txn``: publish in that transaction; consumers see the message once it
        commits, never if it aborts.

        Raises:
            AlreadyClosed, ProducerQueueIsFull, MessageTooBig, Timeout, BrokerError.
            InvalidTxnStatus: ``txn`` is no longer OPEN (timed out, ending, ended).
            TransactionNotFound, TransactionCoordinatorNotFound, ...: the partition
                could not be registered with ``txn``.
        """
        values = locals()
        kwargs = {k: values[k] for k in _SEND_KWARGS}
        return self._client._run(self._impl.send(content, **kwargs))

    def send_async(
        self,
        content: Any,
        callback: Callable[[Result, MessageId | None], None],
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
        txn: Transaction | None = None,
    ) -> None:
        """Queue a message; ``callback(result, message_id)`` runs on the listener thread.

        Blocks only while the queue is full and ``block_if_queue_full`` is set. A
        message that cannot be queued is reported through the callback too. With
        ``txn``, ``txn.commit()`` waits for this message and fails if it failed
        (the callback then gets the error, e.g. ``InvalidTxnStatusError`` when the
        transaction was no longer open).

        Raises:
            TypeError: ``callback`` is neither callable nor None (None: nobody is
                told, as in ``pulsar``); nothing is queued.
        """
        callback = checked_send_callback(callback)
        values = locals()
        kwargs = {k: values[k] for k in _SEND_KWARGS}
        # Built here so bad content raises TypeError/ValueError to the caller, as in
        # `pulsar`; everything after is asynchronous.
        message = self._impl.new_message(content, **kwargs)
        if isinstance(txn, Transaction):
            txn._track_pipe(self._pipe)
        self._pipe.submit(message, callback)

    def flush(self) -> None:
        """Block until every message sent so far is acknowledged by the broker.

        The ``send_async`` callbacks of those messages have run when it returns.
        """
        self._client._run(self._flush())
        self._client._callbacks_barrier()

    async def _flush(self) -> None:
        await self._pipe.drained()
        await self._impl.flush()

    def close(self) -> None:
        """Flush and close."""
        self._client._run(self._close())

    async def _close(self) -> None:
        await self._pipe.drained()
        await self._impl.close()


class Consumer:
    """Blocking consumer (see ``pulsar.Consumer``)."""

    def __init__(self, client: Client, impl: aio.Consumer) -> None:
        self._client = client
        self._impl = impl

    def topic(self) -> str:
        return self._impl.topic()

    def subscription_name(self) -> str:
        return self._impl.subscription_name()

    def consumer_name(self) -> str:
        return self._impl.consumer_name()

    def is_connected(self) -> bool:
        return self._impl.is_connected()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """Block for the next message.

        Raises:
            Timeout: nothing arrived within ``timeout_millis``.
            AlreadyClosed: the consumer is closed.
        """
        return self._client._run(self._impl.receive(timeout_millis))

    def batch_receive(self) -> list[Message]:
        """Block for the next batch under the consumer's ``batch_receive_policy``;
        empty when its timeout passed with nothing received.

        Raises:
            AlreadyClosed: the consumer is closed.
        """
        return self._client._run(self._impl.batch_receive())

    def reconsume_later(self, message: Message, delay: timedelta | int) -> None:
        """Redeliver ``message`` after ``delay`` (timedelta or ms) through the retry
        topic (Pulsar's Java ``reconsumeLater``); needs ``retry_enable=True``.

        Raises:
            InvalidConfiguration: retries are not enabled on this consumer.
        """
        self._client._run(self._impl.reconsume_later(message, delay))

    def acknowledge(
        self, message: Message | MessageId, txn: Transaction | None = None
    ) -> None:
        """Acknowledge a message; with ``txn``, in that transaction.

        A transactional ack blocks until the broker answered it.

        Raises:
            AlreadyClosed: the consumer is closed.
            With ``txn``: InvalidTxnStatus (not OPEN), TransactionConflict (acked
            already or pending in another transaction), TransactionNotFound,
            Timeout, ConnectError, ... (the ack failed, so the commit will).
        """
        self._client._run(self._impl.acknowledge(message, txn))

    def acknowledge_cumulative(
        self, message: Message | MessageId, txn: Transaction | None = None
    ) -> None:
        """Acknowledge a message and all before it; with ``txn``, in that transaction.

        Raises:
            CumulativeAcknowledgementNotAllowedError: on Shared / Key_Shared.
            With ``txn``: as :meth:`acknowledge`.
        """
        self._client._run(self._impl.acknowledge_cumulative(message, txn))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._client._run(self._impl.negative_acknowledge(message))

    def redeliver_unacknowledged_messages(self) -> None:
        self._client._run(self._impl.redeliver_unacknowledged_messages())

    def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish time in ms."""
        self._client._run(self._impl.seek(messageid))

    def get_last_message_id(self) -> MessageId:
        return self._client._run(self._impl.get_last_message_id())

    def unsubscribe(self) -> None:
        self._client._run(self._impl.unsubscribe())

    def close(self) -> None:
        self._client._run(self._impl.close())


class Reader:
    """Blocking reader (see ``pulsar.Reader``)."""

    def __init__(self, client: Client, impl: aio.Reader) -> None:
        self._client = client
        self._impl = impl

    def topic(self) -> str:
        return self._impl.topic()

    def is_connected(self) -> bool:
        return self._impl.is_connected()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """Block for the next message; raises Timeout after ``timeout_millis``."""
        return self._client._run(self._impl.read_next(timeout_millis))

    def has_message_available(self) -> bool:
        return self._client._run(self._impl.has_message_available())

    def seek(self, messageid: MessageId | int) -> None:
        self._client._run(self._impl.seek(messageid))

    def get_last_message_id(self) -> MessageId:
        """The last readable message's id (see ``aio.Reader.get_last_message_id``)."""
        return self._client._run(self._impl.get_last_message_id())

    def close(self) -> None:
        self._client._run(self._impl.close())


class Transaction:
    """Blocking handle of a transaction (``client.new_transaction()``).

    ``txn.id`` (or ``txn.id()``) is the :class:`TxnID` ``(most_bits, least_bits)``;
    ``txn.state()`` the :class:`TransactionState`. Pass it as ``txn=`` to
    ``producer.send`` / ``send_async`` and ``consumer.acknowledge`` /
    ``acknowledge_cumulative``; finish with ``commit()`` or ``abort()`` (blocking)
    or ``commit_async()`` / ``abort_async()`` (a ``concurrent.futures.Future``).
    """

    def __init__(self, client: Client, impl: TransactionImpl) -> None:
        self._client = client
        self._impl = impl
        # Send pipes that took messages of this transaction: commit and abort first
        # wait until those messages reached their producers, so that a send_async
        # made before commit() is an operation the commit waits for.
        self._pipes: set[SendPipe] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return repr(self._impl)

    @property
    def core(self) -> TransactionImpl:
        """The transaction's state machine, which the producers and consumers act on."""
        return self._impl

    @property
    def id(self) -> TxnID:
        """The transaction id; also callable: ``txn.id()``."""
        return self._impl.txn_id

    def state(self) -> TransactionState:
        return self._impl.state

    def timeout_ms(self) -> int:
        return self._impl.timeout_ms

    @property
    def client_name(self) -> str:
        """The client name its END_TXN carries (PIP-255)."""
        return self._impl.client_name

    def _track_pipe(self, pipe: SendPipe) -> None:
        with self._lock:
            self._pipes.add(pipe)

    async def _drained(self) -> None:
        with self._lock:
            pipes = list(self._pipes)
        for pipe in pipes:
            await pipe.drained()

    async def _commit(self) -> None:
        await self._drained()
        await self._impl.commit()

    async def _abort(self) -> None:
        await self._drained()
        await self._impl.abort()

    def commit(self) -> None:
        """Block until committed: waits for every send and ack of the transaction,
        then asks the coordinator until it answers.

        Raises:
            InvalidTxnStatus: not committable (aborting, aborted, timed out, ERROR),
                or the coordinator refused (state ERROR).
            TransactionNotFound: the coordinator does not know it (state ERROR).
            TransactionHasOperationFailed: a send or ack failed; it was aborted.
            TransactionOutcomeUnknown: no definite answer within
                ``transaction_end_timeout_ms``, or a retry answered
                TransactionNotFound; ``exc.txn_id`` is the id to resume.
            AlreadyClosed: the client is closed.
            OSError: the transaction journal could not record it.
        """
        self._client._run(self._commit())

    def abort(self) -> None:
        """Block until aborted (returns at once if already aborted or timed out).

        Raises:
            InvalidTxnStatus: committing, committed or ERROR, or refused.
            TransactionNotFound, TransactionOutcomeUnknown, AlreadyClosed.
        """
        self._client._run(self._abort())

    def commit_async(self) -> concurrent.futures.Future[None]:
        """Start the commit; the future completes with None or the commit's error."""
        return self._client._loop.submit(self._commit())

    def abort_async(self) -> concurrent.futures.Future[None]:
        """Start the abort; the future completes with None or the abort's error."""
        return self._client._loop.submit(self._abort())


class Client:
    """Blocking client (see ``pulsar.Client``): ``pulsar://`` and ``pulsar+ssl://``
    URLs, or the web service's ``http://`` and ``https://`` (topics looked up over
    HTTP).

    ``authentication`` (``AuthenticationToken``, ``AuthenticationBasic``, ...) and the
    options accepted without effect are described on :class:`quasar.client.aio.Client`.

    ``enable_transaction=True`` allows :meth:`new_transaction`. The transaction
    options (``client_name``, ``transaction_end_timeout_ms`` and its deprecated alias
    ``transaction_end_retry_timeout_ms``, ``transaction_journal_dir``, ``admin_url``),
    ``memory_limit_bytes`` and the TLS options (``tls_*``, ``use_tls``) are described
    on :class:`quasar.client.aio.Client`.

    Raises:
        InvalidUrl: the service URL is not ``pulsar://``, ``pulsar+ssl://``,
            ``http://`` or ``https://``.
        InvalidConfiguration: as :class:`quasar.client.aio.Client`.
    """

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        operation_timeout_seconds: int = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: Any = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        enable_transaction: bool = False,
        transaction_end_retry_timeout_ms: float | None = None,
        client_name: str | None = None,
        transaction_end_timeout_ms: float | None = DEFAULT_TRANSACTION_END_TIMEOUT_MS,
        transaction_journal_dir: str | os.PathLike[str] | None = None,
        admin_url: str | None = None,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    ) -> None:
        self._aio = aio.Client(
            service_url,
            authentication=authentication,
            use_tls=use_tls,
            tls_trust_certs_file_path=tls_trust_certs_file_path,
            tls_allow_insecure_connection=tls_allow_insecure_connection,
            tls_validate_hostname=tls_validate_hostname,
            tls_private_key_file_path=tls_private_key_file_path,
            tls_certificate_file_path=tls_certificate_file_path,
            operation_timeout_seconds=operation_timeout_seconds,
            connection_timeout_ms=connection_timeout_ms,
            listener_name=listener_name,
            enable_transaction=enable_transaction,
            transaction_end_retry_timeout_ms=transaction_end_retry_timeout_ms,
            client_name=client_name,
            transaction_end_timeout_ms=transaction_end_timeout_ms,
            transaction_journal_dir=transaction_journal_dir,
            admin_url=admin_url,
            memory_limit_bytes=memory_limit_bytes,
        )
        self._loop = _LoopThread("quasar-client-io")
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, message_listener_threads),
            thread_name_prefix=_LISTENER_PREFIX,
        )
        self._callbacks = CallbackRunner(self._executor)

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        return self._loop.run(coro)

    def _callbacks_barrier(self) -> None:
        """Wait until callbacks queued on the listener thread so far have run."""
        if threading.current_thread().name.startswith(_LISTENER_PREFIX):
            return  # called from a callback: waiting for ourselves would deadlock
        self._executor.submit(lambda: None).result()

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Schema = DEFAULT_SCHEMA,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 131072,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: str | None = None,
        crypto_key_reader: Any = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Message, int], int] | None = None,
    ) -> Producer:
        """Create a producer (parameters as ``pulsar.Client.create_producer``).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ProducerBusy,
            TopicNotFound, IncompatibleSchema, ...
        """
        options = ProducerOptions.from_arguments(locals())
        return Producer(self, self._run(self._aio.create_producer_with(topic, options)))

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema = DEFAULT_SCHEMA,
        message_listener: Callable[[Consumer, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: Any = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: Any = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: Any = None,
        crypto_failure_action: int = 0,
        expire_time_of_incomplete_chunked_message_ms: int = 60000,
        retry_enable: bool = False,
    ) -> Consumer:
        """Subscribe (parameters as ``pulsar.Client.subscribe``).

        ``message_listener(consumer, message)`` runs on the listener thread, one
        message at a time per consumer.

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ConsumerBusy,
            TopicNotFound, SubscriptionNotFound, ...
        """
        options = ConsumerOptions.from_arguments(locals())
        holder: list[Consumer] = []
        ready = threading.Event()
        if message_listener is not None:
            listener = message_listener

            def call(msg: Message) -> None:
                ready.wait()
                listener(holder[0], msg)

            async def aio_listener(_: aio.Consumer, msg: Message) -> None:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, call, msg
                )

            # The asyncio consumer calls its listener on the loop; this one hands
            # each message to the listener thread with the blocking consumer.
            options = dataclasses.replace(options, message_listener=aio_listener)
        consumer = Consumer(self, self._run(self._aio.subscribe_with(topic, options)))
        holder.append(consumer)
        ready.set()
        return consumer

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Schema = DEFAULT_SCHEMA,
        reader_listener: Any = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: int = 0,
    ) -> Reader:
        """Create a reader (parameters as ``pulsar.Client.create_reader``).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, TopicNotFound, ...
        """
        options = ReaderOptions.from_arguments(locals())
        return Reader(self, self._run(self._aio.create_reader_with(topic, options)))

    def create_table_view(
        self,
        topic: str,
        subscription_name: str | None = None,
        schema: Schema = DEFAULT_SCHEMA,
    ) -> TableView:
        """A view of the latest value per key of ``topic`` (see ``pulsar``'s TableView).

        ``subscription_name`` is accepted for compatibility; the view reads through a
        non-durable reader.

        Raises:
            InvalidTopicName, TopicNotFound, Timeout.
        """
        del subscription_name
        return self._run(
            open_table_view(self._aio, topic, schema, self._run, self._callbacks)
        )

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._run(self._aio.get_topic_partitions(topic))

    def new_transaction(self, timeout_ms: int = 60000) -> Transaction:
        """Open a transaction (the first call finds and connects the coordinators).

        Raises:
            TransactionsNotEnabled: the client was made without
                ``enable_transaction=True``.
            InvalidConfiguration: ``timeout_ms`` is not a positive integer.
            NotAllowedError: the broker has transactions disabled.
            TransactionCoordinatorNotFound, ConnectError, Timeout: no coordinator
                reachable within the operation timeout.
        """
        handle = self._run(self._aio.new_transaction(timeout_ms))
        return Transaction(self, handle.core)

    @property
    def client_name(self) -> str:
        """The name NEW_TXN and END_TXN carry (given, or random per instance)."""
        return self._aio.client_name

    @property
    def admin_url(self) -> str:
        """The admin REST API base URL :meth:`get_client_transactions` uses."""
        return self._aio.admin_url

    def resume_transaction(
        self, txn_id: TxnID | tuple[int, int], client_name: str | None = None
    ) -> Transaction:
        """A handle to commit or abort a transaction again (see
        :meth:`quasar.client.aio.Client.resume_transaction`)::

            try:
                txn.commit()
            except TransactionOutcomeUnknown as exc:
                client.resume_transaction(exc.txn_id).commit()   # later, or elsewhere

        Raises:
            TransactionsNotEnabled, InvalidConfiguration, AlreadyClosed.
        """

        async def resume() -> aio.Transaction:
            return self._aio.resume_transaction(txn_id, client_name)

        return Transaction(self, self._run(resume()).core)

    def unfinished_transactions(self) -> list[JournalEntry]:
        """Journal records a crashed process left (see
        :meth:`quasar.client.aio.Client.unfinished_transactions`)::

            for e in client.unfinished_transactions():
                txn = client.resume_transaction(e.txn_id, e.client_name)
                txn.commit() if e.action == "commit" else txn.abort()

        Raises:
            InvalidConfiguration: no ``transaction_journal_dir``.
        """
        return self._aio.unfinished_transactions()

    def forget_unfinished_transaction(self, txn_id: TxnID | tuple[int, int]) -> None:
        """Remove a journal record without asking the coordinator.

        Raises:
            InvalidConfiguration: no ``transaction_journal_dir``, or a bad ``txn_id``.
        """
        self._aio.forget_unfinished_transaction(txn_id)

    def get_client_transactions(
        self, client_name: str | None = None
    ) -> ClientTransactions:
        """The broker's open and preserved terminated transactions of ``client_name``
        (default: this client's), from the admin REST API (``admin_url``).

        Raises:
            ConnectError, Timeout, AdminApiError, AlreadyClosed.
        """
        return self._run(self._aio.get_client_transactions(client_name))

    def close(self) -> None:
        """Close everything the client created, then stop its thread. Idempotent."""
        try:
            self._run(self._aio.close())
        except AlreadyClosed:
            pass
        self._loop.stop()
        self._executor.shutdown(wait=False)

    def shutdown(self) -> None:
        try:
            self._run(self._aio.shutdown())
        except AlreadyClosed:
            pass
        self._loop.stop()
        self._executor.shutdown(wait=False)


__all__ = [
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "InitialPosition",
    "PartitionsRoutingMode",
    "ProducerAccessMode",
    "Producer",
    "Reader",
    "RegexSubscriptionMode",
    "Transaction",
    "TransactionState",
    "TxnID",
]
