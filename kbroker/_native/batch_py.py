"""Pure-Python record batch v2 kernels, the twin of ``batch.pyx``.

These kernels are the second owner of the batch layout, by design (the first, for all Python code, is
``kbroker/record/batch.py``): they walk it at C speed where the log and validation need bytes, not fields.

Batch layout (big-endian, offsets from the batch start; 61-byte header):
  0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8 = 2 |
 17 crc uint32 = CRC-32C of bytes 21..end | 21 attributes int16 | 23 lastOffsetDelta int32 |
 27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 |
 53 baseSequence int32 | 57 recordsCount int32 | 61 records
A batch occupies 12 + batchLength bytes, so batchLength >= 49 (61 - 12).

Record layout (inside the records region; varint = zig-zag, at most 5 bytes for int32 fields,
varlong at most 10):
  length varint (bytes after this field) | attributes int8 | timestampDelta varlong |
  offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
  headersCount varint | per header: keyLength varint (>= 0) | key | valueLength varint (-1 = null) | value

``scan_batches`` never raises on bad data: it stops at the first batch that is truncated, has
magic != 2, batchLength < 49 or (with check_crc) a CRC mismatch.  The ``validate_*`` helpers
return None when the records are well-formed, else a short reason.  Structural problems win;
when the only problem is that offset deltas are not 0..n-1 the reason is exactly
OFFSET_DELTA_REASON, so a caller may choose to rewrite the deltas instead of rejecting.
"""

import struct

from .crc32c_py import crc32c

HEADER_SIZE = 61
MIN_BATCH_LENGTH = HEADER_SIZE - 12  # 49: header bytes after baseOffset + batchLength
OFFSET_DELTA_REASON = "offset deltas not 0..n-1"

_HEAD = struct.Struct(">qiiB")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")
_LAST_DELTA = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")
_COUNT = struct.Struct(">i")
_ATTRS = struct.Struct(">h")


def _as_bytes_view(buf):
    if isinstance(buf, (bytes, bytearray)):
        return buf
    return memoryview(buf).cast("B")


def scan_batches(buf, start=0, end=-1, check_crc=True):
    """Walk v2 batches in buf[start:end]; returns ``(entries, valid_end)``.

    entries: list of ``(pos, size, base_offset, last_offset, max_timestamp, records_count)``.
    valid_end: position just after the last good batch (``start`` when there is none).
    """
    buf = _as_bytes_view(buf)
    n = len(buf)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    entries = []
    pos = start
    mv = memoryview(buf) if check_crc else None
    while pos + 17 <= end:
        base_offset, batch_length, _epoch, magic = _HEAD.unpack_from(buf, pos)
        if batch_length < MIN_BATCH_LENGTH:
            break
        size = 12 + batch_length
        if pos + size > end or magic != 2:
            break
        if check_crc:
            stored = _CRC.unpack_from(buf, pos + 17)[0]
            if crc32c(mv[pos + 21:pos + size]) != stored:
                break
        last_delta = _LAST_DELTA.unpack_from(buf, pos + 23)[0]
        max_ts = _MAX_TS.unpack_from(buf, pos + 35)[0]
        count = _COUNT.unpack_from(buf, pos + 57)[0]
        entries.append((pos, size, base_offset, base_offset + last_delta, max_ts, count))
        pos += size
    return entries, pos


class _Bad(Exception):
    """Internal: a malformed record, carries the reason."""


def _varint(buf, pos, end, max_bytes):
    """Zig-zag varint at buf[pos] not reaching past ``end``; raises _Bad."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Bad("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if max_bytes == 5:
                result &= 0xFFFFFFFF
            else:
                result &= 0xFFFFFFFFFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise _Bad("varint too long")


def _walk(buf, pos, end, count):
    """Walk ``count`` records in buf[pos:end]; returns None or a reason string."""
    if count < 0:
        return "negative record count"
    deltas_ok = True
    try:
        for i in range(count):
            length, pos = _varint(buf, pos, end, 5)
            if length < 0:
                raise _Bad("negative record length")
            rec_end = pos + length
            if rec_end > end:
                raise _Bad("record overruns batch")
            if pos >= rec_end:
                raise _Bad("truncated record")
            pos += 1  # attributes int8 (unused)
            _ts_delta, pos = _varint(buf, pos, rec_end, 10)
            offset_delta, pos = _varint(buf, pos, rec_end, 5)
            if offset_delta != i:
                deltas_ok = False
            key_len, pos = _varint(buf, pos, rec_end, 5)
            if key_len < -1:
                raise _Bad("bad key length")
            if key_len > 0:
                pos += key_len
                if pos > rec_end:
                    raise _Bad("key overruns record")
            value_len, pos = _varint(buf, pos, rec_end, 5)
            if value_len < -1:
                raise _Bad("bad value length")
            if value_len > 0:
                pos += value_len
                if pos > rec_end:
                    raise _Bad("value overruns record")
            n_headers, pos = _varint(buf, pos, rec_end, 5)
            if n_headers < 0:
                raise _Bad("negative header count")
            for _h in range(n_headers):
                hk_len, pos = _varint(buf, pos, rec_end, 5)
                if hk_len < 0:
                    raise _Bad("bad header key length")
                pos += hk_len
                if pos > rec_end:
                    raise _Bad("header overruns record")
                hv_len, pos = _varint(buf, pos, rec_end, 5)
                if hv_len < -1:
                    raise _Bad("bad header value length")
                if hv_len > 0:
                    pos += hv_len
                    if pos > rec_end:
                        raise _Bad("header overruns record")
            if pos != rec_end:
                raise _Bad("record length mismatch")
    except _Bad as exc:
        return exc.args[0]
    if pos != end:
        return "trailing bytes after records"
    if not deltas_ok:
        return OFFSET_DELTA_REASON
    return None


def validate_records_v2(buf, pos, size):
    """Check every record of the UNCOMPRESSED v2 batch at buf[pos:pos+size]; None when valid."""
    buf = _as_bytes_view(buf)
    if pos < 0 or size < HEADER_SIZE or pos + size > len(buf):
        return "batch shorter than header"
    codec = _ATTRS.unpack_from(buf, pos + 21)[0] & 0x07
    if codec:
        return "compressed batch"
    count = _COUNT.unpack_from(buf, pos + 57)[0]
    return _walk(buf, pos + HEADER_SIZE, pos + size, count)


def validate_records_region(buf, count):
    """Check that the whole of ``buf`` is exactly ``count`` well-formed records (decompressed data)."""
    buf = _as_bytes_view(buf)
    return _walk(buf, 0, len(buf), count)


def receive_buffer(size):
    """Twin of the compiled kernel: a bytearray of ``size`` bytes to ``recv_into`` (zeroed here; the compiled one
    skips the memset)."""
    if size < 0:
        raise ValueError("negative size")
    return bytearray(size)
