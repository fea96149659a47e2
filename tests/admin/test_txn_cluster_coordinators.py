"""``GET /admin/v3/transactions/coordinators`` on a cluster member: each
coordinator's owner URLs as its lookup answers them, plain and TLS."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from quasar.admin.http import BROKER_KEY
from quasar.admin.txn_cluster_views import cluster_coordinators
from quasar.admin.txn_gather import CoordinatorOwners
from quasar.resources.store import PulsarResources
from quasar.transaction.coordinator_registry import TRANSACTION_COORDINATOR_ASSIGN

from .conftest import FakeAdminBroker


class EnabledTransactions:
    def check_enabled(self) -> None:
        pass


class FakeOwners:
    """Coordinator 0 on a plaintext-only member, 1 on a TLS-only member."""

    URLS = {0: ("pulsar://m0:6650", None), 1: (None, "pulsar+ssl://m1:6651")}

    def broker_service_urls(self, tc_id: int) -> tuple[str | None, str | None]:
        return self.URLS[tc_id]


async def test_each_coordinator_names_its_owner_plain_and_tls_urls(
    admin_resources: PulsarResources,
) -> None:
    admin_resources.partitioned_topics.create(TRANSACTION_COORDINATOR_ASSIGN, 2)
    broker = FakeAdminBroker(admin_resources)
    broker.transaction_admin = EnabledTransactions()  # type: ignore[assignment]
    app = web.Application()
    app[BROKER_KEY] = broker
    request = make_mocked_request("GET", "/admin/v3/transactions/coordinators", app=app)
    owners: CoordinatorOwners = FakeOwners()  # type: ignore[assignment]
    assert await cluster_coordinators(request, owners) == [
        {"id": 0, "brokerServiceUrl": "pulsar://m0:6650", "brokerServiceUrlTls": None},
        {"id": 1, "brokerServiceUrl": None, "brokerServiceUrlTls": "pulsar+ssl://m1:6651"},
    ]
