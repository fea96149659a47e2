# Stub of the C extension _batchsplit.c (see it for why and for the exact semantics).
from typing_extensions import Buffer

def split_plain(data: Buffer, count: int, /) -> list[tuple[None, bytes]] | None: ...
