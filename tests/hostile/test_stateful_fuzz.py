"""A stateful fuzzer against a live broker: hypothesis drives one raw connection
through random command sequences (producers, consumers, valid and mutated SENDs,
FLOW, ACK, SEEK, CLOSE_*, UNSUBSCRIBE, LOOKUP of random names, transactions with
random ids) and after every step checks that

- the connection is open, unless the step was a protocol violation (then it is
  closed and a new connection is served);
- a PING round trip succeeds within ``PING_BOUND_S``;
- every answer names a request this connection sent (request id, or producer id and
  sequence id for receipts), and no answer is ``UnknownError`` (a broker bug);
- the broker logged no traceback.

The run is derandomized, so CI replays the same sequences. For a long run, raise
``QUASAR_FUZZ_EXAMPLES`` and ``QUASAR_FUZZ_STEPS`` and set ``QUASAR_FUZZ_RANDOM=1``
for new sequences (``make fuzz``); a failure then prints the ``--hypothesis-seed``
that replays it.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.errors import ServerError
from quasar.protocol import encode_command, encode_payload_command, make_entry, pb
from quasar.protocol._wire import U32
from quasar.testing.hostile import HostileClient, LogWatch
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
U64_MAX = (1 << 64) - 1
BROKER_REQUEST_ID = U64_MAX  # CLOSE_* the broker starts itself
PING_BOUND_S = 10.0
EXAMPLES = int(os.environ.get("QUASAR_FUZZ_EXAMPLES", "12"))
STEPS = int(os.environ.get("QUASAR_FUZZ_STEPS", "25"))
DERANDOMIZE = os.environ.get("QUASAR_FUZZ_RANDOM", "") != "1"
RUN = uuid.uuid4().hex[:6]
TOPICS = [f"persistent://public/default/fuzz-{RUN}-{i}" for i in range(3)]
SUBSCRIPTIONS = ["a", "b"]

ids = st.one_of(st.integers(0, 8), st.integers(0, U64_MAX))
names = st.one_of(
    st.sampled_from(TOPICS),
    st.text(max_size=40),
    st.builds(lambda s: f"persistent://public/default/{s}", st.text(max_size=20)),
    st.sampled_from(["", "persistent://public/default/a/b", "persistent://x/y/../z",
                     "non-persistent://public/default/t", "persistent://public/default/\x00"]),
)
message_ids = st.builds(
    pb.MessageIdData,
    ledgerId=st.integers(0, U64_MAX),
    entryId=st.integers(0, U64_MAX),
    batch_index=st.integers(-2, 5),
    ack_set=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
)


def _entry(kind: str, sequence_id: int, batch: int) -> bytes:
    md = pb.MessageMetadata(producer_name="fuzz", sequence_id=sequence_id, publish_time=1)
    if batch:
        md.num_messages_in_batch = batch
    entry = make_entry(md, b"payload")
    if kind == "bad-checksum":
        return entry[:-1] + bytes([entry[-1] ^ 0xFF])
    if kind == "truncated-metadata":
        return entry[:6] + U32.pack(len(entry)) + entry[10:14]
    if kind == "no-checksum":
        return make_entry(md, b"payload", checksum=False)
    return entry


def _sub_message(cmd: pb.BaseCommand) -> Any:
    """The command's one sub-message (``cmd.send``, ``cmd.success``...)."""
    subs = [value for field, value in cmd.ListFields() if field.name != "type"]
    return subs[0] if subs else None


class BrokerSession(RuleBasedStateMachine):
    """One client connection and what it believes it has created."""

    def __init__(self, broker: BrokerProcess, token: str | None = None) -> None:
        super().__init__()
        self.broker = broker
        self.token = token
        self.watch = LogWatch(broker.log_path)
        self.request_ids: set[int] = set()
        self.sends: set[tuple[int, int]] = set()
        self.consumer_ids: set[int] = set()  # every consumer id ever subscribed
        self.txns: list[tuple[int, int]] = []
        self.received: list[tuple[int, pb.MessageIdData]] = []
        self.next_id = 100
        self.violated = False
        self._connect()

    # -- the connection ---------------------------------------------------------------
    def _connect(self) -> None:
        self.client = HostileClient(self.broker.port, self.token)
        self.client.raw.sock.settimeout(PING_BOUND_S)
        self.producers: dict[int, str] = {}
        self.consumers: dict[int, str] = {}
        self.tc_connected = False

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _send(self, cmd: pb.BaseCommand, payload: bytes | None = None) -> None:
        sub = _sub_message(cmd)
        if sub is not None and hasattr(sub, "request_id") and sub.HasField("request_id"):
            self.request_ids.add(sub.request_id)
        frame = encode_command(cmd) if payload is None else encode_payload_command(cmd, payload)
        self.client.raw.send_bytes(frame)

    def _check(self, got: pb.BaseCommand) -> None:
        """Every answer names something this connection asked for; none is a bug's."""
        sub = _sub_message(got)
        if got.type in (T.SEND_RECEIPT, T.SEND_ERROR):
            assert (sub.producer_id, sub.sequence_id) in self.sends, got
        elif got.type == T.MESSAGE:
            assert sub.consumer_id in self.consumer_ids, got
            self.received.append((sub.consumer_id, sub.message_id))
            del self.received[:-20]
        elif got.type in (T.CLOSE_CONSUMER, T.CLOSE_PRODUCER):
            assert sub.request_id == BROKER_REQUEST_ID, got
            if got.type == T.CLOSE_CONSUMER:
                self.consumers.pop(sub.consumer_id, None)
            else:
                self.producers.pop(sub.producer_id, None)
        elif sub is not None and hasattr(sub, "request_id"):
            assert sub.request_id in self.request_ids, got
        for field in ("error", "error_code"):
            if sub is not None and hasattr(sub, field) and sub.HasField(field):
                assert getattr(sub, field) != ServerError.UnknownError, got

    def _answer(self, request_id: int) -> pb.BaseCommand:
        """Read frames (checking each) until the answer to ``request_id``."""
        while True:
            got = self.client.raw.recv()
            self._check(got)
            sub = _sub_message(got)
            if (
                got.type not in (T.CLOSE_CONSUMER, T.CLOSE_PRODUCER)
                and getattr(sub, "request_id", None) == request_id
            ):
                return got

    # -- producers and SEND -----------------------------------------------------------
    @rule(topic=names)
    def create_producer(self, topic: str) -> None:
        pid = self._new_id()
        cmd = T(type=T.PRODUCER)
        cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = topic, pid, pid
        self._send(cmd)
        if self._answer(pid).type == T.PRODUCER_SUCCESS:
            self.producers[pid] = topic

    @rule(
        data=st.data(),
        kind=st.sampled_from(["valid", "bad-checksum", "truncated-metadata", "no-checksum"]),
        sequence_id=st.integers(0, U64_MAX),
        batch=st.sampled_from([0, 1, 3, 2**31 - 1]),
        num_messages=st.sampled_from([None, 0, 1, -1, 1000]),
    )
    def send(self, data: st.DataObject, kind: str, sequence_id: int, batch: int,
             num_messages: int | None) -> None:
        pid = data.draw(st.one_of(st.sampled_from(sorted(self.producers)), ids)
                        if self.producers else ids)
        cmd = T(type=T.SEND)
        cmd.send.producer_id, cmd.send.sequence_id = pid, sequence_id
        if num_messages is not None:
            cmd.send.num_messages = num_messages
        self.sends.add((pid, sequence_id))
        self._send(cmd, _entry(kind, sequence_id, batch))

    @rule(producer_id=ids)
    def close_producer(self, producer_id: int) -> None:
        pid = min(self.producers, default=producer_id)
        cmd = T(type=T.CLOSE_PRODUCER)
        rid = self._new_id()
        cmd.close_producer.producer_id, cmd.close_producer.request_id = pid, rid
        self._send(cmd)
        self._answer(rid)
        self.producers.pop(pid, None)

    # -- consumers --------------------------------------------------------------------
    @rule(topic=names, subscription=st.sampled_from(SUBSCRIPTIONS),
          sub_type=st.sampled_from([0, 1, 2, 3]), earliest=st.booleans(),
          start=st.one_of(st.none(), message_ids), durable=st.booleans())
    def subscribe(self, topic: str, subscription: str, sub_type: int, earliest: bool,
                  start: pb.MessageIdData | None, durable: bool) -> None:
        cid = self._new_id()
        cmd = T(type=T.SUBSCRIBE)
        s = cmd.subscribe
        s.topic, s.subscription, s.subType = topic, subscription, sub_type
        s.consumer_id, s.request_id = cid, cid
        s.initialPosition = (
            pb.CommandSubscribe.Earliest if earliest else pb.CommandSubscribe.Latest
        )
        s.durable = durable
        if start is not None:
            s.start_message_id.CopyFrom(start)
        self.consumer_ids.add(cid)
        self._send(cmd)
        if self._answer(cid).type == T.SUCCESS:
            self.consumers[cid] = topic

    def _consumer(self, data: st.DataObject) -> int:
        if self.consumers:
            return data.draw(st.one_of(st.sampled_from(sorted(self.consumers)), ids))
        return data.draw(ids)

    @rule(data=st.data(), permits=st.integers(0, 2**32 - 1))
    def flow(self, data: st.DataObject, permits: int) -> None:
        cmd = T(type=T.FLOW)
        cmd.flow.consumer_id, cmd.flow.messagePermits = self._consumer(data), permits
        self._send(cmd)

    @rule(data=st.data(), cumulative=st.booleans(), with_request=st.booleans(),
          received=st.booleans())
    def ack(self, data: st.DataObject, cumulative: bool, with_request: bool,
            received: bool) -> None:
        cmd = T(type=T.ACK)
        a = cmd.ack
        if received and self.received:
            a.consumer_id, mid = data.draw(st.sampled_from(self.received))
            a.message_id.add().CopyFrom(mid)
        else:
            a.consumer_id = self._consumer(data)
            for mid in data.draw(st.lists(message_ids, min_size=0, max_size=3)):
                a.message_id.add().CopyFrom(mid)
        a.ack_type = pb.CommandAck.Cumulative if cumulative else pb.CommandAck.Individual
        if self.txns and data.draw(st.booleans()):
            a.txnid_most_bits, a.txnid_least_bits = data.draw(st.sampled_from(self.txns))
        if with_request:
            a.request_id = self._new_id()
            self._send(cmd)
            self._answer(a.request_id)
        else:
            self._send(cmd)

    @rule(data=st.data(), to=st.one_of(message_ids, st.integers(0, U64_MAX)))
    def seek(self, data: st.DataObject, to: pb.MessageIdData | int) -> None:
        cmd = T(type=T.SEEK)
        rid = self._new_id()
        cmd.seek.consumer_id, cmd.seek.request_id = self._consumer(data), rid
        if isinstance(to, int):
            cmd.seek.message_publish_time = to
        else:
            cmd.seek.message_id.CopyFrom(to)
        self._send(cmd)
        self._answer(rid)

    @rule(data=st.data(), which=st.sampled_from(["close", "unsubscribe", "redeliver",
                                                  "stats", "last-id"]))
    def consumer_command(self, data: st.DataObject, which: str) -> None:
        cid = self._consumer(data)
        rid = self._new_id()
        if which == "close":
            cmd = T(type=T.CLOSE_CONSUMER)
            cmd.close_consumer.consumer_id, cmd.close_consumer.request_id = cid, rid
        elif which == "unsubscribe":
            cmd = T(type=T.UNSUBSCRIBE)
            cmd.unsubscribe.consumer_id, cmd.unsubscribe.request_id = cid, rid
        elif which == "stats":
            cmd = T(type=T.CONSUMER_STATS)
            cmd.consumerStats.consumer_id, cmd.consumerStats.request_id = cid, rid
        elif which == "last-id":
            cmd = T(type=T.GET_LAST_MESSAGE_ID)
            cmd.getLastMessageId.consumer_id, cmd.getLastMessageId.request_id = cid, rid
        else:
            cmd = T(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES)
            r = cmd.redeliverUnacknowledgedMessages
            r.consumer_id = cid
            for mid in data.draw(st.lists(message_ids, max_size=3)):
                r.message_ids.add().CopyFrom(mid)
            if self.received and data.draw(st.booleans()):
                r.message_ids.add().CopyFrom(data.draw(st.sampled_from(self.received))[1])
            self._send(cmd)
            return
        self._send(cmd)
        answer = self._answer(rid)
        if which == "close" or (which == "unsubscribe" and answer.type == T.SUCCESS):
            self.consumers.pop(cid, None)

    # -- lookups ----------------------------------------------------------------------
    @rule(name=names, which=st.sampled_from(["lookup", "metadata", "schema", "create-schema",
                                             "namespace"]))
    def lookup(self, name: str, which: str) -> None:
        rid = self._new_id()
        if which == "lookup":
            cmd = T(type=T.LOOKUP)
            cmd.lookupTopic.topic, cmd.lookupTopic.request_id = name, rid
        elif which == "metadata":
            cmd = T(type=T.PARTITIONED_METADATA)
            cmd.partitionMetadata.topic, cmd.partitionMetadata.request_id = name, rid
        elif which == "schema":
            cmd = T(type=T.GET_SCHEMA)
            cmd.getSchema.topic, cmd.getSchema.request_id = name, rid
        elif which == "create-schema":
            cmd = T(type=T.GET_OR_CREATE_SCHEMA)
            g = cmd.getOrCreateSchema
            g.topic, g.request_id = name, rid
            g.schema.name, g.schema.type, g.schema.schema_data = "s", pb.Schema.Json, name.encode()
        else:
            cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
            t = cmd.getTopicsOfNamespace
            t.namespace, t.request_id = name.removeprefix("persistent://")[:30], rid
        self._send(cmd)
        self._answer(rid)

    # -- transactions -----------------------------------------------------------------
    @rule(tc_id=st.one_of(st.just(0), ids), ttl=st.one_of(st.none(), st.integers(0, U64_MAX)))
    def new_txn(self, tc_id: int, ttl: int | None) -> None:
        if not self.tc_connected:
            cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
            rid = self._new_id()
            cmd.tcClientConnectRequest.request_id, cmd.tcClientConnectRequest.tc_id = rid, 0
            self._send(cmd)
            self._answer(rid)
            self.tc_connected = True
        cmd = T(type=T.NEW_TXN)
        rid = self._new_id()
        cmd.newTxn.request_id, cmd.newTxn.tc_id = rid, tc_id
        if ttl is not None:
            cmd.newTxn.txn_ttl_seconds = ttl
        self._send(cmd)
        r = self._answer(rid).newTxnResponse
        if not r.HasField("error"):
            self.txns.append((r.txnid_most_bits, r.txnid_least_bits))

    def _txn(self, data: st.DataObject) -> tuple[int, int]:
        random_txn = st.tuples(ids, ids)
        if self.txns:
            return data.draw(st.one_of(st.sampled_from(self.txns), random_txn))
        return data.draw(random_txn)

    @rule(data=st.data(), name=names, subscription=st.sampled_from(["", *SUBSCRIPTIONS]),
          which=st.sampled_from(["partition", "subscription", "end"]),
          action=st.sampled_from([pb.COMMIT, pb.ABORT]))
    def txn_command(self, data: st.DataObject, name: str, subscription: str, which: str,
                    action: int) -> None:
        most, least = self._txn(data)
        rid = self._new_id()
        if which == "partition":
            cmd = T(type=T.ADD_PARTITION_TO_TXN)
            c: Any = cmd.addPartitionToTxn
            c.partitions.append(name)
        elif which == "subscription":
            cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
            c = cmd.addSubscriptionToTxn
            c.subscription.append(pb.Subscription(topic=name, subscription=subscription))
        else:
            cmd = T(type=T.END_TXN)
            c = cmd.endTxn
            c.txn_action = action
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = rid, most, least
        self._send(cmd)
        self._answer(rid)

    # -- protocol violations ----------------------------------------------------------
    @precondition(lambda self: not self.violated)
    @rule(which=st.sampled_from(["response-type", "second-connect", "empty-send", "garbage",
                                 "unasked-auth-response"]))
    def protocol_violation(self, which: str) -> None:
        if which == "response-type":
            cmd = T(type=T.SUCCESS)
            cmd.success.request_id = 1
            frame = encode_command(cmd)
        elif which == "second-connect":
            cmd = T(type=T.CONNECT)
            cmd.connect.client_version, cmd.connect.protocol_version = "again", 20
            frame = encode_command(cmd)
        elif which == "unasked-auth-response":
            # No AUTH_CHALLENGE is pending: with or without authentication a
            # violation, so a client cannot queue credential checks.
            cmd = T(type=T.AUTH_RESPONSE)
            cmd.authResponse.response.auth_method_name = "token"
            cmd.authResponse.response.auth_data = b"\xff" * 100
            frame = encode_command(cmd)
        elif which == "empty-send":
            cmd = T(type=T.SEND)
            cmd.send.producer_id, cmd.send.sequence_id = 1, 1
            frame = encode_payload_command(cmd, b"")
        else:
            frame = U32.pack(8) + U32.pack(4) + b"\xff\xff\xff\xff"
        self.client.raw.send_bytes(frame)
        self.violated = True

    # -- invariants -------------------------------------------------------------------
    @invariant()
    def served(self) -> None:
        """Open and answering a PING in bounded time; after a violation, closed, and a
        new connection is served."""
        if self.violated:
            # Answers to earlier requests may come first; then the broker must close
            # (a read timing out instead fails the test).
            try:
                while True:
                    self._check(self.client.raw.recv())
            except ConnectionError:
                pass
            self.violated = False
            self.client.close()
            self._connect()
        raw = self.client.raw
        raw.send(T(type=T.PING))
        while (got := raw.recv()).type != T.PONG:
            self._check(got)

    def teardown(self) -> None:
        # No transaction is left stuck: each one this session opened can still be
        # aborted, or has ended (a commit that can never reach a participant would
        # leave it committing, and abort would be refused with InvalidTxnStatus).
        for most, least in self.txns:
            cmd = T(type=T.END_TXN)
            e = cmd.endTxn
            e.request_id, e.txnid_most_bits, e.txnid_least_bits = self._new_id(), most, least
            e.txn_action = pb.ABORT
            self._send(cmd)
            r = self._answer(e.request_id).endTxnResponse
            assert not r.HasField("error") or r.error == ServerError.TransactionNotFound, r
        self.client.close()
        assert self.watch.unexpected_failures() == [], self.watch.new_text()


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        derandomize=DERANDOMIZE,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def test_random_command_sequences_never_break_the_connection(broker: BrokerProcess) -> None:
    mode = "derandomized" if DERANDOMIZE else "random (a failure prints its seed)"
    print(f"stateful fuzz: {mode}, {EXAMPLES} examples of up to {STEPS} steps "
          "(QUASAR_FUZZ_EXAMPLES / QUASAR_FUZZ_STEPS / QUASAR_FUZZ_RANDOM=1 for longer runs)")
    run_state_machine_as_test(lambda: BrokerSession(broker), settings=fuzz_settings(EXAMPLES))


# -- the same with authentication and authorization on -----------------------------------
SECRET = create_secret_key()


def admin_as_root(broker: BrokerProcess, method: str, path: str, body: Any) -> None:
    request = urllib.request.Request(
        broker.admin_url + path, data=json.dumps(body).encode(), method=method,
        headers={"Authorization": f"Bearer {create_token('root', SECRET)}",
                 "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {
        **token_settings(SECRET, super_users="root"),
    }
    proc = BrokerProcess(tmp_path_factory.mktemp("fuzz-secured") / "data",
                         settings=settings).start()
    # "app" may produce and consume in public/default; "stranger" may do nothing.
    admin_as_root(proc, "POST", "/admin/v2/namespaces/public/default/permissions/app",
                  ["produce", "consume"])
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.mark.parametrize("role", ["app", "stranger"])
def test_random_command_sequences_of_a_role_with_few_rights(
    secured_broker: BrokerProcess, role: str
) -> None:
    """Refusals (AuthorizationError, TransactionNotFound for another role's
    transaction) are answers like any other: the connection stays."""
    token = create_token(role, SECRET)
    run_state_machine_as_test(
        lambda: BrokerSession(secured_broker, token),
        settings=fuzz_settings(max(EXAMPLES // 3, 1)),
    )
