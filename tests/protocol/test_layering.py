"""quasar.protocol stays sans-IO: it imports only what its layer allows."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "quasar" / "protocol"

ALLOWED_THIRD_PARTY = {"google", "crc32c", "lz4", "zstandard", "cramjam"}
ALLOWED_QUASAR = {"quasar.errors", "quasar.protocol"}
FORBIDDEN_STDLIB = {
    "asyncio",
    "socket",
    "selectors",
    "ssl",
    "threading",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "time",
}


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


def test_protocol_imports_only_its_layer() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, level in _imports(path):
            if level:  # relative: inside quasar.protocol
                continue
            top = module.split(".")[0]
            if top == "__future__":
                continue
            if top == "quasar":
                if not any(
                    module == a or module.startswith(a + ".") for a in ALLOWED_QUASAR
                ):
                    problems.append(f"{path.name}: {module}")
            elif top in sys.stdlib_module_names:
                if top in FORBIDDEN_STDLIB:
                    problems.append(f"{path.name}: {module} (I/O or concurrency)")
            elif top not in ALLOWED_THIRD_PARTY:
                problems.append(f"{path.name}: {module} (third party)")
    assert not problems, problems
