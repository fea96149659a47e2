"""What one broker's connections may hold together, and the refusals it counts.

Every connection shares one ``ConnectionLimits`` with the others of its broker. It
holds what no single connection can decide alone:

* how many connections are open, in total and per client IP (Pulsar's
  ``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp``); a connection over
  either is answered ERROR(NotAllowedError) and closed at once, as Pulsar does;
* how many bytes all connections hold for frames that have started but not ended
  (``maxIncompleteFramesSizeInMB``). Each connection's own share is bounded by the
  frame-size limit; this budget bounds the sum, which many connections that each
  send most of a large frame and then stall would otherwise make as large as the
  number of connections allows. Over the budget, a connection whose incomplete
  frame passes ``INCOMPLETE_FRAME_BYTES_FREE`` is closed: small remainders, which
  every busy connection has between two reads, never are.

Every kind of refusal counts on ``quasar_limit_refusals_total``, labelled with the
configuration key of the limit, so an operator sees which limit clients meet.
"""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry

from quasar.broker.non_persistent_topics import ServedTopic
from quasar.config import BrokerConfig
from quasar.errors import ConsumerBusy, ProducerBusy
from quasar.metrics.connections import ConnectionCounts, ConnectionMetrics

__all__ = ["INCOMPLETE_FRAME_BYTES_FREE", "ConnectionLimits"]

# An incomplete frame up to this size is always allowed, whatever the budget: a
# receipt, an ack or the start of a SEND left over at the end of one read.
INCOMPLETE_FRAME_BYTES_FREE = 64 * 1024

# The label values of quasar_limit_refusals_total: the key of each limit.
LIMIT_KEYS = (
    "brokerMaxConnections",
    "brokerMaxConnectionsPerIp",
    "maxProducersPerTopic",
    "maxConsumersPerTopic",
    "maxConsumersPerSubscription",
    "maxProducersPerConnection",
    "maxConsumersPerConnection",
    "incompleteFrameTimeoutSeconds",
    "maxIncompleteFramesSizeInMB",
    "maxTopicListWatchersPerConnection",
)


class ConnectionLimits:
    """The broker-wide connection counts and incomplete-frame budget."""

    def __init__(self, settings: BrokerConfig, registry: CollectorRegistry | None = None) -> None:
        """``registry``: where the counters are exposed (the broker's; None: a private
        one nobody scrapes, for tests and embedded use)."""
        registry = registry if registry is not None else CollectorRegistry()
        self.settings = settings
        self.max_connections = settings.broker_max_connections
        self.max_connections_per_ip = settings.broker_max_connections_per_ip
        self.incomplete_frames_bytes_max = settings.max_incomplete_frames_size_in_mb * 1024 * 1024
        self.connections = 0
        self._per_ip: Tally[str] = Tally()
        # Bytes every connection holds for frames not complete yet.
        self.incomplete_frames_bytes = 0
        self._refusals = Counter(
            "quasar_limit_refusals",
            "Requests and connections refused, and connections closed, for a limit "
            "(labelled with the limit's configuration key)",
            labelnames=["limit"],
            registry=registry,
        )
        for key in LIMIT_KEYS:
            self._refusals.labels(key)
        Gauge(
            "quasar_incomplete_frames_bytes",
            "Bytes held by all connections for frames that have not fully arrived",
            registry=registry,
        ).set_function(lambda: self.incomplete_frames_bytes)
        # Pulsar's pulsar_connection_* series.
        self.counts = ConnectionCounts()
        registry.register(
            ConnectionMetrics(self.counts, settings.cluster_name, settings.advertised_address)
        )

    def refused(self, limit_key: str) -> None:
        """Count one refusal for the limit named by its configuration key."""
        self._refusals.labels(limit_key).inc()

    # -- producers and consumers -------------------------------------------------------
    def admit_producer_on_connection(self, producers: int) -> None:
        """A connection asks for a producer; ``producers`` counts those it has or is
        creating, this one included.

        Raises:
            ProducerBusy: over ``maxProducersPerConnection``.
        """
        limit = self.settings.max_producers_per_connection
        if limit and producers > limit:
            self.refused("maxProducersPerConnection")
            raise ProducerBusy("Connection reached max producers limit")

    def admit_producer_on_topic(self, topic: ServedTopic) -> None:
        """Raises:
        ProducerBusy: the topic has ``maxProducersPerTopic`` producers (Pulsar's
            answer and message); those waiting for exclusive access count too, so
            the limit also bounds their queue.
        """
        limit = self.settings.max_producers_per_topic
        if limit and len(topic.producers) + topic.waiting_producers >= limit:
            self.refused("maxProducersPerTopic")
            raise ProducerBusy("Topic reached max producers limit")

    def admit_consumer_on_connection(self, consumers: int) -> None:
        """As ``admit_producer_on_connection``, for consumers.

        Raises:
            ConsumerBusy: over ``maxConsumersPerConnection``.
        """
        limit = self.settings.max_consumers_per_connection
        if limit and consumers > limit:
            self.refused("maxConsumersPerConnection")
            raise ConsumerBusy("Connection reached max consumers limit")

    def admit_consumer_on_topic(self, topic: ServedTopic, subscription: str) -> None:
        """Raises:
        ConsumerBusy: the topic has ``maxConsumersPerTopic`` consumers, or the
            subscription ``maxConsumersPerSubscription`` (Pulsar's answers and
            messages).
        """
        settings = self.settings
        if settings.max_consumers_per_topic and (
            topic.consumer_count() >= settings.max_consumers_per_topic
        ):
            self.refused("maxConsumersPerTopic")
            raise ConsumerBusy("Topic reached max consumers limit")
        if settings.max_consumers_per_subscription:
            sub = topic.subscriptions.get(subscription)
            if sub is not None and sub.consumer_count >= settings.max_consumers_per_subscription:
                self.refused("maxConsumersPerSubscription")
                raise ConsumerBusy("Subscription reached max consumers limit")

    # -- connections -------------------------------------------------------------------
    def connection_opened(self, ip: str) -> str | None:
        """Admit a new connection from ``ip``; returns None when it may stay, else the
        configuration key of the limit it is over (it is then not counted as open)."""
        counts = self.counts
        counts.created += 1
        refused = None
        if self.max_connections and self.connections >= self.max_connections:
            refused = "brokerMaxConnections"
        elif self.max_connections_per_ip and self._per_ip[ip] >= self.max_connections_per_ip:
            refused = "brokerMaxConnectionsPerIp"
        if refused is not None:
            # The caller closes it at once.
            counts.create_fail += 1
            counts.closed += 1
            return refused
        self.connections += 1
        self._per_ip[ip] += 1
        return None

    def connection_closed(self, ip: str) -> None:
        """A connection admitted by ``connection_opened`` has closed."""
        self.counts.closed += 1
        self.connections -= 1
        left = self._per_ip[ip] - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            del self._per_ip[ip]

    # -- incomplete frames -------------------------------------------------------------
    def incomplete_frame_held(self, before: int, now: int) -> bool:
        """A connection's incomplete-frame bytes went from ``before`` to ``now``;
        returns False when the connection must be closed for the broker-wide budget."""
        self.incomplete_frames_bytes += now - before
        return (
            now <= before
            or now <= INCOMPLETE_FRAME_BYTES_FREE
            or self.incomplete_frames_bytes <= self.incomplete_frames_bytes_max
        )
