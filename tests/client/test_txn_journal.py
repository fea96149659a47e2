"""The client's transaction journal (``transaction_journal_dir``), against the fake
coordinator: the record is on disk before END_TXN goes out, removed after a definite
answer, kept after an unknown outcome, listed by ``unfinished_transactions()`` and
finished by ``resume_transaction(...).commit()``; plus the file format itself."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from quasar.client import aio
from quasar.client.exceptions import (
    InvalidConfiguration,
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.client.txn_journal import FORMAT_VERSION, JournalEntry, TransactionJournal
from quasar.client.txn_state import TransactionState
from quasar.errors import InvalidTxnStatus, NotAllowedError
from quasar.protocol import pb
from quasar.protocol.txn_id import TxnID

from ..fakes.broker import FakeBroker
from .test_transactions import make_client, wait_for

T = pb.BaseCommand
S = TransactionState


# --- the format ------------------------------------------------------------------------


def test_record_is_one_complete_json_file(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path / "j")  # created on first use
    entry = journal.record(TxnID(2, 41), "commit", "app-1")
    (path,) = (tmp_path / "j").iterdir()
    assert path.name == "txn-2-41.json"
    data = json.loads(path.read_text())
    assert data == {
        "format": FORMAT_VERSION,
        "txn_id": [2, 41],
        "action": "commit",
        "client_name": "app-1",
        "recorded_at_ms": entry.recorded_at_ms,
    }
    assert journal.entries() == [entry]
    assert journal.get(TxnID(2, 41)) == entry
    assert journal.get(TxnID(2, 42)) is None


def test_record_replaces_and_remove_forgets(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path)
    journal.record(TxnID(0, 1), "commit", "a")
    journal.record(TxnID(0, 2), "commit", "a")
    journal.record(TxnID(0, 1), "abort", "a")  # the last ask wins
    assert {(e.txn_id, e.action) for e in journal.entries()} == {
        (TxnID(0, 1), "abort"),
        (TxnID(0, 2), "commit"),
    }
    journal.remove(TxnID(0, 1))
    journal.remove(TxnID(0, 1))  # no record: nothing to do
    assert [e.txn_id for e in journal.entries()] == [TxnID(0, 2)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["txn-0-2.json"]


def test_listing_skips_what_is_not_a_complete_record(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path)
    good = journal.record(TxnID(1, 1), "abort", "b")
    (tmp_path / ".txn-1-2.json.tmp").write_text('{"format": 1, "txn_')  # torn write
    (tmp_path / "txn-1-3.json").write_text("garbage")
    (tmp_path / "txn-1-4.json").write_text(json.dumps({"format": 99}))
    (tmp_path / "notes.txt").write_text("unrelated")
    assert journal.entries() == [good]


def test_missing_directory_lists_nothing(tmp_path: Path) -> None:
    assert TransactionJournal(tmp_path / "never").entries() == []


def test_bad_action_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        TransactionJournal(tmp_path).record(TxnID(0, 0), "maybe", "a")


# --- the client ------------------------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    broker.enable_transactions(1)
    broker.coordinator.forget_ended = True
    broker.coordinator.preserve = True
    await broker.start()
    yield broker
    await broker.stop()


def journal_client(fake: FakeBroker, directory: Path, **kwargs: Any) -> aio.Client:
    return make_client(
        fake.url, transaction_journal_dir=directory, client_name="j-app", **kwargs
    )


def records(directory: Path) -> list[dict[str, Any]]:
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("txn-*.json"))]


async def test_recorded_before_end_txn_removed_after_the_answer(
    fake: FakeBroker, tmp_path: Path
) -> None:
    client = journal_client(fake, tmp_path)
    try:
        producer = await client.create_producer("fake")
        txn = await client.new_transaction()
        await producer.send(b"x", txn=txn)
        assert records(tmp_path) == []  # an open transaction is not recorded
        fake.hold_txn_answers.add(T.END_TXN)
        commit = asyncio.ensure_future(txn.commit())
        await wait_for(lambda: len(fake.commands(T.END_TXN)) == 1)
        (record,) = records(tmp_path)
        assert record["txn_id"] == list(txn.id)
        assert (record["action"], record["client_name"]) == ("commit", "j-app")
        assert client.unfinished_transactions() == [
            JournalEntry(txn.id, "commit", "j-app", record["recorded_at_ms"])
        ]
        fake.release_held()
        await commit
        assert records(tmp_path) == []
        assert client.unfinished_transactions() == []
    finally:
        await client.close()


async def test_unknown_outcome_keeps_the_record_and_resume_finishes_it(
    fake: FakeBroker, tmp_path: Path
) -> None:
    first = journal_client(fake, tmp_path, transaction_end_timeout_ms=200)
    txn = await first.new_transaction()
    fake.drop_on[T.END_TXN] = 1_000_000
    fake.apply_before_drop = True
    with pytest.raises(TransactionOutcomeUnknown):
        await txn.commit()
    await first.close()
    fake.drop_on.clear()
    assert [r["txn_id"] for r in records(tmp_path)] == [list(txn.id)]

    # The restarted application: another client (default name) on the same journal.
    second = make_client(fake.url, transaction_journal_dir=str(tmp_path))
    try:
        (entry,) = second.unfinished_transactions()
        assert (entry.txn_id, entry.action, entry.client_name) == (
            txn.id,
            "commit",
            "j-app",
        )
        resumed = second.resume_transaction(entry.txn_id)  # the journal's name
        assert resumed.client_name == "j-app"
        await resumed.commit()
        assert resumed.state() is S.COMMITTED
        assert second.unfinished_transactions() == []
    finally:
        await second.close()


async def test_a_definite_refusal_removes_the_record(
    fake: FakeBroker, tmp_path: Path
) -> None:
    client = journal_client(fake, tmp_path)
    try:
        txn = await client.new_transaction()
        fake.coordinator.errors[T.END_TXN] = [pb.InvalidTxnStatus]
        with pytest.raises(InvalidTxnStatus):
            await txn.commit()
        assert records(tmp_path) == []
    finally:
        await client.close()


async def test_commit_that_aborts_instead_records_the_abort(
    fake: FakeBroker, tmp_path: Path
) -> None:
    client = journal_client(fake, tmp_path)
    try:
        producer = await client.create_producer("fake")
        txn = await client.new_transaction()
        fake.send_errors.append(pb.NotAllowedError)
        fake.hold_txn_answers.add(T.END_TXN)
        with pytest.raises(NotAllowedError):
            await producer.send(b"x", txn=txn)
        commit = asyncio.ensure_future(txn.commit())
        await wait_for(lambda: len(fake.commands(T.END_TXN)) == 1)
        assert [r["action"] for r in records(tmp_path)] == ["abort"]
        fake.release_held()
        with pytest.raises(TransactionHasOperationFailed):
            await commit
        assert records(tmp_path) == []
    finally:
        await client.close()


async def test_unwritable_journal_means_no_end_txn(
    fake: FakeBroker, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    client = journal_client(fake, blocker / "journal")
    try:
        txn = await client.new_transaction()
        with pytest.raises(OSError):
            await txn.commit()
        assert fake.commands(T.END_TXN) == []
    finally:
        await client.close()


async def test_forget_and_misuse(fake: FakeBroker, tmp_path: Path) -> None:
    TransactionJournal(tmp_path).record(TxnID(0, 9), "abort", "other")
    client = journal_client(fake, tmp_path)
    plain = make_client(fake.url)
    try:
        assert [e.txn_id for e in client.unfinished_transactions()] == [(0, 9)]
        client.forget_unfinished_transaction((0, 9))
        assert client.unfinished_transactions() == []
        with pytest.raises(InvalidConfiguration):
            plain.unfinished_transactions()
        with pytest.raises(InvalidConfiguration):
            plain.forget_unfinished_transaction((0, 9))
        with pytest.raises(InvalidConfiguration):
            client.forget_unfinished_transaction("(0,9)")  # type: ignore[arg-type]
    finally:
        await client.close()
        await plain.close()


async def test_explicit_name_beats_the_journal(fake: FakeBroker, tmp_path: Path) -> None:
    TransactionJournal(tmp_path).record(TxnID(0, 3), "commit", "recorded")
    client = journal_client(fake, tmp_path)
    try:
        assert client.resume_transaction((0, 3)).client_name == "recorded"
        assert client.resume_transaction((0, 3), "given").client_name == "given"
        assert client.resume_transaction((0, 4)).client_name == "j-app"
    finally:
        await client.close()


def test_journal_directory_may_be_a_path_object(tmp_path: Path) -> None:
    c = aio.Client("pulsar://127.0.0.1:6650", transaction_journal_dir=tmp_path)
    assert c.config.transaction_journal_dir == os.fspath(tmp_path)
