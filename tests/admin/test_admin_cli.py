"""``quasar admin ...`` against a live admin server (the fake broker behind it)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from quasar.cli.main import main
from quasar.client.admin import AdminClient
from quasar.errors import ResourceNotFoundError

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

Client = TestClient[Any, Any]


@pytest.fixture
def url(client: Client) -> str:
    return str(client.server.make_url("")).rstrip("/")


async def run(url: str, *argv: str) -> int:
    """Run the CLI in a thread: it runs its own event loop while the server runs here."""
    # WARNING: the server's access log runs in this process and would share stderr.
    argv = ("--log-level", "WARNING", "admin", "--admin-url", url, *argv)
    return await asyncio.to_thread(main, list(argv))


async def test_tenants(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await run(url, "tenants", "list") == 0
    assert capsys.readouterr().out == "public\npulsar\n"
    assert await run(url, "tenants", "create", "acme", "--admin-roles", "a,b") == 0
    assert await run(url, "tenants", "list") == 0
    assert "acme" in capsys.readouterr().out.split()
    assert await run(url, "tenants", "delete", "acme") == 0
    assert await run(url, "tenants", "delete", "acme") == 1
    assert capsys.readouterr().err == "error: 404 Tenant does not exist\n"


async def test_namespaces(
    url: str, broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(url, "namespaces", "create", "public/ns") == 0
    assert await run(url, "namespaces", "list", "public") == 0
    assert capsys.readouterr().out == "public/default\npublic/ns\n"
    assert await run(url, "topics", "create", "public/ns/t") == 0
    assert await run(url, "namespaces", "delete", "public/ns") == 1
    assert "409 Cannot delete non empty namespace" in capsys.readouterr().err
    assert await run(url, "namespaces", "delete", "public/ns", "--force") == 0
    assert broker.topics == {}
    assert await run(url, "namespaces", "create", "not-a-namespace") == 1
    assert "not valid" in capsys.readouterr().err


async def test_namespace_bundles(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await run(url, "namespaces", "create", "public/ns") == 0
    capsys.readouterr()
    assert await run(url, "namespaces", "bundles", "public/ns") == 0
    out = capsys.readouterr().out
    assert '["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]' in out
    assert "numBundles  4" in out
    assert await run(url, "namespaces", "bundles", "public/nope") == 1
    assert "404" in capsys.readouterr().err


async def test_topics(
    url: str, broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(url, "topics", "create", "plain") == 0
    assert (
        await run(
            url, "topics", "create-partitioned-topic", "public/default/p", "-p", "2"
        )
        == 0
    )
    assert await run(url, "topics", "list", "public/default") == 0
    assert capsys.readouterr().out.split() == [
        "persistent://public/default/p-partition-0",
        "persistent://public/default/p-partition-1",
        "persistent://public/default/plain",
    ]
    broker.topics["persistent://public/default/plain"]["sub"] = "latest"
    assert (
        await run(url, "topics", "subscriptions", "persistent://public/default/plain")
        == 0
    )
    assert capsys.readouterr().out == "sub\n"
    assert await run(url, "--output", "json", "topics", "stats", "plain") == 0
    assert json.loads(capsys.readouterr().out)["subscriptions"] == {
        "sub": {"msgBacklog": 0}
    }
    # The default is a table of figures, nested stats under dotted keys.
    assert await run(url, "topics", "stats", "plain") == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["KEY", "VALUE"]
    assert ["subscriptions.sub.msgBacklog", "0"] in rows
    assert await run(url, "-o", "json", "topics", "internal-stats", "plain") == 0
    assert "cursors" in json.loads(capsys.readouterr().out)
    broker.connected.add("persistent://public/default/plain")
    assert await run(url, "topics", "delete", "plain") == 1
    assert "412" in capsys.readouterr().err
    assert await run(url, "topics", "delete", "plain", "--force") == 0
    assert await run(url, "topics", "delete-partitioned-topic", "public/default/p") == 0
    assert broker.resources.partitioned_topics.list("public/default") == []


async def test_topic_names_are_encoded(url: str, broker: Any) -> None:
    assert await run(url, "topics", "create", "persistent://public/default/a b?c") == 0
    assert "persistent://public/default/a b?c" in broker.topics


async def test_errors(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert await run(url, "topics", "stats", "missing") == 1
    assert capsys.readouterr().err == "error: 404 Topic not found\n"
    assert await run(url, "topics", "create", "non-persistent://public/default/x") == 1
    assert "only persistent" in capsys.readouterr().err
    assert await run(url, "topics", "create", "a/b") == 1
    assert "invalid short topic name" in capsys.readouterr().err


def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert (
        main(["admin", "--admin-url", f"http://127.0.0.1:{port}", "tenants", "list"])
        == 1
    )
    assert "cannot reach" in capsys.readouterr().err


async def test_client_non_json_answers(url: str) -> None:
    async with AdminClient(url + "/") as client:
        assert await client.request("GET", "/admin/v2/brokers/health") == "ok"
        with pytest.raises(ResourceNotFoundError) as info:
            await client.request("GET", "/admin/v2/nothing")
    assert info.value.status == 404 and info.value.remote
