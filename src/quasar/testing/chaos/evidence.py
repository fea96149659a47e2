"""What the broker says about a stuck partition, fetched when a stall is declared.

A ``no-progress`` finding is only as useful as the evidence taken *during* the
stall: once the consumers stop, the broker's view of the subscription (its
consumers' permits, unacked counts, cursor positions) is gone. So when the runner
declares a subscription stuck on a partition it fetches, over the admin API,

* ``/admin/v2/persistent/{topic}/stats``: the subscription's ``msgBacklog``,
  ``unackedMessages`` and consumers (``availablePermits``, ``unackedMessages``,
  ``blockedConsumerOnUnackedMsgs``);
* ``/admin/v2/persistent/{topic}/internalStats``: the ledger's last confirmed
  entry and the subscription cursor's mark-delete and read positions;
* ``/admin/v3/transactions/transactionBufferStats/{topic}``: the partition's
  ``maxReadPosition`` (dispatch never reads past it) and ongoing transactions.

:func:`stall_evidence` condenses these into the fields the ``no_progress`` record
carries; the full documents are written beside the history for a closer look.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from quasar.protocol import TopicName

ADMIN_TIMEOUT_S = 10.0
# The consumer fields that say whether the broker may deliver to it at all.
CONSUMER_FIELDS = (
    "consumerName", "availablePermits", "unackedMessages",
    "blockedConsumerOnUnackedMsgs", "msgOutCounter", "address",
)


def _get_json(admin_url: str, path: str) -> Any:
    """The JSON at ``path``, or ``{"error": ...}``: evidence is best effort, and a
    broker that cannot answer is itself worth recording."""
    try:
        with urllib.request.urlopen(admin_url + path, timeout=ADMIN_TIMEOUT_S) as r:
            return json.loads(r.read())
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return {"error": repr(exc)}


def fetch_partition_stats(admin_url: str, partition: str) -> dict[str, Any]:
    """``stats``, ``internalStats`` and ``transactionBufferStats`` of one partition
    (a full ``persistent://`` name), each as the broker answered it."""
    name = TopicName.parse(partition)
    rest = f"{name.namespace_name}/{name.local_name}"
    return {
        "stats": _get_json(admin_url, f"/admin/v2/persistent/{rest}/stats"),
        "internalStats": _get_json(admin_url, f"/admin/v2/persistent/{rest}/internalStats"),
        "transactionBufferStats": _get_json(
            admin_url, f"/admin/v3/transactions/transactionBufferStats/{rest}"),
    }


def stall_evidence(fetched: dict[str, Any], subscription: str) -> dict[str, Any]:
    """The fields of one subscription's stall from :func:`fetch_partition_stats`."""
    stats = fetched.get("stats", {})
    internal = fetched.get("internalStats", {})
    buffer = fetched.get("transactionBufferStats", {})
    sub = stats.get("subscriptions", {}).get(subscription)
    cursor = internal.get("cursors", {}).get(subscription)
    out: dict[str, Any] = {
        "lastConfirmedEntry": internal.get("lastConfirmedEntry"),
        "maxReadPosition": buffer.get("maxReadPosition"),
        "ongoingTxnSize": buffer.get("ongoingTxnSize"),
    }
    for doc in (stats, internal, buffer):
        if "error" in doc:
            out.setdefault("errors", []).append(doc["error"])
    if sub is None:
        out["subscription"] = None  # the broker does not know it: a finding too
    else:
        out.update(
            msgBacklog=sub.get("msgBacklog"),
            unackedMessages=sub.get("unackedMessages"),
            blockedSubscriptionOnUnackedMsgs=sub.get("blockedSubscriptionOnUnackedMsgs"),
            consumers=[{k: c.get(k) for k in CONSUMER_FIELDS}
                       for c in sub.get("consumers", [])],
        )
    if cursor is not None:
        out.update(markDeletePosition=cursor.get("markDeletePosition"),
                   readPosition=cursor.get("readPosition"))
    return out


def dump(workdir: Path, partition: str, fetched: dict[str, Any]) -> Path:
    """Write the full documents to ``stall-<partition>.json`` in ``workdir``."""
    path = workdir / f"stall-{TopicName.parse(partition).local_name}.json"
    path.write_text(json.dumps(fetched, indent=2, sort_keys=True))
    return path


__all__ = ["dump", "fetch_partition_stats", "stall_evidence"]
