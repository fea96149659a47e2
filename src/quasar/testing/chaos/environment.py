"""Where a chaos run's broker lives: its data directory, on a small tmpfs of its
own when the plan fills the disk, and the fault proxy in front of it.

The broker listens on ``127.0.0.1:P`` and advertises :data:`PROXY_ADDRESS`; the
proxy listens on ``PROXY_ADDRESS:P`` and forwards to the broker, so every
connection a worker opens, the first one and every one a LOOKUP sends it to,
crosses the proxy. The runner's own clients (sentinels, the final drain) start at
the broker's own address; the proxy outlives broker restarts (it connects to the
broker anew for each connection it accepts, and refuses one while the broker is
down).
"""

from __future__ import annotations

from pathlib import Path

from quasar.testing.chaos.disk_full import DISK_SIZE_BYTES, SmallDisk
from quasar.testing.chaos.schedule import DISK_FULL, Plan
from quasar.testing.fault_proxy import FaultProxy

PROXY_ADDRESS = "127.0.0.2"  # Linux routes all of 127.0.0.0/8 to loopback


class RunEnvironment:
    """A context manager: entering mounts the disk (if the plan needs one), leaving
    stops the proxy and unmounts it, also when the run is interrupted."""

    def __init__(self, plan: Plan, workdir: Path,
                 disk_size_bytes: int = DISK_SIZE_BYTES) -> None:
        needs_disk = any(e.kind == DISK_FULL for e in plan.faults)
        self.disk = SmallDisk(workdir / "disk", disk_size_bytes) if needs_disk else None
        self.data_dir = self.disk.data_dir if self.disk else workdir / "data"
        self.advertised_address = PROXY_ADDRESS
        self.proxy: FaultProxy | None = None

    def __enter__(self) -> RunEnvironment:
        """Raises:
            MountRefused: the plan fills the disk, and a tmpfs cannot be mounted.
        """
        if self.disk is not None:
            self.disk.mount()
        return self

    def start_proxy(self, broker_port: int) -> str:
        """Start the proxy in front of the broker's port; the URL workers use."""
        self.proxy = FaultProxy("127.0.0.1", broker_port, listen_host=PROXY_ADDRESS,
                                listen_port=broker_port).start()
        return self.proxy.url

    def __exit__(self, *exc: object) -> None:
        try:
            if self.proxy is not None:
                self.proxy.stop()
        finally:
            if self.disk is not None:
                self.disk.unmount()
