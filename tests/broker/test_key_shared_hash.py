"""Key_Shared hashes sticky keys the way Pulsar's broker does.

Pulsar computes Murmur3 x86 32-bit (seed 0) over the sticky key's bytes (the
ordering key if the message has one, else its partition key), makes it non-negative
(``hash & Integer.MAX_VALUE``) and maps it into the hash range space of 65536 slots
(``hash % 65536``). The expected values here come from a from-scratch Murmur3 written
from the algorithm's description and from the published test vectors, not from the
``mmh3`` package the broker uses.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from quasar.broker.consumer import Consumer
from quasar.broker.delayed_delivery import DelayedDelivery
from quasar.broker.dispatcher import (
    KEY_HASH_RANGE_SIZE,
    KeySharedDispatcher,
    sticky_key_hash,
)
from quasar.broker.entry_info import entry_info
from quasar.clock import ManualClock
from quasar.config import DelayedDeliveryConfig
from quasar.protocol import make_entry, pb

_M32 = 0xFFFF_FFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 as Austin Appleby specified it (unsigned result)."""
    c1, c2 = 0xCC9E_2D51, 0x1B87_3593
    h = seed & _M32
    body = len(data) // 4 * 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = _rotl32((k * c1) & _M32, 15)
        h ^= (k * c2) & _M32
        h = (_rotl32(h, 13) * 5 + 0xE654_6B64) & _M32
    tail = data[body:]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if tail:
        k ^= tail[0]
        k = _rotl32((k * c1) & _M32, 15)
        h ^= (k * c2) & _M32
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EB_CA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2_AE35) & _M32
    h ^= h >> 16
    return h


# Published MurmurHash3_x86_32 vectors (seed 0).
VECTORS = {
    b"": 0x0000_0000,
    b"hello": 0x248B_FA47,
    b"Hello, world!": 0xC036_3E43,
    b"The quick brown fox jumps over the lazy dog": 0x2E4F_F723,
}


def test_reference_murmur3_matches_the_published_vectors() -> None:
    for data, expected in VECTORS.items():
        assert _murmur3_x86_32(data) == expected, data


def test_sticky_key_hash_of_known_keys() -> None:
    # "Hello, world!" has the sign bit set: Java's hash is negative, and Pulsar's
    # `& Integer.MAX_VALUE` clears that bit before taking the slot.
    assert sticky_key_hash(b"Hello, world!") == (0xC036_3E43 & 0x7FFF_FFFF) % 65536 == 0x3E43
    assert sticky_key_hash(b"hello") == 0x248B_FA47 % 65536 == 0xFA47
    assert sticky_key_hash(b"") == 0
    assert KEY_HASH_RANGE_SIZE == 65536


@given(st.binary(max_size=64))
def test_sticky_key_hash_is_murmur3_masked_into_the_range(key: bytes) -> None:
    expected = (_murmur3_x86_32(key) & 0x7FFF_FFFF) % 65536
    assert sticky_key_hash(key) == expected
    assert 0 <= sticky_key_hash(key) < KEY_HASH_RANGE_SIZE


@given(st.text(max_size=32))
def test_text_keys_hash_their_utf8_bytes(key: str) -> None:
    # Partition keys are strings on the wire; their UTF-8 bytes are hashed.
    assert sticky_key_hash(key.encode()) == (
        _murmur3_x86_32(key.encode("utf-8")) & 0x7FFF_FFFF
    ) % 65536


def test_the_sticky_key_is_the_ordering_key_else_the_partition_key() -> None:
    both = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1,
                              partition_key="pk", ordering_key=b"ok")
    only_partition = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1,
                                        partition_key="pk")
    assert entry_info(make_entry(both, b"x")).key == b"ok"
    assert entry_info(make_entry(only_partition, b"x")).key == b"pk"


class _NoConnection:
    remote_address = "test"
    client_version = "test"

    def write(self, frame: bytes) -> None:
        raise AssertionError("nothing is sent in this test")

    def close_consumer(self, consumer_id: int) -> None:
        raise AssertionError("nothing is closed in this test")


def _dispatcher(*names: str) -> tuple[KeySharedDispatcher, list[Consumer]]:
    # The dispatcher's collaborators are Protocols (broker/api.py): routing keys touches
    # none of them, so bare stand-ins do.
    sub: Any = SimpleNamespace(cursor=None, txns=None, compacted_read=None)
    topic: Any = SimpleNamespace(
        recent_infos=None,
        delayed_delivery=DelayedDelivery(DelayedDeliveryConfig(), ManualClock()),
    )
    d = KeySharedDispatcher(sub, topic)
    consumers = [
        Consumer(consumer_id=i, consumer_name=n, subscription_name="s",
                 sub_type=pb.CommandSubscribe.Key_Shared, connection=_NoConnection())
        for i, n in enumerate(names)
    ]
    for c in consumers:
        d.consumers.append(c)
        d._ring_add(c)
    return d, consumers


def test_a_consumer_leaving_takes_exactly_its_points_off_the_ring() -> None:
    d, consumers = _dispatcher(*(f"c{n}" for n in range(50)))
    fresh, _ = _dispatcher()
    for c in consumers:
        if c.consumer_id % 3:
            fresh.consumers.append(c)
            fresh._ring_add(c)
    for c in consumers:
        if c.consumer_id % 3 == 0:
            d.consumers.remove(c)
            d._ring_remove(c)
    # The same ring as one built from the consumers that stayed.
    assert [(h, o, id(c)) for h, o, c in d._ring] == [
        (h, o, id(c)) for h, o, c in fresh._ring
    ]


def test_the_ring_owner_of_a_key_is_the_first_point_at_or_after_its_hash() -> None:
    d, consumers = _dispatcher("alpha", "beta", "gamma")
    points = sorted(
        (sticky_key_hash(f"{c.consumer_name}{i}".encode()), c.order, c)
        for c in consumers
        for i in range(KeySharedDispatcher.POINTS_PER_CONSUMER)
    )
    for n in range(200):
        key = f"key-{n}".encode()
        h = sticky_key_hash(key)
        owner = next((c for p, _, c in points if p >= h), points[0][2])
        assert d.consumer_for(key) is owner
    # Messages without a key all go to the owner of Pulsar's NONE_KEY.
    assert d.consumer_for(None) is d.consumer_for(b"NONE_KEY")


def test_keys_spread_over_every_consumer_and_stay_put() -> None:
    d, consumers = _dispatcher("alpha", "beta", "gamma")
    owners = {f"key-{n}": d.consumer_for(f"key-{n}".encode()) for n in range(1000)}
    assert set(owners.values()) == set(consumers)
    assert all(d.consumer_for(k.encode()) is c for k, c in owners.items())
