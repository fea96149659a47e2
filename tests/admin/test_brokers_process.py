"""``/admin/v2/brokers`` and ``quasar admin brokers`` against real broker processes:
the health check failing while storage cannot write and recovering after, readiness
during start-up, and dynamic configuration changing the running broker's behaviour
and surviving a restart.

Faults and start-up delays are injected from outside the product code, as in
``tests/crash/test_storage_faults.py``: a launcher patches the disk seam or the
start-up sequence, then runs the real CLI. A flag file switches each on and off, so
the test decides when the fault begins and ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.cli.main import main
from quasar.local.probe import pulsar_handshake_ok
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.testing.process import BrokerProcess, free_port
from quasar.testing.raw import RawCoordinator, close_all
from quasar.testing.secured import token_settings
from quasar.transaction.batched_log import is_batched_entry
from quasar.transaction.coordinator import decode_entry
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

BASE = "/admin/v2/brokers"
SECRET = create_secret_key()
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"

# While the flag file exists, creating a ledger file fails as on a full disk.
FULL_DISK_LAUNCHER = """
import errno, os, sys
from quasar.storage.file import disk
flag = sys.argv[1]
real_open = disk.OsDisk.open
def open_unless_full(self, path, flags, mode=0o644):
    if flags & os.O_CREAT and path.endswith(".log") and os.path.exists(flag):
        raise OSError(errno.ENOSPC, "No space left on device", path)
    return real_open(self, path, flags, mode)
disk.OsDisk.open = open_unless_full
from quasar.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""

# The admin listener starts, then start-up waits for the gate file before the binary
# listeners open: the window in which the broker answers HTTP but is not ready.
GATED_START_LAUNCHER = """
import asyncio, os, sys
from quasar.server import standalone
gate = sys.argv[1]
real_start_admin = standalone.Standalone._start_admin
async def start_admin_then_wait(self, bind):
    await real_start_admin(self, bind)
    while not os.path.exists(gate):
        await asyncio.sleep(0.02)
standalone.Standalone._start_admin = start_admin_then_wait
from quasar.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def http(
    url: str, method: str = "GET", role: str | None = None, timeout: float = 70.0
) -> tuple[int, str]:
    """One admin request; the status and the body (errors included)."""
    request = urllib.request.Request(url, method=method)
    if role is not None:
        request.add_header("Authorization", f"Bearer {create_token(role, SECRET)}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def reason(body: str) -> str:
    return str(json.loads(body)["reason"])


def launch(launcher: str, flag: Path, tmp: Path, port: int, http_port: int) -> BrokerProcess:
    """A broker process run through ``launcher`` (not yet waited for)."""
    log_path = tmp / "broker.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", launcher, str(flag), "standalone",
             "--data-dir", str(tmp / "data"), "--port", str(port),
             "--http-port", str(http_port), "--advertised-address", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT,
        )
    broker = BrokerProcess(tmp / "data", port, http_port, log_path=log_path)
    broker.proc = proc
    return broker


def test_health_fails_while_storage_cannot_write_and_recovers(tmp_path: Path) -> None:
    flag = tmp_path / "disk-full"
    broker = launch(FULL_DISK_LAUNCHER, flag, tmp_path, free_port(), free_port())
    try:
        broker.wait_ready(60)
        health = broker.admin_url + f"{BASE}/health"
        assert http(health) == (200, "ok")
        flag.touch()
        status, body = http(health)
        assert status == 500, body
        assert "No space left on device" in reason(body)
        assert "persistent://pulsar/standalone/" in reason(body)
        status, body = http(health + "?topicVersion=V2")
        assert status == 500 and "No space left on device" in reason(body)
        # A failed check is reported, not fatal: the broker still serves.
        assert broker.proc is not None and broker.proc.poll() is None
        assert http(broker.admin_url + f"{BASE}/ready") == (200, "ok")
        flag.unlink()
        assert http(health) == (200, "ok")
        assert http(health + "?topicVersion=V2") == (200, "ok")
        # The heartbeat topic is in no listing.
        assert http(broker.admin_url + "/admin/v2/namespaces/pulsar") == (
            200, '["pulsar/system"]'
        )
        # Nor can a client produce to it.
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.CRITICAL)
        client = pulsar.Client(broker.url, operation_timeout_seconds=5, logger=logger)
        try:
            heartbeat = f"persistent://pulsar/127.0.0.1:{broker.http_port}/healthcheck"
            with pytest.raises(pulsar.PulsarException):
                client.create_producer(heartbeat)
        finally:
            client.close()
    finally:
        broker.stop()


def test_ready_only_once_the_binary_port_serves(tmp_path: Path) -> None:
    gate = tmp_path / "open-binary-port"
    port, http_port = free_port(), free_port()
    broker = launch(GATED_START_LAUNCHER, gate, tmp_path, port, http_port)
    ready = broker.admin_url + f"{BASE}/ready"
    try:
        # Poll from the first moment the admin port answers (bounded wait).
        deadline = time.monotonic() + 60
        while True:
            assert broker.proc is not None and broker.proc.poll() is None, broker.read_log()
            try:
                status, body = http(ready, timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, broker.read_log()
                time.sleep(0.05)  # polling interval of a bounded readiness loop
        assert status == 500, body
        assert "not ready" in reason(body)
        assert not pulsar_handshake_ok(port, 1.0)
        assert http(broker.admin_url + f"{BASE}/version")[0] == 200
        gate.touch()
        broker.wait_ready(60)
        assert http(ready) == (200, "ok")
    finally:
        broker.stop()


# -- dynamic configuration, with authentication and authorization on ------------------


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BrokerProcess]:
    settings = token_settings(SECRET, super_users="root")
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    yield broker
    broker.stop()


def official(broker: BrokerProcess, role: str) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.CRITICAL)
    return pulsar.Client(
        broker.url,
        authentication=pulsar.AuthenticationToken(create_token(role, SECRET)),
        operation_timeout_seconds=5,
        logger=logger,
    )


def auto_creation_allowed(broker: BrokerProcess) -> bool:
    client = official(broker, "root")
    try:
        client.create_producer(f"persistent://public/default/auto-{uuid.uuid4().hex[:8]}")
        return True
    except pulsar.PulsarException:
        return False
    finally:
        client.close()


def test_dynamic_configuration_changes_the_running_broker_and_survives_restart(
    secured: BrokerProcess,
) -> None:
    url = secured.admin_url
    tenants = url + "/admin/v2/tenants"
    # A role that is not a super-user may neither list tenants nor change settings.
    assert http(tenants, role="ops")[0] == 401
    status, body = http(url + f"{BASE}/configuration/superUserRoles/ops", "POST", "ops")
    assert status == 401 and "super-user" in reason(body)
    for path in (f"{BASE}/health", f"{BASE}/configuration", f"{BASE}/configuration/runtime"):
        assert http(url + path, role="ops")[0] == 401
    # ready and version need authentication only.
    assert http(url + f"{BASE}/ready", role="ops") == (200, "ok")
    assert http(url + f"{BASE}/version", role="ops")[0] == 200
    assert http(url + f"{BASE}/ready")[0] == 401

    assert http(url + f"{BASE}/configuration/superUserRoles/root,ops", "POST", "root")[0] == 204
    assert http(tenants, role="ops")[0] == 200
    assert http(url + f"{BASE}/health", role="ops") == (200, "ok")

    stat = url + "/admin/v3/transactions/txnTcBatchLogStat"
    assert json.loads(http(stat, role="root")[1])["txnTcBatchLogEnabled"] is False
    path = f"{BASE}/configuration/transactionLogBatchedWriteEnabled/true"
    assert http(url + path, "POST", "root")[0] == 204
    answer = json.loads(http(stat, role="root")[1])
    assert answer["txnTcBatchLogEnabled"] is True
    assert all(all(entry.values()) for entry in answer["coodinatorArray"])

    assert auto_creation_allowed(secured)
    assert http(url + f"{BASE}/configuration/allowAutoTopicCreation/false", "POST", "root")[0] == 204
    assert not auto_creation_allowed(secured)

    for bad, expected in (
        ("maxUnackedMessagesPerConsumer/5", "non-dynamic"),
        ("clusterName/other", "non-dynamic"),
        ("allowAutoTopicCreationType/sometimes", "Invalid dynamic-config value"),
        ("maxNumPartitionsPerPartitionedTopic/-1", "Invalid dynamic-config value"),
    ):
        status, body = http(url + f"{BASE}/configuration/{bad}", "POST", "root")
        assert status == 412 and expected in reason(body), (bad, body)

    values = json.loads(http(url + f"{BASE}/configuration/values", role="root")[1])
    assert values == {
        "allowAutoTopicCreation": "false",
        "superUserRoles": "root,ops",
        "transactionLogBatchedWriteEnabled": "true",
    }
    runtime = json.loads(http(url + f"{BASE}/configuration/runtime", role="root")[1])
    assert runtime["allowAutoTopicCreation"] == "false"
    assert runtime["tokenSecretKey"] == "********"

    secured.stop()
    secured.start()
    assert json.loads(http(url + f"{BASE}/configuration/values", role="ops")[1]) == values
    assert http(tenants, role="ops")[0] == 200
    assert json.loads(http(stat, role="root")[1])["txnTcBatchLogEnabled"] is True
    assert not auto_creation_allowed(secured)

    assert http(url + f"{BASE}/configuration/allowAutoTopicCreation", "DELETE", "ops")[0] == 204
    assert auto_creation_allowed(secured)
    assert http(url + f"{BASE}/configuration/superUserRoles", "DELETE", "root")[0] == 204
    assert http(tenants, role="ops")[0] == 401
    assert "superUserRoles" not in json.loads(
        http(url + f"{BASE}/configuration/values", role="root")[1]
    )


def cli(broker: BrokerProcess, role: str, *argv: str) -> int:
    auth = ("--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{create_token(role, SECRET)}")
    return main(["--log-level", "WARNING", "admin", "--admin-url", broker.admin_url, *auth, *argv])


async def test_cli_brokers_commands(
    secured: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    async def run(role: str, *argv: str) -> int:
        return await asyncio.to_thread(cli, secured, role, *argv)

    assert await run("root", "brokers", "healthcheck") == 0
    assert capsys.readouterr().out == "ok\n"
    assert await run("root", "brokers", "healthcheck", "--topic-version", "V2") == 0
    assert capsys.readouterr().out == "ok\n"
    assert await run("root", "brokers", "ready") == 0
    assert capsys.readouterr().out == "ok\n"
    assert await run("root", "brokers", "version") == 0
    assert capsys.readouterr().out.strip()
    assert await run("root", "brokers", "list-dynamic-config") == 0
    assert "superUserRoles" in capsys.readouterr().out.split()
    assert await run(
        "root", "brokers", "update-dynamic-config", "--config", "superUserRoles",
        "--value", "root,ops",
    ) == 0
    assert await run("root", "-o", "json", "brokers", "get-all-dynamic-config") == 0
    assert json.loads(capsys.readouterr().out) == {"superUserRoles": "root,ops"}
    assert await run("ops", "brokers", "get-runtime-config") == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["superUserRoles", "root,ops"] in rows
    assert await run(
        "ops", "brokers", "update-dynamic-config", "--config", "maxProducersPerTopic",
        "--value", "3",
    ) == 1
    assert "412" in capsys.readouterr().err
    assert await run("root", "brokers", "delete-dynamic-config", "--config", "superUserRoles") == 0
    assert await run("ops", "brokers", "list-dynamic-config") == 1
    assert "401" in capsys.readouterr().err


def coordinator_log(data_dir: Path) -> list[tuple[bool, list[int]]]:
    """(batched?, txn sequences) of every entry of coordinator 0's log, read offline."""

    async def read() -> list[tuple[bool, list[int]]]:
        store = SqliteMetadataStore(str(data_dir / "metadata.db"))
        factory = FileManagedLedgerFactory(str(data_dir / "ledgers"), store)
        try:
            ml = await factory.open(transaction_log_ledger_name(0))
            out = []
            if ml.number_of_entries:
                for e in await ml.read_entries(ml.first_position, 10_000):
                    out.append((is_batched_entry(e.data),
                                [r.txnid_least_bits for r in decode_entry(e.data)]))
            await ml.close()
            return out
        finally:
            await factory.close()
            store.close()

    return asyncio.run(read())


def new_transactions(broker: BrokerProcess, count: int) -> list[int]:
    tc = RawCoordinator(broker.port)
    try:
        assert not tc.connect(0).HasField("error")
        sent = [tc.send_new_txn(ttl_ms=3_600_000) for _ in range(count)]
        return [tc.wait(r).txnid_least_bits for r in sent]
    finally:
        close_all()


def test_batched_log_switch_shows_in_the_log_entries_and_survives_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, settings={"transactionCoordinatorCount": "1"}).start()
    switch = broker.admin_url + f"{BASE}/configuration/transactionLogBatchedWriteEnabled"
    try:
        assert new_transactions(broker, 2) == [0, 1]
        assert http(switch + "/true", "POST")[0] == 204
        assert new_transactions(broker, 2) == [2, 3]
        broker.stop()
        records = coordinator_log(data)
        assert records[:2] == [(False, [0]), (False, [1])]
        assert all(batched for batched, _ in records[2:]) and records[2:]
        broker.start()
        stat = json.loads(http(broker.admin_url + "/admin/v3/transactions/txnTcBatchLogStat")[1])
        assert stat["txnTcBatchLogEnabled"] is True
        assert new_transactions(broker, 1) == [4]
        assert http(switch, "DELETE")[0] == 204
        assert new_transactions(broker, 1) == [5]
        broker.stop()
        records = coordinator_log(data)
        assert [r for r in records if 4 in r[1]] == [(True, [4])]
        assert [r for r in records if 5 in r[1]] == [(False, [5])]
    finally:
        broker.stop()
