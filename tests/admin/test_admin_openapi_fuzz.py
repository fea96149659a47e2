"""Fuzz the admin REST API of a real broker process from its OpenAPI document.

schemathesis generates requests for every operation of the document the broker
serves at ``/admin/v2/openapi.json`` (valid and invalid names, parameters and
bodies), sends them with a super-user token so every route is reachable (and, fewer,
with the token of a role without grants, which must change nothing), and checks that
no answer is a 5xx and that every answer matches the document: a success has the
documented status, media type and schema, and every error is Pulsar's
``{"reason": ...}``. Afterwards the broker must still be alive and working: a
produce/consume round trip and the health check succeed.

The run is derandomized and bounded (examples per operation and a time budget) so
CI does not flake; ``make fuzz-admin`` runs it longer on new random inputs
(``QUASAR_FUZZ_RANDOM=1``, ``QUASAR_ADMIN_FUZZ_EXAMPLES``, ``QUASAR_ADMIN_FUZZ_BUDGET_S``).

Fixtures the requests name by example (tenant ``public``, namespace ``default``,
topic ``fuzz-topic`` with a few messages, subscription ``fuzz-sub``) are recreated
after every operation that may delete or terminate them.
"""

from __future__ import annotations

import copy
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pulsar
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from quasar.admin import create_admin_app
from quasar.admin.api import AdminBroker
from quasar.admin.openapi import openapi_document
from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

pytestmark = pytest.mark.timeout(900)

SECRET = create_secret_key()
ROOT = {"Authorization": f"Bearer {create_token('root', SECRET)}"}
# An authenticated role with no grant anywhere.
NOBODY = {"Authorization": f"Bearer {create_token('nobody', SECRET)}"}

RANDOM = os.environ.get("QUASAR_FUZZ_RANDOM") == "1"
EXAMPLES = int(os.environ.get("QUASAR_ADMIN_FUZZ_EXAMPLES", "30"))
# Wall-clock budget for the whole run; operations reached after it are not fuzzed
# (the count is printed). Sized for about two minutes on a loaded 2-core machine.
BUDGET_S = float(os.environ.get("QUASAR_ADMIN_FUZZ_BUDGET_S", "150"))

TENANT, NAMESPACE, TOPIC, SUBSCRIPTION = "public", "default", "fuzz-topic", "fuzz-sub"
TOPIC_PATH = f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/{TOPIC}"
FULL_TOPIC = f"persistent://{TENANT}/{NAMESPACE}/{TOPIC}"

# Requests that may remove or terminate what the examples name: after each, the
# fixtures are put back.
DESTRUCTIVE_SUFFIXES = ("/terminate", "/terminate/partitions", "/unsubscribe/{subscription}")


def http(
    broker: BrokerProcess, method: str, path: str, body: Any = None
) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        broker.admin_url + path, data=data, method=method,
        headers={**ROOT, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=70) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def client(broker: BrokerProcess) -> pulsar.Client:
    return pulsar.Client(
        broker.url,
        authentication=pulsar.AuthenticationToken(create_token("root", SECRET)),
        operation_timeout_seconds=10,
    )


def restore_fixtures(broker: BrokerProcess) -> None:
    """Put back the tenant, namespace, topic and subscription the examples name."""
    for method, path, body in (
        ("PUT", f"/admin/v2/tenants/{TENANT}", {}),
        ("PUT", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}", None),
        ("PUT", TOPIC_PATH, None),
        ("PUT", f"{TOPIC_PATH}/subscription/{SUBSCRIPTION}", "earliest"),
    ):
        status, answer = http(broker, method, path, body)
        # 409: still there. A 307 or other answer would mean the fixture is lost.
        assert status in (204, 409), (method, path, status, answer)


@pytest.fixture(scope="module")
def fuzzed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("admin-fuzz")
    broker = BrokerProcess(
        data / "data", settings=token_settings(SECRET, super_users="root")
    ).start()
    try:
        restore_fixtures(broker)
        pulsar_client = client(broker)
        try:
            producer = pulsar_client.create_producer(FULL_TOPIC)
            for n in range(5):
                producer.send(f"message-{n}".encode(), properties={"n": str(n)})
        finally:
            pulsar_client.close()
        yield broker
    finally:
        broker.stop()


# -- what the fuzzer found, each pinned by a request -----------------------------------


def test_skipping_a_record_of_an_unknown_coordinator_is_404(
    fuzzed_broker: BrokerProcess,
) -> None:
    # It was 503, the binary protocol's retryable "coordinator not found".
    status, body = http(
        fuzzed_broker, "POST",
        "/admin/v3/transactions/coordinators/1/skipCorruptRecord?position=0:0",
    )
    assert status == 404, body
    assert "Transaction coordinator with id 1 not found" in json.loads(body)["reason"]


# The document of the routes the app serves, built in process so that each operation
# is a test of its own; the broker serves the same document (checked below).
DOCUMENT = openapi_document(create_admin_app(cast(AdminBroker, None)))
schema = schemathesis.openapi.from_dict(copy.deepcopy(DOCUMENT))
schema.config.generation.update(max_examples=EXAMPLES, deterministic=not RANDOM)

_started: list[float] = []
_skipped: set[str] = set()
_sent: dict[str, int] = {"super-user": 0, "no rights": 0}


def _over_budget(label: str) -> bool:
    if not _started:
        _started.append(time.monotonic())
    if time.monotonic() - _started[0] <= BUDGET_S:
        return False
    _skipped.add(label)
    return True


@schema.parametrize()
@settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
def test_admin_api_answers_every_request_as_documented(
    case: Any, fuzzed_broker: BrokerProcess
) -> None:
    operation = case.operation
    if _over_budget(operation.label):
        return
    _sent["super-user"] += 1
    response = case.call(base_url=fuzzed_broker.admin_url, headers=ROOT, timeout=70)
    try:
        case.validate_response(
            response,
            checks=[not_a_server_error, response_schema_conformance,
                    content_type_conformance],
        )
    finally:
        if operation.method.upper() == "DELETE" or operation.path.endswith(
            DESTRUCTIVE_SUFFIXES
        ):
            restore_fixtures(fuzzed_broker)


@schema.parametrize()
@settings(
    max_examples=max(1, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
def test_a_role_without_rights_is_refused_as_documented(
    case: Any, fuzzed_broker: BrokerProcess
) -> None:
    # The access rules read names from the path before any handler validates them:
    # a hostile name must be a refusal or a 4xx, never a 5xx, for a role with no grant.
    if _over_budget(case.operation.label):
        return
    _sent["no rights"] += 1
    response = case.call(base_url=fuzzed_broker.admin_url, headers=NOBODY, timeout=70)
    case.validate_response(
        response,
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )
    assert response.status_code != 204, "a role without grants changed something"


def test_the_broker_serves_the_fuzzed_document(fuzzed_broker: BrokerProcess) -> None:
    status, body = http(fuzzed_broker, "GET", "/admin/v2/openapi.json")
    assert status == 200 and json.loads(body) == DOCUMENT


def test_the_broker_still_works_after_the_fuzzing(fuzzed_broker: BrokerProcess) -> None:
    print(f"admin fuzz: requests sent {_sent}")
    if _skipped:
        print(f"admin fuzz: time budget reached, {len(_skipped)} operations not fuzzed")
    assert fuzzed_broker.proc is not None and fuzzed_broker.proc.poll() is None
    # A tenant and namespace of its own, so policies the fuzzer set on others
    # (TTL, backlog quotas) do not decide the outcome.
    tenant = f"after-{uuid.uuid4().hex[:8]}"
    assert http(fuzzed_broker, "PUT", f"/admin/v2/tenants/{tenant}", {})[0] == 204
    assert http(fuzzed_broker, "PUT", f"/admin/v2/namespaces/{tenant}/ns")[0] == 204
    topic = f"persistent://{tenant}/ns/round-trip"
    assert http(fuzzed_broker, "PUT", f"/admin/v2/persistent/{tenant}/ns/round-trip")[0] == 204
    pulsar_client = client(fuzzed_broker)
    try:
        consumer = pulsar_client.subscribe(topic, "check")
        producer = pulsar_client.create_producer(topic)
        producer.send(b"still here")
        message = consumer.receive(timeout_millis=10_000)
        assert message.data() == b"still here"
        consumer.acknowledge(message)
    finally:
        pulsar_client.close()
    assert http(fuzzed_broker, "GET", "/admin/v2/brokers/health") == (200, b"ok")
    log = fuzzed_broker.read_log()
    assert "failed unexpectedly" not in log, log[-4000:]
