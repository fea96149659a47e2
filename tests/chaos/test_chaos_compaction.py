"""The chaos run's compaction step and compacted pass against a real broker: a
compaction's outcome and horizon are recorded, a pass reads the latest value per key
to the end, and the checker accepts what they recorded."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import quasar.client as qc
from quasar.testing.chaos.compacted_reader import read_pass
from quasar.testing.chaos.compaction import compact_partition
from quasar.testing.chaos.recorder import Recorder, read_lines
from quasar.testing.chaos.report import build_history
from quasar.testing.process import BrokerProcess

TOPIC = "persistent://public/default/chaos-compaction"
PARTITION = f"{TOPIC}-partition-0"


def test_a_compaction_and_a_compacted_pass_are_recorded_and_judged(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    req = urllib.request.Request(
        broker.admin_url + "/admin/v2/persistent/public/default/chaos-compaction/partitions",
        data=b"2", method="PUT", headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).close()
    client = qc.Client(broker.url, operation_timeout_seconds=10)
    rec = Recorder(tmp_path / "h.jsonl", "t", 1)
    try:
        producer = client.create_producer(PARTITION, batching_enabled=False)
        final = []
        for seq, (key, value) in enumerate([("k1", "a"), ("k2", "b"), ("k1", "c")]):
            rec.record("send", value=value, key=key, producer="p", seq=seq, txn=None)
            mid = producer.send(value.encode(), partition_key=key)
            rec.record("send_ok", value=value)
            final.append((value, [mid.ledger_id(), mid.entry_id(), -1]))
        assert compact_partition(broker.admin_url, PARTITION, rec) == "SUCCESS"
        assert read_pass(client, PARTITION, rec, "r.P0")
        for value, position in final:  # what a complete drain reads
            rec.record("final_read", value=value, partition=PARTITION, position=position)
    finally:
        rec.close()
        client.close()
    lines = list(read_lines([tmp_path / "h.jsonl"]))
    done = next(e for e in lines if e["op"] == "compact_done")
    assert done["status"] == "SUCCESS" and done["horizon"] == final[-1][1][:2], done
    assert done["generation"] == 1
    assert [e["value"] for e in lines if e["op"] == "cread"] == ["b", "c"]
    report = build_history(lines).check()
    report.assert_ok()
    assert report.counts["compactions"] == 1 and report.counts["compacted-complete-passes"] == 1
