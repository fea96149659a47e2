"""A ``quasar broker`` cluster member as a child process.

``BrokerMember`` runs ``quasar broker`` (in the interpreter running this code) on
the given ports and data directory, with a ``broker.conf`` and ``--set`` overrides,
and tells when it serves: its binary port answers a Pulsar handshake.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from quasar.local.probe import pulsar_handshake_ok
from quasar.local.process import LoggedProcess

__all__ = ["BrokerMember"]


class BrokerMember(LoggedProcess):
    """One member, listening on ``advertised_address``'s loopback ports."""

    name = "broker"

    def __init__(
        self,
        index: int,
        data_dir: Path,
        port: int,
        http_port: int,
        *,
        log_path: Path,
        settings: dict[str, str],
        config_file: Path | None = None,
        advertised_address: str = "127.0.0.1",
        new_session: bool = False,
        die_with_parent: bool = False,
    ) -> None:
        self.index = index
        self.name = f"broker {index}"
        self.data_dir = Path(data_dir)
        self.port = port
        self.http_port = http_port
        self.settings = dict(settings)
        self.config_file = config_file
        self.advertised_address = advertised_address
        super().__init__(
            log_path, new_session=new_session, die_with_parent=die_with_parent
        )

    @property
    def address(self) -> str:
        return f"{self.advertised_address}:{self.port}"

    @property
    def url(self) -> str:
        return f"pulsar://{self.address}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.advertised_address}:{self.http_port}"

    def launch(self) -> None:
        """Start the process without waiting for it (``wait_ready`` waits)."""
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [
            sys.executable, "-m", "quasar.cli.main", "broker",
            "--data-dir", str(self.data_dir),
            "--port", str(self.port), "--http-port", str(self.http_port),
            "--advertised-address", self.advertised_address,
        ]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        self._launch(cmd, env)

    def wait_ready(self, timeout_s: float) -> None:
        """Raises: RuntimeError (it exited) or TimeoutError, with its log's tail."""
        self._await(lambda: pulsar_handshake_ok(self.port, 1.0), timeout_s)
