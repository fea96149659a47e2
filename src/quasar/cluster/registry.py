"""Broker registration: who is alive in the cluster, and how loaded each one is.

Each member writes an ephemeral znode ``/loadbalance/brokers/<advertisedAddress>:
<webServicePort>`` (Pulsar's path and broker id) holding Pulsar's ``LocalBrokerData``
fields quasar has: its service URLs, its advertised listeners, and a load report
(``bundles`` it owns, ``numBundles``, ``numTopics``, ``msgRateIn``, ``msgRateOut``,
``lastUpdate``). ZooKeeper removes the node when the broker's session ends, so the
children of ``/loadbalance/brokers`` are the live brokers.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any

from quasar.broker.lookup_data import LookupData
from quasar.config import BrokerConfig
from quasar.errors import BadVersion, MetadataError, NotFound
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

__all__ = ["BROKERS_ROOT", "BrokerRegistration", "BrokerRegistry", "LoadReport"]

log = logging.getLogger(__name__)

BROKERS_ROOT = "/loadbalance/brokers"


@dataclass(frozen=True)
class LoadReport:
    """What the load manager compares: the bundles a broker owns come first."""

    bundles: tuple[str, ...] = ()
    num_topics: int = 0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    last_update_ms: int = 0


@dataclass(frozen=True)
class BrokerRegistration:
    """One live broker as its registration node describes it."""

    broker_id: str
    urls: LookupData
    # Listener name -> its URLs (Pulsar's advertisedListeners).
    listeners: dict[str, LookupData] = field(default_factory=dict)
    load: LoadReport = LoadReport()

    def lookup_data(self, listener: str) -> LookupData | None:
        """The URLs a client asking through ``listener`` ("" for none) follows;
        ``None`` when the broker has no such listener."""
        if not listener:
            return self.urls
        return self.listeners.get(listener)

    def to_json(self) -> dict[str, Any]:
        urls = self.urls
        return {
            "webServiceUrl": urls.http_url,
            "webServiceUrlTls": urls.http_url_tls,
            "pulsarServiceUrl": urls.broker_url,
            "pulsarServiceUrlTls": urls.broker_url_tls,
            "advertisedListeners": {
                name: {
                    "brokerServiceUrl": data.broker_url,
                    "brokerServiceUrlTls": data.broker_url_tls,
                    "brokerHttpUrl": data.http_url,
                    "brokerHttpsUrl": data.http_url_tls,
                }
                for name, data in sorted(self.listeners.items())
            },
            "bundles": list(self.load.bundles),
            "numBundles": len(self.load.bundles),
            "numTopics": self.load.num_topics,
            "msgRateIn": self.load.msg_rate_in,
            "msgRateOut": self.load.msg_rate_out,
            "lastUpdate": self.load.last_update_ms,
        }

    @classmethod
    def from_json(cls, broker_id: str, obj: Any) -> BrokerRegistration:
        """Raises: ValueError, KeyError, TypeError on a malformed node."""
        listeners = {
            str(name): LookupData(
                d.get("brokerServiceUrl"), d.get("brokerServiceUrlTls"),
                d.get("brokerHttpUrl"), d.get("brokerHttpsUrl"),
            )
            for name, d in (obj.get("advertisedListeners") or {}).items()
        }
        return cls(
            broker_id,
            LookupData(
                obj.get("pulsarServiceUrl"), obj.get("pulsarServiceUrlTls"),
                obj.get("webServiceUrl"), obj.get("webServiceUrlTls"),
            ),
            listeners,
            LoadReport(
                tuple(str(b) for b in obj.get("bundles") or ()),
                max(0, int(obj.get("numTopics") or 0)),
                _rate(obj.get("msgRateIn")),
                _rate(obj.get("msgRateOut")),
                int(obj.get("lastUpdate") or 0),
            ),
        )


def _rate(value: Any) -> float:
    """A rate from a peer's report; anything but a finite non-negative number counts
    as 0, so a malformed report cannot make every comparison of loads fail (NaN) or
    win every choice (a negative or infinite rate)."""
    rate = float(value or 0.0)
    return rate if math.isfinite(rate) and rate >= 0 else 0.0


def registration_of(broker_id: str, settings: BrokerConfig) -> BrokerRegistration:
    """This broker's registration from its configuration (no load yet)."""
    listeners = {
        name: LookupData(
            listener.broker_service_url,
            listener.broker_service_url_tls,
            listener.http_url or settings.web_service_url,
            listener.https_url or settings.web_service_url_tls,
        )
        for name, listener in settings.listeners.items()
    }
    urls = LookupData(
        settings.broker_service_url,
        settings.broker_service_url_tls,
        settings.web_service_url,
        settings.web_service_url_tls,
    )
    return BrokerRegistration(broker_id, urls, listeners)


class BrokerRegistry:
    """Registers this broker and lists the live ones (blocking store calls, each
    bounded by the store's operation timeout)."""

    def __init__(self, store: ZooKeeperMetadataStore, me: BrokerRegistration) -> None:
        self._store = store
        self.me = me
        # The node's version: every rewrite is a compare-and-set on it, so a report
        # never recreates the node (as a persistent one) after the session ended.
        self._version = -1

    @property
    def path(self) -> str:
        return f"{BROKERS_ROOT}/{self.me.broker_id}"

    def register(self) -> None:
        """Create this broker's ephemeral node (again, after a new session).

        Raises:
            MetadataError: the node exists and belongs to another live session
                (two brokers with one id), or the store failed.
        """
        value = json.dumps(self.me.to_json()).encode()
        try:
            self._version = self._store.create_ephemeral(self.path, value)
        except BadVersion:
            raise MetadataError(
                f"{self.path} exists: another live broker uses the id "
                f"{self.me.broker_id} (advertisedAddress:webServicePort)"
            ) from None

    def report(self, load: LoadReport) -> None:
        """Rewrite the node with a new load report (it stays ephemeral)."""
        self.me = replace(self.me, load=load)
        if self._version < 0:
            return
        try:
            self._version = self._store.put(
                self.path, json.dumps(self.me.to_json()).encode(), self._version
            )
        except BadVersion:  # the session ended: re-registered on the next one
            self._version = -1

    def is_registered(self) -> bool:
        """Whether this broker's node exists (it is gone once its session expired)."""
        return self._version >= 0 and self._store.get(self.path) is not None

    def deregister(self) -> None:
        if self._version < 0:
            return
        try:
            self._store.delete(self.path, self._version)
        except (NotFound, BadVersion):  # gone with the session already
            pass
        self._version = -1

    def live_brokers(self) -> list[BrokerRegistration]:
        """The registered brokers, sorted by id; a malformed node is skipped (and
        logged), never trusted as a place to send clients."""
        out: list[BrokerRegistration] = []
        for broker_id in self._store.children(BROKERS_ROOT):
            found = self._store.get(f"{BROKERS_ROOT}/{broker_id}")
            if found is None:
                continue
            try:
                out.append(BrokerRegistration.from_json(broker_id, json.loads(found.value)))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("skipping malformed registration of %s: %s", broker_id, exc)
        return out
