"""``quasar.storage`` must not import the layers above it."""

from __future__ import annotations

import ast
from pathlib import Path

import quasar.storage

FORBIDDEN = ("quasar.protocol", "quasar.broker", "quasar.server", "quasar.transaction")


def test_storage_imports_no_upper_layer() -> None:
    root = Path(quasar.storage.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.startswith(FORBIDDEN):
                    offenders.append(f"{path.relative_to(root)}: {name}")
    assert offenders == []
