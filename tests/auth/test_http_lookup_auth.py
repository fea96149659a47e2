"""HTTP lookup on a secured broker (token and basic authentication, authorization on):
a client given an ``http://`` service URL (the official one and quasar's) sends its
credentials to the lookup routes as to the admin API, and the routes check who is
asking."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

import quasar.client
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import TOKEN_PROVIDER, token_settings

SECRET = create_secret_key()
BASIC_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
# `openssl passwd -apr1 -salt r31..... secret`, for the role "bob".
HTPASSWD = "bob:$apr1$r31.....$G/cElGhD0cboYkZN5h5Ne/\n"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("http-lookup-auth")
    htpasswd = tmp / "htpasswd"
    htpasswd.write_text(HTPASSWD)
    settings = token_settings(
        SECRET, super_users="admin,bob", providers=f"{TOKEN_PROVIDER},{BASIC_PROVIDER}"
    ) | {"basicAuthConf": str(htpasswd)}
    proc = BrokerProcess(tmp / "data", settings=settings).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def _lookup_status(broker: BrokerProcess, headers: dict[str, str]) -> int:
    url = f"{broker.admin_url}/lookup/v2/topic/persistent/public/default/x"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10):
            return 200
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(params=["pulsar", "quasar.client"])
def mod(request: pytest.FixtureRequest) -> Any:
    return pulsar if request.param == "pulsar" else quasar.client


def _client(mod: Any, broker: BrokerProcess, **options: Any) -> Any:
    if mod is pulsar:
        options["logger"] = logging.getLogger("pulsar-client")
    return mod.Client(broker.admin_url, **options)


def _round_trip(mod: Any, broker: BrokerProcess, auth: Any) -> None:
    topic = f"persistent://public/default/http-{uuid.uuid4().hex[:12]}"
    client = _client(mod, broker, authentication=auth)
    try:
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"over-http-lookup")
        assert consumer.receive(10_000).data() == b"over-http-lookup"
    finally:
        client.close()


def test_token_over_http_lookup(mod: Any, broker: BrokerProcess) -> None:
    _round_trip(mod, broker, mod.AuthenticationToken(create_token("admin", SECRET)))


def test_basic_over_http_lookup(mod: Any, broker: BrokerProcess) -> None:
    _round_trip(mod, broker, mod.AuthenticationBasic("bob", "secret"))


def test_lookup_checks_who_is_asking(broker: BrokerProcess) -> None:
    assert _lookup_status(broker, {}) == 401  # no credentials
    nobody = create_token("nobody", SECRET)  # authenticated, but granted nothing
    assert _lookup_status(broker, {"Authorization": f"Bearer {nobody}"}) == 401
    admin = create_token("admin", SECRET)
    assert _lookup_status(broker, {"Authorization": f"Bearer {admin}"}) == 200


def test_official_client_without_credentials_is_refused(broker: BrokerProcess) -> None:
    client = pulsar.Client(broker.admin_url, operation_timeout_seconds=2,
                           logger=logging.getLogger("pulsar-client"))
    try:
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout, pulsar.AuthenticationError)):
            client.create_producer("persistent://public/default/refused")
    finally:
        client.close()


def test_quasar_client_without_credentials_is_refused(broker: BrokerProcess) -> None:
    client = quasar.client.Client(broker.admin_url, operation_timeout_seconds=5)
    try:
        with pytest.raises(quasar.client.AuthenticationError):
            client.create_producer("persistent://public/default/refused")
    finally:
        client.close()


def test_quasar_client_with_an_ungranted_role_is_refused_at_once(
    broker: BrokerProcess,
) -> None:
    # The broker answers an authenticated role without the lookup grant with 401, as
    # Pulsar's REST lookup does: quasar's client raises AuthenticationError carrying
    # the server's reason. It is not retried: a retried refusal would end as Timeout.
    nobody = quasar.client.AuthenticationToken(create_token("nobody", SECRET))
    client = quasar.client.Client(
        broker.admin_url, authentication=nobody, operation_timeout_seconds=5
    )
    try:
        with pytest.raises(quasar.client.AuthenticationError, match="not authorized"):
            client.subscribe("persistent://public/default/refused", "s")
    finally:
        client.close()
