"""A record the broker cannot read in one of its own logs fails only its coordinator or
subscription, with a clear error, a metric and an admin-visible state, and the
operator's ``skipCorruptRecord`` sets it aside for good.

Clients cannot write to system topics, so the corruption is written the way a disk
fault or an older version would leave it: into the storage of a stopped broker,
through the storage API over the same data directory.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.storage.api import Position
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator
from quasar.transaction import TxnID
from quasar.transaction.coordinator_registry import transaction_log_ledger_name
from quasar.transaction.pending_ack import (
    AckedPosition,
    AckType,
    PendingAckOp,
    PendingAckRecord,
    pending_ack_ledger_name,
)
from quasar.transaction.pending_ack.records import encode_record

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
# A batched-log entry of a version no broker writes: both logs refuse it.
GARBAGE = b"\x0e\x01\x00\x07not a record"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path / "data", settings={"transactionCoordinatorCount": "2"}
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def append_garbage(data_dir: Path, ledger_name: str, data: bytes = GARBAGE) -> str:
    """Append ``data`` to a stopped broker's managed ledger; its ``ledger:entry``."""

    async def run() -> str:
        store = SqliteMetadataStore(str(data_dir / "metadata.db"))
        factory = FileManagedLedgerFactory(str(data_dir / "ledgers"), store)
        try:
            ml = await factory.open(ledger_name)
            position = await ml.add_entry(data)
            await ml.close()
            return str(position)
        finally:
            await factory.close()
            store.close()

    return asyncio.run(run())


def admin(broker: BrokerProcess, method: str, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(broker.admin_url + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def corrupt_metric(broker: BrokerProcess, log: str) -> float:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("quasar_corrupt_records_total{") and f'log="{log}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no quasar_corrupt_records_total for {log}:\n{text}")


def round_trip(client: pulsar.Client, topic: str, sub: str) -> None:
    """Produce one message and consume it on ``sub``."""
    consumer = client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    payload = uuid.uuid4().bytes
    producer.send(payload)
    while True:
        msg = consumer.receive(10_000)
        consumer.acknowledge(msg)
        if msg.data() == payload:
            break
    producer.close()
    consumer.close()


def subscribe_error(broker: BrokerProcess, topic: str, sub: str) -> pb.CommandError:
    raw = Raw(broker.port)
    raw.connect()
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, sub, pb.CommandSubscribe.Shared
    s.consumer_id, s.request_id = 1, 1
    return raw.request(cmd, T.ERROR).error


def test_corrupt_pending_ack_log_fails_only_its_subscription(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/orders-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    try:
        consumer = client.subscribe(topic, "txn-sub")
        producer = client.create_producer(topic)
        producer.send(b"one")
        txn = client.new_transaction()
        consumer.acknowledge(consumer.receive(10_000), txn=txn)
        txn.commit()
        round_trip(client, topic, "plain")
    finally:
        client.close()
    broker.stop()
    position = append_garbage(broker.data_dir, pending_ack_ledger_name(topic, "txn-sub"))
    broker.start()

    # That subscription refuses consumers with a clear, retryable error...
    error = subscribe_error(broker, topic, "txn-sub")
    assert error.error == ServerError.ServiceNotReady
    assert "unreadable record" in error.message and position in error.message
    # ...the topic, its producers and its other subscriptions work...
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        round_trip(client, topic, "plain")
        round_trip(client, topic, "new-sub")
    finally:
        client.close()
    # ...and the operator sees it, in the topic's stats and in the metric.
    status, stats = admin(broker, "GET", "/admin/v2/persistent/" + topic[len("persistent://"):]
                          + "/stats")
    assert status == 200
    sub_stats = stats["subscriptions"]["txn-sub"]
    assert sub_stats["pendingAckState"] == "Error"
    assert sub_stats["pendingAckError"]["position"] == position
    assert corrupt_metric(broker, "pending_ack_log") == 1

    base = "/admin/v3/transactions/pendingAck/" + topic[len("persistent://"):] + "/txn-sub"
    # Only the unreadable entry is accepted.
    status, _ = admin(broker, "POST", base + "/skipCorruptRecord?position=1:0")
    assert status in (404, 412)
    status, answer = admin(broker, "POST", f"{base}/skipCorruptRecord?position={position}")
    assert status == 200, answer
    assert Path(answer["savedTo"]).read_bytes() == GARBAGE
    assert answer["state"]["pendingAckState"] == "Ready"

    for restart in (False, True):
        if restart:
            broker.restart(hard=False)
        client = pulsar.Client(broker.url, operation_timeout_seconds=10)
        try:
            round_trip(client, topic, "txn-sub")
        finally:
            client.close()


def test_pending_ack_record_claiming_a_huge_batch_is_corrupt(broker: BrokerProcess) -> None:
    """A record a broker of these bounds never writes (an old broker's, or a damaged
    one) claiming 2^31-1 batch members fails its subscription as unreadable, instead
    of allocating a 256 MiB mask on replay."""
    topic = f"persistent://public/default/huge-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    try:
        consumer = client.subscribe(topic, "txn-sub")
        client.create_producer(topic).send(b"one")
        txn = client.new_transaction()
        consumer.acknowledge(consumer.receive(10_000), txn=txn)
        txn.commit()
    finally:
        client.close()
    broker.stop()
    record = PendingAckRecord(
        PendingAckOp.ACK, AckType.INDIVIDUAL, TxnID(0, 999),
        (AckedPosition(Position(1, 0), (-2,), 2**31 - 1),),
    )
    position = append_garbage(
        broker.data_dir, pending_ack_ledger_name(topic, "txn-sub"), encode_record(record)
    )
    broker.start()
    error = subscribe_error(broker, topic, "txn-sub")
    assert error.error == ServerError.ServiceNotReady
    assert "2147483647" in error.message and position in error.message
    assert broker.rss_bytes() < 400 * 2**20
    assert corrupt_metric(broker, "pending_ack_log") == 1
    base = "/admin/v3/transactions/pendingAck/" + topic[len("persistent://"):] + "/txn-sub"
    status, answer = admin(broker, "POST", f"{base}/skipCorruptRecord?position={position}")
    assert status == 200, answer
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        round_trip(client, topic, "txn-sub")
    finally:
        client.close()


def test_corrupt_coordinator_log_fails_only_that_coordinator(broker: BrokerProcess) -> None:
    broker.stop()
    position = append_garbage(broker.data_dir, transaction_log_ledger_name(0))
    broker.start()

    status, stats = admin(broker, "GET", "/admin/v3/transactions/coordinatorStats")
    assert status == 200
    assert stats["1"]["state"] == "Ready"
    assert stats["0"]["state"] == "Error"
    assert stats["0"]["lastError"]["position"] == position
    assert "version 7" in stats["0"]["lastError"]["message"]
    assert corrupt_metric(broker, "transaction_log") == 1
    # Coordinator 0 answers with the retryable error; coordinator 1 serves.
    tc = RawCoordinator(broker.port)
    answer = tc.connect(0)
    assert answer.error == ServerError.TransactionCoordinatorNotFound
    assert position in answer.message
    answer = tc.new_txn(tc_id=0)
    assert answer.error == ServerError.TransactionCoordinatorNotFound
    assert not tc.connect(1).HasField("error")
    answer = tc.new_txn(tc_id=1)
    assert not answer.HasField("error") and answer.txnid_most_bits == 1
    # Topics are not touched by a coordinator's log.
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        round_trip(client, "persistent://public/default/plain", "s")
    finally:
        client.close()

    status, answer = admin(
        broker, "POST",
        f"/admin/v3/transactions/coordinators/0/skipCorruptRecord?position={position}",
    )
    assert status == 200, answer
    assert answer["state"]["state"] == "Ready"
    # Transaction ids continue past every id the set-aside entry could have held.
    assert answer["state"]["leastSigBits"] + 1 >= 1 << 16

    for restart in (False, True):
        if restart:
            broker.restart(hard=False)
        status, stats = admin(broker, "GET", "/admin/v3/transactions/coordinatorStats")
        assert {stats["0"]["state"], stats["1"]["state"]} == {"Ready"}
        client = pulsar.Client(broker.url, operation_timeout_seconds=10,
                               enable_transaction=True)
        try:
            topic = f"persistent://public/default/txn-{uuid.uuid4().hex[:8]}"
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic)
            for _ in range(2):  # new transactions go to both coordinators in turn
                txn = client.new_transaction()
                producer.send(b"in-txn", txn=txn)
                txn.commit()
                assert consumer.receive(10_000).data() == b"in-txn"
        finally:
            client.close()
