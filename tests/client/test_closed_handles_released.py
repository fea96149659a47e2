"""A long-lived client that creates and closes many producers and readers does not keep
them: closed ones are released (garbage-collectable) while the client stays open, and
the ones still open are closed with the client."""

from __future__ import annotations

import asyncio
import gc
import weakref

from quasar.client import aio


def test_closed_producers_and_readers_are_released(service_url: str, topic: str) -> None:
    async def run() -> None:
        client = aio.Client(service_url, operation_timeout_seconds=15)
        try:
            kept = await client.create_producer(topic)
            released: list[weakref.ref[object]] = []
            for i in range(150):
                if i % 2:
                    handle = await client.create_producer(topic)
                else:
                    handle = await client.create_reader(topic, aio.MessageId.earliest)
                released.append(weakref.ref(handle._impl))
                await handle.close()
                del handle
            gc.collect()
            alive = sum(1 for ref in released if ref() is not None)
            # Pruning runs as handles are added: at most the ones since the last prune
            # can still be held.
            assert alive < 64, f"{alive} of 150 closed handles still held"
            await kept.send(b"still open")
        finally:
            await client.close()
        assert kept._impl.state.name == "CLOSED"

    asyncio.run(run())
