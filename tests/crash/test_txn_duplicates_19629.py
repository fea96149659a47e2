"""Pulsar issue #19629 reproduced: a transactional producer under broker kill -9 loops.

The scenario of the Pulsar issue: a produce-only application commits transactions in a loop.
The broker dies while a commit is in flight, the commit times out, and the application
cannot tell whether it happened. Upstream, retrying the commit gets
TransactionNotFound (the coordinator forgot the transaction), so the application
resends the messages in a new transaction and the output holds them twice — or it
does not resend and, when the commit had not happened, loses them.

Here a producer *process* (this file run as a script, ``--worker``) commits
``BATCHES`` transactions of ``MESSAGES_PER_TXN`` unique payloads each, using quasar's
client as an application should:

* ``commit()`` answered: done (committed) — or definitely not committed (aborted
  because a send failed, InvalidTxnStatus, TransactionNotFound on a first attempt),
  then the batch is sent again in a new transaction;
* ``TransactionOutcomeUnknown``: ``client.resume_transaction(exc.txn_id).commit()``
  until the answer is definite (the broker answers a repeated commit from the
  transaction's state or from its terminated-transaction preserver, PIP-255);
* never a resend after an unknown outcome.

Meanwhile the test SIGKILLs the broker and restarts it on the same data, each time
after the worker reported a random number of further commits, half of the time right
as the worker starts a commit. At the end the topic is read up to a sentinel with the
official client: every payload exactly once (no duplicates, no losses).

A durable subscription is made before anything is published, and holds every entry.
Without one the topic keeps nothing for the final reader: with the default retention
a reader's own acknowledgements trim every ledger before the current one (Pulsar's
semantics, see ``test_reader_without_subscription.py``), and a reader slower than the
trim skips the ledgers of earlier broker runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pulsar
import pytest

import quasar.client as qc
from quasar.client.exceptions import (
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.errors import InvalidTxnStatus, QuasarError, TransactionNotFound
from quasar.testing.process import BrokerProcess

BATCHES = int(os.environ.get("QUASAR_19629_BATCHES", "2000"))
MESSAGES_PER_TXN = 3
SEED = int(os.environ.get("QUASAR_19629_SEED", "19629"))
COMMITS_BETWEEN_KILLS = (80, 200)  # random in this range, so a kill every few seconds
KILLS_IN_COMMIT = 0.75
# How long the broker stays down: short (a commit's retries ride it out) or longer
# than a commit's budget (the outcome is unknown, then resumed) or a send's timeout.
DOWNTIME_S = ((0.0, 0.3), (2.0, 4.0))
PROGRESS_TIMEOUT_S = 60.0  # for the worker to report the next commits after a restart
RESOLVE_TIMEOUT_S = 60.0  # for the worker to learn an unknown outcome
TXN_TIMEOUT_MS = 20_000
END_TIMEOUT_MS = 2_000  # per commit() call; then TransactionOutcomeUnknown
OPERATION_TIMEOUT_S = 3
CLIENT_NAME = "producer-19629"
HOLDER = "holds-everything"  # the durable subscription that retains the topic
RETRY_INTERVAL_S = 0.05  # while the broker is down (a retry interval, not a wait)


# ============================================================================ worker


class Producer:
    """The application of the Pulsar issue: commit batches, never resend an unknown one."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.progress = open(args.progress, "a", buffering=1)  # noqa: SIM115
        self.client = qc.Client(
            args.url,
            enable_transaction=True,
            client_name=CLIENT_NAME,
            operation_timeout_seconds=OPERATION_TIMEOUT_S,
            transaction_end_timeout_ms=END_TIMEOUT_MS,
        )
        # Reconnect quickly after a restart (the default backoff grows to 60 s).
        self.client._aio.config.max_backoff_ms = 500
        # END_TXNs the client asked again (lost answer, coordinator not found, ...).
        self.end_retries = 0
        counter = logging.Handler()
        counter.emit = self._count_retry  # type: ignore[method-assign]
        logging.getLogger("quasar.client.transaction").addHandler(counter)
        self.producer = self.client.create_producer(
            args.topic, send_timeout_millis=OPERATION_TIMEOUT_S * 1000
        )

    def _count_retry(self, record: logging.LogRecord) -> None:
        if "asking again" in record.getMessage():
            self.end_retries += 1

    def say(self, *words: Any) -> None:
        self.progress.write(" ".join(str(w) for w in words) + "\n")
        self.progress.flush()

    def run(self) -> None:
        for batch in range(self.args.batches):
            while not self.attempt(batch):
                pass
        self.say("DONE")
        self.client.close()

    def attempt(self, batch: int) -> bool:
        """True once ``batch`` is committed; False: send it again."""
        try:
            txn = self.client.new_transaction(timeout_ms=TXN_TIMEOUT_MS)
        except QuasarError as exc:
            logging.info("batch %d: new transaction: %r", batch, exc)
            self.say("NOTXN", batch)
            time.sleep(RETRY_INTERVAL_S)
            return False
        self.say("BEGIN", batch, *txn.id)
        if self.commit(batch, txn):
            return True
        self.say("RESEND", batch)
        return False

    def commit(self, batch: int, txn: Any) -> bool:
        """True once committed; False if it certainly was not."""
        try:
            for k in range(MESSAGES_PER_TXN):
                self.producer.send_async(
                    f"{batch}:{k}".encode(), lambda res, mid: None, txn=txn
                )
            self.say("COMMIT", batch)
            retries = self.end_retries
            txn.commit()
        except TransactionOutcomeUnknown as exc:
            logging.info("batch %d: %s", batch, exc)
            return self.resolve(batch, exc.txn_id)
        except TransactionHasOperationFailed as exc:
            # A send failed and commit aborted instead; COMMIT was never sent, so
            # the transaction cannot commit (its abort, or its timeout, ends it).
            logging.info("batch %d: %s", batch, exc)
            return False
        except (InvalidTxnStatus, TransactionNotFound) as exc:
            # A first commit refused: the coordinator aborted it (timeout).
            logging.info("batch %d: commit refused: %r", batch, exc)
            return False
        except QuasarError as exc:
            logging.info("batch %d: %r; aborting", batch, exc)
            try:
                txn.abort()
            except QuasarError:
                pass
            return False
        # "retried": an END_TXN was asked again and answered success.
        self.say("OK", batch, "retried" if self.end_retries > retries else "direct")
        return True

    def resolve(self, batch: int, txn_id: Any) -> bool:
        self.say("UNKNOWN", batch, *txn_id)
        deadline = time.monotonic() + RESOLVE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self.client.resume_transaction(txn_id).commit()
            except TransactionOutcomeUnknown as exc:
                logging.info("batch %d: still unknown: %s", batch, exc)
                continue
            except InvalidTxnStatus as exc:
                self.say("ABORTED", batch)
                logging.info("batch %d: resumed commit refused: %r", batch, exc)
                return False
            self.say("OK", batch, "resumed")
            return True
        # Unknown for good: never resend (the final read decides; it counts as lost).
        self.say("GAVEUP", batch)
        return True


def worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--progress", required=True)
    parser.add_argument("--batches", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    Producer(args).run()
    return 0


# ============================================================================ test

class WorkerProcess:
    def __init__(self, url: str, topic: str, workdir: Path) -> None:
        self.progress = workdir / "progress.txt"
        self.log_path = workdir / "worker.log"
        self._offset = 0
        self._buf = b""
        self.counts: Counter[str] = Counter()
        self.ok: list[int] = []
        self.gave_up: list[int] = []
        self.done = False
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, __file__, "--worker", "--url", url,
                    "--topic", topic, "--progress", str(self.progress),
                    "--batches", str(BATCHES),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def poll(self) -> list[list[str]]:
        """New progress lines (complete ones only)."""
        try:
            with open(self.progress, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        events = [line.decode().split() for line in lines if line]
        for e in events:
            self.counts[e[0]] += 1
            if e[0] == "OK":
                self.ok.append(int(e[1]))
                self.counts[f"OK-{e[2]}"] += 1
            elif e[0] == "GAVEUP":
                self.gave_up.append(int(e[1]))
            elif e[0] == "DONE":
                self.done = True
        return events

    def wait_for(self, what: str, timeout_s: float, count: int = 1) -> bool:
        """Return once ``count`` new ``what`` events arrived (bounded)."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            self.assert_alive()
            seen += sum(1 for e in self.poll() if e[0] == what)
            if seen >= count or self.done:
                return seen >= count
            time.sleep(0.001)  # polling interval of a bounded wait on a file
        return False

    def assert_alive(self) -> None:
        code = self.proc.poll()
        if code is not None and not (code == 0 and self.done):
            self.poll()
            assert code == 0 and self.done, (
                f"worker exited with {code}:\n{self.read_log()}"
            )

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("pulsar-official-client")
    logger.setLevel(logging.ERROR)
    return logger

def _read_all(url: str, topic: str, sentinel: bytes) -> list[bytes]:
    """Every message of ``topic`` up to ``sentinel`` (read-committed, official client)."""
    client = pulsar.Client(url, logger=_quiet_logger())
    got: list[bytes] = []
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                msg = reader.read_next(timeout_millis=1000)
            except pulsar.Timeout:
                continue
            if msg.data() == sentinel:
                return got
            got.append(msg.data())
        raise AssertionError(f"sentinel not read within 60s ({len(got)} messages)")
    finally:
        client.close()

def _ranges(payloads: set[bytes]) -> str:
    """The batches of ``payloads`` as ``first-last`` runs (with how many messages)."""
    batches = sorted({int(p.split(b":")[0]) for p in payloads})
    runs: list[list[int]] = []
    for b in batches:
        if runs and runs[-1][1] == b - 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    text = ", ".join(f"{a}-{z}" if a != z else f"{a}" for a, z in runs[:20])
    more = f" (+{len(runs) - 20} more runs)" if len(runs) > 20 else ""
    return f"{text}{more} ({len(payloads)} messages)"


@pytest.mark.crash
@pytest.mark.timeout(300)
def test_no_duplicates_no_losses_under_broker_kill9(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    topic = f"persistent://public/default/dup-19629-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "data").start()
    worker: WorkerProcess | None = None
    restarts = 0
    in_commit = 0
    started = time.monotonic()
    try:
        holder = qc.Client(broker.url, operation_timeout_seconds=15)
        holder.subscribe(
            topic, HOLDER, initial_position=qc.InitialPosition.Earliest
        ).close()
        holder.close()
        worker = WorkerProcess(broker.url, topic, tmp_path)
        while not worker.done:
            k = rng.randint(*COMMITS_BETWEEN_KILLS)
            grew = worker.wait_for("OK", PROGRESS_TIMEOUT_S, count=k)
            assert grew or worker.done, (
                f"no {k} commits within {PROGRESS_TIMEOUT_S}s after {restarts} "
                f"restarts ({dict(worker.counts)}):\n{worker.read_log()}"
            )
            if worker.done:
                break
            # Most kills right as a commit starts (within a few ms: the sends'
            # receipts or the END_TXN are in flight), the others anywhere.
            if rng.random() < KILLS_IN_COMMIT and worker.wait_for("COMMIT", 5.0):
                in_commit += 1
                time.sleep(rng.uniform(0, 0.008))  # the kill's place in the commit
            broker.kill()
            time.sleep(rng.uniform(*rng.choice(DOWNTIME_S)))  # the outage's length
            broker.start()
            restarts += 1
        assert worker.proc.wait(60) == 0, worker.read_log()

        # A sentinel after everything, then read the whole topic.
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        c.create_producer(topic).send(b"sentinel")
        c.close()
        got = _read_all(broker.url, topic, b"sentinel")
    finally:
        if worker is not None:
            worker.kill()
        broker.kill()

    counts = Counter(got)
    expected = {
        f"{b}:{k}".encode() for b in range(BATCHES) for k in range(MESSAGES_PER_TXN)
    }
    duplicates = {m: n for m, n in counts.items() if n > 1}
    lost = expected - set(counts)
    unexpected = set(counts) - expected
    figures = (
        f"{BATCHES} transactions committed ({len(set(worker.ok))} batches OK, "
        f"{worker.counts['BEGIN']} transactions begun), {restarts} broker kill -9 "
        f"restarts ({in_commit} during a commit), "
        f"{worker.counts['OK-retried']} commits answered success to a retried "
        f"END_TXN, {worker.counts['UNKNOWN']} unknown outcomes resolved by resume "
        f"({worker.counts['ABORTED']} were aborted), "
        f"{worker.counts['RESEND']} transactions definitely not committed and "
        "resent, "
        f"{len(duplicates)} duplicates, {len(lost)} lost, "
        f"{len(got)} messages read, {time.monotonic() - started:.0f}s"
    )
    print(figures)
    assert not duplicates, f"duplicates {sorted(duplicates)[:10]}; {figures}"
    assert not lost, f"lost batches {_ranges(lost)}; {figures}"
    assert not unexpected, f"unexpected {sorted(unexpected)[:10]}"
    assert not worker.gave_up, f"outcomes never learned: {worker.gave_up}; {figures}"
    assert sorted(set(worker.ok)) == list(range(BATCHES))
    assert restarts >= 5, figures


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
