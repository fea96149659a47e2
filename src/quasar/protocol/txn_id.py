"""Transaction ids: ``(most_bits, least_bits)`` = (coordinator id, sequence).

Pulsar's TxnID is two unsigned 64-bit halves, carried as ``txnid_most_bits`` and
``txnid_least_bits``. The coordinator puts its own id in the most significant half
(so any broker can route a transaction to its coordinator) and a sequence that
strictly increases and is never reused in the least significant half.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TxnID"]


class TxnID(NamedTuple):
    """A transaction id, the same value in the broker, the client and on the wire.

    A plain tuple (``most, least = txn_id``). It is also callable and returns itself,
    so a client's ``txn.id`` and ``txn.id()`` read alike, as in Pulsar's clients.
    ``str()`` gives Pulsar's ``(most,least)`` form, which appears in error messages.
    """

    most_bits: int
    least_bits: int

    @property
    def tc_id(self) -> int:
        """The coordinator that owns this transaction."""
        return self.most_bits

    def __call__(self) -> TxnID:
        return self

    def __str__(self) -> str:
        return f"({self.most_bits},{self.least_bits})"
