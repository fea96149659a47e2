"""``quasar perf transaction --txn-interval-ms``: options, and the lanes' bookkeeping
against an in-memory client (no broker; see test_perf_transaction.py for the real one).

The lanes read the real clock to decide when to switch transactions; what is
asserted here holds whatever the timing: every message is in exactly one ended
transaction, a lane never has two commits in flight, the -ntxn budget is exact.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from quasar.client.txn_state import TransactionState
from quasar.errors import InvalidTxnStatus
from quasar.perf.main import build_parser
from quasar.perf.main import main as perf_main
from quasar.perf.recorder import RunControl
from quasar.perf.transaction import validate
from quasar.perf.txn_interval import Pace, Receipts, baseline_lane, interval_lane
from quasar.perf.txn_options import TransactionOptions, transaction_options
from quasar.perf.txn_recorder import TxnRecorder

S = TransactionState


def parse(*argv: str) -> TransactionOptions:
    return transaction_options(build_parser().parse_args(["transaction", *argv]))


# --- options ---------------------------------------------------------------------------


def test_interval_mode_defaults_to_produce_only_without_per_txn_counts() -> None:
    opts = parse("--txn-interval-ms", "100")
    assert opts.txn_interval_ms == 100
    assert (opts.messages_produced, opts.messages_consumed) == (0, 0)
    assert validate(opts) is None
    assert validate(parse("--txn-interval-ms", "100", "--txn-disable")) is None
    # Without it the per-transaction counts keep their defaults.
    plain = parse()
    assert (plain.txn_interval_ms, plain.messages_produced, plain.messages_consumed) == (
        0,
        1,
        1,
    )


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["-nmp", "5"], "-nmp"),
        (["-nmc", "1"], "produce-only"),
        (["--input", "persistent://public/default/x"], "produce-only"),
        (["-tto", "100"], "below the transaction timeout"),
    ],
)
def test_interval_mode_refuses_what_it_would_ignore(argv: list[str], needle: str) -> None:
    problem = validate(parse("--txn-interval-ms", "100", *argv))
    assert problem is not None and needle in problem


def test_interval_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert perf_main(["transaction", "--txn-interval-ms", "100", "-nmp", "5"]) == 2
    assert perf_main(["transaction", "--txn-interval-ms", "100", "-nmc", "1"]) == 2
    assert perf_main(["transaction", "--txn-interval-ms", "0"]) == 2  # argparse: > 0
    assert "-nmp" in capsys.readouterr().err


def test_rate_is_for_the_interval_lanes_only() -> None:
    assert parse("--txn-interval-ms", "100", "-r", "5000").rate == 5000
    assert validate(parse("--txn-interval-ms", "100", "-r", "5000", "--txn-disable")) is None
    problem = validate(parse("-r", "5000"))
    assert problem is not None and "--txn-interval-ms" in problem


def test_pace_lets_sends_go_when_due() -> None:
    pace = Pace(rate=1000.0, start=10.0)
    assert pace.wait_s(10.0) == 0.0  # the first is due at the start
    pace.sent = 5
    assert pace.wait_s(10.002) == pytest.approx(0.003)
    assert pace.wait_s(10.009) == 0.0  # late: at once


def test_receipts_count_successes_and_keep_the_first_error() -> None:
    r = Receipts()
    first, second = InvalidTxnStatus("a"), InvalidTxnStatus("b")
    r(None, 1)
    r(first, None)
    r(None, 2)
    r(second, None)
    assert (r.ok, r.failed, r.first_error) == (2, 2, first)


# --- lanes against an in-memory client -------------------------------------------------


@dataclass
class Ledger:
    """What the fake client saw."""

    txns: list[FakeTxn] = field(default_factory=list)
    plain_sends: int = 0
    commits_in_flight: int = 0
    most_commits_in_flight: int = 0
    sends_during_commits: int = 0
    ids: itertools.count[int] = field(default_factory=itertools.count)


class FakeTxn:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._state = S.OPEN
        self.sends = 0

    def state(self) -> TransactionState:
        return self._state

    async def _end(self, final: TransactionState) -> None:
        ledger = self.ledger
        self._state = S.COMMITTING if final is S.COMMITTED else S.ABORTING
        ledger.commits_in_flight += 1
        ledger.most_commits_in_flight = max(
            ledger.most_commits_in_flight, ledger.commits_in_flight
        )
        for _ in range(5):  # a few loop turns: sends of the next one go on meanwhile
            await asyncio.sleep(0)
        ledger.commits_in_flight -= 1
        self._state = final

    async def commit(self) -> None:
        await self._end(S.COMMITTED)

    async def abort(self) -> None:
        await self._end(S.ABORTED)


class FakeClient:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def new_transaction(self, timeout_ms: int) -> FakeTxn:
        await asyncio.sleep(0)  # a round trip
        txn = FakeTxn(self.ledger)
        self.ledger.txns.append(txn)
        return txn


class FakeProducer:
    """Receipts every message on the next loop turn; yields every 20 sends, as a
    producer whose queue is full."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.queued = 0

    async def send_async(self, payload: bytes, callback: Any, txn: Any = None) -> None:
        if txn is not None:
            if txn.state() is not S.OPEN:
                raise InvalidTxnStatus(f"send to a {txn.state().name} transaction")
            txn.sends += 1
            if self.ledger.commits_in_flight:
                self.ledger.sends_during_commits += 1
        else:
            self.ledger.plain_sends += 1
        asyncio.get_running_loop().call_soon(callback, None, next(self.ledger.ids))
        self.queued += 1
        if self.queued % 20 == 0:
            await asyncio.sleep(0)

    async def flush(self) -> None:
        await asyncio.sleep(0)


@dataclass
class Ctx:
    opts: TransactionOptions
    client: Any
    recorder: TxnRecorder
    control: RunControl
    payload: bytes = b"x" * 16
    aborts: list[bool] = field(default_factory=list)

    def choose_abort(self) -> bool:
        return self.aborts.pop(0) if self.aborts else False


def make_ctx(ledger: Ledger, limit: int | None, interval_ms: int = 2) -> Ctx:
    opts = TransactionOptions(
        txn_interval_ms=interval_ms, messages_produced=0, messages_consumed=0, size=16
    )
    return Ctx(opts, FakeClient(ledger), TxnRecorder(), RunControl(limit))


async def run_lanes(ctx: Ctx, ledger: Ledger, lanes: int, lane: Any) -> None:
    producers = [[FakeProducer(ledger)] for _ in range(lanes)]
    await asyncio.wait_for(
        asyncio.gather(*(lane(ctx, own) for own in producers)), timeout=30
    )


def test_interval_lanes_use_the_budget_exactly_and_account_every_message() -> None:
    ledger = Ledger()
    ctx = make_ctx(ledger, limit=12)
    ctx.aborts = [False, True, False, True]  # the 2nd and 4th ended are aborted
    asyncio.run(run_lanes(ctx, ledger, lanes=3, lane=interval_lane))
    run = ctx.recorder.fold()
    assert run.errors == 0, run.error_types
    assert run.transactions == len(ledger.txns) == 12
    assert (run.committed, run.aborted) == (10, 2)
    assert all(t.state() in (S.COMMITTED, S.ABORTED) for t in ledger.txns)
    # Every message sent went into one transaction that was then ended and recorded.
    assert run.produced == sum(t.sends for t in ledger.txns) > 0
    assert run.produced_bytes == run.produced * 16
    assert run.latency_us["commit"].count == 10
    assert run.latency_us["abort"].count == 2
    assert run.latency_us["open"].count == 12
    # Three lanes, each with at most one commit in flight.
    assert ledger.most_commits_in_flight <= 3


def test_one_lane_never_has_two_commits_in_flight() -> None:
    ledger = Ledger()
    ctx = make_ctx(ledger, limit=30, interval_ms=1)
    asyncio.run(run_lanes(ctx, ledger, lanes=1, lane=interval_lane))
    run = ctx.recorder.fold()
    assert run.errors == 0 and run.committed == 30
    assert ledger.most_commits_in_flight == 1
    # Sends into the next transaction went on while the previous one committed.
    assert ledger.sends_during_commits > 0
    assert ledger.plain_sends == 0


def test_a_stopped_interval_lane_ends_what_it_opened() -> None:
    ledger = Ledger()
    ctx = make_ctx(ledger, limit=None)

    async def go() -> None:
        asyncio.get_running_loop().call_later(0.05, ctx.control.stop, "time limit")
        await run_lanes(ctx, ledger, lanes=2, lane=interval_lane)

    asyncio.run(go())
    run = ctx.recorder.fold()
    assert run.errors == 0
    assert run.committed == len(ledger.txns) >= 2
    assert all(t.state() is S.COMMITTED for t in ledger.txns)
    assert run.produced == sum(t.sends for t in ledger.txns)


def test_baseline_lanes_record_one_loop_per_claim_and_every_receipt() -> None:
    ledger = Ledger()
    ctx = make_ctx(ledger, limit=9)
    asyncio.run(run_lanes(ctx, ledger, lanes=3, lane=baseline_lane))
    run = ctx.recorder.fold()
    assert run.errors == 0
    assert run.transactions == 9
    assert ledger.txns == []
    # The last loop of each lane is recorded after its flush: every receipt counts.
    assert run.produced == ledger.plain_sends > 0
    assert run.latency_us["commit"].count == 0 and run.latency_us["open"].count == 0


@pytest.mark.parametrize("lane", [interval_lane, baseline_lane])
def test_paced_lanes_send_no_more_than_the_rate(lane: Any) -> None:
    ledger = Ledger()
    ctx = make_ctx(ledger, limit=None)
    ctx.opts.rate = 2000.0  # two lanes: 1,000 sends/s each
    ctx.opts.concurrency = 2

    async def go() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        loop.call_later(0.2, ctx.control.stop, "time limit")
        await run_lanes(ctx, ledger, lanes=2, lane=lane)
        return loop.time() - start

    elapsed = asyncio.run(go())
    run = ctx.recorder.fold()
    assert run.errors == 0 and run.produced > 0
    # At most what was due by the end (each lane's first send is due at its start).
    assert run.produced <= 2000.0 * elapsed + 2
