"""The seeded plan of a chaos run: which workers run, and which faults fire when.

Everything random about a run is drawn here, from one ``random.Random(seed)``, before
anything starts: the same seed gives the same :class:`Plan` (workers, their own
seeds, fault kinds, times and durations), so a failing run is replayed by its seed.
What the broker and the operating system do with that plan (timing of the
workers' operations) is not under the seed's control.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Fault kinds the runner ships with; a plan names kinds, the runner maps them to
# :class:`~quasar.testing.chaos.faults.Fault` factories, so another kind (a proxy
# fault) is added by registering a factory and listing its name here.
BROKER_KILL = "broker-kill"
BROKER_PAUSE = "broker-pause"
WORKER_KILL = "worker-kill"
# Faults of the fault-injecting proxy between the workers and the broker.
PROXY_BLACKHOLE = "proxy-blackhole"
PROXY_RESET = "proxy-reset"
PROXY_CUT = "proxy-cut"
PROXY_DELAY = "proxy-delay"
# The broker's data directory fills up (a tmpfs the runner mounts; needs root).
DISK_FULL = "disk-full"
FAULT_KINDS = (
    BROKER_KILL, BROKER_PAUSE, WORKER_KILL,
    PROXY_BLACKHOLE, PROXY_RESET, PROXY_CUT, PROXY_DELAY, DISK_FULL,
)

# Worker roles and the subscription types consumers use (Pulsar's names).
PRODUCER = "producer"
TXN_PRODUCER = "txn-producer"
CONSUMER = "consumer"
COMPACTED_READER = "compacted-reader"
SUBSCRIPTION_TYPES = ("Shared", "KeyShared", "Failover", "Exclusive")

PAUSE_S = (1.0, 10.0)  # SIGSTOP lasts this long (uniform)
KILL_DOWN_S = (0.0, 2.0)  # a killed process stays down this long before restart
# How long each kind lasts from inject() to heal() (uniform); a kind not listed
# lasts KILL_DOWN_S (a reset has its after-effects only, a cut waits for traffic).
DURATION_S = {
    BROKER_PAUSE: PAUSE_S,
    PROXY_BLACKHOLE: (1.0, 10.0),
    PROXY_DELAY: (1.0, 10.0),
    DISK_FULL: (1.0, 10.0),
}
# Compactions of every partition follow each other at a mean gap of a quarter of the
# workload phase, 30 s at most (jittered by half), so a short run compacts a few
# times and a long one keeps the uncompacted tail short.
COMPACTION_GAP_S_MAX = 30.0


@dataclass(frozen=True)
class FaultEvent:
    at_s: float  # seconds after the workload starts
    kind: str
    duration_s: float  # how long until heal()
    target: int  # which worker, for worker faults (index into Plan.workers)


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    role: str
    seed: int
    subscription_type: str | None = None


@dataclass(frozen=True)
class Plan:
    seed: int
    duration_s: float
    operations: int
    partitions: int
    workers: tuple[WorkerSpec, ...]
    faults: tuple[FaultEvent, ...] = field(default_factory=tuple)
    # Seconds after the workload starts at which every partition is compacted.
    compactions: tuple[float, ...] = field(default_factory=tuple)

    @property
    def operations_per_worker(self) -> int:
        return max(1, -(-self.operations // len(self.workers)))


def make_plan(
    seed: int,
    *,
    duration_s: float,
    operations: int,
    faults: int,
    partitions: int = 3,
    kinds: tuple[str, ...] = FAULT_KINDS,
) -> Plan:
    """The plan for ``seed``: two producers (one transactional), one consumer per
    subscription type, a compacted reader, ``faults`` faults spread from 10% of
    ``duration_s`` (30 s at most) to 80%, and compactions of every partition.

    Raises:
        ValueError: a non-positive duration or operation count, or no fault kinds.
    """
    if duration_s <= 0 or operations <= 0:
        raise ValueError("duration and operations must be positive")
    if faults and not kinds:
        raise ValueError("faults asked for, but no fault kinds")
    rng = random.Random(seed)
    workers = [
        WorkerSpec("p0", PRODUCER, rng.getrandbits(32)),
        WorkerSpec("t0", TXN_PRODUCER, rng.getrandbits(32)),
    ]
    for i, sub_type in enumerate(SUBSCRIPTION_TYPES):
        workers.append(WorkerSpec(f"c{i}", CONSUMER, rng.getrandbits(32), sub_type))
    # The compacted reader and the compaction times come from a stream of their own,
    # so that they leave the rest of a seed's plan as it was without them.
    compaction_rng = random.Random(f"{seed}/compaction")
    workers.append(WorkerSpec("r0", COMPACTED_READER, compaction_rng.getrandbits(32)))
    # Faults fall from 10% of the run (30 s at most) to 80%: the workload gets
    # going first, and consumers catch up after the last one.
    lead = min(duration_s * 0.1, 30.0)
    window = duration_s * 0.8 - lead
    events = []
    # Faults start on an even grid with jitter, so they neither bunch up nor leave
    # the run quiet for long; one fault at a time (the previous heals first).
    slot = window / max(1, faults)
    for n in range(faults):
        kind = rng.choice(kinds)
        at = lead + n * slot + rng.uniform(0.1, 0.4) * slot
        duration = rng.uniform(*DURATION_S.get(kind, KILL_DOWN_S))
        duration = min(duration, max(0.5, slot * 0.5))
        target = rng.randrange(len(workers))
        events.append(FaultEvent(round(at, 3), kind, round(duration, 3), target))
    return Plan(seed, duration_s, operations, partitions, tuple(workers), tuple(events),
                _compaction_times(compaction_rng, duration_s, lead))


def _compaction_times(rng: random.Random, duration_s: float, lead: float) -> tuple[float, ...]:
    """Compactions from ``lead`` to 90% of the workload phase: they race with the
    faults, and the compacted reader has time to read after the last one."""
    gap = min(duration_s / 4, COMPACTION_GAP_S_MAX)
    times = []
    at = lead + rng.uniform(0.5, 1.5) * gap / 2
    while at < duration_s * 0.9:
        times.append(round(at, 3))
        at += rng.uniform(0.5, 1.5) * gap
    return tuple(times)
