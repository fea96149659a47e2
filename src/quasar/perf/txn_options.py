"""Options of ``quasar perf transaction`` (like ``pulsar-perf transaction``).

Flag names follow ``pulsar-perf transaction`` where it has one: ``-nmp`` / ``-nmc``
(messages produced / consumed per transaction), ``-ntxn`` (transactions in total),
``-tto`` (transaction timeout, in milliseconds here), ``--txn-disable`` (the same
loop without transactions, the built-in baseline), ``-ss`` / ``-st`` / ``-sp`` /
``-q`` for the input subscription. ``--topics-c`` / ``--topics-p`` are accepted as
aliases of ``--input`` / ``--output``.

``--txn-interval-ms N`` switches to produce-only transactions committed every N ms
(Kafka's way of measuring a transactional producer, its ``--transaction-duration-ms``;
see ``quasar.perf.txn_interval``). A transaction then holds what its lane sends in
the interval, so ``-nmp`` and ``-nmc`` (counts per transaction) do not apply: on the
command line they default to 0 in that mode and are refused if given.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from quasar.perf.options import (
    DEFAULT_ADMIN_URL,
    DEFAULT_MAX_PENDING_ACROSS_PARTITIONS,
    DEFAULT_SERVICE_URL,
    POSITIONS,
    SUBSCRIPTION_TYPES,
    _non_negative_float,
    _non_negative_int,
    _positive_int,
    add_run_options,
)

__all__ = [
    "AUTO_PREFILL_TIMED",
    "TransactionOptions",
    "add_transaction_parser",
    "transaction_options",
]

# Messages put in each fresh input topic before a run limited by time only (a run
# limited by -ntxn gets exactly -ntxn x -nmc). At 1 KB, 50,000 messages are 50 MB.
AUTO_PREFILL_TIMED = 50_000


@dataclass
class TransactionOptions:
    service_url: str = DEFAULT_SERVICE_URL
    admin_url: str = DEFAULT_ADMIN_URL
    # Empty: a fresh topic per run (named in the summary).
    input_topics: list[str] = field(default_factory=list)
    output_topics: list[str] = field(default_factory=list)
    partitions: int = 0  # >0: create fresh topics partitioned
    messages_produced: int = 1  # per output topic, per transaction
    messages_consumed: int = 1  # per input topic, per transaction
    # >0: produce-only transactions committed every this many ms (messages_produced
    # and messages_consumed must then be 0).
    txn_interval_ms: int = 0
    # With txn_interval_ms: messages per second over all lanes and outputs (0: as
    # fast as the producers take them).
    rate: float = 0.0
    num_transactions: int = 0  # 0: unlimited
    concurrency: int = 1  # transactions in flight
    txn_timeout_ms: int = 10_000
    abort_ratio: float = 0.0
    seed: int = 0
    txn_disable: bool = False
    size: int = 1024
    time_s: float = 0.0  # 0: unlimited; includes the warm-up
    warmup_s: float = 0.0
    interval_s: float = 2.0
    json_path: str | None = None
    operation_timeout_s: float = 30.0
    # None: automatic (see ``prefill_count``).
    prefill: int | None = None
    input_idle_timeout_s: float = 10.0
    # Input subscription.
    subscription: str | None = None  # None: a fresh name per run
    subscription_type: str = "Exclusive"
    subscription_position: str = "Earliest"
    receiver_queue_size: int = 1000
    # Output producers.
    batching: bool = True
    batch_max_messages: int = 1000
    batch_max_delay_ms: int = 1
    batch_max_bytes: int = 128 * 1024
    max_pending: int = 1000
    max_pending_across_partitions: int = DEFAULT_MAX_PENDING_ACROSS_PARTITIONS
    send_timeout_ms: int = 30_000

    @property
    def fresh_input(self) -> bool:
        return not self.input_topics

    def prefill_count(self) -> int:
        """Messages to publish to each input topic before the run starts.

        Explicit ``--prefill`` wins. Otherwise fresh input topics get what the run
        needs: ``-ntxn x -nmc`` with a transaction budget, else ``AUTO_PREFILL_TIMED``;
        named input topics get nothing (they hold data or are fed from outside).
        """
        if self.prefill is not None:
            return self.prefill
        if self.messages_consumed == 0 or not self.fresh_input:
            return 0
        if self.num_transactions > 0:
            return self.num_transactions * self.messages_consumed
        return AUTO_PREFILL_TIMED


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text}")
    return value


def add_transaction_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``transaction`` subcommand to ``quasar perf``'s subparsers."""
    p = sub.add_parser(
        "transaction",
        help="consume-transform-produce in transactions; txn/s, commit latency",
        description="Each of -c workers loops: open a transaction, receive -nmc "
        "messages from each input topic and acknowledge them in it, publish -nmp "
        "messages to each output topic in it, then commit (or abort, --abort-ratio). "
        "--txn-disable runs the same loop with plain acks and sends.",
    )
    p.add_argument(
        "-u",
        "--service-url",
        default=DEFAULT_SERVICE_URL,
        help=f"broker URL (default {DEFAULT_SERVICE_URL})",
    )
    p.add_argument(
        "--admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"admin REST URL, used with -p (default {DEFAULT_ADMIN_URL})",
    )
    p.add_argument(
        "--input",
        "--topics-c",
        dest="input_topics",
        metavar="TOPIC",
        action="append",
        default=[],
        help="topic to consume from (repeatable; default: a fresh topic, prefilled)",
    )
    p.add_argument(
        "--output",
        "--topics-p",
        dest="output_topics",
        metavar="TOPIC",
        action="append",
        default=[],
        help="topic to produce to (repeatable; default: a fresh topic)",
    )
    p.add_argument(
        "-np",
        "--partitions",
        type=_non_negative_int,
        default=0,
        help="create the fresh input and output topics partitioned (needs --admin-url)",
    )
    p.add_argument(
        "-nmp",
        "--num-messages-produced",
        dest="messages_produced",
        metavar="N",
        type=_non_negative_int,
        default=None,
        help="messages produced to each output topic per transaction (default 1; "
        "not with --txn-interval-ms)",
    )
    p.add_argument(
        "-nmc",
        "--num-messages-consumed",
        dest="messages_consumed",
        metavar="N",
        type=_non_negative_int,
        default=None,
        help="messages consumed (and acked) from each input topic per transaction; "
        "0 = produce only (default 1; 0 with --txn-interval-ms)",
    )
    p.add_argument(
        "--txn-interval-ms",
        dest="txn_interval_ms",
        metavar="MS",
        type=_positive_int,
        default=0,
        help="produce-only transactions committed by time: each of -c lanes sends "
        "continuously into one open transaction and commits it every MS ms, the next "
        "one taking the sends while the commit is in flight (as Kafka's "
        "--transaction-duration-ms); with --txn-disable the same lanes without "
        "transactions",
    )
    p.add_argument(
        "-r",
        "--rate",
        metavar="MSG_PER_S",
        type=_non_negative_float,
        default=0.0,
        help="with --txn-interval-ms: messages per second over all lanes and outputs; "
        "0 = as fast as the producers take them (default 0)",
    )
    p.add_argument(
        "-ntxn",
        "--num-transactions",
        dest="num_transactions",
        metavar="N",
        type=_non_negative_int,
        default=0,
        help="stop after this many transactions in total (0: no limit)",
    )
    p.add_argument(
        "-c",
        "--concurrency",
        metavar="N",
        type=_positive_int,
        default=1,
        help="transactions in flight (workers, each with its own producers; default 1)",
    )
    p.add_argument(
        "-tto",
        "--txn-timeout-ms",
        dest="txn_timeout_ms",
        metavar="MS",
        type=_positive_int,
        default=10_000,
        help="transaction timeout in ms (default 10000)",
    )
    p.add_argument(
        "--abort-ratio",
        metavar="RATIO",
        type=_ratio,
        default=0.0,
        help="fraction of transactions aborted instead of committed, 0.0-1.0 "
        "(deterministic for a --seed; default 0)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the abort choice (default 0)",
    )
    p.add_argument(
        "--txn-disable",
        action="store_true",
        help="the same loop without transactions: plain acks and sends (baseline)",
    )
    p.add_argument(
        "-s", "--size", type=_non_negative_int, default=1024, help="payload bytes (default 1024)"
    )
    add_run_options(p)
    p.add_argument(
        "--prefill",
        metavar="N",
        type=_non_negative_int,
        default=None,
        help="publish N messages to each input topic before the run (default: "
        f"-ntxn x -nmc, or {AUTO_PREFILL_TIMED:,} for a timed run, when the input "
        "topics are fresh; 0 otherwise)",
    )
    p.add_argument(
        "--input-idle-timeout",
        dest="input_idle_timeout_s",
        metavar="SECONDS",
        type=_non_negative_float,
        default=10.0,
        help="stop when no input message has arrived for this long (default 10; 0: never)",
    )
    p.add_argument(
        "-ss",
        "--subscription",
        default=None,
        help="input subscription (default: a fresh name per run)",
    )
    p.add_argument(
        "-st",
        "--subscription-type",
        choices=SUBSCRIPTION_TYPES,
        default="Exclusive",
        help="default Exclusive",
    )
    p.add_argument(
        "-sp",
        "--subscription-position",
        choices=POSITIONS,
        default="Earliest",
        help="where a new input subscription starts (default Earliest)",
    )
    p.add_argument(
        "-q",
        "--receiver-queue-size",
        type=_positive_int,
        default=1000,
        help="messages prefetched per input consumer (default 1000)",
    )
    p.add_argument(
        "--batching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="output producer batching (default on; a batch holds one transaction's "
        "messages)",
    )
    p.add_argument(
        "-bm", "--batch-max-messages", type=_positive_int, default=1000,
        help="messages per batch at most (default 1000)",
    )
    p.add_argument(
        "-bd", "--batch-max-delay-ms", type=_non_negative_int, default=1,
        help="longest a batch stays open, ms (default 1)",
    )
    p.add_argument(
        "-bb", "--batch-max-bytes", type=_positive_int, default=128 * 1024,
        help="bytes per batch at most (default 131072)",
    )
    p.add_argument(
        "-o", "--max-pending", type=_positive_int, default=1000,
        help="messages awaiting a receipt per output producer (default 1000)",
    )
    p.add_argument(
        "--send-timeout-ms", type=_non_negative_int, default=30_000,
        help="fail a message not receipted in time (default 30000)",
    )


def _per_txn_count(given: int | None, txn_interval_ms: int) -> int:
    """-nmp / -nmc as given, else the default of the mode (1, or 0 by time).

    A count given with --txn-interval-ms is kept, so that ``validate`` refuses it
    rather than the run ignoring it.
    """
    if given is not None:
        return given
    return 0 if txn_interval_ms > 0 else 1


def transaction_options(ns: argparse.Namespace) -> TransactionOptions:
    return TransactionOptions(
        service_url=ns.service_url,
        admin_url=ns.admin_url,
        input_topics=list(ns.input_topics),
        output_topics=list(ns.output_topics),
        partitions=ns.partitions,
        messages_produced=_per_txn_count(ns.messages_produced, ns.txn_interval_ms),
        messages_consumed=_per_txn_count(ns.messages_consumed, ns.txn_interval_ms),
        txn_interval_ms=ns.txn_interval_ms,
        rate=ns.rate,
        num_transactions=ns.num_transactions,
        concurrency=ns.concurrency,
        txn_timeout_ms=ns.txn_timeout_ms,
        abort_ratio=ns.abort_ratio,
        seed=ns.seed,
        txn_disable=ns.txn_disable,
        size=ns.size,
        time_s=ns.time_s,
        warmup_s=ns.warmup_s,
        interval_s=ns.interval_s,
        json_path=ns.json_path,
        operation_timeout_s=ns.operation_timeout_s,
        prefill=ns.prefill,
        input_idle_timeout_s=ns.input_idle_timeout_s,
        subscription=ns.subscription,
        subscription_type=ns.subscription_type,
        subscription_position=ns.subscription_position,
        receiver_queue_size=ns.receiver_queue_size,
        batching=ns.batching,
        batch_max_messages=ns.batch_max_messages,
        batch_max_delay_ms=ns.batch_max_delay_ms,
        batch_max_bytes=ns.batch_max_bytes,
        max_pending=ns.max_pending,
        send_timeout_ms=ns.send_timeout_ms,
    )
