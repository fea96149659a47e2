"""Durability on file storage: ``abandon()`` loses everything not synced, as kill -9
does; and real SIGKILLs at the pending-ack crash points."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from quasar.errors import TransactionConflict
from quasar.storage.api import ManagedCursor, Position

from .helpers import SUB, T1, T2, TOPIC, TOPIC_LEDGER, PaEnv, batch_ack_set, individual


class FrozenCursor:
    """Once ``frozen``, a cursor whose acknowledgements go nowhere and whose flush
    never returns: the broker dies after a COMMIT record and before the cursor update
    is durable."""

    def __init__(self, real: ManagedCursor) -> None:
        self._real = real
        self.frozen = False
        self.flushing = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    def delete(self, positions: Iterable[Position]) -> None:
        if not self.frozen:
            self._real.delete(positions)

    def mark_delete(self, position: Position, properties: dict[str, int] | None = None) -> None:
        if not self.frozen:
            self._real.mark_delete(position, properties)

    def set_batch_ack(self, position: Position, ack_set: Sequence[int]) -> None:
        if not self.frozen:
            self._real.set_batch_ack(position, ack_set)

    async def flush(self) -> None:
        if not self.frozen:
            return await self._real.flush()
        self.flushing.set()
        await asyncio.Event().wait()  # killed here


async def test_commit_is_durable_before_it_answers(tmp_path: Path) -> None:
    env = PaEnv("file", tmp_path)
    await env.start()
    try:
        await env.handle.individual_ack(T1, individual(env, 0, 1, 5))
        await env.handle.individual_ack(T1, [(env.p(7), 5, batch_ack_set(5, {0, 4}))])
        await env.handle.commit(T1, -1)
        handle = await env.crash()
        # The cursor alone (persisted by the commit's flush) has the acks.
        assert env.cursor.mark_delete_position == env.p(1)
        assert env.cursor.is_acknowledged(env.p(5))
        assert env.cursor.batch_ack_set(env.p(7)) == batch_ack_set(5, {0, 4})
        with pytest.raises(TransactionConflict, match="already acked before"):
            await handle.individual_ack(T2, individual(env, 5))
    finally:
        await env.close()


async def test_pending_acks_survive_a_crash(tmp_path: Path) -> None:
    env = PaEnv("file", tmp_path)
    await env.start()
    try:
        await env.handle.individual_ack(T1, individual(env, 2, 3))
        await env.handle.cumulative_ack(T1, env.p(1))
        handle = await env.crash()
        assert handle.pending_positions() == [env.p(2), env.p(3)]
        with pytest.raises(TransactionConflict, match="in pending ack status"):
            await handle.individual_ack(T2, individual(env, 3))
        await handle.commit(T1, -1)
        await env.crash()
        assert env.cursor.mark_delete_position == env.p(3)
    finally:
        await env.close()


async def test_crash_between_commit_record_and_cursor(tmp_path: Path) -> None:
    env = PaEnv("file", tmp_path)
    await env.open_ledgers()
    real = env.cursor
    frozen = FrozenCursor(real)
    env._cursor = frozen  # type: ignore[assignment]
    await env.start()
    try:
        await env.handle.individual_ack(T1, individual(env, 0, 1, 2))
        frozen.frozen = True
        commit = asyncio.ensure_future(env.handle.commit(T1, -1))
        await frozen.flushing.wait()  # COMMIT durable; the cursor saw nothing
        assert not real.is_acknowledged(env.p(0))
        commit.cancel()
        handle = await env.crash()
        assert env.cursor.mark_delete_position == env.p(2)  # re-applied by recovery
        assert handle.pending_state.txn_count == 0
        # Recovery flushed the cursor: a second crash keeps the acks.
        await env.crash()
        assert env.cursor.mark_delete_position == env.p(2)
    finally:
        await env.close()


# ---------------------------------------------------------------------------- SIGKILL

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from quasar.clock import ManualClock
    from quasar.storage import FileManagedLedgerFactory, ManagedLedgerConfig
    from quasar.storage import SqliteMetadataStore
    from quasar.storage.api import InitialPosition
    from quasar.transaction import AsyncioScheduler, TxnID
    from quasar.transaction.pending_ack import PendingAckHandle, pending_ack_ledger_name
    from quasar.transaction.pending_ack.config import PendingAckConfig

    async def main(root):
        meta = SqliteMetadataStore(root / "metadata.db")
        factory = FileManagedLedgerFactory(root / "data", meta)
        cfg = ManagedLedgerConfig(min_ledger_rollover_time_minutes=0)
        topic = await factory.open({topic_ledger!r}, cfg)
        positions = [await topic.add_entry(b"m%d" % i) for i in range(5)]
        cursor = topic.open_cursor({sub!r}, InitialPosition.EARLIEST)
        await cursor.flush()
        log = await factory.open(pending_ack_ledger_name({topic!r}, {sub!r}), cfg)
        config = PendingAckConfig(commit_flush_beside_record=sys.argv[2] == "beside")
        handle = PendingAckHandle(cursor, log, {topic!r}, {sub!r}, ManualClock(),
                                  AsyncioScheduler(), config)
        await handle.recover()
        txn = TxnID(0, 1)
        await handle.individual_ack(txn, [(p, None, None) for p in positions[:3]])
        await handle.commit(txn, -1)
        print("survived")

    asyncio.run(main(Path(sys.argv[1])))
    """
).format(topic_ledger=TOPIC_LEDGER, sub=SUB, topic=TOPIC)


def run_child(
    root: Path, point: str, commit: str = "record-first"
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, QUASAR_CRASH_POINT=point)
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), commit],
        env=env, capture_output=True, text=True, timeout=120,
    )


async def env_after_child(root: Path, point: str, commit: str = "record-first") -> PaEnv:
    """Run the child until it kills itself at ``point``; open what it left behind."""
    child = run_child(root, point, commit)
    assert child.returncode == -signal.SIGKILL, child.stderr
    env = PaEnv("file", root, entries=0)
    await env.open_ledgers()
    first = env.topic.first_position
    env.positions = [Position(first.ledger_id, first.entry_id + i) for i in range(5)]
    return env


@pytest.mark.crash
async def test_sigkill_after_commit_record_before_cursor(tmp_path: Path) -> None:
    env = await env_after_child(tmp_path, "pa.after_commit_record_before_cursor")
    try:
        assert not env.cursor.is_acknowledged(env.p(0))  # the cursor never saw it
        await env.start()
        assert env.cursor.mark_delete_position == env.p(2)
        await env.crash()
        assert env.cursor.mark_delete_position == env.p(2)
    finally:
        await env.close()


@pytest.mark.crash
async def test_sigkill_while_commit_record_and_cursor_flush_are_in_flight(
    tmp_path: Path,
) -> None:
    """The default commit writes its record and flushes the cursor at once. Killed
    then, any of the two may have landed; whichever did, the acks are pending or
    committed after recovery, and the coordinator's repeated commit (it never got
    an answer) leaves them committed for good."""
    env = await env_after_child(tmp_path, "pa.commit_beside_flush_started", commit="beside")
    try:
        handle = await env.start()
        if handle.pending_positions():  # neither landed: the acks are still pending
            assert handle.pending_positions() == env.positions[:3]
        else:
            assert env.cursor.mark_delete_position == env.p(2)
        await handle.commit(T1, -1)  # the coordinator, still COMMITTING, ends it again
        assert env.cursor.mark_delete_position == env.p(2)
        handle = await env.crash()
        assert env.cursor.mark_delete_position == env.p(2)
        assert handle.pending_positions() == []
    finally:
        await env.close()


@pytest.mark.crash
async def test_sigkill_after_ack_before_commit(tmp_path: Path) -> None:
    env = await env_after_child(tmp_path, "pa.after_ack_before_commit")
    try:
        handle = await env.start()
        assert handle.pending_positions() == env.positions[:3]
        with pytest.raises(TransactionConflict):
            await handle.individual_ack(T2, individual(env, 1))
        await handle.abort(T1, -1)
        await handle.individual_ack(T2, individual(env, 1))
    finally:
        await env.close()
