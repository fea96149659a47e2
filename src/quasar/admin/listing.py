"""Topic listings shared by the namespace and persistent-topic routes.

A namespace's listing names every partition of its partitioned topics, used or not,
as Pulsar lists them. Partitions are created on first use, so most of those names
exist only as a count in the topic's metadata. The listing is generated in sorted
order from the counts, never built as one list of every name, and written to the
client in chunks with the event loop free between them: the answer may be large (each
topic's count is bounded by ``maxNumPartitionsPerPartitionedTopic``), but holding it
costs the broker one chunk, and answering it never stalls other clients.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Iterator

from aiohttp import web

from quasar.admin.api import AdminBroker
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.topic_name import is_hidden_from_listings
from quasar.resources.partitions import partition_names, sorted_unique

__all__ = ["json_list_response", "namespace_topics"]

log = logging.getLogger(__name__)

# Names per chunk written to the client: large enough that writing costs little per
# name, small enough that one chunk holds the loop for well under a millisecond.
LISTING_CHUNK_NAMES = 1000


def namespace_topics(
    broker: AdminBroker, namespace: str, include_system: bool = False
) -> Iterator[str]:
    """Every persistent topic and partition in ``namespace``, sorted, as a stream.

    Existing topics and the partitioned topics' counts are read now (so a failing
    read is an error answer, not a broken stream); the partition names are
    generated as the stream is consumed.
    """

    def shown(topic: str) -> bool:
        return include_system or not is_hidden_from_listings(parse_topic(topic))

    existing = sorted(
        t for t in broker.list_topics(namespace) if t.startswith(PERSISTENT) and shown(t)
    )
    streams: list[Iterable[str]] = [existing]
    partitioned = broker.resources.partitioned_topics
    for parent in partitioned.list(namespace):
        if shown(parent):
            streams.append(partition_names(parent, partitioned.listed_partitions(parent)))
    return sorted_unique(streams)


async def json_list_response(
    request: web.Request, names: Iterable[str]
) -> web.StreamResponse:
    """Answer 200 with the JSON array of ``names``, written chunk by chunk."""
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    await response.prepare(request)
    parts = ["["]
    try:
        for count, name in enumerate(names):
            if count:
                parts.append(",")
            parts.append(json.dumps(name))
            if count % LISTING_CHUNK_NAMES == LISTING_CHUNK_NAMES - 1:
                await response.write("".join(parts).encode())
                parts = []
                # A write returns at once while the transport's buffer has room; let
                # other requests and connections run between chunks regardless.
                await asyncio.sleep(0)
        parts.append("]")
        await response.write("".join(parts).encode())
        await response.write_eof()
    except ConnectionResetError:
        # The client went away mid-answer: nothing is left to answer, and the
        # status went out with the first chunk.
        log.info("listing %s: client disconnected before the end", request.path)
    return response
