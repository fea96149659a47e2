"""Cluster members that listen on TLS ports only (``brokerServicePortTls``,
``webServicePortTls``, mutual TLS required) reach each other over TLS with Pulsar's
``brokerClientTlsEnabled``: with TLS authentication and authorization on, a
transaction whose coordinator is on one member and whose partition is on the other
commits and aborts (END_TXN_ON_* over ``pulsar+ssl://`` as the member's certificate
role, a super-user: no member has a plaintext port), and the gathered admin
``coordinatorStats`` asks the other member over ``https://``. A member whose
``brokerClientTrustCertsFilePath`` names a CA that did not sign the others'
certificates cannot end its transactions there: the transaction stays COMMITTING and
the end is retried, each failure logged with the certificate error."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.client.admin import call_admin
from quasar.protocol import pb
from quasar.testing.certs import TestCerts, make_ca, make_test_certs
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import ASSIGN, place, wait_for

pytestmark = pytest.mark.usefixtures("close_raw")

TXN = "/admin/v3/transactions"
MEMBER_ROLE = "member"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    # The client certificate is the members' own (brokerClientCertificateFilePath);
    # the tests' clients present it too.
    return make_test_certs(tmp_path_factory.mktemp("certs"), client_role=MEMBER_ROLE)


def member_settings(certs: TestCerts, trust: Path | None = None) -> dict[str, str]:
    return {
        "tlsCertificateFilePath": str(certs.broker_cert),
        "tlsKeyFilePath": str(certs.broker_key),
        "tlsTrustCertsFilePath": str(certs.ca_cert),
        "tlsRequireTrustedClientCertOnConnect": "true",
        "brokerClientTlsEnabled": "true",
        "brokerClientTrustCertsFilePath": str(trust or certs.ca_cert),
        "brokerClientCertificateFilePath": str(certs.client_cert),
        "brokerClientKeyFilePath": str(certs.client_key),
        "tlsHostnameVerificationEnabled": "true",
        "transactionEndRetryIntervalMs": "200",
    }


def authenticated_settings(certs: TestCerts) -> dict[str, str]:
    """TLS authentication and authorization on; the members' role is their
    certificate's CN, given by Pulsar's TLS plugin instead of the certificate keys."""
    settings = member_settings(certs)
    del settings["brokerClientCertificateFilePath"], settings["brokerClientKeyFilePath"]
    return settings | {
        "authenticationEnabled": "true",
        "authenticationProviders":
            "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
        "authorizationEnabled": "true",
        "superUserRoles": MEMBER_ROLE,
        "brokerClientAuthenticationPlugin":
            "org.apache.pulsar.client.impl.auth.AuthenticationTls",
        "brokerClientAuthenticationParameters":
            f"tlsCertFile:{certs.client_cert},tlsKeyFile:{certs.client_key}",
    }


def client_context(certs: TestCerts) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


def place_over_tls(broker: BrokerProcess, topic: str, certs: TestCerts) -> None:
    """``place`` over TLS, the client certificate's role authenticated by TLS."""
    place(broker, topic, tls=client_context(certs), auth_method_name="tls")


def client_of(cluster: ClusterProcess, certs: TestCerts) -> Any:
    return quasar.client.Client(
        cluster.service_url,
        enable_transaction=True,
        operation_timeout_seconds=30,
        tls_trust_certs_file_path=str(certs.ca_cert),
        authentication=quasar.client.AuthenticationTLS(
            str(certs.client_cert), str(certs.client_key)
        ),
    )


def refused(port: int) -> bool:
    """Nothing listens on ``127.0.0.1:port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture(scope="module")
def tls_cluster(
    zookeeper: ZooKeeperProcess,
    tmp_path_factory: pytest.TempPathFactory,
    certs: TestCerts,
) -> Iterator[ClusterProcess]:
    with ClusterProcess(
        tmp_path_factory.mktemp("tls-cluster"), zookeeper, brokers=2,
        transaction_coordinators=2, settings=authenticated_settings(certs), tls_only=True,
    ) as cluster:
        m0, m1 = cluster.brokers
        place_over_tls(m0, f"{ASSIGN}-partition-0", certs)
        place_over_tls(m1, f"{ASSIGN}-partition-1", certs)
        yield cluster


def test_a_transaction_across_tls_only_members_commits_and_another_aborts(
    tls_cluster: ClusterProcess, certs: TestCerts
) -> None:
    m0, m1 = tls_cluster.brokers
    # No plaintext listener anywhere: whatever the members send each other is TLS.
    for broker in (m0, m1):
        assert refused(broker.port) and refused(broker.http_port)
    topic = "persistent://public/default/tls-txn"
    place_over_tls(m1, topic, certs)
    client = client_of(tls_cluster, certs)
    try:
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)
        committed = client.new_transaction()
        assert committed.id()[0] == 0  # coordinator 0, on m0; the partition is on m1
        producer.send(b"committed", txn=committed)
        committed.commit()
        assert consumer.receive(15_000).data() == b"committed"
        aborted = client.new_transaction()
        assert aborted.id()[0] == 1  # coordinator 1, on m1: the end is local there
        producer.send(b"aborted", txn=aborted)
        aborted.abort()
        # The next NEW_TXN goes to coordinator 0 again: an abort sent from m0 to m1.
        remote_abort = client.new_transaction()
        assert remote_abort.id()[0] == 0
        producer.send(b"aborted remotely", txn=remote_abort)
        remote_abort.abort()
        producer.send(b"after")
        assert consumer.receive(15_000).data() == b"after"
    finally:
        client.close()


def test_gathered_coordinator_stats_ask_the_other_member_over_https(
    tls_cluster: ClusterProcess, certs: TestCerts
) -> None:
    m0, m1 = tls_cluster.brokers
    for asked in (m0, m1):
        stats = call_admin(
            asked.https_url,
            lambda a: a.request("GET", f"{TXN}/coordinatorStats"),
            ssl_context=client_context(certs),
        )
        assert {k: v["state"] for k, v in stats.items()} == {"0": "Ready", "1": "Ready"}


def test_a_member_that_does_not_trust_the_others_retries_its_ends(
    zookeeper: ZooKeeperProcess, tmp_path: Path, certs: TestCerts
) -> None:
    other_ca = tmp_path / "other-ca"
    other_ca.mkdir()
    make_ca(other_ca)
    cluster = ClusterProcess(
        tmp_path / "cluster", zookeeper, brokers=2, transaction_coordinators=1,
        settings=member_settings(certs), tls_only=True,
    )
    m0, m1 = cluster.brokers
    m0.settings["brokerClientTrustCertsFilePath"] = str(other_ca / "ca.cert.pem")
    topic = "persistent://public/default/tls-untrusted"
    with cluster:
        place_over_tls(m0, f"{ASSIGN}-partition-0", certs)
        place_over_tls(m1, topic, certs)
        client = client_of(cluster, certs)
        assert m0.tls_port is not None
        raw = Raw(m0.tls_port, client_context(certs))
        try:
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic)
            txn = client.new_transaction()
            producer.send(b"never ended", txn=txn)
            most, least = txn.id()
            raw.connect("tls")  # the certificate is the role
            tc = RawCoordinator(raw)
            assert not tc.connect(0).HasField("error")
            tc.send_end(most, least, pb.TxnAction.COMMIT)  # not answered while it fails

            def retried() -> bool:
                log = m0.read_log()
                return log.count("CERTIFICATE_VERIFY_FAILED") >= 2

            wait_for("m0's ends to fail on m1's certificate, twice", retried)
            meta = call_admin(
                m0.https_url,
                lambda a: a.request("GET", f"{TXN}/transactionMetadata/{most}/{least}"),
                ssl_context=client_context(certs),
            )
            assert meta["status"] == "COMMITTING", meta
            with pytest.raises(quasar.client.Timeout):
                consumer.receive(500)
        finally:
            raw.close()
            client.close()
