"""Wire compatibility with the official ``pulsar-client`` (C++ core 4.2).

The shared fake broker (``tests/fakes``), on its own event-loop thread, talks to the
real client on loopback: the client's SEND frames, kept verbatim, must decode,
checksum and decompress with our code, and the MESSAGE frames, entries, batches, ack
sets and compressed payloads we build, prepared as raw deliveries, must be accepted by
the client.
"""

from __future__ import annotations

import collections.abc
import time
import uuid

import pulsar
import pytest

from quasar.protocol import (
    Frame,
    build_batch,
    clear_index,
    compress,
    decompress,
    full_ack_set,
    make_entry,
    parse_batch,
    parse_entry,
    pb,
)
from quasar.protocol.message_id import message_id_fields, parse_message_id_data

from ..fakes.broker import Delivery
from ..fakes.threaded import ThreadedFakeBroker

T = pb.BaseCommand
# The ledger of the prepared deliveries: not the fake's own, so a client that made
# up an id instead of reading ours would show.
LEDGER_ID = 77

CODECS = {
    pb.NONE: pulsar.CompressionType.NONE,
    pb.LZ4: pulsar.CompressionType.LZ4,
    pb.ZLIB: pulsar.CompressionType.ZLib,
    pb.ZSTD: pulsar.CompressionType.ZSTD,
    pb.SNAPPY: pulsar.CompressionType.SNAPPY,
}
VALUE = b"quasar speaks pulsar " * 30


@pytest.fixture
def broker() -> collections.abc.Iterator[ThreadedFakeBroker]:
    with ThreadedFakeBroker() as fake:
        yield fake
    assert not fake.broker.errors, fake.broker.errors


@pytest.fixture
def client(broker: ThreadedFakeBroker) -> collections.abc.Iterator[pulsar.Client]:
    c = pulsar.Client(
        broker.url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    yield c
    c.close()


def _topic() -> str:
    # The full name, as the client sends it: the fake keys its topics by it.
    return f"persistent://public/default/wire-{uuid.uuid4().hex[:8]}"


def _sends(broker: ThreadedFakeBroker) -> list[Frame]:
    return broker.on_loop(lambda: broker.broker.frames_of(T.SEND))


def _acks(broker: ThreadedFakeBroker) -> list[pb.CommandAck]:
    # A plain read: it runs inside wait_for's predicate, on the fake's loop already.
    return [c.ack for c in broker.broker.commands(T.ACK)]


def _prepare(broker: ThreadedFakeBroker, topic: str, *deliveries: Delivery) -> None:
    """Have the fake push ``deliveries`` on the first FLOW for ``topic``."""
    broker.on_loop(lambda: broker.broker.topic(topic).deliveries.extend(deliveries))


@pytest.mark.parametrize("codec", list(CODECS))
def test_client_send_decodes_checksums_and_decompresses(
    broker: ThreadedFakeBroker, client: pulsar.Client, codec: int
) -> None:
    producer = client.create_producer(_topic(), compression_type=CODECS[codec])
    producer.send(VALUE, properties={"k": "v"}, partition_key="key-1")
    producer.close()
    [frame] = _sends(broker)
    assert frame.checksum_ok is True  # the client checksums at protocol >= 6
    assert frame.payload is not None and frame.payload[:2] == b"\x0e\x01"
    parsed = parse_entry(frame.payload)
    meta = parsed.metadata
    assert not meta.HasField("num_messages_in_batch")
    assert meta.partition_key == "key-1"
    assert [(p.key, p.value) for p in meta.properties] == [("k", "v")]
    assert meta.sequence_id == frame.command.send.sequence_id
    body = frame.payload[parsed.payload_offset :]
    if codec == pb.NONE:
        assert not meta.HasField("compression") and body == VALUE
    else:
        assert meta.compression == codec
        assert decompress(codec, body, meta.uncompressed_size) == VALUE


def test_client_batch_decodes(
    broker: ThreadedFakeBroker, client: pulsar.Client
) -> None:
    producer = client.create_producer(
        _topic(),
        compression_type=pulsar.CompressionType.ZSTD,
        batching_enabled=True,
        batching_max_messages=5,
        batching_max_publish_delay_ms=60_000,
    )
    for i in range(5):
        producer.send_async(b"msg-%d" % i, None, properties={"i": str(i)})
    producer.flush()
    producer.close()
    [frame] = _sends(broker)
    assert frame.command.send.num_messages == 5
    parsed = parse_entry(frame.payload or b"")
    meta = parsed.metadata
    assert meta.num_messages_in_batch == 5
    batch = decompress(
        meta.compression,
        (frame.payload or b"")[parsed.payload_offset :],
        meta.uncompressed_size,
    )
    messages = parse_batch(batch, meta.num_messages_in_batch)
    assert [body for _, body in messages] == [b"msg-%d" % i for i in range(5)]
    assert [m.sequence_id for m, _ in messages] == list(
        range(meta.sequence_id, meta.sequence_id + 5)
    )
    assert [m.properties[0].value for m, _ in messages] == [str(i) for i in range(5)]


def _receive_all(consumer: pulsar.Consumer, n: int) -> list[pulsar.Message]:
    return [consumer.receive(timeout_millis=10_000) for _ in range(n)]


def test_client_accepts_our_message_frames(
    broker: ThreadedFakeBroker, client: pulsar.Client
) -> None:
    single = make_entry(
        pb.MessageMetadata(
            producer_name="p",
            sequence_id=0,
            publish_time=int(time.time() * 1000),
            properties=[pb.KeyValue(key="a", value="1")],
            partition_key="pk",
        ),
        b"single",
    )
    batch_items = [
        (pb.SingleMessageMetadata(sequence_id=1 + i), b"b%d" % i) for i in range(4)
    ]
    raw_batch = build_batch(batch_items)
    batch = make_entry(
        pb.MessageMetadata(
            producer_name="p",
            sequence_id=1,
            publish_time=int(time.time() * 1000),
            num_messages_in_batch=4,
            compression=pb.LZ4,
            uncompressed_size=len(raw_batch),
        ),
        compress(pb.LZ4, raw_batch),
    )
    # Index 0 of the batch is already acknowledged: the client must skip it.
    ack_set = clear_index(full_ack_set(4), 0)
    topic = _topic()
    _prepare(
        broker,
        topic,
        Delivery(single, 0, ledger_id=LEDGER_ID),
        Delivery(batch, 1, ack_set, ledger_id=LEDGER_ID),
    )
    consumer = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive
    )
    received = _receive_all(consumer, 4)
    assert [m.data() for m in received] == [b"single", b"b1", b"b2", b"b3"]
    assert received[0].properties() == {"a": "1"}
    assert received[0].partition_key() == "pk"
    ids = [m.message_id() for m in received]
    assert [(i.ledger_id(), i.entry_id(), i.batch_index()) for i in ids] == [
        (LEDGER_ID, 0, -1),
        (LEDGER_ID, 1, 1),
        (LEDGER_ID, 1, 2),
        (LEDGER_ID, 1, 3),
    ]
    ledger, entry, _, batch_index, _ = message_id_fields(
        parse_message_id_data(ids[2].serialize())
    )
    assert (ledger, entry, batch_index) == (LEDGER_ID, 1, 2)
    consumer.acknowledge(received[0])
    consumer.close()
    assert broker.wait_for(lambda: any(a.message_id for a in _acks(broker)))
    acked = [(m.ledgerId, m.entryId) for a in _acks(broker) for m in a.message_id]
    assert (LEDGER_ID, 0) in acked


@pytest.mark.parametrize("codec", [c for c in CODECS if c != pb.NONE])
def test_client_decompresses_our_payloads(
    broker: ThreadedFakeBroker, client: pulsar.Client, codec: int
) -> None:
    entry = make_entry(
        pb.MessageMetadata(
            producer_name="p",
            sequence_id=0,
            publish_time=1,
            compression=codec,  # type: ignore[arg-type]
            uncompressed_size=len(VALUE),
        ),
        compress(codec, VALUE),
    )
    topic = _topic()
    _prepare(broker, topic, Delivery(entry, 0, ledger_id=LEDGER_ID))
    consumer = client.subscribe(topic, "sub")
    assert consumer.receive(timeout_millis=10_000).data() == VALUE
    consumer.close()


def test_client_rejects_corrupt_checksum(
    broker: ThreadedFakeBroker, client: pulsar.Client
) -> None:
    bad = bytearray(
        make_entry(
            pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"x"
        )
    )
    bad[-1] ^= 0xFF
    good = make_entry(
        pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), b"ok"
    )
    topic = _topic()
    _prepare(
        broker,
        topic,
        Delivery(bytes(bad), 0, ledger_id=LEDGER_ID),
        Delivery(good, 1, ledger_id=LEDGER_ID),
    )
    consumer = client.subscribe(topic, "sub")
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == b"ok"
    assert broker.wait_for(
        lambda: any(
            a.validation_error == pb.CommandAck.ChecksumMismatch for a in _acks(broker)
        )
    )
    consumer.close()
