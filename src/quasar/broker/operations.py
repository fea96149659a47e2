"""What the brokers admin API (``/admin/v2/brokers``) asks of the running broker.

``BrokerOperations`` gathers the broker's life-cycle state (started, closing), its
health check and its dynamic configuration; the composition root builds it and marks
the state changes, and ``quasar.admin.brokers`` answers from it.
"""

from __future__ import annotations

from importlib import metadata

from .dynamic_config import DynamicConfiguration
from .health_check import HealthChecker

__all__ = ["BrokerOperations", "quasar_version"]


def quasar_version() -> str:
    """The installed quasar version (``GET /admin/v2/brokers/version``)."""
    try:
        return metadata.version("quasar-broker")
    except metadata.PackageNotFoundError:
        # Run from a source tree whose distribution (quasar-broker) was never
        # installed: no version is recorded.
        return "unknown"


class BrokerOperations:
    """The broker's state as the brokers admin API reports it."""

    def __init__(self, health: HealthChecker, dynamic: DynamicConfiguration) -> None:
        self.health = health
        self.dynamic = dynamic
        self.version = quasar_version()
        # Started: every binary listener accepts connections (Pulsar's state
        # Started, which /ready reports).
        self.ready = False
        # Closing: shutdown began; /health answers 503 from then on.
        self.closing = False

    def mark_ready(self) -> None:
        self.ready = True

    def mark_closing(self) -> None:
        self.ready = False
        self.closing = True
