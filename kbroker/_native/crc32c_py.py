"""Pure-Python CRC-32C (Castagnoli), the twin of ``crc32c.pyx``.

CRC-32C is the checksum of record batch v2 (bytes 21..end of a batch, see docs/architecture.md).
Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF, so the result for
b"123456789" is 0xE3069283.  ``crc`` continues a previous result:
``crc32c(b, crc32c(a)) == crc32c(a + b)``.

Table-driven, one byte per step (roughly 10 MB/s in CPython): only the fallback when the
compiled kernel is missing or KBROKER_PURE=1.
"""

POLY = 0x82F63B78


def _make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ POLY if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


TABLE = _make_table()


def crc32c(data, crc=0):
    """CRC-32C of the bytes-like ``data``, continuing from ``crc`` (0 for a fresh checksum)."""
    if not isinstance(data, (bytes, bytearray)):
        data = memoryview(data).cast("B")
    table = TABLE
    c = (crc & 0xFFFFFFFF) ^ 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
