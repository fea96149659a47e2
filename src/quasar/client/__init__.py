"""quasar's Pulsar client: a synchronous API named like the `pulsar` package.

Code written for ``pulsar-client`` ports by changing the import::

    import quasar.client as pulsar

    client = pulsar.Client("pulsar://127.0.0.1:6650")
    producer = client.create_producer("my-topic")
    producer.send(b"hello")
    consumer = client.subscribe("my-topic", "my-sub")
    msg = consumer.receive(timeout_millis=5000)
    consumer.acknowledge(msg)
    client.close()

Transactions, which `pulsar` (Python) lacks, follow Pulsar's Java client::

    client = pulsar.Client("pulsar://127.0.0.1:6650", enable_transaction=True)
    txn = client.new_transaction(timeout_ms=60000)
    producer.send(b"result", txn=txn)
    consumer.acknowledge(msg, txn=txn)
    txn.commit()                       # or txn.abort()

Dead-letter topics (``dead_letter_policy``), ``batch_receive()`` and, as in Pulsar's
Java client, retry topics (``retry_enable=True`` and ``consumer.reconsume_later``)
work as in Pulsar. The asyncio API is :mod:`quasar.client.aio`. Of the
authentication plugins, token, basic and TLS (``quasar.client.authentication``).
"""

from __future__ import annotations

from quasar.client import aio, schema
from quasar.client.authentication import (
    Authentication,
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
)
from quasar.client.consumer_policies import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
)
from quasar.client.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    KeySharedPolicy,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from quasar.client.exceptions import *  # noqa: F403 - the pulsar exception names
from quasar.client.exceptions import __all__ as _exception_names
from quasar.client.message import Message
from quasar.client.message_crypto import CryptoKeyReader, EncryptionKeyInfo
from quasar.client.message_id import MessageId
from quasar.client.schema import (
    AvroSchema,
    BytesSchema,
    JsonSchema,
    KeyValueEncodingType,
    KeyValueSchema,
    ProtobufNativeSchema,
    Schema,
    StringSchema,
)
from quasar.client.sync import Client, Consumer, Producer, Reader, Transaction
from quasar.client.txn_state import TransactionState
from quasar.protocol.txn_id import TxnID

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AvroSchema",
    "BatchingType",
    "BytesSchema",
    "Client",
    "CompressionType",
    "Consumer",
    "CryptoKeyReader",
    "EncryptionKeyInfo",
    "ConsumerBatchReceivePolicy",
    "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "InitialPosition",
    "JsonSchema",
    "KeySharedMode",
    "KeyValueEncodingType",
    "KeyValueSchema",
    "KeySharedPolicy",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "ProtobufNativeSchema",
    "Reader",
    "RegexSubscriptionMode",
    "Result",
    "Schema",
    "StringSchema",
    "Transaction",
    "TransactionState",
    "TxnID",
    "aio",
    "schema",
    *_exception_names,
]
