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
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import pb
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all
from quasar.transaction.batched_log import is_batched_entry
from quasar.transaction.coordinator import decode_entry
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

pytestmark = pytest.mark.crash

T = pb.BaseCommand
BATCHED = {
    "QUASAR_transactionCoordinatorCount": "1",
    "QUASAR_transactionLogBatchedWriteEnabled": "true",
    "QUASAR_transactionLogBatchedWriteMaxRecords": "4",
    "QUASAR_transactionLogBatchedWriteMaxDelayInMillis": "3600000",
}


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    close_all()


class Tc:
    """Coordinator requests over one raw connection; answers matched by request id."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.raw = Raw(broker.port)
        self.raw.connect()
        self.rid = 0
        self.answers: dict[int, pb.BaseCommand] = {}

    def send_new_txn(self) -> int:
        self.rid += 1
        cmd = T(type=T.NEW_TXN)
        cmd.newTxn.request_id = self.rid
        cmd.newTxn.tc_id = 0
        cmd.newTxn.txn_ttl_seconds = 3_600_000
        self.raw.send(cmd)
        return self.rid

    def send_end_txn(self, least: int, action: int = pb.COMMIT) -> int:
        self.rid += 1
        cmd = T(type=T.END_TXN)
        c = cmd.endTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self.rid, 0, least
        c.txn_action = action
        self.raw.send(cmd)
        return self.rid

    def wait(self, rid: int) -> pb.BaseCommand:
        while rid not in self.answers:
            cmd = self.raw.recv()
            for field in ("newTxnResponse", "endTxnResponse", "tcClientConnectResponse"):
                if cmd.HasField(field):
                    self.answers[getattr(cmd, field).request_id] = getattr(cmd, field)
        return self.answers[rid]

    def connect(self) -> None:
        self.rid += 1
        cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
        cmd.tcClientConnectRequest.request_id = self.rid
        cmd.tcClientConnectRequest.tc_id = 0
        self.raw.send(cmd)
        assert not self.wait(self.rid).HasField("error")


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
        tc = Tc(broker)
        tc.connect()
        answered = [tc.send_new_txn() for _ in range(4)]
        ids = [tc.wait(rid) for rid in answered]  # the 4th record filled the batch
        assert [r.txnid_least_bits for r in ids] == [0, 1, 2, 3]
        assert not any(r.HasField("error") for r in ids)
        pending = [tc.send_new_txn() for _ in range(2)]
        marker = tc.wait(tc.send_end_txn(99))  # handled after the two appends
        assert marker.error == pb.TransactionNotFound
        assert not any(rid in tc.answers for rid in pending)
        broker.kill()
        # The log holds the answered batch only; the buffered records are gone with
        # the process, and nobody was told they existed.
        assert _log_records(data) == [(True, [0, 1, 2, 3])]
        broker.extra_env = {"QUASAR_transactionCoordinatorCount": "1"}  # batching off
        broker.start()
        tc = Tc(broker)
        tc.connect()
        for least in range(4):  # every answered transaction survived
            assert not tc.wait(tc.send_end_txn(least)).HasField("error")
        assert tc.wait(tc.send_end_txn(4)).error == pb.TransactionNotFound
        assert tc.wait(tc.send_new_txn()).txnid_least_bits == 4
    finally:
        broker.kill()


def test_restarted_with_batching_on_reads_an_unbatched_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, extra_env={"QUASAR_transactionCoordinatorCount": "1"}).start()
    try:
        tc = Tc(broker)
        tc.connect()
        sent = [tc.send_new_txn() for _ in range(3)]
        assert [tc.wait(r).txnid_least_bits for r in sent] == [0, 1, 2]
        assert not tc.wait(tc.send_end_txn(0)).HasField("error")
        broker.kill()
        assert all(not batched for batched, _ in _log_records(data))
        broker.extra_env = {**BATCHED, "QUASAR_transactionLogBatchedWriteMaxRecords": "2"}
        broker.start()
        tc = Tc(broker)
        tc.connect()
        ends = [tc.send_end_txn(1), tc.send_end_txn(2)]  # COMMITTING x2, COMMITTED x2
        assert not any(tc.wait(r).HasField("error") for r in ends)
        assert tc.wait(tc.send_end_txn(0)).error == pb.TransactionNotFound
    finally:
        broker.kill()
    assert any(batched for batched, _ in _log_records(data))
