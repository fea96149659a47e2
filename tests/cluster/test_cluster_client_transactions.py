"""``clientTransactions`` on a cluster: any member answers for every coordinator,
asking the members that host the others; ``?coordinatorId=`` goes to its host.

Two members and two coordinators, coordinator ``i`` placed on member ``i``; one client
name with an open transaction on coordinator 0 and a committed one on coordinator 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.testing.cluster import ClusterProcess
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import http_request, with_coordinators_on

pytestmark = pytest.mark.usefixtures("close_raw")

PATH = "/admin/v3/transactions/clientTransactions/"


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    c = ClusterProcess(
        Path(tmp_path_factory.mktemp("ctx-cluster")), zookeeper, brokers=2,
        transaction_coordinators=2,
    )
    yield from with_coordinators_on(c, [0, 1])


@pytest.fixture(scope="module")
def transactions(cluster: ClusterProcess) -> Iterator[tuple[Any, Any]]:
    """(open on coordinator 0, committed on coordinator 1) of client name ``etl-x``."""
    client = quasar.client.Client(
        cluster.service_url, enable_transaction=True, operation_timeout_seconds=30,
        client_name="etl-x",
    )
    try:
        # NEW_TXN goes round-robin over the coordinators, starting with coordinator 0.
        still_open, committed = client.new_transaction(), client.new_transaction()
        assert (still_open.id()[0], committed.id()[0]) == (0, 1)
        committed.commit()
        yield still_open, committed
        still_open.abort()
    finally:
        client.close()


def _ids(entries: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(t["mostSigBits"], t["leastSigBits"]) for t in entries]


@pytest.mark.parametrize("member", [0, 1])
def test_any_member_answers_for_every_coordinator(
    cluster: ClusterProcess, transactions: tuple[Any, Any], member: int
) -> None:
    still_open, committed = transactions
    status, _, body = http_request(cluster.brokers[member], "GET", PATH + "etl-x")
    assert status == 200, body
    assert body["unavailableCoordinators"] == []
    assert _ids(body["open"]) == [tuple(still_open.id())]
    assert _ids(body["terminated"]) == [tuple(committed.id())]
    assert [t["status"] for t in body["terminated"]] == ["COMMITTED"]


def test_one_coordinator_is_answered_by_its_host(
    cluster: ClusterProcess, transactions: tuple[Any, Any]
) -> None:
    still_open, _ = transactions
    host, other = cluster.brokers
    status, _, body = http_request(host, "GET", PATH + "etl-x?coordinatorId=0")
    assert status == 200, body
    assert _ids(body["open"]) == [tuple(still_open.id())] and body["terminated"] == []
    status, headers, _ = http_request(other, "GET", PATH + "etl-x?coordinatorId=0")
    assert status == 307
    assert headers["Location"].startswith(f"{host.admin_url}{PATH}etl-x?")
    status, _, body = http_request(other, "GET", PATH + "etl-x?coordinatorId=2")
    assert status == 404, body
