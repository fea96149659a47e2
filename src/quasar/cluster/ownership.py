"""Bundle ownership: one ephemeral znode per owned bundle.

A broker owns bundle ``0xLOW_0xHIGH`` of namespace ``tenant/ns`` while the ephemeral
node ``/namespace/<tenant>/<ns>/0xLOW_0xHIGH`` it created exists (Pulsar's path). The
node holds Pulsar's ``NamespaceEphemeralData``: the owner's ``nativeUrl``,
``nativeUrlTls``, ``httpUrl``, ``httpUrlTls``, ``disabled`` and
``advertisedListeners``, which is what a lookup redirects clients to. Creating the
node is the only way to acquire a bundle, and ZooKeeper lets exactly one session
create it; ZooKeeper deletes it when the owner's session ends, after which any
broker may acquire the bundle again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from quasar.broker.lookup_data import LookupData
from quasar.errors import BadVersion, MetadataError, NotFound
from quasar.resources.bundles import BundleRange
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

__all__ = ["OWNERSHIP_ROOT", "BundleOwnership", "NamespaceEphemeralData", "ownership_path"]

OWNERSHIP_ROOT = "/namespace"
# A bundle whose owner's node vanished between our failed create and our read is
# tried again; more rounds than this means it keeps changing hands.
ACQUIRE_ATTEMPTS_MAX = 3


def ownership_path(namespace: str, bundle: BundleRange) -> str:
    return f"{OWNERSHIP_ROOT}/{namespace}/{bundle.name}"


@dataclass(frozen=True)
class NamespaceEphemeralData:
    """Pulsar's ``NamespaceEphemeralData``: where the owner of a bundle is reached."""

    urls: LookupData
    disabled: bool = False
    listeners: dict[str, LookupData] = field(default_factory=dict)

    def lookup_data(self, listener: str) -> LookupData | None:
        if not listener:
            return self.urls
        return self.listeners.get(listener)

    def to_json(self) -> dict[str, Any]:
        return {
            "nativeUrl": self.urls.broker_url,
            "nativeUrlTls": self.urls.broker_url_tls,
            "httpUrl": self.urls.http_url,
            "httpUrlTls": self.urls.http_url_tls,
            "disabled": self.disabled,
            "advertisedListeners": {
                name: {
                    "brokerServiceUrl": d.broker_url,
                    "brokerServiceUrlTls": d.broker_url_tls,
                    "brokerHttpUrl": d.http_url,
                    "brokerHttpsUrl": d.http_url_tls,
                }
                for name, d in sorted(self.listeners.items())
            },
        }

    @classmethod
    def from_json(cls, obj: Any) -> NamespaceEphemeralData:
        """Raises: MetadataError on a malformed node (never a place to send clients)."""
        try:
            listeners = {
                str(name): LookupData(
                    d.get("brokerServiceUrl"), d.get("brokerServiceUrlTls"),
                    d.get("brokerHttpUrl"), d.get("brokerHttpsUrl"),
                )
                for name, d in (obj.get("advertisedListeners") or {}).items()
            }
            return cls(
                LookupData(
                    obj.get("nativeUrl"), obj.get("nativeUrlTls"),
                    obj.get("httpUrl"), obj.get("httpUrlTls"),
                ),
                bool(obj.get("disabled", False)),
                listeners,
            )
        except (AttributeError, TypeError) as exc:
            raise MetadataError(f"malformed bundle ownership data: {exc}") from None


class BundleOwnership:
    """Reads, acquires and releases ownership nodes (blocking store calls)."""

    def __init__(self, store: ZooKeeperMetadataStore, me: NamespaceEphemeralData) -> None:
        self._store = store
        self.me = me

    def owner(self, namespace: str, bundle: BundleRange) -> NamespaceEphemeralData | None:
        """The bundle's owner now, or ``None`` when nobody owns it."""
        found = self._store.get(ownership_path(namespace, bundle))
        if found is None:
            return None
        try:
            return NamespaceEphemeralData.from_json(json.loads(found.value))
        except ValueError as exc:
            raise MetadataError(f"malformed bundle ownership data: {exc}") from None

    def try_acquire(
        self, namespace: str, bundle: BundleRange
    ) -> tuple[bool, NamespaceEphemeralData]:
        """Create the bundle's node; returns ``(True, me)`` when this broker now owns
        it, else ``(False, owner)`` with the broker that got there first.

        Raises:
            MetadataError: the store failed, or the bundle kept changing hands.
        """
        path = ownership_path(namespace, bundle)
        value = json.dumps(self.me.to_json()).encode()
        for _ in range(ACQUIRE_ATTEMPTS_MAX):
            try:
                self._store.create_ephemeral(path, value)
                return True, self.me
            except BadVersion:
                owner = self.owner(namespace, bundle)
                if owner is not None:
                    return False, owner
        raise MetadataError(f"{path}: ownership kept changing while acquiring it")

    def release(self, namespace: str, bundle: BundleRange) -> None:
        """Delete this broker's node of the bundle. A node that is gone, or that
        names another broker (this broker's session expired and the bundle moved),
        is left alone: the delete is a compare-and-set on the node we read."""
        path = ownership_path(namespace, bundle)
        found = self._store.get(path)
        if found is None:
            return
        try:
            mine = NamespaceEphemeralData.from_json(json.loads(found.value)) == self.me
        except (ValueError, MetadataError):
            mine = False
        if not mine:
            return
        try:
            self._store.delete(path, found.version)
        except (NotFound, BadVersion):  # changed hands meanwhile: not ours to delete
            pass

    def is_mine(self, namespace: str, bundle: BundleRange) -> bool:
        """Whether the bundle's node exists and names this broker (checked after a
        reconnection, before serving again)."""
        return self.owner(namespace, bundle) == self.me
