"""PARTITIONED_METADATA, LOOKUP, GET_TOPICS_OF_NAMESPACE and schema requests."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from quasar.broker.schema import decode_version, encode_version
from quasar.errors import BrokerError, TopicNotFound
from quasar.protocol import TopicName, pb

from .producer_commands import schema_info

if TYPE_CHECKING:
    from .connection import ServerConnection

log = logging.getLogger(__name__)


class LookupCommands:
    def lookup_handlers(self: ServerConnection) -> dict[int, Any]:  # type: ignore[misc]
        T = pb.BaseCommand
        return {
            T.PARTITIONED_METADATA: lambda c, f: self._on_partitioned_metadata(c.partitionMetadata),
            T.LOOKUP: lambda c, f: self._on_lookup(c.lookupTopic),
            T.GET_TOPICS_OF_NAMESPACE: lambda c, f: self._on_get_topics(
                c.getTopicsOfNamespace
            ),
            T.GET_SCHEMA: lambda c, f: self._on_get_schema(c.getSchema),
            T.GET_OR_CREATE_SCHEMA: lambda c, f: self._on_get_or_create_schema(
                c.getOrCreateSchema
            ),
        }

    def _on_partitioned_metadata(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandPartitionedTopicMetadata
    ) -> None:
        from .connection import error_code_and_message

        cmd = pb.BaseCommand(type=pb.BaseCommand.PARTITIONED_METADATA_RESPONSE)
        r = cmd.partitionMetadataResponse
        r.request_id = c.request_id
        try:
            r.partitions = self.service.partitioned_metadata(TopicName.parse(c.topic))
            r.response = pb.CommandPartitionedTopicMetadataResponse.Success
        except BrokerError as e:
            code, message = error_code_and_message(e)
            r.response = pb.CommandPartitionedTopicMetadataResponse.Failed
            r.error = code
            r.message = message
        self.send_command(cmd)

    def _on_lookup(self: ServerConnection, c: pb.CommandLookupTopic) -> None:  # type: ignore[misc]
        from .connection import error_code_and_message

        cmd = pb.BaseCommand(type=pb.BaseCommand.LOOKUP_RESPONSE)
        r = cmd.lookupTopicResponse
        r.request_id = c.request_id
        try:
            name = TopicName.parse(c.topic)
            if not self.service.namespace_exists(name.namespace_name):
                raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
            # Standalone: this broker owns every topic, so the answer is always itself.
            r.response = pb.CommandLookupTopicResponse.Connect
            r.brokerServiceUrl = self.settings.broker_service_url
            r.authoritative = True
        except BrokerError as e:
            code, message = error_code_and_message(e)
            r.response = pb.CommandLookupTopicResponse.Failed
            r.error = code
            r.message = message
        self.send_command(cmd)

    def _on_get_topics(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandGetTopicsOfNamespace
    ) -> None:
        cmd = pb.BaseCommand(type=pb.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE)
        r = cmd.getTopicsOfNamespaceResponse
        r.request_id = c.request_id
        if c.mode != pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
            r.topics.extend(self.service.list_topics(c.namespace))
        self.send_command(cmd)

    def _on_get_schema(self: ServerConnection, c: pb.CommandGetSchema) -> None:  # type: ignore[misc]
        cmd = pb.BaseCommand(type=pb.BaseCommand.GET_SCHEMA_RESPONSE)
        r = cmd.getSchemaResponse
        r.request_id = c.request_id
        try:
            name = TopicName.parse(c.topic)
            version = decode_version(c.schema_version) if c.HasField("schema_version") else None
            found = self.service.schemas.get(self.service.schema_key(name), version)
        except BrokerError:
            found = None
        if found is None:
            r.error_code = pb.TopicNotFound
            r.error_message = "Schema not found"
        else:
            v, info = found
            r.schema.name = info.name
            r.schema.type = info.type
            r.schema.schema_data = info.data
            for k, val in info.properties:
                r.schema.properties.add(key=k, value=val)
            r.schema_version = encode_version(v)
        self.send_command(cmd)

    def _on_get_or_create_schema(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandGetOrCreateSchema
    ) -> None:
        from .connection import error_code_and_message

        cmd = pb.BaseCommand(type=pb.BaseCommand.GET_OR_CREATE_SCHEMA_RESPONSE)
        r = cmd.getOrCreateSchemaResponse
        r.request_id = c.request_id
        try:
            name = TopicName.parse(c.topic)
            v = self.service.schemas.put_if_absent(
                self.service.schema_key(name), schema_info(c.schema)
            )
            r.schema_version = encode_version(v)
        except BrokerError as e:
            code, message = error_code_and_message(e)
            r.error_code = code
            r.error_message = message
        self.send_command(cmd)
