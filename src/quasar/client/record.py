"""Record classes with typed fields, as in the `pulsar.schema` package.

A ``Record`` subclass declares fields as class attributes (``x = Integer()``); the
class produces the Avro-style record definition that JSON and Avro schemas send to the
broker, and instances hold values by field name::

    class Point(Record):
        x = Integer()
        y = Integer(required=True)

Fields are nullable unless ``required=True`` (the definition then lists the type
alone instead of ``["null", type]``). A field's ``default`` is written into the
definition only with ``required_default=True``: that is what lets a schema with a new
field read data written before it (BACKWARD evolution). A class attribute
``_avro_namespace`` sets the record's Avro namespace. All of this matches how
`pulsar` writes definitions, so both clients register the same schema for the same
class.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Field:
    """A typed record field; subclasses name their Avro type."""

    avro_type: ClassVar[str] = "null"

    def __init__(
        self, default: Any = None, required: bool = False, required_default: bool = False
    ) -> None:
        self.default = default
        self.required = required
        self.required_default = required_default

    def type_definition(self) -> Any:
        return self.avro_type

    def definition(self) -> Any:
        t = self.type_definition()
        return t if self.required else ["null", t]


class Null(Field):
    avro_type = "null"

    def definition(self) -> Any:
        return "null"


class Boolean(Field):
    avro_type = "boolean"


class Integer(Field):
    avro_type = "int"


class Long(Field):
    avro_type = "long"


class Float(Field):
    avro_type = "float"


class Double(Field):
    avro_type = "double"


class Bytes(Field):
    avro_type = "bytes"


class String(Field):
    avro_type = "string"


class Array(Field):
    def __init__(
        self,
        items: Field,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        super().__init__(default, required, required_default)
        self.items = items

    def type_definition(self) -> Any:
        return {"type": "array", "items": self.items.type_definition()}


class Map(Field):
    def __init__(
        self,
        values: Field,
        default: Any = None,
        required: bool = False,
        required_default: bool = False,
    ) -> None:
        super().__init__(default, required, required_default)
        self.values = values

    def type_definition(self) -> Any:
        return {"type": "map", "values": self.values.type_definition()}


class Record:
    """Base class of user records; see the module docstring."""

    _fields: ClassVar[dict[str, Field]] = {}
    _avro_namespace: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Field] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "_fields", {}))
        for name, value in list(vars(cls).items()):
            if isinstance(value, Field):
                fields[name] = value
        cls._fields = fields

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(unknown)}")
        for name, f in self._fields.items():
            setattr(self, name, values.get(name, f.default))

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro-style record definition."""
        definition: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            definition["namespace"] = cls._avro_namespace
        fields = []
        for name, f in cls._fields.items():
            entry: dict[str, Any] = {"name": name}
            if f.required_default:
                entry["default"] = f.default
            entry["type"] = f.definition()
            fields.append(entry)
        definition["fields"] = fields
        return definition

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(map(str, self.to_dict().items())))))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"{type(self).__name__}({inner})"
