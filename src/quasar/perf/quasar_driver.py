"""Workers on quasar's own client: ``quasar.client.aio`` on one event loop.

The asyncio core is used directly rather than the synchronous facade, which would add
a thread hop per call; uvloop runs the loop when it is installed, as in the broker.
All producers (or consumers) of a run share one client, hence one connection.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import time
from collections.abc import Coroutine
from typing import Any

from quasar.client import aio
from quasar.client.enums import ConsumerType, InitialPosition
from quasar.errors import AlreadyClosed, QuasarError, Timeout
from quasar.perf.context import RunContext, make_payload
from quasar.perf.options import ConsumeOptions, ProduceOptions, producer_settings
from quasar.perf.recorder import CLAIM_CHUNK, Recorder
from quasar.perf.schedule import RateSchedule, split_rate

__all__ = ["run_consume", "run_produce"]

# uvloop and asyncio timers have 1 ms resolution: a shorter sleep spins instead.
MIN_SLEEP_S = 0.001
RECEIVE_POLL_MS = 200
CLOSE_TIMEOUT_S = 10.0

_SUBSCRIPTION_TYPES = {
    "Exclusive": ConsumerType.Exclusive,
    "Shared": ConsumerType.Shared,
    "Failover": ConsumerType.Failover,
    "Key_Shared": ConsumerType.KeyShared,
}


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:  # optional: plain asyncio works, only slower
        asyncio.run(coro)
        return
    uvloop.run(coro)


def run_produce(opts: ProduceOptions, ctx: RunContext) -> None:
    _run(_produce(opts, ctx))


def run_consume(opts: ConsumeOptions, ctx: RunContext) -> None:
    _run(_consume(opts, ctx))


def _stop_event(ctx: RunContext) -> asyncio.Event:
    """An asyncio event set when the run stops (from any thread), and Ctrl-C stops it."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()

    def wake() -> None:
        if not loop.is_closed():  # a stop after the run's loop is gone needs no wake-up
            loop.call_soon_threadsafe(event.set)

    ctx.control.on_stop(wake)
    try:
        loop.add_signal_handler(signal.SIGINT, ctx.control.stop, "interrupted")
    except (RuntimeError, ValueError):  # not the main thread
        pass
    return event


async def _finish(tasks: list[asyncio.Task[None]], grace_s: float) -> None:
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=grace_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _close(client: aio.Client) -> None:
    try:
        await asyncio.wait_for(client.close(), CLOSE_TIMEOUT_S)
    except (TimeoutError, QuasarError):
        await client.shutdown()


async def _produce(opts: ProduceOptions, ctx: RunContext) -> None:
    stopped = _stop_event(ctx)
    client = aio.Client(
        opts.service_url, operation_timeout_seconds=opts.operation_timeout_s
    )
    try:
        producers = []
        for topic in opts.topics:
            for _ in range(opts.num_producers):
                producers.append(
                    await client.create_producer(
                        topic,
                        **producer_settings(opts),
                    )
                )
        ctx.ready()
        payload = make_payload(opts.size)
        sent = [0] * len(producers)
        recorder = ctx.recorder
        ctx.pending = lambda: sum(sent) - recorder.completed()
        start = time.monotonic()
        ctx.reporter.begin(start)
        loop = asyncio.get_running_loop()
        rates = split_rate(opts.rate, len(producers))
        tasks = [
            loop.create_task(
                _send_loop(
                    p, payload, rates[i], start, i / len(producers), ctx, sent, i
                )
            )
            for i, p in enumerate(producers)
        ]
        await stopped.wait()
        await _finish(tasks, opts.send_timeout_ms / 1000.0 + 1.0)
        # Everything sent is either receipted or failed by the send timeout.
        try:
            await asyncio.wait_for(
                asyncio.gather(*(p.flush() for p in producers), return_exceptions=True),
                opts.send_timeout_ms / 1000.0 + 1.0,
            )
        except TimeoutError:
            pass
        ctx.cpu_end = time.process_time()
        ctx.info["sent"] = sum(sent)
    finally:
        await _close(client)


async def _send_loop(
    producer: aio.Producer,
    payload: bytes,
    rate: float,
    start: float,
    phase: float,
    ctx: RunContext,
    sent: list[int],
    index: int,
) -> None:
    recorder, control = ctx.recorder, ctx.control
    size = len(payload)
    clock = time.monotonic
    error = recorder.error
    add = SampleBuffer(recorder, asyncio.get_running_loop()).add

    def on_done(due: float, err: BaseException | None, _mid: Any) -> None:
        now = clock()
        if err is None:
            add((now - due) * 1e6, size)
        else:
            error()

    send_async = producer.send_async
    partial = functools.partial
    schedule = RateSchedule(rate, start, phase) if rate > 0 else None
    count = 0
    for _ in control.grants(1 if schedule is not None else CLAIM_CHUNK):
        if schedule is None:
            due = clock()
        else:
            due = schedule.next_due()
            now = clock()
            if due > now:
                await asyncio.sleep(max(due - now, MIN_SLEEP_S))
                now = clock()
            recorder.record_lag((now - due) * 1e6)
        count += 1
        sent[index] = count
        try:
            await send_async(payload, partial(on_done, due))
        except AlreadyClosed:
            error()
            return
        except QuasarError:
            error()


class SampleBuffer:
    """Latencies of messages completed on the event loop, handed to the recorder
    once per loop iteration: a receipt completes a whole batch of messages in one
    go, and one recorder call (one lock round) for all of them costs less than one
    each. Every message is still its own sample."""

    __slots__ = ("_recorder", "_loop", "_latencies", "_nbytes", "_first")

    def __init__(self, recorder: Recorder, loop: asyncio.AbstractEventLoop) -> None:
        self._recorder = recorder
        self._loop = loop
        self._latencies: list[float] = []
        self._nbytes = 0
        self._first = 0.0

    def add(self, latency_us: float, nbytes: int) -> None:
        """One completed message."""
        latencies = self._latencies
        if not latencies:
            self._first = time.monotonic()
            self._loop.call_soon(self.flush)
        latencies.append(latency_us)
        self._nbytes += nbytes

    def flush(self) -> None:
        """Hand the samples so far to the recorder (runs once per loop iteration)."""
        latencies, self._latencies = self._latencies, []
        nbytes, self._nbytes = self._nbytes, 0
        self._recorder.record_many(latencies, nbytes, self._first, time.monotonic())


async def _consume(opts: ConsumeOptions, ctx: RunContext) -> None:
    if opts.batch_receive > 0:
        raise ValueError(
            "--batch-receive needs the official client (--client pulsar): "
            "quasar.client has no batch_receive"
        )
    stopped = _stop_event(ctx)
    client = aio.Client(
        opts.service_url, operation_timeout_seconds=opts.operation_timeout_s
    )
    try:
        consumers = []
        for topic in opts.topics:
            for _ in range(opts.num_consumers):
                consumers.append(
                    await client.subscribe(
                        topic,
                        opts.subscription,
                        consumer_type=_SUBSCRIPTION_TYPES[opts.subscription_type],
                        receiver_queue_size=opts.receiver_queue_size,
                        initial_position=InitialPosition[opts.subscription_position],
                    )
                )
        ctx.ready()
        if not ctx.external_begin:
            ctx.reporter.begin()
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(_receive_loop(c, ctx)) for c in consumers]
        await stopped.wait()
        await _finish(tasks, RECEIVE_POLL_MS / 1000.0 + 1.0)
        ctx.cpu_end = time.process_time()
    finally:
        await _close(client)


async def _receive_loop(consumer: aio.Consumer, ctx: RunContext) -> None:
    control = ctx.control
    add = SampleBuffer(ctx.recorder, asyncio.get_running_loop()).add
    wall = time.time
    receive, acknowledge = consumer.receive, consumer.acknowledge
    while not control.stopped:
        try:
            msg = await receive(RECEIVE_POLL_MS)
        except Timeout:
            continue
        except AlreadyClosed:
            return
        if not control.claim():
            return
        # publish_time is the producer's wall clock in ms (same machine).
        add(wall() * 1e6 - msg.publish_timestamp() * 1000, len(msg.data()))
        await acknowledge(msg)
