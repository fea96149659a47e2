"""``Reader.get_last_message_id`` (sync and asyncio) against a real broker process.

Semantics of the C++ client's ``Reader::getLastMessageId``: the broker's answer to
GET_LAST_MESSAGE_ID, the last message a reader can read (not a transaction marker,
not aborted, not behind an open transaction); entry id -1 on an empty topic; the
batch index of a batch's last member; not supported on a reader of several partitions.
"""

from __future__ import annotations

import asyncio

import pytest

import quasar.client as qc
from quasar.client import aio

from .conftest import BrokerProcess


def _key(mid: qc.MessageId) -> tuple[int, int, int]:
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


def test_empty_topic_then_last_sent(service_url: str, topic: str) -> None:
    client = qc.Client(service_url, operation_timeout_seconds=15)
    try:
        reader = client.create_reader(topic, qc.MessageId.earliest)
        assert reader.get_last_message_id().entry_id() == -1
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        last = reader.get_last_message_id()
        assert _key(last)[:2] == _key(ids[-1])[:2]
        # Reading does not change the answer: it is the topic's, not the reader's.
        assert reader.read_next(5000).data() == b"m0"
        assert _key(reader.get_last_message_id()) == _key(last)
    finally:
        client.close()


def test_batch_member_index(service_url: str, topic: str) -> None:
    client = qc.Client(service_url, operation_timeout_seconds=15)
    try:
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_publish_delay_ms=100
        )
        ids: list[qc.MessageId] = []
        for i in range(4):
            producer.send_async(f"b{i}".encode(), lambda r, mid: ids.append(mid))
        producer.flush()
        reader = client.create_reader(topic, qc.MessageId.latest)
        last = reader.get_last_message_id()
        assert _key(last) == max(_key(m) for m in ids)
        assert last.batch_index() == 3
    finally:
        client.close()


def test_open_and_aborted_transactions_are_not_readable(
    broker: BrokerProcess, service_url: str, topic: str
) -> None:
    client = qc.Client(
        service_url, operation_timeout_seconds=15, enable_transaction=True
    )
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        plain = producer.send(b"plain")
        aborted = client.new_transaction()
        producer.send(b"aborted", txn=aborted)
        aborted.abort()
        reader = client.create_reader(topic, qc.MessageId.earliest)
        assert _key(reader.get_last_message_id())[:2] == _key(plain)[:2]
        still_open = client.new_transaction()
        producer.send(b"open", txn=still_open)
        assert _key(reader.get_last_message_id())[:2] == _key(plain)[:2]
        still_open.commit()
        last = reader.get_last_message_id()
        assert _key(last)[:2] > _key(plain)[:2]
    finally:
        client.close()


def test_partitioned_reader_is_not_supported(
    broker: BrokerProcess, service_url: str, topic: str
) -> None:
    broker.create_partitioned_topic(topic, 2)
    client = qc.Client(service_url, operation_timeout_seconds=15)
    try:
        reader = client.create_reader(topic, qc.MessageId.earliest)
        with pytest.raises(qc.OperationNotSupported):
            reader.get_last_message_id()
        one = client.create_reader(f"{topic}-partition-1", qc.MessageId.earliest)
        assert one.get_last_message_id().entry_id() == -1
    finally:
        client.close()


def test_closed_reader_raises(service_url: str, topic: str) -> None:
    client = qc.Client(service_url, operation_timeout_seconds=15)
    try:
        reader = client.create_reader(topic, qc.MessageId.earliest)
        reader.close()
        with pytest.raises(qc.AlreadyClosed):
            reader.get_last_message_id()
    finally:
        client.close()


def test_asyncio_reader(service_url: str, topic: str) -> None:
    async def run() -> None:
        client = aio.Client(service_url, operation_timeout_seconds=15)
        try:
            producer = await client.create_producer(topic, batching_enabled=False)
            sent = await producer.send(b"x")
            reader = await client.create_reader(topic, qc.MessageId.earliest)
            last = await reader.get_last_message_id()
            assert _key(last)[:2] == _key(sent)[:2]
            # Right after a seek (the broker closes and the reader resubscribes) the
            # call waits for the connection instead of failing.
            await reader.seek(qc.MessageId.earliest)
            assert _key(await reader.get_last_message_id()) == _key(last)
        finally:
            await client.close()

    asyncio.run(run())
