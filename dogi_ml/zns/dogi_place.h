/* dogi_place.h: the frozen learned scheme of the ZNS harness (issue 15), included by zns_replay.c
 * after its engine. The same placement as the simulator's dogi_frozen policy
 * (dogi_ml/policies/dogi_frozen.py), decision for decision:
 *
 *  - user writes: the Hot Filter with DOGI's frozen mu (latest invalidation time <= mu: G_hot,
 *    group 0); otherwise the causal features of the write (dogi_ml/features/extract.py's
 *    _extract_range, integer for integer) go through the deployed int8 MLP (the bundle's C
 *    header, dogi_predict_one) and the predicted category's group G1..GN; prefill writes to GN;
 *  - GC survivors: the Frozen Filter (not overwritten since its clock last cleared: G_frzn,
 *    group N + 1), else the next group (G_hot -> G1, Gk -> Gk+1; GN and G_frzn keep theirs);
 *  - victims: DOGI's expiry-first rule (dogi_ml/policies/dogi.py, dogi_victim).
 *
 * Built with -DDOGI_LEARNED and an include path holding the bundle's dogi_model.h (the exported
 * header) and dogi_deploy.h (its frozen configuration, deploy.h); without them the scheme is
 * refused with a message. Internal names are dl_* (the model header owns dogi_*); the four hooks
 * zns_replay.c calls are dogi_ngroups, dogi_setup, dogi_victim and dogi_json.
 *
 * A hybrid bundle's deploy.h defines DL_HYBRID: the features, the int8 MLP, the Hot Filter, the
 * class -> group table and the Frozen Filter's clock below are shared, and hybrid_place.h
 * (included before dl_user) brings the hybrid's survivor and victim rules (policy=hybrid_frozen)
 * in place of DOGI's. A hybrid count bundle (HL_COUNTS) also counts each user write per LBA
 * (DL_COUNT_WRITE) and places a non-hot one by its count estimate (DL_USER_GROUP) instead of the
 * class's group; the class is still computed and counted.
 *
 * DOGI_ZNS_CLASSES=PATH in the environment writes the model's category of every trace write
 * (one byte each, hot writes included) to PATH: tests compare it with the Python reference. */
#ifndef DOGI_PLACE_H
#define DOGI_PLACE_H

#ifdef DOGI_LEARNED
#include "dogi_model.h"

#define DL_INF ((int64_t)1 << 58)
#define DL_NO_PREVIOUS ((int64_t)1 << 40) /* features' latest_inv of a block never written before */
#define DL_ROW 12 /* len(dogi_ml.features.extract.FEATURES); the harness fills the C_FEATURES columns only */
#include "dogi_deploy.h"

_Static_assert(DOGI_N_FEATURES == DL_N_FEATURES, "the model header and deploy.h disagree on the features");
_Static_assert(DOGI_N_CLASSES == DL_N_CLASSES && DL_N_CLASSES == 10, "the model must predict DOGI's ten categories");

static struct {
    int64_t *raw;        /* the trace's user-written LBAs, uncompacted (the features see these) */
    int64_t n, prefill, t, prev_lba, next_clock_at, hot, frozen_gc, expired, class_writes[DL_N_CLASSES];
    int64_t *last;       /* per raw LBA: trace time of its last write, -1 if none */
    int32_t *write_count, *win_stamp, *win_count, *bm_stamp;
    uint8_t *bitmap;     /* windows with a write, the current one the most significant bit */
    int64_t *chunk_w;    /* per chunk of DL_CHUNK blocks: writes so far */
    uint8_t *updated;    /* per LBA: overwritten since the Frozen Filter's last clear */
#ifdef DL_HYBRID
    int8_t *lba_class;   /* per LBA: class + 1 of its last user write, 0 hot, -1 prefill (the relocation table's row) */
    int64_t table_gc;    /* GC writes whose group came from the relocation table (counts: from a finite estimate) */
    int64_t *cnt, *at;   /* count bundle (HL_COUNTS): per LBA its decayed write count (Q16) and the time of it */
#endif
    int64_t cap;
    FILE *dump;          /* DOGI_ZNS_CLASSES: every write's category, one byte each */
} dl;

static int32_t dl_classify(const int64_t *row)
{
    int64_t x[DL_N_FEATURES];
    for (int i = 0; i < DL_N_FEATURES; ++i)
        x[i] = row[dl_columns[i]];
    return dogi_predict_one(x, 0);
}

static void dl_close_dump(void)
{
    if (dl.dump && fclose(dl.dump))
        fprintf(stderr, "error: writing DOGI_ZNS_CLASSES failed\n");
    dl.dump = NULL;
}

/* the features of trace write t (the columns of FEATURES the harness computes), then the
 * per-LBA state advanced past it: _extract_range's loop body */
static void dl_features(int64_t t, int64_t *row)
{
    int64_t a = dl.raw[t], c = a / DL_CHUNK, w = t / DL_WINDOW;
    if (dl.win_stamp[a] != w) {
        dl.win_stamp[a] = (int32_t)w;
        dl.win_count[a] = 0;
    }
    int64_t shift = w - dl.bm_stamp[a];
    if (shift > 0) {
        dl.bitmap[a] = shift >= 8 ? 0 : (uint8_t)(dl.bitmap[a] >> shift);
        dl.bm_stamp[a] = (int32_t)w;
    }
    row[0] = a;
    row[1] = dl.prev_lba;
    row[2] = dl.win_count[a];
    row[3] = dl.chunk_w[c];
    row[4] = dl.bitmap[a];
    row[5] = dl.last[a] >= 0 ? t - dl.last[a] : DL_NO_PREVIOUS;
    row[11] = dl.write_count[a];
    dl.win_count[a] += 1;
    dl.bitmap[a] |= 0x80;
    dl.write_count[a] += 1;
    dl.last[a] = t;
    dl.chunk_w[c] += 1;
    dl.prev_lba = a;
}

#ifdef DL_HYBRID
#define DL_KEEP_CLASS(lba, c) (dl.lba_class[lba] = (int8_t)(c))
#include "hybrid_place.h" /* the hybrid's survivors and victims (dl_gc, dogi_victim, DL_POLICY, ...), its count hooks */
#else
#define DL_KEEP_CLASS(lba, c) ((void)0)
#define DL_COUNT_WRITE(lba, now) ((void)0)
#define DL_USER_GROUP(lba, now, c) dl_cat2group[c]
#endif

static int dl_user(sim_t *s, int64_t lba, int64_t now)
{
    int64_t last = s->lba_time[lba], v = DL_INF;
    if (last >= 0) {
        v = now - last;
        dl.updated[lba] = 1;
    }
    if (now < dl.prefill) {
        DL_KEEP_CLASS(lba, -1);
        return DL_N_INTERMEDIATE;
    }
    DL_COUNT_WRITE(lba, now); /* a count bundle counts every user write, hot or not */
    int64_t u = now - dl.prefill; /* user writes before this one = its trace index */
    if (u >= dl.next_clock_at) {
        memset(dl.updated, 0, (size_t)dl.cap);
        dl.next_clock_at = u + DL_FROZEN_CLOCK;
    }
    if (u != dl.t || u >= dl.n)
        die("the learned scheme's features are at trace write %lld, the replay at %lld", (long long)dl.t, (long long)u);
    int64_t row[DL_ROW];
    int32_t c = -1;
    dl_features(dl.t++, row); /* every write advances the features, hot or not */
    if (dl.dump)
        fputc(c = dl_classify(row), dl.dump);
    if (v <= DL_MU) {
        dl.hot += 1;
        DL_KEEP_CLASS(lba, 0);
        return 0;
    }
    if (c < 0)
        c = dl_classify(row);
    dl.class_writes[c] += 1;
    DL_KEEP_CLASS(lba, c + 1);
    return DL_USER_GROUP(lba, now, c); /* the class's group; a count bundle's: its count estimate's */
}

#ifndef DL_HYBRID
#define DL_POLICY "dogi_frozen"
#define DL_VICTIM "dogi"
#define DL_VICTIM_RULE "DOGI's expiry-first rule"
#define DL_SCHEME "DOGI"

static void dl_scheme_setup(sim_t *s) { (void)s; }

static int dl_scheme_json(char *buf, size_t size)
{
    (void)buf, (void)size;
    return 0;
}

static int dl_gc(sim_t *s, int64_t lba, int64_t victim, int64_t now)
{
    (void)now;
    int64_t vg = s->seg_group[victim];
    if (!dl.updated[lba]) {
        dl.frozen_gc += 1;
        return DL_N_INTERMEDIATE + 1;
    }
    return (int)(vg < DL_N_INTERMEDIATE ? vg + 1 : vg);
}

static int64_t dogi_victim(sim_t *s, int64_t now)
{
    int64_t best = -1, best_open = (int64_t)1 << 62, fin = -1, anyb = -1;
    double fin_num = -1.0, fin_den = 1.0, any_num = -1.0, any_den = 1.0;
    for (int64_t seg = 0; seg < s->nseg; ++seg) {
        if (s->seg_state[seg] != SEG_SEALED)
            continue;
        int64_t v = s->seg_valid[seg];
        if (v == 0)
            return seg;
        int64_t g = s->seg_group[seg];
        int garbage = v < s->seg_wp[seg];
        if (dl_expiry[g] < DL_INF && now - s->seg_open_time[seg] > dl_expiry[g] && garbage &&
            s->seg_open_time[seg] < best_open) {
            best = seg;
            best_open = s->seg_open_time[seg];
        }
        if (best >= 0)
            continue;
        double num, den;
        if (DL_FINAL_GREEDY) {
            num = (double)(s->seg_blocks - v);
            den = 1.0;
        } else {
            num = (double)((s->seg_blocks - v) * (now - s->seg_seal_time[seg] + 1));
            den = (double)(s->seg_blocks + v);
        }
        if (dl_final[g] && garbage && num * fin_den > fin_num * den)
            fin = seg, fin_num = num, fin_den = den;
        if (num * any_den > any_num * den)
            anyb = seg, any_num = num, any_den = den;
    }
    if (best >= 0)
        dl.expired += 1;
    return best >= 0 ? best : fin >= 0 ? fin : anyb;
}
#endif

static int64_t dogi_ngroups(void) { return DL_N_INTERMEDIATE + 2; }

static void dogi_setup(sim_t *s, const char *policy, const char *victim, const char *trace, int64_t prefill)
{
    int is_policy = !strcmp(policy, DL_POLICY), is_victim = !strcmp(victim, DL_VICTIM);
    if (!is_policy && (!strcmp(policy, "dogi_frozen") || !strcmp(policy, "hybrid_frozen")))
        die("this harness was built with a %s bundle (--policy=%s), not one of --policy=%s; run it through python -m "
            "dogi_ml replay policy=%s policy.params.bundle=DIR, which compiles that bundle's header in",
            DL_SCHEME, DL_POLICY, policy, policy);
    if (!is_policy && !is_victim)
        return;
    if (!is_policy)
        die("--victim=%s is the learned scheme's victim selection: use it with --policy=%s", DL_VICTIM, DL_POLICY);
    if (!is_victim)
        die("--policy=%s selects its victims itself (%s): pass --victim=%s", DL_POLICY, DL_VICTIM_RULE, DL_VICTIM);
    if (s->cap != DL_CAPACITY)
        die("the learned scheme's bundle was exported for a capacity of %lld blocks (its mu and BIRs are in blocks "
            "of that run), this replay has %lld; export a bundle at this capacity",
            (long long)DL_CAPACITY, (long long)s->cap);
    stream_t raw = load_trace(trace, INT64_MAX); /* the LBAs as written: no compaction */
    int64_t n_lbas = 1;
    for (int64_t i = 0; i < raw.n; ++i)
        if (raw.writes[i] + 1 > n_lbas)
            n_lbas = raw.writes[i] + 1;
    dl.raw = raw.writes;
    dl.n = raw.n;
    dl.prefill = prefill;
    dl.prev_lba = -1;
    dl.next_clock_at = DL_FROZEN_CLOCK;
    dl.cap = s->cap;
    dl.last = xcalloc((size_t)n_lbas, 8);
    dl.win_stamp = xcalloc((size_t)n_lbas, 4);
    for (int64_t a = 0; a < n_lbas; ++a)
        dl.last[a] = -1, dl.win_stamp[a] = -1;
    dl.write_count = xcalloc((size_t)n_lbas, 4);
    dl.win_count = xcalloc((size_t)n_lbas, 4);
    dl.bm_stamp = xcalloc((size_t)n_lbas, 4);
    dl.bitmap = xcalloc((size_t)n_lbas, 1);
    dl.chunk_w = xcalloc((size_t)(n_lbas / DL_CHUNK + 1), 8);
    dl.updated = xcalloc((size_t)s->cap, 1);
    const char *dump = getenv("DOGI_ZNS_CLASSES");
    if (dump && *dump) {
        if (!(dl.dump = fopen(dump, "wb")))
            die("cannot write DOGI_ZNS_CLASSES=%s: %s", dump, strerror(errno));
        atexit(dl_close_dump);
    }
    s->place_user = dl_user;
    s->place_gc = dl_gc;
    s->on_reclaim = no_reclaim;
    s->select_victim = dogi_victim;
    dl_scheme_setup(s);
}

/* the learned scheme's counts for the JSON line (the simulator's summary()["learned"]) */
static const char *dogi_json(void)
{
    static char buf[512];
    if (!dl.raw)
        return "null";
    int k = snprintf(buf, sizeof buf,
                     "{\"hot_writes\": %lld, \"frozen_gc_writes\": %lld, \"expired_victims\": %lld, \"class_writes\": [",
                     (long long)dl.hot, (long long)dl.frozen_gc, (long long)dl.expired);
    for (int c = 0; c < DL_N_CLASSES; ++c)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld", c ? ", " : "", (long long)dl.class_writes[c]);
    k += snprintf(buf + k, sizeof buf - (size_t)k, "]");
    k += dl_scheme_json(buf + k, sizeof buf - (size_t)k);
    snprintf(buf + k, sizeof buf - (size_t)k, "}");
    return buf;
}

#else /* a harness without a model: the learned scheme is refused */
static int64_t dogi_ngroups(void)
{
    die("this harness was built without a learned model; run the learned scheme through python -m dogi_ml replay "
        "policy=dogi_frozen (or hybrid_frozen) policy.params.bundle=DIR, which compiles the bundle's header in");
    return 0;
}
static int64_t dogi_victim(sim_t *s, int64_t now)
{
    (void)s, (void)now;
    return -1;
}
static void dogi_setup(sim_t *s, const char *policy, const char *victim, const char *trace, int64_t prefill)
{
    (void)s, (void)trace, (void)prefill;
    if (!strcmp(policy, "dogi_frozen") || !strcmp(policy, "hybrid_frozen") || !strcmp(victim, "dogi") ||
        !strcmp(victim, "hybrid"))
        dogi_ngroups();
}
static const char *dogi_json(void) { return "null"; }
#endif
#endif
