"""Network faults of a chaos run, applied by the ``FaultProxy`` between the workers
and the broker (``runner`` puts it there: the broker advertises the proxy's address).

* ``proxy-blackhole``: nothing crosses the proxy, either way, from inject to heal
  (1-10 s); what was held flows again afterwards, as TCP delivers what it
  retransmitted across an outage that ended in time;
* ``proxy-reset``: every open connection is closed with an RST;
* ``proxy-cut``: every open connection is cut in the middle of its next chunk, in
  one direction or the other (drawn per connection), with a FIN or an RST; a
  connection that carries nothing until heal is left alone;
* ``proxy-delay``: every chunk, both ways, arrives 50-500 ms late until heal.

The plan fixes each event's kind, time, duration and target; the further choices
of a fault (a cut's direction and length, a delay's latency) come from
:func:`event_rng`, a generator seeded by the event itself, so one seed still gives
one run of faults and plans drawn before these kinds existed stay the same.
"""

from __future__ import annotations

import random

from quasar.testing.chaos.faults import FaultFactory, Targets
from quasar.testing.chaos.schedule import (
    PROXY_BLACKHOLE,
    PROXY_CUT,
    PROXY_DELAY,
    PROXY_RESET,
    FaultEvent,
)
from quasar.testing.fault_proxy import Direction, FaultProxy

DELAY_S = (0.05, 0.5)  # the latency proxy-delay adds (uniform)
# A cut forwards this many bytes of the chunk it hits (uniform, inclusive): fewer
# than the smallest frame (a 4-byte total size, a 4-byte command size, a command),
# so the peer is always left holding part of a frame.
CUT_BYTES = (1, 7)


def event_rng(event: FaultEvent) -> random.Random:
    """The generator of one event's further choices, the same for the same event."""
    return random.Random(f"{event.kind}/{event.at_s}/{event.duration_s}/{event.target}")


def _proxy(targets: Targets) -> FaultProxy:
    if targets.proxy is None:
        raise ValueError("proxy faults need a run with a fault proxy")
    return targets.proxy


class ProxyBlackhole:
    kind = PROXY_BLACKHOLE

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.proxy = _proxy(targets)
        self.duration_s = event.duration_s

    def inject(self) -> None:
        # Held for the planned time; heal ends it at once should heal come first
        # (the writers look at the deadline again every few milliseconds).
        self.proxy.blackhole(self.duration_s)

    def heal(self) -> None:
        self.proxy.clear()


class ProxyReset:
    kind = PROXY_RESET

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.proxy = _proxy(targets)
        self.reset = 0  # connections reset by inject()

    def inject(self) -> None:
        self.reset = self.proxy.reset_all()

    def heal(self) -> None:
        # Nothing to undo: the clients reconnect on their own, through the proxy.
        pass


class ProxyCut:
    kind = PROXY_CUT

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.proxy = _proxy(targets)
        self.rng = event_rng(event)
        self.armed = 0  # connections armed by inject()

    def inject(self) -> None:
        self.armed = 0
        for conn in self.proxy.connections():
            direction = self.rng.choice((Direction.TO_SERVER, Direction.TO_CLIENT))
            conn.cut(direction, self.rng.randint(*CUT_BYTES), rst=self.rng.random() < 0.5)
            self.armed += 1

    def heal(self) -> None:
        # A cut still armed would fire at some later, unrecorded time.
        self.proxy.disarm_cuts()


class ProxyDelay:
    kind = PROXY_DELAY

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.proxy = _proxy(targets)
        self.latency_s = round(event_rng(event).uniform(*DELAY_S), 3)

    def inject(self) -> None:
        self.proxy.delay(self.latency_s)

    def heal(self) -> None:
        # Chunks read meanwhile still arrive at their due time, in order.
        self.proxy.delay(0.0)


PROXY_FAULTS: dict[str, FaultFactory] = {
    PROXY_BLACKHOLE: ProxyBlackhole,
    PROXY_RESET: ProxyReset,
    PROXY_CUT: ProxyCut,
    PROXY_DELAY: ProxyDelay,
}
