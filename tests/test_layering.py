"""The import rules of docs/ARCHITECTURE.md, checked on the source (an AST walk).

* ``quasar.protocol`` is sans-IO: no asyncio, sockets or threads, and no quasar
  package but ``quasar.errors``.
* ``quasar.storage`` never imports the protocol, broker, server, transaction, admin or
  client packages.
* ``quasar.transaction`` never imports broker, server, admin or client.
* ``quasar.broker`` does no socket or HTTP I/O (``socket``, ``aiohttp``).
* Only ``server``, ``admin``, ``metrics``, ``cli``, ``client``, ``perf`` and
  ``testing`` touch sockets or HTTP.
* ``pyspark_quasar`` uses only ``quasar.client`` and ``quasar.protocol``.
* ``quasar.transport`` (the connections' shared writer and keep-alive) sits above
  ``quasar.protocol`` and below ``quasar.client`` and ``quasar.server``.
* The server's command handlers see their connection only through
  ``quasar.server.context``: they never import ``quasar.server.connection``, and
  neither they nor the connection import inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "quasar.protocol": (
        "asyncio", "socket", "threading", "selectors",
        "quasar.storage", "quasar.broker", "quasar.server", "quasar.transaction",
        "quasar.client", "quasar.admin",
    ),
    "quasar.storage": (
        "quasar.protocol", "quasar.broker", "quasar.server", "quasar.transaction",
        "quasar.admin", "quasar.client", "socket", "aiohttp",
    ),
    "quasar.transaction": (
        "quasar.broker", "quasar.server", "quasar.admin", "quasar.client", "socket",
        "aiohttp",
    ),
    "quasar.broker": ("quasar.server", "quasar.admin", "quasar.client", "socket", "aiohttp"),
    "quasar.errors": ("quasar.",),
    "quasar.transport": (
        "quasar.client", "quasar.server", "quasar.broker", "quasar.storage",
        "quasar.transaction", "quasar.admin", "socket", "aiohttp",
    ),
}
SERVER_HANDLERS = (
    "producer_commands", "consumer_commands", "lookup_commands", "txn_commands",
    "context", "replies", "wire",
)
PYSPARK_ALLOWED = ("quasar.client", "quasar.protocol", "quasar.errors")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _module_files(package: str) -> list[Path]:
    base = SRC.joinpath(*package.split("."))
    if base.with_suffix(".py").exists():
        return [base.with_suffix(".py")]
    return sorted(p for p in base.rglob("*.py") if "_generated" not in p.parts)


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in _module_files(package):
        for name in _imports(path):
            for f in forbidden:
                if name == f.rstrip(".") or name.startswith(f if f.endswith(".") else f + "."):
                    bad.append(f"{path.relative_to(SRC)} imports {name}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layering(package: str) -> None:
    assert _violations(package, FORBIDDEN[package]) == []


def test_pyspark_connector_uses_only_client_and_protocol() -> None:
    bad = []
    for path in _module_files("pyspark_quasar"):
        for name in _imports(path):
            if name.startswith("quasar") and not name.startswith(PYSPARK_ALLOWED):
                bad.append(f"{path.relative_to(SRC)} imports {name}")
    assert bad == []


def _server_imports(path: Path) -> tuple[list[str], list[str]]:
    """The modules ``path`` imports (relative ones resolved within quasar.server), and
    those imported inside a function."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    in_functions: list[str] = []
    for node in ast.walk(tree):
        found: list[str] = []
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1:
                base = f"quasar.server.{base}" if base else "quasar.server"
            found = [base] + [f"{base}.{a.name}" for a in node.names]
        names.extend(found)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    in_functions.append(f"{path.name}:{inner.lineno}")
    return names, in_functions


@pytest.mark.parametrize("module", SERVER_HANDLERS)
def test_server_handlers_do_not_import_the_connection(module: str) -> None:
    names, _ = _server_imports(SRC / "quasar" / "server" / f"{module}.py")
    assert [n for n in names if n.startswith("quasar.server.connection")] == []


def test_no_connection_or_handler_module_imports_inside_a_function() -> None:
    bad = []
    for module in (*SERVER_HANDLERS, "connection"):
        bad.extend(_server_imports(SRC / "quasar" / "server" / f"{module}.py")[1])
    assert bad == []


def test_the_check_can_fail(tmp_path: Path) -> None:
    # Guard against a checker that passes vacuously.
    sample = tmp_path / "m.py"
    sample.write_text("import socket\nfrom quasar.broker import topic\n")
    assert _imports(sample) == ["socket", "quasar.broker"]
    handler = tmp_path / "h.py"
    handler.write_text("def f():\n    from .connection import ServerConnection\n")
    names, in_functions = _server_imports(handler)
    assert "quasar.server.connection" in names and in_functions == ["h.py:2"]
