"""``quasar admin transactions`` commands for unreadable records call their routes
(served here by a stub) with each name encoded as one path segment."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from quasar.cli.main import main

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

BASE = "/admin/v3/transactions"


async def _cli(client: TestClient[Any, Any], *argv: str) -> int:
    url = str(client.server.make_url("")).rstrip("/")
    args = ["--log-level", "WARNING", "admin", "--admin-url", url, "transactions", *argv]
    return await asyncio.to_thread(main, args)


async def test_commands_call_their_routes(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.raw_path}")
        return web.json_response({"state": "Ready"})

    app = web.Application()
    app.router.add_get(f"{BASE}/coordinatorStats", record)
    app.router.add_post(f"{BASE}/coordinators/{{id}}/skipCorruptRecord", record)
    app.router.add_post(
        f"{BASE}/pendingAck/{{t}}/{{ns}}/{{topic}}/{{sub}}/skipCorruptRecord", record
    )
    async with TestClient(TestServer(app)) as stub:
        assert await _cli(stub, "coordinator-stats") == 0
        assert await _cli(stub, "coordinator-stats", "--coordinator-id", "1") == 0
        assert await _cli(
            stub, "skip-corrupt-coordinator-record", "--coordinator-id", "0",
            "--position", "12:3",
        ) == 0
        assert await _cli(
            stub, "skip-corrupt-pending-ack-record", "persistent://t/ns/orders",
            "my sub/1", "--position", "7:0",
        ) == 0
        assert await _cli(stub, "skip-corrupt-coordinator-record", "--position", "1:2") != 0
    assert seen == [
        f"GET {BASE}/coordinatorStats",
        f"GET {BASE}/coordinatorStats?coordinatorId=1",
        f"POST {BASE}/coordinators/0/skipCorruptRecord?position=12:3",
        f"POST {BASE}/pendingAck/t/ns/orders/my%20sub%2F1/skipCorruptRecord?position=7:0",
    ]
    assert ["state", "Ready"] in [line.split() for line in capsys.readouterr().out.splitlines()]
