"""``quasar perf transaction --txn-interval-ms N``: produce-only transactions
committed by time, the way Kafka's transactional producer is measured.

Each of ``-c`` *lanes* has its own producer per output topic and always one open
transaction. It sends into it continuously: a send returns once its message is queued,
so sends are pipelined, and the producer's ``--max-pending`` bounds the messages
awaiting a receipt (the lane waits for room, as any producer blocking on a full
queue). When the transaction is N ms old the lane switches::

    deadline - open time   new_transaction() starts in the background; sends go
                           on into the current transaction meanwhile
    next one open          commit(current) starts in the background and sends go on
                           at once into the next transaction, while the commit waits
                           for the receipts of the current one's last messages and
                           then ends it (END_TXN)

"Open time" is a moving average of the lane's NEW_TXN round trips, so that the switch
falls on the deadline and a transaction lives about N ms (Kafka's ``beginTransaction``
is local; Pulsar's NEW_TXN is a round trip to the coordinator). Commits overlap with
the next transaction's sends, as with Kafka's producer. A lane has at most one commit
in flight: if the previous commit has not finished at the next switch, the lane waits
for it, which slows the lane down when commits take longer than the interval.

Recorded per transaction (``quasar.perf.txn_recorder``): ``open`` (NEW_TXN, which
overlaps with sends), ``commit`` (``commit()`` called to completed, including the wait
for the last receipts, as Kafka's ``commitTransaction()`` flushes), ``transaction``
(opened to committed) and the messages it held. ``--abort-ratio`` aborts a share of
them instead; ``-ntxn`` counts transactions.

With ``-r`` the lanes share a rate: each sends its share, in bursts of what is due
whenever it wakes (the event loop's timers tick in milliseconds), so that both modes
can be compared at the same rate, by CPU per message.

With ``--txn-disable`` the same lanes send the same way without transactions (the
baseline): every N ms a lane records a *loop* holding the messages receipted since
the previous one, so msg/s compare directly; a failed send is counted as an error.

When the run stops (``-t``, Ctrl-C, ``-ntxn``) every lane commits its open transaction
(its messages are already sent) and waits for its commits; the baseline lanes flush.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from quasar.client import aio
from quasar.client.txn_state import TransactionState
from quasar.errors import AlreadyClosed, QuasarError
from quasar.perf.recorder import RunControl
from quasar.perf.txn_options import TransactionOptions
from quasar.perf.txn_recorder import TxnRecorder

__all__ = [
    "LaneContext",
    "OPEN_LEAD_WEIGHT",
    "Pace",
    "Receipts",
    "baseline_lane",
    "interval_lane",
]

# Weight of the latest NEW_TXN round trip in the moving average that says how early a
# lane opens its next transaction: a few switches settle it, one slow open does not.
OPEN_LEAD_WEIGHT = 0.25


class LaneContext(Protocol):
    """What a lane needs from its run (``quasar.perf.transaction`` provides it)."""

    opts: TransactionOptions
    client: aio.Client
    recorder: TxnRecorder
    control: RunControl
    payload: bytes

    def choose_abort(self) -> bool: ...


class Receipts:
    """The send callback of one transaction's (or one baseline lane's) messages.

    One object per transaction rather than a closure per message: the callback runs
    once per message, so it does as little as it can.
    """

    __slots__ = ("sent", "ok", "failed", "first_error")

    def __init__(self) -> None:
        self.sent = 0
        self.ok = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def __call__(self, error: BaseException | None, _message_id: Any) -> None:
        if error is None:
            self.ok += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = error


class Pace:
    """How many sends a lane may make at ``rate`` per second since ``start``."""

    __slots__ = ("rate", "start", "sent")

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start
        self.sent = 0

    def wait_s(self, now: float) -> float:
        """Seconds until the next send is due (0: it is due now)."""
        due = self.start + self.sent / self.rate
        return due - now if due > now else 0.0


def _pace(ctx: LaneContext, outputs: int, start: float) -> Pace | None:
    """The lane's share of ``-r``, counted in rounds of one send per output."""
    rate = ctx.opts.rate
    if rate <= 0:
        return None
    return Pace(rate / ctx.opts.concurrency / max(1, outputs), start)


class _OpenTxn:
    """A transaction a lane sends into, with what its record needs."""

    __slots__ = ("txn", "opened_at", "open_us", "receipts")

    def __init__(self, txn: aio.Transaction, opened_at: float, open_us: float) -> None:
        self.txn = txn
        self.opened_at = opened_at
        self.open_us = open_us
        self.receipts = Receipts()


async def _open(ctx: LaneContext) -> _OpenTxn:
    t0 = time.monotonic()
    txn = await ctx.client.new_transaction(timeout_ms=ctx.opts.txn_timeout_ms)
    now = time.monotonic()
    return _OpenTxn(txn, now, (now - t0) * 1e6)


async def _claim_and_open(ctx: LaneContext) -> _OpenTxn | None:
    """Claim a transaction of the budget and open it; ``None`` when the budget is
    spent, the client closed, or the open failed (recorded as an error)."""
    if not ctx.control.claim():
        return None
    try:
        return await _open(ctx)
    except AlreadyClosed:
        return None
    except QuasarError as exc:
        ctx.recorder.error(exc, time.monotonic())
        return None


async def _abort_quietly(txn: aio.Transaction) -> None:
    if txn.state() is TransactionState.OPEN:
        try:
            await txn.abort()
        except QuasarError:
            pass


async def _end(ctx: LaneContext, current: _OpenTxn, abort: bool) -> None:
    """Commit (or abort) ``current`` and record it; a failure is recorded as an error."""
    t1 = time.monotonic()
    try:
        if abort:
            await current.txn.abort()
        else:
            await current.txn.commit()
    except AlreadyClosed:
        return
    except QuasarError as exc:
        ctx.recorder.error(exc, time.monotonic())
        await _abort_quietly(current.txn)
        return
    now = time.monotonic()
    sent = current.receipts.sent
    ctx.recorder.record(
        committed=not abort,
        txn_us=(now - current.opened_at) * 1e6,
        end_us=(now - t1) * 1e6,
        open_us=current.open_us,
        produced=sent,
        consumed=0,
        produced_bytes=sent * ctx.opts.size,
        now=now,
    )


async def _finish(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        await asyncio.wait([task])


async def interval_lane(ctx: LaneContext, producers: list[aio.Producer]) -> None:
    """One lane of transactions committed every ``--txn-interval-ms``.

    Raises nothing from the broker: failed opens, sends and commits are recorded as
    errors and the lane carries on with a new transaction.
    """
    control, recorder = ctx.control, ctx.recorder
    clock = time.monotonic
    interval_s = ctx.opts.txn_interval_ms / 1000.0
    payload = ctx.payload
    opened = await _claim_and_open(ctx)
    if opened is None:
        return
    current = opened
    deadline = current.opened_at + interval_s
    pace = _pace(ctx, len(producers), current.opened_at)
    opening: asyncio.Task[_OpenTxn] | None = None
    committing: asyncio.Task[None] | None = None
    budget_used = False
    lead_s = 0.0  # how early the next transaction is opened
    try:
        while not control.stopped:
            if opening is None and not budget_used and clock() >= deadline - lead_s:
                if control.claim():
                    opening = asyncio.ensure_future(_open(ctx))
                else:
                    # -ntxn is used up: the current transaction is the lane's last.
                    budget_used = True
            if opening is not None and opening.done():
                task, opening = opening, None
                try:
                    following = task.result()
                except AlreadyClosed:
                    return
                except QuasarError as exc:
                    recorder.error(exc, clock())
                    deadline = clock() + interval_s
                    continue
                await _finish(committing)
                committing = asyncio.ensure_future(
                    _end(ctx, current, ctx.choose_abort())
                )
                # The next switch is due an interval after this one was (or after
                # now, when this one came late); the open's round trip steers how
                # early the next open starts.
                lead_s += OPEN_LEAD_WEIGHT * (following.open_us / 1e6 - lead_s)
                lead_s = min(lead_s, interval_s / 2)
                deadline = max(deadline, clock()) + interval_s
                current = following
            if pace is not None:
                wait = pace.wait_s(clock())
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                pace.sent += 1
            receipts = current.receipts
            try:
                for producer in producers:
                    await producer.send_async(payload, receipts, txn=current.txn)
                    receipts.sent += 1
            except AlreadyClosed:
                return
            except QuasarError as exc:
                # The transaction cannot commit without this message: give it up and
                # go on in a new one.
                recorder.error(exc, clock())
                await _abort_quietly(current.txn)
                opened = await _claim_and_open(ctx)
                if opened is None:
                    return
                current = opened
                deadline = current.opened_at + interval_s
        # Stopped. A transaction being opened was claimed (it may be the last of the
        # -ntxn budget): it is ended too, empty, so that every claim is counted.
        last: _OpenTxn | None = None
        if opening is not None:
            await asyncio.wait([opening])
            task, opening = opening, None
            try:
                last = task.result()
            except AlreadyClosed:
                return
            except QuasarError as exc:
                recorder.error(exc, clock())
        await _finish(committing)
        committing = None
        await _end(ctx, current, ctx.choose_abort())
        if last is not None:
            await _end(ctx, last, ctx.choose_abort())
    finally:
        # Only left behind when the lane is cancelled or the client closed under it.
        for leftover in (opening, committing):
            if leftover is not None and not leftover.done():
                leftover.cancel()


async def baseline_lane(ctx: LaneContext, producers: list[aio.Producer]) -> None:
    """The same lane without transactions (``--txn-disable``): a loop every interval."""
    control, recorder = ctx.control, ctx.recorder
    clock = time.monotonic
    interval_s = ctx.opts.txn_interval_ms / 1000.0
    payload, size = ctx.payload, ctx.opts.size
    receipts = Receipts()
    counted_ok = counted_failed = 0
    started = clock()
    deadline = started + interval_s
    pace = _pace(ctx, len(producers), started)

    def record(now: float) -> None:
        nonlocal counted_ok, counted_failed, started
        ok, failed = receipts.ok - counted_ok, receipts.failed - counted_failed
        counted_ok, counted_failed = receipts.ok, receipts.failed
        for _ in range(failed):
            recorder.error(receipts.first_error or QuasarError("send failed"), now)
        recorder.record(
            committed=True,
            txn_us=(now - started) * 1e6,
            end_us=None,
            open_us=None,
            produced=ok,
            consumed=0,
            produced_bytes=ok * size,
            now=now,
        )
        started = now

    if not control.claim():
        return
    try:
        while not control.stopped:
            now = clock()
            if pace is not None:
                wait = pace.wait_s(now)
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                pace.sent += 1
            if now >= deadline:
                # The claim before the record: a claim refused leaves the loop under
                # way to the final record below, so loops recorded = claims granted.
                if not control.claim():
                    break
                record(now)
                deadline = now + interval_s
            for producer in producers:
                await producer.send_async(payload, receipts)
                receipts.sent += 1
        for producer in producers:
            await producer.flush()
    except AlreadyClosed:
        return
    except QuasarError as exc:
        recorder.error(exc, clock())
    record(clock())
