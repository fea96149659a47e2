"""``Producer.send_payloads_async``: many payload-only messages queued as batch entries,
against a real broker: every message arrives once and in order, entries respect the
batching and pending limits, runs spread over partitions, and in a transaction the
messages appear only when it commits.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.client import aio
from quasar.client.routing import RoundRobinRouter, SinglePartitionRouter
from quasar.clock import ManualClock

from .conftest import BrokerProcess

RECEIVE_MS = 5000
QUIET_MS = 500


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("payloads-broker") / "data",
        {"transactionCoordinatorEnabled": "true"},
    )
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
async def client(txn_broker: BrokerProcess) -> AsyncIterator[aio.Client]:
    c = aio.Client(
        txn_broker.service_url, operation_timeout_seconds=15, enable_transaction=True
    )
    yield c
    await c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/payloads-{uuid.uuid4().hex[:12]}"


class Entries:
    """The callback: one call per entry, with its error and first message id."""

    def __init__(self) -> None:
        self.calls: list[tuple[BaseException | None, Any]] = []

    def __call__(self, error: BaseException | None, message_id: Any) -> None:
        self.calls.append((error, message_id))

    @property
    def errors(self) -> list[BaseException]:
        return [e for e, _ in self.calls if e is not None]


def payloads(n: int, prefix: str = "m") -> list[bytes]:
    # Sizes vary so that the byte limit, not only the count, splits entries.
    return [f"{prefix}{i:05d}".encode() + b"." * (i % 97) for i in range(n)]


async def drain(consumer: aio.Consumer) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            out.append(await consumer.receive(QUIET_MS))
        except pulsar.Timeout:
            return out


async def test_every_message_arrives_once_in_order_in_bounded_entries(
    client: aio.Client, topic: str
) -> None:
    consumer = await client.subscribe(topic, "check")
    producer = await client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=100,
        batching_max_allowed_size_in_bytes=4000,
        batching_max_publish_delay_ms=10_000,
        block_if_queue_full=True,
    )
    entries = Entries()
    before: list[Any] = []
    await producer.send_async(b"first", lambda e, m: before.append(e))
    sent = payloads(1500)
    await producer.send_payloads_async(sent, entries)
    await producer.send(b"last")
    got = await drain(consumer)

    assert [m.data() for m in got] == [b"first", *sent, b"last"]
    assert before == [None] and entries.errors == []
    # Entries: at most 100 messages and (beyond one message) 4000 payload bytes each.
    by_entry: dict[tuple[int, int], list[int]] = {}
    for m in got[1:-1]:
        mid = m.message_id()
        by_entry.setdefault((mid.ledger_id(), mid.entry_id()), []).append(len(m.data()))
    assert len(entries.calls) == len(by_entry)
    assert all(len(sizes) <= 100 and sum(sizes) <= 4000 for sizes in by_entry.values())
    # The callback has each entry's first message id.
    first_ids = {(m.ledger_id(), m.entry_id(), m.batch_index()) for _, m in entries.calls}
    assert first_ids == {(le, en, 0) for le, en in by_entry}
    # Sequence ids run on across the three calls (deduplication relies on them).
    assert producer.last_sequence_id() == len(sent) + 1


async def test_a_pending_limit_below_the_batch_size_does_not_block(
    client: aio.Client, topic: str
) -> None:
    consumer = await client.subscribe(topic, "check")
    producer = await client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1000,
        max_pending_messages=7,
        block_if_queue_full=True,
    )
    entries = Entries()
    sent = payloads(200)
    await producer.send_payloads_async(sent, entries)
    await producer.flush()
    assert [m.data() for m in await drain(consumer)] == sent
    assert entries.errors == [] and len(entries.calls) == 29  # ceil(200 / 7)


async def test_without_batching_each_message_is_its_own_entry(
    client: aio.Client, topic: str
) -> None:
    consumer = await client.subscribe(topic, "check")
    producer = await client.create_producer(topic, batching_enabled=False)
    entries = Entries()
    sent = payloads(30)
    await producer.send_payloads_async(sent, entries)
    await producer.flush()
    got = await drain(consumer)
    assert [m.data() for m in got] == sent
    assert len(entries.calls) == 30 and entries.errors == []
    assert all(m.message_id().batch_index() == -1 for m in got)


async def test_runs_spread_over_partitions_in_order(
    client: aio.Client, txn_broker: BrokerProcess, topic: str
) -> None:
    txn_broker.create_partitioned_topic(topic, 3)
    consumer = await client.subscribe(topic, "check")
    producer = await client.create_producer(
        topic, batching_enabled=True, batching_max_messages=50, block_if_queue_full=True
    )
    sent = payloads(600)
    entries = Entries()
    await producer.send_payloads_async(sent, entries)
    await producer.flush()
    got = await drain(consumer)
    assert sorted(m.data() for m in got) == sorted(sent)
    per_partition: dict[str, list[bytes]] = {}
    for m in got:
        per_partition.setdefault(m.topic_name(), []).append(m.data())
    assert len(per_partition) == 3
    for data in per_partition.values():
        assert data == sorted(data, key=sent.index)
    assert entries.errors == []


async def test_in_a_transaction_messages_appear_at_commit_only(
    client: aio.Client, topic: str
) -> None:
    consumer = await client.subscribe(topic, "check")
    producer = await client.create_producer(
        topic, batching_enabled=True, batching_max_messages=64
    )
    aborted = await client.new_transaction()
    await producer.send_payloads_async(payloads(300, "a"), Entries(), txn=aborted)
    await aborted.abort()
    txn = await client.new_transaction()
    sent = payloads(300, "c")
    entries = Entries()
    await producer.send_payloads_async(sent, entries, txn=txn)
    await producer.flush()
    assert await drain(consumer) == []
    await txn.commit()
    assert [m.data() for m in await drain(consumer)] == sent
    assert entries.errors == []


async def test_an_ended_transaction_refuses_the_payloads(
    client: aio.Client, topic: str
) -> None:
    producer = await client.create_producer(topic, batching_enabled=True)
    txn = await client.new_transaction()
    await txn.commit()
    with pytest.raises(pulsar.InvalidTxnStatus):
        await producer.send_payloads_async(payloads(10), Entries(), txn=txn)


async def test_producers_it_cannot_serve_are_refused(
    client: aio.Client, topic: str
) -> None:
    strings = await client.create_producer(topic, schema=pulsar.schema.StringSchema())
    with pytest.raises(TypeError):
        await strings.send_payloads_async([b"x"], None)
    chunking = await client.create_producer(
        topic + "-c", batching_enabled=False, chunking_enabled=True
    )
    with pytest.raises(pulsar.InvalidConfiguration):
        await chunking.send_payloads_async([b"x"], None)


def test_a_run_of_keyless_messages_counts_as_that_many_for_the_router() -> None:
    clock = ManualClock()
    r = RoundRobinRouter(
        3,
        batching_enabled=True,
        batching_max_messages=10,
        batching_max_publish_delay_ms=10_000,
        clock=clock,
        start=0,
    )
    # A full run fills the window: the next message, run or single, moves on.
    assert r.choose_keyless(10, 3) == 0
    assert r.choose(None, 3) == 1
    assert r.choose_keyless(4, 3) == 1
    assert r.choose_keyless(5, 3) == 1
    assert r.choose_keyless(1, 3) == 2
    assert SinglePartitionRouter(3, start=2).choose_keyless(50, 3) == 2
