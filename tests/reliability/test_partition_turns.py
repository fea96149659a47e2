"""Every partition of a partitioned-topic consumer is served while the application
keeps asking for redelivery of everything unacknowledged.

A redelivery of everything (after an aborted transactional ack, or a nack on an
Exclusive or Failover subscription) empties the consumer's receive queue and the
broker sends each partition's unacknowledged messages again, in the order it got the
partitions' requests. Taken in arrival order, the queue would hand the application
only the first partition's messages until the next redelivery, and a partition that
always comes last would read nothing while the others have a backlog (the chaos run's
``no-progress`` on one partition of every subscription). Here each round waits until
every partition has messages queued, takes one message per partition and asks for
redelivery: every round must read every partition.
"""

from __future__ import annotations

import asyncio
import urllib.request
import uuid

import pytest

import quasar.client as qc
from quasar.client.aio import Client
from quasar.client.multi_consumer import MultiTopicsConsumer
from quasar.testing.process import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 20
ROUNDS = 4
QUEUED_TIMEOUT_S = 10.0


def _create_partitioned(broker: BrokerProcess, topic: str) -> None:
    path = f"/admin/v2/persistent/public/default/{topic}/partitions"
    req = urllib.request.Request(broker.admin_url + path, data=str(PARTITIONS).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status < 300


async def _every_partition_queued(impl: MultiTopicsConsumer) -> None:
    """Wait (bounded) until every partition's child has a message in the queue."""
    async with asyncio.timeout(QUEUED_TIMEOUT_S):
        while not all(impl.queue.holds_message_of(c) for c in impl.children.values()):
            await asyncio.sleep(0.01)  # polling interval of a bounded wait


@pytest.mark.parametrize("sub_type", ["Exclusive", "Failover", "Shared", "KeyShared"])
async def test_redeliver_all_serves_every_partition(
    broker: BrokerProcess, sub_type: str
) -> None:
    name = f"turns-{uuid.uuid4().hex[:8]}"
    _create_partitioned(broker, name)
    topic = f"persistent://public/default/{name}"
    client = Client(broker.url, operation_timeout_seconds=15)
    try:
        for i in range(PARTITIONS):
            producer = await client.create_producer(f"{topic}-partition-{i}",
                                                    batching_enabled=False)
            for n in range(PER_PARTITION):
                await producer.send(f"{i}.{n}".encode())
            await producer.close()
        consumer = await client.subscribe(
            topic, "turns", consumer_type=getattr(qc.ConsumerType, sub_type),
            initial_position=qc.InitialPosition.Earliest, receiver_queue_size=10,
        )
        impl = consumer._impl
        assert isinstance(impl, MultiTopicsConsumer)
        acked = {i: 0 for i in range(PARTITIONS)}
        for _ in range(ROUNDS):
            await _every_partition_queued(impl)
            taken = [await consumer.receive(5000) for _ in range(PARTITIONS)]
            assert sorted(m.message_id().partition() for m in taken) == list(
                range(PARTITIONS))
            for m in taken:
                await consumer.acknowledge(m)
                acked[m.message_id().partition()] += 1
            await consumer.redeliver_unacknowledged_messages()
        assert acked == {i: ROUNDS for i in range(PARTITIONS)}
        await consumer.close()
    finally:
        await client.close()
