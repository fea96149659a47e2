"""Workers on the official client (``pulsar-client``, C++ core with Python bindings).

Each producer gets a sending thread and each consumer a receiving thread; send
callbacks run on the C++ client's I/O thread. All of them take the GIL for every
message, so this driver measures what a Python application on that client gets, not
what the C++ library alone could do.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from quasar.perf.context import RunContext, make_payload
from quasar.perf.options import (
    BATCH_RECEIVE_TIMEOUT_MS,
    ConsumeOptions,
    ProduceOptions,
    producer_settings,
)
from quasar.perf.recorder import CLAIM_CHUNK
from quasar.perf.schedule import RateSchedule, split_rate

__all__ = ["run_consume", "run_produce"]

RECEIVE_POLL_MS = 200
BATCH_RECEIVE_MAX_BYTES = 10 * 1024 * 1024  # the C++ client's default
JOIN_TIMEOUT_S = 5.0


def _client(url: str, operation_timeout_s: float) -> Any:
    import pulsar

    # The C++ client logs every connection at INFO; keep the progress lines readable.
    # Its own console logger, not a Python one: with a Python logger every log call
    # of the C++ hot path (even one filtered out) takes the GIL, which cost ~20 % of
    # the producer's samples in a profile.
    logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    return pulsar.Client(
        url, operation_timeout_seconds=max(1, round(operation_timeout_s)), logger=logger
    )


def _wait_until_stopped(ctx: RunContext) -> None:
    """Block the main thread until the run stops; Ctrl-C stops it."""
    try:
        while not ctx.control.wait(0.5):
            pass
    except KeyboardInterrupt:
        ctx.control.stop("interrupted")


def _join(threads: list[threading.Thread], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def run_produce(opts: ProduceOptions, ctx: RunContext) -> None:
    import pulsar

    client = _client(opts.service_url, opts.operation_timeout_s)
    try:
        producers = []
        for topic in opts.topics:
            for _ in range(opts.num_producers):
                producers.append(
                    client.create_producer(
                        topic,
                        **producer_settings(opts),
                    )
                )
        ctx.ready()
        payload = make_payload(opts.size)
        sent = [0] * len(producers)
        recorder = ctx.recorder
        ctx.pending = lambda: sum(sent) - recorder.completed()
        rates = split_rate(opts.rate, len(producers))
        start = time.monotonic()
        ctx.reporter.begin(start)
        threads = [
            threading.Thread(
                target=_send_loop,
                args=(
                    p,
                    payload,
                    rates[i],
                    start,
                    i / len(producers),
                    ctx,
                    sent,
                    i,
                    pulsar.Result.Ok,
                ),
                name=f"perf-send-{i}",
                daemon=True,
            )
            for i, p in enumerate(producers)
        ]
        for t in threads:
            t.start()
        _wait_until_stopped(ctx)
        _join(threads, opts.send_timeout_ms / 1000.0 + JOIN_TIMEOUT_S)
        for p in producers:
            try:
                p.flush()
            except Exception:  # failures were counted by the callbacks
                pass
        ctx.cpu_end = time.process_time()
        ctx.info["sent"] = sum(sent)
    finally:
        client.close()


def _send_loop(
    producer: Any,
    payload: bytes,
    rate: float,
    start: float,
    phase: float,
    ctx: RunContext,
    sent: list[int],
    index: int,
    ok: Any,
) -> None:
    recorder, control = ctx.recorder, ctx.control
    size = len(payload)
    clock = time.monotonic
    record, error = recorder.record, recorder.error

    def on_done(due: float, result: Any, _mid: Any) -> None:
        now = clock()
        if result == ok:
            record((now - due) * 1e6, size, now)
        else:
            error()

    send_async = producer.send_async
    partial = functools.partial
    sleep = time.sleep
    schedule = RateSchedule(rate, start, phase) if rate > 0 else None
    count = 0
    for _ in control.grants(1 if schedule is not None else CLAIM_CHUNK):
        if schedule is None:
            due = clock()
        else:
            due = schedule.next_due()
            now = clock()
            if due > now:
                sleep(due - now)
                now = clock()
            recorder.record_lag((now - due) * 1e6)
        count += 1
        sent[index] = count
        try:
            send_async(payload, partial(on_done, due))
        except Exception:  # e.g. AlreadyClosed after a fatal error
            error()


_SUBSCRIPTION_TYPES = {
    "Exclusive": "Exclusive",
    "Shared": "Shared",
    "Failover": "Failover",
    "Key_Shared": "KeyShared",
}


def run_consume(opts: ConsumeOptions, ctx: RunContext) -> None:
    import pulsar

    client = _client(opts.service_url, opts.operation_timeout_s)
    try:
        consumers = []
        for topic in opts.topics:
            for _ in range(opts.num_consumers):
                consumers.append(
                    client.subscribe(
                        topic,
                        opts.subscription,
                        consumer_type=getattr(
                            pulsar.ConsumerType,
                            _SUBSCRIPTION_TYPES[opts.subscription_type],
                        ),
                        receiver_queue_size=opts.receiver_queue_size,
                        initial_position=getattr(
                            pulsar.InitialPosition, opts.subscription_position
                        ),
                        batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(
                            opts.batch_receive,
                            BATCH_RECEIVE_MAX_BYTES,
                            BATCH_RECEIVE_TIMEOUT_MS,
                        )
                        if opts.batch_receive > 0
                        else None,
                    )
                )
        ctx.ready()
        if not ctx.external_begin:
            ctx.reporter.begin()
        loop = _batch_receive_loop if opts.batch_receive > 0 else _receive_loop
        threads = [
            threading.Thread(
                target=loop,
                args=(c, ctx, pulsar.Timeout),
                name=f"perf-receive-{i}",
                daemon=True,
            )
            for i, c in enumerate(consumers)
        ]
        for t in threads:
            t.start()
        _wait_until_stopped(ctx)
        _join(threads, RECEIVE_POLL_MS / 1000.0 + JOIN_TIMEOUT_S)
        ctx.cpu_end = time.process_time()
    finally:
        client.close()


def _receive_loop(
    consumer: Any, ctx: RunContext, timeout_error: type[Exception]
) -> None:
    recorder, control = ctx.recorder, ctx.control
    record = recorder.record
    clock, wall = time.monotonic, time.time
    receive, acknowledge = consumer.receive, consumer.acknowledge
    while not control.stopped:
        try:
            msg = receive(RECEIVE_POLL_MS)
        except timeout_error:
            continue
        except Exception:  # closed under us
            return
        if not control.claim():
            return
        now = clock()
        record(wall() * 1e6 - msg.publish_timestamp() * 1000, len(msg.data()), now)
        acknowledge(msg)


def _batch_receive_loop(
    consumer: Any, ctx: RunContext, timeout_error: type[Exception]
) -> None:
    """``_receive_loop`` with ``batch_receive()``: each message of a batch is still
    timed, recorded and acknowledged on its own, as an application would; the
    samples of a batch go to the recorder together (one lock round per batch)."""
    recorder, control = ctx.recorder, ctx.control
    record_many = recorder.record_many
    clock, wall = time.monotonic, time.time
    # The binding's own consumer (``_pulsar.Consumer``, behind the wrapper of the
    # pinned pulsar-client): the wrapper builds a Python ``Message`` per received
    # message and dispatches on its type per acknowledgement, about 15 % of the
    # consumer process's CPU per message. The messages, their order and the
    # acknowledgement of each one are the same; pulsar-perf has no such layer.
    native = consumer._consumer
    batch_receive, acknowledge = native.batch_receive, native.acknowledge
    while not control.stopped:
        try:
            msgs = batch_receive()
        except timeout_error:
            continue
        except Exception:  # closed under us
            return
        if not msgs:
            continue
        granted = control.claim_many(len(msgs))
        if granted < len(msgs):
            del msgs[granted:]  # beyond the budget: left unacknowledged
        first = clock()
        latencies = []
        append = latencies.append
        nbytes = 0
        for msg in msgs:
            append(wall() * 1e6 - msg.publish_timestamp() * 1000)
            nbytes += msg.length()
            acknowledge(msg)
        record_many(latencies, nbytes, first, clock())
