"""The evidence a chaos run's ``no-progress`` record carries: the stuck partition's
subscription stats as the broker's admin API reports them, condensed
(``quasar.testing.chaos.evidence``), against a real broker with a consumer that
holds unacknowledged messages."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import quasar.client as qc
from quasar.testing.chaos.evidence import dump, fetch_partition_stats, stall_evidence
from quasar.testing.process import BrokerProcess

SENT = 8
TAKEN = 3


def test_evidence_of_a_subscription_with_unacked_messages(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    name = f"evidence-{uuid.uuid4().hex[:8]}"
    req = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/public/default/{name}/partitions",
        data=b"2", method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status < 300
    partition = f"persistent://public/default/{name}-partition-0"
    client = qc.Client(broker.url, operation_timeout_seconds=15)
    try:
        consumer = client.subscribe(partition, "stuck", consumer_type=qc.ConsumerType.Shared,
                                    receiver_queue_size=4)
        producer = client.create_producer(partition, batching_enabled=False)
        for n in range(SENT):
            producer.send(f"m{n}".encode())
        for _ in range(TAKEN):
            consumer.receive(5000)  # taken, never acknowledged

        fetched = fetch_partition_stats(broker.admin_url, partition)
        ev = stall_evidence(fetched, "stuck")
        assert "errors" not in ev, ev
        assert ev["msgBacklog"] == SENT
        assert TAKEN <= ev["unackedMessages"] <= SENT
        [c] = ev["consumers"]
        assert c["consumerName"] == consumer.consumer_name()
        assert isinstance(c["availablePermits"], int)
        assert c["unackedMessages"] == ev["unackedMessages"]
        assert c["blockedConsumerOnUnackedMsgs"] is False
        assert ev["markDeletePosition"] is not None and ev["readPosition"] is not None
        assert ev["lastConfirmedEntry"] is not None

        path = dump(tmp_path, partition, fetched)
        assert path.name == f"stall-{name}-partition-0.json"
        assert set(json.loads(path.read_text())) == {
            "stats", "internalStats", "transactionBufferStats"}
        # A subscription the broker does not know is reported as such.
        assert stall_evidence(fetched, "no-such-sub")["subscription"] is None
    finally:
        client.close()


def test_an_unreachable_broker_is_recorded_not_raised() -> None:
    fetched = fetch_partition_stats("http://127.0.0.1:9", "persistent://public/default/t")
    ev = stall_evidence(fetched, "s")
    assert len(ev["errors"]) == 3 and ev["subscription"] is None
