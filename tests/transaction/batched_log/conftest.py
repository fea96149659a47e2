"""Fixtures: an in-memory managed ledger on a virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from quasar.clock import ManualClock
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore
from quasar.storage.api import ManagedLedger
from quasar.transaction.scheduler import VirtualScheduler

from ..helpers import ledger_config


@dataclass
class Env:
    clock: ManualClock
    sched: VirtualScheduler
    factory: MemoryManagedLedgerFactory
    ledger: ManagedLedger


@pytest.fixture
async def wenv() -> AsyncIterator[Env]:
    clock = ManualClock()
    factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=clock)
    ledger = await factory.open("t/ns/persistent/batched-log", ledger_config())
    yield Env(clock, VirtualScheduler(clock), factory, ledger)
    await ledger.close()
    await factory.close()
