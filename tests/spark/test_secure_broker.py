"""The connector against a broker that speaks only TLS and authenticates with tokens:
a batch read and an exactly-once batch write through ``pulsar+ssl://`` and an
``https://`` admin API, credentials given as the pulsar-spark connector's
``pulsar.client.*`` options."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.client.admin import call_admin
from quasar.client.tls import ClientTlsOptions
from quasar.testing.certs import TestCerts, make_test_certs
from quasar.testing.process import BrokerProcess, free_port
from quasar.testing.secured import token_settings

from .conftest import unique_topic

pytestmark = pytest.mark.spark

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
SECRET = create_secret_key()
TOKEN = create_token("spark-job", SECRET)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("spark-certs"))


@pytest.fixture(scope="module")
def secure_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: TestCerts
) -> Iterator[BrokerProcess]:
    """TLS-only (no plaintext port) with token authentication."""
    settings = {
        "tlsCertificateFilePath": str(certs.broker_cert),
        "tlsKeyFilePath": str(certs.broker_key),
        **token_settings(SECRET),
    }
    proc = BrokerProcess(
        tmp_path_factory.mktemp("spark-secure") / "data",
        settings=settings,
        tls_port=free_port(),
        https_port=free_port(),
        plaintext=False,
    ).start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("token") / "spark-job.jwt"
    path.write_text(TOKEN + "\n")
    return path


def connector_options(
    broker: BrokerProcess, certs: TestCerts, auth_params: str
) -> dict[str, str]:
    return {
        "service.url": broker.tls_url,
        "admin.url": broker.https_url,
        "pulsar.client.authPluginClassName": TOKEN_PLUGIN,
        "pulsar.client.authParams": auth_params,
        "pulsar.client.tlsTrustCertsFilePath": str(certs.ca_cert),
        "pulsar.client.tlsHostnameVerificationEnable": "true",
        "client.operationTimeoutSeconds": "10",
    }


def secure_client(broker: BrokerProcess, certs: TestCerts, **kwargs: Any) -> qc.Client:
    return qc.Client(
        broker.tls_url,
        authentication=qc.AuthenticationToken(TOKEN),
        tls_trust_certs_file_path=str(certs.ca_cert),
        admin_url=broker.https_url,
        **kwargs,
    )


def create_partitioned(broker: BrokerProcess, certs: TestCerts, topic: str, n: int) -> None:
    call_admin(
        broker.https_url,
        lambda admin: admin.create_partitioned_topic(topic, n),
        ssl_context=ClientTlsOptions(trust_certs_file_path=str(certs.ca_cert)).context(),
        authentication=qc.AuthenticationToken(TOKEN),
    )


def test_batch_read_and_exactly_once_write_over_tls_with_a_token(
    spark: Any, secure_broker: BrokerProcess, certs: TestCerts, token_file: Path
) -> None:
    src, dst = unique_topic("sec-in"), unique_topic("sec-out")
    create_partitioned(secure_broker, certs, src, 2)
    create_partitioned(secure_broker, certs, dst, 2)
    values = [f"s{i:04d}".encode() for i in range(200)]
    client = secure_client(secure_broker, certs)
    try:
        producer = client.create_producer(src, batching_enabled=False)
        for i, v in enumerate(values):
            producer.send(v, partition_key=f"k{i}")
        producer.close()
    finally:
        client.close()

    # Executors read the token from the file where they connect.
    options = connector_options(secure_broker, certs, token_file.as_uri())
    df = spark.read.format("quasar").options(**options).option("topic", src).load()
    rows = df.select("value", "key").collect()
    assert sorted(r.value for r in rows) == values

    sink_id = f"sec-{uuid.uuid4().hex[:8]}"
    (
        df.select("value", "key").repartition(2)
        .write.format("quasar").options(**options)
        .option("topic", dst).option("sinkId", sink_id).mode("append").save()
    )

    client = secure_client(secure_broker, certs, enable_transaction=True)
    try:
        got: list[bytes] = []
        for part in client.get_topic_partitions(dst):
            reader = client.create_reader(part, qc.MessageId.earliest)
            while reader.has_message_available():
                got.append(reader.read_next(30_000).data())
            reader.close()
        assert sorted(got) == values
        for p in range(2):
            assert client.get_client_transactions(f"{sink_id}-p{p}").open == []
    finally:
        client.close()


def test_a_token_the_broker_does_not_accept_fails_the_query(
    spark: Any, secure_broker: BrokerProcess, certs: TestCerts
) -> None:
    bad = create_token("spark-job", create_secret_key())
    options = connector_options(secure_broker, certs, f"token:{bad}")
    df = spark.read.format("quasar").options(**options).option("topic", unique_topic()).load()
    with pytest.raises(Exception, match="AuthenticationError") as info:
        df.collect()
    assert bad not in str(info.value)
