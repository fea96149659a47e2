from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class MarkerType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_MARKER: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_SNAPSHOT: _ClassVar[MarkerType]
    REPLICATED_SUBSCRIPTION_UPDATE: _ClassVar[MarkerType]
    TXN_COMMITTING: _ClassVar[MarkerType]
    TXN_COMMIT: _ClassVar[MarkerType]
    TXN_ABORT: _ClassVar[MarkerType]
UNKNOWN_MARKER: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: MarkerType
REPLICATED_SUBSCRIPTION_SNAPSHOT: MarkerType
REPLICATED_SUBSCRIPTION_UPDATE: MarkerType
TXN_COMMITTING: MarkerType
TXN_COMMIT: MarkerType
TXN_ABORT: MarkerType
