"""How a metadata key is stored in a ZooKeeper znode.

The metadata store's model is a map of paths to versioned values, in which a path
may have children without holding a value (``children`` is derived from the keys
below it, and ``get`` of such a path is ``None``). ZooKeeper needs every ancestor
of a znode to exist as a znode, and its own version counts every ``setData`` since
the znode was created. So a znode is either:

* an *implicit parent*: created only so that a key below it can exist. Its data is
  empty (zero bytes) and it reads back as "no key here";
* a *key*: its data starts with a 6-byte header::

      0        1        2                                  6
      +--------+--------+----------------------------------+------------------+
      |  'Q'   | format |  base version (u32, big-endian)  |  value bytes ... |
      +--------+--------+----------------------------------+------------------+

  ``format`` is 1. The key's version is the znode's version minus the base: a key
  created as a new znode has base 0 (version 0, like SQLite's first write); a key
  written onto an implicit parent (or a deleted key that kept its children, which
  turns back into an implicit parent) is created at znode version ``v + 1`` and
  records ``v + 1`` as its base, so it too starts at version 0.

Every key, even one whose value is empty, is at least 6 bytes long, so "empty data"
means "implicit parent" without ambiguity. A znode whose data has no header (written
by another tool) is refused rather than guessed at.
"""

from __future__ import annotations

import struct

from quasar.errors import MetadataError
from quasar.storage.api import Versioned

__all__ = ["HEADER_SIZE", "decode", "encode"]

_MAGIC = 0x51  # 'Q'
_FORMAT = 1
_HEADER = struct.Struct(">BBI")
HEADER_SIZE = _HEADER.size


def encode(value: bytes, base_version: int) -> bytes:
    """The znode data of a key holding ``value``, created at znode ``base_version``."""
    return _HEADER.pack(_MAGIC, _FORMAT, base_version) + value


def decode(path: str, data: bytes, znode_version: int) -> tuple[Versioned | None, int]:
    """``(key, base_version)`` of a znode's data; ``(None, 0)`` for an implicit parent.

    Raises:
        MetadataError: the data is not in this format (another tool wrote the znode,
            or a newer quasar wrote a format this one does not know).
    """
    if not data:
        return None, 0
    if len(data) < HEADER_SIZE:
        raise MetadataError(f"znode {path} does not hold a quasar metadata key")
    magic, fmt, base = _HEADER.unpack_from(data)
    if magic != _MAGIC or fmt != _FORMAT:
        raise MetadataError(
            f"znode {path} does not hold a quasar metadata key "
            f"(header {magic:#x}, format {fmt})"
        )
    if base > znode_version:
        raise MetadataError(f"znode {path}: base version {base} above {znode_version}")
    return Versioned(bytes(data[HEADER_SIZE:]), znode_version - base), base
