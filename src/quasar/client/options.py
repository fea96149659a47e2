"""The options of producers, consumers and readers, each spelled out once.

``Client.create_producer``, ``Client.subscribe`` and ``Client.create_reader`` take the
keyword names and defaults of the official ``pulsar`` package, in both the asyncio
(:mod:`quasar.client.aio`) and the blocking (:mod:`quasar.client.sync`) client. Both
facades turn their keywords into one of these frozen dataclasses, which holds every
parameter with its single default and checks it once; the producer and consumer
implementations read their settings from it. ``tests/client/test_facades_match.py``
checks that the two facades and these fields agree (names, order, defaults).

Options that ``pulsar`` has and this client does not implement (stats
intervals, dead-letter and batch-receive policies, crypto failure actions) are accepted
and kept, so that code written for ``pulsar`` runs unchanged; the docstrings say which.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from quasar.client.consumer_policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    batch_receive_policy_of,
    dead_letter_policy_of,
)
from quasar.client.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.message_crypto import key_reader_of
from quasar.client.message_id import MessageId
from quasar.client.schema import BytesSchema, Schema

# ``pulsar``'s default schema. A schema object holds no state, so one instance serves
# every producer, consumer and reader, and both facades show the same default.
DEFAULT_SCHEMA: Schema = BytesSchema()

# How often ``reconsume_later`` retries a message before dead-lettering it when
# ``retry_enable`` is set without a dead letter policy (Pulsar's Java client default).
RETRY_MAX_RECONSUME_TIMES = 16

OptionsT = TypeVar("OptionsT", bound="_Options")


class _Options:
    """What the three options types share: building one from a facade's arguments."""

    @classmethod
    def from_arguments(cls: type[OptionsT], arguments: Mapping[str, Any]) -> OptionsT:
        """The options named by this type's fields, taken from a facade's ``locals()``.

        Each facade's parameters after ``topic`` are exactly these fields (a test
        checks it), so nothing is dropped on the way.
        """
        return cls(**{f.name: arguments[f.name] for f in dataclasses.fields(cls)})  # type: ignore[arg-type]

    def _set(self, name: str, value: Any) -> None:
        # Normalising in __post_init__ (None -> the default schema, pulsar's enums ->
        # ours, a private copy of properties) needs to write a frozen field once.
        object.__setattr__(self, name, value)


def _properties(value: Mapping[str, str] | None) -> dict[str, str]:
    """A private copy, so that changing the caller's dict later changes nothing here."""
    return dict(value or {})


@dataclasses.dataclass(frozen=True)
class ProducerOptions(_Options):
    """How a producer publishes (``pulsar.Client.create_producer``'s parameters).

    ``schema=None`` means :data:`DEFAULT_SCHEMA`. ``chunking_enabled`` splits a
    message larger than the broker's ``max_message_size`` into chunks (after
    compression and encryption); it excludes batching.

    Raises:
        InvalidConfiguration: ``lazy_start_partitioned_producers`` (every partition's
            producer starts at once), chunking together with batching, or only one
            of ``encryption_key`` and ``crypto_key_reader`` (encryption needs both),
            or a key reader of the wrong type.
    """

    producer_name: str | None = None
    schema: Schema = DEFAULT_SCHEMA
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30000
    compression_type: CompressionType = CompressionType.NONE
    max_pending_messages: int = 1000
    max_pending_messages_across_partitions: int = 50000
    block_if_queue_full: bool = False
    batching_enabled: bool = False
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: int = 10
    chunking_enabled: bool = False
    message_routing_mode: PartitionsRoutingMode = (
        PartitionsRoutingMode.RoundRobinDistribution
    )
    lazy_start_partitioned_producers: bool = False
    properties: dict[str, str] | None = None
    batching_type: BatchingType = BatchingType.Default
    encryption_key: str | None = None
    crypto_key_reader: Any = None
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    message_router: Callable[[Any, int], int] | None = None

    def __post_init__(self) -> None:
        if self.lazy_start_partitioned_producers:
            raise InvalidConfiguration(
                "lazy_start_partitioned_producers is not supported: every partition's "
                "producer starts with the producer"
            )
        if self.chunking_enabled and self.batching_enabled:
            raise InvalidConfiguration("chunking and batching cannot both be enabled")
        if bool(self.encryption_key) != (self.crypto_key_reader is not None):
            raise InvalidConfiguration(
                "end-to-end encryption needs both encryption_key and crypto_key_reader"
            )
        self._set("crypto_key_reader", key_reader_of(self.crypto_key_reader))
        if self.schema is None:
            self._set("schema", DEFAULT_SCHEMA)
        self._set("compression_type", CompressionType(self.compression_type))
        self._set(
            "message_routing_mode", PartitionsRoutingMode(self.message_routing_mode)
        )
        self._set("batching_type", BatchingType(self.batching_type))
        self._set("access_mode", ProducerAccessMode(self.access_mode))
        self._set("properties", _properties(self.properties))


@dataclasses.dataclass(frozen=True)
class ConsumerOptions(_Options):
    """How a consumer subscribes and receives (``pulsar.Client.subscribe``'s
    parameters after ``topic``).

    ``schema=None`` means :data:`DEFAULT_SCHEMA`. ``dead_letter_policy`` and
    ``batch_receive_policy`` take this client's policy objects or ``pulsar``'s
    (kept as ours). ``retry_enable`` (Pulsar's Java client) also subscribes to the
    retry topic and allows ``reconsume_later``. ``broker_consumer_stats_cache_time_ms``
    has no effect: like ``pulsar``'s Python consumer, this one has no broker stats
    call to cache. ``crypto_key_reader`` decrypts end-to-end encrypted messages; what
    it cannot decrypt is handled by ``crypto_failure_action``. Chunked messages are
    reassembled within ``max_pending_chunked_message``,
    ``auto_ack_oldest_chunked_message_on_queue_full`` and
    ``expire_time_of_incomplete_chunked_message_ms`` (the C++ client's option,
    which ``pulsar`` does not expose).

    Chunked messages are reassembled with the official client's limits:
    ``max_pending_chunked_message`` incomplete messages at most (0: no bound),
    ``auto_ack_oldest_chunked_message_on_queue_full`` and
    ``expire_time_of_incomplete_chunked_message_ms`` (0: never; the C++ client's
    setting, which `pulsar` does not expose) as ``quasar.client.chunk_assembly``
    describes.

    Raises:
        InvalidConfiguration: an empty ``subscription_name``, a
            ``receiver_queue_size`` below 1, or a policy of the wrong type.
    """

    subscription_name: str
    consumer_type: ConsumerType = ConsumerType.Exclusive
    schema: Schema = DEFAULT_SCHEMA
    message_listener: Callable[[Any, Any], Any] | None = None
    receiver_queue_size: int = 1000
    max_total_receiver_queue_size_across_partitions: int = 50000
    consumer_name: str | None = None
    unacked_messages_timeout_ms: int | None = None
    broker_consumer_stats_cache_time_ms: int = 30000
    negative_ack_redelivery_delay_ms: int = 60000
    is_read_compacted: bool = False
    properties: dict[str, str] | None = None
    pattern_auto_discovery_period: int = 60
    initial_position: InitialPosition = InitialPosition.Latest
    crypto_key_reader: Any = None
    replicate_subscription_state_enabled: bool = False
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    start_message_id_inclusive: bool = False
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    batch_index_ack_enabled: bool = False
    regex_subscription_mode: RegexSubscriptionMode = (
        RegexSubscriptionMode.PersistentOnly
    )
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    crypto_failure_action: int = 0
    expire_time_of_incomplete_chunked_message_ms: int = 60000
    retry_enable: bool = False

    def __post_init__(self) -> None:
        if not self.subscription_name:
            raise InvalidConfiguration("subscription_name must not be empty")
        if self.receiver_queue_size < 1:
            raise InvalidConfiguration("receiver_queue_size must be at least 1")
        if self.schema is None:
            self._set("schema", DEFAULT_SCHEMA)
        self._set("consumer_type", ConsumerType(self.consumer_type))
        self._set("initial_position", InitialPosition(self.initial_position))
        self._set(
            "regex_subscription_mode",
            RegexSubscriptionMode(self.regex_subscription_mode),
        )
        self._set("properties", _properties(self.properties))
        self._set("batch_receive_policy", batch_receive_policy_of(self.batch_receive_policy))
        self._set("crypto_key_reader", key_reader_of(self.crypto_key_reader))
        self._set(
            "crypto_failure_action", ConsumerCryptoFailureAction(self.crypto_failure_action)
        )
        policy = dead_letter_policy_of(self.dead_letter_policy)
        if policy is None and self.retry_enable:
            # The Java client's default when retries are enabled without a policy.
            policy = ConsumerDeadLetterPolicy(RETRY_MAX_RECONSUME_TIMES)
        self._set("dead_letter_policy", policy)


@dataclasses.dataclass(frozen=True)
class ReaderOptions(_Options):
    """Where a reader starts and how it reads (``pulsar.Client.create_reader``'s
    parameters after ``topic``).

    ``schema=None`` means :data:`DEFAULT_SCHEMA`; a ``receiver_queue_size`` below 1
    means 1. ``crypto_key_reader`` and ``crypto_failure_action`` as for a consumer.

    Raises:
        InvalidConfiguration: ``start_message_id`` is not a MessageId, or a
            ``reader_listener`` is given (read with ``read_next()`` instead).
    """

    start_message_id: MessageId
    schema: Schema = DEFAULT_SCHEMA
    reader_listener: Callable[[Any, Any], Any] | None = None
    receiver_queue_size: int = 1000
    reader_name: str | None = None
    subscription_role_prefix: str | None = None
    is_read_compacted: bool = False
    crypto_key_reader: Any = None
    start_message_id_inclusive: bool = False
    crypto_failure_action: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.start_message_id, MessageId):
            raise InvalidConfiguration("start_message_id must be a MessageId")
        if self.reader_listener is not None:
            raise InvalidConfiguration(
                "reader_listener is not supported; use read_next()"
            )
        if self.schema is None:
            self._set("schema", DEFAULT_SCHEMA)
        self._set("receiver_queue_size", max(1, self.receiver_queue_size))
        self._set("crypto_key_reader", key_reader_of(self.crypto_key_reader))
        self._set(
            "crypto_failure_action", ConsumerCryptoFailureAction(self.crypto_failure_action)
        )


__all__ = ["DEFAULT_SCHEMA", "ConsumerOptions", "ProducerOptions", "ReaderOptions"]
