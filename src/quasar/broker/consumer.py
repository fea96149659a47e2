"""A consumer attached to a subscription: permits, in-flight entries, delivery.

Permits count *messages*, not entries (a batch entry of N messages costs N). Like the
Java broker, an entry is delivered whenever the consumer has any permit left, so the
count may go negative instead of splitting an entry.

``pending`` maps every entry delivered to this consumer and not yet acknowledged to its
message count. When the consumer goes away, those entries are handed back to the
subscription for redelivery, which is how "redeliver all unacked on reconnect" works.

Permits are the client's word, up to 2^32 - 1 per FLOW, and say nothing about what
the broker can hold: a consumer is also unavailable while its connection's write
buffer is full (``WriteState``, shared by the consumers of one connection and set by
the server), so a client that grants permits and does not read costs the broker one
write buffer, not its backlog.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from quasar.protocol import encode_message_frame
from quasar.storage.api import Entry, Position

from .entry_info import EntryInfo
from .stats_rates import MessageRate


class ConsumerConnection(Protocol):
    """What a consumer needs from its client connection (implemented by the server)."""

    def write(self, frame: bytes) -> None: ...

    def close_consumer(self, consumer_id: int) -> None:
        """Tell the client to drop and re-create the consumer (CLOSE_CONSUMER)."""
        ...

    @property
    def remote_address(self) -> str: ...

    @property
    def client_version(self) -> str: ...


@dataclass(slots=True)
class Delivery:
    """One entry on its way to a consumer."""

    entry: Entry
    info: EntryInfo
    redelivery_count: int = 0
    ack_set: Sequence[int] | None = None


class WriteState:
    """Whether a connection can take more deliveries now (its write buffer is below
    the high-water mark). The server's connection sets it; its consumers read it."""

    __slots__ = ("writable",)

    def __init__(self) -> None:
        self.writable = True


_connected_since_counter = itertools.count()


@dataclass(eq=False)
class Consumer:
    consumer_id: int
    consumer_name: str
    subscription_name: str
    sub_type: int
    connection: ConsumerConnection
    partition_index: int = -1
    priority_level: int = 0
    read_compacted: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    key_shared_mode: int | None = None
    # KeySharedMeta: the STICKY hash ranges it declared (inclusive) and whether it
    # accepts out-of-order delivery when consumers join.
    key_shared_ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order_delivery: bool = False
    max_unacked_messages: int = 50_000  # maxUnackedMessagesPerConsumer
    connected_since_ms: int = 0
    # Shared with the other consumers of the same connection.
    write_state: WriteState = field(default_factory=WriteState)

    permits: int = 0
    pending: dict[Position, int] = field(default_factory=dict)
    unacked_messages: int = 0
    closed: bool = False
    msg_out: int = 0
    bytes_out: int = 0
    msg_redelivered: int = 0
    order: int = field(default_factory=lambda: next(_connected_since_counter))
    # msgRateOut/msgThroughputOut and msgRateRedeliver, refreshed by the stats
    # updater from msg_out/bytes_out and msg_redelivered.
    rate_out: MessageRate = field(default_factory=MessageRate)
    rate_redeliver: MessageRate = field(default_factory=MessageRate)

    @property
    def blocked_on_unacked(self) -> bool:
        return self.max_unacked_messages > 0 and self.unacked_messages >= self.max_unacked_messages

    def available(self) -> bool:
        """True if this consumer may be given another entry now."""
        return (
            not self.closed
            and self.permits > 0
            and self.write_state.writable
            and not self.blocked_on_unacked
        )

    def add_permits(self, n: int) -> None:
        self.permits += n

    def deliver(self, deliveries: Sequence[Delivery], track: bool = True) -> int:
        """Send entries as MESSAGE frames and account permits and pending acks.

        Stops early once the connection's write buffer is full, and returns how many
        entries went out (at least one); the caller puts the rest back.
        """
        write = self.connection.write
        cid = self.consumer_id
        part = self.partition_index
        write_state = self.write_state
        sent = 0
        for d in deliveries:
            if sent and not write_state.writable:
                break
            sent += 1
            pos = d.entry.position
            n = d.info.num_messages
            write(
                encode_message_frame(
                    cid,
                    pos.ledger_id,
                    pos.entry_id,
                    part,
                    d.redelivery_count,
                    list(d.ack_set) if d.ack_set else None,
                    d.entry.data,
                )
            )
            self.permits -= n
            self.msg_out += n
            self.bytes_out += len(d.entry.data)
            if d.redelivery_count:
                self.msg_redelivered += n
            if track and pos not in self.pending:
                self.pending[pos] = n
                self.unacked_messages += n
        return sent

    def acked(self, position: Position) -> bool:
        """Forget an acknowledged entry; returns True if it was pending here."""
        n = self.pending.pop(position, None)
        if n is None:
            return False
        self.unacked_messages -= n
        return True

    def acked_up_to(self, position: Position) -> None:
        """Forget every pending entry at or before ``position`` (cumulative ack)."""
        done = [p for p in self.pending if p <= position]
        for p in done:
            self.unacked_messages -= self.pending.pop(p)

    def take_pending(self) -> list[Position]:
        """Remove and return all pending entries (for redelivery elsewhere)."""
        positions = sorted(self.pending)
        self.pending.clear()
        self.unacked_messages = 0
        return positions

    def stats(self) -> dict[str, object]:
        """Pulsar ConsumerStats JSON shape (the fields quasar tracks)."""
        return {
            "consumerName": self.consumer_name,
            "msgRateOut": self.rate_out.msg_rate,
            "msgThroughputOut": self.rate_out.byte_rate,
            "msgOutCounter": self.msg_out,
            "bytesOutCounter": self.bytes_out,
            "msgRateRedeliver": self.rate_redeliver.msg_rate,
            "availablePermits": self.permits,
            "unackedMessages": self.unacked_messages,
            "blockedConsumerOnUnackedMsgs": self.blocked_on_unacked,
            "address": self.connection.remote_address,
            "clientVersion": self.connection.client_version,
            "metadata": dict(self.metadata),
        }
