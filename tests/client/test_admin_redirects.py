"""``AdminClient`` follows a cluster member's redirects to a topic's owner: 307 for
every method with its body and credentials, within a bounded number of hops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from quasar.client.admin import MAX_REDIRECTS, AdminClient
from quasar.client.authentication import AuthenticationToken
from quasar.errors import AdminError, InvalidAdminResponse

from .conftest import start_app

TOKEN = "owner-token"


@dataclass
class Members:
    front: str  # answers 307 to the owner, as a member that does not own the topic
    owner: str


@pytest.fixture
async def members() -> AsyncIterator[Members]:
    async def owned(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"reason": "no credentials"}, status=401)
        return web.json_response({
            "method": request.method,
            "body": await request.text(),
            "authoritative": request.query.get("authoritative"),
        })

    owner_app = web.Application()
    owner_app.router.add_route("*", "/topic", owned)
    owner_runner, owner_url = await start_app(owner_app)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"{owner_url}/topic?authoritative=true")

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{owner_url}/topic")

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/loop")  # relative, back to itself

    async def nowhere(request: web.Request) -> web.Response:
        return web.Response(status=307)

    front_app = web.Application()
    front_app.router.add_route("*", "/topic", redirect)
    front_app.router.add_route("*", "/moved", moved)
    front_app.router.add_route("*", "/loop", loop)
    front_app.router.add_route("*", "/nowhere", nowhere)
    front_runner, front_url = await start_app(front_app)
    yield Members(front_url, owner_url)
    await front_runner.cleanup()
    await owner_runner.cleanup()


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE"])
async def test_a_307_is_followed_with_method_body_and_credentials(
    members: Members, method: str
) -> None:
    auth = AuthenticationToken(TOKEN)
    async with AdminClient(members.front, authentication=auth) as admin:
        body = None if method == "GET" else [1, 2]
        answer = await admin.request(method, "/topic", *([] if body is None else [body]))
    assert answer == {
        "method": method,
        "body": "" if body is None else "[1, 2]",
        "authoritative": "true",
    }


async def test_without_credentials_the_owner_refuses(members: Members) -> None:
    async with AdminClient(members.front) as admin:
        with pytest.raises(AdminError) as info:
            await admin.request("PUT", "/topic", 1)
    assert info.value.status == 401


async def test_a_302_is_followed_for_get_only(members: Members) -> None:
    auth = AuthenticationToken(TOKEN)
    async with AdminClient(members.front, authentication=auth) as admin:
        assert (await admin.request("GET", "/moved"))["method"] == "GET"
        with pytest.raises(AdminError) as info:
            await admin.request("PUT", "/moved", 1)
    assert info.value.status == 302


async def test_endless_or_broken_redirects_are_refused(members: Members) -> None:
    async with AdminClient(members.front) as admin:
        with pytest.raises(InvalidAdminResponse, match=f"more than {MAX_REDIRECTS}"):
            await admin.request("POST", "/loop", {})
        with pytest.raises(InvalidAdminResponse, match="without a Location"):
            await admin.request("GET", "/nowhere")
