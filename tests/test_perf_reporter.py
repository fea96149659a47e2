"""The perf reporter's progress lines around the end of the warm-up."""

from __future__ import annotations

import io
from typing import Any

from quasar.perf.recorder import Recorder, RunControl
from quasar.perf.reporter import Reporter

WARMUP_S = 0.25
INTERVAL_S = 0.1


class CapturingReporter(Reporter):
    def __init__(self) -> None:
        super().__init__(
            "test", Recorder(), RunControl(), warmup_s=WARMUP_S, time_s=0.0,
            interval_s=INTERVAL_S, stream=io.StringIO(),
        )
        self.lines: list[tuple[float, float, bool]] = []

    def progress(self, elapsed: float, interval: float, snap: Any) -> str:
        self.lines.append((elapsed, interval, self.recorder.measuring))
        return ""


def test_the_first_line_after_the_warm_up_rates_only_what_followed_it() -> None:
    # The warm-up's end folds away what the interval had counted so far; dividing what
    # is left by the whole interval showed a false dip in every run's progress.
    reporter = CapturingReporter()
    reporter.start()
    reporter.begin()
    for _ in range(500):  # bounded: wait for two lines after the warm-up ended
        if sum(1 for _, _, measuring in reporter.lines if measuring) >= 2:
            break
        reporter._done.wait(0.02)
    reporter.finish()
    measured = [(e, i) for e, i, measuring in reporter.lines if measuring]
    assert len(measured) >= 2, reporter.lines
    elapsed, interval = measured[0]
    # The interval starts no earlier than the warm-up's end.
    assert interval <= elapsed - WARMUP_S + 1e-6, measured
