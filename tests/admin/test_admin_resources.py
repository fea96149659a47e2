"""Tenant, namespace and partitioned-topic resources over every metadata store."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from quasar.errors import (
    AlreadyExistsError,
    BadVersion,
    ConflictError,
    InvalidResourceError,
    InvalidTopicName,
    InvalidValueError,
    NotAcceptableError,
    ResourceNotFoundError,
)
from quasar.protocol.namespace_name import parse_namespace, parse_topic, validate_tenant
from quasar.resources.bundles import BundlesData
from quasar.resources.models import (
    AutoTopicCreationOverride,
    PartitionedTopicMetadata,
    Policies,
    RetentionPolicies,
    TenantInfo,
)
from quasar.resources.store import PulsarResources
from quasar.storage.api import MetadataStore, Versioned

INFO = TenantInfo(admin_roles=("admin",), allowed_clusters=("standalone",))


def make_namespace(resources: PulsarResources, namespace: str = "t/ns") -> str:
    tenant = namespace.split("/")[0]
    if not resources.tenants.exists(tenant):
        resources.tenants.create(tenant, INFO)
    resources.namespaces.create(namespace)
    return namespace


# --------------------------------------------------------------------------------------
# Names.


@pytest.mark.parametrize("name", ["public", "my-tenant", "a.b_c=d:e", "T1"])
def test_valid_tenant_names(name: str) -> None:
    assert validate_tenant(name) == name


@pytest.mark.parametrize("name", ["", "a/b", "sp ace", "caf\u00e9", "x?"])
def test_invalid_tenant_names(name: str) -> None:
    with pytest.raises(InvalidResourceError) as info:
        validate_tenant(name)
    assert info.value.http_status == 412


@pytest.mark.parametrize("name", ["t", "t/ns/x", "/ns", "t/", "t/n s"])
def test_invalid_namespace_names(name: str) -> None:
    with pytest.raises(InvalidResourceError):
        parse_namespace(name)


def test_parse_topic_forms() -> None:
    assert str(parse_topic("x")) == "persistent://public/default/x"
    assert str(parse_topic("t/ns/x")) == "persistent://t/ns/x"
    name = parse_topic("persistent://t/ns/x-partition-3")
    assert (name.namespace_name, name.partition_index, name.base.full) == (
        "t/ns",
        3,
        "persistent://t/ns/x",
    )


@pytest.mark.parametrize(
    "topic", ["persistent://t/ns/a/b", "persistent://t/ns/", "bogus://t/ns/x", "t/x"]
)
def test_parse_topic_rejects(topic: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        parse_topic(topic)
    assert info.value.http_status == 412


# --------------------------------------------------------------------------------------
# JSON values.


def test_policies_json_round_trip() -> None:
    policies = Policies(
        replication_clusters=("standalone",),
        retention_policies=RetentionPolicies(60, 100),
        deduplication_enabled=True,
        auto_topic_creation_override=AutoTopicCreationOverride(True, "partitioned", 4),
        schema_compatibility_strategy="FULL",
    )
    encoded = json.loads(json.dumps(policies.to_json()))
    assert encoded["retention_policies"] == {
        "retentionTimeInMinutes": 60,
        "retentionSizeInMB": 100,
    }
    assert encoded["autoTopicCreationOverride"] == {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 4,
    }
    assert Policies.from_json(encoded) == policies


def test_policies_defaults_are_unset_and_unknown_keys_ignored() -> None:
    policies = Policies.from_json(
        {"replication_clusters": ["standalone"], "bundles": {}}
    )
    assert policies.retention_policies is None
    assert policies.deduplication_enabled is None
    assert policies.auto_topic_creation_override is None
    assert policies.to_json()["schema_compatibility_strategy"] == "UNDEFINED"


@pytest.mark.parametrize("time_minutes,size_mb", [(-2, 10), (10, -2), (0, 10), (10, 0)])
def test_invalid_retention(time_minutes: int, size_mb: int) -> None:
    with pytest.raises(InvalidResourceError):
        RetentionPolicies(time_minutes, size_mb)


def test_unlimited_retention_allowed() -> None:
    assert RetentionPolicies(-1, -1).to_json() == {
        "retentionTimeInMinutes": -1,
        "retentionSizeInMB": -1,
    }


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"retentionTimeInMinutes": "10", "retentionSizeInMB": 10},
        {"retentionTimeInMinutes": True, "retentionSizeInMB": 10},
    ],
)
def test_retention_of_wrong_shape(obj: object) -> None:
    with pytest.raises(InvalidValueError) as info:
        RetentionPolicies.from_json(obj)
    assert info.value.http_status == 400


@pytest.mark.parametrize(
    "obj",
    [
        {"allowAutoTopicCreation": True},
        {"allowAutoTopicCreation": True, "topicType": "sharded"},
        {"allowAutoTopicCreation": True, "topicType": "partitioned"},
        {
            "allowAutoTopicCreation": True,
            "topicType": "partitioned",
            "defaultNumPartitions": 0,
        },
    ],
)
def test_invalid_auto_topic_creation(obj: dict[str, object]) -> None:
    with pytest.raises(InvalidResourceError):
        AutoTopicCreationOverride.from_json(obj)


def test_auto_topic_creation_disabled_needs_no_type() -> None:
    override = AutoTopicCreationOverride.from_json({"allowAutoTopicCreation": False})
    assert override.to_json() == {"allowAutoTopicCreation": False}


def test_tenant_info_json() -> None:
    assert INFO.to_json() == {
        "adminRoles": ["admin"],
        "allowedClusters": ["standalone"],
    }
    assert TenantInfo.from_json({}) == TenantInfo()
    with pytest.raises(InvalidValueError):
        TenantInfo.from_json({"adminRoles": "admin"})


# --------------------------------------------------------------------------------------
# Tenants.


def test_tenant_lifecycle(resources: PulsarResources) -> None:
    assert resources.tenants.list() == []
    resources.tenants.create("t", INFO)
    assert resources.tenants.exists("t")
    assert resources.tenants.get("t") == INFO
    assert resources.tenants.list() == ["t"]
    updated = replace(INFO, admin_roles=("a", "b"))
    resources.tenants.update("t", updated)
    assert resources.tenants.get("t") == updated
    resources.tenants.delete("t")
    assert resources.tenants.list() == []


def test_tenant_errors(resources: PulsarResources) -> None:
    resources.tenants.create("t", INFO)
    with pytest.raises(AlreadyExistsError) as exists:
        resources.tenants.create("t", INFO)
    assert exists.value.http_status == 409
    for call in (
        lambda: resources.tenants.get("nope"),
        lambda: resources.tenants.update("nope", INFO),
        lambda: resources.tenants.delete("nope"),
    ):
        with pytest.raises(ResourceNotFoundError) as missing:
            call()
        assert missing.value.http_status == 404
    with pytest.raises(InvalidResourceError):
        resources.tenants.create("bad name", INFO)


def test_tenant_with_namespaces_cannot_be_deleted(resources: PulsarResources) -> None:
    make_namespace(resources)
    with pytest.raises(ConflictError, match="active namespaces"):
        resources.tenants.delete("t")
    resources.namespaces.delete("t/ns")
    resources.tenants.delete("t")


# --------------------------------------------------------------------------------------
# Namespaces.


def test_namespace_lifecycle(resources: PulsarResources) -> None:
    make_namespace(resources, "t/a")
    make_namespace(resources, "t/b")
    assert resources.namespaces.list("t") == ["t/a", "t/b"]
    # A new namespace is divided into defaultNumberOfNamespaceBundles bundles.
    assert resources.namespaces.get("t/a") == Policies(bundles=BundlesData.even(4))
    resources.namespaces.delete("t/a")
    assert resources.namespaces.list("t") == ["t/b"]
    assert not resources.namespaces.exists("t/a")


def test_namespace_errors(resources: PulsarResources) -> None:
    with pytest.raises(ResourceNotFoundError, match="Tenant"):
        resources.namespaces.create("nope/ns")
    with pytest.raises(ResourceNotFoundError, match="Tenant"):
        resources.namespaces.list("nope")
    make_namespace(resources)
    with pytest.raises(AlreadyExistsError):
        resources.namespaces.create("t/ns")
    with pytest.raises(ResourceNotFoundError, match="Namespace"):
        resources.namespaces.get("t/other")
    with pytest.raises(ResourceNotFoundError, match="Namespace"):
        resources.namespaces.delete("t/other")
    with pytest.raises(ResourceNotFoundError, match="Namespace"):
        resources.namespaces.update("t/other", lambda p: p)


def test_namespace_update(resources: PulsarResources) -> None:
    make_namespace(resources)
    result = resources.namespaces.update(
        "t/ns", lambda p: replace(p, deduplication_enabled=True)
    )
    assert result.deduplication_enabled is True
    assert resources.namespaces.get("t/ns").deduplication_enabled is True


class RacingStore:
    """Wraps a store; before each of the first ``races`` versioned puts, another
    writer bumps the version, so the caller's compare-and-set fails."""

    def __init__(self, inner: MetadataStore, races: int) -> None:
        self.inner = inner
        self.races = races

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        if self.races and expected_version is not None and expected_version >= 0:
            self.races -= 1
            current = self.inner.get(path)
            assert isinstance(current, Versioned)
            self.inner.put(path, current.value)
        return self.inner.put(path, value, expected_version)


def test_namespace_update_retries_on_concurrent_change(store: MetadataStore) -> None:
    racing = RacingStore(store, races=2)
    resources = PulsarResources(racing)  # type: ignore[arg-type]
    make_namespace(resources)
    calls = []

    def change(p: Policies) -> Policies:
        calls.append(p)
        return replace(p, deduplication_enabled=False)

    resources.namespaces.update("t/ns", change)
    assert len(calls) == 3
    assert resources.namespaces.get("t/ns").deduplication_enabled is False


def test_namespace_update_gives_up_eventually(store: MetadataStore) -> None:
    resources = PulsarResources(RacingStore(store, races=1000))  # type: ignore[arg-type]
    make_namespace(resources)
    with pytest.raises(ConflictError):
        resources.namespaces.update("t/ns", lambda p: p)


def test_namespace_with_partitioned_topics(resources: PulsarResources) -> None:
    make_namespace(resources)
    resources.partitioned_topics.create("persistent://t/ns/p", 2)
    with pytest.raises(ConflictError, match="non empty"):
        resources.namespaces.delete("t/ns")
    resources.namespaces.delete("t/ns", force=True)
    assert not resources.namespaces.exists("t/ns")
    make_namespace(resources)
    assert resources.partitioned_topics.list("t/ns") == []


# --------------------------------------------------------------------------------------
# Partitioned topics.


def test_partitioned_topic_lifecycle(resources: PulsarResources) -> None:
    make_namespace(resources)
    topic = "persistent://t/ns/orders"
    resources.partitioned_topics.create(topic, 3)
    assert resources.partitioned_topics.get(topic) == PartitionedTopicMetadata(3)
    assert resources.partitioned_topics.exists(topic)
    assert resources.partitioned_topics.list("t/ns") == [topic]
    assert resources.partitioned_topics.update(topic, 5).partitions == 5
    resources.partitioned_topics.delete(topic)
    assert resources.partitioned_topics.get(topic) is None
    assert resources.partitioned_topics.list("t/ns") == []


def test_partitioned_topic_names_are_encoded(
    resources: PulsarResources, store: MetadataStore
) -> None:
    make_namespace(resources)
    topic = "persistent://t/ns/a b%c?"
    resources.partitioned_topics.create(topic, 1)
    assert resources.partitioned_topics.list("t/ns") == [topic]
    key = "/admin/partitioned-topics/t/ns/persistent/a%20b%25c%3F"
    assert store.get(key) is not None
    assert json.loads(store.get(key).value) == {"partitions": 1}  # type: ignore[union-attr]


def test_partitioned_topic_errors(resources: PulsarResources) -> None:
    topic = "persistent://t/ns/p"
    with pytest.raises(ResourceNotFoundError, match="Namespace"):
        resources.partitioned_topics.create(topic, 1)
    make_namespace(resources)
    for bad in (0, -1):
        with pytest.raises(NotAcceptableError) as info:
            resources.partitioned_topics.create(topic, bad)
        assert info.value.http_status == 406
    with pytest.raises(InvalidResourceError, match="-partition-"):
        resources.partitioned_topics.create("persistent://t/ns/p-partition-1", 1)
    # A non-persistent partitioned topic is kept under its own domain, as in Pulsar.
    resources.partitioned_topics.create("non-persistent://t/ns/p", 1)
    assert resources.partitioned_topics.list("t/ns", "non-persistent") == [
        "non-persistent://t/ns/p"
    ]
    assert "non-persistent://t/ns/p" not in resources.partitioned_topics.list("t/ns")
    resources.partitioned_topics.create(topic, 2)
    with pytest.raises(AlreadyExistsError):
        resources.partitioned_topics.create(topic, 2)
    with pytest.raises(ConflictError, match="more than"):
        resources.partitioned_topics.update(topic, 2)
    with pytest.raises(NotAcceptableError):
        resources.partitioned_topics.update(topic, 0)
    with pytest.raises(ResourceNotFoundError):
        resources.partitioned_topics.update("persistent://t/ns/other", 3)
    with pytest.raises(ResourceNotFoundError):
        resources.partitioned_topics.delete("persistent://t/ns/other")


def test_partitioned_update_retries_on_concurrent_change(store: MetadataStore) -> None:
    resources = PulsarResources(RacingStore(store, races=0))  # type: ignore[arg-type]
    make_namespace(resources)
    resources.partitioned_topics.create("persistent://t/ns/p", 1)
    resources.store.races = 1  # type: ignore[attr-defined]
    assert resources.partitioned_topics.update("persistent://t/ns/p", 4).partitions == 4


def test_bootstrap_standalone_is_idempotent(resources: PulsarResources) -> None:
    resources.bootstrap_standalone("standalone")
    resources.namespaces.update(
        "public/default", lambda p: replace(p, deduplication_enabled=True)
    )
    resources.bootstrap_standalone("standalone")
    assert resources.tenants.list() == ["public", "pulsar"]
    assert resources.namespaces.list("public") == ["public/default"]
    assert resources.namespaces.list("pulsar") == ["pulsar/system"]
    assert resources.tenants.get("public").allowed_clusters == ("standalone",)
    # An existing namespace keeps its policies.
    assert resources.namespaces.get("public/default").deduplication_enabled is True


def test_reads_values_written_by_other_components(store: MetadataStore) -> None:
    """The standalone bootstrap writes minimal JSON directly; it must load."""
    store.put(
        "/admin/policies/x",
        json.dumps({"adminRoles": [], "allowedClusters": ["c"]}).encode(),
    )
    store.put(
        "/admin/policies/x/y", json.dumps({"replication_clusters": ["c"]}).encode()
    )
    resources = PulsarResources(store)
    assert resources.tenants.get("x").allowed_clusters == ("c",)
    assert resources.namespaces.get("x/y") == Policies(replication_clusters=("c",))


def test_bad_version_is_what_create_relies_on(store: MetadataStore) -> None:
    store.put("/k", b"1", expected_version=-1)
    with pytest.raises(BadVersion):
        store.put("/k", b"2", expected_version=-1)
