/* Zoned device backends: see zdev.h. */
#define _GNU_SOURCE
#include "zdev.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/blkzoned.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define META_MAGIC "DOGIZNS"
#define META_VERSION 2u /* 2: durable write pointers (16-byte zone records) */

static int fail(zdev *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
    return -1;
}

const char *zdev_kind_name(const zdev *d) { return d->kind == ZDEV_KIND_BLK ? "zoned-block-device" : "file-emulated"; }

static int is_active(uint32_t c) { return c == ZC_IMP_OPEN || c == ZC_EXP_OPEN || c == ZC_CLOSED; }
static int is_open(uint32_t c) { return c == ZC_IMP_OPEN || c == ZC_EXP_OPEN; }

static void count_states(zdev *d)
{
    d->nopen = d->nactive = 0;
    for (uint32_t z = 0; z < d->nzones; ++z) {
        d->nopen += is_open(d->zones[z].cond);
        d->nactive += is_active(d->zones[z].cond);
    }
}

static uint64_t zone_offset(const zdev *d, uint32_t zone, uint32_t off)
{
    return ((uint64_t)zone * d->zone_blocks + off) * ZDEV_BLOCK;
}

/* -- file backend ---------------------------------------------------------------------------- */
static int open_data_file(zdev *d, int create)
{
    int flags = O_RDWR | (create ? O_CREAT : 0);
    d->fd = open(d->path, flags | O_DIRECT, 0644);
    d->direct = d->fd >= 0;
    if (d->fd < 0 && errno == EINVAL) /* a file system without O_DIRECT (tmpfs): buffered */
        d->fd = open(d->path, flags, 0644);
    if (d->fd < 0)
        return fail(d, "cannot open %s: %s", d->path, strerror(errno));
    return 0;
}

static int file_open(zdev *d, const struct zdev_geometry *g)
{
    char side[1100];
    snprintf(side, sizeof side, "%s.zones", d->path);
    if (g) {
        if (!g->nzones || !g->zone_blocks || !g->cap_blocks || g->cap_blocks > g->zone_blocks)
            return fail(d, "bad file-device geometry: %u zones of %llu blocks, capacity %llu (need capacity <= size)",
                        g->nzones, (unsigned long long)g->zone_blocks, (unsigned long long)g->cap_blocks);
        if (open_data_file(d, 1))
            return -1;
        /* sparse: only written blocks take space */
        if (ftruncate(d->fd, 0) || ftruncate(d->fd, (off_t)((uint64_t)g->nzones * g->zone_blocks * ZDEV_BLOCK)))
            return fail(d, "cannot size %s: %s", d->path, strerror(errno));
        size_t len = sizeof(struct zdev_meta) + (size_t)g->nzones * sizeof(struct zdev_zone);
        int mfd = open(side, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (mfd < 0 || ftruncate(mfd, (off_t)len))
            return fail(d, "cannot create %s: %s", side, strerror(errno));
        struct zdev_meta *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        close(mfd);
        if (m == MAP_FAILED)
            return fail(d, "cannot map %s: %s", side, strerror(errno));
        memset(m, 0, len);
        memcpy(m->magic, META_MAGIC, 8);
        m->version = META_VERSION;
        m->nzones = g->nzones;
        m->zone_blocks = g->zone_blocks;
        m->cap_blocks = g->cap_blocks;
        m->max_open = g->max_open;
        m->max_active = g->max_active;
        for (uint32_t z = 0; z < g->nzones; ++z)
            m->zones[z].cond = ZC_EMPTY;
        d->meta = m;
        d->meta_len = len;
    } else {
        int mfd = open(side, O_RDWR);
        if (mfd < 0)
            return fail(d, "%s is not a file-emulated zoned device (no zone sidecar %s: %s); create one with "
                           "--create or device=file:PATH on a new path",
                        d->path, side, strerror(errno));
        struct stat st;
        if (fstat(mfd, &st) || (size_t)st.st_size < sizeof(struct zdev_meta)) {
            close(mfd);
            return fail(d, "zone sidecar %s is truncated; recreate the device", side);
        }
        struct zdev_meta *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        close(mfd);
        if (m == MAP_FAILED)
            return fail(d, "cannot map %s: %s", side, strerror(errno));
        d->meta = m;
        d->meta_len = (size_t)st.st_size;
        if (memcmp(m->magic, META_MAGIC, 8) || m->version != META_VERSION ||
            d->meta_len < sizeof(struct zdev_meta) + (size_t)m->nzones * sizeof(struct zdev_zone))
            return fail(d, "%s is not a dogi_ml zone sidecar (bad magic, version or size); recreate the device", side);
        if (open_data_file(d, 0))
            return -1;
    }
    d->nzones = d->meta->nzones;
    d->zone_blocks = d->meta->zone_blocks;
    d->cap_blocks = d->meta->cap_blocks;
    d->max_open = d->meta->max_open;
    d->max_active = d->meta->max_active;
    d->zones = d->meta->zones;
    count_states(d);
    return 0;
}

/* -- Linux zoned block device ---------------------------------------------------------------- */
static uint32_t sysfs_u32(const char *dev, const char *attr)
{
    const char *name = strrchr(dev, '/');
    char p[512];
    unsigned v = 0;
    snprintf(p, sizeof p, "/sys/block/%s/queue/%s", name ? name + 1 : dev, attr);
    FILE *f = fopen(p, "r");
    if (f) {
        if (fscanf(f, "%u", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static int blk_report(zdev *d)
{
    const uint32_t batch = 128;
    size_t len = sizeof(struct blk_zone_report) + batch * sizeof(struct blk_zone);
    struct blk_zone_report *r = calloc(1, len);
    if (!r)
        return fail(d, "out of memory");
    uint64_t zone_sectors = d->zone_blocks * (ZDEV_BLOCK / 512);
    uint32_t z = 0;
    while (z < d->nzones) {
        memset(r, 0, len);
        r->sector = (uint64_t)z * zone_sectors;
        r->nr_zones = batch;
        if (ioctl(d->fd, BLKREPORTZONE, r)) {
            free(r);
            return fail(d, "BLKREPORTZONE on %s failed: %s", d->path, strerror(errno));
        }
        if (r->nr_zones == 0)
            break;
        for (uint32_t i = 0; i < r->nr_zones && z < d->nzones; ++i, ++z) {
            struct blk_zone *bz = &r->zones[i];
            if (bz->type != BLK_ZONE_TYPE_SEQWRITE_REQ) {
                unsigned type = bz->type;
                free(r);
                return fail(d, "%s: zone %u is not sequential-write-required (type %u); the harness needs a "
                               "host-managed zoned device",
                            d->path, z, type);
            }
            uint64_t cap = (r->flags & BLK_ZONE_REP_CAPACITY) ? bz->capacity : bz->len;
            if (z == 0)
                d->cap_blocks = cap / (ZDEV_BLOCK / 512);
            else if (cap / (ZDEV_BLOCK / 512) != d->cap_blocks) {
                free(r);
                return fail(d, "%s: zones differ in capacity (zone %u); the harness needs one capacity", d->path, z);
            }
            d->zones[z].wp = (uint32_t)((bz->wp - bz->start) / (ZDEV_BLOCK / 512));
            d->zones[z].cond = bz->cond;
            if (bz->cond == BLK_ZONE_COND_FULL)
                d->zones[z].wp = (uint32_t)d->cap_blocks;
        }
    }
    free(r);
    count_states(d);
    return 0;
}

static int blk_open(zdev *d)
{
    struct stat st;
    if (stat(d->path, &st))
        return fail(d, "cannot open device %s: %s", d->path, strerror(errno));
    if (!S_ISBLK(st.st_mode))
        return fail(d, "%s is not a zoned block device (not a block device at all); use device=file:%s for the "
                       "file-emulated zoned device",
                    d->path, d->path);
    /* the zone model is asked on a read-only descriptor: a conventional disk named by mistake
     * is never opened for writing */
    int ro = open(d->path, O_RDONLY);
    if (ro < 0)
        return fail(d, "cannot open %s: %s", d->path, strerror(errno));
    uint32_t zone_sectors = 0, nz = 0;
    int lbs = 0;
    int zoned = ioctl(ro, BLKGETZONESZ, &zone_sectors) == 0 && zone_sectors != 0;
    close(ro);
    if (!zoned)
        return fail(d, "%s is not zoned (a conventional block device: no zone size); use a host-managed zoned "
                       "device (e.g. an NVMe ZNS namespace) or device=file:PATH",
                    d->path);
    d->fd = open(d->path, O_RDWR | O_DIRECT);
    if (d->fd < 0)
        return fail(d, "cannot open %s for direct I/O: %s", d->path, strerror(errno));
    d->direct = 1;
    if (ioctl(d->fd, BLKGETNRZONES, &nz) || nz == 0)
        return fail(d, "%s: BLKGETNRZONES failed: %s", d->path, strerror(errno));
    if (ioctl(d->fd, BLKSSZGET, &lbs) || lbs <= 0 || ZDEV_BLOCK % (unsigned)lbs)
        return fail(d, "%s: logical block size %d does not divide 4096", d->path, lbs);
    if ((uint64_t)zone_sectors * 512 % ZDEV_BLOCK)
        return fail(d, "%s: zone size of %u sectors is not a multiple of 4 KiB", d->path, zone_sectors);
    d->nzones = nz;
    d->zone_blocks = (uint64_t)zone_sectors * 512 / ZDEV_BLOCK;
    d->max_open = sysfs_u32(d->path, "max_open_zones");
    d->max_active = sysfs_u32(d->path, "max_active_zones");
    d->zones = calloc(nz, sizeof *d->zones);
    if (!d->zones)
        return fail(d, "out of memory");
    return blk_report(d);
}

/* -- the interface ---------------------------------------------------------------------------- */
int zdev_open(zdev *d, const char *spec, const struct zdev_geometry *create)
{
    memset(d, 0, sizeof *d);
    d->fd = -1;
    if (!strncmp(spec, "file:", 5)) {
        d->kind = ZDEV_KIND_FILE;
        snprintf(d->path, sizeof d->path, "%s", spec + 5);
        return file_open(d, create);
    }
    d->kind = ZDEV_KIND_BLK;
    snprintf(d->path, sizeof d->path, "%s", spec);
    if (create)
        return fail(d, "--create makes file-emulated devices only (device=file:PATH), not %s", spec);
    return blk_open(d);
}

void zdev_close(zdev *d)
{
    if (d->meta) {
        msync(d->meta, d->meta_len, MS_SYNC);
        munmap(d->meta, d->meta_len);
    } else
        free(d->zones);
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    d->meta = NULL;
    d->zones = NULL;
}

static int check_zone(zdev *d, uint32_t zone)
{
    if (zone >= d->nzones)
        return fail(d, "zone %u is beyond the device's %u zones", zone, d->nzones);
    return 0;
}

/* A write opens an empty or closed zone: enforce the active limit, and at the open limit close
 * another implicitly opened zone as an NVMe ZNS controller does. */
static int open_for_write(zdev *d, uint32_t zone)
{
    struct zdev_zone *z = &d->zones[zone];
    if (is_open(z->cond))
        return 0;
    if (z->cond == ZC_EMPTY && d->max_active && d->nactive >= d->max_active)
        return fail(d, "zone %u cannot be opened: %u of max %u zones are active (zone resource limit)", zone,
                    d->nactive, d->max_active);
    if (d->max_open && d->nopen >= d->max_open) {
        for (uint32_t o = 0; o < d->nzones; ++o)
            if (d->zones[o].cond == ZC_IMP_OPEN) {
                d->zones[o].cond = ZC_CLOSED;
                d->nopen--;
                d->implicit_closes++;
                break;
            }
        if (d->nopen >= d->max_open)
            return fail(d, "zone %u cannot be opened: %u of max %u zones are open", zone, d->nopen, d->max_open);
    }
    if (z->cond == ZC_EMPTY)
        d->nactive++;
    z->cond = ZC_IMP_OPEN;
    d->nopen++;
    return 0;
}

#ifdef ZNS_PROF
#include <time.h>
uint64_t zdev_prof_pwrite_ns;
static uint64_t prof_ns_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

static int pwrite_all(zdev *d, const void *buf, size_t len, uint64_t at)
{
#ifdef ZNS_PROF
    uint64_t t0 = prof_ns_now();
#endif
    const char *p = buf;
    while (len) {
        /* FUA: RWF_DSYNC on this write alone (O_DSYNC's guarantee: the data is durable when the
         * call returns). On a block device opened O_DIRECT the kernel sends it as a write with
         * the FUA bit (block/fops.c); on a file, the file system writes it through (a FUA write
         * or a cache flush of the disk beneath) */
        struct iovec iov = {(void *)p, len};
        ssize_t w = d->durability == ZDEV_DUR_FUA ? pwritev2(d->fd, &iov, 1, (off_t)at, RWF_DSYNC)
                                                  : pwrite(d->fd, p, len, (off_t)at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return fail(d, "write of %zu bytes at byte %llu of %s failed: %s", len, (unsigned long long)at, d->path,
                        strerror(errno));
        }
        p += w;
        len -= (size_t)w;
        at += (uint64_t)w;
    }
#ifdef ZNS_PROF
    zdev_prof_pwrite_ns += prof_ns_now() - t0;
#endif
    return 0;
}

int zdev_write(zdev *d, uint32_t zone, uint32_t off, const void *buf, uint32_t n)
{
    if (check_zone(d, zone))
        return -1;
    struct zdev_zone *z = &d->zones[zone];
    if (z->cond == ZC_FULL)
        return fail(d, "write to full zone %u", zone);
    if (off != z->wp)
        return fail(d, "write at block %u of zone %u but its write pointer is at %u (zoned devices accept writes "
                       "only at the write pointer)",
                    off, zone, z->wp);
    if ((uint64_t)off + n > d->cap_blocks)
        return fail(d, "write of %u blocks at %u crosses zone %u's capacity of %llu blocks", n, off, zone,
                    (unsigned long long)d->cap_blocks);
    if (d->kind == ZDEV_KIND_FILE && open_for_write(d, zone))
        return -1;
    if (pwrite_all(d, buf, (size_t)n * ZDEV_BLOCK, zone_offset(d, zone, off)))
        return -1;
    /* the write pointer moves only once the data is written: a block past it after a crash was
     * never acknowledged */
    if (d->kind == ZDEV_KIND_BLK && !is_open(z->cond)) {
        if (z->cond == ZC_EMPTY)
            d->nactive++;
        d->nopen++;
        z->cond = ZC_IMP_OPEN;
    }
    z->wp = off + n;
    if (d->durability == ZDEV_DUR_FUA)
        z->durable_wp = z->wp;
    if (z->wp == d->cap_blocks) {
        z->cond = ZC_FULL;
        d->nopen--;
        d->nactive--;
    }
    d->blocks_written += n;
    return 0;
}

int zdev_read(zdev *d, uint32_t zone, uint32_t off, void *buf, uint32_t n)
{
    if (check_zone(d, zone))
        return -1;
    if ((uint64_t)off + n > d->zones[zone].wp)
        return fail(d, "read of blocks [%u, %u) of zone %u beyond its write pointer %u", off, off + n, zone,
                    d->zones[zone].wp);
    char *p = buf;
    size_t len = (size_t)n * ZDEV_BLOCK;
    uint64_t at = zone_offset(d, zone, off);
    while (len) {
        ssize_t r = pread(d->fd, p, len, (off_t)at);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return fail(d, "read at byte %llu of %s failed: %s", (unsigned long long)at, d->path,
                        r < 0 ? strerror(errno) : "end of file");
        }
        p += r;
        len -= (size_t)r;
        at += (uint64_t)r;
    }
    d->blocks_read += n;
    return 0;
}

static void leave_state(zdev *d, struct zdev_zone *z)
{
    if (is_open(z->cond))
        d->nopen--;
    if (is_active(z->cond))
        d->nactive--;
}

int zdev_reset(zdev *d, uint32_t zone)
{
    if (check_zone(d, zone))
        return -1;
    struct zdev_zone *z = &d->zones[zone];
    if (d->kind == ZDEV_KIND_BLK) {
        struct blk_zone_range r = {(uint64_t)zone * d->zone_blocks * 8, d->zone_blocks * 8};
        if (ioctl(d->fd, BLKRESETZONE, &r))
            return fail(d, "BLKRESETZONE of zone %u failed: %s", zone, strerror(errno));
    }
    leave_state(d, z);
    z->wp = 0;
    z->durable_wp = 0; /* the model: a reset is durable when it completes (the worse case for data) */
    z->cond = ZC_EMPTY;
    if (d->kind == ZDEV_KIND_FILE) /* give the blocks back, as a reset drive would (best effort) */
        (void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)zone_offset(d, zone, 0),
                        (off_t)(d->zone_blocks * ZDEV_BLOCK));
    d->resets++;
    return 0;
}

int zdev_finish(zdev *d, uint32_t zone)
{
    if (check_zone(d, zone))
        return -1;
    struct zdev_zone *z = &d->zones[zone];
    if (z->cond == ZC_FULL)
        return 0;
    if (d->kind == ZDEV_KIND_BLK) {
        struct blk_zone_range r = {(uint64_t)zone * d->zone_blocks * 8, d->zone_blocks * 8};
        if (ioctl(d->fd, BLKFINISHZONE, &r))
            return fail(d, "BLKFINISHZONE of zone %u failed: %s", zone, strerror(errno));
    }
    leave_state(d, z);
    z->cond = ZC_FULL; /* the write pointer keeps the written extent (what recovery scans) */
    d->finishes++;
    return 0;
}

int zdev_refresh(zdev *d)
{
    if (d->kind == ZDEV_KIND_BLK)
        return blk_report(d);
    count_states(d);
    return 0;
}

int zdev_flush(zdev *d)
{
    if (fdatasync(d->fd))
        return fail(d, "flush (fdatasync) of %s failed: %s", d->path, strerror(errno));
    if (d->kind == ZDEV_KIND_FILE) {
        for (uint32_t z = 0; z < d->nzones; ++z)
            d->zones[z].durable_wp = d->zones[z].wp;
        if (msync(d->meta, d->meta_len, MS_SYNC))
            return fail(d, "sync of the zone sidecar of %s failed: %s", d->path, strerror(errno));
    }
    d->flushes++;
    return 0;
}

int zdev_sync_zones(zdev *d)
{
    if (d->kind == ZDEV_KIND_FILE && msync(d->meta, d->meta_len, MS_SYNC))
        return fail(d, "sync of the zone sidecar of %s failed: %s", d->path, strerror(errno));
    return 0;
}

int zdev_drop_volatile(zdev *d, uint64_t *dropped, uint64_t *min_seq, uint64_t *max_seq,
                       uint64_t (*seq_of)(const void *block))
{
    *dropped = *min_seq = *max_seq = 0;
    if (d->kind != ZDEV_KIND_FILE)
        return fail(d, "%s is a real device: it loses its volatile cache by itself when its power is cut; "
                       "--drop-volatile models that on file devices only",
                    d->path);
    void *b = NULL;
    if (posix_memalign(&b, ZDEV_BLOCK, ZDEV_BLOCK))
        return fail(d, "out of memory");
    for (uint32_t zone = 0; zone < d->nzones; ++zone) {
        struct zdev_zone *z = &d->zones[zone];
        if (z->durable_wp > z->wp) /* a finished zone keeps its written extent: never beyond it */
            z->durable_wp = z->wp;
        for (uint32_t off = z->durable_wp; off < z->wp; ++off) {
            if (zdev_read(d, zone, off, b, 1)) {
                free(b);
                return -1;
            }
            uint64_t seq = seq_of(b);
            if (seq && (!*min_seq || seq < *min_seq))
                *min_seq = seq;
            if (seq > *max_seq)
                *max_seq = seq;
        }
        if (z->wp > z->durable_wp) {
            *dropped += z->wp - z->durable_wp;
            if (fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)zone_offset(d, zone, z->durable_wp),
                          (off_t)((uint64_t)(z->wp - z->durable_wp) * ZDEV_BLOCK))) {
                free(b);
                return fail(d, "cannot discard blocks of zone %u of %s: %s", zone, d->path, strerror(errno));
            }
            z->wp = z->durable_wp;
            z->cond = z->wp == 0 ? ZC_EMPTY : z->wp >= d->cap_blocks ? ZC_FULL : ZC_CLOSED;
        } else if (is_open(z->cond))
            z->cond = ZC_CLOSED; /* after a power cycle no zone is open */
    }
    free(b);
    count_states(d);
    if (fdatasync(d->fd) || msync(d->meta, d->meta_len, MS_SYNC))
        return fail(d, "cannot sync %s after discarding its volatile blocks: %s", d->path, strerror(errno));
    return 0;
}
