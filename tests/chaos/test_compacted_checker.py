"""The compacted-read rules of the history checker on hand-made chaos histories:
each anomaly is found, and what redelivery or a reconnect explains is not flagged.
Also the plan's compaction times."""

from __future__ import annotations

from typing import Any

from quasar.testing.chaos.report import build_history
from quasar.testing.chaos.schedule import COMPACTED_READER, make_plan

P = "p-0"


def _line(op: str, t: float, **fields: Any) -> dict[str, Any]:
    return {"op": op, "t": t, **fields}


def _send(value: str, key: str, t: float, seq: int, producer: str = "p") -> list[dict[str, Any]]:
    return [
        _line("send", t, value=value, key=key, producer=producer, seq=seq, txn=None),
        _line("send_ok", t + 0.01, value=value),
    ]


def _final(value: str, t: float, entry: int) -> dict[str, Any]:
    return _line("final_read", t, value=value, partition=P, position=[1, entry, -1])


def _pass(pass_id: str, t: float, reads: list[tuple[str, int]], complete: bool = True,
          between: dict[int, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """A compacted pass reading ``(value, entry)`` pairs; ``between[i]``: lines
    recorded before the i-th read."""
    lines = [_line("cpass_start", t, partition=P, **{"pass": pass_id})]
    for i, (value, entry) in enumerate(reads):
        lines += (between or {}).get(i, [])
        lines.append(_line("cread", t + 0.01 * (i + 1), value=value, key=None, partition=P,
                           position=[1, entry, -1], **{"pass": pass_id}))
    lines.append(_line("cpass_end", t + 0.5, complete=complete, **{"pass": pass_id}))
    return lines


def _compacted(t: float, entry: int, status: str = "SUCCESS") -> list[dict[str, Any]]:
    done = _line("compact_done", t + 0.1, partition=P, status=status)
    if status == "SUCCESS":
        done.update(horizon=[1, entry], generation=1)
    return [_line("compact", t, partition=P), done]


def _fault(t: float) -> list[dict[str, Any]]:
    return [_line("fault_start", t, n=0, kind="broker-kill", target=0),
            _line("fault_end", t + 0.01, n=0, kind="broker-kill")]


# a1, b1, a2 (keys ka, kb, ka) at entries 0, 1, 2; compacted up to entry 2 at t=5.
BASE = (_send("a1", "ka", 0, 0) + _send("b1", "kb", 1, 1) + _send("a2", "ka", 2, 2)
        + _compacted(5, 2))
FINAL = [_final("a1", 20, 0), _final("b1", 20.1, 1), _final("a2", 20.2, 2)]


def _kinds(lines: list[dict[str, Any]]) -> set[str]:
    return build_history(sorted(lines, key=lambda e: e["t"])).check().kinds()


def test_passes_before_and_after_a_compaction_pass() -> None:
    before = _pass("r.P0", 3, [("a1", 0), ("b1", 1), ("a2", 2)])
    after = _pass("r.P1", 6, [("b1", 1), ("a2", 2)])
    report = build_history(sorted(BASE + before + after + FINAL, key=lambda e: e["t"])).check()
    report.assert_ok()
    assert report.counts["compactions"] == 1
    assert report.counts["compacted-reads"] == 5
    assert report.counts["compacted-complete-passes"] == 2


def test_a_superseded_value_after_a_completed_compaction_is_resurrected() -> None:
    after = _pass("r.P1", 6, [("a1", 0), ("b1", 1), ("a2", 2)])
    assert _kinds(BASE + after + FINAL) == {"resurrected-value"}


def test_a_compaction_without_success_holds_passes_to_nothing() -> None:
    lines = (_send("a1", "ka", 0, 0) + _send("b1", "kb", 1, 1) + _send("a2", "ka", 2, 2)
             + _compacted(5, 2, status="NOT_RUN")
             + _pass("r.P1", 6, [("a1", 0), ("b1", 1), ("a2", 2)]))
    assert _kinds(lines + FINAL) == set()


def test_a_complete_pass_missing_a_latest_value_is_found_an_incomplete_one_not() -> None:
    assert _kinds(BASE + _pass("r.P1", 6, [("b1", 1)]) + FINAL) == {"lost-latest-value"}
    # Cut by an error (a reconnect that failed): only the other rules apply.
    assert _kinds(BASE + _pass("r.P1", 6, [("b1", 1)], complete=False) + FINAL) == set()


def test_a_value_returned_after_a_later_one_of_its_key_is_a_key_reorder() -> None:
    # Positions rise, but a1 is stored before a2: the view mislabelled it.
    lines = BASE[:-2] + _pass("r.P0", 3, [("a2", 2), ("a1", 3)])
    assert _kinds(lines + FINAL) == {"compacted-key-reorder"}


def test_a_rewind_is_excused_only_by_a_disruption_after_what_it_repeats() -> None:
    reads = [("a1", 0), ("b1", 1), ("a1", 0), ("b1", 1), ("a2", 2)]
    assert _kinds(BASE[:-2] + _pass("r.P0", 3, reads) + FINAL) == {"nonmonotonic-read"}
    # Redelivery within a pass: a reconnect after the first read it repeats.
    redelivered = _pass("r.P0", 3, reads, between={1: _fault(3.015)})
    assert _kinds(BASE[:-2] + redelivered + FINAL) == set()
    # A disruption before everything the rewind repeats explains nothing.
    early = _fault(2.5) + _pass("r.P0", 3, reads)
    assert _kinds(BASE[:-2] + early + FINAL) == {"nonmonotonic-read"}


def test_a_pass_cut_by_a_reconnect_after_a_compaction_is_sound() -> None:
    # A broker kill mid-pass: the reader resumes after b1 and reads on to the end.
    cut = _pass("r.P1", 6, [("b1", 1), ("b1", 1), ("a2", 2)], between={1: _fault(6.015)})
    assert _kinds(BASE + cut + FINAL) == set()


def test_a_resent_value_stored_twice_is_judged_by_its_latest_copy() -> None:
    # a2 resent after a reconnect: stored at 1 and 3, c (same key) at 2 between.
    lines = (_send("a1", "ka", 0, 0)[:1] + [_line("send_ok", 0.5, value="a1")]
             + [_line("send", 1, value="a2", key="ka", producer="p", seq=1, txn=None)]
             + _fault(1.1) + [_line("send_ok", 1.2, value="a2")]
             + _send("c", "ka", 1.5, 0, producer="q") + _compacted(5, 3))
    final = [_final("a1", 20, 0), _final("a2", 20.1, 1), _final("c", 20.2, 2),
             _final("a2", 20.3, 3)]
    before = _pass("r.P0", 3, [("a1", 0), ("a2", 1), ("c", 2), ("a2", 3)])
    after = _pass("r.P1", 6, [("a2", 3)])
    assert _kinds(lines + before + after + final) == set()
    assert _kinds(lines + _pass("r.P1", 6, [("c", 2), ("a2", 3)]) + final) == {
        "resurrected-value"
    }


def test_a_compacted_read_of_an_aborted_or_uncommitted_value_is_found() -> None:
    txn = [
        _line("begin", 0, txn="A", timeout_s=3.0),
        _line("send", 0.1, value="x1", key="ka", producer="t", seq=0, txn="A"),
        _line("send_ok", 0.2, value="x1"),
    ]
    aborted = txn + [_line("abort", 0.3, txn="A"), _line("end", 0.4, txn="A", outcome="aborted")]
    assert _kinds(BASE + aborted + _pass("r.P0", 3, [("x1", 3)], complete=False)
                  + FINAL) == {"aborted-read"}
    # Read before its commit was asked for.
    committed = txn + [_line("committing", 4, txn="A"),
                       _line("end", 4.1, txn="A", outcome="committed")]
    assert _kinds(BASE + committed + _pass("r.P0", 3, [("x1", 3)], complete=False)
                  + FINAL + [_final("x1", 20.3, 3)]) == {"uncommitted-read"}


def test_the_plan_compacts_during_the_workload_and_has_a_compacted_reader() -> None:
    plan = make_plan(7, duration_s=10.0, operations=1, faults=2)
    assert plan == make_plan(7, duration_s=10.0, operations=1, faults=2)
    assert 2 <= len(plan.compactions) <= 8
    assert all(0 < at < 9.0 for at in plan.compactions)
    assert list(plan.compactions) == sorted(plan.compactions)
    assert [w.role for w in plan.workers].count(COMPACTED_READER) == 1
    long = make_plan(7, duration_s=3600.0, operations=1, faults=120)
    assert 80 <= len(long.compactions) <= 200
