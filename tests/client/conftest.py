"""Fixtures for the client tests: a real ``quasar standalone`` broker subprocess, and
the in-process fake broker (``fake``; modules that need it set up differently, e.g.
with transactions, define their own).

The broker listens on free loopback ports with a temporary data directory. Start-up
is awaited by polling the port within a bounded deadline (the process is also checked,
so a broker that dies at start fails the test at once with its output). ``kill()``
sends SIGKILL, and ``start()`` again reuses the same ports and data directory, which
is what the crash-resume test needs.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from quasar.testing.process import free_port

from ..fakes.broker import FakeBroker

STARTUP_TIMEOUT_S = 30.0




def _quasar_command() -> list[str]:
    # QUASAR_BROKER_COMMAND overrides how the broker is launched (e.g. under coverage).
    override = os.environ.get("QUASAR_BROKER_COMMAND")
    if override:
        return shlex.split(override)
    script = Path(sys.executable).with_name("quasar")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from quasar.cli.main import main; sys.exit(main())",
    ]


class BrokerProcess:
    """A standalone broker subprocess that can be killed and restarted in place."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.settings = dict(settings or {})
        self.port = free_port()
        self.http_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker and wait until its binary port accepts connections."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self.proc = subprocess.Popen(
            [
                *_quasar_command(),
                "standalone",
                "--data-dir",
                str(self.data_dir),
                "--port",
                str(self.port),
                "--http-port",
                str(self.http_port),
                "--advertised-address",
                "127.0.0.1",
                "--bind-address",
                "127.0.0.1",
                *[
                    arg
                    for k, v in self.settings.items()
                    for arg in ("--set", f"{k}={v}")
                ],
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"broker exited with {self.proc.returncode}:\n{self.output()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(
                    f"broker did not listen within {STARTUP_TIMEOUT_S}s:\n{self.output()}"
                )
            time.sleep(0.05)

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """PUT .../partitions on the admin REST API."""
        path = topic.replace("://", "/")
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/admin/v2/{path}/partitions",
            data=json.dumps(partitions).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status in (200, 204)
        except urllib.error.URLError:
            if "admin API unavailable" in self.output():
                pytest.skip("the broker started without its admin API")
            raise

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the broker (no clean shutdown) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the integration tests of the session."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture(scope="session")
def partitioned_broker(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[BrokerProcess]:
    """A broker that auto-creates every new topic with 3 partitions.

    Partitioned topics then need no admin call, and the partition metadata path of
    the binary protocol is what creates them, as for a client in the field.
    """
    proc = BrokerProcess(
        tmp_path_factory.mktemp("pbroker") / "data",
        {"allowAutoTopicCreationType": "partitioned", "defaultNumPartitions": "3"},
    )
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker only this test uses (for tests that kill it), with deduplication on."""
    proc = BrokerProcess(tmp_path / "data", {"brokerDeduplicationEnabled": "true"})
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
def service_url(broker: BrokerProcess) -> str:
    return broker.service_url


@pytest.fixture
def topic() -> str:
    """A fresh topic name per test, so tests never see each other's messages."""
    return f"persistent://public/default/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    await broker.start()
    yield broker
    await broker.stop()


async def start_app(app: web.Application) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on a free loopback port: its runner (to clean up) and its URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"
