"""Stats, producer connect, and the position-aware aborted check."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import (
    CorruptRecordError,
    InvalidTxnStatus,
    PersistenceError,
    ServiceNotReady,
)
from quasar.transaction import TxnID
from quasar.transaction.buffer import TbState, TransactionBufferConfig

from .helpers import TOPIC, TbEnv, drain, entry

T1 = TxnID(0, 1)
T2 = TxnID(0, 2)
T3 = TxnID(0, 3)


async def test_committed_data_stays_visible_after_late_send_is_aborted() -> None:
    """The ended-transaction cache is bounded; once it forgets a commit, a late send
    of that id is accepted (Pulsar's behaviour) and later aborted by the low
    watermark. Only the late entry is hidden, not the committed ones before it."""
    env = TbEnv(config=TransactionBufferConfig(max_ended_transactions=1))
    try:
        tb = await env.ready()
        p1 = await env.send(b"committed", T1)
        await env.commit(T1)
        await env.commit(T2)  # evicts T1 from the cache (size 1)
        late = await env.send(b"late", T1)  # accepted: nothing says T1 ended
        assert await env.visible() == [b"committed"]
        await env.commit(T3, lwm=2)  # the coordinator's low watermark covers T1
        await drain()
        assert tb.ongoing_count() == 0
        assert tb.is_aborted(T1, late) and not tb.is_aborted(T1, p1)
        assert await env.visible() == [b"committed"]
        tb = await env.restart()  # the distinction survives recovery
        assert tb.is_aborted(T1, late) and not tb.is_aborted(T1, p1)
        assert await env.visible() == [b"committed"]
    finally:
        await env.close()


async def test_stats_shape(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"a", T1)
    await env.send(b"b", T2)
    await env.abort(T2, lwm=0)
    stats = tb.stats(low_watermarks=True)
    assert stats == {
        "state": "Ready",
        "maxReadPosition": str(tb.max_read_position),
        "lastSnapshotTimestamps": env.clock.wall_ms(),
        "ongoingTxnSize": 1,
        "recoverStartTime": env.clock.wall_ms(),
        "recoverEndTime": env.clock.wall_ms(),
        "totalAbortedTransactions": 1,
        "snapshotType": "Segment",
        "lowWaterMarks": {0: 0},
    }
    assert tb.transaction_in_buffer_stats(T1)["startPosition"] is not None
    assert tb.transaction_in_buffer_stats(T2) == {"startPosition": None, "aborted": True}
    assert (tb.committed_count, tb.aborted_count) == (0, 1)


async def test_plain_producer_does_not_wait_or_snapshot(env: TbEnv) -> None:
    await env.stop()
    tb = await env.start(recover=False)
    await tb.check_if_recovered(txn_enabled=False)  # returns although not recovered
    waiting = asyncio.ensure_future(tb.check_if_recovered(txn_enabled=True))
    await drain()
    assert not waiting.done()
    await tb.recover()
    await waiting
    assert tb.state is TbState.READY
    assert env.store.writes  # the first snapshot


async def test_no_snapshot_end_conflict(env: TbEnv) -> None:
    await env.start()
    await env.commit(T1)
    with pytest.raises(InvalidTxnStatus):
        await env.abort(T1)


async def test_recovery_failure_wakes_producer_connect(
    env: TbEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    await env.ready()
    await env.stop()

    async def unreadable(key: str) -> bytes | None:
        raise PersistenceError("snapshot store down")

    monkeypatch.setattr(env.store, "read", unreadable)
    tb = await env.start(recover=False)
    waiting = asyncio.ensure_future(tb.check_if_recovered(txn_enabled=True))
    with pytest.raises(PersistenceError):
        await tb.recover()
    with pytest.raises(ServiceNotReady, match="failed to recover"):
        await waiting
    with pytest.raises(ServiceNotReady):
        await tb.append_transactional(T1, entry(b"x", T1))


async def test_unreadable_snapshot_falls_back_to_replaying_the_topic(env: TbEnv) -> None:
    """A snapshot is only a shortcut: when it cannot be read, recovery replays the
    whole topic and ends with the same state (an open transaction stays open and
    holds the max read position, an aborted one stays invisible)."""
    await env.ready()
    await env.send(b"a", T1)
    await env.abort(T1)
    await env.send(b"plain")
    await env.send(b"b", T2)
    await env.tb.take_snapshot()
    await env.stop()
    env.store.data[TOPIC] = b"bad"
    seen: list[CorruptRecordError] = []
    tb = await env.start(recover=False)
    tb._on_corrupt_snapshot = seen.append  # the broker passes its metric's counter
    await tb.recover()
    assert tb.state is TbState.READY
    assert len(seen) == 1
    assert await env.visible() == [b"plain"]
    assert list(tb.ongoing_transactions()) == [T2]
    await env.commit(T2)
    assert await env.visible() == [b"plain", b"b"]
