"""``quasar.client.http_lookup`` against a small aiohttp server playing the broker's
web service: the paths and query asked, the answers used, HTTP errors mapped to the
client's errors, and answers of the wrong shape refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

import quasar.client.aio as aio
from quasar.client.authentication import AuthenticationToken
from quasar.client.config import ClientConfig, admin_url_for, is_tls_url
from quasar.client.exceptions import InvalidUrl
from quasar.client.exceptions import LookupError as PulsarLookupError
from quasar.client.http_lookup import (
    HttpLookupService,
    InvalidLookupAnswer,
    http_base_urls,
    is_http_url,
)
from quasar.client.lookup import is_retryable
from quasar.errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    InvalidTopicName,
    TopicNotFound,
)

from .conftest import start_app

TOPIC = "persistent://public/default/t"


class WebService:
    """Answers each path with the (status, body) set for it; records requests."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, Any]] = {}
        self.seen: list[tuple[str, str, str | None]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(
            (request.path, request.query_string, request.headers.get("Authorization"))
        )
        status, body = self.answers.get(request.path, (404, {"reason": "no such path"}))
        return web.json_response(body, status=status)


@pytest.fixture
async def service() -> AsyncIterator[WebService]:
    ws = WebService()
    app = web.Application()
    app.router.add_get("/{tail:.*}", ws.handle)
    runner, url = await start_app(app)
    ws.url = url
    yield ws
    await runner.cleanup()


def _lookup(url: str, **config: Any) -> HttpLookupService:
    return HttpLookupService(ClientConfig(service_url=url, **config))


async def test_lookup_partitions_and_namespace_topics(service: WebService) -> None:
    service.answers = {
        "/lookup/v2/topic/persistent/public/default/t": (
            200,
            {"brokerUrl": "pulsar://b:6650", "brokerUrlTls": None, "httpUrl": "x"},
        ),
        "/admin/v2/persistent/public/default/t/partitions": (200, {"partitions": 3}),
        "/admin/v2/namespaces/public/default/topics": (
            200,
            [f"{TOPIC}-partition-0", f"{TOPIC}-partition-1", "persistent://public/default/u"],
        ),
    }
    lookup = _lookup(
        service.url,
        listener_name="external",
        authentication=AuthenticationToken("tok"),
    )
    try:
        assert await lookup.lookup(TOPIC) == "pulsar://b:6650"
        assert await lookup.partitioned_metadata(TOPIC) == 3
        assert await lookup.topics_of_namespace("public/default", 2) == [
            TOPIC,
            "persistent://public/default/u",
        ]
    finally:
        await lookup.close()
    assert service.seen == [
        ("/lookup/v2/topic/persistent/public/default/t", "listenerName=external",
         "Bearer tok"),
        ("/admin/v2/persistent/public/default/t/partitions",
         "checkAllowAutoCreation=true", "Bearer tok"),
        ("/admin/v2/namespaces/public/default/topics", "mode=ALL", "Bearer tok"),
    ]


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [
        (401, AuthenticationError, False),
        (403, AuthorizationError, False),
        (404, TopicNotFound, False),
        (412, InvalidTopicName, False),
        (400, PulsarLookupError, False),
        (500, PulsarLookupError, True),
        (503, PulsarLookupError, True),
    ],
)
async def test_error_answers_map_to_client_errors(
    service: WebService, status: int, error: type[Exception], retryable: bool
) -> None:
    service.answers = {
        "/lookup/v2/topic/persistent/public/default/t": (status, {"reason": "because"})
    }
    lookup = _lookup(service.url)
    try:
        with pytest.raises(error, match="because") as caught:
            await lookup.lookup(TOPIC)
        assert type(caught.value) is error
        assert is_retryable(caught.value) is retryable
    finally:
        await lookup.close()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/lookup/v2/topic/persistent/public/default/t", {"brokerUrlTls": "x"}),
        ("/lookup/v2/topic/persistent/public/default/t", ["pulsar://b:1"]),
        ("/admin/v2/persistent/public/default/t/partitions", {"partitions": -1}),
        ("/admin/v2/persistent/public/default/t/partitions", {"partitions": True}),
        ("/admin/v2/persistent/public/default/t/partitions", {}),
        ("/admin/v2/namespaces/public/default/topics", {"topics": []}),
        ("/admin/v2/namespaces/public/default/topics", [1, 2]),
        ("/admin/v2/namespaces/public/default/topics", ["not a//topic name"]),
    ],
)
async def test_answers_of_the_wrong_shape_are_refused(
    service: WebService, path: str, body: Any
) -> None:
    service.answers = {path: (200, body)}
    lookup = _lookup(service.url)
    try:
        with pytest.raises(InvalidLookupAnswer) as caught:
            if "lookup" in path:
                await lookup.lookup(TOPIC)
            elif "partitions" in path:
                await lookup.partitioned_metadata(TOPIC)
            else:
                await lookup.topics_of_namespace("public/default", 0)
        assert not is_retryable(caught.value)
    finally:
        await lookup.close()


async def test_https_follows_the_tls_broker_url(service: WebService) -> None:
    # The service is plain HTTP; what matters is which URL of the answer is used.
    service.answers = {
        "/lookup/v2/topic/persistent/public/default/t": (
            200,
            {"brokerUrl": "pulsar://b:6650", "brokerUrlTls": None},
        )
    }
    lookup = _lookup(service.url)
    lookup.config.service_url = service.url.replace("http:", "https:")
    try:
        with pytest.raises(InvalidLookupAnswer, match="brokerUrlTls"):
            await lookup.lookup(TOPIC)
    finally:
        await lookup.close()


async def test_hosts_are_asked_round_robin(service: WebService) -> None:
    service.answers = {
        "/admin/v2/persistent/public/default/t/partitions": (200, {"partitions": 0})
    }
    dead = "127.0.0.1:1"
    lookup = _lookup(f"{service.url},{dead}")
    try:
        assert await lookup.partitioned_metadata(TOPIC) == 0
        with pytest.raises(ConnectError):  # retryable: the next try asks the next host
            await lookup.partitioned_metadata(TOPIC)
        assert await lookup.partitioned_metadata(TOPIC) == 0
    finally:
        await lookup.close()


def test_http_service_urls() -> None:
    assert is_http_url("http://a:1") and is_http_url("https://a:1")
    assert not is_http_url("pulsar://a:1")
    assert http_base_urls("http://a:1,b:2/") == ["http://a:1", "http://b:2"]
    for bad in ("http://", "http://a:1/admin", "http://a:1?x=1", "http://a:1,,b:2"):
        with pytest.raises(InvalidUrl):
            http_base_urls(bad)
    assert is_tls_url("https://a:1") and not is_tls_url("http://a:1")
    assert admin_url_for("http://a:1,b:2") == "http://a:1"
    assert admin_url_for("https://a:8443") == "https://a:8443"


async def test_the_client_chooses_the_lookup_by_scheme() -> None:
    client = aio.Client("http://127.0.0.1:8080")
    assert isinstance(client.lookup, HttpLookupService)
    assert client.admin_url == "http://127.0.0.1:8080"
    await client.close()
    binary = aio.Client("pulsar://127.0.0.1:6650")
    assert not isinstance(binary.lookup, HttpLookupService)
    await binary.close()
    with pytest.raises(InvalidUrl):
        aio.Client("http://127.0.0.1:8080/admin")
