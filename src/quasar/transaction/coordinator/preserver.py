"""``TerminatedTxnPreserver``: how a coordinator remembers ended transactions (PIP-255).

A coordinator forgets a transaction once it is COMMITTED/ABORTED, so a retried END_TXN
(lost response, client timeout, broker restart) would get ``TransactionNotFound`` and
an application could not tell a commit that happened from one that did not. The
preserver keeps, per owner role and client name, the last ``persist_count``
transactions that role's client ended (id, COMMITTED/ABORTED, when the decision was
recorded). END_TXN for a transaction that is no longer live, sent with the client
name, is answered from it, if the caller may act on the transaction's owner
(``ownership.Caller``): the same role, or a super-user, or anyone for a transaction
opened without authentication. Keying by role as well as name means that a role that
sends another role's client name neither learns nor reuses that role's outcomes, and
cannot push them out of the bounded list with its own.

Memory and disk. Entries live in memory, grouped by (owner, client name), and in a
durable key/value store (the broker's is the compacted system topic
``persistent://pulsar/system/__terminated_txn_state_{tcId}``, one message per owner
and client name; key and value format in ``preserver_format``). Each key holds at most
``persist_count`` entries (the oldest is dropped first) and an entry expires
``persist_time_ms`` after its decision; a timer drops expired entries every
``expire_check_interval_ms``, and a key left empty is removed (a tombstone in the
store), so neither the number of entries per key nor the number of keys grows
without bound.

Append and flush are separate. ``append`` changes memory, marks the entry's key
dirty and returns a change number; ``flush`` returns once every change made before the
call (or up to a given change number) is durable. Flushes
coalesce: one round writes every dirty key (one message each), and flushes that
arrive while a round is in flight wait for it and, if it did not cover them, for the
next one. So the appends of many transactions ending together cost one write per
key rather than one per transaction.

Ordering with the coordinator (see ``coordinator.py``): a transaction is appended as
soon as its COMMITTING/ABORTING record is durable (the decision cannot change any
more, so it is stored as COMMITTED/ABORTED), and flushed before its terminal record
is written. Whenever a transaction has left the coordinator's memory, its outcome is
therefore durable here.

Failures never hang a caller: a store error, a flush that takes longer than
``flush_timeout_ms`` or a close fails ``flush`` with ``TransactionPreserverClosed``
(retryable). The changes stay dirty and go out with the next flush. Loading fails the
coordinator load (it is retried on the next connect), as in the PIP's implementation.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from prometheus_client import Histogram

from quasar.clock import Clock
from quasar.errors import CorruptRecordError, TransactionPreserverClosed
from quasar.protocol.txn_id import TxnID

from ..buffer.snapshot_store import MemorySnapshotStore
from ..scheduler import Scheduler, TimerHandle
from ..txn_status import TxnStatus
from .ownership import BROKER, Caller
from .preserver_format import (
    TerminatedTxn,
    decode_terminated_fields,
    encode_entries,
    encode_entry,
    entry_end_ms,
    entry_status,
    parse_preserver_key,
    preserver_key,
)

log = logging.getLogger(__name__)

TERMINATED_TXN_STATE_PREFIX = "__terminated_txn_state_"

#: Upper bounds (s) of the flush latency histogram; one more bucket counts the rest.
FLUSH_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
FLUSH_LATENCY_METRIC = "pulsar_txn_tc_preserver_flush_latency_seconds"


def _flush_latency_histogram() -> Histogram:
    # Not registered anywhere: preserver_metrics.PreserverMetrics reads it and adds the
    # coordinator's labels at scrape time.
    return Histogram(
        FLUSH_LATENCY_METRIC,
        "Duration of a preserver flush round",
        buckets=FLUSH_LATENCY_BUCKETS_S,
        registry=None,
    )


# An entry in memory is its 25 encoded bytes (``preserver_format.encode_entry``): a
# flush rewrites a client name's whole list, and joining kept bytes costs far less than
# packing every entry again (a tuple per entry would also cost more memory).


def terminated_txn_state_topic(tc_id: int) -> str:
    """``persistent://pulsar/system/__terminated_txn_state_<tc_id>`` (the PIP's name)."""
    return f"persistent://pulsar/system/{TERMINATED_TXN_STATE_PREFIX}{tc_id}"


def preserved_status(status: TxnStatus) -> TxnStatus:
    """What the preserver stores for a decided status: COMMITTING counts as COMMITTED,
    ABORTING as ABORTED (the decision is durable and cannot change)."""
    if status in (TxnStatus.COMMITTING, TxnStatus.COMMITTED):
        return TxnStatus.COMMITTED
    if status in (TxnStatus.ABORTING, TxnStatus.ABORTED):
        return TxnStatus.ABORTED
    raise AssertionError(f"an OPEN transaction is not preserved ({status.name})")


class PreserverStore(Protocol):
    """A durable key → bytes map that can be read whole (a compacted topic)."""

    async def items(self) -> dict[str, bytes]:
        """Every key with its latest value.

        Raises:
            Exception: the store cannot be read (the coordinator load fails).
        """
        ...

    async def write(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``; returns once it is durable."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key`` durably (a tombstone)."""
        ...


class MemoryPreserverStore(MemorySnapshotStore):
    """``PreserverStore`` in a dict, for tests (failure injection as its base:
    ``fail_writes``, ``hold``, ``hold_reads``, ``release``)."""

    def __init__(self) -> None:
        super().__init__()
        self._fail_reads = 0

    def fail_reads(self, times: int = 1) -> None:
        self._fail_reads = times

    async def items(self) -> dict[str, bytes]:
        if self._reads_held is not None:
            await self._reads_held.wait()
        if self._fail_reads > 0:
            self._fail_reads -= 1
            raise TransactionPreserverClosed("memory preserver store: injected read failure")
        return dict(self.data)


@dataclass
class PreserverStats:
    """One coordinator's preserver, for metrics (``pulsar_txn_tc_preserver_*``)."""

    entries: int = 0  # terminated transactions held now
    client_names: int = 0  # (owner, client name) keys with at least one entry
    appends: int = 0  # entries added (a repeated append of the same id is not counted)
    flushes: int = 0  # flush rounds that wrote something
    flush_failures: int = 0
    messages_written: int = 0  # one per dirty key per round (tombstones too)
    trimmed: int = 0  # dropped because a key held persist_count newer ones
    expirations: int = 0  # dropped because older than persist_time_ms
    restored: int = 0  # entries loaded when the coordinator started
    corrupt: int = 0  # stored values that could not be decoded (dropped)
    # Flush-round durations in seconds.
    flush_latency: Histogram = field(default_factory=_flush_latency_histogram)


class _State(Enum):
    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


class TerminatedTxnPreserver:
    """The terminated-transaction memory of coordinator ``tc_id``; see the module
    docstring. Disabled (every method a no-op, ``find`` finds nothing) when
    ``store`` is ``None`` or ``persist_count`` is 0."""

    def __init__(
        self,
        tc_id: int,
        store: PreserverStore | None,
        clock: Clock,
        scheduler: Scheduler,
        *,
        persist_count: int,
        persist_time_ms: int,
        expire_check_interval_ms: int,
        flush_timeout_ms: int,
    ) -> None:
        self._tc_id = tc_id
        self._store = store
        self._clock = clock
        self._scheduler = scheduler
        self._count = persist_count
        self._persist_time_ms = persist_time_ms
        self._expire_interval_ms = expire_check_interval_ms
        self._flush_timeout_ms = flush_timeout_ms
        # store key (``preserver_key(owner, client name)``) -> {least bits -> encoded
        # entry}, oldest first; only keys with entries.
        self._entries: dict[str, dict[int, bytes]] = {}
        # client name -> owner -> store key, for the keys in ``_entries``.
        self._keys: dict[str, dict[str | None, str]] = {}
        self._dirty: dict[str, int] = {}  # store key -> change number of its last change
        self._changes = 0  # change number of the last change
        self._durable = 0  # every change up to this number is durable
        # No entry ended before this (a lower bound, possibly stale after trimming):
        # an expiry check with nothing older than the cutoff costs O(1), not a scan.
        self._oldest_end_ms: int | None = None
        self._round: asyncio.Task[None] | None = None
        self._round_upto: int | None = None  # changes the latest round covers, once started
        self._closed: asyncio.Future[None] | None = None
        self._timer: TimerHandle | None = None
        self._state = _State.NEW
        self.stats = PreserverStats()

    @property
    def enabled(self) -> bool:
        return self._store is not None and self._count > 0

    @property
    def persist_count(self) -> int:
        return self._count

    def __len__(self) -> int:
        """Entries held."""
        return self.stats.entries

    def client_names(self) -> list[str]:
        """Client names with at least one entry (of any owner), in no particular
        order."""
        return list(self._keys)

    # ------------------------------------------------------------------ lifecycle

    async def load(self) -> None:
        """Read every client name's entries from the store (coordinator recovery).

        Expired entries are dropped and each key is cut to ``persist_count``; keys
        whose stored value changed that way are rewritten by the next flush.

        Raises:
            TransactionPreserverClosed: the store cannot be read (the cause chained).
        """
        assert self._state is _State.NEW, "load() once"
        self._closed = asyncio.get_running_loop().create_future()
        self._state = _State.OPEN
        if not self.enabled:
            return
        assert self._store is not None
        try:
            stored = await self._store.items()
        except Exception as exc:
            raise TransactionPreserverClosed(
                f"Transaction coordinator {self._tc_id}: cannot read the terminated "
                f"transactions: {exc}"
            ) from exc
        cutoff = self._cutoff()
        for stored_key, value in stored.items():
            try:
                entries = decode_terminated_fields(value)
            except CorruptRecordError as exc:
                log.error("tc %d: dropping unreadable preserved state of %r: %s",
                          self._tc_id, stored_key, exc)
                self.stats.corrupt += 1
                self._mark_dirty(stored_key)
                continue
            owner, name = parse_preserver_key(stored_key)
            key = preserver_key(owner, name)
            if key != stored_key:
                # A bare client name that looks like the JSON form: move its entries
                # to the name's proper key and remove the old one.
                self._mark_dirty(stored_key)
            txns = self._entries.get(key, {})
            held = len(txns)
            loaded = 0
            for most, least, status, end_ms in entries:
                if most != self._tc_id:
                    self.stats.corrupt += 1
                elif end_ms < cutoff:
                    self.stats.expirations += 1
                else:
                    txns[least] = encode_entry(most, least, status, end_ms)
                    loaded += 1
            if txns:
                self._note_end(min(entry_end_ms(e) for e in txns.values()))
            changed = loaded != len(entries) or key != stored_key
            trimmed = self._trim(txns)
            changed |= trimmed > 0
            if txns:
                self._keep(key, owner, name, txns)
                self.stats.restored += len(txns) - held
                self.stats.entries += len(txns) - held
            if changed:
                self._mark_dirty(key)
        self._durable = 0 if self._dirty else self._changes
        self.stats.client_names = len(self._entries)

    def start(self) -> None:
        """Arm the expiry timer (once the coordinator serves)."""
        if self.enabled and self._state is _State.OPEN:
            self._arm()

    def close(self) -> None:
        """Stop: pending and later flushes fail with ``TransactionPreserverClosed``.

        A flush round in flight is not interrupted (a write cannot be taken back);
        ``wait_idle`` waits for it.
        """
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def wait_idle(self) -> None:
        """Wait (at most ``flush_timeout_ms``) for the flush round in flight, if any.

        A coordinator that is reloaded gets a new preserver over the same store; an old
        round landing after the new preserver's writes would put back an older value
        of a client name, so the old coordinator waits for it before it is gone.
        """
        current = self._round
        if current is None or current.done():
            return
        timed_out: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def time_out() -> None:
            if not timed_out.done():
                timed_out.set_result(None)

        timer = self._scheduler.call_later(self._flush_timeout_ms, time_out)
        try:
            await asyncio.wait({current, timed_out}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not current.done():
            log.warning("tc %d: closing with a terminated-transaction write in flight",
                        self._tc_id)

    # ------------------------------------------------------------------ queries

    def find(
        self, client_name: str | None, txn_id: TxnID, caller: Caller = BROKER
    ) -> TerminatedTxn | None:
        """How ``txn_id`` ended, if ``client_name`` has it preserved under an owner
        ``caller`` may act on (``ownership.Caller.may_act_on``)."""
        if not client_name or txn_id.most_bits != self._tc_id:
            return None
        owners = self._keys.get(client_name)
        if owners is None:
            return None
        least = txn_id.least_bits
        for owner, key in owners.items():
            entry = self._entries[key].get(least)
            if entry is not None and caller.may_act_on(owner):
                return self._unpack(least, entry, owner)
        return None

    def find_by_id(self, txn_id: TxnID) -> TerminatedTxn | None:
        """How ``txn_id`` ended, under whichever client name and owner it is preserved
        (for the admin API, which knows only the id). Walks every client name: an
        operator's lookup, never a request path."""
        if txn_id.most_bits != self._tc_id:
            return None
        for owners in self._keys.values():
            for owner, key in owners.items():
                entry = self._entries[key].get(txn_id.least_bits)
                if entry is not None:
                    return self._unpack(txn_id.least_bits, entry, owner)
        return None

    def terminated(self, client_name: str, caller: Caller = BROKER) -> list[TerminatedTxn]:
        """``client_name``'s preserved transactions under the owners ``caller`` may act
        on, oldest first per owner."""
        owners = self._keys.get(client_name)
        if not owners:
            return []
        return [
            self._unpack(least, e, owner)
            for owner, key in owners.items()
            if caller.may_act_on(owner)
            for least, e in self._entries[key].items()
        ]

    # ------------------------------------------------------------------ changes

    def append(
        self,
        txn_id: TxnID,
        status: TxnStatus,
        client_name: str | None,
        end_time_ms: int,
        owner: str | None = None,
    ) -> int:
        """Remember that ``txn_id`` of ``owner``'s ``client_name`` ended (or is
        decided) with ``status``; COMMITTING counts as COMMITTED, ABORTING as ABORTED.
        Repeating an append is a no-op. Not durable until ``flush``; returns the change
        number to pass to ``flush(upto=...)`` to wait for this entry only (0: nothing
        to wait for).

        Raises:
            TransactionPreserverClosed: closed.
        """
        if not self.enabled or not client_name:
            return 0
        self._check_open()
        assert txn_id.most_bits == self._tc_id, f"{txn_id} is not a transaction of tc {self._tc_id}"
        final = preserved_status(status)
        owners = self._keys.get(client_name)
        key = owners.get(owner) if owners is not None else None
        if key is None:
            key = preserver_key(owner, client_name)
            txns: dict[int, bytes] = {}
            self._keep(key, owner, client_name, txns)
        else:
            txns = self._entries[key]
        existing = txns.get(txn_id.least_bits)
        if existing is not None:
            # A decision never changes; a re-drive after a restart appends it again.
            assert entry_status(existing) == final, (
                f"{txn_id} preserved as {TxnStatus(entry_status(existing)).name}, "
                f"now {final.name}"
            )
            return self._dirty.get(key, 0)  # not dirty: already durable
        txns[txn_id.least_bits] = encode_entry(self._tc_id, txn_id.least_bits, final, end_time_ms)
        self._note_end(end_time_ms)
        self.stats.appends += 1
        self.stats.entries += 1 - self._trim(txns)
        self.stats.client_names = len(self._entries)
        return self._mark_dirty(key)

    def start_flush(self, upto: int) -> None:
        """Start making the changes up to ``upto`` durable, without waiting; ``flush``
        waits (and starts another round if this one failed)."""
        if self.enabled and self._state is _State.OPEN and self._durable < upto:
            self._current_round(upto)

    async def flush(self, upto: int | None = None) -> None:
        """Return once every change made before this call (or, with ``upto``, every
        change numbered up to it) is durable.

        Raises:
            TransactionPreserverClosed: closed, the store failed, or no round made the
                changes durable within ``flush_timeout_ms``. Nothing is lost: the
                changes go out with the next flush.
        """
        if not self.enabled:
            return
        self._check_open()
        target = self._changes if upto is None else upto
        if self._durable >= target:
            return
        assert self._closed is not None
        loop = asyncio.get_running_loop()
        timed_out: asyncio.Future[None] = loop.create_future()

        def time_out() -> None:
            if not timed_out.done():
                timed_out.set_result(None)

        timer = self._scheduler.call_later(self._flush_timeout_ms, time_out)
        try:
            while self._durable < target:
                self._check_open()
                current = self._current_round(target)
                done, _ = await asyncio.wait(
                    {current, timed_out, self._closed}, return_when=asyncio.FIRST_COMPLETED
                )
                if current in done:
                    exc = current.exception()
                    if exc is not None:
                        raise TransactionPreserverClosed(
                            f"Transaction coordinator {self._tc_id}: writing terminated "
                            f"transactions failed: {exc}"
                        ) from exc
                    continue
                self._check_open()
                raise TransactionPreserverClosed(
                    f"Transaction coordinator {self._tc_id}: writing terminated "
                    f"transactions took longer than {self._flush_timeout_ms} ms"
                )
        finally:
            timer.cancel()

    def expire(self) -> int:
        """Drop entries older than ``persist_time_ms`` now; returns how many. The
        changed keys are written in the background."""
        if not self.enabled or self._state is not _State.OPEN:
            return 0
        cutoff = self._cutoff()
        if self._oldest_end_ms is None or self._oldest_end_ms >= cutoff:
            return 0
        self._oldest_end_ms = None
        dropped = 0
        for key in list(self._entries):
            txns = self._entries[key]
            old: list[int] = []
            for least, entry in txns.items():
                end_ms = entry_end_ms(entry)
                if end_ms < cutoff:
                    old.append(least)
                else:
                    self._note_end(end_ms)
            if not old:
                continue
            for least in old:
                del txns[least]
            dropped += len(old)
            if not txns:
                self._forget(key)
            self._mark_dirty(key)
        if dropped:
            self.stats.expirations += dropped
            self.stats.entries -= dropped
            self.stats.client_names = len(self._entries)
            loop = asyncio.get_running_loop()
            loop.create_task(self._flush_quietly())
        return dropped

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise TransactionPreserverClosed(
                f"Transaction coordinator {self._tc_id}: the terminated-transaction "
                f"preserver is {self._state.value}"
            )

    def _cutoff(self) -> int:
        return self._clock.wall_ms() - self._persist_time_ms

    def _trim(self, txns: dict[int, bytes]) -> int:
        extra = len(txns) - self._count
        for _ in range(max(extra, 0)):
            del txns[next(iter(txns))]
        if extra > 0:
            self.stats.trimmed += extra
            return extra
        return 0

    def _note_end(self, end_time_ms: int) -> None:
        if self._oldest_end_ms is None or end_time_ms < self._oldest_end_ms:
            self._oldest_end_ms = end_time_ms

    def _mark_dirty(self, key: str) -> int:
        self._changes += 1
        self._dirty[key] = self._changes
        return self._changes

    def _keep(self, key: str, owner: str | None, name: str, txns: dict[int, bytes]) -> None:
        """Hold ``txns`` under ``key``, the store key of ``owner`` and ``name``."""
        self._entries[key] = txns
        self._keys.setdefault(name, {})[owner] = key

    def _forget(self, key: str) -> None:
        """Drop ``key``, left without entries (its tombstone is the caller's)."""
        del self._entries[key]
        owner, name = parse_preserver_key(key)
        owners = self._keys[name]
        del owners[owner]
        if not owners:
            del self._keys[name]

    def _unpack(self, least: int, entry: bytes, owner: str | None) -> TerminatedTxn:
        return TerminatedTxn(
            TxnID(self._tc_id, least),
            TxnStatus(entry_status(entry)),
            entry_end_ms(entry),
            owner,
        )

    def _current_round(self, target: int) -> asyncio.Task[None]:
        """A round that makes the changes up to ``target`` durable.

        The round in flight if it covers them (or has not started yet: it takes every
        change made until it starts), else a new one at once. Rounds pipeline rather
        than wait for each other: each writes every name dirty when it starts, so a
        later round carries an earlier one's changes too, the topic keeps the order of
        their writes, and a commit waits for one write instead of up to two (all of a
        busy client's transactions share one name).
        """
        current = self._round
        if (
            current is None
            or current.done()
            or (self._round_upto is not None and self._round_upto < target)
        ):
            self._round_upto = None  # set when the round starts
            current = asyncio.get_running_loop().create_task(self._flush_round())
            current.add_done_callback(_retrieve)
            self._round = current
        return current

    async def _flush_round(self) -> None:
        assert self._store is not None
        upto = self._changes
        if self._round is asyncio.current_task():
            self._round_upto = upto
        batch = dict(self._dirty)
        writes = []
        for key in batch:
            txns = self._entries.get(key)
            if txns:
                writes.append(self._store.write(key, encode_entries(txns.values())))
            else:
                writes.append(self._store.delete(key))
        started = self._clock.monotonic_ms()
        results = await asyncio.gather(*writes, return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            self.stats.flush_failures += 1
            raise failures[0]
        if writes:
            self.stats.flushes += 1
            self.stats.messages_written += len(writes)
            self.stats.flush_latency.observe((self._clock.monotonic_ms() - started) / 1000.0)
        for key, change in batch.items():
            if self._dirty.get(key) == change:
                del self._dirty[key]
        self._durable = max(self._durable, upto)

    async def _flush_quietly(self) -> None:
        try:
            await self.flush()
        except TransactionPreserverClosed as exc:
            log.info("tc %d: writing expired terminated transactions deferred: %s",
                     self._tc_id, exc)

    def _arm(self) -> None:
        self._timer = self._scheduler.call_later(self._expire_interval_ms, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._state is not _State.OPEN:
            return
        self.expire()
        self._arm()


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # reported to the flush callers; do not log it again
