"""Pulsar's connection series: opened, admitted, refused and closed connections.

``ConnectionCounts`` holds plain integers that the server's connections update as
they are made, answered CONNECTED, refused and closed; ``ConnectionMetrics`` reads
them at scrape time. Pulsar prints these as gauges named
``pulsar_active_connections`` and ``pulsar_connection_{created_total,create_success,
create_fail,closed_total}_count``, labelled ``cluster``, ``broker`` (its advertised
address) and ``metric="broker_connection"``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["ConnectionCounts", "ConnectionMetrics"]


class ConnectionCounts:
    """Binary-protocol connections of one broker since it started."""

    __slots__ = ("created", "create_success", "create_fail", "closed")

    def __init__(self) -> None:
        # Every accepted TCP (or TLS) connection, admitted or refused.
        self.created = 0
        # Connections answered CONNECTED (authenticated when authentication is on).
        self.create_success = 0
        # Connections refused: over a connection limit, or failing authentication.
        self.create_fail = 0
        self.closed = 0

    @property
    def active(self) -> int:
        return self.created - self.closed


class ConnectionMetrics(Collector):
    """Exports one broker's ``ConnectionCounts``."""

    def __init__(self, counts: ConnectionCounts, cluster: str, broker: str) -> None:
        self._counts = counts
        self._labels = [cluster, broker, "broker_connection"]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self._counts
        for name, doc, value in (
            ("pulsar_active_connections", "Connections open now", counts.active),
            ("pulsar_connection_created_total_count", "Connections accepted",
             counts.created),
            ("pulsar_connection_create_success_count",
             "Connections answered CONNECTED", counts.create_success),
            ("pulsar_connection_create_fail_count",
             "Connections refused (limits, authentication)", counts.create_fail),
            ("pulsar_connection_closed_total_count", "Connections closed", counts.closed),
        ):
            family = GaugeMetricFamily(name, doc, labels=["cluster", "broker", "metric"])
            family.add_metric(self._labels, value)
            yield family
