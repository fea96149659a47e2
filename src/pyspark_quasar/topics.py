"""What the driver asks the broker: partitions, topic listings, last readable ids, sizes.

Partitions come over the binary protocol (partitioned-topic metadata lookup); topic
listings (for ``topicsPattern``) and ledger sizes (for admission control) come from the
admin REST API on ``admin.url``, with the standard library's HTTP client.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

import quasar.client as qc
from pyspark_quasar.options import SourceOptions
from pyspark_quasar.positions import Bound

_SEEK_PROBE_MS = 5000
_PARTITION = re.compile(r"^(.*)-partition-(\d+)$")


def partition_index(topic: str) -> int:
    """``N`` of ``...-partition-N``; -1 for a non-partitioned topic."""
    m = _PARTITION.match(topic)
    return int(m.group(2)) if m else -1


def base_topic(topic: str) -> str:
    m = _PARTITION.match(topic)
    return m.group(1) if m else topic


def full_topic_name(topic: str) -> str:
    """``persistent://tenant/ns/name`` for ``name`` or ``tenant/ns/name`` too."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"not a topic name: {topic!r}")


def admin_get(admin_url: str, path: str, timeout_s: float = 30.0) -> Any:
    """GET ``admin_url + path`` and decode the JSON answer.

    Raises:
        OSError (urllib.error.URLError, HTTPError): unreachable, or an error status.
    """
    req = urllib.request.Request(admin_url + path, headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def _topic_path(topic: str) -> str:
    """``/admin/v2/persistent/tenant/ns/topic`` for a full topic name."""
    rest = full_topic_name(topic).split("://", 1)[1]
    return "/admin/v2/persistent/" + "/".join(
        urllib.parse.quote(p, safe="") for p in rest.split("/")
    )


@dataclass(frozen=True)
class LedgerSpan:
    ledger_id: int
    entries: int
    size: int


def ledger_spans(admin_url: str, topic: str) -> list[LedgerSpan]:
    """The partition's ledgers in order, with entry counts and bytes (internalStats)."""
    stats = admin_get(admin_url, _topic_path(topic) + "/internalStats")
    return [
        LedgerSpan(int(li["ledgerId"]), int(li["entries"]), int(li.get("size", 0)))
        for li in stats.get("ledgers", [])
    ]


class BrokerView:
    """The driver's connection to the broker: one client, one probe reader a partition.

    Built lazily (never in ``DataSource.__init__``) and only in the driver's reader
    worker; the probe readers exist to ask GET_LAST_MESSAGE_ID.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.client = qc.Client(
            opts.conn.service_url,
            operation_timeout_seconds=opts.conn.operation_timeout_s,
        )
        self._probes: dict[str, qc.Reader] = {}

    def close(self) -> None:
        self.client.close()

    def partitions(self) -> list[str]:
        """Every partition (full name) the options select, sorted."""
        names: set[str] = set()
        if self.opts.topics_pattern is not None:
            names.update(self._matching(self.opts.topics_pattern))
        for topic in self.opts.topics:
            names.update(self.client.get_topic_partitions(full_topic_name(topic)))
        return sorted(names)

    def _matching(self, pattern: str) -> list[str]:
        full = full_topic_name(pattern) if "/" in pattern else pattern
        if "://" not in full:
            full = "persistent://public/default/" + full
        tenant_ns = full.split("://", 1)[1].split("/")[:2]
        regex = re.compile(full)
        listing = admin_get(
            self.opts.conn.admin_url,
            "/admin/v2/persistent/"
            + "/".join(urllib.parse.quote(p, safe="") for p in tenant_ns),
        )
        return [t for t in listing if regex.fullmatch(base_topic(t)) or regex.fullmatch(t)]

    def last_message(self, partition: str) -> Bound:
        """``after <last readable message>`` of a partition, or ``earliest`` if none.

        The broker answers the last message a reader can read: committed, not a
        transaction marker, not aborted, at or before the max read position.
        """
        probe = self._probes.get(partition)
        if probe is None:
            probe = self.client.create_reader(
                partition, qc.MessageId.latest, receiver_queue_size=1
            )
            self._probes[partition] = probe
        # quasar.client's Reader has no public get_last_message_id (the `pulsar`
        # Reader has none either); its consumer answers GET_LAST_MESSAGE_ID.
        impl = probe._impl._impl
        last, _ = self.client._run(impl.get_last_message_id())
        if last.entry_id() < 0:
            return Bound.earliest()
        return Bound.after(last.ledger_id(), last.entry_id(), last.batch_index())

    def first_at_or_after(self, partition: str, timestamp_ms: int) -> Bound | None:
        """``from <first message published at or after timestamp_ms>``, or None."""
        if self.last_message(partition).kind == "earliest":
            return None
        # A throw-away durable subscription: quasar's Reader.seek(timestamp) restarts
        # from the earliest message (the reader resubscribes with its original start
        # id after the broker's reset), a durable cursor keeps the reset.
        consumer = self.client.subscribe(
            partition,
            f"spark-quasar-seek-{uuid.uuid4().hex[:12]}",
            receiver_queue_size=1,
            initial_position=qc.InitialPosition.Latest,
        )
        try:
            consumer.seek(timestamp_ms)
            try:
                # The broker positions the subscription at the first entry published
                # at or after the time; if there is none nothing arrives.
                mid = consumer.receive(_SEEK_PROBE_MS).message_id()
            except qc.Timeout:
                return None
            return Bound.starting_at(mid.ledger_id(), mid.entry_id(), mid.batch_index())
        finally:
            consumer.unsubscribe()

    def ledger_spans(self, partition: str) -> list[LedgerSpan]:
        return ledger_spans(self.opts.conn.admin_url, partition)
