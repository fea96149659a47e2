"""The log record format: round trips, batched entries, corrupt input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.errors import CorruptRecordError
from quasar.protocol import pb, txnlog_pb
from quasar.transaction.coordinator import (
    Record,
    TransactionLog,
    decode_entry,
    encode_batch,
    encode_record,
)
from quasar.transaction.coordinator.log import BATCH_MAGIC, LogPosition

from .helpers import TcEnv, new_record

u64 = st.integers(0, 2**64 - 1)
names = st.text(min_size=1, max_size=20)


@st.composite
def records(draw: st.DrawFn) -> Record:
    r = Record(
        metadata_op=draw(st.sampled_from(list(Record.TransactionMetadataOp.values()))),
        txnid_least_bits=draw(u64),
        txnid_most_bits=draw(u64),
    )
    if draw(st.booleans()):
        r.expected_status = draw(st.sampled_from(list(txnlog_pb.TxnStatus.values())))
        r.new_status = draw(st.sampled_from(list(txnlog_pb.TxnStatus.values())))
    r.partitions.extend(draw(st.lists(names, max_size=3)))
    r.subscriptions.extend(
        pb.Subscription(topic=t, subscription=s)
        for t, s in draw(st.lists(st.tuples(names, names), max_size=3))
    )
    for field in ("timeout_ms", "start_time", "last_modification_time", "max_local_txn_id"):
        if draw(st.booleans()):
            setattr(r, field, draw(u64))
    if draw(st.booleans()):
        r.owner = draw(st.text(max_size=10))
    return r


@given(records())
def test_single_record_round_trip(r: Record) -> None:
    data = encode_record(r)
    assert data[:1] != b"\x0e"  # never mistaken for a batch
    assert decode_entry(data) == [r]


@given(st.lists(records(), min_size=1, max_size=5))
def test_batch_round_trip(rs: list[Record]) -> None:
    data = encode_batch(rs)
    assert int.from_bytes(data[:2], "big") == BATCH_MAGIC
    assert int.from_bytes(data[2:4], "big") == 1
    assert decode_entry(data) == rs


def test_unknown_batch_version_is_corrupt() -> None:
    data = bytearray(encode_batch([new_record(1)]))
    data[3] = 9
    with pytest.raises(CorruptRecordError, match="version 9"):
        decode_entry(bytes(data))


def test_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_entry(b"\xff\xff\xff\xff\xff")


async def test_replay_reads_batches_and_skips_batch_index_deletes(env: TcEnv) -> None:
    ml = await env.open_ledger()
    log = TransactionLog(ml)
    log.open()
    first = await ml.add_entry(encode_record(new_record(0)))
    batch_pos = await ml.add_entry(encode_batch([new_record(1), new_record(2), new_record(3)]))
    seen = [(p, r.txnid_least_bits) async for p, r in log.replay()]
    assert seen == [
        (LogPosition(first), 0),
        (LogPosition(batch_pos, 0, 3), 1),
        (LogPosition(batch_pos, 1, 3), 2),
        (LogPosition(batch_pos, 2, 3), 3),
    ]
    # Deleting one record of the batch keeps the entry and hides only that record.
    log.delete([LogPosition(batch_pos, 1, 3)], 3)
    seen = [r.txnid_least_bits async for _, r in log.replay()]
    assert seen == [0, 1, 3]
    log.delete([LogPosition(batch_pos, 0, 3), LogPosition(batch_pos, 2, 3)], 3)
    assert log.cursor.is_acknowledged(batch_pos)
    seen = [r.txnid_least_bits async for _, r in log.replay()]
    assert seen == [0]
    assert log.cursor.properties["max_local_txn_id"] == 3
    await ml.close()


async def test_delete_records_the_counter_before_the_deletions(env: TcEnv) -> None:
    ml = await env.open_ledger()
    log = TransactionLog(ml)
    log.open()
    pos = await log.append(new_record(0, max_id=5))
    log.delete([pos], 5)
    assert log.cursor.properties == {"max_local_txn_id": 5}
    assert log.cursor.is_acknowledged(pos.position)
    log.delete([], 4)  # never lowered
    assert log.cursor.properties == {"max_local_txn_id": 5}
    assert await log.recovered_max_local_txn_id() == 5
    await ml.close()


async def test_recovered_counter_reads_the_last_entry(env: TcEnv) -> None:
    ml = await env.open_ledger()
    log = TransactionLog(ml)
    log.open()
    assert await log.recovered_max_local_txn_id() == -1
    await log.append(new_record(0, max_id=0))
    await log.append(new_record(7, max_id=7))
    assert await log.recovered_max_local_txn_id() == 7
    await ml.close()
