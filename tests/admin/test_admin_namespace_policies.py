"""The TTL, backlog-quota, namespace-operation and expiry routes over the fake broker:
what they ask of the broker and how they answer bad input (the enforcement itself is
tested against a real broker in tests/broker/test_namespace_policies_broker.py)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from .conftest import ExpectError, FakeAdminBroker

Client = TestClient[Any, Any]
NS = "/admin/v2/namespaces/public/default"
TOPIC = "/admin/v2/persistent/public/default/t"


async def test_bad_ttl_and_quota_bodies(client: Client, expect_error: ExpectError) -> None:
    for body, status in ((True, 400), (1.5, 400), ("60", 400), (-1, 412), (1 << 40, 412)):
        await expect_error(await client.post(NS + "/messageTTL", json=body), status)
    quota = NS + "/backlogQuota"
    for body, status in (
        ([], 400),
        ({"limitSize": 10}, 400),  # no policy
        ({"limitSize": "10", "policy": "producer_exception"}, 400),
        ({"limitSize": 10 ** 30, "policy": "producer_exception"}, 412),
        ({"limitSize": 10, "policy": "producer_exception", "x": 1}, 400),
        ({"limitTime": 10, "policy": "producer_exception"}, 412),  # size quota, no size
    ):
        await expect_error(await client.post(quota, json=body), status)
    await expect_error(
        await client.post(quota + "?backlogQuotaType=nope",
                          json={"limitSize": 1, "policy": "producer_exception"}), 400,
    )
    await expect_error(await client.delete(quota + "?backlogQuotaType=nope"), 400)
    assert await (await client.get(NS + "/backlogQuotaMap")).json() == {}


async def test_operations_reach_the_broker(
    client: Client, broker: FakeAdminBroker, expect_error: ExpectError
) -> None:
    broker.topics["persistent://public/default/t"] = {"s": "latest"}
    for method, path in (
        ("PUT", NS + "/unload"),
        ("POST", NS + "/clearBacklog"),
        ("POST", NS + "/clearBacklog/s"),
        ("POST", NS + "/unsubscribe/s"),
        ("POST", TOPIC + "/subscription/s/expireMessages/30"),
        ("POST", TOPIC + "/all_subscription/expireMessages/0"),
    ):
        assert (await client.request(method, path)).status == 204, path
    position = {"ledgerId": 3, "entryId": 4, "isExcluded": True, "batchIndex": -1}
    resp = await client.post(TOPIC + "/subscription/s/expireMessages", json=position)
    assert resp.status == 204
    assert broker.policy_operations.calls == [
        ("unload", "public/default"),
        ("clear_backlog", "public/default", None),
        ("clear_backlog", "public/default", "s"),
        ("unsubscribe", "public/default", "s"),
        ("expire", "persistent://public/default/t", "s", 30),
        ("expire", "persistent://public/default/t", None, 0),
        ("expire_to", "persistent://public/default/t", "s", 3, 4, True),
    ]
    for path in ("/admin/v2/namespaces/public/missing/unload",):
        await expect_error(await client.put(path), 404)
    await expect_error(
        await client.post("/admin/v2/persistent/public/missing/t/all_subscription"
                          "/expireMessages/1"), 404,
    )
    for seconds in ("-1", "1e3", "99999999999"):
        await expect_error(
            await client.post(TOPIC + f"/subscription/s/expireMessages/{seconds}"), 400
        )
    for body in ({"ledgerId": 1}, {"ledgerId": 1, "entryId": 1 << 64},
                 {"ledgerId": 1, "entryId": 2, "excluded": "yes"}, [1, 2]):
        await expect_error(
            await client.post(TOPIC + "/subscription/s/expireMessages", json=body), 400
        )
