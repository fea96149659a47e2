"""Enumerations and small policy objects with the names and values of the `pulsar` package.

The numeric values are the wire values (``CommandSubscribe.SubType``,
``CompressionType``, ...) wherever the wire has one, so a member can be put in a
protobuf field directly.
"""

from __future__ import annotations

from enum import IntEnum


class ConsumerType(IntEnum):
    """Subscription type (``CommandSubscribe.SubType``)."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(IntEnum):
    """Where a new durable subscription starts (``CommandSubscribe.InitialPosition``)."""

    Latest = 0
    Earliest = 1


class CompressionType(IntEnum):
    """Payload codec (``CompressionType`` in ``MessageMetadata``)."""

    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class PartitionsRoutingMode(IntEnum):
    """How a partitioned producer picks a partition for a message without a key."""

    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class BatchingType(IntEnum):
    """``Default`` puts any messages in one batch; ``KeyBased`` one batch per key."""

    Default = 0
    KeyBased = 1


class ProducerAccessMode(IntEnum):
    """``ProducerAccessMode`` on the wire."""

    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class ConsumerCryptoFailureAction(IntEnum):
    """What a consumer does with a message it cannot decrypt (``pulsar``'s values)."""

    FAIL = 0  # keep it from the application; it stays unacknowledged
    DISCARD = 1  # acknowledge it with a DecryptionError, unread
    CONSUME = 2  # deliver the still-encrypted payload


class KeySharedMode(IntEnum):
    """``KeySharedMode`` on the wire."""

    AutoSplit = 0
    Sticky = 1


class RegexSubscriptionMode(IntEnum):
    """``CommandGetTopicsOfNamespace.Mode`` on the wire."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class Result(IntEnum):
    """Outcome codes passed to ``send_async`` callbacks (same numbers as `pulsar`)."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


class ConsumerKeySharedPolicy:
    """Key_Shared options sent in ``SUBSCRIBE.keySharedMeta``.

    ``sticky_ranges`` is a list of inclusive ``(start, end)`` hash ranges and is only
    meaningful with ``KeySharedMode.Sticky``.

    Raises:
        ValueError: sticky ranges given with AutoSplit mode, or an empty/invalid range.
    """

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        if sticky_ranges and key_shared_mode != KeySharedMode.Sticky:
            raise ValueError("sticky_ranges need KeySharedMode.Sticky")
        for start, end in sticky_ranges or []:
            if start < 0 or end < start:
                raise ValueError(f"invalid sticky range ({start}, {end})")
        self._mode = KeySharedMode(key_shared_mode)
        self._allow_out_of_order = bool(allow_out_of_order_delivery)
        self._ranges = list(sticky_ranges or [])

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)


KeySharedPolicy = ConsumerKeySharedPolicy
