"""Transaction-buffer snapshots in the metadata store (cluster members).

A standalone broker keeps every snapshot of a namespace in the namespace's compacted
``__transaction_buffer_snapshot`` topic. On a cluster member that topic lives in one
bundle, owned by one broker, while the namespace's topics are spread over every
member, each the only writer of its own snapshots. So a member keeps each snapshot
record in the metadata store instead, one key per record:

    /transaction-buffer-snapshots/<store key, percent-encoded>

where the store key is the topic's full name (the index record) or a sealed
segment's key (``snapshot_format.segment_key``), the value the record's bytes
(``snapshot_format`` draws them). Only the owner of a topic's bundle writes its keys,
so writes need no compare-and-set. A value is bounded by the metadata store's largest
value (ZooKeeper's ``jute.maxbuffer``); segments keep each record well below it
(``transactionBufferSnapshotSegmentSize``). A failed write is the buffer's to retry
with its next snapshot, as with the topic.
"""

from __future__ import annotations

from urllib.parse import quote

from quasar.errors import NotFound
from quasar.storage.api import MetadataStore

__all__ = ["SNAPSHOTS_ROOT", "MetadataSnapshotStore"]

SNAPSHOTS_ROOT = "/transaction-buffer-snapshots"


class MetadataSnapshotStore:
    """``SnapshotStore`` over the metadata store shared by a cluster's brokers."""

    def __init__(self, store: MetadataStore, root: str = SNAPSHOTS_ROOT) -> None:
        self._store = store
        self._root = root

    def path(self, key: str) -> str:
        # A key is a topic name with "/" and "://" in it: one node per key, below one
        # parent, so the name is encoded whole.
        return f"{self._root}/{quote(key, safe='')}"

    async def write(self, key: str, value: bytes) -> None:
        """Raises: MetadataError (retryable) when the store cannot be written."""
        self._store.put(self.path(key), value)

    async def read(self, key: str) -> bytes | None:
        """Raises: MetadataError when the store cannot be read."""
        found = self._store.get(self.path(key))
        return None if found is None else found.value

    async def delete(self, key: str) -> None:
        """Raises: MetadataError when the store cannot be written."""
        try:
            self._store.delete(self.path(key))
        except NotFound:
            return
