# Declarations of the shared C CRC-32C (kb_crc32c.h) for crc32c.pyx and batch.pyx.
from libc.stdint cimport uint32_t

cdef extern from "kb_crc32c.h" nogil:
    void kb_crc32c_init()
    void kb_crc32c_force_sw(int force_sw)
    uint32_t kb_crc32c_update(uint32_t crc, const unsigned char *p, size_t n)
    int kb_crc32c_have_hw
