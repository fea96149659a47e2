"""Transaction ownership in the server's command handlers, over a fake connection
context: a SEND or ACK carrying another role's transaction is refused; without
authentication nothing is looked up; the participants' commands are for super-users;
who counts as a super-user."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

from quasar.broker.hostile_input import HostileInputRefusals
from quasar.errors import ServerError
from quasar.protocol import Frame, pb
from quasar.protocol.txn_id import TxnID
from quasar.server.consumer_commands import ConsumerCommands
from quasar.server.producer_commands import ProducerCommands
from quasar.server.txn_commands import TransactionCommands
from quasar.server.txn_ownership import TxnOwnership
from quasar.transaction.coordinator.ownership import ANONYMOUS, Caller

T = pb.BaseCommand
TXN = TxnID(0, 7)


class _Untouchable:
    """Fails the test if anything is read from it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was read on the unauthenticated hot path")


class _Coordinator:
    def __init__(self, owner: str | None) -> None:
        self.owner = owner

    def refuses(self, txn_id: TxnID, caller: Caller) -> bool:
        return not caller.may_act_on(self.owner)


class _Authorization:
    def __init__(self, enabled: bool, super_users: tuple[str, ...] = ()) -> None:
        self.enabled = enabled
        self.super_users = super_users

    def is_superuser(self, role: str | None) -> bool:
        return not self.enabled or role in self.super_users


class _Topic:
    def __init__(self) -> None:
        self.published: list[TxnID | None] = []

    def publish(self, producer: Any, seq: int, highest: int, num: int, payload: bytes,
                done: Any, txn: TxnID | None) -> None:
        self.published.append(txn)


class _Context:
    def __init__(self, principal: str | None, transactions: Any, authorization: Any) -> None:
        self.settings = SimpleNamespace(max_message_size=1024)
        self.service = SimpleNamespace(transactions=transactions)
        self.principal = principal
        self.authorization = authorization
        self.remote_address = "127.0.0.1:1"
        self.producers: dict[int, Any] = {}
        self.consumers: dict[int, Any] = {}
        self.commands: list[pb.BaseCommand] = []
        self.spawned: list[Coroutine[Any, Any, None]] = []
        self.refusals = HostileInputRefusals()

    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.commands.append(cmd)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.spawned.append(coro)

    def write(self, frame: bytes) -> None:
        pass

    def publish_started(self) -> None:
        pass

    def publish_completed(self) -> None:
        pass


def _transactions(owner: str | None) -> Any:
    tc = _Coordinator(owner)
    return SimpleNamespace(registry=SimpleNamespace(route=lambda txn: tc))


def _txn_send() -> tuple[pb.BaseCommand, Frame]:
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 1, 3
    cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = TXN.most_bits, TXN.least_bits
    return cmd, Frame(cmd, b"x")


def _send(ctx: _Context) -> _Topic:
    topic = _Topic()
    ctx.producers[1] = (object(), topic)
    ProducerCommands(ctx).on_send(*_txn_send())  # type: ignore[arg-type]
    return topic


def test_without_authentication_a_transactional_send_looks_nothing_up() -> None:
    ctx = _Context(None, SimpleNamespace(registry=_Untouchable()), _Untouchable())
    assert _send(ctx).published == [TXN] and ctx.commands == []


def test_a_send_in_another_roles_transaction_is_refused() -> None:
    ctx = _Context("bob", _transactions("alice"), _Authorization(True))
    assert _send(ctx).published == []
    (answer,) = ctx.commands
    assert answer.send_error.error == ServerError.NotAllowedError
    assert "neither the owner" in answer.send_error.message


def test_the_owner_a_superuser_and_anyone_for_an_ownerless_transaction_may_send() -> None:
    for role, owner in (("alice", "alice"), ("root", "alice"), ("bob", None)):
        ctx = _Context(role, _transactions(owner), _Authorization(True, ("root",)))
        assert _send(ctx).published == [TXN], (role, owner)


async def test_an_ack_in_another_roles_transaction_is_refused() -> None:
    ctx = _Context("bob", _transactions("alice"), _Authorization(True))
    sub = SimpleNamespace()
    topic = SimpleNamespace(subscriptions={"s": sub})
    ctx.consumers[2] = (SimpleNamespace(subscription_name="s"), topic)
    ack = T(type=T.ACK)
    ack.ack.consumer_id, ack.ack.request_id = 2, 11
    ack.ack.txnid_most_bits, ack.ack.txnid_least_bits = TXN.most_bits, TXN.least_bits
    ack.ack.message_id.add(ledgerId=1, entryId=2)
    ConsumerCommands(ctx).handlers()[T.ACK](ack, Frame(ack))  # type: ignore[arg-type]
    (task,) = ctx.spawned
    await task  # the subscription is never asked: SimpleNamespace() has no ack methods
    (answer,) = ctx.commands
    assert answer.ackResponse.request_id == 11
    assert answer.ackResponse.error == ServerError.TransactionNotFound
    assert "neither the owner" in answer.ackResponse.message


def test_a_superuser_needs_authorization_on() -> None:
    # With authorization off is_superuser is true for everyone; that must not make
    # everyone the owner of every transaction (Pulsar: authentication and
    # authorization both on).
    off = _Context("bob", None, _Authorization(False))
    assert TxnOwnership(off).caller() == Caller("bob", superuser=False)
    on = _Context("root", None, _Authorization(True, ("root",)))
    assert TxnOwnership(on).caller() == Caller("root", superuser=True)
    anonymous = _Context(None, None, _Untouchable())
    assert TxnOwnership(anonymous).caller() is ANONYMOUS


async def test_participant_commands_are_for_superusers_when_authorization_is_on() -> None:
    ended: list[str] = []

    async def end_txn_on_partition(topic: str, *args: object) -> None:
        ended.append(topic)

    transactions = SimpleNamespace(
        buffer_client=SimpleNamespace(end_txn_on_partition=end_txn_on_partition)
    )
    for role, allowed in (("bob", False), ("root", True)):
        ctx = _Context(role, transactions, _Authorization(True, ("root",)))
        cmd = T(type=T.END_TXN_ON_PARTITION)
        r = cmd.endTxnOnPartition
        r.request_id, r.topic, r.txn_action = 4, "persistent://t/n/x", pb.ABORT
        r.txnid_most_bits, r.txnid_least_bits = TXN.most_bits, TXN.least_bits
        TransactionCommands(ctx).handlers()[T.END_TXN_ON_PARTITION](cmd, Frame(cmd))  # type: ignore[arg-type]
        await asyncio.gather(*ctx.spawned)
        (answer,) = ctx.commands
        response = answer.endTxnOnPartitionResponse
        if allowed:
            assert not response.HasField("error")
        else:
            assert response.error == ServerError.AuthorizationError
    assert ended == ["persistent://t/n/x"]
