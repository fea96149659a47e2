"""Commit/abort markers, idempotent ends, late sends, the low watermark."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import (
    InvalidTxnStatus,
    NotAllowedError,
    ServiceNotReady,
    TooManyRequests,
)
from quasar.transaction import TxnAction, TxnID
from quasar.transaction.buffer import TbState, TransactionBufferConfig
from quasar.transaction.buffer.records import TXN_ABORT, TXN_COMMIT

from .helpers import TbEnv, drain, entry

T1 = TxnID(0, 1)
T2 = TxnID(0, 2)
T3 = TxnID(0, 3)
OTHER_TC = TxnID(5, 1)


async def test_commit_writes_marker_and_shows_data(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"a", T1)
    await env.commit(T1)
    assert await env.markers() == [(TXN_COMMIT, T1)]
    assert await env.visible() == [b"a"]
    assert tb.committed_count == 1
    assert not tb.is_aborted(T1)


async def test_abort_hides_data_forever(env: TbEnv) -> None:
    tb = await env.ready()
    p = await env.send(b"a", T1)
    await env.send(b"b")
    await env.abort(T1)
    assert await env.markers() == [(TXN_ABORT, T1)]
    assert await env.visible() == [b"b"]
    assert tb.is_aborted(T1, p)
    assert tb.stats()["totalAbortedTransactions"] == 1


async def test_repeated_end_writes_one_marker(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"a", T1)
    await env.commit(T1)
    await env.commit(T1)
    await env.send(b"b", T2)
    await env.abort(T2)
    await env.abort(T2)
    assert await env.markers() == [(TXN_COMMIT, T1), (TXN_ABORT, T2)]


async def test_concurrent_ends_join(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"a", T1)
    await asyncio.gather(env.commit(T1), env.commit(T1), env.commit(T1))
    assert await env.markers() == [(TXN_COMMIT, T1)]


async def test_opposite_end_is_refused(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"a", T1)
    await env.commit(T1)
    with pytest.raises(InvalidTxnStatus):
        await env.abort(T1)
    await env.send(b"b", T2)
    first = asyncio.ensure_future(env.abort(T2))
    await asyncio.sleep(0)
    with pytest.raises(InvalidTxnStatus):
        await env.commit(T2)  # while the abort marker is being written
    await first
    with pytest.raises(InvalidTxnStatus):
        await env.commit(T2)


async def test_end_of_unknown_txn_still_writes_marker(env: TbEnv) -> None:
    tb = await env.ready()
    await env.commit(T1)
    await env.abort(T2)
    assert await env.markers() == [(TXN_COMMIT, T1), (TXN_ABORT, T2)]
    # ...so a late send of either is refused.
    for t in (T1, T2):
        with pytest.raises(NotAllowedError):
            await tb.append_transactional(t, entry(b"late", t))


async def test_late_send_after_end_is_refused(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"a", T1)
    await env.commit(T1)
    with pytest.raises(NotAllowedError, match="ended"):
        await tb.append_transactional(T1, entry(b"late", T1))
    await env.send(b"b", T2)
    end = asyncio.ensure_future(env.abort(T2))
    await asyncio.sleep(0)  # marker in flight
    with pytest.raises(NotAllowedError):
        await tb.append_transactional(T2, entry(b"late", T2))
    await end
    assert await env.visible() == [b"a"]


async def test_send_at_or_below_low_watermark_is_refused(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"x", T3)
    await env.commit(T3, lwm=2)  # coordinator 0: ids <= 2 have ended
    assert tb.low_watermark(0) == 2
    for t in (T1, T2):
        with pytest.raises(NotAllowedError):
            await tb.append_transactional(t, entry(b"late", t))
    # Other coordinators are not affected.
    await tb.append_transactional(OTHER_TC, entry(b"ok", OTHER_TC))
    # The low watermark only goes up.
    await env.commit(OTHER_TC, lwm=-1)
    await tb.end_txn(TxnID(0, 9), TxnAction.COMMIT, 1)
    assert tb.low_watermark(0) == 2


async def test_orphan_below_low_watermark_is_aborted(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"orphan", T1)  # its end never reaches this partition
    await env.send(b"plain")
    await env.send(b"t3", T3)
    await env.commit(T3, lwm=1)  # T1 has ended on its coordinator
    await drain()
    assert await env.markers() == [(TXN_COMMIT, T3), (TXN_ABORT, T1)]
    assert await env.visible() == [b"plain", b"t3"]
    assert tb.ongoing_count() == 0
    assert tb.lwm_aborted_count == 1


async def test_orphans_behind_other_coordinators_are_found(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"other", OTHER_TC)  # oldest, alive
    await env.send(b"orphan", T1)
    await env.commit(T2, lwm=1)
    await drain()
    assert (TXN_ABORT, T1) in await env.markers()
    await env.commit(OTHER_TC)
    assert await env.visible() == [b"other"]


async def test_end_below_low_watermark_without_data_writes_nothing(env: TbEnv) -> None:
    await env.ready()
    await env.commit(T3, lwm=2)
    await env.commit(T1, lwm=2)  # a stale duplicate of an end long finished
    assert await env.markers() == [(TXN_COMMIT, T3)]


async def test_ends_without_snapshot_are_noops(env: TbEnv) -> None:
    tb = await env.start()
    await env.commit(T1)
    await env.abort(T2)
    assert await env.markers() == []
    assert tb.state is TbState.NO_SNAPSHOT
    with pytest.raises(NotAllowedError):
        await tb.append_transactional(T1, entry(b"late", T1))


async def test_end_waits_for_recovery(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"a", T1)
    await env.stop()
    tb = await env.start(recover=False)
    end = asyncio.ensure_future(env.commit(T1))
    await drain()
    assert not end.done()
    await tb.recover()
    await end
    assert await env.visible() == [b"a"]


async def test_closed_buffer_refuses(env: TbEnv) -> None:
    tb = await env.ready()
    await tb.close()
    with pytest.raises(ServiceNotReady):
        await env.commit(T1)
    with pytest.raises(ServiceNotReady):
        await tb.append_transactional(T1, entry(b"a", T1))
    with pytest.raises(ServiceNotReady):
        await tb.append_non_transactional(entry(b"a"))


async def test_recovering_buffer_refuses_txn_appends(env: TbEnv) -> None:
    tb = await env.start(recover=False)
    with pytest.raises(ServiceNotReady):
        await tb.append_transactional(T1, entry(b"a", T1))


async def test_client_entries_are_checked() -> None:
    env = TbEnv()
    try:
        tb = await env.ready()
        with pytest.raises(NotAllowedError):
            await tb.append_transactional(T1, entry(b"no ids"))
        with pytest.raises(NotAllowedError):
            await tb.append_transactional(T1, entry(b"wrong ids", T2))
        with pytest.raises(NotAllowedError):
            await tb.append_non_transactional(entry(b"ids", T1))
        from quasar.transaction.buffer import make_marker

        with pytest.raises(NotAllowedError):
            await tb.append_non_transactional(make_marker(T1, TxnAction.ABORT, 0))
        assert env.ml.number_of_entries == 0
    finally:
        await env.close()


async def test_limits_refuse_new_transactions_only() -> None:
    env = TbEnv(config=TransactionBufferConfig(max_ongoing_transactions=2, max_aborted_transactions=1))
    try:
        await env.ready()
        await env.send(b"1", T1)
        await env.send(b"2", T2)
        with pytest.raises(TooManyRequests):
            await env.send(b"3", T3)
        await env.send(b"1b", T1)  # an open one may go on
        await env.abort(T1)
        await env.abort(T2)  # aborts are never refused
        with pytest.raises(TooManyRequests, match="aborted"):
            await env.send(b"3", T3)
    finally:
        await env.close()
