"""Pure logic: metadata-store URLs, the configuration keys that choose a store, and
the routing of configuration paths (no ZooKeeper needed)."""

from __future__ import annotations

import pytest

from quasar.config import ServiceConfiguration
from quasar.storage.metadata.config import MetadataStoreConfig
from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.storage.metadata.routed import ConfigurationRoutedStore
from quasar.storage.metadata.url import ZooKeeperUrl, parse_metadata_store_url


@pytest.mark.parametrize(
    ("url", "hosts", "chroot"),
    [
        ("zk:h1:2181", (("h1", 2181),), ""),
        ("zk:h1:2181,h2:2182/pulsar/c1", (("h1", 2181), ("h2", 2182)), "/pulsar/c1"),
        ("zk://h1:2181/c", (("h1", 2181),), "/c"),
        ("h1:2181,h2", (("h1", 2181), ("h2", 2181)), ""),  # no scheme: ZooKeeper
        ("zk:h1:2181/", (("h1", 2181),), ""),
    ],
)
def test_zookeeper_urls(url: str, hosts: tuple[tuple[str, int], ...], chroot: str) -> None:
    parsed = parse_metadata_store_url(url)
    assert parsed == ZooKeeperUrl(hosts, chroot)
    assert parse_metadata_store_url(str(parsed)) == parsed


@pytest.mark.parametrize("scheme", ["etcd", "rocksdb", "memory", "oxia", "metadata-store"])
def test_other_metadata_stores_are_refused_by_name(scheme: str) -> None:
    with pytest.raises(ValueError, match=f"the {scheme} metadata store is not supported"):
        parse_metadata_store_url(f"{scheme}:somewhere")


@pytest.mark.parametrize(
    "bad", ["", "zk:h1:notaport", "zk:h1:2181/a//b", "zk:h1:2181/a/", "http://h:1", "zk::2181",
            "zk:h1:70000"]
)
def test_malformed_urls(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_metadata_store_url(bad)


def test_unset_means_the_embedded_sqlite_store() -> None:
    config = ServiceConfiguration.load(env={})
    assert config.metadata_store.metadata_url() is None
    assert config.metadata_store.configuration_url() is None
    assert config.metadata_store.session_timeout_ms == 30_000
    assert config.metadata_store.operation_timeout_s == 30


def test_keys_load_from_broker_conf() -> None:
    config = ServiceConfiguration.load(env={}, overrides={
        "metadataStoreUrl": "zk:z1:2181/local",
        "configurationMetadataStoreUrl": "zk:z2:2181/global",
        "metadataStoreSessionTimeoutMillis": "5000",
        "metadataStoreOperationTimeoutSeconds": "3",
    })
    section = config.metadata_store
    assert section.metadata_url() == ZooKeeperUrl((("z1", 2181),), "/local")
    assert section.configuration_url() == ZooKeeperUrl((("z2", 2181),), "/global")
    assert (section.session_timeout_ms, section.operation_timeout_s) == (5000, 3)


def test_pulsar_deprecated_keys_are_read_as_pulsar_reads_them() -> None:
    section = MetadataStoreConfig(
        zookeeper_servers="z1:2181,z2:2181/c",
        configuration_store_servers="z3:2181",
        zoo_keeper_session_timeout_millis=9000,
        zoo_keeper_operation_timeout_seconds=7,
    )
    assert section.metadata_url() == ZooKeeperUrl((("z1", 2181), ("z2", 2181)), "/c")
    assert section.configuration_url() == ZooKeeperUrl((("z3", 2181),), "")
    assert (section.session_timeout_ms, section.operation_timeout_s) == (9000, 7)
    # metadataStoreUrl wins over the deprecated key.
    both = MetadataStoreConfig(metadata_store_url="zk:new:2181", zookeeper_servers="old:2181")
    assert both.metadata_url() == ZooKeeperUrl((("new", 2181),), "")


def test_bad_settings_are_configuration_errors() -> None:
    with pytest.raises(ValueError, match="etcd metadata store is not supported"):
        ServiceConfiguration.load(env={}, overrides={"metadataStoreUrl": "etcd:e1:2379"})
    with pytest.raises(ValueError, match="metadataStoreUrl is not"):
        ServiceConfiguration.load(
            env={}, overrides={"configurationMetadataStoreUrl": "zk:z2:2181"}
        )


def test_configuration_paths_go_to_the_configuration_store() -> None:
    local, configuration = MemoryMetadataStore(), MemoryMetadataStore()
    store = ConfigurationRoutedStore(local, configuration)
    store.put("/admin/policies/public", b"tenant")
    store.put("/admin/policies/public/default", b"namespace")
    store.put("/admin/clusters/c1", b"cluster")
    store.put("/admin/partitioned-topics/public/default/persistent/t", b"3")
    store.put("/managed-ledgers/public/default/persistent/t", b"ledgers")
    store.put("/admin/configuration", b"dynamic")  # a broker's own: local
    configuration.put("/other-cluster/thing", b"not ours")
    assert configuration.get("/admin/policies/public/default") is not None
    assert local.get("/admin/policies/public") is None
    assert local.get("/managed-ledgers/public/default/persistent/t") is not None
    assert store.children("/") == ["admin", "managed-ledgers"]
    assert store.children("/admin") == [
        "clusters", "configuration", "partitioned-topics", "policies"
    ]
    store.delete_recursive("/")
    assert store.children("/") == []
    assert configuration.get("/other-cluster/thing") == (b"not ours", 0)
