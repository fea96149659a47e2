"""``quasar initialize-cluster-metadata`` against a real ZooKeeper server."""

from __future__ import annotations

import json

import pytest

from quasar.cli.main import main
from quasar.resources.clusters import ClusterData, ClusterResources
from quasar.resources.store import PulsarResources
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

pytestmark = pytest.mark.usefixtures("restore_logging")

TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


def _init(*args: str) -> int:
    return main(["initialize-cluster-metadata", "--log-level", "WARNING", *args])


def test_initializes_once_then_changes_nothing(
    zk_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--cluster", "east", "--metadata-store", zk_url,
        "--web-service-url", "http://east:8080",
        "--broker-service-url", "pulsar://east:6650",
        "--broker-service-url-tls", "pulsar+ssl://east:6651",
        "--initial-num-transaction-coordinators", "4",
    ]
    assert _init(*args) == 0
    first = capsys.readouterr().out
    for item in ("cluster east", "tenant public", "namespace public/default",
                 "tenant pulsar", "namespace pulsar/system",
                 f"partitioned topic {TC_ASSIGN} (4 partitions)"):
        assert f"created {item}" in first

    store = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    try:
        before = _snapshot(store)
        assert ClusterResources(store).get("east") == ClusterData(
            "http://east:8080", None, "pulsar://east:6650", "pulsar+ssl://east:6651"
        )
        resources = PulsarResources(store)
        assert resources.tenants.get("public").allowed_clusters == ("east",)
        assert resources.namespaces.exists("pulsar/system")
        assert resources.partitioned_topics.get(TC_ASSIGN).partitions == 4

        # A second run, even with other URLs, changes nothing and says so.
        assert _init("--cluster", "east", "--metadata-store", zk_url,
                     "--web-service-url", "http://elsewhere:8080") == 0
        second = capsys.readouterr().out
        assert "created" not in second
        assert "already initialized" in second and "nothing changed" in second
        assert "exists with other service URLs" in second
        # The coordinators' count is not changed either, and the run says so.
        assert f"{TC_ASSIGN} exists with 4 partitions, left as it is" in second
        assert _snapshot(store) == before
    finally:
        store.close()


def test_configuration_metadata_goes_to_the_configuration_store(zk_url: str) -> None:
    configuration_url = zk_url + "-configuration"
    assert _init("--cluster", "c1", "--metadata-store", zk_url,
                 "--configuration-metadata-store", configuration_url) == 0
    local = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    configuration = ZooKeeperMetadataStore(configuration_url, operation_timeout_s=10)
    try:
        assert local.children("/") == []
        assert configuration.children("/admin") == [
            "clusters", "partitioned-topics", "policies"
        ]
    finally:
        local.close()
        configuration.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "c"], "--metadata-store is required"),
        (["--cluster", "c", "--metadata-store", "etcd:e:2379"], "etcd metadata store is not"),
        (["--cluster", "c", "--metadata-store", "zk:z:2181", "--proxy-url", "pulsar://p:1"],
         "--proxy-url is not supported: quasar has no proxy"),
        (["--cluster", "c", "--metadata-store", "zk:z:2181",
          "--existing-bk-metadata-service-uri", "zk+null://z/ledgers"], "no BookKeeper"),
    ],
)
def test_refusals_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init(*args) == 2
    assert message in capsys.readouterr().err


def test_an_invalid_cluster_name_is_refused(
    zk_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init("--cluster", "no/slash", "--metadata-store", zk_url) == 1
    assert "Cluster name is not valid" in capsys.readouterr().err


def _snapshot(store: ZooKeeperMetadataStore, path: str = "/") -> dict[str, object]:
    out: dict[str, object] = {}
    for name in store.children(path):
        child = f"{'' if path == '/' else path}/{name}"
        found = store.get(child)
        if found is not None:
            out[child] = (json.loads(found.value), found.version)
        out.update(_snapshot(store, child))
    return out
