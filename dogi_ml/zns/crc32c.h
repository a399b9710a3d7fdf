/* CRC32C (Castagnoli, reflected 0x82F63B78, the iSCSI / NVMe / ext4 checksum): the SSE4.2
 * instruction where the CPU has it, else slicing-by-8 tables. crc32c("123456789") = 0xE3069283. */
#ifndef DOGI_CRC32C_H
#define DOGI_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc32c_table[8][256];
static int crc32c_hw = -1;

static void crc32c_init(void)
{
    for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; ++n)
        for (int t = 1; t < 8; ++t)
            crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8) ^ crc32c_table[0][crc32c_table[t - 1][n] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    crc32c_hw = 0;
#endif
}

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t n)
{
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
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

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
