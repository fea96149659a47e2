"""Where a client reaches this broker: the URLs a topic lookup answers with.

A standalone broker owns every topic, so a lookup (binary LOOKUP or the HTTP
``/lookup/v2/topic/...``) always answers with the broker itself; what varies is the
listener the client asked for:

* no listener name: the internal listener's URLs when ``advertisedListeners`` is set
  (``internalListenerName``, or its first listener), each URL it lacks built from
  ``advertisedAddress`` and the port; otherwise the URLs built from
  ``advertisedAddress``;
* a listener name: that listener's binary URLs (and its HTTP URLs, where it has
  them), or Pulsar's ServiceNotReady "the broker do not have {name} listener". The
  pulsar client turns that message into a connection error only for a listener
  named ``test``; for other names it retries the lookup until its operation
  timeout, as it does for Pulsar.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config import BrokerConfig
from quasar.errors import ServiceNotReady

__all__ = ["LookupData", "lookup_data"]


@dataclass(frozen=True)
class LookupData:
    """Pulsar's ``LookupData``: the broker's binary and HTTP URLs for one listener."""

    broker_url: str | None
    broker_url_tls: str | None
    http_url: str | None
    http_url_tls: str | None

    def to_json(self) -> dict[str, str | None]:
        """The HTTP lookup's answer. Every field is present (null when that port is
        off): the C++ client rejects an answer without ``brokerUrlTls``.
        ``nativeUrl`` is Pulsar's deprecated copy of ``brokerUrl``."""
        return {
            "brokerUrl": self.broker_url,
            "brokerUrlTls": self.broker_url_tls,
            "httpUrl": self.http_url,
            "httpUrlTls": self.http_url_tls,
            "nativeUrl": self.broker_url,
        }


def lookup_data(settings: BrokerConfig, listener_name: str = "") -> LookupData:
    """The URLs a lookup through ``listener_name`` ("" for none) answers with.

    Raises:
        ServiceNotReady: the broker has no listener of that name (Pulsar's answer).
    """
    if listener_name:
        listener = settings.listeners.get(listener_name)
        if listener is None:
            raise ServiceNotReady(f"the broker do not have {listener_name} listener")
        return LookupData(
            listener.broker_service_url,
            listener.broker_service_url_tls,
            listener.http_url or settings.web_service_url,
            listener.https_url or settings.web_service_url_tls,
        )
    internal = settings.internal_listener
    if internal is None:
        return LookupData(
            settings.broker_service_url,
            settings.broker_service_url_tls,
            settings.web_service_url,
            settings.web_service_url_tls,
        )
    return LookupData(
        internal.broker_service_url or settings.broker_service_url,
        internal.broker_service_url_tls or settings.broker_service_url_tls,
        internal.http_url or settings.web_service_url,
        internal.https_url or settings.web_service_url_tls,
    )
