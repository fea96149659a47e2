"""The broker's answers that more than one command handler sends, built as commands.

Every failure a client sees carries Pulsar's ``ServerError`` code and a message, read
off the exception by ``error_code_and_message``: a ``quasar.errors`` exception brings its
own code; anything else is a bug in the broker and goes out as ``UnknownError`` with
the exception's type, so the client gets an answer and the connection stays up.
"""

from __future__ import annotations

from quasar.broker.non_persistent_topics import ServedTopic
from quasar.broker.producer import Producer
from quasar.errors import BrokerError, ServerError
from quasar.protocol import pb

__all__ = [
    "BROKER_REQUEST_ID",
    "TRANSACTIONS_NOT_ENABLED",
    "ack_response",
    "close_consumer",
    "close_producer",
    "error",
    "error_code_and_message",
    "producer_success",
    "send_error",
    "success",
]

T = pb.BaseCommand

# What a transactional request gets from a broker that runs no transactions.
TRANSACTIONS_NOT_ENABLED = "Transactions are not enabled on this broker"

# The request id of a command the broker starts itself (CLOSE_PRODUCER,
# CLOSE_CONSUMER): no client request has it.
BROKER_REQUEST_ID = (1 << 64) - 1


def error_code_and_message(error: BaseException) -> tuple[int, str]:
    """The ServerError code and message for an exception (UnknownError for bugs)."""
    if isinstance(error, BrokerError) and error.code is not None:
        return int(error.code), str(error) or type(error).__name__
    code = getattr(error, "code", None)
    if isinstance(code, ServerError):
        return int(code), str(error) or type(error).__name__
    return int(ServerError.UnknownError), f"{type(error).__name__}: {error}"


def success(request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.SUCCESS)
    cmd.success.request_id = request_id
    return cmd


def error(request_id: int, failure: BaseException) -> pb.BaseCommand:
    """ERROR for a request that failed with ``failure``."""
    code, message = error_code_and_message(failure)
    cmd = T(type=T.ERROR)
    cmd.error.request_id = request_id
    cmd.error.error = code
    cmd.error.message = message
    return cmd


def send_error(producer_id: int, sequence_id: int, failure: BaseException) -> pb.BaseCommand:
    """SEND_ERROR: the message ``sequence_id`` of the producer was not stored."""
    code, message = error_code_and_message(failure)
    cmd = T(type=T.SEND_ERROR)
    e = cmd.send_error
    e.producer_id = producer_id
    e.sequence_id = sequence_id
    e.error = code
    e.message = message
    return cmd


def producer_success(
    request_id: int, producer: Producer, topic: ServedTopic, ready: bool = True
) -> pb.BaseCommand:
    """PRODUCER_SUCCESS; ``ready`` False tells a producer waiting for exclusive access
    that it is queued (the real success follows)."""
    cmd = T(type=T.PRODUCER_SUCCESS)
    s = cmd.producer_success
    s.request_id = request_id
    s.producer_name = producer.producer_name
    s.last_sequence_id = topic.last_sequence_id(producer.producer_name)
    if producer.schema_version:
        s.schema_version = producer.schema_version
    if producer.topic_epoch is not None:
        s.topic_epoch = producer.topic_epoch
    s.producer_ready = ready
    return cmd


def ack_response(ack: pb.CommandAck, failure: BaseException | None) -> pb.BaseCommand:
    """ACK_RESPONSE to an ACK that asked for one (it has a request id)."""
    cmd = T(type=T.ACK_RESPONSE)
    r = cmd.ackResponse
    r.consumer_id = ack.consumer_id
    r.request_id = ack.request_id
    if ack.HasField("txnid_most_bits"):
        r.txnid_most_bits = ack.txnid_most_bits
        r.txnid_least_bits = ack.txnid_least_bits
    if failure is not None:
        code, message = error_code_and_message(failure)
        r.error = code
        r.message = message
    return cmd


def close_producer(producer_id: int) -> pb.BaseCommand:
    """CLOSE_PRODUCER from the broker: the client re-creates the producer."""
    cmd = T(type=T.CLOSE_PRODUCER)
    cmd.close_producer.producer_id = producer_id
    cmd.close_producer.request_id = BROKER_REQUEST_ID
    return cmd


def close_consumer(consumer_id: int) -> pb.BaseCommand:
    """CLOSE_CONSUMER from the broker: the client subscribes again (same id)."""
    cmd = T(type=T.CLOSE_CONSUMER)
    cmd.close_consumer.consumer_id = consumer_id
    cmd.close_consumer.request_id = BROKER_REQUEST_ID
    return cmd
