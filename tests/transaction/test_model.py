"""The coordinator against a dict model (hypothesis state machine).

Rules: new / add partition / add subscription / end (commit or abort) / hold and
release the participants / advance virtual time (timeouts) / restart with recovery.
After every step the coordinator's live transactions, statuses, registrations, low
watermark and next id must equal the model's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from quasar.errors import (
    InvalidTxnStatus,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
)
from quasar.transaction import TxnAction, TxnID, TxnStatus
from quasar.transaction.scheduler import settle
from quasar.transaction.txn_status import ending_status

from .helpers import TcEnv, ledger_config

PARTITIONS = ["persistent://t/n/a-partition-0", "persistent://t/n/a-partition-1"]
SUBSCRIPTIONS = [("persistent://t/n/b", "s1"), ("persistent://t/n/b", "s2")]


@dataclass
class ModelTxn:
    deadline_ms: float  # monotonic
    status: TxnStatus = TxnStatus.OPEN
    partitions: set[str] = field(default_factory=set)
    subscriptions: set[tuple[str, str]] = field(default_factory=set)

    @property
    def has_participants(self) -> bool:
        return bool(self.partitions or self.subscriptions)


class CoordinatorMachine(RuleBasedStateMachine):
    txns = Bundle("txns")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.env = TcEnv(ledger=ledger_config(max_entries_per_ledger=5))
        self.model: dict[int, ModelTxn] = {}
        self.max_id = -1
        self.held = False
        self.waiting: list[tuple[asyncio.Task[None], TxnID]] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @property
    def tc(self) -> Any:
        return self.env.tc

    @property
    def now(self) -> float:
        return self.env.clock.monotonic_ms()

    @initialize()
    def start(self) -> None:
        self.run(self.env.start())

    def teardown(self) -> None:
        self.env.client.release()
        self.run(settle())
        self.run(self.env.close())
        self.loop.close()

    def expect(self, least: int) -> ModelTxn | None:
        return self.model.get(least)

    # ---------------------------------------------------------------- rules

    @rule(target=txns, timeout=st.integers(0, 8_000))
    def new(self, timeout: int) -> TxnID:
        txn: TxnID = self.run(self.tc.new_txn(timeout))
        assert txn.least_bits == self.max_id + 1, "ids are handed out in order, never reused"
        self.max_id = txn.least_bits
        self.model[txn.least_bits] = ModelTxn(self.now + timeout)
        return txn

    def _register(self, txn: TxnID, call: Any) -> bool:
        m = self.expect(txn.least_bits)
        try:
            self.run(call)
        except TransactionNotFound:
            assert m is None
            return False
        except InvalidTxnStatus:
            assert m is not None and m.status is not TxnStatus.OPEN
            return False
        assert m is not None and m.status is TxnStatus.OPEN
        return True

    @rule(txn=txns, partition=st.sampled_from(PARTITIONS))
    def add_partition(self, txn: TxnID, partition: str) -> None:
        if self._register(txn, self.tc.add_partitions(txn, [partition])):
            self.model[txn.least_bits].partitions.add(partition)

    @rule(txn=txns, sub=st.sampled_from(SUBSCRIPTIONS))
    def add_subscription(self, txn: TxnID, sub: tuple[str, str]) -> None:
        if self._register(txn, self.tc.add_subscriptions(txn, [sub])):
            self.model[txn.least_bits].subscriptions.add(sub)

    @rule(txn=txns, action=st.sampled_from(list(TxnAction)))
    def end(self, txn: TxnID, action: TxnAction) -> None:
        m = self.expect(txn.least_bits)
        task = self.loop.create_task(self.tc.end_txn(txn, action))
        self.run(settle())
        if m is None:
            assert isinstance(task.exception(), TransactionNotFound)
            return
        if m.status is TxnStatus.OPEN:
            m.status = ending_status(action)
        elif m.status is not ending_status(action):
            assert isinstance(task.exception(), InvalidTxnStatus)
            return
        if self.held and m.has_participants:
            assert not task.done()
            self.waiting.append((task, txn))
        else:
            assert task.done() and task.exception() is None
            del self.model[txn.least_bits]

    @precondition(lambda self: not self.held)
    @rule()
    def hold(self) -> None:
        self.env.client.hold()
        self.held = True

    @precondition(lambda self: self.held)
    @rule()
    def release(self) -> None:
        self.env.client.release()
        self.held = False
        self.run(settle())
        for task, _ in self.waiting:
            assert task.done() and task.exception() is None
        self.waiting.clear()
        for least in [k for k, m in self.model.items() if m.status.is_ending]:
            del self.model[least]

    @rule(ms=st.integers(0, 3_000))
    def advance(self, ms: int) -> None:
        self.run(self.env.sched.advance(ms))
        for least, m in list(self.model.items()):
            if m.status is TxnStatus.OPEN and m.deadline_ms <= self.now:
                if self.held and m.has_participants:
                    m.status = TxnStatus.ABORTING
                else:
                    del self.model[least]

    @rule()
    def restart(self) -> None:
        self.run(self.env.restart())
        self.run(settle())
        # Requests waiting on ends of the closed coordinator were told to retry.
        for task, _ in self.waiting:
            assert isinstance(task.exception(), TransactionCoordinatorNotFound)
        self.waiting.clear()
        if not self.held:  # re-driven to the end
            for least in [k for k, m in self.model.items() if m.status.is_ending]:
                del self.model[least]

    # ---------------------------------------------------------------- invariants

    @invariant()
    def matches_model(self) -> None:
        if self.tc is None:
            return
        live = {m.txn_id.least_bits: m for m in self.tc.transactions()}
        assert set(live) == set(self.model)
        for least, m in self.model.items():
            meta = live[least]
            assert meta.status is m.status
            assert meta.produced_partitions == m.partitions
            assert meta.acked_subscriptions == m.subscriptions
        expected_lwm = min(self.model) - 1 if self.model else self.max_id
        assert self.tc.low_watermark() == expected_lwm
        assert self.tc.next_sequence() == self.max_id + 1
        # Ends in progress are exactly the -ING transactions.
        ending = {t.least_bits for t in self.tc.ending_transactions()}
        assert ending == {k for k, m in self.model.items() if m.status.is_ending}


CoordinatorMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_coordinator_model = CoordinatorMachine.TestCase
