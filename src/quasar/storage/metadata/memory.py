"""In-memory ``MetadataStore`` for tests and simulation (same semantics as SQLite)."""

from __future__ import annotations

import threading

from quasar.errors import BadVersion, NotFound
from quasar.storage.api import Versioned
from quasar.storage.metadata import paths


class MemoryMetadataStore:
    """A versioned key/value store held in a dict.

    Thread-safe, because the storage layer may call it from a worker thread. "Durable
    when it returns" holds trivially for the lifetime of the object.
    """

    def __init__(self) -> None:
        self._data: dict[str, Versioned] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, path: str) -> Versioned | None:
        """Return the value and version at ``path``, or ``None``.

        Raises:
            ValueError: malformed path.
        """
        paths.validate(path)
        with self._lock:
            self._check_open()
            return self._data.get(path)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        """Write ``value``; returns the new version (0 for a new key).

        Raises:
            BadVersion: ``expected_version`` does not match (``-1``: key must not exist).
            ValueError: malformed path.
        """
        paths.validate(path)
        with self._lock:
            self._check_open()
            current = self._data.get(path)
            _check_version(path, current, expected_version)
            version = 0 if current is None else current.version + 1
            self._data[path] = Versioned(bytes(value), version)
            return version

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete the key at ``path`` (not its children).

        Raises:
            NotFound: the key does not exist.
            BadVersion: ``expected_version`` does not match.
        """
        paths.validate(path)
        with self._lock:
            self._check_open()
            current = self._data.get(path)
            if current is None:
                raise NotFound(path)
            _check_version(path, current, expected_version)
            del self._data[path]

    def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and every key below it; absent keys are not an error."""
        paths.validate(path)
        lo, hi = paths.subtree_bounds(path)
        with self._lock:
            self._check_open()
            doomed = [k for k in self._data if k == path or lo <= k < hi]
            for key in doomed:
                del self._data[key]

    def children(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path`` (keys or subtrees below it)."""
        paths.validate(path)
        lo, hi = paths.subtree_bounds(path)
        with self._lock:
            self._check_open()
            names = {paths.child_name(lo, k)[0] for k in self._data if lo <= k < hi}
        return sorted(names)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        assert not self._closed, "metadata store used after close"


def _check_version(path: str, current: Versioned | None, expected: int | None) -> None:
    if expected is None:
        return
    if expected == -1:
        if current is not None:
            raise BadVersion(f"{path} already exists (version {current.version})")
        return
    if current is None:
        raise BadVersion(f"{path} does not exist (expected version {expected})")
    if current.version != expected:
        raise BadVersion(f"{path} is at version {current.version}, expected {expected}")


check_version = _check_version
