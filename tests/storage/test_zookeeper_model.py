"""The ZooKeeper store against the in-memory store as the reference model.

Random sequences of puts (with and without expected versions), deletes, recursive
deletes, gets and listings over a small tree of paths, where implicit parents, keys
that are also parents and the clean-up of empty parents meet. Every operation must
give what the model gives (the same value, version, names or error class), and the
two stores must hold the same keys after each sequence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quasar.errors import BadVersion, NotFound
from quasar.storage.api import MetadataStore
from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

PATHS = ["/a", "/a/b", "/a/b/c", "/a/c", "/b", "/b/a", "/ab"]
LISTED = ["/", "/a", "/a/b", "/b"]

paths = st.sampled_from(PATHS)
versions = st.sampled_from([None, -1, 0, 1, 2])
operations = st.one_of(
    st.tuples(st.just("put"), paths, st.binary(max_size=3), versions),
    st.tuples(st.just("delete"), paths, st.sampled_from([None, 0, 1])),
    st.tuples(st.just("delete_recursive"), st.sampled_from(PATHS + ["/"])),
    st.tuples(st.just("get"), paths),
    st.tuples(st.just("children"), st.sampled_from(LISTED)),
)


@pytest.fixture(scope="module")
def zk_store(zookeeper: Any) -> Iterator[ZooKeeperMetadataStore]:
    store = ZooKeeperMetadataStore(zookeeper.url("/model"), operation_timeout_s=10)
    yield store
    store.close()


def _apply(store: MetadataStore, op: tuple[Any, ...]) -> Any:
    name, *args = op
    try:
        return getattr(store, name)(*args)
    except (BadVersion, NotFound) as exc:
        return type(exc)


def _keys(store: MetadataStore, path: str = "/") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in store.children(path):
        child = f"{'' if path == '/' else path}/{name}"
        out[child] = store.get(child)
        out.update(_keys(store, child))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
])
@given(st.lists(operations, max_size=25))
def test_zookeeper_store_behaves_like_the_model(
    zk_store: ZooKeeperMetadataStore, ops: list[tuple[Any, ...]]
) -> None:
    zk_store.delete_recursive("/")
    model = MemoryMetadataStore()
    for op in ops:
        assert _apply(zk_store, op) == _apply(model, op), op
    assert _keys(zk_store) == _keys(model)
