"""Load shedding: the most loaded member gives up a bundle (``loadBalancerSheddingEnabled``).

Pulsar's leader runs a shedder over every broker's load; quasar has no leader, so
each member looks at the live load reports every ``loadBalancerSheddingIntervalMinutes``
and decides for itself only. A member sheds when

* it is the most loaded live member, by the load manager's load
  (``quasar.cluster.load_manager.broker_load``), and that load is more than
  ``loadBalancerBrokerThresholdShedderPercentage`` percent above the average;
* the traffic it would move, its bytes in plus out per second times the share of its
  load above the average, is at least ``loadBalancerBundleUnloadMinThroughputThreshold``
  MB per second (as Pulsar's ThresholdShedder, so idle clusters never move bundles);
* it owns at least two bundles (moving its only bundle moves the whole problem).

It then unloads one bundle: the one with the most bytes per second among those it did
not acquire or shed within ``loadBalancerSheddingGracePeriodMinutes`` (a bundle that
just moved does not move again at once, so two members cannot pass one bundle back
and forth). The next lookup places the bundle on the least loaded member.

Pure functions: the member gathers reports and bundle loads, this module decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quasar.config import LoadBalancerConfig

from .bundle_split import BundleLoad
from .load_manager import broker_load
from .registry import BrokerRegistration

__all__ = ["SheddingSettings", "bundle_to_shed"]

_MEGABYTE = 1024 * 1024


@dataclass(frozen=True)
class SheddingSettings:
    threshold_percent: float
    min_throughput_bytes: float
    grace_period_s: float

    @classmethod
    def of(cls, settings: LoadBalancerConfig) -> SheddingSettings:
        return cls(
            settings.load_balancer_broker_threshold_shedder_percentage,
            settings.load_balancer_bundle_unload_min_throughput_threshold * _MEGABYTE,
            settings.load_balancer_shedding_grace_period_minutes * 60.0,
        )


def bundle_to_shed(
    me: str,
    brokers: list[BrokerRegistration],
    my_bundles: Mapping[str, BundleLoad],
    recently_moved: Mapping[str, float],
    now: float,
    settings: SheddingSettings,
) -> tuple[str, str] | None:
    """The bundle key (``tenant/ns/0xLOW_0xHIGH``) member ``me`` should unload and
    why, or ``None``.

    ``my_bundles``: every bundle ``me`` owns (those without loaded topics with an
    empty load); ``recently_moved``: bundle key -> when (on ``now``'s clock) ``me``
    acquired or shed it.
    """
    loads = {b.broker_id: broker_load(b, 0) for b in brokers}
    if me not in loads or len(loads) < 2 or len(my_bundles) < 2:
        return None
    mine = loads[me]
    average = sum(loads.values()) / len(loads)
    if mine < max(loads.values()) or mine <= average * (1 + settings.threshold_percent / 100):
        return None
    throughput = sum(load.byte_rate for load in my_bundles.values())
    to_move = throughput * (mine - average) / mine
    if to_move < settings.min_throughput_bytes or to_move <= 0:
        return None
    movable = [
        (load.byte_rate, key)
        for key, load in my_bundles.items()
        if load.byte_rate > 0 and now - recently_moved.get(key, -1e18) >= settings.grace_period_s
    ]
    if not movable:
        return None
    byte_rate, key = max(movable)
    return key, (
        f"load {mine:.0f} is {100 * (mine / average - 1):.0f}% above the average "
        f"{average:.0f}; moving {byte_rate / _MEGABYTE:.2f} MB/s"
    )
