"""``MetadataStore`` on ZooKeeper: the metadata store a cluster of brokers shares.

Semantics are exactly the SQLite store's (one conformance suite runs against both):
a new key is version 0, ``expected_version=-1`` means "must not exist", a mismatch
raises ``BadVersion``, deleting a missing key raises ``NotFound``, ``children`` are
sorted names of direct children, and ``delete_recursive`` removes a subtree. A
write is durable when it returns: ZooKeeper answers only after a quorum has synced
the transaction to its log.

Representation (``zk_node``): a key is a znode whose data carries a small header
with the key's base version; parents created only to hold a key below them have
empty data and read back as "no key". Deleting a key that still has children turns
its znode back into such a parent; deleting the last key below an implicit parent
removes the parent too, so ``children`` never lists a name with nothing below it.
(A parent left empty by a crash or an expired ephemeral key is skipped by
``children`` the same way. Its own parent, if it holds nothing else, still lists it
until the next delete below clears the chain: ephemeral keys belong under parents
the cluster layer lists itself, such as ``/loadbalance/brokers``.)

Every write is a compare-and-set on the znode's version, retried a bounded number of
times when another writer got in between: version checks, creation of implicit
parents and the clean-up of empty ones stay correct with several brokers writing.

Blocking: like the SQLite store, every call blocks its caller until ZooKeeper
answers (one round trip; a few for writes that create parents). The broker calls it
on its event loop for admin and topic-loading operations, exactly as it calls
SQLite, and hands frequent writes (cursor flushes) to ``BackgroundMetadataWriter``'s
thread. No call waits longer than the operation timeout: an unreachable ZooKeeper
fails the operation with ``MetadataError`` instead of stalling the broker.

For the cluster layer it also offers ephemeral keys (removed by ZooKeeper when this
store's session ends), watches on a key's value and on a path's children, and
session-state listeners: see ``zk_watch``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from quasar.errors import BadVersion, MetadataError, NotFound, QuasarError
from quasar.storage.api import Versioned
from quasar.storage.metadata import paths, zk_node, zk_tree
from quasar.storage.metadata.memory import check_version
from quasar.storage.metadata.url import ZooKeeperUrl, parse_metadata_store_url
from quasar.storage.metadata.zk_client import ZooKeeperSession
from quasar.storage.metadata.zk_watch import (
    ChildrenWatch,
    SessionListener,
    SessionState,
    ValueWatch,
    session_state_of,
)

__all__ = ["ZooKeeperMetadataStore"]

# Compare-and-set rounds before a write gives up under contention (MetadataError,
# retryable). Each lost round means another writer changed the same znode.
WRITE_ATTEMPTS_MAX = 16
# ZooKeeper refuses a request larger than jute.maxbuffer (1 MiB by default) by
# dropping the connection; refuse such a value here, with a clear error, instead.
MAX_VALUE_BYTES_DEFAULT = 1024 * 1024 - 16 * 1024


class ZooKeeperMetadataStore:
    """A versioned key/value store in ZooKeeper (thread-safe: kazoo is).

    Raises (constructor):
        MetadataError: ZooKeeper did not answer within the operation timeout.
        ValueError: a malformed or unsupported URL.
    """

    def __init__(
        self,
        url: ZooKeeperUrl | str,
        *,
        session_timeout_ms: int = 30_000,
        operation_timeout_s: float = 30.0,
        max_value_bytes: int = MAX_VALUE_BYTES_DEFAULT,
    ) -> None:
        if isinstance(url, str):
            url = parse_metadata_store_url(url)
        self.url = url
        self.max_value_bytes = max_value_bytes
        self._zk = ZooKeeperSession(
            url, session_timeout_ms=session_timeout_ms,
            operation_timeout_s=operation_timeout_s,
        )
        self._closed = False
        # Cancelled at close, so no listener runs against a closed store.
        self._watches: list[ValueWatch | ChildrenWatch] = []
        self._watches_lock = threading.Lock()

    # -- MetadataStore -----------------------------------------------------------------
    def get(self, path: str) -> Versioned | None:
        """Return the value and version at ``path``, or ``None``.

        Raises:
            ValueError: malformed path.
            MetadataError: ZooKeeper failed or timed out.
        """
        paths.validate(path)
        key, _base, _stat = self._read(path, self._zk.deadline())
        return key

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        """Write ``value`` durably; returns the new version (0 for a new key).

        Raises:
            BadVersion: ``expected_version`` does not match (``-1``: must not exist).
            ValueError: malformed path.
            MetadataError: ZooKeeper failed or timed out, the value is larger than
                ``max_value_bytes``, or the write lost every compare-and-set round.
        """
        return self._write(path, value, expected_version, ephemeral=False)

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete the key at ``path`` durably (keys below it stay).

        Raises:
            NotFound: the key does not exist.
            BadVersion: ``expected_version`` does not match.
            MetadataError: ZooKeeper failed or timed out.
        """
        paths.validate(path)
        self._check_open()
        deadline = self._zk.deadline()
        for _ in range(WRITE_ATTEMPTS_MAX):
            current, _base, stat = self._read(path, deadline)
            if current is None:
                raise NotFound(path)
            check_version(path, current, expected_version)
            znode = self._zk.znode(path)
            try:
                if stat.numChildren > 0:
                    # Keys live below: keep the znode as an implicit parent.
                    self._zk.wait("delete", path, deadline, partial(
                        self._zk.client.set_async, znode, b"", version=stat.version))
                else:
                    self._zk.wait("delete", path, deadline, partial(
                        self._zk.client.delete_async, znode, version=stat.version))
                    zk_tree.prune(self._zk, zk_tree.parent(path), deadline)
                return
            except (BadVersionError, NoNodeError, NotEmptyError):
                continue  # changed under us: look again
        raise self._contended("delete", path)

    def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it; absent keys are not an error.

        A subtree of up to ``zk_tree.DELETE_BATCH_MAX`` znodes goes in one atomic
        multi-op.

        Raises:
            MetadataError: ZooKeeper failed or timed out.
        """
        paths.validate(path)
        self._check_open()
        deadline = self._zk.deadline()
        for _ in range(WRITE_ATTEMPTS_MAX):
            doomed = zk_tree.subtree(self._zk, path, deadline)
            if zk_tree.delete_all(self._zk, doomed, deadline):
                if path != "/":
                    zk_tree.prune(self._zk, zk_tree.parent(path), deadline)
                return
        raise self._contended("delete_recursive", path)

    def children(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path`` (keys or subtrees below it).

        Raises:
            MetadataError: ZooKeeper failed or timed out.
        """
        paths.validate(path)
        self._check_open()
        return self._children(path, self._zk.deadline())

    def close(self) -> None:
        """End the session (ephemeral keys are removed) (idempotent)."""
        if not self._closed:
            with self._watches_lock:
                watches, self._watches = self._watches, []
            for watch in watches:
                watch.cancel()
            self._closed = True
            self._zk.close()

    # -- for the cluster layer ---------------------------------------------------------
    def sync(self, path: str) -> None:
        """Have this session's server catch up with the ZooKeeper leader, so that
        the next read of ``path`` sees every write completed before this call, also
        those another session (another store) was seen to make.

        Raises:
            ValueError: malformed path.
            MetadataError: ZooKeeper failed or timed out.
        """
        paths.validate(path)
        self._check_open()
        znode = self._zk.znode(path)
        self._zk.wait(
            "sync", path, self._zk.deadline(), partial(self._zk.client.sync_async, znode)
        )

    def create_ephemeral(self, path: str, value: bytes) -> int:
        """Create a key that lives as long as this store's ZooKeeper session
        (a broker's registration, a bundle's ownership); returns its version, 0.

        Ephemeral keys cannot have keys below them (ZooKeeper's rule).

        Raises:
            BadVersion: ``path`` exists (as a key, or as a parent of keys).
            MetadataError: ZooKeeper failed or timed out.
        """
        return self._write(path, value, -1, ephemeral=True)

    def watch_value(
        self, path: str, listener: Callable[[Versioned | None], None]
    ) -> ValueWatch:
        """Call ``listener`` with the key at ``path`` now and after every change
        (``None`` while it does not exist), until the returned watch is cancelled.

        The first call happens on the caller's thread before this returns; later
        ones on kazoo's event thread, so a listener must not block and hands work
        to the broker's loop with ``loop.call_soon_threadsafe``.

        Raises:
            MetadataError: the first read failed.
        """
        paths.validate(path)
        self._check_open()
        watch = ValueWatch(self._zk, path, self._watched_value, listener)
        self._keep(watch)
        return watch

    def watch_children(
        self, path: str, listener: Callable[[list[str]], None]
    ) -> ChildrenWatch:
        """Call ``listener`` with ``children(path)`` now and whenever the set of
        children changes, until the returned watch is cancelled (same threading rule
        as ``watch_value``).

        Raises:
            MetadataError: the first listing failed.
        """
        paths.validate(path)
        self._check_open()
        watch = ChildrenWatch(self._zk, path, self._children, listener)
        self._keep(watch)
        return watch

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener`` on every session change: ``SUSPENDED`` (connection lost;
        the session and its ephemeral keys may still be alive), ``CONNECTED``
        (connected again, or to a new session after ``LOST``) and ``LOST`` (the
        session expired: this broker's ephemeral keys are gone and another broker
        may already have taken what they claimed).

        Runs on kazoo's connection thread, which must never block: the listener
        only records the state or hands it on (``loop.call_soon_threadsafe``)."""
        self._zk.client.add_listener(lambda state: listener(session_state_of(state)))

    @property
    def session_state(self) -> SessionState:
        return session_state_of(self._zk.client.state)

    @property
    def session_id(self) -> int | None:
        """ZooKeeper's id of the current session (``None`` before one exists)."""
        client_id = self._zk.client.client_id
        return None if client_id is None else int(client_id[0])

    # -- internals ---------------------------------------------------------------------
    def _keep(self, watch: ValueWatch | ChildrenWatch) -> None:
        # Only live watches are kept: a cluster layer that watches and cancels as
        # bundles come and go does not grow this list.
        with self._watches_lock:
            self._watches = [w for w in self._watches if not w.cancelled] + [watch]

    def _read(
        self, path: str, deadline: float, watch: Any = None
    ) -> tuple[Versioned | None, int, Any]:
        """``(key or None, base version, znode stat or None)``; with ``watch``, a
        ZooKeeper watch is left on the znode (or on its creation when absent)."""
        self._check_open()
        znode = self._zk.znode(path)
        client = self._zk.client
        for _ in range(WRITE_ATTEMPTS_MAX):
            try:
                data, stat = self._zk.wait(
                    "get", path, deadline, partial(client.get_async, znode, watch=watch)
                )
            except NoNodeError:
                if watch is None or self._zk.wait(
                    "exists", path, deadline, partial(client.exists_async, znode, watch=watch)
                ) is None:
                    return None, 0, None
                continue  # created between the two calls: read it
            key, base = zk_node.decode(path, data, stat.version)
            return key, base, stat
        raise self._contended("watch", path)

    def _watched_value(self, path: str, deadline: float, watch: Any) -> Versioned | None:
        return self._read(path, deadline, watch)[0]

    def _write(
        self, path: str, value: bytes, expected_version: int | None, *, ephemeral: bool
    ) -> int:
        paths.validate(path)
        self._check_open()
        if len(value) > self.max_value_bytes:
            raise MetadataError(
                f"{path}: a value of {len(value)} bytes is larger than ZooKeeper "
                f"accepts ({self.max_value_bytes} bytes; raise jute.maxbuffer on the "
                "ensemble and this limit together)"
            )
        self._refuse_reserved(path)
        deadline = self._zk.deadline()
        znode = self._zk.znode(path)
        client = self._zk.client
        for _ in range(WRITE_ATTEMPTS_MAX):
            current, base, stat = self._read(path, deadline)
            check_version(path, current, expected_version)
            try:
                if stat is None:
                    data = zk_node.encode(value, 0)
                    self._zk.wait("create", path, deadline, partial(
                        client.create_async, znode, data, ephemeral=ephemeral, makepath=True))
                    return 0
                if ephemeral:
                    raise BadVersion(f"{path} already exists as a parent of keys")
                # A new key on an implicit parent starts at the next znode version.
                new_base = stat.version + 1 if current is None else base
                data = zk_node.encode(value, new_base)
                self._zk.wait("set", path, deadline, partial(
                    client.set_async, znode, data, version=stat.version))
                new_version: int = stat.version + 1 - new_base
                return new_version
            except (BadVersionError, NodeExistsError, NoNodeError):
                # Another writer changed the znode, or removed an implicit parent
                # between our read and our write: read again and re-check.
                continue
        raise self._contended("write", path)

    def _children(self, path: str, deadline: float, watch: Any = None) -> list[str]:
        znode = self._zk.znode(path)
        client = self._zk.client
        for _ in range(WRITE_ATTEMPTS_MAX):
            try:
                names = self._zk.wait("children", path, deadline,
                                      partial(client.get_children_async, znode, watch=watch))
                break
            except NoNodeError:
                if watch is None or self._zk.wait(
                    "exists", path, deadline, partial(client.exists_async, znode, watch=watch)
                ) is None:
                    return []
        else:
            raise self._contended("watch", path)
        return zk_tree.visible_children(self._zk, path, names, deadline)

    def _refuse_reserved(self, path: str) -> None:
        if not self._zk.chroot and (
            path == f"/{zk_tree.ZOOKEEPER_RESERVED}" or path.startswith(f"/{zk_tree.ZOOKEEPER_RESERVED}/")
        ):
            raise ValueError(f"{path} is ZooKeeper's own subtree; use a chroot")

    def _contended(self, what: str, path: str) -> QuasarError:
        return MetadataError(
            f"{what} {path}: other writers changed it {WRITE_ATTEMPTS_MAX} times in a row"
        )

    def _check_open(self) -> None:
        assert not self._closed, "metadata store used after close"

