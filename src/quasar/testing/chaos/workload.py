"""A chaos worker process: one producer or one consumer, recording every step.

Run as ``python -m quasar.testing.chaos.workload --url URL --topic T --name NAME
--role ROLE --seed N --history FILE --incarnation N [--subscription-type TYPE]
[--operations N] [--txn-timeout-ms N]``; it runs until its operation budget is spent
(producers) or SIGTERM.

* ``producer``: keyed sends outside transactions (``send`` before, ``send_ok`` or
  ``send_fail`` after);
* ``txn-producer``: transactions of 1-3 keyed sends, then commit, abort, or
  abandon (left to the coordinator's timeout); a commit whose answer is lost is
  asked again with ``resume_transaction`` until a definite answer (an idempotent
  retry), and some committed transactions are asked to commit once more, which
  must answer OK again;
* ``consumer``: receives on one subscription (Shared, KeyShared, Failover or
  Exclusive) and acks each message plainly or inside a transaction it commits or
  aborts (after an abort it asks for redelivery);
* ``compacted-reader``: reads each partition in turn with a ``read_compacted``
  reader from the earliest position to the end, one pass after another
  (``compacted_reader.py``).

Values are ``NAME.INCARNATION.N``, unique across restarts. The seed drives every
choice, so one seed gives one sequence of decisions (see ``schedule.py``).
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import quasar.client as qc
from quasar.client.exceptions import (
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.errors import InvalidTxnStatus, QuasarError, Timeout
from quasar.testing.chaos.compacted_reader import read_pass
from quasar.testing.chaos.recorder import Recorder

log = logging.getLogger("chaos.workload")

KEYS = 8
RECEIVE_MS = 200
# Sleep after a failed request while the broker is unreachable: a retry interval,
# not a wait for an event.
RETRY_INTERVAL_S = 0.2
COMMIT_RETRIES = 10
SENTINEL_PREFIX = "S-"
# Pause between two compacted passes, so that re-reading does not crowd out the
# workload on a small machine.
PASS_INTERVAL_S = 0.3


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed * 1000 + args.incarnation)
        self.rec = Recorder(Path(args.history), args.name, args.incarnation)
        self.stop = False
        self.ops = 0
        self.next_send = 0.0
        self.prefix = f"{args.name}.{args.incarnation}"
        self.client = qc.Client(
            args.url, enable_transaction=True,
            operation_timeout_seconds=args.operation_timeout_s,
            client_name=f"chaos-{self.prefix}",
        )

    def op(self, name: str, **fields: Any) -> None:
        self.ops += 1
        self.rec.record(name, **fields)

    def until_done(self, what: str, create: Any) -> Any:
        """``create()``, asked again while the broker is unreachable (a worker may
        start while the broker is down or paused); None once told to stop."""
        while not self.stop:
            try:
                return create()
            except QuasarError as exc:
                log.info("%s: %r", what, exc)
                time.sleep(RETRY_INTERVAL_S)
        return None

    def budget_left(self) -> bool:
        return not self.stop and (self.args.operations <= 0 or self.ops < self.args.operations)

    # ------------------------------------------------------------------ producers

    def run_producer(self, transactional: bool) -> None:
        producer = self.until_done("create producer", lambda: self.client.create_producer(
            self.args.topic, producer_name=f"chaos-{self.prefix}", batching_enabled=False,
            send_timeout_millis=self.args.operation_timeout_s * 1000,
        ))
        self.rec.record("ready")
        seq = 0
        while self.budget_left():
            if not transactional:
                self.send(producer, seq, None, None)
                seq += 1
                continue
            try:
                txn = self.client.new_transaction(timeout_ms=self.args.txn_timeout_ms)
            except QuasarError as exc:
                log.info("new transaction: %r", exc)
                time.sleep(RETRY_INTERVAL_S)
                continue
            key = f"{self.prefix}.T{seq}"
            self.op("begin", txn=key, txn_id=list(txn.id),
                    timeout_s=self.args.txn_timeout_ms / 1000)
            ok = True
            for _ in range(self.rng.randint(1, 3)):
                ok = self.send(producer, seq, txn, key) and ok
                seq += 1
            action = self.rng.choices(["commit", "abort", "abandon"], [75, 15, 10])[0]
            if not ok:
                action = "abort"
            self.end(txn, key, action)

    def send(self, producer: Any, seq: int, txn: Any, txn_key: str | None) -> bool:
        # Paced, so that the consumers (slower: each message is received and acked
        # on four subscriptions) keep up and a stall is not mistaken for a backlog.
        # A rate of 0 sends as fast as the broker answers (the unpaced form that
        # loads the dispatch path hardest, with a backlog when a fault heals).
        if self.args.send_rate > 0:
            wait = self.next_send - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.next_send = max(self.next_send, time.monotonic()) + 1.0 / self.args.send_rate
        value = f"{self.prefix}.{seq}"
        k = f"k{self.rng.randrange(KEYS)}"
        self.op("send", value=value, key=k, seq=seq, producer=self.prefix, txn=txn_key)
        try:
            producer.send(value.encode(), partition_key=k, txn=txn)
        except QuasarError as exc:
            self.rec.record("send_fail", value=value, error=repr(exc))
            time.sleep(RETRY_INTERVAL_S)
            return False
        self.rec.record("send_ok", value=value)
        return True

    def end(self, txn: Any, key: str, action: str) -> None:
        if action == "abandon":
            self.op("abandon", txn=key)
            return
        if action == "abort":
            self.op("abort", txn=key)
            try:
                txn.abort()
                self.rec.record("end", txn=key, outcome="aborted")
            except QuasarError as exc:
                log.info("%s abort: %r", key, exc)
                self.rec.record("end", txn=key, outcome="unknown")
            return
        self.op("committing", txn=key)
        outcome = self.commit(txn, key)
        self.rec.record("end", txn=key, outcome=outcome)
        if outcome == "committed" and self.rng.random() < 0.1:
            # Ask again as if the answer had been lost: the same outcome, again.
            self.op("commit_retry", txn=key)
            self.rec.record("end", txn=key, outcome=self.commit_again(txn.id, key))

    def commit(self, txn: Any, key: str) -> str:
        try:
            txn.commit()
            return "committed"
        except TransactionHasOperationFailed:
            return "aborted"
        except TransactionOutcomeUnknown as exc:
            log.info("%s commit: %r", key, exc)
            self.op("commit_retry", txn=key)
            return self.commit_again(exc.txn_id or txn.id, key)
        except InvalidTxnStatus as exc:
            # Timed out before the commit: a definite abort.
            log.info("%s commit: %r", key, exc)
            return "aborted"
        except QuasarError as exc:
            log.info("%s commit: %r", key, exc)
            return "unknown"

    def commit_again(self, txn_id: Any, key: str) -> str:
        for _ in range(COMMIT_RETRIES):
            if self.stop:
                break
            try:
                self.client.resume_transaction(txn_id).commit()
                return "committed"
            except TransactionOutcomeUnknown as exc:
                log.info("%s commit retry: %r", key, exc)
                time.sleep(RETRY_INTERVAL_S)
            except InvalidTxnStatus as exc:
                # Refused: it ended the other way (aborted by its timeout).
                log.info("%s commit retry: %r", key, exc)
                return "aborted"
            except QuasarError as exc:
                log.info("%s commit retry: %r", key, exc)
                return "unknown"
        return "unknown"

    # ------------------------------------------------------------------ consumers

    def run_consumer(self) -> None:
        sub_type = self.args.subscription_type
        subscription = f"chaos-{sub_type}"
        consumer = self.until_done("subscribe", lambda: self.client.subscribe(
            self.args.topic, subscription,
            consumer_type=getattr(qc.ConsumerType, sub_type),
            initial_position=qc.InitialPosition.Earliest,
        ))
        self.rec.record("ready")
        count = 0
        while not self.stop:
            try:
                msg = consumer.receive(RECEIVE_MS)
            except Timeout:
                continue
            except QuasarError as exc:
                log.info("receive: %r", exc)
                time.sleep(RETRY_INTERVAL_S)
                continue
            mid = msg.message_id()
            value = msg.data().decode()
            self.op("recv", value=value, sub=subscription, partition=msg.topic_name(),
                    position=[mid.ledger_id(), mid.entry_id(), mid.batch_index()])
            count += 1
            if value.startswith(SENTINEL_PREFIX) or self.rng.random() < 0.7:
                self.plain_ack(consumer, msg, value)
            else:
                self.txn_ack(consumer, msg, value, f"{self.prefix}.A{count}")

    def plain_ack(self, consumer: Any, msg: Any, value: str) -> None:
        self.op("ack", value=value)
        try:
            consumer.acknowledge(msg)
            self.rec.record("ack_done", value=value)
        except QuasarError as exc:
            log.info("ack: %r", exc)

    def txn_ack(self, consumer: Any, msg: Any, value: str, key: str) -> None:
        try:
            txn = self.client.new_transaction(timeout_ms=self.args.txn_timeout_ms)
        except QuasarError as exc:
            log.info("new transaction: %r", exc)
            consumer.redeliver_unacknowledged_messages()
            return
        self.op("begin", txn=key, txn_id=list(txn.id),
                timeout_s=self.args.txn_timeout_ms / 1000)
        self.op("ack", value=value, txn=key)
        outcome = "unknown"
        try:
            consumer.acknowledge(msg, txn=txn)
            self.rec.record("ack_done", value=value, txn=key)
            if self.rng.random() < 0.8:
                self.op("committing", txn=key)
                outcome = self.commit(txn, key)
            else:
                self.op("abort", txn=key)
                txn.abort()
                outcome = "aborted"
        except QuasarError as exc:
            log.info("%s: %r", key, exc)
        self.rec.record("end", txn=key, outcome=outcome)
        if outcome != "committed":
            # What the transaction acked comes back only when asked for.
            try:
                consumer.redeliver_unacknowledged_messages()
            except QuasarError as exc:
                log.info("redeliver: %r", exc)

    # ------------------------------------------------------------------ compacted reads

    def run_compacted_reader(self) -> None:
        partitions = self.until_done(
            "partitions", lambda: self.client.get_topic_partitions(self.args.topic)
        )
        self.rec.record("ready")
        n = 0
        while not self.stop and partitions:
            partition = partitions[n % len(partitions)]
            read_pass(self.client, partition, self.rec, f"{self.prefix}.P{n}",
                      stopping=lambda: self.stop)
            n += 1
            time.sleep(PASS_INTERVAL_S)

    def run(self) -> None:
        self.rec.record("start")
        try:
            if self.args.role == "consumer":
                self.run_consumer()
            elif self.args.role == "compacted-reader":
                self.run_compacted_reader()
            else:
                self.run_producer(self.args.role == "txn-producer")
        finally:
            self.rec.record("stop", ops=self.ops)
            self.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--role", required=True, choices=[
        "producer", "txn-producer", "consumer", "compacted-reader",
    ])
    parser.add_argument("--subscription-type")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--history", required=True)
    parser.add_argument("--incarnation", type=int, required=True)
    parser.add_argument("--operations", type=int, default=0, help="0: until SIGTERM")
    parser.add_argument("--txn-timeout-ms", type=int, default=3000)
    parser.add_argument("--send-rate", type=float, default=15.0,
                        help="sends per second at most (0: unpaced)")
    parser.add_argument("--operation-timeout-s", type=int, default=5)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s {args.name}.{args.incarnation} %(message)s",
    )
    worker = Worker(args)

    def on_term(signum: int, frame: Any) -> None:
        worker.stop = True

    signal.signal(signal.SIGTERM, on_term)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
