"""Producer access modes: every (mode asked, topic state) pair, as Pulsar decides it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quasar.broker.producer import (
    ACCESS_EXCLUSIVE,
    ACCESS_EXCLUSIVE_WITH_FENCING,
    ACCESS_SHARED,
    ACCESS_WAIT_FOR_EXCLUSIVE,
    Producer,
)
from quasar.broker.producer_access import ProducerAccess
from quasar.errors import PersistenceError, ProducerBusy, ProducerFenced


class _Topic:
    """The topic side of ``ProducerAccess``: its connected producers."""

    def __init__(self) -> None:
        self.access = ProducerAccess()
        self.connected: dict[int, Producer] = {}
        self.fenced: list[Producer] = []
        self.queued = 0

    async def add(self, mode: int, epoch: int | None = None) -> Producer:
        p = Producer(producer_id=len(self.connected), producer_name=f"p{mode}",
                     connection=Any, access_mode=mode, requested_topic_epoch=epoch)
        p.topic_epoch = await self.access.acquire(p, self.connected, self._fence, self._queued)
        self.connected[id(p)] = p
        return p

    def remove(self, p: Producer) -> None:
        del self.connected[id(p)]
        self.access.release(p, len(self.connected))

    def _fence(self, p: Producer) -> None:
        self.fenced.append(p)
        self.remove(p)

    def _queued(self) -> None:
        self.queued += 1


async def test_shared_producers_share_and_have_no_epoch() -> None:
    t = _Topic()
    a = await t.add(ACCESS_SHARED)
    b = await t.add(ACCESS_SHARED)
    assert (a.topic_epoch, b.topic_epoch) == (None, None)


@pytest.mark.parametrize("holder", [ACCESS_EXCLUSIVE, ACCESS_EXCLUSIVE_WITH_FENCING,
                                    ACCESS_WAIT_FOR_EXCLUSIVE])
async def test_shared_is_busy_while_exclusive_is_held(holder: int) -> None:
    t = _Topic()
    await t.add(holder)
    with pytest.raises(ProducerBusy, match="existing exclusive producer"):
        await t.add(ACCESS_SHARED)


async def test_exclusive_is_fenced_by_a_holder_or_shared_producers() -> None:
    t = _Topic()
    holder = await t.add(ACCESS_EXCLUSIVE)
    assert holder.topic_epoch == 0
    with pytest.raises(ProducerFenced, match="existing exclusive producer: p1"):
        await t.add(ACCESS_EXCLUSIVE)
    t.remove(holder)
    await t.add(ACCESS_SHARED)
    with pytest.raises(ProducerFenced, match="existing shared producers"):
        await t.add(ACCESS_EXCLUSIVE)


async def test_each_grant_moves_the_epoch_and_a_stale_epoch_is_fenced() -> None:
    t = _Topic()
    first = await t.add(ACCESS_EXCLUSIVE)
    t.remove(first)
    second = await t.add(ACCESS_EXCLUSIVE)
    assert (first.topic_epoch, second.topic_epoch) == (0, 1)
    t.remove(second)
    # The first producer comes back with the epoch it was granted: someone held the
    # topic since, so it is fenced.
    with pytest.raises(ProducerFenced, match="Current epoch: 1, Producer epoch: 0"):
        await t.add(ACCESS_EXCLUSIVE, epoch=0)
    # The latest holder coming back keeps its epoch.
    again = await t.add(ACCESS_EXCLUSIVE, epoch=1)
    assert again.topic_epoch == 1


async def test_fencing_closes_everyone_and_takes_over() -> None:
    t = _Topic()
    old = await t.add(ACCESS_EXCLUSIVE)
    fencer = await t.add(ACCESS_EXCLUSIVE_WITH_FENCING)
    assert t.fenced == [old] and list(t.connected.values()) == [fencer]
    assert fencer.topic_epoch == 1
    # The fenced producer reconnects with its old epoch and meets the new holder.
    with pytest.raises(ProducerFenced):
        await t.add(ACCESS_EXCLUSIVE, epoch=old.topic_epoch)


async def test_fencing_fails_the_waiters() -> None:
    t = _Topic()
    await t.add(ACCESS_SHARED)
    waiter = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    await asyncio.sleep(0)
    assert t.queued == 1 and t.access.waiting_count == 1
    await t.add(ACCESS_EXCLUSIVE_WITH_FENCING)
    with pytest.raises(ProducerFenced, match="Fenced out"):
        await waiter
    assert t.access.waiting_count == 0


async def test_waiters_get_access_in_order_once_the_topic_is_free() -> None:
    t = _Topic()
    shared = await t.add(ACCESS_SHARED)
    first = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    second = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    await asyncio.sleep(0)
    assert t.queued == 2
    # Shared and Exclusive producers are refused while producers wait.
    with pytest.raises(ProducerBusy):
        await t.add(ACCESS_SHARED)
    with pytest.raises(ProducerFenced):
        await t.add(ACCESS_EXCLUSIVE)
    t.remove(shared)
    holder = await first
    assert holder.topic_epoch == 0 and not second.done()
    t.remove(holder)
    assert (await second).topic_epoch == 1


async def test_a_waiter_that_left_is_skipped() -> None:
    t = _Topic()
    holder = await t.add(ACCESS_EXCLUSIVE)
    gone = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    stays = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    await asyncio.sleep(0)
    gone.cancel()  # its connection closed
    await asyncio.sleep(0)
    t.remove(holder)
    assert (await stays).topic_epoch == 1


async def test_every_new_epoch_is_saved_before_it_is_granted() -> None:
    saved: list[int] = []
    t = _Topic()
    t.access = ProducerAccess(topic_epoch=4, save_epoch=saved.append)  # as recorded
    # A producer fenced before the restart comes back with its old epoch.
    with pytest.raises(ProducerFenced, match="Current epoch: 4, Producer epoch: 3"):
        await t.add(ACCESS_EXCLUSIVE, epoch=3)
    holder = await t.add(ACCESS_EXCLUSIVE, epoch=4)  # the holder comes back: no change
    assert saved == []
    waiter = asyncio.ensure_future(t.add(ACCESS_WAIT_FOR_EXCLUSIVE))
    await asyncio.sleep(0)
    t.remove(holder)
    assert (await waiter).topic_epoch == 5 and saved == [5]


async def test_a_grant_whose_epoch_cannot_be_saved_fails() -> None:
    def broken(epoch: int) -> None:
        raise PersistenceError("metadata store unavailable")

    t = _Topic()
    t.access = ProducerAccess(save_epoch=broken)
    with pytest.raises(PersistenceError):
        await t.add(ACCESS_EXCLUSIVE)
    assert t.access.holder is None and t.access.topic_epoch is None
    await t.add(ACCESS_SHARED)  # the topic is not held
