"""The topic-operation routes over ``FakeAdminBroker``: the fake answers as the broker
does, so the admin tests (access rules included) reach these routes' real answers."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from .conftest import ExpectError, FakeAdminBroker

TOPIC = "persistent://public/default/orders"
PATH = "/admin/v2/persistent/public/default/orders"


async def test_peek_skip_reset_and_terminate(
    client: TestClient[Any, Any], broker: FakeAdminBroker, expect_error: ExpectError
) -> None:
    await expect_error(await client.get(PATH + "/examinemessage"), 404, "Topic not found")
    broker.publish(TOPIC, b"first", publish_time_ms=1000)
    broker.publish(TOPIC, b"second", publish_time_ms=2000)
    assert (await client.put(PATH + "/subscription/sub", json="earliest")).status == 204

    peek = await client.get(PATH + "/subscription/sub/position/1")
    assert peek.status == 200 and await peek.read() == b"first"
    assert peek.headers["X-Pulsar-Message-ID"] == "0:0"
    assert (await client.post(PATH + "/subscription/sub/skip/1")).status == 204
    assert await (await client.get(PATH + "/subscription/sub/position/1")).read() == b"second"
    await expect_error(await client.get(PATH + "/subscription/sub/position/2"), 404)
    await expect_error(await client.get(PATH + "/subscription/nope/position/1"), 404)

    resp = await client.post(PATH + "/subscription/sub/resetcursor", json={
        "ledgerId": 0, "entryId": 9})
    await expect_error(resp, 412, "Unable to find position")
    assert (await client.post(PATH + "/subscription/sub/resetcursor/1500")).status == 204
    assert await (await client.get(PATH + "/subscription/sub/position/1")).read() == b"second"

    latest = await client.get(PATH + "/examinemessage", params={"messagePosition": "5"})
    assert await latest.read() == b"first"  # past the end: the entry at that end
    assert await (await client.get(PATH + "/lastMessageId")).json() == {
        "ledgerId": 0, "entryId": 1, "partitionIndex": -1}
    assert await (await client.get(PATH + "/messageid/1500")).json() == {
        "ledgerId": 0, "entryId": 1, "partitionIndex": -1}
    await expect_error(await client.get(PATH + "/messageid/5000"), 404, "Message ID not found")
    assert (await client.put(PATH + "/unload")).status == 204
    terminated = await client.post(PATH + "/terminate")
    assert terminated.status == 200 and TOPIC in broker.terminated
