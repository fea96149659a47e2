"""Transaction coordinator commands over the wire, against a real broker process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all

T = pb.BaseCommand
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txnwire") / "data").start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    close_all()


class Tc:
    def __init__(self, broker: BrokerProcess) -> None:
        self.raw = Raw(broker.port)
        self.raw.connect()
        self.rid = 100

    def _next(self) -> int:
        self.rid += 1
        return self.rid

    def connect(self, tc_id: int) -> pb.CommandTcClientConnectResponse:
        cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
        cmd.tcClientConnectRequest.request_id = self._next()
        cmd.tcClientConnectRequest.tc_id = tc_id
        return self.raw.request(cmd, T.TC_CLIENT_CONNECT_RESPONSE).tcClientConnectResponse

    def new_txn(self, tc_id: int = 0, ttl_ms: int = 60_000) -> pb.CommandNewTxnResponse:
        cmd = T(type=T.NEW_TXN)
        cmd.newTxn.request_id = self._next()
        cmd.newTxn.tc_id = tc_id
        cmd.newTxn.txn_ttl_seconds = ttl_ms  # milliseconds, as the Java client sends
        return self.raw.request(cmd, T.NEW_TXN_RESPONSE).newTxnResponse

    def add_partition(self, most: int, least: int, topic: str) -> pb.CommandAddPartitionToTxnResponse:
        cmd = T(type=T.ADD_PARTITION_TO_TXN)
        c = cmd.addPartitionToTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self._next(), most, least
        c.partitions.append(topic)
        return self.raw.request(cmd, T.ADD_PARTITION_TO_TXN_RESPONSE).addPartitionToTxnResponse

    def end(self, most: int, least: int, action: int) -> pb.CommandEndTxnResponse:
        cmd = T(type=T.END_TXN)
        c = cmd.endTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self._next(), most, least
        c.txn_action = action
        return self.raw.request(cmd, T.END_TXN_RESPONSE).endTxnResponse


def test_assign_topic_has_one_partition_per_coordinator(broker: BrokerProcess) -> None:
    raw = Raw(broker.port)
    raw.connect()
    cmd = T(type=T.PARTITIONED_METADATA)
    cmd.partitionMetadata.topic = ASSIGN
    cmd.partitionMetadata.request_id = 1
    resp = raw.request(cmd, T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
    assert resp.response == pb.CommandPartitionedTopicMetadataResponse.Success
    assert resp.partitions == 16


def test_tc_connect_known_and_unknown_ids(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    assert not tc.connect(0).HasField("error")
    assert not tc.connect(15).HasField("error")
    bad = tc.connect(16)
    assert bad.error == pb.TransactionCoordinatorNotFound


def test_new_txn_ids_are_sequential_per_coordinator(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    tc.connect(3)
    first = tc.new_txn(3)
    second = tc.new_txn(3)
    assert not first.HasField("error") and first.txnid_most_bits == 3
    assert second.txnid_least_bits == first.txnid_least_bits + 1


def test_commit_then_errors_for_ended_and_unknown_transactions(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    tc.connect(1)
    txn = tc.new_txn(1)
    most, least = txn.txnid_most_bits, txn.txnid_least_bits
    ok = tc.end(most, least, pb.COMMIT)
    assert not ok.HasField("error"), ok.message
    assert (ok.txnid_most_bits, ok.txnid_least_bits) == (most, least)
    late = tc.add_partition(most, least, "persistent://public/default/late")
    assert late.HasField("error")
    assert tc.end(1, 999_999, pb.COMMIT).error == pb.TransactionNotFound
    assert tc.end(7, 0, pb.ABORT).HasField("error")  # coordinator 7 never connected here


def test_abort_after_commit_is_refused(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    tc.connect(2)
    txn = tc.new_txn(2)
    assert not tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.COMMIT).HasField("error")
    again = tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.ABORT)
    assert again.error in (pb.InvalidTxnStatus, pb.TransactionNotFound)


def test_timeout_aborts_open_transaction(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    tc.connect(4)
    txn = tc.new_txn(4, ttl_ms=200)
    most, least = txn.txnid_most_bits, txn.txnid_least_bits
    # Wait for the coordinator's timeout (an event on the broker): poll the state by
    # trying to register a partition, bounded in time.
    deadline = time.monotonic() + 20
    while True:
        resp = tc.add_partition(most, least, "persistent://public/default/after-timeout")
        if resp.HasField("error"):
            break
        assert time.monotonic() < deadline, "transaction never timed out"
        time.sleep(0.05)
    assert resp.error in (pb.InvalidTxnStatus, pb.TransactionNotFound)


def test_new_txn_on_unconnected_coordinator(broker: BrokerProcess) -> None:
    tc = Tc(broker)
    resp = tc.new_txn(9)
    # Pulsar answers TransactionCoordinatorNotFound until the client connects the TC;
    # quasar may load it lazily instead. Either way the answer names coordinator 9.
    assert resp.txnid_most_bits == 9
