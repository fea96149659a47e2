"""``PaEnv``: a subscription (topic ledger + cursor) with a pending-ack handle that a
test can restart, on in-memory or file storage (test helper)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from quasar.clock import ManualClock
from quasar.storage import (
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    MemoryManagedLedgerFactory,
    MemoryMetadataStore,
    SqliteMetadataStore,
)
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position
from quasar.storage.ledger_factory import BaseManagedLedgerFactory
from quasar.transaction import TxnID, VirtualScheduler
from quasar.transaction.pending_ack import (
    AbortResult,
    PendingAckConfig,
    PendingAckHandle,
    pending_ack_ledger_name,
)
from quasar.transaction.scheduler import settle

TOPIC = "persistent://public/default/orders"
SUB = "sub"
TOPIC_LEDGER = "public/default/persistent/orders"

T1 = TxnID(0, 1)
T2 = TxnID(0, 2)
T3 = TxnID(0, 3)


def ledger_config(**overrides: object) -> ManagedLedgerConfig:
    values: dict[str, object] = {"min_ledger_rollover_time_minutes": 0}
    values.update(overrides)
    return ManagedLedgerConfig(**values)  # type: ignore[arg-type]


class PaEnv:
    """A topic with ``entries`` entries, one durable subscription, one handle.

    ``kind="memory"``: ``restart()`` builds a new handle over the same ledgers and
    cursor (a clean restart). ``kind="file"``: ``crash()`` abandons the factory (as
    kill -9) and reopens everything from disk.
    """

    def __init__(
        self,
        kind: str = "memory",
        root: Path | None = None,
        *,
        entries: int = 20,
        config: PendingAckConfig | None = None,
        log_ledger_config: ManagedLedgerConfig | None = None,
    ) -> None:
        self.kind = kind
        self.root = root
        self.entries = entries
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.config = config or PendingAckConfig()
        self.log_ledger_config = log_ledger_config or ledger_config()
        self.memory_meta = MemoryMetadataStore()
        self.factory: BaseManagedLedgerFactory = self._make_factory()
        self.lwm_aborts: list[tuple[TxnID, AbortResult]] = []
        self.fenced: list[PendingAckHandle] = []
        self.positions: list[Position] = []
        self._handle: PendingAckHandle | None = None
        self._topic: ManagedLedger | None = None
        self._log: ManagedLedger | None = None
        self._cursor: ManagedCursor | None = None

    def _make_factory(self) -> BaseManagedLedgerFactory:
        if self.kind == "memory":
            return MemoryManagedLedgerFactory(self.memory_meta, clock=self.clock)
        assert self.root is not None
        self.sqlite = SqliteMetadataStore(self.root / "metadata.db")
        return FileManagedLedgerFactory(self.root / "data", self.sqlite, clock=self.clock)

    @property
    def handle(self) -> PendingAckHandle:
        assert self._handle is not None, "start() first"
        return self._handle

    @property
    def cursor(self) -> ManagedCursor:
        assert self._cursor is not None
        return self._cursor

    @property
    def topic(self) -> ManagedLedger:
        assert self._topic is not None
        return self._topic

    @property
    def log_ledger(self) -> ManagedLedger:
        assert self._log is not None
        return self._log

    def p(self, i: int) -> Position:
        """The i-th entry of the topic."""
        return self.positions[i]

    async def open_ledgers(self) -> None:
        # cast: ManagedLedgerImpl.cursors() returns dict[str, ManagedCursorImpl], which
        # mypy does not accept for the protocol's dict[str, ManagedCursor] (invariance).
        self._topic = cast(ManagedLedger, await self.factory.open(TOPIC_LEDGER, ledger_config()))
        if not self.positions:
            for i in range(self.entries):
                self.positions.append(await self.topic.add_entry(f"m{i}".encode()))
        self._cursor = self.topic.open_cursor(SUB, InitialPosition.EARLIEST)
        self._log = cast(ManagedLedger, await self.factory.open(
            pending_ack_ledger_name(TOPIC, SUB), self.log_ledger_config
        ))

    def new_handle(self) -> PendingAckHandle:
        self._handle = PendingAckHandle(
            self.cursor, self.log_ledger, TOPIC, SUB, self.clock, self.sched, self.config,
            on_low_watermark_abort=lambda t, r: self.lwm_aborts.append((t, r)),
            on_fenced=self.fenced.append,
        )
        return self._handle

    async def start(self) -> PendingAckHandle:
        if self._topic is None:
            await self.open_ledgers()
        handle = self.new_handle()
        await handle.recover()
        return handle

    async def restart(self) -> PendingAckHandle:
        """A new handle over the same ledgers and cursor (clean restart)."""
        await self.handle.close()
        return await self.start()

    async def crash(self) -> PendingAckHandle:
        """File storage: drop everything unsynced, reopen from disk, recover."""
        assert isinstance(self.factory, FileManagedLedgerFactory)
        await self.handle.close()  # stops its tasks; the abandon loses its state
        self.factory.abandon()
        self.sqlite.close()
        self.factory = self._make_factory()
        self._topic = self._log = self._cursor = None
        await self.open_ledgers()
        return await self.start()

    async def close(self) -> None:
        if self._handle is not None:
            await self._handle.close()
        await self.factory.close()
        if self.kind == "file":
            self.sqlite.close()

    async def settle(self) -> None:
        await settle()


def individual(env: PaEnv, *indexes: int) -> list[tuple[Position, int | None, None]]:
    """Whole-entry acks of entries ``indexes``."""
    return [(env.p(i), None, None) for i in indexes]


def batch_ack_set(batch_size: int, acked: set[int]) -> list[int]:
    """The wire ack set (1 = still unacked) of an ack that takes ``acked``."""
    bits = ((1 << batch_size) - 1) & ~sum(1 << i for i in acked)
    words = []
    while bits:
        w = bits & ((1 << 64) - 1)
        words.append(w - (1 << 64) if w >> 63 else w)
        bits >>= 64
    return words
