"""``quasar perf transaction``: consume-transform-produce in transactions.

``-c`` workers share one client (one event loop, one connection) and one consumer per
input topic; each worker has its own producer per output topic, as each of
pulsar-perf's threads has. So a loop's messages form batches of their own in both
modes: the transactional loop cannot batch across transactions (a batch holds one
transaction's messages), and with shared producers the ``--txn-disable`` baseline
would batch across workers, which measures batching rather than the transaction.
Each worker loops::

    t0   txn = await client.new_transaction(timeout_ms=-tto)
         receive -nmc messages from each input topic
         acknowledge them in txn and, at the same time, send -nmp messages to each
         output topic in txn (as pulsar-perf does); await every ack answer and
         receipt
    t1   await txn.commit()   (or txn.abort(), for a --abort-ratio share of them)
    t2   record: transaction latency t2 - t0, commit (abort) latency t2 - t1

so the commit latency is END_TXN alone (nothing is left in flight when it starts).
The open, ack and send phases are timed too (see ``quasar.perf.txn_recorder``).
With ``--txn-disable`` the loop is the same without a transaction: plain acks (grouped
by the client, as in any consumer) and plain sends, still awaiting the receipts; its
latency is reported as the loop latency.

Before the clock starts: the input subscriptions are created (at Earliest by default),
the fresh input topics are prefilled (``--prefill``), and one transaction is opened and
aborted so that the coordinators are discovered and connected (``setup_transactions``
in the summary).

The run stops at ``-ntxn`` transactions, at ``-t`` seconds, on Ctrl-C, or when no
input message has arrived for ``--input-idle-timeout`` seconds. With ``-ntxn`` every
claimed transaction is finished. Otherwise transactions in flight when the run stops
are finished too, except those still waiting for input: they are aborted and not
counted (``abandoned_transactions`` in the summary).

With ``--txn-interval-ms`` the workers are *lanes* of produce-only transactions
committed by time instead (``quasar.perf.txn_interval``); the set-up, reporting and
stopping are the same.

A transaction that fails (an ack, send, commit or abort raising) counts as an error,
by exception type; it is aborted if still open. Messages whose transactional ack
failed are negatively acknowledged, so that they come again; the ones acked in an
aborted transaction are made deliverable again by the broker.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from quasar.client import aio
from quasar.client.enums import ConsumerType, InitialPosition
from quasar.client.txn_state import TransactionState
from quasar.errors import AlreadyClosed, QuasarError, Timeout
from quasar.perf.context import make_payload
from quasar.perf.options import producer_settings
from quasar.perf.quasar_driver import _close, _run
from quasar.perf.recorder import RunControl
from quasar.perf.summary import write_json
from quasar.perf.txn_interval import baseline_lane, interval_lane
from quasar.perf.txn_options import TransactionOptions
from quasar.perf.txn_recorder import TxnRecorder
from quasar.perf.txn_report import TxnReporter, build_txn_summary, format_txn_summary

__all__ = ["main_transaction", "run_transaction", "validate"]

RECEIVE_POLL_MS = 200
# Redelivery delay of messages whose transactional ack failed (they are nacked).
NACK_DELAY_MS = 1000
IDLE_CHECK_S = 0.25
# RunControl's reason when the last transaction of the -ntxn budget is claimed.
BUDGET_USED = "message limit reached"

_SUBSCRIPTION_TYPES = {
    "Exclusive": ConsumerType.Exclusive,
    "Shared": ConsumerType.Shared,
    "Failover": ConsumerType.Failover,
    "Key_Shared": ConsumerType.KeyShared,
}


class _Stopped(Exception):
    """The run stopped while a worker waited for input."""


def _validate_interval(opts: TransactionOptions) -> str | None:
    if opts.messages_consumed > 0 or opts.input_topics:
        return "--txn-interval-ms is produce-only: drop -nmc and --input"
    if opts.messages_produced > 0:
        return (
            "-nmp counts messages per transaction; with --txn-interval-ms a "
            "transaction holds what its lane sends in the interval: drop -nmp"
        )
    if not opts.txn_disable and opts.txn_interval_ms >= opts.txn_timeout_ms:
        return (
            f"--txn-interval-ms {opts.txn_interval_ms} must be below the transaction "
            f"timeout (-tto {opts.txn_timeout_ms})"
        )
    return None


def validate(opts: TransactionOptions) -> str | None:
    """Why the options cannot run (None: they can)."""
    if opts.txn_interval_ms < 0:
        return "--txn-interval-ms must be positive"
    if opts.txn_interval_ms > 0:
        problem = _validate_interval(opts)
        if problem is not None:
            return problem
    elif opts.rate > 0:
        return "-r paces the --txn-interval-ms lanes; the other loops run as fast as they can"
    elif opts.messages_produced == 0 and opts.messages_consumed == 0:
        return "-nmp and -nmc are both 0: a transaction would do nothing"
    if opts.txn_disable and opts.abort_ratio > 0:
        return "--abort-ratio needs transactions (drop --txn-disable)"
    if opts.partitions > 0 and opts.input_topics and opts.output_topics:
        return "-p applies to fresh topics only, and every topic is named"
    return None


class _Shared:
    """What the workers of one run share."""

    def __init__(
        self,
        opts: TransactionOptions,
        client: aio.Client,
        consumers: list[aio.Consumer],
        outputs: int,
        recorder: TxnRecorder,
        control: RunControl,
    ) -> None:
        self.opts = opts
        self.client = client
        self.consumers = consumers
        self.recorder = recorder
        self.control = control
        self.payload = make_payload(opts.size)
        self.rng = random.Random(opts.seed)
        self.last_input = time.monotonic()
        # Set when workers waiting for input should give up their transaction: the
        # run stopped early (time limit, Ctrl-C, idle input), not because the -ntxn
        # budget is used up (claimed transactions are then finished).
        self.abandon = False
        self.abandoned = 0
        self.produced_per_txn = opts.messages_produced * outputs
        self.consumed_per_txn = opts.messages_consumed * len(consumers)

    def choose_abort(self) -> bool:
        # Called right after claim(), with no await in between: the n-th transaction
        # claimed gets the n-th draw, whatever the interleaving of the workers.
        ratio = self.opts.abort_ratio
        return ratio > 0 and self.rng.random() < ratio


async def _receive(shared: _Shared, consumer: aio.Consumer) -> aio.Message:
    while True:
        if shared.abandon:
            raise _Stopped
        try:
            msg = await consumer.receive(RECEIVE_POLL_MS)
        except Timeout:
            continue
        shared.last_input = time.monotonic()
        return msg


async def _produce(
    shared: _Shared, producers: list[aio.Producer], txn: aio.Transaction | None
) -> None:
    """Send -nmp messages to each output (pipelined) and wait for every receipt.

    Raises:
        the first send error.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    remaining = shared.produced_per_txn
    first_error: list[BaseException] = []

    def on_receipt(err: BaseException | None, _mid: Any) -> None:
        nonlocal remaining
        if err is not None and not first_error:
            first_error.append(err)
        remaining -= 1
        if remaining == 0 and not done.done():
            done.set_result(None)

    payload = shared.payload
    for producer in producers:
        for _ in range(shared.opts.messages_produced):
            await producer.send_async(payload, on_receipt, txn=txn)
    await done
    if first_error:
        raise first_error[0]


async def _ack_in_txn(
    received: list[tuple[aio.Consumer, aio.Message]], txn: aio.Transaction
) -> None:
    """Ack every message in ``txn``; nack the ones whose ack failed, raise the first."""
    results = await asyncio.gather(
        *(c.acknowledge(m, txn=txn) for c, m in received), return_exceptions=True
    )
    first: BaseException | None = None
    for (consumer, msg), result in zip(received, results, strict=True):
        if isinstance(result, BaseException):
            first = first or result
            try:
                await consumer.negative_acknowledge(msg)
            except QuasarError:
                pass
    if first is not None:
        raise first


async def _ack_and_produce(
    shared: _Shared,
    producers: list[aio.Producer],
    received: list[tuple[aio.Consumer, aio.Message]],
    txn: aio.Transaction,
) -> tuple[float | None, float | None]:
    """The transaction's acks and sends, in flight together (pulsar-perf issues
    ``acknowledgeAsync`` and ``sendAsync`` and waits for all of them before the end).

    Returns the ack and send phase latencies in µs (None for a phase with nothing to
    do). Raises the first failure once both phases are over.
    """

    async def timed(phase: Coroutine[Any, Any, None]) -> float:
        started = time.monotonic()
        await phase
        return (time.monotonic() - started) * 1e6

    if not received:
        # Produce-only: one phase, awaited in place (no task per transaction).
        return None, await timed(_produce(shared, producers, txn))
    if not producers:
        return await timed(_ack_in_txn(received, txn)), None
    ack = asyncio.ensure_future(timed(_ack_in_txn(received, txn)))
    send = asyncio.ensure_future(timed(_produce(shared, producers, txn)))
    await asyncio.wait([ack, send])
    for phase in (ack, send):
        if phase.exception() is not None:
            raise phase.exception()  # type: ignore[misc]
    return ack.result(), send.result()


async def _abort_quietly(txn: aio.Transaction) -> None:
    if txn.state() is TransactionState.OPEN:
        try:
            await txn.abort()
        except QuasarError:
            pass


async def _worker(shared: _Shared, producers: list[aio.Producer]) -> None:
    """One loop of transactions; ``producers``: this worker's, one per output topic."""
    opts, control, recorder = shared.opts, shared.control, shared.recorder
    client = shared.client
    clock = time.monotonic
    use_txn = not opts.txn_disable
    size = opts.size
    while not control.stopped and control.claim():
        abort = shared.choose_abort()
        txn: aio.Transaction | None = None
        received: list[tuple[aio.Consumer, aio.Message]] = []
        t0 = clock()
        open_us: float | None = None
        ack_us: float | None = None
        send_us: float | None = None
        try:
            if use_txn:
                txn = await client.new_transaction(timeout_ms=opts.txn_timeout_ms)
                open_us = (clock() - t0) * 1e6
            for consumer in shared.consumers:
                for _ in range(opts.messages_consumed):
                    received.append((consumer, await _receive(shared, consumer)))
            if txn is not None:
                ack_us, send_us = await _ack_and_produce(
                    shared, producers, received, txn
                )
            else:
                for consumer, msg in received:
                    await consumer.acknowledge(msg)
                if producers:
                    ts = clock()
                    await _produce(shared, producers, None)
                    send_us = (clock() - ts) * 1e6
            t1 = clock()
            if txn is not None:
                if abort:
                    await txn.abort()
                else:
                    await txn.commit()
            now = clock()
        except _Stopped:
            shared.abandoned += 1
            if txn is not None:
                await _abort_quietly(txn)
            return
        except AlreadyClosed:
            return
        except QuasarError as exc:
            recorder.error(exc, clock())
            if txn is not None:
                await _abort_quietly(txn)
            continue
        recorder.record(
            committed=not abort,
            txn_us=(now - t0) * 1e6,
            end_us=(now - t1) * 1e6 if txn is not None else None,
            open_us=open_us,
            ack_us=ack_us,
            send_us=send_us,
            produced=shared.produced_per_txn,
            consumed=shared.consumed_per_txn,
            produced_bytes=shared.produced_per_txn * size,
            now=now,
        )


async def _watch_input(shared: _Shared, timeout_s: float) -> None:
    """Stop the run (and give up waiting) once no input has come for ``timeout_s``.

    Runs until the workers end: after the -ntxn budget is claimed, the workers still
    finishing their transactions may be the ones waiting for input.
    """
    while True:
        await asyncio.sleep(IDLE_CHECK_S)
        if time.monotonic() - shared.last_input > timeout_s:
            shared.control.stop(f"no input for {timeout_s:g} s")
            shared.abandon = True
            return


async def _prefill(
    client: aio.Client, topics: list[str], count: int, payload: bytes, stream: TextIO
) -> float:
    """Publish ``count`` messages to each topic (batched, no transaction); seconds."""
    t0 = time.monotonic()
    for topic in topics:
        print(f"prefilling {topic} with {count:,} messages", file=stream, flush=True)
        producer = await client.create_producer(
            topic,
            block_if_queue_full=True,
            max_pending_messages=5000,
            batching_enabled=True,
            batching_max_messages=1000,
            batching_max_publish_delay_ms=1,
        )
        failed: list[BaseException] = []

        def on_receipt(
            err: BaseException | None,
            _mid: Any,
            failed: list[BaseException] = failed,
        ) -> None:
            if err is not None and not failed:
                failed.append(err)

        for _ in range(count):
            await producer.send_async(payload, on_receipt)
        await producer.flush()
        await producer.close()
        if failed:
            raise failed[0]
    return time.monotonic() - t0


def _stop_event(control: RunControl) -> asyncio.Event:
    loop = asyncio.get_running_loop()
    event = asyncio.Event()

    def wake() -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    control.on_stop(wake)
    try:
        loop.add_signal_handler(signal.SIGINT, control.stop, "interrupted")
    except (RuntimeError, ValueError):  # not the main thread
        pass
    return event


async def _drive(
    opts: TransactionOptions,
    inputs: list[str],
    outputs: list[str],
    subscription: str,
    recorder: TxnRecorder,
    control: RunControl,
    reporter: TxnReporter,
    info: dict[str, Any],
    stream: TextIO,
) -> float:
    """Set up, run the workers until the run stops; the CPU time at the end."""
    stopped = _stop_event(control)
    use_txn = not opts.txn_disable
    client = aio.Client(
        opts.service_url,
        operation_timeout_seconds=opts.operation_timeout_s,
        enable_transaction=use_txn,
    )
    try:
        consumers = [
            await client.subscribe(
                topic,
                subscription,
                consumer_type=_SUBSCRIPTION_TYPES[opts.subscription_type],
                receiver_queue_size=opts.receiver_queue_size,
                initial_position=InitialPosition[opts.subscription_position],
                negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
            )
            for topic in inputs
        ]
        producers = [
            [
                await client.create_producer(topic, **producer_settings(opts))
                for topic in outputs
            ]
            for _ in range(opts.concurrency)
        ]
        prefill = opts.prefill_count() if inputs else 0
        seconds = 0.0
        if prefill:
            seconds = await _prefill(
                client, inputs, prefill, make_payload(opts.size), stream
            )
        info["prefill"] = {"messages": prefill, "seconds": round(seconds, 3)}
        if use_txn:
            # Discover and connect the coordinators before the clock starts.
            txn = await client.new_transaction(timeout_ms=opts.txn_timeout_ms)
            await txn.abort()
            info["setup_transactions"] = 1
        shared = _Shared(opts, client, consumers, len(outputs), recorder, control)
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        shared.last_input = start
        reporter.begin(start)
        worker: Callable[[_Shared, list[aio.Producer]], Coroutine[Any, Any, None]]
        if opts.txn_interval_ms > 0:
            worker = baseline_lane if opts.txn_disable else interval_lane
        else:
            worker = _worker
        tasks = [loop.create_task(worker(shared, own)) for own in producers]
        watcher = None
        if consumers and opts.input_idle_timeout_s > 0:
            watcher = loop.create_task(_watch_input(shared, opts.input_idle_timeout_s))
        # Workers also end on their own (errors that stop the loop, a closed client).
        all_done = loop.create_task(asyncio.wait(tasks))
        stop_wait = loop.create_task(stopped.wait())
        await asyncio.wait([all_done, stop_wait], return_when=asyncio.FIRST_COMPLETED)
        control.stop(control.reason or "workers finished")
        if control.reason != BUDGET_USED:
            shared.abandon = True
        grace = (opts.txn_timeout_ms + opts.send_timeout_ms) / 1000.0 + 5.0
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for extra in (watcher, all_done, stop_wait):
            if extra is not None:
                extra.cancel()
        cpu_end = time.process_time()
        info["abandoned_transactions"] = shared.abandoned
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return cpu_end
    finally:
        await _close(client)


def run_transaction(
    opts: TransactionOptions,
    *,
    stream: TextIO | None = None,
    on_context: Callable[[RunControl], None] | None = None,
) -> dict[str, Any]:
    """Run as ``opts`` says and return the summary.

    Raises:
        ValueError: ``validate(opts)`` refuses the options.
        AdminError, ConnectError, Timeout: creating partitioned topics failed.
        QuasarError: the client could not subscribe, create producers or open the
            set-up transaction.
    """
    problem = validate(opts)
    if problem is not None:
        raise ValueError(problem)
    out = stream if stream is not None else sys.stderr
    tag = uuid.uuid4().hex[:10]
    inputs: list[str] = []
    if opts.messages_consumed > 0:
        inputs = list(opts.input_topics) or [f"perf-txn-in-{tag}"]
    outputs: list[str] = []
    if opts.messages_produced > 0 or opts.txn_interval_ms > 0:
        outputs = list(opts.output_topics) or [f"perf-txn-out-{tag}"]
    subscription = opts.subscription or f"perf-txn-sub-{tag}"
    if opts.partitions > 0:
        from quasar.perf.run import create_partitioned_topics

        fresh = (inputs if opts.fresh_input else []) + (
            outputs if not opts.output_topics else []
        )
        create_partitioned_topics(opts.admin_url, fresh, opts.partitions)

    recorder = TxnRecorder()
    control = RunControl(opts.num_transactions or None)
    if on_context is not None:
        on_context(control)
    reporter = TxnReporter(
        "no-txn" if opts.txn_disable else "txn",
        recorder,  # type: ignore[arg-type]
        control,
        warmup_s=opts.warmup_s,
        time_s=opts.time_s,
        interval_s=opts.interval_s,
        stream=out,
    )
    info: dict[str, Any] = {
        "input_topics": inputs,
        "output_topics": outputs,
        "subscription": subscription if inputs else None,
        "warmup_s": opts.warmup_s,
        "config": {
            "messages_produced": opts.messages_produced,
            "messages_consumed": opts.messages_consumed,
            "txn_interval_ms": opts.txn_interval_ms,
            "rate": opts.rate,
            "num_transactions": opts.num_transactions,
            "concurrency": opts.concurrency,
            "txn_timeout_ms": opts.txn_timeout_ms,
            "abort_ratio": opts.abort_ratio,
            "seed": opts.seed,
            "size": opts.size,
            "time_s": opts.time_s,
            "partitions": opts.partitions,
            "subscription_type": opts.subscription_type,
            "batching": opts.batching,
            "batch_max_messages": opts.batch_max_messages,
            "batch_max_delay_ms": opts.batch_max_delay_ms,
        },
    }
    cpu0 = time.process_time()
    t0 = time.monotonic()
    reporter.start()
    cpu_end: float | None = None
    try:
        cpu_end = _run_and_return(
            _drive(
                opts, inputs, outputs, subscription, recorder, control, reporter, info, out
            )
        )
    finally:
        try:
            control.stop(control.reason or "finished")
        finally:
            reporter.finish()
    recorder.fold()
    started = reporter.started_at or t0
    end = recorder.last_time if recorder.last_time is not None else time.monotonic()
    return build_txn_summary(
        recorder=recorder,
        run_seconds=max(0.0, end - started),
        cpu_seconds=(cpu_end if cpu_end is not None else time.process_time()) - cpu0,
        window_cpu_end=cpu_end if cpu_end is not None else time.process_time(),
        info=info,
        stopped_by="transaction limit reached"
        if control.reason == BUDGET_USED
        else control.reason,
        transactions_enabled=not opts.txn_disable,
    )


def _run_and_return(coro: Any) -> float:
    box: list[float] = []

    async def wrapper() -> None:
        box.append(await coro)

    _run(wrapper())
    return box[0]


def main_transaction(opts: TransactionOptions) -> int:
    """The ``quasar perf transaction`` command: run, print, write JSON; exit status.

    0: done (errors, if any, are in the summary); 1: nothing succeeded and there were
    errors; 2: options that cannot run.
    """
    problem = validate(opts)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    summary = run_transaction(opts)
    print(format_txn_summary(summary))
    sys.stdout.flush()
    if opts.json_path:
        write_json(opts.json_path, summary)
    if summary["errors"] and not summary["transactions"]:
        return 1
    return 0
