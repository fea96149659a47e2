"""Transaction ids: ``(most, least)`` = ``(coordinator id, per-coordinator sequence)``.

Pulsar's TxnID is two unsigned 64-bit halves. The coordinator puts its own id in the
most significant half (so any broker can route a transaction to its coordinator) and a
sequence that strictly increases and is never reused in the least significant half.
"""

from __future__ import annotations

from typing import NamedTuple

UINT64_MAX = 2**64 - 1


class TxnId(NamedTuple):
    """A transaction id as carried by ``txnid_most_bits``/``txnid_least_bits``."""

    most: int
    least: int

    @property
    def tc_id(self) -> int:
        """The coordinator that owns this transaction."""
        return self.most

    def __str__(self) -> str:
        # Pulsar's TxnID.toString(); it appears in error messages clients may log.
        return f"({self.most},{self.least})"
