"""Ack sets in java.util.BitSet.toLongArray() layout."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.protocol import (
    and_,
    clear_index,
    full_ack_set,
    is_acked,
    is_all_acked,
    or_,
    unacked_indexes,
)
from quasar.protocol.ack_set import bits_to_words, indexes_to_words, words_to_bits


def test_full_ack_set_words() -> None:
    assert full_ack_set(0) == []
    assert full_ack_set(1) == [1]
    assert full_ack_set(3) == [0b111]
    assert full_ack_set(63) == [(1 << 63) - 1]
    assert full_ack_set(64) == [-1]  # bit 63 set: negative as a signed int64
    assert full_ack_set(65) == [-1, 1]
    assert full_ack_set(130) == [-1, -1, 3]
    with pytest.raises(ValueError):
        full_ack_set(-1)


def test_clear_index_and_trailing_zero_words_dropped() -> None:
    s = full_ack_set(66)
    s = clear_index(s, 65)
    assert s == [-1, 1]
    s = clear_index(s, 64)
    assert s == [-1]
    s = clear_index(s, 63)
    assert s == [(1 << 63) - 1]
    assert clear_index([], 5) == []
    with pytest.raises(ValueError):
        clear_index([1], -1)


def test_unacked_indexes_and_is_acked() -> None:
    s = clear_index(clear_index(full_ack_set(70), 0), 64)
    assert unacked_indexes(s, 70) == [i for i in range(70) if i not in (0, 64)]
    assert unacked_indexes(s, 10) == list(range(1, 10))
    assert is_acked(s, 0) and is_acked(s, 64) and not is_acked(s, 1)
    assert is_acked(s, 500)  # beyond the words: cleared


def test_is_all_acked() -> None:
    assert is_all_acked([])
    assert is_all_acked([0, 0])
    assert not is_all_acked([1])
    # Bits past the batch size do not count when the size is given.
    assert is_all_acked([-8], 3)
    assert not is_all_acked([-8], 4)
    assert is_all_acked([0, 1 << 5], 64)
    assert not is_all_acked([0, 1 << 5], 70)


def test_and_merges_partial_acks() -> None:
    a = clear_index(full_ack_set(5), 1)
    b = clear_index(full_ack_set(5), 3)
    assert unacked_indexes(and_(a, b), 5) == [0, 2, 4]
    assert and_([-1, 5], [-1]) == [-1]
    assert and_([1], [2]) == []


def test_or_unites_members() -> None:
    assert or_([0b0101], [0b0011]) == [0b0111]
    assert or_([1], [0, -1]) == [1, -1]  # the shorter one counts as zero-filled
    assert or_([0, 0], []) == []
    assert unacked_indexes(or_([1 << 63], [0, 1]), 70) == [63, 64]


def test_arguments_are_not_modified() -> None:
    s = full_ack_set(10)
    clear_index(s, 2)
    and_(s, [0])
    assert s == full_ack_set(10)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.sets(st.integers(0, 299)))
def test_against_a_set_model(n: int, acked: set[int]) -> None:
    s = full_ack_set(n)
    for i in sorted(acked):
        s = clear_index(s, i)
    expected = [i for i in range(n) if i not in acked]
    assert unacked_indexes(s, n) == expected
    assert is_all_acked(s) == (not expected)
    assert all(-(1 << 63) <= w < (1 << 63) for w in s)
    assert not s or s[-1] != 0


def test_long_ack_sets_convert_exactly() -> None:
    """A peer may send ack sets of hundreds of thousands of words; the conversions
    handle them in one pass (see ``bits_to_words``), and exactly."""
    words = [(k * 0x9E3779B97F4A7C15) % (1 << 64) - (1 << 63) for k in range(100_000)]
    words[-1] = -2
    bits = words_to_bits(words)
    assert bits.bit_length() == 64 * 100_000
    assert bits_to_words(bits) == words
    assert bits_to_words(bits >> 64) == words[1:]
    assert words_to_bits(words + [0, 0]) == bits
    assert words_to_bits(iter(words)) == bits


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=8))
def test_words_round_trip(words: list[int]) -> None:
    while words and words[-1] == 0:
        words.pop()
    assert bits_to_words(words_to_bits(words)) == words


def test_indexes_to_words() -> None:
    assert indexes_to_words([], 10) == []
    assert indexes_to_words([0, 2], 3) == [0b101]
    assert indexes_to_words([63], 64) == [-(1 << 63)]
    assert indexes_to_words([64], 65) == [0, 1]
    n = 6_400_000
    assert indexes_to_words(range(n), n) == full_ack_set(n)
    with pytest.raises(ValueError):
        indexes_to_words([3], 3)
