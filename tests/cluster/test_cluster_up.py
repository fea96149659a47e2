"""``quasar cluster up``: ZooKeeper and N members on this machine, in the foreground.

Run as users run it, a subprocess: the official ``pulsar`` client produces and
consumes a partitioned topic through the service URL it prints, with partitions on
both members; SIGTERM stops every process it started and it exits 0; a second run
over the same directory finds the metadata and the messages; a member killed -9
makes it report that member and stop everything with a non-zero status. Bad
arguments are refused before anything starts.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pulsar
import pytest

from quasar.cli.main import main
from quasar.local.probe import port_taken
from quasar.testing.zookeeper import ZooKeeperProcess
from tests.conftest import require_zookeeper

TOPIC = "persistent://public/default/cluster-up"
PARTITIONS = 6
MESSAGES = 30
READY_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 90.0
_LINE = re.compile(r"^(broker \d+|ZooKeeper):? .*\(pid (\d+)\)")


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports below the ephemeral range."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 32_000 - count)
        if not any(port_taken(p) or port_taken(p, "0.0.0.0") for p in range(base, base + count)):
            return base
    raise AssertionError("no run of free ports")


@dataclass
class ClusterUp:
    """One ``quasar cluster up`` subprocess and what it printed."""

    data_dir: Path
    brokers: int = 2
    proc: subprocess.Popen[bytes] | None = None
    pids: dict[str, int] = field(default_factory=dict)
    base_port: int = 0
    base_web_port: int = 0
    zookeeper_port: int = 0
    zookeeper: str | None = None  # an existing server's URL, or start one

    def start(self, out: Path) -> ClusterUp:
        base = consecutive_free_ports(2 * self.brokers + 1)
        self.zookeeper_port = base
        self.base_port = base + 1
        self.base_web_port = base + 1 + self.brokers
        self.out = out
        self._stdout: IO[bytes] = open(out, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "quasar.cli.main", "cluster", "up",
                "--brokers", str(self.brokers), "--data-dir", str(self.data_dir),
                "--base-port", str(self.base_port),
                "--base-web-port", str(self.base_web_port),
                "--zookeeper-port", str(self.zookeeper_port),
                "--transaction-coordinators", "2",
                *([] if self.zookeeper is None else ["--zookeeper", self.zookeeper]),
            ],
            stdout=self._stdout, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Its own process group, as a shell gives a foreground job.
            start_new_session=True,
        )
        return self

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if re.search(r"^ready: ", self.output(), re.M):
                break
            assert self.proc.poll() is None, self.output()
            time.sleep(0.1)  # polling interval of a bounded wait
        else:
            raise AssertionError(f"not ready:\n{self.output()}")
        for line in self.output().splitlines():
            if match := _LINE.match(line):
                self.pids[match.group(1)] = int(match.group(2))
        own = [] if self.zookeeper else ["ZooKeeper"]
        assert set(self.pids) == {*own, *(f"broker {i}" for i in range(self.brokers))}

    def line(self, prefix: str) -> str:
        return next(
            line[len(prefix):] for line in self.output().splitlines() if line.startswith(prefix)
        )

    def wait_exit(self) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(EXIT_TIMEOUT_S)
        finally:
            self._stdout.close()

    def stop(self) -> None:
        """Cleanup after a failed test: stop it, and anything it left, for sure."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for pid in self.pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if not self._stdout.closed:
            self._stdout.close()


def session_id(pid: int) -> int:
    """The session of ``pid`` (``/proc/<pid>/stat``'s sixth field)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not reaped, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=15) as response:
        return json.loads(response.read())


def client(service_url: str) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(service_url, operation_timeout_seconds=30, logger=logger)


def receive_all(consumer: pulsar.Consumer, count: int) -> set[bytes]:
    values = set()
    for _ in range(count):
        message = consumer.receive(timeout_millis=30_000)
        values.add(message.data())
        consumer.acknowledge(message)
    return values


@dataclass
class FirstRun:
    data_dir: Path
    output: str
    sent: set[bytes]
    received: set[bytes]
    owners: dict[str, list[str]]
    exit_code: int
    left_running: list[str]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirstRun]:
    """A two-member cluster: a partitioned topic produced and consumed through its
    service URL, then SIGTERM."""
    require_zookeeper()
    work = tmp_path_factory.mktemp("cluster-up")
    up = ClusterUp(work / "cluster").start(work / "first.out")
    try:
        up.wait_ready()
        service_url = up.line("service URL: ")
        admin_urls = up.line("admin URLs: ").split()
        assert service_url == (
            f"pulsar://127.0.0.1:{up.base_port},127.0.0.1:{up.base_port + 1}"
        )
        request = urllib.request.Request(
            f"{admin_urls[0]}/admin/v2/persistent/public/default/cluster-up/partitions",
            data=str(PARTITIONS).encode(), method="PUT",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=15).close()
        c = client(service_url)
        try:
            consumer = c.subscribe(TOPIC, "first")
            producer = c.create_producer(TOPIC)
            sent = {f"m-{i}".encode() for i in range(MESSAGES)}
            for value in sorted(sent):
                producer.send(value)
            received = receive_all(consumer, MESSAGES)
        finally:
            c.close()
        owners = {
            url: [
                b for b in get_json(  # type: ignore[union-attr]
                    f"{url}/admin/v2/brokers/local/{url.removeprefix('http://')}/ownedNamespaces"
                ) if b.startswith("public/default/")
            ]
            for url in admin_urls
        }
        assert up.proc is not None
        up.proc.send_signal(signal.SIGTERM)
        code = up.wait_exit()
        yield FirstRun(
            up.data_dir, up.output(), sent, received, owners, code,
            [name for name, pid in up.pids.items() if alive(pid)],
        )
    finally:
        up.stop()


def test_up_serves_a_partitioned_topic_on_every_member(first_run: FirstRun) -> None:
    assert first_run.received == first_run.sent
    # Both members own bundles of public/default: the partitions are spread.
    assert all(first_run.owners.values()), first_run.owners
    assert "created cluster local" in first_run.output


def test_sigterm_stops_every_process_and_exits_zero(first_run: FirstRun) -> None:
    assert first_run.exit_code == 0, first_run.output
    assert first_run.left_running == []
    assert first_run.output.rstrip().endswith("stopped")


def test_second_run_finds_the_data_and_a_dead_member_stops_all(
    first_run: FirstRun, tmp_path: Path
) -> None:
    up = ClusterUp(first_run.data_dir).start(tmp_path / "second.out")
    try:
        up.wait_ready()
        assert "nothing changed" in up.output()
        c = client(up.line("service URL: "))
        try:
            reader = c.subscribe(
                TOPIC, "second", initial_position=pulsar.InitialPosition.Earliest
            )
            assert receive_all(reader, MESSAGES) == first_run.sent
        finally:
            c.close()

        os.kill(up.pids["broker 1"], signal.SIGKILL)
        code = up.wait_exit()
        output = up.output()
        assert code != 0, output
        assert re.search(r"broker 1 \(pid \d+\) exited unexpectedly with status -9", output)
        assert "the last lines of" in output and "broker-1.log" in output
        assert [name for name, pid in up.pids.items() if alive(pid)] == []
    finally:
        up.stop()


def test_up_on_an_existing_zookeeper_stops_on_ctrl_c(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """Ctrl-C in a terminal signals the foreground process group: ``cluster up``
    alone, since its members run in sessions of their own; it stops them and leaves
    the ZooKeeper it did not start running."""
    url = zookeeper.url(f"/cluster-up-{os.getpid()}")
    up = ClusterUp(tmp_path / "cluster", brokers=1, zookeeper=url).start(tmp_path / "out")
    try:
        up.wait_ready()
        assert f"metadata store: {url}" in up.output()
        assert up.proc is not None
        member = up.pids["broker 0"]
        assert session_id(member) == member != session_id(up.proc.pid)
        os.killpg(up.proc.pid, signal.SIGINT)
        assert up.wait_exit() == 0, up.output()
        assert "SIGINT: stopping the cluster" in up.output()
        assert not alive(member)
        assert zookeeper.running() and "Mode:" in (zookeeper.four_letter_word("srvr") or "")
    finally:
        up.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killed_with_sigkill_it_leaves_no_orphans(tmp_path: Path) -> None:
    """Its members and ZooKeeper asked the kernel for SIGTERM when it dies, so even
    ``kill -9``, which runs no clean-up, stops them."""
    require_zookeeper()
    up = ClusterUp(tmp_path / "cluster", brokers=1).start(tmp_path / "out")
    try:
        up.wait_ready()
        assert up.proc is not None
        assert all(alive(pid) for pid in up.pids.values())
        up.proc.send_signal(signal.SIGKILL)
        assert up.wait_exit() == -signal.SIGKILL
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while time.monotonic() < deadline:
            left = [name for name, pid in up.pids.items() if alive(pid)]
            if not left:
                break
            time.sleep(0.1)  # polling interval of a bounded wait
        assert left == [], up.output()
    finally:
        up.stop()


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_bad_arguments_are_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listening: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(*args: str) -> tuple[int, str]:
        code = main(["cluster", "up", "--data-dir", str(tmp_path / "d"), *args])
        return code, capsys.readouterr().err

    base = ["--base-port", str(consecutive_free_ports(4)), "--base-web-port"]
    web = str(consecutive_free_ports(4))
    code, err = refused("--brokers", "0")
    assert code == 2 and "--brokers must be at least 1, got 0" in err
    code, err = refused("--brokers", "2", "--base-port", str(listening - 1),
                        "--zookeeper", "zk:127.0.0.1:1")
    assert code == 2 and f"port {listening} is in use" in err
    code, err = refused(*base, web, "--zookeeper-port", str(listening))
    assert code == 2 and f"port {listening} is in use" in err
    code, err = refused(*base, base[1], "--zookeeper", "zk:127.0.0.1:1")
    assert code == 2 and "the ports overlap" in err
    conf = tmp_path / "broker.conf"
    conf.write_text("# extra keys\nmanagedLedgerMaxEntriesPerLedger=100\nbrokerServicePort=7000\n")
    code, err = refused(*base, web, "--config", str(conf))
    assert code == 2 and "brokerServicePort" in err and "--base-port" in err
    code, err = refused(*base, web, "--set", "noSuchKey=1")
    assert code == 2 and "noSuchKey" in err
    # The members listen in plaintext: a TLS broker client would reach nothing.
    code, err = refused(*base, web, "--set", "brokerClientTlsEnabled=true")
    assert code == 2 and "brokerClientTlsEnabled" in err and "plaintext" in err
    # With transactions on, members end them on each other with a token of their own.
    code, err = refused(
        *base, web, "--set", "authenticationEnabled=true",
        "--set", "authenticationProviders="
        "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "--set", "tokenSecretKey=data:;base64,c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMy",
    )
    assert code == 2 and "brokerClientAuthenticationPlugin" in err
    code, err = refused(*base, web, "--zookeeper", "etcd:127.0.0.1:2379")
    assert code == 2 and "--zookeeper expects zk:host:port" in err
    monkeypatch.setattr("quasar.local.zookeeper.ZOOKEEPER_JAR", tmp_path / "none.jar")
    code, err = refused(*base, web)
    assert code == 1 and "apt-get install zookeeper" in err and "make zookeeper" in err
    assert not (tmp_path / "d").exists()
