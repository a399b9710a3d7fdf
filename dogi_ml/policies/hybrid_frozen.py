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

The group layout is compact: G_hot, G1..GK, G_frzn (K + 2 <= 12 groups).
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import new_scalars, record, scalar_fields
from dogi_ml.sim.victims import register_victim

from . import register
from ._dogi_bundle import N_CAT, BundleError, write_bundle
from .dogi import G_FRZN, G_HOT, INF, MODE_ML
from .dogi_frozen import DOGIFrozen, count_if_expired, frozen_user
from .hybrid import BUCKETS_PER_OCTAVE, HYBRID_SCALARS, NEVER_BUCKET, RULES, hybrid_victim

FROZEN_SCALARS = scalar_fields(
    frozen_filter=np.int64,  # 1: survivors not overwritten since the clock's last clear go to G_frzn
    reloc_floor=np.int64,  # 1: a survivor never goes to a hotter group than its source
    table_gc=np.int64,  # GC writes whose group came from the relocation table
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


@nb.njit(cache=True)
def hybrid_frozen_user(s, p, lba, now):
    """dogi_frozen's user placement (Hot Filter, class -> group), and the block's class kept for
    the relocation table."""
    g = frozen_user(s, p, lba, now)
    st = p.scalars[0]
    if now < st.prefill:
        p.lba_class[lba] = -1
    elif g == G_HOT:
        p.lba_class[lba] = 0
    else:
        p.lba_class[lba] = p.preds[now - st.chunk_start] + 1
    return g


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
        g = k  # no estimate: the age stands for the remaining lifetime
        for i in range(1, k):
            if age <= p.group_hi[i]:
                g = i
                break
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
        self.state = HybridFrozenState(
            *base,
            lba_class=np.full(ctx.capacity, -1, np.int8),
            group_hi=np.array([INF if b is None else int(b) for b in d["group_hi"]], np.int64),
            age_grid=np.asarray(d["age_grid"], np.int64),
            reloc_dest=np.asarray(d["reloc_dest"], np.int8).reshape(N_CAT, -1),
            frozen=frozen,
            hyb=hyb,
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
    if h["lifetimes"] != "model":
        raise BundleError(
            f"a hybrid bundle deploys the learned model: lifetimes={h['lifetimes']} has none; run lifetimes=model"
        )
    if h["relocation"] == "dogi":
        raise BundleError(
            "a hybrid bundle deploys relocation by predicted remaining lifetime (or age): relocation=dogi is "
            "dogi_frozen's; run relocation=predicted or age"
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
        if h["relocation"] == "predicted"
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
    }
    source = dict(source or {})
    if trace is not None:
        source.update(decision_agreement(policy, qmodel, cat2group, trace))
    return write_bundle(out_dir, qmodel, policy.model, deploy, source=source)


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
