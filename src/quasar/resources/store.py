"""Tenants, namespaces and partitioned-topic metadata, kept in the metadata store.

The layout follows Pulsar's, with the JSON values of ``quasar.resources.models``::

    /admin/policies/<tenant>                     TenantInfo
    /admin/policies/<tenant>/<namespace>         Policies
    /admin/partitioned-topics/<tenant>/<namespace>/persistent/<url-encoded local name>
                                                 PartitionedTopicMetadata

Every write is a compare-and-set on the store's version: creation uses
``expected_version=-1`` (so two concurrent creators cannot both succeed), updates
re-read and retry on ``BadVersion``. The API is synchronous because the metadata store
is. Errors are the admin errors of ``quasar.errors``, whose ``http_status`` is what
Pulsar's admin API answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import quote, unquote

from quasar.errors import (
    REFUSED_BUNDLES,
    REFUSED_SYSTEM_NAMESPACE,
    AlreadyExistsError,
    BadVersion,
    ConflictError,
    InvalidResourceError,
    NotFound,
    PreconditionFailedError,
    ResourceNotFoundError,
    tag_refusal,
)
from quasar.protocol.namespace_name import (
    PERSISTENT,
    parse_namespace,
    parse_topic,
    validate_tenant,
)
from quasar.protocol.topic_name import PARTITION_SUFFIX, SYSTEM_NAMESPACE, SYSTEM_TENANT
from quasar.resources.bundles import BundlesData
from quasar.resources.clusters import ClusterResources
from quasar.resources.models import PartitionedTopicMetadata, Policies, TenantInfo
from quasar.resources.partitions import check_partition_count
from quasar.storage.api import MetadataStore

# Pulsar's defaults of defaultNumberOfNamespaceBundles and
# loadBalancerNamespaceMaximumBundles (the broker passes its configured values).
DEFAULT_NUMBER_OF_NAMESPACE_BUNDLES = 4
NAMESPACE_MAXIMUM_BUNDLES = 128

__all__ = [
    "NamespaceResources",
    "PartitionedTopicResources",
    "PulsarResources",
    "TenantResources",
    "refuse_system_deletion",
]

log = logging.getLogger(__name__)

TENANTS_ROOT = "/admin/policies"
PARTITIONED_TOPICS_ROOT = "/admin/partitioned-topics"

# Optimistic-concurrency retries for read-modify-write updates. Contention on one
# namespace's policies is rare (admin requests), so a few attempts always suffice;
# the bound keeps a pathological loop from spinning forever.
UPDATE_ATTEMPTS_MAX = 8


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


def refuse_system_deletion(name: str) -> None:
    """Refuse deleting the broker's system tenant or namespace: its coordinators'
    logs and tables live there while the broker runs.

    Raises:
        PreconditionFailedError: ``name`` is ``pulsar`` or ``pulsar/system`` (tagged as
            a refusal of hostile input).
    """
    if name in (SYSTEM_TENANT, SYSTEM_NAMESPACE):
        raise tag_refusal(
            PreconditionFailedError(
                f"{name} holds the broker's own topics and cannot be deleted"
            ),
            REFUSED_SYSTEM_NAMESPACE,
        )


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
            PreconditionFailedError: the broker's system tenant.
        """
        refuse_system_deletion(tenant)
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

    def __init__(
        self,
        store: MetadataStore,
        tenants: TenantResources,
        *,
        default_bundles: int = DEFAULT_NUMBER_OF_NAMESPACE_BUNDLES,
        max_bundles: int = NAMESPACE_MAXIMUM_BUNDLES,
    ) -> None:
        """``default_bundles`` (``defaultNumberOfNamespaceBundles``): the bundles a
        namespace created without any gets; ``max_bundles``
        (``loadBalancerNamespaceMaximumBundles``): the most one may ask for."""
        self._store = store
        self._tenants = tenants
        self.default_bundles = default_bundles
        self.max_bundles = max_bundles

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
        policies = policies or Policies()
        if policies.bundles is None:
            # Pulsar records the bundles when it creates the namespace, so every
            # broker of a cluster maps its topics to the same bundles.
            policies = replace(policies, bundles=BundlesData.even(self.default_bundles))
        elif policies.bundles.num_bundles > self.max_bundles:
            raise tag_refusal(
                InvalidResourceError(
                    "Invalid number of bundles. Number of bundles has to be in the "
                    f"range of (0, {self.max_bundles}]."
                ),
                REFUSED_BUNDLES,
            )
        _create(self._store, path, policies.to_json(), "Namespace")

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
            PreconditionFailedError: the broker's system namespace.
        """
        refuse_system_deletion(namespace)
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
    ``max_partitions`` is ``maxNumPartitionsPerPartitionedTopic`` (0: no bound but a
    Java int's); creating or growing a topic beyond it is refused.
    """

    def __init__(
        self,
        store: MetadataStore,
        namespaces: NamespaceResources,
        max_partitions: int = 0,
    ) -> None:
        self._store = store
        self._namespaces = namespaces
        self.max_partitions = max_partitions

    def check_partitions(self, partitions: int) -> None:
        """Raises: NotAcceptableError: ``partitions`` is below 1 or above the bound."""
        check_partition_count(partitions, self.max_partitions)

    @staticmethod
    def namespace_path(namespace: str, domain: str = PERSISTENT) -> str:
        tenant, ns = parse_namespace(namespace)
        return f"{PARTITIONED_TOPICS_ROOT}/{tenant}/{ns}/{domain}"

    @classmethod
    def path(cls, topic: str) -> str:
        """The metadata key of ``topic``'s partitioned-topic metadata (persistent
        and non-persistent topics each under their domain, as in Pulsar)."""
        parts = parse_topic(topic)
        return (
            f"{cls.namespace_path(parts.namespace_name, parts.domain)}/"
            f"{quote(parts.local_name, safe='')}"
        )

    def create(self, topic: str, partitions: int) -> None:
        """Record a new partitioned topic.

        Raises:
            InvalidTopicName: not a valid topic name (412).
            InvalidResourceError: ``-partition-`` in the name (412).
            NotAcceptableError: ``partitions < 1`` or above the bound.
            ResourceNotFoundError: the namespace does not exist.
            AlreadyExistsError: the partitioned topic exists.
        """
        path = self.path(topic)
        parts = parse_topic(topic)
        if PARTITION_SUFFIX in parts.local_name:
            raise InvalidResourceError(
                f"Partitioned topic name must not contain '{PARTITION_SUFFIX}'"
            )
        self.check_partitions(partitions)
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

    def listed_partitions(self, topic: str) -> int:
        """How many of ``topic``'s partitions a namespace listing names: its count,
        or 0 for a count above the bound, which only a broker without the bound can
        have recorded. Such a topic's partitions are listed only once used (they are
        registered topics then), so no listing of its namespace is larger than the
        bound allows; it can still be deleted."""
        metadata = self.get(topic)
        if metadata is None:
            return 0
        if 0 < self.max_partitions < metadata.partitions:
            log.warning(
                "%s has %d partitions, more than maxNumPartitionsPerPartitionedTopic=%d: "
                "listings name only the partitions in use; delete and recreate it",
                topic, metadata.partitions, self.max_partitions,
            )
            return 0
        return metadata.partitions

    def list(self, namespace: str, domain: str = PERSISTENT) -> list[str]:
        """Full names of the namespace's partitioned topics of ``domain``, sorted."""
        tenant, ns = parse_namespace(namespace)
        return [
            f"{domain}://{tenant}/{ns}/{unquote(child)}"
            for child in _children(self._store, self.namespace_path(namespace, domain))
        ]

    def update(self, topic: str, partitions: int) -> PartitionedTopicMetadata:
        """Raise the partition count (it can never shrink); return the new metadata.

        Raises:
            InvalidTopicName, InvalidResourceError: bad name (412).
            NotAcceptableError: ``partitions < 1`` or above the bound.
            ResourceNotFoundError: not a partitioned topic.
            ConflictError: ``partitions`` is not more than the current count.
        """
        path = self.path(topic)
        self.check_partitions(partitions)
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
    """All metadata resources over one store (Pulsar's ``PulsarResources``).

    ``max_partitions`` bounds partitioned topics (``PartitionedTopicResources``).
    """

    def __init__(
        self,
        store: MetadataStore,
        *,
        max_partitions: int = 0,
        default_bundles: int = DEFAULT_NUMBER_OF_NAMESPACE_BUNDLES,
        max_bundles: int = NAMESPACE_MAXIMUM_BUNDLES,
    ) -> None:
        self.store = store
        self.clusters = ClusterResources(store)
        self.tenants = TenantResources(store)
        self.namespaces = NamespaceResources(
            store, self.tenants, default_bundles=default_bundles, max_bundles=max_bundles
        )
        self.partitioned_topics = PartitionedTopicResources(
            store, self.namespaces, max_partitions
        )

    def bootstrap_standalone(self, cluster_name: str) -> list[str]:
        """Create what a Pulsar standalone starts with, if missing; returns what it
        created (``tenant public``, ``namespace public/default``, ...).

        Tenants ``public`` and ``pulsar``; namespaces ``public/default`` and
        ``pulsar/system``. Idempotent, so it runs on every start.
        """
        info = TenantInfo(allowed_clusters=(cluster_name,))
        policies = Policies(replication_clusters=(cluster_name,))
        created: list[str] = []
        for tenant, namespace in (
            ("public", "public/default"),
            ("pulsar", "pulsar/system"),
        ):
            if not self.tenants.exists(tenant):
                try:
                    self.tenants.create(tenant, info)
                    created.append(f"tenant {tenant}")
                except AlreadyExistsError:
                    pass
            if not self.namespaces.exists(namespace):
                try:
                    self.namespaces.create(namespace, policies)
                    created.append(f"namespace {namespace}")
                except AlreadyExistsError:
                    pass
        return created
