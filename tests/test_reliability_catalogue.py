"""The failure-scenario catalogue in docs/reliability.md stays true to the tests.

Every ``tests/<file>.py::<name>`` the catalogue section names must be a test that
exists (the file, and a test function of that name, or ``Class::method``), and every
entry of the catalogue must have its row, in the catalogue's order. A renamed or
deleted test, or a dropped row, fails here instead of leaving the page wrong.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reliability.md"
HEADING = "## The failure-scenario catalogue"

TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::([\w:]+)`")
ROW_ID = re.compile(r"^\| \*\*([^*]+)\*\*", re.MULTILINE)

ANCHORS = [f"A{i}" for i in range(1, 18)]
BUGS = [
    "#19629",
    "#19744 (PIP-254)",
    "#14370",
    "#19200 / #19201 / #18923",
    "#12705, #14810, #10146, #8723",
    "#12382 / #12386, #14192, #26234",
    "#18833 / #18971, #17040 / #17051",
    "#14286, #22944 (#19169)",
    "#16042 (PIP-178), #16913 (PIP-196)",
    "#19814, #22610, KoP #1283",
    "#15423 / #15424 (PIP-163), #12312",
    "#14327, #19581",
    "#14371, #25107",
    "#19449",
    "#10306",
    "#13767, #20927 / #21274, #21760, #18886, #14781, #16248",
    "#9722, #15530, #15524",
    "#15157 (PIP-154)",
    "#24898 (#23027)",
    "#19467, #19976, #22978, #26644, #18716 / #22744",
]
LESSONS = [str(i) for i in range(1, 7)]
INVARIANTS = [
    f"INV-{n}"
    for n in ("ATOM", "G1A", "DUR", "EO", "ORD", "TERM", "LIVE", "FENCE", "REC")
]
SCENARIOS = [str(i) for i in range(1, 46)]
SECURITY = [f"S{i}" for i in range(1, 16)]
CATALOGUE_ORDER = ANCHORS + BUGS + LESSONS + INVARIANTS + SCENARIOS + SECURITY


def catalogue_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert HEADING in text, f"{PAGE} has no '{HEADING}' section"
    section = text.split(HEADING, 1)[1]
    following = re.search(r"^## ", section, re.MULTILINE)
    return section if following is None else section[: following.start()]


@cache
def defined_tests(path: Path) -> frozenset[str]:
    """``name`` for module-level tests and ``Class::name`` for methods."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
    return frozenset(n for n in names if n.split("::")[-1].startswith("test"))


def test_every_named_test_exists() -> None:
    refs = TEST_REF.findall(catalogue_section())
    assert len(refs) > 100, "the catalogue names far fewer tests than it should"
    missing = []
    for file, name in refs:
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file} (no such file)")
        elif name not in defined_tests(path):
            missing.append(f"{file}::{name} (no such test)")
    assert not missing, (
        "docs/reliability.md names tests that do not exist:\n" + "\n".join(missing)
    )


def test_every_entry_has_its_row_in_the_catalogues_order() -> None:
    rows = [row.strip() for row in ROW_ID.findall(catalogue_section())]
    assert rows == CATALOGUE_ORDER, (
        "missing: "
        + ", ".join(i for i in CATALOGUE_ORDER if i not in rows)
        + "; unexpected: "
        + ", ".join(r for r in rows if r not in CATALOGUE_ORDER)
    )


def test_every_row_names_a_test_or_a_reason() -> None:
    for line in catalogue_section().splitlines():
        if ROW_ID.match(line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert len(cells) == 3, f"a row needs three cells: {line}"
            assert TEST_REF.search(cells[2]) or "does not apply" in line, line
