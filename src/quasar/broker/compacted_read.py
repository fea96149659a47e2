"""Where a ``read_compacted`` subscription reads next: the compacted ledger or the topic.

The rules are a small state machine of their own, kept apart from running compactions
(``compaction.py``) so each can be read in one sitting; the dispatcher asks it for a
plan before every read of a ``read_compacted`` consumer.
"""

from __future__ import annotations

from quasar.storage.api import Position


class CompactedReadState:
    """Where a ``read_compacted`` subscription reads next: compacted ledger or topic.

    A subscription reads a *view*: the compacted ledger up to a horizon, then the
    topic after it. Which horizon matters: a subscription that has consumed part of
    the view of horizon H must go on with the topic after H, even once a newer
    compaction (horizon H2 > H) exists. Switching it to the newer view would skip the
    tombstones written between H and H2 for keys it already received (it saw the old
    values and would never see their deletion). So each
    subscription is *pinned* to the horizon current when it started reading:

    * a subscription (re)starting at a position (created, SEEK, or rewound with
      nothing acknowledged since) reads the current compacted ledger from that
      position (the earliest: all of it), up to the current horizon, which it pins;
    * after that it reads the compacted ledger only up to its pinned horizon, then
      the topic; records of a newer generation at or before the pin are fine (a
      subset of what the pinned one had there, the rest follows on the topic);
    * a position the topic no longer holds (trimmed) can only be served from the
      compacted ledger, whatever the pin.

    Every other restart of delivery (a consumer attaching to an existing durable
    subscription, a redelivery request, a change of active consumer) rewinds the
    cursor to its first unacknowledged entry; from there the subscription reads the
    current compacted view and pins its horizon, as Pulsar reads the compacted ledger
    for any cursor before the horizon. As in Pulsar, a key acknowledged before the
    restart and deleted by a tombstone that compaction has since removed is not
    deleted for that subscription: the tombstone is no longer stored anywhere.
    """

    def __init__(self) -> None:
        self._origin: Position | None = None  # where the subscription (re)started
        self._origin_mark_delete: Position | None = None
        self._start: Position | None = None  # set until the first read from _origin
        self._pinned: Position | None = None
        # Set by a rewind that cannot start over from _origin: the next read starts
        # at the cursor's read position (its first unacknowledged entry).
        self._restart = False

    def start_at(self, position: Position, mark_delete: Position) -> None:
        """The subscription starts at ``position`` (``EARLIEST`` allowed), which the
        cursor may not be able to express (a trimmed position)."""
        self._origin = self._start = position
        self._origin_mark_delete = mark_delete
        self._pinned = None
        self._restart = False

    def on_seek(self, position: Position, mark_delete: Position) -> None:
        """The subscription was reset to ``position`` (SEEK)."""
        self.start_at(position, mark_delete)

    def on_rewind(self, mark_delete: Position) -> None:
        """The cursor went back to its first unacknowledged entry."""
        self._pinned = None
        if self._origin is not None and mark_delete == self._origin_mark_delete:
            # Nothing was acknowledged since the start: start over from there (the
            # origin may be a trimmed position the cursor cannot express).
            self._start = self._origin
            self._restart = False
        else:
            self._start = None
            self._restart = True

    def plan(
        self, read_position: Position, horizon: Position, first_position: Position
    ) -> tuple[Position, Position] | None:
        """``(start, limit)`` to read compacted records with original positions in
        ``[start, limit]``, or None to read the topic."""
        if self._start is not None:
            if self._start > horizon:
                return None
            self._pinned = horizon
            return self._start, horizon
        if self._restart and first_position <= read_position <= horizon:
            self._pinned = horizon
            return read_position, horizon
        if read_position < first_position:
            return (read_position, horizon) if read_position <= horizon else None
        if self._pinned is not None and read_position <= self._pinned:
            return read_position, self._pinned
        return None

    def read_compacted_ledger(self) -> None:
        """The subscription read (or exhausted) the compacted ledger."""
        self._start = None
        self._restart = False

    def read_topic(self) -> None:
        """The subscription now reads the topic itself."""
        self._start = None
        self._restart = False
