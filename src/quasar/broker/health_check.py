"""The broker's health check: a message written to storage and read back.

``GET /admin/v2/brokers/health`` runs Pulsar's HealthChecker round trip: a random
UUID is written to the heartbeat topic ``persistent://<heartbeat namespace>/healthcheck``
and read back from the position that was the end of the topic before the write
("latest"), within a timeout (58 s in Pulsar, shorter than its client's 60 s, so that
the broker's answer arrives before the client gives up).

The heartbeat namespace is Pulsar's: ``pulsar/<cluster>/<broker>`` (topic version V1,
the default) or ``pulsar/<broker>`` (V2), where ``<broker>`` is the broker's id, its
advertised address and web service port.

Where quasar differs: Pulsar's checker uses a client of its own broker, so its round
trip also crosses the binary protocol. quasar's runs inside the broker, on a managed
ledger named as the heartbeat topic would be, created for the check and deleted after
it. What fails a broker's health is storage (a ledger file that cannot be created or
written, metadata that cannot be recorded, a disk that does not answer), and that is
what the check exercises: a new ledger file, an appended and synced entry, a read.
The heartbeat ledger is never a registered topic, so no listing shows it and no client
can produce to it or subscribe to it. A failed write is reported, never fatal here:
creating a ledger file is the step that fails on a full or read-only disk, and the
storage layer reports that failure to its caller (an entry write that fails after it
was acknowledged possible stops the broker, as everywhere else).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from quasar.clock import Clock, SystemClock
from quasar.errors import AdminError, QuasarError
from quasar.protocol import make_entry, payload_of, pb
from quasar.protocol.topic_name import TopicName
from quasar.storage.api import ManagedLedgerFactory

__all__ = [
    "HEALTH_CHECK_TIMEOUT_S",
    "HEALTH_CHECK_TOPIC",
    "TOPIC_VERSIONS",
    "HealthChecker",
    "heartbeat_topic",
]

log = logging.getLogger(__name__)

# Pulsar's HealthChecker.HEALTH_CHECK_TOPIC_SUFFIX.
HEALTH_CHECK_TOPIC = "healthcheck"
# Pulsar's read timeout of the check.
HEALTH_CHECK_TIMEOUT_S = 58.0
# Pulsar's TopicVersion names; V1 is the default.
TOPIC_VERSIONS = ("V1", "V2")
_PRODUCER_NAME = "healthcheck"


def heartbeat_topic(cluster: str, broker_id: str, version: str = "V1") -> TopicName:
    """The heartbeat topic of ``broker_id`` (``host:port``) for a topic ``version``."""
    if version == "V2":
        return TopicName.parse(f"persistent://pulsar/{broker_id}/{HEALTH_CHECK_TOPIC}")
    assert version == "V1", version
    return TopicName.parse(
        f"persistent://pulsar/{cluster}/{broker_id}/{HEALTH_CHECK_TOPIC}"
    )


class HealthChecker:
    """Runs the round trip; one check at a time (a second caller waits for the
    first, within its own timeout)."""

    def __init__(
        self,
        ledgers: ManagedLedgerFactory,
        cluster: str,
        broker_id: str,
        *,
        timeout_s: float = HEALTH_CHECK_TIMEOUT_S,
        clock: Clock | None = None,
    ) -> None:
        self._ledgers = ledgers
        self._cluster = cluster
        self.broker_id = broker_id
        self.timeout_s = timeout_s
        self._clock = clock if clock is not None else SystemClock()
        self._lock = asyncio.Lock()
        # The deletion of the last check's heartbeat ledger, while it runs.
        self._cleanup: asyncio.Task[None] | None = None

    async def check(self, version: str = "V1") -> None:
        """Write a random UUID to the heartbeat topic and read it back.

        Raises:
            AdminError: 500 with the reason when the round trip failed or did not
                finish within the timeout.
        """
        topic = heartbeat_topic(self._cluster, self.broker_id, version)
        message = str(uuid.uuid4())
        log.info("running health check with topic=%s", topic.full)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._lock:
                    await self._round_trip(topic, message)
        except TimeoutError:
            raise AdminError(
                f"Health check timed out after {self.timeout_s:g} s on {topic.full}",
                http_status=500,
            ) from None
        except (QuasarError, OSError) as exc:
            raise AdminError(
                f"Health check failed on {topic.full}: {exc}", http_status=500
            ) from exc

    async def _round_trip(self, topic: TopicName, message: str) -> None:
        previous = self._cleanup
        if previous is not None and not previous.done():
            # A check that timed out left its deletion running (it waits for the
            # append the disk has not finished); the heartbeat ledger must be gone
            # before it is created again. Its failure was logged by _log_failure.
            await asyncio.wait([previous])
        name = topic.persistence_name
        ledger = await self._ledgers.open(name)
        try:
            latest = ledger.next_position(ledger.last_confirmed_entry)
            metadata = pb.MessageMetadata(
                producer_name=_PRODUCER_NAME,
                sequence_id=0,
                publish_time=self._clock.wall_ms(),
            )
            written = await ledger.add_entry(make_entry(metadata, message.encode()))
            entries = await ledger.read_entries(latest, 1)
            if not entries or entries[0].position != written:
                raise AdminError(
                    f"the message written at {written} was not read back",
                    http_status=500,
                )
            if payload_of(entries[0].data) != message.encode():
                raise AdminError(
                    f"the message read back at {written} is not the one written",
                    http_status=500,
                )
        finally:
            # The heartbeat ledger exists only during a check: nothing accumulates,
            # and every check creates a ledger file again. Deleting waits for the
            # append in flight, which after a timeout may take as long as the disk
            # does: it runs as a task of its own, so that a timed-out check answers
            # at once, and the next check waits for it (above).
            cleanup = asyncio.ensure_future(self._ledgers.delete(name))
            cleanup.add_done_callback(_log_failure)
            self._cleanup = cleanup
            await asyncio.shield(cleanup)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("deleting the heartbeat ledger failed: %s", task.exception())
