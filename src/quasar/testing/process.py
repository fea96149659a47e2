"""Run a real quasar broker process for integration and crash tests.

``BrokerProcess`` starts ``quasar standalone`` as a child process on free loopback
ports with its own data directory, waits until the binary port answers a Pulsar
handshake (a bounded wait on an event, never a fixed sleep), and can stop it politely
(SIGTERM) or kill it (SIGKILL) and start it again on the same ports and data.

Extra ``broker.conf`` settings go in ``settings`` (passed as ``--set KEY=VALUE``).
``tls_port`` and ``https_port`` turn on the TLS listeners (``brokerServicePortTls``,
``webServicePortTls``; the certificate settings go in ``settings``), and
``plaintext=False`` turns the plain ones off; a broker without a plaintext port is
ready when its TLS port completes a handshake. ``advertised_address`` is what LOOKUP
answers with (``advertisedAddress``); the broker still listens on 127.0.0.1, so a
fault proxy on another loopback address and the same port receives every connection
a client opens after its lookup (``quasar.testing.fault_proxy``).
"""

from __future__ import annotations

import os
import random
import socket
import sys
from pathlib import Path

from quasar.local.probe import pulsar_handshake_ok, tls_handshake_ok
from quasar.local.process import LoggedProcess

# Brokers are restarted in place (kill -9, then the same ports): a port from the
# kernel's ephemeral range may meanwhile become the local port of some outgoing
# connection, and the restart then fails with "address already in use". Ports below
# that range are never handed out that way.
_PORTS_BELOW_EPHEMERAL = (20_000, 32_000)
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free port below the ephemeral range (see above); any free port as a fallback."""
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(*_PORTS_BELOW_EPHEMERAL)
        if port in _HANDED_OUT:  # chosen before but maybe not bound yet
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess(LoggedProcess):
    name = "broker"

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        http_port: int | None = None,
        extra_env: dict[str, str] | None = None,
        log_path: Path | None = None,
        settings: dict[str, str] | None = None,
        tls_port: int | None = None,
        https_port: int | None = None,
        plaintext: bool = True,
        advertised_address: str = "127.0.0.1",
        command: str = "standalone",
    ) -> None:
        """``settings``: broker settings by Pulsar key (``{"authenticationEnabled":
        "true"}``), passed as ``--set KEY=VALUE``. ``command``: ``standalone``, or
        ``broker`` for a cluster member (``quasar.testing.cluster``)."""
        self.command = command
        self.advertised_address = advertised_address
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.http_port = http_port or free_port()
        self.tls_port = tls_port
        self.https_port = https_port
        self.plaintext = plaintext
        self.settings = dict(settings or {})
        self.extra_env = dict(extra_env or {})
        super().__init__(log_path or self.data_dir.parent / f"broker-{self.port}.log")

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def tls_url(self) -> str:
        assert self.tls_port is not None, "no TLS port"
        return f"pulsar+ssl://localhost:{self.tls_port}"

    @property
    def https_url(self) -> str:
        assert self.https_port is not None, "no HTTPS port"
        return f"https://localhost:{self.https_port}"

    def _listener_arguments(self) -> list[str]:
        settings = dict(self.settings)
        if self.tls_port is not None:
            settings["brokerServicePortTls"] = str(self.tls_port)
        if self.https_port is not None:
            settings["webServicePortTls"] = str(self.https_port)
        if self.plaintext:
            args = ["--port", str(self.port), "--http-port", str(self.http_port)]
        else:
            args = []
            settings["brokerServicePort"] = ""
            settings["webServicePort"] = ""
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        return args

    def start(self, ready_timeout_s: float = 60.0) -> BrokerProcess:
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [
            sys.executable,
            "-m",
            "quasar.cli.main",
            self.command,
            "--data-dir",
            str(self.data_dir),
            *self._listener_arguments(),
            "--advertised-address",
            self.advertised_address,
        ]
        self._launch(cmd, env)
        self.wait_ready(ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        self._await(self._serves, timeout_s)

    def _serves(self) -> bool:
        if self.plaintext:
            return pulsar_handshake_ok(self.port, 1.0)
        return self.tls_port is not None and tls_handshake_ok(self.tls_port, 1.0)

    def rss_bytes(self) -> int:
        """The running broker's resident memory (``VmRSS`` of ``/proc/<pid>/status``)."""
        assert self.proc is not None and self.proc.poll() is None, "broker not running"
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(kib) * 1024

    def restart(self, hard: bool = True) -> BrokerProcess:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
