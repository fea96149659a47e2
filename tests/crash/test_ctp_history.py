"""Exactly-once consume-transform-produce under kill -9, and the history checker.

A worker *process*
(``quasar.testing.ctp_worker``) reads two input topics and, in one transaction per
step, writes one output per input to a partitioned output topic and acks the inputs.
The test kills the broker, the worker, or both with SIGKILL at seeded moments (after
the worker reports a seeded number of further commits, then right after it records a
seeded kind of step: receiving, opening a transaction, sending, acking, or ending,
so kills land in different phases of a transaction) and restarts them. At the end
every input must be reflected in the committed output exactly once, nothing of an
aborted transaction may be visible, each producer's values keep their order per
partition, the input subscription holds nothing, and no input acked by a committed
transaction is delivered again (unless a reconnect before the ack's answer explains
the copy).

The first tests check the checker itself on crafted histories.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar
import pytest

import quasar.client as qc
from quasar.protocol import encode_message, pb
from quasar.testing.ctp_worker import load_history
from quasar.testing.history import History, Outcome
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all

T = pb.BaseCommand

# ============================================================================ checker


def _ctp_history() -> History:
    """Two inputs, each transformed once by a committed transaction; all read."""
    h = History()
    h.add_input("a-0")
    h.add_input("a-1")
    for n, i in enumerate(("a-0", "a-1")):
        h.begin(f"T{n}")
        h.write(f"T{n}", f"out-{i}", partition="p0", source=i, producer="w", seq=n)
        h.ack(f"T{n}", i)
        h.end(f"T{n}", Outcome.COMMITTED)
    return h


def test_checker_accepts_a_clean_history() -> None:
    h = _ctp_history()
    h.read("out-a-0", partition="p0", position=(1, 0))
    h.read("out-a-1", partition="p0", position=(1, 1))
    report = h.check(require_all_inputs=True, deliveries_recorded=True)
    report.assert_ok()
    assert report.resolved == {"T0": Outcome.COMMITTED, "T1": Outcome.COMMITTED}


def test_checker_catches_a_lost_input() -> None:
    h = _ctp_history()
    h.read("out-a-0", partition="p0", position=(1, 0))
    kinds = h.check(require_all_inputs=True).kinds()
    assert kinds == {"lost-write", "lost-input"}


def test_checker_catches_a_lost_input_without_writes() -> None:
    # Acked by an aborted transaction, never redelivered, never processed again.
    h = History()
    h.add_input("a-0")
    h.begin("T")
    h.write("T", "out-a-0", source="a-0")
    h.ack("T", "a-0")
    h.end("T", Outcome.ABORTED)
    assert h.check(deliveries_recorded=True).kinds() == {"lost-input"}


def test_checker_catches_a_duplicate_read() -> None:
    h = _ctp_history()
    h.read("out-a-0", partition="p0", position=(1, 0))
    h.read("out-a-1", partition="p0", position=(1, 1))
    h.read("out-a-1", partition="p0", position=(1, 2))  # written twice to the log
    assert h.check(require_all_inputs=True).kinds() == {"duplicate-read", "duplicate-processing"}


def test_checker_catches_duplicate_processing() -> None:
    # Two transactions both committed an output for a-0 (the ack of the first lost).
    h = _ctp_history()
    h.begin("T2")
    h.write("T2", "out-a-0-again", partition="p0", source="a-0", producer="w", seq=2)
    h.ack("T2", "a-0")
    h.end("T2", Outcome.COMMITTED)
    for n, v in enumerate(("out-a-0", "out-a-1", "out-a-0-again")):
        h.read(v, partition="p0", position=(1, n))
    assert h.check(require_all_inputs=True).kinds() == {"duplicate-processing", "double-ack"}


def test_checker_catches_an_aborted_read() -> None:
    h = _ctp_history()
    h.begin("Tab")
    h.write("Tab", "out-aborted", partition="p0", source="a-0")
    h.end("Tab", Outcome.ABORTED)
    for n, v in enumerate(("out-a-0", "out-a-1", "out-aborted")):
        h.read(v, partition="p0", position=(1, n))
    # Also reflected twice: the aborted write derived from a-0 is visible.
    assert h.check(require_all_inputs=True).kinds() == {"aborted-read", "duplicate-processing"}


def test_checker_catches_a_torn_unknown_transaction() -> None:
    h = History()
    h.begin("T")
    h.write("T", "x", partition="p0")
    h.write("T", "y", partition="p1")
    h.end("T", Outcome.UNKNOWN)
    h.read("x", partition="p0")
    report = h.check()
    assert report.kinds() == {"torn"}
    # All visible: an unknown outcome resolved as committed, no anomaly.
    h.read("y", partition="p1")
    report = h.check()
    assert report.ok and report.resolved["T"] is Outcome.COMMITTED


def test_checker_catches_reorder_and_nonmonotonic_reads() -> None:
    h = _ctp_history()
    h.read("out-a-1", partition="p0", position=(1, 1))
    h.read("out-a-0", partition="p0", position=(1, 0))
    kinds = h.check(require_all_inputs=True).kinds()
    assert kinds == {"reorder", "nonmonotonic-read"}


def test_checker_catches_phantom_and_misplaced_reads() -> None:
    h = _ctp_history()
    h.read("out-a-0", partition="p1")
    h.read("out-a-1", partition="p0")
    h.read("never-written", partition="p0")
    assert h.check().kinds() == {"phantom-read", "misplaced"}


def test_checker_catches_acks_not_applied_and_redelivery() -> None:
    h = _ctp_history()
    h.read("out-a-0", partition="p0", position=(1, 0))
    h.read("out-a-1", partition="p0", position=(1, 1))
    h.delivered("a-1")  # committed ack undone: delivered again after the commit
    kinds = h.check(require_all_inputs=True, deliveries_recorded=True).kinds()
    assert kinds == {"ack-not-applied", "redelivered-after-commit", "unprocessed-input"}


def _acked_during_run(*, disrupt: str | None) -> History:
    """a-0 received, acked in T (answered), T committed; a copy arrives later."""
    h = History()
    h.add_input("a-0")
    h.delivered("a-0", final=False)
    if disrupt == "before-ack":
        h.disruption("broker restarted")
    h.begin("T")
    h.write("T", "out-a-0", source="a-0")
    h.ack("T", "a-0")
    if disrupt == "ack-in-flight":
        h.disruption("broker restarted")
    h.ack_done("T", "a-0")
    if disrupt == "after-ack":
        h.disruption("broker restarted")
    h.end("T", Outcome.COMMITTED)
    h.delivered("a-0", final=False)  # the late copy
    h.read("out-a-0")
    return h


def test_checker_catches_a_live_redelivery_after_commit() -> None:
    # Nothing explains the copy, or only a reconnect after the broker had the ack.
    for disrupt in (None, "after-ack"):
        kinds = _acked_during_run(disrupt=disrupt).check(require_all_inputs=True).kinds()
        assert kinds == {"redelivered-after-commit"}, disrupt


def test_checker_excuses_a_copy_sent_before_the_ack() -> None:
    # A reconnect between receiving and the ack's answer may have dispatched a copy
    # that reaches the application only after the commit: one copy per reconnect.
    for disrupt in ("before-ack", "ack-in-flight"):
        h = _acked_during_run(disrupt=disrupt)
        h.check(require_all_inputs=True).assert_ok()
        h.delivered("a-0", final=False)  # a second copy: one reconnect, one copy
        assert h.check().kinds() == {"redelivered-after-commit"}, disrupt


def test_checker_accounts_inputs_by_delivery() -> None:
    # Not everything processed: an input is reflected or still delivered, once.
    h = History()
    for i in ("a-0", "a-1", "a-2"):
        h.add_input(i)
    h.begin("T")
    h.write("T", "out-a-0", source="a-0")
    h.ack("T", "a-0")
    h.end("T", Outcome.COMMITTED)
    h.read("out-a-0")
    h.delivered("a-1")
    h.delivered("a-1")
    kinds = h.check(deliveries_recorded=True).kinds()
    assert kinds == {"duplicate-delivery", "lost-input"}  # a-1 twice, a-2 never


def test_checker_refuses_malformed_histories() -> None:
    h = History()
    h.begin("T")
    with pytest.raises(ValueError):
        h.begin("T")
    h.write("T", "v")
    with pytest.raises(ValueError):
        h.write("T", "v")
    with pytest.raises(ValueError):
        h.write("nope", "w")
    h.end("T", Outcome.COMMITTED)
    with pytest.raises(ValueError):
        h.end("T", Outcome.ABORTED)
    h.end("T", Outcome.UNKNOWN)  # a later vaguer answer changes nothing
    assert h.outcome("T") is Outcome.COMMITTED


def test_worker_history_files_load_with_a_torn_last_line(tmp_path: Path) -> None:
    f = tmp_path / "w.jsonl"
    f.write_text(
        '{"op": "start", "inc": 0}\n'
        '{"op": "begin", "txn": "w0-1", "txn_id": [0, 5]}\n'
        '{"op": "write", "txn": "w0-1", "value": "out:a-0:w0-1", "partition": "p0",'
        ' "source": "a-0", "producer": "w0-p0", "seq": 0}\n'
        '{"op": "ack", "txn": "w0-1", "id": "a-0"}\n'
        '{"op": "end", "txn": "w0-1", "outc'
    )
    h = History()
    h.add_input("a-0", "ctp")
    ids = load_history(h, [f], "ctp")
    assert ids == {"w0-1": [0, 5]}
    assert h.outcome("w0-1") is None  # cut by the kill: judged by the reads
    h.read("out:a-0:w0-1", partition="p0")
    report = h.check(require_all_inputs=True)
    report.assert_ok()
    assert report.resolved["w0-1"] is Outcome.COMMITTED


# ============================================================================ kill -9

# Replay another seed with QUASAR_CTP_SEED=123.
SEED = int(os.environ.get("QUASAR_CTP_SEED", "20261122"))
INPUTS_PER_TOPIC = 150
OUT_PARTITIONS = 2
SUB = "ctp"
ROUNDS = 9
PHASES = ("recv", "begin", "write", "ack", "end")
PHASE_TIMEOUT_S = 10.0
GROWTH_TIMEOUT_S = 60.0  # for the worker to commit a round's k more transactions
FINISH_TIMEOUT_S = 90.0  # for every input to be reflected after the last round
READ_TIMEOUT_S = 30.0
STRAGGLER_MS = 300
TXN_TIMEOUT_MS = 4000  # a killed worker's transaction aborts (and frees its acks) soon


def _admin(broker: BrokerProcess, method: str, path: str, body: bytes | None) -> None:
    req = urllib.request.Request(broker.admin_url + path, data=body, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status < 300, (method, path, r.status)


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("pulsar-official-client")
    logger.setLevel(logging.ERROR)
    return logger


def _wait(predicate: Callable[[], bool], timeout_s: float, step: Callable[[], None]) -> bool:
    """Call ``step`` (which blocks briefly on an event source) until ``predicate``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        step()
    return True


class WorkerProcess:
    """One incarnation of the CTP worker at a time; SIGKILL and restart."""

    def __init__(self, broker: BrokerProcess, topics: dict[str, Any], workdir: Path) -> None:
        self.broker = broker
        self.topics = topics
        self.workdir = workdir
        self.incarnation = -1
        self.proc: subprocess.Popen[bytes] | None = None
        self.history_files: list[Path] = []
        self.log_path = workdir / "workers.log"

    def start(self) -> None:
        self.incarnation += 1
        path = self.workdir / f"worker-{self.incarnation}.jsonl"
        self.history_files.append(path)
        cmd = [
            sys.executable, "-m", "quasar.testing.ctp_worker",
            "--url", self.broker.url,
            "--input", self.topics["a"], "--input", self.topics["b"],
            "--output", self.topics["out"], "--subscription", SUB,
            "--history", str(path), "--incarnation", str(self.incarnation),
            "--txn-timeout-ms", str(TXN_TIMEOUT_MS),
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def committed(self) -> int:
        """Transactions the worker incarnations so far saw commit."""
        n = 0
        for path in self.history_files:
            try:
                n += path.read_bytes().count(b'"outcome": "committed"')
            except FileNotFoundError:
                pass
        return n

    def poll_step(self) -> None:
        self.assert_alive()
        time.sleep(0.005)  # polling interval of a bounded wait

    def wait_for_step(self, op: str, timeout_s: float) -> bool:
        """Return as soon as the worker records a new step ``op`` (bounded).

        Polls the end of its history file every millisecond: the kill is meant to
        land within the step that was just recorded.
        """
        path = self.history_files[-1]
        offset = path.stat().st_size if path.exists() else 0
        needle = f'"op": "{op}"'.encode()
        buf = b""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.assert_alive()
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except FileNotFoundError:  # a new incarnation that has not opened it yet
                chunk = b""
            offset += len(chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if any(needle in line for line in lines):
                return True
            time.sleep(0.001)  # polling interval of a bounded wait
        return False

    def assert_alive(self) -> None:
        assert self.proc is not None
        code = self.proc.poll()
        assert code is None, f"worker exited with {code}:\n{self.read_log()}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def read_log(self) -> str:
        """The workers' log without the reconnect chatter of broker restarts."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        noise = ("reconnect failed", "resubscribe failed", "asking again in")
        return "\n".join(ln for ln in lines if not any(n in ln for n in noise))[-5000:]


class OutputObserver:
    """Counts distinct committed outputs (official client, durable subscription that
    survives broker kills; duplicates from redelivery are ignored)."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        self.client = pulsar.Client(broker.url, logger=_quiet_logger())
        self.consumer = self.client.subscribe(
            topic, "observer", initial_position=pulsar.InitialPosition.Earliest
        )
        self.values: set[str] = set()
        self.inputs: set[str] = set()

    def poll(self) -> None:
        try:
            msg = self.consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            return
        value = msg.data().decode()
        self.values.add(value)
        if value.startswith("out:"):
            self.inputs.add(value.split(":")[1])
        self.consumer.acknowledge(msg)

    def close(self) -> None:
        self.client.close()


def _read_until_sentinels(
    consumer: Any, sentinels: set[str], on_message: Callable[[Any], None], what: str
) -> None:
    missing = set(sentinels)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while missing:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise AssertionError(
                f"{what}: sentinels {sorted(missing)} not delivered within "
                f"{READ_TIMEOUT_S}s (stuck partition: INV-LIVE)"
            )
        try:
            msg = consumer.receive(timeout_millis=min(left_ms, 1000))
        except pulsar.Timeout:
            continue
        consumer.acknowledge(msg)
        missing.discard(msg.data().decode())
        on_message(msg)
    while True:
        try:
            msg = consumer.receive(timeout_millis=STRAGGLER_MS)
        except pulsar.Timeout:
            return
        consumer.acknowledge(msg)
        on_message(msg)


def _create_subscription(broker: BrokerProcess, topic: str, subscription: str) -> None:
    client = pulsar.Client(broker.url, logger=_quiet_logger())
    try:
        client.subscribe(
            topic, subscription, initial_position=pulsar.InitialPosition.Earliest
        ).close()
    finally:
        client.close()


def _position(msg: Any) -> tuple[int, int, int]:
    mid = msg.message_id()
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


@pytest.mark.crash
@pytest.mark.timeout(240)
@pytest.mark.parametrize("dedup", [False, True], ids=["default-config", "dedup-enabled"])
def test_ctp_exactly_once_under_kill9(tmp_path: Path, dedup: bool) -> None:
    """``default-config``: what a user gets. ``dedup-enabled``: with
    ``brokerDeduplicationEnabled``, so a producer's resend after a reconnect is
    recognised by its sequence id (scenario 38 expects that inside transactions in
    any case)."""
    rng = random.Random(SEED)
    tag = uuid.uuid4().hex[:8]
    topics = {
        "a": f"persistent://public/default/ctp-a-{tag}",
        "b": f"persistent://public/default/ctp-b-{tag}",
        "out": f"persistent://public/default/ctp-out-{tag}",
    }
    env = {"QUASAR_brokerDeduplicationEnabled": "true"} if dedup else {}
    broker = BrokerProcess(tmp_path / "data", extra_env=env).start()
    worker = WorkerProcess(broker, topics, tmp_path)
    observer: OutputObserver | None = None
    events: list[str] = []
    # (time.monotonic(), what): each worker kill, and each broker restart once it is up
    disruptions: list[tuple[float, str]] = []
    try:
        _admin(
            broker, "PUT",
            topics["out"].replace("persistent://", "/admin/v2/persistent/") + "/partitions",
            str(OUT_PARTITIONS).encode(),
        )
        # The final reader's subscription exists before the first output, so that
        # nothing it must read can be trimmed once the observer has acked it.
        _create_subscription(broker, topics["out"], "verify")
        inputs: list[str] = []
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        for name in ("a", "b"):
            prod = c.create_producer(topics[name], batching_enabled=True)
            for n in range(INPUTS_PER_TOPIC):
                inputs.append(f"{name}-{n}")
                prod.send_async(f"{name}-{n}".encode(), lambda res, mid: None)
            prod.flush()
            prod.close()
        c.close()

        worker.start()

        kinds = ["broker", "worker", "both"] * (ROUNDS // 3)
        rng.shuffle(kinds)
        for kind in kinds:
            k = rng.randint(2, 10)
            phase = rng.choice(PHASES)
            # Progress as the worker reports it (its commits are in the output; the
            # final read checks that): immediate, unlike a reader that is itself
            # reconnecting after a broker restart.
            target = worker.committed() + k
            grew = _wait(
                lambda: worker.committed() >= target, GROWTH_TIMEOUT_S,  # noqa: B023
                worker.poll_step,
            )
            assert grew, (
                f"worker stuck at {worker.committed()} (< {target}) commits for "
                f"{GROWTH_TIMEOUT_S}s; events {events}\n{worker.read_log()}"
            )
            # Then kill right after the worker records its next step of that kind,
            # i.e. while it does it (begin: opening a transaction, write: sending,
            # ack: acking, end: between transactions).
            hit = worker.wait_for_step(phase, PHASE_TIMEOUT_S)
            events.append(
                f"{kind} after {worker.committed()} commits, "
                f"{'at' if hit else 'no'} {phase}"
            )
            if kind == "worker":
                disruptions.append((time.monotonic(), "worker killed"))
            if kind in ("worker", "both"):
                worker.kill()
            if kind in ("broker", "both"):
                broker.kill()
                broker.start()
                # Consumers resubscribe, and the broker dispatches again what is not
                # acknowledged, only once it is back: a message the worker took from
                # its receive queue while the broker was down comes again then. So
                # the disruption is recorded at the restart, not at the kill.
                disruptions.append((time.monotonic(), f"{kind} killed, broker back"))
            if kind in ("worker", "both"):
                worker.start()

        # Finished when a reader of the output has seen every input reflected.
        observer = OutputObserver(broker, topics["out"])
        finished = _wait(
            lambda: observer.inputs >= set(inputs), FINISH_TIMEOUT_S,
            lambda: (worker.assert_alive(), observer.poll()),  # type: ignore[func-returns-value]
        )
        worker.stop()
        observer.close()
        observer = None

        # Sentinels after everything, then a complete read-committed read.
        history = History()
        for i in inputs:
            history.add_input(i, SUB)
        txn_ids = load_history(history, worker.history_files, SUB, disruptions)
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        out_partitions = c.get_topic_partitions(topics["out"])
        for p in out_partitions:
            prod = c.create_producer(p)
            history.write(None, f"S-{p}", partition=p)
            prod.send(f"S-{p}".encode())
            prod.close()
        in_sentinels = set()
        for name in ("a", "b"):
            prod = c.create_producer(topics[name])
            prod.send(f"S-{name}".encode())
            in_sentinels.add(f"S-{name}")
            prod.close()
        c.close()

        client = pulsar.Client(broker.url, logger=_quiet_logger())
        try:
            out = client.subscribe(
                topics["out"], "verify", initial_position=pulsar.InitialPosition.Earliest
            )
            _read_until_sentinels(
                out, {f"S-{p}" for p in out_partitions},
                lambda m: history.read(
                    m.data().decode(), partition=m.topic_name(), position=_position(m)
                ),
                "output",
            )
            left = client.subscribe(
                [topics["a"], topics["b"]], SUB, consumer_type=pulsar.ConsumerType.Shared,
            )

            def on_input(m: Any) -> None:
                value = m.data().decode()
                if value not in in_sentinels:
                    history.delivered(value, SUB)

            _read_until_sentinels(left, in_sentinels, on_input, "input subscription")
        finally:
            client.close()

        (tmp_path / "history.jsonl").write_text(history.to_jsonl())
        report = history.check(require_all_inputs=True, deliveries_recorded=True)
        context = (
            f"\nevents: {events}\ncounts: {report.counts}\n"
            f"history: {tmp_path / 'history.jsonl'}\nworker log tail:\n{worker.read_log()}"
        )
        print(f"seed {SEED}; {report.summary(limit=0)}")
        print(f"events: {events}")
        assert report.ok, report.summary() + context
        assert finished, "not every input was reflected in time" + context
        reused = _reused(txn_ids)
        assert not reused, f"TxnIDs reused across restarts (INV-FENCE): {reused}"
        assert worker.incarnation == kinds.count("worker") + kinds.count("both"), events
    finally:
        if observer is not None:
            observer.close()
        worker.kill()
        broker.kill()


def _reused(txn_ids: dict[str, list[int]]) -> dict[tuple[int, ...], list[str]]:
    by_id: dict[tuple[int, ...], list[str]] = {}
    for key, tid in txn_ids.items():
        by_id.setdefault(tuple(tid), []).append(key)
    return {tid: keys for tid, keys in by_id.items() if len(keys) > 1}



# ============================================================================ resend

@pytest.mark.parametrize("dedup", [False, True], ids=["default-config", "dedup-enabled"])
def test_transactional_resend_is_appended_once(tmp_path: Path, dedup: bool) -> None:
    """Scenario 38, the cause the CTP test exposes: a producer that lost the receipt
    of a transactional send (broker restart) sends it again with the same producer
    name and sequence id on a new connection. It must be appended once.

    Raw frames, so the resend is exact and deterministic."""
    env = {"QUASAR_brokerDeduplicationEnabled": "true"} if dedup else {}
    broker = BrokerProcess(tmp_path / "data", extra_env=env).start()
    topic = f"persistent://public/default/resend-{uuid.uuid4().hex[:8]}"
    try:
        _create_subscription(broker, topic, "verify")
        tc = Raw(broker.port)
        tc.connect()
        cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
        cmd.tcClientConnectRequest.request_id, cmd.tcClientConnectRequest.tc_id = 1, 0
        tc.request(cmd, T.TC_CLIENT_CONNECT_RESPONSE)
        cmd = T(type=T.NEW_TXN)
        cmd.newTxn.request_id, cmd.newTxn.tc_id, cmd.newTxn.txn_ttl_seconds = 2, 0, 60_000
        r = tc.request(cmd, T.NEW_TXN_RESPONSE).newTxnResponse
        txn = (r.txnid_most_bits, r.txnid_least_bits)
        cmd = T(type=T.ADD_PARTITION_TO_TXN)
        a = cmd.addPartitionToTxn
        a.request_id, (a.txnid_most_bits, a.txnid_least_bits) = 3, txn
        a.partitions.append(topic)
        tc.request(cmd, T.ADD_PARTITION_TO_TXN_RESPONSE)

        receipts = []
        for _attempt in range(2):  # the send, then its resend on a new connection
            conn = Raw(broker.port)
            conn.connect()
            cmd = T(type=T.PRODUCER)
            cmd.producer.topic, cmd.producer.producer_id = topic, 1
            cmd.producer.request_id, cmd.producer.producer_name = 4, "resender"
            assert conn.request(cmd, T.PRODUCER_SUCCESS).type == T.PRODUCER_SUCCESS
            cmd = T(type=T.SEND)
            cmd.send.producer_id, cmd.send.sequence_id = 1, 0
            cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = txn
            md = pb.MessageMetadata(producer_name="resender", sequence_id=0, publish_time=1)
            md.txnid_most_bits, md.txnid_least_bits = txn
            conn.send_bytes(encode_message(cmd, md, b"once"))
            receipts.append(conn.recv_type(T.SEND_RECEIPT).send_receipt.message_id)
            conn.close()
        cmd = T(type=T.END_TXN)
        e = cmd.endTxn
        e.request_id, (e.txnid_most_bits, e.txnid_least_bits), e.txn_action = 5, txn, pb.COMMIT
        assert not tc.request(cmd, T.END_TXN_RESPONSE).endTxnResponse.HasField("error")
        tc.close()

        c = qc.Client(broker.url, operation_timeout_seconds=15)
        c.create_producer(topic).send(b"sentinel")
        c.close()
        got: list[bytes] = []
        client = pulsar.Client(broker.url, logger=_quiet_logger())
        try:
            consumer = client.subscribe(topic, "verify")
            _read_until_sentinels(
                consumer, {"sentinel"}, lambda m: got.append(m.data()), "resend topic"
            )
        finally:
            client.close()
        assert got == [b"once", b"sentinel"], (
            f"read {got}; receipts of the send and its resend: "
            f"{[(m.ledgerId, m.entryId) for m in receipts]}"
        )
    finally:
        close_all()
        broker.kill()
