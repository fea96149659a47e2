"""The end fan-out when several participants fail for good: the first failure is
raised, and every other participant's failure is retrieved too, so none is reported
by asyncio as an exception nobody retrieved."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from quasar.protocol.txn_id import TxnID
from quasar.transaction.buffer_client import Participant
from quasar.transaction.coordinator.fanout import EndFanOut
from quasar.transaction.scheduler import AsyncioScheduler
from quasar.transaction.txn_status import TxnAction


class FailingParticipants:
    """A buffer client every participant of which fails with a non-retryable error."""

    async def end_txn_on_partition(self, topic: str, *args: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"cannot end on {topic}")

    async def end_txn_on_subscription(self, topic: str, subscription: str, *args: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"cannot end on {topic} ({subscription})")


async def test_every_failure_of_a_fan_out_is_retrieved() -> None:
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    fanout = EndFanOut(0, FailingParticipants(), AsyncioScheduler(), 10, lambda: -1)  # type: ignore[arg-type]
    targets = [Participant(f"persistent://public/default/t{i}") for i in range(3)]
    targets.append(Participant("persistent://public/default/t", "sub"))
    with pytest.raises(ValueError, match="cannot end on"):
        await fanout.deliver(TxnID(0, 1), TxnAction.COMMIT, targets)
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(None)
    assert unretrieved == []
