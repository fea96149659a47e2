"""Splitting a bundle: the metadata writes, and which bundle a member splits on its
own (``loadBalancerAutoBundleSplitEnabled``).

``write_split`` does the owner's first two steps (``docs/cluster.md``, "Splitting a
bundle"): it creates both halves' ownership nodes, then replaces the namespace's
boundaries with a compare-and-set; the member then swaps parent for halves.

On every load report the member sums, per bundle it owns, what its loaded topics
carry: the topics, their sessions (producers and consumers), messages in plus out per
second and megabytes in plus out per second. A bundle over any of Pulsar's four
thresholds (``loadBalancerNamespaceBundleMax{Topics,Sessions,MsgRate,
BandwidthMbytes}``) is a candidate, unless it has a single topic (a split could not
divide its load) or its namespace already has ``loadBalancerNamespaceMaximumBundles``
bundles. One candidate is split per report, the one with the most topics (then the
highest message rate), so a member never splits much of its namespace at once.

The choice is pure: the member gathers the numbers, this module decides.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from quasar.config import LoadBalancerConfig
from quasar.errors import ConflictError, PreconditionFailedError, QuasarError
from quasar.resources.bundles import BundleRange, BundlesData
from quasar.resources.models import Policies
from quasar.resources.store import NamespaceResources

from .ownership import BundleOwnership

__all__ = ["BundleLoad", "SplitThresholds", "bundle_to_split", "exceeded", "write_split"]

log = logging.getLogger(__name__)

OwnedBundle = tuple[str, BundleRange]  # (tenant/namespace, bundle)
_MEGABYTE = 1024 * 1024


@dataclass
class BundleLoad:
    """What one bundle's loaded topics carry."""

    topics: int = 0
    sessions: int = 0
    msg_rate: float = 0.0  # in + out, per second
    byte_rate: float = 0.0  # in + out, per second

    def add(self, sessions: int, msg_rate: float, byte_rate: float) -> None:
        self.topics += 1
        self.sessions += sessions
        self.msg_rate += msg_rate
        self.byte_rate += byte_rate


@dataclass(frozen=True)
class SplitThresholds:
    max_topics: int
    max_sessions: int
    max_msg_rate: float
    max_bandwidth_mbytes: float

    @classmethod
    def of(cls, settings: LoadBalancerConfig) -> SplitThresholds:
        return cls(
            settings.load_balancer_namespace_bundle_max_topics,
            settings.load_balancer_namespace_bundle_max_sessions,
            settings.load_balancer_namespace_bundle_max_msg_rate,
            settings.load_balancer_namespace_bundle_max_bandwidth_mbytes,
        )


def exceeded(load: BundleLoad, limits: SplitThresholds) -> str | None:
    """The first threshold ``load`` is over (for the log), or ``None``."""
    if load.topics > limits.max_topics:
        return f"{load.topics} topics > {limits.max_topics}"
    if load.sessions > limits.max_sessions:
        return f"{load.sessions} sessions > {limits.max_sessions}"
    if load.msg_rate > limits.max_msg_rate:
        return f"{load.msg_rate:.0f} msg/s > {limits.max_msg_rate:.0f}"
    if load.byte_rate / _MEGABYTE > limits.max_bandwidth_mbytes:
        return f"{load.byte_rate / _MEGABYTE:.1f} MB/s > {limits.max_bandwidth_mbytes:.0f}"
    return None


def bundle_to_split(
    loads: Mapping[OwnedBundle, BundleLoad],
    num_bundles: Mapping[str, int],
    limits: SplitThresholds,
    max_bundles: int,
) -> tuple[OwnedBundle, str] | None:
    """The bundle to split now and why, or ``None``. ``num_bundles``: the bundles
    each namespace has (a namespace missing from it is not split)."""
    candidates = []
    for owned, load in loads.items():
        reason = exceeded(load, limits)
        if reason is None or load.topics < 2:
            continue
        if num_bundles.get(owned[0], max_bundles) >= max_bundles:
            continue
        candidates.append((load.topics, load.msg_rate, owned, reason))
    if not candidates:
        return None
    # The most topics first, then the highest rate; among equals the lowest bundle.
    _, _, owned, reason = min(candidates, key=lambda c: (-c[0], -c[1], c[2]))
    return owned, reason


def write_split(
    ownership: BundleOwnership,
    namespaces: NamespaceResources,
    owned: OwnedBundle,
    boundary: int,
    *,
    max_bundles: int,
    default_bundles: int,
) -> tuple[BundleRange, BundleRange]:
    """Own both halves of ``owned`` cut at ``boundary``, then store the namespace's
    new boundaries; returns the halves. On failure the halves' nodes are deleted
    and the parent stays as it was.

    Raises:
        ConflictError: a half's ownership node is held by another broker.
        PreconditionFailedError: the namespace has ``max_bundles`` bundles
            (``loadBalancerNamespaceMaximumBundles``), or the bundle is not one of
            its bundles any more.
        MetadataError, ConflictError: the store failed, or the policies kept
            changing.
    """
    namespace, parent = owned
    halves = (BundleRange(parent.low, boundary), BundleRange(boundary, parent.high))

    def change(policies: Policies) -> Policies:
        bundles = policies.bundles or BundlesData.even(default_bundles)
        if bundles.num_bundles >= max_bundles:
            raise PreconditionFailedError(
                f"Namespace {namespace} has {bundles.num_bundles} bundles, the most "
                f"loadBalancerNamespaceMaximumBundles ({max_bundles}) allows"
            )
        return replace(policies, bundles=bundles.split(parent, boundary))

    # The halves' nodes come first: until the boundaries name them no member maps a
    # topic to them, and once they do, their owner is already known.
    acquired: list[BundleRange] = []
    try:
        for half in halves:
            got, holder = ownership.try_acquire(namespace, half)
            if not got and holder != ownership.me:
                raise ConflictError(f"Bundle {namespace}/{half.name} is owned by another broker")
            acquired.append(half)
        namespaces.update(namespace, change)
    except QuasarError:
        for half in acquired:
            try:
                ownership.release(namespace, half)
            except QuasarError as exc:  # the session's end removes it anyway
                log.warning("could not delete ownership of %s: %s", half.name, exc)
        raise
    return halves
