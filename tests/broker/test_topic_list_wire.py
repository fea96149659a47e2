"""WATCH_TOPIC_LIST against a real broker, in raw frames as a Java client sends them:
the watcher is offered in CONNECTED only when asked for, lists the matching topics,
and reports a topic created by a producer and one deleted through the admin API."""

from __future__ import annotations

import urllib.request
import uuid

import pytest

from quasar.broker.topic_list import topics_hash
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
NS = "persistent://public/default/"


def _connect(broker: BrokerProcess, watchers: bool) -> tuple[Raw, pb.BaseCommand]:
    raw = Raw(broker.port)
    cmd = T(type=T.CONNECT)
    cmd.connect.client_version = "raw-java-like"
    cmd.connect.protocol_version = 20
    if watchers:
        cmd.connect.feature_flags.supports_topic_watchers = True
    raw.send(cmd)
    return raw, raw.recv_type(T.CONNECTED)


def test_connected_offers_the_watcher_only_to_a_client_that_asks(broker: BrokerProcess) -> None:
    _, plain = _connect(broker, watchers=False)
    assert not plain.connected.feature_flags.supports_topic_watchers
    _, java_like = _connect(broker, watchers=True)
    assert java_like.connected.feature_flags.supports_topic_watchers


def test_watch_reports_created_and_deleted_topics(broker: BrokerProcess) -> None:
    prefix = f"{NS}w-{uuid.uuid4().hex[:8]}-"
    producer = Raw(broker.port)
    producer.connect()
    assert producer.producer(prefix + "a", 1, 1).type == T.PRODUCER_SUCCESS
    watcher, _ = _connect(broker, watchers=True)
    watch = T(type=T.WATCH_TOPIC_LIST)
    w = watch.watchTopicList
    w.request_id, w.watcher_id, w.namespace = 1, 5, "public/default"
    w.topics_pattern = prefix.replace("-", "\\-") + ".*"
    success = watcher.request(watch, T.WATCH_TOPIC_LIST_SUCCESS).watchTopicListSuccess
    assert list(success.topic) == [prefix + "a"]
    assert success.topics_hash == topics_hash([prefix + "a"])
    assert producer.producer(prefix + "b", 2, 2).type == T.PRODUCER_SUCCESS
    assert producer.producer(f"{NS}unrelated-{uuid.uuid4().hex[:8]}", 3, 3).type == (
        T.PRODUCER_SUCCESS
    )
    created = watcher.recv_type(T.WATCH_TOPIC_UPDATE).watchTopicUpdate
    assert (created.watcher_id, list(created.new_topics), list(created.deleted_topics)) == (
        5, [prefix + "b"], []
    )
    assert created.topics_hash == topics_hash([prefix + "a", prefix + "b"])
    producer.close()  # the topic must be idle to be deleted without force
    path = (prefix + "a").replace("persistent://", "/admin/v2/persistent/")
    request = urllib.request.Request(broker.admin_url + path + "?force=true", method="DELETE")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 204)
    deleted = watcher.recv_type(T.WATCH_TOPIC_UPDATE).watchTopicUpdate
    assert (list(deleted.new_topics), list(deleted.deleted_topics)) == ([], [prefix + "a"])
    assert deleted.topics_hash == topics_hash([prefix + "b"])
    # A partitioned topic declared through the admin API: its partitions, at once.
    path = (prefix + "p").replace("persistent://", "/admin/v2/persistent/") + "/partitions"
    request = urllib.request.Request(
        broker.admin_url + path, data=b"2", method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 204)
    declared = [watcher.recv_type(T.WATCH_TOPIC_UPDATE).watchTopicUpdate for _ in range(2)]
    assert [list(u.new_topics) for u in declared] == [
        [prefix + "p-partition-0"], [prefix + "p-partition-1"]
    ]
    close = T(type=T.WATCH_TOPIC_LIST_CLOSE)
    close.watchTopicListClose.request_id, close.watchTopicListClose.watcher_id = 2, 5
    closed = watcher.request(close, T.WATCH_TOPIC_LIST_SUCCESS).watchTopicListSuccess
    assert (closed.request_id, closed.watcher_id) == (2, 5)


def test_get_topics_with_pattern_and_hash(broker: BrokerProcess) -> None:
    prefix = f"{NS}g-{uuid.uuid4().hex[:8]}-"
    raw = Raw(broker.port)
    raw.connect()
    assert raw.producer(prefix + "x", 1, 1).type == T.PRODUCER_SUCCESS
    ask = T(type=T.GET_TOPICS_OF_NAMESPACE)
    g = ask.getTopicsOfNamespace
    g.request_id, g.namespace = 2, "public/default"
    g.topics_pattern = prefix.replace("-", "\\-") + ".*"
    r = raw.request(ask, T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
    assert (list(r.topics), r.filtered, r.changed) == ([prefix + "x"], True, True)
    g.request_id, g.topics_hash = 3, r.topics_hash
    again = raw.request(ask, T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
    assert (list(again.topics), again.changed, again.topics_hash) == ([], False, r.topics_hash)
