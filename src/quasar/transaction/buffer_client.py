"""How a coordinator tells participants a transaction ended.

When a transaction commits or aborts, its coordinator sends the decision to every
partition it produced to (the partition's transaction buffer writes a commit/abort
marker) and to every subscription it acknowledged on (the pending-ack store applies or
drops the acks). ``TransactionBufferClient`` is that interface. Two implementations
are planned, both outside this package:

* **local**: the coordinator and the topic live in the same broker process, so the
  broker calls the topic's transaction buffer / pending-ack handle directly;
* **remote**: the topic is owned by another broker, so the call becomes
  ``END_TXN_ON_PARTITION`` / ``END_TXN_ON_SUBSCRIPTION`` over the wire, with
  ``txnid_least_bits_of_low_watermark`` set from ``low_watermark``.

Contract for implementations:

* Calls must be **idempotent** on the receiving side: the coordinator re-sends an end
  after a retryable failure, after a restart (recovery re-drives every COMMITTING/
  ABORTING transaction) and when a client repeats END_TXN.
* Failures raise an exception with a ``retryable`` attribute (every
  ``quasar.errors.QuasarError`` has one; ``error_for_code`` maps a wire error to
  one). ``TimeoutError`` and ``ConnectionError`` also count as retryable. The
  coordinator retries retryable failures every
  ``transaction_end_retry_interval_ms`` forever.
* A topic or subscription that no longer exists counts as done: answer success (as
  Pulsar's receiving broker does), or raise ``TopicNotFound`` /
  ``SubscriptionNotFound``, which the coordinator treats the same way; so does
  ``InvalidTopicName`` (a name that can never be served).
* ``low_watermark`` follows Pulsar: every transaction of this coordinator whose least
  bits are ``<= low_watermark`` has ended. It is ``-1`` when none has; the remote
  implementation must not put a negative number into the uint64 wire field (omit the
  field or send 0 only if transaction 0 has ended: Pulsar receivers compare with ``<=``).

``FakeTransactionBufferClient`` is the in-memory implementation for tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple, Protocol

from quasar.errors import ServerError, ServiceNotReady
from quasar.protocol.txn_id import TxnID

from .txn_status import TxnAction


class TransactionBufferClient(Protocol):
    """Sends an end decision to one participant; see the module docstring."""

    async def end_txn_on_partition(
        self, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        """End ``txn_id`` on one topic partition's transaction buffer.

        Raises:
            Exception: with ``retryable`` (see the module docstring).
        """
        ...

    async def end_txn_on_subscription(
        self,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        """End ``txn_id`` on one subscription's pending acks.

        Raises:
            Exception: with ``retryable`` (see the module docstring).
        """
        ...


class EndFailure(Enum):
    """How the coordinator reacts to a failed end call."""

    GONE = "gone"  # the participant no longer exists: counts as done
    RETRY = "retry"  # try again after transaction_end_retry_interval_ms
    FAIL = "fail"  # give up this attempt; the END_TXN request fails


# A name the receiving broker refuses as invalid can never become valid either.
_GONE_CODES = (
    ServerError.TopicNotFound, ServerError.SubscriptionNotFound, ServerError.InvalidTopicName
)


def classify_end_failure(exc: BaseException) -> EndFailure:
    """Classify an exception raised by a ``TransactionBufferClient`` call."""
    if getattr(exc, "code", None) in _GONE_CODES:
        return EndFailure.GONE
    if getattr(exc, "retryable", False) or isinstance(exc, TimeoutError | ConnectionError):
        return EndFailure.RETRY
    return EndFailure.FAIL


# --------------------------------------------------------------------------------------
# In-memory fake for tests.


class Participant(NamedTuple):
    """A partition (``subscription is None``) or a subscription of a topic."""

    topic: str
    subscription: str | None = None


class EndCall(NamedTuple):
    """One call the fake received."""

    participant: Participant
    txn_id: TxnID
    action: TxnAction
    low_watermark: int


class FakeTransactionBufferClient:
    """A ``TransactionBufferClient`` that records calls and fails or blocks on demand.

    * ``fail(participant, times=n)``: the next ``n`` calls for it raise (default
      ``ServiceNotReady``, which is retryable);
    * ``fail(participant, error=..., times=None)``: every call raises, until
      ``clear_failures``;
    * ``hold(participant)`` / ``hold()``: calls block until ``release``.

    ``calls`` lists every attempt; ``ended`` maps each participant to the
    ``(txn_id, action)`` pairs it acknowledged, in order (duplicates kept, so tests can
    see re-sent ends).
    """

    def __init__(self) -> None:
        self.calls: list[EndCall] = []
        self.ended: dict[Participant, list[tuple[TxnID, TxnAction]]] = {}
        self._failures: dict[Participant, list[BaseException]] = {}
        self._always: dict[Participant, BaseException] = {}
        self._hold_all = False
        self._held: set[Participant] = set()
        self._released = asyncio.Event()

    # ---------------------------------------------------------------- test controls

    def fail(
        self,
        participant: Participant,
        *,
        times: int | None = 1,
        error: BaseException | None = None,
    ) -> None:
        """Make calls for ``participant`` raise ``error``: ``times`` times, or always."""
        err = error if error is not None else ServiceNotReady("fake: not ready")
        if times is None:
            self._always[participant] = err
        else:
            self._failures.setdefault(participant, []).extend([err] * times)

    def clear_failures(self) -> None:
        self._failures.clear()
        self._always.clear()

    def hold(self, participant: Participant | None = None) -> None:
        """Block calls for ``participant`` (all participants if ``None``)."""
        if participant is None:
            self._hold_all = True
        else:
            self._held.add(participant)

    def release(self, participant: Participant | None = None) -> None:
        """Unblock ``participant`` (everything, including ``hold()``, if ``None``)."""
        if participant is None:
            self._hold_all = False
            self._held.clear()
        else:
            self._held.discard(participant)
        # Wake every waiter; each re-checks whether it is still held.
        self._released.set()
        self._released = asyncio.Event()

    def blocked(self) -> bool:
        return self._hold_all or bool(self._held)

    def ended_txns(self, participant: Participant) -> list[tuple[TxnID, TxnAction]]:
        return list(self.ended.get(participant, []))

    def participants_for(self, txn_id: TxnID) -> set[Participant]:
        """Participants that acknowledged an end of ``txn_id``."""
        return {p for p, done in self.ended.items() if any(t == txn_id for t, _ in done)}

    # ---------------------------------------------------------------- the protocol

    async def end_txn_on_partition(
        self, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        await self._call(Participant(topic), txn_id, action, low_watermark)

    async def end_txn_on_subscription(
        self,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        await self._call(Participant(topic, subscription), txn_id, action, low_watermark)

    async def _call(
        self, p: Participant, txn_id: TxnID, action: TxnAction, lwm: int
    ) -> None:
        self.calls.append(EndCall(p, txn_id, action, lwm))
        while self._hold_all or p in self._held:
            await self._released.wait()
        queued = self._failures.get(p)
        if queued:
            raise queued.pop(0)
        if p in self._always:
            raise self._always[p]
        self.ended.setdefault(p, []).append((txn_id, action))


def participants(
    partitions: Iterable[str], subscriptions: Iterable[tuple[str, str]]
) -> list[Participant]:
    """The participants of a transaction, partitions first, in the given order."""
    return [Participant(t) for t in partitions] + [
        Participant(t, s) for t, s in subscriptions
    ]
