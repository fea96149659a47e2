"""The chaos checks of the history checker, on hand-made histories: each anomaly a
chaos run must find is found, and what a reconnect explains is counted, not
reported. Also the plan: one seed, one schedule."""

from __future__ import annotations

from typing import Any

import pytest

from quasar.testing.chaos.report import build_history
from quasar.testing.chaos.schedule import FAULT_KINDS, make_plan
from quasar.testing.history import History, Outcome


def _line(op: str, t: float, **fields: Any) -> dict[str, Any]:
    return {"op": op, "t": t, **fields}


def _committed_txn(t: float = 0.0) -> list[dict[str, Any]]:
    """Transaction T writes v1 (key k) and v2 (key k) and commits; both are read."""
    return [
        _line("begin", t, txn="T", timeout_s=3.0),
        _line("send", t + 0.1, value="v1", key="k", producer="p", seq=0, txn="T"),
        _line("send_ok", t + 0.2, value="v1"),
        _line("send", t + 0.3, value="v2", key="k", producer="p", seq=1, txn="T"),
        _line("send_ok", t + 0.4, value="v2"),
        _line("committing", t + 0.5, txn="T"),
        _line("end", t + 0.6, txn="T", outcome="committed"),
    ]


def _final(value: str, t: float, entry: int, partition: str = "p-0") -> dict[str, Any]:
    return _line("final_read", t, value=value, partition=partition, position=[1, entry, -1])


def _kinds(lines: list[dict[str, Any]], **check: Any) -> set[str]:
    return build_history(lines).check(recovery_bound_s=5.0, **check).kinds()


def test_a_clean_chaos_history_passes() -> None:
    lines = _committed_txn() + [_final("v1", 1, 0), _final("v2", 1.1, 1)]
    report = build_history(lines).check(recovery_bound_s=5.0)
    report.assert_ok()
    assert report.counts["committed"] == 1


def test_a_read_before_the_commit_was_asked_for_is_uncommitted() -> None:
    lines = _committed_txn()
    lines.insert(4, _line("recv", 0.35, value="v1", sub="chaos-Shared", partition="p-0",
                          position=[1, 0, -1]))
    lines += [_final("v1", 1, 0), _final("v2", 1.1, 1)]
    assert _kinds(lines) == {"uncommitted-read"}


def test_a_read_of_an_abandoned_transaction_is_uncommitted() -> None:
    lines = _committed_txn() + [
        _line("begin", 2, txn="U", timeout_s=3.0),
        _line("send", 2.1, value="u1", key="k", producer="p", seq=2, txn="U"),
        _line("abandon", 2.2, txn="U"),
        _final("v1", 9, 0), _final("v2", 9.1, 1), _final("u1", 9.2, 2),
    ]
    assert _kinds(lines) == {"uncommitted-read"}


def test_a_live_read_of_an_aborted_transaction_is_found() -> None:
    lines = [
        _line("begin", 0, txn="A", timeout_s=3.0),
        _line("send", 0.1, value="a1", key="k", producer="p", seq=0, txn="A"),
        _line("abort", 0.2, txn="A"),
        _line("end", 0.3, txn="A", outcome="aborted"),
        _line("recv", 0.4, value="a1", sub="chaos-Exclusive", partition="p-0",
              position=[1, 0, -1]),
    ]
    assert _kinds(lines) == {"aborted-read"}


def test_a_lost_committed_write_and_a_torn_transaction_are_found() -> None:
    lines = _committed_txn() + [_final("v1", 1, 0)]
    assert _kinds(lines) == {"lost-write"}
    unknown = [dict(e) for e in _committed_txn()]
    unknown[-1]["outcome"] = "unknown"
    assert _kinds(unknown + [_final("v1", 1, 0)]) == {"torn"}


def test_only_an_acknowledged_plain_send_must_be_read() -> None:
    sent = [
        _line("send", 0, value="x", key="k", producer="p", seq=0, txn=None),
        _line("send_fail", 1, value="x", error="Timeout"),
        _line("send", 1.1, value="y", key="k", producer="p", seq=1, txn=None),
        _line("send_ok", 1.2, value="y"),
    ]
    assert _kinds(sent + [_final("y", 2, 0)]) == set()
    assert _kinds(sent + [_final("x", 2, 0)]) == {"lost-write"}


def test_per_key_order_is_checked() -> None:
    lines = _committed_txn() + [_final("v2", 1, 0), _final("v1", 1.1, 1, "p-1")]
    assert "key-reorder" in _kinds(lines)


def test_conflicting_outcomes_are_an_anomaly() -> None:
    lines = _committed_txn() + [
        _line("commit_retry", 1, txn="T"),
        _line("end", 1.1, txn="T", outcome="aborted"),
        _final("v1", 2, 0), _final("v2", 2.1, 1),
    ]
    assert _kinds(lines) == {"conflicting-outcome"}
    # A plain History raises instead: there, it is the caller's bug.
    h = History()
    h.begin("T")
    h.end("T", Outcome.COMMITTED)
    with pytest.raises(ValueError):
        h.end("T", Outcome.ABORTED)


def test_a_transaction_that_outlasts_its_timeout_and_the_faults_is_found() -> None:
    lines = [dict(e) for e in _committed_txn()]
    lines[-1]["t"] = 10.0  # timeout 3 s + recovery 5 s < 10 s
    reads = [_final("v1", 11, 0), _final("v2", 11.1, 1)]
    assert _kinds(lines + reads) == {"txn-overran"}
    # A 4 s broker pause inside it explains the rest.
    pause = [
        _line("fault_start", 1, n=0, kind="broker-pause"),
        _line("fault_end", 5, n=0, kind="broker-pause"),
    ]
    merged = sorted(lines + pause, key=lambda e: e["t"]) + reads
    assert _kinds(merged) == set()


def test_duplicates_a_reconnect_explains_are_counted_not_reported() -> None:
    sent = [
        _line("send", 0, value="x", key="k", producer="p", seq=0, txn=None),
        _line("send_ok", 2, value="x"),
    ]
    twice = [_final("x", 3, 0), _final("x", 3.1, 1)]
    assert _kinds(sent + twice) == {"duplicate-read"}
    kill = [_line("fault_start", 1, n=0, kind="broker-kill")]
    report = build_history(sent[:1] + kill + sent[1:] + twice).check()
    assert report.ok and report.counts["explained-duplicates"] == 1
    # A transactional send is appended once, reconnect or not (scenario 38).
    txn = _committed_txn()
    txn.insert(2, _line("fault_start", 0.15, n=0, kind="broker-kill"))
    reads = [_final("v1", 1, 0), _final("v1", 1.05, 1), _final("v2", 1.1, 2)]
    assert "duplicate-read" in _kinds(txn + reads)


def test_live_redeliveries_are_counted() -> None:
    recv = _line("recv", 1, value="v1", sub="chaos-Shared", partition="p-0",
                 position=[1, 0, -1])
    lines = _committed_txn() + [recv, dict(recv, t=1.5)]
    lines += [_final("v1", 2, 0), _final("v2", 2.1, 1)]
    report = build_history(lines).check()
    assert report.ok and report.counts["live-redeliveries"] == 1


def test_no_progress_is_reported() -> None:
    lines = [_line("no_progress", 1, what="chaos-Failover did not read S-p-0")]
    assert _kinds(lines) == {"no-progress"}


def test_phantom_reads_are_found_for_live_and_final_readers() -> None:
    lines = [
        _line("recv", 1, value="nobody", sub="chaos-KeyShared", partition="p-0",
              position=[1, 0, -1]),
        _final("nobody-else", 2, 0),
    ]
    report = build_history(lines).check()
    assert report.kinds() == {"phantom-read"} and len(report.anomalies) == 2


def test_one_seed_gives_one_plan() -> None:
    a = make_plan(7, duration_s=60, operations=1000, faults=20)
    b = make_plan(7, duration_s=60, operations=1000, faults=20)
    c = make_plan(8, duration_s=60, operations=1000, faults=20)
    assert a == b and a != c
    assert len(a.faults) == 20 and {e.kind for e in a.faults} <= set(FAULT_KINDS)
    times = [e.at_s for e in a.faults]
    assert times == sorted(times) and 6 <= times[0] and times[-1] < 48
    assert {w.subscription_type for w in a.workers} >= {
        "Shared", "KeyShared", "Failover", "Exclusive"
    }
    with pytest.raises(ValueError):
        make_plan(1, duration_s=0, operations=1, faults=0)


def test_a_fault_in_force_throughout_a_send_explains_its_duplicate() -> None:
    # A proxy cut is armed before the send and fires at some moment before its
    # receipt: the client resends on a new connection.
    sent = [
        _line("fault_start", 0, n=0, kind="proxy-cut"),
        _line("send", 1, value="x", key="k", producer="p", seq=0, txn=None),
        _line("send_ok", 2, value="x"),
        _line("fault_end", 3, n=0, kind="proxy-cut"),
    ]
    twice = [_final("x", 4, 0), _final("x", 4.1, 1)]
    report = build_history(sent + twice).check()
    assert report.ok and report.counts["explained-duplicates"] == 1
    # A fault healed before the send explains nothing.
    before = [sent[0], dict(sent[3], t=0.5), *sent[1:3]]
    assert _kinds(before + twice) == {"duplicate-read"}


def test_a_transaction_overlapping_a_network_or_disk_fault_gets_its_time() -> None:
    lines = [dict(e) for e in _committed_txn()]
    lines[-1]["t"] = 10.0  # timeout 3 s + recovery 5 s < 10 s
    reads = [_final("v1", 11, 0), _final("v2", 11.1, 1)]
    for kind in ("proxy-blackhole", "proxy-delay", "disk-full"):
        fault = [
            _line("fault_start", 1, n=0, kind=kind),
            _line("fault_end", 5, n=0, kind=kind),
        ]
        assert _kinds(sorted(lines + fault, key=lambda e: e["t"]) + reads) == set(), kind
