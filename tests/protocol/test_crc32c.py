from __future__ import annotations

from quasar.protocol import crc32c


def test_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_incremental_and_buffers() -> None:
    data = bytes(range(256)) * 10
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)
    assert crc32c(memoryview(data)) == crc32c(bytearray(data)) == crc32c(data)
    assert crc32c(b"") == 0
