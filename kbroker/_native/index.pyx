# cython: language_level=3
"""Compiled index bisection, twin of index_py.py (entry layouts are described there).

Reads the big-endian keys straight out of the caller's buffer (bytes, bytearray, mmap, ...).
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int64_t, uint64_t, uint32_t, int32_t


cdef inline int64_t _key(const unsigned char *p, int key_size) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    if key_size == 4:
        return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


def bisect_index(buf, Py_ssize_t n_entries, Py_ssize_t entry_size, int key_size, target):
    """Largest slot in [0, n_entries) with key <= target, else -1."""
    cdef Py_buffer view
    cdef int64_t t
    cdef Py_ssize_t lo, hi, mid, found = -1
    cdef const unsigned char *p
    if key_size != 4 and key_size != 8:
        raise ValueError("key_size must be 4 or 8, got %r" % (key_size,))
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if n_entries < 0 or entry_size < key_size or n_entries * entry_size > view.len:
            raise ValueError("index buffer too small for %d entries of %d bytes" % (n_entries, entry_size))
        try:
            t = target
        except OverflowError:
            # beyond int64: every key is below a huge target and above a hugely negative one
            return n_entries - 1 if target > 0 else -1
        p = <const unsigned char *>view.buf
        lo = 0
        hi = n_entries - 1
        with nogil:
            while lo <= hi:
                mid = (lo + hi) >> 1
                if _key(p + mid * entry_size, key_size) <= t:
                    found = mid
                    lo = mid + 1
                else:
                    hi = mid - 1
        return found
    finally:
        PyBuffer_Release(&view)
