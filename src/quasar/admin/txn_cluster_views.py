"""The transaction routes over every coordinator, answered for a whole cluster.

On a cluster member (``quasar broker``) these routes gather each coordinator's answer
from its owner (``quasar.admin.txn_gather``) into the answer one broker gives:

* ``GET coordinators``: ``[{id, brokerServiceUrl, brokerServiceUrlTls}]``, each
  coordinator's owner as a LOOKUP of its assign partition answers it;
* ``GET coordinatorStats``: ``{"<id>": stats}`` of every coordinator;
* ``GET slowTransactions/{timeoutMs}``: the slow transactions of every coordinator;
* ``GET clientTransactions/{clientName}``: the client's transactions on every
  coordinator, narrowed to those the caller may see (``Caller.may_act_on``).

As Pulsar's answers over every coordinator, the first three fail as a whole when
one coordinator's owner fails (503 when it cannot be reached); ``clientTransactions``
names such a coordinator in ``unavailableCoordinators`` instead, as it names one that
cannot be loaded, and answers for the others.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from quasar.admin.http import broker_of
from quasar.admin.txn_gather import CoordinatorOwners
from quasar.admin.txn_routing import BASE, coordinator_count
from quasar.errors import AdminError, QuasarError
from quasar.transaction.coordinator.ownership import Caller

__all__ = [
    "cluster_client_transactions",
    "cluster_coordinator_stats",
    "cluster_coordinators",
    "cluster_slow_transactions",
]

_ONE = "authoritative=true&coordinatorId="


def _answer(answer: Any) -> Any:
    if isinstance(answer, BaseException):
        raise answer
    return answer


async def cluster_coordinators(
    request: web.Request, owners: CoordinatorOwners
) -> list[dict[str, Any]]:
    broker_of(request).transaction_admin.check_enabled()
    answer = []
    for i in range(coordinator_count(request)):
        url, url_tls = owners.broker_service_urls(i)
        answer.append({"id": i, "brokerServiceUrl": url, "brokerServiceUrlTls": url_tls})
    return answer


async def cluster_coordinator_stats(
    request: web.Request, owners: CoordinatorOwners
) -> dict[str, Any]:
    broker = broker_of(request)
    broker.transaction_admin.check_enabled()
    answers = await owners.gather(
        coordinator_count(request),
        broker.coordinator_stats,
        lambda i: f"{BASE}/coordinatorStats?{_ONE}{i}",
        dict,
    )
    return {str(i): _answer(a) for i, a in enumerate(answers)}


async def cluster_slow_transactions(
    request: web.Request, owners: CoordinatorOwners, timeout_ms: int
) -> dict[str, Any]:
    txn_admin = broker_of(request).transaction_admin
    txn_admin.check_enabled()
    answers = await owners.gather(
        coordinator_count(request),
        lambda i: txn_admin.slow_transactions(timeout_ms, i),
        lambda i: f"{BASE}/slowTransactions/{timeout_ms}?{_ONE}{i}",
        dict,
    )
    out: dict[str, Any] = {}
    for answer in answers:
        out.update(_answer(answer))
    return out


async def cluster_client_transactions(
    request: web.Request,
    owners: CoordinatorOwners,
    name: str,
    role: str | None,
    superuser: bool,
) -> dict[str, Any]:
    """The client's transactions on every coordinator that ``role`` may see."""
    broker = broker_of(request)
    broker.transaction_admin.check_enabled()
    # Every owner answers for every role (this member asks as a super-user); the
    # answer is narrowed to the caller here, by the coordinators' own rule.
    answers = await owners.gather(
        coordinator_count(request),
        lambda i: broker.client_transactions(name, role=None, superuser=True, tc_id=i),
        lambda i: f"{BASE}/clientTransactions/{quote(name, safe='')}?{_ONE}{i}",
        dict,
    )
    caller = Caller(role, superuser)
    live: list[dict[str, Any]] = []
    terminated: list[dict[str, Any]] = []
    unavailable: set[int] = set()
    for i, answer in enumerate(answers):
        if isinstance(answer, QuasarError) and answer.http_status == 503:
            unavailable.add(i)  # its owner cannot be reached or cannot load it
            continue
        answer = _answer(answer)
        live += [e for e in _entries(i, answer, "open") if caller.may_act_on(e["owner"])]
        terminated += [
            e for e in _entries(i, answer, "terminated") if caller.may_act_on(e["owner"])
        ]
        unavailable.update(_ids(i, answer.get("unavailableCoordinators", [])))
    try:
        live.sort(key=lambda e: (e["mostSigBits"], e["leastSigBits"]))
        terminated.sort(key=lambda e: (e["endTime"], e["mostSigBits"], e["leastSigBits"]))
    except (KeyError, TypeError) as exc:
        raise AdminError(f"a coordinator's owner answered malformed entries: {exc!r}",
                         http_status=502) from None
    return {
        "clientName": name,
        "open": live,
        "terminated": terminated,
        "unavailableCoordinators": sorted(unavailable),
    }


def _entries(tc_id: int, answer: dict[str, Any], key: str) -> list[dict[str, Any]]:
    entries = answer.get(key, [])
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("owner"), str | None) for e in entries
    ):
        raise AdminError(f"coordinator {tc_id}: malformed {key!r} in its owner's answer",
                         http_status=502)
    return entries


def _ids(tc_id: int, ids: Any) -> list[int]:
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise AdminError(
            f"coordinator {tc_id}: malformed 'unavailableCoordinators' in its owner's "
            "answer", http_status=502,
        )
    return ids
