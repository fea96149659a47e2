"""Model test: random sends, commits, aborts, late sends, snapshots and restarts
against a simple model of what a read-committed consumer may see.

The model: entries in write order, each plain or of a transaction. A consumer may
see the longest prefix that contains no entry of a still-open transaction, minus the
entries of aborted transactions, in write order. The coordinator is simulated
truthfully (ids never reused, the low watermark sent with every end).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quasar.errors import InvalidTxnStatus, NotAllowedError
from quasar.transaction import TxnAction, TxnID

from .helpers import TbEnv, entry

SLOTS = 4
slots = st.integers(0, SLOTS - 1)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), slots),
        st.tuples(st.just("plain"), st.just(0)),
        st.tuples(st.just("commit"), slots),
        st.tuples(st.just("abort"), slots),
        st.tuples(st.just("late"), slots),
        st.tuples(st.just("snapshot"), st.just(0)),
        st.tuples(st.just("restart"), st.just(0)),
        st.tuples(st.just("tick"), st.just(0)),
    ),
    max_size=40,
)


class Model:
    def __init__(self) -> None:
        self.entries: list[tuple[bytes, TxnID | None]] = []
        self.status: dict[TxnID, str] = {}  # open / committed / aborted
        self.slot: dict[int, TxnID] = {}
        self.next_id = 0
        self.fenced_here: set[TxnID] = set()  # ended and known to refuse late sends

    def txn_for(self, slot: int) -> TxnID:
        txn = self.slot.get(slot)
        if txn is None or self.status[txn] != "open":
            txn = TxnID(0, self.next_id)
            self.next_id += 1
            self.slot[slot] = txn
            self.status[txn] = "open"
        return txn

    def low_watermark(self) -> int:
        open_ids = [t.least_bits for t, s in self.status.items() if s == "open"]
        return min(open_ids) - 1 if open_ids else self.next_id - 1

    def visible(self) -> list[bytes]:
        out = []
        for payload, txn in self.entries:
            if txn is not None and self.status[txn] == "open":
                break
            if txn is None or self.status[txn] == "committed":
                out.append(payload)
        return out


async def run(steps: list[tuple[str, int]]) -> None:
    env = TbEnv()
    model = Model()
    try:
        await env.ready()
        for n, (op, slot) in enumerate(steps):
            payload = f"m{n}".encode()
            if op == "send":
                txn = model.txn_for(slot)
                await env.tb.append_transactional(txn, entry(payload, txn))
                model.entries.append((payload, txn))
            elif op == "plain":
                await env.tb.append_non_transactional(entry(payload))
                model.entries.append((payload, None))
            elif op in ("commit", "abort"):
                action = TxnAction.COMMIT if op == "commit" else TxnAction.ABORT
                want = "committed" if op == "commit" else "aborted"
                found = model.slot.get(slot)
                # None: ends a transaction never sent here.
                txn = found if found is not None else model.txn_for(slot)
                lwm = model.low_watermark()
                if model.status[txn] not in ("open", want):
                    # A coordinator never does this. Above the low watermark the
                    # buffer refuses; at or below it the id is forgotten and the end
                    # is answered as done. Either way nothing may change.
                    if txn.least_bits > lwm:
                        with pytest.raises(InvalidTxnStatus):
                            await env.tb.end_txn(txn, action, lwm)
                    else:
                        try:
                            await env.tb.end_txn(txn, action, lwm)
                        except InvalidTxnStatus:
                            pass
                    assert await env.visible() == model.visible()
                    continue
                await env.tb.end_txn(txn, action, lwm)
                model.status[txn] = want
                model.fenced_here.add(txn)
            elif op == "late":
                late = model.slot.get(slot)
                if late is None or late not in model.fenced_here:
                    continue
                with pytest.raises(NotAllowedError):
                    await env.tb.append_transactional(late, entry(payload, late))
            elif op == "snapshot":
                await env.tb.take_snapshot()
            elif op == "restart":
                await env.restart()
                # After a restart, aborted ids are still refused (the aborted set is
                # in the snapshot) and so is anything at or below the low watermark
                # the buffer was told (also in the snapshot); a committed id above it
                # may be forgotten, as in Pulsar.
                model.fenced_here = {
                    t for t in model.fenced_here
                    if model.status[t] == "aborted" or t.least_bits <= env.tb.low_watermark(0)
                }
            elif op == "tick":
                await env.sched.advance(env.config.snapshot_min_time_in_millis)
            assert await env.visible() == model.visible(), (n, op)
        # End everything still open: all committed data shows, in write order.
        for txn, status in list(model.status.items()):
            if status == "open":
                await env.tb.end_txn(txn, TxnAction.COMMIT, model.low_watermark())
                model.status[txn] = "committed"
        assert await env.visible() == model.visible()
        assert env.tb.ongoing_count() == 0
        assert env.tb.max_read_position == env.ml.last_confirmed_entry
        # Idempotent ends: never two markers for one transaction.
        counts = Counter(t for _, t in await env.markers())
        assert all(c == 1 for c in counts.values()), counts
    finally:
        await env.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_visibility_model(steps: list[tuple[str, int]]) -> None:
    asyncio.run(run(steps))
