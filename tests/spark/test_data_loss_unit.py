"""failOnDataLoss logic without Spark or a broker: ledger lists in, verdicts out."""

from __future__ import annotations

import logging

import pytest

from pyspark_quasar.data_loss import DataLossError, range_loss
from pyspark_quasar.ledgers import (
    LedgerSpan,
    is_deleted,
    planned_ledgers,
    skipped_ledgers,
)
from pyspark_quasar.plan import PartitionRange, plan_ranges
from pyspark_quasar.positions import Bound

T = "persistent://public/default/t-partition-3"


def spans(*ledgers: tuple[int, int]) -> list[LedgerSpan]:
    return [LedgerSpan(lid, n, n * 10) for lid, n in ledgers]


# -- ledgers ----------------------------------------------------------------------------


def test_is_deleted_only_before_the_first_stored_ledger() -> None:
    s = spans((10, 5), (14, 5), (20, 0))
    assert is_deleted(s, 7)
    assert not is_deleted(s, 10)
    assert not is_deleted(s, 12)  # between stored ledgers: not one of this partition's
    assert not is_deleted(s, 25)  # after the last one: nothing stored there yet
    assert is_deleted(None, 10)  # the partition is gone
    assert is_deleted([], 10)


def test_planned_ledgers_from_start_to_end() -> None:
    s = spans((10, 5), (14, 5), (20, 3))
    assert planned_ledgers(s, 14, 20) == ((14, 5), (20, 3))
    assert planned_ledgers(s, None, 14) == ((10, 5), (14, 5))


@pytest.mark.parametrize(
    ("prev", "cur", "end", "planned", "skipped"),
    [
        # Within one ledger the broker only skips markers and aborted messages.
        ((10, 2), (10, 4), (20, 1), ((10, 5), (14, 5)), []),
        # The rest of ledger 10 (entries 3, 4) was skipped.
        ((10, 2), (14, 0), (20, 1), ((10, 5), (14, 5), (20, 2)), [10]),
        # Ledger 10 was read to its last entry: moving on skips nothing.
        ((10, 4), (14, 0), (20, 1), ((10, 5), (14, 5), (20, 2)), []),
        # Ledger 14 in between held entries.
        ((10, 4), (20, 0), (20, 1), ((10, 5), (14, 5), (20, 2)), [14]),
        # An empty ledger in between holds nothing to lose.
        ((10, 4), (20, 0), (20, 1), ((10, 5), (14, 0), (20, 2)), []),
        # Beyond the range's end nothing is needed.
        ((10, 4), (30, 0), (14, 1), ((10, 5), (14, 5)), [14]),
        ((14, 1), (30, 0), (14, 1), ((10, 5), (14, 5)), []),
        # From the beginning: every planned ledger before the first message read.
        (None, (14, 0), (20, 1), ((10, 5), (14, 5), (20, 2)), [10]),
        (None, (10, 0), (20, 1), ((10, 5), (14, 5), (20, 2)), []),
        # A range in one ledger (no list): the rest of it up to the end.
        ((10, 2), (14, 0), (10, 4), None, [10]),
        ((10, 4), (14, 0), (10, 4), None, []),
    ],
)
def test_skipped_ledgers(
    prev: tuple[int, int] | None,
    cur: tuple[int, int],
    end: tuple[int, int],
    planned: tuple[tuple[int, int], ...] | None,
    skipped: list[int],
) -> None:
    assert skipped_ledgers(prev, cur, end, planned) == skipped


# -- the driver's check -----------------------------------------------------------------


def test_range_loss() -> None:
    s = spans((14, 5), (20, 3))
    assert range_loss(T, Bound.after(14, 2), Bound.after(20, 1), s) is None
    assert range_loss(T, Bound.earliest(), Bound.after(20, 1), s) is None
    gone = range_loss(T, Bound.after(10, 2), Bound.after(20, 1), s)
    assert gone is not None
    assert gone.message() == (
        f"{T} (partition 3): the messages after 10:2 before 14:0 (the first message "
        "still stored) are no longer stored (ledger 10 was deleted)."
    )
    from_gone = range_loss(T, Bound.starting_at(10, 0), Bound.after(20, 1), s)
    assert from_gone is not None and "from 10:0" in from_gone.message()
    end_gone = range_loss(T, Bound.earliest(), Bound.after(10, 4), s)
    assert end_gone is not None and "ledger 10 was deleted" in end_gone.message()
    deleted = range_loss(T, Bound.after(14, 2), Bound.after(20, 1), None)
    assert deleted is not None and "the partition was deleted" in deleted.message()
    empty = range_loss(T, Bound.after(10, 2), Bound.after(10, 4), spans((30, 0)))
    assert empty is not None and "stores no message" in empty.message()


class FakeSpans:
    def __init__(self, by_topic: dict[str, list[LedgerSpan] | None]) -> None:
        self.by_topic = by_topic
        self.asked: list[str] = []

    def __call__(self, topic: str) -> list[LedgerSpan] | None:
        self.asked.append(topic)
        return self.by_topic[topic]


def _ranges(parts: list[object]) -> list[tuple[str, str, str]]:
    out = []
    for p in parts:
        assert isinstance(p, PartitionRange)
        out.append((p.topic, p.start, p.end))
    return out


def test_plan_in_the_newest_ledger_does_not_ask() -> None:
    fake = FakeSpans({})
    parts = plan_ranges({T: Bound.after(14, 2)}, {T: Bound.after(14, 9)}, fake, {T: 14}, True)
    assert _ranges(parts) == [(T, "after 14:2:-1", "after 14:9:-1")]
    assert fake.asked == []


def test_plan_fails_or_starts_over_from_the_earliest(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeSpans({T: spans((14, 5), (20, 3))})
    starts, ends = {T: Bound.after(10, 2)}, {T: Bound.after(20, 2)}
    with pytest.raises(DataLossError) as info:
        plan_ranges(starts, ends, fake, {T: 20}, True)
    text = str(info.value)
    assert T in text and "(partition 3)" in text and "after 10:2 before 14:0" in text
    assert "failOnDataLoss" in text
    with caplog.at_level(logging.WARNING, logger="pyspark_quasar"):
        parts = plan_ranges(starts, ends, fake, {T: 20}, False)
    assert _ranges(parts) == [(T, "earliest", "after 20:2:-1")]
    assert isinstance(parts[0], PartitionRange)
    assert parts[0].planned == ((14, 5), (20, 3))
    assert "after 10:2 before 14:0" in caplog.text


def test_plan_drops_ranges_that_are_gone(caplog: pytest.LogCaptureFixture) -> None:
    other = "persistent://public/default/u"
    fake = FakeSpans({T: spans((30, 1)), other: None})
    starts = {T: Bound.after(10, 2), other: Bound.after(5, 0)}
    ends = {T: Bound.after(10, 4), other: Bound.after(5, 3)}
    with caplog.at_level(logging.WARNING, logger="pyspark_quasar"):
        assert plan_ranges(starts, ends, fake, {}, False) == []
    assert "ledger 10 was deleted" in caplog.text
    assert f"{other} (partition -1)" in caplog.text and "partition was deleted" in caplog.text


def test_plan_reports_partitions_no_longer_listed() -> None:
    fake = FakeSpans({})
    with pytest.raises(DataLossError, match="the partition was deleted"):
        plan_ranges({T: Bound.after(14, 2)}, {}, fake, {}, True)
    assert plan_ranges({T: Bound.after(14, 2)}, {}, fake, {}, False) == []
