"""A stored entry as the admin API shows it: Pulsar's peek / examine / get-by-id answer.

The answer's body is the entry's payload, decompressed, with the metadata stripped; a
batch stays one blob (its single-message headers and payloads, as Pulsar answers).
What the metadata says travels in headers: ``X-Pulsar-Message-ID`` (``ledger:entry``),
``X-Pulsar-publish-time``, ``X-Pulsar-event-time``, ``X-Pulsar-num-batch-message``,
one ``X-Pulsar-PROPERTY-<key>`` per property, and a few more of Pulsar's admin
client's headers (producer name, sequence id, batch size).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from quasar.errors import RemoteProtocolError, UnknownError
from quasar.protocol.compression import NONE, decompress
from quasar.protocol.entry import parse_entry
from quasar.storage.api import Entry

__all__ = ["PeekedMessage", "peeked_message"]

PROPERTY_HEADER_PREFIX = "X-Pulsar-PROPERTY-"


class PeekedMessage(NamedTuple):
    """One entry as an HTTP answer: its headers and its (uncompressed) payload."""

    headers: dict[str, str]
    payload: bytes


def format_time(epoch_ms: int) -> str:
    """Pulsar's ISO 8601 form of a publish or event time, in UTC."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def _header_safe(text: str) -> str:
    # A property is the client's text; a line break in it would end the header.
    return text.replace("\r", " ").replace("\n", " ")


def peeked_message(entry: Entry, max_uncompressed_size: int) -> PeekedMessage:
    """The admin answer for ``entry``.

    Raises:
        UnknownError: the stored bytes are not a readable message (500: a corrupt
            entry is the broker's problem, not the request's).
    """
    try:
        parsed = parse_entry(entry.data, verify_checksum=False)
        meta = parsed.metadata
        body = entry.data[parsed.payload_offset:]
        # Producers leave uncompressed_size unset when they do not compress.
        payload = (
            bytes(body)
            if meta.compression == NONE
            else decompress(
                meta.compression, body, meta.uncompressed_size, max_uncompressed_size
            )
        )
    except RemoteProtocolError as exc:
        raise UnknownError(f"Entry {entry.position} is not a readable message: {exc}") from exc
    headers = {"X-Pulsar-Message-ID": str(entry.position)}
    for prop in meta.properties:
        headers[PROPERTY_HEADER_PREFIX + _header_safe(prop.key)] = _header_safe(prop.value)
    headers["X-Pulsar-publish-time"] = format_time(meta.publish_time)
    if meta.HasField("event_time") and meta.event_time:
        headers["X-Pulsar-event-time"] = format_time(meta.event_time)
    if meta.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
        headers["X-Pulsar-batch-size"] = str(len(payload))
    headers["X-Pulsar-producer-name"] = _header_safe(meta.producer_name)
    headers["X-Pulsar-sequence-id"] = str(meta.sequence_id)
    if meta.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = _header_safe(meta.partition_key)
    return PeekedMessage(headers, payload)
