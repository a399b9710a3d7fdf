"""Hybrid frozen: a hybrid run's (:mod:`dogi_ml.policies.hybrid`) deployed int8 MLP and final
tables, placing writes with no retraining and no planning (issue 40's deployment; the ZNS
harness runs the same placement in C, ``dogi_ml/zns/hybrid_place.h``).

It loads a hybrid deployment bundle (:mod:`dogi_ml.policies._dogi_bundle`, ``scheme: hybrid``,
written from a hybrid run by :func:`export_bundle`) and places, with integers only:

- user writes: as :mod:`dogi_ml.policies.dogi_frozen` (whose kernel it calls): the Hot Filter
  with ``mu`` frozen (G_hot, 0), else the group of the int8 MLP's class in the bundle's class ->
  group table (G1..GK), prefill writes to GK. The table is the hybrid's planner folded onto the
  classes: a class's lifetime is its centre (the mean log2 lifetime of its samples, as the
  hybrid's ``score=argmax``), whose bucket the final plan maps to a group. The hybrid's default
  ``score=expected`` (the expectation over the softmax probabilities) is not deployed: it is not
  integer, and docs/deployment.md measures what the argmax fold costs;
- GC survivors: the Frozen Filter (G_frzn, K + 1) if the run had it, else the relocation table's
  group for the block's class at its age (the hybrid's predicted remaining lifetime -- DOGI's
  Kaplan-Meier table -- against the groups' bounds, precomputed per class and age-grid column);
  a block without an estimate (hot, prefill, or a class without one at that age) goes to the
  group whose bound covers its age; never hotter than its source group (``reloc_floor``);
- victims: the hybrid's selector itself (:func:`dogi_ml.policies.hybrid.hybrid_victim`): a dead
  segment, else the oldest expired segment of a bounded group, else the run's victim rule.

A **count bundle** (``lifetimes: counts``, written from a ``lifetimes=select`` hybrid run whose
last plan placed by per-LBA write counts) places by the counts instead of the MLP's class, in integers (Q16 fixed point, the decay by
halves as a shift and two 256-entry power tables; :func:`count_decay`):

- user writes: each LBA's count (decayed by half every ``count_halflife_blocks``) gains one; a
  non-hot write's expected lifetime is the decayed number of writes so far over its count
  (:func:`count_estimate`, the hybrid's ``t / c_t``), whose quarter-octave bucket the final plan
  maps to a group (``bucket_hi``, ``bucket2group``). The int8 class is still computed and counted;
- GC survivors: the same estimate at the time of the copy (memoryless, as the hybrid's counts
  relocate) against the groups' bounds, or the age with ``relocation: age``; no Frozen Filter and
  no floor (the hybrid applies neither to a count source).

The group layout is compact: G_hot, G1..GK, G_frzn (K + 2 <= 12 groups).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import new_scalars, record, scalar_fields
from dogi_ml.sim.victims import register_victim

from . import register
from ._dogi_bundle import COUNT_ONE, COUNT_POW_STEPS, N_CAT, BundleError, write_bundle
from .dogi import G_FRZN, G_HOT, INF, MODE_ML
from .dogi_frozen import DOGIFrozen, count_if_expired, frozen_user
from .hybrid import (
    BUCKETS_PER_OCTAVE,
    HYBRID_SCALARS,
    N_BUCKETS,
    NEVER_BUCKET,
    RULES,
    _bucket_of,
    covering_group,
    hybrid_victim,
    lifetime_bucket,
)

FROZEN_SCALARS = scalar_fields(
    frozen_filter=np.int64,  # 1: survivors not overwritten since the clock's last clear go to G_frzn
    reloc_floor=np.int64,  # 1: a survivor never goes to a hotter group than its source
    table_gc=np.int64,  # GC writes whose group came from the relocation table (count bundle: from a finite estimate)
    counts=np.int64,  # 1: a count bundle (lifetimes from per-LBA write counts)
    reloc_age=np.int64,  # count bundle: 1 relocates by age, 0 by the count estimate
    count_half=np.int64,  # count bundle: the counts' half-life in user writes (0: no decay)
    count_total_inf=np.int64,  # count bundle: Q16, the decayed writes of an endless trace (0: no decay)
)


class HybridFrozenState(NamedTuple):
    """dogi_frozen's state (its user kernel runs on it) and the hybrid's tables."""

    scalars: np.ndarray
    preds: np.ndarray
    cat2group: np.ndarray  # the class -> group table
    group_expiry: np.ndarray
    group_final: np.ndarray  # (dogi_frozen's field; unused: the hybrid's victims have no final groups)
    updated: np.ndarray
    class_writes: np.ndarray
    lba_class: np.ndarray  # int8 per LBA: class + 1 of its last user write, 0 hot, -1 prefill
    group_hi: np.ndarray  # int64 per group: upper bound (blocks; INF open-ended)
    age_grid: np.ndarray  # int64: the relocation table's ages (ascending)
    reloc_dest: np.ndarray  # int8 [class, age column]: the survivor's group, -1 without an estimate
    frozen: np.ndarray  # one FROZEN_SCALARS record
    hyb: np.ndarray  # one HYBRID_SCALARS record: the victim selector's switches (expiry, rule)
    count: np.ndarray  # count bundle: int64 per LBA, its decayed write count (Q16); empty otherwise
    count_at: np.ndarray  # count bundle: int64 per LBA, the time its count is for
    count_pow: np.ndarray  # count bundle: int64 [2 x COUNT_POW_STEPS], count_pow_table()
    bucket_hi: np.ndarray  # count bundle: int64 [NEVER_BUCKET], the longest lifetime of each bucket
    bucket2group: np.ndarray  # count bundle: int64 [N_BUCKETS], the final plan's group of each bucket


@nb.njit(cache=True)
def count_decay(x, dt, half, pow_table):
    """``x * 2^(-dt / half)`` in integers: a shift per whole half-life, then the power table's two
    entries for the fraction (rounded down to 1/65536 of a half-life, each factor rounded to
    Q16); ``half == 0``: no decay."""
    if half == 0:
        return x
    n = dt // half
    if n >= 48:
        return np.int64(0)
    x = x >> n
    f = ((dt % half) << 16) // half
    x = (x * pow_table[f >> 8]) >> 16
    return (x * pow_table[COUNT_POW_STEPS + (f & 255)]) >> 16


@nb.njit(cache=True)
def count_write(p, lba, now):
    """A user write of ``lba``: its count decays to ``now`` and gains one write."""
    f = p.frozen[0]
    p.count[lba] = count_decay(p.count[lba], now - p.count_at[lba], f.count_half, p.count_pow) + COUNT_ONE
    p.count_at[lba] = now


@nb.njit(cache=True)
def count_lifetime(c, t, half, total_inf, pow_table):
    """The expected lifetime of a write from its LBA's decayed count ``c`` (Q16) after ``t`` user
    writes: the decayed writes so far over ``c``, rounded up; ``INF`` for ``t <= 0`` or ``c <= 0``."""
    if t <= 0 or c <= 0:
        return INF
    total = t * COUNT_ONE if half == 0 else total_inf - count_decay(total_inf, t, half, pow_table)
    return (total + c - 1) // c


@nb.njit(cache=True)
def count_estimate(p, lba, now):
    """The LBA's expected lifetime from the counts (:func:`count_lifetime`, its count decayed to
    ``now``); ``INF`` before the trace and for an LBA it has not written."""
    f = p.frozen[0]
    c = p.count[lba]
    if p.count_at[lba] != now:
        c = count_decay(c, now - p.count_at[lba], f.count_half, p.count_pow)
    return count_lifetime(c, now - p.scalars[0].prefill + 1, f.count_half, f.count_total_inf, p.count_pow)


@nb.njit(cache=True)
def count_group(bucket_hi, bucket2group, e):
    """The final plan's group of lifetime ``e`` (its quarter-octave bucket's)."""
    b = np.searchsorted(bucket_hi, e, side="left")  # the first bucket whose longest lifetime is >= e
    return bucket2group[b]  # (b == NEVER_BUCKET beyond the last bounded bucket)


@nb.njit(cache=True)
def hybrid_frozen_user(s, p, lba, now):
    """dogi_frozen's user placement (Hot Filter, class -> group), and the block's class kept for
    the relocation table; a count bundle counts the write first and places a non-hot write by
    its count estimate."""
    st = p.scalars[0]
    counts = p.frozen[0].counts
    if counts and now >= st.prefill:
        count_write(p, lba, now)
    g = frozen_user(s, p, lba, now)
    if now < st.prefill:
        p.lba_class[lba] = -1
    elif g == G_HOT:
        p.lba_class[lba] = 0
    else:
        p.lba_class[lba] = p.preds[now - st.chunk_start] + 1
        if counts:
            g = count_group(p.bucket_hi, p.bucket2group, count_estimate(p, lba, now))
    return g


@nb.njit(cache=True)
def _count_gc(p, lba, age, now):
    """A count bundle's survivor: the first bounded group covering its count estimate (or its
    age), the coldest if none; no Frozen Filter, no floor."""
    f = p.frozen[0]
    k = p.scalars[0].n_intermediate
    rem = age
    if not f.reloc_age:
        e = count_estimate(p, lba, now)
        if e < INF:
            rem = e
            f.table_gc += 1
        else:
            rem = INF
    return covering_group(p.group_hi, rem, 1, k)


@nb.njit(cache=True)
def hybrid_frozen_gc(s, p, lba, victim, now):
    """The hybrid's relocation (policies/hybrid.py, hybrid_gc) from the bundle's table: the first
    group G1..G(K-1) whose bound covers the remaining lifetime is precomputed per class and age
    column, the age's when there is no estimate; the floor lifts it to the source group (the
    bounds increase, so the first covering group at or above the source is the larger of the two)."""
    st = p.scalars[0]
    f = p.frozen[0]
    k = st.n_intermediate
    vg = s.seg_group[victim]
    if f.counts:
        return _count_gc(p, lba, now - s.lba_time[lba], now)
    if f.frozen_filter and p.updated[lba] == 0:
        st.frozen_gc += 1
        return k + 1
    age = now - s.lba_time[lba]
    c = p.lba_class[lba]
    g = -1
    if c >= 1:
        grid = p.age_grid
        j = np.searchsorted(grid, age, side="right") - 1
        g = p.reloc_dest[c - 1, max(j, 0)]
    if g < 0:
        g = covering_group(p.group_hi, age, 1, k)  # no estimate: the age stands for the remaining lifetime
    else:
        f.table_gc += 1
    if f.reloc_floor and vg >= 1 and vg <= k and g < vg:
        g = vg
    return g


@nb.njit(cache=True)
def hybrid_frozen_victim(s, p, now):
    """The hybrid's selector, counting the victims the expiry scan chose (with ``victims=rule``
    none: the rule alone picks)."""
    seg = hybrid_victim(s, p, now)
    if seg >= 0 and p.hyb[0].expiry:
        count_if_expired(s, p, seg, now)
    return seg


register_victim("hybrid_frozen", hybrid_frozen_victim)


@register
class HybridFrozen(DOGIFrozen):
    name = "hybrid_frozen"
    victim = "hybrid_frozen"
    selector = "hybrid_frozen"
    victim_rules = ()
    victim_note = "the hybrid's: a dead or expired segment first, then the bundle's victim rule"
    place_user = hybrid_frozen_user
    place_gc = hybrid_frozen_gc
    scheme = "hybrid"  # DOGIFrozen loads and checks the bundle, computes features and classifies

    def bind(self, ctx):
        base = super().bind(ctx)  # refuses a missing bundle, another capacity, no trace
        d = self.bundle.deploy
        frozen = new_scalars(FROZEN_SCALARS)
        f = record(frozen)
        f.frozen_filter = int(bool(d["frozen_filter"]))
        f.reloc_floor = int(bool(d["reloc_floor"]))
        hyb = new_scalars(HYBRID_SCALARS)
        h = record(hyb)
        h.expiry = int(bool(d["expiry_victims"]))
        h.rule = RULES.index(d["victim_rule"])
        counts = d.get("lifetimes", "model") == "counts"
        f.counts = int(counts)
        if counts:
            f.reloc_age = int(d["relocation"] == "age")
            f.count_half = int(d["count_halflife_blocks"] or 0)
            f.count_total_inf = int(d["count_total_inf"] or 0)
        n_counted = ctx.capacity if counts else 0
        self.state = HybridFrozenState(
            *base,
            lba_class=np.full(ctx.capacity, -1, np.int8),
            group_hi=np.array([INF if b is None else int(b) for b in d["group_hi"]], np.int64),
            age_grid=np.asarray(d["age_grid"], np.int64),
            reloc_dest=np.asarray(d["reloc_dest"], np.int8).reshape(N_CAT, -1),
            frozen=frozen,
            hyb=hyb,
            count=np.zeros(n_counted, np.int64),
            count_at=np.zeros(n_counted, np.int64),
            count_pow=np.asarray(d["count_pow"] if counts else [COUNT_ONE], np.int64),
            bucket_hi=np.asarray(d["bucket_hi"] if counts else [1], np.int64),
            bucket2group=np.asarray(d["bucket2group"] if counts else [1, 1], np.int64),
        )
        return self.state

    def summary(self, state) -> dict:
        out = super().summary(state)
        out["learned"]["table_gc_writes"] = int(record(state.frozen).table_gc)
        return out


def class_groups(policy) -> tuple[list[int], str]:
    """The class -> group table of a hybrid run's final configuration, and how it was made: with
    the planner's plan applied, each class's centre's lifetime bucket through the plan's bucket ->
    group map (the hybrid's ``score=argmax``); before a plan (DOGI's search meanwhile, or
    ``groups=dogi``), DOGI's category -> group map, which the hybrid then places with."""
    p = policy.state
    if not record(p.hyb).planned:
        return [int(g) for g in p.cat2group], "dogi"
    buckets = np.clip(np.ceil(BUCKETS_PER_OCTAVE * policy.centres), 0, NEVER_BUCKET - 1).astype(np.int64)
    return [int(p.bucket2group[b]) for b in buckets], "opmodel"


def relocation_table(remaining: np.ndarray, group_hi: np.ndarray, n: int) -> np.ndarray:
    """Per class and age column, the first group G1..G(n-1) whose upper bound covers the class's
    predicted remaining lifetime there (Gn if none), -1 where the estimate is unknown (< 0): the
    hybrid's relocation (hybrid_gc) evaluated once per table cell."""
    rem = np.asarray(remaining, np.int64)
    out = np.full(rem.shape, n, np.int8)
    for g in range(n - 1, 0, -1):  # coldest first, so the hottest covering group is written last
        out[rem <= group_hi[g]] = g
    out[rem < 0] = -1
    return out


def export_bundle(policy, out_dir, trace=None, source: dict | None = None):
    """A hybrid deployment bundle from a hybrid policy (:class:`dogi_ml.policies.hybrid.Hybrid`)
    after its run: its final float MLP quantised to int8 (calibrated on the sample ring's feature
    rows, as DOGI quantises its training rows), the hot threshold, the class -> group table, the
    groups' bounds and expiry ages, the relocation table and the victim settings. With ``trace``
    (the run's), ``source`` gains the share of its writes on which the int8 class equals the float
    model's argmax and the bundle's group the float hybrid's (its ``score``, its final plan)."""
    from dogi_ml.features.extract import FeatureConfig

    h = policy.hcfg
    st = record(policy.state.scalars)
    hr = record(policy.state.hyb)
    if h["lifetimes"] not in ("model", "select"):
        raise BundleError(
            f"a hybrid bundle holds the learned int8 MLP (and places by it or by the write counts): "
            f"lifetimes={h['lifetimes']} trains none; run lifetimes=select (a count source that wins its last plan "
            "deploys as a count bundle) or lifetimes=model"
        )
    if h["lifetimes"] == "select" and not hr.planned:
        raise BundleError(
            "the hybrid run (lifetimes=select) made no plan: its bundle deploys the last plan's source and "
            "bucket -> group map; use a longer trace (or a smaller policy.params.min_horizon)"
        )
    counts = h["lifetimes"] == "select" and bool(hr.frequency)  # the last plan's source: a count variant
    if counts and hr.reset and policy.freq_decays_of_plan() == 0 and policy.count_changes() > 0:
        raise BundleError(
            f"the hybrid run's last plan placed by the undecayed counts, which restarted at "
            f"{policy.count_changes()} detected changes (count_reset={h['count_reset']}); a count bundle counts "
            "from the first write and has no change test: export a run without count_reset, or one whose last "
            "plan chose a decayed count source"
        )
    if h["relocation"] == "dogi" or (counts and h["relocation"] == "censored"):
        raise BundleError(
            f"a hybrid bundle deploys relocation by predicted remaining lifetime (or age): relocation={h['relocation']} "
            f"{'is dogi_frozen' if h['relocation'] == 'dogi' else 'has no integer form'}; run relocation=predicted or age"
        )
    if policy.model is None or int(st.mode) != MODE_ML:
        raise BundleError(
            "the hybrid run ended without a deployed model (too short a trace, or its fallback mode): no learned "
            "configuration to export; use a longer trace or policy.params.fallback_accuracy=0 fallback_compare=none"
        )
    p = policy.state
    n = int(st.n_intermediate)
    groups = [G_HOT, *range(1, n + 1), G_FRZN]
    ring = policy.ring
    filled = int(min(ring.count[0], ring.row.size))
    slots = np.flatnonzero(ring.time[:filled] >= 0)
    qmodel = policy._quantise(policy.model, p.sample_features[slots])
    cat2group, plan = class_groups(policy)
    group_hi = p.group_hi[groups]
    dest = (
        relocation_table(p.remaining, group_hi, n)
        if h["relocation"] in ("predicted", "censored")  # (censored reads the model's estimate as predicted does)
        else np.full(p.remaining.shape, -1, np.int8)
    )
    cfg = FeatureConfig(capacity_blocks=policy.capacity)

    def finite(values):
        return [None if int(v) >= int(INF) else int(v) for v in values]

    deploy = {
        "scheme": "hybrid",
        "features": list(policy.cfg["features"]),
        "feature_window": int(cfg.window),
        "feature_chunk_blocks": int(cfg.chunk_blocks),
        "mu": int(st.hot_threshold),
        "bounds": [int(b) for b in p.bounds],
        "n_intermediate": n,
        "cat2group": cat2group,
        "class_groups_from": plan,
        "group_hi": finite(group_hi),
        "group_expiry": finite(p.group_expiry[groups]),
        "age_grid": [int(a) for a in p.age_grid],
        "reloc_dest": dest.tolist(),
        "reloc_floor": int(hr.reloc_floor),
        "frozen_filter": int(st.frozen_filter),
        "expiry_victims": int(hr.expiry),
        "victim_rule": RULES[int(hr.rule)],
        "frozen_clock": int(st.frozen_clock),
        "capacity_blocks": int(policy.capacity),
        "hybrid": dict(h),
        "configuration": policy.configuration,
        "lifetimes": "model",
    }
    if counts:
        deploy.update(count_tables(policy))
    source = dict(source or {})
    if trace is not None:
        source.update(decision_agreement(policy, qmodel, cat2group, trace))
        if counts:  # the writes are placed by the counts: the class -> group table places none
            del source["group_agreement"]
            source.update(count_agreement(deploy, policy.count_halflives[int(hr.variant)], policy.capacity, trace))
    return write_bundle(out_dir, qmodel, policy.model, deploy, source=source)


def count_pow_table() -> list[int]:
    """``round(2^16 * 2^(-i / 256))`` for i in 0..255, then ``round(2^16 * 2^(-j / 65536))`` for j
    in 0..255: the decay of a fraction of a half-life, high byte and low byte."""
    coarse = [int(round(COUNT_ONE * 2.0 ** (-i / COUNT_POW_STEPS))) for i in range(COUNT_POW_STEPS)]
    fine = [int(round(COUNT_ONE * 2.0 ** (-j / COUNT_POW_STEPS**2))) for j in range(COUNT_POW_STEPS)]
    return coarse + fine


def count_total_inf(half: int) -> int:
    """Q16: the decayed writes of an endless trace, ``sum_i 2^(-i / half)``, so that the first
    ``t`` writes weigh ``total_inf - decay(total_inf, t)``."""
    return int(round(COUNT_ONE / -math.expm1(-math.log(2.0) / half)))


def bucket_highs() -> list[int]:
    """The longest lifetime (user writes) of each bounded quarter-octave bucket: the largest
    integer ``t`` with ``lifetime_bucket(t) <= b`` (non-decreasing: buckets 1..3 hold no integer);
    the last bounded bucket holds every finite lifetime beyond (``INF - 1``: the estimate of an
    LBA without a count, ``INF``, falls in ``NEVER_BUCKET``)."""
    highs = []
    for b in range(NEVER_BUCKET - 1):
        t = max(int(np.floor(2.0 ** (b / BUCKETS_PER_OCTAVE))), 1)
        while lifetime_bucket(t + 1) <= b:
            t += 1
        while t > 1 and lifetime_bucket(t) > b:
            t -= 1
        highs.append(t)
    return [*highs, int(INF) - 1]


def count_tables(policy) -> dict:
    """A count bundle's keys: the final plan's count source (its half-life in user writes), the
    integer tables and the plan's bucket -> group map; a count source uses no Frozen Filter and
    no floor, and no relocation table."""
    hl = policy.count_halflives[int(record(policy.state.hyb).variant)]
    half = None if hl is None else max(int(round(float(hl) * policy.capacity)), 1)
    return {
        "lifetimes": "counts",
        "count_halflife_blocks": half,
        "count_total_inf": None if half is None else count_total_inf(half),
        "count_pow": count_pow_table(),
        "bucket_hi": bucket_highs(),
        "bucket2group": [int(g) for g in policy.state.bucket2group[:N_BUCKETS]],
        "relocation": policy.hcfg["relocation"],
        "frozen_filter": 0,
        "reloc_floor": 0,
        "reloc_dest": np.full((N_CAT, len(policy.state.age_grid)), -1).tolist(),
    }


@nb.njit(cache=True)
def _count_groups_float_and_int(lbas, n_lbas, lam, half, total_inf, pow_table, bucket_hi, bucket2group):
    """Per trace write, the group of its count estimate in floats (the formula of the hybrid's
    ``_count_write`` and ``_frequency_lifetime``, which read the policy's state: decay
    ``exp(-lam dt)``, ``ceil(total / c)``, its bucket) and in the bundle's integers
    (:func:`count_lifetime`, :func:`count_group`); returns the number of writes on which they agree."""
    seen = np.zeros(n_lbas, np.float64)
    count = np.zeros(n_lbas, np.int64)
    at = np.zeros(n_lbas, np.int64)
    agree = 0
    for i in range(lbas.shape[0]):
        a = lbas[i]
        c = seen[a]
        if lam > 0 and c > 0:
            c *= np.exp(-lam * (i - at[a]))
        seen[a] = c + 1.0
        t = i + 1
        total = float(t) if lam == 0 else np.expm1(-lam * t) / np.expm1(-lam)
        g_float = bucket2group[_bucket_of(np.ceil(total / seen[a]))]
        count[a] = count_decay(count[a], i - at[a], half, pow_table) + COUNT_ONE
        at[a] = i
        g_int = count_group(bucket_hi, bucket2group, count_lifetime(count[a], t, half, total_inf, pow_table))
        agree += g_float == g_int
    return agree


def count_agreement(deploy: dict, halflife, capacity: int, trace) -> dict:
    """On every write of ``trace``: the share whose group from the bundle's integer counts equals
    the group from the hybrid's float counts (the same final plan's bucket -> group map)."""
    lbas = np.asarray(trace.block_writes, np.int64)
    if lbas.size == 0:
        return {"count_group_agreement": None}
    _, dense = np.unique(lbas, return_inverse=True)
    lam = 0.0 if halflife is None else math.log(2.0) / (float(halflife) * capacity)
    agree = _count_groups_float_and_int(
        dense.astype(np.int64),
        int(dense.max()) + 1,
        lam,
        int(deploy["count_halflife_blocks"] or 0),
        int(deploy["count_total_inf"] or 0),
        np.asarray(deploy["count_pow"], np.int64),
        np.asarray(deploy["bucket_hi"], np.int64),
        np.asarray(deploy["bucket2group"], np.int64),
    )
    return {"count_group_agreement": float(agree) / lbas.size}


def decision_agreement(policy, qmodel, cat2group, trace) -> dict:
    """On every write of ``trace``: the share whose int8 class is the float model's argmax, and
    whose bundle group (class -> group table of the int8 class) is the group the float hybrid's
    final configuration gives it (its ``score`` of the float probabilities, its bucket -> group
    map; before a plan its category's group) -- the placement of a non-hot write."""
    from dogi_ml.features.extract import FEATURES, FeatureConfig, extract_features

    cols = [FEATURES.index(f) for f in policy.cfg["features"]]
    X = extract_features(trace, FeatureConfig(capacity_blocks=policy.capacity))[:, cols]
    proba = policy.model.predict_proba(X)
    float_class = proba.argmax(axis=1)
    int8_class = qmodel.predict(X)
    bundle_group = np.asarray(cat2group)[int8_class]
    if record(policy.state.hyb).planned:
        float_group = policy.state.bucket2group[policy._buckets_of(proba)]
    else:
        float_group = policy.state.cat2group[float_class]
    return {
        "agreement_writes": int(X.shape[0]),
        "class_agreement": float(np.mean(int8_class == float_class)) if X.shape[0] else None,
        "group_agreement": float(np.mean(bundle_group == float_group)) if X.shape[0] else None,
    }
