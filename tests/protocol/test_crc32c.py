from __future__ import annotations

from quasar.protocol import crc32c


def test_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_incremental_and_buffers() -> None:
    data = bytes(range(256)) * 10
    assert crc32c(data[100:], crc32c(data[:100])) == crc32c(data)
    assert crc32c(memoryview(data)) == crc32c(bytearray(data)) == crc32c(data)
    assert crc32c(b"") == 0


def test_large_inputs_match_the_package_default() -> None:
    # Inputs from 32 KiB are where the package would give up the GIL; quasar keeps
    # it (quasar.protocol._wire.KEEP_GIL) and must get the same checksums.
    import crc32c as package

    from quasar.storage.file.format import payload_matches, record_header

    for size in (32 * 1024 - 1, 32 * 1024, 50 * 1024, 1 << 20):
        data = bytes(i * 7 % 251 for i in range(size))
        assert crc32c(data) == package.crc32c(data)
        assert crc32c(data[1000:], crc32c(data[:1000])) == package.crc32c(data)
        header = record_header(data)
        assert header[4:] == package.crc32c(data, package.crc32c(header[:4])).to_bytes(4, "big")
        assert payload_matches(header, data)
        assert not payload_matches(header, data[:-1] + bytes([data[-1] ^ 1]))
