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
from quasar.storage.api import EARLIEST, LATEST, Entry, InitialPosition, Position
from quasar.transaction.batched_log.set_aside import parse_position
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

from .compaction import compacted_ledger_prefix, delete_compacted_ledgers
from .cursor_ops import (
    clear_backlog,
    entry_exists,
    last_readable,
    nth_unacked,
    reset_position,
    skip_entries,
)
from .lookup_data import lookup_data
from .message_peek import PeekedMessage, peeked_message
from .namespace_admin import NamespaceAdmin
from .non_persistent_admin import NonPersistentAdmin
from .schema_admin import SchemaAdmin
from .service import BrokerService
from .subscription import Subscription
from .termination import terminate
from .topic import PersistentTopic, is_system_cursor
from .transactions import TransactionService
from .txn_admin import TransactionAdmin

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
        self._transaction_admin = TransactionAdmin(service)
        self.policy_operations = NamespaceAdmin(service)
        self._schemas: SchemaAdmin | None = None

    @property
    def resources(self) -> PulsarResources:
        return self.service.resources

    @property
    def cluster_name(self) -> str:
        return self.service.config.broker.cluster_name

    @property
    def non_persistent_admin(self) -> NonPersistentAdmin:
        """``/admin/v2/non-persistent`` (``quasar.admin.non_persistent_topics``)."""
        return NonPersistentAdmin(self.service)

    @property
    def transaction_admin(self) -> TransactionAdmin:
        """``/admin/v3/transactions`` (``quasar.broker.txn_admin``)."""
        return self._transaction_admin

    @property
    def schemas(self) -> SchemaAdmin:
        """``/admin/v2/schemas`` (``quasar.broker.schema_admin``), made on first use."""
        if self._schemas is None:
            service = self.service
            self._schemas = SchemaAdmin(
                service.schemas, lambda topic: service.schema_key(TopicName.parse(topic))
            )
        return self._schemas

    @property
    def transaction_batched_logs(self) -> Any:
        """PIP-160 switches (``quasar.admin.txn_batch_log``); None: no transactions."""
        txns = self.service.transactions
        return None if txns is None else txns.batched_logs

    def lookup_topic(self, topic: str, listener_name: str) -> dict[str, str | None]:
        name = TopicName.parse(topic)
        # As the binary LOOKUP answers (server/lookup_commands.py).
        if not self.service.namespace_exists(name.namespace_name):
            raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
        try:
            return lookup_data(self.service.config.broker, listener_name).to_json()
        except ServiceNotReady as exc:
            # Over HTTP the request names something that does not exist: 404 with
            # the binary answer's message, not a server error.
            raise ResourceNotFoundError(str(exc)) from None

    def auto_create_partitioned(self, topic: str) -> None:
        self.service.partitioned_metadata(TopicName.parse(topic))

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
        self.service.topic_list_watchers.partitions_changed(
            TopicName.parse(topic), range(partitions), created=True
        )

    async def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        before = self.service.partitions_of(TopicName.parse(topic))
        self.resources.partitioned_topics.update(topic, partitions)
        self.service.topic_list_watchers.partitions_changed(
            TopicName.parse(topic), range(before, partitions), created=True
        )

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
        declared = self.service.partitions_of(name)
        self.resources.partitioned_topics.delete(topic)
        self.service.topic_list_watchers.partitions_changed(
            name, range(declared), created=False
        )

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
            key: sum(s.get(key, 0) for s in partitions.values())
            for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut",
                        "msgInCounter", "bytesInCounter", "msgOutCounter",
                        "bytesOutCounter", "storageSize", "backlogSize")
        }
        # Pulsar's partitioned averageMsgSize: the partitions' throughput over rate.
        totals["averageMsgSize"] = (
            totals["msgThroughputIn"] / totals["msgRateIn"] if totals["msgRateIn"] else 0.0
        )
        subs: dict[str, Any] = {}
        for stats in partitions.values():
            for sub_name, sub in stats["subscriptions"].items():
                agg = subs.setdefault(sub_name, {"msgRateOut": 0.0, "msgThroughputOut": 0.0,
                                                 "msgBacklog": 0, "msgOutCounter": 0,
                                                 "type": sub["type"], "consumers": []})
                for key in ("msgRateOut", "msgThroughputOut", "msgBacklog", "msgOutCounter"):
                    agg[key] += sub[key]
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
        self,
        client_name: str,
        *,
        role: str | None,
        superuser: bool,
        coordinator_id: int | None = None,
    ) -> dict[str, Any]:
        transactions = self.service.transactions
        if transactions is None:
            raise ServiceNotReady("Transactions are not enabled on this broker")
        return await transactions.client_transactions(
            client_name, role=role, superuser=superuser, coordinator_id=coordinator_id
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
        if not 0 <= tc_id < transactions.coordinator_count:
            # The registry's own error is the binary protocol's retryable one (503);
            # an id that cannot exist is a missing resource, 404 as Pulsar answers.
            raise ResourceNotFoundError(f"Transaction coordinator with id {tc_id} not found")
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

    # -- per-topic operations (docs/admin.md, "Topic operations") -----------------------
    async def _subscription(self, topic: str, subscription: str) -> Subscription:
        t = await self._topic(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound("Subscription not found")
        return sub

    async def skip_messages(self, topic: str, subscription: str, count: int) -> int:
        sub = await self._subscription(topic, subscription)
        return skip_entries(sub, (await self._topic(topic)).max_read_position, count)

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        sub = await self._subscription(topic, subscription)
        clear_backlog(sub, (await self._topic(topic)).max_read_position)

    async def reset_cursor_to_time(
        self, topic: str, subscription: str, timestamp_ms: int
    ) -> None:
        t = await self._topic(topic)
        sub = await self._subscription(topic, subscription)
        sub.reset_cursor(await t.find_position_by_time(timestamp_ms))
        await sub.cursor.flush()

    async def reset_cursor_to_position(
        self, topic: str, subscription: str, message_id: str, excluded: bool
    ) -> None:
        t = await self._topic(topic)
        sub = await self._subscription(topic, subscription)
        ledger = t.ledger
        if message_id == "earliest":
            start = ledger.first_position
        elif message_id == "latest":
            start = ledger.next_position(ledger.last_confirmed_entry)
        else:
            start = reset_position(ledger, _position(message_id), excluded)
        sub.reset_cursor(start)
        await sub.cursor.flush()

    def _peeked(self, entry: Entry | None) -> PeekedMessage:
        if entry is None:
            raise ResourceNotFoundError("Message not found")
        return peeked_message(entry, self.service.input_bounds.max_uncompressed_size)

    async def peek_message(self, topic: str, subscription: str, n: int) -> PeekedMessage:
        t = await self._topic(topic)
        sub = await self._subscription(topic, subscription)
        position = nth_unacked(sub, t.max_read_position, n)
        entry = None if position is None else await t.ledger.read_entry(position)
        return self._peeked(entry)

    async def examine_message(self, topic: str, initial: str, n: int) -> PeekedMessage:
        t = await self._topic(topic)
        ledger = t.ledger
        first, last = ledger.first_position, last_readable(ledger, t.max_read_position)
        if last is None or last < first or ledger.count_entries(first, last) == 0:
            raise PreconditionFailedError(
                "Could not examine messages due to the total message is zero"
            )
        # Past either end, Pulsar answers the entry at that end.
        position = first if initial == "earliest" else last
        step = ledger.next_position if initial == "earliest" else ledger.previous_position
        for _ in range(n - 1):
            following = step(position)
            if not first <= following <= last or following == position:
                break
            position = following
        return self._peeked(await ledger.read_entry(position))

    async def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> PeekedMessage:
        t = await self._topic(topic)
        position = Position(ledger_id, entry_id)
        if not entry_exists(t.ledger, position):
            raise ResourceNotFoundError("Message not found")
        return self._peeked(await t.ledger.read_entry(position))

    async def last_message_id(self, topic: str) -> dict[str, Any]:
        t = await self._topic(topic)
        position, info = await t.last_message(read_compacted=False)
        answer: dict[str, Any] = {
            "ledgerId": position.ledger_id,
            "entryId": position.entry_id,
            "partitionIndex": t.partition_index,
        }
        if info is not None and info.is_batch:
            answer["batchIndex"] = info.num_messages - 1
        return answer

    async def message_id_by_time(self, topic: str, timestamp_ms: int) -> dict[str, Any]:
        t = await self._topic(topic)
        position = await t.find_position_by_time(timestamp_ms)
        if not entry_exists(t.ledger, position):
            raise ResourceNotFoundError("Message ID not found")
        return {
            "ledgerId": position.ledger_id,
            "entryId": position.entry_id,
            "partitionIndex": t.partition_index,
        }

    async def unload_topic(self, topic: str) -> None:
        """Close the loaded topic; its clients reconnect and load it again."""
        name = TopicName.parse(topic)
        if not self.service.topic_exists(name):
            raise TopicNotFound(f"Topic {topic} does not exist")
        loaded = self.service.topics.get(name.full)
        if loaded is None:
            return
        await loaded.close()
        if self.service.topics.get(name.full) is loaded:
            del self.service.topics[name.full]

    async def terminate_topic(self, topic: str) -> dict[str, Any]:
        t = await self._topic(topic)
        last = await terminate(t, self.service.store)
        return {
            "ledgerId": last.ledger_id,
            "entryId": last.entry_id,
            "partitionIndex": t.partition_index,
        }
