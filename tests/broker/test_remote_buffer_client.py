"""The coordinator's participant calls over the wire (RemoteTransactionBufferClient)
against a real broker process: ending a transaction on a partition and on a
subscription through END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION, and the error
classes the coordinator's retry logic depends on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pulsar
import pytest

from quasar.errors import SubscriptionNotFound, TopicNotFound
from quasar.protocol import pb
from quasar.protocol.txn_id import TxnID
from quasar.server.remote_buffer_client import RemoteTransactionBufferClient
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawTxnProducer
from quasar.transaction.buffer_client import EndFailure, classify_end_failure
from quasar.transaction.txn_status import TxnAction

pytestmark = pytest.mark.usefixtures("close_raw")


def _read_all(broker: BrokerProcess, topic: str) -> list[bytes]:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    client = pulsar.Client(broker.url, operation_timeout_seconds=10, logger=logger)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    out = []
    while reader.has_message_available():
        out.append(reader.read_next(10_000).data())
    client.close()
    return out


def test_end_on_partition_over_the_wire(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/remote-end"
    p = RawTxnProducer(broker.port, topic)
    txn = p.new_txn()
    p.send(b"via-remote", txn)
    p.send(b"plain")

    async def end() -> None:
        client = RemoteTransactionBufferClient(lambda _t: broker.url)
        try:
            await client.end_txn_on_partition(topic, TxnID(*txn), TxnAction.COMMIT, -1)
            # Participants are idempotent: a repeated end succeeds.
            await client.end_txn_on_partition(topic, TxnID(*txn), TxnAction.COMMIT, -1)
        finally:
            await client.close()

    asyncio.run(end())
    assert _read_all(broker, topic) == [b"via-remote", b"plain"]
    # The coordinator learns the outcome the same way later; finishing it is harmless.
    assert not p.end(txn, pb.COMMIT).HasField("error")


def test_errors_carry_the_classes_the_coordinator_retries_on(broker: BrokerProcess) -> None:
    async def run() -> tuple[BaseException, BaseException]:
        client = RemoteTransactionBufferClient(lambda _t: broker.url)
        try:
            with pytest.raises(TopicNotFound) as gone_topic:
                await client.end_txn_on_partition(
                    "persistent://public/default/never-existed", TxnID(0, 1),
                    TxnAction.ABORT, -1,
                )
            RawTxnProducer(broker.port, "persistent://public/default/remote-sub-topic")
            with pytest.raises((SubscriptionNotFound, TopicNotFound)) as gone_sub:
                await client.end_txn_on_subscription(
                    "persistent://public/default/remote-sub-topic", "no-such-sub",
                    TxnID(0, 1), TxnAction.ABORT, -1,
                )
            return gone_topic.value, gone_sub.value
        finally:
            await client.close()

    gone_topic, gone_sub = asyncio.run(run())
    assert classify_end_failure(gone_topic) is EndFailure.GONE
    assert classify_end_failure(gone_sub) is EndFailure.GONE


def end_failure(
    client: Callable[[], RemoteTransactionBufferClient], why: str
) -> BaseException:
    """The exception of an END_TXN_ON_PARTITION that must fail, sent by the client
    ``client()`` builds on the call's event loop; ``why`` names the failure."""

    async def run() -> BaseException:
        try:
            await client().end_txn_on_partition(
                "persistent://a/b/c", TxnID(0, 1), TxnAction.COMMIT, -1
            )
        except Exception as exc:  # noqa: BLE001 - the class is what is checked
            return exc
        raise AssertionError(why)

    return asyncio.run(run())


def test_unreachable_broker_is_retryable() -> None:
    from quasar.testing.process import free_port

    exc = end_failure(
        lambda: RemoteTransactionBufferClient(lambda _t: f"pulsar://127.0.0.1:{free_port()}"),
        "an unreachable broker must fail the call",
    )
    assert classify_end_failure(exc) is EndFailure.RETRY


@pytest.mark.parametrize(
    ("tls", "url"),
    [(True, "pulsar://127.0.0.1:6650"), (False, "pulsar+ssl://127.0.0.1:6651")],
)
def test_a_url_of_the_other_kind_is_refused_never_reached(tls: bool, url: str) -> None:
    """With a TLS context only pulsar+ssl:// is reached, without one only pulsar://:
    nothing falls back from TLS to plaintext (or the other way round)."""
    import ssl

    def client() -> RemoteTransactionBufferClient:
        context = ssl.create_default_context() if tls else None
        return RemoteTransactionBufferClient(lambda _t: url, tls=context)

    exc = end_failure(client, "a URL of the other kind must fail the call")
    assert "brokerClientTlsEnabled" in str(exc)
    assert classify_end_failure(exc) is EndFailure.RETRY
