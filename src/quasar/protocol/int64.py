"""Pulsar's 64-bit ids between their signed Java form and protobuf's unsigned fields.

Ledger and entry ids are Java ``long``s: ``-1`` means "none" or "earliest". Several
protobuf fields that carry them are ``uint64``, so on the wire ``-1`` is ``2**64 - 1``.
Ack-set words are ``int64`` on the wire but are built from unsigned bit patterns.
"""

from __future__ import annotations

__all__ = ["INT64_MAX", "UINT64_MAX", "to_int64", "to_uint64"]

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def to_int64(value: int) -> int:
    """An unsigned 64-bit pattern as the signed int64 it stands for (2^64-1 -> -1)."""
    value &= UINT64_MAX
    return value - (1 << 64) if value > INT64_MAX else value


def to_uint64(value: int) -> int:
    """A signed int64 as the unsigned 64-bit pattern a ``uint64`` field carries
    (-1 -> 2^64-1)."""
    return value & UINT64_MAX
