"""A producer attached to a topic, and the producer access modes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from quasar.protocol import pb

from .stats_rates import MessageRate, average_msg_size

ACCESS_SHARED = pb.Shared
ACCESS_EXCLUSIVE = pb.Exclusive
ACCESS_WAIT_FOR_EXCLUSIVE = pb.WaitForExclusive
ACCESS_EXCLUSIVE_WITH_FENCING = pb.ExclusiveWithFencing
ACCESS_MODE_NAMES: dict[int, str] = {
    ACCESS_SHARED: "Shared",
    ACCESS_EXCLUSIVE: "Exclusive",
    ACCESS_WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
    ACCESS_EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing",
}


class ProducerConnection(Protocol):
    def write(self, frame: bytes) -> None: ...

    def close_producer(self, producer_id: int) -> None:
        """Tell the client to drop and re-create the producer (CLOSE_PRODUCER)."""
        ...

    @property
    def remote_address(self) -> str: ...

    @property
    def client_version(self) -> str: ...


@dataclass(eq=False)
class Producer:
    producer_id: int
    producer_name: str
    connection: ProducerConnection
    access_mode: int = ACCESS_SHARED
    epoch: int = 0
    # The topic epoch the client brought back from an earlier grant of exclusive
    # access (CommandProducer.topic_epoch), and the one it holds once attached.
    requested_topic_epoch: int | None = None
    topic_epoch: int | None = None
    user_provided_name: bool = False
    metadata: dict[str, str] | None = None
    schema_version: bytes = b""
    closed: bool = False
    msg_in: int = 0
    bytes_in: int = 0
    pending_publishes: int = 0
    # msgRateIn and msgThroughputIn, refreshed by the stats updater.
    rate_in: MessageRate = field(default_factory=MessageRate)

    @property
    def exclusive(self) -> bool:
        return self.access_mode != ACCESS_SHARED

    def stats(self) -> dict[str, object]:
        return {
            "producerId": self.producer_id,
            "producerName": self.producer_name,
            "accessMode": ACCESS_MODE_NAMES.get(self.access_mode, "Shared"),
            "msgRateIn": self.rate_in.msg_rate,
            "msgThroughputIn": self.rate_in.byte_rate,
            "averageMsgSize": average_msg_size(self.rate_in),
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "address": self.connection.remote_address,
            "clientVersion": self.connection.client_version,
            "metadata": dict(self.metadata or {}),
        }
