"""What each admin route takes and answers, for the OpenAPI document.

One entry per served ``(method, path)``; ``quasar.admin.openapi`` joins this table
with the application's route table, so a route served without an entry here (or an
entry for a route no longer served) is an error the tests report. Path parameters
are typed by name in ``openapi_schemas.PATH_PARAMETERS``; the entries here name the
query parameters, the request body and the success answer. Every operation also
answers errors as ``{"reason": ...}`` (the document's ``default`` response).
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.admin.openapi_schemas import INT32, INT64, STRINGS, Schema, ref
from quasar.resources.bundles import SPLIT_ALGORITHMS

__all__ = ["OPERATIONS", "Answer", "Operation", "QueryParameter"]


@dataclass(frozen=True)
class Answer:
    """A success answer: its status and, unless it has no body, media type and schema."""

    status: int
    media_type: str | None = None
    schema: Schema | None = None
    # A namespace policy not set is answered 204 with no body, as Pulsar's handlers
    # return null (which JAX-RS sends as 204).
    empty_when_unset: bool = False


@dataclass(frozen=True)
class QueryParameter:
    name: str
    schema: Schema
    description: str = ""


@dataclass(frozen=True)
class Operation:
    summary: str
    answer: Answer
    query: tuple[QueryParameter, ...] = ()
    body: Schema | None = None
    body_required: bool = False
    tag: str = ""


NO_CONTENT = Answer(204)
TEXT = Answer(200, "text/plain", {"type": "string"})
OCTETS = Answer(200, "application/octet-stream", {"type": "string", "format": "binary"})
PROMETHEUS = Answer(200, "text/plain", {"type": "string"})
JSON_OBJECT = Answer(200, "application/json", {"type": "object"})
JSON_STRINGS = Answer(200, "application/json", STRINGS)


def json(schema: Schema) -> Answer:
    return Answer(200, "application/json", schema)


def flag(name: str, description: str = "") -> QueryParameter:
    """A boolean query parameter (JAX-RS reads only "true" as true)."""
    return QueryParameter(name, {"type": "boolean"}, description)


def policy(schema: Schema) -> Answer:
    """A policy GET: the value, or 204 when the namespace has none set."""
    return Answer(200, "application/json", schema, empty_when_unset=True)


BOOLEAN: Schema = {"type": "boolean"}
MESSAGE_ID = json(ref("MessageId"))
ENABLE = QueryParameter("enable", {"type": "boolean"})
COORDINATOR_ID = QueryParameter("coordinatorId", {**INT32, "minimum": 0})
POSITION = QueryParameter(
    "position", {"type": "string", "pattern": r"^\d+:\d+$"}, "ledgerId:entryId"
)
BACKLOG_TYPE = QueryParameter(
    "backlogQuotaType", {"type": "string", "enum": ["destination_storage", "message_age"]}
)
FORCE = flag("force", "delete even with connected clients (or non-empty)")
INCLUDE_SYSTEM = flag("includeSystemTopic")
TOPIC_MODE = QueryParameter(
    "mode", {"type": "string", "enum": ["PERSISTENT", "NON_PERSISTENT", "ALL"]}
)
RESET_BODY: Schema = {
    "oneOf": [ref("ResetCursorData"), {"type": "string", "enum": ["earliest", "latest"]}]
}
SUBSCRIPTION_START: Schema = {
    "oneOf": [
        {"type": "string", "description": "'latest', 'earliest' or 'ledgerId:entryId'"},
        ref("MessageId"),
    ]
}

V2 = "/admin/v2"
BROKERS = V2 + "/brokers"
NS = V2 + "/namespaces/{tenant}/{namespace}"
PNS = V2 + "/persistent/{tenant}/{namespace}"
T = PNS + "/{topic}"
SUB = T + "/subscription/{subscription}"
TXN = "/admin/v3/transactions"
X = "{tenant}/{namespace}/{topic}"

_ENTRIES: dict[str, tuple[str, Operation]] = {}


def _add(tag: str, method: str, path: str, operation: Operation) -> None:
    key = f"{method} {path}"
    assert key not in _ENTRIES, key
    _ENTRIES[key] = (tag, operation)


def _table(tag: str, rows: list[tuple[str, str, Operation]]) -> None:
    for method, path, operation in rows:
        _add(tag, method, path, operation)


_table("brokers", [
    ("GET", BROKERS + "/health", Operation(
        "Health check: produce and read back a message on the health-check topic",
        TEXT,
        query=(
            QueryParameter("topicVersion", {"type": "string", "enum": ["V1", "V2"]}),
            QueryParameter("brokerId", {"type": "string"}),
        ),
    )),
    ("GET", BROKERS + "/ready", Operation("Whether the broker has started", TEXT)),
    ("GET", BROKERS + "/version", Operation("The broker's version", TEXT)),
    ("GET", BROKERS + "/configuration",
     Operation("Names of the dynamic configuration keys", JSON_STRINGS)),
    ("GET", BROKERS + "/configuration/values", Operation(
        "Dynamic configuration overrides",
        json({"type": "object", "additionalProperties": {"type": "string"}}),
    )),
    ("GET", BROKERS + "/configuration/runtime", Operation(
        "Every effective configuration value (secrets masked)",
        json({"type": "object", "additionalProperties": {"type": "string"}}),
    )),
    ("POST", BROKERS + "/configuration/{configName}/{configValue}",
     Operation("Override a dynamic configuration key", NO_CONTENT)),
    ("DELETE", BROKERS + "/configuration/{configName}",
     Operation("Remove a dynamic configuration override", NO_CONTENT)),
])

_table("tenants", [
    ("GET", V2 + "/tenants", Operation("List tenants", JSON_STRINGS)),
    ("GET", V2 + "/tenants/{tenant}", Operation("A tenant's info", json(ref("TenantInfo")))),
    ("PUT", V2 + "/tenants/{tenant}",
     Operation("Create a tenant", NO_CONTENT, body=ref("TenantInfo"))),
    ("POST", V2 + "/tenants/{tenant}", Operation(
        "Update a tenant", NO_CONTENT, body=ref("TenantInfo"), body_required=True
    )),
    ("DELETE", V2 + "/tenants/{tenant}", Operation("Delete an empty tenant", NO_CONTENT)),
    ("GET", V2 + "/clusters", Operation("List clusters", JSON_STRINGS)),
])

_table("namespaces", [
    ("GET", V2 + "/namespaces/{tenant}", Operation("A tenant's namespaces", JSON_STRINGS)),
    ("PUT", NS, Operation("Create a namespace", NO_CONTENT, body=ref("Policies"))),
    ("GET", NS, Operation("A namespace's policies", json(ref("Policies")))),
    ("DELETE", NS, Operation("Delete a namespace", NO_CONTENT, query=(FORCE,))),
    ("GET", NS + "/bundles",
     Operation("A namespace's bundle boundaries", json(ref("BundlesData")))),
    ("GET", NS + "/topics",
     Operation("The namespace's topics", JSON_STRINGS, query=(INCLUDE_SYSTEM, TOPIC_MODE))),
    ("GET", NS + "/retention",
     Operation("Retention policy", policy(ref("RetentionPolicies")))),
    ("POST", NS + "/retention", Operation(
        "Set retention", NO_CONTENT, body=ref("RetentionPolicies"), body_required=True
    )),
    ("DELETE", NS + "/retention", Operation("Remove retention", NO_CONTENT)),
    ("GET", NS + "/deduplication", Operation("Deduplication", policy(BOOLEAN))),
    ("POST", NS + "/deduplication",
     Operation("Set deduplication", NO_CONTENT, body=BOOLEAN, body_required=True)),
    ("DELETE", NS + "/deduplication", Operation("Remove deduplication", NO_CONTENT)),
    ("GET", NS + "/autoTopicCreation", Operation(
        "Auto topic creation override", policy(ref("AutoTopicCreationOverride"))
    )),
    ("POST", NS + "/autoTopicCreation", Operation(
        "Set the auto topic creation override", NO_CONTENT,
        body=ref("AutoTopicCreationOverride"), body_required=True,
    )),
    ("DELETE", NS + "/autoTopicCreation",
     Operation("Remove the auto topic creation override", NO_CONTENT)),
    ("GET", NS + "/schemaCompatibilityStrategy",
     Operation("Schema compatibility strategy", policy({"type": "string"}))),
    ("PUT", NS + "/schemaCompatibilityStrategy", Operation(
        "Set the schema compatibility strategy", NO_CONTENT,
        body={"type": "string"}, body_required=True,
    )),
    ("GET", NS + "/isAllowAutoUpdateSchema",
     Operation("Whether producers may add schema versions", policy(BOOLEAN))),
    ("POST", NS + "/isAllowAutoUpdateSchema", Operation(
        "Set whether producers may add schema versions", NO_CONTENT,
        body=BOOLEAN, body_required=True,
    )),
    ("GET", NS + "/schemaValidationEnforced", Operation(
        "Whether producers without a schema are refused on topics with one",
        policy(BOOLEAN),
    )),
    ("POST", NS + "/schemaValidationEnforced", Operation(
        "Set whether producers without a schema are refused on topics with one",
        NO_CONTENT, body=BOOLEAN, body_required=True,
    )),
    ("GET", NS + "/messageTTL", Operation("Message TTL in seconds", policy(INT32))),
    ("POST", NS + "/messageTTL", Operation(
        "Set the message TTL in seconds", NO_CONTENT,
        body={**INT32, "minimum": 0}, body_required=True,
    )),
    ("DELETE", NS + "/messageTTL", Operation("Remove the message TTL", NO_CONTENT)),
    ("GET", NS + "/backlogQuotaMap", Operation(
        "Backlog quotas by type",
        json({"type": "object", "additionalProperties": ref("BacklogQuota")}),
    )),
    ("POST", NS + "/backlogQuota", Operation(
        "Set a backlog quota", NO_CONTENT, query=(BACKLOG_TYPE,),
        body=ref("BacklogQuota"), body_required=True,
    )),
    ("DELETE", NS + "/backlogQuota",
     Operation("Remove a backlog quota", NO_CONTENT, query=(BACKLOG_TYPE,))),
    ("PUT", NS + "/unload", Operation("Unload the namespace's topics", NO_CONTENT)),
    ("POST", NS + "/clearBacklog",
     Operation("Clear the backlog of every subscription", NO_CONTENT)),
    ("POST", NS + "/clearBacklog/{subscription}",
     Operation("Clear one subscription's backlog on every topic", NO_CONTENT)),
    ("POST", NS + "/unsubscribe/{subscription}",
     Operation("Delete a subscription on every topic", NO_CONTENT)),
])

_table("permissions", [
    ("GET", NS + "/permissions", Operation(
        "Grants on the namespace",
        json({"type": "object", "additionalProperties": ref("AuthActions")}),
    )),
    ("POST", NS + "/permissions/{role}", Operation(
        "Grant actions on the namespace", NO_CONTENT,
        body=ref("AuthActions"), body_required=True,
    )),
    ("DELETE", NS + "/permissions/{role}",
     Operation("Revoke a role's grant on the namespace", NO_CONTENT)),
    ("GET", NS + "/permissions/subscription", Operation(
        "Roles allowed per subscription",
        json({"type": "object", "additionalProperties": STRINGS}),
    )),
    ("POST", NS + "/permissions/subscription/{subscription}", Operation(
        "Allow roles on a subscription", NO_CONTENT, body=STRINGS, body_required=True
    )),
    ("DELETE", NS + "/permissions/{subscription}/{role}",
     Operation("Revoke a role on a subscription", NO_CONTENT)),
    ("GET", NS + "/subscriptionAuthMode",
     Operation("Subscription auth mode", json(ref("SubscriptionAuthMode")))),
    ("POST", NS + "/subscriptionAuthMode", Operation(
        "Set the subscription auth mode", NO_CONTENT,
        body=ref("SubscriptionAuthMode"), body_required=True,
    )),
    ("GET", T + "/permissions", Operation(
        "Grants on the topic",
        json({"type": "object", "additionalProperties": ref("AuthActions")}),
    )),
    ("POST", T + "/permissions/{role}", Operation(
        "Grant actions on the topic", NO_CONTENT,
        body=ref("AuthActions"), body_required=True,
    )),
    ("DELETE", T + "/permissions/{role}",
     Operation("Revoke a role's grant on the topic", NO_CONTENT)),
])

_table("topics", [
    ("GET", PNS, Operation("The namespace's persistent topics", JSON_STRINGS,
                           query=(INCLUDE_SYSTEM,))),
    ("GET", PNS + "/partitioned", Operation("Partitioned topics", JSON_STRINGS)),
    ("PUT", T + "/partitions", Operation(
        "Create a partitioned topic", NO_CONTENT, body=INT32, body_required=True
    )),
    ("GET", T + "/partitions",
     Operation("Partitioned-topic metadata", json(ref("PartitionedTopicMetadata")),
               query=(flag("checkAllowAutoCreation",
                           "auto-create a partitioned topic where the namespace would"),))),
    ("POST", T + "/partitions", Operation(
        "Grow a partitioned topic", NO_CONTENT, body=INT32, body_required=True
    )),
    ("DELETE", T + "/partitions",
     Operation("Delete a partitioned topic", NO_CONTENT, query=(FORCE,))),
    ("GET", T + "/partitioned-stats", Operation(
        "Partitioned-topic stats", json(ref("TopicStats")),
        query=(flag("perPartition"),),
    )),
    ("PUT", T, Operation("Create a non-partitioned topic", NO_CONTENT)),
    ("DELETE", T, Operation("Delete a topic", NO_CONTENT, query=(FORCE,))),
    ("GET", T + "/stats", Operation("Topic stats", json(ref("TopicStats")))),
    ("GET", T + "/internalStats", Operation("Managed-ledger internal stats", JSON_OBJECT)),
    ("GET", T + "/subscriptions", Operation("Subscriptions", JSON_STRINGS)),
    ("PUT", SUB, Operation(
        "Create a subscription (at latest unless the body says)", NO_CONTENT,
        body=SUBSCRIPTION_START,
    )),
    ("DELETE", SUB, Operation("Delete a subscription", NO_CONTENT, query=(FORCE,))),
    ("PUT", T + "/compaction", Operation("Trigger compaction", NO_CONTENT)),
    ("GET", T + "/compaction", Operation("Compaction status", json(ref("CompactionStatus")))),
])

NPNS = V2 + "/non-persistent/{tenant}/{namespace}"
NPT = NPNS + "/{topic}"

_table("non-persistent topics", [
    ("GET", NPNS, Operation("The namespace's loaded non-persistent topics", JSON_STRINGS)),
    ("GET", NPNS + "/partitioned", Operation("Partitioned non-persistent topics", JSON_STRINGS)),
    ("PUT", NPT + "/partitions", Operation(
        "Create a partitioned non-persistent topic", NO_CONTENT, body=INT32, body_required=True
    )),
    ("GET", NPT + "/partitions",
     Operation("Partitioned-topic metadata", json(ref("PartitionedTopicMetadata")))),
    ("DELETE", NPT + "/partitions",
     Operation("Delete a partitioned non-persistent topic", NO_CONTENT, query=(FORCE,))),
    ("GET", NPT + "/partitioned-stats", Operation(
        "Partitioned non-persistent topic stats", JSON_OBJECT, query=(flag("perPartition"),),
    )),
    ("DELETE", NPT, Operation("Unload a non-persistent topic", NO_CONTENT, query=(FORCE,))),
    ("GET", NPT + "/stats", Operation("NonPersistentTopicStats", JSON_OBJECT)),
])

_table("topic operations", [
    ("POST", SUB + "/skip/{numMessages}", Operation("Skip messages", NO_CONTENT)),
    ("POST", SUB + "/skip_all", Operation("Clear the subscription's backlog", NO_CONTENT)),
    ("POST", SUB + "/resetcursor/{timestamp}",
     Operation("Reset the cursor to a publish time", NO_CONTENT)),
    ("POST", SUB + "/resetcursor", Operation(
        "Reset the cursor to a position", NO_CONTENT, body=RESET_BODY, body_required=True
    )),
    ("GET", T + "/lastMessageId", Operation("The last message id", MESSAGE_ID)),
    ("GET", T + "/messageid/{timestamp}",
     Operation("The first message id at or after a publish time", MESSAGE_ID)),
    ("PUT", T + "/unload", Operation("Unload the topic", NO_CONTENT)),
    ("POST", T + "/terminate", Operation("Terminate the topic", MESSAGE_ID)),
    ("POST", T + "/terminate/partitions", Operation(
        "Terminate every partition",
        json({"type": "object", "additionalProperties": ref("MessageId")}),
    )),
    ("GET", SUB + "/position/{messagePosition}",
     Operation("Peek the nth message after the mark-delete position", OCTETS)),
    ("GET", T + "/examinemessage", Operation(
        "Examine a message relative to the first or last", OCTETS,
        query=(
            QueryParameter("initialPosition", {"type": "string",
                                               "enum": ["earliest", "latest"]}),
            QueryParameter("messagePosition", {**INT64, "minimum": 1}),
        ),
    )),
    ("GET", T + "/ledger/{ledgerId}/entry/{entryId}",
     Operation("A message by ledger and entry id", OCTETS)),
    ("POST", SUB + "/expireMessages/{expireTimeInSeconds}",
     Operation("Expire messages older than an age", NO_CONTENT)),
    ("POST", SUB + "/expireMessages", Operation(
        "Expire messages up to a position", NO_CONTENT,
        body=ref("ResetCursorData"), body_required=True,
    )),
    ("POST", T + "/all_subscription/expireMessages/{expireTimeInSeconds}",
     Operation("Expire messages older than an age on every subscription", NO_CONTENT)),
])

_BATCH_LOG_STATS: Schema = {"type": "object"}

_table("transactions", [
    ("POST", TXN + "/txnTcBatchLog", Operation(
        "Switch the coordinators' batched log", NO_CONTENT, query=(ENABLE,), body=BOOLEAN
    )),
    ("GET", TXN + "/txnTcBatchLogStat",
     Operation("The coordinators' batched-log state", json(_BATCH_LOG_STATS))),
    ("POST", TXN + "/txnPendingAckBatchLog", Operation(
        "Switch the pending-ack batched log", NO_CONTENT, query=(ENABLE,), body=BOOLEAN
    )),
    ("GET", TXN + "/txnPendingAckBatchLogStat",
     Operation("The pending-ack batched-log state", json(_BATCH_LOG_STATS))),
    ("GET", TXN + "/clientTransactions/{clientName}",
     Operation("A client's open transactions", JSON_OBJECT, query=(COORDINATOR_ID,))),
    ("GET", TXN + "/coordinators", Operation(
        "Transaction coordinators",
        json({"type": "array", "items": ref("TransactionCoordinator")}),
    )),
    ("GET", TXN + "/coordinatorInternalStats/{coordinatorId}", Operation(
        "A coordinator's log internal stats", JSON_OBJECT, query=(flag("metadata"),)
    )),
    ("GET", TXN + "/transactionMetadata/{mostSigBits}/{leastSigBits}",
     Operation("A transaction's metadata", JSON_OBJECT)),
    ("GET", TXN + "/slowTransactions/{timeoutMs}", Operation(
        "Transactions open longer than a time", JSON_OBJECT, query=(COORDINATOR_ID,)
    )),
    ("POST", TXN + "/abortTransaction/{mostSigBits}/{leastSigBits}",
     Operation("Abort a transaction", NO_CONTENT)),
    ("GET", f"{TXN}/transactionBufferStats/{X}", Operation(
        "A topic's transaction buffer stats", JSON_OBJECT,
        query=(flag("lowWaterMarks"), flag("segmentStats")),
    )),
    ("GET", f"{TXN}/transactionInBufferStats/{X}/{{mostSigBits}}/{{leastSigBits}}",
     Operation("A transaction in a topic's buffer", JSON_OBJECT)),
    ("GET", f"{TXN}/pendingAckStats/{X}/{{subName}}", Operation(
        "A subscription's pending-ack stats", JSON_OBJECT, query=(flag("lowWaterMarks"),)
    )),
    ("GET", f"{TXN}/transactionInPendingAckStats/{X}/{{subName}}/{{mostSigBits}}/"
            "{leastSigBits}",
     Operation("A transaction's pending acks on a subscription", JSON_OBJECT)),
    ("GET", f"{TXN}/pendingAckInternalStats/{X}/{{subName}}", Operation(
        "A pending-ack log's internal stats", JSON_OBJECT, query=(flag("metadata"),)
    )),
    ("GET", f"{TXN}/positionStatsInPendingAck/{X}/{{subName}}/{{ledgerId}}/{{entryId}}",
     Operation(
         "Whether a position is pending-acked", JSON_OBJECT,
         query=(QueryParameter("batchIndex", {**INT32, "minimum": -1}),),
     )),
    ("GET", TXN + "/coordinatorStats",
     Operation("Coordinator stats", JSON_OBJECT, query=(COORDINATOR_ID,))),
    ("POST", TXN + "/coordinators/{coordinatorId}/skipCorruptRecord", Operation(
        "Skip a corrupt record of a coordinator's log", JSON_OBJECT, query=(POSITION,)
    )),
    ("POST", f"{TXN}/pendingAck/{X}/{{subName}}/skipCorruptRecord", Operation(
        "Skip a corrupt record of a pending-ack log", JSON_OBJECT, query=(POSITION,)
    )),
])

_table("lookup", [
    ("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", Operation(
        "Where a topic is served: the broker's URLs for the listener asked for",
        json(ref("LookupData")),
        query=(
            flag("authoritative", "no effect: a standalone broker owns every topic"),
            QueryParameter("listenerName", {"type": "string"},
                           "the advertised listener (else the X-Pulsar-ListenerName header)"),
        ),
    )),
])

SCH = V2 + "/schemas/" + X
_SCHEMA_VERSION: Schema = {
    "type": "object", "required": ["version"], "properties": {"version": INT64},
}
_table("schemas", [
    ("GET", SCH + "/schema",
     Operation("The topic's latest schema", json(ref("GetSchemaResponse")))),
    ("GET", SCH + "/schema/{version}",
     Operation("One version of the topic's schema", json(ref("GetSchemaResponse")))),
    ("GET", SCH + "/schemas", Operation("Every version since the last deletion", json({
        "type": "object",
        "properties": {
            "getSchemaResponses": {"type": "array", "items": ref("GetSchemaResponse")},
        },
    }))),
    ("POST", SCH + "/schema", Operation(
        "Upload a schema (a new version unless an identical one exists)",
        json({"type": "object", "properties": {"version": _SCHEMA_VERSION}}),
        body=ref("PostSchemaPayload"), body_required=True,
    )),
    ("DELETE", SCH + "/schema",
     Operation("Delete the topic's schema (a deletion version)", json(_SCHEMA_VERSION))),
    ("POST", SCH + "/compatibility", Operation(
        "Test a schema against the topic's schemas and strategy",
        json({
            "type": "object",
            "properties": {
                "compatibility": BOOLEAN,
                "schemaCompatibilityStrategy": {"type": "string"},
            },
        }),
        body=ref("PostSchemaPayload"), body_required=True,
    )),
    ("POST", SCH + "/version", Operation(
        "The version of an identical schema", json(_SCHEMA_VERSION),
        body=ref("PostSchemaPayload"), body_required=True,
    )),
])

_table("metrics", [
    ("GET", "/metrics", Operation("Prometheus metrics", PROMETHEUS)),
    ("GET", V2 + "/openapi.json", Operation("This OpenAPI document", JSON_OBJECT)),
])

_table("dashboard", [
    ("GET", "/", Operation("The web dashboard's page", Answer(200, "text/html", {"type": "string"}))),
    *(
        ("GET", f"/dashboard/{name}", Operation(f"The web dashboard's {name}",
                                                  Answer(200, media, {"type": "string"})))
        for name, media in (
            ("app.js", "text/javascript"), ("chart.js", "text/javascript"),
            ("app.css", "text/css"), ("favicon.svg", "image/svg+xml"),
        )
    ),
    ("GET", V2 + "/quasar/dashboard",
     Operation("What the web dashboard shows (quasar's own)", JSON_OBJECT)),
])

OPERATIONS: dict[str, tuple[str, Operation]] = dict(_ENTRIES)
"""``"METHOD /path"`` -> (tag, operation), for every route the admin app serves."""

CLUSTER_OPERATIONS: dict[str, tuple[str, Operation]] = {
    f"PUT {NS}/{{bundle}}/unload": ("namespaces", Operation(
        "Unload one bundle: its owner gives it up (quasar broker only)", NO_CONTENT,
    )),
    f"PUT {NS}/{{bundle}}/split": ("namespaces", Operation(
        "Split one bundle in two on its owner (quasar broker only)", NO_CONTENT,
        query=(
            flag("unload", "unload both halves afterwards"),
            QueryParameter(
                "splitAlgorithmName",
                {"type": "string", "enum": list(SPLIT_ALGORITHMS)},
                "defaultNamespaceBundleSplitAlgorithm when absent",
            ),
        ),
    )),
    f"GET {BROKERS}/{{cluster}}": ("brokers", Operation(
        "The live brokers' ids (quasar broker only)", JSON_STRINGS,
    )),
    f"GET {BROKERS}/{{cluster}}/{{broker}}/ownedNamespaces": ("brokers", Operation(
        "The bundles a broker owns (quasar broker only)", JSON_OBJECT,
    )),
}
"""The routes only a cluster member (``quasar broker``) serves."""
