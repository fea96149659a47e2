"""Topic lookup through advertised listeners, and over HTTP, against a real broker.

The broker advertises three listeners: ``internal`` (its real address, the one a
lookup naming no listener answers with), ``external`` (the same port under another
host name) and ``elsewhere`` (a port nobody listens on), so a client that follows
a listener's URL succeeds or fails by where that URL points.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from quasar.testing.process import BrokerProcess, free_port

from .conftest import Admin, make_client

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def listener_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("listeners")
    proc = BrokerProcess(tmp / "data")
    proc.settings["advertisedListeners"] = ",".join([
        f"internal:pulsar://127.0.0.1:{proc.port}",
        f"external:pulsar://localhost:{proc.port}",
        f"elsewhere:pulsar://127.0.0.1:{free_port()}",
    ])
    proc.settings["internalListenerName"] = "internal"
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def _topic() -> str:
    return f"persistent://public/default/lk-{uuid.uuid4().hex[:12]}"


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _client(mod: Any, url: str, **options: Any) -> Any:
    if mod.__name__ == "pulsar":
        options["logger"] = logging.getLogger("pulsar-client")
    return mod.Client(url, **options)


def _round_trip(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "s")
    client.create_producer(topic).send(b"through-the-listener")
    assert consumer.receive(10_000).data() == b"through-the-listener"


# -- binary LOOKUP ---------------------------------------------------------------------
def test_a_named_listener_is_followed(pulsar_mod: Any, listener_broker: BrokerProcess) -> None:
    client = _client(pulsar_mod, listener_broker.url, listener_name="external")
    try:
        _round_trip(client, _topic())
    finally:
        client.close()


def test_a_listener_pointing_elsewhere_is_followed_too(
    pulsar_mod: Any, listener_broker: BrokerProcess
) -> None:
    client = _client(pulsar_mod, listener_broker.url, listener_name="elsewhere",
                     operation_timeout_seconds=2)
    try:
        # Its URL has no broker behind it: the client cannot reach the topic.
        with pytest.raises((pulsar_mod.Timeout, pulsar_mod.ConnectError)):
            client.create_producer(_topic())
    finally:
        client.close()


def test_an_unknown_listener_fails_the_lookup(
    pulsar_mod: Any, listener_broker: BrokerProcess
) -> None:
    # ServiceNotReady "the broker do not have test listener": the pulsar client
    # reports a listener named "test" as a connection error at once; quasar's client
    # retries ServiceNotReady until its operation timeout and names the cause.
    client = _client(pulsar_mod, listener_broker.url, listener_name="test",
                     operation_timeout_seconds=2)
    try:
        if pulsar_mod.__name__ == "pulsar":
            with pytest.raises(pulsar.ConnectError):
                client.create_producer(_topic())
        else:
            with pytest.raises(pulsar_mod.Timeout, match="do not have test listener"):
                client.create_producer(_topic())
    finally:
        client.close()


# -- HTTP lookup -----------------------------------------------------------------------
def test_http_lookup_answers_by_listener(listener_broker: BrokerProcess) -> None:
    base = f"{listener_broker.admin_url}/lookup/v2/topic/persistent/public/default/x"
    status, body = _get(base)
    assert status == 200, body
    internal = f"pulsar://127.0.0.1:{listener_broker.port}"
    assert body == {
        "brokerUrl": internal,
        "brokerUrlTls": None,
        "httpUrl": listener_broker.admin_url,
        "httpUrlTls": None,
        "nativeUrl": internal,
    }
    external = f"pulsar://localhost:{listener_broker.port}"
    assert _get(base + "?listenerName=external")[1]["brokerUrl"] == external
    # Pulsar's header, read when the query parameter is absent.
    by_header = _get(base, {"X-Pulsar-ListenerName": "external"})[1]
    assert by_header["brokerUrl"] == external
    status, body = _get(base + "?listenerName=nope")
    assert (status, body) == (404, {"reason": "the broker do not have nope listener"})
    status, body = _get(
        f"{listener_broker.admin_url}/lookup/v2/topic/persistent/public/no-such-ns/x"
    )
    assert status == 404, body


def test_client_over_http(pulsar_mod: Any, listener_broker: BrokerProcess) -> None:
    admin = Admin(listener_broker.admin_url)
    partitioned = _topic()
    admin.ok("PUT", "/admin/v2/persistent/" + partitioned.split("://")[1] + "/partitions", 2)
    client = make_client(pulsar_mod, listener_broker.admin_url)
    try:
        _round_trip(client, _topic())
        # Partitioned metadata comes over HTTP too: a message per partition.
        consumer = client.subscribe(partitioned, "s")
        producer = client.create_producer(
            partitioned,
            message_routing_mode=pulsar_mod.PartitionsRoutingMode.RoundRobinDistribution,
            batching_enabled=False,
        )
        for i in range(2):
            producer.send(f"m{i}".encode())
        got = [consumer.receive(10_000) for _ in range(2)]
        assert sorted(m.data() for m in got) == [b"m0", b"m1"]
        assert {m.topic_name() for m in got} == {f"{partitioned}-partition-{i}" for i in (0, 1)}
        # A pattern subscription lists the namespace's topics over HTTP
        # (GET .../namespaces/public/default/topics?mode=PERSISTENT).
        prefix = partitioned.rsplit("/", 1)[0] + f"/pat-{uuid.uuid4().hex[:8]}"
        client.create_producer(prefix + "-a").close()  # exists before the listing
        pattern = client.subscribe(re.compile(re.escape(prefix) + "-.*"), "p")
        client.create_producer(prefix + "-a").send(b"matched")
        assert pattern.receive(10_000).data() == b"matched"
    finally:
        client.close()


def test_quasar_client_follows_the_listener_over_http(listener_broker: BrokerProcess) -> None:
    import quasar.client

    # ?listenerName=external answers pulsar://localhost:<port>, a name only that
    # listener uses: the round trip succeeds only through it.
    client = quasar.client.Client(listener_broker.admin_url, listener_name="external",
                                  operation_timeout_seconds=10)
    try:
        _round_trip(client, _topic())
    finally:
        client.close()
    # "elsewhere" points at a port nobody listens on; "nope" is no listener (404).
    for listener, error in (("elsewhere", quasar.client.Timeout),
                            ("nope", quasar.client.TopicNotFound)):
        client = quasar.client.Client(listener_broker.admin_url, listener_name=listener,
                                      operation_timeout_seconds=2)
        try:
            with pytest.raises(error):
                client.create_producer(_topic())
        finally:
            client.close()


def test_quasar_client_transactions_over_http(listener_broker: BrokerProcess) -> None:
    import quasar.client

    # The coordinators are found from the partitioned metadata of
    # pulsar/system/transaction_coordinator_assign and a lookup of each partition,
    # both over HTTP. (The official client's Python API has no transactions.)
    client = quasar.client.Client(listener_broker.admin_url, enable_transaction=True,
                                  operation_timeout_seconds=10)
    try:
        topic = _topic()
        consumer = client.subscribe(topic, "s")
        producer = client.create_producer(topic)
        aborted = client.new_transaction()
        producer.send(b"aborted", txn=aborted)
        aborted.abort()
        committed = client.new_transaction()
        producer.send(b"committed", txn=committed)
        committed.commit()
        assert consumer.receive(10_000).data() == b"committed"
    finally:
        client.close()


def test_an_unreachable_http_url_fails_within_the_operation_timeout(pulsar_mod: Any) -> None:
    client = _client(pulsar_mod, f"http://127.0.0.1:{free_port()}",
                     operation_timeout_seconds=2)
    try:
        with pytest.raises((pulsar_mod.Timeout, pulsar_mod.ConnectError)):
            client.create_producer(_topic())
    finally:
        client.close()


def test_a_malformed_http_url_is_refused(listener_broker: BrokerProcess) -> None:
    import quasar.client

    with pytest.raises(quasar.client.InvalidUrl, match="path"):
        quasar.client.Client(listener_broker.admin_url + "/admin")


def test_namespace_topics_by_mode(listener_broker: BrokerProcess) -> None:
    topic = _topic()
    admin = Admin(listener_broker.admin_url)
    admin.ok("PUT", "/admin/v2/persistent/" + topic.split("://")[1])
    path = "/admin/v2/namespaces/public/default/topics?mode="
    assert topic in admin.ok("GET", path + "PERSISTENT")
    assert topic in admin.ok("GET", path + "ALL")
    assert admin.ok("GET", path + "NON_PERSISTENT") == []
    assert admin.request("GET", path + "SOME")[0] == 400
