"""Topic names: parsing, normalisation and the names derived from them.

Accepted forms (normalised the way the official client does)::

    my-topic                              -> persistent://public/default/my-topic
    tenant/ns/my-topic                    -> persistent://tenant/ns/my-topic
    persistent://tenant/ns/my-topic          (V2: tenant / namespace / local name)
    non-persistent://tenant/ns/my-topic
    persistent://tenant/cluster/ns/my-topic  (V1, legacy: four or more path parts)

Tenant, cluster and namespace may contain only ``[A-Za-z0-9_\\-=:.]``; the local name
is everything after the namespace's slash (it may contain further ``/`` in the V1
form) and must not be empty. A partition of a partitioned topic is named
``<topic>-partition-<i>``.

The broker reserves some names for itself: system topics (its transaction logs,
snapshots and pending-ack logs, and everything in ``pulsar/system``) and system cursors
(deduplication, compaction and system-table state kept beside a topic). The predicates
for both live here, beside the names, so every layer answers the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from quasar.errors import InvalidTopicName

__all__ = [
    "COMPACTION_CURSOR",
    "DEDUP_CURSOR",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TENANT",
    "PARTITION_SUFFIX",
    "PENDING_ACK_SUFFIX",
    "SYSTEM_CURSOR_PREFIX",
    "SYSTEM_NAMESPACE",
    "SYSTEM_TABLE_CURSOR",
    "TRANSACTION_BUFFER_SNAPSHOT",
    "TRANSACTION_LOG_PREFIX",
    "TopicName",
    "is_hidden_from_listings",
    "is_system_cursor",
    "is_system_topic",
]

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITION_SUFFIX = "-partition-"
# The tenant and namespace of the broker's own topics (coordinator assignment and
# logs, the terminated-transaction tables).
SYSTEM_TENANT = "pulsar"
SYSTEM_NAMESPACE = "pulsar/system"
# Per-namespace topic holding transaction-buffer snapshots (a compacted table).
TRANSACTION_BUFFER_SNAPSHOT = "__transaction_buffer_snapshot"
# Local-name prefix of the coordinators' transaction logs.
TRANSACTION_LOG_PREFIX = "__transaction_log_"
# Local-name suffix of a subscription's pending-ack log, ``{topic}-{sub}`` + suffix.
PENDING_ACK_SUFFIX = "__transaction_pending_ack"
# Cursors the broker keeps on a topic for its own state: deduplication snapshots
# ("pulsar." names), compaction (Pulsar's Compactor.COMPACTION_SUBSCRIPTION) and the
# system-table reader. They are not subscriptions: hidden from stats and listings, and
# a client may not subscribe under these names.
SYSTEM_CURSOR_PREFIX = "pulsar."
DEDUP_CURSOR = "pulsar.dedup"
COMPACTION_CURSOR = "__compaction"
SYSTEM_TABLE_CURSOR = "__table"
_DOMAINS = ("persistent", "non-persistent")
_NAME_PART = re.compile(r"[A-Za-z0-9_\-=:.]+")
# The index is the decimal number after the *last* "-partition-"; anything else (a
# sign, trailing text) means the name is not a partition name at all.
_PARTITION = re.compile(r"(.+)-partition-(0|[1-9][0-9]{0,9})", re.DOTALL)
_INT32_MAX = (1 << 31) - 1
# TopicName.parse's results by the text parsed; cleared when full (a bound, not an LRU:
# the working set of a broker or client is far smaller).
_PARSED: dict[str, TopicName] = {}
_PARSED_MAX = 10_000


@dataclass(frozen=True, slots=True)
class TopicName:
    """A parsed, fully qualified topic name. Build one with ``TopicName.parse``.

    Equal names (after normalisation) compare and hash equal.
    """

    full: str
    domain: str = field(compare=False)
    tenant: str = field(compare=False)
    namespace: str = field(compare=False)
    local_name: str = field(compare=False)
    cluster: str | None = field(default=None, compare=False)
    partition_index: int = field(default=-1, compare=False)

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """Parse and normalise a topic name given in any accepted form.

        Raises ``quasar.errors.InvalidTopicName`` for anything else: a 2-token or
        >3-token short name, an unknown domain, a bad tenant/cluster/namespace, or an
        empty local name.
        """
        # Names are immutable and a broker sees the same few names in every request
        # (each transaction names its partitions again): parse each once.
        found = _PARSED.get(name) if isinstance(name, str) else None
        if found is not None:
            return found
        parsed = cls._parse(name)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[name] = parsed
        return parsed

    @classmethod
    def _parse(cls, name: str) -> TopicName:
        if not isinstance(name, str) or not name:
            raise InvalidTopicName(f"invalid topic name {name!r}")
        if "://" not in name:
            parts = name.split("/")
            if len(parts) == 1:
                domain, rest = (
                    "persistent",
                    f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{name}",
                )
            elif len(parts) == 3:
                domain, rest = "persistent", name
            else:
                raise InvalidTopicName(
                    f"invalid short topic name {name!r}: use 'topic', "
                    "'tenant/namespace/topic' or a full '<domain>://...' name"
                )
        else:
            domain, _, rest = name.partition("://")
            if domain not in _DOMAINS:
                raise InvalidTopicName(f"invalid domain {domain!r} in topic {name!r}")
        parts = rest.split("/", 3)
        cluster: str | None
        if len(parts) == 3:
            tenant, namespace, local = parts
            cluster = None
        elif len(parts) == 4:
            tenant, cluster, namespace, local = parts
        else:
            raise InvalidTopicName(f"invalid topic name {name!r}: no namespace")
        for label, value in (
            ("tenant", tenant),
            ("cluster", cluster),
            ("namespace", namespace),
        ):
            if value is not None and not _NAME_PART.fullmatch(value):
                raise InvalidTopicName(f"invalid {label} {value!r} in topic {name!r}")
        if not local:
            raise InvalidTopicName(f"empty local name in topic {name!r}")
        ns_path = (
            f"{tenant}/{namespace}"
            if cluster is None
            else f"{tenant}/{cluster}/{namespace}"
        )
        return cls(
            full=f"{domain}://{ns_path}/{local}",
            domain=domain,
            tenant=tenant,
            namespace=namespace,
            local_name=local,
            cluster=cluster,
            partition_index=_partition_index(local),
        )

    @property
    def namespace_name(self) -> str:
        """The namespace as sent on the wire: ``tenant/ns`` (V1: ``tenant/cluster/ns``)."""
        if self.cluster is None:
            return f"{self.tenant}/{self.namespace}"
        return f"{self.tenant}/{self.cluster}/{self.namespace}"

    @property
    def is_persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def is_partition(self) -> bool:
        """True for ``...-partition-<i>`` names."""
        return self.partition_index >= 0

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (``self`` if not a partition)."""
        if self.partition_index < 0:
            return self
        base_local = self.local_name[: self.local_name.rindex(PARTITION_SUFFIX)]
        return TopicName(
            full=f"{self.domain}://{self.namespace_name}/{base_local}",
            domain=self.domain,
            tenant=self.tenant,
            namespace=self.namespace,
            local_name=base_local,
            cluster=self.cluster,
        )

    def partition(self, index: int) -> TopicName:
        """Return partition ``index`` of this topic (of its base, if it is a partition).

        Raises ``ValueError`` if ``index`` is negative or above int32.
        """
        if not 0 <= index <= _INT32_MAX:
            raise ValueError(f"partition index must be in [0, 2^31), got {index}")
        base = self.base
        local = f"{base.local_name}{PARTITION_SUFFIX}{index}"
        return TopicName(
            full=f"{base.domain}://{base.namespace_name}/{local}",
            domain=base.domain,
            tenant=base.tenant,
            namespace=base.namespace,
            local_name=local,
            cluster=base.cluster,
            partition_index=index,
        )

    @property
    def persistence_name(self) -> str:
        """A unique, filesystem-safe managed-ledger name for this topic.

        ``tenant/ns/<domain>/<url-encoded local name>`` (V1 names keep their cluster
        part). Every component is percent-encoded, so the result never contains a
        ``/`` other than the separators, nor a ``.``/``..`` component, and distinct
        topics map to distinct names.
        """
        spaces = [self.tenant] + ([self.cluster] if self.cluster is not None else [])
        parts = [*spaces, self.namespace, self.domain, self.local_name]
        return "/".join(_path_safe(p) for p in parts)

    def __str__(self) -> str:
        return self.full


def is_system_topic(name: TopicName) -> bool:
    """True for topics the broker itself writes; they never get a transaction buffer
    (their entries are never part of a client's transaction)."""
    local = name.local_name
    return (
        name.namespace_name == SYSTEM_NAMESPACE
        or local.startswith(TRANSACTION_BUFFER_SNAPSHOT)
        or local.startswith(TRANSACTION_LOG_PREFIX)
        or PENDING_ACK_SUFFIX in local
    )


def is_hidden_from_listings(name: TopicName) -> bool:
    """Topics the admin API lists only when system topics are asked for, as Pulsar
    does: a local name starting with ``__`` (``__change_events``,
    ``__transaction_buffer_snapshot``, ...) or a subscription's pending-ack log,
    partitions included. Wider than :func:`is_system_topic`, which names only the
    topics the broker writes itself."""
    local = name.base.local_name
    return local.startswith("__") or local.endswith(PENDING_ACK_SUFFIX)


def is_closed_to_clients(name: TopicName) -> bool:
    """Topics no client may produce to or subscribe to, whatever its role: those the
    broker writes itself (:func:`is_system_topic`: a client's bytes there would be
    parsed as the broker's own records) and every other ``__``-prefixed name, which
    Pulsar reserves for its event and system topics."""
    return is_system_topic(name) or is_hidden_from_listings(name)


def is_system_cursor(name: str) -> bool:
    """True for the broker's own cursors: dedup snapshots, compaction, system tables."""
    return name.startswith(SYSTEM_CURSOR_PREFIX) or name in (
        COMPACTION_CURSOR,
        SYSTEM_TABLE_CURSOR,
    )


def _partition_index(local: str) -> int:
    match = _PARTITION.fullmatch(local)
    if match is None:
        return -1
    index = int(match.group(2))
    return index if index <= _INT32_MAX else -1


def _path_safe(component: str) -> str:
    encoded = quote(component, safe="")
    # quote() leaves dots alone; a component of only dots would walk the directory tree.
    if encoded.strip(".") == "":
        encoded = encoded.replace(".", "%2E")
    return encoded
