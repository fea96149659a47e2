"""A raw Pulsar connection for tests: quasar.protocol (sans-IO) over a blocking socket.

Tests use it to send exactly the frames they mean to, including malformed ones and
commands no client library sends (END_TXN_ON_PARTITION, ...).
"""

from __future__ import annotations

import socket

from quasar.protocol import FrameDecoder, encode_command, pb

T = pb.BaseCommand
_OPEN: list[Raw] = []


def close_all() -> None:
    """Close every connection opened so far (test teardown)."""
    while _OPEN:
        _OPEN.pop().close()


class Raw:
    """A raw Pulsar connection speaking through quasar.protocol (sans-IO) over a socket."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        _OPEN.append(self)
        self.decoder = FrameDecoder(16 * 1024 * 1024)
        self.pending: list[pb.BaseCommand] = []

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, cmd: pb.BaseCommand) -> None:
        self.sock.sendall(encode_command(cmd))

    def recv(self) -> pb.BaseCommand:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            self.pending.extend(f.command for f in self.decoder.feed(data))
        return self.pending.pop(0)

    def recv_type(self, type_: int) -> pb.BaseCommand:
        while True:
            cmd = self.recv()
            if cmd.type == type_:
                return cmd

    def is_closed_by_peer(self) -> bool:
        """True once the broker closed the connection (reads until EOF, bounded by timeout)."""
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True

    def connect(self) -> pb.BaseCommand:
        cmd = pb.BaseCommand(type=T.CONNECT)
        cmd.connect.client_version = "raw-test"
        cmd.connect.protocol_version = 20
        self.send(cmd)
        return self.recv_type(T.CONNECTED)

    def producer(self, topic: str, producer_id: int = 1, request_id: int = 1) -> pb.BaseCommand:
        cmd = pb.BaseCommand(type=T.PRODUCER)
        cmd.producer.topic = topic
        cmd.producer.producer_id = producer_id
        cmd.producer.request_id = request_id
        self.send(cmd)
        return self.recv()

    def close(self) -> None:
        self.sock.close()

    def request(self, cmd: pb.BaseCommand, response_type: int) -> pb.BaseCommand:
        """Send ``cmd`` and return the next command of ``response_type``."""
        self.send(cmd)
        return self.recv_type(response_type)
