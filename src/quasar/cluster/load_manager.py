"""The load manager's choice: which live broker should own an unowned bundle.

The least-loaded broker wins. A broker's load, from its registration's load report,
is counted in messages per second::

    load = msgRateIn + msgRateOut
           + LOAD_PER_BUNDLE_MSG_RATE * (bundles + pending)
           + LOAD_PER_TOPIC_MSG_RATE * numTopics

``pending`` are the bundles this broker sent its way and it has not reported yet. The
bundle and topic terms spread bundles evenly while there is no traffic (or it is not
measured yet) and stand for what a new bundle will bring; once brokers carry traffic
the message rates dominate. Ties are broken by a rendezvous hash of (bundle, broker
id), which is stable (the same bundle goes to the same broker among equals) and
spreads bundles evenly. Every broker decides alone, as Pulsar's brokers do for a
non-authoritative lookup without a leader; the ownership node settles any race, since
exactly one broker can create it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from .registry import BrokerRegistration

__all__ = [
    "LOAD_PER_BUNDLE_MSG_RATE",
    "LOAD_PER_TOPIC_MSG_RATE",
    "LoadManager",
    "broker_load",
    "choose_broker",
]

# What an owned bundle and a loaded topic count for, in messages per second: the
# traffic a new bundle or topic is assumed to bring before it is measured. An idle
# cluster is balanced by these terms alone.
LOAD_PER_BUNDLE_MSG_RATE = 100.0
LOAD_PER_TOPIC_MSG_RATE = 10.0


def _rendezvous(bundle_key: str, broker_id: str) -> bytes:
    return hashlib.sha256(f"{bundle_key}\0{broker_id}".encode()).digest()


def broker_load(broker: BrokerRegistration, pending: int) -> float:
    """The broker's load in messages per second (the formula above)."""
    load = broker.load
    return (
        load.msg_rate_in
        + load.msg_rate_out
        + LOAD_PER_BUNDLE_MSG_RATE * (len(load.bundles) + pending)
        + LOAD_PER_TOPIC_MSG_RATE * load.num_topics
    )


def choose_broker(
    bundle_key: str, brokers: list[BrokerRegistration], pending: dict[str, int]
) -> BrokerRegistration | None:
    """The broker to own ``bundle_key`` (``tenant/ns/0xLOW_0xHIGH``), or ``None``
    when no broker is alive. ``pending``: bundles assigned per broker id and not
    yet in its load report."""
    if not brokers:
        return None
    return min(
        brokers,
        key=lambda b: (
            broker_load(b, pending.get(b.broker_id, 0)),
            _rendezvous(bundle_key, b.broker_id),
        ),
    )


class LoadManager:
    """Chooses owners and remembers its recent choices until their owners report
    them (or ``pending_ttl_s`` passes: a choice nobody acted on is forgotten)."""

    def __init__(
        self,
        pending_ttl_s: float,
        pending_max_per_broker: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = pending_ttl_s
        # Bounded by loadBalancerNamespaceMaximumBundles per live broker: a burst of
        # lookups cannot grow it beyond that.
        self._max = pending_max_per_broker
        self._clock = clock
        # broker id -> bundle key -> when the choice is forgotten.
        self._pending: dict[str, dict[str, float]] = {}

    def choose(
        self, bundle_key: str, brokers: list[BrokerRegistration]
    ) -> BrokerRegistration | None:
        self._prune(brokers)
        counts = {broker: len(keys) for broker, keys in self._pending.items()}
        chosen = choose_broker(bundle_key, brokers, counts)
        if chosen is not None:
            keys = self._pending.setdefault(chosen.broker_id, {})
            keys[bundle_key] = self._clock() + self._ttl_s
            while len(keys) > self._max:
                del keys[next(iter(keys))]  # the oldest choice
        return chosen

    def _prune(self, brokers: list[BrokerRegistration]) -> None:
        now = self._clock()
        live = {b.broker_id: b for b in brokers}
        for broker_id in list(self._pending):
            registration = live.get(broker_id)
            if registration is None:
                del self._pending[broker_id]
                continue
            reported = set(registration.load.bundles)
            keys = self._pending[broker_id]
            for key, expires in list(keys.items()):
                if expires <= now or key in reported:
                    del keys[key]
