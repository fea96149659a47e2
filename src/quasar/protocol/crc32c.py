"""CRC-32C (Castagnoli), the checksum of Pulsar payload frames and stored entries.

Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF; the check
value of ``b"123456789"`` is ``0xE3069283``. The work is done by the ``crc32c`` C
package (hardware instructions where the CPU has them); a pure-Python CRC would cost
more than the rest of the frame codec together.
"""

from __future__ import annotations

from ._wire import KEEP_GIL, BytesLike, crc32c_c

__all__ = ["crc32c"]


def crc32c(data: BytesLike, value: int = 0) -> int:
    """Return the CRC-32C of ``data``, continuing from ``value`` (a previous result).

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``, so large inputs can be checksummed in
    pieces without joining them. Raises ``TypeError`` if ``data`` is not a bytes-like
    object.
    """
    return int(crc32c_c(data, value, KEEP_GIL))
