"""Chunked messages in the client, as pure logic: splitting, reassembly, the id.

Reassembly follows the official clients' limits: interleaved chunks of several
messages, at most ``max_pending_chunked_message`` incomplete messages (the oldest
acknowledged or left for redelivery), expiry of incomplete messages, and chunks that
arrive twice or out of place.
"""

from __future__ import annotations

import asyncio

import pulsar
import pytest

from quasar.client.chunk_assembly import ChunkAssembly
from quasar.client.chunk_receiver import ChunkReceiver
from quasar.client.chunking import ChunkedSend, chunk_metadata, split_payload
from quasar.client.exceptions import MessageTooBig
from quasar.client.message_id import ChunkMessageId, MessageId
from quasar.client.options import ConsumerOptions
from quasar.clock import ManualClock
from quasar.protocol import pb

NOW = 1_700_000_000_000


def chunk(uuid: str, chunk_id: int, num_chunks: int, total: int = 9) -> pb.MessageMetadata:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=NOW)
    md.uuid, md.chunk_id, md.num_chunks_from_msg = uuid, chunk_id, num_chunks
    md.total_chunk_msg_size = total
    return md


def at(entry: int) -> MessageId:
    return MessageId(-1, 7, entry)


# -- producer side ---------------------------------------------------------------------
def test_split_payload_sizes_chunks_by_the_metadata() -> None:
    assert split_payload(b"abcdefg", 7, 10) == [b"abc", b"def", b"g"]
    assert split_payload(b"abc", 7, 10) == [b"abc"]
    with pytest.raises(MessageTooBig):
        split_payload(b"abc", 10, 10)


def test_chunk_metadata_adds_pulsars_fields_to_a_copy() -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=4, publish_time=1)
    md.properties.add(key="k", value="v")
    c = chunk_metadata(md, "p-4", 1, 3, 300)
    assert (c.uuid, c.chunk_id, c.num_chunks_from_msg, c.total_chunk_msg_size) == (
        "p-4", 1, 3, 300,
    )
    assert c.properties[0].key == "k" and not md.HasField("uuid")


def test_a_chunked_send_completes_once_with_the_first_and_last_chunk() -> None:
    results: list[tuple[object, object]] = []
    send = ChunkedSend(3, lambda err, mid: results.append((err, mid)))
    parts = [send.part(i) for i in range(3)]
    parts[0](None, at(1))
    parts[1](None, at(2))
    assert results == []
    parts[2](None, at(3))
    assert str(results[0][1]) == "(7,1,-1,-1);(7,3,-1,-1)"
    failing: list[tuple[object, object]] = []
    send = ChunkedSend(2, lambda err, mid: failing.append((err, mid)))
    error = TimeoutError("t")
    send.part(0)(error, None)
    send.part(1)(error, None)
    assert failing == [(error, None)]


def test_a_chunk_id_serializes_and_prints_as_pulsars() -> None:
    ours = ChunkMessageId(MessageId(2, 10, 3), MessageId(2, 10, 7))
    theirs = pulsar.MessageId.deserialize(ours.serialize())
    assert str(theirs) == str(ours) == "(10,3,2,-1);(10,7,2,-1)"
    back = MessageId.deserialize(theirs.serialize())
    assert isinstance(back, ChunkMessageId)
    assert back == ours and back.chunk_keys == ((10, 3), (10, 7))
    assert back.first_chunk_message_id() == MessageId(2, 10, 3)


# -- reassembly --------------------------------------------------------------------------
def test_interleaved_chunks_of_two_messages_reassemble() -> None:
    asm = ChunkAssembly()
    assert asm.add(chunk("a", 0, 2, 6), b"aaa", at(1), NOW).message is None
    assert asm.add(chunk("b", 0, 3), b"bbb", at(2), NOW).message is None
    done_a = asm.add(chunk("a", 1, 2, 6), b"AAA", at(3), NOW).message
    assert asm.add(chunk("b", 1, 3), b"BBB", at(4), NOW).message is None
    done_b = asm.add(chunk("b", 2, 3), b"XYZ", at(5), NOW).message
    assert done_a is not None and done_b is not None
    assert done_a.payload == b"aaaAAA" and done_b.payload == b"bbbBBBXYZ"
    assert done_a.message_id.chunk_keys == ((7, 1), (7, 3))
    assert str(done_b.message_id) == "(7,2,-1,-1);(7,5,-1,-1)"
    assert len(asm) == 0


@pytest.mark.parametrize("auto_ack", [False, True])
def test_the_oldest_incomplete_message_makes_room(auto_ack: bool) -> None:
    asm = ChunkAssembly(2, auto_ack)
    asm.add(chunk("a", 0, 2), b"a", at(1), NOW)
    asm.add(chunk("b", 0, 2), b"b", at(2), NOW)
    out = asm.add(chunk("c", 0, 2), b"c", at(3), NOW)
    dropped = out.to_ack if auto_ack else out.to_redeliver
    assert dropped == [at(1)]
    assert (out.to_redeliver if auto_ack else out.to_ack) == []
    assert len(asm) == 2
    # The evicted message's later chunk continues nothing now.
    late = asm.add(chunk("a", 1, 2), b"a", at(4), NOW)
    assert late.message is None and late.to_redeliver == [at(4)]


def test_an_incomplete_message_expires_and_its_chunks_are_acked() -> None:
    asm = ChunkAssembly(10, False, 1000)
    asm.add(chunk("a", 0, 3), b"a", at(1), NOW)
    asm.add(chunk("a", 1, 3), b"a", at(2), NOW)
    asm.add(chunk("b", 0, 2), b"b", at(3), NOW + 500)
    assert asm.next_expiry_ms() == NOW + 1000
    assert asm.expire(NOW + 999).to_ack == []
    assert asm.expire(NOW + 1000).to_ack == [at(1), at(2)]
    assert len(asm) == 1 and asm.next_expiry_ms() == NOW + 1500
    # A stray chunk older than the expiry is acked; a recent one left for redelivery.
    stray = asm.add(chunk("a", 2, 3), b"a", at(4), NOW + 1001)
    assert stray.to_ack == [at(4)]
    assert ChunkAssembly(10, False, 0).add(chunk("z", 1, 2), b"", at(5), NOW).to_redeliver == [
        at(5)
    ]


def test_a_chunk_received_twice_is_used_once_and_acked_with_its_message() -> None:
    asm = ChunkAssembly()
    asm.add(chunk("a", 0, 3), b"abc", at(1), NOW)
    asm.add(chunk("a", 1, 3), b"def", at(2), NOW)
    assert asm.add(chunk("a", 1, 3), b"def", at(3), NOW).message is None
    done = asm.add(chunk("a", 2, 3), b"ghi", at(4), NOW).message
    assert done is not None and done.payload == b"abcdefghi"
    assert done.message_id.chunk_keys == ((7, 1), (7, 2), (7, 3), (7, 4))


def test_a_resent_message_replaces_its_partial_copy() -> None:
    asm = ChunkAssembly()
    asm.add(chunk("a", 0, 2), b"old", at(1), NOW)
    restart = asm.add(chunk("a", 0, 2), b"new", at(5), NOW)
    assert restart.to_ack == [at(1)]
    # The broker redelivering the same first chunk drops nothing for good.
    assert asm.add(chunk("a", 0, 2), b"new", at(5), NOW).to_ack == []
    done = asm.add(chunk("a", 1, 2), b"NEW", at(6), NOW).message
    assert done is not None and done.payload == b"newNEW"


def test_chunks_beyond_the_claimed_total_drop_the_message() -> None:
    asm = ChunkAssembly()
    asm.add(chunk("a", 0, 3, total=4), b"abc", at(1), NOW)
    out = asm.add(chunk("a", 1, 3, total=4), b"def", at(2), NOW)
    assert out.message is None and out.to_ack == [at(1), at(2)] and len(asm) == 0


def test_a_gap_drops_the_message_for_redelivery() -> None:
    asm = ChunkAssembly()
    asm.add(chunk("a", 0, 3), b"a", at(1), NOW)
    out = asm.add(chunk("a", 2, 3), b"c", at(3), NOW)
    assert out.message is None and out.to_redeliver == [at(1), at(3)]


def test_the_receiver_expires_messages_on_its_timer() -> None:
    async def scenario() -> list[MessageId]:
        clock = ManualClock(NOW)
        acked: list[MessageId] = []
        options = ConsumerOptions(
            "sub", expire_time_of_incomplete_chunked_message_ms=20
        )
        receiver = ChunkReceiver(
            options, clock, asyncio.get_running_loop(), acked.append, lambda m: None
        )
        receiver.on_chunk(chunk("a", 0, 2), b"a", at(1))
        clock.advance(20)
        for _ in range(200):  # the timer fires after 20 ms of real time
            if acked:
                break
            await asyncio.sleep(0.005)
        receiver.close()
        return acked

    assert asyncio.run(scenario()) == [at(1)]
