"""``StorageEnv``: one storage implementation under test, restartable (test helper)."""

from __future__ import annotations

from pathlib import Path

from quasar.clock import ManualClock
from quasar.storage import (
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    ManagedLedgerImpl,
    MemoryManagedLedgerFactory,
    MemoryMetadataStore,
    SqliteMetadataStore,
)
from quasar.storage.ledger_factory import BaseManagedLedgerFactory


def config(**overrides: object) -> ManagedLedgerConfig:
    """A config for tests: rollover is not held back by the 10-minute minimum."""
    values: dict[str, object] = {"min_ledger_rollover_time_minutes": 0}
    values.update(overrides)
    return ManagedLedgerConfig(**values)  # type: ignore[arg-type]


class StorageEnv:
    """A factory of one implementation that a test can restart."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        self.clock = ManualClock()
        self.meta: SqliteMetadataStore | MemoryMetadataStore
        self.factory: BaseManagedLedgerFactory = self._make()

    @property
    def durable(self) -> bool:
        return self.kind == "file"

    def _make(self) -> BaseManagedLedgerFactory:
        if self.kind == "file":
            self.meta = SqliteMetadataStore(self.root / "metadata.db")
            return FileManagedLedgerFactory(
                self.root / "data", self.meta, clock=self.clock
            )
        if not hasattr(self, "meta"):
            self.meta = MemoryMetadataStore()
            return MemoryManagedLedgerFactory(self.meta, clock=self.clock)
        return self.factory

    async def open(
        self, name: str = "t/ns/persistent/topic", **overrides: object
    ) -> ManagedLedgerImpl:
        return await self.factory.open(name, config(**overrides))

    async def reopen(self) -> None:
        """Clean restart: file restarts the factory; memory closes and keeps its data."""
        if self.kind == "file":
            await self.factory.close()
            self.meta.close()
        else:
            for ml in self.factory.open_ledgers().values():
                await ml.close()
        self.factory = self._make()

    async def crash(self) -> None:
        """Restart as after kill -9 (file only): nothing sealed, nothing persisted."""
        assert isinstance(self.factory, FileManagedLedgerFactory)
        self.factory.abandon()
        self.meta.close()
        self.factory = self._make()

    async def close(self) -> None:
        await self.factory.close()
        if self.kind == "file":
            self.meta.close()
