"""The producer-name generation a broker claims at start-up: cluster members share the
counter and may start at the same moment, so one whose compare-and-set lost reads the
counter again and claims the next free generation instead of failing to start."""

from __future__ import annotations

from types import SimpleNamespace

from quasar.broker.service import PRODUCER_NAME_COUNTER, BrokerService
from quasar.storage.metadata.memory import MemoryMetadataStore


class RacingStore:
    """A store where another member claims a generation just before each of the
    first ``races`` writes of this one."""

    def __init__(self, races: int) -> None:
        self.inner = MemoryMetadataStore()
        self.races = races

    def get(self, path: str) -> object:
        return self.inner.get(path)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        if self.races:
            self.races -= 1
            found = self.inner.get(path)
            other = int(found.value) + 1 if found else 0
            self.inner.put(path, str(other).encode(), found.version if found else -1)
        return self.inner.put(path, value, expected_version)


def _claim(store: RacingStore) -> int:
    broker = SimpleNamespace(store=store)
    broker._claim_generation = lambda: BrokerService._claim_generation(broker)  # type: ignore[arg-type]
    return BrokerService._next_generation(broker)  # type: ignore[arg-type]


def test_a_lost_compare_and_set_claims_the_next_generation() -> None:
    store = RacingStore(races=3)
    # The other member took 0, 1 and 2 while this one tried; it gets 3, and the
    # counter says so.
    assert _claim(store) == 3
    found = store.inner.get(PRODUCER_NAME_COUNTER)
    assert found is not None and found.value == b"3"
    # Without a race, the next claim is the next number.
    assert _claim(store) == 4
