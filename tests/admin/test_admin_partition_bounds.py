"""Partition counts are bounded (``maxNumPartitionsPerPartitionedTopic``) and listed
without building every partition name: the admin layer over the fake broker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.admin.listing import LISTING_CHUNK_NAMES
from quasar.errors import NotAcceptableError
from quasar.resources.partitions import (
    JAVA_INT_MAX,
    check_partition_count,
    lexicographic_indices,
)
from quasar.resources.store import PulsarResources

from .conftest import FakeAdminBroker, FakeMetadataStore

Client = TestClient[Any, Any]
NS = "/admin/v2/persistent/public/default"
P = NS + "/p"
FULL_P = "persistent://public/default/p"
AUTO = "/admin/v2/namespaces/public/default/autoTopicCreation"
BOUND = 8


def bounded_broker(max_partitions: int) -> FakeAdminBroker:
    resources = PulsarResources(FakeMetadataStore(), max_partitions=max_partitions)
    resources.bootstrap_standalone("standalone")
    return FakeAdminBroker(resources)


@pytest.fixture
async def bounded(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    bound = getattr(request, "param", BOUND)
    async with TestClient(TestServer(create_admin_app(bounded_broker(bound)))) as c:
        yield c


# --------------------------------------------------------------------------------------
# The check itself.


@pytest.mark.parametrize(
    "partitions,bound,reason",
    [
        (0, 8, "more than 0"),
        (-1, 0, "more than 0"),
        (9, 8, "less than or equal to 8"),
        (JAVA_INT_MAX + 1, 0, f"less than or equal to {JAVA_INT_MAX}"),
    ],
)
def test_counts_refused(partitions: int, bound: int, reason: str) -> None:
    with pytest.raises(NotAcceptableError, match=reason) as info:
        check_partition_count(partitions, bound)
    assert info.value.http_status == 406


@pytest.mark.parametrize("partitions,bound", [(1, 8), (8, 8), (JAVA_INT_MAX, 0)])
def test_counts_accepted(partitions: int, bound: int) -> None:
    check_partition_count(partitions, bound)


def test_resources_refuse_counts_above_the_bound() -> None:
    resources = PulsarResources(FakeMetadataStore(), max_partitions=BOUND)
    resources.bootstrap_standalone("standalone")
    topics = resources.partitioned_topics
    with pytest.raises(NotAcceptableError, match="less than or equal to 8"):
        topics.create(FULL_P, BOUND + 1)
    assert not topics.exists(FULL_P)
    topics.create(FULL_P, BOUND)
    with pytest.raises(NotAcceptableError, match="less than or equal to 8"):
        topics.update(FULL_P, BOUND + 1)
    assert topics.get(FULL_P).partitions == BOUND  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------
# Admin create, update and the auto-creation override.


async def _reason(resp: Any, status: int) -> str:
    assert resp.status == status, await resp.text()
    return str((await resp.json())["reason"])


@pytest.mark.parametrize("method", ["put", "post"])
async def test_create_and_update_beyond_the_bound_answer_406(
    bounded: Client, method: str
) -> None:
    if method == "post":
        assert (await bounded.put(P + "/partitions", json=2)).status == 204
    send = getattr(bounded, method)
    reason = await _reason(await send(P + "/partitions", json=BOUND + 1), 406)
    assert reason == f"Number of partitions should be less than or equal to {BOUND}"
    assert (await send(P + "/partitions", json=BOUND)).status == 204
    resp = await bounded.get(P + "/partitions")
    assert (await resp.json())["partitions"] == BOUND


@pytest.mark.parametrize("bounded", [BOUND, 0], indirect=True)
@pytest.mark.parametrize(
    "body", [b"2147483648", b"-2147483649", b"99999999999999999999", b'"2147483648000"']
)
async def test_counts_no_java_int_holds_answer_400(bounded: Client, body: bytes) -> None:
    for method in (bounded.put, bounded.post):
        reason = await _reason(await method(P + "/partitions", data=body), 400)
        assert "partitions" in reason
    assert (await (await bounded.get(P + "/partitions")).json()) == {"partitions": 0}


@pytest.mark.parametrize("bounded", [0], indirect=True)
async def test_unbounded_accepts_up_to_a_java_int(bounded: Client) -> None:
    # 0 is Pulsar's "unlimited"; recording the count is all creation does.
    assert (await bounded.put(P + "/partitions", json=JAVA_INT_MAX)).status == 204
    resp = await bounded.get(P + "/partitions")
    assert (await resp.json())["partitions"] == JAVA_INT_MAX


async def test_auto_topic_creation_override_beyond_the_bound_answers_406(
    bounded: Client,
) -> None:
    override = {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 100_000_000,
    }
    reason = await _reason(await bounded.post(AUTO, json=override), 406)
    assert reason == f"Number of partitions should be less than or equal to {BOUND}"
    assert (await bounded.get(AUTO)).status == 204  # nothing was stored
    override["defaultNumPartitions"] = BOUND
    assert (await bounded.post(AUTO, json=override)).status == 204
    assert (await (await bounded.get(AUTO)).json())["defaultNumPartitions"] == BOUND


# --------------------------------------------------------------------------------------
# Listings.


@pytest.mark.parametrize("count", [0, 1, 2, 9, 10, 11, 12, 99, 100, 101, 1000, 1234])
def test_lexicographic_indices_sort_like_partition_names(count: int) -> None:
    assert list(lexicographic_indices(count)) == sorted(range(count), key=str)


async def test_listing_streams_every_partition_sorted_and_once() -> None:
    count = 2 * LISTING_CHUNK_NAMES + 345  # several chunks and a partial one
    broker = bounded_broker(10_000)
    broker.topics["persistent://public/default/a"] = {}
    broker.topics["persistent://public/default/q"] = {}
    broker.topics["persistent://public/default/__change_events"] = {}
    async with TestClient(TestServer(create_admin_app(broker))) as client:
        await client.put(P + "/partitions", json=count)
        await client.put(NS + "/p-2/partitions", json=12)
        await client.put(NS + "/__hidden/partitions", json=3)
        # A used partition exists in the broker too; it is listed once.
        broker.topics[f"{FULL_P}-partition-7"] = {}
        expected = sorted(
            ["persistent://public/default/a", "persistent://public/default/q"]
            + [f"{FULL_P}-partition-{i}" for i in range(count)]
            + [f"{FULL_P}-2-partition-{i}" for i in range(12)]
        )
        for path in (NS, "/admin/v2/namespaces/public/default/topics"):
            resp = await client.get(path)
            assert resp.status == 200
            assert resp.content_type == "application/json"
            assert json.loads(await resp.read()) == expected
        resp = await client.get(NS + "?includeSystemTopic=true")
        listed = await resp.json()
        assert listed == sorted(listed)
        assert "persistent://public/default/__change_events" in listed
        assert "persistent://public/default/__hidden-partition-2" in listed


async def test_a_client_leaving_mid_listing_is_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = bounded_broker(0)
    server = TestServer(create_admin_app(broker))
    async with TestClient(server) as client:
        await client.put(P + "/partitions", json=300_000)  # ~12 MB of names
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(f"GET {NS} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        writer.transport.abort()
        await writer.wait_closed()
        # The broker ends the request quietly (aiohttp cancels it) and keeps answering.
        resp = await client.get(NS + "/partitioned")
        assert await resp.json() == [FULL_P]
    assert "failed unexpectedly" not in caplog.text
