"""The import rules of docs/ARCHITECTURE.md, checked on the source (an AST walk).

* ``quasar.protocol`` is sans-IO: no asyncio, sockets or threads, and no quasar
  package but ``quasar.errors``.
* ``quasar.storage`` never imports the protocol, broker, server, transaction, admin or
  client packages.
* ``quasar.transaction`` never imports broker, server, admin or client.
* ``quasar.broker`` does no socket or HTTP I/O (``socket``, ``aiohttp``).
* ``quasar.resources`` (tenant/namespace metadata) sits below the broker and admin
  API and does no I/O but the metadata store's.
* ``quasar.cli`` and ``quasar.perf`` talk to a broker only over its protocols: they
  import neither the broker nor the admin server (nor, for perf, the server).
* Only ``server``, ``admin``, ``metrics``, ``cli``, ``client``, ``perf`` and
  ``testing`` touch sockets or HTTP.
* ``pyspark_quasar`` uses only ``quasar.client`` and ``quasar.protocol``.
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
    "quasar.resources": (
        "quasar.broker", "quasar.server", "quasar.admin", "quasar.client", "quasar.cli",
        "quasar.perf", "socket", "aiohttp",
    ),
    "quasar.cli": ("quasar.broker", "quasar.admin", "quasar.resources"),
    "quasar.perf": ("quasar.broker", "quasar.server", "quasar.admin", "quasar.resources"),
    "quasar.errors": ("quasar.",),
}
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


def test_the_check_can_fail(tmp_path: Path) -> None:
    # Guard against a checker that passes vacuously.
    sample = tmp_path / "m.py"
    sample.write_text("import socket\nfrom quasar.broker import topic\n")
    assert _imports(sample) == ["socket", "quasar.broker"]
