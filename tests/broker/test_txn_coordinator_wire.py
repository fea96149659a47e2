"""Transaction coordinator commands over the wire, against a real broker process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator

T = pb.BaseCommand
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
COORDINATORS = 16  # what a Pulsar cluster gets from initialize-transaction-coordinator-metadata

pytestmark = pytest.mark.usefixtures("close_raw")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with 16 coordinators, so that ids other than 0 are exercised."""
    proc = BrokerProcess(
        tmp_path_factory.mktemp("tc-wire") / "data",
        extra_env={"QUASAR_transactionCoordinatorCount": str(COORDINATORS)},
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def assign_partitions(port: int) -> int:
    raw = Raw(port)
    raw.connect()
    cmd = T(type=T.PARTITIONED_METADATA)
    cmd.partitionMetadata.topic = ASSIGN
    cmd.partitionMetadata.request_id = 1
    resp = raw.request(cmd, T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
    assert resp.response == pb.CommandPartitionedTopicMetadataResponse.Success
    return int(resp.partitions)


def test_assign_topic_has_one_partition_per_coordinator(broker: BrokerProcess) -> None:
    assert assign_partitions(broker.port) == COORDINATORS
    tc = RawCoordinator(broker.port)
    assert not tc.connect(COORDINATORS - 1).HasField("error")
    assert tc.connect(COORDINATORS).error == pb.TransactionCoordinatorNotFound


def test_one_coordinator_by_default_and_a_data_dir_keeps_its_count(
    tmp_path: Path,
) -> None:
    """One coordinator by default, as Pulsar's standalone creates the assign topic. A
    data directory keeps the count it was created with, in both directions: a
    coordinator dropped would take its open transactions with it, and one added would
    change where clients send them."""
    one = BrokerProcess(tmp_path / "one")
    with one:
        assert assign_partitions(one.port) == 1
        tc = RawCoordinator(one.port)
        assert not tc.connect(0).HasField("error")
        assert tc.connect(1).error == pb.TransactionCoordinatorNotFound
        txn = tc.new_txn(0)
        assert not txn.HasField("error")
    one.extra_env = {"QUASAR_transactionCoordinatorCount": "16"}
    with one:
        assert assign_partitions(one.port) == 1
        tc = RawCoordinator(one.port)
        assert not tc.connect(0).HasField("error")
        assert tc.connect(1).error == pb.TransactionCoordinatorNotFound
        ended = tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.COMMIT)
        assert not ended.HasField("error"), ended.message
        assert "keeping 1 transaction coordinators" in one.read_log()

    sixteen = BrokerProcess(
        tmp_path / "sixteen", extra_env={"QUASAR_transactionCoordinatorCount": "16"}
    )
    with sixteen:
        tc = RawCoordinator(sixteen.port)
        tc.connect(9)
        txn = tc.new_txn(9)
        assert not txn.HasField("error")
    sixteen.extra_env = {}  # back to the default of one
    with sixteen:
        assert assign_partitions(sixteen.port) == 16
        tc = RawCoordinator(sixteen.port)
        assert not tc.connect(9).HasField("error")
        ended = tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.COMMIT)
        assert not ended.HasField("error"), ended.message
        assert "keeping 16 transaction coordinators" in sixteen.read_log()


def test_tc_connect_known_and_unknown_ids(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
    assert not tc.connect(0).HasField("error")
    assert not tc.connect(15).HasField("error")
    bad = tc.connect(16)
    assert bad.error == pb.TransactionCoordinatorNotFound


def test_new_txn_ids_are_sequential_per_coordinator(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
    tc.connect(3)
    first = tc.new_txn(3)
    second = tc.new_txn(3)
    assert not first.HasField("error") and first.txnid_most_bits == 3
    assert second.txnid_least_bits == first.txnid_least_bits + 1


def test_commit_then_errors_for_ended_and_unknown_transactions(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
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
    tc = RawCoordinator(broker.port)
    tc.connect(2)
    txn = tc.new_txn(2)
    assert not tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.COMMIT).HasField("error")
    again = tc.end(txn.txnid_most_bits, txn.txnid_least_bits, pb.ABORT)
    assert again.error in (pb.InvalidTxnStatus, pb.TransactionNotFound)


def test_timeout_aborts_open_transaction(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
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
    tc = RawCoordinator(broker.port)
    resp = tc.new_txn(9)
    # Pulsar answers TransactionCoordinatorNotFound until the client connects the TC;
    # quasar may load it lazily instead. Either way the answer names coordinator 9.
    assert resp.txnid_most_bits == 9
