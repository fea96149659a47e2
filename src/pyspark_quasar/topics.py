"""What the driver asks the broker: partitions, topic listings, last readable ids, sizes.

Partitions come over the binary protocol (partitioned-topic metadata lookup); topic
listings (for ``topicsPattern``) and ledger lists (admission control, data-loss
checks) come from the admin REST API on ``admin.url``, with quasar's admin client
(``quasar.client.admin``); both with the query's credentials and TLS settings.
"""

from __future__ import annotations

import re
import ssl

import quasar.client as qc
from pyspark_quasar.ledgers import LedgerSpan
from pyspark_quasar.names import base_topic, full_topic_name, partition_index
from pyspark_quasar.options import SourceOptions
from pyspark_quasar.positions import Bound
from pyspark_quasar.security import admin_ssl_context, client_options
from quasar.client.admin import AdminClient, call_admin
from quasar.client.authentication import Authentication
from quasar.errors import InvalidAdminResponse, ResourceNotFoundError

__all__ = [
    "BrokerView",
    "LedgerSpan",
    "base_topic",
    "fetch_ledger_spans",
    "full_topic_name",
    "ledger_spans",
    "partition_index",
]


async def fetch_ledger_spans(admin: AdminClient, topic: str) -> list[LedgerSpan] | None:
    """The partition's ledgers in order, with entry counts and bytes (internalStats).

    Returns None when the partition does not exist (any more).

    Raises:
        ConnectError, Timeout: the admin API is unreachable or too slow.
        AdminError: another error answer, or an answer of the wrong shape.
    """
    try:
        stats = await admin.internal_stats(topic)
    except ResourceNotFoundError:
        return None
    try:
        return [
            LedgerSpan(int(li["ledgerId"]), int(li["entries"]), int(li.get("size", 0)))
            for li in stats.get("ledgers", [])
        ]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InvalidAdminResponse(f"unexpected internalStats of {topic}: {exc}") from exc


def ledger_spans(
    admin_url: str,
    topic: str,
    ssl_context: ssl.SSLContext | None = None,
    authentication: Authentication | None = None,
) -> list[LedgerSpan] | None:
    """:func:`fetch_ledger_spans`, from blocking code (``ssl_context`` and
    ``authentication`` as ``AdminClient``'s).

    Raises:
        As :func:`fetch_ledger_spans`.
    """
    return call_admin(
        admin_url,
        lambda admin: fetch_ledger_spans(admin, topic),
        ssl_context=ssl_context,
        authentication=authentication,
    )


class BrokerView:
    """The driver's connection to the broker: one client, one probe reader a partition.

    Built lazily (never in ``DataSource.__init__``) and only in the driver's reader
    worker; the probe readers exist to ask GET_LAST_MESSAGE_ID.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        options = client_options(opts.conn)
        self._authentication: Authentication | None = options["authentication"]
        self._admin_tls = admin_ssl_context(opts.conn)
        self.client = qc.Client(
            opts.conn.service_url,
            operation_timeout_seconds=opts.conn.operation_timeout_s,
            **options,
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
        namespace = "/".join(full.split("://", 1)[1].split("/")[:2])
        regex = re.compile(full)
        listing = call_admin(
            self.opts.conn.admin_url,
            lambda admin: admin.topics(namespace),
            ssl_context=self._admin_tls,
            authentication=self._authentication,
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
        last = probe.get_last_message_id()
        if last.entry_id() < 0:
            return Bound.earliest()
        return Bound.after(last.ledger_id(), last.entry_id(), last.batch_index())

    def forget(self, partition: str) -> None:
        """Close the probe of a partition no longer read (its subscription would
        keep a deleted topic alive: a resubscribing reader creates it again)."""
        probe = self._probes.pop(partition, None)
        if probe is not None:
            probe.close()

    def first_at_or_after(self, partition: str, timestamp_ms: int) -> Bound | None:
        """``from <first message published at or after timestamp_ms>``, or None."""
        reader = self.client.create_reader(
            partition, qc.MessageId.earliest, receiver_queue_size=1
        )
        try:
            reader.seek(timestamp_ms)
            if not reader.has_message_available():
                return None
            mid = reader.read_next(self.opts.conn.operation_timeout_s * 1000).message_id()
            return Bound.starting_at(mid.ledger_id(), mid.entry_id(), mid.batch_index())
        finally:
            reader.close()

    def ledger_spans(self, partition: str) -> list[LedgerSpan] | None:
        return ledger_spans(
            self.opts.conn.admin_url, partition, self._admin_tls, self._authentication
        )
