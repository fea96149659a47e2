"""Faults a chaos run injects: each one is ``inject()`` then, later, ``heal()``.

The runner knows faults only through :class:`Fault`, so another kind (a
fault-injecting proxy between the workers and the broker) plugs in by adding a
factory to the registry the runner is given (``FaultFactory``: the plan's
:class:`~quasar.testing.chaos.schedule.FaultEvent` and the run's
:class:`Targets` in, a :class:`Fault` out).

Process faults shipped here:

* ``broker-kill``: SIGKILL the broker, and on heal start it again on the same ports
  and data directory (nothing acknowledged may be lost);
* ``broker-pause``: SIGSTOP the broker, SIGCONT on heal (an OS stall of 1-10 s:
  connections stay open, every deadline on both sides runs out);
* ``worker-kill``: SIGKILL one worker process, whatever it is doing (mid
  transaction, mid send, mid ack), and on heal start a new incarnation of it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from quasar.testing.chaos.schedule import (
    BROKER_KILL,
    BROKER_PAUSE,
    WORKER_KILL,
    FaultEvent,
)
from quasar.testing.fault_proxy import FaultProxy
from quasar.testing.process import BrokerProcess


class Fault(Protocol):
    """One fault of a run. ``inject`` starts it, ``heal`` ends it; the runner calls
    each once, in that order, and the service must recover after ``heal``."""

    kind: str

    def inject(self) -> None: ...

    def heal(self) -> None: ...


class WorkerHandle(Protocol):
    """What a fault needs of a worker process (the runner's worker objects)."""

    name: str

    def kill(self) -> None: ...

    def start(self) -> None: ...


class DiskHandle(Protocol):
    """What a fault needs of the broker's small file system."""

    def fill(self) -> int: ...

    def free(self) -> None: ...


@dataclass
class Targets:
    """What faults act on: the broker and the workers of the plan, by index; the
    proxy between the workers and the broker; the file system of the broker's
    data directory when the run mounted one of its own (``disk_full.SmallDisk``)."""

    broker: BrokerProcess
    workers: list[WorkerHandle]
    proxy: FaultProxy | None = None
    disk: DiskHandle | None = None


FaultFactory = Callable[[FaultEvent, Targets], Fault]


class BrokerKill:
    kind = BROKER_KILL

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.broker = targets.broker

    def inject(self) -> None:
        self.broker.kill()

    def heal(self) -> None:
        self.broker.start()


class BrokerPause:
    kind = BROKER_PAUSE

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.broker = targets.broker

    def _signal(self, sig: signal.Signals) -> None:
        proc = self.broker.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def inject(self) -> None:
        self._signal(signal.SIGSTOP)

    def heal(self) -> None:
        self._signal(signal.SIGCONT)


class WorkerKill:
    kind = WORKER_KILL

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        self.worker = targets.workers[event.target % len(targets.workers)]

    def inject(self) -> None:
        self.worker.kill()

    def heal(self) -> None:
        self.worker.start()


PROCESS_FAULTS: dict[str, FaultFactory] = {
    BROKER_KILL: BrokerKill,
    BROKER_PAUSE: BrokerPause,
    WORKER_KILL: WorkerKill,
}
