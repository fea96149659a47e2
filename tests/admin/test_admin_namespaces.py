"""``/admin/v2/namespaces``: namespaces, their topics and their policies."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

Client = TestClient[Any, Any]
NS = "/admin/v2/namespaces/public/ns"


async def test_list_namespaces(client: Client, expect_error: Any) -> None:
    resp = await client.get("/admin/v2/namespaces/public")
    assert (resp.status, await resp.json()) == (200, ["public/default"])
    await expect_error(await client.get("/admin/v2/namespaces/nope"), 404, "Tenant")
    await expect_error(await client.get("/admin/v2/namespaces/b%20d"), 412, "not valid")


async def test_create_get_delete_namespace(client: Client) -> None:
    assert (await client.put(NS)).status == 204
    assert await (await client.get("/admin/v2/namespaces/public")).json() == [
        "public/default",
        "public/ns",
    ]
    resp = await client.get(NS)
    assert resp.status == 200
    assert await resp.json() == {
        "replication_clusters": ["standalone"],
        "retention_policies": None,
        "deduplicationEnabled": None,
        "autoTopicCreationOverride": None,
        "schema_compatibility_strategy": "UNDEFINED",
        "is_allow_auto_update_schema": None,
        "schema_validation_enforced": None,
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "subscription_auth_mode": "None",
        "message_ttl_in_seconds": None,
        "backlog_quota_map": {},
        # defaultNumberOfNamespaceBundles (4) even ranges, as Pulsar records them.
        "bundles": {
            "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000",
                           "0xffffffff"],
            "numBundles": 4,
        },
    }
    assert (await client.delete(NS)).status == 204
    assert (await client.get(NS)).status == 404


async def test_bundles_answers_the_namespace_bundles_data(
    client: Client, expect_error: Any
) -> None:
    assert (await client.put(NS)).status == 204
    resp = await client.get(NS + "/bundles")
    assert resp.status == 200
    # Pulsar's BundlesData: numBundles + 1 boundaries, the same as in the policies.
    assert await resp.json() == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000",
                       "0xffffffff"],
        "numBundles": 4,
    }
    assert (await resp.json()) == (await (await client.get(NS)).json())["bundles"]
    await expect_error(await client.get(NS + "x/bundles"), 404, "Namespace")
    await expect_error(await client.get("/admin/v2/namespaces/nope/ns/bundles"), 404)


async def test_create_namespace_with_policies(client: Client) -> None:
    body = {
        "retention_policies": {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5},
        "deduplicationEnabled": True,
        "bundles": {"numBundles": 8},  # not the default (4): the request's count
    }
    assert (await client.put(NS, json=body)).status == 204
    policies = await (await client.get(NS)).json()
    assert policies["retention_policies"] == body["retention_policies"]
    assert policies["deduplicationEnabled"] is True
    bundles = await (await client.get(NS + "/bundles")).json()
    assert bundles["numBundles"] == 8 and len(bundles["boundaries"]) == 9


async def test_create_namespace_errors(client: Client, expect_error: Any) -> None:
    await expect_error(await client.put("/admin/v2/namespaces/public/default"), 409)
    await expect_error(await client.put("/admin/v2/namespaces/nope/ns"), 404, "Tenant")
    await expect_error(await client.put("/admin/v2/namespaces/public/n%21"), 412)
    await expect_error(await client.put(NS, data=b"{"), 400, "Malformed JSON")
    await expect_error(await client.put(NS, json={"deduplicationEnabled": "yes"}), 400)
    await expect_error(
        await client.put(NS, json={"schema_compatibility_strategy": "LOOSE"}), 412
    )
    await expect_error(
        await client.put(NS, json={"replication_clusters": ["other"]}), 412, "other"
    )


async def test_missing_namespace(client: Client, expect_error: Any) -> None:
    for method in ("get", "delete"):
        resp = await getattr(client, method)(NS)
        await expect_error(resp, 404, "Namespace does not exist")
    await expect_error(await client.get(NS + "/topics"), 404, "Namespace")
    await expect_error(await client.get(NS + "/retention"), 404, "Namespace")
    await expect_error(
        await client.post(NS + "/deduplication", json=True), 404, "Namespace"
    )


async def test_namespace_topics(client: Client, broker: Any) -> None:
    await client.put(NS)
    assert await (await client.get(NS + "/topics")).json() == []
    broker.topics["persistent://public/ns/a"] = {}
    broker.topics["persistent://public/ns/__change_events"] = {}
    await client.put("/admin/v2/persistent/public/ns/p/partitions", json=2)
    assert await (await client.get(NS + "/topics")).json() == [
        "persistent://public/ns/a",
        "persistent://public/ns/p-partition-0",
        "persistent://public/ns/p-partition-1",
    ]
    resp = await client.get(NS + "/topics?includeSystemTopic=true")
    assert "persistent://public/ns/__change_events" in await resp.json()


async def test_delete_non_empty_namespace(
    client: Client, broker: Any, expect_error: Any
) -> None:
    await client.put(NS)
    await client.put("/admin/v2/persistent/public/ns/t")
    await expect_error(await client.delete(NS), 409, "non empty")
    await client.delete("/admin/v2/persistent/public/ns/t")
    await client.put("/admin/v2/persistent/public/ns/p/partitions", json=2)
    await expect_error(await client.delete(NS), 409, "non empty")
    assert (await client.get(NS)).status == 200


async def test_force_delete_namespace(client: Client, broker: Any) -> None:
    await client.put(NS)
    await client.put("/admin/v2/persistent/public/ns/t")
    await client.put("/admin/v2/persistent/public/ns/p/partitions", json=2)
    await client.put(
        "/admin/v2/persistent/public/ns/p/subscription/s"
    )  # creates partitions
    broker.connected.add("persistent://public/ns/t")
    assert (await client.delete(NS + "?force=true")).status == 204
    assert broker.topics == {}
    assert broker.resources.partitioned_topics.list("public/ns") == []
    assert (await client.get(NS)).status == 404


async def test_system_topics_do_not_keep_a_namespace(
    client: Client, broker: Any
) -> None:
    await client.put(NS)
    broker.topics["persistent://public/ns/__transaction_buffer_snapshot"] = {}
    assert (await client.delete(NS)).status == 204
    assert broker.topics == {}


# --------------------------------------------------------------------------------------
# Policies.


async def test_retention(client: Client) -> None:
    await client.put(NS)
    url = NS + "/retention"
    resp = await client.get(url)
    assert resp.status == 204  # not set: the broker default applies
    body = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
    assert (await client.post(url, json=body)).status == 204
    resp = await client.get(url)
    assert (resp.status, await resp.json()) == (200, body)
    assert (await client.delete(url)).status == 204
    assert (await client.get(url)).status == 204


@pytest.mark.parametrize(
    "body,status",
    [
        (b"{", 400),
        (b"", 400),
        (b'{"retentionTimeInMinutes": "x", "retentionSizeInMB": 1}', 400),
        (b'{"retentionTimeInMinutes": -5, "retentionSizeInMB": 1}', 412),
        (b'{"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}', 412),
    ],
)
async def test_bad_retention(
    client: Client, expect_error: Any, body: bytes, status: int
) -> None:
    await client.put(NS)
    await expect_error(await client.post(NS + "/retention", data=body), status)


async def test_deduplication(client: Client, expect_error: Any) -> None:
    await client.put(NS)
    url = NS + "/deduplication"
    assert (await client.get(url)).status == 204
    assert (await client.post(url, json=True)).status == 204
    resp = await client.get(url)
    assert (resp.status, await resp.json()) == (200, True)
    assert (await client.post(url, json=False)).status == 204
    assert await (await client.get(url)).json() is False
    assert (await client.delete(url)).status == 204
    assert (await client.get(url)).status == 204
    await expect_error(await client.post(url, json="true"), 400, "true or false")
    await expect_error(await client.post(url, data=b"tru"), 400, "Malformed")


async def test_auto_topic_creation(client: Client, expect_error: Any) -> None:
    await client.put(NS)
    url = NS + "/autoTopicCreation"
    assert (await client.get(url)).status == 204
    body = {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 3,
    }
    assert (await client.post(url, json=body)).status == 204
    resp = await client.get(url)
    assert (resp.status, await resp.json()) == (200, body)
    policies = await (await client.get(NS)).json()
    assert policies["autoTopicCreationOverride"] == body
    assert (await client.delete(url)).status == 204
    assert (await client.get(url)).status == 204
    bad = {"allowAutoTopicCreation": True, "topicType": "partitioned"}
    await expect_error(await client.post(url, json=bad), 412, "defaultNumPartitions")
    bad = {"allowAutoTopicCreation": True, "topicType": "bogus"}
    await expect_error(await client.post(url, json=bad), 412, "topicType")
    await expect_error(await client.post(url, json={"topicType": "partitioned"}), 400)


async def test_schema_compatibility_strategy(client: Client, expect_error: Any) -> None:
    await client.put(NS)
    url = NS + "/schemaCompatibilityStrategy"
    assert await (await client.get(url)).json() == "UNDEFINED"
    assert (await client.put(url, json="FULL")).status == 204
    assert await (await client.get(url)).json() == "FULL"
    await expect_error(await client.put(url, json="SOMETIMES"), 412, "BACKWARD")
    await expect_error(await client.put(url, json=3), 400)


async def test_policy_changes_do_not_clobber_each_other(client: Client) -> None:
    await client.put(NS)
    await client.post(NS + "/deduplication", json=True)
    body = {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}
    await client.post(NS + "/retention", json=body)
    policies = await (await client.get(NS)).json()
    assert policies["deduplicationEnabled"] is True
    assert policies["retention_policies"] == body
