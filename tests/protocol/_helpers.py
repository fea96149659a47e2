"""Builders shared by the protocol tests."""

from __future__ import annotations

from quasar.protocol import pb

T = pb.BaseCommand


def ping() -> pb.BaseCommand:
    return pb.BaseCommand(type=T.PING, ping=pb.CommandPing())


def send_cmd(producer_id: int = 1, sequence_id: int = 7) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=T.SEND,
        send=pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id),
    )


def metadata(sequence_id: int = 7, **fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name="standalone-0-1",
        sequence_id=sequence_id,
        publish_time=1_700_000_000_000,
        **fields,  # type: ignore[arg-type]
    )


def message_cmd(
    consumer_id: int = 3, ledger_id: int = 10, entry_id: int = 4
) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=T.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=consumer_id,
            message_id=pb.MessageIdData(ledgerId=ledger_id, entryId=entry_id),
        ),
    )


def lookup_response(request_id: int = 5) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=T.LOOKUP_RESPONSE,
        lookupTopicResponse=pb.CommandLookupTopicResponse(
            request_id=request_id,
            response=pb.CommandLookupTopicResponse.Connect,
            brokerServiceUrl="pulsar://127.0.0.1:6650",
            authoritative=True,
        ),
    )
