"""One conformance suite for every ``MetadataStore`` implementation: SQLite, memory
and ZooKeeper (a real server, each test in a chroot of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.errors import BadVersion, MetadataError, NotFound
from quasar.storage import MemoryMetadataStore, MetadataStore, SqliteMetadataStore
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore


@pytest.fixture(params=["sqlite", "memory", "zookeeper"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataStore]:
    s: MetadataStore
    if request.param == "sqlite":
        s = SqliteMetadataStore(tmp_path / "meta.db")
    elif request.param == "zookeeper":
        s = ZooKeeperMetadataStore(request.getfixturevalue("zk_url"), operation_timeout_s=10)
    else:
        s = MemoryMetadataStore()
    assert isinstance(s, MetadataStore)
    yield s
    s.close()


def test_put_get_versions(store: MetadataStore) -> None:
    assert store.get("/a") is None
    assert store.put("/a", b"one") == 0
    assert store.get("/a") == (b"one", 0)
    assert store.put("/a", b"two") == 1
    assert store.get("/a") == (b"two", 1)


def test_expected_version(store: MetadataStore) -> None:
    assert store.put("/k", b"v", expected_version=-1) == 0
    with pytest.raises(BadVersion):
        store.put("/k", b"v", expected_version=-1)  # must not exist
    with pytest.raises(BadVersion):
        store.put("/k", b"v", expected_version=5)
    assert store.put("/k", b"w", expected_version=0) == 1
    with pytest.raises(BadVersion):
        store.put("/missing", b"v", expected_version=0)
    assert store.get("/k") == (b"w", 1)  # failed writes changed nothing


def test_delete(store: MetadataStore) -> None:
    with pytest.raises(NotFound):
        store.delete("/nope")
    store.put("/d", b"x")
    store.put("/d", b"y")
    with pytest.raises(BadVersion):
        store.delete("/d", expected_version=0)
    store.delete("/d", expected_version=1)
    assert store.get("/d") is None
    store.put("/d", b"again")
    assert store.get("/d") == (b"again", 0)  # versions restart after delete


def test_children_sorted_direct_only(store: MetadataStore) -> None:
    for path in ["/r/b", "/r/a", "/r/a/x/y", "/r/a-z", "/r/c/deep/er", "/rx", "/r2/q"]:
        store.put(path, b"")
    assert store.children("/r") == [
        "a",
        "a-z",
        "b",
        "c",
    ]  # c exists only via a descendant
    assert store.children("/r/a") == ["x"]
    assert store.children("/r/a/x/y") == []
    assert store.children("/nothing") == []
    assert store.children("/") == ["r", "r2", "rx"]


def test_delete_recursive(store: MetadataStore) -> None:
    for path in ["/t", "/t/a", "/t/a/b", "/t/c", "/t-sibling", "/tt"]:
        store.put(path, b"")
    store.delete_recursive("/t")
    assert store.get("/t") is None and store.get("/t/a/b") is None
    assert store.get("/t-sibling") is not None and store.get("/tt") is not None
    store.delete_recursive("/absent")  # no error


def test_parents_of_keys_are_not_keys(store: MetadataStore) -> None:
    store.put("/p/q/r", b"leaf")
    assert store.get("/p") is None and store.get("/p/q") is None
    with pytest.raises(NotFound):
        store.delete("/p/q")
    assert store.put("/p/q", b"", expected_version=-1) == 0  # a key of its own now
    assert store.get("/p/q") == (b"", 0)
    assert store.put("/p/q", b"again", expected_version=0) == 1


def test_deleting_a_key_keeps_the_keys_below(store: MetadataStore) -> None:
    store.put("/m", b"parent")
    store.put("/m/n", b"child")
    store.delete("/m")
    assert store.get("/m") is None
    assert store.get("/m/n") == (b"child", 0)
    assert store.children("/") == ["m"]
    assert store.put("/m", b"back") == 0  # a new key starts at version 0 again
    store.delete("/m/n")
    assert store.children("/m") == []
    store.delete("/m")
    assert store.children("/") == []  # nothing is left below the root


def test_deleting_the_last_key_below_a_parent_drops_the_parent(store: MetadataStore) -> None:
    store.put("/x/y/z", b"")
    store.put("/x/w", b"")
    store.delete("/x/y/z")
    assert store.children("/x") == ["w"]
    store.delete_recursive("/x/w")
    assert store.children("/") == []


def test_delete_recursive_of_the_root(store: MetadataStore) -> None:
    for path in ["/a", "/a/b", "/c/d"]:
        store.put(path, b"1")
    store.delete_recursive("/")
    assert store.children("/") == [] and store.get("/a") is None


def test_rejects_malformed_paths(store: MetadataStore) -> None:
    for bad in ["relative", "/trailing/", "/double//slash"]:
        with pytest.raises(ValueError):
            store.put(bad, b"")


def test_binary_values_roundtrip(store: MetadataStore) -> None:
    value = bytes(range(256)) * 4
    store.put("/bin", value)
    found = store.get("/bin")
    assert found is not None and found.value == value


def test_sqlite_is_durable_across_reopen(tmp_path: Path) -> None:
    s = SqliteMetadataStore(tmp_path / "m.db")
    s.put("/x/y", b"1")
    s.put("/x/y", b"2")
    s.close()
    s2 = SqliteMetadataStore(tmp_path / "m.db")
    assert s2.get("/x/y") == (b"2", 1)
    assert s2.children("/x") == ["y"]
    s2.close()


def test_sqlite_uses_wal_full_sync(tmp_path: Path) -> None:
    import sqlite3

    SqliteMetadataStore(tmp_path / "m.db").close()
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_sqlite_full_disk_reports_the_real_error(tmp_path: Path) -> None:
    """On a full database SQLite rolls the write back by itself; the store reports
    that error (not a failed second ROLLBACK) and keeps what was stored."""
    s = SqliteMetadataStore(tmp_path / "meta.db")
    try:
        s.put("/kept", b"x")
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        s._conn.execute(f"PRAGMA max_page_count={pages}")  # no room for one more page
        with pytest.raises(MetadataError, match="full"):
            s.put("/big", b"y" * 100_000)
        assert s.get("/kept") is not None and s.get("/kept").value == b"x"
        assert s.get("/big") is None
    finally:
        s.close()
