"""Every admin route against a real broker process with hostile paths and bodies:
invalid JSON, wrong types, huge numbers, deeply nested JSON, over-long names, ``%00``
and ``..``. The broker answers each with a 4xx (or a success where the input is in
fact acceptable, or the permission routes' deliberate 501 while authorization is
off), never a 500 and never a closed connection without an answer; it
logs no traceback and still serves the binary protocol afterwards.

The sweep runs inside a tenant of its own, so the destructive routes (DELETE last)
touch nothing else.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from quasar.admin import create_admin_app
from quasar.testing.hostile import HostileClient, LogWatch
from quasar.testing.process import BrokerProcess

pytestmark = pytest.mark.usefixtures("close_raw")

TENANT, NAMESPACE, TOPIC = "fuzz", "ns", "t"
# A harmless value for every path parameter; the sweep replaces one at a time.
PATH_VALUES = {
    "tenant": TENANT,
    "namespace": NAMESPACE,
    "topic": TOPIC,
    "subscription": "s",
    "role": "r",
    "clientName": "c",
    "cluster": "no-such-cluster",
}
HOSTILE_SEGMENTS = ["..", "%00", "a%00b", "%2e%2e", "%ff%fe", "x" * 2000, "%2F%2F", "-1"]
NESTED = "[" * 50_000 + "]" * 50_000
HOSTILE_BODIES = [
    b"{not json",
    b"\xff\xfe\x00",
    json.dumps("a string").encode(),
    json.dumps([1, 2, 3]).encode(),
    json.dumps({"retentionTimeInMinutes": 10**100, "retentionSizeInMB": -(10**30)}).encode(),
    json.dumps({"allowedClusters": {"nested": [None]}, "adminRoles": 5}).encode(),
    b"1e400",
    b"null",
    NESTED.encode(),
    json.dumps({"x" * 100_000: "y" * 100_000}).encode(),
]
METHOD_ORDER = {"GET": 0, "PUT": 1, "POST": 2, "DELETE": 3}


def admin_routes() -> list[tuple[str, str]]:
    """(method, canonical path) of every admin route, destructive methods last."""
    app = create_admin_app(broker=None)  # type: ignore[arg-type]  # only routes are read
    out = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    return sorted(out, key=lambda r: (METHOD_ORDER.get(r[0], 9), r[1]))


def concrete(canonical: str, override: dict[str, str] | None = None) -> str:
    values = {**PATH_VALUES, **(override or {})}
    return re.sub(r"\{(\w+)[^}]*\}", lambda m: values.get(m.group(1), "x"), canonical)


def request(
    broker: BrokerProcess, method: str, path: str, body: bytes | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def sweep_tenant(broker: BrokerProcess) -> Iterator[None]:
    tenant = json.dumps({"adminRoles": [], "allowedClusters": ["standalone"]}).encode()
    assert request(broker, "PUT", f"/admin/v2/tenants/{TENANT}", tenant)[0] == 204
    assert request(broker, "PUT", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}", b"")[0] == 204
    path = f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/{TOPIC}"
    assert request(broker, "PUT", path, b"")[0] == 204
    yield


def sweep(broker: BrokerProcess, cases: list[tuple[str, str, bytes | None]]) -> list[Any]:
    """Send every case; return those answered with 5xx or not answered at all."""
    failures: list[Any] = []
    for method, path, body in cases:
        try:
            status, answer = request(broker, method, path, body)
        except (http.client.HTTPException, OSError) as e:
            failures.append((method, path[:120], (body or b"")[:40], repr(e)))
            continue
        # 501 is Pulsar's deliberate answer on the permission routes while
        # authorization is off; any other 5xx is the broker failing.
        if status >= 500 and status != 501:
            failures.append((method, path[:120], (body or b"")[:40], status, answer[:200]))
    return failures


def still_serving(broker: BrokerProcess) -> None:
    HostileClient(broker.port).ping()
    assert request(broker, "GET", "/admin/v2/tenants")[0] == 200


@pytest.mark.usefixtures("sweep_tenant")
def test_hostile_paths_on_every_admin_route(broker: BrokerProcess) -> None:
    watch = LogWatch(broker.log_path)
    cases: list[tuple[str, str, bytes | None]] = []
    for method, canonical in admin_routes():
        params = re.findall(r"\{(\w+)", canonical)
        for param in params:
            for segment in HOSTILE_SEGMENTS:
                cases.append((method, concrete(canonical, {param: segment}), None))
    assert cases
    assert sweep(broker, cases) == []
    still_serving(broker)
    assert watch.unexpected_failures() == [], watch.new_text()


HOSTILE_QUERY = (
    "?force=%00&authoritative=1e400&perPartition=%ff&includeSystemTopic=tru%0a"
    "&enable=[1]&enable=2&messagePosition=-1&count=99999999999999999999999"
)


@pytest.mark.usefixtures("sweep_tenant")
def test_hostile_query_strings_on_every_admin_route(broker: BrokerProcess) -> None:
    watch = LogWatch(broker.log_path)
    cases = [
        (method, concrete(canonical) + HOSTILE_QUERY, None)
        for method, canonical in admin_routes()
        if method != "DELETE"  # the body sweep deletes; this one leaves the tenant be
    ]
    assert sweep(broker, cases) == []
    still_serving(broker)
    assert watch.unexpected_failures() == [], watch.new_text()


@pytest.mark.usefixtures("sweep_tenant")
def test_hostile_bodies_on_every_admin_route(broker: BrokerProcess) -> None:
    watch = LogWatch(broker.log_path)
    cases = [
        (method, concrete(canonical), body)
        for method, canonical in admin_routes()
        if method in ("PUT", "POST", "DELETE")
        for body in HOSTILE_BODIES
    ]
    assert sweep(broker, cases) == []
    still_serving(broker)
    assert watch.unexpected_failures() == [], watch.new_text()


def test_a_request_over_the_size_bound_is_refused(broker: BrokerProcess) -> None:
    status, _ = request(
        broker, "PUT", f"/admin/v2/tenants/{TENANT}-big", b"[" + b"1," * 1_000_000 + b"1]"
    )
    assert status == 413
    still_serving(broker)
