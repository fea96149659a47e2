"""Key_Shared hashes sticky keys the way Pulsar's broker does.

Pulsar computes Murmur3 x86 32-bit (seed 0) over the sticky key's bytes (the
ordering key if the message has one, else its partition key), makes it non-negative
(``hash & Integer.MAX_VALUE``) and maps it into the hash range space of 65536 slots
(``hash % 65536``). The expected values here come from a from-scratch Murmur3 written
from the algorithm's description and from the published test vectors, not from the
``mmh3`` package the broker uses.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quasar.broker.entry_info import entry_info
from quasar.broker.key_shared import KEY_HASH_RANGE_SIZE, key_hash, sticky_key_hash
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


def test_key_hash_is_the_masked_murmur3_and_none_is_none_key() -> None:
    assert key_hash(b"Hello, world!") == 0xC036_3E43 & 0x7FFF_FFFF
    assert key_hash(None) == key_hash(b"NONE_KEY") == _murmur3_x86_32(b"NONE_KEY") & 0x7FFF_FFFF
