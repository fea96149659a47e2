"""How ``quasar admin`` prints an answer: a human table by default, JSON on request.

``--output table`` (the default) turns any JSON answer into text an operator can read
at a glance:

* a list of strings (topic or tenant names) prints one per line;
* a list of objects (consumers, transactions) prints as a table, one row per object,
  with a column for every key any of them has;
* an object prints as ``KEY  VALUE`` rows; nested objects are flattened into dotted
  keys (``subscriptions.orders.msgBacklog``), so a topic's stats read as one list of
  figures;
* a plain value prints as it is.

``--output json`` prints the admin API's JSON unchanged (indented, keys sorted), for
scripts and ``jq``. A command may give its own table (``Table``) when a generic one
would bury what matters, such as the rows of a listing of open transactions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

OUTPUT_FORMATS = ("table", "json")

# Cells longer than this are cut in tables (JSON output is never cut): one huge
# property value should not push every other column off the screen.
CELL_WIDTH_MAX = 80


class Table(NamedTuple):
    """Rows under named columns."""

    columns: list[str]
    rows: list[list[Any]]


Shape = Callable[[Any], Table]


def render(result: Any, output: str, shape: Shape | None = None) -> str:
    """``result`` as text in ``output`` format ("table" or "json"); "" for nothing."""
    if result is None:
        return ""
    if output == "json":
        return json.dumps(result, indent=2, sort_keys=True)
    if output != "table":
        raise ValueError(f"unknown output format {output!r}: one of {OUTPUT_FORMATS}")
    if shape is not None:
        return format_table(shape(result))
    return format_table(table_of(result)) if _tabular(result) else _scalar(result)


def _tabular(result: Any) -> bool:
    return isinstance(result, (Mapping, list))


def table_of(result: Any) -> Table:
    """The generic table of a JSON value (see the module docstring)."""
    if isinstance(result, list):
        if all(isinstance(item, Mapping) for item in result) and result:
            columns = _union_keys(result)
            rows = [[_cell(item.get(c)) for c in columns] for item in result]
            return Table(columns, rows)
        return Table([], [[_scalar(item)] for item in result])
    if isinstance(result, Mapping):
        return Table(["KEY", "VALUE"], [[k, v] for k, v in flatten(result)])
    return Table([], [[_scalar(result)]])


def flatten(value: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    """``(dotted key, printed value)`` of every leaf of ``value``, in key order."""
    for key in sorted(value, key=str):
        item = value[key]
        name = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            yield from flatten(item, name + ".")
        elif isinstance(item, list) and item and all(isinstance(i, Mapping) for i in item):
            for index, element in enumerate(item):
                yield from flatten(element, f"{name}.{index}.")
        else:
            yield name, _cell(item)


def _union_keys(items: list[Any]) -> list[str]:
    columns: dict[str, None] = {}
    for item in items:
        columns.update(dict.fromkeys(item))
    return list(columns)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _cell(value: Any) -> str:
    text = "" if value is None else _scalar(value)
    text = text.replace("\n", " ")
    if len(text) > CELL_WIDTH_MAX:
        return text[: CELL_WIDTH_MAX - 1] + "…"
    return text


def format_table(table: Table) -> str:
    """Columns padded to their widest cell; a header line when columns are named."""
    rows = [[_cell(c) for c in row] for row in table.rows]
    lines = [table.columns] if table.columns else []
    lines += rows
    if not lines:
        return ""
    width = max(map(len, lines))
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(width)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()
        for line in lines
    )
