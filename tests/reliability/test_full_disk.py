"""A real broker whose data directory is on a small tmpfs that fills up.

Run with the official client and with quasar's. While the disk is full a producer's
sends fail retryably (it reconnects
and resends, its messages stay pending), consumers keep reading what is stored, and
the broker keeps running. Once the filler is deleted the same producer's messages are
stored, each exactly once (deduplication on), without a restart; after ``kill -9`` and
a restart every acknowledged message is still there, once.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.testing.fault_proxy import wait_until
from quasar.testing.process import BrokerProcess

pulsar = pytest.importorskip("pulsar")

TMPFS_SIZE = "40m"


def _cannot_mount(reason: str) -> None:
    # CI machines allow mounting: there, a test that cannot run is a failure.
    if os.environ.get("CI") == "true":
        pytest.fail(f"full-disk test cannot run on CI: {reason}")
    pytest.skip(f"full-disk test needs to mount a tmpfs: {reason}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        _cannot_mount("not running as root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        _cannot_mount(f"mount failed: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(path: Path) -> None:
    """Write ``path`` until the file system refuses another byte."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9, 1):
            block = b"\0" * size
            try:
                while True:
                    f.write(block)
            except OSError:
                continue


def _metric(proc: BrokerProcess, name: str, store: str) -> float:
    with urllib.request.urlopen(proc.admin_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    match = re.search(rf'^{name}\{{store="{store}"\}} (\S+)$', text, re.M)
    assert match is not None, f"{name} missing from /metrics"
    return float(match.group(1))


def _client(mod: Any, url: str) -> Any:
    if mod is pulsar:
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.ERROR)
        return mod.Client(url, operation_timeout_seconds=10, logger=logger)
    return mod.Client(url, operation_timeout_seconds=10)


def _receive_all(consumer: Any, want: int, timeout_s: float) -> list[bytes]:
    got: list[bytes] = []
    deadline_ms = int(timeout_s * 1000)
    while len(got) < want:
        msg = consumer.receive(timeout_millis=deadline_ms)
        got.append(msg.data())
        consumer.acknowledge(msg)
    return got


@pytest.mark.parametrize("impl", ["pulsar", "quasar"])
def test_full_disk_fails_publishes_retryably_and_recovers(
    small_disk: Path, tmp_path: Path, impl: str
) -> None:
    mod: Any = pulsar if impl == "pulsar" else quasar.client
    proc = BrokerProcess(
        small_disk / "data",
        log_path=tmp_path / "broker.log",
        settings={"brokerDeduplicationEnabled": "true"},
    ).start()
    filler = small_disk / "filler"
    topic = f"persistent://public/default/full-{uuid.uuid4().hex[:8]}"
    # Two clients: the official client drops its whole connection on a SEND_ERROR, and
    # a consumer on that connection would get its unacknowledged messages again.
    client = _client(mod, proc.url)
    consuming = _client(mod, proc.url)
    clients = [client, consuming]
    try:
        consumer = consuming.subscribe(
            topic, "sub", consumer_type=mod.ConsumerType.Shared
        )
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=0, producer_name="p-full"
        )
        before = [b"before-%d" % i for i in range(20)]
        for payload in before:
            producer.send(payload)

        _fill(filler)
        acked: list[bytes] = []
        failed: list[str] = []
        lock = threading.Lock()

        def on_sent(payload: bytes) -> Any:
            def callback(result: Any, _msg_id: Any) -> None:
                with lock:
                    if result == mod.Result.Ok:
                        acked.append(payload)
                    else:
                        failed.append(str(result))

            return callback

        # Larger than a page: a small record may still fit in the last page of a
        # ledger file that tmpfs allocated already.
        during = [b"during-%d-" % i + b"x" * 8192 for i in range(10)]
        for payload in during:
            producer.send_async(payload, on_sent(payload))

        # The broker refuses the writes, retryably: the producer keeps them pending.
        wait_until(
            lambda: _metric(proc, "quasar_storage_disk_full_total", "ledgers") > 0,
            10,
            "the broker saw the full disk",
        )
        assert _metric(proc, "quasar_storage_writable", "ledgers") == 0
        # Consumers still read everything stored before the disk filled up.
        assert sorted(_receive_all(consumer, len(before), 10)) == sorted(before)
        with lock:
            assert acked == [] and failed == []
        assert proc.proc is not None and proc.proc.poll() is None, proc.read_log()

        filler.unlink()
        # Same producer, no restart: its pending messages are stored, in order.
        wait_until(lambda: len(acked) == len(during), 30, "pending sends stored")
        assert acked == during and failed == []
        assert _metric(proc, "quasar_storage_writable", "ledgers") == 1
        producer.send(b"after")
        got = _receive_all(consumer, len(during) + 1, 10)
        assert sorted(got) == sorted(during + [b"after"])  # each exactly once

        proc.kill()
        proc.start()
        clients.append(_client(mod, proc.url))
        reader = clients[-1].create_reader(topic, mod.MessageId.earliest)
        stored = []
        while reader.has_message_available():
            stored.append(reader.read_next(timeout_millis=10_000).data())
        assert stored == before + during + [b"after"]
    finally:
        for c in clients:
            c.close()
        proc.kill()
        if filler.exists():
            filler.unlink()
