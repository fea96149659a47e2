"""With authentication and authorization on, a cluster member ends a transaction on
another member's partition as its own role (``brokerClientAuthenticationPlugin``),
which the other member accepts because that role is a super-user; the transaction
admin routes check the caller on the member asked and again on the owner a 307
leads to, and gather from the other members as the member's own role."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.client.admin import call_admin
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator
from quasar.testing.secured import token_settings
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import ASSIGN, place

pytestmark = pytest.mark.usefixtures("close_raw")

SECRET = create_secret_key()


def member_settings() -> dict[str, str]:
    """Token authentication and authorization on; the members connect to each other
    as role ``broker``, a super-user like ``root``."""
    return token_settings(SECRET, super_users="broker,root") | {
        "brokerClientAuthenticationPlugin":
            "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": "token:" + create_token("broker", SECRET),
    }


def place_as(broker: BrokerProcess, topic: str, token: str) -> None:
    """``place`` over a connection authenticated as ``token``'s role."""
    place(broker, topic, auth_method_name="token", auth_data=token.encode())


def test_a_member_ends_a_transaction_on_another_as_its_own_super_user_role(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    settings = member_settings()
    root = create_token("root", SECRET)
    topic = "persistent://public/default/txn-auth"
    with ClusterProcess(
        tmp_path, zookeeper, brokers=2, transaction_coordinators=1, settings=settings
    ) as cluster:
        place_as(cluster.brokers[0], f"{ASSIGN}-partition-0", root)
        place_as(cluster.brokers[1], topic, root)
        client = quasar.client.Client(
            cluster.service_url, enable_transaction=True, operation_timeout_seconds=30,
            authentication=quasar.client.AuthenticationToken(root),
        )
        try:
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic)
            txn = client.new_transaction()
            producer.send(b"in-txn", txn=txn)
            txn.commit()  # coordinator on member 0, the partition on member 1
            assert consumer.receive(15_000).data() == b"in-txn"
        finally:
            client.close()


def request_as(
    broker: BrokerProcess, method: str, path: str, token: str | None
) -> tuple[int, Any]:
    """One admin request as ``token``'s role, redirects not followed."""
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=30)
    try:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        conn.request(method, path, headers=headers)
        answer = conn.getresponse()
        raw = answer.read()
        is_json = answer.getheader("Content-Type", "").startswith("application/json")
        return answer.status, json.loads(raw) if is_json else raw
    finally:
        conn.close()


def test_transaction_admin_routes_check_the_caller_on_every_member(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    settings = member_settings()
    root, app = create_token("root", SECRET), create_token("app", SECRET)
    txn = "/admin/v3/transactions"
    with ClusterProcess(
        tmp_path, zookeeper, brokers=2, transaction_coordinators=2, settings=settings
    ) as cluster:
        m0, m1 = cluster.brokers
        place_as(m0, f"{ASSIGN}-partition-0", root)
        place_as(m1, f"{ASSIGN}-partition-1", root)
        raw = Raw(m1.port)
        try:
            raw.connect("token", root.encode())
            tc = RawCoordinator(raw)
            assert not tc.connect(1).HasField("error")
            opened = tc.new_txn(1, ttl_ms=600_000, client_name="etl")
            assert not opened.HasField("error"), opened
        finally:
            raw.close()
        least = opened.txnid_least_bits
        one = f"{txn}/transactionMetadata/1/{least}"
        # Refused by whichever member is asked, before any redirect or gathering.
        for broker in (m0, m1):
            for method, path in (
                ("GET", f"{txn}/coordinatorStats?coordinatorId=1"),
                ("GET", f"{txn}/coordinatorStats"),
                ("GET", f"{txn}/slowTransactions/0"),
                ("GET", one),
                ("POST", f"{txn}/abortTransaction/1/{least}"),
            ):
                for token in (app, None):
                    status, body = request_as(broker, method, path, token)
                    assert status == 401, (broker.http_port, method, path, status, body)
        # A super-user through the member that does not own coordinator 1: 307 to
        # the owner, which checks the caller again; the gathered answers reach
        # coordinator 1 with the member's own (super-user) role.
        status, _ = request_as(m0, "GET", one, root)
        assert status == 307
        auth = quasar.client.AuthenticationToken(root)
        meta = call_admin(m0.admin_url, lambda a: a.request("GET", one), authentication=auth)
        assert meta["status"] == "OPEN" and meta["owner"] == "root", meta
        stats = call_admin(
            m0.admin_url, lambda a: a.request("GET", f"{txn}/coordinatorStats"),
            authentication=auth,
        )
        assert {k: v["state"] for k, v in stats.items()} == {"0": "Ready", "1": "Ready"}
        # Any role may ask for a client's transactions, and sees only its own: the
        # member gathers every role's and narrows them to the caller.
        path = f"{txn}/clientTransactions/etl"
        status, as_app = request_as(m0, "GET", path, app)
        assert status == 200 and as_app["open"] == [], as_app
        status, as_root = request_as(m0, "GET", path, root)
        assert status == 200, as_root
        assert [t["txnId"] for t in as_root["open"]] == [f"(1,{least})"], as_root
