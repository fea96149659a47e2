"""What the pending-ack handle hands back to the broker."""

from __future__ import annotations

from dataclasses import dataclass

from quasar.storage.api import Position


@dataclass(frozen=True)
class CommitResult:
    """A commit's effect on the subscription cursor (already applied and flushed).

    The broker uses it for bookkeeping only (redelivery counters, the dispatcher's
    replay set, backlog/trim notifications): ``acked`` entries are now deleted,
    ``batch_acked`` entries had members acknowledged, ``mark_delete`` is the cumulative
    position applied. Empty for a transaction with nothing pending here, and for a
    repeated commit.
    """

    acked: tuple[Position, ...] = ()
    batch_acked: tuple[Position, ...] = ()
    mark_delete: Position | None = None


@dataclass(frozen=True)
class AbortResult:
    """What an abort released.

    ``positions``: entries the transaction had individually (or by batch index)
    acknowledged; they are deliverable again and the broker must redeliver them and
    bump their redelivery counts (the dispatcher filters out members other
    transactions or the cursor still hold). ``batch_members``: for the entries of
    ``positions`` the transaction held only some members of, those members as a wire
    ack set (bit set = released); only they are redelivered, since the entry's other
    members may be in a consumer's hands right now (INV-EO: after an abort exactly
    the aborted transaction's messages come again). An entry not listed there was
    held whole. ``cumulative_position``: the pending cumulative ack that was
    dropped, if any; Pulsar no longer redelivers those from the server (#14371): the
    client redelivers its unacknowledged messages itself.
    """

    positions: tuple[Position, ...] = ()
    cumulative_position: Position | None = None
    batch_members: tuple[tuple[Position, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class NormalAck:
    """How the broker should apply a non-transactional individual ack.

    ``apply`` False: drop it (every member is pending in a transaction, Pulsar
    ignores such acks). Otherwise apply ``ack_set`` (``None``: the whole entry) in
    place of the client's: members pending in a transaction are kept unacked on the
    cursor, so an abort can still hand them back.
    """

    apply: bool
    ack_set: list[int] | None
