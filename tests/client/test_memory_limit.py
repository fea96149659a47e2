"""The client-wide memory limit on pending sends (``memory_limit_bytes``).

Unit tests of :class:`MemoryLimit`, then producers against the fake broker, which
holds receipts back so that exactly the bytes in flight are known.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quasar.client import aio, sync
from quasar.client.enums import Result
from quasar.client.exceptions import (
    AlreadyClosed,
    InvalidConfiguration,
    MemoryBufferIsFull,
)
from quasar.client.memory_limit import DEFAULT_MEMORY_LIMIT_BYTES, MemoryLimit
from quasar.client.send_pipe import HANDOFF_SLOTS

from ..fakes.broker import FakeBroker
from .test_fake_broker import wait_for

KIB = 1024


# --- MemoryLimit -----------------------------------------------------------------------


def test_reservations_fit_under_the_limit_and_are_released() -> None:
    mem = MemoryLimit(10)
    assert mem.try_reserve(4) and mem.try_reserve(6)
    assert mem.used == 10
    assert not mem.try_reserve(1)
    assert mem.used == 10  # a refused reservation takes nothing
    mem.release(6)
    assert mem.try_reserve(5) and mem.used == 9


def test_a_message_larger_than_the_limit_goes_alone() -> None:
    mem = MemoryLimit(10)
    assert mem.try_reserve(50)  # nothing reserved: it may go, or it never could
    assert not mem.try_reserve(1)
    mem.release(50)
    assert mem.used == 0


def test_zero_means_no_limit() -> None:
    mem = MemoryLimit(0)
    assert all(mem.try_reserve(1 << 30) for _ in range(10))
    with pytest.raises(InvalidConfiguration):
        MemoryLimit(-1)


async def test_release_wakes_waiters() -> None:
    mem = MemoryLimit(10)
    assert mem.try_reserve(10)
    woken = asyncio.ensure_future(mem.wait_for_room())
    await asyncio.sleep(0)
    assert not woken.done()
    mem.release(10)
    await asyncio.wait_for(woken, 5)


def test_the_default_is_the_cpp_clients() -> None:
    assert DEFAULT_MEMORY_LIMIT_BYTES == 64 * 1024 * 1024
    assert aio.Client("pulsar://127.0.0.1:6650").config.memory.limit == (
        DEFAULT_MEMORY_LIMIT_BYTES
    )
    with pytest.raises(InvalidConfiguration):
        aio.Client("pulsar://127.0.0.1:6650", memory_limit_bytes=-1)


# --- producers -------------------------------------------------------------------------


def _recorder() -> tuple[list[Any], Any]:
    results: list[Any] = []

    def done(err: BaseException | None, mid: Any) -> None:
        results.append(err if err is not None else mid)

    return results, done


@contextlib.asynccontextmanager
async def _limited(
    fake: FakeBroker, limit: int, **producer_options: Any
) -> AsyncIterator[tuple[aio.Client, aio.Producer]]:
    """A client with ``limit`` bytes of memory and a producer on "mem" without a count
    limit; whatever the fake still holds is released before the client closes."""
    client = aio.Client(fake.url, memory_limit_bytes=limit)
    try:
        producer = await client.create_producer(
            "mem", max_pending_messages=0, **producer_options
        )
        yield client, producer
    finally:
        fake.release_held()
        await client.close()


async def test_no_count_limit_and_memory_bound_without_blocking(
    fake: FakeBroker,
) -> None:
    async with _limited(fake, 10 * KIB) as (client, producer):
        fake.hold_receipts = True
        results, done = _recorder()
        for _ in range(10):
            await producer.send_async(b"x" * KIB, done)
        assert client.config.memory.used == 10 * KIB
        # An 11th message does not fit; the count limit (0) does not stop it.
        with pytest.raises(MemoryBufferIsFull):
            await producer.send_async(b"x" * KIB, done)
        assert client.config.memory.used == 10 * KIB
        await wait_for(lambda: len(fake.held) == 10)
        fake.release_held()
        await wait_for(lambda: len(results) == 10)
        assert not any(isinstance(r, BaseException) for r in results)
        assert client.config.memory.used == 0


async def test_a_blocked_send_waits_for_receipts(fake: FakeBroker) -> None:
    async with _limited(fake, 4 * KIB, block_if_queue_full=True) as (client, producer):
        fake.hold_receipts = True
        results, done = _recorder()
        for _ in range(4):
            await producer.send_async(b"y" * KIB, done)
        fifth = asyncio.ensure_future(producer.send_async(b"y" * KIB, done))
        await wait_for(lambda: len(fake.held) == 4)
        assert not fifth.done()  # waits for memory, not for a count slot
        fake.release_held()
        await asyncio.wait_for(fifth, 5)
        await wait_for(lambda: len(fake.held) == 1)
        fake.hold_receipts = False
        fake.release_held()
        await wait_for(lambda: len(results) == 5)
        assert client.config.memory.used == 0


async def test_producers_of_one_client_share_the_limit(fake: FakeBroker) -> None:
    client = aio.Client(fake.url, memory_limit_bytes=3 * KIB)
    try:
        first = await client.create_producer("mem-a")
        second = await client.create_producer("mem-b")
        fake.hold_receipts = True
        _, done = _recorder()
        await first.send_async(b"a" * (2 * KIB), done)
        await second.send_async(b"b" * KIB, done)
        with pytest.raises(MemoryBufferIsFull):
            await second.send_async(b"b", done)
        await wait_for(lambda: len(fake.held) == 2)
    finally:
        fake.release_held()
        await client.close()


async def test_batches_release_what_their_messages_reserved(fake: FakeBroker) -> None:
    async with _limited(
        fake,
        1024 * KIB,
        batching_enabled=True,
        batching_max_messages=7,
        batching_max_publish_delay_ms=1,
    ) as (client, producer):
        fake.hold_receipts = True
        results, done = _recorder()
        for i in range(20):
            await producer.send_async(b"z" * (100 + i), done)
        assert client.config.memory.used == sum(100 + i for i in range(20))
        await wait_for(lambda: len(fake.held) == 3)  # batches of 7, 7 and 6
        fake.release_held()
        await wait_for(lambda: len(results) == 20)
        assert client.config.memory.used == 0


async def test_send_timeouts_return_memory(fake: FakeBroker) -> None:
    async with _limited(
        fake, 2 * KIB, block_if_queue_full=True, send_timeout_millis=100
    ) as (client, producer):
        fake.drop_sends = True
        results, done = _recorder()
        await producer.send_async(b"q" * KIB, done)
        await producer.send_async(b"q" * KIB, done)
        # Waits for memory until the first two time out, then times out itself.
        await asyncio.wait_for(producer.send_async(b"q" * KIB, done), 5)
        await wait_for(lambda: len(results) == 3)
        assert all(type(r).__name__ == "Timeout" for r in results), results
        assert client.config.memory.used == 0


async def test_closing_a_producer_fails_senders_waiting_for_memory(
    fake: FakeBroker,
) -> None:
    async with _limited(
        fake,
        2 * KIB,
        block_if_queue_full=True,
        send_timeout_millis=0,  # no timeout: only the close frees the memory
    ) as (client, producer):
        fake.hold_receipts = True
        results, done = _recorder()
        await producer.send_async(b"q" * KIB, done)
        await producer.send_async(b"q" * KIB, done)
        blocked = asyncio.ensure_future(producer.send_async(b"q" * KIB, done))
        await wait_for(lambda: len(fake.held) == 2)
        assert not blocked.done()
        await producer.close()
        with pytest.raises(AlreadyClosed):
            await asyncio.wait_for(blocked, 5)
        assert [type(r).__name__ for r in results] == ["AlreadyClosed"] * 2
        assert client.config.memory.used == 0


async def test_sync_producer_without_count_limit_blocks_on_memory(
    fake: FakeBroker,
) -> None:
    """The blocking facade with ``max_pending_messages=0``: messages beyond the memory
    limit wait in the facade's hand-off; past its slots the caller itself blocks; all
    of them go once receipts free memory."""
    client = sync.Client(fake.url, memory_limit_bytes=2 * KIB)
    try:
        producer = await asyncio.to_thread(
            client.create_producer,
            "mem",
            max_pending_messages=0,
            block_if_queue_full=True,
        )
        fake.hold_receipts = True
        results: list[Any] = []
        lock = threading.Lock()

        def done(res: Any, mid: Any) -> None:
            with lock:
                results.append(res)

        total = HANDOFF_SLOTS + 3  # 2 fit in memory, HANDOFF_SLOTS wait, 1 blocks
        for _ in range(total - 1):
            await asyncio.to_thread(producer.send_async, b"s" * KIB, done)
        last = asyncio.ensure_future(
            asyncio.to_thread(producer.send_async, b"s" * KIB, done)
        )
        await wait_for(lambda: len(fake.held) == 2)
        await asyncio.sleep(0.05)
        assert not last.done()  # the caller blocks: the hand-off is full
        fake.hold_receipts = False
        fake.release_held()
        await asyncio.wait_for(last, 10)
        await asyncio.to_thread(producer.flush)
        await wait_for(lambda: len(results) == total, 10)
        assert all(r is Result.Ok for r in results), set(map(str, results))
        assert client._aio.config.memory.used == 0
    finally:
        await asyncio.to_thread(client.close)


async def test_partitions_of_a_producer_without_count_limit_have_none(
    fake: FakeBroker,
) -> None:
    fake.topic("persistent://public/default/mem-parts").partitions = 3
    client = aio.Client(fake.url, memory_limit_bytes=1024 * KIB)
    try:
        producer = await client.create_producer(
            "mem-parts",
            max_pending_messages=0,
            max_pending_messages_across_partitions=3,
        )
        fake.hold_receipts = True
        _, done = _recorder()
        # Far beyond the (ignored) across-partitions count of 3: memory is the bound.
        for _ in range(30):
            await producer.send_async(b"p" * KIB, done)
        assert client.config.memory.used == 30 * KIB
        await wait_for(lambda: len(fake.held) == 30)
    finally:
        fake.release_held()
        await client.close()
