"""kill -9 at every step of the PIP-255 end chain; afterwards END_TXN is idempotent.

The chain (``transaction/coordinator/coordinator.py``): write COMMITTING/ABORTING →
append to the preserver → ends to the participants → flush the preserver → write
COMMITTED/ABORTED → answer. A crash point sits between every two steps. Each case:

1. An unarmed broker: transaction T0 (client name NAME) writes to topics A and B and
   commits; T_ab writes and aborts. Then kill -9: both outcomes must survive.
2. The broker starts again with ``QUASAR_CRASH_POINT``; T writes to A and B, and a raw
   END_TXN(action, NAME) kills the broker at the point.
3. Unarmed restart. END_TXN(action, NAME) is retried while the answer is retryable
   (coordinator loading, preserver not ready) and must succeed: the decision was
   durable before every one of these points. The opposite action must fail with
   InvalidTxnStatus naming the real status — never success, never the wrong status.
   T0 and T_ab answer the same way. Then kill -9 once more and ask again: the answers
   come from the recovered preserver (T's log records may be gone).
4. The admin view lists the three outcomes, and a reader of A and B (up to a
   sentinel) sees T0's values and, for a commit, T's values exactly once, and none of
   T_ab's or an aborted T's.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawCoordinator, close_all
from quasar.transaction.crash_points import ENV_VAR

pytestmark = [pytest.mark.crash, pytest.mark.timeout(180), pytest.mark.usefixtures("close_raw")]

NAME = "crash-app"
DEATH_TIMEOUT_S = 30.0
END_TIMEOUT_S = 60.0
RETRY_PAUSE_S = 0.1  # between retries of a retryable END_TXN answer (bounded loop)
RECEIVE_MS = 10_000
RETRYABLE = {
    ServerError.TransactionCoordinatorNotFound,
    ServerError.TransactionPreserverClosed,
    ServerError.ServiceNotReady,
}

CHAIN_POINTS = [
    "tc.after_ending_written",
    "tc.after_preserver_append",
    "tc.after_some_ends",
    "tc.after_all_ends_before_terminal",
    "tc.after_preserver_flush",
    "tc.after_terminal_written",
]
CASES = [(p, a) for p in CHAIN_POINTS for a in ("commit", "abort")]


def test_every_point_of_the_chain_is_known() -> None:
    from quasar.transaction.crash_points import KNOWN_POINTS

    tc_points = {p for p in KNOWN_POINTS if p.startswith("tc.")}
    assert tc_points == set(CHAIN_POINTS)


class Tc:
    """A raw coordinator connection ending transactions as NAME."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.rc = RawCoordinator(broker.port)
        self.raw = self.rc.raw

    def connect(self, tc_id: int) -> int | None:
        resp = self.rc.connect(tc_id)
        return resp.error if resp.HasField("error") else None

    def send_end(self, txn: tuple[int, int], action: str) -> int:
        return self.rc.send_end(*txn, pb.COMMIT if action == "commit" else pb.ABORT, NAME)

    def end(self, txn: tuple[int, int], action: str) -> pb.CommandEndTxnResponse:
        return self.rc.wait(self.send_end(txn, action))  # type: ignore[no-any-return]


def definite_end(broker: BrokerProcess, txn: tuple[int, int], action: str) -> tuple[int | None, str]:
    """END_TXN until the answer is not retryable (bounded); (error or None, message)."""
    deadline = time.monotonic() + END_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        tc = Tc(broker)
        try:
            if tc.connect(txn[0]) is None:
                resp = tc.end(txn, action)
                if not resp.HasField("error"):
                    return None, ""
                if resp.error not in RETRYABLE:
                    return resp.error, resp.message
                last = f"{resp.error}: {resp.message}"
        finally:
            tc.raw.close()
        time.sleep(RETRY_PAUSE_S)
    raise AssertionError(f"END_TXN {action} of {txn} got no definite answer: {last}")


def opposite(action: str) -> str:
    return "abort" if action == "commit" else "commit"


def check_outcome(broker: BrokerProcess, txn: tuple[int, int], action: str) -> None:
    """``txn`` ended by ``action``: repeating it succeeds, the opposite names it."""
    status = "COMMITTED" if action == "commit" else "ABORTED"
    for _ in range(2):
        assert definite_end(broker, txn, action) == (None, ""), (txn, action)
    error, message = definite_end(broker, txn, opposite(action))
    assert error == ServerError.InvalidTxnStatus, (txn, error, message)
    assert f"it is in {status} status" in message, message


def wait_for_death(broker: BrokerProcess, point: str) -> None:
    assert broker.proc is not None
    try:
        code = broker.proc.wait(DEATH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the broker did not die at {point!r}:\n{broker.read_log()[-4000:]}"
        ) from None
    assert code == -9, f"exited with {code}, not SIGKILL:\n{broker.read_log()[-4000:]}"
    broker.kill()


def produce(broker: BrokerProcess, topics: list[str], tag: str) -> tuple[int, int]:
    """A transaction of NAME writing ``tag`` to every topic (sends acknowledged), left
    open; its id."""
    client = qc.Client(broker.url, enable_transaction=True, client_name=NAME,
                       operation_timeout_seconds=15)
    try:
        txn = client.new_transaction(timeout_ms=600_000)
        for topic in topics:
            client.create_producer(topic).send(tag.encode(), txn=txn)
        most, least = txn.id()
        return most, least
    finally:
        client.close()


def read_all(broker: BrokerProcess, topic: str) -> list[bytes]:
    client = qc.Client(broker.url, operation_timeout_seconds=15)
    try:
        consumer = client.subscribe(topic, f"verify-{uuid.uuid4().hex[:6]}",
                                    initial_position=qc.InitialPosition.Earliest)
        client.create_producer(topic).send(b"sentinel")
        seen: list[bytes] = []
        while True:
            m = consumer.receive(RECEIVE_MS)
            consumer.acknowledge(m)
            if m.data() == b"sentinel":
                return seen
            seen.append(m.data())
    finally:
        client.close()


def admin_view(broker: BrokerProcess) -> dict[str, Any]:
    url = f"{broker.admin_url}/admin/v3/transactions/clientTransactions/{NAME}"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


@pytest.mark.parametrize(("point", "action"), CASES)
def test_end_is_idempotent_after_kill_9_at(tmp_path: Path, point: str, action: str) -> None:
    topics = [f"persistent://public/default/{n}-{uuid.uuid4().hex[:6]}" for n in "ab"]
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        t0 = produce(broker, topics, "t0")
        t_ab = produce(broker, topics, "t_ab")
        assert definite_end(broker, t0, "commit") == (None, "")
        assert definite_end(broker, t_ab, "abort") == (None, "")
        broker.kill()

        broker.extra_env[ENV_VAR] = point
        broker.start()
        t = produce(broker, topics, "t")
        tc = Tc(broker)
        assert tc.connect(t[0]) is None
        tc.send_end(t, action)  # the broker dies on the way
        wait_for_death(broker, point)
        close_all()

        broker.extra_env.pop(ENV_VAR)
        broker.start()
        for _ in range(2):
            check_outcome(broker, t, action)
            check_outcome(broker, t0, "commit")
            check_outcome(broker, t_ab, "abort")
            broker.restart(hard=True)

        view = admin_view(broker)
        ended = {(e["mostSigBits"], e["leastSigBits"]): e["status"] for e in view["terminated"]}
        assert ended == {
            t0: "COMMITTED",
            t_ab: "ABORTED",
            t: "COMMITTED" if action == "commit" else "ABORTED",
        }
        assert view["open"] == []
        for topic in topics:
            expected = [b"t0", b"t"] if action == "commit" else [b"t0"]
            assert read_all(broker, topic) == expected, topic
    finally:
        broker.kill()
