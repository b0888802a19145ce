"""Pure-Python per-record kernels over a v2 records region, the twin of ``records.pyx``.

Record layout (see batch_py.py): length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint (-1 = null) | key | valueLength varint | value | headersCount varint | headers.

The record layer calls these on regions ``validate_records_region`` / ``validate_records_v2`` already accepted,
where per-record work must not be a Python loop over decoded records (a 1.2 M-record batch took 5 s that way):

* ``record_facts(buf, count, base_timestamp) -> (null_key_index, min_timestamp, max_timestamp)``: the index of
  the first record whose key is null (-1 when none), the smallest and largest record timestamp (baseTimestamp +
  timestampDelta, wrapping like Java's long; records whose timestamp is -1 = none are left out, and both are -1
  when no record has one) -- what the compacted-topic key rule and the timestamp-difference check need;
* ``renumber_records(buf, count) -> bytearray``: the same records with offsetDelta = 0..count-1, each length
  prefix adjusted, every other byte kept (Kafka rewrites such batches instead of rejecting them).

Both raise ValueError on a region they cannot walk.  This twin is a plain Python loop (~1 us per record); the
compiled kernel does the same in C without the GIL.
"""

from .batch_py import _Bad, _varint as _batch_varint
from .varint_py import encode_varint


def _varint(buf, pos, end, max_bytes):
    """Zig-zag varint at buf[pos] -> (value, new pos): batch_py's reader (int32 fields at most 5 bytes keeping the
    low 32 bits, as Java's ByteUtils.readVarint; varlongs 10), with ValueError for its internal error."""
    try:
        return _batch_varint(buf, pos, end, max_bytes)
    except _Bad as e:
        raise ValueError(str(e)) from None


def _view(buf):
    return buf if isinstance(buf, (bytes, bytearray)) else memoryview(buf).cast("B")


def _wrap64(v):
    return ((v + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def record_facts(buf, count, base_timestamp):
    buf = _view(buf)
    n = len(buf)
    pos = 0
    null_key = -1
    min_ts = max_ts = -1
    seen = False
    for i in range(count):
        length, pos = _varint(buf, pos, n, 5)
        end = pos + length
        if length < 1 or end > n:
            raise ValueError("malformed records region")
        ts_delta, q = _varint(buf, pos + 1, end, 10)
        _offset_delta, q = _varint(buf, q, end, 5)
        key_len, q = _varint(buf, q, end, 5)
        if key_len == -1 and null_key < 0:
            null_key = i
        ts = _wrap64(base_timestamp + ts_delta)
        if ts != -1:
            if not seen or ts < min_ts:
                min_ts = ts
            if not seen or ts > max_ts:
                max_ts = ts
            seen = True
        pos = end
    return null_key, min_ts, max_ts


def renumber_records(buf, count):
    if count < 0:
        raise ValueError("negative record count")
    buf = _view(buf)
    n = len(buf)
    out = bytearray()
    pos = 0
    for i in range(count):
        length, pos = _varint(buf, pos, n, 5)
        end = pos + length
        if length < 1 or end > n:
            raise ValueError("malformed records region")
        _ts, od_start = _varint(buf, pos + 1, end, 10)
        _od, od_end = _varint(buf, od_start, end, 5)
        od = encode_varint(i)
        out += encode_varint(length - (od_end - od_start) + len(od))
        out += buf[pos:od_start]
        out += od
        out += buf[od_end:end]
        pos = end
    if pos != n:
        raise ValueError("malformed records region")
    return out
