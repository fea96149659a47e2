"""Idempotent END_TXN (PIP-255) against a real broker process, in raw frames: repeated
and crossed ends with ``client_name``, across a kill -9 restart, and the admin view
``GET /admin/v3/transactions/clientTransactions/{clientName}``."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawCoordinator, close_all

COMMIT, ABORT = pb.COMMIT, pb.ABORT
RECEIVE_MS = 10_000

pytestmark = pytest.mark.usefixtures("close_raw")


class Tc:
    """Coordinator commands in raw frames, ``client_name`` set as the test says;
    connecting and NEW_TXN must succeed."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.rc = RawCoordinator(broker.port)

    def connect(self, tc_id: int) -> None:
        resp = self.rc.connect(tc_id)
        assert not resp.HasField("error"), resp

    def new_txn(self, client_name: str | None, tc_id: int = 0, ttl_ms: int = 60_000) -> tuple[int, int]:
        self.connect(tc_id)
        resp = self.rc.new_txn(tc_id, ttl_ms, client_name)
        assert not resp.HasField("error"), resp
        return resp.txnid_most_bits, resp.txnid_least_bits

    def end(
        self, txn: tuple[int, int], action: int, client_name: str | None
    ) -> pb.CommandEndTxnResponse:
        return self.rc.end(*txn, action, client_name)


def ok(resp: pb.CommandEndTxnResponse) -> None:
    assert not resp.HasField("error"), (resp.error, resp.message)


def refused(resp: pb.CommandEndTxnResponse, error: int, status: str | None = None) -> None:
    assert resp.HasField("error") and resp.error == error, (resp.error, resp.message)
    if status is not None:
        assert f"it is in {status} status" in resp.message, resp.message


def client_transactions(broker: BrokerProcess, name: str) -> dict[str, Any]:
    url = (broker.admin_url + "/admin/v3/transactions/clientTransactions/"
           + urllib.parse.quote(name, safe=""))
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        return json.loads(r.read())  # type: ignore[no-any-return]


def test_repeated_and_crossed_ends_across_a_kill_9_restart(broker: BrokerProcess) -> None:
    name = f"raw-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/idem-{uuid.uuid4().hex[:8]}"
    # Real participants: a transaction of quasar's client (its NEW_TXN carries the
    # name) writes to the topic; the ends below are raw.
    client = qc.Client(broker.url, enable_transaction=True, client_name=name,
                       operation_timeout_seconds=15)
    try:
        producer = client.create_producer(topic)
        committed = client.new_transaction()
        producer.send(b"committed", txn=committed)
        aborted = client.new_transaction()
        producer.send(b"aborted", txn=aborted)
        c_id, a_id = tuple(committed.id()), tuple(aborted.id())
    finally:
        client.close()
    tc = Tc(broker)
    tc.connect(c_id[0])
    tc.connect(a_id[0])
    ok(tc.end(c_id, COMMIT, name))
    ok(tc.end(a_id, ABORT, name))
    open_one = tc.new_txn(name)
    for _ in range(2):
        ok(tc.end(c_id, COMMIT, name))
        ok(tc.end(a_id, ABORT, name))
        refused(tc.end(c_id, ABORT, name), ServerError.InvalidTxnStatus, "COMMITTED")
        refused(tc.end(a_id, COMMIT, name), ServerError.InvalidTxnStatus, "ABORTED")
        # Without the name, or with another one: unknown, as upstream answers.
        refused(tc.end(c_id, COMMIT, None), ServerError.TransactionNotFound)
        refused(tc.end(c_id, COMMIT, name + "-other"), ServerError.TransactionNotFound)
        broker.restart(hard=True)  # kill -9, then the same data
        close_all()
        tc = Tc(broker)
        tc.connect(c_id[0])
        tc.connect(a_id[0])
    # The admin view, after the restarts (it loads the coordinators it asks).
    view = client_transactions(broker, name)
    assert view["clientName"] == name and view["unavailableCoordinators"] == []
    terminated = {(t["mostSigBits"], t["leastSigBits"]): t["status"] for t in view["terminated"]}
    assert terminated == {c_id: "COMMITTED", a_id: "ABORTED"}
    assert all(t["txnId"] == f"({t['mostSigBits']},{t['leastSigBits']})" for t in view["terminated"])
    assert all(isinstance(t["endTime"], int) for t in view["terminated"])
    assert [(o["txnId"], o["status"]) for o in view["open"]] == [
        (f"({open_one[0]},{open_one[1]})", "OPEN")
    ]
    ok(tc.end(open_one, ABORT, name))
    # The data: the committed message once, the aborted one never.
    reader_client = qc.Client(broker.url, operation_timeout_seconds=15)
    try:
        consumer = reader_client.subscribe(topic, "verify",
                                           initial_position=qc.InitialPosition.Earliest)
        sentinel = reader_client.create_producer(topic)
        sentinel.send(b"sentinel")
        seen = []
        while True:
            m = consumer.receive(RECEIVE_MS)
            consumer.acknowledge(m)
            if m.data() == b"sentinel":
                break
            seen.append(m.data())
        assert seen == [b"committed"]
    finally:
        reader_client.close()


def test_admin_view_of_unknown_and_odd_names(broker: BrokerProcess) -> None:
    view = client_transactions(broker, "nobody-" + uuid.uuid4().hex)
    assert view["open"] == [] and view["terminated"] == []
    name = f"team/app {uuid.uuid4().hex[:6]}"  # '/' and a space in a client name
    tc = Tc(broker)
    txn = tc.new_txn(name)
    ok(tc.end(txn, COMMIT, name))
    ok(tc.end(txn, COMMIT, name))
    view = client_transactions(broker, name)
    assert view["clientName"] == name
    assert [(t["txnId"], t["status"]) for t in view["terminated"]] == [
        (f"({txn[0]},{txn[1]})", "COMMITTED")
    ]
    # The preserver's metrics, per coordinator, on the broker's /metrics.
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as r:
        metrics = r.read().decode()
    labels = f'{{cluster="standalone",coordinator_id="{txn[0]}"}}'
    entries = [line for line in metrics.splitlines()
               if line.startswith("pulsar_txn_tc_preserver_entries" + labels)]
    assert len(entries) == 1 and float(entries[0].split()[-1]) >= 1, entries
    assert "pulsar_txn_tc_preserver_flush_latency_seconds_bucket" in metrics


def test_bad_client_names(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    tc.connect(0)
    resp = tc.rc.new_txn(0, ttl_ms=None, client_name="x" * 5000)
    assert resp.error == ServerError.NotAllowedError, resp
    refused(tc.end((0, 10**9), COMMIT, "x" * 5000), ServerError.NotAllowedError)
    url = broker.admin_url + "/admin/v3/transactions/clientTransactions/" + "x" * 2000
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=30)
    assert err.value.code == 400
    err.value.close()
    # The connection still works.
    txn = tc.new_txn("fine")
    ok(tc.end(txn, ABORT, "fine"))


def test_works_without_topic_auto_creation(tmp_path: Path) -> None:
    """The preserver's system topic is created by the broker, not auto-created."""
    with BrokerProcess(tmp_path / "data",
                       extra_env={"QUASAR_allowAutoTopicCreation": "false"}) as proc:
        tc = Tc(proc)
        txn = tc.new_txn("no-auto")
        ok(tc.end(txn, COMMIT, "no-auto"))
        ok(tc.end(txn, COMMIT, "no-auto"))
        refused(tc.end(txn, ABORT, "no-auto"), ServerError.InvalidTxnStatus, "COMMITTED")
