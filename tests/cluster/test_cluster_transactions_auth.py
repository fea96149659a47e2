"""With authentication and authorization on, a cluster member ends a transaction on
another member's partition as its own role (``brokerClientAuthenticationPlugin``),
which the other member accepts because that role is a super-user."""

from __future__ import annotations

from pathlib import Path

import pytest

import quasar.client
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.protocol import pb
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw
from quasar.testing.secured import token_settings
from quasar.testing.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
SECRET = create_secret_key()
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


def place(broker: BrokerProcess, topic: str, token: str) -> None:
    """Make ``broker`` own ``topic``'s bundle: an authoritative LOOKUP as ``token``."""
    raw = Raw(broker.port)
    try:
        connect = T(type=T.CONNECT)
        connect.connect.client_version = "raw-test"
        connect.connect.protocol_version = 20
        connect.connect.auth_method_name = "token"
        connect.connect.auth_data = token.encode()
        raw.send(connect)
        raw.recv_type(T.CONNECTED)
        cmd = T(type=T.LOOKUP)
        cmd.lookupTopic.topic, cmd.lookupTopic.request_id = topic, 1
        cmd.lookupTopic.authoritative = True
        answer = raw.request(cmd, T.LOOKUP_RESPONSE).lookupTopicResponse
    finally:
        raw.close()
    assert answer.response == pb.CommandLookupTopicResponse.Connect, answer


def test_a_member_ends_a_transaction_on_another_as_its_own_super_user_role(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    settings = token_settings(SECRET, super_users="broker,root") | {
        "brokerClientAuthenticationPlugin":
            "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": "token:" + create_token("broker", SECRET),
    }
    root = create_token("root", SECRET)
    topic = "persistent://public/default/txn-auth"
    with ClusterProcess(
        tmp_path, zookeeper, brokers=2, transaction_coordinators=1, settings=settings
    ) as cluster:
        place(cluster.brokers[0], f"{ASSIGN}-partition-0", root)
        place(cluster.brokers[1], topic, root)
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
