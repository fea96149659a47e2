"""``batch_receive()``: take what the receive queue holds, up to a policy's limits.

A batch is complete as soon as it holds ``max_num_message`` messages or
``max_num_bytes`` payload bytes (a message that would pass the byte limit is left for
the next batch, unless the batch is still empty: one large message is never stuck),
or when ``timeout_ms`` has passed since the call; then it is returned as it is, empty
when nothing arrived. Taking each message is an ordinary receive: permits and ack
timeouts work as for ``receive()``.
"""

from __future__ import annotations

import asyncio

from quasar.client.consumer_policies import ConsumerBatchReceivePolicy
from quasar.client.message import Message
from quasar.client.receive_queue import ReceiveQueue
from quasar.errors import AlreadyClosed


async def batch_receive(
    queue: ReceiveQueue, policy: ConsumerBatchReceivePolicy
) -> list[Message]:
    """The next batch of messages under ``policy``.

    Raises:
        AlreadyClosed: the consumer closed while the batch was empty.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + policy.timeout_ms / 1000.0 if policy.timeout_ms > 0 else None
    max_count, max_bytes = policy.max_num_message, policy.max_num_bytes
    batch: list[Message] = []
    size = 0
    while True:
        head = queue.peek()
        if head is None:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return batch
            try:
                if not await queue.wait_for_message(remaining):
                    return batch
            except AlreadyClosed:
                if batch:  # what was taken is the application's now
                    return batch
                raise
            continue
        length = len(head.data())
        if batch and max_bytes > 0 and size + length > max_bytes:
            return batch
        batch.append(await queue.get(0))
        size += length
        if (max_count > 0 and len(batch) >= max_count) or (
            max_bytes > 0 and size >= max_bytes
        ):
            return batch
