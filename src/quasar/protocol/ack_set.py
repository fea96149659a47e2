"""Batch-index ack sets in the layout of ``java.util.BitSet.toLongArray()``.

An ack set says which messages of a batch entry are **still unacknowledged**
(bit set = not acked, bit clear = acked). It travels as ``repeated int64`` in
``MessageIdData.ack_set`` and ``CommandMessage.ack_set``::

    word k (int64)            bit i of the batch
    ack_set[0]   bits 0..63   index i  ->  ack_set[i // 64] & (1 << (i % 64))
    ack_set[1]   bits 64..127
    ...          trailing all-zero words are dropped, so "all acked" is []

Protobuf's int64 is signed, so a word whose bit 63 is set appears as a negative
number; every function here accepts such words and returns them in that signed form.
All functions are pure: they return new lists and never modify their arguments.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .int64 import INT64_MAX, UINT64_MAX, to_int64

__all__ = [
    "and_",
    "bits_to_words",
    "clear_index",
    "full_ack_set",
    "indexes_to_words",
    "is_all_acked",
    "is_acked",
    "unacked_indexes",
    "words_to_bits",
]


def bits_to_words(bits: int) -> list[int]:
    """A non-negative bit string as ack-set words (signed int64, word 0 lowest, no
    trailing zero words).

    Linear in the number of words: the whole string is converted to bytes once and
    unpacked in one call (shifting the string by 64 bits per word would copy it once
    per word, quadratic for the long ack sets a peer can send).
    """
    assert bits >= 0, "ack sets are non-negative bit strings"
    if bits <= UINT64_MAX:  # one word or none: the common case, without struct
        if not bits:
            return []
        return [bits - (1 << 64) if bits > INT64_MAX else bits]
    n = (bits.bit_length() + 63) // 64
    return list(struct.unpack(f"<{n}q", bits.to_bytes(8 * n, "little")))


def words_to_bits(words: Iterable[int]) -> int:
    """Ack-set words (signed int64, word 0 lowest) as one non-negative bit string;
    the inverse of :func:`bits_to_words`.

    Linear in the number of words, for the same reason: the words are packed into
    bytes and read as one integer, never or-ed into a growing integer one by one.
    """
    unsigned = [word & UINT64_MAX for word in words]  # to_uint64 inline
    if len(unsigned) <= 1:
        return unsigned[0] if unsigned else 0
    return int.from_bytes(struct.pack(f"<{len(unsigned)}Q", *unsigned), "little")


def _trim(words: list[int]) -> list[int]:
    while words and words[-1] == 0:
        words.pop()
    return words


def indexes_to_words(indexes: Iterable[int], n: int) -> list[int]:
    """The ack set whose bits are exactly ``indexes`` (all below ``n``), in time
    linear in ``n`` and the number of indexes.

    Raises ``ValueError`` if an index is outside ``0..n-1``.
    """
    buf = bytearray((n + 7) // 8)
    for i in indexes:
        if not 0 <= i < n:
            raise ValueError(f"batch index {i} outside a batch of {n}")
        buf[i >> 3] |= 1 << (i & 7)
    return bits_to_words(int.from_bytes(buf, "little"))


def full_ack_set(n: int) -> list[int]:
    """Return the ack set of a fresh batch of ``n`` messages: bits 0..n-1 set.

    Raises ``ValueError`` if ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"batch size must be >= 0, got {n}")
    words = [-1] * (n // 64)  # a full word is all ones, i.e. -1 as a signed int64
    rest = n % 64
    if rest:
        words.append(to_int64((1 << rest) - 1))
    return words


def clear_index(ack_set: Sequence[int], index: int) -> list[int]:
    """Return ``ack_set`` with message ``index`` marked acknowledged (bit cleared).

    Raises ``ValueError`` if ``index`` is negative.
    """
    if index < 0:
        raise ValueError(f"batch index must be >= 0, got {index}")
    word, bit = divmod(index, 64)
    words = [w & UINT64_MAX for w in ack_set]
    if word < len(words):
        words[word] &= ~(1 << bit) & UINT64_MAX
    return [to_int64(w) for w in _trim(words)]


def is_acked(ack_set: Sequence[int], index: int) -> bool:
    """Tell whether message ``index`` is acknowledged (its bit is clear or absent).

    Raises ``ValueError`` if ``index`` is negative.
    """
    if index < 0:
        raise ValueError(f"batch index must be >= 0, got {index}")
    word, bit = divmod(index, 64)
    if word >= len(ack_set):
        return True
    # >> on a negative (signed) word still yields its two's-complement bits.
    return not (ack_set[word] >> bit) & 1


def unacked_indexes(ack_set: Sequence[int], n: int) -> list[int]:
    """Return, in order, the indexes below ``n`` that are still unacknowledged."""
    out: list[int] = []
    for word_index, word in enumerate(ack_set):
        word &= UINT64_MAX
        base = word_index * 64
        while word:
            low = word & -word
            i = base + low.bit_length() - 1
            if i >= n:
                return out
            out.append(i)
            word ^= low
    return out


def is_all_acked(ack_set: Sequence[int], n: int | None = None) -> bool:
    """Tell whether no message is left unacknowledged.

    With ``n`` only indexes below ``n`` count, so stray bits past the batch size (which
    some clients set) do not keep a batch alive.
    """
    if n is None:
        return not any(ack_set)
    full_words, rest = divmod(n, 64)
    for word_index, word in enumerate(ack_set):
        if word_index < full_words:
            if word:
                return False
        else:
            return word_index > full_words or not word & ((1 << rest) - 1)
    return True


def and_(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Return the word-wise AND of two ack sets.

    A message stays unacked only if it is unacked in both, so this merges two partial
    acknowledgements of the same batch. A missing word counts as zero.
    """
    words = [(x & y) & UINT64_MAX for x, y in zip(a, b, strict=False)]
    return [to_int64(w) for w in _trim(words)]


def or_(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Return the word-wise OR of two ack sets: a bit set in either stays set."""
    n = max(len(a), len(b))
    words = [
        ((a[i] if i < len(a) else 0) | (b[i] if i < len(b) else 0)) & UINT64_MAX
        for i in range(n)
    ]
    return [to_int64(w) for w in _trim(words)]
