"""A Spark standalone cluster on this machine, for tests: a master and workers as processes.

``SparkCluster`` starts them from PySpark's own launch script (``bin/spark-class`` of
the pip ``pyspark`` package), each in its own session with its own work, local and log
directories, on free loopback ports:

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --host 127.0.0.1 ...

The master's ports are chosen up front (drivers and workers need its URL); a worker
binds ports the kernel picks and is recognised in the master's status by the port
its log reports.
Readiness is read from the master's JSON status (``http://127.0.0.1:W/json/``): the
cluster is up when every worker is ``ALIVE`` there (a bounded wait on that event).
``kill_worker`` is a lost machine: SIGKILL to every process of the worker's session —
the worker JVM, its executors' JVMs and their Python workers (PySpark's daemon moves
itself into its own process group, but not out of the session). ``stop`` kills
everything the same way; it also runs at interpreter exit, so a failed test run
leaves no daemon behind.

Drivers connect with ``session_conf()``: executors run this interpreter
(``spark.pyspark.python``) and find ``quasar`` and ``pyspark_quasar`` through
``spark.executorEnv.PYTHONPATH``. The daemons themselves get no ``PYTHONPATH``, so a
test passes only if that setting is what makes the connector importable on the
executors, as it must be on a real cluster.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from quasar.testing.process import free_port

_LOOPBACK = "127.0.0.1"
# The daemons and executors are small and short-lived: a small heap, the serial
# collector and the client compiler start faster and use less CPU on a shared machine.
_DAEMON_MEMORY = "256m"
_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
_POLL_S = 0.2  # polling interval of the bounded waits on the master's status


def spark_home() -> Path:
    """The pip ``pyspark`` package directory, which holds ``bin/spark-class`` and the jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed in this interpreter")
    return Path(spec.origin).parent


def connector_python_path() -> list[str]:
    """The directories holding ``quasar`` and ``pyspark_quasar`` as this process sees them
    (found without importing the connector: ``quasar.testing`` does not depend on it)."""
    roots: list[str] = []
    for name in ("quasar", "pyspark_quasar"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not importable in this interpreter")
        root = str(Path(spec.origin).resolve().parent.parent)
        if root not in roots:
            roots.append(root)
    return roots


def _session_members(sid: int) -> list[int]:
    """Every live process whose session id is ``sid`` (``/proc/<pid>/stat`` field 6)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited while we looked
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def _kill_session(sid: int) -> None:
    # The session leader first: a worker that outlived its executors would start new ones.
    for pid in sorted(_session_members(sid), key=lambda p: p != sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# What a worker logs once its RPC endpoint is bound (its port in the master's status).
_WORKER_BOUND = re.compile(rb"Successfully started service 'sparkWorker' on port (\d+)")


@dataclass
class SparkDaemon:
    """One master or worker process and where it keeps its files.

    A port of 0 lets the kernel choose (workers: nothing needs their ports up front);
    ``bound_port`` is then read from the daemon's log."""

    name: str
    port: int
    webui_port: int
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def bound_port(self) -> int | None:
        if self.port:
            return self.port
        try:
            m = _WORKER_BOUND.search(self.log_path.read_bytes())
        except OSError:
            return None
        if m is not None:
            self.port = int(m.group(1))
        return self.port or None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL this daemon's whole session (a worker's executors and Python workers)."""
        if self.proc is not None:
            _kill_session(self.proc.pid)
            self.proc.wait(30)
        if self._log is not None:
            self._log.close()
            self._log = None


class SparkCluster:
    """A master and ``workers`` workers on loopback; see the module docstring.

    A worker offers ``worker_cores`` cores and an application takes one single-core
    executor on each worker (``session_conf``), so two applications run side by side:
    a test's long-lived session, and a driver process that a test kills and restarts.
    """

    def __init__(
        self,
        base_dir: Path,
        workers: int = 2,
        worker_cores: int = 2,
        worker_memory: str = "1g",
        python: str = sys.executable,
        python_path: list[str] | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.worker_count = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.python = python
        self.python_path = python_path or connector_python_path()
        self.master = SparkDaemon("master", free_port(), free_port(), self.base_dir / "master")
        self.workers: list[SparkDaemon] = []
        self._started = 0
        self.conf_dir = self.base_dir / "conf"

    @property
    def master_url(self) -> str:
        return f"spark://{_LOOPBACK}:{self.master.port}"

    @property
    def master_webui_url(self) -> str:
        return f"http://{_LOOPBACK}:{self.master.webui_port}"

    def session_conf(self) -> dict[str, str]:
        """What a driver needs to run pyspark_quasar pipelines on this cluster."""
        return {
            "spark.master": self.master_url,
            "spark.driver.host": _LOOPBACK,
            "spark.driver.bindAddress": _LOOPBACK,
            "spark.pyspark.python": self.python,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(self.python_path),
            # One single-core executor per worker, so that a test knows that two tasks
            # of a stage run on two workers, and every application fits next to another.
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.worker_count),
            "spark.executor.memory": "512m",
            "spark.executor.extraJavaOptions": _JAVA_OPTS,
            # The first job waits until every executor has registered (bounded), so a
            # stage's tasks are spread over the workers from the start.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
        }

    # -- starting -----------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith(("PYSPARK_", "SPARK_"))
        }
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(self.conf_dir),
            SPARK_LOCAL_IP=_LOOPBACK,
            SPARK_DAEMON_MEMORY=_DAEMON_MEMORY,
            SPARK_DAEMON_JAVA_OPTS=_JAVA_OPTS,
        )
        return env

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        # The master's REST submission server listens on a fixed port (6066) that
        # parallel clusters would fight over; drivers here connect in client mode.
        (self.conf_dir / "spark-defaults.conf").write_text("spark.master.rest.enabled false\n")

    def _launch(self, daemon: SparkDaemon, main_class: str, args: list[str]) -> None:
        daemon.directory.mkdir(parents=True, exist_ok=True)
        env = self._env()
        env["SPARK_LOCAL_DIRS"] = str(daemon.directory / "local")
        daemon._log = open(daemon.log_path, "ab")
        cmd = [str(spark_home() / "bin" / "spark-class"), main_class, *args]
        daemon.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=daemon._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=daemon.directory,
        )

    def start(self, timeout_s: float = 300.0) -> SparkCluster:
        """Start the master and the workers together (a worker retries registering
        until the master is up) and wait until every worker is ALIVE.

        Raises:
            TimeoutError: not every worker registered in time (the logs are in the message).
        """
        atexit.register(self.stop)
        self._write_conf()
        try:
            self._launch(
                self.master,
                "org.apache.spark.deploy.master.Master",
                ["--host", _LOOPBACK, "--port", str(self.master.port),
                 "--webui-port", str(self.master.webui_port)],
            )
            for _ in range(self.worker_count):
                self._launch_worker()
            self.wait_alive(self.worker_count, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch_worker(self) -> SparkDaemon:
        self._started += 1
        worker = SparkDaemon(
            f"worker{self._started}", 0, 0, self.base_dir / f"worker{self._started}"
        )
        self._launch(
            worker,
            "org.apache.spark.deploy.worker.Worker",
            [self.master_url, "--host", _LOOPBACK, "--port", str(worker.port),
             "--webui-port", str(worker.webui_port), "--cores", str(self.worker_cores),
             "--memory", self.worker_memory, "--work-dir", str(worker.directory / "work")],
        )
        self.workers.append(worker)
        return worker

    def start_worker(self, timeout_s: float = 300.0) -> SparkDaemon:
        """Start one more worker and wait until the master lists it ALIVE."""
        worker = self._launch_worker()
        self.wait_for(
            f"{worker.name} ALIVE", lambda s: self.worker_state(worker, s) == "ALIVE", timeout_s
        )
        return worker

    # -- status -------------------------------------------------------------------

    def master_state(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``).

        Raises:
            OSError: the master does not answer (yet).
        """
        with urllib.request.urlopen(f"{self.master_webui_url}/json/", timeout=10) as resp:
            state: dict[str, Any] = json.load(resp)
        return state

    @staticmethod
    def worker_state(worker: SparkDaemon, state: dict[str, Any]) -> str | None:
        """``worker``'s state in a master status (``ALIVE``, ``DEAD``...), None if unknown.

        A worker re-registering gets a new id; the newest entry on its port counts."""
        port = worker.bound_port
        entries = [w for w in state.get("workers", []) if port and w.get("port") == port]
        return str(entries[-1]["state"]) if entries else None

    def alive_workers(self, state: dict[str, Any]) -> list[SparkDaemon]:
        return [w for w in self.workers if self.worker_state(w, state) == "ALIVE"]

    def wait_for(
        self, what: str, check: Callable[[dict[str, Any]], bool], timeout_s: float = 300.0) -> dict[str, Any]:
        """Poll the master's status until ``check(status)`` holds; return that status.

        Raises:
            TimeoutError: with the daemons' logs, when it did not hold within ``timeout_s``.
            RuntimeError: the master exited.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.master.running:
                raise RuntimeError(f"spark master exited:\n{self.master.read_log()}")
            try:
                state = self.master_state()
                if check(state):
                    return state
            except OSError:
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {d.name}\n{d.read_log()}" for d in [self.master, *self.workers])
                raise TimeoutError(f"spark cluster: no {what} after {timeout_s}s\n{logs}")
            time.sleep(_POLL_S)

    def wait_alive(self, count: int, timeout_s: float = 300.0) -> dict[str, Any]:
        return self.wait_for(
            f"{count} ALIVE workers", lambda s: len(self.alive_workers(s)) >= count, timeout_s
        )

    def worker_of(self, pid: int) -> SparkDaemon | None:
        """The worker whose session ``pid`` belongs to (an executor or Python worker)."""
        try:
            sid = os.getsid(pid)
        except ProcessLookupError:
            return None
        return next((w for w in self.workers if w.proc is not None and w.proc.pid == sid), None)

    # -- faults and stopping --------------------------------------------------------

    def kill_worker(self, worker: SparkDaemon, timeout_s: float = 120.0) -> None:
        """SIGKILL the worker with its executors, and wait until the master lists it DEAD
        (it notices the closed connection; no heartbeat timeout is involved)."""
        worker.kill()
        self.wait_for(
            f"{worker.name} DEAD", lambda s: self.worker_state(worker, s) == "DEAD", timeout_s
        )

    def stop(self) -> None:
        """SIGKILL every worker (with its executors) and the master; safe to call twice."""
        for daemon in [*self.workers, self.master]:
            daemon.kill()
        atexit.unregister(self.stop)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
