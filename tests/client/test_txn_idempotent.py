"""Idempotent commit and abort (PIP-255), client side, against the fake coordinator.

The fake coordinator plays a broker that forgets ended transactions but, with
``preserve``, keeps their outcome per client name and answers a repeated END_TXN
from it. Covered: the client name on NEW_TXN/END_TXN, END_TXN retried after lost
answers and retryable refusals until a definite answer, the end budget and
``TransactionOutcomeUnknown.txn_id``, ``resume_transaction`` and the admin call
``get_client_transactions``.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

import quasar.client as qc
from quasar.client import aio
from quasar.client.client_transactions import ClientTransactions, parse_txn_id
from quasar.client.config import ClientConfig, admin_url_for
from quasar.client.exceptions import (
    AdminApiError,
    InvalidConfiguration,
    TransactionOutcomeUnknown,
    TransactionsNotEnabled,
    result_for,
)
from quasar.client.txn_state import TransactionState
from quasar.errors import (
    ConnectError,
    InvalidTxnStatus,
    TransactionNotFound,
    TransactionPreserverClosed,
)
from quasar.protocol import pb
from quasar.protocol.txn_id import TxnID

from ..fakes.broker import FakeBroker
from ..fakes.threaded import ThreadedFakeBroker
from .conftest import start_app
from .test_transactions import make_client, wait_for

T = pb.BaseCommand
S = TransactionState


@pytest.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    broker.enable_transactions(2)
    # A PIP-255 coordinator: ended transactions leave memory, their outcome stays.
    broker.coordinator.forget_ended = True
    broker.coordinator.preserve = True
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
async def client(fake: FakeBroker) -> AsyncIterator[aio.Client]:
    c = make_client(fake.url, client_name="app-1")
    yield c
    await c.close()


def end_txns(fake: FakeBroker) -> list[Any]:
    return [c.endTxn for c in fake.commands(T.END_TXN)]


# --- the client name -------------------------------------------------------------------


async def test_default_client_name_is_random_per_instance(fake: FakeBroker) -> None:
    a, b = make_client(fake.url), make_client(fake.url)
    try:
        assert re.fullmatch(r"quasar-[0-9a-f]{32}", a.client_name)
        assert a.client_name != b.client_name
        txn = await a.new_transaction()
        await txn.commit()
        assert fake.commands(T.NEW_TXN)[0].newTxn.client_name == a.client_name
        assert end_txns(fake)[0].client_name == a.client_name
        assert txn.client_name == a.client_name
    finally:
        await a.close()
        await b.close()


async def test_given_client_name_is_sent_on_new_txn_and_end_txn(
    fake: FakeBroker, client: aio.Client
) -> None:
    assert client.client_name == "app-1"
    committed = await client.new_transaction()
    aborted = await client.new_transaction()
    await committed.commit()
    await aborted.abort()
    assert [c.newTxn.client_name for c in fake.commands(T.NEW_TXN)] == ["app-1"] * 2
    assert [e.client_name for e in end_txns(fake)] == ["app-1"] * 2
    assert fake.coordinator.preserved == {
        tuple(committed.id): ("app-1", "COMMITTED"),
        tuple(aborted.id): ("app-1", "ABORTED"),
    }


@pytest.mark.parametrize("name", ["", 7])
def test_client_name_must_be_a_non_empty_string(name: Any) -> None:
    with pytest.raises(InvalidConfiguration):
        aio.Client("pulsar://127.0.0.1:6650", client_name=name)


def test_sync_client_exposes_the_name() -> None:
    c = qc.Client("pulsar://127.0.0.1:6650", client_name="named")
    try:
        assert c.client_name == "named"
        assert c.admin_url == "http://127.0.0.1:8080"
    finally:
        c.close()


def test_end_timeout_option_and_its_deprecated_alias() -> None:
    url = "pulsar://127.0.0.1:6650"
    assert ClientConfig(url).end_timeout_ms == 60_000
    assert ClientConfig(url, transaction_end_timeout_ms=5).end_timeout_ms == 5
    assert ClientConfig(url, transaction_end_timeout_ms=None).end_timeout_ms is None
    both = ClientConfig(
        url, transaction_end_timeout_ms=5, transaction_end_retry_timeout_ms=7
    )
    assert both.end_timeout_ms == 7  # the old name, where given, keeps its meaning


# --- retried END_TXN -------------------------------------------------------------------


@pytest.mark.parametrize("action", ["commit", "abort"])
async def test_lost_answer_then_preserved_outcome_is_success(
    fake: FakeBroker, client: aio.Client, action: str
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    await producer.send(b"a", txn=txn)
    fake.drop_on[T.END_TXN] = 1
    fake.apply_before_drop = True  # ended, forgotten, preserved; the answer lost
    await getattr(txn, action)()
    assert txn.state() is (S.COMMITTED if action == "commit" else S.ABORTED)
    first, retry = end_txns(fake)
    assert (first.txnid_most_bits, first.txnid_least_bits) == tuple(txn.id)
    assert retry.client_name == "app-1"
    assert tuple(txn.id) not in fake.coordinator.txns  # answered by the preserver
    assert len(fake.commands(T.SEND)) == 1  # the data is never sent again


async def test_retry_answered_with_the_opposite_outcome(
    fake: FakeBroker, client: aio.Client
) -> None:
    # The coordinator aborted it (its own timeout) while our commit's answer was lost.
    txn = await client.new_transaction()
    fake.drop_on[T.END_TXN] = 1
    fake.apply_before_drop = False
    key = tuple(txn.id)
    fake.coordinator.txns.pop(key)
    fake.coordinator.preserved[key] = ("app-1", "ABORTED")
    with pytest.raises(InvalidTxnStatus):
        await txn.commit()
    assert txn.state() is S.ERROR


@pytest.mark.parametrize(
    "codes",
    [
        [pb.TransactionCoordinatorNotFound],
        [pb.TransactionPreserverClosed],
        [pb.TransactionPreserverClosed, pb.TransactionCoordinatorNotFound] * 2,
    ],
    ids=["coordinator-not-found", "preserver-closed", "both-twice"],
)
async def test_retryable_refusals_are_asked_again(
    fake: FakeBroker, client: aio.Client, codes: list[int]
) -> None:
    txn = await client.new_transaction()
    fake.coordinator.errors[T.END_TXN] = list(codes)
    await txn.commit()
    assert txn.state() is S.COMMITTED
    assert len(fake.commands(T.END_TXN)) == len(codes) + 1


async def test_not_found_without_an_earlier_attempt_is_definite(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    del fake.coordinator.txns[tuple(txn.id)]  # timed out and removed, never ended
    with pytest.raises(TransactionNotFound) as info:
        await txn.commit()
    assert not isinstance(info.value, TransactionOutcomeUnknown)


async def test_not_preserved_after_a_lost_answer_is_unknown(
    fake: FakeBroker, client: aio.Client
) -> None:
    fake.coordinator.preserve = False  # e.g. transactionMetaPersistCount=0
    txn = await client.new_transaction()
    fake.drop_on[T.END_TXN] = 1
    fake.apply_before_drop = True
    with pytest.raises(TransactionOutcomeUnknown) as info:
        await txn.commit()
    assert info.value.txn_id == txn.id
    assert txn.state() is S.ERROR


# --- the end budget --------------------------------------------------------------------


async def test_unreachable_coordinator_gives_unknown_outcome_with_the_id(
    fake: FakeBroker,
) -> None:
    client = make_client(fake.url, transaction_end_timeout_ms=300)
    try:
        txn = await client.new_transaction()
        fake.drop_on[T.END_TXN] = 1_000_000  # every answer lost
        fake.apply_before_drop = True
        with pytest.raises(TransactionOutcomeUnknown) as info:
            await txn.commit()
        assert info.value.txn_id == txn.id
        assert isinstance(info.value.txn_id, TxnID)
        assert txn.state() is S.COMMITTING
        assert len(fake.commands(T.END_TXN)) >= 2
        fake.drop_on.clear()
        await txn.commit()  # asking again learns it from the preserver
        assert txn.state() is S.COMMITTED
    finally:
        await client.close()


async def test_budget_cuts_an_end_txn_that_is_never_answered(fake: FakeBroker) -> None:
    # The connection stays up and the request's own timeout (5 s) is longer than
    # the budget: the budget still bounds the call.
    client = make_client(fake.url, transaction_end_timeout_ms=200)
    try:
        txn = await client.new_transaction()
        fake.hold_txn_answers.add(T.END_TXN)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransactionOutcomeUnknown) as info:
            await txn.commit()
        assert loop.time() - started < 3.0
        assert info.value.txn_id == txn.id
        assert txn.state() is S.COMMITTING
        assert len(fake.commands(T.END_TXN)) == 1
    finally:
        await client.close()


async def test_retryable_refusals_until_the_budget_ends(fake: FakeBroker) -> None:
    client = make_client(fake.url, transaction_end_timeout_ms=300)
    try:
        txn = await client.new_transaction()
        fake.coordinator.errors[T.END_TXN] = [pb.TransactionPreserverClosed] * 10_000
        with pytest.raises(TransactionOutcomeUnknown, match="PreserverClosed") as info:
            await txn.abort()
        assert isinstance(info.value.__cause__, TransactionPreserverClosed)
        assert txn.state() is S.ABORTING
    finally:
        await client.close()


def test_unknown_outcome_pickles_with_its_id() -> None:
    import pickle

    exc = pickle.loads(pickle.dumps(TransactionOutcomeUnknown("m", TxnID(1, 2))))
    assert exc.txn_id == (1, 2) and str(exc) == "m"


def test_preserver_closed_is_exported_and_retryable() -> None:
    assert qc.TransactionPreserverClosed is TransactionPreserverClosed
    assert TransactionPreserverClosed.retryable
    assert result_for(TransactionPreserverClosed("x")) is qc.Result.UnknownError
    # quasar.errors' names are exported beside pulsar's aliases.
    assert qc.InvalidTxnStatus is qc.InvalidTxnStatusError is InvalidTxnStatus
    assert qc.TransactionCoordinatorNotFound is qc.TransactionCoordinatorNotFoundError


# --- resume ----------------------------------------------------------------------------


async def test_resume_in_another_client_commits_again(fake: FakeBroker) -> None:
    first = make_client(fake.url, client_name="writer", transaction_end_timeout_ms=200)
    producer = await first.create_producer("fake")
    txn = await first.new_transaction()
    await producer.send(b"x", txn=txn)
    fake.drop_on[T.END_TXN] = 1_000_000
    fake.apply_before_drop = True
    with pytest.raises(TransactionOutcomeUnknown) as info:
        await txn.commit()
    await first.close()
    fake.drop_on.clear()

    second = make_client(fake.url)  # another process: another default name
    try:
        again = second.resume_transaction(info.value.txn_id, client_name="writer")
        assert again.id == txn.id and again.state() is S.OPEN
        assert again.client_name == "writer"
        await again.commit()  # discovers the coordinators itself
        assert again.state() is S.COMMITTED
        assert end_txns(fake)[-1].client_name == "writer"
        assert fake.coordinator.preserved[tuple(txn.id)] == ("writer", "COMMITTED")
        # The other action on another handle: the real status, not success.
        other = second.resume_transaction(tuple(txn.id), client_name="writer")
        with pytest.raises(InvalidTxnStatus):
            await other.abort()
        assert other.state() is S.ERROR
    finally:
        await second.close()


async def test_resume_under_a_name_the_coordinator_does_not_know(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    await txn.commit()  # ended and forgotten; preserved for "app-1" only
    stranger = client.resume_transaction(txn.id, client_name="someone-else")
    with pytest.raises(TransactionOutcomeUnknown) as info:
        await stranger.commit()
    assert info.value.txn_id == txn.id
    mine = client.resume_transaction(txn.id)  # the client's own name
    await mine.commit()
    assert mine.state() is S.COMMITTED


async def test_resume_of_a_still_open_transaction(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    await producer.send(b"x", txn=txn)
    resumed = client.resume_transaction(txn.id)
    with pytest.raises(InvalidTxnStatus, match="resumed"):
        await producer.send(b"y", txn=resumed)
    await resumed.abort()
    assert resumed.state() is S.ABORTED
    assert fake.coordinator.preserved[tuple(txn.id)] == ("app-1", "ABORTED")


async def test_resumed_handle_has_no_client_timer(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction(timeout_ms=50)
    resumed = client.resume_transaction(txn.id)
    await wait_for(lambda: txn.state() is S.TIME_OUT)
    assert resumed.state() is S.OPEN
    await resumed.commit()  # the fake coordinator has no timer: still open there
    assert txn_of_preserved(fake, txn) == ("app-1", "COMMITTED")


def txn_of_preserved(fake: FakeBroker, txn: aio.Transaction) -> tuple[str, str]:
    return fake.coordinator.preserved[tuple(txn.id)]


@pytest.mark.parametrize("bad", [(1,), (1, 2, 3), ("a", 1), (-1, 0), 5, None, (True, 1)])
async def test_resume_validates_the_id(client: aio.Client, bad: Any) -> None:
    with pytest.raises(InvalidConfiguration):
        client.resume_transaction(bad)


async def test_resume_needs_transactions(fake: FakeBroker) -> None:
    c = aio.Client(fake.url)
    try:
        with pytest.raises(TransactionsNotEnabled):
            c.resume_transaction((0, 1))
    finally:
        await c.close()


async def test_resume_on_the_same_client_keeps_the_first_handle_intact(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    fake.hold_txn_answers.add(T.END_TXN)
    commit = asyncio.ensure_future(txn.commit())
    await wait_for(lambda: len(fake.commands(T.END_TXN)) == 1)
    fake.hold_txn_answers.clear()
    fake.release_held()
    await commit
    resumed = client.resume_transaction(txn.id)
    await resumed.commit()
    assert txn.state() is S.COMMITTED and resumed.state() is S.COMMITTED


def test_sync_resume(fake_threaded: Any) -> None:
    fake, run = fake_threaded
    c = qc.Client(
        fake.url, operation_timeout_seconds=5, enable_transaction=True, client_name="s"
    )
    try:
        txn = c.new_transaction()
        txn.commit()
        again = c.resume_transaction(txn.id)
        assert isinstance(again, qc.Transaction)
        assert again.client_name == "s"
        again.commit()
        assert again.state() is S.COMMITTED
        with pytest.raises(qc.InvalidTxnStatusError):
            c.resume_transaction(txn.id).abort()
    finally:
        c.close()


@pytest.fixture
def fake_threaded() -> Any:
    f = ThreadedFakeBroker()
    f.broker.enable_transactions(2)
    f.broker.coordinator.forget_ended = True
    f.broker.coordinator.preserve = True
    yield f.broker, f.call
    f.close()


# --- discoverability -------------------------------------------------------------------

ANSWER = {  # the shape of src/quasar/admin/transactions.py
    "clientName": "app-1",
    "open": [
        {
            "txnId": "(0,7)",
            "mostSigBits": 0,
            "leastSigBits": 7,
            "coordinatorId": 0,
            "status": "OPEN",
            "openTimestamp": 1,
            "timeoutAt": 60001,
        }
    ],
    "terminated": [
        {"txnId": "(1,3)", "status": "COMMITTED", "endTime": 1700000000000},
        {"txnId": "(0,5)", "status": "ABORTED", "endTime": 1700000000001},
    ],
    "unavailableCoordinators": [1],
}


@pytest.fixture
async def admin() -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        seen.append(name)
        if name == "missing":
            return web.json_response({"reason": "no such client"}, status=404)
        if name == "broken":
            return web.Response(text="not json", content_type="application/json")
        return web.json_response({**ANSWER, "clientName": name})

    app = web.Application()
    app.router.add_get("/admin/v3/transactions/clientTransactions/{name}", handler)
    runner, url = await start_app(app)
    yield url, seen
    await runner.cleanup()


async def test_get_client_transactions(
    fake: FakeBroker, admin: tuple[str, list[str]]
) -> None:
    url, seen = admin
    c = make_client(fake.url, client_name="app 1/x", admin_url=url + "/")
    try:
        mine = await c.get_client_transactions()
        assert seen == ["app 1/x"]  # quoted in the path, decoded by the server
        assert isinstance(mine, ClientTransactions)
        assert mine.client_name == "app 1/x"
        other = await c.get_client_transactions("app-1")
        assert [(t.txn_id, t.status) for t in other.open] == [(TxnID(0, 7), "OPEN")]
        assert [(t.txn_id, t.status, t.end_time_ms) for t in other.terminated] == [
            (TxnID(1, 3), "COMMITTED", 1700000000000),
            (TxnID(0, 5), "ABORTED", 1700000000001),
        ]
        assert other.open[0].details["openTimestamp"] == 1
        assert other.open[0].end_time_ms is None
        assert other.unavailable_coordinators == [1]
        assert other.find((1, 3)) is other.terminated[0]
        assert other.find(TxnID(9, 9)) is None
        with pytest.raises(AdminApiError, match="no such client") as info:
            await c.get_client_transactions("missing")
        assert info.value.status == 404 and not info.value.retryable
        with pytest.raises(AdminApiError):
            await c.get_client_transactions("broken")
    finally:
        await c.close()


async def test_get_client_transactions_unreachable(fake: FakeBroker) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = make_client(fake.url, admin_url=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ConnectError):
            await c.get_client_transactions()
    finally:
        await c.close()


def test_admin_url_default_is_standalone_port() -> None:
    assert admin_url_for("pulsar://broker.example:6651") == "http://broker.example:8080"
    assert admin_url_for("pulsar://a:1,b:2") == "http://a:8080"
    assert admin_url_for("pulsar://[::1]:6650") == "http://[::1]:8080"
    assert aio.Client("pulsar://h:6650", admin_url="http://x:1").admin_url == "http://x:1"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("(3,17)", (3, 17)),
        ("( 3 , 17 )", (3, 17)),
        ([3, 17], (3, 17)),
        ({"mostSigBits": 3, "leastSigBits": 17}, (3, 17)),
    ],
)
def test_parse_txn_id(raw: Any, expected: tuple[int, int]) -> None:
    assert parse_txn_id(raw) == expected


@pytest.mark.parametrize("raw", ["3:17", "", [1], {"x": 1}, None])
def test_parse_txn_id_refuses(raw: Any) -> None:
    with pytest.raises(ValueError):
        parse_txn_id(raw)

