"""``quasar perf pubsub``: a producer and a consumer, each in its own process.

Two processes so that the producer and the consumer do not share one GIL. The order:

1. the parent creates partitioned topics (if asked) and starts the consumer process;
2. once it has subscribed (a fresh subscription at Latest), the producer process starts;
3. when the producer has its producers, it stores its wall-clock start time; the
   consumer's clock (warm-up, window) starts from that same instant;
4. when the producer finishes it stores how many messages the broker confirmed; the
   consumer stops once it has received that many, or when nothing has arrived for
   ``drain_timeout_s``;
5. both send their summaries back and the parent reports the pair.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
import uuid
from typing import Any

from quasar.perf.context import RunContext
from quasar.perf.options import PubSubOptions
from quasar.perf.recorder import RunControl
from quasar.perf.run import create_partitioned_topics, run_consume, run_produce

__all__ = ["run_pubsub", "unique_names"]

READY_TIMEOUT_S = 60.0
POLL_S = 0.01
# Values of the shared "published" counter before the producer's final count.
_RUNNING = -1
_ABORTED = -2


def unique_names() -> tuple[str, str]:
    """A fresh (topic, subscription) pair, so runs never see each other's data."""
    tag = uuid.uuid4().hex[:10]
    return f"perf-{tag}", f"perf-sub-{tag}"


def _producer_main(opts: Any, start_wall: Any, published: Any, results: Any) -> None:
    def ready() -> None:
        start_wall.value = time.time()

    summary: dict[str, Any] | None = None
    try:
        summary = run_produce(opts, on_ready=ready, create_topics=False)
    except BaseException as exc:
        results.put(("produce", {"error": repr(exc)}))
        published.value = _ABORTED
        raise
    published.value = int(summary["messages"])
    results.put(("produce", summary))


def _consumer_main(
    popts: PubSubOptions,
    subscribed: Any,
    start_wall: Any,
    published: Any,
    results: Any,
) -> None:
    control = RunControl(None)

    def watch(ctx: RunContext) -> None:
        # Begin when the producer does, on this process's monotonic clock.
        while start_wall.value == 0.0:
            if control.wait(POLL_S) or published.value == _ABORTED:
                control.stop("producer failed")
                return
        ctx.reporter.begin(time.monotonic() - (time.time() - start_wall.value))
        while published.value == _RUNNING:
            if control.wait(POLL_S):
                return
        if published.value == _ABORTED:
            control.stop("producer failed")
            return
        control.set_limit(published.value)
        while not control.wait(0.1):
            last = ctx.recorder.last_time or ctx.reporter.started_at
            if time.monotonic() - last > popts.drain_timeout_s:
                control.stop("drain timeout")

    def on_context(ctx: RunContext) -> None:
        threading.Thread(
            target=watch, args=(ctx,), name="perf-watch", daemon=True
        ).start()

    try:
        summary = run_consume(
            popts.consume,
            control=control,
            external_begin=True,
            on_ready=subscribed.set,
            on_context=on_context,
        )
    except BaseException as exc:
        results.put(("consume", {"error": repr(exc)}))
        raise
    results.put(("consume", summary))


def _collect(
    results: Any, procs: list[Any], want: int, on_poll: Any = None
) -> dict[str, dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}
    while len(got) < want:
        try:
            role, summary = results.get(timeout=0.5)
            got[role] = summary
        except queue.Empty:
            if on_poll is not None:
                on_poll(got)
            if all(not p.is_alive() for p in procs):
                # All gone: take what is left without waiting.
                try:
                    while True:
                        role, summary = results.get_nowait()
                        got[role] = summary
                except queue.Empty:
                    break
        except KeyboardInterrupt:
            continue  # the children stop on the same Ctrl-C and still report
    return got


def run_pubsub(popts: PubSubOptions) -> dict[str, Any]:
    """Run the pair and return ``{"mode": "pubsub", "produce": ..., "consume": ...}``.

    Raises:
        RuntimeError: the consumer could not subscribe in time.
        AdminError, ConnectError, Timeout: creating partitioned topics failed.
    """
    p, c = popts.produce, popts.consume
    if p.partitions > 0:
        create_partitioned_topics(p.admin_url, p.topics, p.partitions)
    mp = multiprocessing.get_context("spawn")
    subscribed = mp.Event()
    start_wall = mp.Value("d", 0.0)
    published = mp.Value("q", _RUNNING)
    results = mp.Queue()
    consumer = mp.Process(
        target=_consumer_main,
        args=(popts, subscribed, start_wall, published, results),
        name="perf-consume",
    )
    consumer.start()
    procs = [consumer]
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not subscribed.wait(0.1):
        if not consumer.is_alive() or time.monotonic() > deadline:
            consumer.terminate()
            consumer.join()
            got = _collect(results, procs, 1)
            raise RuntimeError(
                "consumer did not subscribe: "
                + str(got.get("consume", {}).get("error", "timed out"))
            )
    producer = mp.Process(
        target=_producer_main,
        args=(p, start_wall, published, results),
        name="perf-produce",
    )
    producer.start()
    procs.append(producer)
    dead_since: list[float] = []

    def check_producer(got: dict[str, Any]) -> None:
        # A producer that died without a summary would leave the consumer waiting.
        if producer.is_alive() or "produce" in got or published.value != _RUNNING:
            return
        if not dead_since:
            dead_since.append(time.monotonic())
        elif time.monotonic() - dead_since[0] > 2.0:
            published.value = _ABORTED

    got = _collect(results, procs, 2, check_producer)
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.terminate()
            proc.join()
    return {
        "mode": "pubsub",
        "client": p.client if p.client == c.client else f"{p.client}/{c.client}",
        "topics": p.topics,
        "subscription": c.subscription,
        "produce": got.get("produce", {"error": "producer process died"}),
        "consume": got.get("consume", {"error": "consumer process died"}),
    }
