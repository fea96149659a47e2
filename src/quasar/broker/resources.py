"""Tenants, namespaces and partitioned-topic metadata, kept in the metadata store.

The layout follows Pulsar's, with JSON values shaped like Pulsar's admin JSON so a
value read from the store can be served by the admin API unchanged::

    /admin/policies/<tenant>                     TenantInfo  {adminRoles, allowedClusters}
    /admin/policies/<tenant>/<namespace>         Policies    {retention_policies, ...}
    /admin/partitioned-topics/<tenant>/<namespace>/persistent/<url-encoded local name>
                                                 PartitionedTopicMetadata {partitions}

Every write is a compare-and-set on the store's version: creation uses
``expected_version=-1`` (so two concurrent creators cannot both succeed), updates
re-read and retry on ``BadVersion``. The API is synchronous because the metadata store
is.

The errors raised here carry the HTTP status Pulsar's admin API answers with; they
live in this module (not in ``quasar.admin``) because the broker layer must not import
the admin layer, and the broker core raises them too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from quasar.errors import BadVersion, InvalidTopicName, NotFound, QuasarError
from quasar.protocol.topic_name import PARTITION_SUFFIX, TopicName
from quasar.storage.api import MetadataStore

__all__ = [
    "AlreadyExistsError",
    "AutoTopicCreationOverride",
    "ConflictError",
    "InvalidResourceError",
    "InvalidValueError",
    "NamespaceResources",
    "NotAcceptableError",
    "PartitionedTopicMetadata",
    "PartitionedTopicResources",
    "Policies",
    "PreconditionFailedError",
    "PulsarResources",
    "ResourceError",
    "ResourceNotFoundError",
    "RetentionPolicies",
    "SCHEMA_COMPATIBILITY_STRATEGIES",
    "TenantInfo",
    "TenantResources",
    "parse_namespace",
    "parse_topic",
    "validate_tenant",
]

TENANTS_ROOT = "/admin/policies"
PARTITIONED_TOPICS_ROOT = "/admin/partitioned-topics"
PERSISTENT = "persistent"

# Optimistic-concurrency retries for read-modify-write updates. Contention on one
# namespace's policies is rare (admin requests), so a few attempts always suffice;
# the bound keeps a pathological loop from spinning forever.
UPDATE_ATTEMPTS_MAX = 8

# Pulsar's accepted values for a namespace's schema compatibility strategy.
SCHEMA_COMPATIBILITY_STRATEGIES = (
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)


# --------------------------------------------------------------------------------------
# Errors (HTTP statuses as Pulsar's admin API uses them).


class ResourceError(QuasarError):
    """Base for tenant/namespace/topic metadata errors."""


class AlreadyExistsError(ResourceError):
    """The tenant, namespace, topic or subscription already exists (409 Conflict)."""

    http_status: ClassVar[int] = 409


class ConflictError(ResourceError):
    """The request conflicts with existing state, e.g. deleting a non-empty tenant."""

    http_status: ClassVar[int] = 409


class ResourceNotFoundError(ResourceError):
    """The tenant, namespace or partitioned topic does not exist (404)."""

    http_status: ClassVar[int] = 404


class InvalidResourceError(ResourceError):
    """An invalid name or policy value (412 Precondition Failed, as in Pulsar)."""

    http_status: ClassVar[int] = 412


class PreconditionFailedError(ResourceError):
    """Not allowed in the current state, e.g. deleting a topic or subscription that
    still has connected clients without ``force`` (412, as Pulsar answers)."""

    http_status: ClassVar[int] = 412


class InvalidValueError(ResourceError):
    """A JSON value of the wrong shape, e.g. a string where a number belongs (400)."""

    http_status: ClassVar[int] = 400


class NotAcceptableError(ResourceError):
    """An unacceptable partition count (406, as Pulsar answers for ``partitions <= 0``)."""

    http_status: ClassVar[int] = 406


# --------------------------------------------------------------------------------------
# Names.

# Pulsar's rule for tenant, namespace and cluster names: ASCII letters, digits and
# "-=:._".
_NAME = re.compile(r"[-=:.\w]+", re.ASCII)


def validate_tenant(tenant: str) -> str:
    """Return ``tenant`` if it is a valid tenant name.

    Raises:
        InvalidResourceError: not a valid name.
    """
    if not _NAME.fullmatch(tenant):
        raise InvalidResourceError(f"Tenant name is not valid: {tenant!r}")
    return tenant


def parse_namespace(namespace: str) -> tuple[str, str]:
    """Split ``tenant/namespace`` into its two valid parts.

    Raises:
        InvalidResourceError: not of that form, or a part is not a valid name.
    """
    parts = namespace.split("/")
    if len(parts) != 2 or not all(_NAME.fullmatch(p) for p in parts):
        raise InvalidResourceError(f"Namespace name is not valid: {namespace!r}")
    return parts[0], parts[1]


def parse_topic(topic: str) -> TopicName:
    """Parse a topic name in any form ``TopicName.parse`` accepts, except Pulsar's
    legacy V1 form (``persistent://tenant/cluster/namespace/topic``).

    quasar's metadata layout and admin paths are V2 only; a V1 name here is almost
    always a V2 local name containing ``/``, which would be ambiguous.

    Raises:
        InvalidTopicName: not a valid V2 topic name (412).
    """
    name = TopicName.parse(topic)
    if name.cluster is not None:
        raise InvalidTopicName(f"Topic name is not valid: {topic!r}")
    return name


# --------------------------------------------------------------------------------------
# JSON values. ``from_json`` raises InvalidValueError on a value of the wrong shape,
# InvalidResourceError on a well-formed but invalid one, and ignores unknown keys (as Pulsar's JSON mapper does), so newer values still load.


def _expect(obj: Any, tp: type | tuple[type, ...], what: str) -> Any:
    # bool is an int in Python; JSON true must not pass as a number.
    if isinstance(obj, bool) and tp is int:
        raise InvalidValueError(f"{what} must be an integer")
    if not isinstance(obj, tp):
        raise InvalidValueError(f"{what} has the wrong type")
    return obj


def _str_list(obj: Any, what: str) -> tuple[str, ...]:
    if obj is None:
        return ()
    items = _expect(obj, list, what)
    return tuple(_expect(item, str, what) for item in items)


@dataclass(frozen=True)
class TenantInfo:
    """Pulsar's TenantInfo: who administers a tenant and where it may live."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "adminRoles": list(self.admin_roles),
            "allowedClusters": list(self.allowed_clusters),
        }

    @classmethod
    def from_json(cls, obj: Any) -> TenantInfo:
        obj = _expect(obj, dict, "TenantInfo")
        return cls(
            admin_roles=_str_list(obj.get("adminRoles"), "adminRoles"),
            allowed_clusters=_str_list(obj.get("allowedClusters"), "allowedClusters"),
        )


@dataclass(frozen=True)
class RetentionPolicies:
    """How long and how much consumed data a namespace keeps; -1 = unlimited."""

    retention_time_in_minutes: int = 0
    retention_size_in_mb: int = 0

    def __post_init__(self) -> None:
        if self.retention_time_in_minutes < -1 or self.retention_size_in_mb < -1:
            raise InvalidResourceError("Retention limits must be -1, 0 or positive")
        # As Pulsar: one limit at zero and the other set has no clear meaning.
        if (self.retention_time_in_minutes == 0) != (self.retention_size_in_mb == 0):
            raise InvalidResourceError(
                "Invalid retention policy: retentionTimeInMinutes and "
                "retentionSizeInMB must both be zero or both be non-zero"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "retentionTimeInMinutes": self.retention_time_in_minutes,
            "retentionSizeInMB": self.retention_size_in_mb,
        }

    @classmethod
    def from_json(cls, obj: Any) -> RetentionPolicies:
        obj = _expect(obj, dict, "retention policies")
        return cls(
            retention_time_in_minutes=_expect(
                obj.get("retentionTimeInMinutes", 0), int, "retentionTimeInMinutes"
            ),
            retention_size_in_mb=_expect(
                obj.get("retentionSizeInMB", 0), int, "retentionSizeInMB"
            ),
        )


@dataclass(frozen=True)
class AutoTopicCreationOverride:
    """A namespace's override of ``allowAutoTopicCreation*``."""

    allow_auto_topic_creation: bool
    topic_type: str | None = None  # "partitioned" | "non-partitioned"
    default_num_partitions: int | None = None

    def __post_init__(self) -> None:
        if not self.allow_auto_topic_creation:
            return
        if self.topic_type not in ("partitioned", "non-partitioned"):
            raise InvalidResourceError(
                "Invalid configuration for autoTopicCreationOverride: topicType "
                "must be 'partitioned' or 'non-partitioned'"
            )
        if self.topic_type == "partitioned" and (
            self.default_num_partitions is None or self.default_num_partitions < 1
        ):
            raise InvalidResourceError(
                "Invalid configuration for autoTopicCreationOverride: "
                "defaultNumPartitions must be at least 1 for partitioned topics"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"allowAutoTopicCreation": self.allow_auto_topic_creation}
        if self.topic_type is not None:
            out["topicType"] = self.topic_type
        if self.default_num_partitions is not None:
            out["defaultNumPartitions"] = self.default_num_partitions
        return out

    @classmethod
    def from_json(cls, obj: Any) -> AutoTopicCreationOverride:
        obj = _expect(obj, dict, "autoTopicCreationOverride")
        partitions = obj.get("defaultNumPartitions")
        topic_type = obj.get("topicType")
        return cls(
            allow_auto_topic_creation=_expect(
                obj.get("allowAutoTopicCreation"), bool, "allowAutoTopicCreation"
            ),
            topic_type=None
            if topic_type is None
            else _expect(topic_type, str, "topicType"),
            default_num_partitions=(
                None
                if partitions is None
                else _expect(partitions, int, "defaultNumPartitions")
            ),
        )


@dataclass(frozen=True)
class Policies:
    """A namespace's policies (the subset of Pulsar's ``Policies`` quasar uses).

    ``None`` means "not set at namespace level": the broker-wide default from the
    configuration applies, exactly as in Pulsar.
    """

    replication_clusters: tuple[str, ...] = ()
    retention_policies: RetentionPolicies | None = None
    deduplication_enabled: bool | None = None
    auto_topic_creation_override: AutoTopicCreationOverride | None = None
    schema_compatibility_strategy: str = "UNDEFINED"

    def __post_init__(self) -> None:
        if self.schema_compatibility_strategy not in SCHEMA_COMPATIBILITY_STRATEGIES:
            raise InvalidResourceError(
                f"Invalid schema compatibility strategy: {self.schema_compatibility_strategy!r}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "replication_clusters": list(self.replication_clusters),
            "retention_policies": (
                None
                if self.retention_policies is None
                else self.retention_policies.to_json()
            ),
            "deduplicationEnabled": self.deduplication_enabled,
            "autoTopicCreationOverride": (
                None
                if self.auto_topic_creation_override is None
                else self.auto_topic_creation_override.to_json()
            ),
            "schema_compatibility_strategy": self.schema_compatibility_strategy,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Policies:
        obj = _expect(obj, dict, "Policies")
        retention = obj.get("retention_policies")
        dedup = obj.get("deduplicationEnabled")
        auto = obj.get("autoTopicCreationOverride")
        strategy = obj.get("schema_compatibility_strategy") or "UNDEFINED"
        return cls(
            replication_clusters=_str_list(
                obj.get("replication_clusters"), "replication_clusters"
            ),
            retention_policies=None
            if retention is None
            else RetentionPolicies.from_json(retention),
            deduplication_enabled=None
            if dedup is None
            else _expect(dedup, bool, "deduplicationEnabled"),
            auto_topic_creation_override=(
                None if auto is None else AutoTopicCreationOverride.from_json(auto)
            ),
            schema_compatibility_strategy=_expect(
                strategy, str, "schema_compatibility_strategy"
            ),
        )


@dataclass(frozen=True)
class PartitionedTopicMetadata:
    """Pulsar's PartitionedTopicMetadata; ``partitions == 0`` means not partitioned."""

    partitions: int
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partitions": self.partitions}
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> PartitionedTopicMetadata:
        obj = _expect(obj, dict, "PartitionedTopicMetadata")
        props = obj.get("properties") or {}
        return cls(
            partitions=_expect(obj.get("partitions"), int, "partitions"),
            properties=dict(_expect(props, dict, "properties")),
        )


# --------------------------------------------------------------------------------------
# Store helpers.


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _load(data: bytes) -> Any:
    return json.loads(data.decode())


def _create(store: MetadataStore, path: str, value: dict[str, Any], what: str) -> None:
    try:
        store.put(path, _dump(value), expected_version=-1)
    except BadVersion:
        raise AlreadyExistsError(f"{what} already exists") from None


def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(store.children(path))
    except NotFound:
        return []


def _delete_tree(store: MetadataStore, path: str) -> None:
    try:
        store.delete_recursive(path)
    except NotFound:
        pass


# --------------------------------------------------------------------------------------
# Resources.


class TenantResources:
    """Tenants under ``/admin/policies/<tenant>``."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    @staticmethod
    def path(tenant: str) -> str:
        return f"{TENANTS_ROOT}/{tenant}"

    def exists(self, tenant: str) -> bool:
        return self._store.get(self.path(validate_tenant(tenant))) is not None

    def create(self, tenant: str, info: TenantInfo) -> None:
        """Raises: InvalidResourceError, AlreadyExistsError."""
        _create(
            self._store, self.path(validate_tenant(tenant)), info.to_json(), "Tenant"
        )

    def get(self, tenant: str) -> TenantInfo:
        """Raises: InvalidResourceError, ResourceNotFoundError."""
        found = self._store.get(self.path(validate_tenant(tenant)))
        if found is None:
            raise ResourceNotFoundError("Tenant does not exist")
        return TenantInfo.from_json(_load(found.value))

    def list(self) -> list[str]:
        """Names of every tenant, sorted."""
        return _children(self._store, TENANTS_ROOT)

    def update(self, tenant: str, info: TenantInfo) -> None:
        """Replace a tenant's info. Raises: InvalidResourceError, ResourceNotFoundError."""
        path = self.path(validate_tenant(tenant))
        found = self._store.get(path)
        if found is None:
            raise ResourceNotFoundError("Tenant does not exist")
        # Last writer wins, as in Pulsar: an update replaces the whole TenantInfo.
        self._store.put(path, _dump(info.to_json()))

    def delete(self, tenant: str) -> None:
        """Delete an empty tenant.

        Raises:
            InvalidResourceError, ResourceNotFoundError,
            ConflictError: the tenant still has namespaces.
        """
        path = self.path(validate_tenant(tenant))
        found = self._store.get(path)
        if found is None:
            raise ResourceNotFoundError("Tenant does not exist")
        if _children(self._store, path):
            raise ConflictError("The tenant still has active namespaces")
        try:
            self._store.delete(path, expected_version=found.version)
        except BadVersion:
            raise ConflictError("The tenant was modified concurrently; retry") from None
        except NotFound:
            raise ResourceNotFoundError("Tenant does not exist") from None


class NamespaceResources:
    """Namespaces and their policies under ``/admin/policies/<tenant>/<namespace>``."""

    def __init__(self, store: MetadataStore, tenants: TenantResources) -> None:
        self._store = store
        self._tenants = tenants

    @staticmethod
    def path(namespace: str) -> str:
        tenant, ns = parse_namespace(namespace)
        return f"{TENANTS_ROOT}/{tenant}/{ns}"

    def exists(self, namespace: str) -> bool:
        return self._store.get(self.path(namespace)) is not None

    def create(self, namespace: str, policies: Policies | None = None) -> None:
        """Raises: InvalidResourceError, ResourceNotFoundError (tenant), AlreadyExistsError."""
        path = self.path(namespace)
        if not self._tenants.exists(parse_namespace(namespace)[0]):
            raise ResourceNotFoundError("Tenant does not exist")
        _create(self._store, path, (policies or Policies()).to_json(), "Namespace")

    def get(self, namespace: str) -> Policies:
        """Raises: InvalidResourceError, ResourceNotFoundError."""
        found = self._store.get(self.path(namespace))
        if found is None:
            raise ResourceNotFoundError("Namespace does not exist")
        return Policies.from_json(_load(found.value))

    def list(self, tenant: str) -> list[str]:
        """``tenant/namespace`` names of a tenant's namespaces, sorted.

        Raises: InvalidResourceError, ResourceNotFoundError (tenant).
        """
        if not self._tenants.exists(tenant):
            raise ResourceNotFoundError("Tenant does not exist")
        return [
            f"{tenant}/{ns}"
            for ns in _children(self._store, TenantResources.path(tenant))
        ]

    def update(
        self, namespace: str, change: Callable[[Policies], Policies]
    ) -> Policies:
        """Apply ``change`` to the stored policies atomically; return the result.

        ``change`` may run more than once (after a concurrent update) and must not
        have side effects.

        Raises:
            InvalidResourceError, ResourceNotFoundError,
            ConflictError: too many concurrent updates.
        """
        path = self.path(namespace)
        for _ in range(UPDATE_ATTEMPTS_MAX):
            found = self._store.get(path)
            if found is None:
                raise ResourceNotFoundError("Namespace does not exist")
            policies = change(Policies.from_json(_load(found.value)))
            try:
                self._store.put(
                    path, _dump(policies.to_json()), expected_version=found.version
                )
            except BadVersion:
                continue
            return policies
        raise ConflictError("Namespace policies are being modified concurrently; retry")

    def delete(self, namespace: str, force: bool = False) -> None:
        """Delete a namespace and its partitioned-topic metadata.

        Only partitioned topics are known here; the caller checks the namespace's
        non-partitioned topics (which live in the broker) before calling.

        Raises:
            InvalidResourceError, ResourceNotFoundError,
            ConflictError: partitioned topics exist and ``force`` is false.
        """
        path = self.path(namespace)
        if self._store.get(path) is None:
            raise ResourceNotFoundError("Namespace does not exist")
        topics_dir = PartitionedTopicResources.namespace_path(namespace)
        if _children(self._store, topics_dir) and not force:
            raise ConflictError("Cannot delete non empty namespace")
        _delete_tree(self._store, f"{PARTITIONED_TOPICS_ROOT}/{namespace}")
        try:
            self._store.delete(path)
        except NotFound:
            raise ResourceNotFoundError("Namespace does not exist") from None


class PartitionedTopicResources:
    """Partitioned-topic metadata under ``/admin/partitioned-topics/...``.

    Only the metadata; the broker creates and deletes the partitions themselves.
    """

    def __init__(self, store: MetadataStore, namespaces: NamespaceResources) -> None:
        self._store = store
        self._namespaces = namespaces

    @staticmethod
    def namespace_path(namespace: str) -> str:
        tenant, ns = parse_namespace(namespace)
        return f"{PARTITIONED_TOPICS_ROOT}/{tenant}/{ns}/{PERSISTENT}"

    @classmethod
    def path(cls, topic: str) -> str:
        """The metadata key of ``topic``'s partitioned-topic metadata."""
        parts = parse_topic(topic)
        if parts.domain != PERSISTENT:
            raise InvalidResourceError("Only persistent topics are supported")
        return (
            f"{cls.namespace_path(parts.namespace_name)}/"
            f"{quote(parts.local_name, safe='')}"
        )

    def create(self, topic: str, partitions: int) -> None:
        """Record a new partitioned topic.

        Raises:
            InvalidTopicName: not a valid topic name (412).
            InvalidResourceError: not persistent, or ``-partition-`` in the name (412).
            NotAcceptableError: ``partitions < 1``.
            ResourceNotFoundError: the namespace does not exist.
            AlreadyExistsError: the partitioned topic exists.
        """
        path = self.path(topic)
        parts = parse_topic(topic)
        if PARTITION_SUFFIX in parts.local_name:
            raise InvalidResourceError(
                f"Partitioned topic name must not contain '{PARTITION_SUFFIX}'"
            )
        if isinstance(partitions, bool) or partitions < 1:
            raise NotAcceptableError("Number of partitions must be more than 0")
        if not self._namespaces.exists(parts.namespace_name):
            raise ResourceNotFoundError("Namespace does not exist")
        _create(
            self._store,
            path,
            PartitionedTopicMetadata(partitions).to_json(),
            "Partitioned topic",
        )

    def get(self, topic: str) -> PartitionedTopicMetadata | None:
        """The metadata, or ``None`` if ``topic`` is not a partitioned topic."""
        found = self._store.get(self.path(topic))
        return (
            None
            if found is None
            else PartitionedTopicMetadata.from_json(_load(found.value))
        )

    def exists(self, topic: str) -> bool:
        return self._store.get(self.path(topic)) is not None

    def list(self, namespace: str) -> list[str]:
        """Full names of the namespace's partitioned topics, sorted."""
        tenant, ns = parse_namespace(namespace)
        return [
            f"{PERSISTENT}://{tenant}/{ns}/{unquote(child)}"
            for child in _children(self._store, self.namespace_path(namespace))
        ]

    def update(self, topic: str, partitions: int) -> PartitionedTopicMetadata:
        """Raise the partition count (it can never shrink); return the new metadata.

        Raises:
            InvalidTopicName, InvalidResourceError: bad name (412).
            NotAcceptableError: ``partitions < 1``.
            ResourceNotFoundError: not a partitioned topic.
            ConflictError: ``partitions`` is not more than the current count.
        """
        path = self.path(topic)
        if isinstance(partitions, bool) or partitions < 1:
            raise NotAcceptableError("Number of partitions must be more than 0")
        for _ in range(UPDATE_ATTEMPTS_MAX):
            found = self._store.get(path)
            if found is None:
                raise ResourceNotFoundError("Partitioned topic does not exist")
            current = PartitionedTopicMetadata.from_json(_load(found.value))
            if partitions <= current.partitions:
                raise ConflictError(
                    f"Number of partitions must be more than the existing {current.partitions}"
                )
            updated = replace(current, partitions=partitions)
            try:
                self._store.put(
                    path, _dump(updated.to_json()), expected_version=found.version
                )
            except BadVersion:
                continue
            return updated
        raise ConflictError("Partitioned topic is being modified concurrently; retry")

    def delete(self, topic: str) -> None:
        """Raises: InvalidTopicName, InvalidResourceError, ResourceNotFoundError."""
        try:
            self._store.delete(self.path(topic))
        except NotFound:
            raise ResourceNotFoundError("Partitioned topic does not exist") from None


class PulsarResources:
    """All metadata resources over one store (Pulsar's ``PulsarResources``)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.tenants = TenantResources(store)
        self.namespaces = NamespaceResources(store, self.tenants)
        self.partitioned_topics = PartitionedTopicResources(store, self.namespaces)

    def bootstrap_standalone(self, cluster_name: str) -> None:
        """Create what a Pulsar standalone starts with, if missing.

        Tenants ``public`` and ``pulsar``; namespaces ``public/default`` and
        ``pulsar/system``. Idempotent, so it runs on every start.
        """
        info = TenantInfo(allowed_clusters=(cluster_name,))
        policies = Policies(replication_clusters=(cluster_name,))
        for tenant, namespace in (
            ("public", "public/default"),
            ("pulsar", "pulsar/system"),
        ):
            if not self.tenants.exists(tenant):
                try:
                    self.tenants.create(tenant, info)
                except AlreadyExistsError:
                    pass
            if not self.namespaces.exists(namespace):
                try:
                    self.namespaces.create(namespace, policies)
                except AlreadyExistsError:
                    pass
