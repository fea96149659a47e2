"""The systems compared and the server each runs on.

Systems that share a server kind run one after the other on one server (RabbitMQ's
two queue types, quasar's two clients); servers run one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class System:
    name: str
    server: str  # "quasar", "rabbitmq", "redis", "nats"
    batching: bool  # whether W2 (client batching) applies
    settings: str  # the durability and client settings, for the report
    spec: dict[str, Any] = field(default_factory=dict)


SYSTEMS: tuple[System, ...] = (
    System(
        "quasar-official", "quasar", True,
        "quasar standalone, default configuration (fsync before every receipt); "
        "official pulsar-client 3.13 on both sides through quasar perf",
        {"client": "pulsar"},
    ),
    System(
        "quasar-own", "quasar", True,
        "the same broker; quasar's asyncio client (uvloop) on both sides through quasar perf",
        {"client": "quasar"},
    ),
    System(
        "rabbitmq-quorum", "rabbitmq", False,
        "quorum queue (fsync before confirm), persistent messages, publisher confirms; aio-pika",
        {"queue_type": "quorum"},
    ),
    System(
        "rabbitmq-classic", "rabbitmq", False,
        "classic durable queue, persistent messages, publisher confirms; aio-pika",
        {"queue_type": "classic"},
    ),
    System(
        "redis-streams", "redis", True,
        "appendonly yes, appendfsync always; XADD (W2: pipelines of 100), XREADGROUP, XACK; "
        "redis-py asyncio, 32 producer connections",
    ),
    System(
        "nats-jetstream", "nats", False,
        "JetStream file storage, sync_interval: always; js.publish awaiting each PubAck, "
        "durable pull consumer with explicit acks; nats-py",
    ),
)
NAMES = tuple(s.name for s in SYSTEMS)
QUASAR_SYSTEMS = ("quasar-official", "quasar-own")


def server_class(kind: str) -> Any:
    """The ``ServerProcess`` subclass for a server kind (imported on demand)."""
    if kind == "quasar":
        from peerbench.quasar_perf import QuasarServer

        return QuasarServer
    if kind == "rabbitmq":
        from peerbench.rabbitmq import RabbitServer

        return RabbitServer
    if kind == "redis":
        from peerbench.redis_streams import RedisServer

        return RedisServer
    from peerbench.nats_jetstream import NatsServer

    return NatsServer
