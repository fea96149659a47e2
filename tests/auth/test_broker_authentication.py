"""Authentication against real broker processes, driven by the official
``pulsar-client`` and by quasar's client, on the binary protocol and the admin API."""

from __future__ import annotations

import asyncio
import base64
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import bcrypt
import pulsar
import pytest

from quasar.client import AuthenticationBasic, Client
from quasar.client.admin import AdminClient
from quasar.errors import AuthenticationError, ServerError
from quasar.protocol import FrameDecoder, encode_command, pb
from quasar.testing.process import BrokerProcess

T = pb.BaseCommand
BASIC = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
# `openssl passwd -apr1 -salt r31..... secret`
APR1_SECRET = "$apr1$r31.....$G/cElGhD0cboYkZN5h5Ne/"


def htpasswd(tmp: Path) -> Path:
    alice = bcrypt.hashpw(b"alice-pw", bcrypt.gensalt(rounds=4)).decode()
    path = tmp / "htpasswd"
    path.write_text(f"alice:$2y${alice[4:]}\nbob:{APR1_SECRET}\n")
    return path


def start(tmp: Path, **config: str) -> BrokerProcess:
    settings = {
        "authenticationEnabled": "true",
        "authenticationProviders": BASIC,
        "basicAuthConf": str(htpasswd(tmp)),
        **config,
    }
    return BrokerProcess(tmp / "data", settings=settings).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start(tmp_path_factory.mktemp("auth-broker"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def anonymous_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start(tmp_path_factory.mktemp("anon-broker"), anonymousUserRole="guest")
    yield proc
    proc.stop()


def topic() -> str:
    return f"persistent://public/default/auth-{uuid.uuid4().hex[:12]}"


def raw_connect(port: int, method: str | None, data: bytes | None) -> list[pb.BaseCommand]:
    """Send one CONNECT; the commands the broker answered before closing (or CONNECTED)."""
    cmd = T(type=T.CONNECT)
    cmd.connect.client_version = "raw"
    cmd.connect.protocol_version = 20
    if method is not None:
        cmd.connect.auth_method_name = method
    if data is not None:
        cmd.connect.auth_data = data
    decoder = FrameDecoder(1 << 20)
    answers: list[pb.BaseCommand] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(encode_command(cmd))
        while not answers or answers[-1].type != T.CONNECTED:
            chunk = s.recv(65536)
            if not chunk:
                break
            answers.extend(f.command for f in decoder.feed(chunk))
    return answers


def assert_refused(answers: list[pb.BaseCommand]) -> None:
    assert [a.type for a in answers] == [T.ERROR]
    assert answers[0].error.error == ServerError.AuthenticationError


# -- binary protocol ------------------------------------------------------------------
def test_official_client_with_right_credentials(broker: BrokerProcess) -> None:
    name = topic()
    client = pulsar.Client(broker.url, authentication=pulsar.AuthenticationBasic("alice", "alice-pw"))
    try:
        consumer = client.subscribe(name, "s")
        client.create_producer(name).send(b"hello")
        assert consumer.receive(10_000).data() == b"hello"
    finally:
        client.close()


def test_official_client_with_wrong_credentials_is_refused(broker: BrokerProcess) -> None:
    client = pulsar.Client(
        broker.url,
        authentication=pulsar.AuthenticationBasic("alice", "wrong"),
        operation_timeout_seconds=2,
    )
    try:
        # The C++ client keeps retrying a refused connection until its operation
        # timeout, so it reports either AuthenticationError or Timeout.
        with pytest.raises((pulsar.AuthenticationError, pulsar.Timeout)):
            client.create_producer(topic())
    finally:
        client.close()


def test_quasar_client_accepts_and_refuses(broker: BrokerProcess) -> None:
    name = topic()
    ok = Client(broker.url, authentication=AuthenticationBasic("bob", "secret"))
    try:
        ok.create_producer(name).send(b"x")
    finally:
        ok.close()
    for auth in (AuthenticationBasic("bob", "nope"), None):
        refused = Client(broker.url, authentication=auth, operation_timeout_seconds=5)
        try:
            with pytest.raises(AuthenticationError):
                refused.create_producer(name)
        finally:
            refused.close()


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("kerberos", b"ticket"),  # unknown method, no anonymous role
        (None, None),  # no credentials at all
        ("basic", b"alice:" + b"x" * 200_000),  # oversize
        ("basic", b"\xff\xfe\x00"),  # not UTF-8
        ("basic", b"no-colon"),
        ("basic", b""),
    ],
)
def test_bad_credentials_are_refused_without_harm(
    broker: BrokerProcess, method: str | None, data: bytes | None
) -> None:
    assert_refused(raw_connect(broker.port, method, data))
    # The broker goes on serving.
    assert raw_connect(broker.port, "basic", b"bob:secret")[-1].type == T.CONNECTED
    assert "Traceback" not in broker.read_log()


def test_anonymous_role(anonymous_broker: BrokerProcess) -> None:
    assert raw_connect(anonymous_broker.port, None, None)[-1].type == T.CONNECTED
    assert raw_connect(anonymous_broker.port, "kerberos", b"x")[-1].type == T.CONNECTED
    # A provider's refusal is final even with an anonymous role.
    assert_refused(raw_connect(anonymous_broker.port, "basic", b"bob:nope"))
    client = Client(anonymous_broker.url)
    try:
        client.create_producer(topic()).send(b"anonymous")
    finally:
        client.close()


def test_unknown_provider_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="unknown authentication provider"):
        start(tmp_path, authenticationProviders="com.example.NoSuchProvider")


# -- admin API ---------------------------------------------------------------------------
async def admin_get(url: str, headers: dict[str, str]) -> tuple[int, object]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers) as resp:
            body = await resp.json(content_type=None) if resp.content_type == "application/json" else await resp.text()
            return resp.status, body


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def failures(metrics_text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics_text.splitlines()
        if line.startswith("pulsar_authentication_failures_total{")
    )


def test_admin_api_needs_credentials_and_failures_are_counted(broker: BrokerProcess) -> None:
    tenants = broker.admin_url + "/admin/v2/tenants"
    metrics = broker.admin_url + "/metrics"

    async def run() -> None:
        status, text = await admin_get(metrics, {})  # open without credentials
        assert status == 200
        before = failures(str(text))
        for headers in ({}, basic("bob", "wrong"), {"Authorization": "Basic !!!"},
                        {"Authorization": "Bearer not-served"}):
            status, body = await admin_get(tenants, headers)
            assert status == 401, headers
            assert isinstance(body, dict) and body["reason"]
        status, body = await admin_get(tenants, basic("bob", "secret"))
        assert status == 200 and "public" in body  # type: ignore[operator]
        async with AdminClient(broker.admin_url, authentication=AuthenticationBasic("alice", "alice-pw")) as admin:
            assert "public" in await admin.request("GET", "/admin/v2/tenants")
        _, text = await admin_get(metrics, {})
        assert failures(str(text)) >= before + 4
        assert 'pulsar_authentication_success_total{auth_method="basic"' in str(text)

    asyncio.run(run())
    assert "authentication failed" in broker.read_log()


def test_admin_api_with_anonymous_role(anonymous_broker: BrokerProcess) -> None:
    status, body = asyncio.run(admin_get(anonymous_broker.admin_url + "/admin/v2/tenants", {}))
    assert status == 200 and "public" in body  # type: ignore[operator]
