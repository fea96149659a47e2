"""kill -9 at the buffer's crash points, then recover on the same files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from quasar.transaction import TxnID
from quasar.transaction.buffer import CRASH_POINTS, TbState, TransactionBufferConfig
from quasar.transaction.buffer.records import TXN_COMMIT
from quasar.transaction.buffer.snapshot_format import segment_capacity, segment_key

from .crash_child import SEGMENT_BYTES
from .helpers import TOPIC, DirSnapshotStore, TbEnv

ROOT = Path(__file__).resolve().parents[3]


def run_child(root: Path, scenario: str, point: str) -> str:
    env = dict(os.environ, QUASAR_CRASH_POINT=point, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "tests.transaction.buffer.crash_child", str(root), scenario],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "survived" not in result.stdout
    return result.stdout


def test_points_are_named() -> None:
    assert set(CRASH_POINTS) == {"tb.after_marker_before_state", "tb.during_snapshot"}


async def test_crash_after_marker_before_state(tmp_path: Path) -> None:
    assert "sent" in run_child(tmp_path, "marker", "tb.after_marker_before_state")
    store = DirSnapshotStore(tmp_path / "snapshots")
    env = TbEnv("file", tmp_path, store=store)
    try:
        tb = await env.start()
        assert tb.state is TbState.READY
        # The marker was durable: the commit happened, the data is visible.
        assert await env.markers() == [(TXN_COMMIT, TxnID(0, 1))]
        assert await env.visible() == [b"t1"]
        # The coordinator never got its answer and retries: no second marker.
        await env.commit(TxnID(0, 1))
        assert len(await env.markers()) == 1
    finally:
        await env.close()


async def test_crash_during_segmented_snapshot(tmp_path: Path) -> None:
    assert "aborted" in run_child(tmp_path, "snapshot", "tb.during_snapshot")
    store = DirSnapshotStore(tmp_path / "snapshots")
    # The segment is durable, the index naming it is not.
    assert segment_key(TOPIC, 0) in store.keys()
    config = TransactionBufferConfig(snapshot_segment_size_bytes=SEGMENT_BYTES)
    env = TbEnv("file", tmp_path, config=config, store=store)
    try:
        tb = await env.start()
        n = segment_capacity(SEGMENT_BYTES, TOPIC) + 1
        # The old (first, empty) index plus the replay find every aborted id.
        assert tb.aborted_txn_count() == n
        assert await env.visible() == []
        # The next snapshot reuses (overwrites) the orphan segment's key.
        await tb.take_snapshot()
        tb = await env.restart()
        assert tb.aborted_txn_count() == n
    finally:
        await env.close()
