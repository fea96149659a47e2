"""A stored entry as the admin API shows it: Pulsar's peek / examine / get-by-id answer.

The answer's body is the entry's payload, decompressed, with the metadata stripped; a
batch stays one blob (its single-message headers and payloads, as Pulsar answers).
What the metadata says travels in headers: ``X-Pulsar-Message-ID`` (``ledger:entry``),
``X-Pulsar-publish-time``, ``X-Pulsar-event-time``, ``X-Pulsar-num-batch-message``,
one ``X-Pulsar-PROPERTY-<key>`` per property (a key that is not an HTTP token is
percent-encoded), all properties as one JSON object in ``X-Pulsar-Property``, and a
few more of Pulsar's admin client's headers (producer name, sequence id, batch size).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import NamedTuple
from urllib.parse import quote

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


# Properties are the client's text, sent in header names and values; HTTP allows only
# token characters in a name and no control characters in a value.
_TOKEN = re.compile(r"[!#$&'*+\-.^_`|~0-9A-Za-z]*")
_TOKEN_SAFE = "!#$&'*+-.^_`|~"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _header_name_part(text: str) -> str:
    """``text`` as part of a header name: as is when it is a token, else
    percent-encoded (UTF-8), which is a token."""
    return text if _TOKEN.fullmatch(text) else quote(text, safe=_TOKEN_SAFE)


def _header_safe(text: str) -> str:
    """``text`` as a header value: control characters (a line break would end the
    header) become spaces. The ``X-Pulsar-Property`` JSON keeps them exactly."""
    return _CONTROL.sub(" ", text)


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
    properties = {prop.key: prop.value for prop in meta.properties}
    for key, value in properties.items():
        headers[PROPERTY_HEADER_PREFIX + _header_name_part(key)] = _header_safe(value)
    if properties:
        # Newer Pulsar brokers send the properties as one JSON object too: exact for
        # any key and value (ensure_ascii keeps the header plain ASCII).
        headers["X-Pulsar-Property"] = json.dumps(properties, ensure_ascii=True)
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
