"""Readers: non-durable, exclusive subscriptions that start at a given message id.

``has_message_available`` follows the C++ client: it asks GET_LAST_MESSAGE_ID and
compares the topic's last id with the last id handed to the application (or, before
anything was read, with the start id; a reader started at ``latest`` or moved by a seek
by time compares with the cursor's mark-delete position).
"""

from __future__ import annotations

import secrets

from quasar.client.consumer import ConsumerImpl
from quasar.client.message_id import MessageId
from quasar.protocol.int64 import INT64_MAX


def reader_subscription_name(prefix: str | None = None) -> str:
    """``reader-<10 hex>`` (or ``<prefix>-reader-<10 hex>``)."""
    name = f"reader-{secrets.token_hex(5)}"
    return f"{prefix}-{name}" if prefix else name


def _after(last: MessageId, ref: MessageId) -> bool:
    return (last.ledger_id(), last.entry_id(), last.batch_index()) > (
        ref.ledger_id(),
        ref.entry_id(),
        ref.batch_index(),
    )


async def child_has_message_available(consumer: ConsumerImpl) -> bool:
    """Whether ``consumer`` (a reader's one topic or partition) has more to read."""
    if consumer.queue.holds_message_of(consumer):
        return True
    last, mark_delete = await consumer.get_last_message_id()
    if last.entry_id() < 0:
        return False  # empty topic
    if consumer.last_dequeued is not None:
        return _after(last, consumer.last_dequeued)
    start = consumer.start_message_id
    if start is None or start.ledger_id() == INT64_MAX or consumer.seeked_by_time:
        # Where the cursor stands is known to the broker only: the mark-delete
        # position is the entry before the next one to read.
        return mark_delete is not None and last.entry_key > mark_delete.entry_key
    if start.ledger_id() < 0:
        return True  # earliest, and the topic is not empty
    if start.batch_index() < 0:
        if consumer.start_message_id_inclusive:
            return last.entry_key >= start.entry_key
        return last.entry_key > start.entry_key
    if consumer.start_message_id_inclusive:
        return not _after(start, last)
    return _after(last, start)
