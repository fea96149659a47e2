"""The receive queue shared by a partitioned consumer's children takes one message
from each child in turn, keeping each child's own order (pure logic, no broker)."""

from __future__ import annotations

import pytest

from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.receive_queue import ReceiveQueue
from quasar.errors import Timeout


class Child:
    """Stands in for a child consumer: the queue calls ``on_dequeued``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dequeued: list[str] = []

    def on_dequeued(self, msg: Message) -> None:
        self.dequeued.append(msg.data().decode())


def _put(q: ReceiveQueue, child: Child, *values: str) -> None:
    for v in values:
        q.put(Message.plain(v.encode(), MessageId(-1, 1, 0), 0, "t", 0, None, b"",
                            "p", child))


async def _take(q: ReceiveQueue, n: int) -> list[str]:
    return [(await q.get(0)).data().decode() for _ in range(n)]


async def test_children_take_turns_in_their_own_order() -> None:
    q = ReceiveQueue()
    a, b, c = Child("a"), Child("b"), Child("c")
    _put(q, a, "a1", "a2", "a3")
    _put(q, b, "b1", "b2")
    _put(q, c, "c1")
    assert len(q) == 6
    assert q.peek() is not None and q.peek().data() == b"a1"
    assert await _take(q, 6) == ["a1", "b1", "c1", "a2", "b2", "a3"]
    assert a.dequeued == ["a1", "a2", "a3"] and c.dequeued == ["c1"]
    with pytest.raises(Timeout):
        await q.get(0)


async def test_a_child_that_runs_dry_rejoins_at_the_back() -> None:
    q = ReceiveQueue()
    a, b = Child("a"), Child("b")
    _put(q, a, "a1")
    _put(q, b, "b1", "b2")
    assert await _take(q, 2) == ["a1", "b1"]
    _put(q, a, "a2")
    assert await _take(q, 2) == ["b2", "a2"]


async def test_remove_where_drops_one_childs_messages_and_its_turn() -> None:
    q = ReceiveQueue()
    a, b = Child("a"), Child("b")
    _put(q, a, "a1", "a2")
    _put(q, b, "b1", "b2")
    assert q.remove_where(lambda m: m._consumer is a) == 2
    assert len(q) == 2
    assert not q.holds_message_of(a) and q.holds_message_of(b)
    assert await _take(q, 2) == ["b1", "b2"]
    assert len(q) == 0 and q.peek() is None
