"""``quasar admin topics`` message printing and argument parsing (the commands run
against a real broker in tests/interop/test_topic_ops.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from quasar.cli.admin_topic_ops import (
    format_message,
    hex_dump,
    message_record,
    parse_relative_time_s,
)
from quasar.protocol import pb
from quasar.protocol.batch import build_batch


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("100", 100), ("30s", 30), ("10m", 600), ("3h", 10800), ("2d", 172800), ("5w", 3024000)],
)
def test_relative_times_as_pulsar_admin_writes_them(text: str, seconds: int) -> None:
    assert parse_relative_time_s(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "-5m", "10x", "1.5h"])
def test_other_times_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_relative_time_s(text)


def test_hex_dump_rows_show_hex_and_printable_text() -> None:
    dump = hex_dump(b"hello\x00world, quasar!").splitlines()
    assert dump[3] == (
        "|00000000| 68 65 6c 6c 6f 00 77 6f 72 6c 64 2c 20 71 75 61 |hello.world, qua|"
    )
    assert dump[4].startswith("|00000010| 73 61 72 21") and dump[4].endswith("|sar!            |")


def test_a_message_prints_its_id_properties_and_payload() -> None:
    headers = {
        "X-Pulsar-Message-ID": "12:3",
        "X-Pulsar-publish-time": "2026-01-01T00:00:00.000Z",
        "X-Pulsar-PROPERTY-a%20b": "ignored when the JSON header is there",
        "X-Pulsar-Property": json.dumps({"a b": "1"}),
    }
    record = message_record(b"hi", headers)
    assert record["properties"] == {"a b": "1"}
    assert record["payload"] == "hi" and record["payloadHex"] == "6869"
    text = format_message(record)
    assert text.startswith("Message ID: 12:3\nPublish time: 2026-01-01T00:00:00.000Z")
    assert '"a b": "1"' in text and "|hi" in text


def test_a_batch_prints_member_by_member() -> None:
    members = [
        (pb.SingleMessageMetadata(payload_size=2), b"m0"),
        (pb.SingleMessageMetadata(payload_size=2, properties=[pb.KeyValue(key="k", value="v")]),
         b"m1"),
    ]
    headers = {"X-Pulsar-Message-ID": "4:0", "X-Pulsar-num-batch-message": "2"}
    record = message_record(build_batch(members), headers)
    assert [m["payload"] for m in record["batch"]] == ["m0", "m1"]
    assert record["batch"][1]["properties"] == {"k": "v"}
    text = format_message(record)
    assert "Batch Message ID: 4:0:0" in text and "Batch Message ID: 4:0:1" in text
    # A batch that does not parse is shown whole, with what is wrong.
    broken = message_record(b"\x00\x00\x00\x09", headers)
    assert "batchError" in broken and broken["payloadHex"] == "00000009"
