"""Hostile clients against a real broker: what a peer claims in a batch's metadata or
an ack set is bounded before the broker allocates for it.

Each test makes the claim that used to cost the broker gigabytes or seconds, then
checks the precise error, that other clients are still served, that what was stored
survives a restart, and that the broker's resident memory stays under
``RSS_BOUND_MB`` (the broker idles at about a tenth of that).
"""

from __future__ import annotations

import sqlite3
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator

import pulsar
import pytest
import zstandard

from quasar.errors import ServerError
from quasar.protocol import encode_payload_command, make_entry, pb
from quasar.protocol._wire import U32
from quasar.protocol.batch import encode_plain_batch
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
RSS_BOUND_MB = 300
# One batch record with an empty payload: metaSize 2, then payload_size = 0.
EMPTY_RECORD = U32.pack(2) + b"\x18\x00"
# Small enough that a few partially acknowledged batches exceed it.
ACK_SET_BYTES_TO_PERSIST = 4096


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("batches_and_acks") / "data"
    proc = BrokerProcess(
        data,
        settings={
            "managedLedgerMaxBatchDeletedIndexBytesToPersist": str(ACK_SET_BYTES_TO_PERSIST),
            # Cursor state is written at once, so a restart sees every ack.
            "managedLedgerDefaultMarkDeleteRateLimit": "0",
        },
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


# -- helpers ---------------------------------------------------------------------------
def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def connected(broker: BrokerProcess) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    return raw


def rss_mb(broker: BrokerProcess) -> float:
    return broker.rss_bytes() / 2**20


def refused_total(broker: BrokerProcess, reason: str) -> float:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = f'quasar_hostile_input_refused_total{{reason="{reason}"}} '
    return float(next(line for line in text.splitlines() if line.startswith(prefix))
                 [len(prefix):])


def metadata(
    seq: int,
    *,
    batch: int | None = None,
    compression: int = pb.NONE,
    uncompressed_size: int | None = None,
) -> pb.MessageMetadata:
    md = pb.MessageMetadata(producer_name="hostile", sequence_id=seq, publish_time=1)
    if batch is not None:
        md.num_messages_in_batch = batch
    md.compression = compression
    if uncompressed_size is not None:
        md.uncompressed_size = uncompressed_size
    return md


def send(
    raw: Raw, md: pb.MessageMetadata, payload: bytes, num_messages: int = 1
) -> pb.BaseCommand:
    """SEND one entry on producer 1; the receipt or the error."""
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 1, md.sequence_id
    cmd.send.num_messages = num_messages
    raw.send_bytes(encode_payload_command(cmd, make_entry(md, payload)))
    while True:
        answer = raw.recv()
        if answer.type in (T.SEND_RECEIPT, T.SEND_ERROR):
            return answer


def producing(broker: BrokerProcess, topic: str) -> Raw:
    raw = connected(broker)
    assert raw.producer(topic).type == T.PRODUCER_SUCCESS
    return raw


def subscribing(
    broker: BrokerProcess, topic: str, sub: str, permits: int,
    sub_type: int = pb.CommandSubscribe.Shared,
) -> Raw:
    raw = connected(broker)
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, sub, sub_type
    s.consumer_id, s.request_id = 1, 1
    s.initialPosition = pb.CommandSubscribe.Earliest
    assert raw.request(cmd, T.SUCCESS).success.request_id == 1
    flow = T(type=T.FLOW)
    flow.flow.consumer_id, flow.flow.messagePermits = 1, permits
    raw.send(flow)
    return raw


def ack(
    raw: Raw,
    message_id: pb.MessageIdData,
    ack_set: list[int] | None,
    request_id: int | None = None,
    txn: tuple[int, int] | None = None,
) -> None:
    cmd = T(type=T.ACK)
    a = cmd.ack
    a.consumer_id, a.ack_type = 1, pb.CommandAck.Individual
    mid = a.message_id.add()
    mid.ledgerId, mid.entryId = message_id.ledgerId, message_id.entryId
    if ack_set is not None:
        mid.ack_set.extend(ack_set)
    if request_id is not None:
        a.request_id = request_id
    if txn is not None:
        a.txnid_most_bits, a.txnid_least_bits = txn
    raw.send(cmd)


def assert_others_served(broker: BrokerProcess, within_s: float = 10.0) -> None:
    """Another client is served within ``within_s``: a PING round trip on a new
    connection, and a produce/consume on another topic with the official client."""
    started = time.monotonic()
    raw = connected(broker)
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)
    client = pulsar.Client(broker.url, operation_timeout_seconds=int(within_s))
    try:
        name = topic_name("bystander")
        consumer = client.subscribe(name, "s")
        client.create_producer(name).send(b"still served")
        assert consumer.receive(int(within_s * 1000)).data() == b"still served"
    finally:
        client.close()
    assert time.monotonic() - started < within_s


def restarted(broker: BrokerProcess) -> None:
    assert broker.stop() == 0, broker.read_log()
    broker.start()


def received(raw: Raw, count: int) -> list[pb.CommandMessage]:
    return [raw.recv_type(T.MESSAGE).message for _ in range(count)]


# -- decompressed size -----------------------------------------------------------------
def test_a_compressed_body_claiming_more_than_max_message_size_is_refused_at_send(
    broker: BrokerProcess,
) -> None:
    topic = topic_name("bomb")
    raw = producing(broker, topic)
    before = refused_total(broker, "uncompressed_size")
    # 10 million empty records: 60 MB that zstd packs into a few KB.
    records = 10_000_000
    bomb = zstandard.ZstdCompressor(level=3).compress(EMPTY_RECORD * records)
    assert len(bomb) < 16 * 1024
    answer = send(
        raw,
        metadata(0, batch=records, compression=pb.ZSTD, uncompressed_size=6 * records),
        bomb,
        records,
    )
    assert (answer.type, answer.send_error.error) == (T.SEND_ERROR, ServerError.NotAllowedError)
    assert "more than maxMessageSize" in answer.send_error.message
    # A megabyte of ZLIB claiming 2 GiB: refused on the claim, never inflated.
    answer = send(
        raw,
        metadata(1, compression=pb.ZLIB, uncompressed_size=2**31),
        zlib.compress(bytes(1 << 20)) + bytes(1 << 20),
    )
    assert (answer.type, answer.send_error.error) == (T.SEND_ERROR, ServerError.NotAllowedError)
    assert refused_total(broker, "uncompressed_size") == before + 2
    assert_others_served(broker)
    assert rss_mb(broker) < RSS_BOUND_MB


def test_compaction_never_decompresses_more_than_a_batch_claims(
    broker: BrokerProcess,
) -> None:
    """A body that decompresses to far more than its (accepted) claim is kept whole
    by compaction, unread: the decompressors stop at the claimed size. So is a batch
    of more messages than compaction splits (a few hundred bytes of ZSTD can hold
    800,000 empty messages)."""
    topic = topic_name("lying")
    raw = producing(broker, topic)
    before = refused_total(broker, "compaction_batch_size")
    claimed = 540_000
    records = claimed // 6  # within what compaction splits
    many = EMPTY_RECORD * 10_000_000
    lying = [
        (pb.ZSTD, zstandard.ZstdCompressor(level=3, write_content_size=False).compress(many)),
        (pb.ZLIB, zlib.compress(many)),
    ]
    for seq, (codec, body) in enumerate(lying):
        md = metadata(seq, batch=records, compression=codec, uncompressed_size=claimed)
        md.partition_key = "k"
        answer = send(raw, md, body, records)
        assert answer.type == T.SEND_RECEIPT, answer
    huge = 800_000
    md = metadata(2, batch=huge, compression=pb.ZSTD, uncompressed_size=6 * huge)
    md.partition_key = "k"
    body = zstandard.ZstdCompressor(level=3).compress(EMPTY_RECORD * huge)
    assert len(body) < 4096
    assert send(raw, md, body, huge).type == T.SEND_RECEIPT
    honest = metadata(3, batch=2)
    honest.partition_key = "k2"
    assert send(raw, honest, encode_plain_batch([3, 4], [b"a", b"b"]), 2).type == (
        T.SEND_RECEIPT
    )
    path = topic.removeprefix("persistent://")
    url = f"{broker.admin_url}/admin/v2/persistent/{path}/compaction"
    urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=10).close()
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=10) as answer:
            status = answer.read().decode()
        if "SUCCESS" in status or "ERROR" in status:
            break
        time.sleep(0.1)  # polling interval of a bounded wait for the admin status
    assert "SUCCESS" in status, status
    assert refused_total(broker, "compaction_batch_size") == before + 1
    assert_others_served(broker)
    assert rss_mb(broker) < RSS_BOUND_MB
    # The entries, kept whole, are still there after a restart.
    restarted(broker)
    consumer = subscribing(broker, topic, "after", 10_000_000,
                           sub_type=pb.CommandSubscribe.Exclusive)
    ids = [(m.message_id.ledgerId, m.message_id.entryId) for m in received(consumer, 4)]
    assert len(set(ids)) == 4


# -- records per batch -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("batch", "num_messages"),
    [(2**31 - 1, 1), (-1_000_000, 1), (0, 1), (2, -1_000_000), (2, 2**31 - 1)],
)
def test_a_batch_size_the_payload_cannot_hold_is_refused_at_send(
    broker: BrokerProcess, batch: int, num_messages: int
) -> None:
    topic = topic_name("count")
    raw = producing(broker, topic)
    before = refused_total(broker, "batch_size")
    payload = encode_plain_batch([0, 1], [b"x", b"y"])
    answer = send(raw, metadata(0, batch=batch), payload, num_messages)
    assert (answer.type, answer.send_error.error) == (T.SEND_ERROR, ServerError.NotAllowedError)
    assert "messages" in answer.send_error.message
    assert refused_total(broker, "batch_size") == before + 1
    # The same producer's honest batch is stored, and a Shared consumer gets exactly
    # the permits' worth (the unacked count stays sane: CONSUMER_STATS answers).
    assert send(raw, metadata(1, batch=2), payload, 2).type == T.SEND_RECEIPT
    consumer = subscribing(broker, topic, "s", 5)
    message = received(consumer, 1)[0]
    stats = T(type=T.CONSUMER_STATS)
    stats.consumerStats.consumer_id, stats.consumerStats.request_id = 1, 9
    answer = consumer.request(stats, T.CONSUMER_STATS_RESPONSE).consumerStatsResponse
    assert (answer.unackedMessages, answer.availablePermits) == (2, 3)
    ack(consumer, message.message_id, None)
    assert_others_served(broker)
    assert rss_mb(broker) < RSS_BOUND_MB


# -- ack sets --------------------------------------------------------------------------
def _one_batch(broker: BrokerProcess, size: int) -> tuple[str, Raw, pb.CommandMessage]:
    topic = topic_name("acks")
    raw = producing(broker, topic)
    payload = encode_plain_batch(list(range(size)), [b"m"] * size)
    assert send(raw, metadata(0, batch=size), payload, size).type == T.SEND_RECEIPT
    consumer = subscribing(broker, topic, "s", 1000)
    return topic, consumer, received(consumer, 1)[0]


def test_an_ack_set_longer_than_its_batch_is_refused(broker: BrokerProcess) -> None:
    topic, consumer, message = _one_batch(broker, 10)
    before = refused_total(broker, "ack_set")
    # With a receipt asked for: ACK_RESPONSE with the error.
    ack(consumer, message.message_id, [-2] * 100_000, request_id=7)
    answer = consumer.recv_type(T.ACK_RESPONSE).ackResponse
    assert (answer.request_id, answer.error) == (7, ServerError.NotAllowedError)
    assert "Ack set of 100000 words" in answer.message
    # Without one: dropped and counted, the connection stays.
    ack(consumer, message.message_id, [-2] * 400_000)
    consumer.send(T(type=T.PING))
    consumer.recv_type(T.PONG)
    assert refused_total(broker, "ack_set") == before + 2
    # In a transaction: the same error, at once.
    coordinator = RawCoordinator(broker.port)
    assert coordinator.connect(0).error == 0
    txn = coordinator.new_txn()
    most, least = txn.txnid_most_bits, txn.txnid_least_bits
    assert coordinator.add_subscription(most, least, topic, "s").error == 0
    started = time.monotonic()
    ack(consumer, message.message_id, [-2] * 100_000, request_id=8, txn=(most, least))
    answer = consumer.recv_type(T.ACK_RESPONSE).ackResponse
    assert (answer.request_id, answer.error) == (8, ServerError.NotAllowedError)
    assert time.monotonic() - started < 5
    assert_others_served(broker)
    # An honest partial ack (members 0 and 1) is stored and survives a restart: only
    # the other eight come back.
    ack(consumer, message.message_id, [0b1111111100], request_id=9)
    assert consumer.recv_type(T.ACK_RESPONSE).ackResponse.error == 0
    restarted(broker)
    again = received(subscribing(broker, topic, "s", 1000), 1)[0]
    assert list(again.ack_set) == [0b1111111100]
    # An entry never dispatched to the subscription, published before the restart:
    # the broker reads it to learn its batch size.
    other = subscribing(broker, topic, "other", 0)
    ack(other, message.message_id, [-2, -2], request_id=10)
    answer = other.recv_type(T.ACK_RESPONSE).ackResponse
    assert (answer.error, "its batch of 10" in answer.message) == (
        ServerError.NotAllowedError, True
    )
    assert rss_mb(broker) < RSS_BOUND_MB


def test_persisted_ack_sets_are_bounded_per_subscription(broker: BrokerProcess) -> None:
    """Partial acks of many large batches: the cursor's row in the metadata store
    stays within managedLedgerMaxBatchDeletedIndexBytesToPersist; the batches beyond
    it are delivered whole again after a restart (redelivery, never loss)."""
    topic = topic_name("persist")
    raw = producing(broker, topic)
    size, batches = 64 * 50, 20  # 50 ack-set words per batch, 1000 in all
    for seq in range(batches):
        body = EMPTY_RECORD * size
        assert send(raw, metadata(seq, batch=size), body, size).type == T.SEND_RECEIPT
    # Exclusive: a Shared consumer would stop at maxUnackedMessagesPerConsumer.
    exclusive = pb.CommandSubscribe.Exclusive
    consumer = subscribing(broker, topic, "s", size * batches, sub_type=exclusive)
    messages = received(consumer, batches)
    keep_one = [0] * 49 + [1 << 63]  # every member acked but the last
    for m in messages:
        ack(consumer, m.message_id, [w - (1 << 64) if w >= 1 << 63 else w for w in keep_one],
            request_id=m.message_id.entryId + 1)
        assert consumer.recv_type(T.ACK_RESPONSE).ackResponse.error == 0
    restarted(broker)
    db = sqlite3.connect(broker.data_dir / "metadata.db")
    try:
        largest = db.execute("SELECT MAX(LENGTH(value)) FROM kv").fetchone()[0]
    finally:
        db.close()
    # JSON spends at most about 21 bytes on an 8-byte word.
    assert largest < ACK_SET_BYTES_TO_PERSIST // 8 * 21 + 64 * 1024
    again = received(
        subscribing(broker, topic, "s", size * batches, sub_type=exclusive), batches
    )
    partial = [m for m in again if len(m.ack_set)]
    whole = [m for m in again if not len(m.ack_set)]
    assert len(partial) == ACK_SET_BYTES_TO_PERSIST // 8 // 50
    assert len(partial) + len(whole) == batches
    assert_others_served(broker)
    assert rss_mb(broker) < RSS_BOUND_MB
