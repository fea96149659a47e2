"""A standalone ZooKeeper server (Debian's ``zookeeper`` package) as a child process.

``ZooKeeperServer`` writes a ``zoo.cfg`` for one server on ``127.0.0.1:<port>`` with
its data under ``data_dir``, starts it with ``java -cp`` on the package's jar
(``/usr/share/java/zookeeper.jar``, whose manifest names its dependencies), waits
until the ``srvr`` four-letter word reports it serving (a bounded wait), and stops
it politely (SIGTERM) or kills it (SIGKILL). Started again on the same directory it
finds its data: snapshots and transaction logs in ``data_dir/data``.

``missing_reason()`` says why no server can be started here (no Java, no package)
and how to install it.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from quasar.local.process import LoggedProcess

__all__ = ["ZOOKEEPER_JAR", "ZooKeeperServer", "missing_reason"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# The package's slf4j binding for plain stderr logging, when installed; without it
# the server logs nothing (slf4j's no-op binding) but runs the same.
_SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")
_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
_INSTALL = "apt-get install zookeeper, or make zookeeper"


def missing_reason() -> str | None:
    """Why a ZooKeeper server cannot be started here, or ``None`` if it can."""
    if shutil.which("java") is None:
        return f"java is not installed ({_INSTALL} brings it)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing ({_INSTALL})"
    return None


class ZooKeeperServer(LoggedProcess):
    """A standalone ZooKeeper server on ``127.0.0.1:<port>``.

    ``tick_time_ms`` is ZooKeeper's tick; it grants session timeouts between
    ``2 * tick_time_ms`` and ``max_session_timeout_ms``.
    """

    name = "ZooKeeper"

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        tick_time_ms: int = 2000,
        max_session_timeout_ms: int = 60_000,
        log_path: Path | None = None,
        new_session: bool = False,
        die_with_parent: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        super().__init__(
            log_path or self.data_dir / "zookeeper.log",
            new_session=new_session,
            die_with_parent=die_with_parent,
        )

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, chroot: str = "") -> str:
        """A ``metadataStoreUrl`` for this server (``zk:127.0.0.1:<port><chroot>``)."""
        return f"zk:{self.connect_string}{chroot}"

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join([
                f"tickTime={self.tick_time_ms}",
                f"dataDir={(self.data_dir / 'data').resolve()}",
                f"clientPort={self.port}",
                "clientPortAddress=127.0.0.1",
                f"minSessionTimeout={2 * self.tick_time_ms}",
                f"maxSessionTimeout={self.max_session_timeout_ms}",
                # The AdminServer would take port 8080, a broker's web port; the
                # four-letter words are enough to tell that it serves.
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,stat",
                # One server: nothing to wait for at start-up.
                "initLimit=5",
                "syncLimit=2",
                "",
            ])
        )
        return cfg

    def start(self, ready_timeout_s: float = 30.0) -> ZooKeeperServer:
        """Start and wait until it serves.

        Raises:
            RuntimeError: no Java or no ZooKeeper package (naming how to install
                them), or the server exited; TimeoutError: it did not serve in time.
        """
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start ZooKeeper: {reason}")
        cfg = self._write_config()
        classpath = str(ZOOKEEPER_JAR)
        if _SLF4J_SIMPLE.exists():
            classpath += os.pathsep + str(_SLF4J_SIMPLE)
        cmd = [
            "java", "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-cp", classpath, _MAIN, str(cfg),
        ]
        self._launch(cmd)
        # "ruok" answers "imok" before the server accepts sessions; "srvr" reports a
        # Mode only once it serves requests.
        self._await(lambda: "Mode:" in (self.four_letter_word("srvr") or ""), ready_timeout_s)
        return self

    def four_letter_word(self, word: str, timeout_s: float = 1.0) -> str | None:
        """The server's answer to a four-letter word, or ``None`` if it did not answer."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s) as s:
                s.settimeout(timeout_s)
                s.sendall(word.encode())
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks).decode(errors="replace")
        except OSError:
            return None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
