"""A small blocking client for quasar's (and Pulsar's) admin REST API.

Standard library only (``urllib``), so the command line needs nothing beyond
quasar itself. Topic arguments may be full names (``persistent://t/ns/x``) or
Pulsar's short forms (``t/ns/x``, ``x`` for ``public/default/x``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from quasar.broker.resources import PERSISTENT, parse_namespace, parse_topic

__all__ = ["AdminClient", "AdminConnectionError", "AdminRequestError"]

DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"

# Stats of a large topic are the slowest admin answer; 30 s matches pulsar-admin's
# default read timeout.
REQUEST_TIMEOUT_S = 30.0

_NO_BODY = object()


class AdminRequestError(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


class AdminConnectionError(Exception):
    """The server could not be reached."""


def _q(segment: str) -> str:
    return quote(segment, safe="")


class AdminClient:
    """Calls ``/admin/v2`` endpoints; each method returns the decoded answer."""

    def __init__(
        self, base_url: str = DEFAULT_ADMIN_URL, timeout_s: float = REQUEST_TIMEOUT_S
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = _NO_BODY) -> Any:
        """Send one request; return the JSON answer, text, or ``None`` for no content.

        Raises:
            AdminRequestError: the server answered 4xx/5xx (``reason`` from its
                ``{"reason": ...}`` body when there is one).
            AdminConnectionError: no answer.
        """
        data = None if body is _NO_BODY else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                content_type = resp.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            raise AdminRequestError(exc.code, _reason(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            cause = getattr(exc, "reason", exc)
            raise AdminConnectionError(
                f"cannot reach {self.base_url}: {cause}"
            ) from None
        if not raw:
            return None
        if content_type == "application/json":
            return json.loads(raw)
        return raw.decode(errors="replace")

    # Paths -------------------------------------------------------------------------

    @staticmethod
    def namespace_path(namespace: str) -> str:
        tenant, ns = parse_namespace(namespace)
        return f"/admin/v2/namespaces/{_q(tenant)}/{_q(ns)}"

    @staticmethod
    def topic_path(topic: str) -> str:
        parts = parse_topic(topic)
        if parts.domain != PERSISTENT:
            raise ValueError(f"only persistent topics are supported: {topic}")
        return (
            f"/admin/v2/persistent/{_q(parts.tenant)}/{_q(parts.namespace)}"
            f"/{_q(parts.local_name)}"
        )

    # Tenants -----------------------------------------------------------------------

    def tenants(self) -> list[str]:
        return self.request("GET", "/admin/v2/tenants")  # type: ignore[no-any-return]

    def create_tenant(
        self,
        tenant: str,
        admin_roles: list[str] | None = None,
        allowed_clusters: list[str] | None = None,
    ) -> None:
        body: dict[str, Any] = {"adminRoles": admin_roles or []}
        if allowed_clusters:
            body["allowedClusters"] = allowed_clusters
        self.request("PUT", f"/admin/v2/tenants/{_q(tenant)}", body)

    def delete_tenant(self, tenant: str) -> None:
        self.request("DELETE", f"/admin/v2/tenants/{_q(tenant)}")

    # Namespaces --------------------------------------------------------------------

    def namespaces(self, tenant: str) -> list[str]:
        return self.request("GET", f"/admin/v2/namespaces/{_q(tenant)}")  # type: ignore[no-any-return]

    def create_namespace(self, namespace: str) -> None:
        self.request("PUT", self.namespace_path(namespace))

    def delete_namespace(self, namespace: str, force: bool = False) -> None:
        self.request("DELETE", self.namespace_path(namespace) + _force(force))

    # Topics ------------------------------------------------------------------------

    def topics(self, namespace: str) -> list[str]:
        tenant, ns = parse_namespace(namespace)
        return self.request("GET", f"/admin/v2/persistent/{_q(tenant)}/{_q(ns)}")  # type: ignore[no-any-return]

    def create_topic(self, topic: str) -> None:
        self.request("PUT", self.topic_path(topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.request("PUT", self.topic_path(topic) + "/partitions", partitions)

    def delete_topic(self, topic: str, force: bool = False) -> None:
        self.request("DELETE", self.topic_path(topic) + _force(force))

    def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        self.request("DELETE", self.topic_path(topic) + "/partitions" + _force(force))

    def stats(self, topic: str) -> dict[str, Any]:
        return self.request("GET", self.topic_path(topic) + "/stats")  # type: ignore[no-any-return]

    def internal_stats(self, topic: str) -> dict[str, Any]:
        return self.request("GET", self.topic_path(topic) + "/internalStats")  # type: ignore[no-any-return]

    def subscriptions(self, topic: str) -> list[str]:
        return self.request("GET", self.topic_path(topic) + "/subscriptions")  # type: ignore[no-any-return]


def _force(force: bool) -> str:
    return "?force=true" if force else ""


def _reason(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read()
    except OSError:
        raw = b""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip() or str(exc.reason)
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return body["reason"]
    return raw.decode(errors="replace")
