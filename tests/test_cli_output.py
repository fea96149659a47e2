"""``quasar admin`` output: generic tables from JSON answers, and JSON unchanged."""

from __future__ import annotations

import json

import pytest

from quasar.cli.output import CELL_WIDTH_MAX, Table, format_table, render


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_names_print_one_per_line() -> None:
    assert render(["persistent://a/b/c", "persistent://a/b/d"], "table") == (
        "persistent://a/b/c\npersistent://a/b/d"
    )


def test_objects_print_as_key_value_rows_with_dotted_nesting() -> None:
    stats = {"msgRateIn": 1.5, "subscriptions": {"s": {"msgBacklog": 3, "consumers": []}}}
    assert lines(render(stats, "table")) == [
        ["KEY", "VALUE"],
        ["msgRateIn", "1.5"],
        ["subscriptions.s.consumers", "[]"],
        ["subscriptions.s.msgBacklog", "3"],
    ]


def test_lists_of_objects_print_one_row_each_with_every_column() -> None:
    rows = [{"txnId": "(0,1)", "status": "OPEN"}, {"txnId": "(0,2)", "owner": "etl"}]
    assert lines(render(rows, "table")) == [
        ["txnId", "status", "owner"],
        ["(0,1)", "OPEN"],
        ["(0,2)", "etl"],
    ]
    # Columns stay aligned: each cell starts where its header does.
    text = render(rows, "table").splitlines()
    assert text[2].index("etl") == text[0].index("owner")


def test_json_is_the_answer_unchanged() -> None:
    answer = {"b": [1, {"c": None}], "a": "x"}
    assert json.loads(render(answer, "json")) == answer


def test_long_cells_are_cut_in_tables_only() -> None:
    answer = {"k": "v" * 500}
    assert len(lines(render(answer, "table"))[1][1]) == CELL_WIDTH_MAX
    assert json.loads(render(answer, "json"))["k"] == "v" * 500


def test_a_command_may_shape_its_own_table() -> None:
    def shape(result: dict[str, int]) -> Table:
        return Table(["NAME", "N"], [[k, v] for k, v in result.items()])

    assert lines(render({"a": 1}, "table", shape)) == [["NAME", "N"], ["a", "1"]]
    assert format_table(Table([], [])) == ""


def test_nothing_prints_nothing_and_unknown_formats_are_refused() -> None:
    assert render(None, "table") == ""
    with pytest.raises(ValueError, match="unknown output format"):
        render({}, "yaml")
