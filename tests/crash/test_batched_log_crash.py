"""kill -9 with a half-filled PIP-160 buffer: only records whose callers were not
answered yet are lost; the broker restarted with batching off reads the batched log.

The broker runs one coordinator whose log batches 4 records per entry and whose
delay is an hour, so a partial batch waits in memory until the kill. Requests on one
connection are handled in order up to their log append, so once the answer to a
later request (an END_TXN for an unknown transaction, which writes nothing) arrives,
the earlier NEW_TXNs are in the buffer: no sleeping.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quasar.protocol import pb
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawCoordinator
from quasar.transaction.batched_log import is_batched_entry
from quasar.transaction.coordinator import decode_entry
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

pytestmark = [pytest.mark.crash, pytest.mark.usefixtures("close_raw")]

BATCHED = {
    "QUASAR_transactionCoordinatorCount": "1",
    "QUASAR_transactionLogBatchedWriteEnabled": "true",
    "QUASAR_transactionLogBatchedWriteMaxRecords": "4",
    "QUASAR_transactionLogBatchedWriteMaxDelayInMillis": "3600000",
}
TTL_MS = 3_600_000


def coordinator(broker: BrokerProcess) -> RawCoordinator:
    """A raw connection to coordinator 0, connected."""
    tc = RawCoordinator(broker.port)
    assert not tc.connect(0).HasField("error")
    return tc


def _log_records(data_dir: Path) -> list[tuple[bool, list[int]]]:
    """(batched?, txn sequences) of every entry of coordinator 0's log, read offline."""

    async def read() -> list[tuple[bool, list[int]]]:
        store = SqliteMetadataStore(str(data_dir / "metadata.db"))
        factory = FileManagedLedgerFactory(str(data_dir / "ledgers"), store)
        try:
            ml = await factory.open(transaction_log_ledger_name(0))
            out = []
            if ml.number_of_entries:
                for e in await ml.read_entries(ml.first_position, 10_000):
                    out.append((is_batched_entry(e.data),
                                [r.txnid_least_bits for r in decode_entry(e.data)]))
            await ml.close()
            return out
        finally:
            await factory.close()
            store.close()

    return asyncio.run(read())


def test_crash_with_a_half_filled_buffer(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, extra_env=BATCHED).start()
    try:
        tc = coordinator(broker)
        answered = [tc.send_new_txn(ttl_ms=TTL_MS) for _ in range(4)]
        ids = [tc.wait(rid) for rid in answered]  # the 4th record filled the batch
        assert [r.txnid_least_bits for r in ids] == [0, 1, 2, 3]
        assert not any(r.HasField("error") for r in ids)
        pending = [tc.send_new_txn(ttl_ms=TTL_MS) for _ in range(2)]
        marker = tc.wait(tc.send_end(0, 99, pb.COMMIT))  # handled after the two appends
        assert marker.error == pb.TransactionNotFound
        assert not any(rid in tc.answers for rid in pending)
        broker.kill()
        # The log holds the answered batch only; the buffered records are gone with
        # the process, and nobody was told they existed.
        assert _log_records(data) == [(True, [0, 1, 2, 3])]
        broker.extra_env = {"QUASAR_transactionCoordinatorCount": "1"}  # batching off
        broker.start()
        tc = coordinator(broker)
        for least in range(4):  # every answered transaction survived
            assert not tc.wait(tc.send_end(0, least, pb.COMMIT)).HasField("error")
        assert tc.wait(tc.send_end(0, 4, pb.COMMIT)).error == pb.TransactionNotFound
        assert tc.wait(tc.send_new_txn(ttl_ms=TTL_MS)).txnid_least_bits == 4
    finally:
        broker.kill()


def test_restarted_with_batching_on_reads_an_unbatched_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, extra_env={"QUASAR_transactionCoordinatorCount": "1"}).start()
    try:
        tc = coordinator(broker)
        sent = [tc.send_new_txn(ttl_ms=TTL_MS) for _ in range(3)]
        assert [tc.wait(r).txnid_least_bits for r in sent] == [0, 1, 2]
        assert not tc.wait(tc.send_end(0, 0, pb.COMMIT)).HasField("error")
        broker.kill()
        assert all(not batched for batched, _ in _log_records(data))
        broker.extra_env = {**BATCHED, "QUASAR_transactionLogBatchedWriteMaxRecords": "2"}
        broker.start()
        tc = coordinator(broker)
        ends = [tc.send_end(0, 1, pb.COMMIT), tc.send_end(0, 2, pb.COMMIT)]  # COMMITTING x2, COMMITTED x2
        assert not any(tc.wait(r).HasField("error") for r in ends)
        assert tc.wait(tc.send_end(0, 0, pb.COMMIT)).error == pb.TransactionNotFound
    finally:
        broker.kill()
    assert any(batched for batched, _ in _log_records(data))
