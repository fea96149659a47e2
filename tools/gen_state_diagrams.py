"""Draw the state diagrams in docs/transactions.md from the transition tables.

The tables in the code are the source of truth; this script renders them as Mermaid
state diagrams between marker comments in docs/transactions.md. ``--check`` exits
non-zero when the doc differs from a fresh rendering (tests/test_docs_fresh.py runs it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "transactions.md"


def mermaid(name: str, table: Mapping[Enum, frozenset[Enum]], initial: Enum) -> str:
    lines = ["```mermaid", "stateDiagram-v2", f"    %% {name}", f"    [*] --> {initial.name}"]
    for state in sorted(table, key=lambda s: s.value):
        for target in sorted(table[state], key=lambda s: s.value):
            if target is not state:
                lines.append(f"    {state.name} --> {target.name}")
        if table[state] == frozenset({state}):
            lines.append(f"    {state.name} --> [*]")
    lines.append("```")
    return "\n".join(lines)


def mermaid_events(
    name: str, table: Mapping[tuple[Enum, Enum], Enum], initial: Enum
) -> str:
    """A diagram from an event table: (state, event) -> next state, edges labelled."""
    lines = ["```mermaid", "stateDiagram-v2", f"    %% {name}", f"    [*] --> {initial.name}"]
    for (state, event), target in sorted(
        table.items(), key=lambda kv: (kv[0][0].name, kv[0][1].name)
    ):
        if target is not state:
            lines.append(f"    {state.name} --> {target.name}: {event.name}")
    lines.append("```")
    return "\n".join(lines)


def diagrams() -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "src"))
    from quasar.transaction.buffer import state as tb_state
    from quasar.transaction.pending_ack import handle_state as pa_state
    from quasar.transaction.txn_status import TRANSITIONS, TxnStatus

    return {
        "coordinator-status": mermaid("coordinator TxnStatus", TRANSITIONS, TxnStatus.OPEN),
        "buffer-state": mermaid(
            "transaction buffer TbState", tb_state.TRANSITIONS, next(iter(tb_state.TbState))
        ),
        "pending-ack-state": mermaid_events(
            "pending-ack handle",
            pa_state.TRANSITIONS,
            pa_state.PendingAckHandleState.NONE,
        ),
    }


def render(text: str) -> str:
    for name, body in diagrams().items():
        begin, end = f"<!-- diagram:{name} -->", f"<!-- /diagram:{name} -->"
        if begin not in text:
            raise SystemExit(f"{DOC} has no {begin} marker")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{body}\n{end}{tail}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    current = DOC.read_text()
    fresh = render(current)
    if args.check:
        if fresh != current:
            print("docs/transactions.md diagrams are stale: run tools/gen_state_diagrams.py")
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
