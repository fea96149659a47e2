from . import pulsar_api_pb2 as _pulsar_api_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PendingAckOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK: _ClassVar[PendingAckOp]
    COMMIT: _ClassVar[PendingAckOp]
    ABORT: _ClassVar[PendingAckOp]
ACK: PendingAckOp
COMMIT: PendingAckOp
ABORT: PendingAckOp

class PendingAckMetadata(_message.Message):
    __slots__ = ("ledgerId", "entryId", "ack_set", "batch_size")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    entryId: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    batch_size: int
    def __init__(self, ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., batch_size: _Optional[int] = ...) -> None: ...

class PendingAckMetadataEntry(_message.Message):
    __slots__ = ("pending_ack_op", "ack_type", "txnid_least_bits", "txnid_most_bits", "pending_ack_metadata")
    PENDING_ACK_OP_FIELD_NUMBER: _ClassVar[int]
    ACK_TYPE_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    PENDING_ACK_METADATA_FIELD_NUMBER: _ClassVar[int]
    pending_ack_op: PendingAckOp
    ack_type: _pulsar_api_pb2.CommandAck.AckType
    txnid_least_bits: int
    txnid_most_bits: int
    pending_ack_metadata: _containers.RepeatedCompositeFieldContainer[PendingAckMetadata]
    def __init__(self, pending_ack_op: _Optional[_Union[PendingAckOp, str]] = ..., ack_type: _Optional[_Union[_pulsar_api_pb2.CommandAck.AckType, str]] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., pending_ack_metadata: _Optional[_Iterable[_Union[PendingAckMetadata, _Mapping]]] = ...) -> None: ...

class BatchedPendingAckMetadataEntry(_message.Message):
    __slots__ = ("pending_ack_logs",)
    PENDING_ACK_LOGS_FIELD_NUMBER: _ClassVar[int]
    pending_ack_logs: _containers.RepeatedCompositeFieldContainer[PendingAckMetadataEntry]
    def __init__(self, pending_ack_logs: _Optional[_Iterable[_Union[PendingAckMetadataEntry, _Mapping]]] = ...) -> None: ...
