"""RabbitMQ: ``rabbitmq-server`` (Debian), started as its own node without systemd,
and aio-pika.

Durability: a durable queue, persistent messages (delivery mode 2) and publisher
confirms; the broker confirms a persistent message once it is on disk (quorum queue:
in its Raft log, fsynced; classic queue: in the message store, fsynced). Two systems
share this module: ``rabbitmq-quorum`` (``x-queue-type: quorum``) and
``rabbitmq-classic`` (``x-queue-type: classic``). AMQP has no client batching: W2 is
not run. Consumer: prefetch 1,000, one ack per message.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from peerbench.server import ServerProcess, Unavailable, free_port, wait_for

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
PREFETCH = 1000


def _amqp_answers(port: int) -> bool:
    """True when the port answers the AMQP 0-9-1 header with a method frame
    (Connection.Start), which the broker sends only once it accepts clients."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            return s.recv(1) == b"\x01"
    except OSError:
        return False


class RabbitServer(ServerProcess):
    system = "rabbitmq"
    settings = "durable queue, persistent messages, publisher confirms"

    def start(self) -> None:
        epmd = shutil.which("epmd")
        if not RABBITMQ_SERVER.exists() or epmd is None:
            raise Unavailable("rabbitmq-server is not installed (Debian package rabbitmq-server)")
        self.port = free_port()
        epmd_port = free_port()
        home = self.work_dir
        (home / "enabled_plugins").write_text("[].\n")
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (home / "rabbitmq-env.conf").write_text("")
        env = {
            "HOME": str(home),
            "RABBITMQ_NODENAME": f"peers{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        }
        # Our own epmd in the foreground, so that it is ours to stop (the node would
        # otherwise start a daemon that outlives it).
        self.helpers.append(self.launch([epmd, "-port", str(epmd_port), "-address", "127.0.0.1"], env))
        self.proc = self.launch([str(RABBITMQ_SERVER)], env)
        wait_for(lambda: _amqp_answers(self.port), 120, "rabbitmq-server", self.proc, self.log)

    def version(self) -> str:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"], capture_output=True, text=True)
        return out.stdout.split("-")[0] or "?"

    def spec(self) -> dict[str, Any]:
        return {"adapter": "rabbitmq", "port": self.port}


class RabbitClient:
    supports_batching = False

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.queue = spec["name"]

    async def open(self) -> None:
        import aio_pika

        self.aio_pika = aio_pika
        self.conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{self.spec['port']}/")
        self.channel = await self.conn.channel(publisher_confirms=True)

    async def setup(self) -> None:
        await self.channel.declare_queue(
            self.queue, durable=True, arguments={"x-queue-type": self.spec["queue_type"]}
        )

    async def publish(self, body: bytes) -> None:
        message = self.aio_pika.Message(body, delivery_mode=self.aio_pika.DeliveryMode.PERSISTENT)
        await self.channel.default_exchange.publish(message, routing_key=self.queue)

    async def publish_batch(self, bodies: list[bytes]) -> None:
        raise NotImplementedError("AMQP has no client batching")

    async def consume(self, on_message: Any, stop: asyncio.Event) -> None:
        channel = await self.conn.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.get_queue(self.queue, ensure=True)

        async def deliver(message: Any) -> None:
            on_message(message.body)
            await message.ack()

        tag = await queue.consume(deliver)
        await stop.wait()
        await queue.cancel(tag)

    async def close(self) -> None:
        await self.conn.close()


def client(spec: dict[str, Any]) -> RabbitClient:
    return RabbitClient(spec)
