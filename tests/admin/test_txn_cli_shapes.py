"""``quasar admin transactions``: durations, the slow-transactions table, and the
request paths each command sends (against a stub that records them)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from quasar.cli.admin_txn_shapes import parse_duration_ms, slow_transactions_table
from quasar.cli.main import main

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

BASE = "/admin/v3/transactions"


@pytest.mark.parametrize(
    ("text", "ms"),
    [("30", 30_000), ("30s", 30_000), ("500ms", 500), ("5m", 300_000), ("1h", 3_600_000),
     ("2d", 172_800_000), ("1W", 604_800_000)],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "s", "-1s", "1x", "1.5s", "9" * 13])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms(text)


def test_slow_transactions_table_oldest_first() -> None:
    now = 1_700_000_600_000
    answer = {
        "(0,2)": {"txnId": "(0,2)", "status": "OPEN", "openTimestamp": now - 45_000,
                  "timeoutAt": now + 3_600_000, "owner": None,
                  "producedPartitions": {"persistent://a/b/t": {}}, "ackedPartitions": {}},
        "(1,1)": {"txnId": "(1,1)", "status": "ABORTING", "openTimestamp": now - 600_000,
                  "timeoutAt": now - 1, "owner": "etl",
                  "producedPartitions": {},
                  "ackedPartitions": {"persistent://a/b/u": {"sub": {}}}},
    }
    table = slow_transactions_table(answer, now_ms=lambda: now)
    assert table.columns == ["TXN ID", "STATUS", "OPENED (UTC)", "TIMEOUT IN", "AGE",
                             "OWNER", "PARTITIONS"]
    assert [r[0] for r in table.rows] == ["(1,1)", "(0,2)"]
    assert table.rows[0][1:] == ["ABORTING", "2023-11-14 22:13:20", "0s", "10m00s", "etl",
                                 "persistent://a/b/u/sub"]
    assert table.rows[1][3:] == ["1h00m", "45s", "", "persistent://a/b/t"]


COMMANDS = [
    (["coordinator-list"], "GET", f"{BASE}/coordinators"),
    (["coordinators-list"], "GET", f"{BASE}/coordinators"),
    (["coordinator-internal-stats", "-c", "1", "-m"], "GET",
     f"{BASE}/coordinatorInternalStats/1?metadata=true"),
    (["transaction-metadata", "-m", "1", "-l", "5"], "GET", f"{BASE}/transactionMetadata/1/5"),
    (["slow-transactions", "-t", "2m", "-c", "0"], "GET",
     f"{BASE}/slowTransactions/120000?coordinatorId=0"),
    (["abort-transaction", "--most-sig-bits", "0", "--least-sig-bits", "9"], "POST",
     f"{BASE}/abortTransaction/0/9"),
    (["transaction-buffer-stats", "-t", "persistent://a/b/my topic", "-l"], "GET",
     f"{BASE}/transactionBufferStats/a/b/my%20topic?lowWaterMarks=true"),
    (["transaction-in-buffer-stats", "-t", "a/b/t", "-m", "0", "-l", "3"], "GET",
     f"{BASE}/transactionInBufferStats/a/b/t/0/3"),
    (["pending-ack-stats", "-t", "a/b/t", "-s", "s/1"], "GET",
     f"{BASE}/pendingAckStats/a/b/t/s%2F1"),
    (["transaction-in-pending-ack-stats", "-t", "a/b/t", "-s", "s", "-m", "0", "-l", "3"],
     "GET", f"{BASE}/transactionInPendingAckStats/a/b/t/s/0/3"),
    (["pending-ack-internal-stats", "-t", "a/b/t", "-s", "s", "--metadata"], "GET",
     f"{BASE}/pendingAckInternalStats/a/b/t/s?metadata=true"),
    (["position-stats-in-pending-ack", "-t", "a/b/t", "-s", "s", "-l", "4", "-e", "2",
      "-b", "7"], "GET", f"{BASE}/positionStatsInPendingAck/a/b/t/s/4/2?batchIndex=7"),
]


async def test_commands_send_pulsar_paths(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[tuple[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.raw_path))
        if request.method == "POST":
            return web.Response(status=204)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    async with TestClient(TestServer(app)) as stub:
        url = str(stub.server.make_url("")).rstrip("/")
        for argv, _, _ in COMMANDS:
            args = ["--log-level", "WARNING", "admin", "--admin-url", url, "transactions",
                    *argv]
            assert await asyncio.to_thread(main, args) == 0, argv
    assert seen == [(method, path) for _, method, path in COMMANDS]
    capsys.readouterr()


def test_a_non_persistent_topic_is_refused_before_sending(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args: list[Any] = ["--log-level", "WARNING", "admin", "--admin-url", "http://127.0.0.1:9",
                       "transactions", "pending-ack-stats", "-t", "non-persistent://a/b/t",
                       "-s", "s"]
    assert main(args) == 1
    assert "not a persistent topic" in capsys.readouterr().err
