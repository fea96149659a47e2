"""The .proto files match the protocol reference where it matters on the wire."""

from __future__ import annotations

import pytest

import quasar.protocol as proto
from quasar.errors import ServerError
from quasar.protocol import markers_pb, pb, pending_ack_pb, txnlog_pb


def test_every_command_field_number_equals_its_type_value() -> None:
    base = pb.BaseCommand.DESCRIPTOR
    types = base.enum_types_by_name["Type"].values
    assert len(types) == 58
    for value in types:
        field = base.fields_by_number[value.number]
        assert field.message_type is not None
        assert field.message_type.name.startswith("Command"), value.name
    assert base.fields_by_name["type"].number == 1
    assert base.fields_by_name["type"].is_required
    assert len(base.fields) == len(types) + 1


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("CONNECT", 2),
        ("SEND", 6),
        ("MESSAGE", 9),
        ("LOOKUP", 23),
        ("REACHED_END_OF_TOPIC", 27),
        ("ACK_RESPONSE", 38),
        ("GET_OR_CREATE_SCHEMA_RESPONSE", 40),
        ("NEW_TXN", 50),
        ("END_TXN_ON_SUBSCRIPTION_RESPONSE", 61),
        ("TC_CLIENT_CONNECT_RESPONSE", 63),
        ("WATCH_TOPIC_LIST_CLOSE", 67),
        ("TOPIC_MIGRATED", 68),
    ],
)
def test_command_type_values(name: str, number: int) -> None:
    assert pb.BaseCommand.Type.Value(name) == number


def test_server_error_matches_quasar_errors() -> None:
    assert {v.name: v.number for v in pb.ServerError.DESCRIPTOR.values} == {
        e.name: e.value for e in ServerError
    }


def test_enums() -> None:
    assert [
        pb.CompressionType.Value(n) for n in ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
    ] == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert pb.ProducerAccessMode.Value("ExclusiveWithFencing") == 3
    assert pb.CommandSubscribe.Key_Shared == 3
    assert pb.CommandSubscribe.Earliest == 1
    assert pb.CommandAck.ChecksumMismatch == 2
    assert pb.CommandLookupTopicResponse.Connect == 1
    assert pb.CommandPartitionedTopicMetadataResponse.Success == 0
    assert pb.CommandGetTopicsOfNamespace.ALL == 2
    assert pb.CommandTopicMigrated.Consumer == 1
    assert pb.ABORT == 1
    assert pb.ProtocolVersion.Value("v20") == proto.PROTOCOL_VERSION_MAX
    assert pb.Schema.Type.Value("None") == 0
    assert pb.Schema.ProtobufNative == 20
    assert pb.STICKY == 1
    assert markers_pb.TXN_COMMITTING == 20
    assert markers_pb.TXN_COMMIT == 21
    assert markers_pb.TXN_ABORT == 22
    assert markers_pb.REPLICATED_SUBSCRIPTION_UPDATE == 13
    assert txnlog_pb.ABORTED == 4
    assert txnlog_pb.TransactionMetadataEntry.UPDATE == 3
    assert pending_ack_pb.ABORT == 3


def test_message_metadata_field_numbers() -> None:
    fields = pb.MessageMetadata.DESCRIPTOR.fields_by_name
    expected = {
        "producer_name": 1,
        "sequence_id": 2,
        "publish_time": 3,
        "num_messages_in_batch": 11,
        "deliver_at_time": 19,
        "marker_type": 20,
        "txnid_least_bits": 22,
        "txnid_most_bits": 23,
        "highest_sequence_id": 24,
        "null_value": 25,
        "uuid": 26,
        "chunk_id": 29,
        "null_partition_key": 30,
    }
    assert {name: fields[name].number for name in expected} == expected
    assert 10 not in pb.MessageMetadata.DESCRIPTOR.fields_by_number
    assert pb.MessageMetadata().num_messages_in_batch == 1  # default, yet absent


def test_presence_is_detectable() -> None:
    # An explicitly set default (Connect would be 1; Redirect is the 0 default) must
    # still be present on the wire; the C++ client treats absence as failure.
    resp = pb.CommandLookupTopicResponse(request_id=1)
    assert not resp.HasField("response")
    resp.response = pb.CommandLookupTopicResponse.Redirect
    assert resp.HasField("response")
    again = pb.CommandLookupTopicResponse.FromString(resp.SerializeToString())
    assert again.HasField("response")
    pm = pb.CommandPartitionedTopicMetadataResponse(request_id=1)
    pm.response = pb.CommandPartitionedTopicMetadataResponse.Success
    assert pb.CommandPartitionedTopicMetadataResponse.FromString(
        pm.SerializeToString()
    ).HasField("response")


def test_defaults() -> None:
    mid = pb.MessageIdData(ledgerId=1, entryId=2)
    assert (mid.partition, mid.batch_index) == (-1, -1)
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandProducerSuccess().producer_ready is True
    assert pb.CommandSubscribe().durable is True
    assert pb.CommandProducer().user_provided_producer_name is True
    assert pb.CommandGetTopicsOfNamespaceResponse().changed is True


@pytest.mark.parametrize(
    ("message", "required"),
    [
        (pb.CommandConnected, {"server_version"}),
        (pb.CommandSendError, {"producer_id", "sequence_id", "error", "message"}),
        (pb.CommandError, {"request_id", "error", "message"}),
        (pb.CommandProducerSuccess, {"request_id", "producer_name"}),
        (pb.CommandLookupTopicResponse, {"request_id"}),
        (pb.CommandMessage, {"consumer_id", "message_id"}),
        (pb.SingleMessageMetadata, {"payload_size"}),
        (pb.Schema, {"name", "schema_data", "type"}),
        (pb.CommandTcClientConnectRequest, {"request_id", "tc_id"}),
        (pb.CommandEndTxnOnPartition, {"request_id"}),
        (pb.CommandConsumerStats, {"request_id", "consumer_id"}),
    ],
)
def test_required_fields(message: type, required: set[str]) -> None:
    fields = message.DESCRIPTOR.fields
    assert {f.name for f in fields if f.is_required} == required


def test_transaction_log_record_shape() -> None:
    entry = txnlog_pb.TransactionMetadataEntry(
        metadata_op=txnlog_pb.TransactionMetadataEntry.ADD_SUBSCRIPTION,
        txnid_least_bits=5,
        txnid_most_bits=1,
        subscriptions=[pb.Subscription(topic="persistent://t/n/x", subscription="s")],
        last_modification_time=10,
        max_local_txn_id=5,
        owner="role",
    )
    batch = txnlog_pb.BatchedTransactionMetadataEntry(transaction_logs=[entry, entry])
    assert (
        txnlog_pb.BatchedTransactionMetadataEntry.FromString(batch.SerializeToString())
        == batch
    )
    numbers = {
        f.name: f.number for f in txnlog_pb.TransactionMetadataEntry.DESCRIPTOR.fields
    }
    assert numbers == {
        "metadata_op": 1,
        "txnid_least_bits": 2,
        "txnid_most_bits": 3,
        "expected_status": 4,
        "new_status": 5,
        "partitions": 6,
        "subscriptions": 7,
        "timeout_ms": 8,
        "start_time": 9,
        "last_modification_time": 10,
        "max_local_txn_id": 11,
        "owner": 12,
        "clientName": 13,
    }


def test_pip255_client_name_fields() -> None:
    """PIP-255's additions keep the numbers the proposal gives them."""
    assert pb.CommandNewTxn.DESCRIPTOR.fields_by_name["client_name"].number == 4
    assert pb.CommandEndTxn.DESCRIPTOR.fields_by_name["client_name"].number == 5
    assert pb.ServerError.Value("TransactionPreserverClosed") == 26
    end = pb.CommandEndTxn(request_id=1, txnid_most_bits=2, client_name="app-1")
    assert pb.CommandEndTxn.FromString(end.SerializeToString()).client_name == "app-1"


def test_pending_ack_record_shape() -> None:
    record = pending_ack_pb.PendingAckMetadataEntry(
        pending_ack_op=pending_ack_pb.ACK,
        ack_type=pb.CommandAck.Individual,
        txnid_least_bits=9,
        txnid_most_bits=0,
        pending_ack_metadata=[
            pending_ack_pb.PendingAckMetadata(
                ledgerId=3, entryId=4, ack_set=[-1, 5], batch_size=70
            )
        ],
    )
    assert (
        pending_ack_pb.PendingAckMetadataEntry.FromString(record.SerializeToString())
        == record
    )
    numbers = {
        f.name: f.number for f in pending_ack_pb.PendingAckMetadata.DESCRIPTOR.fields
    }
    assert numbers == {"ledgerId": 1, "entryId": 2, "ack_set": 3, "batch_size": 4}
