"""Redis streams: ``redis-server`` (Debian) with an append-only file synced on every
write, and redis-py's asyncio client.

Durability: ``appendonly yes``, ``appendfsync always``: Redis writes and fsyncs the
append-only file before it answers the commands of an event-loop pass, so an XADD is
on disk when its reply arrives. Producer: XADD, or for W2 a pipeline of XADDs (one
write and one fsync for the lot). Consumer: XREADGROUP in a consumer group (up to 500
entries per call), then one XACK with the ids of what it got.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from typing import Any

from peerbench.server import ServerProcess, Unavailable, free_port, wait_for

# redis-py runs one command at a time per connection, so a producer keeps this many
# connections, each with one XADD (or one pipeline) outstanding: W1 has 32 messages in
# flight rather than 1,000; W2 has ten pipelines of 100.
PRODUCER_CONNECTIONS = 32


class RedisServer(ServerProcess):
    system = "redis-streams"
    settings = "appendonly yes, appendfsync always, no RDB snapshots"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise Unavailable("redis-server is not installed (Debian package redis-server)")
        self.port = free_port()
        self.proc = self.launch([
            exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.work_dir),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
            "--protected-mode", "no",
        ])
        wait_for(self._pong, 30, "redis-server", self.proc, self.log)

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(7).startswith(b"+PONG")
        except OSError:
            return False

    def version(self) -> str:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        return out.split()[2].removeprefix("v=") if out else "?"

    def spec(self) -> dict[str, Any]:
        return {"adapter": "redis_streams", "port": self.port}


class RedisStreamsClient:
    supports_batching = True
    max_in_flight = PRODUCER_CONNECTIONS

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.stream = spec["name"]

    async def open(self) -> None:
        import redis.asyncio as aioredis

        pool = aioredis.BlockingConnectionPool(
            host="127.0.0.1", port=self.spec["port"], max_connections=PRODUCER_CONNECTIONS, timeout=60
        )
        self.redis = aioredis.Redis(connection_pool=pool)

    async def setup(self) -> None:
        await self.redis.xgroup_create(self.stream, "g", id="0", mkstream=True)

    async def publish(self, body: bytes) -> None:
        await self.redis.xadd(self.stream, {"d": body})

    async def publish_batch(self, bodies: list[bytes]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(self.stream, {"d": body})
        await pipe.execute()

    async def consume(self, on_message: Any, stop: asyncio.Event) -> None:
        while not stop.is_set():
            got = await self.redis.xreadgroup("g", "c", {self.stream: ">"}, count=500, block=100)
            for _stream, entries in got or []:
                ids = []
                for entry_id, fields in entries:
                    on_message(fields[b"d"])
                    ids.append(entry_id)
                if ids:
                    await self.redis.xack(self.stream, "g", *ids)

    async def close(self) -> None:
        await self.redis.aclose()


def client(spec: dict[str, Any]) -> RedisStreamsClient:
    return RedisStreamsClient(spec)
