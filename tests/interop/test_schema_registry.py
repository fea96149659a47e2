"""The schema registry through a real broker: evolution under each compatibility
strategy, deletion, the admin API, and schemas across both clients."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import _pulsar
import pulsar
import pytest

import quasar.client
from quasar.cli.main import main
from quasar.errors import ServerError
from quasar.protocol import encode_command, pb
from quasar.protocol.schema_data import decode_key_value
from quasar.testing.hostile import HostileClient
from quasar.testing.process import BrokerProcess

from .conftest import Admin, make_client

pytestmark = pytest.mark.interop

T = pb.BaseCommand


@pytest.fixture(scope="module")
def official(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    """The official client alone: evolution is about what the broker decides, and
    the official client is the reference for what it sends."""
    c = make_client(pulsar, broker.url)
    yield c
    c.close()


def namespace_with(admin: Admin, strategy: str) -> str:
    ns = f"public/schema-{uuid.uuid4().hex[:8]}"
    admin.ok("PUT", f"/admin/v2/namespaces/{ns}", {})
    admin.ok("PUT", f"/admin/v2/namespaces/{ns}/schemaCompatibilityStrategy", strategy)
    return ns


def records(mod: Any) -> dict[str, type]:
    """Versions of one record: ``a`` alone, plus ``b`` with a default, plus ``c``
    without one, and ``b`` without a default."""
    s = mod.schema

    class V1(s.Record):
        a = s.String()

    class V2(s.Record):
        a = s.String()
        b = s.Integer(default=7, required_default=True)

    class V3(s.Record):
        a = s.String()
        b = s.Integer(default=7, required_default=True)
        c = s.Integer()

    class V2NoDefault(s.Record):
        a = s.String()
        b = s.Integer()

    # Avro matches records by name: every version is the record "Event".
    for cls in (V1, V2, V3, V2NoDefault):
        cls.__name__ = "Event"
    return {"V1": V1, "V2": V2, "V3": V3, "V2NoDefault": V2NoDefault}


SCHEMA_KINDS = ["AvroSchema", "JsonSchema"]


def attach(client: Any, topic: str, schema: Any) -> None:
    client.create_producer(topic, schema=schema).close()


def refused(client: Any, topic: str, schema: Any) -> None:
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=schema)


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_backward(official: pulsar.Client, admin: Admin, kind: str) -> None:
    r, make = records(pulsar), getattr(pulsar.schema, kind)
    topic = f"persistent://{namespace_with(admin, 'BACKWARD')}/t"
    attach(official, topic, make(r["V1"]))
    attach(official, topic, make(r["V2"]))  # a field with a default reads old data
    refused(official, topic, make(r["V3"]))  # c has no default: old data lacks it


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_forward(official: pulsar.Client, admin: Admin, kind: str) -> None:
    r, make = records(pulsar), getattr(pulsar.schema, kind)
    topic = f"persistent://{namespace_with(admin, 'FORWARD')}/t"
    attach(official, topic, make(r["V2NoDefault"]))
    attach(official, topic, make(r["V3"]))  # the old schema skips the new field c
    refused(official, topic, make(r["V1"]))  # V3 cannot read data without c


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_full(official: pulsar.Client, admin: Admin, kind: str) -> None:
    r, make = records(pulsar), getattr(pulsar.schema, kind)
    topic = f"persistent://{namespace_with(admin, 'FULL')}/t"
    attach(official, topic, make(r["V1"]))
    attach(official, topic, make(r["V2"]))
    refused(official, topic, make(r["V3"]))
    refused(official, topic, pulsar.schema.StringSchema())  # another type


def test_always_compatible_and_incompatible(official: pulsar.Client, admin: Admin) -> None:
    r = records(pulsar)
    anything = f"persistent://{namespace_with(admin, 'ALWAYS_COMPATIBLE')}/t"
    attach(official, anything, pulsar.schema.AvroSchema(r["V1"]))
    attach(official, anything, pulsar.schema.AvroSchema(r["V3"]))
    attach(official, anything, pulsar.schema.StringSchema())
    nothing = f"persistent://{namespace_with(admin, 'ALWAYS_INCOMPATIBLE')}/t"
    attach(official, nothing, pulsar.schema.AvroSchema(r["V1"]))
    attach(official, nothing, pulsar.schema.AvroSchema(r["V1"]))  # the same version
    refused(official, nothing, pulsar.schema.AvroSchema(r["V2"]))


def test_transitive_checks_every_version(official: pulsar.Client, admin: Admin) -> None:
    """V2NoDefault reads V2's data (b is there) but not V1's (b is missing and has no
    default): BACKWARD accepts it after V1, V2; BACKWARD_TRANSITIVE does not."""
    r = records(pulsar)
    for strategy, accepted in (("BACKWARD", True), ("BACKWARD_TRANSITIVE", False)):
        topic = f"persistent://{namespace_with(admin, strategy)}/t"
        attach(official, topic, pulsar.schema.AvroSchema(r["V1"]))
        attach(official, topic, pulsar.schema.AvroSchema(r["V2"]))
        third = pulsar.schema.AvroSchema(r["V2NoDefault"])
        if accepted:
            attach(official, topic, third)
        else:
            refused(official, topic, third)
    schemas = admin.ok("GET", f"/admin/v2/schemas/{topic.split('://')[1]}/schemas")
    assert [s["version"] for s in schemas["getSchemaResponses"]] == [0, 1]


def test_refused_subscribe_leaves_the_exclusive_subscription_free(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    """A SUBSCRIBE refused for its schema must not hold the Exclusive subscription:
    the compatible retry gets it (not ConsumerBusy) and receives."""
    r = records(pulsar_mod)
    producer = client.create_producer(topic, schema=pulsar_mod.schema.AvroSchema(r["V1"]))
    with pytest.raises(pulsar_mod.IncompatibleSchema):
        client.subscribe(topic, "excl", schema=pulsar_mod.schema.StringSchema())
    consumer = client.subscribe(topic, "excl", schema=pulsar_mod.schema.AvroSchema(r["V1"]))
    producer.send(r["V1"](a="after"))
    assert consumer.receive(10_000).value().a == "after"


def test_consumer_schema_is_checked_and_registered_on_an_empty_topic(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    r = records(pulsar_mod)
    client.subscribe(topic, "first", schema=pulsar_mod.schema.AvroSchema(r["V1"])).close()
    path = f"/admin/v2/schemas/{topic.split('://')[1]}/schema"
    assert admin.ok("GET", path)["type"] == "AVRO"
    # Under FULL, a consumer whose schema cannot read version 0 is refused.
    with pytest.raises(pulsar_mod.IncompatibleSchema):
        client.subscribe(topic, "second", schema=pulsar_mod.schema.AvroSchema(r["V3"]))


AVRO_V1 = '{"type":"record","name":"Event","fields":[{"name":"a","type":"string"}]}'
AVRO_LONG = '{"type":"record","name":"Other","fields":[{"name":"n","type":"long"}]}'


def test_admin_round_trip_and_deletion(official: pulsar.Client, admin: Admin) -> None:
    ns = namespace_with(admin, "FULL")
    base = f"/admin/v2/schemas/{ns}/t"
    payload = {"type": "AVRO", "schema": AVRO_V1, "properties": {"owner": "team-a"}}
    assert admin.ok("POST", base + "/schema", payload) == {"version": {"version": 0}}
    got = admin.ok("GET", base + "/schema")
    assert (got["version"], got["type"], got["data"], got["properties"]) == (
        0, "AVRO", AVRO_V1, {"owner": "team-a"},
    )
    assert got["timestamp"] > 0
    assert admin.ok("GET", base + "/schema/0") == got
    assert admin.ok("POST", base + "/version", payload) == {"version": 0}
    other = {"type": "AVRO", "schema": AVRO_LONG}
    assert admin.ok("POST", base + "/compatibility", other) == {
        "compatibility": False, "schemaCompatibilityStrategy": "FULL",
    }
    assert admin.request("POST", base + "/schema", other)[0] == 409
    assert admin.request("POST", base + "/schema", {"type": "AVRO", "schema": "{"})[0] == 409
    # Deleting is a new version; afterwards any schema is accepted, numbered after it.
    assert admin.ok("DELETE", base + "/schema") == {"version": 1}
    assert admin.request("GET", base + "/schema")[0] == 404
    assert admin.request("DELETE", base + "/schema")[0] == 404
    assert admin.ok("POST", base + "/compatibility", other)["compatibility"] is True
    attach(official, f"persistent://{ns}/t", pulsar.schema.StringSchema())
    latest = admin.ok("GET", base + "/schema")
    assert (latest["version"], latest["type"]) == (2, "STRING")
    assert [s["version"] for s in admin.ok("GET", base + "/schemas")["getSchemaResponses"]] == [2]
    assert admin.ok("GET", base + "/schema/0")["data"] == AVRO_V1  # still readable by number
    assert admin.request("GET", base + "/schema/1")[0] == 404  # the deletion itself
    assert admin.request("GET", base + "/schema/x")[0] == 400


def test_namespace_schema_policies(official: pulsar.Client, admin: Admin) -> None:
    r = records(pulsar)
    ns = namespace_with(admin, "FULL")
    policy = f"/admin/v2/namespaces/{ns}"
    topic = f"persistent://{ns}/t"
    assert admin.request("GET", policy + "/isAllowAutoUpdateSchema")[0] == 204
    attach(official, topic, pulsar.schema.AvroSchema(r["V1"]))
    admin.ok("POST", policy + "/isAllowAutoUpdateSchema", False)
    assert admin.ok("GET", policy + "/isAllowAutoUpdateSchema") is False
    attach(official, topic, pulsar.schema.AvroSchema(r["V1"]))  # an existing version
    refused(official, topic, pulsar.schema.AvroSchema(r["V2"]))  # a compatible new one
    # A producer without a schema is refused only while validation is enforced.
    official.create_producer(topic).close()
    admin.ok("POST", policy + "/schemaValidationEnforced", True)
    assert admin.ok("GET", policy + "/schemaValidationEnforced") is True
    with pytest.raises(pulsar.IncompatibleSchema):
        official.create_producer(topic)


@pytest.mark.parametrize(
    "writer, reader", [(pulsar, quasar.client), (quasar.client, pulsar)],
    ids=["pulsar-to-quasar", "quasar-to-pulsar"],
)
def test_avro_across_clients(
    broker: BrokerProcess, admin: Admin, writer: Any, reader: Any
) -> None:
    topic = f"persistent://public/default/avro-{uuid.uuid4().hex[:8]}"
    w_client, r_client = make_client(writer, broker.url), make_client(reader, broker.url)
    try:
        w_record, r_record = records(writer)["V2"], records(reader)["V2"]
        consumer = r_client.subscribe(topic, "s", schema=reader.schema.AvroSchema(r_record))
        producer = w_client.create_producer(topic, schema=writer.schema.AvroSchema(w_record))
        producer.send(w_record(a="héllo", b=42))
        got = consumer.receive(10_000)
        assert (got.value().a, got.value().b) == ("héllo", 42)
        # Both clients write the same definition for the same class: one version.
        versions = admin.ok("GET", f"/admin/v2/schemas/{topic.split('://')[1]}/schemas")
        assert len(versions["getSchemaResponses"]) == 1
    finally:
        w_client.close()
        r_client.close()


def test_key_value_schema_across_clients(broker: BrokerProcess) -> None:
    """quasar's client writes KeyValue(String, Avro) INLINE; the official client (which
    has no KeyValue schema) downloads the registered schema and reads the layout."""
    s = quasar.client.schema
    topic = f"persistent://public/default/kv-{uuid.uuid4().hex[:8]}"
    v2 = records(quasar.client)["V2"]
    kv = s.KeyValueSchema(s.StringSchema(), s.AvroSchema(v2))
    q, o = make_client(quasar.client, broker.url), make_client(pulsar, broker.url)
    try:
        raw = o.subscribe(topic, "raw")
        typed = q.subscribe(topic, "typed", schema=kv)
        q.create_producer(topic, schema=kv).send(("k1", v2(a="v", b=1)))
        assert typed.receive(10_000).value() == ("k1", v2(a="v", b=1))
        key, value = decode_key_value(raw.receive(10_000).data())
        assert key == b"k1" and value == s.AvroSchema(v2).encode(v2(a="v", b=1))
        info = o._client.get_schema_info(topic, 0)
        assert info.schema_type() == _pulsar.SchemaType.KEY_VALUE
        # An incompatible value schema is refused under FULL.
        with pytest.raises(quasar.client.IncompatibleSchema):
            q.create_producer(topic, schema=s.KeyValueSchema(s.StringSchema(), s.StringSchema()))
    finally:
        q.close()
        o.close()


def get_or_create(client: HostileClient, topic: str, kind: int, data: bytes) -> Any:
    cmd = T(type=T.GET_OR_CREATE_SCHEMA)
    c = cmd.getOrCreateSchema
    c.topic, c.request_id = topic, client.new_id()
    c.schema.name, c.schema.type, c.schema.schema_data = "s", kind, data
    return client.answer(cmd).getOrCreateSchemaResponse


def test_get_or_create_schema_then_get_schema_by_version(broker: BrokerProcess) -> None:
    topic = f"persistent://public/default/goc-{uuid.uuid4().hex[:8]}"
    client = HostileClient(broker.port)
    try:
        first = get_or_create(client, topic, pb.Schema.Avro, AVRO_V1.encode())
        assert first.schema_version == (0).to_bytes(8, "big")
        again = get_or_create(client, topic, pb.Schema.Avro, AVRO_V1.encode())
        assert again.schema_version == first.schema_version
        bad = get_or_create(client, topic, pb.Schema.Avro, AVRO_LONG.encode())
        assert bad.error_code == ServerError.IncompatibleSchema
        cmd = T(type=T.GET_SCHEMA)
        cmd.getSchema.topic, cmd.getSchema.request_id = topic, client.new_id()
        cmd.getSchema.schema_version = first.schema_version
        got = client.answer(cmd).getSchemaResponse
        assert (got.schema.type, got.schema.schema_data) == (pb.Schema.Avro, AVRO_V1.encode())
    finally:
        client.close()


def test_schema_versions_survive_kill_9(tmp_path: Any, admin: Admin) -> None:
    del admin  # the session broker is not the one killed here
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    try:
        base = "/admin/v2/schemas/public/default/durable"
        local = Admin(proc.admin_url)
        local.ok("POST", base + "/schema", {"type": "AVRO", "schema": AVRO_V1})
        proc.restart(hard=True)
        assert Admin(proc.admin_url).ok("GET", base + "/schema")["data"] == AVRO_V1
    finally:
        proc.stop()



def test_consumer_closed_while_subscribing_leaves_the_subscription_free(
    broker: BrokerProcess,
) -> None:
    """A client that gives up on a subscribe (a partitioned subscribe refused on
    another partition) sends CLOSE_CONSUMER while the SUBSCRIBE is still loading the
    topic: the subscribe must not attach afterwards and hold the Exclusive
    subscription, or the client's next subscribe gets ConsumerBusy."""
    topic = f"persistent://public/default/closed-{uuid.uuid4().hex[:8]}"
    client = HostileClient(broker.port)
    try:
        subscribe = T(type=T.SUBSCRIBE)
        s = subscribe.subscribe
        s.topic, s.subscription, s.subType = topic, "excl", pb.CommandSubscribe.Exclusive
        s.consumer_id, s.request_id = 1, 1
        close = T(type=T.CLOSE_CONSUMER)
        close.close_consumer.consumer_id, close.close_consumer.request_id = 1, 2
        # One write: the close is read before the subscribe's topic has loaded.
        client.raw.send_bytes(encode_command(subscribe) + encode_command(close))
        first = [client.next_answer(), client.next_answer()]
        again = T(type=T.SUBSCRIBE)
        again.subscribe.CopyFrom(s)
        again.subscribe.consumer_id, again.subscribe.request_id = 3, 3
        answer = client.answer(again)
        assert answer.type == T.SUCCESS, answer  # not ConsumerBusy
        assert {(a.type, a.success.request_id if a.type == T.SUCCESS else a.error.request_id)
                for a in first} == {(T.ERROR, 1), (T.SUCCESS, 2)}
    finally:
        client.close()


def test_cli_schemas(broker: BrokerProcess, admin: Admin, tmp_path: Any,
                     capsys: pytest.CaptureFixture[str]) -> None:
    ns = namespace_with(admin, "FULL")
    topic = f"persistent://{ns}/cli"

    def cli(*argv: str) -> Any:
        code = main(["--log-level", "WARNING", "admin", "--admin-url", broker.admin_url,
                     "--output", "json", *argv])
        out = capsys.readouterr().out
        return code, json.loads(out) if out.strip() else None

    payload = tmp_path / "schema.json"
    payload.write_text(json.dumps({"type": "AVRO", "schema": AVRO_V1, "properties": {}}))
    assert cli("schemas", "upload", topic, "--filename", str(payload)) == (
        0, {"version": {"version": 0}})
    code, got = cli("schemas", "get", topic)
    assert (code, got["type"], got["data"]) == (0, "AVRO", AVRO_V1)
    assert cli("schemas", "compatibility", topic, "-f", str(payload))[1]["compatibility"]
    assert cli("schemas", "delete", topic) == (0, {"version": 1})
    assert cli("schemas", "get", topic)[0] == 1
    assert cli("namespaces", "set-schema-compatibility-strategy", ns, "-c", "BACKWARD")[0] == 0
    assert cli("namespaces", "get-schema-compatibility-strategy", ns) == (0, "BACKWARD")
    assert cli("namespaces", "set-is-allow-auto-update-schema", ns, "--disable")[0] == 0
    assert cli("namespaces", "get-is-allow-auto-update-schema", ns) == (0, False)


def test_protobuf_native_across_clients(
    broker: BrokerProcess, official: pulsar.Client, admin: Admin
) -> None:
    """The official client's ProtobufNativeSchema and quasar's register the same
    definition; another root message type is incompatible under FULL."""
    topic = f"persistent://public/default/proto-{uuid.uuid4().hex[:8]}"
    q = make_client(quasar.client, broker.url)
    try:
        consumer = q.subscribe(
            topic, "s", schema=quasar.client.schema.ProtobufNativeSchema(pb.KeyValue)
        )
        producer = official.create_producer(
            topic, schema=pulsar.schema.ProtobufNativeSchema(pb.KeyValue)
        )
        producer.send(pb.KeyValue(key="k", value="v"))
        assert consumer.receive(10_000).value() == pb.KeyValue(key="k", value="v")
        versions = admin.ok("GET", f"/admin/v2/schemas/{topic.split('://')[1]}/schemas")
        assert len(versions["getSchemaResponses"]) == 1  # byte-identical definitions
        refused(official, topic, pulsar.schema.ProtobufNativeSchema(pb.IntRange))
    finally:
        q.close()


def test_official_consumer_reads_older_versions_by_their_schema(
    official: pulsar.Client, admin: Admin
) -> None:
    """Each message carries the version its producer got in PRODUCER_SUCCESS; the
    official consumer downloads that version (GET_SCHEMA by version) and resolves it
    against its own schema, so V2 reads V1's message with b's default."""
    r = records(pulsar)
    topic = f"persistent://{namespace_with(admin, 'BACKWARD')}/t"
    consumer = official.subscribe(topic, "s", schema=pulsar.schema.AvroSchema(r["V2"]))
    official.create_producer(topic, schema=pulsar.schema.AvroSchema(r["V1"])).send(
        r["V1"](a="old")
    )
    official.create_producer(topic, schema=pulsar.schema.AvroSchema(r["V2"])).send(
        r["V2"](a="new", b=3)
    )
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    assert (first.value().a, first.value().b) == ("old", 7)
    assert (second.value().a, second.value().b) == ("new", 3)
