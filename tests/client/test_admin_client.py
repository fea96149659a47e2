"""``quasar.client.admin.AdminClient`` against a small aiohttp server: decoding,
error answers mapped to ``quasar.errors`` classes, and bounded waits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from quasar.client.admin import AdminClient, _redirect_target, call_admin
from quasar.client.authentication import AuthenticationToken
from quasar.errors import (
    AdminError,
    ConflictError,
    ConnectError,
    InvalidAdminResponse,
    InvalidResourceError,
    InvalidTopicName,
    ResourceNotFoundError,
    Timeout,
)

from .conftest import start_app


async def _json(request: web.Request) -> web.Response:
    return web.json_response({"path": request.path, "body": await request.text()})


async def _text(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _empty(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def _not_json(request: web.Request) -> web.Response:
    return web.Response(text="{oops", content_type="application/json")


async def _missing(request: web.Request) -> web.Response:
    return web.json_response({"reason": "Topic not found"}, status=404)


async def _exists(request: web.Request) -> web.Response:
    return web.json_response({"reason": "This topic already exists"}, status=409)


async def _teapot(request: web.Request) -> web.Response:
    return web.Response(text="short and stout", status=418)


async def _busy(request: web.Request) -> web.Response:
    return web.Response(status=503, reason="Service Unavailable")


@pytest.fixture
async def admin_url() -> AsyncIterator[str]:
    never = asyncio.Event()

    async def _silent(request: web.Request) -> web.Response:
        await never.wait()  # answers only when the client has given up
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/json/{tail:.*}", _json)
    app.router.add_get("/text", _text)
    app.router.add_delete("/empty", _empty)
    app.router.add_get("/not-json", _not_json)
    app.router.add_get("/missing", _missing)
    app.router.add_put("/exists", _exists)
    app.router.add_get("/teapot", _teapot)
    app.router.add_get("/busy", _busy)
    app.router.add_get("/silent", _silent)
    runner, url = await start_app(app)
    yield f"{url}/"
    never.set()
    await runner.cleanup()


async def test_answers_are_decoded_by_content_type(admin_url: str) -> None:
    async with AdminClient(admin_url) as admin:
        assert await admin.request("PUT", "/json/x", 3) == {"path": "/json/x", "body": "3"}
        assert await admin.request("GET", "/text") == "ok"
        assert await admin.request("DELETE", "/empty") is None
        with pytest.raises(InvalidAdminResponse):
            await admin.request("GET", "/not-json")
        with pytest.raises(InvalidAdminResponse):
            await admin.get_json("/text")


async def test_error_answers_map_to_the_error_classes(admin_url: str) -> None:
    async with AdminClient(admin_url) as admin:
        with pytest.raises(ResourceNotFoundError, match="^Topic not found$") as missing:
            await admin.request("GET", "/missing")
        assert missing.value.status == 404 and missing.value.remote
        with pytest.raises(ConflictError) as exists:
            await admin.request("PUT", "/exists")
        assert exists.value.reason == "This topic already exists"
        with pytest.raises(AdminError) as teapot:
            await admin.request("GET", "/teapot")
        assert (teapot.value.status, teapot.value.reason) == (418, "short and stout")
        assert not teapot.value.retryable
        with pytest.raises(AdminError) as busy:
            await admin.request("GET", "/busy")
        assert busy.value.status == 503 and busy.value.retryable
        assert busy.value.reason == "Service Unavailable"


async def test_a_silent_server_times_out(admin_url: str) -> None:
    async with AdminClient(admin_url, timeout_s=0.2) as admin:
        with pytest.raises(Timeout):
            await admin.request("GET", "/silent")


async def test_an_unreachable_server_is_a_connect_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with AdminClient(f"http://127.0.0.1:{port}") as admin:
        with pytest.raises(ConnectError, match="cannot reach") as info:
            await admin.tenants()
    assert info.value.retryable


def test_bad_names_are_refused_before_sending() -> None:
    with pytest.raises(InvalidResourceError, match="only persistent") as info:
        AdminClient.topic_path("non-persistent://public/default/x")
    assert not info.value.remote
    with pytest.raises(InvalidResourceError):
        AdminClient.namespace_path("no-slash")
    with pytest.raises(InvalidTopicName):
        AdminClient.topic_path("a/b")
    assert AdminClient.topic_path("a b") == "/admin/v2/persistent/public/default/a%20b"


def test_call_admin_runs_calls_from_blocking_code() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectError):
        call_admin(f"http://127.0.0.1:{port}", lambda admin: admin.tenants())
    with pytest.raises(ValueError):
        AdminClient("http://x", timeout_s=0)


async def test_a_307_is_followed_to_another_host_with_method_body_and_credentials() -> None:
    """A cluster member answers 307 to the member that owns the topic or coordinator:
    the client sends the same request there, credentials included (aiohttp itself
    would drop them on a redirect to another host)."""
    seen: list[tuple[str, str, str | None, bytes]] = []

    async def owner(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, request.headers.get("Authorization"),
                     await request.read()))
        return web.json_response({"ok": True})

    owner_app = web.Application()
    owner_app.router.add_route("*", "/owner", owner)
    owner_runner, owner_url = await start_app(owner_app)

    async def asked(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, request.headers.get("Authorization"),
                     await request.read()))
        raise web.HTTPTemporaryRedirect(f"{owner_url}/owner?authoritative=true")

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/loop")

    asked_app = web.Application()
    asked_app.router.add_route("*", "/asked", asked)
    asked_app.router.add_get("/loop", loop)
    asked_runner, asked_url = await start_app(asked_app)
    try:
        async with AdminClient(
            asked_url, authentication=AuthenticationToken("tok")
        ) as admin:
            assert await admin.request("POST", "/asked", {"n": 1}) == {"ok": True}
            assert await admin.request("GET", "/asked") == {"ok": True}
            with pytest.raises(InvalidAdminResponse, match="redirects"):
                await admin.request("GET", "/loop")
    finally:
        await asked_runner.cleanup()
        await owner_runner.cleanup()
    assert seen == [
        ("POST", "/asked", "Bearer tok", b'{"n": 1}'),
        ("POST", "/owner?authoritative=true", "Bearer tok", b'{"n": 1}'),
        ("GET", "/asked", "Bearer tok", b""),
        ("GET", "/owner?authoritative=true", "Bearer tok", b""),
    ]


def test_a_redirect_from_https_down_to_http_is_refused() -> None:
    with pytest.raises(InvalidAdminResponse, match="not https"):
        _redirect_target("https://broker:8443/admin/v2/x", "http://other:8080/admin/v2/x")
    assert _redirect_target("http://a:1/x?y=1", "/z?w=2") == "http://a:1/z?w=2"
