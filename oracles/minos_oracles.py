"""The four oracles of MINOS §3.3 (``../shared/papers/minos.txt``, Table 1) on one K-stream structure.

Every oracle knows each write's true invalidation time (:func:`dogi_ml.oracles.annotate.annotate`)
and differs only in the ``K - 1`` separation thresholds over it; a user write goes to stream
``i`` when ``tau_{i-1} < t <= tau_i`` (``tau_0 = 0``, the last user stream takes everything
above ``tau_{K-1}``, never-invalidated blocks included), every GC write to one extra GC stream
(§3.3: "six streams, 5 for user and 1 for GC"). Thresholds, in segments of user writes as in
:mod:`dogi_ml.markov.opmodel`; none of the paper's four depends on the OP:

- ``segment``: multiples of the segment size, ``tau_i = i`` (SepBIT's FK: a block invalidated
  within ``t`` writes goes to the ``ceil(t/s)``-th segment, the last one taking the rest);
- ``percentile``: equal quantiles, ``F(tau_i) = i/K`` of the measured writes, never-invalidated
  ones included (``percentile_of="writes"``, the default); ``percentile_of="invalidated"`` takes
  ``i/K`` of the mass that is ever invalidated instead (Algorithm 1's start, line 6, as
  :meth:`~dogi_ml.markov.opmodel.InvalidationCDF.equal_quantiles` reads it);
- ``kmeans``: the optimal 1-D k-means of the finite invalidation times into ``K`` clusters (each
  write one point; :func:`kmeans_1d`, exact by dynamic programming, i.e. the clustering Lloyd's
  iterations converge to at best); ``tau_i`` is the largest time of the ``i``-th cluster, so the
  rule above reproduces the clustering's labels exactly;
- ``opmin``: the OP-Minimized Oracle, Algorithm 1's thresholds (CalOP minimised for WAF 1, the
  last stream reclaimed at the largest invalidation time; ``method="exact"`` for the global
  optimum, :func:`~dogi_ml.markov.opmodel.optimal_thresholds`), whatever the run's OP.

Not in the paper: ``opbudget``, the thresholds of the lowest-WAF plan the model finds within the
run's OP budget (:func:`~dogi_ml.markov.opmodel.thresholds_for_op`; the WAF-1 thresholds when the
budget covers them). It was this module's ``opmin`` before issue 38 and is kept for comparison.

Victims: the paper uses "a CB victim selection policy [49]" (SepBIT), ``gp / (1 - gp) * age``
(§2.3), i.e. :func:`dogi_ml.sim.victims.cost_benefit_sepbit`, the default here.

OP budget (:func:`op_budget_segments`; ``opbudget``'s input, and the budget of the model's plan
every oracle reports): the model's OP is the invalid data held; the simulator's physical space
also holds the logical data (``ceil(capacity / segment)`` segments), one open segment per stream
and the GC's free reserve (the run's ``sim.gc_free_segments``, read from the simulator's
context), so the budget is ``op_ratio x logical segments`` minus one segment per stream and the
reserve.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.markov import opmodel as om
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS

from .annotate import NEVER, annotate

#: the paper's four oracles (Table 1) and the OP-budget plan, which is not the paper's
KINDS = ("opmin", "segment", "percentile", "kmeans", "opbudget")
PAPER_KINDS = ("segment", "percentile", "kmeans", "opmin")
METHODS = ("algorithm1", "exact")
#: what the Percentile Oracle's ``i/K`` is a share of
PERCENTILE_OF = ("writes", "invalidated")
#: the paper's victim selector for Table 1 (SepBIT's cost-benefit, gp/(1-gp) x age)
DEFAULT_VICTIM = "cost_benefit_sepbit"


# -- thresholds -----------------------------------------------------------------------------------


def _check_kind(kind) -> str:
    if kind not in KINDS:
        raise ValueError(
            f"unknown oracle kind {kind!r}; known: {', '.join(KINDS)} (opmin = OP-Minimized, "
            "Algorithm 1; segment; percentile; kmeans; opbudget = the OP-budget plan, not the paper's)"
        )
    return kind


def _check_streams(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 2:
        raise ValueError(
            f"the K-stream oracles need K >= 2 user streams (one threshold at least), got {k!r}; "
            "set n_user_streams (the paper: 5)"
        )
    return int(k)


def _check_percentile_of(percentile_of) -> str:
    if percentile_of not in PERCENTILE_OF:
        raise ValueError(
            f"unknown percentile_of {percentile_of!r}; known: writes (i/K of all measured writes, "
            "the paper) | invalidated (i/K of the writes that are ever invalidated)"
        )
    return percentile_of


def segment_thresholds(k: int) -> np.ndarray:
    """Segment Oracle: ``tau_i = i`` segments, ``i = 1 .. K-1``."""
    return np.arange(1, _check_streams(k), dtype=np.float64)


def percentile_thresholds(cdf: om.InvalidationCDF, k: int, percentile_of: str = "writes") -> np.ndarray:
    """Percentile Oracle: the smallest ``tau_i`` with ``F(tau_i) >= i/K`` of the measured writes
    (``percentile_of="writes"``; never-invalidated blocks count in the mass, so a quantile above
    ``F``'s top, ``1 - never_fraction``, is the largest finite time and leaves the streams above
    it empty) or of the ever-invalidated mass (``"invalidated"``)."""
    k = _check_streams(k)
    if _check_percentile_of(percentile_of) == "invalidated":
        return cdf.equal_quantiles(k)
    return np.minimum(cdf.quantile(np.arange(1, k) / k), cdf.t_max)


@nb.njit(cache=True)
def _interval_sse(cw, cwx, cwxx, i, j):
    """Weighted sum of squared distances of sorted points ``i .. j`` (inclusive) to their mean,
    from prefix sums of ``w``, ``w x`` and ``w x^2``."""
    W = cw[j + 1] - cw[i]
    S = cwx[j + 1] - cwx[i]
    v = (cwxx[j + 1] - cwxx[i]) - S * S / W
    return v if v > 0.0 else 0.0


@nb.njit(cache=True)
def _kmeans_1d_dp(x, w, k, first):
    """Least weighted within-cluster sum of squares of sorted distinct points ``x`` split into
    ``k`` intervals (optimal 1-D clusters are intervals). ``D_c(j)``, the best cost of points
    ``0 .. j`` in ``c + 1`` clusters, is ``min_i D_{c-1}(i - 1) + sse(i, j)``; the best ``i`` never
    decreases with ``j`` (the cost obeys the quadrangle inequality), so each layer is solved by
    divide and conquer over ``j`` in O(n log n). ``first[c, j]``: the first point of the last
    cluster when points ``0 .. j`` form ``c + 1`` clusters. Returns the least cost."""
    n = x.shape[0]
    mean = np.sum(w * x) / np.sum(w)
    cw = np.zeros(n + 1)
    cwx = np.zeros(n + 1)
    cwxx = np.zeros(n + 1)
    for j in range(n):
        d = x[j] - mean  # centred: the prefix sums stay small, so the differences keep their digits
        cw[j + 1] = cw[j] + w[j]
        cwx[j + 1] = cwx[j] + w[j] * d
        cwxx[j + 1] = cwxx[j] + w[j] * d * d
    prev = np.empty(n)
    cur = np.empty(n)
    for j in range(n):
        prev[j] = _interval_sse(cw, cwx, cwxx, 0, j)
    stack = np.empty((256, 4), np.int64)  # depth <= log2(n) + 1 pending ranges
    for c in range(1, k):
        cur[:] = np.inf
        top = 0
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = c, n - 1, c, n - 1
        top = 1
        while top > 0:
            top -= 1
            jl, jr, il, ir = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
            if jl > jr:
                continue
            mid = (jl + jr) // 2
            best = np.inf
            bi = il
            for i in range(il, min(ir, mid) + 1):
                v = prev[i - 1] + _interval_sse(cw, cwx, cwxx, i, mid)
                if v < best:  # strict: the leftmost optimum, which is the monotone one
                    best = v
                    bi = i
            cur[mid] = best
            first[c, mid] = bi
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = jl, mid - 1, il, bi
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = mid + 1, jr, bi, ir
            top += 2
        for j in range(n):
            prev[j] = cur[j]
    return prev[n - 1]


class KMeans1D(NamedTuple):
    """An optimal 1-D k-means clustering of sorted distinct values."""

    starts: np.ndarray  # int64[k]: index of each cluster's first value
    centres: np.ndarray  # float64[k]: weighted mean of each cluster, increasing
    labels: np.ndarray  # int64[n]: cluster of each value
    sse: float  # weighted within-cluster sum of squares


def kmeans_1d(values, weights, k: int) -> KMeans1D:
    """Optimal weighted 1-D k-means (least within-cluster sum of squares, exactly; ties go to the
    leftmost split) of ``values`` with ``weights`` (> 0). ``values`` must be sorted and distinct,
    as :class:`~dogi_ml.markov.opmodel.InvalidationCDF`'s times are. O(k n log n)."""
    x = np.ascontiguousarray(values, np.float64)
    w = np.ascontiguousarray(weights, np.float64)
    if x.ndim != 1 or w.shape != x.shape:
        raise ValueError(f"k-means needs one weight per value, got shapes {x.shape} and {w.shape}")
    if x.size > 1 and not np.all(np.diff(x) > 0):
        raise ValueError("k-means values must be sorted and distinct (merge repeats into their weight)")
    if not np.all(w > 0):
        raise ValueError("k-means weights must be > 0")
    k = int(k)
    if x.size < k:
        raise ValueError(
            f"k-means into {k} clusters needs at least {k} distinct invalidation times, "
            f"got {x.size}; use fewer streams or a longer trace"
        )
    first = np.zeros((k, x.size), np.int64)
    sse = float(_kmeans_1d_dp(x, w, k, first))
    starts = np.zeros(k, np.int64)
    j = x.size - 1
    for c in range(k - 1, 0, -1):
        starts[c] = first[c, j]
        j = starts[c] - 1
    labels = np.repeat(np.arange(k), np.diff(np.r_[starts, x.size]))
    centres = np.array([np.average(x[labels == c], weights=w[labels == c]) for c in range(k)])
    return KMeans1D(starts, centres, labels, sse)


def kmeans_thresholds(cdf: om.InvalidationCDF, k: int) -> np.ndarray:
    """K-Means Oracle: the optimal 1-D k-means of the finite invalidation times (each distinct time
    weighted by its mass, i.e. one point per write); ``tau_i`` is the largest time of the ``i``-th
    cluster (1-D clusters are intervals, so ``t <= tau_i`` reproduces the labels)."""
    k = _check_streams(k)
    mass = np.diff(np.r_[0.0, cdf.F])
    km = kmeans_1d(cdf.t, mass, k)
    return cdf.t[km.starts[1:] - 1].astype(np.float64)


def op_budget_segments(
    capacity: int, segment_blocks: int, op_ratio: float, n_streams: int, gc_free_segments: int = 2
) -> float:
    """OP (segments of invalid data) the simulator leaves for the model's CalOP: the physical
    segments ``floor(capacity (1 + op_ratio) / segment)`` minus the logical data
    ``ceil(capacity / segment)``, one open segment per stream and GC's free reserve."""
    if not op_ratio > 0:
        raise ValueError(f"op_ratio must be > 0 (physical = logical x (1 + op_ratio)), got {op_ratio}")
    physical = math.floor(capacity * (1.0 + op_ratio) / segment_blocks)
    return float(physical - math.ceil(capacity / segment_blocks) - n_streams - gc_free_segments)


def op_ratio_for_budget(
    op_segments: float, capacity: int, segment_blocks: int, n_streams: int, gc_free_segments: int = 2
) -> float:
    """The smallest ``sim.op_ratio`` whose :func:`op_budget_segments` is at least ``op_segments``."""
    need = math.ceil(op_segments - 1e-9) + math.ceil(capacity / segment_blocks) + n_streams + gc_free_segments
    return (need * segment_blocks + 0.5) / capacity - 1.0


def plan_within_budget(cdf: om.InvalidationCDF, thresholds, op_budget: float) -> om.StreamPlan | None:
    """The model's plan for fixed inner ``thresholds`` within ``op_budget`` segments of OP: the
    inner streams reclaimed at their thresholds (WAF 1), the last at the largest age ``T >=
    tau_{K-1}`` whose CalOP fits (:func:`~dogi_ml.markov.opmodel.thresholds_for_op` with the
    thresholds held). ``None`` if the inner streams alone need more than the budget (the model
    has no WAF for it: they would pay GC too)."""
    th = np.asarray(thresholds, np.float64)
    a = float(th[-1])
    inner = float(om.stream_ops(cdf, th, max(a, cdf.t_max))[:-1].sum())
    if inner > op_budget * (1 + 1e-12):
        return None
    lo = int(np.searchsorted(cdf.t, a, side="right"))
    Ts = np.r_[a, cdf.t[lo:]]
    Fa, Sa = float(cdf(a)), float(cdf.partial_moment(a))
    last = (cdf(Ts) - Fa) * Ts - (cdf.partial_moment(Ts) - Sa)
    fits = np.flatnonzero(inner + last <= op_budget * (1 + 1e-12))
    return om.plan(cdf, th, float(Ts[fits[-1]]))


def finite_trace_op(inv: np.ndarray, thresholds_blocks, segment_blocks: int) -> float:
    """The OP (segments) the K-stream placement needs for WAF 1 on this very stream, exactly: each
    stream's writes fill its segments in order, a segment frees when its last block dies (an
    oracle's GC copies nothing then), and the answer is the peak over time of the dead blocks
    held in segments not yet wholly dead. CalOP is the stationary form of this; on a finite
    trace the last stream's long-lived blocks all die before the end, which CalOP does not
    count (``sum_{t > tau_{K-1}} p t`` more at the end), and segments free after their last
    block rather than their first. ``inv``: the annotation of the stream as simulated."""
    inv = np.asarray(inv, np.int64)
    seg = int(segment_blocks)
    t = np.arange(inv.size, dtype=np.int64)
    never = inv >= NEVER
    death = np.where(never, np.iinfo(np.int64).max, t + np.where(never, 0, inv))
    stream = np.searchsorted(
        np.asarray(thresholds_blocks, np.int64), np.where(never, np.iinfo(np.int64).max, inv), side="left"
    )
    up, down = [], []
    for i in np.unique(stream):
        d = death[stream == i]
        starts = np.arange(0, d.size, seg)
        free = np.maximum.reduceat(d, starts)[np.arange(d.size) // seg]
        held = d < free  # dead before its segment frees: garbage meanwhile
        up.append(d[held])
        down.append(free[held & (free < np.iinfo(np.int64).max)])
    times = np.concatenate(up + down)
    steps = np.concatenate([np.ones(sum(u.size for u in up), np.int64), -np.ones(sum(x.size for x in down), np.int64)])
    if times.size == 0:
        return 0.0
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(steps[order])
    last_at_time = np.r_[times[1:] != times[:-1], True]  # the level after all events at a time
    return float(level[last_at_time].max()) / seg


def two_tier_replay(
    inv: np.ndarray, thresholds_blocks, reclaim_ages_blocks, segment_blocks: int, warmup_blocks: int | None = None
) -> dict:
    """The paper's validation experiment (§3.1-§3.2, Figs. 3 and 5) replayed on the annotated
    stream: Tier 1 streams split by ``thresholds_blocks``, each filling its segments in write
    order; stream ``i``'s segment is reclaimed ``reclaim_ages_blocks[i]`` user writes after it is
    sealed, its still-valid blocks moving to an unbounded Tier 2 (free, as in the model). Over
    the window from ``warmup_blocks`` (default: the largest reclaim age) to the end: WAF =
    1 + blocks migrated by reclaims in the window / writes in it, and OP = the time-averaged dead
    data (segments) held in Tier 1. Never-invalidated blocks are not counted as migrated (the
    model's ``waf_excluding_never``)."""
    inv = np.asarray(inv, np.int64)
    n, seg = inv.size, int(segment_blocks)
    ages = np.asarray(reclaim_ages_blocks, np.int64)
    w0 = int(ages.max()) if warmup_blocks is None else int(warmup_blocks)
    if not 0 <= w0 < n:
        raise ValueError(
            f"warm-up of {w0} writes leaves no window in a stream of {n}; use a longer trace or smaller reclaim ages"
        )
    t = np.arange(n, dtype=np.int64)
    never = inv >= NEVER
    big = np.iinfo(np.int64).max // 4
    death = np.where(never, big, t + np.where(never, 0, inv))
    stream = np.searchsorted(np.asarray(thresholds_blocks, np.int64), np.where(never, big, inv), side="left")
    migrated, dead_time = 0, 0.0
    for i in np.unique(stream):
        idx = np.flatnonzero(stream == i)
        chunk = np.arange(idx.size) // seg
        sealed = np.maximum.reduceat(idx, np.arange(0, idx.size, seg))[chunk]
        reclaim = sealed + ages[min(i, ages.size - 1)]
        d = death[idx]
        in_window = (reclaim >= w0) & (reclaim < n)
        migrated += int(np.sum(in_window & (d > reclaim) & ~never[idx]))
        # dead data held in Tier 1 from death to reclaim, clipped to the window
        lo, hi = np.maximum(d, w0), np.minimum(reclaim, n)
        dead_time += float(np.sum(np.maximum(hi - lo, 0)))
    span = n - w0
    return {"waf": 1.0 + migrated / span, "op_segments": dead_time / span / seg, "window_writes": span}


class OracleThresholds(NamedTuple):
    kind: str
    thresholds: np.ndarray  # K-1 thresholds in segments
    plan: om.StreamPlan  # the model's plan of these thresholds for WAF 1 (last stream reclaimed at t_max)
    op_budget: float | None  # segments
    budget_plan: om.StreamPlan | None = None  # the model's plan within op_budget (None: over budget)


def oracle_thresholds(
    kind: str,
    cdf: om.InvalidationCDF,
    k: int,
    op_budget: float | None = None,
    method: str = "algorithm1",
    percentile_of: str = "writes",
) -> OracleThresholds:
    """The ``K - 1`` thresholds (segments) of oracle ``kind`` on ``cdf``, with the model's plans.
    The paper's four ignore ``op_budget`` (segments) for their thresholds; with one given, the
    model's plan within it is ``budget_plan`` (:func:`plan_within_budget`). ``opbudget`` chooses
    its thresholds by it (:func:`~dogi_ml.markov.opmodel.thresholds_for_op`; ``None``: the WAF-1
    thresholds whatever they cost). ``method``: ``opmin``'s and ``opbudget``'s optimiser;
    ``percentile_of``: the Percentile Oracle's mass (:func:`percentile_thresholds`)."""
    kind = _check_kind(kind)
    k = _check_streams(k)
    _check_percentile_of(percentile_of)
    if method not in METHODS:
        raise ValueError(f"unknown opmin method {method!r}; known: {', '.join(METHODS)}")
    solve = om.algorithm1 if method == "algorithm1" else om.optimal_thresholds
    if kind == "segment":
        th = segment_thresholds(k)
    elif kind == "percentile":
        th = percentile_thresholds(cdf, k, percentile_of)
    elif kind == "kmeans":
        th = kmeans_thresholds(cdf, k)
    elif kind == "opmin":
        th = solve(cdf, k).thresholds  # the WAF-1 optimum: tau_K = t_max, whatever the OP
    else:
        if op_budget is not None and not (np.isfinite(op_budget) and op_budget > 0):
            raise ValueError(
                f"OP budget must be > 0 segments, got {op_budget}: raise sim.op_ratio "
                "(the budget is op_ratio x logical segments less one segment per stream "
                "and the GC reserve)"
            )
        waf1 = solve(cdf, k)
        if op_budget is None or op_budget >= waf1.op:
            p = om.plan(cdf, waf1.thresholds)
            return OracleThresholds(kind, waf1.thresholds, p, op_budget, p if op_budget is not None else None)
        bp = om.thresholds_for_op(cdf, k, op_budget, method)
        return OracleThresholds(kind, bp.thresholds, om.plan(cdf, bp.thresholds), op_budget, bp)
    th = np.minimum(th, cdf.t_max)
    budget_plan = None if op_budget is None else plan_within_budget(cdf, th, op_budget)
    return OracleThresholds(kind, th, om.plan(cdf, th), op_budget, budget_plan)


def thresholds_to_blocks(thresholds_segments, segment_blocks: int) -> np.ndarray:
    """Segments -> whole blocks (``t <= tau`` on integer block times). Jump points are
    ``inv / segment`` exactly, so rounding to the nearest block first avoids losing one to
    floating point; other values are floored."""
    x = np.asarray(thresholds_segments, np.float64) * segment_blocks
    near = np.rint(x)
    return np.where(np.abs(x - near) < 1e-6 * np.maximum(1.0, x), near, np.floor(x)).astype(np.int64)


def workload_cdf(inv: np.ndarray, prefill_blocks: int, segment_blocks: int) -> om.InvalidationCDF:
    """``F`` of the workload's own writes (the annotated stream after the prefill), in segments."""
    return om.InvalidationCDF.from_times(inv[prefill_blocks:], segment_blocks, never_marker=NEVER)


# -- the K-stream placement ---------------------------------------------------------------------


class KStreamState(NamedTuple):
    """The oracle's Numba state, by name."""

    inv: np.ndarray  # int64[stream] invalidation time of each write (blocks; NEVER)
    bounds: np.ndarray  # int64[K-1] thresholds in blocks, non-decreasing


@nb.njit(cache=True)
def kstream_user(s, p, lba, now):
    t = p.inv[now]
    bounds = p.bounds
    for g in range(bounds.shape[0]):
        if t <= bounds[g]:
            return g
    return bounds.shape[0]  # the last user stream (never-invalidated too)


@nb.njit(cache=True)
def kstream_gc(s, p, lba, victim, now):
    return s.prm[P_NGROUPS] - 1  # the one GC stream


class KStreamOracle(PlacementPolicy):
    """The §3.3 oracles: ``n_user_streams`` user streams split by thresholds on the true
    invalidation time, one GC stream. ``thresholds="search"`` computes them on the run's own
    stream at bind time (``kind``: the paper's ``opmin``, ``segment``, ``percentile``,
    ``kmeans``, or ``opbudget`` within :func:`op_budget_segments` at the run's ``op_ratio`` and GC
    reserve); an explicit list gives them in blocks (``K - 1`` non-decreasing values; 0 leaves a
    stream empty, e.g. ``[0]`` with two user streams is §3.1's single stream). ``method``:
    ``algorithm1`` (the paper) or ``exact`` for ``opmin``/``opbudget``; ``percentile_of``:
    ``writes`` (the paper) or ``invalidated`` for ``percentile``.
    Victims: ``policy.victim`` (default the paper's CB, ``cost_benefit_sepbit``; ``null`` follows
    ``sim.victim``)."""

    name = "kstream_oracle"
    victim = DEFAULT_VICTIM
    needs_future = True
    place_user = kstream_user
    place_gc = kstream_gc
    on_reclaim = no_reclaim_hook

    #: parameters this policy had before issue 38, each with what replaces it
    REMOVED_PARAMS = {
        "gc_free_segments": "the oracle reads the run's GC reserve; set sim.gc_free_segments instead",
        "seed": "k-means is exact (no random starts); drop it",
    }

    def __init__(
        self,
        n_groups=None,
        kind="opmin",
        n_user_streams=5,
        thresholds="search",
        method="algorithm1",
        percentile_of="writes",
        inv=None,
        **params,
    ):
        removed = sorted(set(params) & set(self.REMOVED_PARAMS))
        if removed:
            key = removed[0]
            raise ValueError(f"policy {self.name}: params.{key} is not a parameter: {self.REMOVED_PARAMS[key]}")
        self.kind = _check_kind(kind)
        k = _check_streams(n_user_streams)
        if n_groups is not None and int(n_groups) != k + 1:
            raise ValueError(
                f"policy {self.name}: {k} user streams and one GC stream make {k + 1} groups, "
                f"but n_groups={n_groups} (leave it null)"
            )
        super().__init__(k + 1, **params)
        if method not in METHODS:
            raise ValueError(f"policy {self.name}: unknown method {method!r}; known: {', '.join(METHODS)}")
        if percentile_of not in PERCENTILE_OF:
            raise ValueError(
                f"policy {self.name}: unknown percentile_of {percentile_of!r}; known: {', '.join(PERCENTILE_OF)}"
            )
        self.k, self.method, self.percentile_of, self.inv = k, method, percentile_of, inv
        if isinstance(thresholds, str):
            if thresholds != "search":
                raise ValueError(
                    f"policy {self.name}: thresholds must be 'search' or a list of {k - 1} "
                    f"block counts, got {thresholds!r}"
                )
            self.explicit = None
        else:
            b = np.asarray(list(thresholds), np.int64)
            if b.shape != (k - 1,) or np.any(b < 0) or np.any(np.diff(b) < 0):
                raise ValueError(
                    f"policy {self.name}: {k} user streams need {k - 1} non-negative, non-decreasing "
                    f"thresholds in blocks, got {list(thresholds)}"
                )
            self.explicit = b
        self.op_ratio = None  # set by the caller when known (summary only)
        self.found: OracleThresholds | None = None
        self.bounds = None

    def label(self) -> str:
        switches = [self.kind]
        if self.method != "algorithm1" and self.kind in ("opmin", "opbudget"):
            switches.append(self.method)
        if self.percentile_of != "writes" and self.kind == "percentile":
            switches.append(f"of={self.percentile_of}")
        return f"{self.name}[{','.join(switches)}]"

    def bind(self, ctx: SimContext) -> tuple:
        if self.inv is not None and len(self.inv) == len(ctx.stream):
            inv = self.inv
        else:
            inv, _prev = annotate(ctx.stream)
        seg = ctx.segment_blocks
        if self.explicit is not None:
            bounds = self.explicit.copy()
        else:
            cdf = workload_cdf(inv, ctx.prefill_blocks, seg)
            logical = math.ceil(ctx.capacity / seg)
            reserve = int(ctx.gc_free_segments)
            budget = float(ctx.n_segments - logical - self.n_groups - reserve)
            if self.kind == "opbudget" and budget <= 0:
                raise ValueError(
                    f"policy {self.name}: no OP left for invalid data ({ctx.n_segments} physical "
                    f"segments, {logical} of data, {self.n_groups} open, {reserve} GC reserve); "
                    "raise sim.op_ratio"
                )
            self.found = oracle_thresholds(
                self.kind, cdf, self.k, budget if budget > 0 else None, self.method, self.percentile_of
            )
            bounds = thresholds_to_blocks(self.found.thresholds, seg)
        self.bounds = bounds
        return KStreamState(inv=inv, bounds=bounds.astype(np.int64))

    def summary(self, state) -> dict:
        out = {
            "oracle_kind": self.kind,
            "oracle_method": self.method,
            "oracle_percentile_of": self.percentile_of,
            "oracle_thresholds_blocks": [int(x) for x in state.bounds],
        }
        if self.found is not None:
            p, bp = self.found.plan, self.found.budget_plan
            out.update(
                {
                    "oracle_thresholds_segments": [float(x) for x in self.found.thresholds],
                    "model_waf1_op_segments": float(p.op_total),
                    "op_budget_segments": self.found.op_budget,
                    # the model within the run's OP (None: the inner streams alone exceed it)
                    "model_waf": None if bp is None else float(bp.waf_excluding_never),
                    "model_op_segments": None if bp is None else float(bp.op_total),
                    "model_reclaim_age": None if bp is None else float(bp.end),
                }
            )
        return out
