"""PARTITIONED_METADATA, LOOKUP, GET_TOPICS_OF_NAMESPACE, GET_SCHEMA and
GET_OR_CREATE_SCHEMA on a client connection: questions about topics, answered at once
from the broker's metadata."""

from __future__ import annotations

from quasar.auth.authorization import CONSUME
from quasar.broker.lookup_data import lookup_data
from quasar.broker.non_persistent_admin import NonPersistentAdmin
from quasar.broker.schema import decode_version, encode_version
from quasar.errors import QuasarError, TopicNotFound
from quasar.protocol import pb

from . import replies
from .context import CommandHandler, ConnectionContext
from .permissions import refuse_system_topic, require
from .replies import error_code_and_message
from .topic_list_commands import topics_of_namespace_answer
from .wire import namespace_of, schema_info, topic_of

T = pb.BaseCommand


class LookupCommands:
    """Answers where a topic lives, how it is partitioned and what its schema is."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx

    def handlers(self) -> dict[int, CommandHandler]:
        return {
            T.PARTITIONED_METADATA: lambda c, f: self.on_partitioned_metadata(
                c.partitionMetadata
            ),
            T.LOOKUP: lambda c, f: self.on_lookup(c.lookupTopic),
            T.GET_TOPICS_OF_NAMESPACE: lambda c, f: self.on_get_topics(c.getTopicsOfNamespace),
            T.GET_SCHEMA: lambda c, f: self.on_get_schema(c.getSchema),
            T.GET_OR_CREATE_SCHEMA: lambda c, f: self.on_get_or_create_schema(
                c.getOrCreateSchema
            ),
        }

    def on_partitioned_metadata(self, c: pb.CommandPartitionedTopicMetadata) -> None:
        cmd = T(type=T.PARTITIONED_METADATA_RESPONSE)
        r = cmd.partitionMetadataResponse
        r.request_id = c.request_id
        try:
            ctx = self._ctx
            name = topic_of(c.topic)
            require(
                ctx,
                ctx.authorization.can_lookup(name, ctx.principal),
                "Get Partition Metadata",
                name.full,
            )
            r.partitions = ctx.service.partitioned_metadata(name)
            r.response = pb.CommandPartitionedTopicMetadataResponse.Success
        except QuasarError as e:
            code, message = error_code_and_message(self._ctx.refusals.counted(e))
            r.response = pb.CommandPartitionedTopicMetadataResponse.Failed
            r.error = code
            r.message = message
        self._ctx.send_command(cmd)

    def on_lookup(self, c: pb.CommandLookupTopic) -> None:
        ctx = self._ctx
        cmd = T(type=T.LOOKUP_RESPONSE)
        r = cmd.lookupTopicResponse
        r.request_id = c.request_id
        try:
            name = topic_of(c.topic)
            require(ctx, ctx.authorization.can_lookup(name, ctx.principal), "Lookup", name.full)
            if not ctx.service.namespace_exists(name.namespace_name):
                raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
            # Standalone: this broker owns every topic, so the answer is always itself,
            # through the listener the client named (lookup_data.py). Both URLs, for
            # the ports that are on: a client connected over TLS follows
            # brokerServiceUrlTls, a plaintext one brokerServiceUrl.
            ownership = ctx.service.ownership
            if ownership is None:
                found = lookup_data(ctx.settings, c.advertised_listener_name)
                r.response = pb.CommandLookupTopicResponse.Connect
                r.authoritative = True
            else:
                # A cluster member: Connect, or Redirect to the bundle's owner
                # (quasar.cluster.member).
                answer = ownership.lookup(
                    name, c.authoritative, c.advertised_listener_name
                )
                found = answer.data
                r.response = (
                    pb.CommandLookupTopicResponse.Redirect
                    if answer.redirect
                    else pb.CommandLookupTopicResponse.Connect
                )
                r.authoritative = answer.authoritative
            if found.broker_url is not None:
                r.brokerServiceUrl = found.broker_url
            if found.broker_url_tls is not None:
                r.brokerServiceUrlTls = found.broker_url_tls
        except QuasarError as e:
            code, message = error_code_and_message(self._ctx.refusals.counted(e))
            r.response = pb.CommandLookupTopicResponse.Failed
            r.error = code
            r.message = message
        ctx.send_command(cmd)

    def on_get_topics(self, c: pb.CommandGetTopicsOfNamespace) -> None:
        ctx = self._ctx
        try:
            namespace = namespace_of(c.namespace)
            require(
                ctx,
                ctx.authorization.allows_in_namespace(namespace, ctx.principal, CONSUME),
                "Get Topics of Namespace",
                namespace,
            )
            topics = (
                []
                if c.mode == pb.CommandGetTopicsOfNamespace.NON_PERSISTENT
                else ctx.service.list_topics(namespace)
            )
            if c.mode != pb.CommandGetTopicsOfNamespace.PERSISTENT:
                # The loaded non-persistent topics, as Pulsar lists them.
                topics = sorted(topics + NonPersistentAdmin(ctx.service).list_topics(namespace))
        except QuasarError as e:
            ctx.send_command(replies.error(c.request_id, ctx.refusals.counted(e)))
            return
        ctx.send_command(topics_of_namespace_answer(ctx, c, topics))

    def on_get_schema(self, c: pb.CommandGetSchema) -> None:
        service = self._ctx.service
        cmd = T(type=T.GET_SCHEMA_RESPONSE)
        r = cmd.getSchemaResponse
        r.request_id = c.request_id
        try:
            name = topic_of(c.topic)
            ctx = self._ctx
            require(ctx, ctx.authorization.can_lookup(name, ctx.principal), "Get Schema", name.full)
        except QuasarError as e:
            code, message = error_code_and_message(self._ctx.refusals.counted(e))
            r.error_code = code
            r.error_message = message
            self._ctx.send_command(cmd)
            return
        try:
            version = decode_version(c.schema_version) if c.HasField("schema_version") else None
            found = service.schemas.get(service.schema_key(name), version)
        except QuasarError:
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
        self._ctx.send_command(cmd)

    def on_get_or_create_schema(self, c: pb.CommandGetOrCreateSchema) -> None:
        service = self._ctx.service
        cmd = T(type=T.GET_OR_CREATE_SCHEMA_RESPONSE)
        r = cmd.getOrCreateSchemaResponse
        r.request_id = c.request_id
        try:
            name = topic_of(c.topic)
            ctx = self._ctx
            # Registering a schema is part of producing to the topic.
            refuse_system_topic(ctx, name, "register a schema on")
            require(ctx, ctx.authorization.can_produce(name, ctx.principal), "Produce", name.full)
            v = service.schemas.put_if_absent(service.schema_key(name), schema_info(c.schema))
            r.schema_version = encode_version(v)
        except QuasarError as e:
            code, message = error_code_and_message(self._ctx.refusals.counted(e))
            r.error_code = code
            r.error_message = message
        self._ctx.send_command(cmd)
