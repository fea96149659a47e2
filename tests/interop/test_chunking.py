"""Chunked messages end to end: either client's producer, either client's consumer.

One broker with a small ``maxMessageSize`` (64 KiB, so a message of three times that
is four chunks and stays fast) and deduplication on, so every scenario also checks
that no chunk sharing its message's sequence id is dropped as a duplicate.
"""

from __future__ import annotations

import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from quasar.errors import ServerError
from quasar.protocol import encode_payload_command, make_entry, pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

from .conftest import CLIENT_IMPLS, Admin, make_client, topic_path

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
MAX_MESSAGE_SIZE = 64 * 1024


@pytest.fixture(scope="module")
def chunk_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("chunking") / "data",
        settings={
            "maxMessageSize": str(MAX_MESSAGE_SIZE),
            "brokerDeduplicationEnabled": "true",
        },
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def module(name: str) -> Any:
    if name == "pulsar":
        import pulsar

        return pulsar
    import quasar.client

    return quasar.client


def new_topic() -> str:
    return f"persistent://public/default/chunks-{uuid.uuid4().hex[:10]}"


def wait_backlog_zero(admin: Admin, topic: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        stats = admin.ok("GET", topic_path(topic) + "/stats")
        if stats["subscriptions"]["sub"]["msgBacklog"] == 0:
            return
        assert time.monotonic() < deadline, stats["subscriptions"]["sub"]
        time.sleep(0.05)


@pytest.mark.parametrize("consumer_impl", CLIENT_IMPLS)
@pytest.mark.parametrize("producer_impl", CLIENT_IMPLS)
def test_a_chunked_message_arrives_whole_and_is_acked_whole(
    chunk_broker: BrokerProcess, producer_impl: str, consumer_impl: str
) -> None:
    pmod, cmod = module(producer_impl), module(consumer_impl)
    topic = new_topic()
    producing = make_client(pmod, chunk_broker.url)
    consuming = make_client(cmod, chunk_broker.url)
    try:
        consumer = consuming.subscribe(topic, "sub")
        producer = producing.create_producer(
            topic,
            chunking_enabled=True,
            batching_enabled=False,
            compression_type=pmod.CompressionType.LZ4,
        )
        # Random bytes do not compress: the compressed message needs four chunks.
        big = os.urandom(3 * MAX_MESSAGE_SIZE)
        sent_big = producer.send(big, properties={"k": "v"}, partition_key="key-1")
        sent_small = producer.send(b"small")
        # The id names the first and the last chunk, as pulsar prints it.
        assert ";" in str(sent_big) and ";" not in str(sent_small)
        first = consumer.receive(10_000)
        assert first.data() == big
        assert first.properties() == {"k": "v"}
        assert first.partition_key() == "key-1"
        assert str(first.message_id()) == str(sent_big)
        second = consumer.receive(10_000)
        assert second.data() == b"small"
        consumer.acknowledge(first)
        consumer.acknowledge(second)
        # Acking the chunked message acked each of its chunks.
        admin = Admin(chunk_broker.admin_url)
        wait_backlog_zero(admin, topic)
        stats = admin.ok("GET", topic_path(topic) + "/stats")
        # Every chunk is one entry and one message in the stats, as in Pulsar.
        assert stats["msgInCounter"] == 5
        assert stats["msgChunkPublished"] is True
    finally:
        producing.close()
        consuming.close()


@pytest.mark.parametrize("impl", CLIENT_IMPLS)
def test_a_message_over_max_message_size_without_chunking_is_too_big(
    chunk_broker: BrokerProcess, impl: str
) -> None:
    mod = module(impl)
    client = make_client(mod, chunk_broker.url)
    try:
        producer = client.create_producer(new_topic(), batching_enabled=False)
        with pytest.raises(mod.MessageTooBig):
            producer.send(bytes(MAX_MESSAGE_SIZE + 1))
        producer.send(b"fits")  # the producer still works
    finally:
        client.close()


# -- the broker's side, driven frame by frame --------------------------------------------
def chunk_entry(seq: int, chunk_id: int, num_chunks: int, payload: bytes) -> bytes:
    md = pb.MessageMetadata(producer_name="raw", sequence_id=seq, publish_time=1)
    md.uuid, md.chunk_id, md.num_chunks_from_msg = f"raw-{seq}", chunk_id, num_chunks
    md.total_chunk_msg_size = len(payload) * num_chunks
    return make_entry(md, payload)


def send(raw: Raw, seq: int, entry: bytes) -> pb.BaseCommand:
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id, cmd.send.is_chunk = 1, seq, True
    raw.send_bytes(encode_payload_command(cmd, entry))
    while True:
        answer = raw.recv()
        if answer.type in (T.SEND_RECEIPT, T.SEND_ERROR):
            return answer


def producing(broker: BrokerProcess, topic: str) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    assert raw.producer(topic).type == T.PRODUCER_SUCCESS
    return raw


def refused_chunks(broker: BrokerProcess) -> float:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = 'quasar_hostile_input_refused_total{reason="chunk"} '
    line = next(line for line in text.splitlines() if line.startswith(prefix))
    return float(line[len(prefix) :])


def test_deduplication_records_a_chunked_message_with_its_last_chunk(
    chunk_broker: BrokerProcess,
) -> None:
    raw = producing(chunk_broker, new_topic())
    # A full-size chunk: its entry exceeds maxMessageSize by its metadata, as the
    # official client's chunks do, and is taken.
    piece = os.urandom(MAX_MESSAGE_SIZE)
    entries = [chunk_entry(0, i, 3, piece) for i in range(3)]
    stored = [send(raw, 0, e) for e in entries]
    assert [a.type for a in stored] == [T.SEND_RECEIPT] * 3
    positions = [(a.send_receipt.message_id.ledgerId, a.send_receipt.message_id.entryId)
                 for a in stored]
    assert len(set(positions)) == 3
    # The whole message resent (a reconnect): its earlier chunks are stored again, its
    # last chunk is answered as a duplicate and not stored, as in Pulsar.
    again = [send(raw, 0, e) for e in entries]
    assert [a.type for a in again] == [T.SEND_RECEIPT] * 3
    assert again[0].send_receipt.message_id.entryId not in {p[1] for p in positions}
    assert again[2].send_receipt.message_id.entryId == 2**64 - 1  # -1: not stored


def test_a_chunk_outside_its_message_is_refused_and_counted(
    chunk_broker: BrokerProcess,
) -> None:
    raw = producing(chunk_broker, new_topic())
    before = refused_chunks(chunk_broker)
    answer = send(raw, 0, chunk_entry(0, 3, 3, b"x"))
    assert (answer.type, answer.send_error.error) == (T.SEND_ERROR, ServerError.NotAllowedError)
    assert refused_chunks(chunk_broker) == before + 1
    # A non-chunk over maxMessageSize is refused as before.
    md = pb.MessageMetadata(producer_name="raw", sequence_id=1, publish_time=1)
    answer = send(raw, 1, make_entry(md, bytes(MAX_MESSAGE_SIZE + 100)))
    assert (answer.type, answer.send_error.error) == (T.SEND_ERROR, ServerError.NotAllowedError)


def named_producer(
    broker: BrokerProcess, topic: str
) -> tuple[Raw, pb.CommandProducerSuccess]:
    raw = Raw(broker.port)
    raw.connect()
    cmd = T(type=T.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id = topic, 1, 1
    p.producer_name, p.user_provided_producer_name = "raw", True
    return raw, raw.request(cmd, T.PRODUCER_SUCCESS).producer_success


def test_chunks_stored_before_a_crash_complete_their_message_after_it(
    chunk_broker: BrokerProcess,
) -> None:
    """kill -9 between the chunks of one message: the receipted chunks survive, the
    recovered deduplication state has not recorded the message, so its last chunk is
    taken after the restart and the message is consumed whole."""
    topic = new_topic()
    raw, _ = named_producer(chunk_broker, topic)
    pieces = [os.urandom(1000) for _ in range(3)]
    for i in range(2):
        assert send(raw, 0, chunk_entry(0, i, 3, pieces[i])).type == T.SEND_RECEIPT
    raw.close()
    chunk_broker.restart(hard=True)
    raw, success = named_producer(chunk_broker, topic)
    assert success.last_sequence_id == -1  # no chunk of sequence 0 is recorded
    last = send(raw, 0, chunk_entry(0, 2, 3, pieces[2]))
    assert last.send_receipt.message_id.entryId != 2**64 - 1  # stored
    again = send(raw, 0, chunk_entry(0, 2, 3, pieces[2]))
    assert again.send_receipt.message_id.entryId == 2**64 - 1  # now a duplicate
    pulsar = module("pulsar")
    client = make_client(pulsar, chunk_broker.url)
    try:
        consumer = client.subscribe(
            topic, "sub", initial_position=pulsar.InitialPosition.Earliest
        )
        assert consumer.receive(10_000).data() == b"".join(pieces)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("producer_impl", "consumer_impl"), [("pulsar", "quasar"), ("quasar", "pulsar")]
)
def test_an_encrypted_chunked_message_decrypts_whole(
    chunk_broker: BrokerProcess,
    producer_impl: str,
    consumer_impl: str,
    tmp_path: Any,
) -> None:
    """Pulsar encrypts before it splits: the chunks of an encrypted message are
    pieces of one ciphertext, decrypted once reassembled."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public, private = tmp_path / "k.pub", tmp_path / "k.pem"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    private.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    pmod, cmod = module(producer_impl), module(consumer_impl)
    topic = new_topic()
    producing = make_client(pmod, chunk_broker.url)
    consuming = make_client(cmod, chunk_broker.url)
    try:
        consumer = consuming.subscribe(
            topic, "sub", crypto_key_reader=cmod.CryptoKeyReader(str(public), str(private))
        )
        producer = producing.create_producer(
            topic,
            chunking_enabled=True,
            batching_enabled=False,
            encryption_key="k",
            crypto_key_reader=pmod.CryptoKeyReader(str(public), str(private)),
        )
        payload = os.urandom(3 * MAX_MESSAGE_SIZE)
        producer.send(payload, properties={"p": "1"})
        msg = consumer.receive(15_000)
        assert msg.data() == payload
        assert msg.properties() == {"p": "1"}
        consumer.acknowledge(msg)
    finally:
        producing.close()
        consuming.close()
