"""Helpers for hostile-client tests against a real broker process: a raw connection
that keeps its own request ids, checks that the broker still serves it, and a scan of
the broker's log for failures a client's mistake must never cause."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from quasar.protocol import encode_payload_command, make_entry, pb
from quasar.testing.raw import Raw

T = pb.BaseCommand
# What the broker sends without being asked: keep-alive, deliveries, and notices
# about consumers and producers (CLOSE_* from the broker carries no client request).
UNSOLICITED = frozenset({
    T.PING, T.PONG, T.MESSAGE, T.ACTIVE_CONSUMER_CHANGE, T.REACHED_END_OF_TOPIC,
    T.CLOSE_CONSUMER, T.CLOSE_PRODUCER,
})

# What the broker logs when a handler raised instead of answering: asyncio's report
# of a failed ``data_received`` (the connection is then closed), a request task's
# failure, or any other traceback.
UNEXPECTED_FAILURE = re.compile(
    r"Traceback|failed unexpectedly|Fatal error|request handler failed|"
    r"transaction request failed|producer creation failed|subscribe failed|"
    r"exception was never retrieved"
)


def topic_name(prefix: str = "hostile") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


class LogWatch:
    """The part of a broker's log written since the watch was (re)started."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = self._size()

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def new_text(self) -> str:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace")

    def unexpected_failures(self) -> list[str]:
        """The lines since the start that show a handler failing on a client's input."""
        return [line for line in self.new_text().splitlines() if UNEXPECTED_FAILURE.search(line)]


class HostileClient:
    """A CONNECTed raw connection whose requests carry fresh ids; with ``token``, it
    authenticates with it (Pulsar's ``token`` method)."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.raw = Raw(port)
        if token is None:
            self.raw.connect()
        else:
            cmd = T(type=T.CONNECT)
            c = cmd.connect
            c.client_version, c.protocol_version = "hostile", 20
            c.auth_method_name, c.auth_data = "token", token.encode()
            answer = self.answer(cmd)
            assert answer.type == T.CONNECTED, answer
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def ping(self) -> None:
        """A PING round trip: fails if the broker closed the connection. Frames that
        arrive before the PONG are dropped."""
        self.raw.send(T(type=T.PING))
        self.raw.recv_type(T.PONG)

    def silent(self, cmd: pb.BaseCommand) -> None:
        """Send ``cmd`` and check that the broker answers nothing to it: the next frame
        is the PONG to a PING sent right after."""
        self.raw.send(cmd)
        self.raw.send(T(type=T.PING))
        answer = self.raw.recv()
        assert answer.type == T.PONG, f"unexpected answer {T.Type.Name(answer.type)}: {answer}"

    def answer(self, cmd: pb.BaseCommand) -> pb.BaseCommand:
        """Send ``cmd`` and return the broker's next frame that answers a request
        (PONGs and what the broker sends on its own are skipped)."""
        self.raw.send(cmd)
        return self.next_answer()

    def next_answer(self) -> pb.BaseCommand:
        while True:
            got = self.raw.recv()
            if got.type not in UNSOLICITED:
                return got

    def producer(self, topic: str) -> int:
        pid = self.new_id()
        answer = self.raw.producer(topic, producer_id=pid, request_id=pid)
        assert answer.type == T.PRODUCER_SUCCESS, answer
        return pid

    def subscribe(self, topic: str, subscription: str = "s",
                  sub_type: pb.CommandSubscribe.SubType = pb.CommandSubscribe.Shared) -> int:
        cid = self.new_id()
        cmd = T(type=T.SUBSCRIBE)
        s = cmd.subscribe
        s.topic, s.subscription, s.subType = topic, subscription, sub_type
        s.consumer_id, s.request_id = cid, cid
        answer = self.answer(cmd)
        assert answer.type == T.SUCCESS, answer
        return cid

    def send_message(self, pid: int, sequence_id: int, payload: bytes = b"x",
                     entry: bytes | None = None) -> pb.BaseCommand:
        """SEND one message (or the given entry bytes) and return the answer."""
        cmd = T(type=T.SEND)
        cmd.send.producer_id, cmd.send.sequence_id = pid, sequence_id
        if entry is None:
            md = pb.MessageMetadata(
                producer_name="hostile", sequence_id=sequence_id, publish_time=1
            )
            entry = make_entry(md, payload)
        self.raw.send_bytes(encode_payload_command(cmd, entry))
        while True:
            got = self.raw.recv()
            if got.type in (T.SEND_RECEIPT, T.SEND_ERROR):
                return got

    def close(self) -> None:
        self.raw.close()
