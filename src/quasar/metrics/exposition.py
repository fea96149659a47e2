"""One scrape's body and content type, negotiated on the ``Accept`` header.

A scraper that asks for ``application/openmetrics-text`` (Prometheus does by default)
gets OpenMetrics; anything else gets the Prometheus text format 0.0.4. The choice is
``prometheus_client.exposition.choose_encoder``'s, so it follows the library.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector


class Snapshot(Collector):
    """Families already collected, for an encoder to write out elsewhere (another
    thread) than where they were read."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> list[Metric]:
        return self._families


def exposition(registry: Collector, accept: str | None) -> tuple[bytes, str]:
    """``(body, content type)`` of everything ``registry`` collects now."""
    encode, content_type = choose_encoder(accept or "")
    return encode(registry), content_type
