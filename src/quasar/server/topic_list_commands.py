"""GET_TOPICS_OF_NAMESPACE's answer and WATCH_TOPIC_LIST / WATCH_TOPIC_LIST_CLOSE on a
client connection: the topic lists behind pattern subscriptions.

GET_TOPICS_OF_NAMESPACE lists a namespace's topics without its system topics. With a
``topics_pattern`` (and ``enableBrokerSideSubscriptionPatternEvaluation``) only the
matching topics are listed, with ``filtered=true``; every answer carries the
``topics_hash`` of what it lists, and a request whose ``topics_hash`` equals it gets
``changed=false`` and no names. A pattern over ``subscriptionPatternMaxLength`` or
one RE2 cannot evaluate is answered unfiltered, as Pulsar does: the client filters
by itself.

WATCH_TOPIC_LIST registers a watcher of a namespace's topics that match a pattern; it
is answered WATCH_TOPIC_LIST_SUCCESS with the matching topics (none when the
client's hash is current) and their hash, then WATCH_TOPIC_UPDATE whenever a
matching topic is created or deleted. WATCH_TOPIC_LIST_CLOSE removes it and is
answered WATCH_TOPIC_LIST_SUCCESS. A connection holds at most
``maxTopicListWatchersPerConnection`` watchers; all go when it closes.

Both need the right to list the namespace's topics, as GET_TOPICS_OF_NAMESPACE
always did. CONNECTED offers the watcher (``supports_topic_watchers``) only to a
client whose CONNECT says it supports it (``watchers_offered``): the C++ client of
``pulsar-client`` 3.13 does not, and closes the connection on a command it does not
know.
"""

from __future__ import annotations

import logging

from quasar.auth.authorization import CONSUME
from quasar.broker.topic_list import (
    TopicListWatcher,
    TopicsPattern,
    filter_topics,
    topics_hash,
    visible_topics,
)
from quasar.config import TopicListConfig
from quasar.errors import (
    REFUSED_TOPICS_PATTERN,
    NotAllowedError,
    QuasarError,
    tag_refusal,
)
from quasar.protocol import pb

from . import replies
from .context import CommandHandler, ConnectionContext
from .permissions import require
from .wire import namespace_of

__all__ = ["TopicListCommands", "topics_of_namespace_answer", "watchers_offered"]

log = logging.getLogger(__name__)

T = pb.BaseCommand
WATCHER_LIMIT_KEY = "maxTopicListWatchersPerConnection"


def watchers_offered(config: TopicListConfig, client_flags: pb.FeatureFlags) -> bool:
    """Whether CONNECTED should claim ``supports_topic_watchers`` to this client."""
    return (
        config.enable_broker_side_subscription_pattern_evaluation
        and config.enable_broker_topic_list_watcher
        and client_flags.supports_topic_watchers
    )


def _pattern(ctx: ConnectionContext, text: str) -> TopicsPattern:
    """Compile a client's pattern; a refusal is tagged, to be counted once answered."""
    config: TopicListConfig = ctx.service.config.topic_list
    try:
        return TopicsPattern.compile(text, config.subscription_pattern_max_length)
    except NotAllowedError as e:
        raise tag_refusal(e, REFUSED_TOPICS_PATTERN) from None


def topics_of_namespace_answer(
    ctx: ConnectionContext, c: pb.CommandGetTopicsOfNamespace, topics: list[str]
) -> pb.BaseCommand:
    """GET_TOPICS_OF_NAMESPACE_RESPONSE for ``topics``, the namespace's topics."""
    listed = visible_topics(topics)
    filtered = False
    config: TopicListConfig = ctx.service.config.topic_list
    if c.HasField("topics_pattern") and config.enable_broker_side_subscription_pattern_evaluation:
        try:
            listed = filter_topics(listed, _pattern(ctx, c.topics_pattern))
            filtered = True
        except NotAllowedError as e:
            # Answered unfiltered, as Pulsar does; the refusal still counts.
            ctx.refusals.counted(e)
            log.info("%s: topics pattern not evaluated: %s", ctx.remote_address, e)
    digest = topics_hash(listed)
    changed = not (c.HasField("topics_hash") and c.topics_hash == digest)
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    r = cmd.getTopicsOfNamespaceResponse
    r.request_id = c.request_id
    if changed:
        r.topics.extend(listed)
    r.filtered = filtered
    r.topics_hash = digest
    r.changed = changed
    return cmd


class TopicListCommands:
    """The topic-list watchers of one connection."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx
        self._watchers: dict[int, TopicListWatcher] = {}

    def handlers(self) -> dict[int, CommandHandler]:
        return {
            T.WATCH_TOPIC_LIST: lambda c, f: self.on_watch(c.watchTopicList),
            T.WATCH_TOPIC_LIST_CLOSE: lambda c, f: self.on_close(c.watchTopicListClose),
        }

    def on_watch(self, c: pb.CommandWatchTopicList) -> None:
        ctx = self._ctx
        try:
            watcher = self._watcher_for(c)
        except QuasarError as e:
            ctx.send_command(replies.error(c.request_id, ctx.refusals.counted(e)))
            return
        digest = watcher.hash
        cmd = T(type=T.WATCH_TOPIC_LIST_SUCCESS)
        r = cmd.watchTopicListSuccess
        r.request_id = c.request_id
        r.watcher_id = c.watcher_id
        if not (c.HasField("topics_hash") and c.topics_hash == digest):
            r.topic.extend(sorted(watcher.matching))
        r.topics_hash = digest
        ctx.send_command(cmd)

    def _watcher_for(self, c: pb.CommandWatchTopicList) -> TopicListWatcher:
        """The watcher ``c`` asks for, registered with the broker (or the one this
        connection already has under its id: a retried request).

        Raises:
            AuthorizationError: the role may not list the namespace's topics.
            NotAllowedError: watchers are off, the pattern is refused, or the
                connection holds ``maxTopicListWatchersPerConnection`` already.
            InvalidTopicName: a malformed namespace name.
        """
        ctx = self._ctx
        namespace = namespace_of(c.namespace)
        require(
            ctx,
            ctx.authorization.allows_in_namespace(namespace, ctx.principal, CONSUME),
            "Watch Topic List",
            namespace,
        )
        config: TopicListConfig = ctx.service.config.topic_list
        if not config.enable_broker_side_subscription_pattern_evaluation:
            raise NotAllowedError(
                "Unable to create topic list watcher: "
                "Evaluating subscription patterns is disabled."
            )
        if not config.enable_broker_topic_list_watcher:
            raise NotAllowedError(
                "Unable to create topic list watcher: Topic list watchers are disabled."
            )
        pattern = _pattern(ctx, c.topics_pattern)
        existing = self._watchers.get(c.watcher_id)
        if existing is not None:
            if existing.namespace == namespace and existing.pattern.text == pattern.text:
                return existing
            raise NotAllowedError("Topic list watcher is already present on the connection")
        if len(self._watchers) >= config.max_topic_list_watchers_per_connection:
            ctx.limits.refused(WATCHER_LIMIT_KEY)
            raise NotAllowedError(
                "Reached the maximum number of topic list watchers on the connection"
            )
        watcher_id = c.watcher_id
        watcher = TopicListWatcher(
            namespace,
            pattern,
            ctx.service.list_topics(namespace),
            lambda new, deleted, digest: self._send_update(watcher_id, new, deleted, digest),
        )
        self._watchers[watcher_id] = watcher
        ctx.service.topic_list_watchers.add(watcher)
        return watcher

    def _send_update(
        self, watcher_id: int, new: list[str], deleted: list[str], digest: str
    ) -> None:
        if self._ctx.closed:
            return
        cmd = T(type=T.WATCH_TOPIC_UPDATE)
        u = cmd.watchTopicUpdate
        u.watcher_id = watcher_id
        u.new_topics.extend(new)
        u.deleted_topics.extend(deleted)
        u.topics_hash = digest
        self._ctx.send_command(cmd)

    def on_close(self, c: pb.CommandWatchTopicListClose) -> None:
        # Closing an unknown watcher succeeds too: it is gone either way.
        watcher = self._watchers.pop(c.watcher_id, None)
        cmd = T(type=T.WATCH_TOPIC_LIST_SUCCESS)
        r = cmd.watchTopicListSuccess
        r.request_id = c.request_id
        r.watcher_id = c.watcher_id
        if watcher is not None:
            self._ctx.service.topic_list_watchers.remove(watcher)
            r.topics_hash = watcher.hash
        self._ctx.send_command(cmd)

    def close(self) -> None:
        """The connection closed: its watchers go with it."""
        if not self._watchers:
            return
        registry = self._ctx.service.topic_list_watchers
        for watcher in self._watchers.values():
            registry.remove(watcher)
        self._watchers.clear()
