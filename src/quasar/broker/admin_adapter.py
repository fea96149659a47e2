"""The broker service as the admin REST API sees it (``quasar.admin.api.AdminBroker``)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from quasar.errors import (
    AlreadyExistsError,
    BadRequestError,
    NotAllowedError,
    PreconditionFailedError,
    ResourceNotFoundError,
    ServiceNotReady,
    SubscriptionNotFound,
    TopicNotFound,
)
from quasar.protocol import TopicName
from quasar.resources.store import PulsarResources
from quasar.storage.api import EARLIEST, LATEST, InitialPosition, Position
from quasar.transaction.batched_log.set_aside import parse_position
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

from .compaction import compacted_ledger_prefix, delete_compacted_ledgers
from .namespace_admin import NamespaceAdmin
from .service import BrokerService
from .topic import PersistentTopic, is_system_cursor
from .transactions import TransactionService

# Where the operator's skipCorruptRecord keeps the bytes it set aside, under dataDir.
CORRUPT_RECORDS_DIR = "corrupt-records"


def _position(text: str) -> Position:
    try:
        return parse_position(text)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from exc


class AdminAdapter:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.policy_operations = NamespaceAdmin(service)

    @property
    def resources(self) -> PulsarResources:
        return self.service.resources

    @property
    def cluster_name(self) -> str:
        return self.service.config.broker.cluster_name

    @property
    def transaction_batched_logs(self) -> Any:
        """PIP-160 switches (``quasar.admin.txn_batch_log``); None: no transactions."""
        txns = self.service.transactions
        return None if txns is None else txns.batched_logs

    async def _topic(self, topic: str, create_partition: bool = False) -> PersistentTopic:
        """The topic or partition; with ``create_partition`` a partition of a
        partitioned topic that no client has used yet is created, as a producer or
        consumer would create it. Requests that only read (listing subscriptions,
        compaction status) never create one: that would turn one request on a
        partitioned topic into creating every partition."""
        name = TopicName.parse(topic)
        if self.service.topic_exists(name):
            return await self.service.get_topic(name, create=False)
        if (
            create_partition
            and name.is_partition
            and name.partition_index < self.service.partitions_of(name.base)
        ):
            return await self.service.get_topic(name, create=True)
        raise TopicNotFound(f"Topic {topic} does not exist")

    def topic_exists(self, topic: str) -> bool:
        return self.service.topic_exists(TopicName.parse(topic))

    async def create_non_partitioned_topic(self, topic: str) -> None:
        name = TopicName.parse(topic)
        if self.service.topic_exists(name):
            raise AlreadyExistsError("This topic already exists")
        await self.service.create_topic(name)

    # Creating or growing a partitioned topic records its metadata only: each
    # partition is created when first used, as Pulsar creates auto-created ones, so
    # the request costs the same for any partition count.
    async def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.resources.partitioned_topics.create(topic, partitions)

    async def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.resources.partitioned_topics.update(topic, partitions)

    async def delete_topic(self, topic: str, force: bool) -> None:
        name = TopicName.parse(topic)
        try:
            await self.service.delete_topic(name, force)
        except NotAllowedError as e:
            raise PreconditionFailedError(str(e)) from None
        # The topic's compacted ledgers are managed ledgers of their own.
        await delete_compacted_ledgers(self.service.ledgers, name.persistence_name)

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        name = TopicName.parse(topic)
        if not self.resources.partitioned_topics.exists(topic):
            raise ResourceNotFoundError("Partitioned topic does not exist")
        # Only the partitions that were used exist; the others are nothing to delete.
        partitions = await self.service.partitions_in_use(name)
        if not force:
            busy = [p.full for p in partitions if not self._idle(p)]
            if busy:
                raise PreconditionFailedError(
                    f"Topic has active producers/subscriptions: {busy[0]}"
                )
        compacted = self.service.ledgers.list_names() if partitions else []
        for partition in partitions:
            await self.service.delete_topic(partition, force=True)
            # Deleting an unloaded partition never suspends; give the loop a turn
            # between partitions so a wide topic's delete does not stall clients.
            await asyncio.sleep(0)
            # A partition's compacted ledgers are managed ledgers of their own; the
            # ledger names are listed once for all partitions.
            prefix = compacted_ledger_prefix(partition.persistence_name)
            for ledger in compacted:
                if ledger.startswith(prefix):
                    await self.service.ledgers.delete(ledger)
        self.resources.partitioned_topics.delete(topic)

    def _idle(self, name: TopicName) -> bool:
        topic = self.service.topics.get(name.full)
        return topic is None or topic.is_idle()

    def list_topics(self, namespace: str) -> list[str]:
        return self.service.registered_topics(namespace)

    async def topic_stats(self, topic: str) -> dict[str, Any]:
        return (await self._topic(topic, create_partition=True)).stats()

    async def topic_internal_stats(self, topic: str) -> dict[str, Any]:
        return (await self._topic(topic, create_partition=True)).internal_stats()

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        name = TopicName.parse(topic)
        meta = self.resources.partitioned_topics.get(topic)
        if meta is None:
            raise ResourceNotFoundError("Partitioned topic does not exist")
        partitions: dict[str, Any] = {}
        for i in range(meta.partitions):
            p = name.partition(i)
            if self.service.topic_exists(p):
                partitions[p.full] = (await self._topic(p.full)).stats()
        totals: dict[str, Any] = {
            key: sum(int(s.get(key, 0)) for s in partitions.values())
            for key in ("msgInCounter", "bytesInCounter", "msgOutCounter",
                        "bytesOutCounter", "storageSize", "backlogSize")
        }
        subs: dict[str, Any] = {}
        for stats in partitions.values():
            for sub_name, sub in stats["subscriptions"].items():
                agg = subs.setdefault(sub_name, {"msgBacklog": 0, "msgOutCounter": 0,
                                                 "type": sub["type"], "consumers": []})
                agg["msgBacklog"] += sub["msgBacklog"]
                agg["msgOutCounter"] += sub["msgOutCounter"]
                agg["consumers"].extend(sub["consumers"])
        totals.update(
            metadata={"partitions": meta.partitions},
            publishers=[p for s in partitions.values() for p in s["publishers"]],
            subscriptions=subs,
            partitions=partitions,
        )
        return totals

    async def list_subscriptions(self, topic: str) -> list[str]:
        t = await self._topic(topic)
        return sorted(n for n, s in t.subscriptions.items() if s.durable)

    async def create_subscription(self, topic: str, subscription: str, message_id: str) -> None:
        t = await self._topic(topic, create_partition=True)
        if subscription in t.subscriptions or is_system_cursor(subscription):
            raise AlreadyExistsError("Subscription already exists for topic")
        if message_id == "earliest":
            cursor = t.ledger.open_cursor(subscription, InitialPosition.EARLIEST)
        else:
            cursor = t.ledger.open_cursor(subscription, InitialPosition.LATEST)
            if message_id != "latest":
                ledger, entry = (int(x) for x in message_id.split(":")[:2])
                start = Position(ledger, entry)
                if start >= LATEST or start <= EARLIEST:
                    start = t.ledger.first_position if start <= EARLIEST else start
                cursor.reset(start)
                await cursor.flush()
        t.add_durable_subscription(subscription, cursor)

    async def delete_subscription(self, topic: str, subscription: str, force: bool) -> None:
        t = await self._topic(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound("Subscription not found")
        if sub.consumers and not force:
            raise PreconditionFailedError("Subscription has active connected consumers")
        t.delete_subscription(subscription)

    async def trigger_compaction(self, topic: str) -> None:
        (await self._topic(topic)).compaction.trigger()

    async def compaction_status(self, topic: str) -> dict[str, str]:
        return (await self._topic(topic)).compaction.status_json()

    async def client_transactions(
        self, client_name: str, *, role: str | None, superuser: bool
    ) -> dict[str, Any]:
        transactions = self.service.transactions
        if transactions is None:
            raise ServiceNotReady("Transactions are not enabled on this broker")
        return await transactions.client_transactions(
            client_name, role=role, superuser=superuser
        )

    # -- unreadable records in the broker's own logs (docs/operations.md) -----------------
    def _transactions(self) -> TransactionService:
        transactions = self.service.transactions
        if transactions is None:
            raise ServiceNotReady("Transactions are not enabled on this broker")
        return transactions

    async def coordinator_stats(self, tc_id: int | None) -> dict[str, Any]:
        return await self._transactions().coordinator_stats(tc_id)

    async def skip_coordinator_record(self, tc_id: int, position: str) -> dict[str, Any]:
        transactions = self._transactions()
        pos = _position(position)
        log_name = transaction_log_ledger_name(tc_id)
        data = await transactions.registry.set_aside(tc_id, pos)
        state = await transactions.coordinator_stats(tc_id)
        return self._set_aside_answer(log_name, pos, data, state)

    async def skip_pending_ack_record(
        self, topic: str, subscription: str, position: str
    ) -> dict[str, Any]:
        self._transactions()
        pos = _position(position)
        t = await self._topic(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound("Subscription not found")
        data = await sub.txns.set_aside(pos)
        state = sub.txns.status() or {"pendingAckState": "None"}
        return self._set_aside_answer(sub.txns.ledger_name, pos, data, state)

    def _set_aside_answer(
        self, log_name: str, pos: Position, data: bytes, state: dict[str, Any]
    ) -> dict[str, Any]:
        """Keep the set-aside bytes for inspection and describe what was done."""
        folder = self.service.config.broker.data_path / CORRUPT_RECORDS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{quote(log_name, safe='')}-{pos.ledger_id}-{pos.entry_id}.bin"
        path.write_bytes(data)
        return {"log": log_name, "position": str(pos), "size": len(data),
                "savedTo": str(path), "state": state}
