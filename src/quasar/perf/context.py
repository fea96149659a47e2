"""What a client driver gets from the run: where to record, when to stop, hooks."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from quasar.perf.recorder import Recorder, RunControl
from quasar.perf.reporter import Reporter

__all__ = ["RunContext", "make_payload"]


@dataclass
class RunContext:
    """Shared between the run (``quasar.perf.run``) and a client driver.

    A driver creates its client and producers or consumers, calls ``ready()`` once
    they exist, then (unless ``external_begin``) ``reporter.begin()``, works until
    ``control`` stops, waits for outstanding work, sets ``cpu_end`` and closes.
    """

    recorder: Recorder
    control: RunControl
    reporter: Reporter
    # True when something else (pubsub: the producer's start) begins the clock.
    external_begin: bool = False
    on_ready: Callable[[], None] | None = None
    cpu_end: float | None = None
    pending: Callable[[], int] | None = None
    info: dict[str, object] = field(default_factory=dict)

    def ready(self) -> None:
        if self.on_ready is not None:
            self.on_ready()


def make_payload(size: int) -> bytes:
    """Random bytes, so that compression or deduplication cannot cheat."""
    return os.urandom(size)
