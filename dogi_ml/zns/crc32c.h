/* CRC32C (Castagnoli, reflected 0x82F63B78, the iSCSI / NVMe / ext4 checksum): the SSE4.2
 * instruction where the CPU has it (checked at run time), else slicing-by-8 tables.
 * crc32c(0, "123456789", 9) = 0xE3069283 (RFC 3720's check value).
 *
 * The crc32 instruction has a latency of 3 cycles but issues every cycle, so one dependent chain
 * runs at a third of its speed: the hardware path runs three chains over three adjacent stretches
 * of CRC32C_STRETCH bytes and joins them by the linearity of CRC,
 *     reg(c, A || B) = shift_|B|(reg(c, A)) ^ reg(0, B),
 * where shift_n (appending n zero bytes to the register) is a linear map on 32 bits applied with
 * four 256-entry tables (Mark Adler's crc32c.c does the same with two stretch lengths). A 4 KiB
 * block's 4088 checksummed bytes are one round of 3 x 1360 plus one word. */
#ifndef DOGI_CRC32C_H
#define DOGI_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u
#define CRC32C_STRETCH 1360u /* bytes per chain per round (a multiple of 8) */

static uint32_t crc32c_table[8][256];
static uint32_t crc32c_shift_table[4][256]; /* shift by CRC32C_STRETCH zero bytes */
static int crc32c_hw = -1;

/* the raw register after n zero bytes: 8n steps of the bitwise update */
static uint32_t crc32c_zeros_slow(uint32_t c, size_t n)
{
    for (size_t k = 0; k < 8 * n; ++k)
        c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    return c;
}

static void crc32c_init(void)
{
    for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k)
            c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc32c_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; ++n)
        for (int t = 1; t < 8; ++t)
            crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][n] & 0xff];
    /* shift_n is linear: its image of each of the 32 register bits, then every byte value of
     * each register byte as the XOR of its bits' images */
    uint32_t bit[32];
    for (int b = 0; b < 32; ++b)
        bit[b] = crc32c_zeros_slow(1u << b, CRC32C_STRETCH);
    for (int k = 0; k < 4; ++k)
        for (uint32_t v = 0; v < 256; ++v) {
            uint32_t r = 0;
            for (int b = 0; b < 8; ++b)
                if (v >> b & 1)
                    r ^= bit[8 * k + b];
            crc32c_shift_table[k][v] = r;
        }
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    crc32c_hw = 0;
#endif
}

static inline uint32_t crc32c_shift(uint32_t c)
{
    return crc32c_shift_table[0][c & 0xff] ^ crc32c_shift_table[1][(c >> 8) & 0xff] ^
           crc32c_shift_table[2][(c >> 16) & 0xff] ^ crc32c_shift_table[3][c >> 24];
}

/* slicing-by-8: eight table lookups per 8 bytes */
static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    if (crc32c_hw < 0)
        crc32c_init();
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc32c_table[7][w & 0xff] ^ crc32c_table[6][(w >> 8) & 0xff] ^ crc32c_table[5][(w >> 16) & 0xff] ^
              crc32c_table[4][(w >> 24) & 0xff] ^ crc32c_table[3][(w >> 32) & 0xff] ^
              crc32c_table[2][(w >> 40) & 0xff] ^ crc32c_table[1][(w >> 48) & 0xff] ^ crc32c_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c0 = (uint32_t)~crc;
    while (n >= 3 * CRC32C_STRETCH) {
        uint64_t c1 = 0, c2 = 0;
        for (const unsigned char *end = p + CRC32C_STRETCH; p < end; p += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + CRC32C_STRETCH, 8);
            memcpy(&w2, p + 2 * CRC32C_STRETCH, 8);
            c0 = __builtin_ia32_crc32di(c0, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c0 = crc32c_shift((uint32_t)c0) ^ (uint32_t)c1;
        c0 = crc32c_shift((uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * CRC32C_STRETCH;
        n -= 3 * CRC32C_STRETCH;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = __builtin_ia32_crc32di(c0, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c0;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

/* 1 if crc32c() uses the SSE4.2 instruction on this CPU */
static inline int crc32c_uses_hw(void)
{
    if (crc32c_hw < 0)
        crc32c_init();
    return crc32c_hw;
}

static uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
    if (crc32c_hw < 0)
        crc32c_init();
#if defined(__x86_64__)
    if (crc32c_hw)
        return crc32c_sse42(crc, buf, n);
#endif
    return crc32c_sw(crc, buf, n);
}

#endif
