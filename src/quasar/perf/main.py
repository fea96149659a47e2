"""``quasar perf``: the load generator's command line (``main(argv) -> int``).

    quasar perf produce [-r RATE] [-s SIZE] [-m N] [-t SECONDS] [-n PRODUCERS]
                        [-p PARTITIONS] [--batching|--no-batching] [-bm N] [-bd MS]
                        [-bb BYTES] [-o MAX_PENDING] [--client quasar|pulsar]
                        [--warmup SECONDS] [--json FILE] TOPIC [TOPIC ...]
    quasar perf consume [-ss SUB] [-st TYPE] [-sp POSITION] [-n CONSUMERS] [-q SIZE]
                        [-m N] [-t SECONDS] [--client ...] [--json FILE] TOPIC ...
    quasar perf pubsub  (produce options, plus -ss/-st/-q/-nc) [TOPIC ...]
    quasar perf transaction [-nmp N] [-nmc N] [-ntxn N] [-c IN_FLIGHT] [-tto MS]
                        [--abort-ratio R] [--seed S] [--txn-disable] [--prefill N]
                        [--input TOPIC]... [--output TOPIC]... [-s SIZE] [-t SECONDS]
                        [--warmup SECONDS] [--json FILE]   (see quasar.perf.transaction)
    quasar perf sink    [--host H] [--port P]   a null broker, for baselines

Progress lines go to stderr every ``--interval`` seconds; the summary goes to stdout
(and to ``--json FILE``). Exit status: 0 done, 1 the run failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from quasar.errors import QuasarError
from quasar.perf.options import (
    PubSubOptions,
    add_messaging_parsers,
    add_sink_parser,
    consume_options,
    produce_options,
)
from quasar.perf.summary import format_summary, write_json
from quasar.perf.txn_options import add_transaction_parser

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """``quasar perf`` and its commands, in the order ``--help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="quasar perf",
        description="Load generator for Pulsar-protocol brokers (like pulsar-perf). "
        "Progress goes to stderr every interval; the summary to stdout.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_messaging_parsers(sub)
    add_transaction_parser(sub)
    add_sink_parser(sub)
    return parser


def _report(summary: dict[str, Any], json_path: str | None) -> int:
    failed = False
    if summary.get("mode") == "pubsub":
        for role in ("produce", "consume"):
            part = summary[role]
            if "error" in part:
                print(f"{role}: error: {part['error']}", file=sys.stderr)
                failed = True
            else:
                print(format_summary(part))
    else:
        print(format_summary(summary))
    sys.stdout.flush()
    if json_path:
        write_json(json_path, summary)
    return 1 if failed else 0


def _run(ns: argparse.Namespace) -> int:
    if ns.command == "produce":
        from quasar.perf.run import run_produce

        return _report(run_produce(produce_options(ns)), ns.json_path)
    if ns.command == "consume":
        from quasar.perf.run import run_consume

        return _report(run_consume(consume_options(ns)), ns.json_path)
    if ns.command == "pubsub":
        from quasar.perf.pubsub import run_pubsub, unique_names

        topic, subscription = unique_names()
        if not ns.topics:
            ns.topics = [topic]
        produce = produce_options(ns)
        consume = consume_options(ns, default_subscription=subscription)
        produce.client = ns.producer_client or ns.client
        consume.client = ns.consumer_client or ns.client
        # The consumer stops when it has what the producer published (or drains).
        consume.num_messages = 0
        consume.time_s = 0.0
        consume.json_path = None
        produce.json_path = None
        popts = PubSubOptions(produce, consume, ns.drain_timeout_s, ns.json_path)
        return _report(run_pubsub(popts), ns.json_path)
    if ns.command == "transaction":
        from quasar.perf.transaction import main_transaction
        from quasar.perf.txn_options import transaction_options

        return main_transaction(transaction_options(ns))
    if ns.command == "sink":
        from quasar.perf.sink import serve

        return serve(ns.host, ns.port)
    raise AssertionError(ns.command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``quasar perf`` with ``argv`` (default ``sys.argv[1:]``); the exit status."""
    parser = build_parser()
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, or a usage error (already printed)
        return int(exc.code or 0)
    try:
        return _run(ns)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    except Exception as exc:  # a run that could not start: say why, briefly
        known: tuple[type[BaseException], ...] = (
            QuasarError,
            OSError,
            RuntimeError,
        )
        try:
            import pulsar

            known = (*known, pulsar.PulsarException)
        except ImportError:
            pass
        if isinstance(exc, known):
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    raise SystemExit(main())
