"""Fixtures for the transaction tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .helpers import TcEnv


@pytest.fixture
async def env() -> AsyncIterator[TcEnv]:
    e = TcEnv()
    yield e
    await e.close()
