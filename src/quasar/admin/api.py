"""What the admin REST API needs from the broker: the ``AdminBroker`` protocol.

The admin layer validates names, checks that tenants and namespaces exist, turns
partitioned topics into their partitions, and shapes HTTP answers. Everything that
touches live topics goes through this protocol, which the broker core implements.

Conventions for implementations:

* Topic arguments are full names, ``persistent://tenant/namespace/topic``; for the
  per-topic methods they name a non-partitioned topic or one partition
  (``...-partition-N``), never a partitioned topic's parent name, except where a
  method says otherwise.
* Errors are ``quasar.errors.QuasarError`` subclasses; their ``http_status`` becomes
  the HTTP status. Use ``TopicNotFound`` (404) and ``SubscriptionNotFound`` (404) for
  missing topics and subscriptions, and the admin errors: ``AlreadyExistsError`` (409),
  ``ConflictError`` (409), ``PreconditionFailedError`` (412: busy, e.g. connected
  clients without ``force``), ``ResourceNotFoundError`` (404) or
  ``InvalidResourceError`` (412). Anything else is answered with 500 and logged.
"""

from __future__ import annotations

from typing import Any, Protocol

from quasar.admin.non_persistent_api import NonPersistentAdminApi
from quasar.admin.policy_api import PolicyOperations
from quasar.admin.txn_api import TransactionAdminApi
from quasar.broker.schema_admin import SchemaAdmin
from quasar.resources.store import PulsarResources

__all__ = ["AdminBroker", "EARLIEST", "LATEST"]

# Message-id strings passed to ``create_subscription``; otherwise "ledgerId:entryId".
LATEST = "latest"
EARLIEST = "earliest"


class AdminBroker(Protocol):
    """The broker as the admin REST API sees it."""

    @property
    def resources(self) -> PulsarResources:
        """Tenants, namespaces and partitioned-topic metadata (the metadata store)."""
        ...

    @property
    def cluster_name(self) -> str:
        """This broker's cluster (``clusterName``); the only cluster that exists."""
        ...

    @property
    def non_persistent_admin(self) -> NonPersistentAdminApi:
        """The ``/admin/v2/non-persistent`` listing, stats and deletion."""
        ...

    @property
    def transaction_admin(self) -> TransactionAdminApi:
        """The ``/admin/v3/transactions`` queries and the operator's abort."""
        ...

    @property
    def schemas(self) -> SchemaAdmin:
        """A topic's schema history (``/admin/v2/schemas``)."""
        ...

    @property
    def policy_operations(self) -> PolicyOperations:
        """Namespace operations and message expiry (``quasar.admin.policy_api``)."""
        ...

    async def create_non_partitioned_topic(self, topic: str) -> None:
        """Create an empty non-partitioned topic (its managed ledger).

        The admin layer has already checked that the namespace exists and that no
        topic or partitioned topic of that name exists.

        Raises:
            AlreadyExistsError: the topic exists (a race with another creator).
        """
        ...

    async def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` (>= 1) partitions.

        Records the metadata (``resources.partitioned_topics.create``) and nothing
        else: partitions are created on first use, so the cost does not grow with
        ``partitions``.

        Raises:
            AlreadyExistsError: the topic exists (a race with another creator).
        """
        ...

    async def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Raise a partitioned topic's partition count to ``partitions``.

        Not in the minimal brief, but the new partitions must become usable, which
        only the broker can arrange; it records the metadata with
        ``resources.partitioned_topics.update``.

        Raises:
            ResourceNotFoundError: not a partitioned topic.
            ConflictError: ``partitions`` is not more than the current count.
        """
        ...

    async def delete_topic(self, topic: str, force: bool) -> None:
        """Delete a non-partitioned topic or one partition, with its data.

        Without ``force`` a topic with connected producers or consumers is not
        deleted; with ``force`` they are disconnected first.

        Raises:
            TopicNotFound: no such topic.
            PreconditionFailedError: clients are connected and ``force`` is false.
        """
        ...

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        """Delete a partitioned topic: every partition that exists, then its metadata.

        ``topic`` is the parent name. Partitions never used do not exist and are not
        an error. Without ``force`` nothing is deleted while a partition has
        connected clients.

        Raises:
            ResourceNotFoundError: not a partitioned topic.
            PreconditionFailedError: clients are connected and ``force`` is false.
        """
        ...

    def list_topics(self, namespace: str) -> list[str]:
        """Full names of the namespace's existing non-partitioned topics and
        partitions (``tenant/namespace`` in; any order out). A partition that no
        client has used yet does not exist and is not listed here."""
        ...

    def lookup_topic(self, topic: str, listener_name: str) -> dict[str, str | None]:
        """The HTTP lookup's answer for ``topic`` through ``listener_name`` ("" for
        none): Pulsar's ``LookupData`` JSON.

        Raises:
            TopicNotFound: the topic's namespace does not exist (404).
            ResourceNotFoundError: the broker has no listener of that name (404).
        """
        ...

    def auto_create_partitioned(self, topic: str) -> None:
        """Record ``topic`` as a partitioned topic if it does not exist and its
        namespace auto-creates partitioned topics (as PARTITIONED_METADATA does).

        Raises:
            NotAllowedError: the auto-created count would exceed the bound.
        """
        ...

    def topic_exists(self, topic: str) -> bool:
        """Whether a non-partitioned topic or a partition exists (one lookup, not a
        listing)."""
        ...

    async def topic_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's TopicStats JSON for one topic or partition.

        Raises:
            TopicNotFound: no such topic.
        """
        ...

    async def topic_internal_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's PersistentTopicInternalStats JSON (ledgers, cursors).

        Raises:
            TopicNotFound: no such topic.
        """
        ...

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's PartitionedTopicStats JSON for a partitioned topic's parent name:
        aggregated TopicStats plus ``metadata`` and per-partition ``partitions``.

        Raises:
            ResourceNotFoundError: not a partitioned topic.
        """
        ...

    async def list_subscriptions(self, topic: str) -> list[str]:
        """Names of the topic's (or partition's) durable subscriptions.

        Raises:
            TopicNotFound: no such topic.
        """
        ...

    async def create_subscription(
        self, topic: str, subscription: str, message_id: str
    ) -> None:
        """Create a durable subscription positioned at ``message_id``.

        ``message_id`` is ``"latest"``, ``"earliest"`` or ``"<ledgerId>:<entryId>"``.

        Raises:
            TopicNotFound: no such topic.
            AlreadyExistsError: the subscription exists.
        """
        ...

    async def delete_subscription(
        self, topic: str, subscription: str, force: bool
    ) -> None:
        """Delete a subscription and its cursor.

        Without ``force`` a subscription with connected consumers is kept; with
        ``force`` they are disconnected first.

        Raises:
            TopicNotFound, SubscriptionNotFound.
            PreconditionFailedError: consumers are connected and ``force`` is false.
        """
        ...

    async def trigger_compaction(self, topic: str) -> None:
        """Start compacting a topic (or one partition) in the background.

        Raises:
            TopicNotFound: no such topic.
            ConflictError: a compaction of this topic is already running.
        """
        ...

    async def compaction_status(self, topic: str) -> dict[str, str]:
        """Pulsar's LongRunningProcessStatus of the topic's last compaction:
        ``{"status": "NOT_RUN" | "RUNNING" | "SUCCESS" | "ERROR", "lastError": str}``.

        Raises:
            TopicNotFound: no such topic.
        """
        ...

    async def client_transactions(
        self,
        client_name: str,
        *,
        role: str | None,
        superuser: bool,
        coordinator_id: int | None = None,
    ) -> dict[str, Any]:
        """A client name's open and preserved terminated transactions, over every
        coordinator this broker hosts, or over ``coordinator_id`` only (idempotent
        commit/abort; JSON shape in ``docs/admin.md``).

        Only the transactions ``role`` (the request's authenticated role; None without
        authentication) may act on: those it opened and those opened without
        authentication. A ``superuser`` sees every role's; pass
        ``AuthorizationService.is_superuser(role)``, which is true for everyone while
        authorization is off.

        Raises:
            ServiceNotReady: transactions are disabled on this broker (503).
        """
        ...

    async def coordinator_stats(self, tc_id: int | None) -> dict[str, Any]:
        """Pulsar's ``TransactionCoordinatorStats`` of one coordinator, or of each by id.

        Raises:
            ServiceNotReady: transactions are disabled. ResourceNotFoundError:
                unknown id.
        """
        ...

    async def skip_coordinator_record(self, tc_id: int, position: str) -> dict[str, Any]:
        """Set the unreadable entry at ``position`` of a coordinator log aside, keep
        its bytes under the data directory, and load the coordinator again.

        Raises:
            BadRequestError: ``position`` is not ``ledger:entry``.
            PreconditionFailedError, ResourceNotFoundError: see ``set_aside``.
        """
        ...

    async def skip_pending_ack_record(
        self, topic: str, subscription: str, position: str
    ) -> dict[str, Any]:
        """As ``skip_coordinator_record``, for a subscription's pending-ack log.

        Raises:
            BadRequestError, PreconditionFailedError, ResourceNotFoundError,
            TopicNotFound, SubscriptionNotFound.
        """
        ...
