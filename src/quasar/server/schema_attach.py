"""The schema check of a SUBSCRIBE that carries a schema."""

from __future__ import annotations

from quasar.broker.schema import SchemaInfo
from quasar.broker.service import BrokerService
from quasar.broker.topic import PersistentTopic
from quasar.protocol.topic_name import TopicName

__all__ = ["attach_consumer_schema"]


def attach_consumer_schema(
    service: BrokerService, topic: PersistentTopic, name: TopicName, schema: SchemaInfo
) -> None:
    """Check that a consumer's schema reads the topic's schemas; on a topic that has
    no schema, no clients and no messages, register it (as Pulsar does, so the
    producers that follow must be compatible with what the consumer reads).

    Raises:
        IncompatibleSchema: the consumer's schema does not read the topic's.
    """
    key = service.schema_key(name)
    registry = service.schemas
    if registry.latest(key) is None and topic.is_idle() and topic.ledger.number_of_entries == 0:
        registry.add_for_consumer(key, schema)
    else:
        registry.check_consumer(key, schema)
