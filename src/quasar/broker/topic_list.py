"""Topic lists for pattern subscriptions: Pulsar's topics hash, broker-side pattern
evaluation, and the watchers behind WATCH_TOPIC_LIST.

A client that subscribes by pattern asks for a namespace's topics
(GET_TOPICS_OF_NAMESPACE) and, when the broker offers it, watches the list
(WATCH_TOPIC_LIST) to hear of topics created or deleted later. Both may carry the
pattern, so the broker answers only the matching topics (``filtered``), and the
*topics hash* of the list the client already has, so an unchanged list is not sent
again (``changed=false``).

The topics hash is Pulsar's: CRC-32C over the sorted names joined by ``,`` (UTF-8),
written as the four bytes of the checksum in little-endian order, in lower-case hex
(Guava's ``HashCode.toString()`` of ``Hashing.crc32c()``). A client compares it
with the hash it computed itself, so it must be exactly Pulsar's.

Patterns are evaluated with RE2 (the ``google-re2`` package), as Pulsar evaluates
them with RE2/J: matching takes time linear in the topic name whatever the pattern,
so a hostile pattern such as ``(a+)+$`` cannot stall the broker's event loop, as it
would with Python's backtracking ``re``. A pattern is also bounded in length
(``subscriptionPatternMaxLength``) and in the memory RE2 may compile it into.
Constructs RE2 does not have (back-references, look-around) are refused: a
GET_TOPICS_OF_NAMESPACE with such a pattern is answered unfiltered (the client
filters by itself), a WATCH_TOPIC_LIST is refused with NotAllowedError.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from quasar.errors import NotAllowedError
from quasar.protocol.crc32c import crc32c
from quasar.protocol.topic_name import TopicName, is_hidden_from_listings

try:  # a dependency in pyproject.toml; without it the broker still serves lists
    import re2
except ImportError:  # pragma: no cover - only in an environment missing the package
    re2 = None

__all__ = [
    "PATTERN_MEMORY_BYTES_MAX",
    "TopicListWatcher",
    "TopicListWatchers",
    "TopicsPattern",
    "filter_topics",
    "topics_hash",
    "visible_topics",
]

log = logging.getLogger(__name__)

# What RE2 may use to compile one pattern: a pattern within
# subscriptionPatternMaxLength needs a few KiB; a nested counted repetition
# (``(a{100}){100}``) would need far more, and is refused instead.
PATTERN_MEMORY_BYTES_MAX = 1 << 20

_SCHEMES = ("persistent://", "non-persistent://")


def topics_hash(topics: Iterable[str]) -> str:
    """Pulsar's hash of a topic list (see the module docstring)."""
    joined = ",".join(sorted(topics)).encode()
    return crc32c(joined).to_bytes(4, "little").hex()


def visible_topics(topics: Iterable[str]) -> list[str]:
    """``topics`` without the system topics, which Pulsar never lists to a client
    (``__change_events``, ``__transaction_buffer_snapshot``, pending-ack logs)."""
    return [t for t in topics if not is_hidden_from_listings(TopicName.parse(t))]


def _without_scheme(text: str) -> str:
    for scheme in _SCHEMES:
        if text.startswith(scheme):
            return text[len(scheme) :]
    return text


class TopicsPattern:
    """A client's topics pattern, compiled for linear-time matching.

    Like Pulsar, the pattern is matched without its domain (``persistent://``)
    against each topic's name without its domain, and a partition is matched by the
    name of its partitioned topic.
    """

    def __init__(self, text: str, matcher: Callable[[str], bool]) -> None:
        self.text = text
        self._matches = matcher

    @classmethod
    def compile(cls, text: str, max_length: int) -> TopicsPattern:
        """Compile ``text``.

        Raises:
            NotAllowedError: the pattern is longer than ``max_length``, uses a
                construct RE2 does not support, or needs more memory than
                ``PATTERN_MEMORY_BYTES_MAX``; or RE2 is not installed.
        """
        if len(text) > max_length:
            raise NotAllowedError(
                f"Pattern longer than maximum: {max_length} (subscriptionPatternMaxLength)"
            )
        if re2 is None:
            raise NotAllowedError(
                "Evaluating subscription patterns needs the google-re2 package"
            )
        options = re2.Options()
        options.log_errors = False  # a refused pattern is answered, not logged by RE2
        options.max_mem = PATTERN_MEMORY_BYTES_MAX
        try:
            compiled = re2.compile(_without_scheme(text), options)
        except re2.error as e:
            reason = e.args[0] if e.args else e
            if isinstance(reason, bytes):
                reason = reason.decode(errors="replace")
            raise NotAllowedError(f"Unsupported topics pattern: {reason}") from None
        return cls(text, lambda name: compiled.fullmatch(name) is not None)

    def matches(self, topic: str) -> bool:
        """Whether topic ``topic`` (a full name) matches."""
        return self._matches(_without_scheme(TopicName.parse(topic).base.full))


def filter_topics(topics: Iterable[str], pattern: TopicsPattern) -> list[str]:
    """The topics of ``topics`` that match ``pattern``, partitions as they are."""
    return [t for t in topics if pattern.matches(t)]


# Called with (new topics, deleted topics, hash of the matching list).
UpdateSink = Callable[[list[str], list[str], str], None]


class TopicListWatcher:
    """One WATCH_TOPIC_LIST: the matching topics of a namespace and where changes go."""

    def __init__(
        self, namespace: str, pattern: TopicsPattern, topics: Iterable[str], send: UpdateSink
    ) -> None:
        self.namespace = namespace
        self.pattern = pattern
        self.matching: set[str] = set(filter_topics(visible_topics(topics), pattern))
        self._send = send

    @property
    def hash(self) -> str:
        return topics_hash(self.matching)

    def topic_changed(self, topic: str, created: bool) -> None:
        """Tell the client of a matching topic created or deleted, once."""
        if is_hidden_from_listings(TopicName.parse(topic)) or not self.pattern.matches(topic):
            return
        if created == (topic in self.matching):
            return  # already known (registered again) or never known (deleted twice)
        if created:
            self.matching.add(topic)
            self._send([topic], [], self.hash)
        else:
            self.matching.discard(topic)
            self._send([], [topic], self.hash)


class TopicListWatchers:
    """The broker's topic-list watchers by namespace; the topic registry tells it of
    every topic created or deleted. Each connection bounds and removes its own."""

    def __init__(self) -> None:
        # Watchers in the order they were added (a dict keeps it), so that updates
        # go out in a deterministic order.
        self._by_namespace: dict[str, dict[TopicListWatcher, None]] = {}

    def add(self, watcher: TopicListWatcher) -> None:
        self._by_namespace.setdefault(watcher.namespace, {})[watcher] = None

    def remove(self, watcher: TopicListWatcher) -> None:
        watchers = self._by_namespace.get(watcher.namespace)
        if watchers is None:
            return
        watchers.pop(watcher, None)
        if not watchers:
            del self._by_namespace[watcher.namespace]

    def __len__(self) -> int:
        return sum(len(w) for w in self._by_namespace.values())

    def topic_created(self, name: TopicName) -> None:
        self._notify(name, created=True)

    def topic_deleted(self, name: TopicName) -> None:
        self._notify(name, created=False)

    def partitions_changed(self, name: TopicName, indexes: range, created: bool) -> None:
        """Partitions ``indexes`` of partitioned topic ``name`` were declared, or the
        topic's metadata deleted (admin): reported like topics, each once, as
        GET_TOPICS_OF_NAMESPACE lists every declared partition, used or not."""
        if name.namespace_name not in self._by_namespace:
            return  # nobody watches: no need to walk up to 10,000 partitions
        for index in indexes:
            self._notify(name.partition(index), created)

    def _notify(self, name: TopicName, created: bool) -> None:
        for watcher in list(self._by_namespace.get(name.namespace_name, ())):
            try:
                watcher.topic_changed(name.full, created)
            except Exception:
                # One connection's failure to send must not stop the others' updates
                # nor the topic's creation or deletion.
                log.exception("topic list watcher failed on %s", name.full)
