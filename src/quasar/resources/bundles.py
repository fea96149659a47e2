"""Namespace bundles: how Pulsar shards a namespace's topics among brokers.

A namespace's 32-bit hash space ``[0x00000000, 0xffffffff]`` is cut at its
``boundaries`` (the ``bundles`` field of its policies: ``{"boundaries": [...],
"numBundles": n}``, ``n + 1`` hex strings). A bundle is named by its range,
``0x40000000_0x80000000``; it holds ``low <= hash < high``, except the last one, which
also holds ``0xffffffff``. A topic's hash is the CRC-32 of its full name
(``persistent://tenant/ns/topic-partition-3``), Pulsar's default bundle hash (Guava's
``Hashing.crc32()``), so each partition of a partitioned topic hashes on its own and
the partitions spread over bundles.

Pure functions only: no I/O, so every rule here is unit-tested directly. It lives with
the admin model because the boundaries are part of a namespace's policies; the
cluster layer (`quasar.cluster`) maps topics to bundles with it.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from quasar.errors import (
    REFUSED_BUNDLES,
    InvalidResourceError,
    PreconditionFailedError,
    tag_refusal,
)

__all__ = [
    "FULL_LOWER_BOUND",
    "FULL_UPPER_BOUND",
    "RANGE_EQUALLY_DIVIDE",
    "SPLIT_ALGORITHMS",
    "TOPIC_COUNT_EQUALLY_DIVIDE",
    "BundleRange",
    "BundlesData",
    "bundle_of",
    "split_boundary",
    "topic_hash",
]

# Pulsar's names of the split algorithms quasar has (``splitAlgorithmName``,
# ``defaultNamespaceBundleSplitAlgorithm``).
RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
SPLIT_ALGORITHMS = (RANGE_EQUALLY_DIVIDE, TOPIC_COUNT_EQUALLY_DIVIDE)

FULL_LOWER_BOUND = 0x00000000
FULL_UPPER_BOUND = 0xFFFFFFFF
_HASH_SPACE = 1 << 32


def topic_hash(full_name: str) -> int:
    """The 32-bit bundle hash of a topic's full name (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(full_name.encode()) & FULL_UPPER_BOUND


def _hex(value: int) -> str:
    return f"0x{value:08x}"


@dataclass(frozen=True, order=True)
class BundleRange:
    """One bundle: ``[low, high)``, or ``[low, high]`` for the last one."""

    low: int
    high: int

    @property
    def name(self) -> str:
        """Pulsar's bundle name, ``0xLOW_0xHIGH`` (8 lower-case hex digits each)."""
        return f"{_hex(self.low)}_{_hex(self.high)}"

    @classmethod
    def parse(cls, name: str) -> BundleRange:
        """Read ``0xLOW_0xHIGH``.

        Raises:
            PreconditionFailedError: not a bundle name (Pulsar answers 412), tagged
                as a refusal of hostile input.
        """
        try:
            return cls._parse(name)
        except PreconditionFailedError as e:
            tag_refusal(e, REFUSED_BUNDLES)
            raise

    @classmethod
    def _parse(cls, name: str) -> BundleRange:
        parts = name.split("_")
        try:
            if len(parts) != 2 or not all(p.lower().startswith("0x") for p in parts):
                raise ValueError(name)
            low, high = (int(p, 16) for p in parts)
        except ValueError:
            raise PreconditionFailedError(f"Invalid bundle range: {name}") from None
        if not FULL_LOWER_BOUND <= low < high <= FULL_UPPER_BOUND:
            raise PreconditionFailedError(f"Invalid bundle range: {name}")
        return cls(low, high)


@dataclass(frozen=True)
class BundlesData:
    """Pulsar's ``BundlesData``: the sorted boundaries of a namespace's bundles."""

    boundaries: tuple[int, ...]

    def __post_init__(self) -> None:
        b = self.boundaries
        if (
            len(b) < 2
            or b[0] != FULL_LOWER_BOUND
            or b[-1] != FULL_UPPER_BOUND
            or any(x >= y for x, y in zip(b, b[1:], strict=False))
        ):
            raise InvalidResourceError(
                "Invalid bundles: boundaries must rise strictly from 0x00000000 to "
                "0xffffffff"
            )

    @classmethod
    def even(cls, num_bundles: int) -> BundlesData:
        """``num_bundles`` equal ranges, as Pulsar divides a new namespace."""
        if num_bundles < 1:
            raise InvalidResourceError(f"Invalid number of bundles: {num_bundles}")
        step = _HASH_SPACE // num_bundles
        inner = tuple(i * step for i in range(1, num_bundles))
        return cls((FULL_LOWER_BOUND, *inner, FULL_UPPER_BOUND))

    @property
    def num_bundles(self) -> int:
        return len(self.boundaries) - 1

    def ranges(self) -> list[BundleRange]:
        b = self.boundaries
        return [BundleRange(lo, hi) for lo, hi in zip(b, b[1:], strict=False)]

    def find(self, hash_value: int) -> BundleRange:
        """The bundle holding ``hash_value``."""
        index = min(bisect_right(self.boundaries, hash_value), self.num_bundles) - 1
        return BundleRange(self.boundaries[index], self.boundaries[index + 1])

    def contains(self, bundle: BundleRange) -> bool:
        return bundle in self.ranges()

    def split(self, bundle: BundleRange, boundary: int) -> BundlesData:
        """These bundles with ``bundle`` cut in two at ``boundary`` (the lower child
        is ``[low, boundary)``, the upper one ``[boundary, high)``).

        Raises:
            PreconditionFailedError: ``bundle`` is not one of these bundles, or
                ``boundary`` is not strictly inside it.
        """
        if not self.contains(bundle):
            raise PreconditionFailedError(
                f"Bundle {bundle.name} is not a bundle of the namespace (split meanwhile?)"
            )
        if not bundle.low < boundary < bundle.high:
            raise PreconditionFailedError(
                f"Split boundary {_hex(boundary)} is not inside bundle {bundle.name}"
            )
        b = self.boundaries
        index = b.index(bundle.low) + 1
        return BundlesData((*b[:index], boundary, *b[index:]))

    def to_json(self) -> dict[str, Any]:
        return {
            "boundaries": [_hex(b) for b in self.boundaries],
            "numBundles": self.num_bundles,
        }

    @classmethod
    def from_json(cls, obj: Any, max_bundles: int | None = None) -> BundlesData:
        """Read ``{"boundaries": [...], "numBundles": n}``; with only ``numBundles``,
        that many equal ranges (as Pulsar fills in a namespace created with a count).

        Raises:
            InvalidResourceError: malformed, or more than ``max_bundles`` bundles
                (``loadBalancerNamespaceMaximumBundles``), tagged as a refusal of
                hostile input.
        """
        try:
            return cls._from_json(obj, max_bundles)
        except InvalidResourceError as e:
            tag_refusal(e, REFUSED_BUNDLES)
            raise

    @classmethod
    def _from_json(cls, obj: Any, max_bundles: int | None) -> BundlesData:
        if not isinstance(obj, dict):
            raise InvalidResourceError("Invalid bundles: expected an object")
        count = obj.get("numBundles")
        raw = obj.get("boundaries")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
            raise InvalidResourceError("Invalid bundles: numBundles must be an integer")
        limit = max_bundles
        if raw is None or raw == []:
            if count is None:
                raise InvalidResourceError("Invalid bundles: no boundaries or numBundles")
            _check_count(count, limit)
            return cls.even(count)
        if not isinstance(raw, list) or len(raw) > (limit or len(raw)) + 1:
            raise InvalidResourceError(
                f"Invalid number of bundles. Number of bundles has to be in the range of "
                f"(0, {limit}]."
            )
        try:
            boundaries = tuple(int(str(b), 16) for b in raw)
        except ValueError:
            raise InvalidResourceError("Invalid bundles: boundaries must be hex") from None
        data = cls(boundaries)
        if count is not None and count != data.num_bundles:
            raise InvalidResourceError(
                f"Invalid bundles: numBundles {count} does not match "
                f"{data.num_bundles} ranges"
            )
        return data


def _check_count(count: int, limit: int | None) -> None:
    if count < 1 or (limit is not None and count > limit):
        raise InvalidResourceError(
            "Invalid number of bundles. Number of bundles has to be in the range of "
            f"(0, {limit}]."
        )


def split_boundary(
    bundle: BundleRange, algorithm: str, topic_hashes: list[int]
) -> int:
    """Where ``algorithm`` cuts ``bundle``: ``range_equally_divide`` halves the range;
    ``topic_count_equally_divide`` cuts between the two middle hashes of the
    bundle's topics (``topic_hashes``), so each child gets half of them.

    Raises:
        PreconditionFailedError: an unknown algorithm (Pulsar answers 412), a range
            too small to halve, or fewer than two distinct topic hashes.
    """
    if algorithm == RANGE_EQUALLY_DIVIDE:
        boundary = bundle.low + (bundle.high - bundle.low) // 2
        if not bundle.low < boundary < bundle.high:
            raise PreconditionFailedError(f"Bundle {bundle.name} is too small to split")
        return boundary
    if algorithm == TOPIC_COUNT_EQUALLY_DIVIDE:
        # [low, high), and 0xffffffff too in the last bundle.
        inside = sorted({
            h for h in topic_hashes
            if bundle.low <= h < bundle.high or h == bundle.high == FULL_UPPER_BOUND
        })
        if len(inside) < 2:
            raise PreconditionFailedError(
                f"Bundle {bundle.name} has fewer than two topics to divide"
            )
        # Between the middle two hashes: the lower one stays below the boundary, the
        # upper one at or above it. The boundary is above ``low``; it reaches
        # ``high`` only when the upper hash is the last bundle's 0xffffffff.
        below, above = inside[len(inside) // 2 - 1], inside[len(inside) // 2]
        boundary = below + 1 + (above - below - 1) // 2
        if boundary >= bundle.high:  # the upper hash is the last bundle's 0xffffffff
            raise PreconditionFailedError(f"Bundle {bundle.name} is too small to split")
        return boundary
    raise PreconditionFailedError(
        "Unsupported namespace bundle split algorithm, supported algorithms are "
        f"{list(SPLIT_ALGORITHMS)}"
    )


def bundle_of(bundles: BundlesData, full_name: str) -> BundleRange:
    """The bundle of the topic named ``full_name``."""
    return bundles.find(topic_hash(full_name))
