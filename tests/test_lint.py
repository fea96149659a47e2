"""ruff runs as a test, so lint failures fail `make test` like any other defect."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.fail("ruff is not installed in the test environment (it is a dev dependency)")
    result = subprocess.run(
        [ruff, "check", "src", "tests", "tools", "benchmarks"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_core_packages() -> None:
    """``mypy --strict`` (pyproject's [tool.mypy]) on the packages the style guide
    names (protocol, storage and transaction), on the transport both connections
    share, and on the broker and what it is built from."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    if mypy is None:
        pytest.fail("mypy is not installed in the test environment (it is a dev dependency)")
    result = subprocess.run(
        [
            mypy, "-p", "quasar.protocol", "-p", "quasar.storage", "-p", "quasar.transaction",
            "-p", "quasar.transport", "-p", "quasar.broker", "-p", "quasar.config",
            "-p", "quasar.config_schema", "-p", "quasar.resources", "-p", "quasar.errors",
            "-p", "quasar.native", "-p", "quasar.metrics", "-p", "quasar.auth",
        ],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
