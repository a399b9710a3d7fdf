/* zns_replay: replay a dogi_ml binary trace (.dtr) onto a zoned device.
 *
 * Zones are the simulator's segments (segment size = the device's zone capacity), one open zone
 * per placement group, 4 KiB blocks written exactly at the write pointer. The host keeps the
 * simulator's tables (dogi_ml/sim/state.py) and runs its loop (dogi_ml/sim/_loop_template.py:
 * prefill, the free-segment trigger, one victim at a time or bursts to a high watermark, spills
 * to the roomiest group, ties to the lowest segment) with NoSep, SepGC or SepBIT placement
 * (dogi_ml/policies/) and greedy, cost-benefit or FIFO victims (dogi_ml/sim/victims.py), so the
 * user, GC and reset counts equal the simulator's. GC reads the victim zone, writes its valid
 * blocks to their destination zones and resets the victim.
 *
 * Every block starts with a header: magic, CRC32C (over the rest of the block: LBA, sequence
 * number, payload), LBA, write sequence number (1-based user write, prefill included). The
 * payload is a pseudo-random function of (LBA, sequence), so a verify pass checks location,
 * version, checksum and content of every live LBA.
 *
 * Durability (--durability): a write counts as acknowledged only once the device has confirmed
 * it durable and a record saying so is in the acknowledgement journal, a host file beside the
 * device (--journal; default PATH.journal for file:PATH). "flush" (the default) flushes the
 * device's volatile cache every --flush-every user writes and whenever a user write fills a zone,
 * then appends the count of writes issued so far to the journal and fsyncs it; it also flushes
 * before every zone reset, since a reset may erase the older, acknowledged version of a block
 * whose newer version is not durable yet. "fua" writes every block with RWF_DSYNC (a FUA write on
 * a zoned block device) and journals at the same points without a flush. "none" never asks the
 * device for durability: the journal then counts writes issued, not durable, and the result says
 * so. The reserved header word of every block carries the run's 16-bit tag and the journal's count
 * when the block was issued, so a journal that lost records, or blocks of another run, show.
 *
 * --recover reads the journal (how many writes were acknowledged, without the caller's help),
 * rebuilds the mapping by scanning every zone up to its write pointer (the highest sequence number
 * wins) and reports every LBA whose last acknowledged version is missing, the newest included;
 * a missing, torn or corrupt journal is reported, never ok. --drop-volatile models a power loss on
 * a drive without power-loss protection (file devices): blocks above each zone's durable write
 * pointer are discarded.
 *
 * Output: one JSON line on stdout; "progress ACKED TOTAL" lines on stderr (writes acknowledged,
 * at each journal record); errors as "error: ..." on stderr with the exit statuses of
 * exit_codes.h (2 usage, 1 device I/O, 4 verify failure, 5 recovery found lost writes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "exit_codes.h"
#include "zdev.h"

#define BLK ZDEV_BLOCK
#define HDR_MAGIC 0x315A4244u /* "DBZ1" */
#define PAYLOAD_WORDS ((int)((BLK - 32) / 8))
#define NC_WINDOW 16
/* --flush-every's default (user writes between acknowledgements; docs/deployment.md has its cost) */
#define DEFAULT_FLUSH_EVERY 1024

enum { SEG_FREE = 0, SEG_OPEN = 1, SEG_SEALED = 2 };
enum { ERR_OK = 0, ERR_NO_VICTIM, ERR_NO_GAIN, ERR_OUT_OF_SEGMENTS, ERR_LBA_RANGE, ERR_BAD_GROUP, ERR_BAD_VICTIM,
       ERR_GC_STUCK, ERR_IO };

struct blk_hdr {
    uint32_t magic;
    uint32_t crc; /* CRC32C of bytes [8, 4096) */
    uint64_t lba;
    uint64_t seq;
    uint64_t reserved;
};

/* -- errors --------------------------------------------------------------------------------- */
__attribute__((noreturn)) static void vdie(int status, const char *fmt, va_list ap)
{
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(status);
}

/* a usage error: arguments, or a configuration the device cannot run (exit status 2) */
__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(DOGI_EXIT_USAGE, fmt, ap);
    va_end(ap);
}

/* any other failure, with its exit status (exit_codes.h) */
__attribute__((noreturn, format(printf, 2, 3))) static void die_status(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(status, fmt, ap);
    va_end(ap);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die_status(DOGI_EXIT_INTERNAL, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

static void *aligned_buf(size_t blocks)
{
    void *p = NULL;
    if (posix_memalign(&p, BLK, (blocks ? blocks : 1) * BLK))
        die_status(DOGI_EXIT_INTERNAL, "out of memory for a %zu-block I/O buffer", blocks);
    memset(p, 0, (blocks ? blocks : 1) * BLK);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* -- profile (a build with -DZNS_PROF: where a user write's time goes, in the JSON) ------- */
/* gc_* are the parts of "gc": victim choice, its read, placing + staging the survivors, their
 * writes, the zone reset */
enum { PROF_MAP, PROF_PAYLOAD, PROF_CRC, PROF_WRITE, PROF_GC, PROF_PROGRESS, PROF_LOOP, PROF_GC_SELECT, PROF_GC_READ,
       PROF_GC_COPY, PROF_GC_WRITE, PROF_GC_RESET, PROF_N };
#ifdef ZNS_PROF
static const char *prof_name[PROF_N] = {"mapping", "payload",   "crc",     "device_write", "gc",      "progress",
                                        "loop",    "gc_select", "gc_read", "gc_copy",      "gc_write", "gc_reset"};
static uint64_t prof_ns[PROF_N];
static inline uint64_t prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define PROF_START(t) uint64_t t = prof_now()
#define PROF_SKIP(t) (t) = prof_now()
#define PROF_LAP(k, t)                                                                                             \
    do {                                                                                                           \
        uint64_t now_ = prof_now();                                                                                \
        prof_ns[k] += now_ - (t);                                                                                  \
        (t) = now_;                                                                                                \
    } while (0)
#else
#define PROF_START(t) (void)0
#define PROF_SKIP(t) (void)0
#define PROF_LAP(k, t) (void)0
#endif

/* -- the trace: load_trace() and stream_t ------------------------------------------------ */
#include "dtr_load.h"

/* -- the simulator state (dogi_ml/sim/state.py) ----------------------------------------------- */
typedef struct {
    int64_t staged_zone, staged_off, staged_n;
    unsigned char *buf;
} stage_t;

typedef struct sim sim_t;
struct sim {
    int64_t cap, nseg, seg_blocks, ngroups, gc_free, gc_high;
    int32_t *l2p, *p2l, *seg_valid, *seg_wp, *seg_group, *free_stack, *open_seg;
    int64_t *lba_time, *seg_open_time, *seg_seal_time, *group_user, *group_gc, *group_reclaimed;
    int8_t *seg_state;
    int64_t nfree, now, user, gc, reclaimed, invalid, spills, bursts, err_arg;
    /* policy */
    int (*place_user)(sim_t *, int64_t lba, int64_t now);
    int (*place_gc)(sim_t *, int64_t lba, int64_t victim, int64_t now);
    void (*on_reclaim)(sim_t *, int64_t victim, int64_t now);
    int64_t (*select_victim)(sim_t *, int64_t now);
    /* SepBIT's scalars (policies/sepbit.py) */
    int64_t window_sum, lifespan_sum, lifespans, fifo, fifo_len, distinct, next_created, opening_created, tracked;
    int64_t *created;
    /* device */
    zdev *dev;
    unsigned char *ubuf, *vbuf;
    stage_t *stage;
    int64_t gc_passes, verify_every, verify_passes, verify_failures;
    /* durability: ZDEV_DUR_*, the journal's count (writes acknowledged), the device's block
     * count at the last flush, the run's tag in every block's reserved word */
    int durability;
    int64_t flush_every, acked, zone_fill_commits, reset_flushes;
    uint64_t written_at_flush, tag;
    /* zones GC freed whose reset waits for the next flush (flush mode), and their flags */
    int32_t *pending_list;
    int64_t npending;
    uint8_t *pending;
};

static sim_t *sim_new(int64_t cap, int64_t nseg, int64_t seg_blocks, int64_t ngroups, int64_t gc_free, int64_t gc_high)
{
    sim_t *s = xcalloc(1, sizeof *s);
    s->cap = cap;
    s->nseg = nseg;
    s->seg_blocks = seg_blocks;
    s->ngroups = ngroups;
    s->gc_free = gc_free;
    s->gc_high = gc_high > gc_free ? gc_high : gc_free;
    s->l2p = xcalloc((size_t)cap, 4);
    s->p2l = xcalloc((size_t)(nseg * seg_blocks), 4);
    s->lba_time = xcalloc((size_t)cap, 8);
    for (int64_t i = 0; i < cap; ++i)
        s->l2p[i] = -1, s->lba_time[i] = -1;
    for (int64_t i = 0; i < nseg * seg_blocks; ++i)
        s->p2l[i] = -1;
    s->seg_valid = xcalloc((size_t)nseg, 4);
    s->seg_wp = xcalloc((size_t)nseg, 4);
    s->seg_group = xcalloc((size_t)nseg, 4);
    s->free_stack = xcalloc((size_t)nseg, 4);
    s->seg_state = xcalloc((size_t)nseg, 1);
    s->seg_open_time = xcalloc((size_t)nseg, 8);
    s->seg_seal_time = xcalloc((size_t)nseg, 8);
    s->created = xcalloc((size_t)nseg, 8);
    s->pending_list = xcalloc((size_t)nseg, 4);
    s->pending = xcalloc((size_t)nseg, 1);
    for (int64_t i = 0; i < nseg; ++i) {
        s->seg_group[i] = -1;
        s->free_stack[i] = (int32_t)(nseg - 1 - i); /* pop order: segment 0 first */
    }
    s->nfree = nseg;
    s->open_seg = xcalloc((size_t)ngroups, 4);
    for (int64_t g = 0; g < ngroups; ++g)
        s->open_seg[g] = -1;
    s->group_user = xcalloc((size_t)ngroups, 8);
    s->group_gc = xcalloc((size_t)ngroups, 8);
    s->group_reclaimed = xcalloc((size_t)ngroups, 8);
    s->window_sum = -1;
    s->tracked = -1;
    return s;
}

/* -- block contents ----------------------------------------------------------------------- */
/* The payload's word i is splitmix64's output number i + 1 from the state x0 = lba * K ^ seq,
 * mix(x0 + (i + 1) * golden): the words are independent, so AVX2 computes four at a time (64-bit
 * multiplies from 32-bit ones); both paths give the same bytes (tests/test_zns_io.py). */
#define SM_GOLDEN 0x9E3779B97F4A7C15ull
#define SM_M1 0xBF58476D1CE4E5B9ull
#define SM_M2 0x94D049BB133111EBull
#define SM_KEY 0xD6E8FEB86659FD93ull

static inline uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += SM_GOLDEN);
    z = (z ^ (z >> 30)) * SM_M1;
    z = (z ^ (z >> 27)) * SM_M2;
    return z ^ (z >> 31);
}

static void fill_payload_scalar(uint64_t *w, uint64_t lba, uint64_t seq)
{
    uint64_t x = lba * SM_KEY ^ seq;
    for (int i = 0; i < PAYLOAD_WORDS; ++i)
        w[i] = splitmix(&x);
}

#if defined(__x86_64__)
#include <immintrin.h>
/* the low 64 bits of a * b per lane: lo(a) * lo(b) + ((hi(a) * lo(b) + lo(a) * hi(b)) << 32) */
__attribute__((target("avx2"))) static inline __m256i mul64_avx2(__m256i a, __m256i b)
{
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                     _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) static void fill_payload_avx2(uint64_t *w, uint64_t lba, uint64_t seq)
{
    const uint64_t x = lba * SM_KEY ^ seq, g = SM_GOLDEN;
    __m256i v = _mm256_set_epi64x((long long)(x + 4 * g), (long long)(x + 3 * g), (long long)(x + 2 * g),
                                  (long long)(x + g));
    const __m256i step = _mm256_set1_epi64x((long long)(4 * g));
    const __m256i m1 = _mm256_set1_epi64x((long long)SM_M1), m2 = _mm256_set1_epi64x((long long)SM_M2);
    int i = 0;
    for (; i + 4 <= PAYLOAD_WORDS; i += 4) {
        __m256i z = v;
        v = _mm256_add_epi64(v, step);
        z = mul64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), m1);
        z = mul64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), m2);
        _mm256_storeu_si256((__m256i *)(void *)(w + i), _mm256_xor_si256(z, _mm256_srli_epi64(z, 31)));
    }
    for (uint64_t xi = x + (uint64_t)i * g; i < PAYLOAD_WORDS; ++i) /* a tail if PAYLOAD_WORDS % 4 */
        w[i] = splitmix(&xi);
}
#endif

static int payload_simd = -1; /* 1: AVX2; DOGI_ZNS_SCALAR=1 in the environment forces the scalar paths */

static void select_kernels(void)
{
    const char *env = getenv("DOGI_ZNS_SCALAR");
    int scalar = env && strcmp(env, "0");
    crc32c_uses_hw(); /* builds the tables and sets crc32c_hw (-1 = not built yet): the override below must come after */
    if (scalar)
        crc32c_hw = 0;
    payload_simd = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    payload_simd = !scalar && __builtin_cpu_supports("avx2");
#endif
}

static void fill_payload(uint64_t *w, uint64_t lba, uint64_t seq)
{
#if defined(__x86_64__)
    if (payload_simd) {
        fill_payload_avx2(w, lba, seq);
        return;
    }
#endif
    fill_payload_scalar(w, lba, seq);
}

/* the reserved header word: the run's 16-bit tag above the journal's count at the write's issue */
#define STAMP_TAG(x) ((x) >> 48)
#define STAMP_ACKED(x) ((x) & ((UINT64_C(1) << 48) - 1))

static void make_block(unsigned char *b, uint64_t lba, uint64_t seq, uint64_t stamp)
{
    struct blk_hdr *h = (struct blk_hdr *)b;
    h->magic = HDR_MAGIC;
    h->lba = lba;
    h->seq = seq;
    h->reserved = stamp;
    PROF_START(t0);
    fill_payload((uint64_t *)(b + 32), lba, seq);
    PROF_LAP(PROF_PAYLOAD, t0);
    h->crc = crc32c(0, b + 8, BLK - 8);
    PROF_LAP(PROF_CRC, t0);
}

/* 0 ok, 1 wrong block (lost: other LBA or version), 2 corrupt (checksum or content) */
static int check_block(const unsigned char *b, uint64_t lba, uint64_t seq)
{
    const struct blk_hdr *h = (const struct blk_hdr *)b;
    if (h->magic != HDR_MAGIC)
        return 1;
    if (crc32c(0, b + 8, BLK - 8) != h->crc)
        return 2;
    if (h->lba != lba || h->seq != seq)
        return 1;
    uint64_t w[PAYLOAD_WORDS];
    fill_payload(w, lba, seq);
    return memcmp(w, b + 32, sizeof w) ? 2 : 0;
}

/* -- engine building blocks (dogi_ml/sim/kernels.py) --------------------------------------- */
static int sim_fail(sim_t *s, int code, int64_t arg)
{
    s->err_arg = arg;
    return code;
}

static inline void invalidate(sim_t *s, int64_t phys)
{
    s->p2l[phys] = -1;
    s->seg_valid[phys / s->seg_blocks] -= 1;
    s->invalid += 1;
}

static void flush_for_reset(sim_t *s);

static int open_new_segment(sim_t *s, int64_t g, int64_t now)
{
    int32_t old = s->open_seg[g];
    if (old >= 0) {
        s->seg_state[old] = SEG_SEALED;
        s->seg_seal_time[old] = now;
    }
    if (s->nfree == 0) {
        s->open_seg[g] = -1;
        return 0;
    }
    int32_t seg = s->free_stack[--s->nfree];
    if (s->pending[seg])
        flush_for_reset(s); /* a zone freed by GC is reused before the next flush: flush now */
    s->seg_state[seg] = SEG_OPEN;
    s->seg_group[seg] = (int32_t)g;
    s->seg_wp[seg] = 0;
    s->seg_valid[seg] = 0;
    s->seg_open_time[seg] = now;
    s->open_seg[g] = seg;
    return 1;
}

/* the host side of an append; the physical block, -1 if out of segments */
static int64_t append(sim_t *s, int64_t g, int64_t lba, int64_t now)
{
    int32_t seg = s->open_seg[g];
    if (seg < 0 || s->seg_wp[seg] == s->seg_blocks) {
        if (!open_new_segment(s, g, now))
            return -1;
        seg = s->open_seg[g];
    }
    int64_t phys = (int64_t)seg * s->seg_blocks + s->seg_wp[seg];
    s->seg_wp[seg] += 1;
    s->seg_valid[seg] += 1;
    s->p2l[phys] = (int32_t)lba;
    s->l2p[lba] = (int32_t)phys;
    return phys;
}

static int any_sealed_garbage(sim_t *s)
{
    for (int64_t seg = 0; seg < s->nseg; ++seg)
        if (s->seg_state[seg] == SEG_SEALED && s->seg_valid[seg] < s->seg_blocks)
            return 1;
    return 0;
}

static int64_t roomiest_group(sim_t *s)
{
    int64_t best = -1, best_room = 0;
    for (int64_t g = 0; g < s->ngroups; ++g) {
        int32_t seg = s->open_seg[g];
        if (seg >= 0 && s->seg_blocks - s->seg_wp[seg] > best_room) {
            best_room = s->seg_blocks - s->seg_wp[seg];
            best = g;
        }
    }
    return best;
}

/* -- placement (dogi_ml/policies/{nosep,sepgc,sepbit}.py) ----------------------------------- */
static int nosep_user(sim_t *s, int64_t lba, int64_t now) { (void)s, (void)lba, (void)now; return 0; }
static int nosep_gc(sim_t *s, int64_t lba, int64_t v, int64_t now) { (void)s, (void)lba, (void)v, (void)now; return 0; }
static int sepgc_gc(sim_t *s, int64_t lba, int64_t v, int64_t now)
{
    (void)lba, (void)v, (void)now;
    return (int)(s->ngroups - 1);
}
static void no_reclaim(sim_t *s, int64_t v, int64_t now) { (void)s, (void)v, (void)now; }

static int64_t sepbit_fifo_cap(sim_t *s, int rewrite)
{
    int64_t n = s->distinct - (rewrite ? 1 : 0);
    for (int64_t g = 0; g < s->ngroups; ++g) {
        int32_t seg = s->open_seg[g];
        if (seg >= 0 && s->seg_wp[seg] < s->seg_blocks)
            n += s->seg_wp[seg] - s->seg_valid[seg];
    }
    return n;
}

static int sepbit_user(sim_t *s, int64_t lba, int64_t now)
{
    if (s->fifo) {
        int32_t seg0 = s->open_seg[0];
        if (seg0 >= 0 && seg0 != s->tracked) {
            s->created[seg0] = s->opening_created;
            s->tracked = seg0;
        }
    }
    int64_t last = s->lba_time[lba];
    int rewrite = last >= 0;
    int64_t v = now - last, ws = s->window_sum;
    int is_short = rewrite && (ws < 0 || NC_WINDOW * v < ws);
    if (s->fifo) {
        int64_t size = s->fifo_len;
        is_short = is_short && v < size;
        int64_t cap = sepbit_fifo_cap(s, rewrite);
        size += 1;
        if (size > cap || (ws >= 0 && NC_WINDOW * size > ws)) {
            size -= 1;
            if (ws >= 0 && NC_WINDOW * size > ws)
                size -= 1;
        }
        s->fifo_len = size;
        if (!rewrite)
            s->distinct += 1;
    }
    if (!is_short)
        return 1;
    if (s->fifo) {
        int32_t seg = s->open_seg[0];
        int64_t wp_after;
        if (seg < 0 || s->seg_wp[seg] == s->seg_blocks) {
            s->opening_created = s->next_created;
            wp_after = 1;
        } else
            wp_after = s->seg_wp[seg] + 1;
        if (wp_after == s->seg_blocks)
            s->next_created = now + 1;
    }
    return 0;
}

static int sepbit_gc(sim_t *s, int64_t lba, int64_t victim, int64_t now)
{
    if (s->seg_group[victim] == 0)
        return 2;
    int64_t ws = s->window_sum;
    if (ws < 0)
        return 3;
    int64_t g = now - s->lba_time[lba] - s->fifo;
    if (NC_WINDOW * g < 4 * ws)
        return 3;
    if (g < ws)
        return 4;
    return 5;
}

static void sepbit_reclaim(sim_t *s, int64_t victim, int64_t now)
{
    if (s->seg_group[victim] == 0) {
        int64_t created = s->fifo ? s->created[victim] : s->seg_open_time[victim];
        s->lifespans += 1;
        s->lifespan_sum += now - created;
        if (s->lifespans == NC_WINDOW) {
            s->window_sum = s->lifespan_sum;
            s->lifespans = 0;
            s->lifespan_sum = 0;
        }
    }
}

/* -- victims (dogi_ml/sim/victims.py; ties to the lowest segment) ---------------------------- */
static int64_t v_greedy(sim_t *s, int64_t now)
{
    (void)now;
    int64_t best = -1, best_valid = (int64_t)1 << 62;
    for (int64_t seg = 0; seg < s->nseg; ++seg)
        if (s->seg_state[seg] == SEG_SEALED && s->seg_valid[seg] < best_valid) {
            best_valid = s->seg_valid[seg];
            best = seg;
        }
    return best;
}

static int64_t v_cost_benefit(sim_t *s, int64_t now)
{
    int64_t best = -1;
    double best_num = -1.0, best_den = 1.0;
    for (int64_t seg = 0; seg < s->nseg; ++seg)
        if (s->seg_state[seg] == SEG_SEALED) {
            int64_t v = s->seg_valid[seg];
            double num = (double)((s->seg_blocks - v) * (now - s->seg_seal_time[seg] + 1));
            double den = (double)(s->seg_blocks + v);
            if (num * best_den > best_num * den) {
                best_num = num;
                best_den = den;
                best = seg;
            }
        }
    return best;
}

static int64_t v_cost_benefit_sepbit(sim_t *s, int64_t now)
{
    int64_t best = -1;
    double best_num = -1.0, best_den = 1.0;
    for (int64_t seg = 0; seg < s->nseg; ++seg)
        if (s->seg_state[seg] == SEG_SEALED) {
            int64_t v = s->seg_valid[seg];
            if (v == 0)
                return seg;
            double num = (double)((s->seg_blocks - v) * (now - s->seg_seal_time[seg] + 1));
            double den = (double)v;
            if (num * best_den > best_num * den) {
                best_num = num;
                best_den = den;
                best = seg;
            }
        }
    return best;
}

static int64_t v_fifo(sim_t *s, int64_t now)
{
    (void)now;
    int64_t best = -1, best_time = (int64_t)1 << 62;
    for (int64_t seg = 0; seg < s->nseg; ++seg)
        if (s->seg_state[seg] == SEG_SEALED && s->seg_seal_time[seg] < best_time) {
            best_time = s->seg_seal_time[seg];
            best = seg;
        }
    return best;
}

/* -- device I/O ----------------------------------------------------------------------------- */
static void io_die(sim_t *s)
{
    die_status(DOGI_EXIT_INTERNAL, "%s (%s device %s)", s->dev->err, zdev_kind_name(s->dev), s->dev->path);
}

/* -- the acknowledgement journal ------------------------------------------------------------ */
/* A host file of 32-byte records, each with its own CRC32C: HEADER (writes the run will issue,
 * prefill included; the capacity; the run's tag), CONFIG (--flush-every; a CRC32C of the written
 * LBA stream; durability and prefill), then one COMMIT per acknowledgement (the count of writes
 * acknowledged: every write up to it is durable) and END at a finished run. Appended with
 * pwrite and fdatasync'd before the count is reported anywhere. */
#define J_MAGIC 0x314A5A44u /* "DZJ1" */
enum { J_HEADER = 1, J_CONFIG = 2, J_COMMIT = 3, J_END = 4 };
struct jrec {
    uint32_t magic, kind;
    uint64_t a, b;
    uint32_t c, crc; /* CRC32C of the 28 bytes before it */
};
_Static_assert(sizeof(struct jrec) == 32, "journal records are 32 bytes");

static const char *dur_name(int d) { return d == ZDEV_DUR_FUA ? "fua" : d == ZDEV_DUR_FLUSH ? "flush" : "none"; }

static int journal_fd = -1;
static int64_t journal_records;
static double durability_s; /* wall time inside device flushes, zone-state syncs and journal syncs */
static const char *journal_path;

static void journal_write(int kind, uint64_t a, uint64_t b, uint32_t c, int sync)
{
    struct jrec r = {J_MAGIC, (uint32_t)kind, a, b, c, 0};
    r.crc = crc32c(0, &r, offsetof(struct jrec, crc));
    if (pwrite(journal_fd, &r, sizeof r, (off_t)(journal_records * (int64_t)sizeof r)) != (ssize_t)sizeof r)
        die_status(DOGI_EXIT_INTERNAL, "cannot append to the acknowledgement journal %s: %s", journal_path,
                   strerror(errno));
    if (sync) {
        double t0 = now_s();
        if (fdatasync(journal_fd))
            die_status(DOGI_EXIT_INTERNAL, "cannot sync the acknowledgement journal %s: %s", journal_path,
                       strerror(errno));
        durability_s += now_s() - t0;
    }
    journal_records++;
}

/* a fresh journal (its directory entry synced too): the run's identity before any write */
static void journal_create(const char *path, uint64_t total, uint64_t capacity, uint32_t tag, uint64_t flush_every,
                           uint32_t digest, int durability, int prefill)
{
    journal_path = path;
    journal_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (journal_fd < 0)
        die_status(DOGI_EXIT_INTERNAL, "cannot create the acknowledgement journal %s: %s; pass --journal=PATH",
                   path, strerror(errno));
    journal_records = 0;
    journal_write(J_HEADER, total, capacity, tag, 0);
    journal_write(J_CONFIG, flush_every, digest, (uint32_t)durability | (uint32_t)prefill << 8, 1);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

typedef struct {
    const char *status; /* ok, missing, truncated, corrupt */
    char detail[256];
    int64_t acked, total, capacity, flush_every, records;
    uint32_t tag, digest;
    int durability, prefill, finished, have_header;
} journal_t;

/* read a journal: the last intact count, and what is wrong with it if anything */
static journal_t journal_read(const char *path)
{
    journal_t j = {"ok", "", 0, 0, 0, 0, 0, 0, 0, ZDEV_DUR_NONE, 0, 0, 0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        j.status = "missing";
        snprintf(j.detail, sizeof j.detail, "cannot open it: %s", strerror(errno));
        return j;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        j.status = "missing";
        snprintf(j.detail, sizeof j.detail, "cannot stat it: %s", strerror(errno));
        return j;
    }
    int64_t n = (int64_t)st.st_size / (int64_t)sizeof(struct jrec);
    for (int64_t i = 0; i < n; ++i) {
        struct jrec r;
        if (pread(fd, &r, sizeof r, (off_t)(i * (int64_t)sizeof r)) != (ssize_t)sizeof r) {
            j.status = "truncated";
            snprintf(j.detail, sizeof j.detail, "record %lld cannot be read", (long long)i);
            break;
        }
        int intact = r.magic == J_MAGIC && r.crc == crc32c(0, &r, offsetof(struct jrec, crc));
        int want_kind = i == 0 ? J_HEADER : i == 1 ? J_CONFIG : 0;
        if (!intact || (want_kind && (int)r.kind != want_kind) || (!want_kind && r.kind != J_COMMIT && r.kind != J_END) ||
            ((r.kind == J_COMMIT || r.kind == J_END) && ((int64_t)r.a < j.acked || (int64_t)r.a > j.total)) ||
            j.finished) {
            /* a torn last record is what a crash during an append leaves; anything else is damage */
            j.status = i == n - 1 && (int64_t)st.st_size % (int64_t)sizeof(struct jrec) == 0 ? "truncated" : "corrupt";
            snprintf(j.detail, sizeof j.detail, "record %lld of %lld (byte %lld) is %s", (long long)i, (long long)n,
                     (long long)(i * (int64_t)sizeof r),
                     !intact ? "damaged (magic or checksum)" : j.finished ? "after the run's end record"
                                                                          : "out of order");
            break;
        }
        j.records = i + 1;
        if (r.kind == J_HEADER) {
            j.have_header = 1;
            j.total = (int64_t)r.a;
            j.capacity = (int64_t)r.b;
            j.tag = r.c;
        } else if (r.kind == J_CONFIG) {
            j.flush_every = (int64_t)r.a;
            j.digest = (uint32_t)r.b;
            j.durability = (int)(r.c & 0xFF);
            j.prefill = (int)(r.c >> 8 & 1);
        } else {
            j.acked = (int64_t)r.a;
            j.finished = r.kind == J_END;
        }
    }
    close(fd);
    if (!strcmp(j.status, "ok") && (int64_t)st.st_size % (int64_t)sizeof(struct jrec)) {
        j.status = "truncated";
        snprintf(j.detail, sizeof j.detail, "%lld bytes: a torn record at its end (records are %zu bytes)",
                 (long long)st.st_size, sizeof(struct jrec));
    }
    if (!strcmp(j.status, "ok") && j.records < 2) {
        j.status = "truncated";
        snprintf(j.detail, sizeof j.detail, "%lld bytes: no header", (long long)st.st_size);
    }
    return j;
}

/* -- durability: flushes and acknowledgements ------------------------------------------------- */
static int64_t progress_every = 0, progress_total = 0, progress_shown = 0;

/* a device flush, then the resets that waited for it */
static void device_flush(sim_t *s)
{
    double t0 = now_s();
    if (zdev_flush(s->dev))
        io_die(s);
    durability_s += now_s() - t0;
    s->written_at_flush = s->dev->blocks_written;
    for (int64_t i = 0; i < s->npending; ++i) {
        int32_t z = s->pending_list[i];
        s->pending[z] = 0;
        if (zdev_reset(s->dev, (uint32_t)z))
            io_die(s);
    }
    s->npending = 0;
}

static void flush_for_reset(sim_t *s)
{
    device_flush(s);
    s->reset_flushes++;
}

/* acknowledge every write issued so far: make it durable (flush mode: a device flush; fua: each
 * write already was, the zone state is synced), then journal the count and sync the journal */
static void commit(sim_t *s, int end)
{
    if (s->durability == ZDEV_DUR_FLUSH && (s->dev->blocks_written != s->written_at_flush || end))
        device_flush(s);
    else if (s->durability == ZDEV_DUR_FUA) {
        double t0 = now_s();
        if (zdev_sync_zones(s->dev))
            io_die(s);
        durability_s += now_s() - t0;
    }
    journal_write(end ? J_END : J_COMMIT, (uint64_t)s->now, s->dev->blocks_written, 0,
                  s->durability != ZDEV_DUR_NONE);
    s->acked = s->now;
    if (progress_every && (s->acked / progress_every != progress_shown / progress_every || end)) {
        fprintf(stderr, "progress %lld %lld\n", (long long)s->acked, (long long)progress_total);
        progress_shown = s->acked;
    }
}

static void flush_stage(sim_t *s, int64_t g)
{
    stage_t *st = &s->stage[g];
    if (!st->staged_n)
        return;
    if (zdev_write(s->dev, (uint32_t)st->staged_zone, (uint32_t)st->staged_off, st->buf, (uint32_t)st->staged_n))
        io_die(s);
    st->staged_n = 0;
}

/* GC blocks go to a per-group staging buffer and reach the device in runs: one write per run of
 * consecutive blocks of a destination zone, all before the victim is reset */
static void stage_block(sim_t *s, int64_t g, int64_t phys, const unsigned char *src)
{
    stage_t *st = &s->stage[g];
    int64_t zone = phys / s->seg_blocks, off = phys % s->seg_blocks;
    if (st->staged_n && (st->staged_zone != zone || st->staged_off + st->staged_n != off))
        flush_stage(s, g);
    if (!st->staged_n) {
        st->staged_zone = zone;
        st->staged_off = off;
    }
    memcpy(st->buf + st->staged_n * BLK, src, BLK);
    st->staged_n++;
}

typedef struct {
    int64_t mapped, checked, lost, corrupt;
} verify_t;

/* read back every live LBA (zone by zone, one read per zone) and check it */
static verify_t verify_pass(sim_t *s, int64_t nzones_scan)
{
    verify_t r = {0, 0, 0, 0};
    for (int64_t l = 0; l < s->cap; ++l)
        r.mapped += s->l2p[l] >= 0;
    for (int64_t seg = 0; seg < nzones_scan; ++seg) {
        if (s->seg_state[seg] == SEG_FREE || s->seg_valid[seg] == 0)
            continue;
        int32_t wp = s->seg_wp[seg];
        if (zdev_read(s->dev, (uint32_t)seg, 0, s->vbuf, (uint32_t)wp))
            io_die(s);
        for (int32_t off = 0; off < wp; ++off) {
            int32_t lba = s->p2l[seg * s->seg_blocks + off];
            if (lba < 0)
                continue;
            r.checked++;
            int rc = check_block(s->vbuf + (size_t)off * BLK, (uint64_t)lba, (uint64_t)(s->lba_time[lba] + 1));
            r.lost += rc == 1;
            r.corrupt += rc == 2;
        }
    }
    r.lost += r.mapped - r.checked;
    return r;
}

/* -- GC and the loop (dogi_ml/sim/_loop_template.py) ---------------------------------------- */
static verify_t last_verify;

static int collect_one(sim_t *s, int64_t now)
{
    PROF_START(t);
    int64_t victim = s->select_victim(s, now);
    PROF_LAP(PROF_GC_SELECT, t);
    if (victim < 0)
        return sim_fail(s, ERR_NO_VICTIM, 0);
    if (victim >= s->nseg || s->seg_state[victim] != SEG_SEALED)
        return sim_fail(s, ERR_BAD_VICTIM, victim);
    if (s->seg_valid[victim] >= s->seg_blocks && !any_sealed_garbage(s))
        return sim_fail(s, ERR_NO_GAIN, victim);
    s->on_reclaim(s, victim, now);
    s->group_reclaimed[s->seg_group[victim]] += 1;
    int64_t base = victim * s->seg_blocks;
    int32_t wp = s->seg_wp[victim];
    PROF_SKIP(t);
    if (s->seg_valid[victim] > 0 && zdev_read(s->dev, (uint32_t)victim, 0, s->vbuf, (uint32_t)wp))
        io_die(s);
    PROF_LAP(PROF_GC_READ, t);
    for (int32_t off = 0; off < wp; ++off) {
        int32_t lba = s->p2l[base + off];
        if (lba < 0)
            continue;
        int64_t g = s->place_gc(s, lba, victim, now);
        if (g < 0 || g >= s->ngroups)
            return sim_fail(s, ERR_BAD_GROUP, g);
        s->p2l[base + off] = -1;
        int64_t phys = append(s, g, lba, now);
        if (phys < 0) {
            g = roomiest_group(s);
            if (g < 0 || (phys = append(s, g, lba, now)) < 0)
                return sim_fail(s, ERR_OUT_OF_SEGMENTS, g);
            s->spills += 1;
        }
        s->group_gc[g] += 1;
        stage_block(s, g, phys, s->vbuf + (size_t)off * BLK);
    }
    s->gc += s->seg_valid[victim];
    s->invalid -= wp - s->seg_valid[victim];
    s->reclaimed += 1;
    s->seg_state[victim] = SEG_FREE;
    s->seg_valid[victim] = 0;
    s->seg_wp[victim] = 0;
    s->seg_group[victim] = -1;
    s->free_stack[s->nfree++] = (int32_t)victim;
    PROF_LAP(PROF_GC_COPY, t); /* with the runs flushed on the way (a destination zone filled) */
    for (int64_t g = 0; g < s->ngroups; ++g)
        flush_stage(s, g); /* the survivors are on the device before the victim is reset */
    PROF_LAP(PROF_GC_WRITE, t);
    /* ... and durable before the victim is reset: the reset erases the last durable version of
     * every LBA whose newer copy (a survivor, or a user write since the last flush) is not yet
     * durable. In flush mode the reset waits for the next flush (a commit, or the victim's reuse) */
    if (s->durability == ZDEV_DUR_FLUSH && s->dev->blocks_written != s->written_at_flush) {
        s->pending[victim] = 1;
        s->pending_list[s->npending++] = (int32_t)victim;
    } else if (zdev_reset(s->dev, (uint32_t)victim))
        io_die(s);
    PROF_LAP(PROF_GC_RESET, t);
    s->gc_passes++;
    if (s->verify_every > 0 && s->gc_passes % s->verify_every == 0) {
        verify_t v = verify_pass(s, s->nseg);
        s->verify_passes++;
        if (v.lost || v.corrupt)
            s->verify_failures++;
        last_verify = v;
    }
    return ERR_OK;
}

static const char *err_text(int rc)
{
    switch (rc) {
    case ERR_NO_VICTIM: return "garbage collection was needed but no sealed zone exists; raise the op ratio or use fewer groups";
    case ERR_NO_GAIN: return "the chosen GC victim is entirely valid, so GC cannot free space (over-provisioning exhausted); raise the op ratio";
    case ERR_OUT_OF_SEGMENTS: return "a group needed a fresh zone and none was free; raise gc_free_segments or the op ratio";
    case ERR_LBA_RANGE: return "a write addressed a block at or beyond the logical capacity; raise --capacity";
    case ERR_BAD_GROUP: return "the placement returned a group outside [0, n_groups)";
    case ERR_BAD_VICTIM: return "the victim selector returned a zone that is not sealed";
    case ERR_GC_STUCK: return "garbage collection made no progress";
    default: return "unknown error";
    }
}

static int64_t stop_after_now = -1; /* --stop-after, in writes issued (prefill included) */

/* apply user writes; returns an ERR_* code */
static int run_writes(sim_t *s, const int64_t *writes, int64_t n)
{
    PROF_START(t_loop);
    for (int64_t i = 0; i < n; ++i) {
        PROF_START(t);
        int64_t lba = writes[i];
        if (lba < 0 || lba >= s->cap)
            return sim_fail(s, ERR_LBA_RANGE, lba);
        int64_t now = s->now;
        int32_t old = s->l2p[lba];
        if (old >= 0)
            invalidate(s, old);
        int64_t g = s->place_user(s, lba, now);
        if (g < 0 || g >= s->ngroups)
            return sim_fail(s, ERR_BAD_GROUP, g);
        int64_t phys = append(s, g, lba, now);
        if (phys < 0)
            return sim_fail(s, ERR_OUT_OF_SEGMENTS, g);
        PROF_LAP(PROF_MAP, t);
        make_block(s->ubuf, (uint64_t)lba, (uint64_t)(now + 1), s->tag << 48 | (uint64_t)s->acked);
        PROF_SKIP(t);
        if (zdev_write(s->dev, (uint32_t)(phys / s->seg_blocks), (uint32_t)(phys % s->seg_blocks), s->ubuf, 1))
            io_die(s);
        PROF_LAP(PROF_WRITE, t);
        s->lba_time[lba] = now;
        s->group_user[g] += 1;
        s->user += 1;
        s->now = now + 1;
        if (s->nfree < s->gc_free) {
            int64_t target = s->gc_high, rounds = 0;
            s->bursts += 1;
            while (s->nfree < target) {
                rounds += 1;
                if (rounds > s->nseg) {
                    if (s->nfree >= s->gc_free)
                        break;
                    return sim_fail(s, ERR_GC_STUCK, rounds);
                }
                int rc = collect_one(s, now + 1);
                if (rc != ERR_OK) {
                    if (rc == ERR_NO_GAIN && s->nfree >= s->gc_free)
                        break;
                    return rc;
                }
            }
        }
        PROF_LAP(PROF_GC, t);
        /* acknowledge every --flush-every writes and whenever this write filled its zone */
        int filled = (phys + 1) % s->seg_blocks == 0;
        if (stop_after_now >= 0 && s->now >= stop_after_now)
            raise(SIGKILL); /* --stop-after: killed between a write and its acknowledgement */
        if (s->now - s->acked >= s->flush_every || filled) {
            s->zone_fill_commits += filled && s->now - s->acked < s->flush_every;
            commit(s, 0);
        }
        PROF_LAP(PROF_PROGRESS, t);
    }
    PROF_LAP(PROF_LOOP, t_loop);
    return ERR_OK;
}

static void reset_counters(sim_t *s)
{
    s->user = s->gc = s->reclaimed = s->spills = s->bursts = 0;
    for (int64_t g = 0; g < s->ngroups; ++g)
        s->group_user[g] = s->group_gc[g] = s->group_reclaimed[g] = 0;
#ifdef ZNS_PROF
    memset(prof_ns, 0, sizeof prof_ns);
    zdev_prof_pwrite_ns = 0;
#endif
}

/* -- recovery ------------------------------------------------------------------------------- */
typedef struct {
    int64_t acked, max_seq, live, intact, lost, newest_lost, newer, corrupt, phantom, foreign, beyond_journal,
        unwritten, scanned;
} recover_t;

/* the LBA of the trace's write number i (0-based, prefill first) */
static int64_t trace_lba(const stream_t *st, int prefill, int64_t cap, int64_t i)
{
    return prefill ? (i < cap ? i : st->writes[i - cap]) : st->writes[i];
}

/* Rebuild the mapping from the zones (the highest sequence number of each LBA wins) and check it
 * against the first `acked` writes of the trace (< 0: unknown, the highest sequence found stands
 * in): every LBA must hold its last acknowledged version or a later write of the trace. `tag`
 * (< 0: unknown) is the run's: blocks of another run count as foreign. */
static recover_t recover(sim_t *s, const stream_t *stream, int prefill, int64_t acked, int64_t tag)
{
    recover_t r = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    zdev *d = s->dev;
    if (zdev_refresh(d))
        io_die(s);
    int64_t total = (prefill ? s->cap : 0) + stream->n;
    uint64_t *best = xcalloc((size_t)s->cap, 8);
    int64_t zones = d->nzones < (uint32_t)s->nseg ? d->nzones : s->nseg;
    for (int64_t z = 0; z < (int64_t)d->nzones; ++z)
        if (z >= s->nseg && d->zones[z].wp)
            die("zone %lld beyond the run's %lld zones holds data: the device was not written by this "
                "configuration (same trace, capacity, op ratio?)",
                (long long)z, (long long)s->nseg);
    for (int64_t z = 0; z < zones; ++z) {
        uint32_t wp = d->zones[z].wp;
        if (!wp)
            continue;
        if (zdev_read(d, (uint32_t)z, 0, s->vbuf, wp))
            io_die(s);
        s->seg_state[z] = SEG_SEALED;
        s->seg_wp[z] = (int32_t)wp;
        for (uint32_t off = 0; off < wp; ++off) {
            const unsigned char *b = s->vbuf + (size_t)off * BLK;
            const struct blk_hdr *h = (const struct blk_hdr *)b;
            r.scanned++;
            if (h->magic != HDR_MAGIC) {
                int zero = 1;
                for (size_t i = 0; i < BLK && zero; ++i)
                    zero = b[i] == 0;
                if (zero)
                    r.unwritten++; /* a finished zone's unwritten tail */
                else
                    r.corrupt++;
                continue;
            }
            if (crc32c(0, b + 8, BLK - 8) != h->crc) {
                r.corrupt++;
                continue;
            }
            if (tag >= 0 && STAMP_TAG(h->reserved) != (uint64_t)tag) {
                r.foreign++; /* another run's block (the device was not reset, or another journal) */
                continue;
            }
            /* a block this trace never wrote (this LBA at this sequence number) */
            if (h->seq == 0 || (int64_t)h->seq > total || h->lba >= (uint64_t)s->cap ||
                trace_lba(stream, prefill, s->cap, (int64_t)h->seq - 1) != (int64_t)h->lba) {
                r.phantom++;
                continue;
            }
            if (acked >= 0 && (int64_t)STAMP_ACKED(h->reserved) > acked)
                r.beyond_journal++; /* issued after an acknowledgement the journal no longer holds */
            if (h->seq > best[h->lba]) {
                best[h->lba] = h->seq;
                s->l2p[h->lba] = (int32_t)(z * s->seg_blocks + off);
            }
            if ((int64_t)h->seq > r.max_seq)
                r.max_seq = (int64_t)h->seq;
        }
    }
    r.acked = acked >= 0 ? (acked < total ? acked : total) : r.max_seq;
    /* the last acknowledged version of every LBA: each must still be there, or a later write of it */
    uint64_t *expect = xcalloc((size_t)s->cap, 8);
    for (int64_t i = 0; i < r.acked; ++i)
        expect[trace_lba(stream, prefill, s->cap, i)] = (uint64_t)(i + 1);
    for (int64_t l = 0; l < s->cap; ++l) {
        uint64_t e = expect[l], b = best[l];
        if (e) {
            r.live++;
            if (b == e)
                r.intact++;
            else if (b > e)
                r.newer++; /* overwritten by a write issued after the last acknowledgement */
            else {
                r.lost++;
                if ((int64_t)e > r.newest_lost)
                    r.newest_lost = (int64_t)e;
            }
        } else if (b)
            r.newer++; /* first written after the last acknowledgement */
        /* the verify pass below reads back the rebuilt mapping */
        if (b && b >= e) {
            s->lba_time[l] = (int64_t)b - 1;
            s->p2l[s->l2p[l]] = (int32_t)l;
            s->seg_valid[s->l2p[l] / s->seg_blocks]++;
        } else {
            s->l2p[l] = -1;
            s->lba_time[l] = -1;
        }
    }
    free(best);
    free(expect);
    return r;
}

/* -- the zone rules, exercised (--selftest on a fresh device) -------------------------------- */
static int selftest(zdev *d)
{
    /* each step: what is attempted, whether the device must accept it */
    unsigned char *b = aligned_buf(2);
    int ok = 1, first = 1;
    uint32_t cap = (uint32_t)d->cap_blocks;
    printf("{\"mode\": \"selftest\", \"checks\": [");
#define STEP(name, expect_ok, call)                                                                                   \
    do {                                                                                                           \
        int got = (call) == 0;                                                                                     \
        ok &= got == (expect_ok);                                                                                  \
        printf("%s{\"step\": \"%s\", \"accepted\": %s, \"expected\": %s, \"message\": \"%s\"}", first ? "" : ", ", name,    \
               got ? "true" : "false", (expect_ok) ? "true" : "false", got ? "" : d->err);                         \
        first = 0;                                                                                                 \
    } while (0)
    if (d->nzones < 3 || cap < 2 || !d->max_active || d->max_active > d->nzones - 1) {
        printf("], \"ok\": false, \"error\": \"selftest needs >= 3 zones, capacity >= 2, 0 < max_active < zones\"}\n");
        return 1;
    }
    make_block(b, 1, 1, 0);
    make_block(b + BLK, 2, 2, 0);
    STEP("write at the write pointer", 1, zdev_write(d, 0, 0, b, 1));
    STEP("write behind the write pointer", 0, zdev_write(d, 0, 0, b, 1));
    STEP("write ahead of the write pointer", 0, zdev_write(d, 0, 2, b, 1));
    STEP("read below the write pointer", 1, zdev_read(d, 0, 0, b, 1));
    STEP("read beyond the write pointer", 0, zdev_read(d, 0, 1, b, 1));
    STEP("write crossing the zone capacity", 0, zdev_write(d, 0, 1, b, cap));
    for (uint32_t o = 1; o < cap; ++o)
        if (zdev_write(d, 0, o, b, 1))
            break;
    STEP("write to a full zone", 0, zdev_write(d, 0, cap, b, 1));
    STEP("reset a full zone", 1, zdev_reset(d, 0));
    STEP("write at the start of a reset zone", 1, zdev_write(d, 0, 0, b, 1));
    /* fill the active limit with partly written zones, then one more */
    uint32_t z;
    for (z = 1; z < d->max_active && z < d->nzones; ++z)
        zdev_write(d, z, 0, b, 1);
    STEP("open one zone more than max_active", 0, zdev_write(d, z, 0, b, 1));
    STEP("finish an active zone frees an active slot", 1, zdev_finish(d, 0));
    STEP("then that zone opens", 1, zdev_write(d, z, 0, b, 1));
    printf("], \"nopen\": %u, \"nactive\": %u, \"implicit_closes\": %llu, \"ok\": %s}\n", d->nopen, d->nactive,
           (unsigned long long)d->implicit_closes, ok ? "true" : "false");
#undef STEP
    free(b);
    return ok ? 0 : 1;
}

#include "dogi_place.h" /* the frozen learned schemes: DOGI's (issue 15), the hybrid's (issue 40, hybrid_place.h) */

/* a block's sequence number (0 if it is no harness block): what --drop-volatile reports */
static uint64_t block_seq(const void *b)
{
    const struct blk_hdr *h = b;
    return h->magic == HDR_MAGIC ? h->seq : 0;
}

static const char *json_bool(int x) { return x ? "true" : "false"; }

/* -- main ----------------------------------------------------------------------------------- */
__attribute__((noreturn)) static void usage(void)
{
    fputs("usage: zns_replay --trace FILE.dtr --device file:PATH|/dev/ZNS --capacity BLOCKS [options]\n"
          "  --policy nosep|sepgc|sepbit|sepbit_paper|dogi_frozen|hybrid_frozen\n"
          "  --victim greedy|cost_benefit|cost_benefit_sepbit|fifo|dogi|hybrid\n"
          "  --op-ratio R (0.10)  --segments N (default floor(capacity x (1+R) / zone capacity))\n"
          "  --gc-free N (2)  --gc-high N (0: one victim at a time)  --no-prefill\n"
          "  --create NZONES,ZONE_BLOCKS,ZONE_CAP,MAX_OPEN,MAX_ACTIVE  (make a file device)\n"
          "  --verify-every N (GC passes; 0 = only at the end)  --no-verify  --progress N\n"
          "  --recover (rebuild the mapping from the zones, check it against the trace, verify)\n"
          "  --selftest (exercise the zone rules on a fresh device)  --reset-all (empty every zone)\n"
          "  --info (print the device geometry)  --stop-after N (SIGKILL itself after N user writes, before their\n"
          "    acknowledgement)  --drop-volatile (file device: the power-loss model; discard every block not made durable)\n"
          "  --durability flush|fua|none (flush)  --flush-every N (1024 user writes; also at every zone filled)\n"
          "  --journal PATH (the acknowledgement journal; default PATH.journal for file:PATH, ./NAME.journal for\n"
          "    /dev/NAME)\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *trace = NULL, *device = NULL, *policy = "sepbit", *victim = "greedy", *create = NULL;
    double op_ratio = 0.10;
    long long capacity = 0, segments = 0, gc_free = 2, gc_high = 0, verify_every = 0, stop_after = -1;
    int prefill = 1, do_verify = 1, do_recover = 0, do_info = 0, do_selftest = 0, do_reset_all = 0, do_drop = 0;
    const char *durability_arg = "flush", *journal_arg = NULL;
    long long flush_every = DEFAULT_FLUSH_EVERY;
    static struct option opts[] = {
        {"trace", 1, 0, 't'},       {"device", 1, 0, 'd'},    {"policy", 1, 0, 'p'},       {"victim", 1, 0, 'v'},
        {"capacity", 1, 0, 'c'},    {"op-ratio", 1, 0, 'o'},  {"segments", 1, 0, 's'},     {"gc-free", 1, 0, 'f'},
        {"gc-high", 1, 0, 'h'},     {"no-prefill", 0, 0, 'P'}, {"create", 1, 0, 'C'},      {"verify-every", 1, 0, 'V'},
        {"no-verify", 0, 0, 'N'},   {"progress", 1, 0, 'g'},  {"recover", 0, 0, 'R'},      {"info", 0, 0, 'I'},
        {"stop-after", 1, 0, 'S'},  {"selftest", 0, 0, 'T'},  {"reset-all", 0, 0, 'A'},  {"durability", 1, 0, 'D'},
        {"flush-every", 1, 0, 'F'}, {"journal", 1, 0, 'J'},   {"drop-volatile", 0, 0, 'L'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': trace = optarg; break;
        case 'd': device = optarg; break;
        case 'p': policy = optarg; break;
        case 'v': victim = optarg; break;
        case 'c': capacity = atoll(optarg); break;
        case 'o': op_ratio = atof(optarg); break;
        case 's': segments = atoll(optarg); break;
        case 'f': gc_free = atoll(optarg); break;
        case 'h': gc_high = atoll(optarg); break;
        case 'P': prefill = 0; break;
        case 'C': create = optarg; break;
        case 'V': verify_every = atoll(optarg); break;
        case 'N': do_verify = 0; break;
        case 'g': progress_every = atoll(optarg); break;
        case 'R': do_recover = 1; break;
        case 'I': do_info = 1; break;
        case 'S': stop_after = atoll(optarg); break;
        case 'T': do_selftest = 1; break;
        case 'A': do_reset_all = 1; break;
        case 'D': durability_arg = optarg; break;
        case 'F': flush_every = atoll(optarg); break;
        case 'J': journal_arg = optarg; break;
        case 'L': do_drop = 1; break;
        default: usage();
        }
    }
    if (!device)
        usage();
    int durability = !strcmp(durability_arg, "flush") ? ZDEV_DUR_FLUSH
                     : !strcmp(durability_arg, "fua") ? ZDEV_DUR_FUA
                     : !strcmp(durability_arg, "none") ? ZDEV_DUR_NONE
                                                       : -1;
    if (durability < 0)
        die("unknown --durability=%s; use flush (a device flush every --flush-every writes), fua (every write "
            "durable on its own) or none (nothing made durable)",
            durability_arg);
    if (flush_every < 1)
        die("--flush-every=%lld: it must be at least 1 (user writes between acknowledgements)", flush_every);
    char journal_buf[1100];
    if (!journal_arg) {
        const char *base = strrchr(device, '/');
        if (!strncmp(device, "file:", 5))
            snprintf(journal_buf, sizeof journal_buf, "%s.journal", device + 5);
        else
            snprintf(journal_buf, sizeof journal_buf, "%s.journal", base ? base + 1 : device);
        journal_arg = journal_buf;
    }
    select_kernels();
    zdev dev;
    struct zdev_geometry geo;
    if (create) {
        unsigned long long a[5];
        if (sscanf(create, "%llu,%llu,%llu,%llu,%llu", &a[0], &a[1], &a[2], &a[3], &a[4]) != 5)
            die("--create wants NZONES,ZONE_BLOCKS,ZONE_CAP,MAX_OPEN,MAX_ACTIVE, got %s", create);
        geo = (struct zdev_geometry){(uint32_t)a[0], a[1], a[2], (uint32_t)a[3], (uint32_t)a[4]};
    }
    if (zdev_open(&dev, device, create ? &geo : NULL))
        die("%s", dev.err);
    if (do_info) {
        printf("{\"device\": \"%s\", \"kind\": \"%s\", \"zones\": %u, \"zone_blocks\": %llu, \"zone_capacity_blocks\": "
               "%llu, \"max_open\": %u, \"max_active\": %u, \"direct_io\": %s}\n",
               dev.path, zdev_kind_name(&dev), dev.nzones, (unsigned long long)dev.zone_blocks,
               (unsigned long long)dev.cap_blocks, dev.max_open, dev.max_active, dev.direct ? "true" : "false");
        zdev_close(&dev);
        return 0;
    }
    if (do_reset_all) { /* every non-empty zone back to empty (before another tool writes the device) */
        for (uint32_t z = 0; z < dev.nzones; ++z)
            if (dev.zones[z].cond != ZC_EMPTY && zdev_reset(&dev, z))
                die("%s", dev.err);
        printf("{\"mode\": \"reset-all\", \"zones\": %u, \"resets\": %llu}\n", dev.nzones,
               (unsigned long long)dev.resets);
        zdev_close(&dev);
        return 0;
    }
    if (do_selftest) {
        int rc = selftest(&dev);
        zdev_close(&dev);
        return rc;
    }
    if (do_drop) { /* the power-loss model: the drive's volatile cache is lost */
        uint64_t dropped, lo, hi;
        if (zdev_drop_volatile(&dev, &dropped, &lo, &hi, block_seq))
            die_status(DOGI_EXIT_INTERNAL, "%s", dev.err);
        printf("{\"mode\": \"drop-volatile\", \"device\": \"%s\", \"dropped_blocks\": %llu, \"dropped_min_seq\": %llu, "
               "\"dropped_max_seq\": %llu}\n",
               dev.path, (unsigned long long)dropped, (unsigned long long)lo, (unsigned long long)hi);
        zdev_close(&dev);
        return 0;
    }
    if (!trace || capacity <= 0)
        usage();
    int64_t seg_blocks = (int64_t)dev.cap_blocks;
    int64_t ngroups;
    int fifo = 0;
    if (!strcmp(policy, "nosep"))
        ngroups = 1;
    else if (!strcmp(policy, "sepgc"))
        ngroups = 2;
    else if (!strcmp(policy, "sepbit"))
        ngroups = 6, fifo = 1;
    else if (!strcmp(policy, "sepbit_paper"))
        ngroups = 6;
    else if (!strcmp(policy, "dogi_frozen") || !strcmp(policy, "hybrid_frozen"))
        ngroups = dogi_ngroups(); /* the learned scheme the bundle compiled in (dogi_setup refuses the other) */
    else
        die("unknown policy %s; known: nosep, sepgc, sepbit, sepbit_paper, dogi_frozen, hybrid_frozen", policy);
    int64_t (*sel)(sim_t *, int64_t) = NULL;
    if (!strcmp(victim, "greedy"))
        sel = v_greedy;
    else if (!strcmp(victim, "cost_benefit"))
        sel = v_cost_benefit;
    else if (!strcmp(victim, "cost_benefit_sepbit"))
        sel = v_cost_benefit_sepbit;
    else if (!strcmp(victim, "fifo"))
        sel = v_fifo;
    else if (!strcmp(victim, "dogi") || !strcmp(victim, "hybrid"))
        sel = dogi_victim;
    else
        die("unknown victim selection %s; known: greedy, cost_benefit, cost_benefit_sepbit, fifo, dogi, hybrid",
            victim);
    int64_t nseg = segments > 0 ? segments : (int64_t)floor((double)capacity * (1.0 + op_ratio) / (double)seg_blocks);
    int64_t data_segments = (capacity + seg_blocks - 1) / seg_blocks;
    /* the zone resources: each group keeps one zone open (and active) */
    uint32_t lim = dev.max_active && (!dev.max_open || dev.max_active < dev.max_open) ? dev.max_active : dev.max_open;
    if (lim && ngroups > (int64_t)lim)
        die("too few zones for the groups: policy %s keeps %lld zones open, the device allows %u open / %u active; "
            "use a policy with fewer groups or a device with higher zone limits",
            policy, (long long)ngroups, dev.max_open, dev.max_active);
    if (nseg > (int64_t)dev.nzones)
        die("the trace does not fit the device: capacity %lld blocks x (1 + op %.3f) needs %lld zones of %lld blocks, "
            "the device has %u; use a smaller workload (capacity), a lower op ratio or a larger device",
            capacity, op_ratio, (long long)nseg, (long long)seg_blocks, dev.nzones);
    if (nseg < data_segments + ngroups + gc_free + 1)
        die("too few zones for the groups: %lld zones of %lld blocks but at least %lld are needed (%lld open groups + "
            "%lld free for GC + %lld of data + 1); raise the op ratio or use fewer groups",
            (long long)nseg, (long long)seg_blocks, (long long)(data_segments + ngroups + gc_free + 1),
            (long long)ngroups, gc_free, (long long)data_segments);
    if (nseg * seg_blocks >= ((int64_t)1 << 31) - 1)
        die("physical space of %lld blocks exceeds the harness's int32 addressing", (long long)(nseg * seg_blocks));

    stream_t stream = load_trace(trace, capacity);
    sim_t *s = sim_new(capacity, nseg, seg_blocks, ngroups, gc_free, gc_high);
    s->dev = &dev;
    s->fifo = fifo;
    s->select_victim = sel;
    s->place_user = ngroups == 6 ? sepbit_user : nosep_user;
    s->place_gc = ngroups == 6 ? sepbit_gc : ngroups == 2 ? sepgc_gc : nosep_gc;
    s->on_reclaim = ngroups == 6 ? sepbit_reclaim : no_reclaim;
    dogi_setup(s, policy, victim, trace, prefill ? capacity : 0);
    s->ubuf = aligned_buf(1);
    s->vbuf = aligned_buf((size_t)(dev.cap_blocks > (uint64_t)seg_blocks ? dev.cap_blocks : (uint64_t)seg_blocks));
    s->stage = xcalloc((size_t)ngroups, sizeof(stage_t));
    for (int64_t g = 0; g < ngroups; ++g)
        s->stage[g].buf = aligned_buf((size_t)seg_blocks);
    s->verify_every = verify_every;
    progress_total = (prefill ? capacity : 0) + stream.n;

    int64_t total_writes = progress_total;
    /* the run's identity in its journal: the written LBA stream (prefill included) */
    uint32_t digest = crc32c((uint32_t)prefill, stream.writes, (size_t)stream.n * sizeof(int64_t));

    if (do_recover) {
        double t0 = now_s();
        journal_t j = journal_read(journal_arg);
        if (j.have_header && strcmp(j.status, "missing") &&
            (j.total != total_writes || j.capacity != capacity || j.digest != digest || j.prefill != prefill)) {
            j.status = "mismatch";
            snprintf(j.detail, sizeof j.detail,
                     "the journal is another run's: %lld writes over %lld blocks (LBA stream CRC32C %08x), this "
                     "trace has %lld over %lld (%08x)",
                     (long long)j.total, (long long)j.capacity, j.digest, (long long)total_writes, capacity, digest);
        }
        int usable = !strcmp(j.status, "ok") || !strcmp(j.status, "truncated") || !strcmp(j.status, "corrupt");
        usable = usable && j.have_header && j.records >= 2;
        recover_t r = recover(s, &stream, prefill, usable ? j.acked : -1, usable ? (int64_t)j.tag : -1);
        if (!strcmp(j.status, "ok") && r.beyond_journal) {
            j.status = "truncated";
            snprintf(j.detail, sizeof j.detail,
                     "%lld blocks on the device were issued after more writes were acknowledged than the journal's "
                     "last record (%lld) says: records are missing from its end",
                     (long long)r.beyond_journal, (long long)j.acked);
        }
        verify_t v = verify_pass(s, nseg);
        double t1 = now_s();
        int journal_ok = !strcmp(j.status, "ok");
        int ok = journal_ok && !r.lost && !r.corrupt && !r.phantom && !r.foreign && !v.lost && !v.corrupt;
        char acked_json[32] = "null";
        if (usable)
            snprintf(acked_json, sizeof acked_json, "%lld", (long long)r.acked);
        printf("{\"mode\": \"recover\", \"device\": \"%s\", \"journal\": {\"path\": \"%s\", \"status\": \"%s\", "
               "\"detail\": \"%s\", \"records\": %lld, \"run_finished\": %s, \"flush_every\": %lld}, "
               "\"durability\": \"%s\", \"acknowledged_writes\": %s, \"live_lbas\": %lld, \"intact_lbas\": %lld, "
               "\"lost\": %lld, \"newest_lost_seq\": %lld, \"unacknowledged_found\": %lld, \"max_seq_found\": %lld, "
               "\"corrupt\": %lld, \"phantom\": %lld, \"foreign\": %lld, \"beyond_journal\": %lld, "
               "\"blocks_scanned\": %lld, \"unwritten_blocks\": %lld, \"verify\": {\"mapped\": %lld, \"checked\": %lld, "
               "\"lost\": %lld, \"corrupt\": %lld, \"ok\": %s}, \"ok\": %s, \"elapsed_s\": %.6f}\n",
               dev.path, journal_arg, j.status, j.detail, (long long)j.records, json_bool(j.finished),
               (long long)j.flush_every, usable ? dur_name(j.durability) : "unknown", acked_json, (long long)r.live,
               (long long)r.intact, (long long)r.lost, (long long)r.newest_lost, (long long)r.newer,
               (long long)r.max_seq, (long long)r.corrupt, (long long)r.phantom, (long long)r.foreign,
               (long long)r.beyond_journal, (long long)r.scanned, (long long)r.unwritten, (long long)v.mapped,
               (long long)v.checked, (long long)v.lost, (long long)v.corrupt, json_bool(!v.lost && !v.corrupt),
               json_bool(ok), t1 - t0);
        fflush(stdout);
        zdev_close(&dev);
        if (!journal_ok)
            die_status(DOGI_EXIT_LOST_WRITES,
                       "recovery: the acknowledgement journal %s is %s (%s), so the count of acknowledged writes "
                       "is not known for certain; lost %lld of %lld live LBAs against %s acknowledged writes",
                       journal_arg, j.status, j.detail, (long long)r.lost, (long long)r.live, acked_json);
        if (!ok)
            die_status(DOGI_EXIT_LOST_WRITES,
                       "recovery: %lld of %lld acknowledged LBAs lost (newest acknowledged write lost: %lld), %lld "
                       "corrupt, %lld phantom, %lld foreign blocks; verify %s",
                       (long long)r.lost, (long long)r.live, (long long)r.newest_lost, (long long)r.corrupt,
                       (long long)r.phantom, (long long)r.foreign, (!v.lost && !v.corrupt) ? "ok" : "FAILED");
        return DOGI_EXIT_OK;
    }

    /* a fresh device for this run: every zone the run uses starts empty */
    double tr0 = now_s();
    for (int64_t z = 0; z < nseg; ++z)
        if (dev.zones[z].cond != ZC_EMPTY && zdev_reset(&dev, (uint32_t)z))
            io_die(s);
    double reset_s = now_s() - tr0;
    uint64_t resets_before = dev.resets;
    /* the durability contract: the journal names the run before its first write */
    dev.durability = durability;
    s->durability = durability;
    s->flush_every = flush_every;
    s->tag = (((uint64_t)getpid() * 0x9E3779B97F4A7C15ull) ^ (uint64_t)(now_s() * 1e9)) >> 48;
    s->tag = s->tag ? s->tag : 1;
    if (durability == ZDEV_DUR_FLUSH)
        device_flush(s); /* the resets above: durable before the journal says the run began */
    journal_create(journal_arg, (uint64_t)total_writes, (uint64_t)capacity, (uint32_t)s->tag, (uint64_t)flush_every,
                   digest, durability, prefill);
    if (durability == ZDEV_DUR_NONE)
        fprintf(stderr, "warning: --durability=none: no write is made durable; a power loss may lose any of them, "
                        "and the journal counts writes issued, not acknowledged\n");
    if (stop_after >= 0)
        stop_after_now = (prefill ? capacity : 0) + stop_after;
    int rc = ERR_OK;
    double tp0 = now_s();
    if (prefill) {
        int64_t *pf = xcalloc((size_t)capacity, 8);
        for (int64_t i = 0; i < capacity; ++i)
            pf[i] = i;
        rc = run_writes(s, pf, capacity);
        free(pf);
    }
    double prefill_s = now_s() - tp0;
    if (rc != ERR_OK)
        die("%s (policy %s, during prefill, detail %lld)", err_text(rc), policy, (long long)s->err_arg);
    reset_counters(s);
    durability_s = 0; /* the stream's, as elapsed_s */
    uint64_t w0 = dev.blocks_written, r0 = dev.blocks_read, z0 = dev.resets;
    double t0 = now_s();
    int64_t n = stream.n;
    rc = run_writes(s, stream.writes, n);
    if (rc != ERR_OK)
        die("%s (policy %s, at user write %lld, detail %lld)", err_text(rc), policy, (long long)s->now,
            (long long)s->err_arg);
    commit(s, 1); /* the run's end: every write acknowledged, the journal closed by its END record */
    double elapsed = now_s() - t0;
    uint64_t dev_w = dev.blocks_written - w0, dev_r = dev.blocks_read - r0, resets = dev.resets - z0;
    /* DOGI_ZNS_STOP_BEFORE_VERIFY=1: stop (SIGSTOP) before the final verify pass, so that a test
     * can damage the device and continue the process (SIGCONT) to see the failure reported */
    const char *stop_env = getenv("DOGI_ZNS_STOP_BEFORE_VERIFY");
    if (stop_env && strcmp(stop_env, "0"))
        raise(SIGSTOP);
    double tv0 = now_s();
    verify_t v = {0, 0, 0, 0};
    if (do_verify) {
        v = verify_pass(s, nseg);
        s->verify_passes++;
        if (v.lost || v.corrupt)
            s->verify_failures++;
    }
    double verify_s = now_s() - tv0;
    double mib = (double)BLK / (1 << 20);
    char prof_json[1024] = "";
#ifdef ZNS_PROF
    { /* microseconds per user write (GC inside "gc"; "pwrite" is the system call inside "device_write") */
        size_t k = (size_t)snprintf(prof_json, sizeof prof_json, ", \"profile_us_per_user_write\": {");
        double per = s->user ? 1e-3 / (double)s->user : 0.0;
        for (int i = 0; i < PROF_N; ++i)
            k += (size_t)snprintf(prof_json + k, sizeof prof_json - k, "\"%s\": %.4f, ", prof_name[i], prof_ns[i] * per);
        snprintf(prof_json + k, sizeof prof_json - k, "\"pwrite\": %.4f, \"pwrite_blocks\": %llu}",
                 zdev_prof_pwrite_ns * per, (unsigned long long)(dev.blocks_written - w0));
    }
#endif
    char threshold[64] = "null";
    if (s->window_sum >= 0)
        snprintf(threshold, sizeof threshold, "%.6f", (double)s->window_sum / NC_WINDOW);
    printf("{\"mode\": \"replay\", \"device\": \"%s\", \"backend\": \"%s\", \"direct_io\": %s, \"policy\": \"%s\", "
           "\"victim\": \"%s\", \"capacity_blocks\": %lld, \"physical_segments\": %lld, \"segment_blocks\": %lld, "
           "\"zone_blocks\": %llu, \"device_zones\": %u, \"max_open\": %u, \"max_active\": %u, \"n_groups\": %lld, "
           "\"prefill_blocks\": %lld, \"compacted\": %s, "
           "\"user_writes\": %lld, \"gc_writes\": %lld, \"reclaimed_segments\": %lld, \"zone_resets\": %llu, "
           "\"gc_spills\": %lld, \"gc_bursts\": %lld, \"free_segments\": %lld, \"invalid_blocks\": %lld, "
           "\"waf\": %.9f, \"device_write_blocks\": %llu, \"device_read_blocks\": %llu, "
           "\"implicit_closes\": %llu, \"elapsed_s\": %.6f, \"prefill_s\": %.6f, \"initial_reset_s\": %.6f, "
           "\"initial_resets\": %llu, \"user_mb_s\": %.3f, \"device_mb_s\": %.3f, \"sepbit_threshold\": %s, \"learned\": %s, "
           "\"verify\": {\"mapped\": %lld, \"checked\": %lld, \"lost\": %lld, \"corrupt\": %lld, \"passes\": %lld, "
           "\"failed_passes\": %lld, \"ok\": %s, \"seconds\": %.6f}, \"durability\": \"%s\", \"flush_every\": %lld, "
           "\"device_flushes\": %llu, \"reset_flushes\": %lld, \"zone_fill_commits\": %lld, \"acknowledged_writes\": %lld, "
           "\"durability_s\": %.6f, "
           "\"journal\": \"%s\"%s%s}\n",
           dev.path, zdev_kind_name(&dev), dev.direct ? "true" : "false", policy, victim, capacity, (long long)nseg,
           (long long)seg_blocks, (unsigned long long)dev.zone_blocks, dev.nzones, dev.max_open, dev.max_active,
           (long long)ngroups, prefill ? capacity : 0LL, stream.compacted ? "true" : "false", (long long)s->user,
           (long long)s->gc, (long long)s->reclaimed, (unsigned long long)resets, (long long)s->spills,
           (long long)s->bursts, (long long)s->nfree, (long long)s->invalid,
           s->user ? (double)(s->user + s->gc) / (double)s->user : 0.0, (unsigned long long)dev_w,
           (unsigned long long)dev_r, (unsigned long long)dev.implicit_closes, elapsed, prefill_s, reset_s,
           (unsigned long long)resets_before, elapsed > 0 ? s->user * mib / elapsed : 0.0,
           elapsed > 0 ? dev_w * mib / elapsed : 0.0, threshold, dogi_json(), (long long)v.mapped, (long long)v.checked,
           (long long)v.lost, (long long)v.corrupt, (long long)s->verify_passes, (long long)s->verify_failures,
           (do_verify && !v.lost && !v.corrupt && !s->verify_failures) ? "true" : "false", verify_s,
           dur_name(durability), flush_every, (unsigned long long)dev.flushes, (long long)s->reset_flushes,
           (long long)s->zone_fill_commits, (long long)s->acked, durability_s, journal_arg,
           durability == ZDEV_DUR_NONE ? ", \"durability_warning\": \"none: no write was made durable; a power loss "
                                         "may lose any of them\""
                                       : "",
           prof_json);
    fflush(stdout);
    zdev_close(&dev);
    if (s->verify_failures)
        die_status(DOGI_EXIT_VERIFY,
                   "verify failed: %lld of %lld verify passes found blocks that do not read back (the last: %lld lost, "
                   "%lld corrupt of %lld live LBAs)",
                   (long long)s->verify_failures, (long long)s->verify_passes,
                   (long long)(v.lost ? v.lost : last_verify.lost), (long long)(v.corrupt ? v.corrupt : last_verify.corrupt),
                   (long long)(v.mapped ? v.mapped : last_verify.mapped));
    return DOGI_EXIT_OK;
}
