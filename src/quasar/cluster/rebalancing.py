"""A member's own load balancing, run on its report interval and shedding interval:
split the owned bundle most over Pulsar's split thresholds
(``quasar.cluster.bundle_split``) and unload a bundle when this member is the most
loaded by enough (``quasar.cluster.load_shedding``). Those modules decide; this one
gathers the loads, remembers which bundles moved lately and acts through the member.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from quasar.config import LoadBalancerConfig
from quasar.errors import QuasarError
from quasar.protocol.topic_name import TopicName
from quasar.resources.bundles import BundleRange, BundlesData

from .bundle_split import BundleLoad, SplitThresholds, bundle_to_split
from .bundle_topics import OwnedBundle, TopicLoad, bundle_key
from .load_shedding import SheddingSettings, bundle_to_shed
from .registry import BrokerRegistry

__all__ = ["BalancedMember", "Rebalancing"]

log = logging.getLogger(__name__)


class BalancedMember(Protocol):
    """What load balancing needs of the member it balances."""

    broker_id: str
    owned: set[OwnedBundle]
    registry: BrokerRegistry

    @property
    def serving(self) -> bool: ...

    def bundles(self, namespace: str) -> BundlesData: ...

    def loaded_topics(self) -> Iterator[tuple[OwnedBundle, TopicName, TopicLoad]]: ...

    async def split(
        self, owned: OwnedBundle, algorithm: str, unload: bool
    ) -> tuple[BundleRange, BundleRange] | None: ...

    async def unload(self, owned: OwnedBundle) -> bool: ...

    def report(self) -> None: ...


class Rebalancing:
    def __init__(self, member: BalancedMember, settings: LoadBalancerConfig) -> None:
        self._member = member
        self._settings = settings
        self.report_s = settings.load_balancer_report_update_min_interval_millis / 1000
        # Bundle key -> when (monotonic) the member acquired or shed it: load
        # shedding leaves such a bundle alone for the grace period. Expired entries
        # go on every insertion, so it holds only bundles moved within one period.
        self._moved_at: dict[str, float] = {}
        self._grace_period_s = settings.load_balancer_shedding_grace_period_minutes * 60
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Report (and split, when enabled) and shed periodically (on the running loop)."""
        loop = asyncio.get_running_loop()
        report = self._periodically(
            self.report_s, self._report_and_split, "split an overloaded bundle"
        )
        self._tasks.append(loop.create_task(report))
        if self._settings.load_balancer_shedding_enabled:
            shedding_s = self._settings.load_balancer_shedding_interval_minutes * 60
            shed = self._periodically(shedding_s, self.shed_load, "shed load")
            self._tasks.append(loop.create_task(shed))

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    def note_moved(self, key: str) -> None:
        """The member acquired or shed bundle ``key`` just now."""
        if not self._settings.load_balancer_shedding_enabled:
            return
        now = time.monotonic()
        for moved, at in list(self._moved_at.items()):
            if now - at >= self._grace_period_s:
                del self._moved_at[moved]
        self._moved_at[key] = now

    async def split_overloaded(self) -> OwnedBundle | None:
        settings, member = self._settings, self._member
        loads: dict[OwnedBundle, BundleLoad] = {}
        for owned, _, load in member.loaded_topics():
            loads.setdefault(owned, BundleLoad()).add(*load)
        counts = {ns: member.bundles(ns).num_bundles for ns, _ in loads}
        choice = bundle_to_split(
            loads, counts, SplitThresholds.of(settings),
            settings.load_balancer_namespace_maximum_bundles,
        )
        if choice is None:
            return None
        owned, reason = choice
        log.info("bundle %s is over a split threshold: %s", bundle_key(*owned), reason)
        await member.split(
            owned,
            settings.default_namespace_bundle_split_algorithm,
            settings.load_balancer_auto_unload_split_bundles_enabled,
        )
        return owned

    async def shed_load(self) -> OwnedBundle | None:
        member = self._member
        settings = SheddingSettings.of(self._settings)
        now = time.monotonic()
        loads = {bundle_key(*owned): BundleLoad() for owned in member.owned}
        for owned, _, load in member.loaded_topics():
            loads[bundle_key(*owned)].add(*load)
        choice = bundle_to_shed(
            member.broker_id, member.registry.live_brokers(), loads, self._moved_at, now,
            settings,
        )
        if choice is None:
            return None
        key, reason = choice
        owned = next(o for o in member.owned if bundle_key(*o) == key)
        log.info("shedding bundle %s: %s", key, reason)
        self.note_moved(key)
        await member.unload(owned)
        return owned

    async def _report_and_split(self) -> None:
        self._member.report()
        if self._settings.load_balancer_auto_bundle_split_enabled:
            await self.split_overloaded()

    async def _periodically(
        self, interval_s: float, action: Callable[[], Awaitable[object]], what: str
    ) -> None:
        """Run ``action`` every ``interval_s`` while the member serves; a failure is
        logged and tried again on the next interval."""
        while True:
            await asyncio.sleep(interval_s)
            if not self._member.serving:
                continue
            try:
                await action()
            except QuasarError as exc:
                log.warning("could not %s: %s", what, exc)
