"""JSON schemas of the admin API's bodies, as they appear in the OpenAPI document.

Field names are Pulsar's (its ``policies/data`` classes, as Jackson writes them), so
the document describes what a Pulsar admin client sends and reads. A schema states
what quasar accepts or answers; it says ``additionalProperties`` only where the
handler refuses unknown fields, because a client may send Pulsar fields quasar
does not implement and the handler decides what to do with them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COMPONENT_SCHEMAS", "PATH_PARAMETERS", "ref"]

Schema = dict[str, Any]

INT32: Schema = {"type": "integer", "format": "int32"}
INT64: Schema = {"type": "integer", "format": "int64"}
STRINGS: Schema = {"type": "array", "items": {"type": "string"}}

# Pulsar's rule for tenant, namespace and cluster names (NamedEntity.java).
NAME_PATTERN = r"^[-=:.\w]*$"


def ref(name: str) -> Schema:
    """A reference to one of ``COMPONENT_SCHEMAS``."""
    return {"$ref": f"#/components/schemas/{name}"}


COMPONENT_SCHEMAS: dict[str, Schema] = {
    # Every error answer (ErrorData.java).
    "ErrorData": {
        "type": "object",
        "required": ["reason"],
        "properties": {"reason": {"type": "string"}},
    },
    "TenantInfo": {
        "type": "object",
        "properties": {"adminRoles": STRINGS, "allowedClusters": STRINGS},
    },
    "RetentionPolicies": {
        "type": "object",
        "properties": {
            "retentionTimeInMinutes": INT32,
            "retentionSizeInMB": INT64,
        },
    },
    "AutoTopicCreationOverride": {
        "type": "object",
        "required": ["allowAutoTopicCreation"],
        "properties": {
            "allowAutoTopicCreation": {"type": "boolean"},
            "topicType": {"type": "string", "enum": ["partitioned", "non-partitioned"]},
            "defaultNumPartitions": INT32,
        },
    },
    "BacklogQuota": {
        "type": "object",
        "properties": {
            "limitSize": INT64,
            "limitTime": INT32,
            "policy": {
                "type": "string",
                "enum": [
                    "producer_request_hold",
                    "producer_exception",
                    "consumer_backlog_eviction",
                ],
            },
        },
    },
    # BundlesData.java: numBundles + 1 hex boundaries cutting the 32-bit hash space.
    "BundlesData": {
        "type": "object",
        "properties": {"boundaries": STRINGS, "numBundles": INT32},
    },
    # Policies.java: the namespace's policies, as GET answers them.
    "Policies": {"type": "object", "additionalProperties": True},
    # ResetCursorData.java; Lombok names the isExcluded field's JSON key "excluded".
    "ResetCursorData": {
        "type": "object",
        "required": ["ledgerId", "entryId"],
        "properties": {
            "ledgerId": INT64,
            "entryId": INT64,
            "partitionIndex": INT32,
            "batchIndex": INT32,
            "excluded": {"type": "boolean"},
            "isExcluded": {"type": "boolean"},
            "properties": {"type": "object"},
        },
    },
    # A message id as Pulsar's admin answers it (MessageIdImpl's JSON).
    "MessageId": {
        "type": "object",
        "properties": {"ledgerId": INT64, "entryId": INT64, "partitionIndex": INT32},
    },
    "PartitionedTopicMetadata": {
        "type": "object",
        "required": ["partitions"],
        "properties": {"partitions": INT32},
    },
    # TopicStatsImpl.java / PartitionedTopicStatsImpl.java.
    "TopicStats": {
        "type": "object",
        "properties": {
            "msgRateIn": {"type": "number"},
            "msgRateOut": {"type": "number"},
            "msgThroughputIn": {"type": "number"},
            "msgThroughputOut": {"type": "number"},
            "msgInCounter": {"type": "integer"},
            "msgOutCounter": {"type": "integer"},
            "storageSize": {"type": "integer"},
            "backlogSize": {"type": "integer"},
            "publishers": {"type": "array", "items": {"type": "object"}},
            "waitingPublishers": {"type": "integer"},
            "subscriptions": {"type": "object"},
        },
    },
    # LookupData.java: the HTTP lookup's answer (null where a port is off).
    "LookupData": {
        "type": "object",
        "required": ["brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl"],
        "properties": {
            name: {"type": "string", "nullable": True}
            for name in ("brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl")
        },
    },
    "CompactionStatus": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}, "lastError": {"type": "string"}},
    },
    # AuthAction.java, the actions a grant names.
    "AuthActions": {
        "type": "array",
        "items": {
            "type": "string",
            "enum": ["produce", "consume", "functions", "sources", "sinks", "packages"],
        },
    },
    "SubscriptionAuthMode": {"type": "string", "enum": ["None", "Prefix"]},
    # PostSchemaPayload.java: what an upload, a compatibility test and a version
    # query send.
    "PostSchemaPayload": {
        "type": "object",
        "required": ["type", "schema"],
        "properties": {
            "type": {"type": "string", "example": "AVRO"},
            "schema": {"type": "string"},
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    # GetSchemaResponse.java: one version of a topic's schema.
    "GetSchemaResponse": {
        "type": "object",
        "required": ["version", "type", "timestamp", "data", "properties"],
        "properties": {
            "version": INT64,
            "type": {"type": "string"},
            "timestamp": INT64,
            "data": {"type": "string"},
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "TransactionCoordinator": {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": INT32,
            # null: the owner does not listen on that kind of port.
            "brokerServiceUrl": {"type": "string", "nullable": True},
            "brokerServiceUrlTls": {"type": "string", "nullable": True},
        },
    },
}

# Path parameters are typed by name: the same name means the same thing everywhere.
# Names are plain strings (the handlers answer 412 for an invalid one, which the
# fuzzer is meant to try); numbers are Pulsar's Java types.
PATH_PARAMETERS: dict[str, Schema] = {
    "domain": {"type": "string", "enum": ["persistent", "non-persistent"]},
    "tenant": {"type": "string", "pattern": NAME_PATTERN, "example": "public"},
    "namespace": {"type": "string", "pattern": NAME_PATTERN, "example": "default"},
    "topic": {"type": "string", "example": "fuzz-topic"},
    "subscription": {"type": "string", "example": "fuzz-sub"},
    "subName": {"type": "string", "example": "fuzz-sub"},
    "role": {"type": "string", "example": "fuzz-role"},
    "clientName": {"type": "string"},
    "configName": {"type": "string", "example": "maxConcurrentLookupRequest"},
    "configValue": {"type": "string", "example": "50000"},
    "numMessages": {**INT32, "minimum": 0},
    "timestamp": INT64,
    "messagePosition": {**INT32, "minimum": 1},
    "ledgerId": INT64,
    "entryId": INT64,
    "expireTimeInSeconds": INT32,
    "mostSigBits": INT64,
    "leastSigBits": INT64,
    "timeoutMs": INT64,
    "coordinatorId": {**INT32, "minimum": 0},
    "version": {**INT64, "minimum": 0},
    "bundle": {"type": "string", "pattern": "^0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}$",
               "example": "0x00000000_0x40000000"},
    "cluster": {"type": "string", "example": "standalone"},
    "broker": {"type": "string", "example": "127.0.0.1:8080"},
    # A file under a static resource's prefix.
    "filename": {"type": "string"},
}
