"""TLS as Pulsar users configure it, against real broker processes.

Server-only TLS (with the plaintext ports still on), mutual TLS
(``tlsRequireTrustedClientCertOnConnect``), hostname validation, a plaintext client on
the TLS port, the admin API over HTTPS and certificate reload on a TLS-only broker;
each with the official ``pulsar-client`` and with quasar's client where both apply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

import quasar.client
from quasar.client.admin import AdminClient
from quasar.client.tls import ClientTlsOptions
from quasar.errors import ConnectError
from quasar.testing.certs import TestCerts, make_ca, make_test_certs, write_signed_cert
from quasar.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.interop

ROLE = "alice"


def tls_settings(certs: TestCerts, **extra: str) -> dict[str, str]:
    return {
        "tlsCertificateFilePath": str(certs.broker_cert),
        "tlsKeyFilePath": str(certs.broker_key),
        "tlsTrustCertsFilePath": str(certs.ca_cert),
        **extra,
    }


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("certs"), client_role=ROLE)


def _run_broker(proc: BrokerProcess) -> Iterator[BrokerProcess]:
    proc.start()
    yield proc
    code = proc.stop()
    log = proc.read_log()
    assert code == 0, f"broker exited with {code}:\n{log}"
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def tls_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: TestCerts
) -> Iterator[BrokerProcess]:
    """Server-only TLS beside the plaintext ports. It listens on every interface so
    that 127.0.0.2, a loopback address its certificate does not name, reaches it too
    (the hostname-validation test); all traffic stays on loopback."""
    data = tmp_path_factory.mktemp("tls") / "data"
    proc = BrokerProcess(
        data,
        tls_port=free_port(),
        https_port=free_port(),
        settings=tls_settings(certs, bindAddress="0.0.0.0"),
    )
    yield from _run_broker(proc)


@pytest.fixture(scope="module")
def mtls_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: TestCerts
) -> Iterator[BrokerProcess]:
    """Mutual TLS only: a trusted client certificate is required, no plaintext port."""
    data = tmp_path_factory.mktemp("mtls") / "data"
    proc = BrokerProcess(
        data,
        tls_port=free_port(),
        plaintext=False,
        settings=tls_settings(certs, tlsRequireTrustedClientCertOnConnect="true"),
    )
    yield from _run_broker(proc)


def make_client(mod: Any, url: str, timeout_s: int = 10, **tls: Any) -> Any:
    """A client of ``mod`` (``pulsar`` or ``quasar.client``); a failing connection
    is given up after ``timeout_s``."""
    if mod.__name__ == "pulsar":
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.CRITICAL)
        tls["logger"] = logger
    return mod.Client(url, operation_timeout_seconds=timeout_s, **tls)


def new_topic() -> str:
    return f"persistent://public/default/tls-{uuid.uuid4().hex[:12]}"


def round_trip(client: Any, n: int = 5) -> None:
    topic = new_topic()
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    sent = [f"m-{i}".encode() for i in range(n)]
    for body in sent:
        producer.send(body)
    got = []
    for _ in sent:
        msg = consumer.receive(10_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == sent


def fails_to_connect(mod: Any, client: Any) -> None:
    with pytest.raises((mod.ConnectError, mod.Timeout)):
        client.create_producer(new_topic())


# ------------------------------------------------------------------ server-only TLS


def test_produce_and_consume_over_tls(
    pulsar_mod: Any, tls_broker: BrokerProcess, certs: TestCerts
) -> None:
    client = make_client(
        pulsar_mod, tls_broker.tls_url, tls_trust_certs_file_path=str(certs.ca_cert)
    )
    try:
        round_trip(client)
    finally:
        client.close()


def test_produce_and_consume_over_an_https_service_url(
    pulsar_mod: Any, tls_broker: BrokerProcess, certs: TestCerts
) -> None:
    # Lookups go to the HTTPS web service; the binary connections to the
    # brokerUrlTls it answers.
    client = make_client(
        pulsar_mod, tls_broker.https_url, tls_trust_certs_file_path=str(certs.ca_cert)
    )
    try:
        round_trip(client)
    finally:
        client.close()


def test_the_plaintext_port_still_serves_beside_tls(
    pulsar_mod: Any, tls_broker: BrokerProcess
) -> None:
    client = make_client(pulsar_mod, tls_broker.url)
    try:
        round_trip(client, 2)
    finally:
        client.close()


def test_a_broker_certificate_from_an_unknown_ca_is_refused(
    pulsar_mod: Any, tls_broker: BrokerProcess, tmp_path: Path
) -> None:
    make_ca(tmp_path, "other")
    client = make_client(
        pulsar_mod,
        tls_broker.tls_url,
        timeout_s=3,
        tls_trust_certs_file_path=str(tmp_path / "other.cert.pem"),
    )
    try:
        fails_to_connect(pulsar_mod, client)
    finally:
        client.close()


def test_hostname_validation(
    pulsar_mod: Any, tls_broker: BrokerProcess, certs: TestCerts
) -> None:
    """The certificate names localhost and 127.0.0.1; 127.0.0.2 reaches the same
    broker (loopback) under a name it does not carry."""
    assert tls_broker.tls_port is not None
    trust = {"tls_trust_certs_file_path": str(certs.ca_cert)}
    ok = make_client(
        pulsar_mod, tls_broker.tls_url, tls_validate_hostname=True, **trust
    )
    try:
        round_trip(ok, 2)
    finally:
        ok.close()
    other_name = f"pulsar+ssl://127.0.0.2:{tls_broker.tls_port}"
    unchecked = make_client(pulsar_mod, other_name, tls_validate_hostname=False, **trust)
    try:
        round_trip(unchecked, 2)
    finally:
        unchecked.close()
    checked = make_client(
        pulsar_mod, other_name, timeout_s=3, tls_validate_hostname=True, **trust
    )
    try:
        fails_to_connect(pulsar_mod, checked)
    finally:
        checked.close()


def _connect_frame() -> bytes:
    # BaseCommand{type=CONNECT(2), connect{client_version="plain", protocol_version=20}}
    connect = b"\x0a\x05plain" + b"\x20\x14"
    base = b"\x08\x02" + b"\x12" + bytes([len(connect)]) + connect
    return struct.pack(">II", 4 + len(base), len(base)) + base


def test_a_plaintext_client_on_the_tls_port_is_refused(
    tls_broker: BrokerProcess, certs: TestCerts
) -> None:
    assert tls_broker.tls_port is not None
    with socket.create_connection(("127.0.0.1", tls_broker.tls_port), timeout=10) as s:
        host, port = s.getsockname()
        local = f"{host}:{port}"
        s.sendall(_connect_frame())
        # The broker closes the connection; whatever it sends first is a TLS alert,
        # never a CONNECTED frame.
        answer = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        else:
            pytest.fail("the broker did not close the plaintext connection")
    assert answer[8:10] != b"\x08\x03"  # not CONNECTED
    # Logged once, with the client's address; the broker keeps serving TLS clients.
    deadline = time.monotonic() + 10
    while f"TLS handshake with {local} on the pulsar+ssl port failed" not in (
        tls_broker.read_log()
    ):
        assert time.monotonic() < deadline, tls_broker.read_log()
        time.sleep(0.05)  # polling the log file of the other process, bounded
    client = make_client(
        pulsar, tls_broker.tls_url, tls_trust_certs_file_path=str(certs.ca_cert)
    )
    try:
        round_trip(client, 1)
    finally:
        client.close()


def test_admin_api_over_https(tls_broker: BrokerProcess, certs: TestCerts) -> None:
    trusted = ClientTlsOptions(trust_certs_file_path=str(certs.ca_cert)).context()

    async def run() -> None:
        async with AdminClient(tls_broker.https_url, ssl_context=trusted) as admin:
            assert "public" in await admin.request("GET", "/admin/v2/tenants")
        # The system's CAs do not know the test CA.
        async with AdminClient(tls_broker.https_url, timeout_s=10) as admin:
            with pytest.raises(ConnectError):
                await admin.request("GET", "/admin/v2/tenants")

    asyncio.run(run())


def test_a_plain_http_request_on_the_https_port_is_refused_logged_and_counted(
    tls_broker: BrokerProcess,
) -> None:
    assert tls_broker.https_port is not None
    with socket.create_connection(("127.0.0.1", tls_broker.https_port), timeout=10) as s:
        local = "{}:{}".format(*s.getsockname()[:2])
        s.sendall(b"GET /admin/v2/tenants HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        else:
            pytest.fail("the broker did not close the plain HTTP connection")
    assert b"HTTP/1.1 200" not in answer
    deadline = time.monotonic() + 10
    while f"TLS handshake with {local} on the https port failed" not in (
        tls_broker.read_log()
    ):
        assert time.monotonic() < deadline, tls_broker.read_log()
        time.sleep(0.05)  # polling the log file of the other process, bounded
    metrics = urllib.request.urlopen(f"{tls_broker.admin_url}/metrics", timeout=10)
    counted = [
        line for line in metrics.read().decode().splitlines()
        if line.startswith("quasar_tls_handshake_failures_total{")
        and 'listener="https"' in line
    ]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 1


def test_the_quasar_client_reaches_the_https_admin_api(
    tls_broker: BrokerProcess, certs: TestCerts
) -> None:
    client = quasar.client.Client(
        tls_broker.tls_url,
        tls_trust_certs_file_path=str(certs.ca_cert),
        admin_url=tls_broker.https_url,
        enable_transaction=True,
    )
    try:
        txn = client.new_transaction()
        txn.commit()
        client.get_client_transactions()
    finally:
        client.close()


# ------------------------------------------------------------------ mutual TLS


def test_mutual_tls_with_a_client_certificate(
    pulsar_mod: Any, mtls_broker: BrokerProcess, certs: TestCerts
) -> None:
    client = make_client(
        pulsar_mod,
        mtls_broker.tls_url,
        tls_trust_certs_file_path=str(certs.ca_cert),
        tls_certificate_file_path=str(certs.client_cert),
        tls_private_key_file_path=str(certs.client_key),
    )
    try:
        round_trip(client)
    finally:
        client.close()


def test_mutual_tls_without_a_client_certificate_is_refused(
    pulsar_mod: Any, mtls_broker: BrokerProcess, certs: TestCerts
) -> None:
    client = make_client(
        pulsar_mod,
        mtls_broker.tls_url,
        timeout_s=3,
        tls_trust_certs_file_path=str(certs.ca_cert),
    )
    try:
        fails_to_connect(pulsar_mod, client)
    finally:
        client.close()
    assert "TLS handshake with 127.0.0.1:" in mtls_broker.read_log()


# ------------------------------------------------------------------ reload, start-up


def _served_serial(port: int, ca: Path) -> int:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_replaced_certificate_is_served_to_new_connections(
    tmp_path: Path, certs: TestCerts
) -> None:
    # The broker's own copies of the files, replaced below as an operator would.
    served = tmp_path / "served"
    served.mkdir()
    cert, key = served / "broker.cert.pem", served / "broker.key.pem"
    cert.write_bytes(certs.broker_cert.read_bytes())
    key.write_bytes(certs.broker_key.read_bytes())
    settings = tls_settings(certs, tlsCertRefreshCheckDurationSec="1")
    settings.update(tlsCertificateFilePath=str(cert), tlsKeyFilePath=str(key))
    proc = BrokerProcess(
        tmp_path / "data", tls_port=free_port(), plaintext=False, settings=settings
    )
    with proc:
        assert proc.tls_port is not None
        first = _served_serial(proc.tls_port, certs.ca_cert)
        ca_cert = x509.load_pem_x509_certificate(certs.ca_cert.read_bytes())
        ca_key: Any = load_pem_private_key(certs.ca_key.read_bytes(), password=None)
        new_dir = tmp_path / "new"
        new_dir.mkdir()
        new_cert, new_key = write_signed_cert(
            new_dir, "broker", "localhost", (ca_cert, ca_key), server=True
        )
        expected = x509.load_pem_x509_certificate(new_cert.read_bytes()).serial_number
        assert expected != first
        # Key first, then certificate, each replaced atomically.
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        deadline = time.monotonic() + 20
        while (now := _served_serial(proc.tls_port, certs.ca_cert)) != expected:
            assert now == first
            assert time.monotonic() < deadline, proc.read_log()
            time.sleep(0.1)  # the broker checks every second; bounded poll
        client = quasar.client.Client(
            proc.tls_url, tls_trust_certs_file_path=str(certs.ca_cert)
        )
        try:
            round_trip(client, 2)
        finally:
            client.close()
    assert "reloaded the TLS certificate" in proc.read_log()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "tlsCertificateFilePath and tlsKeyFilePath must name"),
        (
            {"tlsCertificateFilePath": "/nonexistent/cert.pem", "tlsKeyFilePath": "/x"},
            "tlsCertificateFilePath=/nonexistent/cert.pem: the file cannot be read",
        ),
        ({"tlsProtocols": "TLSv1.2,SSLv3"}, "invalid value for tlsProtocols"),
    ],
)
def test_tls_misconfiguration_stops_the_broker_at_start_up(
    tmp_path: Path, certs: TestCerts, settings: dict[str, str], message: str
) -> None:
    if "tlsProtocols" in settings:
        settings = {**tls_settings(certs), **settings}
    proc = BrokerProcess(tmp_path / "data", tls_port=free_port(), settings=settings)
    with pytest.raises(RuntimeError, match="broker exited with 2") as info:
        proc.start(ready_timeout_s=60)
    assert message in str(info.value)
    assert "Traceback" not in str(info.value)
