"""The broker's count of hostile input it refused: ``quasar_hostile_input_refused_total``.

Two kinds of refusal are counted here, each under a ``reason`` label:

* the batch and ack-set bounds (``input_bounds.py``) count the claims they refuse
  directly, with the ``REFUSED_*`` reasons of ``quasar.protocol.batch_limits``;
* every other check that refuses a peer's request (names, system topics, frame
  sizes, admin bodies, partition counts) tags the error it raises with a reason
  (``quasar.errors.tag_refusal``), and whoever answers the request counts it with
  ``counted``: the binary protocol's command handlers as they build the answer, the
  connection as it closes for a bad frame, the admin app's error middleware.

Limits on resources (connections, producers, consumers, incomplete frames) count in
``quasar_limit_refusals_total`` instead, and transaction bounds in
``quasar_txn_refused_total``: each refusal counts in exactly one family.

One instance per broker, on the broker's registry, so that several brokers in one
process count apart; every series exists from start-up, at 0.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

from quasar.errors import REFUSAL_REASONS, take_refusal
from quasar.protocol.batch_limits import (
    REFUSED_ACK_SET,
    REFUSED_BATCH_SIZE,
    REFUSED_CHUNK,
    REFUSED_COMPACTION_BATCH_SIZE,
    REFUSED_DECOMPRESSED_SIZE,
    REFUSED_UNCOMPRESSED_SIZE,
)

__all__ = ["REFUSED_METRIC", "REASONS", "HostileInputRefusals"]

REFUSED_METRIC = "quasar_hostile_input_refused"

# Every reason label, in the order the metric lists them.
REASONS = (
    REFUSED_UNCOMPRESSED_SIZE,
    REFUSED_BATCH_SIZE,
    REFUSED_ACK_SET,
    REFUSED_DECOMPRESSED_SIZE,
    REFUSED_COMPACTION_BATCH_SIZE,
    REFUSED_CHUNK,
    *REFUSAL_REASONS,
)

_Failure = TypeVar("_Failure", bound=BaseException)


class HostileInputRefusals:
    """``quasar_hostile_input_refused_total{reason}`` of one broker.

    ``registry``: the broker's metrics registry (None: a private one nobody scrapes,
    for tests and embedded use).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._refused = Counter(
            REFUSED_METRIC,
            "Requests, messages, acknowledgements and frames refused because the peer "
            "sent something malformed or beyond the broker's bounds, by reason",
            ["reason"],
            registry=registry if registry is not None else CollectorRegistry(),
        )
        for reason in REASONS:  # every series exists from the start, at 0
            self._refused.labels(reason)

    def count(self, reason: str) -> None:
        """Count one refusal under ``reason`` (one of ``REASONS``)."""
        assert reason in REASONS, reason
        self._refused.labels(reason).inc()

    def counted(self, failure: _Failure) -> _Failure:
        """Count ``failure`` if it is a tagged refusal (once, however often it is
        answered), and return it: called where a request's failure is answered."""
        reason = take_refusal(failure)
        if reason is not None:
            self.count(reason)
        return failure
