"""GET_TOPICS_OF_NAMESPACE with a pattern and a hash, and WATCH_TOPIC_LIST /
WATCH_TOPIC_LIST_CLOSE, over a fake connection context: the answers, the bounds and
their counts, the authorization check, and what CONNECTED offers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from quasar.auth import AuthorizationService
from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.topic_list import TopicListWatchers, topics_hash
from quasar.config import BrokerConfig, TopicListConfig
from quasar.errors import ServerError
from quasar.protocol import Frame, pb
from quasar.protocol.topic_name import TopicName
from quasar.server.limits import ConnectionLimits
from quasar.server.topic_list_commands import (
    TopicListCommands,
    topics_of_namespace_answer,
    watchers_offered,
)

T = pb.BaseCommand
NS = "persistent://public/default/"
TOPICS = [NS + "pat-a", NS + "pat-b-partition-0", NS + "other", NS + "__change_events"]


class _Context:
    def __init__(self, config: TopicListConfig | None = None) -> None:
        self.registry = CollectorRegistry()
        self.service = SimpleNamespace(
            config=SimpleNamespace(topic_list=config or TopicListConfig()),
            list_topics=lambda namespace: list(TOPICS),
            topic_list_watchers=TopicListWatchers(),
        )
        self.principal: str | None = None
        self.authorization: Any = AuthorizationService.allow_all()
        self.refusals = HostileInputRefusals(self.registry)
        self.limits = ConnectionLimits(BrokerConfig(), self.registry)
        self.closed = False
        self.remote_address = "127.0.0.1:1"
        self.commands: list[pb.BaseCommand] = []

    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.commands.append(cmd)

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


def _get_topics(pattern: str | None = None, digest: str | None = None) -> Any:
    c = pb.CommandGetTopicsOfNamespace(request_id=1, namespace="public/default")
    if pattern is not None:
        c.topics_pattern = pattern
    if digest is not None:
        c.topics_hash = digest
    return c


def test_unfiltered_list_leaves_out_system_topics_and_carries_its_hash() -> None:
    ctx = _Context()
    r = topics_of_namespace_answer(ctx, _get_topics(), TOPICS).getTopicsOfNamespaceResponse  # type: ignore[arg-type]
    listed = TOPICS[:3]
    assert list(r.topics) == listed
    assert (r.filtered, r.changed, r.topics_hash) == (False, True, topics_hash(listed))


def test_pattern_filters_and_a_current_hash_is_answered_unchanged() -> None:
    ctx = _Context()
    pattern = NS + "pat-.*"
    r = topics_of_namespace_answer(ctx, _get_topics(pattern), TOPICS).getTopicsOfNamespaceResponse  # type: ignore[arg-type]
    matching = [NS + "pat-a", NS + "pat-b-partition-0"]
    assert list(r.topics) == matching
    assert (r.filtered, r.changed, r.topics_hash) == (True, True, topics_hash(matching))
    again = topics_of_namespace_answer(  # type: ignore[arg-type]
        ctx, _get_topics(pattern, r.topics_hash), TOPICS
    ).getTopicsOfNamespaceResponse
    assert list(again.topics) == [] and again.changed is False and again.filtered is True
    assert again.topics_hash == r.topics_hash


def test_a_refused_pattern_is_answered_unfiltered_and_counted() -> None:
    ctx = _Context()
    r = topics_of_namespace_answer(ctx, _get_topics("x" * 51), TOPICS).getTopicsOfNamespaceResponse  # type: ignore[arg-type]
    assert r.filtered is False and len(r.topics) == 3
    assert ctx.count("quasar_hostile_input_refused_total", reason="topics_pattern") == 1


def test_pattern_evaluation_can_be_turned_off() -> None:
    ctx = _Context(TopicListConfig(enable_broker_side_subscription_pattern_evaluation=False))
    r = topics_of_namespace_answer(ctx, _get_topics(NS + "pat-.*"), TOPICS).getTopicsOfNamespaceResponse  # type: ignore[arg-type]
    assert r.filtered is False and len(r.topics) == 3
    commands = TopicListCommands(ctx)  # type: ignore[arg-type]
    commands.on_watch(_watch(1, 1))
    (answer,) = ctx.commands
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.NotAllowedError)


def _watch(request_id: int, watcher_id: int, digest: str | None = None, pattern: str = NS + "pat-.*") -> Any:
    c = pb.CommandWatchTopicList(
        request_id=request_id, watcher_id=watcher_id, namespace="public/default",
        topics_pattern=pattern,
    )
    if digest is not None:
        c.topics_hash = digest
    return c


def test_watch_lists_then_updates_then_closes() -> None:
    ctx = _Context()
    commands = TopicListCommands(ctx)  # type: ignore[arg-type]
    handlers = commands.handlers()
    cmd = T(type=T.WATCH_TOPIC_LIST)
    cmd.watchTopicList.CopyFrom(_watch(1, 7))
    handlers[T.WATCH_TOPIC_LIST](cmd, Frame(cmd))
    success = ctx.commands.pop().watchTopicListSuccess
    matching = [NS + "pat-a", NS + "pat-b-partition-0"]
    assert (success.request_id, success.watcher_id) == (1, 7)
    assert list(success.topic) == matching and success.topics_hash == topics_hash(matching)
    # Asked again with the current hash (a reconnect): no names.
    commands.on_watch(_watch(2, 8, success.topics_hash))
    assert list(ctx.commands.pop().watchTopicListSuccess.topic) == []
    watchers = ctx.service.topic_list_watchers
    watchers.topic_created(TopicName.parse(NS + "pat-new"))
    watchers.topic_deleted(TopicName.parse(NS + "pat-a"))
    updates = [c.watchTopicUpdate for c in ctx.commands if c.type == T.WATCH_TOPIC_UPDATE]
    assert [(u.watcher_id, list(u.new_topics), list(u.deleted_topics)) for u in updates] == [
        (7, [NS + "pat-new"], []), (8, [NS + "pat-new"], []),
        (7, [], [NS + "pat-a"]), (8, [], [NS + "pat-a"]),
    ]
    assert updates[-1].topics_hash == topics_hash([NS + "pat-b-partition-0", NS + "pat-new"])
    ctx.commands.clear()
    close = T(type=T.WATCH_TOPIC_LIST_CLOSE)
    close.watchTopicListClose.request_id, close.watchTopicListClose.watcher_id = 3, 7
    handlers[T.WATCH_TOPIC_LIST_CLOSE](close, Frame(close))
    closed = ctx.commands.pop().watchTopicListSuccess
    assert (closed.request_id, closed.watcher_id) == (3, 7)
    assert len(watchers) == 1
    commands.close()  # the connection closed
    assert len(watchers) == 0
    watchers.topic_created(TopicName.parse(NS + "pat-late"))
    assert ctx.commands == []


def test_watchers_per_connection_are_bounded_and_counted() -> None:
    ctx = _Context(TopicListConfig(max_topic_list_watchers_per_connection=2))
    commands = TopicListCommands(ctx)  # type: ignore[arg-type]
    for i in range(3):
        commands.on_watch(_watch(i, i))
    assert [c.type for c in ctx.commands] == [
        T.WATCH_TOPIC_LIST_SUCCESS, T.WATCH_TOPIC_LIST_SUCCESS, T.ERROR
    ]
    assert ctx.commands[-1].error.error == ServerError.NotAllowedError
    key = "maxTopicListWatchersPerConnection"
    assert ctx.count("quasar_limit_refusals_total", limit=key) == 1
    assert len(ctx.service.topic_list_watchers) == 2


def test_a_hostile_watch_pattern_is_refused_and_counted() -> None:
    ctx = _Context()
    commands = TopicListCommands(ctx)  # type: ignore[arg-type]
    commands.on_watch(_watch(1, 1, pattern=r"public/default/(a)\1"))
    commands.on_watch(_watch(2, 2, pattern="public/default/" + "a" * 60))
    assert [c.error.error for c in ctx.commands] == [ServerError.NotAllowedError] * 2
    assert ctx.count("quasar_hostile_input_refused_total", reason="topics_pattern") == 2
    assert len(ctx.service.topic_list_watchers) == 0


def test_watch_needs_the_right_to_list_the_namespace() -> None:
    ctx = _Context()
    asked: list[tuple[str, str | None]] = []

    class _Refuse:
        def allows_in_namespace(self, namespace: str, role: str | None, action: Any) -> bool:
            asked.append((namespace, role))
            return False

    ctx.authorization = _Refuse()
    ctx.principal = "stranger"
    TopicListCommands(ctx).on_watch(_watch(1, 1))  # type: ignore[arg-type]
    (answer,) = ctx.commands
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.AuthorizationError)
    assert asked == [("public/default", "stranger")]


def test_connected_offers_watchers_only_to_clients_that_support_them() -> None:
    on = TopicListConfig()
    java_like = pb.FeatureFlags(supports_topic_watchers=True)
    cpp = pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True)
    assert watchers_offered(on, java_like)
    assert not watchers_offered(on, cpp)
    assert not watchers_offered(TopicListConfig(enable_broker_topic_list_watcher=False), java_like)
