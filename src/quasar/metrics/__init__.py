"""Broker metrics: a small Prometheus registry and its text exposition.

``REGISTRY`` is the process's registry, served at ``GET /metrics`` on the HTTP
(admin) port. Components register their collectors there when they start and
unregister them when they close; tests build their own ``Registry``.
"""

from __future__ import annotations

from .exposition import CONTENT_TYPE, render
from .registry import (
    Collector,
    Counter,
    Gauge,
    Histogram,
    MetricFamily,
    Registry,
    Sample,
)

REGISTRY = Registry()

__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "Collector",
    "Counter",
    "Gauge",
    "Histogram",
    "MetricFamily",
    "Registry",
    "Sample",
    "render",
]
