"""Schemas and producer deduplication through a real broker."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .conftest import Admin, topic_path

pytestmark = pytest.mark.interop


def test_string_schema(client: Any, pulsar_mod: Any, topic: str) -> None:
    schema = pulsar_mod.schema.StringSchema()
    c = client.subscribe(topic, "s", schema=schema)
    p = client.create_producer(topic, schema=schema)
    p.send("héllo")
    assert c.receive(10_000).value() == "héllo"


def test_json_schema_and_incompatible_type(client: Any, pulsar_mod: Any, topic: str) -> None:
    schema_mod = pulsar_mod.schema

    class Point(schema_mod.Record):
        x = schema_mod.Integer()
        y = schema_mod.Integer()

    c = client.subscribe(topic, "s", schema=schema_mod.JsonSchema(Point))
    p = client.create_producer(topic, schema=schema_mod.JsonSchema(Point))
    p.send(Point(x=1, y=2))
    v = c.receive(10_000).value()
    assert (v.x, v.y) == (1, 2)
    with pytest.raises(pulsar_mod.IncompatibleSchema):
        client.create_producer(topic, schema=schema_mod.StringSchema())


def test_producer_deduplication(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    ns = f"public/dedup-{uuid.uuid4().hex[:8]}"
    admin.ok("PUT", f"/admin/v2/namespaces/{ns}", {})
    admin.ok("POST", f"/admin/v2/namespaces/{ns}/deduplication", True)
    topic = f"persistent://{ns}/d1"
    p = client.create_producer(topic, producer_name="dedup-producer")
    for seq in range(5):
        p.send(f"m-{seq}".encode(), sequence_id=seq)
    p.close()
    # The same producer comes back and resends 3..6: 3 and 4 are duplicates.
    p = client.create_producer(topic, producer_name="dedup-producer")
    assert p.last_sequence_id() == 4
    for seq in range(3, 7):
        p.send(f"m-{seq}".encode(), sequence_id=seq)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    got = []
    while r.has_message_available():
        got.append(r.read_next(10_000).data())
    assert got == [f"m-{i}".encode() for i in range(7)]
    stats = admin.ok("GET", topic_path(topic) + "/stats")
    assert stats["deduplicationStatus"] == "Enabled"
