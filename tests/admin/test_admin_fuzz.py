"""Bad input never yields a 500: random names and bodies on every route."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quasar.admin import create_admin_app
from quasar.resources.store import PulsarResources

ROUTES = [
    "/admin/v2/tenants/{a}",
    "/admin/v2/namespaces/{a}",
    "/admin/v2/namespaces/{a}/{b}",
    "/admin/v2/namespaces/public/{b}/retention",
    "/admin/v2/namespaces/public/default/{c}",
    "/admin/v2/persistent/{a}/{b}",
    "/admin/v2/persistent/public/default/{c}",
    "/admin/v2/persistent/public/default/{c}/partitions",
    "/admin/v2/persistent/public/default/{c}/stats",
    "/admin/v2/persistent/public/default/{c}/partitioned-stats",
    "/admin/v2/persistent/public/default/{c}/subscriptions",
    "/admin/v2/persistent/public/default/{c}/subscription/{b}",
    "/admin/v2/persistent/public/default/p/subscription/{b}",
    "/admin/v2/persistent/public/default/p/partitions",
]

segment = st.one_of(
    st.sampled_from(["public", "default", "p", "p-partition-0", "t", "x", "..", "-"]),
    st.text(min_size=1, max_size=12),
)
body = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.sampled_from(
        [b"1", b"-1", b"0", b"true", b"null", b'"earliest"', b"{}", b"[]", b'"9:9"']
        + [b'{"ledgerId": 1, "entryId": 2}', b'{"retentionTimeInMinutes": 1}']
    ),
)


async def _request(broker: object, method: str, path: str, data: bytes | None) -> None:
    async with TestClient(TestServer(create_admin_app(broker))) as client:  # type: ignore[arg-type]
        await client.put("/admin/v2/persistent/public/default/p/partitions", json=2)
        resp = await client.request(method, path, data=data)
        assert resp.status < 500, (method, path, data, await resp.text())
        if resp.status >= 400:
            assert "reason" in await resp.json()


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    method=st.sampled_from(["GET", "PUT", "POST", "DELETE"]),
    route=st.sampled_from(ROUTES),
    a=segment,
    b=segment,
    c=segment,
    data=body,
)
def test_no_request_causes_a_server_error(
    admin_resources: PulsarResources,
    fake_broker_class: type,
    method: str,
    route: str,
    a: str,
    b: str,
    c: str,
    data: bytes | None,
) -> None:
    path = route.format(a=quote(a, safe=""), b=quote(b, safe=""), c=quote(c, safe=""))
    # One store for all examples, so state left by earlier requests (tenants,
    # topics, policies) shapes later ones.
    broker = fake_broker_class(PulsarResources(admin_resources.store))
    asyncio.run(_request(broker, method, path, data))
