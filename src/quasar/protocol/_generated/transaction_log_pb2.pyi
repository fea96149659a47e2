from . import pulsar_api_pb2 as _pulsar_api_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TxnStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPEN: _ClassVar[TxnStatus]
    COMMITTING: _ClassVar[TxnStatus]
    COMMITTED: _ClassVar[TxnStatus]
    ABORTING: _ClassVar[TxnStatus]
    ABORTED: _ClassVar[TxnStatus]
OPEN: TxnStatus
COMMITTING: TxnStatus
COMMITTED: TxnStatus
ABORTING: TxnStatus
ABORTED: TxnStatus

class TransactionMetadataEntry(_message.Message):
    __slots__ = ("metadata_op", "txnid_least_bits", "txnid_most_bits", "expected_status", "new_status", "partitions", "subscriptions", "timeout_ms", "start_time", "last_modification_time", "max_local_txn_id", "owner", "clientName")
    class TransactionMetadataOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NEW: _ClassVar[TransactionMetadataEntry.TransactionMetadataOp]
        ADD_PARTITION: _ClassVar[TransactionMetadataEntry.TransactionMetadataOp]
        ADD_SUBSCRIPTION: _ClassVar[TransactionMetadataEntry.TransactionMetadataOp]
        UPDATE: _ClassVar[TransactionMetadataEntry.TransactionMetadataOp]
    NEW: TransactionMetadataEntry.TransactionMetadataOp
    ADD_PARTITION: TransactionMetadataEntry.TransactionMetadataOp
    ADD_SUBSCRIPTION: TransactionMetadataEntry.TransactionMetadataOp
    UPDATE: TransactionMetadataEntry.TransactionMetadataOp
    METADATA_OP_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEW_STATUS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_MODIFICATION_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_LOCAL_TXN_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    CLIENTNAME_FIELD_NUMBER: _ClassVar[int]
    metadata_op: TransactionMetadataEntry.TransactionMetadataOp
    txnid_least_bits: int
    txnid_most_bits: int
    expected_status: TxnStatus
    new_status: TxnStatus
    partitions: _containers.RepeatedScalarFieldContainer[str]
    subscriptions: _containers.RepeatedCompositeFieldContainer[_pulsar_api_pb2.Subscription]
    timeout_ms: int
    start_time: int
    last_modification_time: int
    max_local_txn_id: int
    owner: str
    clientName: str
    def __init__(self, metadata_op: _Optional[_Union[TransactionMetadataEntry.TransactionMetadataOp, str]] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., expected_status: _Optional[_Union[TxnStatus, str]] = ..., new_status: _Optional[_Union[TxnStatus, str]] = ..., partitions: _Optional[_Iterable[str]] = ..., subscriptions: _Optional[_Iterable[_Union[_pulsar_api_pb2.Subscription, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., start_time: _Optional[int] = ..., last_modification_time: _Optional[int] = ..., max_local_txn_id: _Optional[int] = ..., owner: _Optional[str] = ..., clientName: _Optional[str] = ...) -> None: ...

class BatchedTransactionMetadataEntry(_message.Message):
    __slots__ = ("transaction_logs",)
    TRANSACTION_LOGS_FIELD_NUMBER: _ClassVar[int]
    transaction_logs: _containers.RepeatedCompositeFieldContainer[TransactionMetadataEntry]
    def __init__(self, transaction_logs: _Optional[_Iterable[_Union[TransactionMetadataEntry, _Mapping]]] = ...) -> None: ...
