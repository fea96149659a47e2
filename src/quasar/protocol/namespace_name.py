"""Tenant and namespace names, and the topic names the admin API and metadata accept.

Pure name logic, shared by the broker, the admin API, the admin client and the
command line::

    validate_tenant("acme")            -> "acme"
    parse_namespace("acme/orders")     -> ("acme", "orders")
    parse_topic("acme/orders/events")  -> TopicName(persistent://acme/orders/events)

Tenant, cluster and namespace names follow Pulsar's rule: ASCII letters, digits and
``-=:._`` (the rule ``TopicName`` applies to a topic's tenant and namespace).
"""

from __future__ import annotations

import re

from quasar.errors import InvalidResourceError, InvalidTopicName
from quasar.protocol.topic_name import TopicName

__all__ = ["PERSISTENT", "parse_namespace", "parse_topic", "validate_tenant"]

# The domain of persistent topics, the only kind the admin API and metadata store keep.
PERSISTENT = "persistent"

_NAME = re.compile(r"[-=:.\w]+", re.ASCII)


def validate_tenant(tenant: str) -> str:
    """Return ``tenant`` if it is a valid tenant name.

    Raises:
        InvalidResourceError: not a valid name (412).
    """
    if not _NAME.fullmatch(tenant):
        raise InvalidResourceError(f"Tenant name is not valid: {tenant!r}")
    return tenant


def parse_namespace(namespace: str) -> tuple[str, str]:
    """Split ``tenant/namespace`` into its two valid parts.

    Raises:
        InvalidResourceError: not of that form, or a part is not a valid name (412).
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
