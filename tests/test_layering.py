"""The import rules of docs/ARCHITECTURE.md ("Layers"), checked on the source.

* The layers, the forbidden imports (the protocol is sans-IO, clients never import the
  broker side, only the edges touch sockets) and "no cycles between sibling modules"
  are ``import-linter`` contracts in ``pyproject.toml``; ``lint-imports`` checks them.
* No file takes part in an import cycle at all, parent packages included: a module
  that imports its own package's ``__init__`` while that ``__init__`` imports it is
  a cycle too. grimp, the graph ``import-linter`` builds on, gives the edges.
* The protocol, which other projects could embed, depends on no third-party package
  but its codecs' (an allow-list, which a forbidden contract cannot say).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import grimp
import pytest

from quasar.native import native_extensions

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("quasar", "pyspark_quasar")


def _lint_imports(cwd: Path, src: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports is not installed in the test environment (import-linter)")
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_import_contracts_hold() -> None:
    result = _lint_imports(ROOT, ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_import_contracts_can_fail(tmp_path: Path) -> None:
    """The same tool on a tiny package that breaks a layer and has a sibling cycle."""
    pkg = tmp_path / "src" / "layered"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("from layered import high\n")
    (pkg / "high.py").write_text("from layered import low\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = layered\n\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\n"
        "layers =\n    layered.high\n    layered.low\n\n"
        "[importlinter:contract:acyclic]\nname = acyclic\ntype = acyclic_siblings\n"
        "ancestors =\n    layered\n"
    )
    result = _lint_imports(tmp_path, tmp_path / "src")
    assert result.returncode != 0
    assert result.stdout.count("BROKEN") == 2, result.stdout


def _graph(include_external_packages: bool = False) -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT / "src"))
    try:
        return grimp.build_graph(
            *PACKAGES, cache_dir=None, include_external_packages=include_external_packages
        )
    finally:
        sys.path.remove(str(ROOT / "src"))


PROTOCOL_THIRD_PARTY = {"google", "crc32c", "lz4", "zstandard", "cramjam"}


def test_protocol_depends_only_on_its_codecs() -> None:
    graph = _graph(include_external_packages=True)
    external = {
        imported.split(".")[0]
        for module in graph.find_children("quasar.protocol") | {"quasar.protocol"}
        for descendant in {module} | graph.find_descendants(module)
        for imported in graph.find_modules_directly_imported_by(descendant)
        if imported.split(".")[0] not in PACKAGES
    }
    third_party = external - set(sys.stdlib_module_names) - {"__future__"}
    assert third_party <= PROTOCOL_THIRD_PARTY, third_party - PROTOCOL_THIRD_PARTY


def _is_extension_import(graph: grimp.ImportGraph, importer: str, imported: str) -> bool:
    """An import of a compiled extension, which grimp (reading .py files only) books
    against the extension's package: not an import of that package's ``__init__``."""
    names = {
        ext.module.rsplit(".", 1)[1]
        for ext in native_extensions()
        if ext.module.rsplit(".", 1)[0] == imported
    }
    details = graph.get_import_details(importer=importer, imported=imported)
    return bool(names) and bool(details) and all(
        any(name in d["line_contents"] for name in names) for d in details
    )


def _edges(graph: grimp.ImportGraph) -> dict[str, list[str]]:
    return {
        module: sorted(
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if imported in graph.modules
            and not _is_extension_import(graph, module, imported)
        )
        for module in sorted(graph.modules)
        if module.split(".")[0] in PACKAGES
    }


def strongly_connected(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: every group of two or more nodes that reach
    each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycle_between_files() -> None:
    assert strongly_connected(_edges(_graph())) == []


def test_cycle_finder_finds_cycles() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": ["e"]}
    assert sorted(strongly_connected(edges)) == [["a", "b", "c"], ["e", "e2"]]
    assert strongly_connected({"a": ["b"], "b": []}) == []
