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
from quasar.protocol.int64 import INT64_MAX

from .bundles import BundlesData

__all__ = [
    "AUTH_ACTIONS",
    "auth_actions",
    "SCHEMA_COMPATIBILITY_STRATEGIES",
    "SUBSCRIPTION_AUTH_MODES",
    "AuthPolicies",
    "Grants",
    "AutoTopicCreationOverride",
    "BACKLOG_QUOTA_POLICIES",
    "BACKLOG_QUOTA_TYPES",
    "BacklogQuota",
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


def refuse_unknown_keys(obj: dict[str, Any], known: frozenset[str], what: str) -> None:
    """Refuse keys of an admin request body that quasar does not implement.

    Stored values are read leniently (a newer version may have written more), but a
    request setting a policy quasar would not enforce must fail, not be dropped.

    Raises:
        InvalidValueError: a key outside ``known``.
    """
    unknown = sorted(k for k in obj if k not in known)
    if unknown:
        raise InvalidValueError(
            f"{what}: field(s) not supported by quasar: {', '.join(unknown)}"
        )


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
    def from_json(cls, obj: Any, strict: bool = False) -> RetentionPolicies:
        """``strict``: refuse unknown keys (an admin request body)."""
        obj = _expect(obj, dict, "retention policies")
        if strict:
            refuse_unknown_keys(obj, _RETENTION_KEYS, "retention policies")
        return cls(
            retention_time_in_minutes=_expect(
                obj.get("retentionTimeInMinutes", 0), int, "retentionTimeInMinutes"
            ),
            retention_size_in_mb=_expect(
                obj.get("retentionSizeInMB", 0), int, "retentionSizeInMB"
            ),
        )


_RETENTION_KEYS = frozenset({"retentionTimeInMinutes", "retentionSizeInMB"})
_AUTO_CREATION_KEYS = frozenset(
    {"allowAutoTopicCreation", "topicType", "defaultNumPartitions"}
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
    def from_json(cls, obj: Any, strict: bool = False) -> AutoTopicCreationOverride:
        """``strict``: refuse unknown keys (an admin request body)."""
        obj = _expect(obj, dict, "autoTopicCreationOverride")
        if strict:
            refuse_unknown_keys(obj, _AUTO_CREATION_KEYS, "autoTopicCreationOverride")
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


# Pulsar's BacklogQuotaType: a quota on the backlog's size or on its oldest message's age.
BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
# Pulsar's BacklogQuota.RetentionPolicy: what the broker does once a quota is exceeded.
BACKLOG_QUOTA_POLICIES = (
    "producer_request_hold",
    "producer_exception",
    "consumer_backlog_eviction",
)
_JAVA_INT_MAX = (1 << 31) - 1
# "limit" is the deprecated name of limitSize that older Pulsar admin clients send.
_BACKLOG_QUOTA_KEYS = frozenset({"limit", "limitSize", "limitTime", "policy"})


@dataclass(frozen=True)
class BacklogQuota:
    """Pulsar's BacklogQuota: bytes and seconds of backlog allowed; -1 = no limit."""

    limit_size: int = -1
    limit_time: int = -1
    policy: str = "producer_request_hold"

    def __post_init__(self) -> None:
        if self.limit_size < -1 or self.limit_time < -1:
            raise InvalidResourceError("Backlog quota limits must be -1 or positive")
        # Pulsar's types: limitSize a Java long, limitTime a Java int.
        if self.limit_size > INT64_MAX or self.limit_time > _JAVA_INT_MAX:
            raise InvalidResourceError("Backlog quota limit is too large")
        if self.policy not in BACKLOG_QUOTA_POLICIES:
            raise InvalidResourceError(
                f"Invalid backlog quota policy {self.policy!r}; expected one of "
                + ", ".join(BACKLOG_QUOTA_POLICIES)
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "limitSize": self.limit_size,
            "limitTime": self.limit_time,
            "policy": self.policy,
        }

    @classmethod
    def from_json(cls, obj: Any, strict: bool = False) -> BacklogQuota:
        """``strict``: refuse unknown keys and a missing policy (an admin request)."""
        obj = _expect(obj, dict, "backlog quota")
        if strict:
            refuse_unknown_keys(obj, _BACKLOG_QUOTA_KEYS, "backlog quota")
            if obj.get("policy") is None:
                raise InvalidValueError("backlog quota: policy is required")
        size = obj.get("limitSize")
        if size is None:
            size = obj.get("limit", -1)
        time = obj.get("limitTime")
        policy = obj.get("policy") or "producer_request_hold"
        return cls(
            limit_size=_expect(size, int, "limitSize"),
            limit_time=_expect(-1 if time is None else time, int, "limitTime"),
            policy=_expect(policy, str, "policy"),
        )


def _backlog_quota_map(obj: Any) -> dict[str, BacklogQuota]:
    obj = _expect(obj, dict, "backlog_quota_map")
    out: dict[str, BacklogQuota] = {}
    for kind, quota in obj.items():
        if kind not in BACKLOG_QUOTA_TYPES:
            raise InvalidResourceError(
                f"Invalid backlog quota type {kind!r}; expected one of "
                + ", ".join(BACKLOG_QUOTA_TYPES)
            )
        out[kind] = BacklogQuota.from_json(quota)
    return out


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
    # None: the broker's isAllowAutoUpdateSchemaEnabled / isSchemaValidationEnforced.
    is_allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool | None = None
    auth_policies: AuthPolicies = field(default_factory=AuthPolicies)
    subscription_auth_mode: str = "None"
    message_ttl_in_seconds: int | None = None
    backlog_quota_map: dict[str, BacklogQuota] = field(default_factory=dict)
    # The namespace's bundle boundaries (resources/bundles.py); None for a namespace
    # created without them: the broker's defaultNumberOfNamespaceBundles applies.
    bundles: BundlesData | None = None

    def __post_init__(self) -> None:
        ttl = self.message_ttl_in_seconds
        if ttl is not None and not 0 <= ttl <= _JAVA_INT_MAX:
            raise InvalidResourceError("Invalid value for message TTL")
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
            "is_allow_auto_update_schema": self.is_allow_auto_update_schema,
            "schema_validation_enforced": self.schema_validation_enforced,
            "auth_policies": self.auth_policies.to_json(),
            "subscription_auth_mode": self.subscription_auth_mode,
            "message_ttl_in_seconds": self.message_ttl_in_seconds,
            "backlog_quota_map": {
                kind: quota.to_json() for kind, quota in sorted(self.backlog_quota_map.items())
            },
            **({} if self.bundles is None else {"bundles": self.bundles.to_json()}),
        }

    @classmethod
    def from_json(cls, obj: Any, strict: bool = False) -> Policies:
        """``strict`` (an admin request body): refuse fields quasar does not enforce.

        A Java admin client sends every field of Pulsar's Policies, most at their
        default; a field quasar does not implement is refused only when it asks for
        something (a value other than its default), so ``pulsar-admin namespaces
        create`` works while ``--message-ttl``-like settings quasar lacks fail loudly.
        """
        obj = _expect(obj, dict, "Policies")
        if strict:
            _refuse_unsupported_policies(obj)
        retention = obj.get("retention_policies")
        dedup = obj.get("deduplicationEnabled")
        auto = obj.get("autoTopicCreationOverride")
        strategy = obj.get("schema_compatibility_strategy") or "UNDEFINED"
        auth = obj.get("auth_policies")
        auto_update = obj.get("is_allow_auto_update_schema")
        enforced = obj.get("schema_validation_enforced")
        auth_mode = obj.get("subscription_auth_mode") or "None"
        ttl = obj.get("message_ttl_in_seconds")
        bundles = obj.get("bundles")
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
            is_allow_auto_update_schema=None
            if auto_update is None
            else _expect(auto_update, bool, "is_allow_auto_update_schema"),
            schema_validation_enforced=None
            if enforced is None
            else _expect(enforced, bool, "schema_validation_enforced"),
            auth_policies=AuthPolicies() if auth is None else AuthPolicies.from_json(auth),
            subscription_auth_mode=_expect(auth_mode, str, "subscription_auth_mode"),
            message_ttl_in_seconds=None if ttl is None else _expect(
                ttl, int, "message_ttl_in_seconds"
            ),
            backlog_quota_map=_backlog_quota_map(obj.get("backlog_quota_map") or {}),
            # An empty object (some admin clients send one) asks for nothing.
            bundles=None if not bundles else BundlesData.from_json(bundles),
        )


_POLICIES_KEYS = frozenset({
    "replication_clusters", "retention_policies", "deduplicationEnabled",
    "autoTopicCreationOverride", "schema_compatibility_strategy", "auth_policies",
    "is_allow_auto_update_schema", "schema_validation_enforced",
    "subscription_auth_mode", "message_ttl_in_seconds", "backlog_quota_map",
    # Bundles split a namespace among the brokers of a cluster (docs/cluster.md).
    "bundles",
})
# Fields of Pulsar's Policies quasar does not implement, at the default value a Java
# client serialises for them: accepted, since they ask for nothing.
_DEFAULT_POLICY_VALUES: dict[str, Any] = {
    "schema_auto_update_compatibility_strategy": "Full",
    "offload_threshold": -1,
    "offload_threshold_in_seconds": -1,
}


def _is_default(key: str, value: Any) -> bool:
    if key in _DEFAULT_POLICY_VALUES and value == _DEFAULT_POLICY_VALUES[key]:
        return True
    return value is None or value is False or value == {} or value == []


def _refuse_unsupported_policies(obj: dict[str, Any]) -> None:
    unsupported = sorted(
        k for k, v in obj.items() if k not in _POLICIES_KEYS and not _is_default(k, v)
    )
    if unsupported:
        raise InvalidValueError(
            "Policies field(s) not supported by quasar: " + ", ".join(unsupported)
        )
    quotas = obj.get("backlog_quota_map") or {}
    for quota in _expect(quotas, dict, "backlog_quota_map").values():
        BacklogQuota.from_json(quota, strict=True)
    retention = obj.get("retention_policies")
    if retention is not None:
        RetentionPolicies.from_json(retention, strict=True)
    auto = obj.get("autoTopicCreationOverride")
    if auto is not None:
        AutoTopicCreationOverride.from_json(auto, strict=True)


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
