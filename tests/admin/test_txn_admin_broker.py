"""``/admin/v3/transactions``, ``quasar admin transactions`` and the transaction
metrics against a real broker process driven by quasar's client.

The central story is an operator's: a transaction is left open (its client hung), a
read_committed consumer stops receiving messages published after it, the operator
finds it with slowTransactions, looks at it, aborts it, and the consumer receives the
later messages at once.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.cli.main import main
from quasar.testing.process import BrokerProcess

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

BASE = "/admin/v3/transactions"
# Long enough that no test ever sees the coordinator time a "hanging" one out.
HANGING_TIMEOUT_MS = 3_600_000
WAIT_S = 30.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", settings={"transactionCoordinatorCount": "2"}).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    yield c
    c.close()


def admin(broker: BrokerProcess, method: str, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(broker.admin_url + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def get(broker: BrokerProcess, path: str) -> Any:
    status, body = admin(broker, "GET", path)
    assert status == 200, (path, status, body)
    return body


def scrape(broker: BrokerProcess) -> dict[str, float]:
    """``/metrics`` as ``{'name{labels}': value}``."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def series(samples: dict[str, float], name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    found = [
        v for k, v in samples.items()
        if k.split("{", 1)[0] == name
        and all(f'{lk}="{lv}"' in k for lk, lv in labels.items())
    ]
    assert len(found) == 1, (name, labels, [k for k in samples if k.startswith(name)])
    return found[0]


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll the broker until ``check`` holds (it reports an event it has no push
    channel for, such as a coordinator's timeout abort)."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cli(broker: BrokerProcess, *argv: str) -> int:
    return main(["--log-level", "WARNING", "admin", "--admin-url", broker.admin_url,
                 "transactions", *argv])


def topic_path(topic: str) -> str:
    return topic.removeprefix("persistent://")


def position(text: str) -> tuple[int, int]:
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


def txn_bits(txn: Any) -> tuple[int, int]:
    most, least = txn.id()
    return most, least


def test_hanging_transaction_found_and_aborted_releases_the_reader(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = f"persistent://public/default/orders-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "reader", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    hanging = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    producer.send(b"in-hanging-txn", txn=hanging)
    producer.send(b"after-1")
    producer.send(b"after-2")
    most, least = txn_bits(hanging)
    txn_key = f"({most},{least})"

    # The metrics show a topic held back behind an open transaction.
    def held_back() -> float:
        return series(scrape(broker), "quasar_txn_topic_held_back_entries", topic=topic)

    # The hanging entry itself and the two after it.
    wait_until(lambda: held_back() == 3, "three held-back entries")
    samples = scrape(broker)
    assert series(samples, "pulsar_txn_tb_active_total", topic=topic) == 1
    wait_until(
        lambda: series(scrape(broker), "quasar_txn_topic_oldest_open_age_seconds",
                       topic=topic) > 0,
        "a positive open age",
    )
    assert series(scrape(broker), "quasar_txn_oldest_open_age_seconds",
                  coordinator_id=str(most)) > 0

    # Found with slowTransactions (any age > 0 ms) and not with a one-hour bound.
    slow = get(broker, f"{BASE}/slowTransactions/0")
    assert txn_key in slow
    assert slow[txn_key]["status"] == "OPEN"
    assert topic in slow[txn_key]["producedPartitions"]
    assert get(broker, f"{BASE}/slowTransactions/3600000") == {}
    assert txn_key in get(broker, f"{BASE}/slowTransactions/0?coordinatorId={most}")
    other = 1 - most
    assert txn_key not in get(broker, f"{BASE}/slowTransactions/0?coordinatorId={other}")

    # The CLI's table names it, with its status and partition.
    assert cli(broker, "slow-transactions", "-t", "0s") == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["TXN", "ID", "STATUS"]
    row = next(r for r in rows if r.startswith(txn_key))
    assert "OPEN" in row and topic in row

    # Its metadata, and the topic's view of it.
    meta = get(broker, f"{BASE}/transactionMetadata/{most}/{least}")
    assert meta["txnId"] == txn_key and meta["status"] == "OPEN"
    assert meta["timeoutAt"] - meta["openTimestamp"] == HANGING_TIMEOUT_MS
    start = meta["producedPartitions"][topic]["startPosition"]
    assert re.fullmatch(r"\d+:\d+", start)
    in_buffer = get(broker, f"{BASE}/transactionInBufferStats/{topic_path(topic)}/{most}/{least}")
    assert in_buffer == {"startPosition": start, "aborted": False}
    tb = get(broker, f"{BASE}/transactionBufferStats/{topic_path(topic)}?lowWaterMarks=true")
    assert tb["ongoingTxnSize"] == 1 and tb["state"] == "Ready"
    # Readers stop right before the hanging transaction's first entry.
    assert position(tb["maxReadPosition"]) < position(start)
    assert "lowWaterMarks" in tb

    # Abort it as an operator: 204, and the reader gets the later messages.
    assert cli(broker, "abort-transaction", "-m", str(most), "-l", str(least)) == 0
    received = [consumer.receive(10_000).data() for _ in range(2)]
    assert received == [b"after-1", b"after-2"]
    samples = scrape(broker)
    assert series(samples, "quasar_txn_topic_held_back_entries", topic=topic) == 0
    assert series(samples, "pulsar_txn_tb_aborted_total", topic=topic) == 1
    assert series(samples, "pulsar_txn_tb_active_total", topic=topic) == 0

    # An ended transaction is no longer live; aborting it again is done already
    # (its outcome is preserved under the client's name).
    status, body = admin(broker, "GET", f"{BASE}/transactionMetadata/{most}/{least}")
    assert status == 404, body
    status, body = admin(broker, "POST", f"{BASE}/abortTransaction/{most}/{least}")
    assert status == 204, body
    assert get(broker, f"{BASE}/transactionInBufferStats/{topic_path(topic)}/{most}/{least}")[
        "aborted"] is True
    producer.close()
    consumer.close()


def test_abort_of_a_committed_transaction_is_refused(
    broker: BrokerProcess, client: pulsar.Client
) -> None:
    topic = f"persistent://public/default/pay-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    producer.send(b"x", txn=txn)
    txn.commit()
    most, least = txn_bits(txn)
    status, body = admin(broker, "POST", f"{BASE}/abortTransaction/{most}/{least}")
    # The preserved outcome says COMMITTED: the coordinator's InvalidTxnStatus, 409.
    assert status == 409, body
    assert "COMMITTED" in body["reason"]
    producer.close()


def test_pending_ack_views_and_commit_metrics(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = f"persistent://public/default/acks-{uuid.uuid4().hex[:8]}"
    path = topic_path(topic)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    msgs = [consumer.receive(10_000) for _ in range(3)]

    # Before any transaction acknowledged on it, the subscription has nothing pending.
    pa = get(broker, f"{BASE}/pendingAckStats/{path}/sub")
    assert pa["ongoingTxnSize"] == 0

    open_txn = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    consumer.acknowledge(msgs[0], txn=open_txn)
    most, least = txn_bits(open_txn)
    mid = msgs[0].message_id()
    pa = get(broker, f"{BASE}/pendingAckStats/{path}/sub?lowWaterMarks=true")
    assert pa["state"] == "Ready" and pa["ongoingTxnSize"] == 1
    assert pa["recoverEndTime"] >= pa["recoverStartTime"] > 0
    assert "lowWaterMarks" in pa
    position = get(
        broker,
        f"{BASE}/positionStatsInPendingAck/{path}/sub/{mid.ledger_id()}/{mid.entry_id()}",
    )
    assert position == {"state": "PendingAck"}
    other = msgs[1].message_id()
    assert get(
        broker,
        f"{BASE}/positionStatsInPendingAck/{path}/sub/{other.ledger_id()}/{other.entry_id()}",
    ) == {"state": "NotInPendingAck"}
    assert get(broker, f"{BASE}/positionStatsInPendingAck/{path}/sub/-1/-1") == {
        "state": "InvalidPosition"}
    in_pa = get(broker, f"{BASE}/transactionInPendingAckStats/{path}/sub/{most}/{least}")
    assert in_pa == {"cumulativeAckPosition": None}
    internal = get(broker, f"{BASE}/pendingAckInternalStats/{path}/sub?metadata=true")
    log_stats = internal["pendingAckLogStats"]
    assert log_stats["managedLedgerName"]
    assert log_stats["managedLedgerInternalStats"]["numberOfEntries"] >= 1
    meta = get(broker, f"{BASE}/transactionMetadata/{most}/{least}")
    assert meta["ackedPartitions"] == {topic: {"sub": {"cumulativeAckPosition": None}}}

    open_txn.commit()
    commit_txn = client.new_transaction()
    consumer.acknowledge(msgs[1], txn=commit_txn)
    commit_txn.commit()
    abort_txn = client.new_transaction()
    consumer.acknowledge(msgs[2], txn=abort_txn)
    abort_txn.abort()

    samples = scrape(broker)
    labels = {"topic": topic, "subscription": "sub"}
    assert series(samples, "pulsar_txn_tp_committed_count_total", status="succeed",
                  **labels) == 2
    assert series(samples, "pulsar_txn_tp_committed_count_total", status="failed",
                  **labels) == 0
    assert series(samples, "pulsar_txn_tp_aborted_count_total", status="succeed",
                  **labels) == 1
    assert series(samples, "pulsar_txn_tp_commit_latency_count", **labels) == 2
    assert series(samples, "pulsar_txn_tp_commit_latency", quantile="0.5", **labels) >= 0
    assert get(broker, f"{BASE}/positionStatsInPendingAck/{path}/sub/"
                       f"{mid.ledger_id()}/{mid.entry_id()}") == {"state": "MarkDelete"}

    for argv in (
        ["pending-ack-stats", "-t", topic, "-s", "sub", "-l"],
        ["transaction-in-pending-ack-stats", "-t", topic, "-s", "sub", "-m", str(most),
         "-l", str(least)],
        ["pending-ack-internal-stats", "-t", topic, "-s", "sub", "-m"],
        ["position-stats-in-pending-ack", "-t", topic, "-s", "sub", "-l",
         str(mid.ledger_id()), "-e", str(mid.entry_id())],
        ["transaction-buffer-stats", "-t", topic, "-l", "-s"],
        ["transaction-in-buffer-stats", "-t", topic, "-m", str(most), "-l", str(least)],
    ):
        assert cli(broker, *argv) == 0, argv
    assert "MarkDelete" in capsys.readouterr().out
    producer.close()
    consumer.close()


def test_coordinator_views_and_metrics_after_a_workload(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = f"persistent://public/default/work-{uuid.uuid4().hex[:8]}"
    producer = client.create_producer(topic)
    committed, aborted = 3, 2
    for i in range(committed):
        txn = client.new_transaction()
        producer.send(f"c{i}".encode(), txn=txn)
        txn.commit()
    for i in range(aborted):
        txn = client.new_transaction()
        producer.send(f"a{i}".encode(), txn=txn)
        txn.abort()
    timing_out = client.new_transaction(timeout_ms=200)
    producer.send(b"times-out", txn=timing_out)
    tc_of_timeout = str(txn_bits(timing_out)[0])

    def total(name: str) -> float:
        samples = scrape(broker)
        return sum(series(samples, name, coordinator_id=str(i)) for i in range(2))

    wait_until(lambda: total("pulsar_txn_timeout_total") == 1, "the timeout abort")
    samples = scrape(broker)
    assert total("pulsar_txn_created_total") == committed + aborted + 1
    assert total("pulsar_txn_committed_total") == committed
    assert total("pulsar_txn_aborted_total") == aborted + 1
    assert total("pulsar_txn_active_count") == 0
    assert total("pulsar_txn_append_log_total") > 0
    assert series(samples, "pulsar_txn_timeout_total", coordinator_id=tc_of_timeout) == 1
    assert series(samples, "quasar_txn_oldest_open_age_seconds", coordinator_id="0") == 0
    for suffix in ("le_10", "le_1000", "le_3000000", "le_overflow"):
        assert series(samples, f"pulsar_txn_execution_latency_{suffix}",
                      coordinator_id="0") >= 0
    assert series(samples, "pulsar_txn_tb_committed_total", topic=topic) == committed
    assert series(samples, "pulsar_txn_tb_aborted_total", topic=topic) == aborted + 1
    assert series(samples, "quasar_txn_topic_held_back_entries", topic=topic) == 0

    # An open transaction counts as active until it ends.
    open_txn = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    assert total("pulsar_txn_active_count") == 1
    open_txn.abort()
    assert total("pulsar_txn_active_count") == 0

    assert get(broker, f"{BASE}/coordinators") == [
        {"id": i, "brokerServiceUrl": broker.url, "brokerServiceUrlTls": None}
        for i in (0, 1)
    ]
    stats = get(broker, f"{BASE}/coordinatorStats?coordinatorId=0")
    assert stats["state"] == "Ready"
    assert stats["recoverEndTime"] >= stats["recoverStartTime"] > 0
    internal = get(broker, f"{BASE}/coordinatorInternalStats/1?metadata=true")
    log_stats = internal["transactionLogStats"]
    assert log_stats["managedLedgerName"].endswith("__transaction_log_1")
    assert "ledgers" in log_stats["managedLedgerInternalStats"]

    assert cli(broker, "coordinator-list") == 0
    assert broker.url in capsys.readouterr().out
    assert cli(broker, "coordinator-internal-stats", "-c", "0", "-m") == 0
    assert "__transaction_log_0" in capsys.readouterr().out
    producer.close()


def test_bad_requests_get_pulsar_statuses(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = f"persistent://public/default/bad-{uuid.uuid4().hex[:8]}"
    client.create_producer(topic).close()
    path = topic_path(topic)
    cases = [
        ("GET", "/coordinatorInternalStats/7", 404),
        ("GET", "/coordinatorInternalStats/x", 400),
        ("GET", "/coordinatorStats?coordinatorId=7", 404),
        ("GET", "/transactionMetadata/0/999999", 404),
        ("GET", "/transactionMetadata/9/1", 404),
        ("GET", "/transactionMetadata/0/abc", 400),
        ("GET", "/transactionMetadata/-1/1", 400),
        ("GET", "/transactionMetadata/0/99999999999999999999999", 400),
        ("GET", "/slowTransactions/soon", 400),
        ("GET", "/slowTransactions/0?coordinatorId=5", 404),
        ("GET", "/slowTransactions/0?coordinatorId=x", 400),
        ("GET", "/clientTransactions/etl?coordinatorId=5", 404),
        ("GET", "/clientTransactions/etl?coordinatorId=x", 400),
        ("POST", "/abortTransaction/0/999999", 404),
        ("POST", "/abortTransaction/0/x", 400),
        ("GET", "/transactionBufferStats/public/default/no-such-topic", 404),
        ("GET", "/transactionBufferStats/public/nope/t", 404),
        ("GET", "/transactionBufferStats/nobody/default/t", 404),
        ("GET", f"/pendingAckStats/{path}/no-such-sub", 404),
        ("GET", f"/pendingAckInternalStats/{path}/no-such-sub", 404),
        ("GET", f"/transactionInPendingAckStats/{path}/no-such-sub/0/1", 404),
        ("GET", f"/positionStatsInPendingAck/{path}/no-such-sub/1/1", 404),
        ("GET", f"/positionStatsInPendingAck/{path}/no-such-sub/1/x", 400),
        ("GET", f"/transactionInBufferStats/{path}/0/x", 400),
    ]
    for method, suffix, expected in cases:
        status, body = admin(broker, method, BASE + suffix)
        assert status == expected, (method, suffix, status, body)
        assert isinstance(body, dict) and body.get("reason"), (suffix, body)

    # One coordinator's part of a client's transactions (what a cluster member asks
    # each coordinator's owner for).
    status, body = admin(broker, "GET", BASE + "/clientTransactions/etl?coordinatorId=1")
    assert status == 200 and body["unavailableCoordinators"] == [], body

    assert cli(broker, "transaction-metadata", "-m", "0", "-l", "999999") == 1
    assert "404" in capsys.readouterr().err
    assert cli(broker, "slow-transactions", "-t", "soon") != 0
    capsys.readouterr()


def test_every_route_answers_503_when_transactions_are_disabled(tmp_path: Path) -> None:
    with BrokerProcess(
        tmp_path / "data", settings={"transactionCoordinatorEnabled": "false"}
    ) as broker:
        for method, suffix in [
            ("GET", "/coordinators"),
            ("GET", "/coordinatorStats"),
            ("GET", "/coordinatorInternalStats/0"),
            ("GET", "/transactionMetadata/0/1"),
            ("GET", "/slowTransactions/0"),
            ("POST", "/abortTransaction/0/1"),
            ("GET", "/transactionBufferStats/public/default/t"),
            ("GET", "/transactionInBufferStats/public/default/t/0/1"),
            ("GET", "/pendingAckStats/public/default/t/s"),
            ("GET", "/transactionInPendingAckStats/public/default/t/s/0/1"),
            ("GET", "/pendingAckInternalStats/public/default/t/s"),
            ("GET", "/positionStatsInPendingAck/public/default/t/s/1/1"),
            # Checked before the namespace is looked up, as in Pulsar.
            ("GET", "/transactionBufferStats/public/no-such-namespace/t"),
        ]:
            status, body = admin(broker, method, BASE + suffix)
            assert status == 503, (suffix, status, body)
            assert "not enabled" in body["reason"]
