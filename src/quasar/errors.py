"""One error hierarchy for quasar, mapped one-to-one onto Pulsar's ``ServerError`` codes.

Every class carries three attributes that callers branch on (never on message text):

* ``code``: the ``ServerError`` value sent on the wire (``None`` for purely local errors);
* ``http_status``: the status the admin REST API answers with;
* ``retryable``: whether the same request may succeed if sent again unchanged.

Local misuse (a bad argument, an operation in the wrong state on *this* side) and peer
failure (a frame the other side sent that we cannot accept) are separate branches, the
way h11 separates ``LocalProtocolError`` from ``RemoteProtocolError``.

The admin REST API answers an error with its class's ``http_status`` and a body
``{"reason": str(exc)}``; the admin client (``quasar.client.admin``) turns such an
answer back into an instance of the same family with :func:`error_for_http_status`, so
the server side and the client side catch the same classes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar, TypeVar


class ServerError(IntEnum):
    """Pulsar's ``ServerError`` enum (PulsarApi.proto)."""

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25
    TransactionPreserverClosed = 26


class QuasarError(Exception):
    """Root of every error quasar raises on purpose."""

    code: ClassVar[ServerError | None] = None
    # Plain class attributes (not ClassVar): an error rebuilt from an admin answer
    # carries the status it was answered with on the instance.
    http_status: int = 500
    retryable: bool = False
    # Set on an error raised because a peer's input is malformed or beyond a bound:
    # the reason it is counted under (see "Refusals of hostile input" below).
    refusal: str | None = None


# --------------------------------------------------------------------------------------
# Refusals of hostile input. The check that refuses a peer's request tags its error
# with a reason; whoever answers the request (the connection's command handlers, the
# admin app's error middleware) counts the reason in
# quasar_hostile_input_refused_total{reason} on the broker's registry, once. So each
# check decides what it refuses, and counting happens where the answer leaves.

REFUSED_TOPIC_NAME = "topic_name"  # a malformed or over-long topic name
REFUSED_NAMESPACE_NAME = "namespace_name"  # a malformed namespace name
REFUSED_SUBSCRIPTION_NAME = "subscription_name"  # empty or over-long
REFUSED_CLIENT_NAME = "client_name"  # an over-long producer, consumer or client name
REFUSED_SYSTEM_TOPIC = "system_topic"  # producing to or subscribing to one
REFUSED_FRAME_SIZE = "frame_size"  # a frame over maxMessageSize: connection closed
REFUSED_PROTOCOL_VIOLATION = "protocol_violation"  # an undecodable or unexpected frame
REFUSED_PARTITIONS = "partitions"  # a partition count out of bounds
REFUSED_ADMIN_BODY_SIZE = "admin_body_size"  # an admin request body over 1 MiB
REFUSED_ADMIN_JSON_DEPTH = "admin_json_depth"  # admin JSON nested beyond the parser
REFUSED_SYSTEM_NAMESPACE = "system_namespace"  # deleting the system tenant or namespace
REFUSED_KEY_SHARED_RANGES = "key_shared_ranges"  # STICKY hash ranges no client would send
REFUSED_SCHEMA_DEFINITION = "schema_definition"  # an unparsable schema definition
REFUSED_SCHEMA_VERSIONS = "schema_versions"  # a topic's schema versions over the bound
REFUSED_TOPICS_PATTERN = "topics_pattern"  # over-long, unsupported or too costly
REFUSED_BUNDLES = "bundles"  # a namespace's bundles malformed or over the bound, a bad bundle name
REFUSED_BROKER_REDIRECT = "broker_redirect"  # a peer's LOOKUP redirect to no live member

# The reasons errors are tagged with; those the batch and ack-set bounds count
# directly are in ``quasar.protocol.batch_limits``.
REFUSAL_REASONS = (
    REFUSED_TOPIC_NAME,
    REFUSED_NAMESPACE_NAME,
    REFUSED_SUBSCRIPTION_NAME,
    REFUSED_CLIENT_NAME,
    REFUSED_SYSTEM_TOPIC,
    REFUSED_FRAME_SIZE,
    REFUSED_PROTOCOL_VIOLATION,
    REFUSED_PARTITIONS,
    REFUSED_ADMIN_BODY_SIZE,
    REFUSED_ADMIN_JSON_DEPTH,
    REFUSED_SYSTEM_NAMESPACE,
    REFUSED_KEY_SHARED_RANGES,
    REFUSED_SCHEMA_DEFINITION,
    REFUSED_SCHEMA_VERSIONS,
    REFUSED_TOPICS_PATTERN,
    REFUSED_BUNDLES,
    REFUSED_BROKER_REDIRECT,
)

_E = TypeVar("_E", bound="QuasarError")


def tag_refusal(error: _E, reason: str) -> _E:
    """Mark ``error`` as the refusal of hostile input counted under ``reason`` (one of
    ``REFUSAL_REASONS``); returns it, to be raised."""
    assert reason in REFUSAL_REASONS, reason
    error.refusal = reason
    return error


def take_refusal(error: BaseException) -> str | None:
    """The refusal reason ``error`` carries, if any, removed from it: an error that is
    answered twice (re-raised through two handlers) is still counted once."""
    if not isinstance(error, QuasarError) or error.refusal is None:
        return None
    reason = error.refusal
    error.refusal = None
    return reason


# --------------------------------------------------------------------------------------
# Protocol errors: local (we were asked to encode something invalid) vs remote (the peer
# sent bytes we cannot accept). A remote protocol error closes that one connection.


class ProtocolError(QuasarError):
    """A violation of the Pulsar binary protocol."""

    http_status = 400


class LocalProtocolError(ProtocolError):
    """This side tried to produce an invalid frame."""


class RemoteProtocolError(ProtocolError):
    """The peer sent a frame that cannot be decoded or is not allowed now."""


class FrameTooLarge(RemoteProtocolError):
    """A frame's declared size exceeds the configured maximum."""

    refusal = REFUSED_FRAME_SIZE


class ChecksumMismatch(RemoteProtocolError):
    """A payload's CRC32C does not match the checksum in its frame."""

    code = ServerError.ChecksumError


# --------------------------------------------------------------------------------------
# Broker errors: each maps onto exactly one ServerError code. The registry below rejects
# a second class for the same code, so the mapping stays one-to-one.


class BrokerError(QuasarError):
    """An error the broker reports to a client with a ServerError code."""

    code: ClassVar[ServerError | None] = ServerError.UnknownError


_REGISTRY: dict[ServerError, type[BrokerError]] = {}


def _register(cls: type[BrokerError]) -> type[BrokerError]:
    assert cls.code is not None
    if cls.code in _REGISTRY:
        raise TypeError(f"duplicate error class for {cls.code.name}")
    _REGISTRY[cls.code] = cls
    return cls


def _define(
    name: str, code: ServerError, http_status: int, retryable: bool = False
) -> type[BrokerError]:
    cls = type(
        name,
        (BrokerError,),
        {
            "code": code,
            "http_status": http_status,
            "retryable": retryable,
            "__doc__": f"Pulsar ServerError.{code.name}.",
            "__module__": __name__,
        },
    )
    return _register(cls)


UnknownError = _define("UnknownError", ServerError.UnknownError, 500)
MetadataError = _define("MetadataError", ServerError.MetadataError, 500, True)
PersistenceError = _define("PersistenceError", ServerError.PersistenceError, 500, True)
AuthenticationError = _define("AuthenticationError", ServerError.AuthenticationError, 401)
AuthorizationError = _define("AuthorizationError", ServerError.AuthorizationError, 403)
ConsumerBusy = _define("ConsumerBusy", ServerError.ConsumerBusy, 409)
ServiceNotReady = _define("ServiceNotReady", ServerError.ServiceNotReady, 503, True)
# Retryable, as Pulsar's clients treat it: producer_request_hold holds a producer's
# creation (and its sends) until the backlog is under its quota again.
ProducerBlockedQuotaExceededError = _define(
    "ProducerBlockedQuotaExceededError",
    ServerError.ProducerBlockedQuotaExceededError,
    429,
    True,
)
ProducerBlockedQuotaExceededException = _define(
    "ProducerBlockedQuotaExceededException",
    ServerError.ProducerBlockedQuotaExceededException,
    429,
)
ChecksumError = _define("ChecksumError", ServerError.ChecksumError, 400)
UnsupportedVersionError = _define(
    "UnsupportedVersionError", ServerError.UnsupportedVersionError, 400
)
TopicNotFound = _define("TopicNotFound", ServerError.TopicNotFound, 404)
SubscriptionNotFound = _define("SubscriptionNotFound", ServerError.SubscriptionNotFound, 404)
ConsumerNotFound = _define("ConsumerNotFound", ServerError.ConsumerNotFound, 404)
TooManyRequests = _define("TooManyRequests", ServerError.TooManyRequests, 429, True)
TopicTerminatedError = _define("TopicTerminatedError", ServerError.TopicTerminatedError, 409)
ProducerBusy = _define("ProducerBusy", ServerError.ProducerBusy, 409)
InvalidTopicName = _define("InvalidTopicName", ServerError.InvalidTopicName, 412)
IncompatibleSchema = _define("IncompatibleSchema", ServerError.IncompatibleSchema, 409)
ConsumerAssignError = _define("ConsumerAssignError", ServerError.ConsumerAssignError, 409)
TransactionCoordinatorNotFound = _define(
    "TransactionCoordinatorNotFound",
    ServerError.TransactionCoordinatorNotFound,
    503,
    True,
)
InvalidTxnStatus = _define("InvalidTxnStatus", ServerError.InvalidTxnStatus, 409)
NotAllowedError = _define("NotAllowedError", ServerError.NotAllowedError, 405)
TransactionConflict = _define("TransactionConflict", ServerError.TransactionConflict, 409)
TransactionNotFound = _define("TransactionNotFound", ServerError.TransactionNotFound, 404)
ProducerFenced = _define("ProducerFenced", ServerError.ProducerFenced, 409)
# Retryable: the outcome was not preserved yet; the same END_TXN later (after the
# coordinator reloads, or once the preserver's topic is back) gets a definite answer.
TransactionPreserverClosed = _define(
    "TransactionPreserverClosed", ServerError.TransactionPreserverClosed, 503, True
)


def error_for_code(code: int, message: str = "") -> BrokerError:
    """Build the exception instance for a wire ``ServerError`` code.

    Unknown codes (from a newer peer) become ``UnknownError``.
    """
    try:
        cls = _REGISTRY[ServerError(code)]
    except ValueError:
        cls = UnknownError
    return cls(message)


# --------------------------------------------------------------------------------------
# Storage errors.


class StorageError(QuasarError):
    """Base for storage failures."""

    code = ServerError.PersistenceError


class FatalStorageError(StorageError):
    """The storage can no longer guarantee durability (e.g. fsync failed).

    Never retried: after a failed fsync the page cache state is unknown, so the process
    must stop (the PostgreSQL "fsyncgate" lesson).
    """


class StorageFullError(StorageError, PersistenceError):  # type: ignore[misc, valid-type]
    """A write was refused because the disk is full (``ENOSPC``); a
    ``PersistenceError`` to whoever catches that.

    Retryable: nothing of the refused write stays visible (the torn tail is cut off
    before anything else is appended), what was stored before is intact, and the same
    write succeeds once space is freed. Pulsar answers a failed bookie write with
    ``PersistenceError`` too, and its clients resend after reconnecting.
    """

    http_status = 507
    retryable = True


class LedgerFencedError(StorageError):
    """A ledger this broker was writing was fenced by the topic's new owner (BookKeeper's
    ``LedgerFencedException``, Pulsar's ``ManagedLedgerFencedException``): the append
    is refused, never acknowledged, and the managed ledger takes no more writes.

    Retryable: the client reconnects, looks the topic up again and resends to the
    new owner, which recovered everything acknowledged before the fence.
    """

    retryable = True


class CorruptRecordError(StorageError):
    """A stored record cannot be read: it fails its length or checksum check, or the
    bytes are not a record this broker writes.

    ``log_name`` and ``position`` (``"ledger:entry"``) say where, when the reader
    knows; the operator needs both to set the record aside.
    """

    def __init__(
        self, message: str = "", *, log_name: str | None = None, position: str | None = None
    ) -> None:
        super().__init__(message)
        self.log_name = log_name
        self.position = position


class ManagedLedgerClosed(StorageError):
    """An operation was attempted on a closed or deleted managed ledger."""


class BadVersion(StorageError):
    """A metadata-store write's expected version did not match."""

    code = ServerError.MetadataError
    http_status = 409


class NotFound(StorageError):
    """A metadata-store key does not exist."""

    code = ServerError.MetadataError
    http_status = 404


# --------------------------------------------------------------------------------------
# Admin errors: what the admin REST API answers with. Raised by the broker's admin
# handlers and metadata resources, and raised again on the client side from the answer.
# One class per status is the one an answer maps back to (``error_for_http_status``);
# the more specific classes derive from it, so ``except ConflictError`` catches an
# ``AlreadyExistsError`` raised locally and a 409 answered remotely alike.


class AdminError(QuasarError):
    """An error the admin REST API answers with ``http_status`` and ``{"reason": ...}``.

    ``reason`` is the message. ``remote`` is true on an error the admin API answered
    with (rebuilt by ``error_for_http_status``: a peer failure) and false on one
    raised on this side, e.g. for a bad name before anything was sent (local misuse).
    An answer whose status has no class of its own becomes an ``AdminError`` carrying
    that status; it is retryable when the status is 5xx (the broker may be starting or
    busy).
    """

    remote: bool = False

    def __init__(self, reason: str = "", http_status: int | None = None) -> None:
        super().__init__(reason)
        if http_status is not None:
            self.http_status = http_status
            self.retryable = http_status >= 500

    @property
    def reason(self) -> str:
        """The server's explanation: the ``reason`` of the JSON answer."""
        return str(self)

    @property
    def status(self) -> int:
        """The HTTP status, as Pulsar's admin clients name it (same as ``http_status``)."""
        return self.http_status


class BadRequestError(AdminError):
    """The request itself is malformed: bad JSON, a body of the wrong shape (400)."""

    http_status = 400


class InvalidValueError(BadRequestError):
    """A JSON value of the wrong shape, e.g. a string where a number belongs (400)."""


class NotAuthorizedError(AdminError):
    """The caller's role may not do this: not a super-user, not an admin of the
    tenant, or without the grant the operation needs (401, as Pulsar answers)."""

    http_status = 401


class ResourceNotFoundError(AdminError):
    """The tenant, namespace or partitioned topic does not exist (404)."""

    http_status = 404


class NotAcceptableError(AdminError):
    """An unacceptable partition count (406, as Pulsar answers for ``partitions <= 0``)."""

    http_status = 406


class ConflictError(AdminError):
    """The request conflicts with existing state, e.g. deleting a non-empty tenant (409)."""

    http_status = 409


class AlreadyExistsError(ConflictError):
    """The tenant, namespace, topic or subscription already exists (409)."""


class PreconditionFailedError(AdminError):
    """Not allowed in the current state, e.g. deleting a topic or subscription that
    still has connected clients without ``force`` (412, as Pulsar answers)."""

    http_status = 412


class InvalidResourceError(PreconditionFailedError):
    """An invalid name or policy value (412 Precondition Failed, as in Pulsar)."""


class InvalidAdminResponse(AdminError):
    """The admin API's answer cannot be read: not JSON, or not the documented shape.

    A remote failure seen by the admin client; 502 as a gateway would answer it.
    """

    http_status = 502


_ADMIN_ERROR_BY_STATUS: dict[int, type[AdminError]] = {
    cls.http_status: cls
    for cls in (
        BadRequestError,
        NotAuthorizedError,
        ResourceNotFoundError,
        NotAcceptableError,
        ConflictError,
        PreconditionFailedError,
    )
}


def error_for_http_status(status: int, reason: str) -> AdminError:
    """The admin error for an HTTP error answer: ``status`` and the server's ``reason``.

    A status with a class of its own (400, 401, 404, 406, 409, 412) gives that class;
    any other gives an ``AdminError`` carrying ``status``.
    """
    cls = _ADMIN_ERROR_BY_STATUS.get(status)
    exc = AdminError(reason, http_status=status) if cls is None else cls(reason)
    exc.remote = True
    return exc


# --------------------------------------------------------------------------------------
# Client-side errors (raised by quasar.client; names follow the `pulsar` package).


class ClientError(QuasarError):
    """Base for errors raised by quasar's client."""


class Timeout(ClientError):
    """An operation did not complete within its timeout."""

    retryable = True


class ConnectError(ClientError):
    """The client could not connect to the broker (or to its admin API)."""

    retryable = True


class AlreadyClosed(ClientError):
    """The producer, consumer, reader or client is already closed."""
