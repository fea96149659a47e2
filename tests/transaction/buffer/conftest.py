"""Fixtures for the transaction-buffer tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .helpers import TbEnv


@pytest.fixture
async def env() -> AsyncIterator[TbEnv]:
    e = TbEnv()
    yield e
    await e.close()
