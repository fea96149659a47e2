"""Per-partition read positions: what a Spark offset of the quasar source is made of.

An offset is a JSON object mapping each partition's full topic name to a *bound*::

    {"persistent://public/default/t-partition-0": "after 12:40:-1",
     "persistent://public/default/t-partition-1": "from 12:7:3",
     "persistent://public/default/t-partition-2": "earliest"}

* ``earliest`` — before the first retained message.
* ``after L:E:B`` — everything after message ``(ledger L, entry E, batch index B)``.
  ``B = -1`` names a whole entry: *after* it means after every message of that entry,
  batched or not (the reader's exclusive start skips the entry; ids order by
  ``(L, E, B)`` with ``-1`` standing for "the end of the entry").
* ``from L:E:B`` — from that message on, inclusive (only user-given starting offsets
  produce it; every offset the source computes itself is ``after``).

The range a micro-batch reads for one partition is ``(start, end]``: the messages after
``start`` up to and including ``end``. ``end`` is always an ``after`` bound whose
message is known to be readable (decided and committed) when the range was planned, so
a replayed range yields exactly the same messages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

EARLIEST = "earliest"
LATEST = "latest"
_ENTRY_END = 1 << 62  # sort key of batch index -1: after every member of the entry
_BOUND = re.compile(r"^(after|from) (-?\d+):(-?\d+):(-?\d+)$")


@dataclass(frozen=True, order=False)
class Bound:
    """A position in one partition; see the module docstring."""

    kind: str  # "earliest", "after" or "from"
    ledger: int = -1
    entry: int = -1
    batch: int = -1

    @staticmethod
    def earliest() -> Bound:
        return Bound(EARLIEST)

    @staticmethod
    def after(ledger: int, entry: int, batch: int = -1) -> Bound:
        return Bound("after", int(ledger), int(entry), int(batch))

    @staticmethod
    def starting_at(ledger: int, entry: int, batch: int = -1) -> Bound:
        return Bound("from", int(ledger), int(entry), int(batch))

    @staticmethod
    def parse(text: str) -> Bound:
        """Inverse of :meth:`__str__`.

        Raises:
            ValueError: not a bound.
        """
        text = text.strip()
        if text == EARLIEST:
            return Bound.earliest()
        m = _BOUND.match(text)
        if m is None:
            raise ValueError(f"not a quasar partition offset: {text!r}")
        return Bound(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))

    def __str__(self) -> str:
        if self.kind == EARLIEST:
            return EARLIEST
        return f"{self.kind} {self.ledger}:{self.entry}:{self.batch}"

    @property
    def key(self) -> tuple[int, int, int]:
        """Sort key of the message this bound names (see the module docstring)."""
        return message_key(self.ledger, self.entry, self.batch)

    def is_empty_range_to(self, end: Bound) -> bool:
        """True when ``(self, end]`` certainly holds no message.

        An end that is not an ``after`` bound is a partition that did not advance
        (the end offset repeats the start).
        """
        if end.kind != "after" or self == end:
            return True
        if self.kind == EARLIEST:
            return False
        if self.kind == "after":
            return self.key >= end.key
        return self.key > end.key


def message_key(ledger: int, entry: int, batch: int) -> tuple[int, int, int]:
    return (ledger, entry, batch if batch >= 0 else _ENTRY_END)


def is_past(
    ledger: int, entry: int, batch: int, batch_size: int, end: Bound
) -> tuple[bool, bool]:
    """Where a received message stands against the range end ``end`` (an ``after``).

    Returns ``(include, done)``: whether to emit it, and whether reading is over
    (this message is the last one at or before ``end``, or already beyond it).
    """
    here = (ledger, entry)
    there = (end.ledger, end.entry)
    if here < there:
        return True, False
    if here > there:
        return False, True
    # Same entry as the end bound.
    if end.batch < 0:
        last_of_entry = batch < 0 or batch >= batch_size - 1
        return True, last_of_entry
    if batch <= end.batch:
        return True, batch == end.batch
    return False, True


def encode_offset(bounds: dict[str, Bound]) -> dict[str, str]:
    return {topic: str(b) for topic, b in sorted(bounds.items())}


def decode_offset(offset: dict[str, str] | str | None) -> dict[str, Bound]:
    """A Spark offset (dict, or its JSON text) as bounds per partition.

    Raises:
        ValueError: a value is not a bound.
    """
    if offset is None:
        return {}
    if isinstance(offset, str):
        offset = json.loads(offset)
    assert isinstance(offset, dict)
    return {str(t): Bound.parse(str(v)) for t, v in offset.items()}


_ID = re.compile(r"^(-?\d+):(-?\d+)(?::(-?\d+))?$")


def parse_user_position(text: str | int, inclusive: bool) -> Bound | str:
    """One partition's position in ``startingOffsets`` / ``endingOffsets`` JSON.

    Accepted: ``"earliest"``, ``"latest"`` (or Kafka's ``-2`` / ``-1``),
    ``"ledger:entry"`` or ``"ledger:entry:batchIndex"``. A message id is the first
    message to read when ``inclusive`` (starting offsets), the last one read otherwise
    (ending offsets).

    Raises:
        ValueError: none of those.
    """
    if text in (-2, "-2"):
        return EARLIEST
    if text in (-1, "-1"):
        return LATEST
    if isinstance(text, str):
        t = text.strip().lower()
        if t in (EARLIEST, LATEST):
            return t
        m = _ID.match(t)
        if m:
            ledger, entry = int(m.group(1)), int(m.group(2))
            batch = int(m.group(3)) if m.group(3) is not None else -1
            if inclusive:
                return Bound.starting_at(ledger, entry, batch)
            return Bound.after(ledger, entry, batch)
    raise ValueError(
        f"a partition position must be earliest, latest, -2, -1, 'ledger:entry' or "
        f"'ledger:entry:batchIndex', got {text!r}"
    )
