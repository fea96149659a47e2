"""The chaos run's network and disk faults, on fakes (what each one asks of the
proxy or the disk, and that the event alone fixes its choices), and the two real
pieces they lean on: the proxy withdrawing armed cuts, and a tmpfs filling up."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.chaos.disk_full import (
    FILL_MARGIN_BYTES,
    DiskFull,
    SmallDisk,
    mount_refusal,
)
from quasar.testing.chaos.faults import Targets
from quasar.testing.chaos.proxy_faults import (
    CUT_BYTES,
    DELAY_S,
    ProxyBlackhole,
    ProxyCut,
    ProxyDelay,
    ProxyReset,
)
from quasar.testing.chaos.registry import FAULTS
from quasar.testing.chaos.schedule import (
    DISK_FULL,
    FAULT_KINDS,
    PROXY_BLACKHOLE,
    PROXY_CUT,
    PROXY_DELAY,
    PROXY_RESET,
    FaultEvent,
    make_plan,
)
from quasar.testing.fault_proxy import Direction, FaultProxy


class FakeConnection:
    def __init__(self) -> None:
        self.cuts: list[tuple[Direction, int, bool]] = []

    def cut(self, direction: Direction, after_bytes: int, *, rst: bool = False) -> None:
        self.cuts.append((direction, after_bytes, rst))


class FakeProxy:
    """Records what the faults ask of a ``FaultProxy``."""

    def __init__(self, connections: int = 0) -> None:
        self.conns = [FakeConnection() for _ in range(connections)]
        self.calls: list[tuple[str, Any]] = []

    def connections(self) -> list[FakeConnection]:
        return self.conns

    def blackhole(self, seconds: float) -> None:
        self.calls.append(("blackhole", seconds))

    def delay(self, seconds: float) -> None:
        self.calls.append(("delay", seconds))

    def clear(self) -> None:
        self.calls.append(("clear", None))

    def reset_all(self) -> int:
        self.calls.append(("reset_all", None))
        return len(self.conns)

    def disarm_cuts(self) -> int:
        self.calls.append(("disarm_cuts", None))
        return 0


class FakeDisk:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def fill(self) -> int:
        self.calls.append("fill")
        return 4096

    def free(self) -> None:
        self.calls.append("free")


def _targets(proxy: Any = None, disk: Any = None) -> Targets:
    return Targets(broker=None, workers=[], proxy=proxy, disk=disk)  # type: ignore[arg-type]


def _event(kind: str, at_s: float = 3.0, duration_s: float = 2.0) -> FaultEvent:
    return FaultEvent(at_s, kind, duration_s, 0)


def test_every_planned_kind_has_a_factory() -> None:
    assert set(FAULTS) == set(FAULT_KINDS)


def test_a_blackhole_lasts_its_planned_time_and_heal_ends_it() -> None:
    proxy = FakeProxy()
    fault = ProxyBlackhole(_event(PROXY_BLACKHOLE, duration_s=4.5), _targets(proxy))
    fault.inject()
    fault.heal()
    assert proxy.calls == [("blackhole", 4.5), ("clear", None)]


def test_a_reset_resets_every_connection_and_heal_does_nothing() -> None:
    proxy = FakeProxy(connections=3)
    fault = ProxyReset(_event(PROXY_RESET), _targets(proxy))
    fault.inject()
    fault.heal()
    assert fault.reset == 3 and proxy.calls == [("reset_all", None)]


def test_a_cut_arms_every_connection_mid_frame_and_heal_withdraws_what_is_left() -> None:
    proxy = FakeProxy(connections=40)
    fault = ProxyCut(_event(PROXY_CUT), _targets(proxy))
    fault.inject()
    assert fault.armed == 40
    cuts = [c for conn in proxy.conns for c in conn.cuts]
    assert len(cuts) == 40
    # Both directions, both closes, and always part of a frame.
    assert {d for d, _, _ in cuts} == {Direction.TO_SERVER, Direction.TO_CLIENT}
    assert {rst for _, _, rst in cuts} == {True, False}
    assert all(CUT_BYTES[0] <= n <= CUT_BYTES[1] for _, n, _ in cuts)
    fault.heal()
    assert proxy.calls == [("disarm_cuts", None)]
    # The event alone fixes the choices: a replay cuts the same way.
    again = FakeProxy(connections=40)
    ProxyCut(_event(PROXY_CUT), _targets(again)).inject()
    assert [c.cuts for c in again.conns] == [c.cuts for c in proxy.conns]


def test_a_delay_adds_a_latency_the_event_fixes_until_heal() -> None:
    latencies = set()
    for at in range(20):
        proxy = FakeProxy()
        fault = ProxyDelay(_event(PROXY_DELAY, at_s=float(at)), _targets(proxy))
        fault.inject()
        fault.heal()
        latency = proxy.calls[0][1]
        assert DELAY_S[0] <= latency <= DELAY_S[1]
        assert proxy.calls == [("delay", latency), ("delay", 0.0)]
        replay = ProxyDelay(_event(PROXY_DELAY, at_s=float(at)), _targets(FakeProxy()))
        assert replay.latency_s == latency
        latencies.add(latency)
    assert len(latencies) > 1


def test_disk_full_fills_then_frees() -> None:
    disk = FakeDisk()
    fault = DiskFull(_event(DISK_FULL), _targets(disk=disk))
    fault.inject()
    fault.heal()
    assert disk.calls == ["fill", "free"] and fault.filled == 4096


@pytest.mark.parametrize("factory", [ProxyBlackhole, ProxyReset, ProxyCut, ProxyDelay, DiskFull])
def test_a_fault_without_its_target_is_refused(factory: Any) -> None:
    with pytest.raises(ValueError):
        factory(_event(PROXY_RESET), _targets())


def test_the_planned_durations_follow_the_kind() -> None:
    plan = make_plan(3, duration_s=1000, operations=1, faults=60,
                     kinds=(PROXY_BLACKHOLE, PROXY_DELAY, DISK_FULL, PROXY_RESET))
    for e in plan.faults:
        low, high = (0.0, 2.0) if e.kind == PROXY_RESET else (1.0, 10.0)
        assert low <= e.duration_s <= high, e


# ------------------------------------------------------------------ real pieces


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def test_the_proxy_withdraws_armed_cuts(echo_port: int) -> None:
    with FaultProxy("127.0.0.1", echo_port) as proxy, socket.create_connection(
        ("127.0.0.1", proxy.listen_port), timeout=10
    ) as client:
        proxy.wait_for_open(1)
        proxy.connections()[0].cut(Direction.TO_SERVER, 2)
        proxy.cut_all(Direction.TO_CLIENT, 1)
        assert proxy.disarm_cuts() == 2
        assert proxy.disarm_cuts() == 0
        client.sendall(b"whole frame")
        got = b""
        while len(got) < len(b"whole frame"):
            got += client.recv(64)
        assert got == b"whole frame"
        assert not proxy.connections()[0].is_closed


def test_a_small_disk_fills_up_and_frees(tmp_path: Path) -> None:
    refusal = mount_refusal()
    if refusal is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs on CI: {refusal}")
        pytest.skip(f"needs to mount a tmpfs: {refusal}")
    size = 64 << 20
    with SmallDisk(tmp_path / "disk", size_bytes=size) as disk:
        assert disk.data_dir.is_dir() and os.path.ismount(disk.mount_point)
        (disk.data_dir / "ledger").write_bytes(b"x" * 4096)
        written = disk.fill()
        # Full, and the filler took the margin only, not the 64 MiB.
        assert disk.free_bytes() == 0 and 0 < written <= FILL_MARGIN_BYTES
        with pytest.raises(OSError), open(disk.data_dir / "more", "wb") as f:
            f.write(b"y" * 8192)
            f.flush()
        disk.free()
        assert disk.free_bytes() > size - (1 << 20)
        assert (disk.data_dir / "ledger").read_bytes() == b"x" * 4096
    assert not os.path.ismount(tmp_path / "disk")
