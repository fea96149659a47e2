"""A coordinator log whose last record was torn by a crash mid-append.

The log is a managed ledger on file storage; a record whose bytes did not all reach
the disk fails its checksum and is cut off when the ledger is recovered. The
coordinator then replays the records before it, so the transaction is in the state
the last whole record gave it: a torn COMMITTED leaves COMMITTING (and the commit
is driven again, never turned into an abort), a torn COMMITTING leaves OPEN. A
state is never made up from a partial record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quasar.storage.file import format as fmt
from quasar.transaction import TxnAction, TxnID, TxnStatus
from quasar.transaction.coordinator.state import Op

from .helpers import P1, TcEnv, new_record, record, update_record, write_log

TXN = TxnID(0, 0)
TIMEOUT_MS = 600_000  # far beyond the test: no timeout abort interferes


def _tear_last_record(ledgers: Path, where: str) -> None:
    [path] = sorted(ledgers.glob("*.log"))
    data = path.read_bytes()
    offsets = fmt.scan(
        lambda off, n: data[off : off + n], len(data), verify=True
    ).offsets
    last, size = offsets[-1], len(data)
    cut = {
        "in-header": last + 3,
        "half": last + (size - last) // 2,
        "last-byte": size - 1,
    }[where]
    with open(path, "r+b") as f:
        f.truncate(cut)


@pytest.mark.parametrize("where", ["in-header", "half", "last-byte"])
@pytest.mark.parametrize(
    ("torn", "survives"),
    [
        (TxnStatus.COMMITTED, TxnStatus.COMMITTING),
        (TxnStatus.COMMITTING, TxnStatus.OPEN),
    ],
    ids=["committed-torn", "committing-torn"],
)
async def test_torn_last_record_leaves_the_state_of_the_record_before(
    tmp_path: Path, torn: TxnStatus, survives: TxnStatus, where: str
) -> None:
    env = TcEnv("file", tmp_path)
    try:
        records = [
            new_record(0, timeout_ms=TIMEOUT_MS, start=env.clock.wall_ms()),
            record(Op.ADD_PARTITION, 0, partitions=[P1.topic]),
            update_record(0, TxnStatus.OPEN, TxnStatus.COMMITTING),
        ]
        if torn is TxnStatus.COMMITTED:
            records.append(update_record(0, TxnStatus.COMMITTING, TxnStatus.COMMITTED))
        ml = await env.open_ledger()
        await write_log(ml, records)
        # kill -9: nothing is closed or sealed; then the last record loses its tail.
        env.factory.abandon()
        env.sqlite.close()
        _tear_last_record(tmp_path / "data" / "ledgers", where)
        env.factory = env._make_factory()
        env.client.hold()
        tc = await env.start()
        assert tc.get_txn_meta(TXN).status is survives
        assert tc.next_sequence() == 1  # the id stays taken whatever was torn
        env.client.release()
        await env.settle()
        if survives is TxnStatus.COMMITTING:
            # Recovery finishes the commit the durable record decided, and only that; a
            # client's retried commit joins it and is answered OK. (File appends complete
            # on the writer thread: joining the end waits for them.)
            await tc.end_txn(TXN, TxnAction.COMMIT)
            assert env.client.ended_txns(P1) == [(TXN, TxnAction.COMMIT)]
            assert tc.transactions() == []
        else:
            # Nothing was decided durably: the transaction is open, as before the end.
            assert env.client.ended_txns(P1) == []
            assert tc.get_txn_meta(TXN).status is TxnStatus.OPEN
    finally:
        await env.close()
