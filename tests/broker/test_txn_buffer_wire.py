"""Transactional publishing through a real broker: sends of a transaction become
visible only when it commits, never when it aborts, and non-transactional messages
published after an open transaction wait behind it (read-committed, in order).

Transactions are driven over raw frames (the official Python client has no
transaction API); consumption uses the official client."""

from __future__ import annotations

import logging

import pulsar
import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawTxnProducer, close_all

T = pb.BaseCommand


pytestmark = pytest.mark.usefixtures("close_raw")


def _client(broker: BrokerProcess) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=logger)


def _consumer(client: pulsar.Client, topic: str) -> pulsar.Consumer:
    return client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)


def test_commit_makes_messages_visible_and_holds_later_ones_behind(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/txn-commit"
    p = RawTxnProducer(broker.port, topic)
    client = _client(broker)
    consumer = _consumer(client, topic)
    txn = p.new_txn()
    assert p.send(b"t1", txn).type == T.SEND_RECEIPT
    assert p.send(b"t2", txn).type == T.SEND_RECEIPT
    assert p.send(b"plain-after").type == T.SEND_RECEIPT  # held behind the open txn
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)  # nothing is readable while the transaction is open
    assert not p.end(txn, pb.COMMIT).HasField("error")
    got = [consumer.receive(10_000).data() for _ in range(3)]
    assert got == [b"t1", b"t2", b"plain-after"]
    client.close()


def test_aborted_messages_are_never_delivered(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/txn-abort"
    p = RawTxnProducer(broker.port, topic)
    client = _client(broker)
    consumer = _consumer(client, topic)
    txn = p.new_txn()
    p.send(b"aborted-1", txn)
    p.send(b"plain")
    p.send(b"aborted-2", txn)
    assert not p.end(txn, pb.ABORT).HasField("error")
    p.send(b"sentinel")
    got = [consumer.receive(10_000).data() for _ in range(2)]
    assert got == [b"plain", b"sentinel"]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(10_000).data())
    assert seen == [b"plain", b"sentinel"]
    client.close()


def test_send_after_end_is_rejected(broker: BrokerProcess) -> None:
    p = RawTxnProducer(broker.port, "persistent://public/default/txn-late")
    txn = p.new_txn()
    p.send(b"in-time", txn)
    assert not p.end(txn, pb.COMMIT).HasField("error")
    late = p.send(b"too-late", txn)
    assert late.type == T.SEND_ERROR


def test_transactions_survive_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    proc = BrokerProcess(tmp_path_factory.mktemp("txnrestart") / "data").start()
    try:
        topic = "persistent://public/default/txn-restart"
        p = RawTxnProducer(proc.port, topic)
        committed = p.new_txn()
        p.send(b"c1", committed)
        assert not p.end(committed, pb.COMMIT).HasField("error")
        aborted = p.new_txn()
        p.send(b"a1", aborted)
        assert not p.end(aborted, pb.ABORT).HasField("error")
        still_open = p.new_txn()
        p.send(b"o1", still_open)
        close_all()
        proc.kill()
        proc.start()
        # The open transaction can still be committed after the restart.
        p2 = RawTxnProducer(proc.port, topic)
        assert not p2.end(still_open, pb.COMMIT).HasField("error")
        client = _client(proc)
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        seen = []
        while reader.has_message_available():
            seen.append(reader.read_next(10_000).data())
        assert seen == [b"c1", b"o1"]
        client.close()
    finally:
        proc.stop()
