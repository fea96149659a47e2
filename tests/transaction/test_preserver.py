"""TerminatedTxnPreserver on its own: format, keys per owner and client name,
append/flush, trimming, expiry, loading, failures and bounds, on a virtual clock and an
in-memory store."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.clock import ManualClock
from quasar.errors import CorruptRecordError, TransactionPreserverClosed
from quasar.transaction import TxnID, TxnStatus, VirtualScheduler
from quasar.transaction.coordinator.ownership import ANONYMOUS, Caller
from quasar.transaction.coordinator.preserver import (
    MemoryPreserverStore,
    TerminatedTxnPreserver,
    preserved_status,
    terminated_txn_state_topic,
)
from quasar.transaction.coordinator.preserver_format import (
    TerminatedTxn,
    decode_terminated,
    encode_entries,
    encode_entry,
    encode_terminated,
    entry_end_ms,
    entry_status,
    parse_preserver_key,
    preserver_key,
)
from quasar.transaction.scheduler import settle

HOUR_MS = 3_600_000
TC = 3
S = TxnStatus


class Env:
    def __init__(self, count: int = 4, store: MemoryPreserverStore | None = None) -> None:
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.store = store if store is not None else MemoryPreserverStore()
        self.count = count

    def preserver(self, count: int | None = None) -> TerminatedTxnPreserver:
        return TerminatedTxnPreserver(
            TC,
            self.store,
            self.clock,
            self.sched,
            persist_count=self.count if count is None else count,
            persist_time_ms=72 * HOUR_MS,
            expire_check_interval_ms=300_000,
            flush_timeout_ms=10_000,
        )

    async def loaded(self, count: int | None = None) -> TerminatedTxnPreserver:
        p = self.preserver(count)
        await p.load()
        p.start()
        return p


def txn(least: int) -> TxnID:
    return TxnID(TC, least)


# ----------------------------------------------------------------------------- format


def test_format_round_trip_and_layout() -> None:
    entries = [
        TerminatedTxn(txn(1), S.COMMITTED, 1_700_000_000_000),
        TerminatedTxn(TxnID(TC, 2**64 - 1), S.ABORTED, 5),
    ]
    data = encode_terminated(entries)
    assert len(data) == 8 + 25 * 2
    assert data[:4] == b"\x50\x54\x01\x00"
    assert decode_terminated(data) == entries
    assert decode_terminated(encode_terminated([])) == []
    # The preserver keeps entries encoded and joins them; the bytes are the same.
    encoded = [
        encode_entry(TC, e.txn_id.least_bits, int(e.status), e.end_time_ms) for e in entries
    ]
    assert encode_entries(encoded) == data
    assert encode_entries([]) == encode_terminated([])
    assert [entry_status(b) for b in encoded] == [int(S.COMMITTED), int(S.ABORTED)]
    assert [entry_end_ms(b) for b in encoded] == [1_700_000_000_000, 5]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d[:7],  # shorter than the header
        lambda d: b"\x00\x00" + d[2:],  # magic
        lambda d: d[:2] + b"\x02" + d[3:],  # unknown version
        lambda d: d[:-1],  # length does not match the count
        lambda d: d[:24] + b"\x01" + d[25:],  # a non-terminal status (COMMITTING)
    ],
)
def test_format_refuses_corrupt_values(mutate: object) -> None:
    data = encode_terminated([TerminatedTxn(txn(1), S.COMMITTED, 7)])
    with pytest.raises(CorruptRecordError):
        decode_terminated(mutate(data))  # type: ignore[operator]


def test_topic_name_and_status_mapping() -> None:
    assert terminated_txn_state_topic(7) == "persistent://pulsar/system/__terminated_txn_state_7"
    assert preserved_status(S.COMMITTING) is S.COMMITTED
    assert preserved_status(S.COMMITTED) is S.COMMITTED
    assert preserved_status(S.ABORTING) is S.ABORTED
    assert preserved_status(S.ABORTED) is S.ABORTED
    with pytest.raises(AssertionError):
        preserved_status(S.OPEN)


# ----------------------------------------------------------------------------- append / find


async def test_append_counts_ending_as_ended_and_repeats_are_noops() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 100)
    p.append(txn(2), S.ABORTING, "a", 200)
    p.append(txn(1), S.COMMITTED, "a", 999)  # a re-drive: same decision, kept as is
    assert p.find("a", txn(1)) == TerminatedTxn(txn(1), S.COMMITTED, 100)
    assert p.find("a", txn(2)) == TerminatedTxn(txn(2), S.ABORTED, 200)
    assert p.find("b", txn(1)) is None  # another client's name
    assert p.find(None, txn(1)) is None
    assert p.find("a", TxnID(TC + 1, 1)) is None  # another coordinator's id
    assert p.stats.appends == 2 and len(p) == 2 and p.stats.client_names == 1
    with pytest.raises(AssertionError):
        p.append(txn(1), S.ABORTING, "a", 300)  # a decision never changes


async def test_keeps_the_last_count_per_client_name() -> None:
    env = Env(count=3)
    p = await env.loaded()
    for i in range(5):
        p.append(txn(i), S.COMMITTING, "a", i)
    p.append(txn(10), S.ABORTING, "b", 10)
    assert [t.txn_id.least_bits for t in p.terminated("a")] == [2, 3, 4]
    assert p.find("a", txn(1)) is None
    assert p.stats.trimmed == 2 and len(p) == 4
    await p.flush()
    assert [t.txn_id.least_bits for t in decode_terminated(env.store.data["a"])] == [2, 3, 4]


# ----------------------------------------------------------------------------- flush


async def test_flush_writes_one_message_per_dirty_name_and_coalesces() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 1)
    p.append(txn(2), S.COMMITTING, "a", 2)
    p.append(txn(3), S.ABORTING, "b", 3)
    await p.flush()
    assert sorted(env.store.writes) == ["a", "b"]
    await p.flush()  # nothing new: no write
    assert len(env.store.writes) == 2
    # Several flushers while one round is in flight: at most one more round.
    env.store.hold()
    p.append(txn(4), S.COMMITTING, "a", 4)
    first = asyncio.ensure_future(p.flush())
    await settle()
    p.append(txn(5), S.COMMITTING, "a", 5)
    p.append(txn(6), S.COMMITTING, "a", 6)
    more = [asyncio.ensure_future(p.flush()) for _ in range(5)]
    await settle()
    env.store.release()
    await asyncio.gather(first, *more)
    assert env.store.writes[2:] == ["a", "a"]
    assert [t.txn_id.least_bits for t in decode_terminated(env.store.data["a"])] == [1, 2, 4, 5, 6][-4:]
    assert p.stats.flushes == 3 and p.stats.messages_written == 4
    (latency,) = p.stats.flush_latency.collect()
    assert [s.value for s in latency.samples if s.name.endswith("_count")] == [3.0]


async def test_a_flush_does_not_wait_for_a_round_that_cannot_cover_it() -> None:
    """Rounds pipeline: while one write is stuck, a flush of a later change starts its
    own round at once (and that round carries the earlier change too)."""
    env = Env()
    p = await env.loaded()
    started: list[str] = []
    write = env.store.write

    async def recording_write(key: str, value: bytes) -> None:
        started.append(key)
        await write(key, value)

    env.store.write = recording_write  # type: ignore[method-assign]
    env.store.hold()
    p.append(txn(1), S.COMMITTING, "a", 1)
    first = asyncio.ensure_future(p.flush())
    await settle()
    assert started == ["a"] and not first.done()
    p.append(txn(2), S.COMMITTING, "a", 2)
    second = asyncio.ensure_future(p.flush())
    await settle()
    assert started == ["a", "a"]  # the second round is in flight beside the first
    env.store.release()
    await asyncio.gather(first, second)
    assert [t.txn_id.least_bits for t in decode_terminated(env.store.data["a"])] == [1, 2]
    assert p.stats.flushes == 2


async def test_store_failure_fails_the_flush_and_keeps_the_change() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 1)
    env.store.fail_writes(1)
    with pytest.raises(TransactionPreserverClosed, match="injected failure"):
        await p.flush()
    assert "a" not in env.store.data and p.stats.flush_failures == 1
    await p.flush()  # the change is still dirty and goes out now
    assert decode_terminated(env.store.data["a"])[0].txn_id == txn(1)


async def test_a_stuck_store_times_the_flush_out_instead_of_hanging() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 1)
    env.store.hold()
    flushing = asyncio.ensure_future(p.flush())
    await env.sched.advance(9_999)
    assert not flushing.done()
    await env.sched.advance(1)
    with pytest.raises(TransactionPreserverClosed, match="longer than 10000 ms"):
        await flushing
    env.store.release()
    await settle()
    await p.flush()  # the round that was stuck completed; nothing left to write
    assert list(env.store.data) == ["a"]


async def test_close_fails_pending_and_later_calls() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 1)
    env.store.hold()
    flushing = asyncio.ensure_future(p.flush())
    await settle()
    p.close()
    with pytest.raises(TransactionPreserverClosed, match="closed"):
        await flushing
    with pytest.raises(TransactionPreserverClosed):
        p.append(txn(2), S.COMMITTING, "a", 2)
    with pytest.raises(TransactionPreserverClosed):
        await p.flush()
    env.store.release()
    await settle()


async def test_disabled_preserver_does_nothing() -> None:
    for p in (
        TerminatedTxnPreserver(TC, None, ManualClock(), VirtualScheduler(ManualClock()),
                               persist_count=64, persist_time_ms=1,
                               expire_check_interval_ms=1, flush_timeout_ms=1),
        Env().preserver(count=0),
    ):
        await p.load()
        p.start()
        assert not p.enabled
        p.append(txn(1), S.COMMITTING, "a", 1)
        await p.flush()
        assert p.find("a", txn(1)) is None and len(p) == 0


# ----------------------------------------------------------------------------- load


async def test_load_restores_drops_expired_and_cuts_to_count() -> None:
    env = Env(count=4)
    p = await env.loaded()
    for i in range(4):
        p.append(txn(i), S.COMMITTING if i % 2 else S.ABORTING, "a", env.clock.wall_ms())
    p.append(txn(9), S.COMMITTING, "old", env.clock.wall_ms())
    await p.flush()
    p.close()
    env.clock.advance(10 * HOUR_MS)
    # Newer entries of "old" are not there: move time so that "old" alone expires.
    q = await env.loaded(count=2)
    assert [t.txn_id.least_bits for t in q.terminated("a")] == [2, 3]
    assert q.find("a", txn(3)) == TerminatedTxn(txn(3), S.COMMITTED, env.clock.wall_ms() - 10 * HOUR_MS)
    assert q.stats.restored == 3 and q.stats.trimmed == 2
    await q.flush()  # the shortened name is written back
    assert [t.txn_id.least_bits for t in decode_terminated(env.store.data["a"])] == [2, 3]
    q.close()
    env.clock.advance(63 * HOUR_MS)  # 73 h after the decisions
    r = await env.loaded()
    assert len(r) == 0 and r.stats.expirations == 3
    await r.flush()
    assert env.store.data == {}  # tombstones for both names


async def test_load_drops_unreadable_values_and_refuses_an_unreadable_store() -> None:
    env = Env()
    env.store.data["bad"] = b"not a record"
    env.store.data["good"] = encode_terminated(
        [TerminatedTxn(txn(1), S.COMMITTED, env.clock.wall_ms())]
    )
    p = await env.loaded()
    assert p.stats.corrupt == 1 and p.find("good", txn(1)) is not None
    await p.flush()
    assert "bad" not in env.store.data
    env.store.fail_reads()
    with pytest.raises(TransactionPreserverClosed, match="cannot read"):
        await env.preserver().load()


# ----------------------------------------------------------------------------- expiry and bounds


async def test_expiry_runs_on_its_interval_and_writes_tombstones() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", env.clock.wall_ms())
    await p.flush()
    await env.sched.advance(60 * HOUR_MS)
    p.append(txn(2), S.ABORTING, "a", env.clock.wall_ms())
    p.append(txn(3), S.ABORTING, "b", env.clock.wall_ms())
    await p.flush()
    # txn 1 is 72 h old now; the next check (every 300 s) drops it.
    await env.sched.advance(12 * HOUR_MS)
    assert p.find("a", txn(1)) is not None  # exactly 72 h is not older than 72 h
    await env.sched.advance(300_000)
    assert p.find("a", txn(1)) is None and p.find("a", txn(2)) is not None
    assert [t.txn_id.least_bits for t in decode_terminated(env.store.data["a"])] == [2]
    await env.sched.advance(60 * HOUR_MS)  # txns 2 and 3 are older than 72 h now
    assert len(p) == 0 and p.client_names() == []
    assert env.store.data == {} and p.stats.expirations == 3
    p.close()


async def test_thousands_of_client_names_stay_bounded() -> None:
    env = Env(count=4)
    p = await env.loaded()
    names = [f"client-{i}" for i in range(5_000)]
    seq = 0
    for _round in range(6):  # 6 ends per name, 4 kept
        for name in names:
            p.append(txn(seq), S.COMMITTING if seq % 3 else S.ABORTING, name,
                     env.clock.wall_ms())
            seq += 1
        await p.flush()
        await env.sched.advance(HOUR_MS)
    assert len(p) == 5_000 * 4 == sum(len(p.terminated(n)) for n in names)
    assert p.stats.client_names == 5_000 and len(env.store.data) == 5_000
    assert p.stats.trimmed == 5_000 * 2
    # Nobody ends anything any more: after the persist time everything is gone.
    await env.sched.advance(72 * HOUR_MS)
    assert len(p) == 0 and p.client_names() == [] and env.store.data == {}
    assert p.stats.entries == 0 and p.stats.client_names == 0
    p.close()


async def test_wait_idle_lets_the_write_in_flight_land_but_never_hangs() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", 1)
    env.store.hold()
    flushing = asyncio.ensure_future(p.flush())
    await settle()
    p.close()
    idle = asyncio.ensure_future(p.wait_idle())
    await settle()
    assert not idle.done()
    env.store.release()
    await idle
    assert "a" in env.store.data  # it landed before wait_idle returned
    with pytest.raises(TransactionPreserverClosed):
        await flushing
    # A store that never answers: wait_idle gives up after flush_timeout_ms.
    q = await env.loaded()
    q.append(txn(2), S.COMMITTING, "a", 2)
    env.store.hold()
    stuck = asyncio.ensure_future(q.flush())
    await settle()
    q.close()
    idle = asyncio.ensure_future(q.wait_idle())
    await env.sched.advance(10_000)
    await idle
    env.store.release()
    await asyncio.gather(stuck, return_exceptions=True)


# ----------------------------------------------------------------------------- keys: owner and name

_names = st.text(min_size=1, max_size=20)
_owners = st.none() | st.text(min_size=1, max_size=20)


@given(_owners, _names, _owners, _names)
def test_a_key_names_exactly_one_owner_and_client_name(
    owner: str | None, name: str, other_owner: str | None, other_name: str
) -> None:
    key = preserver_key(owner, name)
    assert parse_preserver_key(key) == (owner, name)
    if (owner, name) != (other_owner, other_name):
        assert preserver_key(other_owner, other_name) != key


def test_key_layout() -> None:
    # Without an owner the key is the bare client name: stores written before
    # owners were kept load unchanged.
    assert preserver_key(None, "etl-7") == "etl-7"
    assert preserver_key("alice", "etl-7") == '\x00["alice","etl-7"]'
    assert preserver_key(None, "\x00odd") == '\x00[null,"\\u0000odd"]'
    # A role named like another key's JSON cannot collide with it.
    assert preserver_key("a", 'b","c') != preserver_key('a","b', "c")
    # A NUL-prefixed key that is not the JSON form is a bare client name.
    assert parse_preserver_key("\x00not json") == (None, "\x00not json")
    assert parse_preserver_key('\x00["a"]') == (None, '\x00["a"]')


async def test_entries_are_kept_per_owner_and_client_name() -> None:
    env = Env(count=2)
    p = await env.loaded()
    now = env.clock.wall_ms()
    p.append(txn(1), S.COMMITTING, "a", now, owner="alice")
    for i in range(2, 6):  # bob's ends do not push alice's out
        p.append(txn(i), S.ABORTING, "a", now, owner="bob")
    p.append(txn(9), S.COMMITTING, "a", now)  # no owner: the bare name
    await p.flush()
    assert sorted(env.store.data) == sorted(
        [preserver_key("alice", "a"), preserver_key("bob", "a"), "a"]
    )
    assert [t.txn_id for t in decode_terminated(env.store.data[preserver_key("bob", "a")])] == [
        txn(4), txn(5)
    ]
    alice, bob, root = Caller("alice"), Caller("bob"), Caller("root", superuser=True)
    assert p.find("a", txn(1), alice) == TerminatedTxn(txn(1), S.COMMITTED, now, "alice")
    assert p.find("a", txn(1), bob) is None
    assert p.find("a", txn(1), ANONYMOUS) is None
    assert p.find("a", txn(1), root) is not None and p.find("a", txn(1)) is not None
    assert p.find("a", txn(9), bob) is not None  # no owner: anyone's
    assert [t.txn_id for t in p.terminated("a", alice)] == [txn(1), txn(9)]
    assert {t.txn_id for t in p.terminated("a", root)} == {txn(1), txn(4), txn(5), txn(9)}
    assert p.stats.client_names == 3 and len(p) == 4 and p.client_names() == ["a"]
    # Reloaded from the store: the same keys, the same answers.
    q = await env.loaded(count=2)
    assert q.find("a", txn(1), alice) is not None and q.find("a", txn(1), bob) is None
    assert q.find("a", txn(5), bob) == TerminatedTxn(txn(5), S.ABORTED, now, "bob")
    assert q.stats.restored == 4
    p.close()
    q.close()


async def test_expiry_writes_the_tombstone_of_the_owners_key() -> None:
    env = Env()
    p = await env.loaded()
    p.append(txn(1), S.COMMITTING, "a", env.clock.wall_ms(), owner="alice")
    p.append(txn(2), S.COMMITTING, "a", env.clock.wall_ms())
    await p.flush()
    assert len(env.store.data) == 2
    await env.sched.advance(73 * HOUR_MS)
    assert env.store.data == {} and p.client_names() == [] and len(p) == 0
    p.close()


async def test_a_bare_client_name_that_looks_like_a_key_moves_to_its_proper_key() -> None:
    env = Env()
    odd = '\x00["x","y"'  # a client name (not valid JSON) stored as a bare key
    now = env.clock.wall_ms()
    env.store.data[odd] = encode_terminated([TerminatedTxn(txn(1), S.COMMITTED, now)])
    p = await env.loaded()
    assert p.find(odd, txn(1), ANONYMOUS) == TerminatedTxn(txn(1), S.COMMITTED, now, None)
    await p.flush()
    assert list(env.store.data) == [preserver_key(None, odd)]
    q = await env.loaded()
    assert q.find(odd, txn(1), ANONYMOUS) is not None
    p.close()
    q.close()
