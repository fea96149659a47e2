"""Storage faults in a real broker process: a failed fsync stops the broker without a
retry, and a corrupt record in the middle of a ledger is reported, never skipped."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pulsar
import pytest

from quasar.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.crash

# Runs the real CLI with the disk seam's fsync failing from the Nth call on: the fault
# is injected from outside the product code (there is no test hook in the broker).
FAILING_FSYNC_LAUNCHER = """
import errno, sys
from quasar.storage.file import disk
calls = {"n": 0}
real_sync = disk.OsDisk.sync
def failing_sync(self, fd):
    calls["n"] += 1
    if calls["n"] > int(sys.argv[1]):
        raise OSError(errno.EIO, "injected fsync failure")
    return real_sync(self, fd)
disk.OsDisk.sync = failing_sync
from quasar.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def _client(url: str) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.CRITICAL)
    return pulsar.Client(url, operation_timeout_seconds=5, logger=logger)


def test_failed_fsync_stops_the_broker(tmp_path: Path) -> None:
    port, http = free_port(), free_port()
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", FAILING_FSYNC_LAUNCHER, "3", "standalone",
             "--data-dir", str(tmp_path / "data"), "--port", str(port),
             "--http-port", str(http), "--advertised-address", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        broker = BrokerProcess(tmp_path / "data", port, http)
        broker.proc = proc
        broker.log_path = log_path
        broker.wait_ready(60)
        client = _client(broker.url)
        producer = client.create_producer("fsync-fault", send_timeout_millis=3000)
        with pytest.raises(Exception):  # noqa: B017 - any failure: the broker is gone
            for i in range(100):
                producer.send(f"m{i}".encode())
        code = proc.wait(30)
        assert code == 70, f"expected exit 70 after a failed fsync, got {code}"
        text = log_path.read_text()
        assert "fatal storage error" in text and "injected fsync failure" in text
        client.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_corrupt_middle_record_is_reported(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    client = _client(broker.url)
    producer = client.create_producer("corrupt-me", batching_enabled=False)
    for i in range(20):
        producer.send(f"message-{i:04d}".encode() * 8)
    client.close()
    assert broker.stop() == 0
    ledger_files = sorted((tmp_path / "data" / "ledgers").rglob("*.log"),
                          key=lambda p: p.stat().st_size)
    target = ledger_files[-1]
    raw = bytearray(target.read_bytes())
    middle = len(raw) // 2
    raw[middle] ^= 0xFF  # one flipped bit pattern inside a record in the middle
    target.write_bytes(bytes(raw))
    broker.start()
    try:
        client = _client(broker.url)
        consumer = client.subscribe(
            "corrupt-me", "s", initial_position=pulsar.InitialPosition.Earliest
        )
        # Delivery stops at the corrupt record: nothing after it arrives, skipped or not.
        got = []
        with pytest.raises(pulsar.Timeout):
            while True:
                got.append(consumer.receive(2000).data())
        assert len(got) < 20
        assert got == [f"message-{i:04d}".encode() * 8 for i in range(len(got))]
        client.close()
        log = broker.read_log()
        assert "CorruptRecordError" in log or "checksum" in log.lower(), log[-3000:]
        # The data file is left as it was: nothing was truncated or skipped.
        assert target.read_bytes() == bytes(raw)
        # Other topics are still served.
        client = _client(broker.url)
        p2 = client.create_producer("still-fine")
        p2.send(b"ok")
        client.close()
    finally:
        broker.stop()
