"""Coordinator requests on a broker connection are answered by callback, once their
record (or the end) is durable: the answer, its errors and a coordinator closing
under a request, against a real coordinator and an in-memory connection."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from quasar.broker.txn_limits import TxnLimitMetrics
from quasar.config import ServiceConfiguration
from quasar.protocol import pb
from quasar.protocol.frames import FrameDecoder
from quasar.server.connection import ServerConnection
from quasar.transaction import TransactionCoordinator, TxnID
from quasar.transaction.txn_status import TxnAction

from ..transaction.helpers import P1, TcEnv

T = pb.BaseCommand


class _Transport:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


class _Registry:
    """The registry's routing, over one coordinator (id 0)."""

    def __init__(self, tc: TransactionCoordinator) -> None:
        self.tc = tc

    def get(self, tc_id: int) -> TransactionCoordinator:
        assert tc_id == 0
        return self.tc

    def route(self, txn_id: TxnID) -> TransactionCoordinator:
        return self.get(txn_id.most_bits)


class _Client:
    """A connection to the coordinator, and what the client reads back."""

    def __init__(self, tc: TransactionCoordinator) -> None:
        service = SimpleNamespace(
            config=ServiceConfiguration(),
            transactions=SimpleNamespace(
                registry=_Registry(tc), limit_metrics=TxnLimitMetrics()
            ),
            # Every participant is reachable (txn_participants.require_reachable).
            topics={},
            namespace_exists=lambda namespace: True,
            partitions_of=lambda name: 0,
            topic_exists=lambda name: True,
        )
        self.conn = ServerConnection(service, keep_alive_s=0)  # type: ignore[arg-type]
        self.transport = _Transport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.conn.connected = True
        self._decoder = FrameDecoder(10 * 1024 * 1024)
        self._next_id = 1

    def request(self, cmd_type: int, field: str, **fields: Any) -> None:
        cmd = T(type=cmd_type)
        body = getattr(cmd, field)
        body.request_id = self._next_id
        self._next_id += 1
        for name, value in fields.items():
            if isinstance(value, list):
                getattr(body, name).extend(value)
            else:
                setattr(body, name, value)
        self.conn._handle(SimpleNamespace(command=cmd, type=cmd_type))  # type: ignore[arg-type]

    async def answers(self) -> list[pb.BaseCommand]:
        """Every answer written so far (after the loop ran what was due)."""
        for _ in range(20):
            await asyncio.sleep(0)
        frames = self._decoder.feed(bytes(self.transport.data))
        self.transport.data.clear()
        return [f.command for f in frames]


@pytest.fixture
async def env() -> AsyncIterator[TcEnv]:
    e = TcEnv()
    yield e
    await e.close()


async def test_new_txn_is_answered_with_its_id_once_durable(env: TcEnv) -> None:
    tc = await env.start()
    client = _Client(tc)
    client.request(T.NEW_TXN, "newTxn", tc_id=0, txn_ttl_seconds=60_000)
    client.request(T.NEW_TXN, "newTxn", tc_id=0)
    first, second = await client.answers()
    assert first.type == T.NEW_TXN_RESPONSE and not first.newTxnResponse.HasField("error")
    assert (first.newTxnResponse.request_id, first.newTxnResponse.txnid_least_bits) == (1, 0)
    assert (second.newTxnResponse.request_id, second.newTxnResponse.txnid_least_bits) == (2, 1)
    assert tc.get_txn_meta(TxnID(0, 1)).timeout_ms == 60_000  # 0 means the default


async def test_registrations_and_commit_are_answered_in_their_types(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    ids = {"txnid_most_bits": txn.most_bits, "txnid_least_bits": txn.least_bits}
    client = _Client(tc)
    client.request(T.ADD_PARTITION_TO_TXN, "addPartitionToTxn", partitions=[P1.topic], **ids)
    client.request(T.ADD_PARTITION_TO_TXN, "addPartitionToTxn", partitions=[P1.topic], **ids)
    added, again = await client.answers()
    assert added.type == again.type == T.ADD_PARTITION_TO_TXN_RESPONSE
    assert not added.addPartitionToTxnResponse.HasField("error")
    assert not again.addPartitionToTxnResponse.HasField("error")  # nothing new to write
    client.request(T.END_TXN, "endTxn", txn_action=pb.COMMIT, **ids)
    (ended,) = await client.answers()
    assert ended.type == T.END_TXN_RESPONSE and not ended.endTxnResponse.HasField("error")
    assert ended.endTxnResponse.txnid_least_bits == txn.least_bits
    assert env.client.ended_txns(P1) == [(txn, pb.COMMIT)]
    client.request(T.END_TXN, "endTxn", txn_action=pb.COMMIT, **ids)
    (late,) = await client.answers()
    assert late.endTxnResponse.error == pb.TransactionNotFound


async def test_refusals_are_answered_with_pulsar_codes(env: TcEnv) -> None:
    tc = await env.start()
    client = _Client(tc)
    client.request(
        T.ADD_PARTITION_TO_TXN, "addPartitionToTxn", txnid_most_bits=0,
        txnid_least_bits=42, partitions=[P1.topic],
    )
    (unknown,) = await client.answers()
    assert unknown.addPartitionToTxnResponse.error == pb.TransactionNotFound
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold(P1)
    aborting = tc.end_txn_nowait(txn, TxnAction.ABORT)
    ids = {"txnid_most_bits": txn.most_bits, "txnid_least_bits": txn.least_bits}
    client.request(T.ADD_PARTITION_TO_TXN, "addPartitionToTxn", partitions=["x"], **ids)
    client.request(T.END_TXN, "endTxn", txn_action=pb.COMMIT, **ids)
    late_add, opposite = await client.answers()
    assert late_add.addPartitionToTxnResponse.error == pb.InvalidTxnStatus
    assert opposite.endTxnResponse.error == pb.InvalidTxnStatus
    env.client.release(P1)
    assert aborting is not None
    await aborting


async def _commit_waiting_for_p1(env: TcEnv) -> tuple[TransactionCoordinator, _Client]:
    """A coordinator, and a client whose END_TXN(COMMIT) waits for participant P1."""
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold(P1)
    client = _Client(tc)
    client.request(
        T.END_TXN, "endTxn", txnid_most_bits=txn.most_bits, txnid_least_bits=txn.least_bits,
        txn_action=pb.COMMIT,
    )
    return tc, client


async def test_an_end_cut_short_by_close_is_answered_retryable(env: TcEnv) -> None:
    tc, client = await _commit_waiting_for_p1(env)
    assert await client.answers() == []  # waiting for the participant
    await tc.close()
    (answer,) = await client.answers()
    assert answer.endTxnResponse.error == pb.TransactionCoordinatorNotFound
    assert not client.conn.closed
    await tc.ledger.close()
    env.tc = None


async def test_a_bug_is_answered_and_logged_and_the_connection_kept(
    env: TcEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tc = await env.start()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(tc, "new_txn_nowait", broken)
    client = _Client(tc)
    with caplog.at_level(logging.ERROR, logger="quasar.server.txn_commands"):
        client.request(T.NEW_TXN, "newTxn", tc_id=0)
        (answer,) = await client.answers()
    assert answer.newTxnResponse.error == pb.UnknownError
    assert "transaction request failed" in caplog.text
    assert not client.conn.closed


async def test_an_answer_due_after_the_connection_closed_is_dropped(env: TcEnv) -> None:
    """The end goes on without its requester (the coordinator owns it); its answer
    has nowhere to go and is dropped quietly."""
    tc, client = await _commit_waiting_for_p1(env)
    assert await client.answers() == []
    client.conn.connection_lost(None)
    env.client.release(P1)
    assert await client.answers() == []
    assert tc.active_transactions() == 0  # committed all the same
