"""``/admin/v2/persistent``: topics, partitioned topics, stats and subscriptions."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

Client = TestClient[Any, Any]
NS = "/admin/v2/persistent/public/default"
T = NS + "/t"
P = NS + "/p"
FULL_T = "persistent://public/default/t"
FULL_P = "persistent://public/default/p"


async def topics(client: Client) -> list[str]:
    resp = await client.get(NS)
    assert resp.status == 200
    return await resp.json()  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------
# Non-partitioned topics.


async def test_create_list_delete_topic(client: Client) -> None:
    assert await topics(client) == []
    assert (await client.put(T)).status == 204
    assert await topics(client) == [FULL_T]
    assert (await client.delete(T)).status == 204
    assert await topics(client) == []


async def test_topic_names_are_url_decoded(client: Client, broker: Any) -> None:
    assert (await client.put(NS + "/my%20topic%3Av1")).status == 204
    assert await topics(client) == ["persistent://public/default/my topic:v1"]
    resp = await client.get(NS + "/my%20topic%3Av1/stats")
    assert resp.status == 200


async def test_create_topic_errors(client: Client, expect_error: Any) -> None:
    await client.put(T)
    await expect_error(await client.put(T), 409, "already exists")
    await expect_error(await client.put(NS + "/a%2Fb"), 412, "not valid")
    await expect_error(
        await client.put("/admin/v2/persistent/public/nope/t"), 404, "Namespace"
    )
    await expect_error(await client.put("/admin/v2/persistent/p%20b/ns/t"), 412)


async def test_create_topic_conflicting_with_partitioned(
    client: Client, expect_error: Any
) -> None:
    await client.put(P + "/partitions", json=2)
    await expect_error(await client.put(P), 409, "already exists")
    await expect_error(await client.put(NS + "/p-partition-0"), 409, "partition")
    await expect_error(await client.put(NS + "/p-partition-7"), 409, "partition")


async def test_delete_topic_errors(
    client: Client, broker: Any, expect_error: Any
) -> None:
    await expect_error(await client.delete(T), 404, "Topic not found")
    await client.put(P + "/partitions", json=2)
    await expect_error(await client.delete(P), 409, "partitioned")
    await client.put(T)
    broker.connected.add(FULL_T)
    await expect_error(await client.delete(T), 412, "active")
    assert (await client.delete(T + "?force=true")).status == 204


async def test_stats(client: Client, expect_error: Any) -> None:
    await client.put(T)
    await client.put(T + "/subscription/s")
    resp = await client.get(T + "/stats")
    assert resp.status == 200
    stats = await resp.json()
    assert stats["subscriptions"] == {"s": {"msgBacklog": 0}}
    resp = await client.get(T + "/internalStats")
    assert resp.status == 200
    assert (await resp.json())["cursors"] == {"s": {"markDeletePosition": "latest"}}
    await expect_error(await client.get(NS + "/x/stats"), 404, "Topic not found")
    await expect_error(await client.get(NS + "/x/internalStats"), 404)


# --------------------------------------------------------------------------------------
# Partitioned topics.


async def test_partitioned_topic_lifecycle(client: Client) -> None:
    assert (await client.put(P + "/partitions", json=3)).status == 204
    resp = await client.get(P + "/partitions")
    assert (resp.status, await resp.json()) == (200, {"partitions": 3})
    assert await (await client.get(NS + "/partitioned")).json() == [FULL_P]
    assert await topics(client) == [f"{FULL_P}-partition-{i}" for i in range(3)]

    assert (await client.post(P + "/partitions", json=5)).status == 204
    assert await (await client.get(P + "/partitions")).json() == {"partitions": 5}

    assert (await client.delete(P + "/partitions")).status == 204
    assert await (await client.get(NS + "/partitioned")).json() == []
    assert await topics(client) == []


async def test_partition_count_as_string_body(client: Client) -> None:
    assert (await client.put(P + "/partitions", data=b'"4"')).status == 204
    assert await (await client.get(P + "/partitions")).json() == {"partitions": 4}


async def test_metadata_of_a_non_partitioned_topic(client: Client) -> None:
    await client.put(T)
    assert await (await client.get(T + "/partitions")).json() == {"partitions": 0}
    assert await (await client.get(NS + "/x/partitions")).json() == {"partitions": 0}


@pytest.mark.parametrize(
    "body,status,reason",
    [
        (b"0", 406, "more than 0"),
        (b"-3", 406, "more than 0"),
        (b"1.5", 400, "number of partitions"),
        (b"true", 400, "number of partitions"),
        (b'"many"', 400, "number of partitions"),
        (b"", 400, "required"),
        (b"{", 400, "Malformed"),
    ],
)
async def test_bad_partition_counts(
    client: Client, expect_error: Any, body: bytes, status: int, reason: str
) -> None:
    await expect_error(await client.put(P + "/partitions", data=body), status, reason)
    await client.put(NS + "/q/partitions", json=2)
    await expect_error(
        await client.post(NS + "/q/partitions", data=body), status, reason
    )


async def test_create_partitioned_topic_errors(
    client: Client, expect_error: Any
) -> None:
    await client.put(P + "/partitions", json=2)
    await expect_error(
        await client.put(P + "/partitions", json=2), 409, "already exists"
    )
    await client.put(T)
    await expect_error(
        await client.put(T + "/partitions", json=2), 409, "already exists"
    )
    await client.put(NS + "/z-partition-0")
    await expect_error(await client.put(NS + "/z/partitions", json=2), 409)
    await expect_error(
        await client.put(NS + "/x-partition-1/partitions", json=2), 412, "-partition-"
    )
    await expect_error(
        await client.put("/admin/v2/persistent/public/nope/p/partitions", json=2),
        404,
        "Namespace",
    )


async def test_update_partitioned_topic_errors(
    client: Client, expect_error: Any
) -> None:
    await client.put(P + "/partitions", json=3)
    await expect_error(await client.post(P + "/partitions", json=3), 409, "existing 3")
    await expect_error(await client.post(P + "/partitions", json=2), 409, "existing 3")
    await client.put(T)
    await expect_error(
        await client.post(T + "/partitions", json=4), 409, "not partitioned"
    )
    await expect_error(await client.post(NS + "/x/partitions", json=4), 404)


async def test_delete_partitioned_topic_errors(
    client: Client, expect_error: Any
) -> None:
    await expect_error(await client.delete(P + "/partitions"), 404, "does not exist")
    await client.put(T)
    await expect_error(await client.delete(T + "/partitions"), 404, "does not exist")


async def test_partitioned_stats(client: Client, expect_error: Any) -> None:
    await client.put(P + "/partitions", json=2)
    resp = await client.get(P + "/partitioned-stats")
    assert resp.status == 200
    stats = await resp.json()
    assert stats["metadata"] == {"partitions": 2}
    assert sorted(stats["partitions"]) == [f"{FULL_P}-partition-{i}" for i in range(2)]
    resp = await client.get(P + "/partitioned-stats?perPartition=false")
    assert (await resp.json())["partitions"] == {}
    await client.put(T)
    await expect_error(await client.get(T + "/partitioned-stats"), 404)


# --------------------------------------------------------------------------------------
# Subscriptions.


async def test_subscription_lifecycle(client: Client, broker: Any) -> None:
    await client.put(T)
    assert await (await client.get(T + "/subscriptions")).json() == []
    assert (await client.put(T + "/subscription/s1")).status == 204
    assert (await client.put(T + "/subscription/s%2F2", json="earliest")).status == 204
    assert await (await client.get(T + "/subscriptions")).json() == ["s/2", "s1"]
    assert broker.topics[FULL_T] == {"s1": "latest", "s/2": "earliest"}
    assert (await client.delete(T + "/subscription/s1")).status == 204
    assert await (await client.get(T + "/subscriptions")).json() == ["s/2"]


@pytest.mark.parametrize(
    "body,expected",
    [
        ('"latest"', "latest"),
        ('"EARLIEST"', "earliest"),
        ('"12:34"', "12:34"),
        ('{"ledgerId": 5, "entryId": 6, "partitionIndex": -1}', "5:6"),
        ('{"ledgerId": 9223372036854775807, "entryId": 9223372036854775807}', "latest"),
        ('{"ledgerId": -1, "entryId": -1}', "earliest"),
    ],
)
async def test_subscription_start_positions(
    client: Client, broker: Any, body: str, expected: str
) -> None:
    await client.put(T)
    assert (await client.put(T + "/subscription/s", data=body.encode())).status == 204
    assert broker.topics[FULL_T]["s"] == expected


@pytest.mark.parametrize(
    "body",
    [
        '"middle"',
        '"1:x"',
        '{"ledgerId": 1}',
        '{"ledgerId": -5, "entryId": 1}',
        "[]",
        "{",
    ],
)
async def test_bad_subscription_positions(
    client: Client, expect_error: Any, body: str
) -> None:
    await client.put(T)
    await expect_error(await client.put(T + "/subscription/s", data=body.encode()), 400)


async def test_subscription_errors(client: Client, expect_error: Any) -> None:
    await expect_error(await client.get(T + "/subscriptions"), 404, "Topic not found")
    await expect_error(await client.put(T + "/subscription/s"), 404, "Topic not found")
    await client.put(T)
    await client.put(T + "/subscription/s")
    await expect_error(await client.put(T + "/subscription/s"), 409, "already exists")
    await expect_error(await client.delete(T + "/subscription/x"), 404, "Subscription")
    await expect_error(await client.put(T + "/subscription/%20"), 412)


async def test_subscriptions_on_a_partitioned_topic(
    client: Client, broker: Any, expect_error: Any
) -> None:
    await client.put(P + "/partitions", json=2)
    assert await (await client.get(P + "/subscriptions")).json() == []
    assert (await client.put(P + "/subscription/s", json="earliest")).status == 204
    for i in range(2):
        assert broker.topics[f"{FULL_P}-partition-{i}"] == {"s": "earliest"}
    assert await (await client.get(P + "/subscriptions")).json() == ["s"]
    await expect_error(await client.put(P + "/subscription/s"), 409)
    assert (await client.delete(P + "/subscription/s")).status == 204
    assert await (await client.get(P + "/subscriptions")).json() == []
    await expect_error(await client.delete(P + "/subscription/s"), 404, "Subscription")
