"""Key_Shared through a real broker: key batches on partitions, STICKY ranges, joins.

Every scenario runs with the official client and with quasar's. Keys are routed by
Pulsar's hash: Murmur3 x86 32-bit (seed 0) of the key, ``& 0x7FFFFFFF``; STICKY
ranges are in its value modulo 65536, computed here with ``mmh3`` independently of
the broker.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import mmh3
import pytest

from .conftest import Admin, topic_path

pytestmark = pytest.mark.interop


def _slot(key: str) -> int:
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFF_FFFF) % 65536


def _key_shared(client: Any, mod: Any, topic: str, name: str, **kw: Any) -> Any:
    return client.subscribe(
        topic, "ks", consumer_type=mod.ConsumerType.KeyShared, consumer_name=name,
        initial_position=mod.InitialPosition.Earliest, **kw,
    )


def _sticky(mod: Any, *ranges: tuple[int, int]) -> Any:
    return mod.ConsumerKeySharedPolicy(
        key_shared_mode=mod.KeySharedMode.Sticky, sticky_ranges=list(ranges)
    )


class _Collector:
    """Receives and acknowledges on every consumer in its own thread until ``total``
    messages arrived or the deadline passed; records (consumer, key, value)."""

    def __init__(self, mod: Any, consumers: list[Any], total: int, timeout_s: float) -> None:
        self.got: list[tuple[int, str, int]] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        deadline = time.monotonic() + timeout_s
        self._threads = [
            threading.Thread(target=self._run, args=(mod, i, c, total, deadline), daemon=True)
            for i, c in enumerate(consumers)
        ]
        for t in self._threads:
            t.start()

    def _run(self, mod: Any, idx: int, c: Any, total: int, deadline: float) -> None:
        while not self._done.is_set() and time.monotonic() < deadline:
            try:
                m = c.receive(100)
            except mod.Timeout:
                continue
            c.acknowledge(m)
            with self._lock:
                self.got.append((idx, m.partition_key(), int(m.data())))
                if len(self.got) >= total:
                    self._done.set()

    def join(self) -> list[tuple[int, str, int]]:
        for t in self._threads:
            t.join()
        return self.got


def _assert_key_affinity_and_order(got: list[tuple[int, str, int]]) -> None:
    owner: dict[str, int] = {}
    per_key: dict[tuple[int, str], list[int]] = {}
    for idx, key, value in got:
        assert owner.setdefault(key, idx) == idx, f"key {key} went to two consumers"
        per_key.setdefault((idx, key), []).append(value)
    for values in per_key.values():
        assert values == sorted(values), "order within a key must be kept"


def test_key_batches_on_a_partitioned_topic_all_arrive(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str
) -> None:
    admin.ok("PUT", topic_path(topic) + "/partitions", 4)
    consumers = [_key_shared(client, pulsar_mod, topic, f"c{i}") for i in range(2)]
    p = client.create_producer(
        topic, batching_enabled=True, batching_type=pulsar_mod.BatchingType.KeyBased,
        batching_max_publish_delay_ms=5,
    )
    collector = _Collector(pulsar_mod, consumers, 1000, timeout_s=30)
    for i in range(1000):
        p.send_async(f"{i}".encode(), None, partition_key=f"key-{i % 50}")
    p.flush()
    got = collector.join()
    assert sorted(v for _, _, v in got) == list(range(1000))
    _assert_key_affinity_and_order(got)
    assert {idx for idx, _, _ in got} == {0, 1}


def test_sticky_ranges_route_keys_by_murmur3(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    low = _key_shared(client, pulsar_mod, topic, "low",
                      key_shared_policy=_sticky(pulsar_mod, (0, 32767)))
    high = _key_shared(client, pulsar_mod, topic, "high",
                       key_shared_policy=_sticky(pulsar_mod, (32768, 65535)))
    p = client.create_producer(topic, batching_enabled=False)
    keys = [f"k{n}" for n in range(40)]
    for i, key in enumerate(keys):
        p.send(f"{i}".encode(), partition_key=key)
    got = _Collector(pulsar_mod, [low, high], len(keys), timeout_s=10).join()
    assert len(got) == len(keys)
    for idx, key, _ in got:
        assert idx == (0 if _slot(key) <= 32767 else 1), (key, _slot(key))
    assert {idx for idx, _, _ in got} == {0, 1}


def test_keys_no_range_covers_wait_for_a_consumer_that_does(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    low = _key_shared(client, pulsar_mod, topic, "low",
                      key_shared_policy=_sticky(pulsar_mod, (0, 32767)))
    p = client.create_producer(topic, batching_enabled=False)
    keys = [f"k{n}" for n in range(20)]
    for i, key in enumerate(keys):
        p.send(f"{i}".encode(), partition_key=key)
    covered = [k for k in keys if _slot(k) <= 32767]
    first = _Collector(pulsar_mod, [low], len(covered), timeout_s=10).join()
    assert sorted(k for _, k, _ in first) == sorted(covered)
    with pytest.raises(pulsar_mod.Timeout):
        low.receive(300)  # the other keys are nobody's yet
    high = _key_shared(client, pulsar_mod, topic, "high",
                       key_shared_policy=_sticky(pulsar_mod, (32768, 65535)))
    rest = _Collector(pulsar_mod, [high], len(keys) - len(covered), timeout_s=10).join()
    assert sorted(k for _, k, _ in rest) == sorted(set(keys) - set(covered))


def test_overlapping_sticky_ranges_are_refused(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    _key_shared(client, pulsar_mod, topic, "a", key_shared_policy=_sticky(pulsar_mod, (0, 1000)))
    with pytest.raises(pulsar_mod.ConsumerAssignError):
        _key_shared(client, pulsar_mod, topic, "b",
                    key_shared_policy=_sticky(pulsar_mod, (500, 2000)))
    # A range next to it is fine.
    _key_shared(client, pulsar_mod, topic, "c", key_shared_policy=_sticky(pulsar_mod, (1001, 2000)))


def test_a_consumer_joining_mid_stream_keeps_each_keys_order(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str
) -> None:
    first = _key_shared(client, pulsar_mod, topic, "first")
    p = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{k}" for k in range(10)]
    for i in range(100):
        p.send(f"{i}".encode(), partition_key=keys[i % 10])
    held = [first.receive(10_000) for _ in range(100)]  # in flight, not acknowledged
    second = _key_shared(client, pulsar_mod, topic, "second")
    for i in range(100, 200):
        p.send(f"{i}".encode(), partition_key=keys[i % 10])
    # Keys that moved to "second" wait until "first" acknowledged what it holds.
    stats = admin.ok("GET", topic_path(topic) + "/stats")["subscriptions"]["ks"]
    assert set(stats["consumersAfterMarkDeletePosition"]) == {"second"}
    ranges = {c["consumerName"]: c["keyHashRanges"] for c in stats["consumers"]}
    assert ranges["first"] and ranges["second"]
    with pytest.raises(pulsar_mod.Timeout):
        second.receive(300)
    for m in held:
        first.acknowledge(m)
    got = [(0, m.partition_key(), int(m.data())) for m in held]
    got += _Collector(pulsar_mod, [first, second], 100, timeout_s=10).join()
    assert sorted(v for _, _, v in got) == list(range(200))
    per_key: dict[str, list[int]] = {}
    for _, key, value in got:  # held first, then in arrival order per consumer
        per_key.setdefault(key, []).append(value)
    moved = {k for idx, k, _ in got if idx == 1}
    assert moved, "the second consumer took over some keys"
    for key in moved:
        at_first = [v for idx, k, v in got if k == key and idx == 0]
        at_second = [v for idx, k, v in got if k == key and idx == 1]
        assert max(at_first) < min(at_second), key
        assert at_second == sorted(at_second)
