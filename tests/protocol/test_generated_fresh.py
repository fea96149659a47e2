"""The checked-in generated modules are exactly what tools/gen_protocol.py produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "src" / "quasar" / "protocol" / "_generated"


def _files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and p.suffix in (".py", ".pyi")
    }


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gen_protocol.py"),
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    fresh = _files(tmp_path)
    checked_in = _files(GENERATED)
    assert sorted(fresh) == sorted(checked_in), (
        "run `make proto` (tools/gen_protocol.py)"
    )
    stale = [name for name in fresh if fresh[name] != checked_in[name]]
    assert not stale, f"stale generated modules {stale}: run `make proto`"


def test_cross_imports_are_package_relative() -> None:
    for path in GENERATED.glob("*_pb2.py*"):
        for line in path.read_text().splitlines():
            if line.startswith("import ") and "_pb2" in line:
                raise AssertionError(f"{path.name}: top-level import {line!r}")
