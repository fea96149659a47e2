"""Transactions on a broker with ``allowAutoTopicCreation=false``: the system topics the
broker needs (the namespace's ``__transaction_buffer_snapshot``) are created by the
broker itself, so explicitly created topics load, snapshot and recover."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import quasar.client as qc
from quasar.testing.process import BrokerProcess

TOPIC = "persistent://public/default/no-auto"
RECEIVE_MS = 10_000


def test_topic_created_by_admin_snapshots_and_recovers(tmp_path: Path) -> None:
    env = {
        "QUASAR_allowAutoTopicCreation": "false",
        # A snapshot every two ends, so the run below writes several.
        "QUASAR_transactionBufferSnapshotMaxTransactionCount": "2",
    }
    with BrokerProcess(tmp_path / "data", extra_env=env) as proc:
        put = urllib.request.Request(
            f"{proc.admin_url}/admin/v2/persistent/public/default/no-auto", method="PUT"
        )
        with urllib.request.urlopen(put, timeout=30) as answer:
            assert answer.status in (200, 204)
        client = qc.Client(proc.url, enable_transaction=True)
        producer = client.create_producer(TOPIC)
        for i in range(6):
            txn = client.new_transaction()
            producer.send(b"m%d" % i, txn=txn)
            if i % 3 == 2:
                txn.abort()
            else:
                txn.commit()
        client.close()

        proc.restart(hard=True)  # kill -9: recovery reads the snapshot table
        client = qc.Client(proc.url)
        consumer = client.subscribe(
            TOPIC, "s", initial_position=qc.InitialPosition.Earliest
        )
        got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(4)]
        assert got == [b"m0", b"m1", b"m3", b"m4"]
        reader = client.create_reader(TOPIC, qc.MessageId.earliest)
        seen = []
        while reader.has_message_available():
            seen.append(reader.read_next(timeout_millis=RECEIVE_MS).data())
        assert seen == got
        client.close()
