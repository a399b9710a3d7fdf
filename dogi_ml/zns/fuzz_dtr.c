/* fuzz_dtr.c: the .dtr loader (dtr_load.h) under libFuzzer, and a small checker for the tests.
 *
 * libFuzzer target (tests/test_dtr_fuzz.py builds and runs it):
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined fuzz_dtr.c
 * Each input is a whole file image. Besides the sanitizers' findings, the target aborts when the
 * loader breaks its own contract: a refusal without the one-line "PATH: problem -- fix" message,
 * or an accepted trace with no block write or a block outside [0, max_lba].
 *
 * Built with -DDTR_CHECK_MAIN (any C compiler), a program that loads each file named on its
 * command line and prints one line per file: "ok VERSION N HASH" (N block writes, HASH the
 * FNV-1a 64 of their LBAs as little-endian int64) or "error: MESSAGE" (the loader's line) --
 * what the tests compare with the Python loader (dogi_ml/traces/binfmt.py). */
#define DTR_NO_FILE_LOADER
#include "dtr_load.h"

#define FUZZ_PATH "fuzz.dtr"
#define FUZZ_MAX_WRITE_BLOCKS ((int64_t)1 << 22) /* keeps an input's stream under 32 MiB */

/* a copy of the image at a 64-byte boundary, as a mapped file is (libFuzzer's buffer is not) */
static unsigned char *aligned_copy(const uint8_t *data, size_t size)
{
    unsigned char *buf = aligned_alloc(DTR_ALIGN, (size / DTR_ALIGN + 1) * DTR_ALIGN);
    if (buf && size)
        memcpy(buf, data, size);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = aligned_copy(data, size);
    if (!buf)
        return 0;
    char msg[1024];
    uint32_t version = 0;
    stream_t s;
    int rc = dtr_parse(buf, size, FUZZ_PATH, FUZZ_MAX_WRITE_BLOCKS, &s, msg, sizeof msg, &version);
    if (rc == 0) {
        if (s.n < 1)
            abort();
        for (int64_t i = 0; i < s.n; ++i)
            if (s.writes[i] < 0)
                abort();
        free(s.writes);
    } else if (rc != DOGI_EXIT_BAD_INPUT || strncmp(msg, FUZZ_PATH ": ", strlen(FUZZ_PATH) + 2) ||
               !strstr(msg, " -- ")) {
        abort();
    }
    free(buf);
    return 0;
}

#ifdef DTR_CHECK_MAIN
int main(int argc, char **argv)
{
    for (int f = 1; f < argc; ++f) {
        FILE *fh = fopen(argv[f], "rb");
        if (!fh) {
            printf("error: cannot open %s\n", argv[f]);
            continue;
        }
        size_t cap = 1 << 16, size = 0, got;
        unsigned char *data = malloc(cap);
        while (data && (got = fread(data + size, 1, cap - size, fh)) > 0)
            if ((size += got) == cap)
                data = realloc(data, cap *= 2);
        fclose(fh);
        unsigned char *buf = data ? aligned_copy(data, size) : NULL;
        free(data);
        if (!buf) {
            printf("error: out of memory reading %s\n", argv[f]);
            continue;
        }
        char msg[1024];
        uint32_t version = 0;
        stream_t s;
        int rc = dtr_parse(buf, size, argv[f], INT64_MAX / 8, &s, msg, sizeof msg, &version);
        if (rc) {
            printf("error: %s\n", msg);
        } else {
            uint64_t h = 0xcbf29ce484222325ull;
            for (int64_t i = 0; i < s.n; ++i)
                for (int b = 0; b < 8; ++b)
                    h = (h ^ (((uint64_t)s.writes[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
            printf("ok %u %lld %016llx\n", version, (long long)s.n, (unsigned long long)h);
            free(s.writes);
        }
        free(buf);
    }
    return 0;
}
#endif
