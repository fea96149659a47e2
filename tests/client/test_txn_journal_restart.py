"""A client restarted with ``transaction_journal_dir`` finishes what it left in flight.

A child process (this file run as a script) sends three messages in a transaction
and commits with a journal, and is killed with SIGKILL at one of these points:

* ``before-end-txn``: the journal record is on disk, no END_TXN was sent (the
  coordinator still has the transaction OPEN);
* ``answer-lost``: END_TXN was sent and the broker committed and answered, but the
  process is killed (by the test, once the journal file exists and the answer came
  back) before it handled the answer;
* ``record-not-removed``: the commit's answer was handled, the process dies while
  removing the record.

A new client on the same journal directory — another instance, with another default
client name, as after a restart — lists the unfinished transaction, resumes it under
the name the journal recorded and commits. Every message is then visible exactly once.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.client.txn_coordinator import TransactionCoordinatorClient
from quasar.client.txn_journal import TransactionJournal

MESSAGES = [b"j-0", b"j-1", b"j-2"]
CHILD_TIMEOUT_S = 60.0
QUIET_MS = 1000


# ============================================================================ child


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--client-name", required=True)
    parser.add_argument("--point", required=True)
    args = parser.parse_args(argv)

    original = TransactionCoordinatorClient.end_txn_once
    if args.point == "before-end-txn":

        async def end_txn_once(self: Any, *a: Any, **kw: Any) -> None:
            _die()

        TransactionCoordinatorClient.end_txn_once = end_txn_once  # type: ignore[method-assign]
    elif args.point == "answer-lost":
        import asyncio

        async def end_txn_once(self: Any, *a: Any, **kw: Any) -> None:
            await original(self, *a, **kw)
            print("ANSWERED", flush=True)
            await asyncio.Event().wait()  # the test kills the process here

        TransactionCoordinatorClient.end_txn_once = end_txn_once  # type: ignore[method-assign]
    elif args.point == "record-not-removed":

        def remove(self: Any, txn_id: Any) -> None:
            _die()

        TransactionJournal.remove = remove  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {args.point}")

    client = pulsar.Client(
        args.url,
        enable_transaction=True,
        client_name=args.client_name,
        transaction_journal_dir=args.journal,
        operation_timeout_seconds=15,
    )
    producer = client.create_producer(args.topic)
    txn = client.new_transaction(timeout_ms=120_000)
    for m in MESSAGES:
        producer.send(m, txn=txn)
    print("TXN", *txn.id, flush=True)
    txn.commit()
    print("COMMITTED (the crash point was not reached)", flush=True)
    return 3


# ============================================================================ test


def _run_child(
    service_url: str, topic: str, journal: Path, name: str, point: str, log: Path
) -> subprocess.Popen[str]:
    with open(log, "w") as err:
        return subprocess.Popen(
            [
                sys.executable, __file__, "--child", "--url", service_url,
                "--topic", topic, "--journal", str(journal), "--client-name", name,
                "--point", point,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def _kill_when_answered(child: subprocess.Popen[str], journal: Path) -> None:
    """SIGKILL the child once its journal file exists and END_TXN was answered."""
    assert child.stdout is not None
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    for line in child.stdout:
        if line.startswith("ANSWERED"):
            break
        assert time.monotonic() < deadline
    else:
        raise AssertionError(f"child ended without an answer (exit {child.wait()})")
    assert list(journal.glob("txn-*.json")), "no journal record before END_TXN"
    child.send_signal(signal.SIGKILL)


@pytest.mark.parametrize(
    "point", ["before-end-txn", "answer-lost", "record-not-removed"]
)
def test_restarted_client_finishes_its_transaction(
    service_url: str, topic: str, tmp_path: Path, point: str
) -> None:
    journal = tmp_path / "journal"
    name = f"journal-child-{uuid.uuid4().hex[:8]}"
    watcher = pulsar.Client(service_url, operation_timeout_seconds=15)
    try:
        consumer = watcher.subscribe(topic, "check")
        child = _run_child(service_url, topic, journal, name, point, tmp_path / "child.log")
        try:
            if point == "answer-lost":
                _kill_when_answered(child, journal)
            out, _ = child.communicate(timeout=CHILD_TIMEOUT_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        assert child.returncode == -signal.SIGKILL, (
            f"child exit {child.returncode}: {out}\n{(tmp_path / 'child.log').read_text()}"
        )

        # The restarted application.
        app = pulsar.Client(
            service_url,
            enable_transaction=True,
            transaction_journal_dir=journal,
            operation_timeout_seconds=15,
        )
        try:
            (entry,) = app.unfinished_transactions()
            assert (entry.action, entry.client_name) == ("commit", name)
            assert app.client_name != name
            txn = app.resume_transaction(entry.txn_id)  # the journal's client name
            txn.commit()
            assert txn.state() is pulsar.TransactionState.COMMITTED
            assert app.unfinished_transactions() == []
            assert list(journal.glob("txn-*.json")) == []
        finally:
            app.close()

        got = []
        while True:
            try:
                msg = consumer.receive(QUIET_MS)
            except pulsar.Timeout:
                break
            consumer.acknowledge(msg)
            got.append(msg.data())
        assert got == MESSAGES
    finally:
        watcher.close()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
