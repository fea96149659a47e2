"""Wall-clock jumps while a coordinator runs (failure catalogue, scenario 42).

Transaction timeouts run on the monotonic clock: a deadline is converted once, when
the transaction is tracked. Jumps of the wall clock by an hour either way, and a
strobing skew, neither fire a timeout early nor hold one back, and never touch a
transaction that already ended.
"""

from __future__ import annotations

from quasar.clock import ManualClock
from quasar.transaction import TxnAction, TxnStatus, VirtualScheduler

from .helpers import P1, TcEnv

HOUR_MS = 3_600_000
COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT


class SkewedClock(ManualClock):
    """A manual clock whose wall time can also jump, as NTP or an operator makes it."""

    def jump_wall(self, ms: int) -> None:
        self._wall += ms


async def test_wall_clock_jumps_neither_fire_nor_hold_back_a_timeout() -> None:
    env = TcEnv()
    env.clock = SkewedClock()
    env.sched = VirtualScheduler(env.clock)
    try:
        tc = await env.start()
        committed = await tc.new_txn(10_000)
        await tc.add_partitions(committed, [P1.topic])
        await tc.end_txn(committed, COMMIT)
        aborted = await tc.new_txn(10_000)
        await tc.add_partitions(aborted, [P1.topic])
        await tc.end_txn(aborted, ABORT)
        txn = await tc.new_txn(10_000)
        await tc.add_partitions(txn, [P1.topic])

        env.clock.jump_wall(+HOUR_MS)  # far past every deadline by the wall clock
        await env.sched.advance(0)
        assert tc.get_txn_meta(txn).status is TxnStatus.OPEN
        env.clock.jump_wall(-2 * HOUR_MS)  # far before its start by the wall clock
        await env.sched.advance(4_000)
        for step in range(10):  # a strobing skew: back and forth every 500 ms
            env.clock.jump_wall(HOUR_MS if step % 2 == 0 else -HOUR_MS)
            await env.sched.advance(500)
        await env.sched.advance(999)  # 9,999 ms of monotonic time since it began
        assert tc.get_txn_meta(txn).status is TxnStatus.OPEN
        await env.sched.advance(1)
        assert tc.active_transactions() == 0
        # The decided transactions kept their markers; the timed-out one got an abort.
        assert env.client.ended_txns(P1) == [
            (committed, COMMIT),
            (aborted, ABORT),
            (txn, ABORT),
        ]
        assert tc.stats.timed_out == 1 and tc.stats.committed == 1
    finally:
        await env.close()
