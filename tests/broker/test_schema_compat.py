"""Schema compatibility and the registry's history, without a broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from quasar.broker.avro_resolution import (
    AvroDefinitionError,
    can_read,
    parse_definition,
)
from quasar.broker.schema import SchemaInfo, SchemaPolicy, SchemaRegistry
from quasar.broker.schema_compat import (
    SchemaDefinition,
    check_compatible,
    check_consumer_compatible,
    reads,
)
from quasar.clock import ManualClock
from quasar.errors import IncompatibleSchema, MetadataError, ResourceNotFoundError
from quasar.protocol.schema_data import (
    KeyValueSchemaData,
    SchemaDataError,
    decode_key_value,
    decode_key_value_schema,
    encode_key_value,
    encode_key_value_schema,
)
from quasar.storage.memory import MemoryMetadataStore

AVRO, JSON_TYPE, STRING, KV, PROTO = 4, 2, 1, 15, 20


def record(*fields: dict[str, Any], name: str = "R") -> Any:
    return {"type": "record", "name": name, "fields": list(fields)}


def avro(schema: Any, kind: int = AVRO) -> SchemaDefinition:
    return SchemaDefinition(kind, json.dumps(schema).encode(), {})


def can(reader: Any, writer: Any) -> bool:
    return can_read(parse_definition(json.dumps(reader).encode()),
                    parse_definition(json.dumps(writer).encode()))


@pytest.mark.parametrize("writer, reader, ok", [
    ("int", "long", True), ("int", "double", True), ("long", "float", True),
    ("float", "double", True), ("string", "bytes", True), ("bytes", "string", True),
    ("long", "int", False), ("double", "float", False), ("string", "int", False),
    ("null", "null", True), ("boolean", "boolean", True),
])
def test_primitive_promotions(writer: str, reader: str, ok: bool) -> None:
    assert can(reader, writer) is ok


def test_record_fields_need_a_default_when_the_writer_lacks_them() -> None:
    old = record({"name": "a", "type": "string"})
    with_default = record({"name": "a", "type": "string"}, {"name": "b", "type": "int", "default": 1})
    without = record({"name": "a", "type": "string"}, {"name": "b", "type": "int"})
    assert can(with_default, old) and can(old, with_default)
    assert not can(without, old) and can(old, without)  # extra writer fields are skipped
    renamed = record({"name": "a", "type": "string"}, name="Other")
    assert not can(renamed, old)
    aliased = {**record({"name": "a2", "type": "string", "aliases": ["a"]}), "aliases": ["R"],
               "name": "New"}
    assert can(aliased, old)


def test_unions_enums_fixed_arrays_maps() -> None:
    assert can(["null", "int"], "int") and not can("int", ["null", "int"])
    assert can(["null", "long"], ["null", "int"])
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    more = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    assert can(more, enum) and not can(enum, more)
    assert can({**enum, "default": "A"}, more)
    fixed4 = {"type": "fixed", "name": "F", "size": 4}
    assert can(fixed4, fixed4) and not can({**fixed4, "size": 8}, fixed4)
    assert can({"type": "array", "items": "long"}, {"type": "array", "items": "int"})
    assert not can({"type": "map", "values": "int"}, {"type": "map", "values": "long"})


def test_recursive_and_named_references() -> None:
    node = record({"name": "v", "type": "int"},
                  {"name": "next", "type": ["null", "R"], "default": None})
    assert can(node, node)
    assert can(record({"name": "x", "type": node}, {"name": "y", "type": "R"}, name="Outer"),
               record({"name": "x", "type": node}, {"name": "y", "type": "R"}, name="Outer"))


def test_malformed_definitions_are_refused() -> None:
    for bad in (b"{", b"[1]", b'{"type": "nope"}', b'"strin"', b"\xff"):
        with pytest.raises(AvroDefinitionError):
            parse_definition(bad)


V1 = avro(record({"name": "a", "type": "string"}))
V2 = avro(record({"name": "a", "type": "string"}, {"name": "b", "type": "int", "default": 0}))
V3 = avro(record({"name": "a", "type": "string"}, {"name": "b", "type": "int"}))


@pytest.mark.parametrize("strategy, history, new, ok", [
    ("BACKWARD", [V1], V2, True), ("BACKWARD", [V1], V3, False),
    ("FORWARD", [V1], V3, True), ("FORWARD", [V3], V1, False),
    ("FULL", [V1], V2, True), ("FULL", [V1], V3, False),
    ("BACKWARD", [V1, V2], V3, True), ("BACKWARD_TRANSITIVE", [V1, V2], V3, False),
    ("FORWARD_TRANSITIVE", [V3, V2], V1, False), ("FORWARD", [V3, V2], V1, True),
    ("FULL_TRANSITIVE", [V1, V2], V2, True),
    ("ALWAYS_COMPATIBLE", [V1], SchemaDefinition(STRING, b"", {}), True),
    ("ALWAYS_INCOMPATIBLE", [V1], V2, False), ("ALWAYS_INCOMPATIBLE", [], V2, True),
    ("FULL", [V1], SchemaDefinition(STRING, b"", {}), False),
    ("FULL", [SchemaDefinition(STRING, b"", {})], SchemaDefinition(STRING, b"", {}), True),
])
def test_strategies(strategy: str, history: list[SchemaDefinition], new: SchemaDefinition,
                    ok: bool) -> None:
    if ok:
        check_compatible(new, history, strategy)
    else:
        with pytest.raises(IncompatibleSchema):
            check_compatible(new, history, strategy)


def test_json_uses_avro_rules_and_consumers_must_read_the_topic() -> None:
    j1, j3 = avro(json.loads(V1.data), JSON_TYPE), avro(json.loads(V3.data), JSON_TYPE)
    assert not reads(j3, j1) and reads(j1, j3)
    check_consumer_compatible(j1, [j3], "FULL")
    with pytest.raises(IncompatibleSchema):
        check_consumer_compatible(j3, [j1], "FULL")
    check_consumer_compatible(j3, [j1], "ALWAYS_COMPATIBLE")


def kv_definition(key: SchemaDefinition, value: SchemaDefinition, encoding: str = "INLINE"
                  ) -> SchemaDefinition:
    data, props = encode_key_value_schema(KeyValueSchemaData(
        "k", key.type, key.data, {}, "v", value.type, value.data, {}, encoding))
    return SchemaDefinition(KV, data, props)


def test_key_value_checks_key_and_value_apart() -> None:
    string = SchemaDefinition(STRING, b"", {})
    assert reads(kv_definition(string, V2), kv_definition(string, V1))
    assert not reads(kv_definition(string, V3), kv_definition(string, V1))
    assert not reads(kv_definition(string, V1, "SEPARATED"), kv_definition(string, V1))
    kv = decode_key_value_schema(*encode_key_value_schema(KeyValueSchemaData(
        "k", STRING, b"", {"a": "b"}, "v", AVRO, V1.data, {}, "SEPARATED")))
    assert (kv.key_type, kv.key_properties, kv.value_data, kv.encoding) == (
        STRING, {"a": "b"}, V1.data, "SEPARATED")


def test_key_value_payload_layout() -> None:
    assert encode_key_value(b"k", b"vv") == b"\0\0\0\x01k\0\0\0\x02vv"
    assert decode_key_value(encode_key_value(None, b"")) == (None, b"")
    for bad in (b"", b"\0\0\0\x05ab", b"\0\0\0\x01k"):
        with pytest.raises(SchemaDataError):
            decode_key_value(bad)


def test_protobuf_native_compares_root_message_names() -> None:
    def proto(root: str) -> SchemaDefinition:
        return SchemaDefinition(PROTO, json.dumps({"rootMessageTypeName": root,
                                                   "fileDescriptorSet": ""}).encode(), {})
    assert reads(proto("a.B"), proto("a.B")) and not reads(proto("a.B"), proto("a.C"))


def info(definition: SchemaDefinition) -> SchemaInfo:
    return SchemaInfo("s", definition.type, definition.data, ())


def registry(policy: SchemaPolicy, max_versions: int = 1000) -> SchemaRegistry:
    return SchemaRegistry(
        MemoryMetadataStore(), lambda key: policy, max_versions, ManualClock()
    )


def test_registry_reuses_versions_and_soft_deletes() -> None:
    r = registry(SchemaPolicy(strategy="FULL"))
    assert r.put_if_absent("t/n/persistent/x", info(V1)) == 0
    assert r.put_if_absent("t/n/persistent/x", info(V2)) == 1
    assert r.put_if_absent("t/n/persistent/x", info(V1)) == 0
    with pytest.raises(IncompatibleSchema):
        r.put_if_absent("t/n/persistent/x", info(SchemaDefinition(STRING, b"", {})))
    assert r.delete("t/n/persistent/x") == 2
    assert r.get("t/n/persistent/x") is None and r.live("t/n/persistent/x") == []
    with pytest.raises(ResourceNotFoundError):
        r.delete("t/n/persistent/x")
    # After the deletion anything goes, numbered after it; old versions stay readable.
    assert r.put_if_absent("t/n/persistent/x", info(SchemaDefinition(STRING, b"", {}))) == 3
    assert r.get("t/n/persistent/x", 0) == (0, info(V1))
    assert r.get("t/n/persistent/x", 2) is None
    assert r.history("t/n/persistent/x")[3].timestamp == ManualClock().wall_ms()


def test_registry_policies_and_bound() -> None:
    frozen = registry(SchemaPolicy(allow_auto_update=False, validation_enforced=True))
    frozen.check_schemaless_producer("k")  # no schema yet
    assert frozen.put_if_absent("k", info(V1)) == 0  # the first version is allowed
    with pytest.raises(IncompatibleSchema, match="auto updating is disabled"):
        frozen.put_if_absent("k", info(V2))
    assert frozen.put_if_absent("k", info(V2), producer=False) == 1  # an admin upload
    with pytest.raises(IncompatibleSchema):
        frozen.check_schemaless_producer("k")
    bounded = registry(SchemaPolicy(strategy="ALWAYS_COMPATIBLE"), max_versions=2)
    bounded.put_if_absent("k", info(V1))
    bounded.put_if_absent("k", info(V2))
    with pytest.raises(IncompatibleSchema) as refused:
        bounded.put_if_absent("k", info(V3))
    assert refused.value.refusal == "schema_versions"
    with pytest.raises(IncompatibleSchema) as malformed:
        bounded.put_if_absent("k2", SchemaInfo("s", AVRO, b"{", ()))
    assert malformed.value.refusal == "schema_definition"


def test_a_history_written_as_a_bare_list_is_read() -> None:
    store = MemoryMetadataStore()
    store.put("/schemas/k", json.dumps([{"name": "s", "type": 1, "data": "",
                                         "properties": []}]).encode())
    r = SchemaRegistry(store)
    assert r.get("k") == (0, SchemaInfo("s", 1, b"", ()))
    assert r.put_if_absent("k", SchemaInfo("s", 1, b"", ())) == 0


def test_hostile_nesting_is_refused_not_crashing() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(AvroDefinitionError):
        parse_definition(deep)
    string = SchemaDefinition(STRING, b"", {})
    nested = kv_definition(kv_definition(string, string), string)
    with pytest.raises(IncompatibleSchema):
        registry(SchemaPolicy()).put_if_absent("k", SchemaInfo("s", KV, nested.data,
                                                             tuple(nested.properties.items())))


def test_an_unknown_history_format_is_refused() -> None:
    store = MemoryMetadataStore()
    store.put("/schemas/k", json.dumps({"v": 99, "versions": []}).encode())
    with pytest.raises(MetadataError):
        SchemaRegistry(store).history("k")
