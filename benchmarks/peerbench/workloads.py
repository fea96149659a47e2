"""The workloads every system runs, defined once.

All of them: 1 KiB messages, one producer process and one consumer process, every
message durable on the server's disk before the server confirms it.

* ``W1``: no client batching, unbounded rate, at most 1,000 messages awaiting a
  confirmation.
* ``W2``: the same with the client batching messages, where the system's client has
  it (quasar's and the official Pulsar client's producer batching; a Redis pipeline
  of XADDs). RabbitMQ and NATS publish one message per request, so W2 is not run
  for them.
* ``W3``: no batching, a fixed rate (each of ``--rates``), for latency.
* ``W4``: a backlog of ``--backlog-mb`` published first (the fastest way the system
  has: W2 where it exists, W1 otherwise), then drained by the consumer alone.
"""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_BYTES = 1024
IN_FLIGHT = 1000
# Messages per client batch in W2 where the client does not choose its own batches
# (a Redis pipeline); quasar's and the official client's producers batch by time
# (1 ms), bytes (128 KiB) and count (1,000) instead.
PIPELINE_MESSAGES = 100
# A fifth of a run, at most two seconds, is left out of its figures as warm-up.
WARMUP_FRACTION = 0.2
WARMUP_MAX_S = 2.0
# The consumer stops once nothing has arrived for this long after the producer ended.
DRAIN_IDLE_S = 5.0
ALL_WORKLOADS = ("W1", "W2", "W3", "W4")


@dataclass(frozen=True)
class Workload:
    """One run's shape; ``rate`` 0 means unbounded, ``backlog_messages`` > 0 a W4 run."""

    name: str  # "W1", "W2", "W3@5000", "W4"
    kind: str  # "W1".."W4"
    batching: bool = False
    rate: int = 0
    duration_s: float = 15.0
    backlog_messages: int = 0
    in_flight: int = IN_FLIGHT
    size: int = MESSAGE_BYTES

    @property
    def warmup_s(self) -> float:
        return min(WARMUP_MAX_S, self.duration_s * WARMUP_FRACTION)


def plan(kinds: list[str], duration_s: float, rates: list[int], backlog_mb: float) -> list[Workload]:
    """The runs for ``kinds`` in a fixed order (W1, W2, W3 per rate, W4)."""
    runs: list[Workload] = []
    if "W1" in kinds:
        runs.append(Workload("W1", "W1", duration_s=duration_s))
    if "W2" in kinds:
        runs.append(Workload("W2", "W2", batching=True, duration_s=duration_s))
    if "W3" in kinds:
        for rate in rates:
            runs.append(Workload(f"W3@{rate}", "W3", rate=rate, duration_s=duration_s))
    if "W4" in kinds:
        count = max(1, int(backlog_mb * 1024 * 1024) // MESSAGE_BYTES)
        runs.append(Workload("W4", "W4", batching=True, backlog_messages=count))
    return runs
