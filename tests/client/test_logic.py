"""Unit tests of the client's pure logic (no broker, no sockets)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.client.acks import (
    AckGroupingTracker,
    BatchAckTracker,
    RedeliveryTracker,
)
from quasar.client.backoff import Backoff
from quasar.client.outgoing import (
    Batch,
    BatchContainer,
    OutgoingMessage,
    batch_payload,
)
from quasar.client.permits import PermitTracker
from quasar.client.receipts import OpSend, PendingSends, ReceiptOutcome
from quasar.client.routing import (
    RoundRobinRouter,
    SinglePartitionRouter,
    key_hash,
    murmur3_32,
    partition_for_key,
)
from quasar.client.schema import BytesSchema, JsonSchema, StringSchema
from quasar.client.waiters import park, wake_all
from quasar.clock import ManualClock
from quasar.protocol import parse_batch
from quasar.protocol.ack_set import bits_to_words, words_to_bits

# --- batches -------------------------------------------------------------------------

messages = st.builds(
    OutgoingMessage,
    payload=st.binary(max_size=64),
    properties=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    partition_key=st.one_of(st.none(), st.text(max_size=8)),
    ordering_key=st.one_of(st.none(), st.binary(max_size=8)),
    event_time=st.one_of(st.none(), st.integers(1, 2**40)),
)


def _batch(msgs: list[OutgoingMessage], first_seq: int) -> Batch:
    batch = Batch()
    for i, m in enumerate(msgs):
        batch.append(m, first_seq + i, None)
    return batch


@given(st.lists(messages, min_size=1, max_size=20), st.integers(0, 2**40))
def test_batch_payload_round_trips(msgs: list[OutgoingMessage], first_seq: int) -> None:
    batch = _batch(msgs, first_seq)
    assert batch.plain == all(m.is_plain for m in msgs)
    parsed = parse_batch(batch_payload(batch), len(batch))
    assert len(parsed) == len(msgs)
    for i, ((smm, data), m) in enumerate(zip(parsed, msgs, strict=True)):
        assert data == m.payload
        assert smm.sequence_id == first_seq + i
        assert {kv.key: kv.value for kv in smm.properties} == m.properties
        assert smm.HasField("partition_key") == (m.partition_key is not None)
        if m.partition_key is not None:
            assert smm.partition_key == m.partition_key
        if m.ordering_key is not None:
            assert smm.ordering_key == m.ordering_key
        assert smm.event_time == (m.event_time or 0)
        # Plain: nothing but payload size and sequence id in its metadata.
        assert m.is_plain == (
            not smm.properties
            and not smm.HasField("partition_key")
            and not smm.HasField("ordering_key")
            and not smm.event_time
        )


def test_outgoing_message_defaults_are_shared_and_read_only() -> None:
    a, b = OutgoingMessage(b"a"), OutgoingMessage(b"b", sequence_id=7)
    assert a.is_plain and b.is_plain and b.sequence_id == 7 and a.sequence_id is None
    assert a.properties == {} and a.replicate_to == () and a.txn is None
    with pytest.raises(TypeError):
        a.properties["k"] = "v"  # type: ignore[index]
    assert not OutgoingMessage(b"", null_value=True).is_plain
    assert OutgoingMessage(b"", event_time=0).is_plain  # 0 is "no event time"
    assert not OutgoingMessage(b"", event_time=5).is_plain
    assert OutgoingMessage(b"", properties={}).is_plain


def test_batch_container_limits() -> None:
    c = BatchContainer(max_messages=3, max_bytes=10)
    big = OutgoingMessage(b"x" * 50)
    assert c.has_space(big)  # a first message always fits, however large
    assert c.add(big, 0, None)  # ... and fills the batch
    c.take()
    assert not c.add(OutgoingMessage(b"12345"), 0, None)
    assert not c.has_space(OutgoingMessage(b"123456"))
    assert c.has_space(OutgoingMessage(b"12345"))
    assert c.add(OutgoingMessage(b"12345"), 1, "cb")
    batch = c.take()
    assert batch.sequence_ids == [0, 1] and batch.callbacks == [None, "cb"]
    assert len(c) == 0 and c.num_bytes == 0


# --- routing -------------------------------------------------------------------------


def test_murmur3_known_vectors() -> None:
    # Reference values of MurmurHash3_x86_32.
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


@pytest.mark.parametrize(
    ("key", "unsigned_hash", "partition_of_7", "partition_of_16"),
    [
        # Hashes at or above 2**31 are negative as a Java int: masking with
        # Integer.MAX_VALUE (not abs()) is what Pulsar's Murmur3_32Hash does.
        ("key-0", 0xE337F8BF, 6, 15),
        ("a", 0x3C2569B2, 4, 2),
        ("abc", 0xB3DD93FA, 1, 10),
        ("hello", 0x248BFA47, 6, 7),
        ("user-42", 0xB972DAD0, 0, 0),
        ("ключ", 0x9A592042, 6, 2),
        ("日本語", 0xA5A47297, 6, 7),
        ("🙂", 0x3E226063, 4, 3),
    ],
)
def test_key_partition_known_vectors(
    key: str, unsigned_hash: int, partition_of_7: int, partition_of_16: int
) -> None:
    assert murmur3_32(key.encode("utf-8")) == unsigned_hash
    assert key_hash(key) == unsigned_hash & 0x7FFFFFFF
    assert key_hash(key.encode("utf-8")) == key_hash(key)
    assert partition_for_key(key, 7) == partition_of_7
    assert partition_for_key(key, 16) == partition_of_16


@given(st.text(min_size=1), st.integers(1, 64))
def test_key_routing_is_stable_and_in_range(key: str, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == partition_for_key(key, n)
    assert RoundRobinRouter(n).choose(key, n) == p
    assert SinglePartitionRouter(n).choose(key, n) == p


def test_round_robin_without_batching_cycles() -> None:
    r = RoundRobinRouter(3, start=0)
    assert [r.choose(None, 3) for _ in range(6)] == [1, 2, 0, 1, 2, 0]


def test_round_robin_with_batching_switches_per_window() -> None:
    clock = ManualClock()
    r = RoundRobinRouter(
        4,
        batching_enabled=True,
        batching_max_messages=2,
        batching_max_publish_delay_ms=10,
        clock=clock,
        start=0,
    )
    assert [r.choose(None, 4) for _ in range(2)] == [0, 0]
    assert r.choose(None, 4) == 1  # max messages reached: next partition
    clock.advance(10)
    assert r.choose(None, 4) == 2  # delay elapsed: next partition


def test_single_partition_router() -> None:
    r = SinglePartitionRouter(5, start=3)
    assert {r.choose(None, 5) for _ in range(10)} == {3}


# --- acks ----------------------------------------------------------------------------


@given(st.integers(0, 2**200))
def test_ack_set_words_round_trip(bits: int) -> None:
    words = bits_to_words(bits)
    assert all(-(2**63) <= w < 2**63 for w in words)
    assert not words or words[-1] != 0
    assert words_to_bits(words) == bits


def test_ack_set_layout_matches_java_bitset() -> None:
    assert bits_to_words(0b101) == [5]
    assert bits_to_words(1 << 63) == [-(2**63)]
    assert bits_to_words(1 << 64) == [0, 1]


def test_batch_member_acks_complete_entry_once() -> None:
    t = BatchAckTracker()
    key = (7, 3)
    assert not t.ack(key, 1, 3)
    assert not t.ack(key, 1, 3)  # duplicate ack of the same member
    assert not t.ack(key, 0, 3)
    assert t.ack(key, 2, 3)  # last member: the entry is acked
    assert len(t) == 0


@given(st.permutations(list(range(10))))
def test_batch_acks_complete_only_after_all_members(order: list[int]) -> None:
    t = BatchAckTracker()
    results = [t.ack((1, 1), i, 10) for i in order]
    assert results == [False] * 9 + [True]


def test_batch_register_respects_broker_ack_set() -> None:
    t = BatchAckTracker()
    t.register((1, 2), 4, 0b1010)  # members 0 and 2 were acked before
    assert t.is_acked((1, 2), 0) and not t.is_acked((1, 2), 1)
    assert not t.ack((1, 2), 1, 4)
    assert t.ack((1, 2), 3, 4)


def test_cumulative_batch_ack() -> None:
    t = BatchAckTracker()
    t.ack((1, 1), 0, 2)  # an earlier entry, partly acked
    assert not t.ack_up_to((1, 5), 1, 4)
    assert len(t) == 1  # the earlier entry is covered by the cumulative ack
    assert t.claim_cumulative_prev((1, 5))
    assert not t.claim_cumulative_prev((1, 5))  # once per batch
    assert t.ack_up_to((1, 5), 3, 4)


def test_ack_grouping_merges_and_drops_redundant() -> None:
    g = AckGroupingTracker(max_ids=3)
    assert not g.add_individual((1, 1))
    assert not g.add_individual((1, 2), [0b110])
    assert not g.add_individual((1, 2))  # a full ack replaces the partial one
    g.set_cumulative((1, 1))
    individual, cumulative = g.drain()
    assert cumulative == ((1, 1), [])
    assert individual == [((1, 2), [])]  # (1,1) is covered by the cumulative ack
    assert not g
    assert not g.add_individual((1, 0))  # below the last cumulative ack: dropped
    assert g.drain() == ([], None)
    g.add_individual((2, 1))
    g.add_individual((2, 2))
    assert g.add_individual((2, 3))  # max_ids reached: flush now


def test_redelivery_tracker() -> None:
    t = RedeliveryTracker()
    t.add("a", 100)
    t.add("b", 50)
    t.add("a", 200)  # a second nack moves the due time
    assert t.next_due_ms() == 50
    assert t.pop_due(100) == ["b"]
    assert t.pop_due(199) == []
    assert t.pop_due(200) == ["a"]
    assert len(t) == 0


# --- permits -------------------------------------------------------------------------


def test_permits_refill_at_half_queue() -> None:
    p = PermitTracker(10)
    assert p.initial() == 10
    assert [p.processed() for _ in range(5)] == [0, 0, 0, 0, 5]
    assert p.processed(3) == 0
    assert p.initial() == 10  # resubscribe forgets unsent permits
    assert p.available == 0
    assert p.processed(7) == 7  # skipped batch members return permits in one go


def test_permits_queue_size_one() -> None:
    p = PermitTracker(1)
    assert p.processed() == 1


# --- receipts ------------------------------------------------------------------------


def _op(
    seq: int, n: int = 1, deadline: float = 1000.0, log: list | None = None
) -> OpSend:
    cbs = [
        (lambda e, m, i=i: log.append((seq, i, e, m)))
        if log is not None
        else (lambda e, m: None)
        for i in range(n)
    ]
    return OpSend(seq, n, b"", cbs, deadline)


def test_receipts_complete_in_order() -> None:
    q = PendingSends()
    q.append(_op(5, 3))
    q.append(_op(8))
    assert q.num_messages == 4
    assert q.match_receipt(4) == (ReceiptOutcome.STALE, None)
    outcome, op = q.match_receipt(7)  # the last seq of a batch is accepted too
    assert (
        outcome is ReceiptOutcome.COMPLETED and op is not None and op.sequence_id == 5
    )
    assert q.match_receipt(9) == (ReceiptOutcome.OUT_OF_RANGE, None)
    assert q.match_receipt(8)[0] is ReceiptOutcome.COMPLETED
    assert q.match_receipt(8) == (ReceiptOutcome.STALE, None)  # empty queue
    assert q.num_messages == 0


def test_receipt_callbacks_and_timeouts() -> None:
    log: list = []
    q = PendingSends()
    q.append(_op(1, 2, deadline=10, log=log))
    q.append(_op(3, 1, deadline=20, log=log))
    q.append(_op(4, 1, deadline=5, log=log))  # behind a live op: not expired alone
    expired = q.pop_expired(12)
    assert [o.sequence_id for o in expired] == [1]
    expired[0].complete(TimeoutError(), None)
    assert [(s, i) for s, i, _, _ in log] == [(1, 0), (1, 1)]
    assert [o.sequence_id for o in q] == [3, 4]
    hooks: list[int] = []
    head = q.head()
    assert head is not None
    head.on_complete.append(lambda: hooks.append(1))
    head.complete(None, ["id"])
    head.complete(None, ["id"])  # callbacks run once
    assert hooks == [1] and log[-1] == (3, 0, None, "id")


# --- backoff -------------------------------------------------------------------------


def test_backoff_schedule() -> None:
    b = Backoff(100, 1000)
    assert [b.next_delay_ms() for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    b.reset()
    assert b.next_delay_ms() == 100


def test_backoff_jitter_only_shortens() -> None:
    b = Backoff(100, 60_000, jitter=0.1, rng=lambda: 1.0)
    assert b.next_delay_ms() == pytest.approx(90)
    assert b.next_delay_ms() == pytest.approx(180)


# --- schemas --------------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    label: str
    tags: list[str]


def test_schemas() -> None:
    assert BytesSchema().schema_info() is None
    s = StringSchema()
    assert s.decode(s.encode("héllo")) == "héllo"
    assert s.schema_info().type == 1
    j = JsonSchema(Point)
    info = j.schema_info()
    assert info.type == 2
    assert [f["name"] for f in json.loads(info.schema_data)["fields"]] == ["x", "label", "tags"]
    p = Point(1, "a", ["t"])
    assert j.decode(j.encode(p)) == p
    with pytest.raises(TypeError):
        BytesSchema().encode("not bytes")


async def test_parked_waiters_wake_together_and_a_cancelled_one_leaves() -> None:
    waiters: list[asyncio.Future[None]] = []
    first = asyncio.ensure_future(park(waiters))
    second = asyncio.ensure_future(park(waiters))
    gone = asyncio.ensure_future(park(waiters))
    await asyncio.sleep(0)
    assert len(waiters) == 3
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert len(waiters) == 2  # the cancelled waiter took itself out
    wake_all(waiters)
    assert waiters == []
    await asyncio.wait_for(asyncio.gather(first, second), 1)
