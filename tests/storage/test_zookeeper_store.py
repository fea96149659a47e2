"""What the ZooKeeper metadata store adds to the conformance suite: ephemeral keys,
watches, session states, bounded waits during an outage, and its znode format.

A real ZooKeeper server: the shared one (each test in its own chroot), or one of the
test's own where the test stops it.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from quasar.errors import BadVersion, MetadataError
from quasar.storage.api import Versioned
from quasar.storage.metadata import zk_node
from quasar.storage.metadata.zk_watch import SessionState
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore
from quasar.testing.zookeeper import ZooKeeperProcess
from tests.conftest import require_zookeeper

# A bound on waiting for a session event: generous, as a loaded machine may take a
# while to restart ZooKeeper's JVM and let the client reconnect.
EVENT_TIMEOUT_S = 30.0


@pytest.fixture
def store(zk_url: str) -> Iterator[ZooKeeperMetadataStore]:
    s = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    yield s
    s.close()


def _next(events: queue.Queue[Any]) -> Any:
    return events.get(timeout=EVENT_TIMEOUT_S)


def _expire_session(store: ZooKeeperMetadataStore, connect_string: str) -> None:
    """Expire the store's session the way ZooKeeper's own tests do: a second client
    joins the session with its id and password, then closes it."""
    session_id, password = store._zk.client.client_id
    intruder = KazooClient(hosts=connect_string, client_id=(session_id, password))
    intruder.start(timeout=EVENT_TIMEOUT_S)
    intruder.stop()
    intruder.close()


def test_ephemeral_key_goes_with_the_session_and_the_listener_hears_it(
    zk_url: str, zookeeper: ZooKeeperProcess
) -> None:
    owner = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    observer = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    try:
        states: queue.Queue[SessionState] = queue.Queue()
        owner.add_session_listener(states.put)
        seen_by_owner: queue.Queue[list[str]] = queue.Queue()
        owner.watch_children("/brokers", seen_by_owner.put)
        assert owner.create_ephemeral("/brokers/b1", b"owner") == 0
        with pytest.raises(BadVersion):
            observer.create_ephemeral("/brokers/b1", b"thief")
        assert observer.get("/brokers/b1") == (b"owner", 0)
        assert observer.children("/brokers") == ["b1"]

        _expire_session(owner, zookeeper.connect_string)
        seen = [_next(states)]
        while seen[-1] is not SessionState.LOST:
            seen.append(_next(states))
        assert _next(states) is SessionState.CONNECTED  # kazoo opens a new session
        assert observer.get("/brokers/b1") is None
        assert observer.children("/brokers") == []  # no empty parent is listed
        assert observer.children("/") == []
        # The new session may claim it again (what a re-registering broker does).
        assert owner.create_ephemeral("/brokers/b1", b"owner again") == 0
        # The owner's watch was set again on the new session: it sees a newcomer.
        observer.create_ephemeral("/brokers/b2", b"observer")
        while "b2" not in (names := _next(seen_by_owner)):
            assert names in ([], ["b1"])
    finally:
        owner.close()
        observer.close()


def test_closing_the_store_removes_its_ephemeral_keys_at_once(zk_url: str) -> None:
    owner = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    observer = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    try:
        owner.create_ephemeral("/owners/bundle-1", b"b1")
        owner.close()
        assert observer.get("/owners/bundle-1") is None
    finally:
        observer.close()


def test_value_watch_follows_create_update_delete(store: ZooKeeperMetadataStore) -> None:
    events: queue.Queue[Versioned | None] = queue.Queue()
    watch = store.watch_value("/leader", events.put)
    assert _next(events) is None
    store.put("/leader", b"b1")
    assert _next(events) == (b"b1", 0)
    store.put("/leader", b"b2")
    assert _next(events) == (b"b2", 1)
    store.delete("/leader")
    assert _next(events) is None
    watch.cancel()
    store.put("/leader", b"b3")
    # A later watch sees the write, the cancelled one stayed silent.
    later: queue.Queue[Versioned | None] = queue.Queue()
    store.watch_value("/leader", later.put)
    assert _next(later) == (b"b3", 0)
    assert events.empty()


def test_children_watch_follows_the_set_of_children(store: ZooKeeperMetadataStore) -> None:
    events: queue.Queue[list[str]] = queue.Queue()
    store.watch_children("/brokers", events.put)
    assert _next(events) == []
    store.create_ephemeral("/brokers/b1", b"")
    assert _next(events) == ["b1"]
    store.put("/brokers/b2", b"")
    assert _next(events) == ["b1", "b2"]
    store.delete("/brokers/b1")
    assert _next(events) == ["b2"]


def test_outage_fails_operations_within_the_timeout_then_recovers(tmp_path: Path) -> None:
    require_zookeeper()
    server = ZooKeeperProcess(tmp_path / "zk")
    with server:
        _outage_then_recovery(server)


def _outage_then_recovery(server: ZooKeeperProcess) -> None:
    store = ZooKeeperMetadataStore(server.url("/outage"), operation_timeout_s=0.5,
                                   session_timeout_ms=20_000)
    states: queue.Queue[SessionState] = queue.Queue()
    store.add_session_listener(states.put)
    try:
        store.put("/kept", b"acknowledged")
        server.kill()
        assert _next(states) is SessionState.SUSPENDED
        for operation in (lambda: store.get("/kept"), lambda: store.put("/new", b"x")):
            started = time.monotonic()
            with pytest.raises(MetadataError, match="timed out|ConnectionLoss"):
                operation()
            # Bounded by the operation timeout (0.5 s), with room for a busy machine.
            assert time.monotonic() - started < 5.0
        server.start()  # same port, same data directory
        assert _next(states) is SessionState.CONNECTED  # the session survived
        assert store.get("/kept") == (b"acknowledged", 0)
    finally:
        store.close()


def test_unreachable_zookeeper_at_start_is_a_metadata_error(tmp_path: Path) -> None:
    from quasar.testing.process import free_port

    started = time.monotonic()
    with pytest.raises(MetadataError, match="did not answer within 1s"):
        ZooKeeperMetadataStore(f"zk:127.0.0.1:{free_port()}", operation_timeout_s=1)
    assert time.monotonic() - started < 5.0


def test_a_znode_written_by_another_tool_is_refused(store: ZooKeeperMetadataStore) -> None:
    client = store._zk.client
    client.create(store._zk.znode("/foreign"), b"{}")
    with pytest.raises(MetadataError, match="does not hold a quasar metadata key"):
        store.get("/foreign")


def test_a_value_larger_than_zookeeper_accepts_is_refused(zk_url: str) -> None:
    store = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10, max_value_bytes=1000)
    try:
        with pytest.raises(MetadataError, match="larger than ZooKeeper accepts"):
            store.put("/big", b"x" * 1001)
        assert store.get("/big") is None
        assert store.put("/big", b"x" * 1000) == 0
    finally:
        store.close()


def test_znode_format_roundtrip_and_versions() -> None:
    data = zk_node.encode(b"value", 3)
    assert zk_node.decode("/k", data, 5) == ((b"value", 2), 3)
    assert zk_node.decode("/k", zk_node.encode(b"", 0), 0) == ((b"", 0), 0)
    assert zk_node.decode("/k", b"", 7) == (None, 0)  # an implicit parent
    for bad in (b"{}", b"\x51\x02\x00\x00\x00\x00", b"\x00\x01\x00\x00\x00\x00"):
        with pytest.raises(MetadataError):
            zk_node.decode("/k", bad, 0)
    with pytest.raises(MetadataError):
        zk_node.decode("/k", zk_node.encode(b"", 9), 3)  # base above the znode version


def test_concurrent_writers_on_two_sessions_lose_no_update(zk_url: str) -> None:
    """Two brokers' stores: compare-and-set increments of one counter, and keys
    created and deleted under one shared implicit parent, at the same time."""
    import threading

    stores = [ZooKeeperMetadataStore(zk_url, operation_timeout_s=10) for _ in range(2)]
    errors: list[BaseException] = []

    def increment(store: ZooKeeperMetadataStore, times: int) -> None:
        done = 0
        while done < times:
            current = store.get("/counter")
            value = 0 if current is None else int(current.value)
            try:
                store.put("/counter", str(value + 1).encode(),
                          expected_version=-1 if current is None else current.version)
                done += 1
            except BadVersion:
                continue

    def churn(store: ZooKeeperMetadataStore, name: str) -> None:
        for _ in range(15):
            store.put(f"/shared/parent/{name}", b"x")
            store.delete(f"/shared/parent/{name}")

    def run(target: Any, *args: Any) -> threading.Thread:
        def guarded() -> None:
            try:
                target(*args)
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)
        thread = threading.Thread(target=guarded)
        thread.start()
        return thread

    try:
        threads = [run(increment, stores[0], 20), run(increment, stores[1], 20),
                   run(churn, stores[0], "a"), run(churn, stores[1], "b")]
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        final = stores[0].get("/counter")
        assert final is not None and (int(final.value), final.version) == (40, 39)
        assert stores[1].children("/") == ["counter"]  # no parent left behind
    finally:
        for store in stores:
            store.close()


def test_sync_then_read_sees_another_sessions_write(zk_url: str) -> None:
    writer = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    reader = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    try:
        reader.sync("/admin/policies/t/absent")  # a key that does not exist is fine
        writer.put("/admin/policies/t/ns", b"v1")
        reader.sync("/admin/policies/t/ns")
        found = reader.get("/admin/policies/t/ns")
        assert found is not None and found.value == b"v1"
    finally:
        writer.close()
        reader.close()
