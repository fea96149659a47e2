"""The pending-ack rules against a set-based reference model (hypothesis).

The model knows entries as sets of batch members and nothing about bitsets, logs or
cursors. Random sequences of transactional acks (individual, batch-index,
cumulative), commits, aborts, normal acks and restarts run against both; after every
step the outcome, the cursor's acknowledged members and the pending acks must agree.
A restart rebuilds the handle from its log, so agreement after it is INV-REC.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quasar.errors import TransactionConflict
from quasar.protocol import ack_set as ack_sets
from quasar.transaction import TxnID
from quasar.transaction.pending_ack import masks

from .helpers import PaEnv, batch_ack_set

SIZES = [1, 3, 1, 70, 2, 5]  # members per entry; 1 = not a batch
SLOTS = 3  # concurrent transactions; a slot gets a fresh transaction after each end

entries = st.integers(0, len(SIZES) - 1)
slots = st.integers(0, SLOTS - 1)


@st.composite
def members(draw: st.DrawFn, entry: int) -> frozenset[int] | None:
    """``None``: the whole entry; else some members (possibly none, or all)."""
    n = SIZES[entry]
    if n == 1 or draw(st.integers(0, 3)) == 0:
        return None
    # Low members mostly, so acks of one batch collide often.
    return frozenset(draw(st.sets(st.integers(0, min(n, 6) - 1), max_size=min(n, 6))))


@st.composite
def operations(draw: st.DrawFn) -> tuple[object, ...]:
    kind = draw(st.sampled_from(["ack", "ack", "ack", "cum", "commit", "abort",
                                 "normal", "restart"]))
    if kind in ("ack", "normal"):
        e = draw(entries)
        return (kind, draw(slots), e, draw(members(e)))
    if kind == "cum":
        return (kind, draw(slots), draw(entries))
    if kind in ("commit", "abort"):
        return (kind, draw(slots))
    return (kind,)


@dataclass
class Model:
    acked: list[set[int]] = field(default_factory=lambda: [set() for _ in SIZES])
    pending: dict[int, dict[int, set[int]]] = field(default_factory=dict)
    cum: tuple[int, int] | None = None  # (txn, entry)

    def all(self, e: int) -> set[int]:
        return set(range(SIZES[e]))

    def md(self) -> int:
        k = -1
        while k + 1 < len(SIZES) and self.acked[k + 1] == self.all(k + 1):
            k += 1
        return k

    def live_cum(self) -> tuple[int, int] | None:
        return self.cum if self.cum is not None and self.cum[1] > self.md() else None

    def ack(self, t: int, e: int, m: frozenset[int] | None) -> str:
        if m is not None and not m:
            return "ok"  # takes nothing
        if m is not None and set(m) == self.all(e):
            m = None  # an ack set with every member clear is empty: a whole-entry ack
        want = self.all(e) if m is None else set(m)
        if self.acked[e] == self.all(e) or (m is not None and want & self.acked[e]):
            return "conflict"
        for other, held in self.pending.items():
            if other != t and held.get(e, set()) & want:
                return "conflict"
        cum = self.live_cum()
        if cum is not None and cum[0] != t and e <= cum[1]:
            return "conflict"
        self.pending.setdefault(t, {}).setdefault(e, set()).update(want)
        return "ok"

    def cumulative(self, t: int, e: int) -> str:
        cum = self.live_cum()
        if e <= self.md():
            return "conflict"
        if cum is not None and (cum[0] != t or e < cum[1]):
            return "conflict"
        for other, held in self.pending.items():
            if other != t and any(x <= e and s for x, s in held.items()):
                return "conflict"
        self.cum = (t, e)
        return "ok"

    def end(self, t: int, commit: bool) -> tuple[list[int], int | None]:
        held = self.pending.pop(t, {})
        cum = self.cum if self.cum is not None and self.cum[0] == t else None
        if cum is not None:
            self.cum = None
        if commit:
            for e, m in held.items():
                self.acked[e] |= m
            if cum is not None:
                for e in range(cum[1] + 1):
                    self.acked[e] = self.all(e)
        live = cum if cum is not None and cum[1] > self.md() else None
        return sorted(e for e, m in held.items() if m), None if live is None else live[1]

    def normal(self, e: int, m: frozenset[int] | None) -> None:
        held: set[int] = set()
        for acks in self.pending.values():
            held |= acks.get(e, set())
        if held == self.all(e):
            return
        self.acked[e] |= (self.all(e) if m is None else set(m)) - held


def cursor_members(env: PaEnv, e: int) -> set[int]:
    p = env.p(e)
    if env.cursor.is_acknowledged(p):
        return set(range(SIZES[e]))
    words = env.cursor.batch_ack_set(p)
    if words is None:
        return set()
    bits = ack_sets.words_to_bits(words)
    return {i for i in range(SIZES[e]) if not (bits >> i) & 1}


def pending_of(env: PaEnv, txns: dict[int, TxnID]) -> dict[int, dict[int, set[int]]]:
    index = {env.p(e): e for e in range(len(SIZES))}
    slot_of = {t: s for s, t in txns.items()}
    out: dict[int, dict[int, set[int]]] = {}
    for txn_id, acks in env.handle.pending_state.txns():
        for pos, (mask, _) in acks.individual.items():
            e = index[pos]
            got = set(range(SIZES[e])) if mask == masks.WHOLE else {
                i for i in range(SIZES[e]) if (mask >> i) & 1
            }
            out.setdefault(slot_of[txn_id], {})[e] = got
    return out


def ack_request(e: int, m: frozenset[int] | None) -> tuple[int | None, list[int] | None]:
    if m is None:
        return (SIZES[e] if SIZES[e] > 1 else None), None
    return SIZES[e], batch_ack_set(SIZES[e], set(m))


def apply_normal_ack(env: PaEnv, e: int, m: frozenset[int] | None) -> None:
    """What the broker's ack path does with a normal individual ack."""
    p = env.p(e)
    _, requested = ack_request(e, m)
    decision = env.handle.filter_normal_ack(p, requested)
    if not decision.apply:
        return
    if decision.ack_set:
        current = env.cursor.batch_ack_set(p)
        merged = ack_sets.and_(current, decision.ack_set) if current else decision.ack_set
        if not ack_sets.is_all_acked(merged):
            env.cursor.set_batch_ack(p, merged)
            return
    env.cursor.delete([p])


async def run(ops: list[tuple[object, ...]]) -> None:
    env = PaEnv(entries=0)
    await env.open_ledgers()
    env.positions = [await env.topic.add_entry(b"m") for _ in SIZES]
    await env.start()
    model = Model()
    counter = iter(range(1, 10_000))
    txns = {s: TxnID(0, next(counter)) for s in range(SLOTS)}
    try:
        for op in ops:
            kind = op[0]
            if kind == "ack":
                _, s, e, m = op
                assert isinstance(s, int) and isinstance(e, int)
                size, words = ack_request(e, m)  # type: ignore[arg-type]
                expected = model.ack(s, e, m)  # type: ignore[arg-type]
                got = await outcome(env.handle.individual_ack(txns[s], [(env.p(e), size, words)]))
                assert got == expected, op
            elif kind == "cum":
                _, s, e = op
                assert isinstance(s, int) and isinstance(e, int)
                expected = model.cumulative(s, e)
                got = await outcome(env.handle.cumulative_ack(txns[s], env.p(e)))
                assert got == expected, op
            elif kind in ("commit", "abort"):
                s = op[1]
                assert isinstance(s, int)
                positions, cum = model.end(s, kind == "commit")
                if kind == "commit":
                    await env.handle.commit(txns[s], -1)
                else:
                    result = await env.handle.abort(txns[s], -1)
                    assert list(result.positions) == [env.p(e) for e in positions], op
                    got_cum = result.cumulative_position
                    if got_cum is not None and got_cum <= env.cursor.mark_delete_position:
                        got_cum = None  # moot: the cursor had passed it
                    assert got_cum == (None if cum is None else env.p(cum)), op
                txns[s] = TxnID(0, next(counter))
            elif kind == "normal":
                _, _, e, m = op
                assert isinstance(e, int)
                model.normal(e, m)  # type: ignore[arg-type]
                apply_normal_ack(env, e, m)  # type: ignore[arg-type]
            else:
                await env.restart()
            check(env, model, txns, op)
    finally:
        await env.close()


def check(env: PaEnv, model: Model, txns: dict[int, TxnID], op: object) -> None:
    assert [cursor_members(env, e) for e in range(len(SIZES))] == model.acked, op
    want = {s: {e: m for e, m in held.items() if m} for s, held in model.pending.items()}
    assert pending_of(env, txns) == {s: h for s, h in want.items() if h}, op
    cum = env.handle.pending_state.cumulative
    if cum is not None and cum[1] <= env.cursor.mark_delete_position:
        cum = None
    live = model.live_cum()
    expected = None if live is None else (txns[live[0]], env.p(live[1]))
    assert cum == expected, op


async def outcome(request: object) -> str:
    try:
        await request  # type: ignore[misc]
    except TransactionConflict:
        return "conflict"
    return "ok"


# derandomize: the same examples on every run (a flaky test is a bug); wider random
# searches are run by hand with a larger max_examples.
@settings(
    max_examples=300, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(operations(), max_size=40))
# Cases earlier versions got wrong: an ack set naming every member of a partly acked
# batch; a retry answered from the transaction's own whole-entry ack.
@example([("normal", 0, 1, frozenset({0})), ("ack", 0, 1, frozenset({0, 1, 2}))])
@example([("ack", 0, 4, frozenset({1})), ("commit", 0), ("ack", 0, 4, None),
          ("ack", 0, 4, frozenset({1}))])
def test_handle_agrees_with_the_model(ops: list[tuple[object, ...]]) -> None:
    asyncio.run(run(ops))
