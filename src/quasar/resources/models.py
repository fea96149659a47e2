"""The JSON values of tenants, namespaces and partitioned topics, shaped like Pulsar's.

The admin API serves them and the metadata store keeps them, byte for byte the same
JSON: ``TenantInfo`` ``{adminRoles, allowedClusters}``, ``Policies``
``{retention_policies, deduplicationEnabled, auth_policies, ...}``,
``PartitionedTopicMetadata`` ``{partitions}``.

``from_json`` raises ``InvalidValueError`` (400) on a value of the wrong shape and
``InvalidResourceError`` (412) on a well-formed but invalid one. It ignores unknown keys,
as Pulsar's JSON mapper does, so values written by a newer version still load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quasar.errors import InvalidResourceError, InvalidValueError

__all__ = [
    "AUTH_ACTIONS",
    "auth_actions",
    "SCHEMA_COMPATIBILITY_STRATEGIES",
    "SUBSCRIPTION_AUTH_MODES",
    "AuthPolicies",
    "Grants",
    "AutoTopicCreationOverride",
    "PartitionedTopicMetadata",
    "Policies",
    "RetentionPolicies",
    "TenantInfo",
]

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


# Pulsar's AuthAction names, in its declaration order (grants are listed in it).
AUTH_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")

# Pulsar's SubscriptionAuthMode: "Prefix" requires a subscription name to start with
# the consuming role.
SUBSCRIPTION_AUTH_MODES = ("None", "Prefix")


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


def auth_actions(obj: Any, what: str = "actions") -> frozenset[str]:
    """A JSON list of AuthAction names as a set.

    Raises:
        InvalidValueError: not a list of strings.
        InvalidResourceError: a name that is not one of ``AUTH_ACTIONS``.
    """
    actions = frozenset(_str_list(_expect(obj, list, what), what))
    unknown = sorted(actions - set(AUTH_ACTIONS))
    if unknown:
        raise InvalidResourceError(
            f"Unknown {what}: {', '.join(unknown)} (valid: {', '.join(AUTH_ACTIONS)})"
        )
    return actions


def _ordered(actions: frozenset[str]) -> list[str]:
    return [a for a in AUTH_ACTIONS if a in actions]


Grants = dict[str, frozenset[str]]


def _grants_from_json(obj: Any, what: str) -> Grants:
    obj = _expect(obj, dict, what)
    return {
        _expect(role, str, what): auth_actions(actions, f"{what} actions")
        for role, actions in obj.items()
    }


def _grants_to_json(grants: Grants) -> dict[str, list[str]]:
    return {role: _ordered(actions) for role, actions in sorted(grants.items())}


@dataclass(frozen=True)
class AuthPolicies:
    """Pulsar's AuthPolicies: who may do what in a namespace.

    ``namespace_auth`` grants actions on every topic of the namespace by role;
    ``destination_auth`` grants them on one topic (by full topic name);
    ``subscription_auth_roles`` restricts a subscription to the listed roles.
    """

    namespace_auth: Grants = field(default_factory=dict)
    destination_auth: dict[str, Grants] = field(default_factory=dict)
    subscription_auth_roles: dict[str, frozenset[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace_auth": _grants_to_json(self.namespace_auth),
            "destination_auth": {
                topic: _grants_to_json(grants)
                for topic, grants in sorted(self.destination_auth.items())
            },
            "subscription_auth_roles": {
                sub: sorted(roles)
                for sub, roles in sorted(self.subscription_auth_roles.items())
            },
        }

    @classmethod
    def from_json(cls, obj: Any) -> AuthPolicies:
        obj = _expect(obj, dict, "auth_policies")
        destination = _expect(obj.get("destination_auth") or {}, dict, "destination_auth")
        subscriptions = _expect(
            obj.get("subscription_auth_roles") or {}, dict, "subscription_auth_roles"
        )
        return cls(
            namespace_auth=_grants_from_json(
                obj.get("namespace_auth") or {}, "namespace_auth"
            ),
            destination_auth={
                _expect(topic, str, "destination_auth"): _grants_from_json(
                    grants, "destination_auth"
                )
                for topic, grants in destination.items()
            },
            subscription_auth_roles={
                _expect(sub, str, "subscription_auth_roles"): frozenset(
                    _str_list(roles, "subscription_auth_roles")
                )
                for sub, roles in subscriptions.items()
            },
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
    auth_policies: AuthPolicies = field(default_factory=AuthPolicies)
    subscription_auth_mode: str = "None"

    def __post_init__(self) -> None:
        if self.schema_compatibility_strategy not in SCHEMA_COMPATIBILITY_STRATEGIES:
            raise InvalidResourceError(
                f"Invalid schema compatibility strategy: {self.schema_compatibility_strategy!r}"
            )
        if self.subscription_auth_mode not in SUBSCRIPTION_AUTH_MODES:
            raise InvalidResourceError(
                f"Invalid subscription auth mode: {self.subscription_auth_mode!r} "
                f"(valid: {', '.join(SUBSCRIPTION_AUTH_MODES)})"
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
            "auth_policies": self.auth_policies.to_json(),
            "subscription_auth_mode": self.subscription_auth_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Policies:
        obj = _expect(obj, dict, "Policies")
        retention = obj.get("retention_policies")
        dedup = obj.get("deduplicationEnabled")
        auto = obj.get("autoTopicCreationOverride")
        strategy = obj.get("schema_compatibility_strategy") or "UNDEFINED"
        auth = obj.get("auth_policies")
        auth_mode = obj.get("subscription_auth_mode") or "None"
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
            auth_policies=AuthPolicies() if auth is None else AuthPolicies.from_json(auth),
            subscription_auth_mode=_expect(auth_mode, str, "subscription_auth_mode"),
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
