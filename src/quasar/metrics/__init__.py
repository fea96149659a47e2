"""Broker metrics on ``GET /metrics``, built on ``prometheus_client``.

Each broker owns one ``CollectorRegistry`` (``broker_registry()``), so several
brokers in one process (tests) never share series. Components add *collectors* to
it: objects whose ``collect()`` reads their state at scrape time and yields
``prometheus_client`` metric families, so nothing is mirrored on the hot path.
``exposition`` answers a scrape in the format its ``Accept`` header asks for.
"""

from __future__ import annotations

from .exposition import exposition
from .native import NativeExtensionsCollector
from .registry import broker_registry

__all__ = ["NativeExtensionsCollector", "broker_registry", "exposition"]
