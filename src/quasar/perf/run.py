"""One ``produce`` or ``consume`` run in this process: set up, drive, summarise."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from quasar.client.admin import AdminClient, call_admin
from quasar.errors import ConflictError
from quasar.perf.context import RunContext
from quasar.perf.options import ConsumeOptions, ProduceOptions
from quasar.perf.recorder import Recorder, RunControl
from quasar.perf.reporter import Reporter
from quasar.perf.summary import build_summary

__all__ = ["create_partitioned_topics", "run_consume", "run_produce"]


# Cyclic-GC thresholds of a load-generating process (the broker has its own, in
# quasar.server.standalone): with the defaults (700, 10, 10) young collections ran
# every few hundred messages and walked every message in flight, 6-9 % of the quasar
# producer's CPU and 3 % of the official consumer's (measured with gc.callbacks).
# The hot paths make almost no reference cycles, so rarer collections lose nothing;
# at these values a 23 s unbatched run spends ~30 ms in GC (measured).
GC_THRESHOLDS = (20_000, 50, 1_000)

# glibc malloc: keep freed memory for reuse instead of returning it to the kernel.
# A producer builds and frees a 128 KiB batch every ~1 ms; with glibc's default
# (dynamic) thresholds much of each batch landed in fresh pages, ~25 page faults per
# batch (0.2-0.4 us per message), as a JVM with a preallocated heap would not see.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MALLOC_TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
MALLOC_MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024


def tune_malloc() -> None:
    """Apply the malloc settings above to this process (glibc only; else nothing).

    They stay in force after the run: they only change when memory goes back to
    the kernel.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (or no libc symbols): leave it
        return
    mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES)
    mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES)


@contextlib.contextmanager
def tuned_gc() -> Iterator[None]:
    """Within the block, what exists at its start is frozen out of the cyclic GC and
    collections are rare; the previous thresholds are restored after it."""
    saved = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()


def _driver(client: str) -> Any:
    if client == "pulsar":
        from quasar.perf import pulsar_driver

        return pulsar_driver
    from quasar.perf import quasar_driver

    return quasar_driver


def create_partitioned_topics(
    admin_url: str, topics: list[str], partitions: int
) -> None:
    """``PUT .../partitions`` for each topic; one that already exists is kept.

    Raises:
        AdminError: the admin API refused (but for 409: the topic exists).
        ConnectError, Timeout: the admin API is down or too slow.
    """

    async def create(admin: AdminClient) -> None:
        for topic in topics:
            try:
                await admin.create_partitioned_topic(topic, partitions)
            except ConflictError:
                print(f"topic {topic} already exists: kept as it is", file=sys.stderr)

    call_admin(admin_url, create)


def _run(
    mode: str,
    latency_kind: str,
    opts: ProduceOptions | ConsumeOptions,
    driver_fn: Callable[[Any, RunContext], None],
    *,
    label: str,
    control: RunControl | None,
    external_begin: bool,
    on_ready: Callable[[], None] | None,
    on_context: Callable[[RunContext], None] | None,
    stream: TextIO | None,
    info: dict[str, Any],
) -> dict[str, Any]:
    recorder = Recorder()
    if control is None:
        control = RunControl(opts.num_messages or None)
    holder: list[RunContext] = []

    def pending() -> int:
        fn = holder[0].pending if holder else None
        return fn() if fn is not None else 0

    reporter = Reporter(
        label,
        recorder,
        control,
        warmup_s=opts.warmup_s,
        time_s=opts.time_s,
        interval_s=opts.interval_s,
        pending=pending if mode == "produce" else None,
        stream=stream,
    )
    ctx = RunContext(
        recorder, control, reporter, external_begin=external_begin, on_ready=on_ready
    )
    holder.append(ctx)
    if on_context is not None:
        on_context(ctx)
    tune_malloc()
    with tuned_gc():
        cpu0 = time.process_time()
        t0 = time.monotonic()
        reporter.start()
        try:
            driver_fn(opts, ctx)
        finally:
            try:
                control.stop(control.reason or "finished")
            finally:
                reporter.finish()
    cpu_end = ctx.cpu_end if ctx.cpu_end is not None else time.process_time()
    recorder.fold()
    started = reporter.started_at or t0
    end = recorder.last_time if recorder.last_time is not None else time.monotonic()
    return build_summary(
        mode=mode,
        latency_kind=latency_kind,
        recorder=recorder,
        run_seconds=max(0.0, end - started),
        cpu_seconds=cpu_end - cpu0,
        window_cpu_end=cpu_end,
        info={**info, **ctx.info},
        stopped_by=control.reason,
        run_started=started,
    )


def run_produce(
    opts: ProduceOptions,
    *,
    control: RunControl | None = None,
    on_ready: Callable[[], None] | None = None,
    on_context: Callable[[RunContext], None] | None = None,
    stream: TextIO | None = None,
    create_topics: bool = True,
) -> dict[str, Any]:
    """Publish as ``opts`` says and return the summary.

    With ``opts.partitions`` the topics are created partitioned first, unless
    ``create_topics`` is False (the caller did it).

    Raises:
        AdminError, ConnectError, Timeout: creating partitioned topics failed.
        QuasarError / pulsar exceptions: the client could not create producers.
    """
    if opts.partitions > 0 and create_topics:
        create_partitioned_topics(opts.admin_url, opts.topics, opts.partitions)
    info = {
        "client": opts.client,
        "topics": opts.topics,
        "warmup_s": opts.warmup_s,
        "config": {
            "rate": opts.rate,
            "size": opts.size,
            "producers_per_topic": opts.num_producers,
            "partitions": opts.partitions,
            "batching": opts.batching,
            "batch_max_messages": opts.batch_max_messages,
            "batch_max_delay_ms": opts.batch_max_delay_ms,
            "batch_max_bytes": opts.batch_max_bytes,
            "max_pending": opts.max_pending,
            "num_messages": opts.num_messages,
            "time_s": opts.time_s,
        },
    }
    return _run(
        "produce",
        "publish",
        opts,
        _driver(opts.client).run_produce,
        label="produce",
        control=control,
        external_begin=False,
        on_ready=on_ready,
        on_context=on_context,
        stream=stream,
        info=info,
    )


def run_consume(
    opts: ConsumeOptions,
    *,
    control: RunControl | None = None,
    external_begin: bool = False,
    on_ready: Callable[[], None] | None = None,
    on_context: Callable[[RunContext], None] | None = None,
    stream: TextIO | None = None,
) -> dict[str, Any]:
    """Receive as ``opts`` says and return the summary.

    Raises:
        QuasarError / pulsar exceptions: the client could not subscribe.
    """
    info = {
        "client": opts.client,
        "topics": opts.topics,
        "warmup_s": opts.warmup_s,
        "config": {
            "subscription": opts.subscription,
            "subscription_type": opts.subscription_type,
            "subscription_position": opts.subscription_position,
            "consumers_per_topic": opts.num_consumers,
            "receiver_queue_size": opts.receiver_queue_size,
            "num_messages": opts.num_messages,
            "time_s": opts.time_s,
        },
    }
    return _run(
        "consume",
        "end-to-end",
        opts,
        _driver(opts.client).run_consume,
        label="consume",
        control=control,
        external_begin=external_begin,
        on_ready=on_ready,
        on_context=on_context,
        stream=stream,
        info=info,
    )
