"""``/admin/v2/namespaces``: namespaces and the namespace policies quasar serves.

GET of a policy that was never set at namespace level answers 204 No Content, as
Pulsar does (its handlers return ``null``, which JAX-RS sends as 204); the broker-wide
default from the configuration applies then.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from quasar.admin.access import SUPERUSER, TENANT_ADMIN, access, namespace_grant
from quasar.admin.cluster import CLUSTER_KEY, unload_namespace_bundles
from quasar.admin.http import (
    broker_of,
    existing_namespace,
    json_response,
    namespace_param,
    no_content,
    query_bool,
    read_json,
    tenant_param,
)
from quasar.admin.listing import json_list_response, namespace_topics
from quasar.auth.authorization import CONSUME
from quasar.errors import (
    BadRequestError,
    ConflictError,
    InvalidResourceError,
    TopicNotFound,
)
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import is_hidden_from_listings
from quasar.resources.bundles import BundlesData
from quasar.resources.models import (
    BACKLOG_QUOTA_TYPES,
    SCHEMA_COMPATIBILITY_STRATEGIES,
    AutoTopicCreationOverride,
    BacklogQuota,
    Policies,
    RetentionPolicies,
)
from quasar.resources.partitions import JAVA_INT_MAX
from quasar.resources.store import refuse_system_deletion

routes = web.RouteTableDef()

NS = "/admin/v2/namespaces/{tenant}/{namespace}"


@routes.get("/admin/v2/namespaces/{tenant}")
@access(TENANT_ADMIN)
async def list_namespaces(request: web.Request) -> web.Response:
    tenant = tenant_param(request)
    return json_response(broker_of(request).resources.namespaces.list(tenant))


@routes.put(NS)
@access(TENANT_ADMIN)
async def create_namespace(request: web.Request) -> web.Response:
    namespace = namespace_param(request)
    broker = broker_of(request)
    body = await read_json(request, required=False)
    policies = Policies() if body is None else Policies.from_json(body, strict=True)
    _check_quotas_fit_retention(policies.backlog_quota_map, policies.retention_policies)
    clusters = policies.replication_clusters or (broker.cluster_name,)
    unknown = sorted(set(clusters) - {broker.cluster_name})
    if unknown:
        raise InvalidResourceError(f"Clusters do not exist: {', '.join(unknown)}")
    broker.resources.namespaces.create(
        namespace, replace(policies, replication_clusters=clusters)
    )
    return no_content()


@routes.get(NS)
@access(TENANT_ADMIN)
async def get_policies(request: web.Request) -> web.Response:
    namespace = namespace_param(request)
    return json_response(
        broker_of(request).resources.namespaces.get(namespace).to_json()
    )


@routes.get(NS + "/bundles")
@access(TENANT_ADMIN)
async def get_bundles(request: web.Request) -> web.Response:
    """The namespace's BundlesData. A namespace created without boundaries is
    divided evenly into ``defaultNumberOfNamespaceBundles``, the same division the
    cluster uses to place its topics, so every broker answers alike."""
    namespace = namespace_param(request)
    namespaces = broker_of(request).resources.namespaces
    bundles = namespaces.get(namespace).bundles
    if bundles is None:
        bundles = BundlesData.even(namespaces.default_bundles)
    return json_response(bundles.to_json())


@routes.delete(NS)
@access(TENANT_ADMIN)
async def delete_namespace(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    # Before any of its topics goes: the system namespace is never deleted.
    refuse_system_deletion(namespace)
    force = query_bool(request, "force")
    broker = broker_of(request)
    resources = broker.resources
    partitioned = resources.partitioned_topics.list(namespace)
    # Non-partitioned topics only exist in the broker; partitions of partitioned
    # topics go away with their parent.
    parents = set(partitioned)
    others = [
        t for t in broker.list_topics(namespace) if parse_topic(t).base.full not in parents
    ]
    # As in Pulsar, system topics (transaction-buffer snapshots, ...) do not keep a
    # namespace alive; they are deleted with it.
    # Non-persistent topics in use keep it alive too, and their partition counts go
    # with it.
    non_persistent = broker.non_persistent_admin
    np_partitioned = non_persistent.list_partitioned_topics(namespace)
    np_parents = set(np_partitioned)
    np_loaded = [
        t for t in non_persistent.list_topics(namespace)
        if parse_topic(t).base.full not in np_parents
    ]
    user_topics = [
        t for t in partitioned + others if not is_hidden_from_listings(parse_topic(t))
    ] + np_partitioned + np_loaded
    if user_topics and not force:
        raise ConflictError("Cannot delete non empty namespace")
    for topic in partitioned:
        await broker.delete_partitioned_topic(topic, force=True)
    for topic in others:
        await broker.delete_topic(topic, force=True)
    for topic in np_partitioned:
        await non_persistent.delete_partitioned_topic(topic, force=True)
    for topic in np_loaded:
        with contextlib.suppress(TopicNotFound):  # unloaded meanwhile: nothing left
            await non_persistent.delete_topic(topic, force=True)
    resources.namespaces.delete(namespace, force=True)
    return no_content()


@routes.get(NS + "/topics")
@access(namespace_grant(CONSUME))
async def list_namespace_topics(request: web.Request) -> web.StreamResponse:
    namespace = existing_namespace(request)
    include_system = query_bool(request, "includeSystemTopic")
    # Pulsar's Mode (the pulsar client's HTTP lookup sends it): every topic this
    # broker serves is persistent, so NON_PERSISTENT lists none.
    mode = request.query.get("mode", "PERSISTENT")
    if mode not in ("PERSISTENT", "NON_PERSISTENT", "ALL"):
        raise BadRequestError(f"Invalid mode {mode!r}: PERSISTENT, NON_PERSISTENT or ALL")
    topics = namespace_topics(broker_of(request), namespace, include_system)
    return await json_list_response(request, [] if mode == "NON_PERSISTENT" else topics)


# --------------------------------------------------------------------------------------
# Policies: GET reads the namespace-level value, POST sets it, DELETE removes it.


def _policy_value(
    request: web.Request, read: Callable[[Policies], Any]
) -> web.Response:
    namespace = namespace_param(request)
    value = read(broker_of(request).resources.namespaces.get(namespace))
    return no_content() if value is None else json_response(value)


async def _set_policy(
    request: web.Request, change: Callable[[Policies], Policies]
) -> web.Response:
    namespace = namespace_param(request)
    broker_of(request).resources.namespaces.update(namespace, change)
    return no_content()


async def _reload_topics(request: web.Request) -> web.Response:
    """Retention and deduplication are fixed when a topic loads: the namespace's
    loaded topics are unloaded so that they load again under the new policy (their
    clients reconnect, as after a namespace unload)."""
    namespace = namespace_param(request)
    await broker_of(request).policy_operations.unload_namespace(namespace)
    return no_content()


def _quotas_fit_retention(
    quotas: dict[str, BacklogQuota], retention: RetentionPolicies | None
) -> bool:
    """Pulsar's rule: a backlog quota must stay below a limited retention, or the
    backlog could be kept longer (or larger) than consumed data."""
    if retention is None:
        return True
    size_mb = retention.retention_size_in_mb
    minutes = retention.retention_time_in_minutes
    for quota in quotas.values():
        if size_mb > 0 and quota.limit_size >= size_mb * 1024 * 1024:
            return False
        if minutes > 0 and quota.limit_time >= minutes * 60:
            return False
    return True


def _check_quotas_fit_retention(
    quotas: dict[str, BacklogQuota], retention: RetentionPolicies | None
) -> None:
    if not _quotas_fit_retention(quotas, retention):
        raise InvalidResourceError(
            "Backlog Quota exceeds configured retention quota for namespace. "
            "Please increase retention quota and retry"
        )


@routes.get(NS + "/retention")
@access(TENANT_ADMIN)
async def get_retention(request: web.Request) -> web.Response:
    return _policy_value(
        request,
        lambda p: (
            None if p.retention_policies is None else p.retention_policies.to_json()
        ),
    )


@routes.post(NS + "/retention")
@access(TENANT_ADMIN)
async def set_retention(request: web.Request) -> web.Response:
    retention = RetentionPolicies.from_json(
        await read_json(request, required=True), strict=True
    )

    def change(p: Policies) -> Policies:
        if not _quotas_fit_retention(p.backlog_quota_map, retention):
            raise InvalidResourceError(
                "Retention Quota must exceed configured backlog quota for namespace."
            )
        return replace(p, retention_policies=retention)

    await _set_policy(request, change)
    return await _reload_topics(request)


@routes.delete(NS + "/retention")
@access(TENANT_ADMIN)
async def remove_retention(request: web.Request) -> web.Response:
    await _set_policy(request, lambda p: replace(p, retention_policies=None))
    return await _reload_topics(request)


@routes.get(NS + "/deduplication")
@access(TENANT_ADMIN)
async def get_deduplication(request: web.Request) -> web.Response:
    return _policy_value(request, lambda p: p.deduplication_enabled)


@routes.post(NS + "/deduplication")
@access(TENANT_ADMIN)
async def set_deduplication(request: web.Request) -> web.Response:
    enabled = await read_json(request, required=True)
    if not isinstance(enabled, bool):
        raise BadRequestError("The body must be true or false")
    await _set_policy(request, lambda p: replace(p, deduplication_enabled=enabled))
    return await _reload_topics(request)


@routes.delete(NS + "/deduplication")
@access(TENANT_ADMIN)
async def remove_deduplication(request: web.Request) -> web.Response:
    await _set_policy(request, lambda p: replace(p, deduplication_enabled=None))
    return await _reload_topics(request)


@routes.get(NS + "/autoTopicCreation")
@access(TENANT_ADMIN)
async def get_auto_topic_creation(request: web.Request) -> web.Response:
    return _policy_value(
        request,
        lambda p: (
            None
            if p.auto_topic_creation_override is None
            else p.auto_topic_creation_override.to_json()
        ),
    )


@routes.post(NS + "/autoTopicCreation")
@access(TENANT_ADMIN)
async def set_auto_topic_creation(request: web.Request) -> web.Response:
    override = AutoTopicCreationOverride.from_json(
        await read_json(request, required=True), strict=True
    )
    if override.topic_type == "partitioned" and override.default_num_partitions:
        # Auto-creation records this many partitions for every new topic name a
        # client looks up; Pulsar refuses an override above the broker's bound.
        broker_of(request).resources.partitioned_topics.check_partitions(
            override.default_num_partitions
        )
    return await _set_policy(
        request, lambda p: replace(p, auto_topic_creation_override=override)
    )


@routes.delete(NS + "/autoTopicCreation")
@access(TENANT_ADMIN)
async def remove_auto_topic_creation(request: web.Request) -> web.Response:
    return await _set_policy(
        request, lambda p: replace(p, auto_topic_creation_override=None)
    )


@routes.get(NS + "/schemaCompatibilityStrategy")
@access(TENANT_ADMIN)
async def get_schema_compatibility(request: web.Request) -> web.Response:
    return _policy_value(request, lambda p: p.schema_compatibility_strategy)


@routes.put(NS + "/schemaCompatibilityStrategy")
@access(TENANT_ADMIN)
async def set_schema_compatibility(request: web.Request) -> web.Response:
    strategy = await read_json(request, required=True)
    if not isinstance(strategy, str):
        raise BadRequestError("The body must be a JSON string")
    if strategy not in SCHEMA_COMPATIBILITY_STRATEGIES:
        raise InvalidResourceError(
            "Invalid schema compatibility strategy; expected one of "
            + ", ".join(SCHEMA_COMPATIBILITY_STRATEGIES)
        )
    return await _set_policy(
        request, lambda p: replace(p, schema_compatibility_strategy=strategy)
    )


@routes.get(NS + "/isAllowAutoUpdateSchema")
@access(TENANT_ADMIN)
async def get_allow_auto_update_schema(request: web.Request) -> web.Response:
    return _policy_value(request, lambda p: p.is_allow_auto_update_schema)


@routes.post(NS + "/isAllowAutoUpdateSchema")
@access(TENANT_ADMIN)
async def set_allow_auto_update_schema(request: web.Request) -> web.Response:
    allowed = await _bool_body(request)
    return await _set_policy(request, lambda p: replace(p, is_allow_auto_update_schema=allowed))


@routes.get(NS + "/schemaValidationEnforced")
@access(TENANT_ADMIN)
async def get_schema_validation_enforced(request: web.Request) -> web.Response:
    return _policy_value(request, lambda p: p.schema_validation_enforced)


@routes.post(NS + "/schemaValidationEnforced")
@access(TENANT_ADMIN)
async def set_schema_validation_enforced(request: web.Request) -> web.Response:
    enforced = await _bool_body(request)
    return await _set_policy(request, lambda p: replace(p, schema_validation_enforced=enforced))


async def _bool_body(request: web.Request) -> bool:
    value = await read_json(request, required=True)
    if not isinstance(value, bool):
        raise BadRequestError("The body must be a JSON boolean")
    return value


# --------------------------------------------------------------------------------------
# Message TTL and backlog quotas (enforced by broker/message_expiry.py and
# broker/backlog_quota.py).


@routes.get(NS + "/messageTTL")
@access(TENANT_ADMIN)
async def get_message_ttl(request: web.Request) -> web.Response:
    return _policy_value(request, lambda p: p.message_ttl_in_seconds)


@routes.post(NS + "/messageTTL")
@access(TENANT_ADMIN)
async def set_message_ttl(request: web.Request) -> web.Response:
    ttl = await read_json(request, required=True)
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise BadRequestError("The body must be the message TTL in seconds")
    if not 0 <= ttl <= JAVA_INT_MAX:
        raise InvalidResourceError("Invalid value for message TTL")
    return await _set_policy(request, lambda p: replace(p, message_ttl_in_seconds=ttl))


@routes.delete(NS + "/messageTTL")
@access(TENANT_ADMIN)
async def remove_message_ttl(request: web.Request) -> web.Response:
    return await _set_policy(request, lambda p: replace(p, message_ttl_in_seconds=None))


def _quota_type(request: web.Request) -> str:
    kind = request.query.get("backlogQuotaType", "destination_storage")
    if kind not in BACKLOG_QUOTA_TYPES:
        raise BadRequestError(
            f"Invalid backlogQuotaType {kind!r}; expected one of "
            + ", ".join(BACKLOG_QUOTA_TYPES)
        )
    return kind


@routes.get(NS + "/backlogQuotaMap")
@access(TENANT_ADMIN)
async def get_backlog_quota_map(request: web.Request) -> web.Response:
    namespace = namespace_param(request)
    policies = broker_of(request).resources.namespaces.get(namespace)
    return json_response(
        {kind: quota.to_json() for kind, quota in sorted(policies.backlog_quota_map.items())}
    )


@routes.post(NS + "/backlogQuota")
@access(TENANT_ADMIN)
async def set_backlog_quota(request: web.Request) -> web.Response:
    kind = _quota_type(request)
    quota = BacklogQuota.from_json(await read_json(request, required=True), strict=True)
    if kind == "destination_storage" and quota.limit_size < 0:
        raise InvalidResourceError("destination_storage quota needs limitSize >= 0")
    if kind == "message_age" and quota.limit_time < 0:
        raise InvalidResourceError("message_age quota needs limitTime >= 0")

    def change(p: Policies) -> Policies:
        _check_quotas_fit_retention({kind: quota}, p.retention_policies)
        return replace(p, backlog_quota_map={**p.backlog_quota_map, kind: quota})

    return await _set_policy(request, change)


@routes.delete(NS + "/backlogQuota")
@access(TENANT_ADMIN)
async def remove_backlog_quota(request: web.Request) -> web.Response:
    kind = _quota_type(request)
    return await _set_policy(
        request,
        lambda p: replace(
            p,
            backlog_quota_map={k: q for k, q in p.backlog_quota_map.items() if k != kind},
        ),
    )


# --------------------------------------------------------------------------------------
# Namespace operations.


@routes.put(NS + "/unload")
@access(SUPERUSER)
async def unload_namespace(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    if CLUSTER_KEY in request.app:  # quasar broker: every bundle, on its owner
        await unload_namespace_bundles(request, namespace)
        return no_content()
    await broker_of(request).policy_operations.unload_namespace(namespace)
    return no_content()


@routes.post(NS + "/clearBacklog")
@access(namespace_grant(CONSUME))
async def clear_namespace_backlog(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    await broker_of(request).policy_operations.clear_namespace_backlog(namespace, None)
    return no_content()


@routes.post(NS + "/clearBacklog/{subscription}")
@access(namespace_grant(CONSUME))
async def clear_namespace_subscription_backlog(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    subscription = request.match_info["subscription"]
    await broker_of(request).policy_operations.clear_namespace_backlog(
        namespace, subscription
    )
    return no_content()


@routes.post(NS + "/unsubscribe/{subscription}")
@access(namespace_grant(CONSUME))
async def unsubscribe_namespace(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    subscription = request.match_info["subscription"]
    await broker_of(request).policy_operations.unsubscribe_namespace(
        namespace, subscription
    )
    return no_content()
