"""``ProtobufNativeSchema``: protobuf messages in their own binary encoding, with the
definition `pulsar` (and Pulsar's Java client) registers: a JSON object with the
message's ``fileDescriptorSet`` (base64), ``rootMessageTypeName`` and
``rootFileDescriptorName``."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import Message

from quasar.client.schema_basic import Schema

__all__ = ["SCHEMA_TYPE_PROTOBUF_NATIVE", "ProtobufNativeSchema"]

SCHEMA_TYPE_PROTOBUF_NATIVE = 20


def _file_descriptor_set(file: Any) -> descriptor_pb2.FileDescriptorSet:
    """The file and every file it imports, dependencies first."""
    out = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(f: Any) -> None:
        if f.name in seen:
            return
        seen.add(f.name)
        for dependency in f.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        f.CopyToProto(proto)
        out.file.append(proto)

    add(file)
    return out


class ProtobufNativeSchema(Schema):
    """Instances of a generated protobuf message class.

    Raises:
        TypeError: ``record_cls`` is not a protobuf message class.
    """

    schema_type = SCHEMA_TYPE_PROTOBUF_NATIVE
    name = "PROTOBUF_NATIVE"

    def __init__(self, record_cls: type[Message]) -> None:
        if not (isinstance(record_cls, type) and issubclass(record_cls, Message)):
            raise TypeError(f"record_cls must be a protobuf Message subclass, got {record_cls!r}")
        self._record_cls = record_cls
        descriptor = record_cls.DESCRIPTOR
        files = _file_descriptor_set(descriptor.file).SerializeToString()
        self._definition = {
            "fileDescriptorSet": base64.b64encode(files).decode(),
            "rootMessageTypeName": descriptor.full_name,
            "rootFileDescriptorName": descriptor.file.name,
        }

    def definition(self) -> bytes:
        return json.dumps(self._definition, indent=True).encode()

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, self._record_cls):
            raise TypeError(
                f"ProtobufNativeSchema({self._record_cls.__name__}) cannot encode "
                f"{type(obj).__name__}"
            )
        return bytes(obj.SerializeToString())

    def decode(self, data: bytes) -> Any:
        return self._record_cls.FromString(data)

    def __repr__(self) -> str:
        return f"ProtobufNativeSchema({self._record_cls.__name__})"
