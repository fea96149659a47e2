"""A small Prometheus-style metrics registry: counters, gauges, histograms, labels.

Metrics are plain objects updated on the event loop (no locks: the broker mutates its
state from one thread). A ``Registry`` holds *collectors*: anything with a
``collect()`` that returns ``MetricFamily`` values. ``Counter``, ``Gauge`` and
``Histogram`` are collectors themselves; a component with state of its own (a stats
object, a map of queues) can register a custom collector that reads that state at
scrape time instead of mirroring it into metric objects.

Every metric has a fixed tuple of label names; ``metric.labels(*values)`` returns the
child for one combination of values (created at zero on first use, so a series shows
from the moment a component exists, not from its first event).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = [
    "Collector",
    "Counter",
    "Gauge",
    "Histogram",
    "MetricFamily",
    "Registry",
    "Sample",
]

LabelValues = tuple[str, ...]


@dataclass(frozen=True)
class Sample:
    """One line of the exposition: full sample name, labels, value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass
class MetricFamily:
    """A metric's ``# HELP``/``# TYPE`` and its samples."""

    name: str
    type: str  # counter | gauge | histogram | untyped
    help: str
    samples: list[Sample] = field(default_factory=list)


class Collector(Protocol):
    def collect(self) -> Iterable[MetricFamily]: ...


def _check_name(name: str) -> None:
    if not name or not (name[0].isalpha() or name[0] in "_:") or not all(
        c.isalnum() or c in "_:" for c in name
    ):
        raise ValueError(f"invalid metric name {name!r}")


def _check_label_names(names: Sequence[str]) -> None:
    for n in names:
        if not n or n.startswith("__") or not (n[0].isalpha() or n[0] == "_") or not all(
            c.isalnum() or c == "_" for c in n
        ):
            raise ValueError(f"invalid label name {n!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate label names {names!r}")


C = TypeVar("C")


class _Metric(Generic[C]):
    type = "untyped"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        _check_name(name)
        _check_label_names(labelnames)
        self.name = name
        self.help = help
        self.labelnames = tuple(labelnames)
        self._children: dict[LabelValues, C] = {}

    def labels(self, *values: str) -> C:
        """The child for one combination of label values (created at zero).

        Raises:
            ValueError: wrong number of values.
        """
        if len(values) != len(self.labelnames):
            raise ValueError(
                f"{self.name} has labels {self.labelnames}, got {len(values)} values"
            )
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._new_child()
        return child

    def remove(self, *values: str) -> None:
        """Forget one child (its series disappears from the exposition)."""
        self._children.pop(tuple(str(v) for v in values), None)

    def _new_child(self) -> C:
        raise NotImplementedError

    def _label_pairs(self, key: LabelValues) -> tuple[tuple[str, str], ...]:
        return tuple(zip(self.labelnames, key, strict=True))

    def collect(self) -> list[MetricFamily]:
        family = MetricFamily(self.name, self.type, self.help)
        for key, child in list(self._children.items()):
            family.samples.extend(self._samples(self._label_pairs(key), child))
        return [family]

    def _samples(self, labels: tuple[tuple[str, str], ...], child: C) -> list[Sample]:
        raise NotImplementedError


class CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Raises: ValueError: ``amount`` is negative (counters only go up)."""
        if amount < 0:
            raise ValueError("a counter only goes up")
        self.value += amount


class Counter(_Metric[CounterChild]):
    """A value that only goes up. The sample is exposed under the metric's own name
    (no ``_total`` suffix is added: callers choose the exact name)."""

    type = "counter"

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def _samples(self, labels: tuple[tuple[str, str], ...], child: CounterChild) -> list[Sample]:
        return [Sample(self.name, labels, child.value)]


class GaugeChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = float(value)

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class Gauge(_Metric[GaugeChild]):
    """A value that goes up and down."""

    type = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def _samples(self, labels: tuple[tuple[str, str], ...], child: GaugeChild) -> list[Sample]:
        return [Sample(self.name, labels, child.value)]


class HistogramChild:
    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; last: +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose upper bound is ``>= value``."""
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value
        self.count += 1


class Histogram(_Metric[HistogramChild]):
    """Observations counted in buckets with explicit upper bounds (inclusive).

    Exposed as cumulative ``{name}_bucket{le="..."}`` samples ending with
    ``le="+Inf"``, then ``{name}_sum`` and ``{name}_count``.
    """

    type = "histogram"

    def __init__(
        self, name: str, help: str, labelnames: Sequence[str] = (), *, buckets: Sequence[float]
    ) -> None:
        if "le" in labelnames:
            raise ValueError("'le' is reserved for histogram buckets")
        bounds = tuple(float(b) for b in buckets if not math.isinf(b))
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError("histogram buckets must be non-empty and strictly increasing")
        super().__init__(name, help, labelnames)
        self.buckets = bounds

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.buckets)

    def _samples(
        self, labels: tuple[tuple[str, str], ...], child: HistogramChild
    ) -> list[Sample]:
        out = []
        cumulative = 0
        for bound, n in zip((*child.bounds, math.inf), child.counts, strict=True):
            cumulative += n
            out.append(Sample(f"{self.name}_bucket", (*labels, ("le", format_value(bound))),
                              cumulative))
        out.append(Sample(f"{self.name}_sum", labels, child.sum))
        out.append(Sample(f"{self.name}_count", labels, child.count))
        return out


def format_value(value: float) -> str:
    """A sample value or bucket bound as Prometheus writes it (``+Inf``, ``1.0``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Registry:
    """The collectors one ``/metrics`` scrape reads, in registration order."""

    def __init__(self) -> None:
        self._collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        """Add a collector (a second registration of the same object is ignored)."""
        if not any(c is collector for c in self._collectors):
            self._collectors.append(collector)

    def unregister(self, collector: Collector) -> None:
        self._collectors = [c for c in self._collectors if c is not collector]

    def collect(self) -> list[MetricFamily]:
        """Every family, merged by name (two collectors may export one family, e.g.
        two components labelled apart).

        Raises:
            ValueError: two collectors export one name with different types.
        """
        merged: dict[str, MetricFamily] = {}
        for collector in list(self._collectors):
            for family in collector.collect():
                have = merged.get(family.name)
                if have is None:
                    merged[family.name] = MetricFamily(
                        family.name, family.type, family.help, list(family.samples)
                    )
                elif have.type != family.type:
                    raise ValueError(
                        f"metric {family.name} exported as {have.type} and {family.type}"
                    )
                else:
                    have.samples.extend(family.samples)
        return list(merged.values())
