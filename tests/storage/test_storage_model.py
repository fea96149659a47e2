"""Model-based test: a managed ledger and one durable cursor against a list model.

The model is a list of appended payloads, the set of acknowledged indexes and a read
index. After every step the cursor must agree with it on backlog, acknowledgement and
mark-delete; reads must return exactly the next unacknowledged payloads. For the file
implementation, restarts (clean, and crash after ``flush``) are steps too.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from quasar.storage import (
    InitialPosition,
    ManagedCursorImpl,
    ManagedLedgerImpl,
    Position,
)

from .storage_env import StorageEnv

T = TypeVar("T")
NAME = "model/topic"
CONFIG: dict[str, object] = {
    "max_entries_per_ledger": 3,
    "cursor_persist_interval_ms": 3_600_000,
}


class LedgerModel(RuleBasedStateMachine):
    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="quasar-model-"))
        self.env = StorageEnv(self.kind, self.root)
        self.ml: ManagedLedgerImpl = self.run(self.env.open(NAME, **CONFIG))
        self.cursor: ManagedCursorImpl = self.ml.open_cursor(
            "sub", InitialPosition.EARLIEST
        )
        self.payloads: list[bytes] = []
        self.positions: list[Position] = []
        self.acked: set[int] = set()
        self.read_index = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.env.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ model helpers

    def mark_delete_index(self) -> int:
        k = -1
        while k + 1 in self.acked:
            k += 1
        return k

    # ------------------------------------------------------------------ rules

    @rule(data=st.binary(max_size=64), count=st.integers(1, 4))
    def append(self, data: bytes, count: int) -> None:
        batch = [data + bytes([i]) for i in range(count)]
        positions = self.run(_gather(self.ml, batch))
        assert all(a < b for a, b in zip(positions, positions[1:], strict=False))
        assert not self.positions or self.positions[-1] < positions[0]
        self.payloads += batch
        self.positions += positions

    @rule(n=st.integers(1, 5))
    def read(self, n: int) -> None:
        got = self.run(self.cursor.read_entries(n))
        i = max(self.read_index, self.mark_delete_index() + 1)
        expected: list[int] = []
        examined = False
        while i < len(self.payloads) and len(expected) < n:
            if i not in self.acked:
                expected.append(i)
            i += 1
            examined = True
        if examined:
            self.read_index = i
        assert [e.data for e in got] == [self.payloads[j] for j in expected]
        assert [e.position for e in got] == [self.positions[j] for j in expected]

    @precondition(lambda self: self.payloads)
    @rule(data=st.data())
    def ack_individual(self, data: st.DataObject) -> None:
        idxs = data.draw(
            st.lists(st.integers(0, len(self.payloads) - 1), min_size=1, max_size=4)
        )
        self.cursor.delete([self.positions[i] for i in idxs])
        self.acked.update(idxs)

    @precondition(lambda self: self.payloads)
    @rule(data=st.data())
    def ack_cumulative(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.payloads) - 1))
        self.cursor.mark_delete(self.positions[i])
        self.acked.update(range(i + 1))

    @rule()
    def rewind(self) -> None:
        self.cursor.rewind()
        self.read_index = 0

    @precondition(lambda self: self.kind == "file")
    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        if crash:
            self.run(self.cursor.flush())
            self.run(self.env.crash())
        else:
            self.run(self.env.reopen())
        self.ml = self.run(self.env.open(NAME, **CONFIG))
        self.cursor = self.ml.cursors()["sub"]
        self.read_index = 0  # a recovered cursor reads from mark-delete on

    # ------------------------------------------------------------------ invariants

    @invariant()
    def cursor_matches_model(self) -> None:
        n = len(self.payloads)
        assert self.ml.number_of_entries == n
        assert self.cursor.backlog() == n - len(self.acked)
        for i, pos in enumerate(self.positions):
            assert self.cursor.is_acknowledged(pos) == (i in self.acked), (i, pos)
        k = self.mark_delete_index()
        if k >= 0:
            assert self.cursor.mark_delete_position == self.positions[k]
        ranges = self.cursor.individually_deleted_ranges()
        covered = sum(self.ml.count_entries(first, last) for first, last in ranges)
        assert covered == len(self.acked) - (k + 1)
        if self.positions:
            assert self.ml.last_confirmed_entry >= self.positions[-1] or (
                self.ml.last_confirmed_entry.entry_id == -1
            )


async def _gather(ml: ManagedLedgerImpl, batch: list[bytes]) -> list[Position]:
    return list(await asyncio.gather(*(ml.add_entry(b) for b in batch)))


class FileLedgerModel(LedgerModel):
    kind = "file"


MODEL_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestMemoryLedgerModel = LedgerModel.TestCase
TestMemoryLedgerModel.settings = MODEL_SETTINGS
TestFileLedgerModel = FileLedgerModel.TestCase
TestFileLedgerModel.settings = MODEL_SETTINGS
