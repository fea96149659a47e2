"""Cluster records, kept where Pulsar keeps them: ``/admin/clusters/<cluster>``.

The value is Pulsar's ``ClusterData`` JSON (the fields quasar fills: the web service
and broker service URLs, plain and TLS). ``quasar initialize-cluster-metadata``
writes it; the cluster layer reads it to find a cluster's service URLs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from quasar.errors import (
    AlreadyExistsError,
    BadVersion,
    InvalidResourceError,
    InvalidValueError,
)
from quasar.protocol.namespace_name import validate_tenant
from quasar.storage.api import MetadataStore

__all__ = ["CLUSTERS_ROOT", "ClusterData", "ClusterResources"]

CLUSTERS_ROOT = "/admin/clusters"


@dataclass(frozen=True)
class ClusterData:
    """Pulsar's ``ClusterData``: where a cluster's brokers are reached."""

    service_url: str | None = None  # serviceUrl (web service, http)
    service_url_tls: str | None = None  # serviceUrlTls (https)
    broker_service_url: str | None = None  # brokerServiceUrl (pulsar://)
    broker_service_url_tls: str | None = None  # brokerServiceUrlTls (pulsar+ssl://)

    def to_json(self) -> dict[str, Any]:
        fields = {
            "serviceUrl": self.service_url,
            "serviceUrlTls": self.service_url_tls,
            "brokerServiceUrl": self.broker_service_url,
            "brokerServiceUrlTls": self.broker_service_url_tls,
        }
        return {key: value for key, value in fields.items() if value is not None}

    @classmethod
    def from_json(cls, obj: Any) -> ClusterData:
        """Raises: InvalidValueError: not a JSON object of strings."""
        if not isinstance(obj, dict):
            raise InvalidValueError("ClusterData must be a JSON object")
        values = {}
        for key in ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidValueError(f"ClusterData.{key} must be a string")
            values[key] = value
        return cls(
            values["serviceUrl"], values["serviceUrlTls"],
            values["brokerServiceUrl"], values["brokerServiceUrlTls"],
        )


class ClusterResources:
    """The cluster records in the (configuration) metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    @staticmethod
    def path(cluster: str) -> str:
        """Raises: InvalidResourceError: not a valid cluster name (412)."""
        # A cluster name follows the tenant-name rules in Pulsar (NamedEntity).
        try:
            validate_tenant(cluster)
        except InvalidResourceError:
            raise InvalidResourceError(f"Cluster name is not valid: {cluster!r}") from None
        return f"{CLUSTERS_ROOT}/{cluster}"

    def create(self, cluster: str, data: ClusterData) -> None:
        """Raises: AlreadyExistsError: the cluster has a record already."""
        try:
            self._store.put(
                self.path(cluster),
                json.dumps(data.to_json(), sort_keys=True).encode(),
                expected_version=-1,
            )
        except BadVersion:
            raise AlreadyExistsError(f"Cluster {cluster} already exists") from None

    def get(self, cluster: str) -> ClusterData | None:
        found = self._store.get(self.path(cluster))
        return None if found is None else ClusterData.from_json(json.loads(found.value))

    def list(self) -> list[str]:
        return sorted(self._store.children(CLUSTERS_ROOT))
