/* hybrid_place.h: the hybrid's frozen survivors and victims in the ZNS harness (issue 40), included
 * by dogi_place.h when the bundle's deploy.h defines DL_HYBRID. The same placement as the
 * simulator's hybrid_frozen policy (dogi_ml/policies/hybrid_frozen.py), decision for decision;
 * dogi_place.h's shared part places the user writes (features, the int8 MLP, the Hot Filter, the
 * bundle's class -> group table, prefill to GK) and keeps each LBA's class (dl.lba_class).
 *
 *  - GC survivors: the Frozen Filter (if the bundle has it: not overwritten since its clock last
 *    cleared, G_frzn = K + 1); else the relocation table's group for the block's class at the
 *    last age-grid column <= its age; a block without an estimate (hot, prefill, -1 in the table)
 *    goes to the first group whose upper bound covers its age (GK if none); never hotter than its
 *    source group with HL_RELOC_FLOOR;
 *  - victims: a dead segment at once, else (HL_EXPIRY_VICTIMS) the oldest sealed segment with
 *    garbage past its group's expiry age, else the bundle's victim rule (zns_replay.c's v_*).
 *
 * A count bundle (HL_COUNTS, deploy.json's lifetimes "counts") keeps per LBA a decayed write count
 * in Q16 fixed point (hl_count_write, hl_estimate: the decay by halves as a shift, the rest of a
 * half-life through a two-level power table): a non-hot user write goes to the final plan's group
 * of its estimate's bucket (dl_user's DL_USER_GROUP), a survivor to the first group whose bound
 * covers its estimate (or its age with HL_RELOC_AGE), with no Frozen Filter and no floor.
 *
 * Integers only: the tables were computed from the hybrid's float state when the bundle was
 * written (dogi_ml/policies/hybrid_frozen.py, export_bundle). Included by dogi_place.h before
 * dl_user (whose count hooks it defines). */
#ifndef HYBRID_PLACE_H
#define HYBRID_PLACE_H

#define DL_POLICY "hybrid_frozen"
#define DL_VICTIM "hybrid"
#define DL_VICTIM_RULE "the hybrid's expiry-first rule"
#define DL_SCHEME "hybrid"

static int64_t (*hl_rule)(sim_t *, int64_t); /* the bundle's victim rule behind the expiry scan */

#if HL_COUNTS
#define HL_ONE ((int64_t)1 << 16) /* Q16: a count of one write */

/* x * 2^(-dt / HL_COUNT_HALF) in integers: a shift per whole half-life, then the rest's fraction
 * (in 1/65536 of a half-life) through the power table's two halves, its high byte then its low
 * byte; HL_COUNT_HALF 0: the counts never decay */
static int64_t hl_decay(int64_t x, int64_t dt)
{
#if HL_COUNT_HALF == 0
    (void)dt;
    return x;
#else
    int64_t n = dt / HL_COUNT_HALF;
    if (n >= 48)
        return 0;
    x >>= n;
    int64_t f = ((dt % HL_COUNT_HALF) << 16) / HL_COUNT_HALF; /* 0..65535 */
    x = (x * hl_count_pow[f >> 8]) >> 16;
    return (x * hl_count_pow[256 + (f & 255)]) >> 16;
#endif
}

/* a user write (not prefill) of lba: its count decays to now and gains one */
static void hl_count_write(int64_t lba, int64_t now)
{
    dl.cnt[lba] = hl_decay(dl.cnt[lba], now - dl.at[lba]) + HL_ONE;
    dl.at[lba] = now;
}

/* lba's expected lifetime: the (decayed) user writes so far over its (decayed) count, rounded up;
 * DL_INF before the trace and for an LBA never counted */
static int64_t hl_estimate(int64_t lba, int64_t now)
{
    int64_t t = now - dl.prefill + 1, c = dl.cnt[lba];
    if (t <= 0)
        return DL_INF;
    if (dl.at[lba] != now)
        c = hl_decay(c, now - dl.at[lba]);
    if (c <= 0)
        return DL_INF;
#if HL_COUNT_HALF == 0
    int64_t total = t * HL_ONE;
#else
    int64_t total = HL_COUNT_TOTAL_INF - hl_decay(HL_COUNT_TOTAL_INF, t);
#endif
    return (total + c - 1) / c;
}

/* a non-hot user write's group: the final plan's group of its estimate's bucket */
static int hl_count_group(int64_t lba, int64_t now)
{
    int64_t e = hl_estimate(lba, now);
    int lo = 0, hi = 127; /* the first bucket whose longest lifetime is >= e; 127: never */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (hl_bucket_hi[mid] >= e)
            hi = mid;
        else
            lo = mid + 1;
    }
    return hl_bucket2group[lo];
}

#define DL_COUNT_WRITE(lba, now) hl_count_write(lba, now)
#define DL_USER_GROUP(lba, now, c) ((void)(c), hl_count_group(lba, now))
#else
#define DL_COUNT_WRITE(lba, now) ((void)0)
#define DL_USER_GROUP(lba, now, c) dl_cat2group[c]
#endif

/* the first bounded group G1..G(K-1) whose upper bound covers rem, else GK */
static int hl_covering_group(int64_t rem)
{
    for (int i = 1; i < DL_N_INTERMEDIATE; ++i)
        if (rem <= hl_group_hi[i])
            return i;
    return DL_N_INTERMEDIATE;
}

/* the relocation table's column of a block of this age: the last grid age <= it (the first if none) */
static int hl_age_column(int64_t age)
{
    int lo = 0, hi = HL_N_AGES; /* lo: the number of grid ages <= age */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (hl_age_grid[mid] <= age)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 ? lo - 1 : 0;
}

static int dl_gc(sim_t *s, int64_t lba, int64_t victim, int64_t now)
{
    int64_t k = DL_N_INTERMEDIATE, vg = s->seg_group[victim];
#if HL_COUNTS /* no Frozen Filter, no floor: the estimate (or the age) against the groups' bounds */
    int64_t rem = now - s->lba_time[lba];
    if (!HL_RELOC_AGE) {
        rem = hl_estimate(lba, now);
        if (rem < DL_INF)
            dl.table_gc += 1;
    }
    (void)vg;
    return hl_covering_group(rem);
#endif
    if (HL_FROZEN_FILTER && !dl.updated[lba]) {
        dl.frozen_gc += 1;
        return (int)k + 1;
    }
    int64_t age = now - s->lba_time[lba];
    int c = dl.lba_class[lba], g = -1;
    if (c >= 1)
        g = hl_reloc_dest[c - 1][hl_age_column(age)];
    if (g < 0) { /* no estimate: the age stands for the remaining lifetime */
        g = hl_covering_group(age);
    } else {
        dl.table_gc += 1;
    }
    if (HL_RELOC_FLOOR && vg >= 1 && vg <= k && g < vg)
        g = (int)vg;
    return g;
}

static int64_t dogi_victim(sim_t *s, int64_t now)
{
    if (HL_EXPIRY_VICTIMS) {
        int64_t best = -1, best_open = (int64_t)1 << 62;
        for (int64_t seg = 0; seg < s->nseg; ++seg) {
            if (s->seg_state[seg] != SEG_SEALED)
                continue;
            int64_t v = s->seg_valid[seg], g = s->seg_group[seg];
            if (v == 0)
                return seg;
            if (dl_expiry[g] < DL_INF && now - s->seg_open_time[seg] > dl_expiry[g] && v < s->seg_wp[seg] &&
                s->seg_open_time[seg] < best_open) {
                best = seg;
                best_open = s->seg_open_time[seg];
            }
        }
        if (best >= 0) {
            dl.expired += 1;
            return best;
        }
    }
    return hl_rule(s, now);
}

static void dl_scheme_setup(sim_t *s)
{
    static const struct {
        const char *name;
        int64_t (*rule)(sim_t *, int64_t);
    } rules[] = {{"greedy", v_greedy}, {"cost_benefit", v_cost_benefit}, {"cost_benefit_sepbit", v_cost_benefit_sepbit},
                 {"fifo", v_fifo}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i)
        if (!strcmp(HL_RULE, rules[i].name))
            hl_rule = rules[i].rule;
    if (!hl_rule)
        die("the hybrid bundle's victim rule %s has no twin in the harness (it runs greedy, cost_benefit, "
            "cost_benefit_sepbit, fifo); export the bundle from a hybrid run with one of them (policy.victim=...)",
            HL_RULE);
    dl.lba_class = xcalloc((size_t)s->cap, 1);
    memset(dl.lba_class, -1, (size_t)s->cap);
#if HL_COUNTS
    dl.cnt = xcalloc((size_t)s->cap, 8);
    dl.at = xcalloc((size_t)s->cap, 8);
#endif
}

/* the hybrid's extra count for the JSON line (the simulator's summary()["learned"]) */
static int dl_scheme_json(char *buf, size_t size)
{
    return snprintf(buf, size, ", \"table_gc_writes\": %lld", (long long)dl.table_gc);
}

#endif
