"""Authentication outcomes as Prometheus counters, Pulsar's names and labels:
``pulsar_authentication_success_total{provider_name,auth_method}`` and
``pulsar_authentication_failures_total{provider_name,auth_method,reason}``."""

from __future__ import annotations

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

__all__ = ["AuthenticationMetrics"]


class AuthenticationMetrics:
    """The two counters, registered on one broker's registry (None: a private
    registry nobody scrapes, for tests and embedded use)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self._success = Counter(
            "pulsar_authentication_success",
            "Successful authentications",
            ["provider_name", "auth_method"],
            registry=registry,
        )
        self._failures = Counter(
            "pulsar_authentication_failures",
            "Failed authentications",
            ["provider_name", "auth_method", "reason"],
            registry=registry,
        )

    def succeeded(self, provider_name: str, auth_method: str) -> None:
        self._success.labels(provider_name, auth_method).inc()

    def failed(self, provider_name: str, auth_method: str, reason: str) -> None:
        self._failures.labels(provider_name, auth_method, reason).inc()
