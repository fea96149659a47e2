"""The optional C extensions: which implementation runs is logged, printed by
``quasar standalone --version`` and exported on ``/metrics``, and a missing one is
never silent."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from quasar.metrics import broker_registry
from quasar.native import log_native_extensions, native_extensions, status_lines
from quasar.protocol import batch
from quasar.storage.file import disk
from quasar.testing.process import BrokerProcess

# Installed as sitecustomize in a child process: both extensions fail to import
# there, as they do where no C compiler was available at install time.
BLOCK_EXTENSIONS = '''
import importlib.abc
import sys

BLOCKED = {"quasar.storage.file._syncio", "quasar.protocol._batchsplit"}


class BlockExtensions(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in BLOCKED:
            raise ImportError(f"{name} blocked by the test")
        return None


sys.meta_path.insert(0, BlockExtensions())
'''


@pytest.fixture
def without_extensions(tmp_path: Path) -> dict[str, str]:
    """The environment of a child process in which neither extension imports."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_EXTENSIONS)
    path = [str(site), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return {"PYTHONPATH": os.pathsep.join(p for p in path if p)}


@pytest.fixture
def syncio_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(disk, "SYNCIO_IMPORT_ERROR", ImportError("no _syncio here"))
    yield


def test_this_build_has_both_extensions() -> None:
    # The test environment compiles them (setup.py); if this fails, the build lost one.
    assert [(e.name, e.active) for e in native_extensions()] == [
        ("_syncio", True), ("_batchsplit", True),
    ]
    assert status_lines() == ["_syncio: native", "_batchsplit: native"]


def test_log_info_when_native(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.native")
    with caplog.at_level(logging.INFO, logger="test.native"):
        log_native_extensions(log)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "native extension quasar.storage.file._syncio is active"),
        (logging.INFO, "native extension quasar.protocol._batchsplit is active"),
    ]


@pytest.mark.usefixtures("syncio_missing")
def test_log_warning_with_the_error_when_a_fallback_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("test.native")
    with caplog.at_level(logging.INFO, logger="test.native"):
        log_native_extensions(log)
    warning, info = caplog.records
    assert warning.levelno == logging.WARNING
    assert "quasar.storage.file._syncio is not available" in warning.getMessage()
    assert "no _syncio here" in warning.getMessage()
    assert info.levelno == logging.INFO


@pytest.mark.usefixtures("syncio_missing")
def test_metric_and_status_follow_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    text = generate_latest(broker_registry()).decode()
    assert 'quasar_native_extension_active{extension="_syncio"} 0.0' in text
    assert 'quasar_native_extension_active{extension="_batchsplit"} 1.0' in text
    monkeypatch.setattr(batch, "BATCHSPLIT_IMPORT_ERROR", ImportError("gone"))
    assert status_lines()[1] == (
        "_batchsplit: Python fallback (batches split by Python code): gone"
    )


def test_version_in_a_process_without_extensions(without_extensions: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "quasar.cli.main", "standalone", "--version"],
        env={**os.environ, **without_extensions},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("quasar ")
    assert lines[1] == (
        "_syncio: Python fallback (one os.pwrite and os.fdatasync call per file): "
        "quasar.storage.file._syncio blocked by the test"
    )
    assert lines[2] == (
        "_batchsplit: Python fallback (batches split by Python code): "
        "quasar.protocol._batchsplit blocked by the test"
    )


def test_version_with_extensions() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "quasar.cli.main", "standalone", "--version"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == ["_syncio: native", "_batchsplit: native"]


def test_broker_without_extensions_says_so(
    tmp_path: Path, without_extensions: dict[str, str]
) -> None:
    """A real broker process: start-up warns once per missing extension, /metrics shows
    0 for both, and it still serves (the fallbacks work)."""
    broker = BrokerProcess(tmp_path / "data", extra_env=without_extensions).start()
    try:
        with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as r:
            text = r.read().decode()
    finally:
        assert broker.stop() == 0, broker.read_log()
    log = broker.read_log()
    warnings = [line for line in log.splitlines()
                if " WARNING " in line and "native extension" in line]
    assert len(warnings) == 2, log
    assert "quasar.storage.file._syncio is not available" in warnings[0]
    assert "blocked by the test" in warnings[0]
    assert "quasar.protocol._batchsplit is not available" in warnings[1]
    assert 'quasar_native_extension_active{extension="_syncio"} 0.0' in text
    assert 'quasar_native_extension_active{extension="_batchsplit"} 0.0' in text
