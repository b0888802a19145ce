# cython: language_level=3
"""Compiled record batch v2 kernels, twin of batch_py.py (layouts and rules are described there).

Fields are read big-endian straight from the caller's buffer (bytes, bytearray, memoryview, mmap);
the batch CRC uses the shared C CRC-32C from kb_crc32c.h, with the GIL released for batches of
8 KB or more.  Reason strings are identical to the twin's.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t, uint32_t, int32_t, int16_t, uint16_t
from kbroker._native.kb_crc32c cimport kb_crc32c_init, kb_crc32c_update

kb_crc32c_init()

cdef enum:
    HEADER_SIZE = 61
    MIN_BATCH_LENGTH = 49  # HEADER_SIZE - 12 (baseOffset + batchLength)
cdef Py_ssize_t NOGIL_CRC_BYTES = 8192

OFFSET_DELTA_REASON = "offset deltas not 0..n-1"


cdef inline uint32_t _u32(const unsigned char *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int64_t _i64(const unsigned char *p) noexcept nogil:
    return <int64_t>((<uint64_t>_u32(p) << 32) | _u32(p + 4))


def scan_batches(buf, Py_ssize_t start=0, Py_ssize_t end=-1, bint check_crc=True):
    """Walk v2 batches in buf[start:end]; returns ``(entries, valid_end)``.

    entries: list of ``(pos, size, base_offset, last_offset, max_timestamp, records_count)``.
    valid_end: position just after the last good batch (``start`` when there is none).
    """
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef Py_ssize_t pos, size
    cdef int32_t batch_length
    cdef uint32_t stored, actual
    cdef int64_t base_offset
    cdef list entries = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        if end < 0 or end > view.len:
            end = view.len
        if start < 0:
            start = 0
        pos = start
        while pos + 17 <= end:
            batch_length = <int32_t>_u32(p + pos + 8)
            if batch_length < MIN_BATCH_LENGTH:
                break
            size = 12 + <Py_ssize_t>batch_length
            if pos + size > end or p[pos + 16] != 2:
                break
            if check_crc:
                stored = _u32(p + pos + 17)
                if size >= NOGIL_CRC_BYTES:
                    with nogil:
                        actual = kb_crc32c_update(0, p + pos + 21, <size_t>(size - 21))
                else:
                    actual = kb_crc32c_update(0, p + pos + 21, <size_t>(size - 21))
                if actual != stored:
                    break
            base_offset = _i64(p + pos)
            entries.append((pos, size, base_offset,
                            base_offset + <int32_t>_u32(p + pos + 23),
                            _i64(p + pos + 35),
                            <int32_t>_u32(p + pos + 57)))
            pos += size
        return entries, pos
    finally:
        PyBuffer_Release(&view)


cdef inline const char *_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end,
                                int max_bytes, int64_t *out) noexcept nogil:
    """Zig-zag varint at p[pos] not reaching past ``end``; NULL or an error reason."""
    cdef uint64_t result = 0
    cdef unsigned char b
    cdef int shift = 0
    cdef int i
    cdef Py_ssize_t q = pos[0]
    for i in range(max_bytes):
        if q >= end:
            return "truncated varint"
        b = p[q]
        q += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            if max_bytes == 5:
                result &= 0xFFFFFFFFU
            pos[0] = q
            out[0] = <int64_t>((result >> 1) ^ (0 - (result & 1)))
            return NULL
        shift += 7
    return "varint too long"


cdef const char *_walk(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, int64_t count) noexcept nogil:
    """Walk ``count`` records in p[pos:end]; NULL when valid, else the reason."""
    cdef int64_t i, h, length, ts_delta, offset_delta, key_len, value_len, n_headers, hk_len, hv_len
    cdef Py_ssize_t rec_end
    cdef bint deltas_ok = True
    cdef const char *err
    if count < 0:
        return "negative record count"
    i = 0
    while i < count:
        err = _varint(p, &pos, end, 5, &length)
        if err != NULL:
            return err
        if length < 0:
            return "negative record length"
        rec_end = pos + length
        if rec_end > end:
            return "record overruns batch"
        if pos >= rec_end:
            return "truncated record"
        pos += 1  # attributes int8 (unused)
        err = _varint(p, &pos, rec_end, 10, &ts_delta)
        if err != NULL:
            return err
        err = _varint(p, &pos, rec_end, 5, &offset_delta)
        if err != NULL:
            return err
        if offset_delta != i:
            deltas_ok = False
        err = _varint(p, &pos, rec_end, 5, &key_len)
        if err != NULL:
            return err
        if key_len < -1:
            return "bad key length"
        if key_len > 0:
            pos += key_len
            if pos > rec_end:
                return "key overruns record"
        err = _varint(p, &pos, rec_end, 5, &value_len)
        if err != NULL:
            return err
        if value_len < -1:
            return "bad value length"
        if value_len > 0:
            pos += value_len
            if pos > rec_end:
                return "value overruns record"
        err = _varint(p, &pos, rec_end, 5, &n_headers)
        if err != NULL:
            return err
        if n_headers < 0:
            return "negative header count"
        h = 0
        while h < n_headers:
            err = _varint(p, &pos, rec_end, 5, &hk_len)
            if err != NULL:
                return err
            if hk_len < 0:
                return "bad header key length"
            pos += hk_len
            if pos > rec_end:
                return "header overruns record"
            err = _varint(p, &pos, rec_end, 5, &hv_len)
            if err != NULL:
                return err
            if hv_len < -1:
                return "bad header value length"
            if hv_len > 0:
                pos += hv_len
                if pos > rec_end:
                    return "header overruns record"
            h += 1
        if pos != rec_end:
            return "record length mismatch"
        i += 1
    if pos != end:
        return "trailing bytes after records"
    if not deltas_ok:
        return "offset deltas not 0..n-1"
    return NULL


cdef object _reason(const char *err):
    return None if err == NULL else err.decode("ascii")


def validate_records_v2(buf, Py_ssize_t pos, Py_ssize_t size):
    """Check every record of the UNCOMPRESSED v2 batch at buf[pos:pos+size]; None when valid."""
    cdef Py_buffer view
    cdef const unsigned char *p
    cdef const char *err
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or size < HEADER_SIZE or pos + size > view.len:
            return "batch shorter than header"
        p = <const unsigned char *>view.buf
        if (p[pos + 22] & 0x07) != 0:  # low byte of attributes int16 at 21
            return "compressed batch"
        with nogil:
            err = _walk(p, pos + HEADER_SIZE, pos + size, <int32_t>_u32(p + pos + 57))
        return _reason(err)
    finally:
        PyBuffer_Release(&view)


def validate_records_region(buf, Py_ssize_t count):
    """Check that the whole of ``buf`` is exactly ``count`` well-formed records (decompressed data)."""
    cdef Py_buffer view
    cdef const char *err
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            err = _walk(<const unsigned char *>view.buf, 0, view.len, count)
        return _reason(err)
    finally:
        PyBuffer_Release(&view)


def receive_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes for ``recv_into`` to fill, not zeroed first: bytearray(size) memsets it, which
    was 4 % of the broker's CPU at 1 KB produce (a 1 MB request a millisecond). The caller owns the contents until
    it has filled every byte; nothing reads an unfilled buffer (a short read drops it)."""
    if size < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, size)
