/* dtr_load.h: the loader of dogi_ml's binary trace format (.dtr) for the ZNS replay harness
 * (zns_replay.c includes it) and for its libFuzzer target (fuzz_dtr.c).
 *
 * The format and its checks are the Python loader's (dogi_ml/traces/binfmt.py, which writes it):
 *
 *     0   8 bytes  magic "DOGITRC\0"
 *     8   uint32   format version (2; version 1 has no checksums and is read with a warning)
 *     12  uint32   header length H
 *     16  uint32   CRC32C of bytes [8, 16) and of the header JSON            (version 2 only)
 *     20  uint32   0                                                          (version 2 only)
 *     P   H bytes  header JSON (P = 24, or 16 in version 1), padded to 64 bytes; then the arrays
 *                  ts_us <i8, lba <i8, nblocks <i4, op |u1, volume <i4, one entry per request,
 *                  each 64-byte aligned right after the one before, little-endian
 *
 * Every field of the header and every entry of the arrays is checked before use: the header is
 * strict JSON with exactly the writer's fields, counts and offsets agree with each other and with
 * the file's size, each array's CRC32C matches the header's, every request covers 1 or more
 * blocks inside [0, max_lba], ops are read/write/trim, volumes index the header's list, and the
 * header's write counts and max_lba equal what the arrays hold. A failed check is one line naming
 * the file, the field or array (with the entry's index and value) and the fix, with the same text
 * as the Python loader's; the harness exits with DOGI_EXIT_BAD_INPUT (3).
 *
 * dtr_parse() works on a file image in memory and neither exits nor prints; load_trace() maps a
 * file, calls it and stops the program on bad input. Define DTR_NO_FILE_LOADER to leave the
 * latter out (the fuzz target). */
#ifndef DTR_LOAD_H
#define DTR_LOAD_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "exit_codes.h"

#define DTR_VERSION 2
#define DTR_ALIGN 64
#define DTR_NARRAYS 5
#define DTR_JSON_DEPTH 512 /* deeper nesting than any header has; bounds the parser's recursion */
/* the smallest request: 8 + 8 + 4 + 1 + 4 bytes of arrays; bounds any count by the file size */
#define DTR_REQUEST_BYTES 25
#define DTR_FIX                                                                                                    \
    "the file is damaged or was not written by dogi_ml: re-run `python -m dogi_ml ingest` on the source trace"

enum { DTR_TS_US, DTR_LBA, DTR_NBLOCKS, DTR_OP, DTR_VOLUME };
static const char *const dtr_array_name[DTR_NARRAYS] = {"ts_us", "lba", "nblocks", "op", "volume"};
static const char *const dtr_array_dtype[DTR_NARRAYS] = {"<i8", "<i8", "<i4", "|u1", "<i4"};
static const int64_t dtr_array_itemsize[DTR_NARRAYS] = {8, 8, 4, 1, 4};

typedef struct {
    int64_t *writes; /* LBA of every user-written block (compacted to the capacity if needed) */
    int64_t n;
    int compacted;
} stream_t;

/* what the header says, once checked */
typedef struct {
    uint32_t version;
    int64_t requests, write_requests, write_blocks, wss_blocks, max_lba, volumes, data_start;
    int64_t offset[DTR_NARRAYS], count[DTR_NARRAYS];
    uint32_t crc[DTR_NARRAYS];
} dtr_header;

typedef struct {
    const char *path;
    char *msg;
    size_t msglen;
} dtr_err;

/* formats "PATH: <what> -- <fix>" into e->msg; returns DOGI_EXIT_BAD_INPUT */
static int dtr_fail(const dtr_err *e, const char *fix, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(e->msg, e->msglen, "%s: ", e->path);
    if (n < 0 || (size_t)n >= e->msglen)
        return DOGI_EXIT_BAD_INPUT;
    va_start(ap, fmt);
    int m = vsnprintf(e->msg + n, e->msglen - (size_t)n, fmt, ap);
    va_end(ap);
    if (m >= 0 && (size_t)(n + m) < e->msglen)
        snprintf(e->msg + n + m, e->msglen - (size_t)(n + m), " -- %s", fix);
    return DOGI_EXIT_BAD_INPUT;
}

static uint32_t dtr_le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static int64_t dtr_aligned(int64_t n) { return (n + DTR_ALIGN - 1) / DTR_ALIGN * DTR_ALIGN; }

/* -- strict JSON (RFC 8259, as Python's json.loads reads UTF-8 bytes: no NaN/Infinity) ------- */
typedef struct {
    const unsigned char *p, *end;
    int depth;
} dtr_json;

static void dtr_ws(dtr_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        ++j->p;
}

static int dtr_hex4(const unsigned char *p)
{
    for (int i = 0; i < 4; ++i)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f') || (p[i] >= 'A' && p[i] <= 'F')))
            return 0;
    return 1;
}

/* a string at j->p; its raw bytes (escapes as written) are [*s, *s + *n). 0 if malformed */
static int dtr_string(dtr_json *j, const unsigned char **s, size_t *n)
{
    if (j->p >= j->end || *j->p != '"')
        return 0;
    const unsigned char *start = ++j->p;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p < 0x20)
            return 0; /* control characters must be escaped */
        if (*j->p == '\\') {
            if (j->end - j->p < 2)
                return 0;
            unsigned char c = j->p[1];
            if (c == 'u') {
                if (j->end - j->p < 6 || !dtr_hex4(j->p + 2))
                    return 0;
                j->p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", c) || !c)
                return 0;
            j->p += 2;
            continue;
        }
        ++j->p;
    }
    if (j->p >= j->end)
        return 0;
    if (s)
        *s = start;
    if (n)
        *n = (size_t)(j->p - start);
    ++j->p;
    return 1;
}

static int dtr_key_is(const unsigned char *s, size_t n, const char *key)
{
    return strlen(key) == n && !memcmp(s, key, n);
}

/* a number at j->p. *is_int: written as an integer (no fraction, no exponent) that fits int64 */
static int dtr_number(dtr_json *j, int *is_int, int64_t *value)
{
    const unsigned char *p = j->p;
    int neg = 0, fits = 1;
    uint64_t mag = 0, limit;
    if (p < j->end && *p == '-')
        neg = 1, ++p;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (p >= j->end || *p < '0' || *p > '9')
        return 0;
    if (*p == '0')
        ++p;
    else
        for (; p < j->end && *p >= '0' && *p <= '9'; ++p) {
            unsigned d = (unsigned)(*p - '0');
            if (mag > (limit - d) / 10)
                fits = 0;
            else
                mag = mag * 10 + d;
        }
    int integral = 1;
    if (p < j->end && *p == '.') {
        integral = 0;
        if (++p >= j->end || *p < '0' || *p > '9')
            return 0;
        while (p < j->end && *p >= '0' && *p <= '9')
            ++p;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        ++p;
        if (p < j->end && (*p == '+' || *p == '-'))
            ++p;
        if (p >= j->end || *p < '0' || *p > '9')
            return 0;
        while (p < j->end && *p >= '0' && *p <= '9')
            ++p;
    }
    j->p = p;
    *is_int = integral && fits;
    if (*is_int)
        *value = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return 1;
}

static int dtr_literal(dtr_json *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
        return 0;
    j->p += n;
    return 1;
}

/* any value, checked and skipped */
static int dtr_skip(dtr_json *j)
{
    int is_int;
    int64_t v;
    dtr_ws(j);
    if (j->p >= j->end)
        return 0;
    switch (*j->p) {
    case '"':
        return dtr_string(j, NULL, NULL);
    case 't':
        return dtr_literal(j, "true");
    case 'f':
        return dtr_literal(j, "false");
    case 'n':
        return dtr_literal(j, "null");
    case '{':
    case '[': {
        unsigned char close = *j->p == '{' ? '}' : ']';
        int object = close == '}';
        if (++j->depth > DTR_JSON_DEPTH)
            return 0;
        ++j->p;
        dtr_ws(j);
        if (j->p < j->end && *j->p == close) {
            ++j->p;
            --j->depth;
            return 1;
        }
        for (;;) {
            if (object) {
                dtr_ws(j);
                if (!dtr_string(j, NULL, NULL))
                    return 0;
                dtr_ws(j);
                if (j->p >= j->end || *j->p++ != ':')
                    return 0;
            }
            if (!dtr_skip(j))
                return 0;
            dtr_ws(j);
            if (j->p >= j->end)
                return 0;
            if (*j->p == ',') {
                ++j->p;
                continue;
            }
            if (*j->p++ != close)
                return 0;
            --j->depth;
            return 1;
        }
    }
    default:
        return dtr_number(j, &is_int, &v);
    }
}

/* object iteration: call dtr_obj_open, then dtr_obj_next until it returns 0 (end) or -1 (bad);
 * after a 1 the cursor is at the member's value, which the caller consumes */
static int dtr_obj_open(dtr_json *j)
{
    dtr_ws(j);
    if (j->p >= j->end || *j->p != '{')
        return 0;
    ++j->p;
    return 1;
}

static int dtr_obj_next(dtr_json *j, int first, const unsigned char **key, size_t *klen)
{
    dtr_ws(j);
    if (j->p >= j->end)
        return -1;
    if (*j->p == '}') {
        ++j->p;
        return 0;
    }
    if (!first) {
        if (*j->p != ',')
            return -1;
        ++j->p;
        dtr_ws(j);
    }
    if (!dtr_string(j, key, klen))
        return -1;
    dtr_ws(j);
    if (j->p >= j->end || *j->p != ':')
        return -1;
    ++j->p;
    dtr_ws(j);
    return 1;
}

/* well-formed UTF-8 as Python's strict decoder has it: no overlong forms, no surrogates, <= U+10FFFF */
static int dtr_utf8_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (n - i < len || p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (size_t k = 2; k < len; ++k)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* the header's fields, in the order they are checked */
enum { F_ARRAYS, F_CONTENT_HASH, F_MAX_LBA, F_META, F_NAME, F_REQUESTS, F_VOLUMES, F_WRITE_BLOCKS, F_WRITE_REQUESTS,
       F_WSS_BLOCKS, F_N };
static const char *const dtr_field[F_N] = {"arrays", "content_hash",   "max_lba",        "meta",      "name",
                                           "requests", "volumes",      "write_blocks",   "write_requests",
                                           "wss_blocks"};
enum { A_COUNT, A_CRC32C, A_DTYPE, A_OFFSET, A_N };
static const char *const dtr_afield[A_N] = {"count", "crc32c", "dtype", "offset"};

#define DTR_BAD_JSON(e) dtr_fail(e, DTR_FIX, "the header is not valid JSON")

/* the "arrays" object: entries checked for presence, type and duplicates; values into h */
static int dtr_parse_arrays(dtr_json *j, const dtr_err *e, dtr_header *h)
{
    int seen[DTR_NARRAYS] = {0};
    const unsigned char *key;
    size_t klen;
    if (!dtr_obj_open(j))
        return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header field \"arrays\" is not an object") : DTR_BAD_JSON(e);
    for (int first = 1, r; (r = dtr_obj_next(j, first, &key, &klen)); first = 0) {
        if (r < 0)
            return DTR_BAD_JSON(e);
        int a = -1;
        for (int i = 0; i < DTR_NARRAYS; ++i)
            if (dtr_key_is(key, klen, dtr_array_name[i]))
                a = i;
        if (a < 0) {
            if (!dtr_skip(j))
                return DTR_BAD_JSON(e);
            return dtr_fail(e, DTR_FIX, "unknown header array \"%.*s\"", (int)(klen > 64 ? 64 : klen), key);
        }
        if (seen[a]++)
            return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header array \"%s\" appears twice", dtr_array_name[a])
                               : DTR_BAD_JSON(e);
        int have[A_N] = {0};
        const unsigned char *akey;
        size_t aklen;
        if (!dtr_obj_open(j))
            return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header array \"%s\" is not an object", dtr_array_name[a])
                               : DTR_BAD_JSON(e);
        for (int afirst = 1, ar; (ar = dtr_obj_next(j, afirst, &akey, &aklen)); afirst = 0) {
            if (ar < 0)
                return DTR_BAD_JSON(e);
            int f = -1;
            for (int i = 0; i < A_N; ++i)
                if (dtr_key_is(akey, aklen, dtr_afield[i]))
                    f = i;
            if (f < 0 || (f == A_CRC32C && h->version < 2)) {
                if (!dtr_skip(j))
                    return DTR_BAD_JSON(e);
                return dtr_fail(e, DTR_FIX, "header array \"%s\" has an unknown field \"%.*s\"", dtr_array_name[a],
                                (int)(aklen > 64 ? 64 : aklen), akey);
            }
            if (have[f]++)
                return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header array \"%s\" repeats \"%s\"", dtr_array_name[a],
                                              dtr_afield[f])
                                   : DTR_BAD_JSON(e);
            if (f == A_DTYPE) {
                const unsigned char *s;
                size_t n;
                if (*j->p != '"')
                    return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header array \"%s\": dtype is not a string",
                                                  dtr_array_name[a])
                                       : DTR_BAD_JSON(e);
                if (!dtr_string(j, &s, &n))
                    return DTR_BAD_JSON(e);
                /* "u1" is what version 1's writer put for op */
                if (!dtr_key_is(s, n, dtr_array_dtype[a]) && !(a == DTR_OP && dtr_key_is(s, n, "u1")))
                    return dtr_fail(e, DTR_FIX, "array %s has dtype \"%.*s\", expected %s", dtr_array_name[a],
                                    (int)(n > 16 ? 16 : n), s, dtr_array_dtype[a]);
                continue;
            }
            int is_int = 0;
            int64_t v = 0;
            if (*j->p != '-' && (*j->p < '0' || *j->p > '9'))
                return dtr_skip(j) ? dtr_fail(e, DTR_FIX, "header array \"%s\": %s is not an integer",
                                              dtr_array_name[a], dtr_afield[f])
                                   : DTR_BAD_JSON(e);
            if (!dtr_number(j, &is_int, &v))
                return DTR_BAD_JSON(e);
            if (!is_int)
                return dtr_fail(e, DTR_FIX, "header array \"%s\": %s is not an integer", dtr_array_name[a],
                                dtr_afield[f]);
            if (f == A_COUNT)
                h->count[a] = v;
            else if (f == A_OFFSET)
                h->offset[a] = v;
            else if (v < 0 || v > 0xFFFFFFFFll)
                return dtr_fail(e, DTR_FIX, "header array \"%s\": crc32c = %lld is not a 32-bit value",
                                dtr_array_name[a], (long long)v);
            else
                h->crc[a] = (uint32_t)v;
        }
        for (int f = 0; f < A_N; ++f)
            if (!have[f] && !(f == A_CRC32C && h->version < 2))
                return dtr_fail(e, DTR_FIX, "header array \"%s\" lacks \"%s\"", dtr_array_name[a], dtr_afield[f]);
    }
    for (int a = 0; a < DTR_NARRAYS; ++a)
        if (!seen[a])
            return dtr_fail(e, DTR_FIX, "header array \"%s\" is missing", dtr_array_name[a]);
    return 0;
}

/* the header JSON, [p, p + n): every field present once, of its type; values into h */
static int dtr_parse_json(const unsigned char *p, size_t n, const dtr_err *e, dtr_header *h)
{
    if (!dtr_utf8_ok(p, n))
        return DTR_BAD_JSON(e);
    /* the whole text must be one JSON value before any field is looked at, as json.loads has it */
    dtr_json j = {p, p + n, 0};
    if (!dtr_skip(&j))
        return DTR_BAD_JSON(e);
    dtr_ws(&j);
    if (j.p != j.end)
        return DTR_BAD_JSON(e);
    j.p = p;
    j.depth = 0;
    if (!dtr_obj_open(&j))
        return dtr_fail(e, DTR_FIX, "the header is not a JSON object");
    int seen[F_N] = {0};
    int64_t ints[F_N] = {0};
    const unsigned char *key;
    size_t klen;
    for (int first = 1, r; (r = dtr_obj_next(&j, first, &key, &klen)); first = 0) {
        if (r < 0)
            return DTR_BAD_JSON(e);
        int f = -1;
        for (int i = 0; i < F_N; ++i)
            if (dtr_key_is(key, klen, dtr_field[i]))
                f = i;
        if (f < 0)
            return dtr_fail(e, DTR_FIX, "unknown header field \"%.*s\"", (int)(klen > 64 ? 64 : klen), key);
        if (seen[f]++)
            return dtr_fail(e, DTR_FIX, "header field \"%s\" appears twice", dtr_field[f]);
        unsigned char c = *j.p;
        int rc = 0;
        switch (f) {
        case F_ARRAYS:
            rc = dtr_parse_arrays(&j, e, h);
            if (rc)
                return rc;
            continue;
        case F_NAME:
            if (c != '"')
                return dtr_fail(e, DTR_FIX, "header field \"name\" is not a string");
            break;
        case F_CONTENT_HASH:
            if (c != '"' && c != 'n')
                return dtr_fail(e, DTR_FIX, "header field \"content_hash\" is not a string or null");
            break;
        case F_META:
            if (c != '{')
                return dtr_fail(e, DTR_FIX, "header field \"meta\" is not an object");
            break;
        case F_VOLUMES: {
            /* a list of strings, 1 or more */
            int64_t count = 0;
            if (c != '[')
                return dtr_fail(e, DTR_FIX, "header field \"volumes\" is not a list of strings");
            ++j.p;
            dtr_ws(&j);
            if (*j.p != ']')
                for (;;) {
                    dtr_ws(&j);
                    if (*j.p != '"')
                        return dtr_fail(e, DTR_FIX, "header field \"volumes\" is not a list of strings");
                    dtr_string(&j, NULL, NULL);
                    ++count;
                    dtr_ws(&j);
                    if (*j.p == ']')
                        break;
                    ++j.p; /* the ',' (the text is valid JSON) */
                }
            ++j.p;
            ints[f] = count;
            continue;
        }
        default: { /* the integer fields */
            int is_int = 0;
            if (c != '-' && (c < '0' || c > '9'))
                return dtr_fail(e, DTR_FIX, "header field \"%s\" is not an integer", dtr_field[f]);
            dtr_number(&j, &is_int, &ints[f]);
            if (!is_int)
                return dtr_fail(e, DTR_FIX, "header field \"%s\" is not an integer", dtr_field[f]);
            continue;
        }
        }
        dtr_skip(&j);
    }
    for (int f = 0; f < F_N; ++f)
        if (!seen[f])
            return dtr_fail(e, DTR_FIX, "header field \"%s\" is missing", dtr_field[f]);
    h->requests = ints[F_REQUESTS];
    h->write_requests = ints[F_WRITE_REQUESTS];
    h->write_blocks = ints[F_WRITE_BLOCKS];
    h->wss_blocks = ints[F_WSS_BLOCKS];
    h->max_lba = ints[F_MAX_LBA];
    h->volumes = ints[F_VOLUMES];
    return 0;
}

/* the prefix, the header and the layout they describe against the file's size; no array read */
static int dtr_parse_header(const unsigned char *buf, size_t size, const dtr_err *e, dtr_header *h)
{
    memset(h, 0, sizeof *h);
    if (size < 16)
        return dtr_fail(e, DTR_FIX, "too short to be a dogi_ml binary trace (%zu bytes)", size);
    if (memcmp(buf, "DOGITRC\0", 8))
        return dtr_fail(e, "convert text traces with `python -m dogi_ml ingest path=... format=...`",
                        "not a dogi_ml binary trace (bad magic)");
    h->version = dtr_le32(buf + 8);
    uint32_t hlen = dtr_le32(buf + 12);
    if (h->version != 1 && h->version != 2)
        return dtr_fail(e, "re-run `python -m dogi_ml ingest` on the source trace with this dogi_ml",
                        "binary trace version %u, this dogi_ml reads versions 1 and 2", h->version);
    size_t prefix = h->version == 1 ? 16 : 24;
    if (size < prefix)
        return dtr_fail(e, DTR_FIX, "too short to be a dogi_ml binary trace (%zu bytes)", size);
    if (hlen > size - prefix)
        return dtr_fail(e, DTR_FIX, "truncated header (%u bytes announced, %zu in the file)", hlen, size - prefix);
    if (h->version >= 2) {
        uint32_t stored = dtr_le32(buf + 16), got = crc32c(crc32c(0, buf + 8, 8), buf + prefix, hlen);
        if (got != stored)
            return dtr_fail(e, DTR_FIX, "the header fails its checksum (CRC32C 0x%08x, stored 0x%08x)", got, stored);
        if (dtr_le32(buf + 20))
            return dtr_fail(e, DTR_FIX, "reserved prefix bytes 20-23 are not zero");
    }
    int rc = dtr_parse_json(buf + prefix, hlen, e, h);
    if (rc)
        return rc;
    /* the header's counts, each against the others and the file's size */
    if (h->requests < 1)
        return dtr_fail(e, DTR_FIX, "header field requests = %lld, a trace holds at least 1 request",
                        (long long)h->requests);
    h->data_start = dtr_aligned((int64_t)prefix + hlen);
    if (h->requests > ((int64_t)size - h->data_start) / DTR_REQUEST_BYTES)
        return dtr_fail(e, DTR_FIX, "truncated file (%zu bytes, too few for the header's %lld requests)", size,
                        (long long)h->requests);
    if (h->write_requests < 0 || h->write_requests > h->requests)
        return dtr_fail(e, DTR_FIX, "header field write_requests = %lld is outside [0, requests = %lld]",
                        (long long)h->write_requests, (long long)h->requests);
    if (h->write_blocks < h->write_requests ||
        (h->write_requests <= INT64_MAX / INT32_MAX && h->write_blocks > h->write_requests * (int64_t)INT32_MAX))
        return dtr_fail(e, DTR_FIX, "header field write_blocks = %lld is outside [write_requests, %lld x 2147483647]",
                        (long long)h->write_blocks, (long long)h->write_requests);
    if (h->wss_blocks < (h->write_blocks > 0) || h->wss_blocks > h->write_blocks)
        return dtr_fail(e, DTR_FIX, "header field wss_blocks = %lld is outside [%d, write_blocks = %lld]",
                        (long long)h->wss_blocks, h->write_blocks > 0, (long long)h->write_blocks);
    if (h->max_lba < 0)
        return dtr_fail(e, DTR_FIX, "header field max_lba = %lld is negative", (long long)h->max_lba);
    if (h->volumes < 1)
        return dtr_fail(e, DTR_FIX, "header field volumes is empty, a trace names at least 1 volume");
    if (h->volumes > INT32_MAX)
        return dtr_fail(e, DTR_FIX, "header field volumes has %lld entries, more than an int32 index reaches",
                        (long long)h->volumes);
    int64_t expect = 0;
    for (int a = 0; a < DTR_NARRAYS; ++a) {
        if (h->count[a] != h->requests)
            return dtr_fail(e, DTR_FIX, "array %s holds %lld entries, the header's requests = %lld",
                            dtr_array_name[a], (long long)h->count[a], (long long)h->requests);
        if (h->offset[a] != expect)
            return dtr_fail(e, DTR_FIX, "array %s starts at offset %lld, the layout puts it at %lld",
                            dtr_array_name[a], (long long)h->offset[a], (long long)expect);
        expect = dtr_aligned(expect + h->count[a] * dtr_array_itemsize[a]);
    }
    if ((int64_t)size != h->data_start + expect)
        return dtr_fail(e, DTR_FIX, "%s file (%zu bytes, the header accounts for %lld)",
                        (int64_t)size < h->data_start + expect ? "truncated" : "oversized", size,
                        (long long)(h->data_start + expect));
    /* the padding after the header and after each array: zeros, as the writer leaves it */
    int64_t gap_start = (int64_t)prefix + hlen;
    for (int a = 0; a <= DTR_NARRAYS; ++a) {
        int64_t gap_end = a < DTR_NARRAYS ? h->data_start + h->offset[a] : (int64_t)size;
        for (int64_t i = gap_start; i < gap_end; ++i)
            if (buf[i])
                return dtr_fail(e, DTR_FIX, "padding byte at offset %lld is not zero", (long long)i);
        if (a < DTR_NARRAYS)
            gap_start = gap_end + h->count[a] * dtr_array_itemsize[a];
    }
    return 0;
}

/* the arrays against their checksums and the header; *out: the block-write stream (uncompacted).
 * max_write_blocks bounds the stream's allocation (the fuzz target's memory limit). */
static int dtr_parse(const unsigned char *buf, size_t size, const char *path, int64_t max_write_blocks,
                     stream_t *out, char *msg, size_t msglen, uint32_t *version)
{
    dtr_err e = {path, msg, msglen};
    dtr_header h;
    memset(out, 0, sizeof *out);
    msg[0] = 0;
    int rc = dtr_parse_header(buf, size, &e, &h);
    if (rc)
        return rc;
    *version = h.version;
    const unsigned char *base[DTR_NARRAYS];
    for (int a = 0; a < DTR_NARRAYS; ++a) {
        base[a] = buf + h.data_start + h.offset[a];
        if (h.version >= 2) {
            uint32_t got = crc32c(0, base[a], (size_t)(h.count[a] * dtr_array_itemsize[a]));
            if (got != h.crc[a])
                return dtr_fail(&e, DTR_FIX, "array %s fails its checksum (CRC32C 0x%08x, the header says 0x%08x)",
                                dtr_array_name[a], got, h.crc[a]);
        }
    }
    /* every offset is a multiple of 64 from a 64-aligned start, so the casts are aligned when buf is */
    const int64_t *lba = (const int64_t *)(const void *)base[DTR_LBA];
    const int32_t *nb = (const int32_t *)(const void *)base[DTR_NBLOCKS];
    const uint8_t *op = base[DTR_OP];
    const int32_t *vol = (const int32_t *)(const void *)base[DTR_VOLUME];
    int64_t n = h.requests;
    for (int64_t i = 0; i < n; ++i)
        if (nb[i] < 1)
            return dtr_fail(&e, DTR_FIX, "nblocks[%lld] = %d, a request covers at least 1 block", (long long)i,
                            nb[i]);
    for (int64_t i = 0; i < n; ++i)
        if (op[i] > 2)
            return dtr_fail(&e, DTR_FIX, "op[%lld] = %u is not a known operation (0 read, 1 write, 2 trim)",
                            (long long)i, op[i]);
    int64_t reach = -1, write_requests = 0, write_blocks = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (lba[i] < 0)
            return dtr_fail(&e, DTR_FIX, "lba[%lld] = %lld is negative", (long long)i, (long long)lba[i]);
        if (lba[i] > h.max_lba - (nb[i] - 1))
            return dtr_fail(&e, DTR_FIX, "lba[%lld] = %lld with nblocks %d ends beyond the header's max_lba = %lld",
                            (long long)i, (long long)lba[i], nb[i], (long long)h.max_lba);
        if (lba[i] + nb[i] - 1 > reach)
            reach = lba[i] + nb[i] - 1;
        if (op[i] == 1) /* the blocks saturate at INT64_MAX (more than any header says) */
            ++write_requests, write_blocks = nb[i] > INT64_MAX - write_blocks ? INT64_MAX : write_blocks + nb[i];
    }
    for (int64_t i = 0; i < n; ++i)
        if (vol[i] < 0 || vol[i] >= h.volumes)
            return dtr_fail(&e, DTR_FIX, "volume[%lld] = %d is outside [0, %lld) (the header's volumes)", (long long)i,
                            vol[i], (long long)h.volumes);
    if (reach != h.max_lba)
        return dtr_fail(&e, DTR_FIX, "the header's max_lba = %lld, but the requests reach block %lld",
                        (long long)h.max_lba, (long long)reach);
    if (write_requests != h.write_requests)
        return dtr_fail(&e, DTR_FIX, "the header's write_requests = %lld, but op marks %lld requests as writes",
                        (long long)h.write_requests, (long long)write_requests);
    if (write_blocks != h.write_blocks)
        return dtr_fail(&e, DTR_FIX, "the header's write_blocks = %lld, but the write requests cover %lld blocks",
                        (long long)h.write_blocks, (long long)write_blocks);
    if (write_blocks < 1)
        return dtr_fail(&e, "replay a trace with write requests", "the trace holds no write request: nothing to replay");
    if (write_blocks > max_write_blocks)
        return dtr_fail(&e, "replay a smaller trace", "%lld block writes, more than this loader's limit of %lld",
                        (long long)write_blocks, (long long)max_write_blocks);
    out->writes = malloc((size_t)write_blocks * sizeof(int64_t));
    if (!out->writes) {
        snprintf(msg, msglen, "out of memory for the %lld block writes of %s", (long long)write_blocks, path);
        return DOGI_EXIT_INTERNAL;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i)
        if (op[i] == 1)
            for (int32_t b = 0; b < nb[i]; ++b)
                out->writes[k++] = lba[i] + b;
    out->n = k;
    return 0;
}

#ifndef DTR_NO_FILE_LOADER
static int dtr_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "error: <msg>" on stderr and exit(code) */
static void dtr_exit(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

/* the block-write stream of the trace at path, its LBAs compacted below capacity if they reach it;
 * bad input stops the program with one line and DOGI_EXIT_BAD_INPUT */
static stream_t load_trace(const char *path, int64_t capacity)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        dtr_exit(errno == ENOENT || errno == ENOTDIR || errno == EACCES ? DOGI_EXIT_USAGE : DOGI_EXIT_INTERNAL,
                 "cannot open trace %s: %s -- check --trace", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st))
        dtr_exit(DOGI_EXIT_INTERNAL, "cannot stat trace %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        dtr_exit(DOGI_EXIT_USAGE, "%s is not a regular file -- give --trace a .dtr file", path);
    size_t size = (size_t)st.st_size;
    unsigned char *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (map == MAP_FAILED)
        dtr_exit(DOGI_EXIT_INTERNAL, "cannot map %s: %s", path, strerror(errno));
    close(fd);
    char msg[1024];
    uint32_t version = 0;
    stream_t s;
    int rc = dtr_parse(map ? map : (const unsigned char *)"", size, path, INT64_MAX / 8, &s, msg, sizeof msg,
                       &version);
    if (map)
        munmap(map, size);
    if (rc)
        dtr_exit(rc, "%s", msg);
    if (version < 2)
        fprintf(stderr,
                "warning: %s: binary trace version %u has no checksums, so damage to its arrays may go unseen -- "
                "re-run `python -m dogi_ml ingest` on the source trace to rewrite it as version %d\n",
                path, version, DTR_VERSION);
    int64_t n = s.n, maxl = -1;
    for (int64_t i = 0; i < n; ++i)
        if (s.writes[i] > maxl)
            maxl = s.writes[i];
    if (maxl >= capacity) {
        /* the simulator's compaction (np.unique's inverse): the rank of each LBA among the
         * distinct ones, order-preserving */
        int64_t *u = malloc((size_t)n * sizeof(int64_t));
        if (!u)
            dtr_exit(DOGI_EXIT_INTERNAL, "out of memory for the %lld block writes of %s", (long long)n, path);
        memcpy(u, s.writes, (size_t)n * sizeof(int64_t));
        qsort(u, (size_t)n, sizeof(int64_t), dtr_cmp_i64);
        int64_t m = 0;
        for (int64_t i = 0; i < n; ++i)
            if (i == 0 || u[i] != u[m - 1])
                u[m++] = u[i];
        if (m > capacity)
            dtr_exit(DOGI_EXIT_USAGE,
                     "the capacity of %lld blocks is smaller than the trace's write working set (%lld distinct "
                     "blocks); raise --capacity (sim.capacity_blocks)",
                     (long long)capacity, (long long)m);
        for (int64_t i = 0; i < n; ++i) {
            int64_t lo = 0, hi = m - 1, x = s.writes[i];
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (u[mid] < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            s.writes[i] = lo;
        }
        free(u);
        s.compacted = 1;
    }
    return s;
}
#endif /* DTR_NO_FILE_LOADER */

#endif /* DTR_LOAD_H */
