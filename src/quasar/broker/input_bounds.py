"""Bounds on what a peer controls in batches and acknowledgements, and a counter of
what they refuse.

Everything here is checked before the broker allocates for it (see
``quasar.protocol.batch_limits`` for the arithmetic):

* a SEND whose metadata claims an ``uncompressed_size`` over ``maxMessageSize``, or a
  batch size below 1 or beyond what its payload can hold, is refused with
  ``NotAllowedError`` (the error quasar gives a message over ``maxMessageSize``);
* an ACK's ack set may have at most ``ceil(batch size / 64)`` words, the batch size
  being the entry's when the broker knows it and otherwise the most records a
  ``maxMessageSize`` batch can hold;
* compaction decompresses at most ``maxMessageSize`` bytes per entry, and splits
  batches of at most ``compactor.BATCH_MESSAGES_TO_SPLIT_MAX`` messages.

Each refusal is counted in ``quasar_hostile_input_refused_total{reason}``
(``hostile_input.py``), on the broker's registry, with the ``REFUSED_*`` reasons of
``batch_limits``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client.registry import CollectorRegistry

from quasar.errors import BrokerError, NotAllowedError
from quasar.protocol.batch_limits import (
    REFUSED_ACK_SET,
    Refusal,
    ack_set_words_max,
    batch_records_max,
    check_published,
)
from quasar.protocol.entry import parse_entry
from quasar.storage.api import Position

from .entry_info import EntryInfo, info_of
from .hostile_input import REFUSED_METRIC, HostileInputRefusals

__all__ = ["InputBounds", "REFUSED_METRIC"]

AckItem = tuple[Position, Sequence[int] | None]


class InputBounds:
    """The batch and ack-set bounds of one broker, derived from ``maxMessageSize``.

    ``registry``: the broker's metrics registry (None: a private one nobody scrapes,
    for tests and embedded use); ``refusals``: the broker's count of refused input,
    when it exists already (it is then on its own registry, and ``registry`` is not
    used).
    """

    def __init__(
        self,
        max_message_size: int,
        registry: CollectorRegistry | None = None,
        *,
        refusals: HostileInputRefusals | None = None,
    ) -> None:
        self.max_uncompressed_size = max_message_size
        # The most messages any batch the broker accepts can hold, and the ack-set
        # words they need: the bound for acks of entries whose size is not known.
        self.max_batch_records = batch_records_max(max_message_size)
        self.max_ack_set_words = ack_set_words_max(self.max_batch_records)
        self.refusals = refusals if refusals is not None else HostileInputRefusals(registry)

    def refused(self, refusal: Refusal) -> BrokerError:
        """Count ``refusal`` and return the error the peer gets for it."""
        self.refusals.count(refusal.reason)
        return NotAllowedError(refusal.message)

    def count(self, reason: str) -> None:
        """Count a refusal whose error is reported elsewhere (compaction's)."""
        self.refusals.count(reason)

    # -- SEND ----------------------------------------------------------------------------
    def published_info(self, data: bytes, num_messages: int) -> EntryInfo:
        """The ``EntryInfo`` of a SEND's entry, once its claims are checked.

        ``data`` must come from a frame whose checksum was verified (``Frame``'s
        ``checksum_ok`` is not False): it is not verified again here.

        Raises:
            RemoteProtocolError: the metadata is unreadable.
            NotAllowedError: ``uncompressed_size`` or the batch size is out of bounds.
        """
        # A second CRC would cost as much as the decoder's (microseconds for a large
        # batch) and tell nothing new.
        parsed = parse_entry(data, verify_checksum=False)
        refusal = check_published(
            parsed.metadata,
            len(data) - parsed.payload_offset,
            num_messages,
            self.max_uncompressed_size,
        )
        if refusal is not None:
            raise self.refused(refusal)
        return info_of(parsed, len(data), checked=True)

    # -- ACK -----------------------------------------------------------------------------
    def batch_size_bound(self, batch_size: int | None) -> int:
        """The batch size to size an ack set by: the entry's when known (never more
        than any accepted batch holds), else the most any accepted batch holds."""
        if batch_size is None or batch_size < 1:
            return self.max_batch_records
        return min(batch_size, self.max_batch_records)

    def check_ack_sets(
        self, acks: Sequence[AckItem], batch_size_of: Callable[[Position], int | None]
    ) -> None:
        """Refuse an ACK whose ack sets are longer than their batches need.

        ``batch_size_of``: the entry's message count when the broker knows it without
        reading (None otherwise). The whole ACK is checked before any of it applies.

        Raises:
            NotAllowedError: an ack set has more words than its batch needs.
        """
        for position, ack_set in acks:
            # One word is within any batch's bound: only longer sets need the size.
            if ack_set and len(ack_set) > 1:
                self.check_ack_set(position, ack_set, batch_size_of(position))

    def check_ack_set(
        self, position: Position, ack_set: Sequence[int], batch_size: int | None
    ) -> None:
        """Refuse one ack set longer than a batch of ``batch_size`` (None: of unknown
        size) needs.

        Raises:
            NotAllowedError: the ack set has more words than the batch needs.
        """
        limit = ack_set_words_max(self.batch_size_bound(batch_size))
        words = len(ack_set)
        if words > limit:
            batch = f"its batch of {batch_size}" if batch_size else "any batch"
            raise self.refused(
                Refusal(
                    REFUSED_ACK_SET,
                    f"Ack set of {words} words for {position}; "
                    f"{batch} needs at most {limit}",
                )
            )
