# cython: language_level=3
"""Compiled CRC-32C (Castagnoli), twin of crc32c_py.py; the C code is kb_crc32c.h.

Uses the SSE4.2 crc32 instruction when the CPU has it (checked at import), else slicing-by-8.
Accepts any contiguous buffer (bytes, bytearray, memoryview, mmap); the GIL is released for
inputs of 4 KB or more (about 1 us of work on the hardware path, worth letting other threads run).
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t
from kbroker._native.kb_crc32c cimport kb_crc32c_init, kb_crc32c_force_sw, kb_crc32c_update, kb_crc32c_have_hw

kb_crc32c_init()

cdef Py_ssize_t NOGIL_THRESHOLD = 4096


def crc32c(data, crc=0):
    """CRC-32C of the bytes-like ``data``, continuing from ``crc`` (0 for a fresh checksum)."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(int(crc) & 0xFFFFFFFF)
    cdef const unsigned char *p
    cdef size_t n
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        n = <size_t>view.len
        if n >= <size_t>NOGIL_THRESHOLD:
            with nogil:
                c = kb_crc32c_update(c, p, n)
        else:
            c = kb_crc32c_update(c, p, n)
    finally:
        PyBuffer_Release(&view)
    return c


def hardware():
    """True when the SSE4.2 path is in use."""
    return bool(kb_crc32c_have_hw)


def _force_software(bint force):
    """Tests only: pin the table path (True) or go back to runtime detection (False)."""
    kb_crc32c_force_sw(1 if force else 0)
