"""``quasar_native_extension_active``: 1 per C extension in use, 0 per Python fallback."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from quasar.native import native_extensions


class NativeExtensionsCollector(Collector):
    """Reads ``quasar.native`` at each scrape."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "quasar_native_extension_active",
            "1 if the optional C extension is in use, 0 if its Python fallback runs",
            labels=["extension"],
        )
        for ext in native_extensions():
            family.add_metric([ext.name], 1.0 if ext.active else 0.0)
        yield family
