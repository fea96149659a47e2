"""Fixtures for the pending-ack tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .helpers import PaEnv


@pytest.fixture
async def pa() -> AsyncIterator[PaEnv]:
    """A Ready handle on a 20-entry topic, in memory."""
    env = PaEnv()
    await env.start()
    yield env
    await env.close()
