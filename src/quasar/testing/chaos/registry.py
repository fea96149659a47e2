"""Every fault kind of a chaos run, by name, and which of them this machine can run.

The runner takes a registry of :data:`~quasar.testing.chaos.faults.FaultFactory`
by kind; :data:`FAULTS` is the whole set: the process faults, the proxy's network
faults and ``disk-full``.
"""

from __future__ import annotations

from quasar.testing.chaos.disk_full import DISK_FAULTS, mount_refusal
from quasar.testing.chaos.faults import PROCESS_FAULTS, FaultFactory
from quasar.testing.chaos.proxy_faults import PROXY_FAULTS
from quasar.testing.chaos.schedule import DISK_FULL, FAULT_KINDS

FAULTS: dict[str, FaultFactory] = {**PROCESS_FAULTS, **PROXY_FAULTS, **DISK_FAULTS}
assert set(FAULTS) == set(FAULT_KINDS), "every planned kind has a factory"


def unavailable_kinds() -> dict[str, str]:
    """The kinds this machine cannot run, each with the reason (``disk-full``
    mounts a tmpfs, which needs root)."""
    refusal = mount_refusal()
    return {DISK_FULL: f"it mounts a tmpfs: {refusal}"} if refusal else {}
