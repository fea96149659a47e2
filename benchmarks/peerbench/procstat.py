"""What a server process tree costs: CPU from ``/proc`` and fsyncs counted by strace.

CPU is user + system time of the server's process and all its descendants (RabbitMQ
runs ``beam.smp`` under a shell, NATS and Redis are one process, quasar one Python
process), read before and after a run.

fsyncs are counted by attaching ``strace -f -c`` to every process of the tree for a
separate counting pass: ptrace stops the traced threads at each traced call, which
slows a server, so the timed runs are never traced. Every call that asks the kernel
to make data durable is counted: fsync, fdatasync, sync_file_range, syncfs, msync.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "syncfs", "msync")


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            kids += [int(x) for x in text.split()]
    except OSError:
        pass
    return kids


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant that is alive now."""
    seen: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        if p in seen or not Path(f"/proc/{p}").exists():
            continue
        seen.append(p)
        todo += _children(p)
    return seen


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``'s tree, children already reaped included."""
    total = 0
    for p in process_tree(pid):
        try:
            raw = Path(f"/proc/{p}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        # utime, stime, cutime, cstime (fields 14-17 of proc(5), from index 11 here)
        total += sum(int(f) for f in fields[11:15])
    return total / CLOCK_TICKS


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


class SyncCounter:
    """``strace -f -c`` on a process tree: start, let the load run, ``stop()`` for the
    number of durability syscalls made meanwhile."""

    def __init__(self, pid: int, out_path: Path) -> None:
        self.pid = pid
        self.out_path = out_path
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> str | None:
        """None when strace can be used, else why not."""
        if shutil.which("strace") is None:
            return "strace is not installed"
        return None

    def start(self, timeout_s: float = 20.0) -> None:
        pids = process_tree(self.pid)
        args = ["strace", "-f", "-c", "-e", "trace=" + ",".join(SYNC_CALLS), "-o", str(self.out_path)]
        for p in pids:
            args += ["-p", str(p)]
        err_path = self.out_path.with_suffix(".err")
        self.err = open(err_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.err)
        # strace says "Process N attached" for each process it has attached.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("strace exited: " + err_path.read_text(errors="replace")[-500:])
            if err_path.read_text(errors="replace").count("attached") >= len(pids):
                return
            time.sleep(0.05)
        raise RuntimeError("strace did not attach in time")

    def stop(self) -> dict[str, int]:
        """Detach and return calls by syscall name (all of ``SYNC_CALLS``, 0 when none)."""
        assert self.proc is not None, "not started"
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)
        self.err.close()
        counts = dict.fromkeys(SYNC_CALLS, 0)
        for line in self.out_path.read_text().splitlines():
            cells = line.split()
            if cells and cells[-1] in counts and len(cells) >= 5:
                counts[cells[-1]] = int(cells[3])
        return counts
