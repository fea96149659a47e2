"""The exactly-once sink: streaming (``DataSourceStreamArrowWriter``) and batch writers.

Protocol (``docs/spark.md`` has the long form; the facts it rests on are those of
PySpark's Python data source API for writers):

1. Each task attempt publishes its rows in its own transaction and reports the id
   (:mod:`pyspark_quasar.task_writer`). A failed attempt aborts its own transaction.
2. ``commit(messages, b)`` runs on the driver, in a fresh process, with a fresh writer:
   a. a decision for ``b`` already recorded means a replay: roll it forward by
      committing every recorded transaction again (idempotent), abort the new
      attempt's transactions, done. If the broker says every recorded transaction
      was aborted (it timed out), the decision is dropped and (b) follows; if some
      were committed and some aborted, the batch is partial and the query fails;
   b. otherwise record the decision (the transaction list) durably, then commit each
      transaction (retrying is safe: commit is idempotent);
   c. sweep: abort every open transaction of the sink's client names that is not
      in the decision (failed or speculative attempts, lost commit messages).
3. ``abort(messages, b)``: a recorded decision is never undone (the next run rolls it
   forward); otherwise abort the reported transactions and sweep.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

import quasar.client as qc
from pyspark_quasar.commit_message import QuasarCommitMessage, TaskIdentity, client_name
from pyspark_quasar.decisions import DecisionStore, TxnRecord
from pyspark_quasar.faults import crash_point, fail_point
from pyspark_quasar.options import EXACTLY_ONCE, SinkOptions
from pyspark_quasar.security import admin_ssl_context, client_options
from quasar.client.admin import call_admin
from quasar.client.authentication import Authentication
from quasar.client.client_transactions import ClientTransactions

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


class PartialBatchError(RuntimeError):
    """Some transactions of a recorded batch committed and some were aborted (the
    transaction timeout was shorter than the time to recover): the batch is partly
    written and needs an operator."""


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[QuasarCommitMessage]:
    return [m for m in messages if isinstance(m, QuasarCommitMessage)]


def _txn_key(txn_id: object) -> tuple[int, int]:
    most, least = txn_id  # type: ignore[misc]
    return (int(most), int(least))


class TransactionDriver:
    """The driver's half of the protocol for one sink (a new one per call)."""

    def __init__(self, opts: SinkOptions, store: DecisionStore | None) -> None:
        self.opts = opts
        self.store = store
        options = client_options(opts.conn)
        self._admin_authentication: Authentication | None = options["authentication"]
        self._admin_tls = admin_ssl_context(opts.conn)
        self.client = qc.Client(
            opts.conn.service_url,
            operation_timeout_seconds=opts.conn.operation_timeout_s,
            enable_transaction=True,
            **options,
        )

    def close(self) -> None:
        self.client.close()

    def _client_transactions(self, name: str) -> ClientTransactions:
        """``name``'s transactions from the admin API, called with the query's
        credentials and TLS settings (also for an ``https://`` admin URL beside a
        ``pulsar://`` service URL, where the client has no TLS options)."""
        conn = self.opts.conn
        return call_admin(
            conn.admin_url,
            lambda admin: admin.client_transactions(name),
            timeout_s=conn.operation_timeout_s,
            ssl_context=self._admin_tls,
            authentication=self._admin_authentication,
        )

    def _end_all(self, txns: list[TxnRecord], action: str) -> list[BaseException | None]:
        """Commit or abort every transaction, in parallel; the error of each or None."""
        futures: list[Future[None]] = []
        for t in txns:
            handle = self.client.resume_transaction(t.txn_id, t.client)
            futures.append(
                handle.commit_async() if action == "commit" else handle.abort_async()
            )
        out: list[BaseException | None] = []
        for f in futures:
            try:
                f.result()
                out.append(None)
            except Exception as exc:
                out.append(exc)
        return out

    def commit_all(self, txns: list[TxnRecord]) -> None:
        """Commit every transaction of a decision.

        Raises:
            the first error (the decision stays; a restart rolls it forward).
        """
        for t, err in zip(txns, self._end_all(txns, "commit"), strict=True):
            if err is not None:
                raise RuntimeError(f"committing transaction {t.txn_id} failed: {err!r}") from err

    def roll_forward(self, batch_id: int, txns: list[TxnRecord]) -> bool:
        """Commit a recorded decision again. True: it is committed; False: the broker
        aborted every one of its transactions (nothing of it is visible).

        Raises:
            PartialBatchError: some committed, some aborted.
            the commit error of a transaction whose outcome could not be learned.
        """
        errors = self._end_all(txns, "commit")
        aborted = [t for t, e in zip(txns, errors, strict=True) if isinstance(e, qc.InvalidTxnStatus)]
        for t, e in zip(txns, errors, strict=True):
            if e is not None and not isinstance(e, qc.InvalidTxnStatus):
                raise RuntimeError(
                    f"batch {batch_id}: transaction {t.txn_id} could not be committed: {e!r}"
                ) from e
        if not aborted:
            return True
        if len(aborted) == len(txns):
            log.warning("batch %s: every recorded transaction was aborted; rewriting", batch_id)
            return False
        raise PartialBatchError(
            f"batch {batch_id}: transactions {[t.txn_id for t in aborted]} were aborted "
            "(timed out?) while others of the batch committed; raise txn.timeoutMs"
        )

    def abort_all(self, txns: list[TxnRecord]) -> None:
        """Abort transactions, best effort (the sweep catches what fails here)."""
        for t, err in zip(txns, self._end_all(txns, "abort"), strict=True):
            if err is not None:
                log.warning("aborting transaction %s: %r", t.txn_id, err)

    def sweep(self, sink_id: str, partitions: int, keep: set[tuple[int, int]]) -> int:
        """Abort every open transaction of the sink's client names not in ``keep``."""
        orphans: list[TxnRecord] = []
        for p in range(partitions):
            name = client_name(sink_id, p)
            found = self._client_transactions(name)
            if found.unavailable_coordinators:
                # Their open transactions cannot be seen: they end at their timeout.
                log.warning(
                    "sink %s: coordinators %s did not answer for %s; an orphaned "
                    "transaction there stays open until txn.timeoutMs",
                    sink_id, found.unavailable_coordinators, name,
                )
            for t in found.open:
                if _txn_key(t.txn_id) not in keep:
                    most, least = _txn_key(t.txn_id)
                    orphans.append(TxnRecord(most, least, name, p, -1, 0))
        if orphans:
            log.info("aborting %d orphaned transactions of sink %s", len(orphans), sink_id)
            self.abort_all(orphans)
        return len(orphans)


def _partitions_seen(msgs: list[QuasarCommitMessage], store: DecisionStore | None) -> int:
    n = max((m.partition + 1 for m in msgs), default=0)
    info = store.sink_info() if store is not None else None
    if info:
        n = max(n, int(info.get("partitions", 0)))
    return n


def commit_batch(
    opts: SinkOptions,
    store: DecisionStore | None,
    sink_id: str | None,
    batch_id: int,
    messages: Sequence[WriterCommitMessage | None],
    fail_points: str | None,
) -> None:
    """The driver's ``commit``; see the module docstring (step 2)."""
    msgs = _messages(messages)
    if opts.delivery_guarantee != EXACTLY_ONCE:
        return
    sink_id = sink_id or (msgs[0].sink_id if msgs else None)
    if sink_id is None and store is not None:
        sink_id = (store.sink_info() or {}).get("sinkId")
    if sink_id is None:
        return  # no task ran and nothing was ever written: nothing to decide
    partitions = _partitions_seen(msgs, store)
    if store is not None:
        store.remember_sink(sink_id, partitions)
    new = [m.txn for m in msgs if m.txn is not None]
    driver = TransactionDriver(opts, store)
    try:
        recorded = store.get(batch_id) if store is not None else None
        if recorded is not None:
            if driver.roll_forward(batch_id, recorded):
                kept = {t.txn_id for t in recorded}
                driver.abort_all([t for t in new if t.txn_id not in kept])
                driver.sweep(sink_id, partitions, kept)
                return
            assert store is not None
            store.drop(batch_id)
        if store is not None:
            store.record(batch_id, sink_id, new)
        crash_point("sink.decided", batch_id)
        fail_point(fail_points, "sink.decided", batch_id)
        driver.commit_all(new)
        crash_point("sink.committed", batch_id)
        fail_point(fail_points, "sink.committed", batch_id)
        driver.sweep(sink_id, partitions, {t.txn_id for t in new})
        if store is not None:
            store.prune(batch_id)
    finally:
        driver.close()


def abort_batch(
    opts: SinkOptions,
    store: DecisionStore | None,
    sink_id: str | None,
    batch_id: int,
    messages: Sequence[WriterCommitMessage | None],
) -> None:
    """The driver's ``abort``; see the module docstring (step 3)."""
    if opts.delivery_guarantee != EXACTLY_ONCE:
        return
    if store is not None and store.get(batch_id) is not None:
        log.warning("batch %s: abort after the commit decision; a restart rolls it forward", batch_id)
        return
    msgs = _messages(messages)
    sink_id = sink_id or (msgs[0].sink_id if msgs else None)
    if sink_id is None and store is not None:
        sink_id = (store.sink_info() or {}).get("sinkId")
    driver = TransactionDriver(opts, store)
    try:
        driver.abort_all([m.txn for m in msgs if m.txn is not None])
        if sink_id is not None:
            driver.sweep(sink_id, _partitions_seen(msgs, store), set())
    finally:
        driver.close()


def _write_task(
    opts: SinkOptions,
    ident: TaskIdentity,
    batches: Iterator[pa.RecordBatch],
    fail_points: str | None,
) -> WriterCommitMessage:
    # Imported here: the driver's commit process, which also loads this module,
    # never writes and need not import pyarrow.
    from pyspark_quasar.task_writer import write_task

    return write_task(opts, ident, batches, fail_points)


def _task_context() -> TaskContext:
    ctx = TaskContext.get()
    assert ctx is not None, "write() runs in a Spark task"
    return ctx


class QuasarStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("quasar")``: one decision per micro-batch."""

    def __init__(self, opts: SinkOptions, fail_points: str | None) -> None:
        self.opts = opts
        self.fail_points = fail_points
        if opts.delivery_guarantee == EXACTLY_ONCE and opts.state_location is None:
            raise ValueError(
                "deliveryGuarantee=exactly_once needs a durable place for its commit "
                "decisions: set the txnStateLocation option, or pass checkpointLocation "
                "with .option() (a checkpoint set through the SQL conf is not visible "
                "to the sink)"
            )

    def _store(self) -> DecisionStore | None:
        loc = self.opts.state_location
        return DecisionStore(loc) if loc else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        ctx = _task_context()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or 0)
        query_id = ctx.getLocalProperty("sql.streaming.queryId") or "query"
        ident = TaskIdentity(
            sink_id=self.opts.sink_id or f"spark-{query_id}",
            batch_id=batch_id,
            partition=ctx.partitionId(),
            attempt=ctx.attemptNumber(),
        )
        return _write_task(self.opts, ident, iterator, self.fail_points)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(
            self.opts, self._store(), self.opts.sink_id, batchId, messages, self.fail_points
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_batch(self.opts, self._store(), self.opts.sink_id, batchId, messages)


class QuasarBatchWriter(DataSourceArrowWriter):
    """``df.write.format("quasar")``: the whole job is one decision.

    The sink id is ``sinkId`` or a random id per write; with ``txnStateLocation``
    the decision is recorded there too (batch 0 of that sink id).
    """

    def __init__(self, opts: SinkOptions, fail_points: str | None) -> None:
        self.opts = opts
        self.fail_points = fail_points
        self.sink_id = opts.sink_id or f"spark-write-{uuid.uuid4().hex[:16]}"

    def _store(self) -> DecisionStore | None:
        loc = self.opts.state_location
        return DecisionStore(loc) if loc else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        ctx = _task_context()
        ident = TaskIdentity(
            sink_id=self.sink_id,
            batch_id=0,
            partition=ctx.partitionId(),
            attempt=ctx.attemptNumber(),
        )
        return _write_task(self.opts, ident, iterator, self.fail_points)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_batch(self.opts, self._store(), self.sink_id, 0, messages, self.fail_points)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_batch(self.opts, self._store(), self.sink_id, 0, messages)
