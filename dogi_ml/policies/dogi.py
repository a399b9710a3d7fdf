"""DOGI (dogi-fast26 §4): hybrid user-write placement, PLog-driven group configuration and
ML-assisted relocation.

Groups (fixed indices; a group that is not in use holds no segment):

- ``G_hot`` (0): user writes whose latest invalidation time is ``<= mu`` (Hot Filter, §4.2.1);
  ``mu`` adapts per window of ``n`` user writes by ``d`` (keep if WAF moved < 5%, undo a step
  that made WAF worse); beyond the paper, ``mu_rule=sepbit`` takes SepBIT's Class-1 threshold
  instead (:func:`dogi_reclaim`);
- ``G1..GN`` (1..N, N <= 10): the ML-Alloc's categories c1..c10, merged into N contiguous
  groups by the Markov-chain search over PLog (``dogi_ml.markov.groups``, §4.3); a group's BIR is the
  union of its categories' ranges;
- ``G_frzn`` (11): GC-written blocks never updated since the Frozen Filter's clock last cleared
  their bit (§4.4);
- fallback / base design (12..14): one non-hot user group and two age-based GC groups (young,
  old), used before the first model, when the model's accuracy falls below a threshold, and as
  the ablation baseline;
- age tiers beyond the last BIR (15..17, ``final_tiers``): GC survivors of ``GN`` go to
  ``T1``, those of ``T1``/``T2`` to ``T2``, survivors of ``G_frzn`` to ``G_frzn_old``, instead of
  being copied back among the blocks they outlived.

Groups a new configuration or mode no longer writes are retired between chunks
(``retire_unused``): their half-written open segments are sealed, so they become victims.

ML-Alloc (§4.2.2–4.2.3): the classifier predicts a category for every non-hot user write,
batched per chunk (inference runs between chunks, on the causal features of exactly the writes
the loop applies next). Training samples: one in ``sample_every`` non-hot writes, labelled
online when the LBA is overwritten; the model is retrained every ``retrain_every`` user writes
(100 GiB at 128 GiB, scaled); every labelled sample of the ring trains (``train_span``,
``label_lag``, ``censored_labels``: the paper's ~0.3-capacity span and the authors' labelling,
measured in docs/dogi.md). PLog: the new model's predictions on the latest held-out samples with
their actual invalidation times (``plog=mature``: on every sample older than c10's lower bound,
a pending one at its age).

ML-Reloc (§4.4): per category, the mean remaining lifetime of a block that has lived a given
age, tabulated over a log grid of ages from survival records: every sample in the ring, an
overwritten one with its invalidation time, a pending one right-censored at its age, categorised
by the new model (``reloc_estimate``: ``km`` Kaplan–Meier's restricted mean residual life;
``trimmed_geomean`` the authors' geometric mean of the survivors without the longest 15%;
``mean`` the paper's mean of the survivors). A first relocation reads it at the source group's
BIR bound (``reloc_remainder=bound``, the paper's 70 - 50) or at the block's age, and goes to
the first group from its source on (``reloc_floor``) whose BIR covers it; a block relocated
before (or with no estimate) moves to the next group.

Victims: the oldest expired segment (residence since its first write > its group's BIR upper
bound) of ``G_hot..G(N-1)``; else cost-benefit (the authors' code; ``final_victim: greedy`` for
the paper's text) over ``GN``, ``G_frzn`` and groups out of use.

Ablations (Fig. 14) by ``variant``: ``base`` (HF + one non-hot group + two age-based GC
groups), ``user`` (+ML-Alloc into ten groups, one per category), ``grp`` (+ the group search),
``full`` (+FF and ML-Reloc: DOGI). ``predictor: latest`` replaces the model by the latest
invalidation time's category (Fig. 11's *Latest*).

Fallback comparison (``fallback_compare=ghost``): a ghost store runs the base design on the
same writes; a model whose period measured a WAF above the ghost's (by more than
``fallback_margin``) is switched off, and a later one is deployed again only when its modelled
WAF, calibrated by the last ML period's measured / modelled ratio, beats the ghost's.

Accuracy is measured online without future knowledge: when an LBA is overwritten, the class
predicted for its previous version (hot or c1..c10) is compared with the class of its actual
invalidation time (Fig. 11; a c1 placement of a block that turned out hot counts as right, it died within G1's
BIR); a GC-written block is correct if it dies within the BIR of the
group it was relocated to, measured from the relocation (Fig. 12).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.features.extract import FEATURES, FeatureConfig, FeatureStream
from dogi_ml.sim.kernels import prefetch
from dogi_ml.sim.policy_api import (
    PlacementPolicy,
    SimContext,
    new_scalars,
    record,
    refuse_unknown_params,
    refuse_unread_params,
    scalar_fields,
)
from dogi_ml.sim.state import C_GC, C_USER, P_NSEG, P_SEG_BLOCKS, SEG_SEALED
from dogi_ml.sim.victims import register_victim
from dogi_ml.traces.trace import lbas_to_compact

from . import register
from ._online import RingArrays, SampleRing, fit_classifier, ring_fill, ring_record

PAPER_CAPACITY = 33_554_432  # 128 GiB in 4 KiB blocks: the paper's parameters scale from it
N_CAT = 10
INF = np.int64(1 << 58)

G_HOT, G_FRZN, FB_COLD, FB_GC_YOUNG, FB_GC_OLD = 0, 11, 12, 13, 14
G_TIER1, G_TIER2, G_FRZN_OLD = 15, 16, 17  # GC survivors of GN (twice) and of G_frzn (final_tiers)
N_GROUPS = 18
#: ages (user writes) at which ML-Reloc tabulates each category's mean remaining lifetime
N_AGE_GRID = 96
MODE_FALLBACK, MODE_ML = 0, 1
VARIANTS = {"base": (0, 0, 0), "user": (1, 0, 0), "grp": (1, 1, 0), "full": (1, 1, 1)}

#: DOGI's scalar parameters and counters (``DogiState.scalars``, one record)
SCALARS = scalar_fields(
    hot_threshold=np.int64,  # mu: a user write whose latest invalidation time is <= mu is hot
    hot_step=np.int64,  # d: the Hot Filter's step
    window_writes=np.int64,  # n: user writes per Hot-Filter window
    next_window_at=np.int64,  # user-write count that ends the current window
    last_step=np.int64,  # the last window's step: -1, 0 or 1 (times d)
    mode=np.int64,  # MODE_FALLBACK or MODE_ML
    n_intermediate=np.int64,  # N: intermediate groups G1..GN in use
    chunk_start=np.int64,  # logical time of the current chunk's first write (preds index)
    feat_buf=np.int64,  # which of chunk_features' two buffers holds the current chunk's rows
    prefill=np.int64,  # prefill writes (logical times before it are not placed by class)
    sample_every=np.int64,  # one in this many non-hot writes becomes a training sample
    nonhot_writes=np.int64,  # non-hot user writes so far
    frozen_clock=np.int64,  # user writes between Frozen-Filter clears
    next_clock_at=np.int64,  # user-write count of the next clear
    user_ml=np.int64,  # 1: ML-Alloc places non-hot user writes (variant)
    gc_relocation=np.int64,  # 0: two age-based GC groups, 1: FF + ML-Reloc, 2: FF + next group
    window_user0=np.int64,  # user writes at the window's start
    window_gc0=np.int64,  # GC writes at the window's start
    fallback_gc_age=np.int64,  # age splitting the fallback's young and old GC groups
    final_greedy=np.int64,  # 1: greedy, 0: cost-benefit among the open-ended groups
    predictor_latest=np.int64,  # 1: the latest invalidation time's category instead of the model
    adapt_mu=np.int64,  # 1: mu adapts per window
    hot_threshold_max=np.int64,  # mu's ceiling (c1 must stay non-empty)
    hot_threshold_steps=np.int64,  # windows that changed mu
    frozen_filter=np.int64,  # 1: the Frozen Filter sends never-updated GC blocks to G_frzn
    gc_correct=np.int64,  # relocated blocks that died within their group's BIR (Fig. 12)
    gc_scored=np.int64,  # relocated blocks overwritten since (scored for GC accuracy)
    mispredicted=np.int64,  # ML-placed user writes that outlived their group's BIR (Fig. 13)
    mispredict_scored=np.int64,  # ML-placed user writes overwritten since
    window_waf=np.float64,  # WAF of the last Hot-Filter window (0 before the first)
    hot_writes=np.int64,  # user writes placed in G_hot (after prefill)
    placed_writes=np.int64,  # user writes placed after prefill (hot share's denominator)
    reloc_from_bound=np.int64,  # 1: a first relocation's remainder is counted from its group's BIR bound
    reloc_floor=np.int64,  # 1: a survivor never goes to a hotter group than its source
    reloc_repeat=np.int64,  # 1: later relocations use the estimate too (at the block's age)
    final_tiers=np.int64,  # 1: survivors of GN / G_frzn go to age tiers beyond the last BIR
    shift_bounds=np.int64,  # 1: c1..c9's bounds move up with mu (c1 keeps its initial width)
    c1_width=np.int64,  # c1's initial width (its upper bound minus the initial mu)
    mu_sepbit=np.int64,  # 1: mu_rule=sepbit (mu from the lifespans of reclaimed G_hot segments)
    hot_span_sum=np.int64,  # mu_rule=sepbit: lifespans of the G_hot segments reclaimed in the current window
    hot_spans=np.int64,  # mu_rule=sepbit: how many (the window closes at HOT_SPAN_WINDOW)
)
#: mu_rule=sepbit: reclaimed G_hot segments per estimate of mu (SepBIT's 16 Class-1 segments)
HOT_SPAN_WINDOW = 16


#: DOGI's per-LBA state, one 16-byte row per LBA (issue 18): a user write and a GC relocation
#: touch one cache line instead of one per separate array (six of them before, the sample
#: ring's ``pending`` included)
LBA_ROW = np.dtype(
    [
        ("reloc_time", np.int64),  # time of the LBA's last relocation
        ("ring_slot", np.int32),  # the sample ring's slot of its pending sample, -1 if none
        ("lba_class", np.int8),  # class placed for its live version (hot 0, c_k k), -1 if none
        ("reloc_group", np.int8),  # group GC last moved it to, -1 if scored or never
        ("updated", np.uint8),  # overwritten since the Frozen Filter's last clear
        ("reloc_count", np.uint8),  # relocations of its live version (saturates at 255)
    ],
    align=True,
)
assert LBA_ROW.itemsize == 16


def new_lba_rows(capacity: int) -> np.ndarray:
    """Per-LBA rows before any write: no class, no relocation, not updated, not sampled."""
    rows = np.zeros(capacity, LBA_ROW)
    rows["ring_slot"] = -1
    rows["lba_class"] = -1
    rows["reloc_group"] = -1
    return rows


class DogiState(NamedTuple):
    """DOGI's state in the Numba loop."""

    scalars: np.ndarray  # one SCALARS record
    preds: np.ndarray  # int8 per write of the current chunk: the model's category, -1 if none
    cat2group: np.ndarray  # int64 per category: its group G1..GN (FB_COLD before a model)
    group_lo: np.ndarray  # int64 per group: lower bound of its BIR
    group_hi: np.ndarray  # int64 per group: upper bound of its BIR (INF: open-ended)
    group_final: np.ndarray  # uint8 per group: 1 if its segments are fallback victims
    bounds: np.ndarray  # int64: [mu, c1..c9 upper bounds] of the eleven classes
    base_bounds: np.ndarray  # int64: the initial bounds (c1..c9 never go below them)
    remaining: np.ndarray  # int64 [category, age grid]: ML-Reloc's mean remaining lifetime at that age, -1 if unknown
    age_grid: np.ndarray  # int64 [N_AGE_GRID]: the ages of ``remaining``'s columns (ascending)
    rows: np.ndarray  # LBA_ROW per LBA: class, relocation group/time/count, updated, ring slot
    user_confusion: np.ndarray  # int64 [placed class, actual class] of overwritten user writes
    gc_destinations: np.ndarray  # int64 [victim group, destination group] of GC writes
    ring: RingArrays  # online training samples
    group_expiry: np.ndarray  # int64 per group: expiry age of its segments (INF: none)
    chunk_features: np.ndarray  # int64 [buffer, write of the chunk, feature]: two buffers, the
    # current chunk's and the next one's (filled by the feature thread while the loop runs)
    sample_features: np.ndarray  # int64 [ring slot, feature]


@nb.njit(cache=True, inline="always")
def _class_of(bounds, v):
    """0 = hot (``v <= mu``), k = c_k (``v <= bounds[k]``), 10 = c10."""
    for k in range(bounds.shape[0]):
        if v <= bounds[k]:
            return k
    return bounds.shape[0]


@nb.njit(cache=True)
def _shift_bounds(bounds, base, mu, width):
    """c1..c9's upper bounds for hot threshold ``mu``: c1 ends ``width`` above mu (never below
    its initial bound), each next category doubles (issue 12 §4: with fixed bounds c1 shrinks
    to one block when mu reaches its ceiling)."""
    c1 = max(base[1], mu + width)
    for k in range(1, bounds.shape[0]):
        bounds[k] = max(base[k], c1 << (k - 1))


@nb.njit(cache=True)
def _adapt_mu(s, p):
    """Hot Filter's window step (Fig. 6), at the end of a window of user writes."""
    st = p.scalars[0]
    du = s.ctr[C_USER] - st.window_user0
    dg = s.ctr[C_GC] - st.window_gc0
    st.window_user0 = s.ctr[C_USER]
    st.window_gc0 = s.ctr[C_GC]
    st.next_window_at = s.ctr[C_USER] + st.window_writes
    if du <= 0:
        return
    waf = (du + dg) / du
    prev = st.window_waf
    st.window_waf = waf
    if prev <= 0 or st.adapt_mu == 0 or st.mu_sepbit:
        return
    change = abs(waf - prev) / prev
    step = 0
    if change < 0.05:
        step = 0
    elif waf < prev:
        step = 1  # accepting more hot blocks helped: keep going
    elif st.last_step == 1:
        step = -1  # the last increase made things worse: undo it
    mu = st.hot_threshold + step * st.hot_step
    if mu < st.hot_step:
        mu = st.hot_step
    st.last_step = step
    _set_mu(p, st, mu)


@nb.njit(cache=True)
def _set_mu(p, st, mu):
    """The Hot Filter's new threshold (at most its ceiling), wherever DOGI keeps it."""
    if mu > st.hot_threshold_max:
        mu = st.hot_threshold_max
    if mu != st.hot_threshold:
        st.hot_threshold_steps += 1
    st.hot_threshold = mu
    p.bounds[0] = mu
    if st.shift_bounds:
        _shift_bounds(p.bounds, p.base_bounds, mu, st.c1_width)
    p.group_hi[G_HOT] = mu
    if st.mode == MODE_ML:
        p.group_expiry[G_HOT] = mu


@nb.njit(cache=True)
def dogi_reclaim(s, p, victim, now):
    """``mu_rule=sepbit``: SepBIT's threshold for its Class 1 (policies/sepbit.py, Algorithm 1's
    ``l``) as the Hot Filter's mu. Each reclaimed G_hot segment's lifespan (reclaim time minus its
    first append, as SepBIT's ``variant=paper``) is summed; after 16 of them mu becomes the largest
    lifetime below their mean (SepBIT's test is ``v < l``, the Hot Filter's ``v <= mu``)."""
    st = p.scalars[0]
    if st.mu_sepbit == 0 or st.adapt_mu == 0 or s.seg_group[victim] != G_HOT:
        return
    st.hot_span_sum += now - s.seg_open_time[victim]
    st.hot_spans += 1
    if st.hot_spans == HOT_SPAN_WINDOW:
        _set_mu(p, st, max((st.hot_span_sum - 1) // HOT_SPAN_WINDOW, 1))
        st.hot_span_sum = 0
        st.hot_spans = 0


# dogi_user, dogi_gc and their helpers are inline="always" (dogi_ml/sim/_loop_template.py says
# why): the loop and the hybrid's hybrid_user/hybrid_gc call them on every block.
@nb.njit(cache=True, inline="always")
def dogi_user(s, p, lba, now):
    st = p.scalars[0]
    bounds = p.bounds
    last = s.lba_time[lba]
    row = p.rows[lba]  # a reference: its fields are read and written in place
    v = INF
    if last >= 0:
        v = now - last
        pc = row.lba_class
        if pc >= 0:
            p.user_confusion[pc, _class_of(bounds, v)] += 1
            if pc >= 1 and st.mode == MODE_ML:
                # Fig. 13's misprediction: outlived the BIR of the group it was placed in
                if v > p.group_hi[p.cat2group[pc - 1]]:
                    st.mispredicted += 1
                st.mispredict_scored += 1
        rg = row.reloc_group
        if rg >= 0:
            r = now - row.reloc_time
            if r >= p.group_lo[rg] and r <= p.group_hi[rg]:
                st.gc_correct += 1
            st.gc_scored += 1
            row.reloc_group = -1
        row.updated = 1
        row.reloc_count = 0
        ring_fill(p.ring, lba, v)
    if now < st.prefill:
        row.lba_class = -1
        return FB_COLD
    if s.ctr[C_USER] >= st.next_window_at:
        _adapt_mu(s, p)
    if st.frozen_filter and s.ctr[C_USER] >= st.next_clock_at:
        rows = p.rows  # the Frozen Filter's clock: forget updates of long ago
        for i in range(rows.shape[0]):
            rows[i].updated = 0
        st.next_clock_at = s.ctr[C_USER] + st.frozen_clock
    st.placed_writes += 1
    if v <= st.hot_threshold:
        row.lba_class = 0
        st.hot_writes += 1
        return G_HOT
    latest_cat = _class_of(bounds, v) - 1
    cat = latest_cat
    g = FB_COLD
    model_pred = -1
    if st.mode == MODE_ML:
        if st.predictor_latest == 0:
            c = p.preds[now - st.chunk_start]
            if c >= 0:
                cat = c
                model_pred = c
        else:
            model_pred = latest_cat  # Latest's "prediction" feeds its PLog
        g = p.cat2group[cat]
    row.lba_class = cat + 1
    st.nonhot_writes += 1
    if st.nonhot_writes % st.sample_every == 0:
        ring = p.ring
        slot = ring_record(ring, lba, now - st.prefill, now, model_pred)
        cf = p.chunk_features
        if cf.shape[1] > 0:
            # keep the sample's features (the chunk buffer is overwritten by the next chunk);
            # element by element: the loop runs without Numba's runtime, so no array views
            rf = p.sample_features
            i = now - st.chunk_start
            b = st.feat_buf
            for f in range(cf.shape[2]):
                rf[slot, f] = cf[b, i, f]
    return g


@nb.njit(cache=True, inline="always")
def _next_group(vg, nint):
    """Age-based relocation: one group further (G_hot -> G1, GN and G_frzn stay)."""
    if vg == G_HOT:
        return 1
    if vg >= 1 and vg < nint:
        return vg + 1
    if vg == G_FRZN:
        return G_FRZN
    return nint


@nb.njit(cache=True, inline="always")
def _remaining(p, cat, age):
    """ML-Reloc's mean remaining lifetime of a category-``cat`` block that has lived ``age``
    (the table's value at the largest tabulated age <= ``age``), -1 if unknown."""
    grid = p.age_grid
    j = np.searchsorted(grid, age, side="right") - 1
    if j < 0:
        j = 0
    return p.remaining[cat, j]


@nb.njit(cache=True, inline="always")
def _ml_reloc(p, st, row, vg, age):
    """ML-Reloc's destination among G1..GN, -1 without an estimate (§4.4): the group whose BIR
    covers the category's mean remaining lifetime, counted from the source group's BIR bound
    (``reloc_from_bound``, the paper's 70 - 50) or from the block's age, never hotter than the
    source (``reloc_floor``)."""
    nint = st.n_intermediate
    cat = row.lba_class - 1
    if cat < 0:
        return -1
    first = row.reloc_count == 0
    if not first and st.reloc_repeat == 0:
        return -1
    ghi = p.group_hi
    at = age
    if first and st.reloc_from_bound and vg >= 1 and vg < nint and ghi[vg] < INF:
        at = ghi[vg]
    rem = _remaining(p, cat, at)
    if rem < 0:
        return -1
    lo = 1
    if st.reloc_floor and vg >= 1 and vg < G_FRZN:
        lo = min(vg, nint)  # a group a shrinking N dropped counts as the coldest
    for k in range(lo, nint):
        if rem <= ghi[k]:
            return k
    return nint


@nb.njit(cache=True, inline="always")
def dogi_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    vg = s.seg_group[victim]
    age = now - s.lba_time[lba]
    row = p.rows[lba]
    if st.mode != MODE_ML or st.gc_relocation == 0:
        g = FB_GC_YOUNG if age < st.fallback_gc_age else FB_GC_OLD
    elif row.updated == 0:
        g = G_FRZN
        if st.final_tiers and (vg == G_FRZN or vg == G_FRZN_OLD):
            g = G_FRZN_OLD  # a frozen block that outlived G_frzn's cleaning
    else:
        nint = st.n_intermediate
        g = -1
        if st.gc_relocation == 1:
            g = _ml_reloc(p, st, row, vg, age)
        if g < 0:
            g = _next_group(vg, nint)
        if st.final_tiers and g == nint:
            # survivors of the open-ended groups: age tiers beyond the last BIR instead of
            # copying them back among GN's fresh user writes
            if vg == nint:
                g = G_TIER1
            elif vg == G_TIER1 or vg == G_TIER2:
                g = G_TIER2
    if row.reloc_count < 255:
        row.reloc_count += 1
    row.reloc_group = g
    row.reloc_time = now
    p.gc_destinations[vg, g] += 1
    return g


@nb.njit(cache=True, inline="always")
def dogi_prefetch(p, lba):
    """The engine's cache hint, some writes ahead, for the per-LBA entries ``dogi_user`` and
    ``dogi_gc`` touch (no effect on results; issue 18: the loop waited on these misses): the
    LBA's row (one line; the sample ring's ``pending`` is a view of its ``ring_slot``)."""
    prefetch(p.rows, lba)


@nb.njit(cache=True)
def dogi_victim(s, p, now):
    """A dead segment (no valid block) at once; else the oldest expired segment of the bounded
    groups; else cost-benefit (or greedy) over the open-ended groups, else over every sealed
    segment. One pass over the segments keeps all three candidates (the first version scanned
    up to three times); ties go to the lowest index as before, so the choice is the same."""
    st, expire, final = p.scalars[0], p.group_expiry, p.group_final
    nseg = s.prm[P_NSEG]
    seg_blocks = s.prm[P_SEG_BLOCKS]
    greedy = st.final_greedy
    best = -1
    best_open = 1 << 62
    fin, fin_num, fin_den = -1, -1.0, 1.0  # open-ended groups with garbage
    anyb, any_num, any_den = -1, -1.0, 1.0  # every sealed segment
    for seg in range(nseg):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        v = s.seg_valid[seg]
        if v == 0:
            return seg  # dead already: free to reclaim, whatever its group
        g = s.seg_group[seg]
        garbage = v < s.seg_wp[seg]
        if expire[g] < INF and now - s.seg_open_time[seg] > expire[g] and garbage:
            if s.seg_open_time[seg] < best_open:
                best, best_open = seg, s.seg_open_time[seg]
        if best >= 0:
            continue  # an expired segment wins: the scores below are not needed
        if greedy:
            num = float(seg_blocks - v)
            den = 1.0
        else:
            num = float((seg_blocks - v) * (now - s.seg_seal_time[seg] + 1))
            den = float(seg_blocks + v)
        if final[g] != 0 and garbage and num * fin_den > fin_num * den:
            fin, fin_num, fin_den = seg, num, den
        if num * any_den > any_num * den:
            anyb, any_num, any_den = seg, num, den
    if best >= 0:
        return best
    if fin >= 0:
        return fin
    return anyb


register_victim("dogi", dogi_victim)


RELOC_ESTIMATES = ("km", "trimmed_geomean", "mean")
#: DOGI's string parameters with a fixed set of values (checked in DOGI.__init__)
CHOICES = {
    "predictor": ("ml", "latest"),
    "final_victim": ("cost_benefit", "greedy"),
    "fallback_victims": ("final", "all"),
    "deployed": ("float", "int8"),
    "int8_runtime": ("auto", "c", "numba"),
    "reloc_remainder": ("bound", "age"),
    "mu_bounds": ("fixed", "shift"),
    "fallback_compare": ("none", "ghost"),
    "model_static": ("none", "unwritten"),
    "plog": ("validation", "mature"),
    "model_wait": ("none", "queue"),
    "censored_labels": ("long_bound", "age"),
    "mu_rule": ("climb", "sepbit"),
}

#: DOGI's switches: true or false only (``ghost_process`` and ``feature_thread`` are checked with
#: their own options below)
SWITCH_PARAMS = ("adapt_mu", "retire_unused", "reloc_floor", "reloc_repeat", "final_tiers", "model_hot")

#: DOGI's numeric parameters: (kind, smallest value, largest value or None, example). Each is
#: checked with its key before anything reads it: ``mu=0`` once became the scaled default
#: without a word (``scaled_mu`` reads 0 as unset), ``mu=-5`` ran as if unset, ``mu=abc`` ended
#: in Python's "invalid literal for int()". A parameter whose default is None may be null.
NUMERIC_PARAMS = {
    "mu": (int, 1, None, 1562),
    "mu_step": (int, 1, None, 512),
    "mu_window": (int, 1, None, 78125),
    "sample_every": (int, 1, None, 10),
    "max_samples": (int, 1, None, 100_000),
    "min_samples": (int, 1, None, 2_000),
    "retrain_every": (int, 1, None, 203_125),
    "frozen_clock": (int, 1, None, 1_562_500),
    "fallback_gc_age": (int, 1, None, 262_144),
    "intermediate_groups": (int, 1, N_CAT, 4),
    "seed": (int, 0, None, 0),
    "train_span": (float, None, None, 0.3),
    "label_lag": (float, 0, None, 0.3),
    "fallback_accuracy": (float, 0.0, None, 0.1),
    "fallback_margin": (float, 0.0, None, 0.02),
}


def use_model_against_base(
    mode: int, measured: float | None, base: float, modelled: float | None, calibration: float | None, margin: float
) -> bool:
    """The fallback comparison with the base design (issue 12 §5; MiDAS compares its model with
    the measured WAF the same way). ``mode``: the mode of the period that just ended.

    - ML mode: keep the model unless its ``measured`` WAF exceeds the base design's measured
      ``base`` by more than ``margin``;
    - fallback: deploy a new configuration only if its ``modelled`` WAF, times ``calibration``
      (measured / modelled of the last ML period, 1 if none), is within ``margin`` of ``base``."""
    if mode == MODE_ML:
        return measured is None or measured <= base * (1.0 + margin)
    if modelled is None or not np.isfinite(modelled):
        return False
    return modelled * (calibration or 1.0) <= base * (1.0 + margin)


def kaplan_meier(times: np.ndarray, event: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan–Meier survival of right-censored lifetimes: ``(t, S)`` with ``S[i]`` the
    probability of living longer than ``t[i]`` (distinct observed times, ascending).
    ``event[i]`` is False for a record censored at ``times[i]`` (still alive then)."""
    times = np.asarray(times, np.float64)
    event = np.asarray(event, bool)
    if times.shape != event.shape:
        raise ValueError(f"one event flag per time needed, got {times.shape} and {event.shape}")
    if times.size == 0:
        return np.zeros(0), np.zeros(0)
    t, inv = np.unique(times, return_inverse=True)
    deaths = np.bincount(inv, weights=event.astype(np.float64), minlength=t.size)
    leaving = np.bincount(inv, minlength=t.size).astype(np.float64)
    at_risk = times.size - np.concatenate([[0.0], np.cumsum(leaving)[:-1]])
    return t, np.cumprod(1.0 - deaths / at_risk)


def km_steps(times: np.ndarray, event: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Kaplan–Meier curve of :func:`kaplan_meier` as a step function: ``(knots, level, area)``
    with ``knots`` 0 and the observed times, ``level[i]`` the survival on ``[knots[i], knots[i+1])``
    (1 before the first time, the last level after the last) and ``area[i] = int_0^knots[i] S``."""
    t, S = kaplan_meier(times, event)
    knots = np.concatenate([[0.0], t])
    level = np.concatenate([[1.0], S])
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(knots))])
    return knots, level, area


def km_mean_residual(times: np.ndarray, event: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """Mean remaining lifetime at each of ``ages`` from the Kaplan–Meier curve, restricted to
    the last observed time ``tau``: ``int_a^tau S(u) du / S(a)``; NaN where ``S(a) = 0`` or
    ``a >= tau`` (no record tells what happens beyond)."""
    knots, level, area = km_steps(times, event)
    ages = np.asarray(ages, np.float64)
    out = np.full(ages.shape, np.nan)
    if knots.size == 1:
        return out
    tau = knots[-1]
    i = np.searchsorted(knots, ages, side="right") - 1
    ok = (ages < tau) & (i >= 0)
    i = np.clip(i, 0, knots.size - 1)
    s_a = level[i]
    int_a = area[i] + level[i] * (ages - knots[i])
    ok &= s_a > 0
    out[ok] = (area[-1] - int_a[ok]) / s_a[ok]
    return out


def survivors_residual(times: np.ndarray, ages: np.ndarray, how: str, trim: float = 0.15) -> np.ndarray:
    """Mean remaining lifetime at each of ``ages`` from the records that lived at least that
    long (censored ones counted at their age): their mean (the paper's §4.4) or, ``how =
    'trimmed_geomean'``, the geometric mean after dropping the longest ``trim`` share (the
    authors' ``BuildRelocation``), minus the age; NaN without survivors."""
    x = np.sort(np.asarray(times, np.float64))
    ages = np.asarray(ages, np.float64)
    out = np.full(ages.shape, np.nan)
    n = x.size
    if n == 0:
        return out
    c1 = np.concatenate([[0.0], np.cumsum(x)])
    cl = np.concatenate([[0.0], np.cumsum(np.log(x + 1e-9))])
    i0 = np.searchsorted(x, ages, side="left")
    m = n - i0
    if how == "mean":
        ok = m > 0
        out[ok] = (c1[n] - c1[i0[ok]]) / m[ok] - ages[ok]
    else:
        hi = n - np.floor(m * trim).astype(np.int64)
        keep = hi - i0
        ok = keep > 0
        out[ok] = np.exp((cl[hi[ok]] - cl[i0[ok]]) / keep[ok]) - 1e-9 - ages[ok]
    return np.maximum(out, 0.0)


def remaining_table(pred: np.ndarray, times: np.ndarray, event, ages: np.ndarray, how: str) -> np.ndarray:
    """ML-Reloc's table: per category (row) the mean remaining lifetime at each age (column),
    int64, -1 where unknown. ``event=None``: every record is an observed invalidation."""
    pred = np.asarray(pred, np.int64)
    times = np.asarray(times, np.float64)
    event = np.ones(times.shape, bool) if event is None else np.asarray(event, bool)
    table = np.full((N_CAT, len(ages)), -1, np.int64)
    for cat in range(N_CAT):
        sel = pred == cat
        if not sel.any():
            continue
        if how == "km":
            r = km_mean_residual(times[sel], event[sel], ages)
        else:
            r = survivors_residual(times[sel], ages, how)
        ok = np.isfinite(r)
        table[cat, ok] = np.minimum(np.round(r[ok]), float(INF)).astype(np.int64)
    return table


CLASS_NAMES = ["hot"] + [f"c{k}" for k in range(1, N_CAT + 1)]


def user_accuracies(conf: np.ndarray) -> dict:
    """Accuracies of user-written placement from the confusion ``conf[placed class, actual
    class]`` (hot 0, c_k k). A block placed c1 that turned out hot counts as right: it died
    within G1's BIR (whose lower bound only marks where the Hot Filter stops). ``user_accuracy``
    is the paper's (Fig. 11: hot class included), ``user_accuracy_nonhot`` the same over the
    writes the model placed; per class, recall (of the blocks truly in a class, the share placed
    there; hot's counts c1 as right too) and precision."""
    conf = np.asarray(conf, np.int64)
    right = np.diag(conf).astype(np.float64).copy()
    c1_hot = float(conf[1, 0])
    total, nonhot = conf.sum(), conf[1:].sum()
    actual, placed = conf.sum(axis=0), conf.sum(axis=1)
    recall = {}
    for k, name in enumerate(CLASS_NAMES):
        hit = right[k] + (c1_hot if k == 0 else 0.0)
        recall[name] = float(hit / actual[k]) if actual[k] else None
    precision = {
        name: (float((right[k] + (c1_hot if k == 1 else 0.0)) / placed[k]) if placed[k] else None)
        for k, name in enumerate(CLASS_NAMES)
    }
    return {
        "user_accuracy": float((right.sum() + c1_hot) / total) if total else None,
        "user_accuracy_nonhot": float((right[1:].sum() + c1_hot) / nonhot) if nonhot else None,
        "user_accuracy_strict": float(right.sum() / total) if total else None,
        "user_recall_per_class": recall,
        "user_precision_per_class": precision,
    }


def _scaled(value: float, capacity: int, floor: int = 1) -> int:
    return max(floor, int(round(value * capacity / PAPER_CAPACITY)))


@register
class DOGI(PlacementPolicy):
    name = "dogi"
    default_groups = N_GROUPS
    victim = "dogi"
    selector = "dogi"
    victim_rules = ()
    victim_note = (
        "a dead segment at once, else the oldest expired segment of a bounded group, else "
        "policy.params.final_victim in the open-ended groups"
    )
    place_user = dogi_user
    place_gc = dogi_gc
    prefetch_lba = dogi_prefetch
    on_reclaim = dogi_reclaim

    DEFAULTS = {
        "variant": "full",  # base | user | grp | full (Fig. 14)
        "predictor": "ml",  # ml | latest (Fig. 11's Latest)
        "model": "mlp",
        "model_params": {"epochs": 10, "patience": 3},
        "features": ["lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv"],
        "mu": None,  # initial hot threshold; None = 200K blocks scaled
        "mu_step": None,  # d; None = 65K scaled
        "mu_window": None,  # n; None = 10M user writes scaled
        "adapt_mu": True,
        # how mu adapts: climb (the paper's Fig. 6, a step per window) | sepbit (SepBIT's Class-1
        # threshold: the mean lifespan of the last 16 reclaimed G_hot segments)
        "mu_rule": "climb",
        "sample_every": 10,
        "max_samples": 100_000,  # the ring keeps the latest samples (paper: 300K)
        # training samples' span (issue 12 §4): null = every labelled sample in the ring (about 9
        # capacities of writes at 1 GiB); else the samples written in the latest train_span
        # capacities of user writes that end label_lag capacities before the retraining (the
        # paper's 300K samples span ~0.3 capacities; the authors' code labels them over 10M more
        # writes, ~0.3 capacities, and gives an unlabelled one its age then: censored_labels=age)
        "train_span": None,
        "label_lag": 0.0,
        "censored_labels": "long_bound",  # long_bound (pending counts once older than c10's bound) | age (authors' FILL_MAXTIME)
        "min_samples": 2_000,  # labelled samples before the first model
        "retrain_every": None,  # user writes; None = 100 GiB (26M blocks) scaled
        "frozen_clock": None,  # user writes between Frozen-Filter clears; None = 200M scaled
        "fallback_accuracy": 0.10,  # below this held-out accuracy the model is switched off
        "fallback_gc_age": None,  # age split of the two fallback GC groups; None = capacity
        "intermediate_groups": None,  # fix the number of intermediate groups (Fig. 13); None = search
        "final_victim": "cost_benefit",  # cost_benefit (authors' code) | greedy (paper text)
        "fallback_victims": "all",  # no expired segment: choose in all groups, or in GN/G_frzn only (final, paper text)
        "relocation": None,  # ml (FF + ML-Reloc) | next_group (FF + age-based) | age_groups (two GC groups); None = by variant
        "deployed": "float",  # float | int8 (the exported integer model, if available)
        # int8's runtime: auto (the compiled C header once its background build is done, the Numba
        # kernel until then: the same integers), c (wait for the build), numba (never compile)
        "int8_runtime": "auto",
        # features of the next chunk computed on a second thread while the loop applies this one
        # (the same values: they depend on the trace only), and with deployed=int8 its
        # predictions by the model deployed then (used only if no retraining replaced it: the
        # same classes); off by default: on the shared 2-core VM it did not pay (docs/performance.md,
        # "Overlap"), turn it on where a core is idle
        "feature_thread": False,
        # the base design's ghost in a child process (another core): auto = on runs of at least
        # 32M writes (a process costs seconds to start), true, false (default, as feature_thread)
        "ghost_process": False,
        "seed": 0,
        # issue 12 switches (what each default is worth: docs/dogi.md)
        "retire_unused": True,  # seal the open segment of every group a configuration stops using
        "reloc_estimate": "km",  # km (Kaplan–Meier, censored samples) | trimmed_geomean (authors) | mean (paper text)
        "reloc_remainder": "bound",  # bound (estimate - source BIR bound, §4.4's 70 - 50) | age (estimate at the block's age)
        "reloc_floor": True,  # a survivor never goes to a hotter group than its source (authors' code)
        "reloc_repeat": False,  # later relocations use the estimate too (False: next group, §4.4)
        "final_tiers": False,  # survivors of GN / G_frzn go to age tiers beyond the last BIR
        "model_hot": True,  # the Markov search models G_hot (its share, mu, its survivors)
        # bounded segments reclaimed at expiry (none) or after the GC queue's wait (queue: the
        # chain oracle's hot copies match; the search costs ~6x more), markov.groups.reclaim_wait
        "model_wait": "none",
        # the PLog the search reads: validation (the new model on the latest 20% of the labelled
        # samples) | mature (on every sample older than c10's lower bound, pending ones at their age)
        "plog": "validation",
        # data the last group's FIFO leaves alone: none, or unwritten (the LBAs no user write has
        # touched since the prefill, as oracles.chain's static="unwritten"; varmail: 86%)
        "model_static": "none",
        # fixed (c1..c9 from capacity; mu stays below c1's bound) | shift (they move up with mu);
        # None: fixed with mu_rule=climb, shift with mu_rule=sepbit
        "mu_bounds": None,
        "fallback_compare": "ghost",  # none (accuracy only, the paper) | ghost (also lose to the base design's ghost WAF)
        "fallback_margin": 0.02,  # the ML configuration may be this much worse than the base design
    }

    def accepted_params(self):
        return tuple(self.DEFAULTS)

    def __init__(self, n_groups=N_GROUPS, **params):
        refuse_unknown_params(self.name, params, self.accepted_params())
        if int(n_groups) != N_GROUPS:
            raise ValueError(
                f"policy dogi allocates {N_GROUPS} group slots (hot, ten intermediate, frozen, "
                f"three fallback, three age tiers beyond the last BIR); leave n_groups unset (got {n_groups}); fix the number of "
                "intermediate groups with params.intermediate_groups"
            )
        cfg = {**self.DEFAULTS, **params}
        for key, (kind, minimum, maximum, example) in NUMERIC_PARAMS.items():
            value = cfg[key]
            cfg[key] = checked_setting(
                int(value) if isinstance(value, np.integer) else value,
                f"policy.params.{key}",
                kind,
                minimum=minimum,
                maximum=maximum,
                above=0 if key == "train_span" else None,
                nullable=self.DEFAULTS[key] is None,
                example=example,
            )
        for key in SWITCH_PARAMS:  # a string was truthy: adapt_mu=maybe ran as true without a word
            cfg[key] = checked_setting(cfg[key], f"policy.params.{key}", bool)
        if cfg["variant"] not in VARIANTS:
            raise ValueError(f"policy {self.name}: variant must be one of {sorted(VARIANTS)}, got {cfg['variant']!r}")
        for key, allowed in CHOICES.items():
            if key == "mu_bounds" and cfg[key] is None:
                continue  # null: by mu_rule (below)
            if cfg[key] not in allowed:
                words = ", ".join(allowed[:-1]) + " or " + allowed[-1]
                raise ValueError(f"policy {self.name}: {key} must be {words}, got {cfg[key]!r}")
        if cfg["relocation"] not in (None, "ml", "next_group", "age_groups"):
            raise ValueError(
                f"policy {self.name}: relocation must be ml, next_group or age_groups, got {cfg['relocation']!r}"
            )
        from dogi_ml.models import model_names

        if cfg["model"] not in model_names():  # else the first retraining, minutes in, said so
            raise ConfigError(
                f"policy.params.model={cfg['model']!r} is not a model",
                f"use one of {', '.join(model_names())} (policy.params.model=mlp)",
            )
        if cfg["deployed"] == "int8" and cfg["model"] != "mlp":
            raise ValueError(
                f"policy {self.name}: deployed=int8 runs the exported integer MLP; model is {cfg['model']!r}"
            )
        if cfg["intermediate_groups"] is not None and not 1 <= int(cfg["intermediate_groups"]) <= N_CAT:
            raise ValueError(
                f"policy {self.name}: params.intermediate_groups must lie in [1, {N_CAT}], got {cfg['intermediate_groups']}"
            )
        if not 0 <= float(cfg["fallback_accuracy"]) < 1:
            raise ValueError(
                f"policy {self.name}: fallback_accuracy must lie in [0, 1), got {cfg['fallback_accuracy']}"
            )
        if cfg["reloc_estimate"] not in RELOC_ESTIMATES:
            raise ValueError(
                f"policy {self.name}: reloc_estimate must be one of {RELOC_ESTIMATES}, got {cfg['reloc_estimate']!r}"
            )
        if not 0 <= float(cfg["fallback_margin"]) < 1:
            raise ValueError(f"policy {self.name}: fallback_margin must lie in [0, 1), got {cfg['fallback_margin']}")
        if cfg["ghost_process"] not in ("auto", True, False, "thread"):
            raise ValueError(
                f"policy {self.name}: ghost_process must be auto, true, false or thread, got {cfg['ghost_process']!r}"
            )
        if not isinstance(cfg["feature_thread"], bool):
            raise ValueError(f"policy {self.name}: feature_thread must be true or false, got {cfg['feature_thread']!r}")
        if int(cfg["sample_every"]) < 1:
            raise ValueError(f"policy {self.name}: sample_every must be >= 1, got {cfg['sample_every']}")
        if cfg["train_span"] is not None and not float(cfg["train_span"]) > 0:
            raise ValueError(
                f"policy {self.name}: train_span must be > 0 (capacities of user writes) or null (the whole ring), "
                f"got {cfg['train_span']}"
            )
        if not float(cfg["label_lag"]) >= 0:
            raise ValueError(
                f"policy {self.name}: label_lag must be >= 0 (capacities of user writes), got {cfg['label_lag']}"
            )
        if cfg["mu_bounds"] is None:
            cfg["mu_bounds"] = "shift" if cfg["mu_rule"] == "sepbit" else "fixed"
        if cfg["mu_rule"] == "sepbit":
            if cfg["mu_bounds"] == "fixed":
                raise ConfigError(
                    f"policy {self.name}: mu_rule=sepbit moves mu up to the capacity, mu_bounds=fixed keeps it below c1's bound",
                    "drop policy.params.mu_bounds (sepbit shifts the bounds with mu)",
                )
            if not cfg["adapt_mu"]:
                raise ConfigError(
                    f"policy {self.name}: mu_rule=sepbit adapts mu, adapt_mu=false fixes it",
                    "drop one of policy.params.mu_rule and policy.params.adapt_mu",
                )
            for key in ("mu_step", "mu_window"):
                if cfg[key] is not None:
                    raise ConfigError(
                        f"policy {self.name}: {key} sizes the climb's steps, mu_rule=sepbit takes none",
                        f"drop policy.params.{key} or set policy.params.mu_rule=climb",
                    )
        if not cfg["adapt_mu"]:  # the fixed mu never moved: mu_step and mu_window were ignored without a word
            why = "sizes the Hot Filter's climb, which policy.params.adapt_mu=false turns off"
            refuse_unread_params(cfg, self.DEFAULTS, ("mu_step", "mu_window"), why, "policy.params.adapt_mu=true")
        self.cfg = cfg
        super().__init__(n_groups)
        self.user_ml, self.group_search, self.gc_reloc = VARIANTS[cfg["variant"]]
        if cfg["relocation"] is not None:
            self.gc_reloc = {"age_groups": 0, "ml": 1, "next_group": 2}[cfg["relocation"]]
        if cfg["predictor"] == "latest":
            self.user_ml = 1  # categories come from the latest invalidation time, no model

    # -- setup -----------------------------------------------------------------------------
    def bind(self, ctx: SimContext) -> tuple:
        from dogi_ml.features.labels import category_bounds, scaled_mu

        c = self.cfg
        cap = ctx.capacity
        self.capacity = cap
        self.rho = ctx.n_segments * ctx.segment_blocks / cap
        self.prefill = ctx.prefill_blocks
        mu = scaled_mu(cap, c["mu"])
        self.retrain_every = int(c["retrain_every"] or _scaled(26_000_000, cap, 1000))
        # chunks of at most 4M writes: the chunk's feature buffer stays ~200 MB at paper scale
        self.max_chunk_blocks = min(self.retrain_every, 1 << 22)
        self.uses_model = bool(self.user_ml) and c["predictor"] == "ml"
        self.stream = None
        n_feat = len(c["features"])
        if self.uses_model:
            if ctx.trace is None:
                raise ValueError(
                    "policy dogi needs the trace (its features) to run its model: "
                    "use the simulate command or pass trace= to the Simulator"
                )
            unknown = [f for f in c["features"] if f not in FEATURES]
            if unknown:
                raise ValueError(f"policy {self.name}: unknown feature(s) {unknown}; known: {', '.join(FEATURES)}")
            # features are computed chunk by chunk as the writes arrive (causal, bounded memory)
            self.stream = FeatureStream(ctx.trace, FeatureConfig(capacity_blocks=cap))
            self.columns = [FEATURES.index(f) for f in c["features"]]
            self.n_trace_writes = int(ctx.trace.block_writes.size)
            self.trace_writes = ctx.trace.block_writes
            written = lbas_to_compact(self.trace_writes, cap)
            if written is not None:
                # the engine runs such a file trace on its written LBAs compacted in order
                # (pipeline.simulate.simulation_writes): the ghost must see the same numbers
                self.trace_writes = np.searchsorted(written, self.trace_writes).astype(np.int64)
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        bounds = category_bounds(cap, mu)  # [mu, c1..c9 upper]
        st.hot_threshold = mu
        st.hot_step = int(c["mu_step"] or _scaled(65_000, cap))
        st.window_writes = int(c["mu_window"] or _scaled(10_000_000, cap, 1000))
        st.next_window_at = st.window_writes
        st.mode = MODE_FALLBACK
        st.n_intermediate = N_CAT
        st.prefill = self.prefill
        st.sample_every = int(c["sample_every"])
        st.frozen_clock = int(c["frozen_clock"] or _scaled(200_000_000, cap, 1000))
        st.next_clock_at = st.frozen_clock
        st.user_ml = self.user_ml
        st.gc_relocation = self.gc_reloc
        st.fallback_gc_age = int(c["fallback_gc_age"] or cap)
        st.final_greedy = int(c["final_victim"] == "greedy")
        st.predictor_latest = int(c["predictor"] == "latest")
        st.adapt_mu = int(bool(c["adapt_mu"]))
        st.mu_sepbit = int(c["mu_rule"] == "sepbit")
        st.shift_bounds = int(c["mu_bounds"] == "shift")
        st.c1_width = int(bounds[1]) - mu
        # fixed bounds: c1 must stay non-empty; shifting ones: up to the initial c3 bound;
        # mu_rule=sepbit: up to the capacity, where SepBIT's FIFO queue caps its Class 1
        st.hot_threshold_max = int(bounds[3]) if st.shift_bounds else max(int(bounds[1]) - 1, 1)
        base_bounds = bounds.astype(np.int64)
        if st.mu_sepbit:
            st.hot_threshold_max = cap
            if c["mu"] is None:
                # SepBIT's l starts at +inf: every rewrite of the last capacity is Class 1
                st.hot_threshold = cap
                bounds[0] = cap
                _shift_bounds(bounds, base_bounds, cap, st.c1_width)
        st.frozen_filter = int(self.gc_reloc > 0)
        st.reloc_from_bound = int(c["reloc_remainder"] == "bound")
        st.reloc_floor = int(bool(c["reloc_floor"]))
        st.reloc_repeat = int(bool(c["reloc_repeat"]))
        st.final_tiers = int(bool(c["final_tiers"]) and self.gc_reloc > 0)
        self.segment_blocks = ctx.segment_blocks
        rows = new_lba_rows(cap)
        # the ring's per-LBA slots live in the rows (a strided view): ring_fill and ring_record
        # then touch the cache line the hooks already hold
        self.ring = SampleRing(cap, int(c["max_samples"]), pending=rows["ring_slot"])
        self.state = DogiState(
            scalars=scalars,
            preds=np.full(self.max_chunk_blocks, -1, np.int8),
            cat2group=np.full(N_CAT, FB_COLD, np.int64),
            group_lo=np.zeros(N_GROUPS, np.int64),
            group_hi=np.full(N_GROUPS, INF, np.int64),
            group_final=np.ones(N_GROUPS, np.uint8),
            bounds=bounds.astype(np.int64),
            base_bounds=base_bounds,
            remaining=np.full((N_CAT, N_AGE_GRID), -1, np.int64),
            age_grid=np.geomspace(1, 64 * cap, N_AGE_GRID).astype(np.int64),
            rows=rows,
            user_confusion=np.zeros((N_CAT + 1, N_CAT + 1), np.int64),
            gc_destinations=np.zeros((N_GROUPS, N_GROUPS), np.int64),
            ring=self.ring.arrays(),
            group_expiry=np.full(N_GROUPS, INF, np.int64),
            chunk_features=np.zeros((2, self.max_chunk_blocks if self.uses_model else 0, n_feat), np.int64),
            sample_features=np.zeros((int(c["max_samples"]) if self.uses_model else 0, n_feat), np.int64),
        )
        self._fallback_bounds()
        if self.user_ml and not self.uses_model:
            # Latest: categories from the latest invalidation time, no model, no PLog to search
            st.mode = MODE_ML
            self._apply_configuration(
                _even_merge(int(c["intermediate_groups"])) if c["intermediate_groups"] else None, None
            )
        self.model = None
        self.qmodel = None
        self._cbuild = None  # the deployed model's C header, compiled in the background
        self.int8_blocks = {"c": 0, "numba": 0}
        self.last_train = 0
        self.history: list[dict] = []
        self.infer_s = 0.0
        self.feature_s = 0.0  # computing features (on the feature thread or in line)
        self.feature_wait_s = 0.0  # the loop's thread waiting for them (or computing in line)
        self.feature_rows = 0
        self.ghost_s = 0.0
        self._columns = np.asarray(self.columns, np.int64) if self.uses_model else None
        self._feat_chunk = -1
        self._pending = None
        self._pool = None
        self.infer_blocks = 0
        # predictions made ahead on the feature thread (feature_thread with deployed=int8):
        # per buffer, the aligned chunk and model generation they are for
        self._model_gen = 0
        self._ahead_preds = None
        self._ahead_of = [None, None]
        self.ahead_s = 0.0
        self.ahead_blocks = 0  # predicted on the feature thread
        self.ahead_used = 0  # of those, placed (the rest a retraining made stale)
        self.train_s = 0.0
        self.mode_switches = 0
        self.retired_segments = 0
        self._last_period = None
        self.ghost = None
        self.base_compare = {"calibration": None, "lost": False}
        self.configuration = None
        return self.state

    def _fallback_bounds(self) -> None:
        st, glo, ghi, final = (
            record(self.state.scalars),
            self.state.group_lo,
            self.state.group_hi,
            self.state.group_final,
        )
        glo[:] = 0
        ghi[:] = INF
        final[:] = 1
        ghi[G_HOT] = st.hot_threshold
        glo[FB_GC_OLD] = st.fallback_gc_age
        ghi[FB_GC_YOUNG] = st.fallback_gc_age - 1
        # the base design has no expiry: cost-benefit over every segment (BIRs above only score GC accuracy)
        self.state.group_expiry[:] = INF

    def _apply_configuration(self, groups: list[list[int]] | None, plog: dict | None) -> None:
        """Map categories to groups G1..GN and set every group's BIR, expiry and the ML-Reloc
        table (from ``plog``'s survival records: ``pred``, ``inv``, optional ``event``).
        ``groups=None``: one group per category."""
        p = self.state
        st, cat2g, glo, ghi, final, bounds, rem = (
            record(p.scalars),
            p.cat2group,
            p.group_lo,
            p.group_hi,
            p.group_final,
            p.bounds,
            p.remaining,
        )
        if groups is None:
            groups = [[k] for k in range(N_CAT)]
        n = len(groups)
        upper = np.append(bounds[1:], INF)  # per category
        st.n_intermediate = n
        glo[:] = 0
        ghi[:] = INF
        final[:] = 1
        ghi[G_HOT] = st.hot_threshold
        final[G_HOT] = 0
        for k, cats in enumerate(groups):
            g = 1 + k
            for cat in cats:
                cat2g[cat] = g
            glo[g] = st.hot_threshold if k == 0 else ghi[g - 1] + 1
            ghi[g] = upper[cats[-1]] if k < n - 1 else INF
            final[g] = 1 if (k == n - 1 or self.cfg["fallback_victims"] == "all") else 0
        if self.cfg["fallback_victims"] == "all":
            final[G_HOT] = 1
        glo[G_FRZN] = glo[n]
        glo[FB_GC_OLD] = st.fallback_gc_age
        ghi[FB_GC_YOUNG] = st.fallback_gc_age - 1
        expire = self.state.group_expiry
        expire[:] = INF
        expire[G_HOT] = st.hot_threshold
        expire[1:n] = ghi[1:n]  # G1..G(N-1); GN is open-ended
        rem[:] = -1
        if plog is not None and len(plog["pred"]):
            rem[:] = remaining_table(
                plog["pred"], plog["inv"], plog.get("event"), self.state.age_grid, self.cfg["reloc_estimate"]
            )
        self.configuration = {
            "groups": [[f"c{c + 1}" for c in cats] for cats in groups],
            "bounds": [int(ghi[1 + k]) if ghi[1 + k] < INF else None for k in range(n)],
        }

    # -- between chunks --------------------------------------------------------------------
    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        """Features (and predictions) of the writes the loop applies next. The engine's chunks
        are aligned to multiples of its chunk size ``C``: features are computed per aligned
        chunk ``j`` (logical times ``j*C .. (j+1)*C``, row ``t - j*C``), by the feature thread
        while the loop applies chunk ``j - 1`` (``feature_thread``) or here; predictions here,
        per call, with the model deployed now."""
        st, preds = record(self.state.scalars), self.state.preds
        if not self.uses_model:
            st.chunk_start = start
            return
        C = max(1, min(int(sim.cfg.chunk_blocks), int(self.max_chunk_blocks)))
        j = start // C
        st.chunk_start = j * C
        a = start - self.prefill
        lo, hi = max(a, 0), min(a + n_writes, self.n_trace_writes)
        if self.cfg["fallback_compare"] == "ghost":
            self._ghost_feed(sim, start, lo, hi)
        if hi <= lo:
            return
        t0 = time.perf_counter()
        self._features_of_chunk(j, C)
        self.feature_wait_s += time.perf_counter() - t0
        if self.model is None or st.mode != MODE_ML:
            return
        r0 = lo + self.prefill - j * C
        buf = int(st.feat_buf)
        if self._ahead_of[buf] == (j, self._model_gen):
            # the feature thread's classes, by the model deployed now
            preds[r0 : r0 + hi - lo] = self._ahead_preds[buf, r0 : r0 + hi - lo]
            self.ahead_used += hi - lo
            return
        feats = self.state.chunk_features[buf]
        t0 = time.perf_counter()
        self._predict_into(feats[r0 : r0 + hi - lo], preds[r0 : r0 + hi - lo])
        self.infer_s += time.perf_counter() - t0
        self.infer_blocks += hi - lo

    def _chunk_rows(self, j: int, C: int) -> tuple[int, int]:
        """Trace block writes ``lo .. hi`` of aligned chunk ``j`` (empty past the trace)."""
        lo = max(j * C - self.prefill, 0)
        hi = min((j + 1) * C - self.prefill, self.n_trace_writes)
        return lo, max(lo, hi)

    def _fill_features(self, buf: int, j: int, C: int) -> float:
        """Aligned chunk ``j``'s feature rows into buffer ``buf`` (row ``t - j*C``); returns the
        CPU seconds of this thread it took (on the feature thread, wall time would also count
        its wait for the GIL, which the loop holds, after the kernel). Runs on the feature
        thread or the caller's (one at a time)."""
        t0 = time.thread_time()
        lo, hi = self._chunk_rows(j, C)
        if self.stream.position != lo:
            raise RuntimeError(
                f"policy {self.name}: features at write {self.stream.position}, chunk {j} starts at {lo}"
            )
        r0 = lo + self.prefill - j * C
        got = self.stream.next_into(self.state.chunk_features[buf, r0 : r0 + hi - lo], self._columns)
        if got != hi - lo:
            raise RuntimeError(f"policy {self.name}: the trace ended after {lo + got} block writes, expected {hi}")
        return time.thread_time() - t0

    def _features_of_chunk(self, j: int, C: int) -> None:
        """Make buffer ``st.feat_buf`` hold aligned chunk ``j``'s features, then start the
        feature thread on chunk ``j + 1`` in the other buffer."""
        st = record(self.state.scalars)
        if self._feat_chunk == j:
            return  # a later part of the same aligned chunk
        if self._pending is not None:
            fut, pj, pbuf = self._pending
            self._pending = None
            secs, ahead = fut.result()  # the thread's own time; re-raises its error
            self.feature_s += secs
            self._ahead_of[pbuf] = None
            if ahead is not None:
                gen, runtime, n, ahead_s = ahead
                self._ahead_of[pbuf] = (pj, gen)
                self.int8_blocks[runtime] += n
                self.ahead_blocks += n
                self.ahead_s += ahead_s
            self.feature_rows += int(np.subtract(*self._chunk_rows(pj, C)[::-1]))
            if pj != j:
                raise RuntimeError(f"policy {self.name}: feature thread computed chunk {pj}, the loop is at chunk {j}")
            st.feat_buf = pbuf
        else:
            self._ahead_of[int(st.feat_buf)] = None
            self.feature_s += self._fill_features(int(st.feat_buf), j, C)
            self.feature_rows += int(np.subtract(*self._chunk_rows(j, C)[::-1]))
        self._feat_chunk = j
        nxt_lo, nxt_hi = self._chunk_rows(j + 1, C)
        if self.cfg["feature_thread"] and nxt_hi > nxt_lo:
            self._pending = (self._start_feature_thread(1 - int(st.feat_buf), j + 1, C), j + 1, 1 - int(st.feat_buf))

    def _start_feature_thread(self, buf: int, j: int, C: int):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dogi-features")
        entered = threading.Event()
        predict = self._ahead_predictor()
        if predict is not None and self._ahead_preds is None:
            self._ahead_preds = np.empty((2, self.state.chunk_features.shape[1]), np.int8)

        def job():
            entered.set()
            secs = self._fill_features(buf, j, C)
            if predict is None:
                return secs, None
            t0 = time.thread_time()
            lo, hi = self._chunk_rows(j, C)
            r0 = lo + self.prefill - j * C
            gen, runtime = predict(
                self.state.chunk_features[buf, r0 : r0 + hi - lo], self._ahead_preds[buf, r0 : r0 + hi - lo]
            )
            return secs, (gen, runtime, hi - lo, time.thread_time() - t0)

        fut = self._pool.submit(job)
        # let the thread reach the GIL-free kernel before the loop (which holds the GIL) starts
        entered.wait(0.1)
        return fut

    def checkpoint_problem(self) -> str | None:
        """Why this run cannot be checkpointed (dogi_ml.sim.checkpoint), None if it can: the
        ghost in a child process holds state no checkpoint of this process reaches."""
        gp = self.cfg["ghost_process"]
        if gp is True or (gp == "auto" and getattr(self, "n_trace_writes", 0) >= GHOST_PROCESS_WRITES):
            return (
                f"policy dogi with policy.params.ghost_process={gp} runs its ghost in a child process, "
                "which a checkpoint cannot hold; set policy.params.ghost_process=thread (or false)"
            )
        return None

    def _ghost_feed(self, sim, start: int, lo: int, hi: int) -> None:
        """The base design's ghost (issue 12 §5): a second store run with ``variant=base`` on
        the same writes, so each retraining period has the WAF DOGI's own base would have had.
        On long runs (``ghost_process``) it runs in a child process, on the other core: it
        reads nothing of DOGI's state, so where it runs changes no result."""
        if self.ghost is None:
            keep = (
                "mu",
                "mu_step",
                "mu_window",
                "adapt_mu",
                "mu_rule",
                "fallback_gc_age",
                "final_victim",
                "fallback_victims",
                "seed",
            )
            params = {k: self.cfg[k] for k in keep}
            gp = self.cfg["ghost_process"]
            if gp is True or (gp == "auto" and self.n_trace_writes >= GHOST_PROCESS_WRITES):
                self.ghost = GhostProcess(params, sim.cfg, sim.capacity)
            else:
                from dogi_ml.sim import Simulator

                self.ghost = Simulator(DOGI(variant="base", **params), sim.cfg, sim.capacity)
                self.ghost.prefill()
                if gp == "thread":
                    self.ghost = GhostThread(self.ghost)
            self._ghost_last = (0, 0)
        if hi > lo:
            t0 = time.perf_counter()
            self.ghost.feed(self.trace_writes[lo:hi])
            self.ghost_s += time.perf_counter() - t0

    def ghost_period_waf(self) -> float | None:
        """The ghost's WAF since the last call (``None`` without a ghost or writes)."""
        if self.ghost is None:
            return None
        if isinstance(self.ghost, GhostProcess):
            u, g = self.ghost._counters()
        else:
            u, g = self.ghost.user_writes, self.ghost.gc_writes
        u0, g0 = self._ghost_last
        self._ghost_last = (u, g)
        return (u - u0 + g - g0) / (u - u0) if u > u0 else None

    def _ahead_predictor(self):
        """For the feature thread: a function predicting rows with the integer model deployed
        now (its own scratch: the loop's thread may predict at the same time), returning that
        model's generation and the runtime that ran; None without a deployed integer model
        (the float model stays on the loop's thread)."""
        if self.qmodel is None:
            return None
        from dogi_ml.export.numba_kernel import batch_scratch

        gen, qargs, cbuild = self._model_gen, self.qargs, self._cbuild
        scratch = batch_scratch(qargs)

        def predict(X: np.ndarray, out: np.ndarray) -> tuple[int, str]:
            return gen, _int8_classes_into(cbuild, qargs, scratch, X, out)

        return predict

    def _predict(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape[0], np.int8)
        self._predict_into(X, out)
        return out

    def _predict_into(self, X: np.ndarray, out: np.ndarray) -> None:
        """Classes of feature rows ``X`` into ``out`` (int8). The deployed integer model runs
        the compiled C header (one ctypes call per chunk) once its background build is done,
        the Numba kernel before: both compute the header's integers, so which one ran does not
        change a prediction (tests/test_export.py, tests/test_speed.py)."""
        if self.qmodel is None:
            out[:] = self.model.predict(X)
            return
        X = np.ascontiguousarray(X, np.int64)
        self.int8_blocks[_int8_classes_into(self._cbuild, self.qargs, self.qscratch, X, out)] += X.shape[0]

    def between_chunks(self, sim) -> None:
        if not self.user_ml:
            return
        user = sim.user_writes
        if user - self.last_train < self.retrain_every:
            return
        self.last_train = user
        period = self._period(sim)
        if self.uses_model:
            self._retrain(sim, period)
        elif self.group_search:
            self._replan_latest(sim, period)
        if self.cfg["retire_unused"]:
            self._retire_unused(sim)

    def _period(self, sim) -> dict:
        """Measurements since the last retraining: WAF, the hot share of the placed user writes
        and the share of G_hot's writes GC copied out of it (its valid ratio at reclaim)."""
        st, dest = record(self.state.scalars), self.state.gc_destinations
        now = {
            "user": sim.user_writes,
            "gc": sim.gc_writes,
            "hot": int(st.hot_writes),
            "placed": int(st.placed_writes),
            "hot_copies": int(dest[G_HOT].sum()),
        }
        last, self._last_period = getattr(self, "_last_period", None), now
        if last is None:
            last = {k: 0 for k in now}  # the engine zeroes its counters after prefill
        d = {k: now[k] - last[k] for k in now}
        return {
            "waf": (d["user"] + d["gc"]) / d["user"] if d["user"] > 0 else None,
            "hot_share": d["hot"] / d["placed"] if d["placed"] > 0 else 0.0,
            "hot_valid_ratio": min(1.0, d["hot_copies"] / d["hot"]) if d["hot"] > 0 else 0.0,
            "mode": int(st.mode),
        }

    def groups_in_use(self) -> set[int]:
        """Groups the current mode and configuration write to (user or GC)."""
        st = record(self.state.scalars)
        used = {G_HOT}
        if st.mode != MODE_ML:
            return used | {FB_COLD, FB_GC_YOUNG, FB_GC_OLD}
        used |= set(range(1, int(st.n_intermediate) + 1))
        if st.gc_relocation == 0:
            used |= {FB_GC_YOUNG, FB_GC_OLD}
        if st.frozen_filter:
            used.add(G_FRZN)
        if st.final_tiers:
            used |= {G_TIER1, G_TIER2, G_FRZN_OLD}
        return used

    def _retire_unused(self, sim) -> None:
        """Seal the open segments of groups out of use (issue 12 §1): a shrinking N, the
        fallback's groups after a model is deployed, the model's after a fallback."""
        used = self.groups_in_use()
        open_seg = sim.state.open_seg
        idle = [g for g in range(N_GROUPS) if g not in used and open_seg[g] >= 0]
        sealed = [s for s in sim.retire_groups(idle) if s >= 0]
        self.retired_segments += len(sealed)
        if self.history:
            self.history[-1]["retired_groups"] = idle

    def _replan_latest(self, sim, period: dict) -> None:
        """Latest (Fig. 11): no model; PLog = <latest-invalidation-time category, actual
        invalidation time> of the latest labelled samples; the same group search."""
        bounds = self.state.bounds
        now = int(sim.state.ctr[0])
        data = self.ring.collect(now, long_bound=int(bounds[-1]))
        ok = data["pred"] >= 0
        entry = {
            "user_writes": sim.user_writes,
            "labelled_samples": int(ok.sum()),
            "mu": int(record(self.state.scalars).hot_threshold),
            **self._period_entry(period),
        }
        if ok.sum() < int(self.cfg["min_samples"]):
            entry["action"] = "waiting for samples"
            self.history.append(entry)
            return
        tail = np.flatnonzero(ok)[-max(1, int(ok.sum()) // 5) :]
        plog = {"pred": data["pred"][tail], "inv": data["inv"][tail]}
        self._search_and_apply(plog, entry, sim, period, self._reloc_records(now, False))
        self.history.append(entry)

    def _period_entry(self, period: dict) -> dict:
        return {
            "measured_waf": period["waf"],
            "hot_share": period["hot_share"],
            "hot_valid_ratio": period["hot_valid_ratio"],
        }

    def _reloc_records(self, now: int, use_model: bool) -> dict:
        """Every sample in the ring as a survival record for ML-Reloc: ``inv`` the invalidation
        time if overwritten (event), else its age now (right-censored); its category from
        the deployed model on the stored features (``use_model``), else the ring's prediction."""
        r = self.ring
        n = int(min(r.count[0], r.row.size))
        slots = np.flatnonzero(r.time[:n] >= 0)
        event = r.inv[slots] >= 0
        inv = np.where(event, r.inv[slots], now - r.time[slots])
        if use_model and len(slots):
            pred = self._predict(self.state.sample_features[slots]).astype(np.int64)
        else:
            pred = r.pred[slots].astype(np.int64)
        keep = pred >= 0
        return {"pred": pred[keep], "inv": inv[keep], "event": event[keep]}

    def _search_and_apply(self, plog: dict, entry: dict, sim, period: dict, reloc: dict, apply: bool = True) -> None:
        c = self.cfg
        st, bounds = record(self.state.scalars), self.state.bounds
        groups = None
        if self.group_search:
            from dogi_ml.markov.groups import best_configuration

            upper = np.append(bounds[1:].astype(float), np.inf)
            hot = {}
            if c["model_hot"]:
                # G_hot in the model: its share of the user writes, mu, the share GC copied out of it;
                # segment fill time and the space that never holds data (free and open segments)
                S = float(self.segment_blocks)
                reserved = (float(sim.cfg.gc_free_segments) + 0.5 * 6) * S
                hot = dict(
                    hot_share=min(period["hot_share"], 0.99),
                    hot_bound=float(st.hot_threshold),
                    hot_valid_ratio=period["hot_valid_ratio"],
                    segment_blocks=S,
                    reserved_blocks=reserved,
                    reclaim_wait=c["model_wait"],
                )
                if c["model_static"] == "unwritten":
                    hot["static_blocks"] = float(np.count_nonzero(sim.state.lba_time < self.prefill))
            t0 = time.perf_counter()
            best = best_configuration(
                plog["pred"],
                np.minimum(plog["inv"], 1e15).astype(float),
                upper,
                float(self.capacity),
                rho=self.rho,
                n_groups=int(c["intermediate_groups"]) if c["intermediate_groups"] else None,
                **hot,
            )
            entry["search_seconds"] = time.perf_counter() - t0
            entry["modelled_waf"] = best.waf
            entry["mispredict"] = best.mispredict
            entry["rejected_configurations"] = best.rejected
            groups = best.groups
        elif c["intermediate_groups"]:
            groups = _even_merge(int(c["intermediate_groups"]))
        self._pending_groups, self._pending_reloc = groups, reloc
        if apply:
            self._apply_configuration(groups, reloc)
            entry["configuration"] = self.configuration
            entry["action"] = "configuration applied"

    def _retrain(self, sim, period: dict) -> None:
        st, bounds = record(self.state.scalars), self.state.bounds
        now = int(sim.state.ctr[0])
        c = self.cfg
        data = self.ring.collect(now, long_bound=int(bounds[-1]))
        entry = {
            "user_writes": sim.user_writes,
            "labelled_samples": int(len(data["row"])),
            "pending_samples": data["n_pending"],
            "mu": int(st.hot_threshold),
            **self._period_entry(period),
        }
        last = self.history[-1] if self.history else {}
        if st.mode == MODE_ML and last.get("modelled_waf") and period["waf"] is not None:
            # the model's agreement with what its configuration measured over the period
            entry["previous_modelled_waf"] = last["modelled_waf"]
            self.base_compare["calibration"] = period["waf"] / last["modelled_waf"]
        # a hot block predicted c1 dies within G1's BIR: c1 is right for it (labels fold hot into c1)
        y_all = np.maximum(np.searchsorted(bounds, data["inv"], side="left"), 1) - 1 if len(data["row"]) else None
        if self.model is not None and len(data["row"]):
            # online accuracy of the deployed model since the last training (what it predicted then)
            recent = (data["time"] >= now - self.retrain_every) & (data["pred"] >= 0)
            if recent.any():
                entry["online_accuracy"] = float(np.mean(data["pred"][recent] == y_all[recent]))
        data, y_all = self._training_window(data, y_all, now, bounds)
        entry["train_samples"] = int(len(data["row"]))
        if len(data["row"]):
            entry["train_span_capacities"] = float((now - data["time"].min()) / self.capacity)
        if len(data["row"]) < int(c["min_samples"]):
            entry["action"] = "waiting for samples"
            self.history.append(entry)
            return
        X = self.state.sample_features[data["slot"]]
        model, val, secs = fit_classifier(
            c["model"],
            dict(c["model_params"] or {}),
            X,
            y_all,
            N_CAT,
            list(c["features"]),
            seed=int(c["seed"]) + len(self.history),
        )
        self.train_s += secs
        pred_val = model.predict(X[val])
        acc = float(np.mean(pred_val == y_all[val])) if len(pred_val) else 0.0
        entry.update({"train_seconds": secs, "validation_accuracy": acc, "train_rows": int(val.start)})
        ok = acc >= float(c["fallback_accuracy"]) and entry.get("online_accuracy", 1.0) >= float(c["fallback_accuracy"])
        self.model = model
        self.qmodel = None
        self._model_gen += 1  # predictions made ahead with the previous model are not used
        if c["deployed"] == "int8":
            self.qmodel = self._quantise(model, X[: val.start])
            self._deploy_int8()
            q_val = self._predict(X[val]).astype(np.int64)
            entry["int8_agreement"] = float(np.mean(q_val == pred_val)) if len(pred_val) else None
            entry["int8_validation_accuracy"] = float(np.mean(q_val == y_all[val])) if len(pred_val) else None
            pred_val = q_val  # PLog from what is deployed
        base_waf = self.ghost_period_waf()
        entry["base_ghost_waf"] = base_waf
        if ok and base_waf is not None and st.mode == MODE_ML and period["waf"] is not None:
            # the last period ran this model's placement: did it lose to the base design?
            ok = use_model_against_base(MODE_ML, period["waf"], base_waf, None, None, float(c["fallback_margin"]))
            if not ok:
                entry["action"] = "fallback (measured WAF above the base design's)"
            self.base_compare["lost"] = not ok
        plog = {"pred": pred_val.astype(np.int64), "inv": data["inv"][val]}
        if c["plog"] == "mature":
            plog = self._mature_plog(now, bounds, plog)
        entry["plog_records"] = int(len(plog["pred"]))
        if ok:
            reloc = self._reloc_records(now, True)
            self._search_and_apply(plog, entry, sim, period, reloc, apply=False)
            if (
                base_waf is not None
                and st.mode == MODE_FALLBACK
                and self.base_compare.get("lost")
                and "modelled_waf" in entry
            ):
                # back from a lost comparison: deploy when the modelled WAF, calibrated by how
                # the model matched the last ML period, beats the base design's measured WAF
                ok = use_model_against_base(
                    MODE_FALLBACK,
                    None,
                    base_waf,
                    entry["modelled_waf"],
                    self.base_compare["calibration"],
                    float(c["fallback_margin"]),
                )
                if not ok:
                    entry["action"] = "fallback (modelled WAF above the base design's measured)"
                self.base_compare["lost"] = not ok
        new_mode = MODE_ML if ok else MODE_FALLBACK
        if new_mode != st.mode:
            self.mode_switches += 1
        st.mode = new_mode
        if new_mode == MODE_FALLBACK:
            self._fallback_bounds()
            entry.setdefault("action", "fallback (accuracy below threshold)")
            self.history.append(entry)
            return
        self._apply_configuration(self._pending_groups, self._pending_reloc)
        entry["configuration"] = self.configuration
        entry["action"] = "model deployed"
        self.history.append(entry)

    def _mature_plog(self, now: int, bounds, fallback: dict) -> dict:
        """PLog from the samples written before c10's lower bound (``plog=mature``): every one,
        a pending one with its age (a lower bound past every bounded group's BIR, so its survival
        and residence in those groups are exact), categorised by the new model. The latest
        labelled samples (``plog=validation``) lack the long-lived ones still pending, which
        makes the model's GN traffic too small. Too few mature samples: ``fallback``."""
        data = self.ring.collect(now, long_bound=0)
        old = data["time"] <= now - int(bounds[-1])
        if old.sum() < int(self.cfg["min_samples"]):
            return fallback
        pred = self._predict(self.state.sample_features[data["slot"][old]]).astype(np.int64)
        return {"pred": pred, "inv": data["inv"][old]}

    def _training_window(self, data: dict, y: np.ndarray | None, now: int, bounds) -> tuple[dict, np.ndarray | None]:
        """The samples a retraining learns from (``train_span``, ``label_lag``,
        ``censored_labels``; see DEFAULTS). Without ``train_span``: every labelled sample of
        the ring, as collected."""
        c = self.cfg
        if c["train_span"] is None:
            return data, y
        hi = now - int(float(c["label_lag"]) * self.capacity)
        lo = hi - int(float(c["train_span"]) * self.capacity)
        if c["censored_labels"] == "age":
            # the authors' FILL_MAXTIME: a sample still pending gets its age as its label
            data = self.ring.collect(now, long_bound=0)
        keep = (data["time"] >= lo) & (data["time"] < hi)
        out = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
        y = np.maximum(np.searchsorted(bounds, out["inv"], side="left"), 1) - 1 if keep.any() else None
        return out, y

    def _deploy_int8(self) -> None:
        """Kernel arguments of the new integer model, and its C header's build started on
        another thread (``int8_runtime``: ``c`` waits for it, ``numba`` builds nothing)."""
        from dogi_ml.export.numba_kernel import batch_scratch

        self.qargs = self.qmodel.kernel_args()
        self.qscratch = batch_scratch(self.qargs)
        self._cbuild = None
        runtime = self.cfg["int8_runtime"]
        if runtime == "numba":
            return
        from dogi_ml.export.c_header import emit_header
        from dogi_ml.export.cbuild import BackgroundBuild, find_compiler

        if find_compiler() is None:
            if runtime == "c":
                raise RuntimeError(f"policy {self.name}: int8_runtime=c needs a C compiler (set CC or install gcc)")
            return
        self._cbuild = BackgroundBuild(emit_header(self.qmodel), "mlp", self.qmodel.n_features, self.qmodel.n_classes)
        if runtime == "c":
            self._cbuild.wait()

    def _quantise(self, model, X_calib):
        from dogi_ml.export.quantize import quantize_model

        if getattr(model, "name", None) != "mlp":
            raise ValueError(f"policy {self.name}: deployed=int8 runs the integer MLP; model is {model.name!r}")
        return quantize_model(model, X_calib, feature_names=list(self.cfg["features"]))

    # -- results ---------------------------------------------------------------------------
    def label(self) -> str:
        c = self.cfg
        parts = [] if c["variant"] == "full" else [{"base": "base", "user": "+User", "grp": "+Grp"}[c["variant"]]]
        if c["predictor"] != "ml":
            parts.append(c["predictor"])
        if c["intermediate_groups"]:
            parts.append(f"N={c['intermediate_groups']}")
        if c["model"] != "mlp":
            parts.append(c["model"])
        if c["deployed"] != "float":
            parts.append(c["deployed"])
        if c["relocation"] is not None and c["relocation"] != {0: "age_groups", 1: "ml"}.get(VARIANTS[c["variant"]][2]):
            parts.append(f"reloc={c['relocation']}")
        if c["fallback_victims"] != "all":
            parts.append(f"victims={c['fallback_victims']}")
        if c["mu_rule"] != "climb":
            parts.append(f"mu_rule={c['mu_rule']}")
        return "dogi" + (f"[{','.join(parts)}]" if parts else "")

    def summary(self, state) -> dict:
        conf = state.user_confusion
        total = int(conf.sum())
        st = record(state.scalars)
        gc_ok, gc_total, mis, mis_total = (
            int(st.gc_correct),
            int(st.gc_scored),
            int(st.mispredicted),
            int(st.mispredict_scored),
        )
        acc = user_accuracies(conf)
        return {
            "variant": self.cfg["variant"],
            "predictor": self.cfg["predictor"],
            **acc,
            "user_confusion": conf.tolist(),
            "user_predictions_scored": total,
            "gc_accuracy": gc_ok / gc_total if gc_total else None,
            "mispredict_ratio": mis / mis_total if mis_total else None,
            "gc_relocations_scored": gc_total,
            "gc_destinations": state.gc_destinations.tolist(),
            "hot_threshold": int(st.hot_threshold),
            "hot_threshold_steps": int(st.hot_threshold_steps),
            "mode": "ml" if st.mode == MODE_ML else "fallback",
            "mode_switches": self.mode_switches,
            "fallbacks": {
                reason: sum(1 for h in self.history if h.get("action") == reason)
                for reason in sorted(
                    {h["action"] for h in self.history if str(h.get("action", "")).startswith("fallback")}
                )
            },
            "retired_segments": self.retired_segments,
            "base_ghost_waf": self.ghost.waf if self.ghost is not None else None,
            # the ghost's time on this process (queueing its writes, when it runs in a child)
            "base_ghost_seconds": self.ghost_s,
            "base_ghost_process": isinstance(self.ghost, GhostProcess),
            "model_agreement": _model_agreement(self.history),
            "configuration": self.configuration,
            "n_intermediate_groups": int(st.n_intermediate) if st.mode == MODE_ML else None,
            "retrains": sum(1 for h in self.history if "train_seconds" in h),
            "train_seconds": self.train_s,
            "inference_ns_per_block": 1e9 * self.infer_s / self.infer_blocks if self.infer_blocks else None,
            "inferred_blocks": self.infer_blocks,
            # predictions the feature thread made (feature_thread with deployed=int8), its CPU time
            "inference_ahead_ns_per_block": 1e9 * self.ahead_s / self.ahead_blocks if self.ahead_blocks else None,
            "inferred_ahead_blocks": self.ahead_blocks,
            "inferred_ahead_used": self.ahead_used,
            "int8_blocks_by_runtime": dict(self.int8_blocks) if self.cfg["deployed"] == "int8" else None,
            "feature_ns_per_block": 1e9 * self.feature_s / self.feature_rows if self.feature_rows else None,
            # what features cost the loop's thread (its wait for the feature thread)
            "feature_wait_ns_per_block": 1e9 * self.feature_wait_s / self.feature_rows if self.feature_rows else None,
            "training_history": self.history,
        }


def _int8_classes_into(cbuild, qargs, scratch, X: np.ndarray, out: np.ndarray) -> str:
    """Classes of ``X`` (C-contiguous int64) by a deployed integer model: its compiled C header
    once ``cbuild`` is done, the Numba kernel (``qargs``, ``scratch``) before; both release the
    GIL. Returns the runtime that ran (``"c"`` or ``"numba"``)."""
    cm = cbuild.ready() if cbuild is not None else None
    if cm is not None:
        cm.classes_into(X, out)
        return "c"
    from dogi_ml.export.numba_kernel import int8_mlp_classes_into

    int8_mlp_classes_into(X, *qargs, scratch, out)
    return "numba"


GHOST_PROCESS_WRITES = 1 << 25  # ghost_process=auto: a child process from this many trace writes on


def _read_exact(f, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            raise EOFError("pipe closed")
        buf += chunk
    return bytes(buf)


def ghost_child() -> None:
    """The ghost's process (``python -c``): an init message (pickled base-design parameters,
    simulator config, capacity), then chunks of writes to apply and counter queries, framed as
    one op byte and a length; answers each query once every chunk sent before it is applied."""
    import os
    import pickle
    import struct
    import sys

    from dogi_ml.sim import Simulator

    cmd = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed goes to stderr, not into the reply stream
    try:
        op, n = struct.unpack("<cQ", _read_exact(cmd, 9))
        params, sim_cfg, capacity = pickle.loads(_read_exact(cmd, n))
        ghost = Simulator(DOGI(variant="base", **params), sim_cfg, capacity)
        ghost.prefill()
        busy = 0.0
        while True:
            op, n = struct.unpack("<cQ", _read_exact(cmd, 9))
            if op == b"W":
                writes = np.frombuffer(_read_exact(cmd, n), np.int64)
                t0 = time.perf_counter()
                ghost.feed(writes)
                busy += time.perf_counter() - t0
            elif op == b"C":
                out.write(struct.pack("<cqqd", b"C", ghost.user_writes, ghost.gc_writes, busy))
            else:
                return
    except EOFError:
        return
    except BaseException as e:  # reported to the parent, which raises it
        msg = f"{type(e).__name__}: {e}".encode()
        out.write(struct.pack("<cQ", b"E", len(msg)) + msg)


class GhostThread:
    """The ghost simulator fed on a worker thread (``ghost_process=thread``, issue 18): the
    engine's loop releases the GIL, so the ghost's loop runs beside DOGI's on a second core.
    Feeds queue in order; the counters wait for them, so results are the in-line ghost's."""

    def __init__(self, sim):
        from concurrent.futures import ThreadPoolExecutor

        self.sim = sim
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="dogi-ghost")
        self._pending = []

    def feed(self, writes: np.ndarray) -> None:
        self._pending.append(self._pool.submit(self.sim.feed, writes))

    def _wait(self):
        for f in self._pending:
            f.result()  # re-raises the ghost's error here
        self._pending.clear()
        return self.sim

    @property
    def user_writes(self) -> int:
        return self._wait().user_writes

    @property
    def gc_writes(self) -> int:
        return self._wait().gc_writes

    @property
    def waf(self) -> float:
        return self._wait().waf


class GhostProcess:
    """The base design's ghost simulator in a child process (same counters as an in-process
    :class:`~dogi_ml.sim.Simulator`). ``feed`` queues the writes and returns at once (a sender
    thread writes them to the child's pipe, without the GIL); the counters wait until the child
    has applied every chunk queued before the query. A plain ``python -c`` child, not
    multiprocessing's spawn: that re-imports the caller's main script."""

    def __init__(self, params: dict, sim_cfg, capacity: int):
        import pickle
        import queue
        import struct
        import subprocess
        import sys
        import threading
        import weakref

        code = "from dogi_ml.policies.dogi import ghost_child; ghost_child()"
        self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._queue: queue.Queue = queue.Queue()
        self.busy_s = 0.0
        init = pickle.dumps((params, sim_cfg, capacity))
        self._queue.put(struct.pack("<cQ", b"I", len(init)) + init)

        def sender(q, pipe):
            try:
                while True:
                    item = q.get()
                    if item is None:
                        pipe.close()
                        return
                    pipe.write(item)
                    pipe.flush()
            except (BrokenPipeError, OSError):
                return  # the child died: the next query reports it

        threading.Thread(
            target=sender, args=(self._queue, self._proc.stdin), name="dogi-ghost-send", daemon=True
        ).start()
        weakref.finalize(self, GhostProcess._stop, self._queue, self._proc)

    @staticmethod
    def _stop(q, proc) -> None:
        q.put(None)
        try:
            proc.wait(5)
        except Exception:
            proc.kill()

    def feed(self, writes: np.ndarray) -> None:
        import struct

        w = np.ascontiguousarray(writes, np.int64)
        self._queue.put(struct.pack("<cQ", b"W", w.nbytes))
        self._queue.put(memoryview(w).cast("B"))

    def _counters(self) -> tuple[int, int]:
        import struct

        self._queue.put(struct.pack("<cQ", b"C", 0))
        try:
            head = _read_exact(self._proc.stdout, 1)
            if head == b"E":
                (n,) = struct.unpack("<Q", _read_exact(self._proc.stdout, 8))
                raise RuntimeError(
                    f"policy dogi: the ghost process failed: {_read_exact(self._proc.stdout, n).decode()}"
                )
            u, g, self.busy_s = struct.unpack("<qqd", _read_exact(self._proc.stdout, 24))
        except EOFError:
            raise RuntimeError(
                f"policy dogi: the ghost process died (exit code {self._proc.wait()}); see its messages above"
            ) from None
        return int(u), int(g)

    @property
    def user_writes(self) -> int:
        return self._counters()[0]

    @property
    def gc_writes(self) -> int:
        return self._counters()[1]

    @property
    def waf(self) -> float:
        u, g = self._counters()
        return (u + g) / u if u else float("nan")


def _model_agreement(history: list[dict]) -> dict | None:
    """How the Markov model's WAF of each applied configuration compares with the WAF measured
    over the period it ran: the pairs and the mean relative error (measured / modelled - 1)."""
    pairs = [
        (h["previous_modelled_waf"], h["measured_waf"])
        for h in history
        if h.get("previous_modelled_waf") and h.get("measured_waf")
    ]
    if not pairs:
        return None
    rel = [m / p - 1.0 for p, m in pairs]
    return {
        "periods": len(pairs),
        "mean_relative_error": float(np.mean(rel)),
        "mean_abs_relative_error": float(np.mean(np.abs(rel))),
        "modelled_measured": [[float(p), float(m)] for p, m in pairs],
    }


def _even_merge(n: int) -> list[list[int]]:
    """``n`` contiguous groups of the ten categories, as even as possible (no search)."""
    edges = np.linspace(0, N_CAT, n + 1).round().astype(int)
    return [list(range(edges[k], edges[k + 1])) for k in range(n)]
