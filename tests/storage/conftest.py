"""Fixtures for the storage conformance suite: one ``StorageEnv`` per implementation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .storage_env import StorageEnv


@pytest.fixture(params=["file", "memory"])
async def env(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StorageEnv]:
    e = StorageEnv(request.param, tmp_path)
    yield e
    await e.close()


@pytest.fixture
async def file_env(tmp_path: Path) -> AsyncIterator[StorageEnv]:
    e = StorageEnv("file", tmp_path)
    yield e
    await e.close()
