/* A zoned device behind one interface: a Linux zoned block device (<linux/blkzoned.h> ioctls)
 * or a file-emulated zoned device that enforces the same rules (writes only at the write
 * pointer, a zone is full at its capacity, reset, max open / active zones), its zone state kept
 * in a small memory-mapped sidecar file (PATH.zones) so it survives an abrupt stop.
 *
 * Addresses are in 4 KiB blocks relative to a zone's start. Every call returns 0 on success,
 * -1 on error with a message in dev->err. */
#ifndef DOGI_ZDEV_H
#define DOGI_ZDEV_H

#include <stddef.h>
#include <stdint.h>

#define ZDEV_BLOCK 4096u

enum { ZDEV_KIND_FILE = 1, ZDEV_KIND_BLK = 2 };
/* zone conditions: the values of <linux/blkzoned.h>'s enum blk_zone_cond */
enum { ZC_EMPTY = 0x1, ZC_IMP_OPEN = 0x2, ZC_EXP_OPEN = 0x3, ZC_CLOSED = 0x4, ZC_FULL = 0xE };

struct zdev_zone {
    uint32_t wp;         /* blocks written (relative write pointer) */
    uint32_t cond;       /* ZC_* */
    uint32_t durable_wp; /* file backend: blocks below it were made durable (a flush, a FUA write) */
    uint32_t reserved;
};

/* what the harness asks of the device for its writes to count as durable */
enum { ZDEV_DUR_NONE = 0, ZDEV_DUR_FLUSH = 1, ZDEV_DUR_FUA = 2 };

/* the sidecar of the file backend (little-endian, host order) */
struct zdev_meta {
    char magic[8]; /* "DOGIZNS\0" */
    uint32_t version;
    uint32_t nzones;
    uint64_t zone_blocks; /* zone size */
    uint64_t cap_blocks;  /* zone capacity (<= size) */
    uint32_t max_open;
    uint32_t max_active;
    struct zdev_zone zones[];
};

typedef struct zdev {
    int kind;
    int fd;
    int direct; /* 1: O_DIRECT in effect */
    char path[1024];
    uint32_t nzones;
    uint64_t zone_blocks, cap_blocks;
    uint32_t max_open, max_active; /* 0 = no limit */
    struct zdev_zone *zones;       /* file: the mapped sidecar's; block device: host copy */
    struct zdev_meta *meta;        /* file backend only */
    size_t meta_len;
    uint64_t zone_start_bytes_mul; /* bytes per zone (size) */
    uint32_t nopen, nactive;
    int durability; /* ZDEV_DUR_*: FUA makes every write durable before it returns */
    /* traffic */
    uint64_t blocks_written, blocks_read, resets, finishes, implicit_closes, flushes;
    char err[512];
} zdev;

/* Open "file:PATH" or a block device path. For a file device, geometry != NULL (re)creates it
 * with that geometry (data file sparse, every zone empty); NULL opens an existing one. */
struct zdev_geometry {
    uint32_t nzones;
    uint64_t zone_blocks, cap_blocks;
    uint32_t max_open, max_active;
};
int zdev_open(zdev *d, const char *spec, const struct zdev_geometry *create);
void zdev_close(zdev *d);
/* write n blocks at the zone's write pointer (off must equal it; checked) */
int zdev_write(zdev *d, uint32_t zone, uint32_t off, const void *buf, uint32_t n);
int zdev_read(zdev *d, uint32_t zone, uint32_t off, void *buf, uint32_t n);
int zdev_reset(zdev *d, uint32_t zone);
int zdev_finish(zdev *d, uint32_t zone);
/* re-read every zone's write pointer and condition from the device (recovery) */
int zdev_refresh(zdev *d);
/* make every completed write durable: fdatasync of the data file or block device (a block
 * device's FLUSH command); the file backend then records the durable write pointers in its
 * sidecar and syncs it */
int zdev_flush(zdev *d);
/* the zone state durable without a data flush (FUA writes made the data durable): the file
 * backend syncs its sidecar; a zoned block device keeps its write pointers itself */
int zdev_sync_zones(zdev *d);
/* the power-loss model of the file backend (a drive without power-loss protection): every block
 * above a zone's durable write pointer is discarded and the write pointer falls back to it.
 * *dropped: blocks discarded; *min_seq, *max_seq: the range of the sequence numbers their
 * headers carried (0, 0 if none), read before discarding (seq_of reads one block's) */
int zdev_drop_volatile(zdev *d, uint64_t *dropped, uint64_t *min_seq, uint64_t *max_seq,
                       uint64_t (*seq_of)(const void *block));
const char *zdev_kind_name(const zdev *d);
#ifdef ZNS_PROF
extern uint64_t zdev_prof_pwrite_ns; /* time inside pwrite (a -DZNS_PROF build) */
#endif

#endif
