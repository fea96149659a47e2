"""The ``disk-full`` fault of a chaos run: the broker's data directory lives on a
small tmpfs of the run's own, and the fault fills it.

:class:`SmallDisk` mounts a tmpfs (``mount -t tmpfs``: it needs root, or
``CAP_SYS_ADMIN``) and holds the broker's data directory in it; ``fill`` writes a
filler file beside that directory until the file system refuses another byte, and
``free`` deletes it. :func:`mount_refusal` says, before a run, whether mounting is
permitted here at all, so ``quasar chaos`` can leave the kind out (or refuse it when
asked for by name) instead of failing halfway.

A tmpfs holds its pages in memory, and writing a filler the size of all its free
space would cost that much memory and seconds of copying per fault. So ``fill``
first lowers the tmpfs's size limit (``mount -o remount,size=``) to what is in use
plus :data:`FILL_MARGIN_BYTES`, and the filler takes only that margin; ``free``
deletes it and restores the limit. To the broker it is the same: a file system
with no free byte left.
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from pathlib import Path

from quasar.testing.chaos.faults import FaultFactory, Targets
from quasar.testing.chaos.schedule import DISK_FULL, FaultEvent

# Bounded runs store about 160 bytes of ledger per operation and 2-3 MiB of
# metadata store (with its write-ahead log), so a run of 100,000 operations needs
# some 20 MiB: 1 GiB leaves room for far longer runs, and the size is only an upper
# bound (a tmpfs takes memory for what it holds, not for its size).
DISK_SIZE_BYTES = 1 << 30
FILLER_NAME = "filler"
# What fill() leaves between the tmpfs's lowered limit and its use, for the filler
# to take: room for what the broker writes while the limit is being lowered.
FILL_MARGIN_BYTES = 1 << 20
RESIZE_ATTEMPTS = 5
UNMOUNT_TIMEOUT_S = 30.0


class MountRefused(RuntimeError):
    """The tmpfs cannot be mounted here (not root, or the mount was refused)."""


def mount_refusal() -> str | None:
    """Why a tmpfs cannot be mounted here, or None when it can (a 1 MiB tmpfs is
    mounted and unmounted again to find out)."""
    if os.geteuid() != 0:
        return "not running as root"
    with tempfile.TemporaryDirectory(prefix="quasar-chaos-probe-") as tmp:
        disk = SmallDisk(Path(tmp), size_bytes=1 << 20)
        try:
            disk.mount()
        except MountRefused as exc:
            return str(exc)
        disk.unmount()
    return None


class SmallDisk:
    """A tmpfs of ``size_bytes`` at ``mount_point``; the broker's data directory is
    ``data_dir`` inside it, the filler file its sibling."""

    def __init__(self, mount_point: Path, size_bytes: int = DISK_SIZE_BYTES) -> None:
        self.mount_point = Path(mount_point)
        self.size_bytes = size_bytes
        self.data_dir = self.mount_point / "data"
        self.filler = self.mount_point / FILLER_NAME
        self.mounted = False

    def mount(self) -> SmallDisk:
        """Raises:
            MountRefused: not root, or ``mount`` failed (its message says why).
        """
        if os.geteuid() != 0:
            raise MountRefused("not running as root")
        self.mount_point.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_bytes},mode=0700", "tmpfs",
             str(self.mount_point)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise MountRefused(f"mount failed: {done.stderr.strip() or done.returncode}")
        self.mounted = True
        self.data_dir.mkdir()
        return self

    def unmount(self) -> None:
        """Unmount (lazily if something still holds a file open); idempotent."""
        if not self.mounted:
            return
        done = subprocess.run(["umount", str(self.mount_point)], capture_output=True,
                              check=False, timeout=UNMOUNT_TIMEOUT_S)
        if done.returncode != 0:
            # A process that outlived the run (a worker being reaped) keeps it busy;
            # detached now, it is released with that process's last file.
            subprocess.run(["umount", "-l", str(self.mount_point)], capture_output=True,
                           check=False, timeout=UNMOUNT_TIMEOUT_S)
        self.mounted = False

    def free_bytes(self) -> int:
        st = os.statvfs(self.mount_point)
        return st.f_bavail * st.f_frsize

    def used_bytes(self) -> int:
        st = os.statvfs(self.mount_point)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def resize(self, size_bytes: int) -> bool:
        """Set the tmpfs's size limit; False when the kernel refuses it (a limit
        below what is in use)."""
        done = subprocess.run(
            ["mount", "-o", f"remount,size={size_bytes}", str(self.mount_point)],
            capture_output=True, check=False, timeout=UNMOUNT_TIMEOUT_S,
        )
        return done.returncode == 0

    def fill(self) -> int:
        """Leave no free byte: lower the limit to what is in use plus a margin
        (the broker writing meanwhile may take part of it; asked again if it took
        more), then append to the filler until the file system refuses another
        byte. Returns the filler's bytes."""
        for _ in range(RESIZE_ATTEMPTS):
            if self.resize(min(self.size_bytes, self.used_bytes() + FILL_MARGIN_BYTES)):
                break
        # Should every attempt be refused, the filler takes the whole free space:
        # slower, and as full.
        written = 0
        with open(self.filler, "ab", buffering=0) as f:
            for size in (1 << 20, 1 << 16, 1 << 12, 1):
                block = b"\0" * size
                while True:
                    try:
                        n = f.write(block)
                    except OSError as exc:
                        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                            raise
                        break
                    written += n or 0
        return written

    def free(self) -> None:
        """Delete the filler (it may not exist: a heal without an inject) and give
        the tmpfs its whole size again.

        Raises:
            OSError: the size limit could not be restored.
        """
        self.filler.unlink(missing_ok=True)
        if self.mounted and not self.resize(self.size_bytes):
            raise OSError(f"cannot restore the size of the tmpfs at {self.mount_point}")

    def __enter__(self) -> SmallDisk:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()


class DiskFull:
    kind = DISK_FULL

    def __init__(self, event: FaultEvent, targets: Targets) -> None:
        if targets.disk is None:
            raise ValueError("disk-full needs a run whose data directory is on a SmallDisk")
        self.disk = targets.disk
        self.filled = 0  # bytes the filler took

    def inject(self) -> None:
        self.filled = self.disk.fill()

    def heal(self) -> None:
        self.disk.free()


DISK_FAULTS: dict[str, FaultFactory] = {DISK_FULL: DiskFull}
