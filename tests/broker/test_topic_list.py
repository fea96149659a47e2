"""Topic lists for pattern subscriptions, as pure logic: Pulsar's topics hash, the
RE2 patterns and their bounds, and the watchers' updates."""

from __future__ import annotations

import pytest

from quasar.broker.topic_list import (
    TopicListWatcher,
    TopicListWatchers,
    TopicsPattern,
    filter_topics,
    topics_hash,
    visible_topics,
)
from quasar.errors import NotAllowedError
from quasar.protocol.crc32c import crc32c
from quasar.protocol.topic_name import TopicName

NS = "persistent://public/default/"


def test_topics_hash_is_crc32c_of_the_sorted_names_little_endian_hex() -> None:
    # Guava's HashCode.toString() of CRC-32C: the checksum's bytes, low byte first.
    assert topics_hash([]) == "00000000"
    # The standard check value of CRC-32C ("123456789" -> 0xE3069283).
    assert topics_hash(["123456789"]) == "839206e3"
    a, b = NS + "a", NS + "b"
    joined = crc32c(f"{a},{b}".encode()).to_bytes(4, "little").hex()
    assert topics_hash([b, a]) == topics_hash([a, b]) == joined
    assert topics_hash([a]) != topics_hash([a, b])


def test_pattern_is_matched_without_domain_and_by_partitioned_topic() -> None:
    pattern = TopicsPattern.compile(NS + "pat-.*", 50)
    assert pattern.matches(NS + "pat-a")
    assert pattern.matches(NS + "pat-a-partition-3")
    assert not pattern.matches(NS + "xpat-a")  # a whole-name match, as Java's matches()
    assert not pattern.matches("persistent://public/other/pat-a")
    # Without a domain the pattern means the same.
    assert TopicsPattern.compile("public/default/pat-.*", 50).matches(NS + "pat-b")
    topics = [NS + "pat-a-partition-0", NS + "other", NS + "pat-b"]
    assert filter_topics(topics, pattern) == [NS + "pat-a-partition-0", NS + "pat-b"]


def test_system_topics_are_never_listed() -> None:
    topics = [NS + "t", NS + "__change_events", NS + "__transaction_buffer_snapshot"]
    assert visible_topics(topics) == [NS + "t"]


@pytest.mark.parametrize(
    "text",
    [
        "x" * 51,  # over subscriptionPatternMaxLength
        r"public/default/(a)\1",  # a back-reference: RE2 has none
        "public/default/(?=a).*",  # look-ahead: RE2 has none
        "((a{1000}){1000}){1000}",  # beyond RE2's repetition and memory bounds
        "public/default/[",  # not a pattern at all
    ],
)
def test_unsafe_or_unsupported_patterns_are_refused(text: str) -> None:
    with pytest.raises(NotAllowedError):
        TopicsPattern.compile(text, 50)


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # With Python's re this takes 2^n steps on a name of n 'a's followed by '!';
    # RE2 answers at once (the test would not finish otherwise).
    pattern = TopicsPattern.compile("public/default/(a+)+$", 50)
    assert not pattern.matches(NS + "a" * 5_000 + "!")
    assert pattern.matches(NS + "a" * 5_000)


def _watcher(topics: list[str]) -> tuple[TopicListWatcher, list[tuple[list[str], list[str], str]]]:
    sent: list[tuple[list[str], list[str], str]] = []
    watcher = TopicListWatcher(
        "public/default",
        TopicsPattern.compile(NS + "pat-.*", 50),
        topics,
        lambda new, deleted, digest: sent.append((new, deleted, digest)),
    )
    return watcher, sent


def test_watcher_sends_each_matching_creation_and_deletion_once() -> None:
    watcher, sent = _watcher([NS + "pat-a", NS + "other", NS + "pat-__change_events"])
    assert watcher.matching == {NS + "pat-a", NS + "pat-__change_events"}
    watchers = TopicListWatchers()
    watchers.add(watcher)
    watchers.topic_created(TopicName.parse(NS + "pat-b"))
    watchers.topic_created(TopicName.parse(NS + "pat-b"))  # registered again: no news
    watchers.topic_created(TopicName.parse(NS + "nope"))  # does not match
    watchers.topic_created(TopicName.parse("persistent://public/ns2/pat-c"))  # elsewhere
    watchers.topic_deleted(TopicName.parse(NS + "pat-a"))
    watchers.topic_deleted(TopicName.parse(NS + "pat-a"))  # deleted twice: no news
    both = topics_hash([NS + "pat-a", NS + "pat-b", NS + "pat-__change_events"])
    after = topics_hash([NS + "pat-b", NS + "pat-__change_events"])
    assert sent == [([NS + "pat-b"], [], both), ([], [NS + "pat-a"], after)]
    assert watcher.hash == after
    watchers.remove(watcher)
    assert len(watchers) == 0
    watchers.topic_created(TopicName.parse(NS + "pat-d"))
    assert len(sent) == 2


def test_a_failing_watcher_does_not_stop_the_others() -> None:
    good, sent = _watcher([])

    def broken(new: list[str], deleted: list[str], digest: str) -> None:
        raise ConnectionError("gone")

    bad = TopicListWatcher("public/default", good.pattern, [], broken)
    watchers = TopicListWatchers()
    watchers.add(bad)
    watchers.add(good)
    watchers.topic_created(TopicName.parse(NS + "pat-x"))
    assert sent == [([NS + "pat-x"], [], topics_hash([NS + "pat-x"]))]


def test_declared_partitions_are_reported_once_each() -> None:
    watcher, sent = _watcher([])
    watchers = TopicListWatchers()
    watchers.add(watcher)
    parent = TopicName.parse(NS + "pat-p")
    watchers.partitions_changed(parent, range(2), created=True)
    watchers.topic_created(parent.partition(1))  # first used later: already known
    watchers.topic_deleted(parent.partition(0))  # a used partition deleted first
    watchers.partitions_changed(parent, range(2), created=False)  # then the metadata
    assert [(new, deleted) for new, deleted, _ in sent] == [
        ([NS + "pat-p-partition-0"], []),
        ([NS + "pat-p-partition-1"], []),
        ([], [NS + "pat-p-partition-0"]),
        ([], [NS + "pat-p-partition-1"]),
    ]
    # Nobody watches another namespace: nothing is walked there.
    watchers.partitions_changed(TopicName.parse("persistent://public/x/pat-q"), range(10**4), True)
    assert len(sent) == 4
