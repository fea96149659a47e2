"""Delivering a commit/abort decision to every participant of a transaction.

All participants are called at once (Pulsar orders nothing between partitions and
subscriptions). Each call is retried on its own, every ``retry_interval_ms``, for as
long as it fails with a retryable error: only the participants that failed are asked
again, and a decision is never given up or changed (failure scenario 40). A
participant that no longer exists counts as done. The first non-retryable failure
cancels the other calls and is raised; the caller keeps the decision and may deliver
it again later, which receivers must tolerate (they are idempotent).

The low watermark is read afresh for every attempt: it only grows, and the freshest
value lets receivers clean up the most.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from quasar.protocol.txn_id import TxnID

from ..buffer_client import (
    EndFailure,
    Participant,
    TransactionBufferClient,
    classify_end_failure,
)
from ..crash_points import crash_point
from ..scheduler import Scheduler
from ..txn_status import TxnAction

log = logging.getLogger(__name__)


class EndFanOut:
    """Sends end decisions through a ``TransactionBufferClient``, with retries."""

    def __init__(
        self,
        tc_id: int,
        client: TransactionBufferClient,
        scheduler: Scheduler,
        retry_interval_ms: int,
        low_watermark: Callable[[], int],
    ) -> None:
        self._tc_id = tc_id
        self._client = client
        self._scheduler = scheduler
        self._retry_interval_ms = retry_interval_ms
        self._low_watermark = low_watermark

    async def deliver(
        self, txn_id: TxnID, action: TxnAction, targets: Sequence[Participant]
    ) -> None:
        """Return once every participant acknowledged (or is gone).

        Raises:
            Exception: the first non-retryable failure of a participant.
        """
        if not targets:
            return
        acknowledged: list[Participant] = []
        if len(targets) == 1:
            # One participant (a produce-only transaction): no task to wait for.
            await self._end_on(targets[0], txn_id, action, acknowledged)
            return
        tasks = [
            asyncio.ensure_future(self._end_on(p, txn_id, action, acknowledged))
            for p in targets
        ]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        # Every failure is retrieved, not only the one raised: asyncio reports the
        # others as exceptions nobody retrieved.
        failures = [
            exc for task in done if not task.cancelled() and (exc := task.exception()) is not None
        ]
        if failures:
            raise failures[0]

    async def _end_on(
        self,
        p: Participant,
        txn_id: TxnID,
        action: TxnAction,
        acknowledged: list[Participant],
    ) -> None:
        while True:
            lwm = self._low_watermark()
            try:
                if p.subscription is None:
                    await self._client.end_txn_on_partition(p.topic, txn_id, action, lwm)
                else:
                    await self._client.end_txn_on_subscription(
                        p.topic, p.subscription, txn_id, action, lwm
                    )
                break
            except Exception as exc:
                kind = classify_end_failure(exc)
                if kind is EndFailure.GONE:
                    log.info("tc %d: %s of %s is gone: %s", self._tc_id, p, txn_id, exc)
                    break
                if kind is EndFailure.FAIL:
                    raise
                log.info(
                    "tc %d: ending %s on %s failed, retrying: %r", self._tc_id, txn_id, p, exc
                )
            await self._scheduler.sleep(self._retry_interval_ms)
        acknowledged.append(p)
        if len(acknowledged) == 1:
            crash_point("tc.after_some_ends")
