"""Batch-index masks: which members of a batch entry an acknowledgement covers.

On the wire an ack set says which members are **still unacknowledged** (Java
``BitSet.toLongArray()`` words, bit set = not acked; see ``quasar.protocol.ack_set``).
Conflict checks ask the opposite question, "which members does this ack take?", and
combine answers from several transactions with ``&`` and ``|``. So the pending-ack
state keeps an *acked mask*: a Python ``int`` whose bit ``i`` is set when member ``i``
is acknowledged. ``WHOLE`` (``-1``, every bit set in two's complement) stands for the
whole entry, which is also how a non-batch entry is acknowledged::

    wire ack_set (unacked)     acked mask (batch_size 5)
    [0b11010]                  0b00101   members 0 and 2 acked
    [] or absent               WHOLE     every member
    [0b11111]                  0         nothing: a no-op ack

``WHOLE & m == m`` and ``WHOLE | m == WHOLE``, so whole-entry acks need no special
case when masks are combined.

Bits at or above the batch size do not exist. Clients leave them clear in their ack
sets, which would read as "acked"; every conversion here is clipped to the batch size
so phantom members never look like an overlap (Pulsar sets those bits for the same
reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from quasar.protocol.ack_set import bits_to_words, words_to_bits

WHOLE = -1

def full(batch_size: int) -> int:
    """The mask of every member of a batch of ``batch_size``."""
    return (1 << batch_size) - 1


def effective_batch_size(ack_set: Sequence[int], batch_size: int | None) -> int:
    """The batch size to clip ``ack_set`` to.

    The client's ``batch_size`` when it sent one; otherwise every bit the words can
    hold (the broker should fill in the size from the entry when the client omits it,
    or members past the real size count as acked).
    """
    if batch_size is not None and batch_size > 0:
        return batch_size
    return 64 * len(ack_set)


def acked_mask(ack_set: Sequence[int] | None, batch_size: int | None) -> int:
    """The members an ack takes, from its wire ack set (``None``/``[]``: ``WHOLE``).

    Returns ``0`` for an ack set that acknowledges nothing. A non-empty ack set that
    happens to take every member stays a mask: it is a batch-index ack, checked
    member by member against the cursor (an empty one cannot be told from a
    whole-entry ack on the wire, so it is one).
    """
    if not ack_set:
        return WHOLE
    n = effective_batch_size(ack_set, batch_size)
    return full(n) & ~words_to_bits(ack_set)


def cursor_acked_mask(cursor_ack_set: Sequence[int] | None, batch_size: int) -> int:
    """Members already acknowledged on the cursor (``0`` when it holds no ack set)."""
    if cursor_ack_set is None:
        return 0
    return full(batch_size) & ~words_to_bits(cursor_ack_set)


def unacked_words(acked: int, batch_size: int) -> list[int]:
    """The wire ack set (1 = not acked) of the members outside ``acked``."""
    if acked == WHOLE:
        return []
    return bits_to_words(full(batch_size) & ~acked)


def covers_all(acked: int, batch_size: int | None) -> bool:
    """True if ``acked`` takes every member (always for ``WHOLE``)."""
    if acked == WHOLE:
        return True
    return batch_size is not None and batch_size > 0 and acked & full(batch_size) == full(
        batch_size
    )


def first_index(mask: int) -> int:
    """The lowest member in a non-empty mask (``0`` for ``WHOLE``), for messages."""
    assert mask != 0
    return (mask & -mask).bit_length() - 1
