"""Commands and checks the hostile-command tests share."""

from __future__ import annotations

import http.client

from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.hostile import HostileClient
from quasar.testing.process import BrokerProcess

T = pb.BaseCommand
U64_MAX = (1 << 64) - 1
MINUS_ONE = U64_MAX  # -1 as the wire's uint64 carries it
UNKNOWN = 987_654_321  # an id no request created


def not_unknown(response: object) -> bool:
    """Whether a response carries no error or one other than UnknownError (a bug's)."""
    for field in ("error", "error_code"):
        if hasattr(response, field):
            return not response.HasField(field) or (  # type: ignore[attr-defined]
                getattr(response, field) != ServerError.UnknownError
            )
    raise AssertionError(f"no error field in {response}")


def error_of(answer: pb.BaseCommand) -> int:
    assert answer.type == T.ERROR, answer
    return int(answer.error.error)


def message_id(ledger: int, entry: int) -> pb.MessageIdData:
    return pb.MessageIdData(ledgerId=ledger, entryId=entry)


def subscribe_cmd(client: HostileClient, topic: str, **fields: object) -> pb.BaseCommand:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, "s", pb.CommandSubscribe.Exclusive
    s.consumer_id = s.request_id = client.new_id()
    for key, value in fields.items():
        if isinstance(value, pb.MessageIdData):
            getattr(s, key).CopyFrom(value)
        else:
            setattr(s, key, value)
    return cmd


def flow(consumer_id: int, permits: int = 10) -> pb.BaseCommand:
    cmd = T(type=T.FLOW)
    cmd.flow.consumer_id, cmd.flow.messagePermits = consumer_id, permits
    return cmd


def ack(consumer_id: int, *ids: pb.MessageIdData, request_id: int | None = None,
        cumulative: bool = False) -> pb.BaseCommand:
    cmd = T(type=T.ACK)
    a = cmd.ack
    a.consumer_id = consumer_id
    a.ack_type = pb.CommandAck.Cumulative if cumulative else pb.CommandAck.Individual
    for mid in ids:
        a.message_id.add().CopyFrom(mid)
    if request_id is not None:
        a.request_id = request_id
    return cmd


def unsubscribe(consumer_id: int, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.UNSUBSCRIBE)
    cmd.unsubscribe.consumer_id, cmd.unsubscribe.request_id = consumer_id, request_id
    return cmd


def seek(consumer_id: int, request_id: int, mid: pb.MessageIdData | None = None,
         publish_time: int | None = None) -> pb.BaseCommand:
    cmd = T(type=T.SEEK)
    cmd.seek.consumer_id, cmd.seek.request_id = consumer_id, request_id
    if mid is not None:
        cmd.seek.message_id.CopyFrom(mid)
    if publish_time is not None:
        cmd.seek.message_publish_time = publish_time
    return cmd


def txn_answer(client: HostileClient, cmd: pb.BaseCommand, field: str) -> pb.BaseCommand:
    answer = client.answer(cmd)
    return getattr(answer, field)  # type: ignore[no-any-return]


def new_txn(client: HostileClient) -> tuple[int, int]:
    cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
    cmd.tcClientConnectRequest.request_id, cmd.tcClientConnectRequest.tc_id = client.new_id(), 0
    assert not_unknown(txn_answer(client, cmd, "tcClientConnectResponse"))
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id, cmd.newTxn.tc_id = client.new_id(), 0
    r = txn_answer(client, cmd, "newTxnResponse")
    assert not r.HasField("error"), r
    return r.txnid_most_bits, r.txnid_least_bits


def request_partitions(broker: BrokerProcess, topic: str, partitions: int) -> int:
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/partitions"
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=30)
    try:
        conn.request("PUT", path, body=str(partitions),
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()
