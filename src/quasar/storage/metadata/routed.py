"""The configuration store beside the metadata store, as Pulsar splits them.

Pulsar keeps cluster-wide configuration (clusters, tenants, namespaces with their
policies and permissions, partitioned topics) in the *configuration* metadata store,
which several clusters may share, and everything a cluster's brokers keep for
themselves (managed ledgers, cursors, schemas, counters, coordinator state) in the
cluster's own metadata store. ``ConfigurationRoutedStore`` is one ``MetadataStore``
over the two: keys under ``CONFIGURATION_ROOTS`` go to the configuration store, all
others to the local one, so the code above sees one key space.

A path above the configuration roots (``/``, ``/admin``) lists the children of both
stores (of the configuration store, only the names leading to its roots), and
``delete_recursive`` of it clears the local subtree and those roots.
"""

from __future__ import annotations

from quasar.storage.api import MetadataStore, Versioned

__all__ = ["CONFIGURATION_ROOTS", "ConfigurationRoutedStore"]

# Pulsar's configuration-store paths that quasar writes.
CONFIGURATION_ROOTS = ("/admin/clusters", "/admin/policies", "/admin/partitioned-topics")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def _above(path: str, root: str) -> bool:
    """True if ``path`` is a proper ancestor of ``root``."""
    return path == "/" or root.startswith(path + "/")


class ConfigurationRoutedStore:
    """One ``MetadataStore`` over a local store and a configuration store."""

    def __init__(self, local: MetadataStore, configuration: MetadataStore) -> None:
        self.local = local
        self.configuration = configuration

    def _store(self, path: str) -> MetadataStore:
        if any(_under(path, root) for root in CONFIGURATION_ROOTS):
            return self.configuration
        return self.local

    def _spans_both(self, path: str) -> bool:
        return any(_above(path, root) for root in CONFIGURATION_ROOTS)

    def get(self, path: str) -> Versioned | None:
        return self._store(path).get(path)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        return self._store(path).put(path, value, expected_version)

    def delete(self, path: str, expected_version: int | None = None) -> None:
        self._store(path).delete(path, expected_version)

    def delete_recursive(self, path: str) -> None:
        # Above the roots, only the roots are cleared from the configuration store.
        for root in CONFIGURATION_ROOTS:
            if _above(path, root):
                self.configuration.delete_recursive(root)
        self._store(path).delete_recursive(path)

    def children(self, path: str) -> list[str]:
        names = set(self._store(path).children(path))
        if self._spans_both(path):
            # Only the configuration store's names that lead to its roots: another
            # cluster sharing it may keep its own keys beside them.
            base = "" if path == "/" else path
            names.update(
                name for name in self.configuration.children(path)
                if any(_under(root, f"{base}/{name}") or _under(f"{base}/{name}", root)
                       for root in CONFIGURATION_ROOTS)
            )
        return sorted(names)

    def close(self) -> None:
        try:
            self.configuration.close()
        finally:
            self.local.close()
