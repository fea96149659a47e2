"""Wires the transaction metrics (``quasar.transaction.metrics``) to this broker.

The collector reads the coordinators of the transaction service and, for every loaded
topic with a transaction buffer, the buffer, the topic's ledger and the pending-ack
handles of its subscriptions. It lives on the broker's registry for the life of the
transaction service.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.registry import CollectorRegistry

from quasar.transaction.metrics import TopicTransactions, TransactionMetrics

from .service import BrokerService
from .transactions import TransactionService


def transaction_topics(service: BrokerService) -> Iterator[TopicTransactions]:
    """The transaction parts of every loaded topic that has a transaction buffer."""
    for topic in list(service.topics.values()):
        buffer = topic.txn_buffer
        if buffer is None or topic.closed:
            continue
        yield TopicTransactions(
            topic=topic.name,
            namespace=topic.topic_name.namespace_name,
            ledger=topic.ledger,
            buffer=buffer,
            pending_acks=[
                (name, sub.txns.handle)
                for name, sub in topic.subscriptions.items()
                if sub.txns.handle is not None
            ],
        )


def register_transaction_metrics(
    registry: CollectorRegistry, service: BrokerService, transactions: TransactionService
) -> TransactionMetrics:
    """Register the ``pulsar_txn_*`` / ``quasar_txn_*`` collector on ``registry``."""
    collector = TransactionMetrics(
        service.cluster_name,
        transactions.registry.coordinators,
        lambda: transaction_topics(service),
        service.clock,
    )
    registry.register(collector)
    return collector
