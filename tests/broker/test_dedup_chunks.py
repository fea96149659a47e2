"""Deduplication and chunked messages: only a message's last chunk records its id.

Every chunk of a chunked message is its own entry carrying the message's sequence id,
so a chunk other than the last must neither be taken for a duplicate nor mark the id
as seen, or the message's later chunks would be dropped. Recovery replays entries by
the same rule.
"""

from __future__ import annotations

import asyncio

from quasar.broker.dedup import DupStatus, MessageDeduplication
from quasar.broker.entry_info import entry_info
from quasar.protocol import make_entry, pb
from quasar.storage.memory import MemoryManagedLedgerFactory


def chunk(seq: int, chunk_id: int, num_chunks: int) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
    if num_chunks > 1:
        md.uuid = f"p-{seq}"
        md.chunk_id = chunk_id
        md.num_chunks_from_msg = num_chunks
        md.total_chunk_msg_size = 3 * num_chunks
    return make_entry(md, b"abc")


def test_entry_info_marks_every_chunk_but_the_last() -> None:
    flags = [entry_info(chunk(7, i, 3)).partial_chunk for i in range(3)]
    assert flags == [True, True, False]
    assert entry_info(chunk(8, 0, 1)).partial_chunk is False


def test_recovery_records_a_chunked_message_only_with_its_last_chunk() -> None:
    async def scenario() -> tuple[int, int]:
        factory = MemoryManagedLedgerFactory()
        ledger = await factory.open("public/default/persistent/chunks")
        for data in (chunk(4, 0, 1), chunk(5, 0, 3), chunk(5, 1, 3)):
            await ledger.add_entry(data)
        dedup = MessageDeduplication(ledger)
        await dedup.recover()
        before_last = dedup.last_sequence_id("p")
        # The last chunk, resent after the crash, is new: its id was never recorded.
        status = dedup.check("p", 5, 5)
        assert status is DupStatus.NEW
        await ledger.add_entry(chunk(5, 2, 3))
        again = MessageDeduplication(ledger)
        await again.recover()
        await factory.close()
        return before_last, again.last_sequence_id("p")

    before_last, after_last = asyncio.run(scenario())
    assert before_last == 4
    assert after_last == 5
