/* dtr_load.h: the dogi_ml binary trace (.dtr) loader of the ZNS replay harness (zns_replay.c
 * includes it after defining die() and xcalloc()). The format is written by
 * dogi_ml/traces/binfmt.py. */
#ifndef DTR_LOAD_H
#define DTR_LOAD_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* -- the trace -------------------------------------------------------------------------------- */
static const char *json_find_array(const char *json, const char *name, long long *offset, long long *count,
                                   char *dtype, size_t dtlen)
{
    const char *arrays = strstr(json, "\"arrays\"");
    if (!arrays)
        return "no \"arrays\" in the header";
    char key[64];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *p = strstr(arrays, key);
    if (!p)
        return "an array is missing";
    const char *open = strchr(p, '{'), *close = open ? strchr(open, '}') : NULL;
    if (!open || !close)
        return "malformed array entry";
    const char *c = strstr(open, "\"count\""), *o = strstr(open, "\"offset\""), *t = strstr(open, "\"dtype\"");
    if (!c || !o || !t || c > close || o > close || t > close)
        return "array entry lacks count/offset/dtype";
    if (sscanf(strchr(c, ':') + 1, " %lld", count) != 1 || sscanf(strchr(o, ':') + 1, " %lld", offset) != 1)
        return "bad count or offset";
    const char *q = strchr(strchr(t, ':'), '"');
    size_t i = 0;
    for (++q; *q && *q != '"' && i + 1 < dtlen; ++q)
        dtype[i++] = *q;
    dtype[i] = 0;
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t *writes; /* LBA of every user-written block (compacted to the capacity if needed) */
    int64_t n;
    int compacted;
} stream_t;

static stream_t load_trace(const char *path, int64_t capacity)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die("cannot open trace %s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    unsigned char prefix[16];
    if (st.st_size < 16 || pread(fd, prefix, 16, 0) != 16)
        die("%s: too short to be a dogi_ml binary trace (%lld bytes)", path, (long long)st.st_size);
    if (memcmp(prefix, "DOGITRC\0", 8))
        die("%s: not a dogi_ml binary trace (bad magic); convert it with python -m dogi_ml ingest", path);
    uint32_t version, hlen;
    memcpy(&version, prefix + 8, 4);
    memcpy(&hlen, prefix + 12, 4);
    if (version != 1)
        die("%s: binary trace version %u, this harness reads version 1", path, version);
    char *json = xcalloc(hlen + 1, 1);
    if (pread(fd, json, hlen, 16) != (ssize_t)hlen)
        die("%s: truncated header", path);
    long long data_start = (16 + (long long)hlen + 63) / 64 * 64;
    long long off[3], cnt[3];
    const char *names[3] = {"lba", "nblocks", "op"}, *want[3] = {"<i8", "<i4", "|u1"};
    for (int i = 0; i < 3; ++i) {
        char dt[16];
        const char *e = json_find_array(json, names[i], &off[i], &cnt[i], dt, sizeof dt);
        if (e)
            die("%s: bad header (%s: %s)", path, names[i], e);
        if (strcmp(dt, want[i]) && !(i == 2 && !strcmp(dt, "u1")))
            die("%s: array %s has dtype %s, expected %s", path, names[i], dt, want[i]);
        if (data_start + off[i] + cnt[i] * (i == 0 ? 8 : i == 1 ? 4 : 1) > st.st_size)
            die("%s: truncated file (array %s); re-run ingest", path, names[i]);
    }
    if (cnt[1] != cnt[0] || cnt[2] != cnt[0])
        die("%s: arrays of different lengths", path);
    free(json);
    unsigned char *map = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (map == MAP_FAILED)
        die("cannot map %s: %s", path, strerror(errno));
    close(fd);
    const int64_t *lba = (const int64_t *)(map + data_start + off[0]);
    const int32_t *nb = (const int32_t *)(map + data_start + off[1]);
    const uint8_t *op = map + data_start + off[2];
    int64_t n = 0, maxl = -1;
    for (long long i = 0; i < cnt[0]; ++i)
        if (op[i] == 1)
            n += nb[i];
    stream_t s = {xcalloc((size_t)n, sizeof(int64_t)), n, 0};
    int64_t k = 0;
    for (long long i = 0; i < cnt[0]; ++i)
        if (op[i] == 1)
            for (int32_t j = 0; j < nb[i]; ++j) {
                s.writes[k] = lba[i] + j;
                if (s.writes[k] > maxl)
                    maxl = s.writes[k];
                ++k;
            }
    if (map)
        munmap(map, (size_t)st.st_size);
    if (maxl >= capacity) {
        /* the simulator's compaction (np.unique's inverse): the rank of each LBA among the
         * distinct ones, order-preserving */
        int64_t *u = xcalloc((size_t)n, sizeof(int64_t));
        memcpy(u, s.writes, (size_t)n * sizeof(int64_t));
        qsort(u, (size_t)n, sizeof(int64_t), cmp_i64);
        int64_t m = 0;
        for (int64_t i = 0; i < n; ++i)
            if (i == 0 || u[i] != u[m - 1])
                u[m++] = u[i];
        if (m > capacity)
            die("the capacity of %lld blocks is smaller than the trace's write working set (%lld distinct blocks); "
                "raise --capacity (sim.capacity_blocks)",
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

#endif /* DTR_LOAD_H */
