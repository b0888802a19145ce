# cython: language_level=3
"""Compiled per-record kernels over a v2 records region, twin of records_py.py (layouts and rules there).

Both walk an uncompressed records region that ``validate_records_region`` / ``validate_records_v2`` already
accepted; on data they cannot walk they raise ValueError rather than read out of bounds.  The GIL is released
while walking.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy


cdef inline int _varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
                        int64_t *out) noexcept nogil:
    """Zig-zag varint at p[pos] not reaching past ``end``; 0 on success, -1 when truncated or too long."""
    cdef uint64_t result = 0
    cdef unsigned char b
    cdef int shift = 0
    cdef int i
    cdef Py_ssize_t q = pos[0]
    for i in range(max_bytes):
        if q >= end:
            return -1
        b = p[q]
        q += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            if max_bytes == 5:
                result &= 0xFFFFFFFFU
            pos[0] = q
            out[0] = <int64_t>((result >> 1) ^ (0 - (result & 1)))
            return 0
        shift += 7
    return -1


cdef inline Py_ssize_t _put_uvarint(unsigned char *p, uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 0
    while v >= 0x80:
        p[n] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    p[n] = <unsigned char>v
    return n + 1


cdef int _facts(const unsigned char *p, Py_ssize_t end, int64_t count, int64_t base_timestamp,
                int64_t *null_key, int64_t *min_ts, int64_t *max_ts) noexcept nogil:
    cdef Py_ssize_t pos = 0, rec_end
    cdef int64_t i, length, ts_delta, offset_delta, key_len, ts
    cdef bint seen = False
    null_key[0] = -1
    min_ts[0] = -1
    max_ts[0] = -1
    i = 0
    while i < count:
        if _varint(p, &pos, end, 5, &length) < 0 or length < 1:
            return -1
        rec_end = pos + length
        if rec_end > end:
            return -1
        pos += 1  # attributes
        if _varint(p, &pos, rec_end, 10, &ts_delta) < 0:
            return -1
        if _varint(p, &pos, rec_end, 5, &offset_delta) < 0:
            return -1
        if _varint(p, &pos, rec_end, 5, &key_len) < 0:
            return -1
        if key_len == -1 and null_key[0] < 0:
            null_key[0] = i
        ts = <int64_t>(<uint64_t>base_timestamp + <uint64_t>ts_delta)  # Java long arithmetic: wraps
        if ts != -1:
            if not seen or ts < min_ts[0]:
                min_ts[0] = ts
            if not seen or ts > max_ts[0]:
                max_ts[0] = ts
            seen = True
        pos = rec_end
        i += 1
    return 0


def record_facts(buf, Py_ssize_t count, int64_t base_timestamp):
    """``(index of the first record with a null key or -1, smallest and largest record timestamp)`` of the
    ``count`` records in ``buf``; timestamps are baseTimestamp + delta, those equal to -1 (no timestamp) left
    out, and both are -1 when no record has one."""
    cdef Py_buffer view
    cdef int64_t null_key, min_ts, max_ts
    cdef int rc
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            rc = _facts(<const unsigned char *>view.buf, view.len, count, base_timestamp, &null_key, &min_ts,
                        &max_ts)
    finally:
        PyBuffer_Release(&view)
    if rc < 0:
        raise ValueError("malformed records region")
    return null_key, min_ts, max_ts


cdef Py_ssize_t _renumber(const unsigned char *p, Py_ssize_t end, int64_t count, unsigned char *o) noexcept nogil:
    """Write the records of p[0:end] into ``o`` with offsetDelta = index; returns the bytes written or -1."""
    cdef Py_ssize_t pos = 0, w = 0, rec_start, rec_end, od_start, od_end, body
    cdef int64_t i, length, ts_delta, offset_delta
    cdef unsigned char od[10]
    cdef Py_ssize_t od_len
    i = 0
    while i < count:
        if _varint(p, &pos, end, 5, &length) < 0 or length < 1:
            return -1
        rec_start = pos
        rec_end = pos + length
        if rec_end > end:
            return -1
        pos += 1  # attributes
        if _varint(p, &pos, rec_end, 10, &ts_delta) < 0:
            return -1
        od_start = pos
        if _varint(p, &pos, rec_end, 5, &offset_delta) < 0:
            return -1
        od_end = pos
        od_len = _put_uvarint(od, <uint64_t>i << 1)  # zig-zag of a non-negative i
        body = length - (od_end - od_start) + od_len
        w += _put_uvarint(o + w, <uint64_t>body << 1)
        memcpy(o + w, p + rec_start, od_start - rec_start)
        w += od_start - rec_start
        memcpy(o + w, od, od_len)
        w += od_len
        memcpy(o + w, p + od_end, rec_end - od_end)
        w += rec_end - od_end
        pos = rec_end
        i += 1
    if pos != end:
        return -1
    return w


def renumber_records(buf, Py_ssize_t count):
    """A bytearray holding the ``count`` records of ``buf`` with offsetDelta rewritten to 0..count-1 (and each
    record's length prefix adjusted); every other byte is kept."""
    cdef Py_buffer view
    cdef Py_ssize_t written
    cdef bytearray out
    cdef unsigned char *o
    if count < 0:
        raise ValueError("negative record count")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        # A record grows by at most 4 bytes of offsetDelta (1 -> 5) and 1 byte of length prefix.
        out = PyByteArray_FromStringAndSize(NULL, view.len + 5 * count)
        o = <unsigned char *>PyByteArray_AS_STRING(out)
        with nogil:
            written = _renumber(<const unsigned char *>view.buf, view.len, count, o)
    finally:
        PyBuffer_Release(&view)
    if written < 0:
        raise ValueError("malformed records region")
    PyByteArray_Resize(out, written)
    return out
