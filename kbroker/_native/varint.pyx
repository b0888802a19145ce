# cython: language_level=3
"""Compiled zig-zag / unsigned varints, twin of varint_py.py (see it for the encoding).

decode_* read straight from the caller's buffer (bytes fast path, else the buffer protocol) and
raise ValueError on a truncated or more-than-10-byte varint; bits past 64 are dropped.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t, int64_t


cdef inline bytes _encode(uint64_t v):
    cdef unsigned char out[10]
    cdef int i = 0
    while v >= 0x80:
        out[i] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        i += 1
    out[i] = <unsigned char>v
    return PyBytes_FromStringAndSize(<char *>out, i + 1)


def encode_uvarint(n):
    """Unsigned base-128 encoding of 0 <= n < 2**64."""
    cdef uint64_t v
    if n < 0:
        raise ValueError("uvarint out of range: %r" % (n,))
    try:
        v = n
    except OverflowError:
        raise ValueError("uvarint out of range: %r" % (n,)) from None
    return _encode(v)


def encode_varint(n):
    """Zig-zag encoding of a signed 64-bit integer."""
    cdef int64_t v
    try:
        v = n
    except OverflowError:
        raise ValueError("varint out of range: %r" % (n,)) from None
    return _encode((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


cdef int _decode(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, uint64_t *out) noexcept nogil:
    """0 ok, 1 truncated, 2 overlong."""
    cdef uint64_t result = 0
    cdef unsigned char b
    cdef int shift = 0
    cdef int i
    cdef Py_ssize_t q = pos[0]
    for i in range(10):
        if q >= n:
            return 1
        b = p[q]
        q += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            pos[0] = q
            out[0] = result
            return 0
        shift += 7
    return 2


cdef uint64_t _decode_obj(object buf, Py_ssize_t *pos) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_buffer view
    cdef uint64_t v = 0
    cdef int rc
    if pos[0] < 0:
        raise ValueError("negative position")
    if type(buf) is bytes:
        rc = _decode(<const unsigned char *>PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf), pos, &v)
    else:
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        rc = _decode(<const unsigned char *>view.buf, view.len, pos, &v)
        PyBuffer_Release(&view)
    if rc == 1:
        raise ValueError("truncated varint")
    if rc == 2:
        raise ValueError("varint longer than 10 bytes")
    return v


def decode_uvarint(buf, Py_ssize_t pos=0):
    """Decode an unsigned varint at ``buf[pos]``; returns ``(value, new_pos)``."""
    cdef uint64_t v = _decode_obj(buf, &pos)
    return v, pos


def decode_varint(buf, Py_ssize_t pos=0):
    """Decode a zig-zag signed varint at ``buf[pos]``; returns ``(value, new_pos)``."""
    cdef uint64_t v = _decode_obj(buf, &pos)
    return <int64_t>((v >> 1) ^ (0 - (v & 1))), pos
