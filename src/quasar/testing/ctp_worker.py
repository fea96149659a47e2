"""A consume-transform-produce worker process for kill -9 tests.

Run as ``python -m quasar.testing.ctp_worker --url ... --input A --input B --output
OUT --history FILE --incarnation N``. It loops until SIGTERM:

1. receive (briefly) one message from each input topic (Shared subscription);
2. in one transaction: for each message, produce ``out:<input>:<txn key>`` to the
   output partition of that input's index (input 0 -> partition 0, ...), then ack
   the message; commit;
3. if the transaction did not commit for certain, ask the broker to redeliver what
   this consumer holds unacknowledged (what the commit acked stays acked; what an
   abort released comes back) and go on.

Before each step it appends a JSON line to the history file, flushed at once, so a
worker killed with SIGKILL at any moment has recorded everything it may have done:
``recv`` (an input received), ``begin`` (with the coordinator's TxnID), ``write``
(before the send), ``ack`` (before the ack) and ``acked`` (its answer), ``end`` (what
the commit told it: committed, aborted or unknown) and ``redeliver``. Each line
carries ``t``, the host's monotonic clock, so that the test can merge the lines of
all incarnations with its own kill times.
A transaction with no ``end`` line was cut by the kill; its outcome is unknown.
:func:`load_history` replays such files into a :class:`~quasar.testing.history.History`.

Messages are never re-sent in a new transaction after an unknown outcome: the broker
decides, and a client that cannot tell must report the outcome as unknown.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import quasar.client as qc
from quasar.client.exceptions import (
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.errors import QuasarError
from quasar.testing.history import History, Outcome

log = logging.getLogger("ctp_worker")

RECEIVE_MS = 100
# Sleep between attempts while the broker is unreachable (a retry interval, not a
# wait for an event).
RETRY_INTERVAL_S = 0.1


def output_value(input_id: str, txn_key: str) -> str:
    return f"out:{input_id}:{txn_key}"


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.inc = args.incarnation
        self.stop = False
        self._history: IO[str] = open(args.history, "a", buffering=1)  # noqa: SIM115
        self.client = qc.Client(
            args.url, enable_transaction=True,
            operation_timeout_seconds=args.operation_timeout_s,
        )
        self.consumers = [
            self.client.subscribe(
                topic, args.subscription, consumer_type=qc.ConsumerType.Shared,
                initial_position=qc.InitialPosition.Earliest,
            )
            for topic in args.input
        ]
        partitions = self.client.get_topic_partitions(args.output)
        self.partitions = sorted(partitions)
        self.producers = [self.client.create_producer(p) for p in self.partitions]
        self.seq = [0] * len(self.producers)
        self.count = 0

    def record(self, **fields: Any) -> None:
        # time.monotonic() is CLOCK_MONOTONIC, shared by the processes of one host:
        # the test merges these lines with its own kill times by it.
        fields["t"] = time.monotonic()
        self._history.write(json.dumps(fields, sort_keys=True) + "\n")
        self._history.flush()

    def run(self) -> None:
        self.record(op="start", inc=self.inc)
        held: list[tuple[int, Any]] = []  # received, no transaction tried yet
        while not self.stop:
            for i, consumer in enumerate(self.consumers):
                if any(j == i for j, _ in held):
                    continue
                try:
                    msg = consumer.receive(RECEIVE_MS)
                    self.record(
                        op="recv", id=msg.data().decode(), msg_id=str(msg.message_id())
                    )
                    held.append((i, msg))
                except qc.Timeout:
                    pass
                except QuasarError as exc:
                    log.info("receive: %r", exc)
                    time.sleep(RETRY_INTERVAL_S)
            if not held or self.stop:
                continue
            try:
                txn = self.client.new_transaction(timeout_ms=self.args.txn_timeout_ms)
            except QuasarError as exc:
                log.info("new transaction: %r", exc)
                time.sleep(RETRY_INTERVAL_S)
                continue  # keep ``held`` for the next attempt
            self.process(txn, held)
            held = []
        self.record(op="stop", inc=self.inc)
        self.client.close()

    def process(self, txn: Any, messages: list[tuple[int, Any]]) -> None:
        self.count += 1
        key = f"w{self.inc}-{self.count}"
        self.record(op="begin", txn=key, txn_id=list(txn.id))
        outcome = Outcome.UNKNOWN
        try:
            for i, msg in messages:
                input_id = msg.data().decode()
                value = output_value(input_id, key)
                p = i % len(self.producers)
                self.record(
                    op="write", txn=key, value=value, partition=self.partitions[p],
                    source=input_id, producer=f"w{self.inc}-p{p}", seq=self.seq[p],
                )
                self.seq[p] += 1
                self.producers[p].send(value.encode(), txn=txn)
                self.record(op="ack", txn=key, id=input_id)
                self.consumers[i].acknowledge(msg, txn=txn)
                self.record(op="acked", txn=key, id=input_id)
            txn.commit()
            outcome = Outcome.COMMITTED
        except TransactionHasOperationFailed:
            if txn.state() == qc.TransactionState.ABORTED:
                outcome = Outcome.ABORTED
        except TransactionOutcomeUnknown as exc:
            log.info("%s: %r", key, exc)
        except QuasarError as exc:
            # A send or ack raised: nothing was committed, so abort (best effort).
            log.info("%s: %r; aborting", key, exc)
            try:
                txn.abort()
                outcome = Outcome.ABORTED
            except QuasarError as abort_exc:
                log.info("%s: abort: %r", key, abort_exc)
        self.record(op="end", txn=key, outcome=outcome.value)
        if outcome is not Outcome.COMMITTED:
            self.record(op="redeliver")
            for consumer in self.consumers:
                try:
                    consumer.redeliver_unacknowledged_messages()
                except QuasarError as exc:
                    log.info("redeliver: %r", exc)


def load_history(
    history: History,
    paths: Iterable[Path],
    subscription: str,
    disruptions: Iterable[tuple[float, str]] = (),
) -> dict[str, list[int]]:
    """Replay worker history files into ``history``; returns TxnIDs by txn key.

    Lines of all files and the test's own ``disruptions`` (``(time.monotonic(),
    what)``: kills and restarts) are merged in time order. A torn last line (the
    worker was killed while writing it) is skipped.
    """
    events: list[tuple[float, int, dict[str, Any]]] = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append((e.get("t", 0.0), len(events), e))
    for t, what in disruptions:
        events.append((t, len(events), {"op": "disruption", "what": what}))
    events.sort(key=lambda x: (x[0], x[1]))
    txn_ids: dict[str, list[int]] = {}
    for _, _, e in events:
        op = e.get("op")
        if op == "begin":
            history.begin(e["txn"])
            txn_ids[e["txn"]] = e["txn_id"]
        elif op == "write":
            history.write(
                e["txn"], e["value"], partition=e["partition"], source=e["source"],
                producer=e["producer"], seq=e["seq"],
            )
        elif op == "ack":
            history.ack(e["txn"], e["id"], subscription)
        elif op == "acked":
            history.ack_done(e["txn"], e["id"], subscription)
        elif op == "end":
            history.end(e["txn"], Outcome(e["outcome"]))
        elif op == "recv":
            history.delivered(e["id"], subscription, final=False)
        elif op == "redeliver":
            history.disruption("worker asked for redelivery")
        elif op == "disruption":
            history.disruption(e["what"])
    return txn_ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--input", action="append", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--subscription", default="ctp")
    parser.add_argument("--history", required=True)
    parser.add_argument("--incarnation", type=int, required=True)
    parser.add_argument("--txn-timeout-ms", type=int, default=5000)
    parser.add_argument("--operation-timeout-s", type=int, default=10)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s w{args.incarnation} %(name)s %(message)s",
    )
    worker = Worker(args)

    def on_term(signum: int, frame: Any) -> None:
        worker.stop = True

    signal.signal(signal.SIGTERM, on_term)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
