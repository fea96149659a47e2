"""kill -9 at every named transaction crash point; one outcome everywhere after restart.

Each case (a crash before, between and after every durable step of a commit or an
abort: coordinator log, markers, pending-ack log):

1. A broker without a crash point gets an input topic (2 partitions, 8 numbered
   messages) and an output topic (3 partitions). Transaction T0 writes to every output
   partition and acks two inputs, and commits; T_ab does the same with other values
   and one ack, and aborts. Then the broker is killed (-9): this is the "committed
   before" state that must survive everything after.
2. The broker starts again on the same data with ``QUASAR_CRASH_POINT`` set. A new
   client receives the inputs that are still unacknowledged, and transaction T writes
   two values to every output partition, acks two inputs and ends (commit or abort),
   which kills the broker at the point.
3. The broker starts without the variable. The client's end is retried by the client
   itself (the coordinator re-drives COMMITTING/ABORTING on recovery); its answer may
   be "outcome unknown", so the outcome is then read back.
4. A sentinel is published after everything on every partition. T's consumer (it
   reconnected across the crash) is drained up to the input sentinels, then the
   official ``pulsar`` client reads the output and drains the input subscription
   up to the sentinels. Reading up to a sentinel is complete: a partition whose
   transaction is still open never shows its sentinel, so nothing is concluded
   from silence.

Every case runs with inputs stored one per entry and with inputs in one batch entry
per partition (acked member by member: batch-index pending acks).

The history checker (``quasar.testing.history``) then requires: T's values all
visible or none, on every partition, and its acks applied exactly when its values
are visible (INV-ATOM); T0 intact (INV-DUR); nothing of T_ab (INV-G1A); every input
either reflected once or delivered once, and nothing acked by a committed transaction
delivered again, to T's consumer or later (INV-EO); per-partition order (INV-ORD).
Where the decision was durable before the crash (every point but
``pa.after_ack_before_commit``), T must end the way it was asked to.

``tb.during_snapshot`` needs a sealed snapshot segment, i.e. more aborted
transactions on one partition than a segment holds: its own test below.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

import quasar.client as qc
from quasar.client import aio
from quasar.client.exceptions import (
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.errors import QuasarError
from quasar.testing.history import History, Outcome
from quasar.testing.process import BrokerProcess
from quasar.transaction.crash_points import ENV_VAR, KNOWN_POINTS

pytestmark = [pytest.mark.crash, pytest.mark.timeout(180)]

IN_PARTITIONS = 2
OUT_PARTITIONS = 3
INPUTS_PER_PARTITION = 4
SUB = "sub"
VERIFY_SUB = "verify"
DEATH_TIMEOUT_S = 30.0  # the armed broker must die within this after the trigger
END_TIMEOUT_S = 60.0  # the client's commit/abort must settle within this after restart
READ_TIMEOUT_S = 30.0  # reading up to the sentinels
STRAGGLER_MS = 300  # after the sentinels: anything more is a duplicate

COMMIT, ABORT = "commit", "abort"

# (point, how T ends, whether the decision is durable before the broker dies).
CASES = [
    ("tc.after_ending_written", COMMIT, True),
    ("tc.after_ending_written", ABORT, True),
    ("tc.after_some_ends", COMMIT, True),
    ("tc.after_some_ends", ABORT, True),
    ("tc.after_all_ends_before_terminal", COMMIT, True),
    ("tc.after_all_ends_before_terminal", ABORT, True),
    # PIP-255 chain points (idempotent END_TXN itself: test_preserver_crash_points.py).
    ("tc.after_preserver_append", COMMIT, True),
    ("tc.after_preserver_append", ABORT, True),
    ("tc.after_preserver_flush", COMMIT, True),
    ("tc.after_preserver_flush", ABORT, True),
    ("tc.after_terminal_written", COMMIT, True),
    ("tc.after_terminal_written", ABORT, True),
    ("tb.after_marker_before_state", COMMIT, True),
    ("tb.after_marker_before_state", ABORT, True),
    # Dies inside T's first ack, before any END_TXN: either outcome, but one.
    ("pa.after_ack_before_commit", COMMIT, False),
    ("pa.after_ack_before_commit", ABORT, False),
    # The pending-ack COMMIT record is durable, the cursor not yet moved.
    ("pa.after_commit_record_before_cursor", COMMIT, True),
    # The COMMIT record and the cursor flush both issued, neither known durable.
    ("pa.commit_beside_flush_started", COMMIT, True),
]


SNAPSHOT_POINT = "tb.during_snapshot"  # covered by its own test below


def test_every_known_crash_point_is_covered() -> None:
    """A point added to ``KNOWN_POINTS`` fails here until a case drives it."""
    covered = {p for p, _, _ in CASES} | {SNAPSHOT_POINT}
    assert set(KNOWN_POINTS) <= covered, sorted(set(KNOWN_POINTS) - covered)


# ----------------------------------------------------------------------------- helpers


def admin(broker: BrokerProcess, method: str, path: str, body: bytes | None) -> None:
    req = urllib.request.Request(broker.admin_url + path, data=body, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status < 300, (method, path, r.status)


def create_partitioned(broker: BrokerProcess, topic: str, partitions: int) -> None:
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/partitions"
    admin(broker, "PUT", path, str(partitions).encode())


def partition_name(topic: str, p: int) -> str:
    return f"{topic}-partition-{p}"


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("pulsar-official-client")
    logger.setLevel(logging.ERROR)
    return logger


def wait_for_death(broker: BrokerProcess, point: str) -> None:
    assert broker.proc is not None
    try:
        code = broker.proc.wait(DEATH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the broker did not die at crash point {point!r} within {DEATH_TIMEOUT_S}s: "
            f"the point is not placed on this path (or not named so).\n"
            f"log tail:\n{broker.read_log()[-4000:]}"
        ) from None
    assert code == -9, f"broker exited with {code}, not SIGKILL; log:\n{broker.read_log()}"
    broker.kill()  # closes the log file of the dead process


def restart_unarmed(broker: BrokerProcess) -> None:
    broker.extra_env.pop(ENV_VAR, None)
    broker.start()


def settle(fut: concurrent.futures.Future[None], txn: Any) -> tuple[Outcome, str]:
    """Wait (bounded) for the client's commit/abort; what the client learned."""
    try:
        fut.result(timeout=END_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        raise AssertionError(
            f"transaction {txn.id} did not end within {END_TIMEOUT_S}s after the restart "
            f"(state {txn.state()}): INV-LIVE"
        ) from None
    except TransactionHasOperationFailed as exc:
        state = txn.state()
        if state == qc.TransactionState.ABORTED:
            return Outcome.ABORTED, f"operation failed, aborted instead: {exc}"
        return Outcome.UNKNOWN, f"operation failed and abort unclear ({state}): {exc}"
    except TransactionOutcomeUnknown as exc:
        return Outcome.UNKNOWN, f"outcome unknown: {exc}"
    except QuasarError as exc:
        return Outcome.UNKNOWN, f"{type(exc).__name__}: {exc}"
    state = txn.state()
    if state == qc.TransactionState.COMMITTED:
        return Outcome.COMMITTED, "committed"
    if state == qc.TransactionState.ABORTED:
        return Outcome.ABORTED, "aborted"
    return Outcome.UNKNOWN, f"returned in state {state}"


def position(msg: Any) -> tuple[int, int, int]:
    mid = msg.message_id()
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


def read_until_sentinels(
    consumer: Any,
    sentinels: set[str],
    on_message: Callable[[Any], None],
    what: str,
) -> None:
    """Receive until every sentinel arrived (bounded), then until quiet briefly.

    Everything before a sentinel on its partition has been delivered once the sentinel
    is; the short quiet drain afterwards only catches duplicates and stragglers.
    """
    missing = set(sentinels)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while missing:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise AssertionError(
                f"{what}: sentinels {sorted(missing)} not delivered within "
                f"{READ_TIMEOUT_S}s (a partition is stuck: INV-LIVE)"
            )
        try:
            msg = consumer.receive(timeout_millis=min(left_ms, 1000))
        except pulsar.Timeout:
            continue
        value = msg.data().decode()
        consumer.acknowledge(msg)
        if value in sentinels:
            missing.discard(value)
        on_message(msg)
    while True:
        try:
            msg = consumer.receive(timeout_millis=STRAGGLER_MS)
        except pulsar.Timeout:
            return
        consumer.acknowledge(msg)
        on_message(msg)


# ----------------------------------------------------------------------------- scenario


class Scenario:
    """Topics, history and the phases of one crash-point case."""

    def __init__(self, tmp_path: Path, batched: bool = False) -> None:
        tag = uuid.uuid4().hex[:8]
        self.batched = batched
        self.broker = BrokerProcess(tmp_path / "data")
        self.in_topic = f"persistent://public/default/crash-in-{tag}"
        self.out_topic = f"persistent://public/default/crash-out-{tag}"
        self.history = History()
        self.in_sentinels = {f"S-in-{p}" for p in range(IN_PARTITIONS)}
        self.out_sentinels = {f"S-out-{p}" for p in range(OUT_PARTITIONS)}
        self.client: qc.Client | None = None
        self.notes: list[str] = []

    def new_client(self) -> qc.Client:
        self.client = qc.Client(
            self.broker.url, enable_transaction=True, operation_timeout_seconds=15
        )
        return self.client

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def subscribe_inputs(self, client: qc.Client) -> Any:
        return client.subscribe(
            self.in_topic, SUB, consumer_type=qc.ConsumerType.Shared,
            initial_position=qc.InitialPosition.Earliest,
        )

    def receive_inputs(self, consumer: Any, expected: set[str]) -> dict[str, Any]:
        """Receive until every expected input arrived; return them by id."""
        got: dict[str, Any] = {}
        unexpected: list[str] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while not expected <= got.keys():
            left_ms = int((deadline - time.monotonic()) * 1000)
            assert left_ms > 0, (
                f"inputs {sorted(expected - got.keys())} not delivered within "
                f"{READ_TIMEOUT_S}s; got {sorted(got)}"
            )
            try:
                msg = consumer.receive(min(left_ms, 1000))
            except qc.Timeout:
                continue
            value = msg.data().decode()
            if value not in expected or value in got:
                unexpected.append(value)
            got[value] = msg
        assert not unexpected, (
            f"delivered {unexpected} besides the unacknowledged inputs {sorted(expected)}"
            " (an ack lost across the restart, or a duplicate delivery)"
        )
        return got

    def txn_writes(
        self, txn_key: str, txn: Any, producers: list[Any], per_partition: int,
        sources: dict[int, str],
    ) -> None:
        for p, producer in enumerate(producers):
            for j in range(per_partition):
                value = f"{txn_key}-p{p}-{j}"
                self.history.write(
                    txn_key, value, partition=partition_name(self.out_topic, p),
                    source=sources.get(p) if j == 0 else None,
                    producer=f"{txn_key}-p{p}", seq=j,
                )
                producer.send(value.encode(), txn=txn)

    # -- phase 1: committed and aborted history before any crash -------------------------

    def prepare(self) -> None:
        b = self.broker
        b.start()
        create_partitioned(b, self.in_topic, IN_PARTITIONS)
        create_partitioned(b, self.out_topic, OUT_PARTITIONS)
        # The verifying subscription exists before the first output: without it a
        # topic need not keep what no subscription is behind (Pulsar semantics).
        official = pulsar.Client(b.url, logger=quiet_logger())
        try:
            official.subscribe(
                self.out_topic, VERIFY_SUB, initial_position=pulsar.InitialPosition.Earliest
            ).close()
        finally:
            official.close()
        c = self.new_client()
        for p in range(IN_PARTITIONS):
            # Batched: one entry per partition, acked member by member (batch-index
            # pending acks); otherwise one entry per input.
            prod = c.create_producer(
                partition_name(self.in_topic, p), batching_enabled=self.batched,
                batching_max_publish_delay_ms=100,
            )
            for k in range(INPUTS_PER_PARTITION):
                value = f"in-{p * INPUTS_PER_PARTITION + k}"
                self.history.add_input(value, SUB)
                prod.send_async(value.encode(), lambda res, mid: None)
            prod.flush()
            prod.close()
        consumer = self.subscribe_inputs(c)
        inputs = self.receive_inputs(consumer, set(self.all_inputs()))
        for i in sorted(inputs):
            self.history.delivered(i, SUB, final=False)
        batch_indexes = {m.message_id().batch_index() for m in inputs.values()}
        assert (batch_indexes != {-1}) is self.batched, batch_indexes
        producers = [
            c.create_producer(partition_name(self.out_topic, p))
            for p in range(OUT_PARTITIONS)
        ]

        t0 = c.new_transaction(timeout_ms=60_000)
        self.history.begin("T0")
        self.txn_writes("T0", t0, producers, 1, {0: "in-0", 1: "in-4"})
        for i in ("in-0", "in-4"):
            self.history.ack("T0", i, SUB)
            consumer.acknowledge(inputs[i], txn=t0)
            self.history.ack_done("T0", i, SUB)
        t0.commit()
        self.history.end("T0", Outcome.COMMITTED)

        tab = c.new_transaction(timeout_ms=60_000)
        self.history.begin("Tab")
        self.txn_writes("Tab", tab, producers, 1, {0: "in-1"})
        self.history.ack("Tab", "in-1", SUB)
        consumer.acknowledge(inputs["in-1"], txn=tab)
        tab.abort()
        self.history.end("Tab", Outcome.ABORTED)

        self.close_client()
        b.kill()
        self.history.disruption("broker killed after the setup")

    def all_inputs(self) -> list[str]:
        return [f"in-{i}" for i in range(IN_PARTITIONS * INPUTS_PER_PARTITION)]

    # -- phase 2 and 3: T, the crash, the restart ------------------------------------------

    def run_crash(self, point: str, action: str) -> tuple[Outcome, str]:
        b = self.broker
        b.extra_env[ENV_VAR] = point
        b.start()
        c = self.new_client()
        consumer = self.subscribe_inputs(c)
        unacked = set(self.all_inputs()) - {"in-0", "in-4"}
        inputs = self.receive_inputs(consumer, unacked)
        for i in sorted(inputs):
            self.history.delivered(i, SUB, final=False)
        producers = [
            c.create_producer(partition_name(self.out_topic, p))
            for p in range(OUT_PARTITIONS)
        ]
        txn = c.new_transaction(timeout_ms=60_000)
        self.history.begin("T")
        self.txn_writes("T", txn, producers, 2, {0: "in-2", 1: "in-6"})
        for i in ("in-2", "in-6"):
            self.history.ack("T", i, SUB)
            try:
                consumer.acknowledge(inputs[i], txn=txn)
                self.history.ack_done("T", i, SUB)
            except QuasarError as exc:
                # The crash point may sit on the ack path itself.
                self.notes.append(f"ack of {i} failed: {exc!r}")
                break
        assert b.proc is not None
        ended_before_crash = b.proc.poll() is None
        if ended_before_crash:
            fut = txn.commit_async() if action == COMMIT else txn.abort_async()
        wait_for_death(b, point)
        self.history.disruption(f"broker died at {point}")
        restart_unarmed(b)
        if not ended_before_crash:
            fut = txn.commit_async() if action == COMMIT else txn.abort_async()
        outcome, how = settle(fut, txn)
        self.notes.append(f"client: {how}")
        self.history.end("T", outcome)

        # Sentinels after the transaction settled, on every partition of both topics.
        for p, producer in enumerate(producers):
            value = f"S-out-{p}"
            self.history.write(None, value, partition=partition_name(self.out_topic, p))
            producer.send(value.encode())
        for p in range(IN_PARTITIONS):
            prod = c.create_producer(partition_name(self.in_topic, p))
            prod.send(f"S-in-{p}".encode())
        # What T's consumer got after the restart, up to the sentinels: the broker
        # redelivers what it holds unacknowledged, never what T acked once T
        # committed (checked as redelivered-after-commit).
        self.drain_live_consumer(consumer)
        self.close_client()  # its consumer's unacked inputs go back to the subscription
        return outcome, how

    def drain_live_consumer(self, consumer: Any) -> None:
        missing = set(self.in_sentinels)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while missing:
            left_ms = int((deadline - time.monotonic()) * 1000)
            assert left_ms > 0, (
                f"input sentinels {sorted(missing)} not delivered to the live consumer "
                f"within {READ_TIMEOUT_S}s"
            )
            try:
                msg = consumer.receive(min(left_ms, 1000))
            except qc.Timeout:
                continue
            value = msg.data().decode()
            if value in missing:
                missing.discard(value)
            else:
                self.history.delivered(value, SUB, final=False)

    # -- phase 4: read back ------------------------------------------------------------------

    def read_back(self) -> None:
        client = pulsar.Client(self.broker.url, logger=quiet_logger())
        try:
            out = client.subscribe(
                self.out_topic, VERIFY_SUB,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            read_until_sentinels(
                out, self.out_sentinels,
                lambda m: self.history.read(
                    m.data().decode(), partition=m.topic_name(), position=position(m)
                ),
                "output",
            )
            inp = client.subscribe(
                self.in_topic, SUB, consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
            )

            def on_input(m: Any) -> None:
                value = m.data().decode()
                if value not in self.in_sentinels:
                    self.history.delivered(value, SUB)

            read_until_sentinels(inp, self.in_sentinels, on_input, "input subscription")
        finally:
            client.close()

    def explain(self) -> str:
        return (
            "notes: " + "; ".join(self.notes)
            + f"\nhistory:\n{self.history.to_jsonl()}"
            + f"\nbroker log tail:\n{self.broker.read_log()[-3000:]}"
        )


@pytest.fixture(params=[False, True], ids=["entries", "batched"])
def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scenario]:
    s = Scenario(tmp_path, batched=request.param)
    yield s
    s.close_client()
    s.broker.kill()


@pytest.mark.parametrize(
    ("point", "action", "decided"),
    CASES,
    ids=[f"{p}-{a}" for p, a, _ in CASES],
)
def test_crash_point_one_outcome(
    scenario: Scenario, point: str, action: str, decided: bool
) -> None:
    scenario.prepare()
    scenario.run_crash(point, action)
    scenario.read_back()
    report = scenario.history.check(deliveries_recorded=True)
    assert report.ok, report.summary() + "\n" + scenario.explain()
    wanted = Outcome.COMMITTED if action == COMMIT else Outcome.ABORTED
    if decided:
        assert report.resolved["T"] is wanted, (
            f"T was asked to {action} and the decision was durable before the crash, "
            f"but it is {report.resolved['T'].value}\n" + scenario.explain()
        )
    else:
        assert report.resolved["T"] in (Outcome.COMMITTED, Outcome.ABORTED)


# ----------------------------------------------------------------------------- snapshots

SNAPSHOT_CASE_TXNS_MAX = 20_000  # bound on aborted transactions before giving up
SNAPSHOT_CONCURRENCY = 48


def test_crash_during_snapshot_keeps_aborted_set(tmp_path: Path) -> None:
    """``tb.during_snapshot``: segments durable, the index naming them not.

    Many small transactions on one partition, every 97th committed and the rest
    aborted, until the aborted set outgrows a snapshot segment and the broker dies
    writing it. After the restart no aborted value may be visible (the aborted set is
    rebuilt from the previous index, the orphan segments and the log tail), every
    committed one is visible exactly once, and the ones in flight at the crash are
    all-or-nothing.
    """
    broker = BrokerProcess(
        tmp_path / "data",
        extra_env={
            ENV_VAR: SNAPSHOT_POINT,
            # Snapshot often, so the first one after the segment fills is soon.
            "QUASAR_transactionBufferSnapshotMaxTransactionCount": "200",
        },
    )
    topic = f"persistent://public/default/crash-snap-{uuid.uuid4().hex[:8]}"
    history = History()
    broker.start()
    try:
        official = pulsar.Client(broker.url, logger=quiet_logger())
        try:
            official.subscribe(
                topic, VERIFY_SUB, initial_position=pulsar.InitialPosition.Earliest
            ).close()
        finally:
            official.close()
        started, code = _drive_through_crash(broker, topic, history)
        assert code == -9, (
            f"the broker did not die at tb.during_snapshot after {started} "
            f"transactions (exit {code})\n{broker.read_log()[-4000:]}"
        )
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        prod = c.create_producer(topic)
        history.write(None, "S-snap")
        prod.send(b"S-snap")
        c.close()
        client = pulsar.Client(broker.url, logger=quiet_logger())
        try:
            reader = client.subscribe(
                topic, VERIFY_SUB, initial_position=pulsar.InitialPosition.Earliest
            )
            read_until_sentinels(
                reader, {"S-snap"},
                lambda m: history.read(m.data().decode(), position=position(m)),
                "snapshot topic",
            )
        finally:
            client.close()
        report = history.check()
        print(f"{started} transactions started before the crash; {report.counts}")
        assert report.ok, report.summary() + f"\n{broker.read_log()[-3000:]}"
        assert report.counts["aborted"] > 1000, report.counts
    finally:
        broker.kill()


def _drive_through_crash(
    broker: BrokerProcess, topic: str, history: History
) -> tuple[int, int | None]:
    """Run transactions (asyncio client, many at once) until the broker dies, restart
    it unarmed, and let the cut transactions settle.

    Returns how many were started and the dead broker's exit code (None: it did not
    die). Outcomes are recorded as the client learns them; the ones cut by the crash
    are settled after the restart by the same client, which keeps retrying their
    END_TXN (bounded by END_TIMEOUT_S).
    """

    async def main() -> tuple[int, int | None]:
        c = aio.Client(broker.url, enable_transaction=True, operation_timeout_seconds=15)
        prod = await c.create_producer(topic)
        sem = asyncio.Semaphore(SNAPSHOT_CONCURRENCY)
        dead = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []

        async def one(i: int) -> None:
            try:
                await one_txn(i)
            finally:
                sem.release()

        async def one_txn(i: int) -> None:
            key = f"t{i}"
            commit = i % 97 == 0
            try:
                txn = await c.new_transaction(60_000)
            except QuasarError:
                return  # never started: nothing written
            history.begin(key)
            history.write(key, f"v{i}")
            try:
                await prod.send(f"v{i}".encode(), txn=txn)
                if commit:
                    await txn.commit()
                    history.end(key, Outcome.COMMITTED)
                else:
                    await txn.abort()
                    history.end(key, Outcome.ABORTED)
            except TransactionHasOperationFailed:
                aborted = txn.state() == qc.TransactionState.ABORTED
                history.end(key, Outcome.ABORTED if aborted else Outcome.UNKNOWN)
            except QuasarError:
                history.end(key, Outcome.UNKNOWN)

        async def watch() -> None:
            assert broker.proc is not None
            while broker.proc.poll() is None:
                await asyncio.sleep(0.02)  # polling interval of a bounded wait
            dead.set()

        loop = asyncio.get_running_loop()
        watcher = loop.create_task(watch())
        died = loop.create_task(dead.wait())
        i = 0
        while i < SNAPSHOT_CASE_TXNS_MAX:
            acquire = loop.create_task(sem.acquire())
            await asyncio.wait([acquire, died], return_when=asyncio.FIRST_COMPLETED)
            if dead.is_set():
                if acquire.done():
                    sem.release()
                else:
                    acquire.cancel()
                break
            tasks.append(loop.create_task(one(i)))
            i += 1
        if not dead.is_set():
            try:
                await asyncio.wait_for(dead.wait(), DEATH_TIMEOUT_S)
            except TimeoutError:
                pass
        watcher.cancel()
        died.cancel()
        assert broker.proc is not None
        code = broker.proc.poll()
        # Restart while the in-flight transactions keep retrying their ends.
        await asyncio.to_thread(_restart_after_death, broker)
        _, pending = await asyncio.wait(tasks, timeout=END_TIMEOUT_S)
        assert not pending, f"{len(pending)} transactions did not settle after restart"
        await c.close()
        return i, code

    return asyncio.run(main())


def _restart_after_death(broker: BrokerProcess) -> None:
    broker.kill()
    restart_unarmed(broker)
