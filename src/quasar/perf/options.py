"""Command-line options of ``quasar perf`` and the dataclasses the runs take.

Flag names follow ``pulsar-perf`` where it has one (``-r``, ``-s``, ``-m``, ``-t``,
``-n``, ``-p``, ``-bm``, ``-bd``, ``-bb``, ``-ss``, ``-st``, ``-sp``, ``-q``), so a
command line written for one mostly works with the other.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLIENTS",
    "ConsumeOptions",
    "ProduceOptions",
    "PubSubOptions",
    "SUBSCRIPTION_TYPES",
    "add_messaging_parsers",
    "add_sink_parser",
]

CLIENTS = ("quasar", "pulsar")
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
POSITIONS = ("Latest", "Earliest")

DEFAULT_SERVICE_URL = "pulsar://127.0.0.1:6650"
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
# pulsar-perf's and both clients' default for a partitioned producer's pending messages
# over all its partitions.
DEFAULT_MAX_PENDING_ACROSS_PARTITIONS = 50_000


@dataclass
class CommonOptions:
    service_url: str = DEFAULT_SERVICE_URL
    topics: list[str] = field(default_factory=lambda: ["perf-topic"])
    client: str = "quasar"
    num_messages: int = 0  # 0: unlimited
    time_s: float = 0.0  # 0: unlimited; includes the warm-up
    warmup_s: float = 0.0
    interval_s: float = 2.0
    json_path: str | None = None
    operation_timeout_s: float = 30.0


@dataclass
class ProduceOptions(CommonOptions):
    admin_url: str = DEFAULT_ADMIN_URL
    rate: float = 0.0  # msg/s over all producers; 0: as fast as possible
    size: int = 1024
    num_producers: int = 1  # per topic
    partitions: int = 0  # >0: create the topics partitioned first
    batching: bool = True
    batch_max_messages: int = 1000
    batch_max_delay_ms: int = 1
    batch_max_bytes: int = 128 * 1024
    max_pending: int = 0  # 0: no count limit (the client's memory limit applies)
    # On a partitioned topic each partition's producer gets at most this divided by
    # the partitions (and at most max_pending).
    max_pending_across_partitions: int = DEFAULT_MAX_PENDING_ACROSS_PARTITIONS
    send_timeout_ms: int = 30_000


def producer_settings(opts: ProduceOptions | Any) -> dict[str, Any]:
    """``create_producer`` keyword arguments for a load-generating producer.

    Takes any options object with the producer fields (``ProduceOptions`` or the
    transaction mode's options); both clients accept the same names.
    """
    return {
        "block_if_queue_full": True,
        "max_pending_messages": opts.max_pending,
        "max_pending_messages_across_partitions": opts.max_pending_across_partitions,
        "send_timeout_millis": opts.send_timeout_ms,
        "batching_enabled": opts.batching,
        "batching_max_messages": opts.batch_max_messages,
        "batching_max_allowed_size_in_bytes": opts.batch_max_bytes,
        "batching_max_publish_delay_ms": opts.batch_max_delay_ms,
    }


BATCH_RECEIVE_TIMEOUT_MS = 10  # how long batch_receive waits for a batch to fill


@dataclass
class ConsumeOptions(CommonOptions):
    subscription: str = "sub"
    subscription_type: str = "Exclusive"
    subscription_position: str = "Latest"
    num_consumers: int = 1  # per topic
    receiver_queue_size: int = 1000
    # > 0: take messages with the client's batch_receive, up to this many per call
    # (the official client only); 0: one receive() per message.
    batch_receive: int = 0


@dataclass
class PubSubOptions:
    produce: ProduceOptions
    consume: ConsumeOptions
    # How long the consumer keeps waiting without receiving anything once the
    # producer has finished, before giving up on the rest.
    drain_timeout_s: float = 10.0
    json_path: str | None = None


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def _add_common(p: argparse.ArgumentParser, default_topic: bool) -> None:
    p.add_argument(
        "topics",
        nargs="*" if default_topic else "+",
        metavar="TOPIC",
        help="topic names (short names mean persistent://public/default/NAME)",
    )
    p.add_argument(
        "-u",
        "--service-url",
        default=DEFAULT_SERVICE_URL,
        help=f"broker URL; a cluster's brokers may be listed, pulsar://h1:p1,h2:p2 "
        f"(default {DEFAULT_SERVICE_URL})",
    )
    p.add_argument(
        "--client",
        choices=CLIENTS,
        default="quasar",
        help="quasar: quasar.client (asyncio core, uvloop when installed); "
        "pulsar: the official C++-backed pulsar-client (default quasar)",
    )
    p.add_argument(
        "-m",
        "--num-messages",
        metavar="N",
        type=_non_negative_int,
        default=0,
        help="stop after this many messages in total (0: no limit)",
    )
    add_run_options(p)


def _add_produce(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"admin REST URL, used with -p (default {DEFAULT_ADMIN_URL})",
    )
    p.add_argument(
        "-r",
        "--rate",
        metavar="MSG_PER_S",
        type=_non_negative_float,
        default=0.0,
        help="messages per second over all producers; 0 = unbounded (default 0). "
        "Latency counts from each message's scheduled send time",
    )
    p.add_argument(
        "-s",
        "--size",
        type=_non_negative_int,
        default=1024,
        help="payload bytes (default 1024)",
    )
    p.add_argument(
        "-n",
        "--num-producers",
        type=_positive_int,
        default=1,
        help="producers per topic (default 1)",
    )
    p.add_argument(
        "-np",
        "--partitions",
        type=_non_negative_int,
        default=0,
        help="create each topic as a partitioned topic with this many partitions first",
    )
    p.add_argument(
        "--batching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="producer batching (default on)",
    )
    p.add_argument(
        "-bm",
        "--batch-max-messages",
        type=_positive_int,
        default=1000,
        help="messages per batch at most (default 1000)",
    )
    p.add_argument(
        "-bd",
        "--batch-max-delay-ms",
        type=_non_negative_int,
        default=1,
        help="longest a batch stays open, ms (default 1)",
    )
    p.add_argument(
        "-bb",
        "--batch-max-bytes",
        type=_positive_int,
        default=128 * 1024,
        help="bytes per batch at most (default 131072)",
    )
    p.add_argument(
        "-o",
        "--max-pending",
        "--max-outstanding",
        type=_non_negative_int,
        default=0,
        help="messages awaiting a receipt per producer; sends block beyond. 0 (the "
        "default, as in pulsar-perf): no count limit, the client's 64 MiB memory "
        "limit bounds the messages in flight",
    )
    p.add_argument(
        "-p",
        "--max-outstanding-across-partitions",
        dest="max_pending_across_partitions",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_PENDING_ACROSS_PARTITIONS,
        help="messages awaiting a receipt over all partitions of a partitioned "
        "topic, per producer: each partition gets at most N / partitions (and at most "
        f"-o when set). Default {DEFAULT_MAX_PENDING_ACROSS_PARTITIONS:,}, as pulsar-perf",
    )
    p.add_argument(
        "--send-timeout-ms",
        type=_non_negative_int,
        default=30_000,
        help="fail a message not receipted in time (default 30000)",
    )


def _add_consume(p: argparse.ArgumentParser, prefix_sub: bool = False) -> None:
    p.add_argument(
        "-ss",
        "--subscription",
        default=None,
        help="subscription name (default 'sub'; pubsub: a fresh name per run)",
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
        default="Latest",
        help="where a new subscription starts (default Latest)",
    )
    p.add_argument(
        "-q",
        "--receiver-queue-size",
        type=_positive_int,
        default=1000,
        help="messages prefetched per consumer (default 1000)",
    )
    p.add_argument(
        "--batch-receive",
        type=int,
        default=0,
        metavar="N",
        help="take messages with the client's batch_receive(), up to N per call, "
        f"waiting at most {BATCH_RECEIVE_TIMEOUT_MS} ms for a batch to fill; every "
        "message is still handed to the application and acknowledged one by one "
        "(--client pulsar only; default 0: one receive() per message)",
    )
    flag = ["-nc", "--num-consumers"] if prefix_sub else ["-n", "--num-consumers"]
    p.add_argument(
        *flag, type=_positive_int, default=1, help="consumers per topic (default 1)"
    )


def add_messaging_parsers(sub: Any) -> None:
    """The ``produce``, ``consume`` and ``pubsub`` commands (``sub`` is the
    subparsers object of ``quasar perf``)."""
    produce = sub.add_parser(
        "produce", help="publish messages and measure publish latency"
    )
    _add_common(produce, default_topic=False)
    _add_produce(produce)
    consume = sub.add_parser(
        "consume", help="receive messages and measure end-to-end latency"
    )
    _add_common(consume, default_topic=False)
    _add_consume(consume)
    pubsub = sub.add_parser(
        "pubsub",
        help="a producer and a consumer in two processes; reports both",
    )
    _add_common(pubsub, default_topic=True)
    _add_produce(pubsub)
    _add_consume(pubsub, prefix_sub=True)
    pubsub.add_argument(
        "--drain-timeout",
        dest="drain_timeout_s",
        metavar="SECONDS",
        type=_non_negative_float,
        default=10.0,
        help="after the producer finishes, stop the consumer once nothing has "
        "arrived for this many seconds (default 10)",
    )
    pubsub.add_argument(
        "--producer-client",
        choices=CLIENTS,
        default=None,
        help="client of the producer process (default: --client)",
    )
    pubsub.add_argument(
        "--consumer-client",
        choices=CLIENTS,
        default=None,
        help="client of the consumer process (default: --client)",
    )


def add_sink_parser(sub: Any) -> None:
    """The ``sink`` command: a null broker."""
    sink = sub.add_parser(
        "sink",
        help="run a null broker (no storage) to measure the load generator's ceiling",
    )
    sink.add_argument("--host", default="127.0.0.1")
    sink.add_argument("--port", type=int, default=6650)


def _common_kwargs(ns: argparse.Namespace) -> dict[str, object]:
    return {
        "service_url": ns.service_url,
        "topics": list(ns.topics) or ["perf-topic"],
        "client": ns.client,
        "num_messages": ns.num_messages,
        "time_s": ns.time_s,
        "warmup_s": ns.warmup_s,
        "interval_s": ns.interval_s,
        "json_path": ns.json_path,
        "operation_timeout_s": ns.operation_timeout_s,
    }


def produce_options(ns: argparse.Namespace) -> ProduceOptions:
    return ProduceOptions(
        **_common_kwargs(ns),  # type: ignore[arg-type]
        admin_url=ns.admin_url,
        rate=ns.rate,
        size=ns.size,
        num_producers=ns.num_producers,
        partitions=ns.partitions,
        batching=ns.batching,
        batch_max_messages=ns.batch_max_messages,
        batch_max_delay_ms=ns.batch_max_delay_ms,
        batch_max_bytes=ns.batch_max_bytes,
        max_pending=ns.max_pending,
        max_pending_across_partitions=ns.max_pending_across_partitions,
        send_timeout_ms=ns.send_timeout_ms,
    )


def consume_options(
    ns: argparse.Namespace, default_subscription: str = "sub"
) -> ConsumeOptions:
    return ConsumeOptions(
        **_common_kwargs(ns),  # type: ignore[arg-type]
        subscription=ns.subscription or default_subscription,
        subscription_type=ns.subscription_type,
        subscription_position=ns.subscription_position,
        num_consumers=ns.num_consumers,
        receiver_queue_size=ns.receiver_queue_size,
        batch_receive=ns.batch_receive,
    )


def add_run_options(p: argparse.ArgumentParser) -> None:
    """How long a run lasts and how it reports (shared by every perf mode)."""
    p.add_argument(
        "-t",
        "--time",
        dest="time_s",
        metavar="SECONDS",
        type=_non_negative_float,
        default=0.0,
        help="stop after this many seconds, warm-up included (0: no limit)",
    )
    p.add_argument(
        "--warmup",
        dest="warmup_s",
        metavar="SECONDS",
        type=_non_negative_float,
        default=0.0,
        help="seconds at the start excluded from the final figures (default 0)",
    )
    p.add_argument(
        "-i",
        "--interval",
        dest="interval_s",
        metavar="SECONDS",
        type=float,
        default=2.0,
        help="seconds between progress lines on stderr (default 2)",
    )
    p.add_argument(
        "--operation-timeout",
        dest="operation_timeout_s",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="seconds to keep trying to connect, create producers or subscribe (default 30)",
    )
    p.add_argument(
        "--json", dest="json_path", metavar="FILE", help="write the summary as JSON"
    )
