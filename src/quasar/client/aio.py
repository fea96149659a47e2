"""The asyncio API: ``quasar.client.aio.Client`` and its producers, consumers, readers.

Names and parameters follow ``pulsar.asyncio`` / ``pulsar.Client``; every I/O method is
a coroutine. Everything runs on the event loop of the caller: create the client inside
a running loop.

    client = Client("pulsar://127.0.0.1:6650")
    producer = await client.create_producer("my-topic")
    await producer.send(b"hello")

Transactions (``Client(..., enable_transaction=True)``)::

    txn = await client.new_transaction(timeout_ms=60_000)
    await producer.send(b"out", txn=txn)
    await consumer.acknowledge(msg, txn=txn)
    await txn.commit()          # or: await txn.abort()

Idempotent commit (PIP-255): ``commit()`` / ``abort()`` ask until the coordinator
answers definitely, within ``transaction_end_timeout_ms``; otherwise they raise
``TransactionOutcomeUnknown(txn_id=...)`` and ``client.resume_transaction(txn_id)``
gives a handle to ask again (see :mod:`quasar.client.transaction`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import secrets
import ssl
from collections.abc import Callable
from typing import Any

from quasar.client.admin import AdminClient
from quasar.client.authentication import Authentication, AuthenticationTLS
from quasar.client.backoff import Backoff
from quasar.client.client_transactions import ClientTransactions
from quasar.client.config import (
    DEFAULT_TRANSACTION_END_TIMEOUT_MS,
    ClientConfig,
    admin_url_for,
    is_tls_url,
    new_client_name,
    parse_service_url,
)
from quasar.client.connection import ConnectionPool
from quasar.client.consumer import ConsumerImpl
from quasar.client.consumer import State as ConsumerState
from quasar.client.dead_letter import ConsumerLetters, LetterTopics
from quasar.client.enums import (
    BatchingType,
    CompressionType,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from quasar.client.exceptions import InvalidConfiguration, TransactionsNotEnabled
from quasar.client.handles import Consumer, Producer, Reader
from quasar.client.http_lookup import HttpLookupService, http_base_urls, is_http_url
from quasar.client.lookup import LookupService, retry_until
from quasar.client.memory_limit import DEFAULT_MEMORY_LIMIT_BYTES
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.multi_consumer import ChildFactory, MultiTopicsConsumer
from quasar.client.options import (
    DEFAULT_SCHEMA,
    ConsumerOptions,
    ProducerOptions,
    ReaderOptions,
)
from quasar.client.partitioned_producer import PartitionedProducerImpl
from quasar.client.producer import ProducerImpl
from quasar.client.producer import State as ProducerState
from quasar.client.reader import reader_subscription_name
from quasar.client.receive_queue import ReceiveQueue
from quasar.client.schema import Schema
from quasar.client.tls import ClientTlsOptions
from quasar.client.transaction import (
    Transaction,
    TransactionImpl,
    TransactionRegistry,
)
from quasar.client.txn_coordinator import TransactionCoordinatorClient
from quasar.client.txn_journal import JournalEntry, TransactionJournal
from quasar.client.txn_state import TransactionState
from quasar.errors import AlreadyClosed
from quasar.protocol import TopicName
from quasar.protocol.txn_id import TxnID

log = logging.getLogger(__name__)

__all__ = [
    "Client",
    "ClientTransactions",
    "Consumer",
    "JournalEntry",
    "Message",
    "MessageId",
    "Producer",
    "Reader",
    "Transaction",
    "TransactionState",
    "TxnID",
]


def _txn_id(value: Any) -> TxnID:
    """``value`` as a TxnID; raises InvalidConfiguration unless two ints >= 0."""
    try:
        most, least = value
        if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            return TxnID(most, least)
    except (TypeError, ValueError):
        pass
    raise InvalidConfiguration(
        f"txn_id must be a TxnID or a (most_bits, least_bits) tuple, got {value!r}"
    )


def _full_name(topic: str) -> str:
    """Normalised topic name; raises InvalidTopicName before any I/O."""
    return TopicName.parse(topic).full


def _letters_of(letters: ConsumerLetters | None, topic: str) -> LetterTopics | None:
    """The letter topics of the consumer on ``topic`` (a partition uses its topic's)."""
    if letters is None:
        return None
    return letters.for_topic(TopicName.parse(topic).base.full)


# Options of pulsar.Client with nothing to do in this client: its I/O runs on one event
# loop, listeners on the facade's threads, and it logs through ``logging``.
_OPTIONS_WITHOUT_EFFECT = frozenset({
    "io_threads",
    "message_listener_threads",
    "concurrent_lookup_requests",
    "log_conf_file_path",
    "stats_interval_in_seconds",
    "logger",
})


def _check_other_options(options: dict[str, Any]) -> None:
    """Refuse what would otherwise be silently ignored (see ``Client``).

    Raises:
        InvalidConfiguration: an unknown option.
    """
    for name in options:
        if name in _OPTIONS_WITHOUT_EFFECT:
            continue
        raise InvalidConfiguration(f"unknown client option {name!r}")


def _tls_auth_files(
    service_url: str,
    auth: AuthenticationTLS,
    certificate_file_path: str | None,
    private_key_file_path: str | None,
) -> tuple[str, str]:
    """The client certificate and key of a client with TLS authentication: the
    broker reads the role from the certificate of the TLS handshake, so the
    authentication's files are the connection's client certificate.

    Raises:
        InvalidConfiguration: the URL is not ``pulsar+ssl://`` or ``https://`` (no
            handshake would carry the certificate), or other certificate files are
            given too.
    """
    if not is_tls_url(service_url):
        raise InvalidConfiguration(
            "AuthenticationTLS needs a pulsar+ssl:// or https:// service URL, "
            f"got {service_url!r}: the certificate is presented in the TLS handshake"
        )
    given = (certificate_file_path, private_key_file_path)
    files = (auth.certificate_path, auth.private_key_path)
    if given != (None, None) and given != files:
        raise InvalidConfiguration(
            "tls_certificate_file_path/tls_private_key_file_path differ from "
            "AuthenticationTLS's certificate and key: give the client certificate once"
        )
    return files


class Client:
    """Asyncio client: the factory for producers, consumers, readers and transactions.

    ``enable_transaction``: allow :meth:`new_transaction`. The coordinators are found
    and connected on the first one.

    ``client_name``: sent on every NEW_TXN and END_TXN so that the coordinator
    preserves the outcomes of this client's transactions (PIP-255); default a random
    ``quasar-<32 hex digits>`` per client instance. Name a client when another process
    must resume its transactions after a restart.

    ``transaction_end_timeout_ms``: how long one ``commit()`` / ``abort()`` keeps asking
    for a definite answer before it raises ``TransactionOutcomeUnknown`` (None: no
    bound). ``transaction_end_retry_timeout_ms`` is its deprecated former name; when
    given, it wins.

    ``transaction_journal_dir``: record each transaction there before END_TXN until
    its outcome is definite (see :mod:`quasar.client.txn_journal`).

    ``admin_url``: the broker's admin REST API for :meth:`get_client_transactions`;
    default ``http://<first host of service_url>:8080`` (Pulsar standalone's).

    ``memory_limit_bytes``: the bytes of messages waiting for receipts, over all of
    this client's producers (0: no bound; default 64 MiB, the C++ client's). A send
    beyond it waits (``block_if_queue_full``) or raises ``MemoryBufferIsFull``. With
    it, a producer's ``max_pending_messages=0`` means no count limit, as in Pulsar.

    ``service_url``: ``pulsar://`` or ``pulsar+ssl://`` (topics are looked up with
    binary commands), or the web service's ``http://`` or ``https://`` (topics are
    looked up over HTTP, see :mod:`quasar.client.http_lookup`; the admin URL is then
    the service URL).

    TLS (``pulsar+ssl://host:6651`` and ``https://`` service URLs, and an ``https://`` admin URL, whose
    default is ``https://<host>:8443`` then): ``tls_trust_certs_file_path``,
    ``tls_allow_insecure_connection``, ``tls_validate_hostname``,
    ``tls_certificate_file_path`` and ``tls_private_key_file_path`` as in
    ``pulsar.Client`` (see :mod:`quasar.client.tls`). ``use_tls`` is deprecated in
    Pulsar, where the URL decides; it is accepted when it agrees with the URL.

    ``authentication``: an ``AuthenticationToken``, ``AuthenticationBasic`` or
    ``AuthenticationTLS`` (``quasar.client.authentication``), sent on CONNECT, on
    every refresh the broker asks for, and to the admin API. ``AuthenticationTLS``'s
    certificate and key are the client certificate of every TLS handshake, as
    ``tls_certificate_file_path`` and ``tls_private_key_file_path`` would be.

    Other ``pulsar.Client`` options that change nothing in this client
    (``io_threads``, ``message_listener_threads``, ``concurrent_lookup_requests``,
    ``log_conf_file_path``, ``stats_interval_in_seconds``, ``logger``) are accepted
    so that code written for ``pulsar`` keeps working; any other option is refused.

    Raises:
        InvalidUrl: ``service_url`` is not ``pulsar://host:port``,
            ``pulsar+ssl://host:port``, ``http://host:port`` or ``https://host:port``.
        InvalidConfiguration: ``client_name`` is empty or not a string,
            ``memory_limit_bytes`` is negative, ``use_tls=True`` with a
            ``pulsar://`` URL, a TLS file cannot be used, ``authentication`` is not
            an ``Authentication``, ``AuthenticationTLS`` with a ``pulsar://`` URL
            or with other client certificate files, or an option is unknown.
    """

    def __init__(
        self,
        service_url: str,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10_000,
        listener_name: str | None = None,
        keep_alive_interval_seconds: float = 30,
        enable_transaction: bool = False,
        transaction_end_retry_timeout_ms: float | None = None,
        client_name: str | None = None,
        transaction_end_timeout_ms: float | None = DEFAULT_TRANSACTION_END_TIMEOUT_MS,
        transaction_journal_dir: str | os.PathLike[str] | None = None,
        admin_url: str | None = None,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
        authentication: Authentication | None = None,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        tls_certificate_file_path: str | None = None,
        tls_private_key_file_path: str | None = None,
        **kwargs: Any,
    ) -> None:
        # An http(s):// URL names the web service: topics are looked up over HTTP.
        if is_http_url(service_url):
            http_base_urls(service_url)
        else:
            parse_service_url(service_url)
        _check_other_options(kwargs)
        if authentication is not None and not isinstance(authentication, Authentication):
            raise InvalidConfiguration(
                "authentication must be a quasar.client.authentication.Authentication "
                f"(AuthenticationToken, AuthenticationBasic, ...), got {authentication!r}"
            )
        if use_tls and not is_tls_url(service_url):
            raise InvalidConfiguration(
                f"use_tls=True but the service URL {service_url!r} is not "
                "pulsar+ssl:// or https://: the URL decides (use_tls is deprecated)"
            )
        if isinstance(authentication, AuthenticationTLS):
            tls_certificate_file_path, tls_private_key_file_path = _tls_auth_files(
                service_url,
                authentication,
                tls_certificate_file_path,
                tls_private_key_file_path,
            )
        tls = ClientTlsOptions(
            trust_certs_file_path=tls_trust_certs_file_path,
            allow_insecure_connection=tls_allow_insecure_connection,
            validate_hostname=tls_validate_hostname,
            certificate_file_path=tls_certificate_file_path,
            private_key_file_path=tls_private_key_file_path,
        )
        if not is_tls_url(service_url) and tls != ClientTlsOptions():
            raise InvalidConfiguration(
                f"TLS options given for {service_url!r}: they only apply to "
                "pulsar+ssl:// and https:// service URLs"
            )
        if client_name is not None and (
            not isinstance(client_name, str) or not client_name
        ):
            raise InvalidConfiguration(
                f"client_name must be a non-empty string, got {client_name!r}"
            )
        journal_dir = (
            None if transaction_journal_dir is None else os.fspath(transaction_journal_dir)
        )
        self.config = ClientConfig(
            service_url=service_url,
            operation_timeout_seconds=operation_timeout_seconds,
            connection_timeout_ms=connection_timeout_ms,
            keep_alive_interval_seconds=keep_alive_interval_seconds,
            listener_name=listener_name or "",
            transaction_end_timeout_ms=transaction_end_timeout_ms,
            transaction_end_retry_timeout_ms=transaction_end_retry_timeout_ms,
            client_name=client_name or new_client_name(),
            transaction_journal_dir=journal_dir,
            admin_url=admin_url or admin_url_for(service_url),
            memory_limit_bytes=memory_limit_bytes,
            authentication=authentication,
            tls=tls,
        )
        assert self.config.admin_url is not None
        if self.config.use_tls or self.config.admin_url.startswith("https:"):
            self.config.ssl_context()  # a TLS file that cannot be used fails here
        self.pool = ConnectionPool(self.config)
        self.lookup = (
            HttpLookupService(self.config)
            if is_http_url(service_url)
            else LookupService(self.config, self.pool)
        )
        # Producers, consumers and readers to close with the client; closed ones are
        # dropped as new ones come (a long-lived client creating many must not keep
        # them all).
        self._handles: list[Any] = []
        self._prune_at = _PRUNE_AT_LEAST
        self._closed = False
        self.transaction_coordinator: TransactionCoordinatorClient | None = (
            TransactionCoordinatorClient(self.config, self.pool, self.lookup)
            if enable_transaction
            else None
        )
        self._transactions = TransactionRegistry()
        self._journal = None if journal_dir is None else TransactionJournal(journal_dir)

    @property
    def client_name(self) -> str:
        """The name NEW_TXN and END_TXN carry (given, or random per instance)."""
        return self.config.client_name

    @property
    def admin_url(self) -> str:
        """The admin REST API base URL :meth:`get_client_transactions` uses."""
        assert self.config.admin_url is not None
        return self.config.admin_url

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("client is closed")

    async def _partitions(self, topic: str) -> int:
        return await retry_until(
            lambda: self.lookup.partitioned_metadata(topic),
            self.config.operation_timeout_s,
            Backoff(self.config.initial_backoff_ms, self.config.max_backoff_ms),
            f"partition metadata of {topic}",
        )

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """Partition names of ``topic`` (or the topic itself when not partitioned)."""
        self._check_open()
        full = _full_name(topic)
        n = await self._partitions(full)
        if n == 0:
            return [full]
        name = TopicName.parse(full)
        return [name.partition(i).full for i in range(n)]

    async def create_producer(
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
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
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
        """Create a producer (see ``pulsar.Client.create_producer`` and
        :class:`~quasar.client.options.ProducerOptions`).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ProducerBusy,
            TopicNotFound, IncompatibleSchema, ...
        """
        self._check_open()
        options = ProducerOptions.from_arguments(locals())
        return await self.create_producer_with(topic, options)

    async def create_producer_with(
        self,
        topic: str,
        options: ProducerOptions,
        *,
        initial_subscription_name: str | None = None,
    ) -> Producer:
        """Create a producer from options already built (what both facades call).

        ``initial_subscription_name``: a subscription the broker creates with the
        producer (Pulsar's ``CommandProducer.initial_subscription_name``, which the
        dead-letter producer uses), so messages are retained from the first one.

        Raises:
            As :meth:`create_producer`.
        """
        self._check_open()
        full = _full_name(topic)
        txn_enabled = self.transaction_coordinator is not None
        n = await self._partitions(full)
        impl: ProducerImpl | PartitionedProducerImpl
        if n > 0:

            def make(name: str, index: int, max_pending: int) -> ProducerImpl:
                return ProducerImpl(
                    name,
                    index,
                    options,
                    self.pool,
                    self.lookup,
                    max_pending=max_pending,
                    txn_enabled=txn_enabled,
                    initial_subscription_name=initial_subscription_name,
                )

            impl = PartitionedProducerImpl(full, n, options, make)
        else:
            impl = ProducerImpl(
                full,
                -1,
                options,
                self.pool,
                self.lookup,
                txn_enabled=txn_enabled,
                initial_subscription_name=initial_subscription_name,
            )
        await impl.start()
        self._track(impl)
        return Producer(impl, full, options)

    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema = DEFAULT_SCHEMA,
        message_listener: Callable[[Consumer, Message], Any] | None = None,
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
        """Subscribe to a topic, a list of topics or a regex (see
        ``pulsar.Client.subscribe`` and :class:`~quasar.client.options.ConsumerOptions`).

        ``message_listener(consumer, message)`` runs on the loop for each message;
        it may be a coroutine function.

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ConsumerBusy,
            TopicNotFound, SubscriptionNotFound, ...
        """
        self._check_open()
        options = ConsumerOptions.from_arguments(locals())
        return await self.subscribe_with(topic, options)

    async def subscribe_with(
        self, topic: str | list[str] | re.Pattern[str], options: ConsumerOptions
    ) -> Consumer:
        """Subscribe with options already built (what both facades call).

        Raises:
            As :meth:`subscribe`.
        """
        self._check_open()
        letters = self._letters(options)
        impl: ConsumerImpl | MultiTopicsConsumer
        if isinstance(topic, re.Pattern):
            impl, name = await self._subscribe_pattern(topic, options, letters)
        elif isinstance(topic, (list, tuple)) or options.retry_enable:
            names = (
                [_full_name(t) for t in topic]
                if isinstance(topic, (list, tuple))
                else [_full_name(topic)]
            )
            name = ",".join(names)
            if letters is not None and options.retry_enable:
                # Pulsar's retry: the consumer also reads what reconsume_later parked.
                names += [letters.retry_topic(n) for n in names]
            impl = await self._multi(options, names, name, letters=letters)
        else:
            name = _full_name(topic)
            impl = await self._single_or_partitioned(options, name, letters=letters)
        self._track(impl)
        return Consumer(impl, name, options, letters)

    def _letters(self, options: ConsumerOptions) -> ConsumerLetters | None:
        """The dead-letter (and retry) topics of a consumer with a dead letter policy."""
        policy = options.dead_letter_policy
        if policy is None:
            return None

        async def make_producer(topic: str, subscription: str | None) -> Producer:
            return await self.create_producer_with(
                topic, ProducerOptions(), initial_subscription_name=subscription
            )

        return ConsumerLetters(policy, options.subscription_name, make_producer)

    def _child_factory(
        self,
        options: ConsumerOptions,
        start_message_id: MessageId | None,
        letters: ConsumerLetters | None = None,
    ) -> tuple[ConsumerOptions, ChildFactory]:
        # Children share one consumer name, as the C++ client's multi-topic consumer does.
        if options.consumer_name is None:
            options = dataclasses.replace(options, consumer_name=secrets.token_hex(5))

        def make(name: str, index: int, queue: ReceiveQueue, size: int) -> ConsumerImpl:
            return ConsumerImpl(
                name,
                index,
                options,
                self.pool,
                self.lookup,
                queue=queue,
                receiver_queue_size=size,
                start_message_id=start_message_id,
                letters=_letters_of(letters, name),
            )

        return options, make

    async def _multi(
        self,
        options: ConsumerOptions,
        topics: list[str],
        name: str,
        start_message_id: MessageId | None = None,
        letters: ConsumerLetters | None = None,
    ) -> MultiTopicsConsumer:
        options, make = self._child_factory(options, start_message_id, letters)
        multi = MultiTopicsConsumer(options, self.lookup, make, name)
        await multi.add_topics(topics)
        return multi

    async def _single_or_partitioned(
        self,
        options: ConsumerOptions,
        full: str,
        start_message_id: MessageId | None = None,
        letters: ConsumerLetters | None = None,
    ) -> ConsumerImpl | MultiTopicsConsumer:
        if await self._partitions(full) > 0:
            return await self._multi(options, [full], full, start_message_id, letters)
        impl = ConsumerImpl(
            full,
            -1,
            options,
            self.pool,
            self.lookup,
            start_message_id=start_message_id,
            letters=_letters_of(letters, full),
        )
        await impl.start()
        return impl

    async def _subscribe_pattern(
        self,
        pattern: re.Pattern[str],
        options: ConsumerOptions,
        letters: ConsumerLetters | None = None,
    ) -> tuple[MultiTopicsConsumer, str]:
        mode = options.regex_subscription_mode
        text = pattern.pattern
        # The namespace comes from the pattern's fixed prefix, as in pulsar.
        prefix = re.split(r"[\\^$.|?*+()\[\]{}]", text.split("://", 1)[-1], maxsplit=1)[
            0
        ]
        parts = prefix.split("/")
        namespace = "/".join(parts[:2]) if len(parts) >= 3 else "public/default"
        if "://" not in text:
            pattern = re.compile(
                f"persistent://{namespace}/{text}"
                if len(parts) < 3
                else f"persistent://{text}"
            )
        topics = await retry_until(
            lambda: self.lookup.topics_of_namespace(namespace, int(mode)),
            self.config.operation_timeout_s,
            Backoff(self.config.initial_backoff_ms, self.config.max_backoff_ms),
            f"topics of {namespace}",
        )
        matched = [t for t in topics if pattern.fullmatch(t)]
        multi = await self._multi(options, matched, pattern.pattern, letters=letters)
        multi.start_pattern_discovery(
            pattern, namespace, mode, options.pattern_auto_discovery_period
        )
        return multi, pattern.pattern

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Schema = DEFAULT_SCHEMA,
        reader_listener: Callable[[Reader, Message], Any] | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: int = 0,
    ) -> Reader:
        """Create a reader starting at ``start_message_id`` (see
        ``pulsar.Client.create_reader`` and :class:`~quasar.client.options.ReaderOptions`).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, TopicNotFound, ...
        """
        self._check_open()
        options = ReaderOptions.from_arguments(locals())
        return await self.create_reader_with(topic, options)

    async def create_reader_with(self, topic: str, options: ReaderOptions) -> Reader:
        """Create a reader from options already built (what both facades call).

        A reader is an exclusive, non-durable subscription that starts at
        ``options.start_message_id``.

        Raises:
            As :meth:`create_reader`.
        """
        self._check_open()
        full = _full_name(topic)
        subscription = ConsumerOptions(
            subscription_name=reader_subscription_name(options.subscription_role_prefix),
            consumer_type=ConsumerType.Exclusive,
            schema=options.schema,
            receiver_queue_size=options.receiver_queue_size,
            consumer_name=options.reader_name,
            is_read_compacted=options.is_read_compacted,
            start_message_id_inclusive=options.start_message_id_inclusive,
            crypto_key_reader=options.crypto_key_reader,
            crypto_failure_action=options.crypto_failure_action,
        )
        impl = await self._single_or_partitioned(
            subscription, full, options.start_message_id
        )
        self._track(impl)
        return Reader(impl, full)

    async def new_transaction(self, timeout_ms: int = 60_000) -> Transaction:
        """Open a transaction on the next coordinator (round-robin).

        The first call discovers the coordinators and connects to each of them.
        After ``timeout_ms`` without commit or abort the transaction is TIME_OUT on
        the client and the coordinator aborts it.

        Raises:
            TransactionsNotEnabled: the client was created without
                ``enable_transaction=True``.
            InvalidConfiguration: ``timeout_ms`` is not a positive integer.
            NotAllowedError: the broker has transactions disabled.
            TransactionCoordinatorNotFound, ConnectError, Timeout: no coordinator
                could be reached within the operation timeout.
            AlreadyClosed: the client is closed.
        """
        self._check_open()
        if self.transaction_coordinator is None:
            raise TransactionsNotEnabled(
                "transactions are not enabled on this client: create it with "
                "Client(..., enable_transaction=True)"
            )
        if (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int)
            or timeout_ms <= 0
        ):
            raise InvalidConfiguration(
                f"timeout_ms must be a positive number of milliseconds, got {timeout_ms!r}"
            )
        txn_id = await self.transaction_coordinator.new_txn(
            timeout_ms, self.config.client_name
        )
        impl = TransactionImpl(
            txn_id,
            timeout_ms,
            self.transaction_coordinator,
            self.config,
            journal=self._journal,
        )
        self._transactions.add(impl)
        return Transaction(impl)

    def _coordinator_client(self) -> TransactionCoordinatorClient:
        self._check_open()
        if self.transaction_coordinator is None:
            raise TransactionsNotEnabled(
                "transactions are not enabled on this client: create it with "
                "Client(..., enable_transaction=True)"
            )
        return self.transaction_coordinator

    def resume_transaction(
        self, txn_id: TxnID | tuple[int, int], client_name: str | None = None
    ) -> Transaction:
        """A handle to end a transaction again: ``await handle.commit()`` / ``abort()``.

        For a transaction whose outcome a ``commit()`` / ``abort()`` could not learn
        (``TransactionOutcomeUnknown.txn_id``), or one a crashed process left in the
        journal (:meth:`unfinished_transactions`). The handle takes no sends or acks
        and has no client-side timer; its END_TXN carries ``client_name``: the
        argument, else the name recorded in this client's journal for ``txn_id``,
        else this client's name. A same-action answer of success means the
        transaction did end that way; see :mod:`quasar.client.transaction`.

        Must be called on the client's event loop (no I/O happens until commit or
        abort).

        Raises:
            TransactionsNotEnabled: the client was made without
                ``enable_transaction=True``.
            InvalidConfiguration: ``txn_id`` is not two non-negative integers, or
                ``client_name`` is empty.
            AlreadyClosed: the client is closed.
        """
        coordinator = self._coordinator_client()
        tid = _txn_id(txn_id)
        if client_name is not None and (
            not isinstance(client_name, str) or not client_name
        ):
            raise InvalidConfiguration(
                f"client_name must be a non-empty string, got {client_name!r}"
            )
        if client_name is None and self._journal is not None:
            entry = self._journal.get(tid)
            if entry is not None:
                client_name = entry.client_name
        impl = TransactionImpl(
            tid,
            0,
            coordinator,
            self.config,
            client_name=client_name or self.config.client_name,
            journal=self._journal,
            resumed=True,
        )
        self._transactions.add(impl)
        return Transaction(impl)

    def unfinished_transactions(self) -> list[JournalEntry]:
        """The journal's records: transactions asked to end (by this or an earlier
        process using the same ``transaction_journal_dir``) whose outcome was never
        learned, oldest first. Each has ``txn_id``, ``action`` ("commit" or
        "abort"), ``client_name`` and ``recorded_at_ms``. Finish one with
        ``resume_transaction(e.txn_id, e.client_name)`` then ``commit()`` or
        ``abort()`` as ``e.action`` says; a definite answer removes the record.

        Raises:
            InvalidConfiguration: the client has no ``transaction_journal_dir``.
        """
        return self._require_journal().entries()

    def forget_unfinished_transaction(self, txn_id: TxnID | tuple[int, int]) -> None:
        """Remove ``txn_id``'s journal record (after the application settled its
        outcome some other way, e.g. a TransactionOutcomeUnknown it gave up on).

        Raises:
            InvalidConfiguration: no ``transaction_journal_dir``, or a bad ``txn_id``.
        """
        self._require_journal().remove(_txn_id(txn_id))

    def _require_journal(self) -> TransactionJournal:
        if self._journal is None:
            raise InvalidConfiguration(
                "the client has no transaction journal: create it with "
                "Client(..., transaction_journal_dir=DIR)"
            )
        return self._journal

    async def get_client_transactions(
        self, client_name: str | None = None
    ) -> ClientTransactions:
        """What the broker knows of ``client_name``'s transactions (default: this
        client's): the open ones and the preserved terminated ones with their
        status, from ``GET {admin_url}/admin/v3/transactions/clientTransactions/{name}``.

        Raises:
            ConnectError: the admin API could not be reached (check ``admin_url``).
            Timeout: no answer within the operation timeout.
            AdminApiError: an HTTP error (``exc.status``) or a malformed answer.
            AlreadyClosed: the client is closed.
        """
        self._check_open()
        name = self.config.client_name if client_name is None else client_name
        async with AdminClient(
            self.admin_url,
            self.config.operation_timeout_s,
            self.config.authentication,
            ssl_context=self._admin_tls(),
        ) as admin:
            return await admin.client_transactions(name)

    def _admin_tls(self) -> ssl.SSLContext | None:
        """The client's TLS context when the admin URL is ``https://``."""
        if self.admin_url.startswith("https:"):
            return self.config.ssl_context()
        return None

    def _track(self, impl: Any) -> None:
        if len(self._handles) >= self._prune_at:
            self._handles = [h for h in self._handles if not _is_closed(h)]
            self._prune_at = max(_PRUNE_AT_LEAST, 2 * len(self._handles))
        self._handles.append(impl)

    async def close(self) -> None:
        """Close every producer, consumer and reader, then the connections.

        Open transactions are left to time out on their coordinator; a commit or
        abort still waiting for its answer fails with AlreadyClosed.
        """
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(
            *(h.close() for h in self._handles), return_exceptions=True
        )
        self._handles.clear()
        self._stop_transactions()
        self.pool.close()
        await self.pool.wait_closed()
        await self.lookup.close()

    def _stop_transactions(self) -> None:
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.close()
        self._transactions.close()

    async def shutdown(self) -> None:
        """Drop connections without closing producers and consumers politely."""
        self._closed = True
        self._stop_transactions()
        self.pool.close()
        await self.pool.wait_closed()
        await self.lookup.close()


_PRUNE_AT_LEAST = 64


def _is_closed(handle: Any) -> bool:
    """True once a producer, consumer or reader implementation is closed for good."""
    if isinstance(handle, PartitionedProducerImpl):
        return all(_is_closed(p) for p in handle.partitions)
    if isinstance(handle, MultiTopicsConsumer):
        return handle.closed
    return handle.state in (ProducerState.CLOSED, ConsumerState.CLOSED)
