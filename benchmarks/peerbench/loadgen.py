"""The load generator for the peers: one producer process and one consumer process.

Each system's client is an adapter (``peerbench.rabbitmq``, ``.redis_streams``,
``.nats_jetstream``) with the same five coroutines; this module drives them the same
way for every system, so the figures differ only by what the system does.

* Publish latency runs from when a message was due to its confirmation. At a fixed
  rate message *k* is due at ``start + k/rate``; a producer that falls behind still
  counts from then, so a stall shows as latency rather than as a lower rate. Without
  a rate a message is due when the producer takes its in-flight slot.
* End-to-end latency is the consumer's wall clock at delivery minus the wall clock
  the producer wrote into the first 8 bytes of the payload when it sent it (one
  machine, one clock).
* The window: the first ``Workload.warmup_s`` of a timed run are left out of every
  figure. A W4 fill and drain count everything.

The processes are started with ``spawn`` so that no event loop or client state of
the parent is inherited.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import queue
import time
from array import array
from typing import Any, Protocol

from peerbench.latency import summarize
from peerbench.workloads import DRAIN_IDLE_S, PIPELINE_MESSAGES, Workload

READY_TIMEOUT_S = 60.0
_RUNNING = -1


class PeerClient(Protocol):
    """What an adapter's ``client(spec)`` returns. An adapter whose client runs one
    request per connection also sets ``max_in_flight`` (its connections)."""

    supports_batching: bool

    async def open(self) -> None: ...
    async def setup(self) -> None: ...
    async def publish(self, body: bytes) -> None: ...
    async def publish_batch(self, bodies: list[bytes]) -> None: ...
    async def consume(self, on_message: Any, stop: asyncio.Event) -> None: ...
    async def close(self) -> None: ...


def make_client(spec: dict[str, Any]) -> PeerClient:
    module = importlib.import_module(f"peerbench.{spec['adapter']}")
    return module.client(spec)  # type: ignore[no-any-return]


def _run(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


async def _produce(spec: dict[str, Any], wl: Workload, start_wall: Any) -> dict[str, Any]:
    client = make_client(spec)
    await client.open()
    batch = PIPELINE_MESSAGES if wl.batching and client.supports_batching else 1
    # One worker per request in flight, each sending and awaiting its confirmation in
    # a loop; a client with one request per connection caps them at its connections.
    workers = max(1, min(wl.in_flight // batch, getattr(client, "max_in_flight", wl.in_flight)))
    filler = bytes(wl.size - 8)
    latency_us = array("d")
    stats = {"next": 0, "confirmed": 0, "errors": 0, "window": 0}
    start = time.monotonic()
    start_wall.value = time.time()
    timed = wl.backlog_messages == 0
    warm_end = start + wl.warmup_s if timed else start
    end = start + wl.duration_s if timed else float("inf")
    limit = wl.backlog_messages or float("inf")
    last_confirm = [start]
    first_error: list[str] = []

    async def worker() -> None:
        while True:
            k = stats["next"]
            count = int(min(batch, limit - k))
            if count <= 0 or time.monotonic() >= end:
                return
            stats["next"] = k + count
            if wl.rate:
                dues = [start + (k + i) / wl.rate for i in range(count)]
                wait = dues[0] - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if time.monotonic() >= end:
                    return
            else:
                dues = [time.monotonic()] * count
            bodies = [time.time_ns().to_bytes(8, "big") + filler for _ in range(count)]
            try:
                if count == 1:
                    await client.publish(bodies[0])
                else:
                    await client.publish_batch(bodies)
            except Exception as exc:  # a refused or timed-out publish is counted, not fatal
                stats["errors"] += count
                if not first_error:
                    first_error.append(repr(exc))
                continue
            now = time.monotonic()
            stats["confirmed"] += count
            last_confirm[0] = now
            if warm_end <= now <= end:
                stats["window"] += count
                latency_us.extend((now - d) * 1e6 for d in dues)

    await asyncio.gather(*(worker() for _ in range(workers)))
    stopped = time.monotonic()
    await client.close()
    seconds = (min(stopped, end) - warm_end) if timed else (last_confirm[0] - start)
    return {
        "messages": stats["confirmed"],
        "errors": stats["errors"],
        "first_error": first_error[0] if first_error else None,
        "window_messages": stats["window"],
        "window_s": round(seconds, 3),
        "msg_s": round(stats["window"] / seconds, 1) if seconds > 0 else 0.0,
        "batch_messages": batch,
        "requests_in_flight": workers,
        "publish_latency_ms": summarize(latency_us),
    }


async def _consume(
    spec: dict[str, Any], wl: Workload, ready: Any, start_wall: Any, published: Any
) -> dict[str, Any]:
    client = make_client(spec)
    await client.open()
    stop = asyncio.Event()
    e2e_us = array("d")
    stats = {"received": 0, "window": 0}
    clock = {"start": 0.0, "warm_end": float("inf"), "end": float("inf"), "last": 0.0}

    def on_message(body: bytes) -> None:
        now = time.monotonic()
        stats["received"] += 1
        clock["last"] = now
        if clock["warm_end"] <= now <= clock["end"]:
            stats["window"] += 1
            e2e_us.append((time.time_ns() - int.from_bytes(body[:8], "big")) / 1000)

    timed = wl.backlog_messages == 0
    if not timed:
        # A drain: the clock starts when the consumer does.
        start = clock["start"] = clock["last"] = clock["warm_end"] = time.monotonic()
    task = asyncio.create_task(client.consume(on_message, stop))
    ready.set()
    if timed:
        # The producer starts after this consumer is ready; both clocks start with it.
        while start_wall.value == 0.0:
            await asyncio.sleep(0.01)
        start = time.monotonic() - (time.time() - start_wall.value)
        clock["start"] = clock["last"] = start
        clock["warm_end"] = start + wl.warmup_s
        clock["end"] = start + wl.duration_s
    while True:
        await asyncio.sleep(0.02)
        if task.done():
            break  # the adapter failed: its exception is raised below
        want = published.value
        if want != _RUNNING and stats["received"] >= want:
            break
        if want != _RUNNING and time.monotonic() - clock["last"] > DRAIN_IDLE_S:
            break
    stop.set()
    await asyncio.wait_for(task, 30)
    await client.close()
    seconds = (clock["end"] - clock["warm_end"]) if timed else (clock["last"] - start)
    return {
        "messages": stats["received"],
        "window_messages": stats["window"],
        "window_s": round(seconds, 3),
        "msg_s": round(stats["window"] / seconds, 1) if seconds > 0 else 0.0,
        "e2e_latency_ms": summarize(e2e_us),
    }


async def _setup(spec: dict[str, Any]) -> dict[str, Any]:
    client = make_client(spec)
    await client.open()
    await client.setup()
    await client.close()
    return {}


def _child(role: str, spec: dict[str, Any], wl: Workload, shared: dict[str, Any]) -> None:
    import sys

    sys.path.insert(0, spec["bench_dir"])
    try:
        if role == "setup":
            result = _run(_setup(spec))
        elif role == "produce":
            result = _run(_produce(spec, wl, shared["start_wall"]))
        else:
            result = _run(_consume(spec, wl, shared["ready"], shared["start_wall"], shared["published"]))
    except BaseException as exc:
        shared["results"].put((role, {"error": repr(exc)}))
        raise
    shared["results"].put((role, result))


class Runner:
    """Starts the child processes of one run and collects their summaries."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.mp = multiprocessing.get_context("spawn")

    def _shared(self) -> dict[str, Any]:
        return {
            "ready": self.mp.Event(),
            "start_wall": self.mp.Value("d", 0.0),
            "published": self.mp.Value("q", _RUNNING),
            "results": self.mp.Queue(),
        }

    def _start(self, role: str, wl: Workload, shared: dict[str, Any]) -> Any:
        proc = self.mp.Process(target=_child, args=(role, self.spec, wl, shared), name=f"peer-{role}")
        proc.start()
        return proc

    @staticmethod
    def _collect(shared: dict[str, Any], procs: list[Any], roles: set[str], timeout_s: float) -> dict[str, Any]:
        got: dict[str, Any] = {}
        deadline = time.monotonic() + timeout_s
        while roles - set(got) and time.monotonic() < deadline:
            try:
                role, result = shared["results"].get(timeout=0.2)
                got[role] = result
                if role == "produce":
                    shared["published"].value = int(result.get("messages", 0))
            except queue.Empty:
                if all(not p.is_alive() for p in procs):
                    break
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        for role in roles - set(got):
            got[role] = {"error": f"{role} process ended without a summary"}
        return got

    def setup(self, wl: Workload) -> None:
        shared = self._shared()
        got = self._collect(shared, [self._start("setup", wl, shared)], {"setup"}, READY_TIMEOUT_S)
        if "error" in got["setup"]:
            raise RuntimeError("setup failed: " + got["setup"]["error"])

    def pair(self, wl: Workload) -> dict[str, Any]:
        """The consumer subscribes, then the producer runs; both summaries."""
        shared = self._shared()
        consumer = self._start("consume", wl, shared)
        if not shared["ready"].wait(READY_TIMEOUT_S):
            got = self._collect(shared, [consumer], {"consume"}, 1)
            raise RuntimeError("consumer not ready: " + str(got["consume"].get("error")))
        producer = self._start("produce", wl, shared)
        budget = wl.duration_s + 120 if not wl.backlog_messages else 3600
        return self._collect(shared, [consumer, producer], {"produce", "consume"}, budget)

    def fill(self, wl: Workload) -> dict[str, Any]:
        shared = self._shared()
        return self._collect(shared, [self._start("produce", wl, shared)], {"produce"}, 3600)["produce"]

    def drain(self, wl: Workload) -> dict[str, Any]:
        shared = self._shared()
        shared["published"].value = wl.backlog_messages
        consumer = self._start("consume", wl, shared)
        if not shared["ready"].wait(READY_TIMEOUT_S):
            return self._collect(shared, [consumer], {"consume"}, 1)["consume"]
        return self._collect(shared, [consumer], {"consume"}, 3600)["consume"]
