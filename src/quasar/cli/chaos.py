"""``quasar chaos``: the seeded chaos runner (``quasar.testing.chaos``).

Thin: everything after ``chaos`` goes to the runner's own parser, so ``quasar chaos
-h`` shows its options (``--seed``, ``--duration-s``, ``--operations``,
``--faults``, ...).
"""

from __future__ import annotations

import argparse


def run_chaos(args: argparse.Namespace) -> int:
    # Imported on use, like the perf tool: a `quasar standalone` process need not
    # load the client and the test harness.
    from quasar.testing.chaos.main import main as chaos_main

    return chaos_main(list(args.chaos_args))
