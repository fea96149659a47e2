"""Transaction ownership against a real broker process with token authentication and
authorization on: a role cannot end, add to, send in or acknowledge in another role's
transaction (quasar's client, and raw frames for the commands no client sends on its
own); the owner's transaction is unaffected; a super-user may end it; the idempotent
END_TXN retry is answered only to the role that owns the outcome.

The official ``pulsar-client`` for Python has no transaction API (3.x), so the
transactional steps use quasar's client and raw frames.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.errors import ServerError
from quasar.protocol import encode_message, pb
from quasar.protocol.int64 import to_uint64
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator, close_all
from quasar.testing.secured import token_settings

T = pb.BaseCommand
SECRET = create_secret_key()
RECEIVE_MS = 10_000
TENANT = "txnown"  # alice and bob administer it: they may produce and consume there
ALICE_TENANT = "alicetxn"  # only alice administers it

pytestmark = pytest.mark.usefixtures("close_raw")


@pytest.fixture
def close_raw() -> Iterator[None]:
    yield
    close_all()


def token(role: str) -> str:
    return create_token(role, SECRET)


def admin(broker: BrokerProcess, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        broker.admin_url + path, data=data, method=method,
        headers={"Authorization": f"Bearer {token('root')}",
                 "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("txn-ownership")
    settings = token_settings(SECRET, super_users="root")
    proc = BrokerProcess(tmp / "data", settings=settings).start()
    try:
        for tenant, admins in ((TENANT, ["alice", "bob"]), (ALICE_TENANT, ["alice"])):
            admin(proc, "PUT", f"/admin/v2/tenants/{tenant}",
                  {"adminRoles": admins, "allowedClusters": ["standalone"]})
            admin(proc, "PUT", f"/admin/v2/namespaces/{tenant}/ns")
        yield proc
    finally:
        proc.stop()


def topic(tenant: str = TENANT) -> str:
    return f"persistent://{tenant}/ns/own-{uuid.uuid4().hex[:10]}"


def client(broker: BrokerProcess, role: str, name: str | None = None) -> qc.Client:
    return qc.Client(
        broker.url, authentication=qc.AuthenticationToken(token(role)),
        enable_transaction=True, client_name=name, operation_timeout_seconds=15,
    )


def raw_as(broker: BrokerProcess, role: str) -> Raw:
    """A raw connection authenticated as ``role``."""
    raw = Raw(broker.port)
    cmd = T(type=T.CONNECT)
    cmd.connect.client_version = "raw-test"
    cmd.connect.protocol_version = 20
    cmd.connect.auth_method_name = "token"
    cmd.connect.auth_data = token(role).encode()
    raw.send(cmd)
    assert raw.recv().type == T.CONNECTED
    return raw


def refused(resp: Any, error: int, text: str) -> None:
    assert resp.HasField("error") and resp.error == error, (resp.error, resp.message)
    assert text in resp.message, resp.message


def ok(resp: Any) -> None:
    assert not resp.HasField("error"), (resp.error, resp.message)


NOT_OWNER = "neither the owner"


def test_another_role_can_neither_end_nor_use_a_transaction(broker: BrokerProcess) -> None:
    name = topic()
    name_2 = topic()
    alice = client(broker, "alice", "shared-name")
    bob = client(broker, "bob", "shared-name")
    try:
        consumer = alice.subscribe(name, "s", initial_position=qc.InitialPosition.Earliest)
        alice.create_producer(name).send(b"to-consume")
        incoming = consumer.receive(RECEIVE_MS)
        producer = alice.create_producer(name_2)
        txn = alice.new_transaction(timeout_ms=120_000)
        producer.send(b"alice", txn=txn)
        most, least = txn.id()

        # quasar's client, as bob, with alice's transaction id: commit and abort are
        # refused (a resumed handle reports the refusal as an unknown outcome; it
        # cannot send or acknowledge, so raw frames do that below).
        with pytest.raises(qc.TransactionOutcomeUnknown, match=NOT_OWNER):
            bob.resume_transaction((most, least)).commit()
        with pytest.raises(qc.TransactionOutcomeUnknown, match=NOT_OWNER):
            bob.resume_transaction((most, least)).abort()

        # Raw frames, as bob: each coordinator command, and a SEND and an ACK that
        # carry alice's transaction id without registering anything first.
        raw = raw_as(broker, "bob")
        rc = RawCoordinator(raw)
        ok(rc.connect(most))
        refused(rc.add_partition(most, least, name), ServerError.TransactionNotFound, NOT_OWNER)
        refused(rc.add_subscription(most, least, name, "s"), ServerError.TransactionNotFound,
                NOT_OWNER)
        refused(rc.end(most, least, pb.COMMIT), ServerError.TransactionNotFound, NOT_OWNER)
        refused(rc.end(most, least, pb.ABORT, "shared-name"), ServerError.TransactionNotFound,
                NOT_OWNER)
        answer = raw.producer(name_2, producer_id=7, request_id=rc.next_request_id())
        assert answer.type == T.PRODUCER_SUCCESS, answer
        send = T(type=T.SEND)
        send.send.producer_id, send.send.sequence_id = 7, 0
        send.send.txnid_most_bits, send.send.txnid_least_bits = most, least
        metadata = pb.MessageMetadata(producer_name=answer.producer_success.producer_name,
                                      sequence_id=0, publish_time=1)
        raw.send_bytes(encode_message(send, metadata, b"bob-raw"))
        error = raw.recv_type(T.SEND_ERROR).send_error
        assert error.error == ServerError.NotAllowedError and NOT_OWNER in error.message
        sub = T(type=T.SUBSCRIBE)
        sub.subscribe.topic, sub.subscribe.subscription = name, "s-raw"
        sub.subscribe.consumer_id, sub.subscribe.request_id = 9, rc.next_request_id()
        sub.subscribe.subType = pb.CommandSubscribe.Shared
        assert raw.request(sub, T.SUCCESS).type == T.SUCCESS
        ack = T(type=T.ACK)
        ack.ack.consumer_id, ack.ack.ack_type = 9, pb.CommandAck.Individual
        ack.ack.request_id = rc.next_request_id()
        ack.ack.txnid_most_bits, ack.ack.txnid_least_bits = most, least
        position = incoming.message_id()
        mid = ack.ack.message_id.add()
        mid.ledgerId = to_uint64(position.ledger_id())
        mid.entryId = to_uint64(position.entry_id())
        response = raw.request(ack, T.ACK_RESPONSE).ackResponse
        assert response.error == ServerError.TransactionNotFound, response
        assert NOT_OWNER in response.message

        # The participants' commands are for super-users.
        end_on = T(type=T.END_TXN_ON_PARTITION)
        end_on.endTxnOnPartition.request_id = rc.next_request_id()
        end_on.endTxnOnPartition.topic = name_2
        end_on.endTxnOnPartition.txnid_most_bits = most
        end_on.endTxnOnPartition.txnid_least_bits = least
        end_on.endTxnOnPartition.txn_action = pb.ABORT
        refused(raw.request(end_on, T.END_TXN_ON_PARTITION_RESPONSE).endTxnOnPartitionResponse,
                ServerError.AuthorizationError, "not authorized")
        end_sub = T(type=T.END_TXN_ON_SUBSCRIPTION)
        end_sub.endTxnOnSubscription.request_id = rc.next_request_id()
        end_sub.endTxnOnSubscription.subscription.topic = name
        end_sub.endTxnOnSubscription.subscription.subscription = "s"
        end_sub.endTxnOnSubscription.txnid_most_bits = most
        end_sub.endTxnOnSubscription.txnid_least_bits = least
        end_sub.endTxnOnSubscription.txn_action = pb.ABORT
        refused(
            raw.request(end_sub, T.END_TXN_ON_SUBSCRIPTION_RESPONSE).endTxnOnSubscriptionResponse,
            ServerError.AuthorizationError, "not authorized",
        )

        # Alice's transaction is unaffected: it commits, with her message only.
        consumer.acknowledge(incoming, txn=txn)
        txn.commit()
        check = alice.subscribe(name_2, "check", initial_position=qc.InitialPosition.Earliest)
        assert check.receive(RECEIVE_MS).data() == b"alice"
        with pytest.raises(qc.Timeout):
            check.receive(1_000)

        # The idempotent retry: the same client name under bob is not found, under
        # alice (or a super-user) it is the preserved outcome.
        with pytest.raises(qc.TransactionOutcomeUnknown, match="is not found"):
            bob.resume_transaction((most, least), "shared-name").commit()
        alice.resume_transaction((most, least), "shared-name").commit()
        root_rc = RawCoordinator(raw_as(broker, "root"))
        ok(root_rc.connect(most))
        ok(root_rc.end(most, least, pb.COMMIT, "shared-name"))
        refused(root_rc.end(most, least, pb.ABORT, "shared-name"), ServerError.InvalidTxnStatus,
                "COMMITTED")
    finally:
        alice.close()
        bob.close()


def test_a_superuser_may_end_another_roles_transaction(broker: BrokerProcess) -> None:
    name = topic()
    alice = client(broker, "alice")
    root = client(broker, "root")
    try:
        txn = alice.new_transaction(timeout_ms=120_000)
        alice.create_producer(name).send(b"aborted", txn=txn)
        root.resume_transaction(tuple(txn.id())).abort()
        check = alice.subscribe(name, "check", initial_position=qc.InitialPosition.Earliest)
        alice.create_producer(name).send(b"after")
        assert check.receive(RECEIVE_MS).data() == b"after"
        # The participants' commands, too (an abort of a transaction never seen there).
        raw = raw_as(broker, "root")
        end_on = T(type=T.END_TXN_ON_PARTITION)
        end_on.endTxnOnPartition.request_id = 1
        end_on.endTxnOnPartition.topic = name
        end_on.endTxnOnPartition.txnid_most_bits = 0
        end_on.endTxnOnPartition.txnid_least_bits = 1_000_000
        end_on.endTxnOnPartition.txn_action = pb.ABORT
        ok(raw.request(end_on, T.END_TXN_ON_PARTITION_RESPONSE).endTxnOnPartitionResponse)
    finally:
        alice.close()
        root.close()


def test_adding_a_topic_needs_the_right_to_it(broker: BrokerProcess) -> None:
    """Bob's own transaction, with a topic of a tenant only alice administers."""
    raw = raw_as(broker, "bob")
    rc = RawCoordinator(raw)
    ok(rc.connect(0))
    resp = rc.new_txn(0, 60_000)
    ok(resp)
    most, least = resp.txnid_most_bits, resp.txnid_least_bits
    refused(rc.add_partition(most, least, topic(ALICE_TENANT)), ServerError.AuthorizationError,
            "not authorized to Produce")
    refused(rc.add_subscription(most, least, topic(ALICE_TENANT), "s"),
            ServerError.AuthorizationError, "not authorized to Consume")
    ok(rc.add_partition(most, least, topic()))
    # The broker's own topics cannot be added, whoever asks: an end there would fail
    # for ever.
    system = "persistent://pulsar/system/__terminated_txn_state_0"
    refused(rc.add_partition(most, least, system), ServerError.NotAllowedError, "system topic")
    refused(rc.add_subscription(most, least, system, "s"), ServerError.NotAllowedError,
            "system topic")
    ok(rc.end(most, least, pb.ABORT))


def test_grants_decide_what_a_role_may_add(broker: BrokerProcess) -> None:
    """carol may only consume in txnown/ns: she may acknowledge in her transaction
    but not produce in it."""
    admin(broker, "POST", f"/admin/v2/namespaces/{TENANT}/ns/permissions/carol", ["consume"])
    rc = RawCoordinator(raw_as(broker, "carol"))
    ok(rc.connect(0))
    resp = rc.new_txn(0, 60_000)
    ok(resp)
    most, least = resp.txnid_most_bits, resp.txnid_least_bits
    refused(rc.add_partition(most, least, topic()), ServerError.AuthorizationError,
            "not authorized to Produce")
    acked = topic()  # a subscription's topic must exist to be added
    admin(broker, "PUT", "/admin/v2/" + acked.replace("://", "/"))
    ok(rc.add_subscription(most, least, acked, "s"))
    ok(rc.end(most, least, pb.COMMIT))


def test_client_transactions_report_the_owner(broker: BrokerProcess) -> None:
    name = f"owned-{uuid.uuid4().hex[:8]}"
    alice = client(broker, "alice", name)
    try:
        txn = alice.new_transaction(timeout_ms=120_000)
        view = admin(broker, "GET", "/admin/v3/transactions/clientTransactions/"
                     + urllib.parse.quote(name, safe=""))
        assert [(o["txnId"], o["owner"]) for o in view["open"]] == [
            (f"({txn.id()[0]},{txn.id()[1]})", "alice")
        ]
        txn.abort()
    finally:
        alice.close()

