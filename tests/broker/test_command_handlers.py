"""The server's command handlers over a fake connection context: they need nothing of
``ServerConnection`` but the ``ConnectionContext`` interface, and the shared replies
carry Pulsar's error codes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

from quasar.auth import AuthorizationService
from quasar.broker.consumer import WriteState
from quasar.broker.hostile_input import HostileInputRefusals
from quasar.config import BrokerConfig, TopicListConfig
from quasar.errors import ProducerBusy, ServerError, TopicNotFound
from quasar.protocol import Frame, FrameDecoder, pb
from quasar.server import replies
from quasar.server.consumer_commands import ConsumerCommands
from quasar.server.limits import ConnectionLimits
from quasar.server.lookup_commands import LookupCommands
from quasar.server.producer_commands import ProducerCommands
from quasar.server.txn_commands import TransactionCommands

T = pb.BaseCommand


class _Context:
    """A connection context that records what the handlers send."""

    def __init__(self, transactions: Any = None) -> None:
        self.settings = SimpleNamespace(max_message_size=1024)
        self.service = SimpleNamespace(
            transactions=transactions,
            list_topics=lambda namespace: [f"persistent://{namespace}/t"],
            config=SimpleNamespace(topic_list=TopicListConfig()),
        )
        self.principal: str | None = None
        self.authorization: Any = AuthorizationService.allow_all()
        self.peer_certificate = None
        self.producers: dict[int, Any] = {}
        self.producer_futures: dict[int, asyncio.Future[None]] = {}
        self.consumers: dict[int, Any] = {}
        self.consumer_futures: dict[int, asyncio.Future[None]] = {}
        self.closed = False
        self.remote_address = "127.0.0.1:1"
        self.client_version = "test"
        self.protocol_version = 20
        self.frames: list[bytes] = []
        self.commands: list[pb.BaseCommand] = []
        self.spawned: list[Coroutine[Any, Any, None]] = []
        self.pending_publish = 0
        self.limits = ConnectionLimits(BrokerConfig())
        self.write_state = WriteState()
        self.refusals = HostileInputRefusals()

    def write(self, frame: bytes) -> None:
        self.frames.append(frame)

    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.commands.append(cmd)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.spawned.append(coro)

    def publish_started(self) -> None:
        self.pending_publish += 1

    def publish_completed(self) -> None:
        self.pending_publish -= 1

    def close_producer(self, producer_id: int) -> None:
        raise AssertionError("not expected")

    def close_consumer(self, consumer_id: int) -> None:
        raise AssertionError("not expected")


def _send(producer_id: int, sequence_id: int, txn: bool = False) -> pb.BaseCommand:
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = producer_id, sequence_id
    if txn:
        cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = 0, 7
    return cmd


def test_a_send_for_an_unknown_producer_gets_send_error() -> None:
    ctx = _Context()
    ProducerCommands(ctx).on_send(_send(3, 9), Frame(_send(3, 9), b"x"))  # type: ignore[arg-type]
    (answer,) = ctx.commands
    assert answer.type == T.SEND_ERROR
    assert (answer.send_error.producer_id, answer.send_error.sequence_id) == (3, 9)
    assert answer.send_error.error == ServerError.NotAllowedError


def test_a_transactional_send_without_transactions_gets_send_error() -> None:
    ctx = _Context()
    ctx.producers[1] = (object(), object())
    cmd = _send(1, 5, txn=True)
    ProducerCommands(ctx).on_send(cmd, Frame(cmd, b"x"))  # type: ignore[arg-type]
    (answer,) = ctx.commands
    assert answer.send_error.error == ServerError.NotAllowedError
    assert "not enabled" in answer.send_error.message
    assert ctx.pending_publish == 0


def test_broker_initiated_closes_write_the_command_and_forget_the_id() -> None:
    ctx = _Context()
    ctx.producers[4] = (object(), object())
    ctx.consumers[6] = (object(), object())
    ProducerCommands(ctx).close_producer(4)  # type: ignore[arg-type]
    ConsumerCommands(ctx).close_consumer(6)  # type: ignore[arg-type]
    closes = FrameDecoder(1024).feed(b"".join(ctx.frames))
    assert [f.command.type for f in closes] == [T.CLOSE_PRODUCER, T.CLOSE_CONSUMER]
    assert closes[0].command.close_producer.request_id == replies.BROKER_REQUEST_ID
    assert ctx.producers == {} and ctx.consumers == {}


def test_lookup_answers_from_the_service() -> None:
    ctx = _Context()
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    cmd.getTopicsOfNamespace.request_id, cmd.getTopicsOfNamespace.namespace = 2, "public/x"
    LookupCommands(ctx).handlers()[T.GET_TOPICS_OF_NAMESPACE](cmd, Frame(cmd))  # type: ignore[arg-type]
    (answer,) = ctx.commands
    assert list(answer.getTopicsOfNamespaceResponse.topics) == ["persistent://public/x/t"]


class _RefuseAll:
    """An authorization service that refuses every question (and says which)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any, str | None]] = []

    def __getattr__(self, question: str) -> Any:
        def refuse(resource: Any, role: str | None, *rest: Any) -> bool:
            self.asked.append((question, str(resource), role))
            return False

        return refuse


def _refusing_context() -> tuple[_Context, _RefuseAll]:
    ctx = _Context()
    ctx.principal = "stranger"
    refuse = ctx.authorization = _RefuseAll()
    return ctx, refuse


def test_topic_queries_are_refused_without_the_lookup_right() -> None:
    ctx, refuse = _refusing_context()
    handlers = LookupCommands(ctx).handlers()  # type: ignore[arg-type]
    topic = "persistent://public/default/t"
    lookup = T(type=T.LOOKUP)
    lookup.lookupTopic.request_id, lookup.lookupTopic.topic = 1, topic
    meta = T(type=T.PARTITIONED_METADATA)
    meta.partitionMetadata.request_id, meta.partitionMetadata.topic = 2, topic
    schema = T(type=T.GET_SCHEMA)
    schema.getSchema.request_id, schema.getSchema.topic = 3, topic
    topics = T(type=T.GET_TOPICS_OF_NAMESPACE)
    topics.getTopicsOfNamespace.request_id = 4
    topics.getTopicsOfNamespace.namespace = "public/default"
    for cmd in (lookup, meta, schema, topics):
        handlers[cmd.type](cmd, Frame(cmd))
    lookup_r, meta_r, schema_r, topics_r = ctx.commands
    assert lookup_r.lookupTopicResponse.error == ServerError.AuthorizationError
    assert "not authorized to Lookup" in lookup_r.lookupTopicResponse.message
    assert meta_r.partitionMetadataResponse.error == ServerError.AuthorizationError
    assert schema_r.getSchemaResponse.error_code == ServerError.AuthorizationError
    assert (topics_r.type, topics_r.error.error) == (T.ERROR, ServerError.AuthorizationError)
    assert [q for q, _, _ in refuse.asked] == [
        "can_lookup", "can_lookup", "can_lookup", "allows_in_namespace"
    ]
    assert {role for _, _, role in refuse.asked} == {"stranger"}


async def test_producer_and_subscribe_are_refused_without_the_right() -> None:
    ctx, refuse = _refusing_context()
    producer = T(type=T.PRODUCER)
    producer.producer.request_id, producer.producer.producer_id = 5, 1
    producer.producer.topic = "persistent://public/default/t"
    subscribe = T(type=T.SUBSCRIBE)
    subscribe.subscribe.request_id, subscribe.subscribe.consumer_id = 6, 1
    subscribe.subscribe.topic = "persistent://public/default/t"
    subscribe.subscribe.subscription = "s"
    subscribe.subscribe.subType = pb.CommandSubscribe.Shared
    await ProducerCommands(ctx).on_producer(producer.producer)  # type: ignore[arg-type]
    await ConsumerCommands(ctx).on_subscribe(subscribe.subscribe)  # type: ignore[arg-type]
    answers = [(c.type, c.error.request_id, c.error.error) for c in ctx.commands]
    assert answers == [
        (T.ERROR, 5, ServerError.AuthorizationError),
        (T.ERROR, 6, ServerError.AuthorizationError),
    ]
    assert [q for q, _, _ in refuse.asked] == ["can_produce", "can_consume"]
    assert ctx.producer_futures == {} and ctx.consumer_futures == {}


async def test_a_coordinator_request_without_transactions_is_refused() -> None:
    ctx = _Context()
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id, cmd.newTxn.tc_id = 8, 0
    TransactionCommands(ctx).handlers()[T.NEW_TXN](cmd, Frame(cmd))  # type: ignore[arg-type]
    (answer,) = ctx.commands
    assert answer.newTxnResponse.request_id == 8
    assert answer.newTxnResponse.error == ServerError.NotAllowedError


def test_error_codes_come_from_the_exception() -> None:
    assert replies.error_code_and_message(ProducerBusy("busy")) == (
        ServerError.ProducerBusy, "busy"
    )
    assert replies.error_code_and_message(TopicNotFound("")) == (
        ServerError.TopicNotFound, "TopicNotFound"
    )
    code, message = replies.error_code_and_message(RuntimeError("a bug"))
    assert code == ServerError.UnknownError and message == "RuntimeError: a bug"
    err = replies.error(5, ProducerBusy("busy"))
    assert (err.type, err.error.request_id, err.error.error) == (
        T.ERROR, 5, ServerError.ProducerBusy
    )
