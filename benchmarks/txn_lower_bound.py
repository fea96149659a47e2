#!/usr/bin/env python3
"""The least CPU a CPython broker and client can spend on a produce-50 transaction.

    python benchmarks/txn_lower_bound.py [--concurrency 16,64,256] [--seconds 6]
                                         [--messages 50] [--size 1024]
                                         [--sync thread|inline]
                                         [--per-message-us 0]

A model, not quasar: a server that does only the steps Pulsar's design requires of a
produce-only transaction, and a client with nothing but the requests. Both run on
uvloop with quasar's codec (frame decoder, protobuf commands, the hand-written SEND
and receipt encoders), in two processes on this machine, as ``quasar perf`` and the
broker do. The same pair also runs the ``--txn-disable`` loop: one batched SEND of
``--messages`` messages, answered once durable.

The transaction: NEW_TXN (an OPEN record in the coordinator log, durable before the
answer), ADD_PARTITION_TO_TXN (a record), the SEND with the transaction id (the
buffer notes the transaction's first position), END_TXN: COMMITTING durable, then the
commit marker in the partition, then COMMITTED, then the answer. Each log has a group
commit once per loop turn: write + fdatasync on a writer thread, as quasar's
broker does (``--sync inline``: on the loop itself, the fewest CPU cycles).

Left out, so the figures are a floor under any real implementation: timeouts,
retries, validation and error answers, deleting a transaction's log records after
its end, the preserver, snapshots, metrics, dispatch, and the client's per-message
API (the model sends one pre-built batch payload per loop; ``--per-message-us``
spends that much CPU per message in the client instead, in both loops, to stand for
a real producer API).

Why: comparing quasar's CPU per transaction and per baseline loop with this model's
tells how much of the gap to the produce-50 target (``docs/performance.md``) the
design forces and how much is implementation. Linux only;
nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import uvloop  # noqa: E402

from quasar.client.connection import make_command  # noqa: E402
from quasar.protocol import pb  # noqa: E402
from quasar.protocol._generated import transaction_log_pb2 as txnlog  # noqa: E402
from quasar.protocol.fastpath import (  # noqa: E402
    encode_plain_metadata,
    encode_plain_send_parts,
    encode_send_receipt,
)
from quasar.protocol.frames import FrameDecoder, encode_command  # noqa: E402
from quasar.transaction.buffer.records import TXN_COMMIT  # noqa: E402

T = pb.BaseCommand
Record = txnlog.TransactionMetadataEntry
TOPIC = "persistent://public/default/lower-bound"


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupLog:
    """An append-only file; appends of one loop turn share one write and fdatasync.

    ``threaded``: a writer thread syncs while the loop goes on, as quasar's group
    commit does; otherwise the loop syncs inline (fewest cycles, a blocked loop).
    """

    def __init__(
        self, path: str, loop: asyncio.AbstractEventLoop, threaded: bool
    ) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._loop = loop
        self._data: list[bytes] = []
        self._done: list[tuple[Callable[[int], None], int]] = []
        self.next_position = 0
        self._scheduled = False
        self._queue: queue.SimpleQueue[Any] | None = None
        if threaded:
            self._queue = queue.SimpleQueue()
            threading.Thread(target=self._writer, daemon=True).start()

    def append(self, data: bytes, done: Callable[[int], None]) -> None:
        self._data.append(data)
        self._done.append((done, self.next_position))
        self.next_position += 1
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._sync)

    def _sync(self) -> None:
        self._scheduled = False
        data, done = self._data, self._done
        self._data, self._done = [], []
        if self._queue is not None:
            self._queue.put((data, done))
            return
        self._write(data)
        self._complete(done)

    def _write(self, data: list[bytes]) -> None:
        os.write(self._fd, b"".join(data))
        os.fdatasync(self._fd)

    def _writer(self) -> None:
        assert self._queue is not None
        while True:
            data, done = self._queue.get()
            self._write(data)
            self._loop.call_soon_threadsafe(self._complete, done)

    @staticmethod
    def _complete(done: list[tuple[Callable[[int], None], int]]) -> None:
        for callback, position in done:
            callback(position)


class _Writer(asyncio.Protocol):
    """Frames written once per loop turn, as quasar's broker and client do."""

    transport: asyncio.Transport

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder(5 << 20)
        self._out: list[Any] = []
        self._scheduled = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def write(self, *pieces: Any) -> None:
        self._out.extend(pieces)
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        out, self._out = self._out, []
        if not self.transport.is_closing():
            self.transport.writelines(out)


class ModelBroker(_Writer):
    """One partition and one coordinator, shared by every connection."""

    def __init__(self, state: ModelState) -> None:
        super().__init__()
        self.state = state

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            cmd = frame.command
            kind = cmd.type
            if kind == T.SEND:
                self._send(cmd.send, frame.payload)
            elif kind == T.NEW_TXN:
                self._new_txn(cmd.newTxn.request_id, cmd.newTxn.txn_ttl_seconds)
            elif kind == T.ADD_PARTITION_TO_TXN:
                add = cmd.addPartitionToTxn
                self._add_partitions(add.request_id, add.txnid_least_bits, add.partitions)
            elif kind == T.END_TXN:
                self._end_txn(cmd.endTxn.request_id, cmd.endTxn.txnid_least_bits)
            elif kind == T.CONNECT:
                self.write(
                    encode_command(
                        make_command(
                            T.CONNECTED, "connected", server_version="model",
                            protocol_version=19,
                        )
                    )
                )

    def _send(self, send: Any, payload: bytes | None) -> None:
        state = self.state
        producer_id, sequence_id = send.producer_id, send.sequence_id
        if send.HasField("txnid_least_bits"):
            state.ongoing.setdefault(send.txnid_least_bits, state.data.next_position)

        def durable(position: int) -> None:
            self.write(encode_send_receipt(producer_id, sequence_id, 1, position))

        state.data.append(payload or b"", durable)

    def _new_txn(self, request_id: int, timeout_ms: int) -> None:
        state = self.state
        state.sequence += 1
        least = state.sequence
        now = _now_ms()
        record = Record(
            metadata_op=Record.NEW, txnid_least_bits=least, txnid_most_bits=0,
            timeout_ms=timeout_ms, start_time=now, last_modification_time=now,
            max_local_txn_id=least,
        )
        state.partitions[least] = set()

        def durable(_position: int) -> None:
            self.write(
                encode_command(
                    make_command(
                        T.NEW_TXN_RESPONSE, "newTxnResponse", request_id=request_id,
                        txnid_least_bits=least, txnid_most_bits=0,
                    )
                )
            )

        state.log.append(record.SerializeToString(), durable)

    def _add_partitions(self, request_id: int, least: int, partitions: Any) -> None:
        state = self.state
        names = list(partitions)
        record = Record(
            metadata_op=Record.ADD_PARTITION, txnid_least_bits=least, txnid_most_bits=0,
            partitions=names, last_modification_time=_now_ms(),
        )

        def durable(_position: int) -> None:
            state.partitions[least].update(names)
            self.write(
                encode_command(
                    make_command(
                        T.ADD_PARTITION_TO_TXN_RESPONSE, "addPartitionToTxnResponse",
                        request_id=request_id, txnid_least_bits=least,
                        txnid_most_bits=0,
                    )
                )
            )

        state.log.append(record.SerializeToString(), durable)

    def _end_txn(self, request_id: int, least: int) -> None:
        state = self.state

        def update(expected: int, new: int) -> bytes:
            return Record(
                metadata_op=Record.UPDATE, txnid_least_bits=least, txnid_most_bits=0,
                expected_status=expected, new_status=new,
                last_modification_time=_now_ms(),
            ).SerializeToString()

        def committed(_position: int) -> None:
            del state.partitions[least]
            self.write(
                encode_command(
                    make_command(
                        T.END_TXN_RESPONSE, "endTxnResponse", request_id=request_id,
                        txnid_least_bits=least, txnid_most_bits=0,
                    )
                )
            )

        # The model has one partition, so one marker (and the maxReadPosition it
        # moves); COMMITTED follows the last marker of the transaction.
        markers_left = [0]

        def marker_durable(position: int) -> None:
            state.ongoing.pop(least, None)
            state.max_read_position = position
            markers_left[0] -= 1
            if markers_left[0] == 0:
                state.log.append(update(txnlog.COMMITTING, txnlog.COMMITTED), committed)

        def committing(_position: int) -> None:
            marker = pb.MessageMetadata(
                producer_name="model-tc", sequence_id=0, publish_time=_now_ms(),
                marker_type=TXN_COMMIT, txnid_least_bits=least, txnid_most_bits=0,
            ).SerializeToString()
            partitions = state.partitions[least]
            markers_left[0] = len(partitions)
            for _partition in partitions:
                state.data.append(marker, marker_durable)

        state.log.append(update(txnlog.OPEN, txnlog.COMMITTING), committing)


class ModelState:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, directory: str, threaded: bool
    ) -> None:
        self.data = GroupLog(os.path.join(directory, "partition"), loop, threaded)
        self.log = GroupLog(os.path.join(directory, "coordinator"), loop, threaded)
        self.sequence = 0
        self.partitions: dict[int, set[str]] = {}
        # The transaction buffer's ongoing transactions and their first positions.
        self.ongoing: dict[int, int] = {}
        self.max_read_position = -1


async def serve(port: int, directory: str, threaded: bool) -> None:
    loop = asyncio.get_running_loop()
    state = ModelState(loop, directory, threaded)
    server = await loop.create_server(lambda: ModelBroker(state), "127.0.0.1", port)
    await server.serve_forever()


class ModelClient(_Writer):
    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[Any, asyncio.Future[Any]] = {}
        self.connected: asyncio.Future[None] = self.loop.create_future()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.write(
            encode_command(
                make_command(
                    T.CONNECT, "connect", client_version="model", protocol_version=19
                )
            )
        )

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            cmd = frame.command
            kind = cmd.type
            if kind == T.SEND_RECEIPT:
                self._answer(("send", cmd.send_receipt.sequence_id), None)
            elif kind == T.NEW_TXN_RESPONSE:
                answer = cmd.newTxnResponse
                self._answer(answer.request_id, answer.txnid_least_bits)
            elif kind == T.ADD_PARTITION_TO_TXN_RESPONSE:
                self._answer(cmd.addPartitionToTxnResponse.request_id, None)
            elif kind == T.END_TXN_RESPONSE:
                self._answer(cmd.endTxnResponse.request_id, None)
            elif kind == T.CONNECTED:
                self.connected.set_result(None)

    def _answer(self, key: Any, value: Any) -> None:
        waiter = self.waiting.pop(key)
        if not waiter.done():  # cancelled when the run stops
            waiter.set_result(value)

    def request(self, key: Any, *pieces: Any) -> asyncio.Future[Any]:
        waiter = self.loop.create_future()
        self.waiting[key] = waiter
        self.write(*pieces)
        return waiter


def _batch_payload(messages: int, size: int) -> bytes:
    single = pb.SingleMessageMetadata(payload_size=size).SerializeToString()
    one = len(single).to_bytes(4, "big") + single + os.urandom(size)
    return one * messages


async def _run_loops(
    port: int, txn: bool, seconds: float, concurrency: int, messages: int, size: int,
    server_pid: int, per_message_us: float,
) -> tuple[float, float, float]:
    """Loops per second, client and server CPU µs per loop."""
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(ModelClient, "127.0.0.1", port)
    await client.connected
    payload = _batch_payload(messages, size)
    counters = {"request": 0, "sequence": 0, "loops": 0}

    def next_request() -> int:
        counters["request"] += 1
        return counters["request"]

    async def send(txn_id: tuple[int, int] | None) -> None:
        if per_message_us:
            _burn(per_message_us * messages)
        counters["sequence"] += 1
        sequence = counters["sequence"]
        meta = encode_plain_metadata("model", sequence, _now_ms(), messages, txn_id=txn_id)
        head, body = encode_plain_send_parts(1, sequence, messages, meta, payload, txn_id)
        await client.request(("send", sequence), head, body)

    async def command(type_: int, field: str, **fields: Any) -> Any:
        request_id = next_request()
        frame = encode_command(make_command(type_, field, request_id=request_id, **fields))
        return await client.request(request_id, frame)

    async def worker() -> None:
        while True:
            if txn:
                least = await command(T.NEW_TXN, "newTxn", txn_ttl_seconds=60000, tc_id=0)
                ids = {"txnid_least_bits": least, "txnid_most_bits": 0}
                await command(
                    T.ADD_PARTITION_TO_TXN, "addPartitionToTxn", partitions=[TOPIC], **ids
                )
                await send((0, least))
                await command(T.END_TXN, "endTxn", txn_action=pb.COMMIT, **ids)
            else:
                await send(None)
            counters["loops"] += 1

    tasks = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    await asyncio.sleep(2.0)  # warm-up
    loops0, cpu0, server0, wall0 = (
        counters["loops"], time.process_time(), _cpu_seconds(server_pid), time.monotonic()
    )
    await asyncio.sleep(seconds)
    loops1, cpu1, server1, wall1 = (
        counters["loops"], time.process_time(), _cpu_seconds(server_pid), time.monotonic()
    )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    client.transport.close()
    loops = max(1, loops1 - loops0)
    return (
        loops / (wall1 - wall0),
        (cpu1 - cpu0) / loops * 1e6,
        (server1 - server0) / loops * 1e6,
    )


def _burn(microseconds: float) -> None:
    """Spend this much CPU, as a client's per-message API would."""
    end = time.perf_counter() + microseconds / 1e6
    while time.perf_counter() < end:
        pass


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for_port(port: int) -> None:
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the model server did not listen on {port}")


def _one_run(args: argparse.Namespace, txn: bool, concurrency: int) -> tuple[float, ...]:
    with TemporaryDirectory(prefix="quasar-lower-bound-") as directory:
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(args.port), directory, args.sync]
        )
        try:
            _wait_for_port(args.port)
            return uvloop.run(
                _run_loops(
                    args.port, txn, args.seconds, concurrency, args.messages,
                    args.size, server.pid, args.per_message_us,
                )
            )
        finally:
            server.kill()
            server.wait()


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        uvloop.run(serve(int(sys.argv[2]), sys.argv[3], sys.argv[4] == "thread"))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="16,64,256")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--port", type=int, default=6699)
    parser.add_argument(
        "--per-message-us", type=float, default=0.0,
        help="CPU the client spends per message before each SEND, in both loops "
        "(quasar's producer API costs about 5.5 µs a message)",
    )
    parser.add_argument(
        "--sync", choices=("thread", "inline"), default="thread",
        help="fdatasync on a writer thread (as quasar) or inline on the loop",
    )
    args = parser.parse_args()
    print(
        f"model broker and client, {args.messages} messages of {args.size} B per loop, "
        f"fdatasync {args.sync}; CPU in µs per loop (user + system, all threads)"
    )
    print(f"{'-c':>4} {'loop':12} {'loops/s':>9} {'client':>8} {'server':>8} {'ratio':>6}")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        plain = _one_run(args, False, concurrency)
        txn = _one_run(args, True, concurrency)
        for name, (rate, client_us, server_us) in (("plain", plain), ("transaction", txn)):
            ratio = f"{rate / plain[0]:.2f}" if name == "transaction" else ""
            print(
                f"{concurrency:>4} {name:12} {rate:>9,.0f} {client_us:>8.1f} "
                f"{server_us:>8.1f} {ratio:>6}"
            )
        print(
            f"{'':>4} overhead per transaction: client {txn[1] - plain[1]:.1f} µs, "
            f"server {txn[2] - plain[2]:.1f} µs"
        )


if __name__ == "__main__":
    main()
