"""``broker_registry()``: the registry one broker's ``/metrics`` serves."""

from __future__ import annotations

from prometheus_client import (
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.registry import CollectorRegistry

from .native import NativeExtensionsCollector


def broker_registry() -> CollectorRegistry:
    """A new registry holding the process-wide series: ``process_*`` (CPU, memory,
    open files), ``python_info``, ``python_gc_*`` and
    ``quasar_native_extension_active``.

    ``auto_describe`` makes a second collector exporting a name that is already
    registered fail at ``register`` (``ValueError``) instead of producing a scrape
    with the same family twice.
    """
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(NativeExtensionsCollector())
    return registry
