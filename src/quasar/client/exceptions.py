"""Client exceptions under the names the `pulsar` package uses.

Broker errors are the classes of :mod:`quasar.errors` (one per ``ServerError`` code);
where `pulsar` names one differently (``BrokerMetadataError`` for ``MetadataError``,
``TopicTerminated`` for ``TopicTerminatedError``, ...) the pulsar name is an alias of
the same class, so ``except pulsar.TopicTerminated`` and
``except quasar.errors.TopicTerminatedError`` catch the same thing. Errors that only a
client can raise (a full queue, a message too big, ...) are defined here.
"""

from __future__ import annotations

import quasar.errors as errors
from quasar.client.enums import Result
from quasar.errors import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    ChecksumError,
    ClientError,
    ConnectError,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    IncompatibleSchema,
    InvalidTopicName,
    InvalidTxnStatus,
    NotAllowedError,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerFenced,
    SubscriptionNotFound,
    Timeout,
    TopicNotFound,
    TransactionConflict,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
    TransactionPreserverClosed,
    UnknownError,
    UnsupportedVersionError,
)

# The root every quasar error derives from; `except PulsarException` catches them all.
PulsarException = errors.QuasarError

# Pulsar names that differ from quasar.errors: aliases of the same classes.
BrokerMetadataError = errors.MetadataError
BrokerPersistenceError = errors.PersistenceError
ServiceUnitNotReady = errors.ServiceNotReady
TooManyLookupRequestException = errors.TooManyRequests
TopicTerminated = errors.TopicTerminatedError
# Any error answer of the admin REST API (``status``, ``reason``): the admin errors'
# root, so ``except AdminApiError`` also catches ResourceNotFoundError, ConflictError...
AdminApiError = errors.AdminError
# quasar.errors' own names (InvalidTxnStatus, TransactionCoordinatorNotFound) are
# exported too: the same classes.
TransactionCoordinatorNotFoundError = TransactionCoordinatorNotFound
InvalidTxnStatusError = InvalidTxnStatus


class InvalidConfiguration(ClientError):
    """An argument or combination of arguments is not valid (local misuse)."""


class LookupError(ClientError):  # noqa: A001 - the pulsar name shadows the builtin
    """Topic lookup failed."""

    retryable = True


class ReadError(ClientError):
    """Reading from the connection failed."""

    retryable = True


class ErrorGettingAuthenticationData(ClientError):
    """The authentication plugin could not provide credentials."""


class NotConnected(ClientError):
    """The producer or consumer has no connection right now."""

    retryable = True


class InvalidMessage(ClientError):
    """A message could not be built or was rejected locally."""


class ConsumerNotInitialized(ClientError):
    """The consumer is not ready."""


class ProducerNotInitialized(ClientError):
    """The producer is not ready."""


class InvalidUrl(ClientError):
    """The service URL cannot be parsed."""


class OperationNotSupported(ClientError):
    """The operation is not supported in this configuration."""


class ProducerQueueIsFull(ClientError):
    """``max_pending_messages`` is reached and ``block_if_queue_full`` is off."""

    retryable = True


class MessageTooBig(ClientError):
    """The message exceeds the broker's ``max_message_size``."""


class CryptoError(ClientError):
    """End-to-end encryption failed: a key could not be read or used, or a payload
    did not decrypt."""


class CumulativeAcknowledgementNotAllowedError(ClientError):
    """Cumulative acks are not allowed on Shared and Key_Shared subscriptions."""


class MemoryBufferIsFull(ClientError):
    """The client's memory limit is reached."""

    retryable = True


class Interrupted(ClientError):
    """A blocking call was interrupted."""


# --- transactions --------------------------------------------------------------------
# The broker's transaction errors are the quasar.errors classes re-exported above
# (TransactionConflict, TransactionNotFound, InvalidTxnStatus(Error),
# TransactionCoordinatorNotFound(Error), TransactionPreserverClosed, NotAllowedError).
# These are the client's own.


class TransactionsNotEnabled(InvalidConfiguration):
    """``new_transaction`` on a client created without ``enable_transaction=True``."""


class TransactionHasOperationFailed(ClientError):
    """``commit()`` refused: a send or ack of the transaction failed.

    The client aborted the transaction instead (as Pulsar's client does), so none of
    its messages or acks take effect. ``failures`` holds the errors of the failed
    operations, in completion order.
    """

    def __init__(
        self, message: str, failures: list[BaseException] | None = None
    ) -> None:
        super().__init__(message)
        self.failures: list[BaseException] = list(failures or [])


class TransactionOutcomeUnknown(ClientError):
    """``commit()`` / ``abort()`` could not learn whether the transaction ended.

    ``txn_id`` is the transaction's :class:`~quasar.client.TxnID`: keep it, and ask
    again later with ``client.resume_transaction(txn_id).commit()`` (or ``abort()``).
    Raised in two cases, both after an END_TXN whose answer was lost:

    * no definite answer within ``transaction_end_timeout_ms`` (the coordinator was
      unreachable, its answers lost, or it answered TransactionCoordinatorNotFound /
      TransactionPreserverClosed throughout). ``txn.state()`` is still COMMITTING /
      ABORTING and calling ``commit()`` / ``abort()`` again resumes asking;
    * the retry was answered ``TransactionNotFound``: the coordinator no longer knows
      the transaction and its preserver does not remember it (preservation disabled,
      the entry trimmed or expired, a broker that does not implement PIP-255, or
      another client name), so the lost attempt may or may not have ended it.
      ``txn.state()`` is ERROR.

    Never resolved by re-sending the transaction's data: the caller decides.
    """

    def __init__(self, message: str, txn_id: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.txn_id = txn_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.txn_id))


_RESULT_BY_CLASS: dict[type[BaseException], Result] = {
    Timeout: Result.Timeout,
    ConnectError: Result.ConnectError,
    AlreadyClosed: Result.AlreadyClosed,
    UnknownError: Result.UnknownError,
    BrokerMetadataError: Result.BrokerMetadataError,
    BrokerPersistenceError: Result.BrokerPersistenceError,
    AuthenticationError: Result.AuthenticationError,
    AuthorizationError: Result.AuthorizationError,
    ConsumerBusy: Result.ConsumerBusy,
    ServiceUnitNotReady: Result.ServiceUnitNotReady,
    ProducerBlockedQuotaExceededError: Result.ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException: Result.ProducerBlockedQuotaExceededException,
    ChecksumError: Result.ChecksumError,
    UnsupportedVersionError: Result.UnsupportedVersionError,
    TopicNotFound: Result.TopicNotFound,
    SubscriptionNotFound: Result.SubscriptionNotFound,
    ConsumerNotFound: Result.ConsumerNotFound,
    TooManyLookupRequestException: Result.TooManyLookupRequestException,
    TopicTerminated: Result.TopicTerminated,
    ProducerBusy: Result.ProducerBusy,
    InvalidTopicName: Result.InvalidTopicName,
    IncompatibleSchema: Result.IncompatibleSchema,
    ConsumerAssignError: Result.ConsumerAssignError,
    TransactionCoordinatorNotFoundError: Result.TransactionCoordinatorNotFoundError,
    InvalidTxnStatusError: Result.InvalidTxnStatusError,
    NotAllowedError: Result.NotAllowedError,
    TransactionConflict: Result.TransactionConflict,
    TransactionNotFound: Result.TransactionNotFound,
    # pulsar's Result has no code for it (PIP-255 is not in the C++ client).
    TransactionPreserverClosed: Result.UnknownError,
    ProducerFenced: Result.ProducerFenced,
    InvalidConfiguration: Result.InvalidConfiguration,
    LookupError: Result.LookupError,
    ReadError: Result.ReadError,
    ErrorGettingAuthenticationData: Result.ErrorGettingAuthenticationData,
    NotConnected: Result.NotConnected,
    InvalidMessage: Result.InvalidMessage,
    ConsumerNotInitialized: Result.ConsumerNotInitialized,
    ProducerNotInitialized: Result.ProducerNotInitialized,
    InvalidUrl: Result.InvalidUrl,
    OperationNotSupported: Result.OperationNotSupported,
    ProducerQueueIsFull: Result.ProducerQueueIsFull,
    MessageTooBig: Result.MessageTooBig,
    CryptoError: Result.CryptoError,
    CumulativeAcknowledgementNotAllowedError: Result.CumulativeAcknowledgementNotAllowedError,
    MemoryBufferIsFull: Result.MemoryBufferIsFull,
    Interrupted: Result.Interrupted,
}


def result_for(exc: BaseException | None) -> Result:
    """The `pulsar` ``Result`` code for an exception (``Ok`` for ``None``)."""
    if exc is None:
        return Result.Ok
    for cls in type(exc).__mro__:
        result = _RESULT_BY_CLASS.get(cls)
        if result is not None:
            return result
    return Result.UnknownError


__all__ = [name for name in dir() if name[0].isupper() and name != "Result"] + [
    "result_for"
]
