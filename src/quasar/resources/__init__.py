"""Tenants, namespaces and partitioned-topic metadata: their JSON values
(``models``) and their keys in the metadata store (``store``).

Below the broker and the admin API, which both use them; above ``quasar.storage``
(the metadata store) and ``quasar.protocol`` (names).
"""

from quasar.resources.models import (
    SCHEMA_COMPATIBILITY_STRATEGIES,
    AutoTopicCreationOverride,
    PartitionedTopicMetadata,
    Policies,
    RetentionPolicies,
    TenantInfo,
)
from quasar.resources.store import (
    NamespaceResources,
    PartitionedTopicResources,
    PulsarResources,
    TenantResources,
)

__all__ = [
    "SCHEMA_COMPATIBILITY_STRATEGIES",
    "AutoTopicCreationOverride",
    "NamespaceResources",
    "PartitionedTopicMetadata",
    "PartitionedTopicResources",
    "Policies",
    "PulsarResources",
    "RetentionPolicies",
    "TenantInfo",
    "TenantResources",
]
