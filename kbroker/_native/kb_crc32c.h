/* CRC-32C (Castagnoli) for kbroker's Cython kernels; included by crc32c.pyx and batch.pyx so
 * both use this one implementation (each extension gets its own static copy).
 *
 * Reflected polynomial 0x82F63B78, init/final xor 0xFFFFFFFF ("123456789" -> 0xE3069283).
 * kb_crc32c_update(crc, p, n) takes and returns the *finalised* value, so calls chain:
 * update(update(0, a), b) == update(0, a ++ b).
 *
 * Two paths, chosen once at runtime (kb_crc32c_init):
 *  - x86 with SSE4.2: the crc32 instruction, 8 bytes per step. One dependent chain is bound by
 *    the instruction's 3-cycle latency (4.9 GB/s measured on the 2-core EPYC of
 *    docs/performance.md); the CPU can start one per cycle, so inputs of 3 * 512 bytes or more
 *    run three independent chains over three adjacent blocks and join them with a "shift by L
 *    zero bytes" table (kb_crc32c_shift: the CRC is linear over GF(2), so shifting a state is
 *    four 256-entry lookups). Compiled with __attribute__((target("sse4.2"))) so the file builds
 *    without -msse4.2 and the rest of the module still runs on CPUs that lack it.
 *  - everything else: slicing-by-8, eight 256-entry tables (8 KB), ~1-2 bytes per cycle.
 */
#ifndef KB_CRC32C_H
#define KB_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KB_CRC32C_POLY 0x82F63B78u

static uint32_t kb_crc32c_table[8][256];
/* Block lengths of the three-chain path: LONG for the bulk, SHORT for what is left. */
#define KB_CRC32C_LONG 4096
#define KB_CRC32C_SHORT 512
/* kb_crc32c_shift_long[k][b]: the raw CRC state (b << 8k) advanced over KB_CRC32C_LONG zero bytes. */
static uint32_t kb_crc32c_shift_long[4][256];
static uint32_t kb_crc32c_shift_short[4][256];
static int kb_crc32c_have_hw = 0;
static int kb_crc32c_ready = 0;

static uint32_t kb_crc32c_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint32_t c = crc ^ 0xFFFFFFFFu;
    /* byte steps until p is 8-aligned so the 8-byte loads below are aligned */
    while (n && ((uintptr_t)p & 7)) {
        c = kb_crc32c_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = kb_crc32c_table[7][lo & 0xFF] ^ kb_crc32c_table[6][(lo >> 8) & 0xFF] ^
            kb_crc32c_table[5][(lo >> 16) & 0xFF] ^ kb_crc32c_table[4][lo >> 24] ^
            kb_crc32c_table[3][hi & 0xFF] ^ kb_crc32c_table[2][(hi >> 8) & 0xFF] ^
            kb_crc32c_table[1][(hi >> 16) & 0xFF] ^ kb_crc32c_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = kb_crc32c_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KB_CRC32C_X86 1
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t kb_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    uint64_t c = crc ^ 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c ^ 0xFFFFFFFFu;
#else
    uint32_t c = crc ^ 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 3)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    while (n >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c = _mm_crc32_u32(c, w);
        p += 4;
        n -= 4;
    }
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c ^ 0xFFFFFFFFu;
#endif
}
#endif

/* a * b mod P in the reflected bit order (bit 31 is x^0): the GF(2) product the CRC is built on. */
static uint32_t kb_crc32c_multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, prod = 0;
    while (m) {
        if (a & m)
            prod ^= b;
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ KB_CRC32C_POLY : b >> 1;
    }
    return prod;
}

/* Tables that advance a raw state over `len` zero bytes: state * x^(8 len) mod P, split per byte. */
static void kb_crc32c_shift_tables(uint32_t t[4][256], size_t len)
{
    uint32_t xpow = 1u << 31; /* x^0 */
    size_t i;
    int k;
    for (i = 0; i < len; i++)
        xpow = kb_crc32c_multmodp(xpow, 1u << 23); /* times x^8 */
    for (k = 0; k < 4; k++)
        for (i = 0; i < 256; i++)
            t[k][i] = kb_crc32c_multmodp(xpow, (uint32_t)i << (8 * k));
}

static inline uint32_t kb_crc32c_shift(uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
}

#if defined(KB_CRC32C_X86) && defined(__x86_64__)
/* Three chains over blocks [0, L), [L, 2L), [2L, 3L) of each 3L-byte round; the first continues the
 * running state, the other two start from 0, and state(A B C) = shift(shift(a, L) ^ b, L) ^ c. */
__attribute__((target("sse4.2")))
static uint64_t kb_crc32c_hw3_rounds(uint64_t c, const unsigned char **pp, size_t *np, size_t len,
                                     uint32_t t[4][256])
{
    const unsigned char *p = *pp;
    size_t n = *np;
    while (n >= 3 * len) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        const unsigned char *end = p + len;
        while (p < end) {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + len, 8);
            memcpy(&w2, p + 2 * len, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        }
        c = kb_crc32c_shift(t, (uint32_t)c) ^ (uint32_t)c1;
        c = kb_crc32c_shift(t, (uint32_t)c) ^ (uint32_t)c2;
        p += 2 * len;
        n -= 3 * len;
    }
    *pp = p;
    *np = n;
    return c;
}

__attribute__((target("sse4.2")))
static uint32_t kb_crc32c_hw3(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c;
    if (n < 3 * KB_CRC32C_SHORT)
        return kb_crc32c_hw(crc, p, n);
    c = crc ^ 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    c = kb_crc32c_hw3_rounds(c, &p, &n, KB_CRC32C_LONG, kb_crc32c_shift_long);
    c = kb_crc32c_hw3_rounds(c, &p, &n, KB_CRC32C_SHORT, kb_crc32c_shift_short);
    /* the tail (< 3 * SHORT bytes) on one chain; kb_crc32c_hw takes and returns finalised values */
    return kb_crc32c_hw((uint32_t)c ^ 0xFFFFFFFFu, p, n);
}
#else
#define kb_crc32c_hw3 kb_crc32c_hw
#endif

static void kb_crc32c_init(void)
{
    uint32_t i, k, c;
    if (kb_crc32c_ready)
        return;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ KB_CRC32C_POLY : c >> 1;
        kb_crc32c_table[0][i] = c;
    }
    /* table[k][i]: CRC of byte i followed by k zero bytes */
    for (i = 0; i < 256; i++)
        for (k = 1; k < 8; k++)
            kb_crc32c_table[k][i] = (kb_crc32c_table[k - 1][i] >> 8) ^
                                    kb_crc32c_table[0][kb_crc32c_table[k - 1][i] & 0xFF];
    kb_crc32c_shift_tables(kb_crc32c_shift_long, KB_CRC32C_LONG);
    kb_crc32c_shift_tables(kb_crc32c_shift_short, KB_CRC32C_SHORT);
#ifdef KB_CRC32C_X86
    __builtin_cpu_init();
    kb_crc32c_have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    kb_crc32c_ready = 1;
}

/* force_sw: 1 = always the table path (lets tests compare both paths on one machine) */
static inline void kb_crc32c_force_sw(int force_sw)
{
    kb_crc32c_init();
#ifdef KB_CRC32C_X86
    kb_crc32c_have_hw = force_sw ? 0 : (__builtin_cpu_supports("sse4.2") ? 1 : 0);
#else
    (void)force_sw;
#endif
}

static uint32_t kb_crc32c_update(uint32_t crc, const unsigned char *p, size_t n)
{
#ifdef KB_CRC32C_X86
    if (kb_crc32c_have_hw)
        return kb_crc32c_hw3(crc, p, n);
#endif
    return kb_crc32c_sw(crc, p, n);
}

#endif /* KB_CRC32C_H */
