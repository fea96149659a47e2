"""The transaction buffer: one per topic partition (read-committed isolation).

``TopicTransactionBuffer`` is the entry point; ``SnapshotStore`` is what the broker
implements on the namespace's ``__transaction_buffer_snapshot`` topic;
``MemorySnapshotStore`` is for tests. See ``buffer.py`` for the theory of operation,
``state.py`` for the lifecycle and ``snapshot_format.py`` for the snapshot layout.
"""

from .buffer import CRASH_POINTS, TopicTransactionBuffer
from .config import TransactionBufferConfig
from .records import MARKER_PRODUCER_NAME, RecordKind, TbRecord, classify, make_marker
from .snapshot_store import MemorySnapshotStore, SnapshotStore
from .state import TbAction, TbOp, TbState

__all__ = [
    "CRASH_POINTS",
    "MARKER_PRODUCER_NAME",
    "MemorySnapshotStore",
    "RecordKind",
    "SnapshotStore",
    "TbAction",
    "TbOp",
    "TbRecord",
    "TbState",
    "TopicTransactionBuffer",
    "TransactionBufferConfig",
    "classify",
    "make_marker",
]
