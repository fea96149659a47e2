"""Offsets and admission control without Spark or a broker (fast)."""

from __future__ import annotations

import pytest

from pyspark_quasar.admission import limit_offsets
from pyspark_quasar.decisions import DecisionStore, TxnRecord
from pyspark_quasar.options import SinkOptions, SourceOptions
from pyspark_quasar.positions import Bound, decode_offset, encode_offset, is_past
from pyspark_quasar.topics import LedgerSpan


def test_bounds_round_trip_through_offset_json() -> None:
    bounds = {
        "persistent://public/default/t-partition-0": Bound.after(12, 40),
        "persistent://public/default/t-partition-1": Bound.starting_at(12, 7, 3),
        "persistent://public/default/t-partition-2": Bound.earliest(),
    }
    encoded = encode_offset(bounds)
    assert encoded["persistent://public/default/t-partition-0"] == "after 12:40:-1"
    assert decode_offset(encoded) == bounds
    with pytest.raises(ValueError):
        Bound.parse("after 1:2")


@pytest.mark.parametrize(
    ("msg", "end", "expected"),
    [
        ((1, 5, -1, 0), Bound.after(1, 6), (True, False)),
        ((1, 6, -1, 0), Bound.after(1, 6), (True, True)),
        ((1, 7, -1, 0), Bound.after(1, 6), (False, True)),
        ((2, 0, -1, 0), Bound.after(1, 6), (False, True)),
        # A whole batch entry as the end: done at its last member.
        ((1, 6, 0, 3), Bound.after(1, 6), (True, False)),
        ((1, 6, 2, 3), Bound.after(1, 6), (True, True)),
        # A batch member as the end.
        ((1, 6, 1, 3), Bound.after(1, 6, 1), (True, True)),
        ((1, 6, 2, 3), Bound.after(1, 6, 1), (False, True)),
    ],
)
def test_is_past(msg: tuple[int, int, int, int], end: Bound, expected: tuple[bool, bool]) -> None:
    assert is_past(*msg, end) == expected


def test_empty_ranges() -> None:
    assert Bound.after(1, 5).is_empty_range_to(Bound.after(1, 5))
    assert Bound.after(1, 5).is_empty_range_to(Bound.after(1, 4))
    assert not Bound.after(1, 5).is_empty_range_to(Bound.after(1, 6))
    assert not Bound.starting_at(1, 5).is_empty_range_to(Bound.after(1, 5))
    assert Bound.earliest().is_empty_range_to(Bound.earliest())
    assert not Bound.earliest().is_empty_range_to(Bound.after(1, 0))
    # An end that did not advance (the start repeated).
    assert Bound.starting_at(1, 5).is_empty_range_to(Bound.starting_at(1, 5))


SPANS = {
    "a": [LedgerSpan(1, 10, 10_000), LedgerSpan(3, 0, 0), LedgerSpan(4, 10, 10_000)],
    "b": [LedgerSpan(2, 5, 5_000)],
}
CAPS = {"a": Bound.after(4, 9), "b": Bound.after(2, 4)}


def _ends(starts: dict[str, Bound], max_entries: int | None, max_bytes: int | None = None) -> dict[str, Bound]:
    return limit_offsets(starts, CAPS, SPANS.__getitem__, max_entries, max_bytes)


def test_no_limit_reads_to_the_caps() -> None:
    assert _ends({}, None) == CAPS
    assert _ends({}, 100) == CAPS


def test_budget_split_by_backlog_across_ledgers() -> None:
    # Backlogs: a = 20 entries over two ledgers, b = 5: 10 entries split 8 / 2.
    ends = _ends({"a": Bound.earliest(), "b": Bound.earliest()}, 10)
    assert ends == {"a": Bound.after(1, 7), "b": Bound.after(2, 1)}
    # Next trigger from there: backlogs 12 and 3, so 8 / 2; a finishes ledger 1 (two
    # entries), skips the empty ledger 3 and takes six of ledger 4.
    ends2 = _ends(ends, 10)
    assert ends2["a"] == Bound.after(4, 5)
    assert ends2["b"] == Bound.after(2, 3)


def test_partly_read_batch_entry_counts_again() -> None:
    ends = _ends({"a": Bound.after(1, 3, 5), "b": Bound.after(2, 4)}, 2)
    assert ends["a"] == Bound.after(1, 4)  # rest of entry 3, then entry 4
    assert ends["b"] == Bound.after(2, 4)


def test_bytes_limit_uses_average_entry_size() -> None:
    ends = _ends({"a": Bound.earliest(), "b": Bound.after(2, 4)}, None, 5_000)
    assert ends["a"] == Bound.after(1, 4)


def test_options_are_checked_when_the_query_is_defined() -> None:
    with pytest.raises(ValueError, match="service.url"):
        SourceOptions.parse({"topic": "t"}, streaming=True)
    with pytest.raises(ValueError, match="exactly one"):
        SourceOptions.parse({"service.url": "pulsar://h:6650", "topic": "a", "topics": "b"}, True)
    with pytest.raises(ValueError, match="batch queries only"):
        SourceOptions.parse(
            {"service.url": "pulsar://h:6650", "topic": "a", "endingoffsets": "latest"}, True
        )
    opts = SourceOptions.parse(
        {
            "service.url": "pulsar://h:6650",
            "topic": "a",
            "startingoffsets": '{"a": {"0": "3:4", "1": "earliest"}}',
            "maxrecordspertrigger": "10",
        },
        streaming=True,
    )
    assert opts.conn.admin_url == "http://h:8080"
    assert opts.starting == {"a": {"0": Bound.starting_at(3, 4), "1": "earliest"}}
    assert opts.max_records_per_trigger == 10
    sink = SinkOptions.parse(
        {"service.url": "pulsar://h:6650", "checkpointlocation": "file:///tmp/c"}
    )
    assert sink.state_location == "/tmp/c/_quasar_sink"
    with pytest.raises(ValueError, match="POSIX"):
        SinkOptions.parse({"service.url": "pulsar://h:6650", "txnstatelocation": "s3a://b/x"})
    with pytest.raises(ValueError, match="deliveryGuarantee"):
        SinkOptions.parse({"service.url": "pulsar://h:6650", "deliveryguarantee": "twice"})


def test_decision_store(tmp_path: object) -> None:
    store = DecisionStore(str(tmp_path), retain=2)
    assert store.get(0) is None
    txns = [TxnRecord(1, 2, "s-p1", 1, 0, 10), TxnRecord(1, 3, "s-p0", 0, 1, 5)]
    for b in range(5):
        store.record(b, "s", txns)
    assert store.get(4) == sorted(txns, key=lambda t: t.partition)
    store.prune(4)
    assert [b for b in range(5) if store.get(b) is not None] == [2, 3, 4]
    store.drop(4)
    assert store.get(4) is None
    store.remember_sink("s", 3)
    store.remember_sink("s", 2)
    assert store.sink_info() == {"version": 1, "sinkId": "s", "partitions": 3}
