"""Transaction scenarios of the failure catalogue that need a real broker process.

Transactions are driven over raw frames (the official Python client has no
transaction API), so each test controls exactly which command arrives when: a
late participant marker, a client that goes silent past its timeout, a kill -9
with a transaction open. Reads use the official ``pulsar`` client, whose
subscriptions are read-committed. Every read ends at a sentinel published last:
on one partition a read that reaches it has seen everything visible before it, so
"never delivered" is concluded from order, not from silence.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawTxnProducer, close_all

pulsar = pytest.importorskip("pulsar")

T = pb.BaseCommand
RECEIVE_MS = 20_000  # bounds every wait for a message the broker must deliver
TIMEOUT_WAIT_S = 20.0  # bounds every wait for a coordinator's timeout abort

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn_catalogue") / "data").start()
    yield proc
    close_all()
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture(autouse=True)
def _close_raw() -> Iterator[None]:
    yield
    close_all()


def _topic(name: str) -> str:
    return f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"


class RawTxnClient(RawTxnProducer):
    """A transactional raw producer that can also send the coordinator's marker
    command to its partition, and wait for a transaction to end."""

    def __init__(self, port: int, topic: str) -> None:
        super().__init__(port, topic, producer_name="catalogue")

    def end_on_partition(
        self, txn: tuple[int, int], action: int
    ) -> pb.CommandEndTxnOnPartitionResponse:
        """The coordinator's marker command to a partition, sent as a late copy would arrive."""
        cmd = T(type=T.END_TXN_ON_PARTITION)
        e = cmd.endTxnOnPartition
        e.request_id = self.tc.next_request_id()
        e.txnid_most_bits, e.txnid_least_bits = txn
        e.topic, e.txn_action = self.topic, action
        return self.raw.request(
            cmd, T.END_TXN_ON_PARTITION_RESPONSE
        ).endTxnOnPartitionResponse

    def wait_until_ended(self, admin_url: str, txn: tuple[int, int]) -> None:
        """Wait until the coordinator's timeout abort has ended ``txn`` everywhere: the
        coordinator forgets a transaction only after every participant acknowledged
        its end, so the admin API's 404 means the partition has its abort marker
        (bounded poll of the broker's state; the request changes nothing)."""
        url = f"{admin_url}/admin/v3/transactions/transactionMetadata/{txn[0]}/{txn[1]}"
        deadline = time.monotonic() + TIMEOUT_WAIT_S
        while True:
            try:
                urllib.request.urlopen(url, timeout=10).close()
            except urllib.error.HTTPError as exc:
                assert exc.code == 404, exc
                return
            assert time.monotonic() < deadline, f"transaction {txn} never ended"
            time.sleep(0.05)


def _client(broker: BrokerProcess) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=logger)


def _read_to(consumer: pulsar.Consumer, sentinel: bytes) -> list[bytes]:
    got: list[bytes] = []
    while not got or got[-1] != sentinel:
        msg = consumer.receive(RECEIVE_MS)
        consumer.acknowledge(msg)
        got.append(msg.data())
    return got


def _read_all(client: pulsar.Client, topic: str) -> list[bytes]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen: list[bytes] = []
    while reader.has_message_available():
        seen.append(reader.read_next(RECEIVE_MS).data())
    reader.close()
    return seen


def test_late_marker_of_an_ended_transaction_leaves_the_next_one_alone(
    broker: BrokerProcess,
) -> None:
    """Catalogue 18: a delayed END_TXN_ON_PARTITION of T1 reaches the partition after
    T2 of the same client started writing it. Markers name the whole TxnID, so T2
    stays open (its message invisible, and the plain message behind it held), T2's
    own abort hides it for good, and a late opposite marker does not undo T1."""
    topic = _topic("late-marker")
    p = RawTxnClient(broker.port, topic)
    client = _client(broker)
    consumer = client.subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    t1 = p.new_txn()
    assert p.send(b"t1", t1).type == T.SEND_RECEIPT
    assert not p.end(t1, pb.COMMIT).HasField("error")
    t2 = p.new_txn()
    assert t2 != t1
    assert p.send(b"t2", t2).type == T.SEND_RECEIPT
    # The copies a retrying coordinator (or a slow network) could deliver late.
    p.end_on_partition(t1, pb.COMMIT)
    p.end_on_partition(t1, pb.ABORT)
    assert p.send(b"plain").type == T.SEND_RECEIPT  # held behind the open T2
    assert consumer.receive(RECEIVE_MS).data() == b"t1"
    assert not p.end(t2, pb.ABORT).HasField("error")
    assert p.send(b"sentinel").type == T.SEND_RECEIPT
    assert _read_to(consumer, b"sentinel") == [b"plain", b"sentinel"]
    assert _read_all(client, topic) == [b"t1", b"plain", b"sentinel"]
    client.close()


def test_client_silent_past_its_timeout_gets_a_definite_abort(
    broker: BrokerProcess,
) -> None:
    """Catalogue 6 and 41: a client stalls between its send and its commit for longer
    than the transaction's timeout. The coordinator aborts; the stalled client's later
    send in the transaction is refused, its commit gets a definite error (asking again
    gives the same), and nothing of the transaction is ever readable."""
    topic = _topic("paused-client")
    p = RawTxnClient(broker.port, topic)
    client = _client(broker)
    consumer = client.subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    txn = p.new_txn(ttl_ms=500)
    assert p.send(b"before-pause", txn).type == T.SEND_RECEIPT
    p.wait_until_ended(broker.admin_url, txn)  # the client's pause: it sends nothing
    late = p.send(b"after-pause", txn)
    assert late.type == T.SEND_ERROR, late
    commits = [p.end(txn, pb.COMMIT) for _ in range(2)]
    for answer in commits:
        assert answer.HasField("error"), answer
        assert answer.error in (pb.InvalidTxnStatus, pb.TransactionNotFound), answer
    assert commits[0].error == commits[1].error
    assert p.send(b"sentinel").type == T.SEND_RECEIPT
    assert _read_to(consumer, b"sentinel") == [b"sentinel"]
    assert _read_all(client, topic) == [b"sentinel"]
    client.close()


def test_unload_mid_transaction_then_commit_is_whole(broker: BrokerProcess) -> None:
    """Catalogue 23: the topic is unloaded while a transaction holds entries on it
    (its producer and consumer are disconnected, its transaction buffer closed). The
    commit that follows reaches the reloaded topic, which recovered the buffer first:
    the transaction's messages and the plain message held behind them are delivered,
    once each and in order, to the consumer that reconnected by itself."""
    topic = _topic("unload-mid-txn")
    p = RawTxnClient(broker.port, topic)
    client = _client(broker)
    consumer = client.subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    txn = p.new_txn()
    assert p.send(b"t-1", txn).type == T.SEND_RECEIPT
    assert p.send(b"plain").type == T.SEND_RECEIPT
    assert p.send(b"t-2", txn).type == T.SEND_RECEIPT
    path = topic[len("persistent://") :]
    request = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/{path}/unload", method="PUT"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 204)
    after = RawTxnClient(broker.port, topic)  # the unload closed the first producer
    assert not after.end(txn, pb.COMMIT).HasField("error")
    assert after.send(b"sentinel").type == T.SEND_RECEIPT
    assert _read_to(consumer, b"sentinel") == [b"t-1", b"plain", b"t-2", b"sentinel"]
    assert _read_all(client, topic) == [b"t-1", b"plain", b"t-2", b"sentinel"]
    client.close()


def test_send_to_a_partition_never_added_stays_invisible_after_the_commit(
    broker: BrokerProcess,
) -> None:
    """Catalogue 39: a transactional send reaches a partition that was never added to
    the transaction. As in Pulsar, the broker does not ask the coordinator, so the
    commit sends that partition no marker and never shows the send; the next
    transaction of the coordinator that ends there carries a low watermark past it,
    which aborts it and releases what waited behind it."""
    topic = _topic("unregistered")
    p = RawTxnClient(broker.port, topic)
    client = _client(broker)
    consumer = client.subscribe(
        topic, "s", initial_position=pulsar.InitialPosition.Earliest
    )
    r = p.tc.new_txn(0, ttl_ms=60_000)
    assert not r.HasField("error"), r.message
    unregistered = (r.txnid_most_bits, r.txnid_least_bits)
    # Accepted, as Pulsar does: the broker does not check membership with the coordinator.
    assert p.send(b"unregistered", unregistered).type == T.SEND_RECEIPT
    assert p.send(b"plain").type == T.SEND_RECEIPT
    assert not p.end(unregistered, pb.COMMIT).HasField("error")
    later = p.new_txn()
    assert p.send(b"later", later).type == T.SEND_RECEIPT
    assert not p.end(later, pb.COMMIT).HasField("error")
    assert p.send(b"sentinel").type == T.SEND_RECEIPT
    expected = [b"plain", b"later", b"sentinel"]
    assert _read_to(consumer, b"sentinel") == expected
    assert _read_all(client, topic) == expected
    client.close()


def test_kill_9_with_open_transaction_rearms_its_timeout_and_reuses_no_id(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Catalogue 9, 11 and 13: the broker dies (kill -9) while a transaction holds
    entries on a partition and a plain message waits behind it. After the restart no
    transaction id is handed out again, the open transaction's timeout is armed
    again (it aborts without any client asking), the held plain message is delivered
    without another publish, and the open transaction's entry is never readable."""
    proc = BrokerProcess(tmp_path_factory.mktemp("txn_catalogue_kill") / "data").start()
    try:
        topic = _topic("kill-open")
        p = RawTxnClient(proc.port, topic)
        committed = p.new_txn()
        assert p.send(b"committed", committed).type == T.SEND_RECEIPT
        assert not p.end(committed, pb.COMMIT).HasField("error")
        still_open = p.new_txn(ttl_ms=3_000)
        assert p.send(b"open", still_open).type == T.SEND_RECEIPT
        assert p.send(b"plain-behind").type == T.SEND_RECEIPT
        handed_out = {committed, still_open}
        close_all()
        proc.kill()
        proc.start()
        p = RawTxnClient(proc.port, topic)
        after = p.new_txn()
        assert after[0] == still_open[0]
        assert after[1] > max(least for _, least in handed_out), (after, handed_out)
        assert not p.end(after, pb.ABORT).HasField("error")
        assert p.send(b"sentinel").type == T.SEND_RECEIPT
        client = _client(proc)
        consumer = client.subscribe(
            topic, "s", initial_position=pulsar.InitialPosition.Earliest
        )
        # Delivered only once the coordinator has aborted the open transaction by itself.
        assert _read_to(consumer, b"sentinel") == [
            b"committed",
            b"plain-behind",
            b"sentinel",
        ]
        answer = p.end(still_open, pb.COMMIT)
        assert answer.HasField("error"), answer
        assert _read_all(client, topic) == [b"committed", b"plain-behind", b"sentinel"]
        client.close()
    finally:
        close_all()
        proc.kill()
