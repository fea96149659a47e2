"""A history checker for end-to-end transaction tests (lost, duplicate, aborted reads).

A test records what it did and what it saw, in the order it happened:

* ``add_input(id)``: a message of an input topic (something to be processed);
* ``begin(txn)``, ``write(txn, value, ...)``, ``ack(txn, input_id)`` and
  ``end(txn, outcome)``: a transaction, its output messages (``source`` names the
  input a message was derived from) and its acks of input messages; ``txn=None`` is a
  plain write outside any transaction (always committed);
* ``read(value, ...)``: an output message a read-committed reader received;
* ``delivered(input_id)``: an input message the input subscription handed out after
  the run (the "what is still unacknowledged" drain at the end);
  ``delivered(input_id, final=False)``: one it handed to the processing consumer
  during the run (only its timing against commits is checked).

The outcome of a transaction is what the writer *knows*: ``COMMITTED`` and
``ABORTED`` are definite answers; ``UNKNOWN`` (a lost answer, a killed writer) and a
transaction never ended are judged by what was read, but must still be all or
nothing.

:meth:`History.check` compares the reads with the writes, in the spirit of Jepsen's
queue checker, and returns every anomaly it finds:

==========================  =================================================  =========
kind                        meaning                                            invariant
==========================  =================================================  =========
``phantom-read``            a value that no one wrote                          INV-G1A
``duplicate-read``          one value read twice by the same reader            INV-EO
``aborted-read``            a value of a transaction known to be aborted       INV-G1A
``lost-write``              a committed value never read                       INV-DUR
``torn``                    part of a transaction visible, part not            INV-ATOM
``misplaced``               read on another partition than it was written to   INV-ORD
``nonmonotonic-read``       a reader's positions on a partition went backwards INV-ORD
``reorder``                 one producer's values read out of send order       INV-ORD
``duplicate-processing``    one input reflected by more than one output        INV-EO
``lost-input``              an input neither reflected nor still deliverable   INV-EO
``unprocessed-input``       an input still deliverable when all had to be done INV-EO
``ack-not-applied``         an input acked by a committed transaction is       INV-ATOM
                            still deliverable (or reflected and deliverable)
``double-ack``              an input acked by two committed transactions       INV-EO
``redelivered-after-commit``  delivered after the commit of its ack returned,   INV-EO
                            not explained by a reconnect before the ack
                            was answered
``duplicate-delivery``      the final drain got one input twice                INV-EO
``uncommitted-read``        a transaction's value read before its commit was   INV-G1A
                            asked for, or of one never asked to commit
``key-reorder``             one producer's values of one key read out of order INV-ORD
``conflicting-outcome``     two different definite answers for one transaction INV-TERM
``txn-overran``             a transaction ended later than its timeout plus    INV-LIVE
                            the recovery bound and the faults inside it
``no-progress``             a consumer did not read what it had to after the   INV-LIVE
                            faults stopped
``compacted-key-reorder``   a compacted pass read a key's values out of order  INV-ORD
``resurrected-value``       a compacted pass returned a value a completed      INV-DUR
                            compaction had superseded
``lost-latest-value``       a complete compacted pass missed a key's latest    INV-DUR
                            value up to a completed compaction's horizon
==========================  =================================================  =========

Compacted reads (``compaction_done``, ``compacted_pass_start``, ``compacted_read``,
``compacted_pass_end``) are checked by ``history_compacted.py``, and for phantom,
aborted and uncommitted values like every other reader's.

A duplicate of a value written outside a transaction, read by the final reader, is
explained when a disruption (reconnect) happened between its send and its receipt:
the client sends it again on the new connection. Those are not anomalies; they are
counted as ``explained-duplicates``. Reads of other readers (live consumers) are
checked for aborted and uncommitted reads only; their redeliveries are counted as
``live-redeliveries``. ``uncommitted-read`` applies once a history records when
commits are asked for (:meth:`History.committing`); ``txn-overran`` once
transactions carry times (``begin(at=, timeout_s=)``, ``end(at=)``).

The checker is pure (no I/O) so that it can be unit-tested on crafted histories; the
history can be saved as JSON lines (``to_jsonl``) next to a failing test's logs.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from quasar.testing.history_compacted import CompactedReads, compacted_anomalies
from quasar.testing.history_model import (
    DEFAULT_READER,
    DEFAULT_SUBSCRIPTION,
    Anomaly,
    Outcome,
    Report,
    TxnKey,
)
from quasar.testing.history_model import Read as _Read
from quasar.testing.history_model import TxnRecord as _Txn
from quasar.testing.history_model import Write as _Write
from quasar.testing.history_order import (
    count_between,
    key_order_anomalies,
    order_anomalies,
)


class History:
    """An append-only record of one test run (single-threaded use, or one lock)."""

    def __init__(self, *, conflicts_are_anomalies: bool = False) -> None:
        """``conflicts_are_anomalies``: two different definite outcomes of one
        transaction are recorded as ``conflicting-outcome`` (a history of a broker
        under test) instead of raising (a bug of the caller)."""
        self._conflicts_are_anomalies = conflicts_are_anomalies
        self._recorded: list[Anomaly] = []
        self._write_done: dict[str, int] = {}
        self._faults: list[tuple[float, float, str]] = []
        self._events: list[dict[str, Any]] = []
        self._inputs: dict[str, str | None] = {}  # id -> subscription it is read on
        self._txns: dict[TxnKey, _Txn] = {}
        self._writes: dict[str, _Write] = {}
        self._reads: list[_Read] = []
        self._delivered: list[tuple[int, str, str]] = []  # (index, subscription, id)
        self._received: list[tuple[int, str, str]] = []  # during the run, same form
        self._disruptions: list[int] = []  # event numbers
        self._compacted = CompactedReads()

    # ------------------------------------------------------------------ recording

    def _event(self, **fields: Any) -> int:
        index = len(self._events)
        self._events.append({"i": index, **fields})
        return index

    def add_input(self, input_id: str, subscription: str = DEFAULT_SUBSCRIPTION) -> None:
        """An input message to be processed (consumed on ``subscription``).

        Raises:
            ValueError: the id was added before.
        """
        if input_id in self._inputs:
            raise ValueError(f"input {input_id!r} added twice")
        self._inputs[input_id] = subscription
        self._event(op="input", id=input_id, sub=subscription)

    def begin(
        self, txn: TxnKey, *, at: float | None = None, timeout_s: float | None = None
    ) -> None:
        """Start recording transaction ``txn`` (keys are unique per run).

        ``at`` (monotonic seconds) and ``timeout_s`` (the transaction's timeout)
        let the check bound how long it took to end.

        Raises:
            ValueError: ``txn`` was begun before.
        """
        if txn in self._txns:
            raise ValueError(f"transaction {txn!r} begun twice")
        index = self._event(op="begin", txn=_jsonable(txn))
        self._txns[txn] = _Txn(txn, index, begun_t=at, timeout_s=timeout_s)

    def committing(self, txn: TxnKey) -> None:
        """The writer is about to ask for ``txn``'s commit: nothing of it may be
        read before this (record before sending END_TXN).

        Raises:
            ValueError: ``txn`` was not begun.
        """
        t = self._txns.get(txn)
        if t is None:
            raise ValueError(f"commit of transaction {txn!r} that was not begun")
        index = self._event(op="committing", txn=_jsonable(txn))
        if t.committing_at is None:
            t.committing_at = index

    def write_done(self, value: str) -> None:
        """The broker acknowledged (receipted) ``value``."""
        self._write_done.setdefault(value, self._event(op="write_done", value=value))

    def fault(self, start: float, end: float, what: str) -> None:
        """A fault was active from ``start`` to ``end`` (monotonic seconds): a
        transaction overlapping it may take that much longer to end."""
        self._faults.append((start, end, what))

    def no_progress(self, what: str) -> None:
        """A consumer did not read what it had to once the faults stopped."""
        self._recorded.append(Anomaly("no-progress", what))

    def write(
        self,
        txn: TxnKey | None,
        value: str,
        *,
        partition: str | None = None,
        source: str | None = None,
        producer: str | None = None,
        seq: int | None = None,
        key: str | None = None,
    ) -> None:
        """An output message sent (or about to be sent) in ``txn``.

        Record it *before* sending: a writer killed after sending must still be
        able to explain the value. ``producer``/``seq``: values of one producer
        with increasing ``seq`` must be read in that order on their partition.

        Raises:
            ValueError: the value was written before (values must be unique), or
                ``txn`` was not begun.
        """
        if value in self._writes:
            raise ValueError(f"value {value!r} written twice; values must be unique")
        if txn is not None:
            if txn not in self._txns:
                raise ValueError(f"write in transaction {txn!r} that was not begun")
            self._txns[txn].writes.append(value)
        index = self._event(
            op="write", txn=_jsonable(txn), value=value, partition=partition,
            source=source, producer=producer, seq=seq, key=key,
        )
        self._writes[value] = _Write(
            index, txn, value, partition, source, producer, seq, key
        )

    def ack(
        self, txn: TxnKey, input_id: str, subscription: str | None = None
    ) -> None:
        """Input ``input_id`` acknowledged inside ``txn`` (record before acking).

        Raises:
            ValueError: ``txn`` was not begun.
        """
        if txn not in self._txns:
            raise ValueError(f"ack in transaction {txn!r} that was not begun")
        sub = subscription or self._inputs.get(input_id) or DEFAULT_SUBSCRIPTION
        t = self._txns[txn]
        t.acks.append((sub, input_id))
        index = self._event(op="ack", txn=_jsonable(txn), id=input_id, sub=sub)
        t.ack_events.setdefault((sub, input_id), (index, None))

    def ack_done(self, txn: TxnKey, input_id: str, subscription: str | None = None) -> None:
        """The broker answered the ack recorded by :meth:`ack` (it is pending in
        ``txn`` from here on; see ``redelivered-after-commit``).

        Raises:
            ValueError: no such ack was recorded.
        """
        sub = subscription or self._inputs.get(input_id) or DEFAULT_SUBSCRIPTION
        t = self._txns.get(txn)
        if t is None or (sub, input_id) not in t.ack_events:
            raise ValueError(f"answer to an ack of {input_id!r} in {txn!r} never recorded")
        index = self._event(op="ack_done", txn=_jsonable(txn), id=input_id, sub=sub)
        intent, done = t.ack_events[(sub, input_id)]
        if done is None:
            t.ack_events[(sub, input_id)] = (intent, index)

    def disruption(self, what: str) -> None:
        """Consumers may have reconnected here (broker restart, consumer killed or
        asked for redelivery): the broker may dispatch again what was not yet
        acknowledged, and such a copy may reach the application later."""
        self._disruptions.append(self._event(op="disruption", what=what))

    def end(self, txn: TxnKey, outcome: Outcome, *, at: float | None = None) -> None:
        """What the writer learned about how ``txn`` ended.

        A later definite outcome replaces ``UNKNOWN`` (a retried commit that got an
        answer) and a later ``UNKNOWN`` changes nothing; two different definite
        outcomes are a bug of the caller.

        Raises:
            ValueError: ``txn`` was not begun, or it already has another definite
                outcome.
        """
        t = self._txns.get(txn)
        if t is None:
            raise ValueError(f"end of transaction {txn!r} that was not begun")
        if t.outcome not in (None, Outcome.UNKNOWN) and outcome not in (
            t.outcome, Outcome.UNKNOWN
        ):
            if not self._conflicts_are_anomalies:
                raise ValueError(
                    f"transaction {txn!r} {t.outcome.value}, then {outcome.value}"
                )
            self._event(op="end", txn=_jsonable(txn), outcome=outcome.value)
            self._recorded.append(Anomaly(
                "conflicting-outcome",
                f"transaction {txn!r} answered {t.outcome.value}, then {outcome.value}",
            ))
            return
        if t.outcome is None or t.outcome is Outcome.UNKNOWN:
            t.outcome = outcome
            t.ended_at = self._event(op="end", txn=_jsonable(txn), outcome=outcome.value)
            if outcome is not Outcome.UNKNOWN:
                t.ended_t = at

    def read(
        self,
        value: str,
        *,
        partition: str | None = None,
        position: Any = None,
        reader: str = DEFAULT_READER,
    ) -> None:
        """``reader`` received output ``value`` (at ``position`` of ``partition``).

        Positions must be comparable (tuples such as ``(ledger, entry, batch)``).
        """
        index = self._event(
            op="read", value=value, partition=partition,
            position=_jsonable(position), reader=reader,
        )
        self._reads.append(_Read(index, value, partition, position, reader))

    def delivered(
        self, input_id: str, subscription: str | None = None, *, final: bool = True
    ) -> None:
        """The input subscription delivered ``input_id``.

        ``final``: by the drain at the end of the run (what is still unacknowledged);
        otherwise a delivery to the processing consumer during the run, which only
        counts for ``redelivered-after-commit``.
        """
        sub = subscription or self._inputs.get(input_id) or DEFAULT_SUBSCRIPTION
        index = self._event(op="delivered", id=input_id, sub=sub, final=final)
        if final:
            self._delivered.append((index, sub, input_id))
        else:
            self._received.append((index, sub, input_id))

    def compaction_done(self, partition: str, horizon: tuple[int, int]) -> None:
        """A compaction of ``partition`` completed (durably) up to ``horizon``."""
        index = self._event(op="compaction_done", partition=partition,
                            horizon=list(horizon))
        self._compacted.compaction(index, partition, (horizon[0], horizon[1]))

    def compacted_pass_start(self, pass_id: str, partition: str) -> None:
        """A compacted reader is about to read ``partition`` from the earliest.

        Raises:
            ValueError: the pass was started before.
        """
        index = self._event(op="compacted_pass_start", pass_id=pass_id, partition=partition)
        self._compacted.start(index, pass_id, partition)

    def compacted_read(self, pass_id: str, value: str, *, position: Any) -> None:
        """Pass ``pass_id`` read ``value`` at ``position`` ((ledger, entry, batch)).

        Raises:
            ValueError: the pass was not started.
        """
        index = self._event(op="compacted_read", pass_id=pass_id, value=value,
                            position=_jsonable(position))
        self._compacted.read(index, pass_id, value, position)

    def compacted_pass_end(self, pass_id: str, *, complete: bool) -> None:
        """Pass ``pass_id`` ended; ``complete``: it read to the end of the partition.

        Raises:
            ValueError: the pass was not started.
        """
        self._event(op="compacted_pass_end", pass_id=pass_id, complete=complete)
        self._compacted.end(pass_id, complete)

    # ------------------------------------------------------------------ queries

    def outcome(self, txn: TxnKey) -> Outcome | None:
        t = self._txns.get(txn)
        return None if t is None else t.outcome

    def values_of(self, txn: TxnKey) -> list[str]:
        return list(self._txns[txn].writes)

    def to_jsonl(self) -> str:
        return "".join(json.dumps(e, sort_keys=True) + "\n" for e in self._events)

    # ------------------------------------------------------------------ checking

    def check(
        self,
        *,
        reader: str = DEFAULT_READER,
        require_all_inputs: bool = False,
        deliveries_recorded: bool = False,
        recovery_bound_s: float | None = None,
    ) -> Report:
        """Check ``reader``'s reads (a complete read of the output) against the writes.

        Args:
            recovery_bound_s: with transaction times recorded, a transaction must
                end within its timeout plus this plus the faults it overlapped.
            reader: the reader whose reads are taken as the final, complete view.
            require_all_inputs: every input must be reflected in the output exactly
                once (a run that processed everything).
            deliveries_recorded: the input subscription was drained at the end and
                every delivery recorded; an input is then either reflected in the
                output or delivered, exactly once, never both and never neither.
        """
        anomalies: list[Anomaly] = list(self._recorded)
        reads = [r for r in self._reads if r.reader == reader]
        read_count = Counter(r.value for r in reads)
        explained = 0

        # Reads against writes.
        for value, n in sorted(read_count.items()):
            if value not in self._writes:
                anomalies.append(Anomaly("phantom-read", f"{value!r} was never written"))
            if n > 1:
                if self._resend_explains(value, n):
                    explained += n - 1
                else:
                    anomalies.append(Anomaly("duplicate-read", f"{value!r} read {n} times"))
        for r in reads:
            w = self._writes.get(r.value)
            if w is not None and w.partition is not None and r.partition is not None \
                    and w.partition != r.partition:
                anomalies.append(Anomaly(
                    "misplaced", f"{r.value!r} written to {w.partition}, read on {r.partition}"
                ))

        # Transactions: known outcomes against reads; unknown ones all-or-nothing.
        resolved: dict[TxnKey, Outcome] = {}
        for t in self._txns.values():
            seen = [v for v in t.writes if read_count[v]]
            missing = [v for v in t.writes if not read_count[v]]
            if t.outcome is Outcome.ABORTED:
                resolved[t.key] = Outcome.ABORTED
                for v in seen:
                    anomalies.append(Anomaly(
                        "aborted-read", f"{v!r} of aborted transaction {t.key!r}"
                    ))
            elif t.outcome is Outcome.COMMITTED:
                resolved[t.key] = Outcome.COMMITTED
                for v in missing:
                    anomalies.append(Anomaly(
                        "lost-write", f"{v!r} of committed transaction {t.key!r} never read"
                    ))
            else:
                if seen and missing:
                    anomalies.append(Anomaly(
                        "torn",
                        f"transaction {t.key!r} ({(t.outcome or Outcome.UNKNOWN).value}): "
                        f"read {seen}, missing {missing}",
                    ))
                if not t.writes:
                    resolved[t.key] = Outcome.UNKNOWN
                else:
                    resolved[t.key] = Outcome.COMMITTED if seen else Outcome.ABORTED
        for w in self._writes.values():
            # Once receipts are recorded, only an acknowledged write must be read:
            # a send that failed may or may not have been stored.
            acked = not self._write_done or w.value in self._write_done
            if w.txn is None and acked and not read_count[w.value]:
                anomalies.append(Anomaly(
                    "lost-write", f"{w.value!r} (written outside a transaction) never read"
                ))

        anomalies.extend(order_anomalies(reads, self._writes))
        anomalies.extend(key_order_anomalies(reads, self._writes))
        anomalies.extend(self._input_anomalies(
            reads, resolved, require_all_inputs, deliveries_recorded
        ))
        live = [r for r in self._reads if r.reader != reader]
        anomalies.extend(self._live_read_anomalies(live))
        anomalies.extend(self._uncommitted_reads(self._reads))
        compacted = self._compacted.as_reads()
        anomalies.extend(self._live_read_anomalies(compacted))
        anomalies.extend(self._uncommitted_reads(compacted))
        anomalies.extend(compacted_anomalies(
            self._compacted, self._writes, reads, self._disruptions
        ))
        if recovery_bound_s is not None:
            anomalies.extend(self._overruns(recovery_bound_s))
        live_count = Counter((r.reader, r.value) for r in live)
        counts = {
            "inputs": len(self._inputs),
            "transactions": len(self._txns),
            "writes": len(self._writes),
            "reads": len(reads),
            "delivered": len(self._delivered),
            "committed": sum(1 for o in resolved.values() if o is Outcome.COMMITTED),
            "aborted": sum(1 for o in resolved.values() if o is Outcome.ABORTED),
            "explained-duplicates": explained,
            "live-reads": len(live),
            "live-redeliveries": sum(n - 1 for n in live_count.values()),
            **self._compacted.counts(),
        }
        return Report(anomalies, resolved, counts)

    def _resend_explains(self, value: str, n: int) -> bool:
        """A value written outside a transaction may be stored once per connection
        it was sent on: a disruption between its send and its receipt (or after the
        send, when no receipt came) explains one more copy each. A transactional
        send is appended once however often it is resent (scenario 38)."""
        w = self._writes.get(value)
        if w is None or w.txn is not None:
            return False
        done = self._write_done.get(value, len(self._events))
        return count_between(self._disruptions, w.index, done) >= n - 1

    def _live_read_anomalies(self, live: list[_Read]) -> list[Anomaly]:
        """Live consumers get redeliveries (their count is reported), but never a
        value no one wrote or one of an aborted transaction."""
        out: list[Anomaly] = []
        for r in live:
            w = self._writes.get(r.value)
            if w is None:
                out.append(Anomaly(
                    "phantom-read", f"{r.value!r} read by {r.reader} was never written"
                ))
            elif w.txn is not None and self._txns[w.txn].outcome is Outcome.ABORTED:
                out.append(Anomaly(
                    "aborted-read",
                    f"{r.value!r} of aborted transaction {w.txn!r} read by {r.reader}",
                ))
        return out

    def _uncommitted_reads(self, reads: list[_Read]) -> list[Anomaly]:
        if not any(t.committing_at is not None for t in self._txns.values()):
            return []  # the history does not say when commits were asked for
        out: list[Anomaly] = []
        for r in reads:
            w = self._writes.get(r.value)
            if w is None or w.txn is None:
                continue
            t = self._txns[w.txn]
            if t.committing_at is None or r.index < t.committing_at:
                when = "never asked to commit" if t.committing_at is None else (
                    "read before its commit was asked for"
                )
                out.append(Anomaly(
                    "uncommitted-read",
                    f"{r.value!r} of transaction {t.key!r} ({when}) read by {r.reader}",
                ))
        return out

    def _overruns(self, recovery_bound_s: float) -> list[Anomaly]:
        out: list[Anomaly] = []
        for t in self._txns.values():
            if t.begun_t is None or t.ended_t is None or t.timeout_s is None:
                continue
            begun, ended = t.begun_t, t.ended_t
            faulted = sum(
                max(0.0, min(end, ended) - max(start, begun))
                for start, end, _ in self._faults
            )
            allowed = t.timeout_s + recovery_bound_s + faulted
            if ended - begun > allowed:
                out.append(Anomaly(
                    "txn-overran",
                    f"transaction {t.key!r} took {ended - begun:.1f}s to end "
                    f"(timeout {t.timeout_s}s + recovery {recovery_bound_s}s + "
                    f"faults {faulted:.1f}s)",
                ))
        return out

    def _late_deliveries(self, t: _Txn, sub: str, input_id: str) -> list[Anomaly]:
        """Deliveries of ``input_id`` after committed ``t`` acked it.

        A delivery to the final drain (a consumer created after everything) is
        always wrong. One to the live consumer can be a copy the broker sent before
        it had the ack, when consumers reconnected after the application received
        the message and before the broker answered the ack: each disruption in
        that window excuses one late copy, and nothing else does.
        """
        assert t.ended_at is not None
        intent, done = t.ack_events.get((sub, input_id), (t.begun_at, None))
        window_end = done if done is not None else t.ended_at
        before = [i for i, s, d in self._received if s == sub and d == input_id and i < intent]
        window_start = before[-1] if before else -1
        excused = count_between(self._disruptions, window_start, window_end)
        late_live = [
            i for i, s, d in self._received if s == sub and d == input_id and i > t.ended_at
        ]
        late_final = [
            i for i, s, d in self._delivered if s == sub and d == input_id and i > t.ended_at
        ]
        unexplained = max(0, len(late_live) - excused) + len(late_final)
        if not unexplained:
            return []
        return [Anomaly(
            "redelivered-after-commit",
            f"{input_id!r} on {sub!r} delivered {len(late_live) + len(late_final)} "
            f"time(s) after transaction {t.key!r} that acked it committed "
            f"({excused} excused by reconnects before the ack was answered)",
        )]

    def _input_anomalies(
        self,
        reads: list[_Read],
        resolved: dict[TxnKey, Outcome],
        require_all_inputs: bool,
        deliveries_recorded: bool,
    ) -> list[Anomaly]:
        out: list[Anomaly] = []
        reflected: dict[str, list[str]] = defaultdict(list)
        for r in reads:
            w = self._writes.get(r.value)
            if w is not None and w.source is not None:
                reflected[w.source].append(r.value)
        delivered_count = Counter((sub, i) for _, sub, i in self._delivered)
        committed_acks: dict[tuple[str, str], list[_Txn]] = defaultdict(list)
        for t in self._txns.values():
            if resolved.get(t.key) is Outcome.COMMITTED:
                for key in dict.fromkeys(t.acks):
                    committed_acks[key].append(t)

        for (sub, input_id), txns in sorted(committed_acks.items(), key=lambda kv: kv[0]):
            if len(txns) > 1:
                out.append(Anomaly(
                    "double-ack",
                    f"{input_id!r} on {sub!r} acked by committed transactions "
                    f"{[t.key for t in txns]}",
                ))
            # Only a commit the writer was told about has a time; the ack must hold
            # from then on.
            for t in txns:
                if t.outcome is Outcome.COMMITTED and t.ended_at is not None:
                    out.extend(self._late_deliveries(t, sub, input_id))
            if deliveries_recorded and delivered_count[(sub, input_id)]:
                out.append(Anomaly(
                    "ack-not-applied",
                    f"{input_id!r} acked by committed {[t.key for t in txns]} is still "
                    f"delivered on {sub!r}",
                ))

        for input_id, sub in self._inputs.items():
            sub = sub or DEFAULT_SUBSCRIPTION
            n_out = len(reflected.get(input_id, ()))
            n_del = delivered_count[(sub, input_id)]
            if n_out > 1:
                out.append(Anomaly(
                    "duplicate-processing",
                    f"{input_id!r} reflected {n_out} times: {reflected[input_id]}",
                ))
            if deliveries_recorded and n_del > 1:
                out.append(Anomaly(
                    "duplicate-delivery", f"{input_id!r} delivered {n_del} times on {sub!r}"
                ))
            if deliveries_recorded and n_out and n_del and (sub, input_id) not in committed_acks:
                out.append(Anomaly(
                    "ack-not-applied",
                    f"{input_id!r} is reflected in the output and still delivered on {sub!r}",
                ))
            if require_all_inputs:
                if n_out == 0:
                    kind = "unprocessed-input" if n_del else "lost-input"
                    out.append(Anomaly(kind, f"{input_id!r} not reflected in the output"))
                elif n_del:
                    out.append(Anomaly(
                        "unprocessed-input",
                        f"{input_id!r} reflected but still delivered on {sub!r}",
                    ))
            elif deliveries_recorded and n_out == 0 and n_del == 0:
                out.append(Anomaly(
                    "lost-input",
                    f"{input_id!r} neither reflected in the output nor delivered on {sub!r}",
                ))
        return out


def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, str | int | float | bool):
        return x
    if isinstance(x, Iterable):
        return [_jsonable(v) for v in x]
    return repr(x)


__all__ = ["Anomaly", "History", "Outcome", "Report"]
