"""A client that opens thousands of producers and transactions on one connection meets
the broker's bounds (``maxProducersPerConnection``, ``maxActiveTransactionsPerConnection``)
while another client keeps publishing, opens and commits a transaction of its own, and
the broker's memory grows by no more than those bounds allow.

Memory is the broker's VmRSS; waits are for answers, each bounded by a timeout.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import quasar.client
from quasar.errors import ServerError
from quasar.protocol import encode_command, pb
from quasar.server.connection import FRAMES_PER_TURN
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator

T = pb.BaseCommand
MiB = 1024 * 1024
PRODUCERS = 2000  # maxProducersPerConnection of this broker
TRANSACTIONS = 1000  # maxActiveTransactionsPerConnection (its default)
CACHE_MB = 4  # managedLedgerCacheSizeMB: what the other client's messages may hold
# What one producer and one open transaction may cost the broker: together they
# measured under 2 KiB each on CPython 3.11 (this test's run); three times that leaves
# room for another interpreter and allocator.
PRODUCER_BYTES = 6 * 1024
TRANSACTION_BYTES = 4 * 1024
# The allocator's slack (freed memory it keeps, which RSS still counts).
SLACK_BYTES = 8 * MiB
# One 256 KiB read of the smallest frames (12-byte PINGs): its bytes, the answers to
# them, and the commands of one turn decoded at a time, at up to 2 KiB each with the
# allocator's overhead.
READ_BYTES = 256 * 1024
ONE_READ_BYTES = 2 * READ_BYTES + FRAMES_PER_TURN * 2048
SEND_TIMEOUT_MS = 10_000  # every send of the other client completes within this


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("bounds") / "data",
        settings={
            "maxProducersPerConnection": str(PRODUCERS),
            "maxActiveTransactionsPerConnection": str(TRANSACTIONS),
            "managedLedgerCacheSizeMB": str(CACHE_MB),
        },
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def metric(broker: BrokerProcess, sample: str) -> float:
    """One sample of ``/metrics`` (``name{labels}``), 0 when absent."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.rpartition(" ")
            if name == sample:
                return float(value)
    return 0.0


PRODUCERS_REFUSED = 'quasar_limit_refusals_total{limit="maxProducersPerConnection"}'
TXNS_REFUSED = 'quasar_txn_refused_total{reason="max_active_transactions_per_connection"}'


class Publisher:
    """The well-behaved client: publishes one message after another in a thread and
    records how long each took."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self.latencies: list[float] = []
        self.sent = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                start = time.monotonic()
                self.producer.send(b"%d" % self.sent)
                self.latencies.append(time.monotonic() - start)
                self.sent += 1
        except BaseException as e:  # reported by the test, which runs on the main thread
            self.failure = e

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(SEND_TIMEOUT_MS / 1000 * 2)
        assert not self._thread.is_alive()


def open_producers(crowd: Raw, topic: str, count: int) -> list[pb.BaseCommand]:
    """``count`` PRODUCER requests pipelined on ``crowd`` (ids 0 ..), their answers."""
    commands = bytearray()
    for i in range(count):
        cmd = T(type=T.PRODUCER)
        cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = topic, i, i
        commands += encode_command(cmd)
    crowd.send_bytes(bytes(commands))
    return [crowd.recv() for _ in range(count)]


def test_thousands_of_producers_and_transactions_meet_bounds_others_served(
    broker: BrokerProcess,
) -> None:
    topic = f"persistent://public/default/crowd-{uuid.uuid4().hex[:8]}"
    client = quasar.client.Client(broker.url, operation_timeout_seconds=10,
                                  enable_transaction=True)
    try:
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS
        )
        producer.send(b"warm-up")
        baseline = broker.rss_bytes()
        producers_refused = metric(broker, PRODUCERS_REFUSED)
        txns_refused = metric(broker, TXNS_REFUSED)
        crowd = Raw(broker.port)
        crowd.connect()
        with Publisher(producer) as publisher:
            # One connection asks for one producer more than it may have ...
            answers = open_producers(crowd, topic, PRODUCERS + 1)
            assert [a.type for a in answers[:PRODUCERS]] == [T.PRODUCER_SUCCESS] * PRODUCERS
            assert (answers[-1].type, answers[-1].error.error) == (T.ERROR, ServerError.ProducerBusy)
            # ... and for one transaction more than it may have open.
            tc = RawCoordinator(crowd, first_request_id=PRODUCERS + 1)
            assert not tc.connect(0).HasField("error")
            asked = [tc.send_new_txn(0) for _ in range(TRANSACTIONS + 1)]
            opened = [tc.wait(rid) for rid in asked]
            assert [o.HasField("error") for o in opened] == [False] * TRANSACTIONS + [True]
            assert opened[-1].error == ServerError.UnknownError
            assert "maxActiveTransactionsPerConnection" in opened[-1].message
            growth = broker.rss_bytes() - baseline
            # The other client still opens, uses and commits a transaction: the crowd
            # took its own share of the coordinator, not all of it.
            txn = client.new_transaction(timeout_ms=30_000)
            producer.send(b"in-txn", txn=txn)
            txn.commit()
        crowd.close()
    finally:
        client.close()
    assert metric(broker, PRODUCERS_REFUSED) == producers_refused + 1
    assert metric(broker, TXNS_REFUSED) == txns_refused + 1
    bound = (
        PRODUCERS * PRODUCER_BYTES
        + TRANSACTIONS * TRANSACTION_BYTES
        + CACHE_MB * MiB
        + SLACK_BYTES
    )
    latencies = sorted(publisher.latencies)
    print(
        f"\nbroker grew {growth / MiB:.1f} MiB (bound {bound / MiB:.1f} MiB); "
        f"{publisher.sent} sends meanwhile, median {latencies[len(latencies) // 2] * 1000:.1f} "
        f"ms, slowest {latencies[-1] * 1000:.0f} ms"
    )
    assert publisher.failure is None, publisher.failure
    assert publisher.sent > 0
    assert latencies[-1] < SEND_TIMEOUT_MS / 1000
    assert growth < bound


def _flood_until_held_back(broker: BrokerProcess) -> tuple[Raw, int]:
    """PINGs on a new connection, never reading a PONG, until a send blocks for 2 s
    (the broker stopped reading); returns the connection and the bytes sent."""
    deaf = Raw(broker.port)
    deaf.connect()
    deaf.sock.settimeout(2.0)  # a send that blocks this long is held back by the broker
    chunk = encode_command(T(type=T.PING)) * 50_000  # 600 KB of requests
    sent, cap = 0, 200 * MiB
    with pytest.raises(TimeoutError):
        while sent < cap:
            deaf.sock.sendall(chunk)
            sent += len(chunk)
    return deaf, sent


def test_a_client_that_never_reads_its_answers_is_no_longer_read(broker: BrokerProcess) -> None:
    """PINGs sent without ever reading a PONG: once the connection's write buffer is
    past the high-water mark the broker reads no more of it
    (``pulsarChannelPauseReceivingRequestsIfUnwritable``), so the client's sends block
    after what the kernel's socket buffers hold, and the broker's memory stays put.

    What one such connection costs the broker is its write buffer plus one read: its
    bytes, their answers and the ``FRAMES_PER_TURN`` commands decoded at a time
    (``ONE_READ_BYTES``); a 256 KiB read of 12-byte PINGs is some 22,000 commands,
    which, decoded all at once, grew the broker by 8-33 MiB. Without
    the bound the sends never block and the broker grows by more than every byte
    sent (some 300 MiB for the 200 MiB cap)."""
    baseline = broker.rss_bytes()
    deaf, sent = _flood_until_held_back(broker)
    growth = broker.rss_bytes() - baseline
    print(f"\nsends blocked after {sent / MiB:.1f} MiB; broker grew {growth / MiB:.1f} MiB")
    assert growth < ONE_READ_BYTES + SLACK_BYTES
    # Another client is served meanwhile.
    other = Raw(broker.port)
    other.connect()
    other.send(T(type=T.PING))
    assert other.recv_type(T.PONG).type == T.PONG
    other.close()
    deaf.close()
