"""The four oracles of MINOS §3.3 (``../shared/papers/minos.txt``, Table 1) on one K-stream structure.

Every oracle knows each write's true invalidation time (:func:`dogi_ml.oracles.annotate.annotate`)
and differs only in the ``K - 1`` separation thresholds over it; a user write goes to stream
``i`` when ``tau_{i-1} < t <= tau_i`` (``tau_0 = 0``, the last user stream takes everything
above ``tau_{K-1}``, never-invalidated blocks included), every GC write to one extra GC stream
(§3.3: "six streams, 5 for user and 1 for GC"). Thresholds, in segments of user writes as in
:mod:`dogi_ml.markov.opmodel`:

- ``segment``: multiples of the segment size, ``tau_i = i`` (SepBIT's FK: a block invalidated
  within ``t`` writes goes to the ``ceil(t/s)``-th segment, the last one taking the rest);
- ``percentile``: equal quantiles of ``F``, ``F(tau_i) = i/K`` of the mass that is ever
  invalidated (Algorithm 1's start, line 6);
- ``kmeans``: 1-D k-means (scikit-learn, weighted on the distinct times) of the finite
  invalidation times into ``K`` clusters; ``tau_i`` is the largest time of the ``i``-th cluster,
  so the rule above reproduces the clustering's labels exactly;
- ``opmin``: the OP-Minimized Oracle. With OP enough for WAF 1 (``CalOP`` at the WAF-1
  thresholds) it is Algorithm 1 (``method="algorithm1"``, the paper) or the global optimum
  (``method="exact"``, :func:`~dogi_ml.markov.opmodel.optimal_thresholds`); with less, the
  thresholds of the lowest-WAF plan within the budget
  (:func:`~dogi_ml.markov.opmodel.thresholds_for_op`).

Victims: the paper uses "a CB victim selection policy [49]" (SepBIT), ``gp / (1 - gp) * age``
(§2.3), i.e. :func:`dogi_ml.sim.victims.cost_benefit_sepbit`, the default here.

OP budget (:func:`op_budget_segments`): the model's OP is the invalid data held; the simulator's
physical space also holds the logical data (``ceil(capacity / segment)`` segments), one open
segment per stream and the GC's free reserve (``sim.gc_free_segments``), so the budget given to
``opmin`` is ``op_ratio x logical segments`` minus one segment per stream and the reserve.
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

KINDS = ("opmin", "segment", "percentile", "kmeans")
METHODS = ("algorithm1", "exact")
#: the paper's victim selector for Table 1 (SepBIT's cost-benefit, gp/(1-gp) x age)
DEFAULT_VICTIM = "cost_benefit_sepbit"


# -- thresholds -----------------------------------------------------------------------------------


def _check_kind(kind) -> str:
    if kind not in KINDS:
        raise ValueError(
            f"unknown oracle kind {kind!r}; known: {', '.join(KINDS)} "
            "(opmin = OP-Minimized, Algorithm 1; segment; percentile; kmeans)"
        )
    return kind


def _check_streams(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 2:
        raise ValueError(
            f"the K-stream oracles need K >= 2 user streams (one threshold at least), got {k!r}; "
            "set n_user_streams (the paper: 5)"
        )
    return int(k)


def segment_thresholds(k: int) -> np.ndarray:
    """Segment Oracle: ``tau_i = i`` segments, ``i = 1 .. K-1``."""
    return np.arange(1, _check_streams(k), dtype=np.float64)


def percentile_thresholds(cdf: om.InvalidationCDF, k: int) -> np.ndarray:
    """Percentile Oracle: ``F(tau_i) = i/K`` of the ever-invalidated mass (equal quantiles)."""
    return cdf.equal_quantiles(_check_streams(k))


def kmeans_1d(values, weights, k: int, seed: int = 0, n_init: int = 10):
    """Weighted 1-D k-means by scikit-learn (Lloyd, k-means++ starts, best of ``n_init``);
    returns (sorted centres, label of each value in the sorted-centre order)."""
    from sklearn.cluster import KMeans

    x = np.asarray(values, np.float64).reshape(-1, 1)
    w = None if weights is None else np.asarray(weights, np.float64)
    distinct = np.unique(x[:, 0]).size
    if distinct < k:
        raise ValueError(
            f"k-means into {k} clusters needs at least {k} distinct invalidation times, "
            f"got {distinct}; use fewer streams or a longer trace"
        )
    km = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(x, sample_weight=w)
    order = np.argsort(km.cluster_centers_[:, 0])
    rank = np.empty(k, np.int64)
    rank[order] = np.arange(k)
    return km.cluster_centers_[order, 0], rank[km.labels_]


def kmeans_thresholds(cdf: om.InvalidationCDF, k: int, seed: int = 0) -> np.ndarray:
    """K-Means Oracle: 1-D k-means of the finite invalidation times (each distinct time weighted
    by its mass); ``tau_i`` is the largest time of the ``i``-th cluster (1-D clusters are
    intervals, so ``t <= tau_i`` reproduces the labels)."""
    k = _check_streams(k)
    mass = np.diff(np.r_[0.0, cdf.F])
    _, labels = kmeans_1d(cdf.t, mass, k, seed=seed)
    tau = np.array([cdf.t[labels == i].max() for i in range(k - 1)])
    if np.any(np.diff(tau) < 0):  # cannot happen for 1-D Lloyd clusters; checked, not assumed
        raise RuntimeError(f"k-means clusters are not intervals: {tau}")
    return tau


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
    plan: om.StreamPlan  # the model's WAF-1 plan (reclaim at t_max), or the plan within op_budget
    op_budget: float | None  # segments
    budget_plan: om.StreamPlan | None = None  # the model's plan within op_budget (None: over budget)


def oracle_thresholds(
    kind: str,
    cdf: om.InvalidationCDF,
    k: int,
    op_budget: float | None = None,
    method: str = "algorithm1",
    seed: int = 0,
) -> OracleThresholds:
    """The ``K - 1`` thresholds (segments) of oracle ``kind`` on ``cdf``, with the model's plan.
    ``opmin`` uses ``op_budget`` (segments; ``None``: the WAF-1 thresholds whatever they cost);
    the others ignore it for their thresholds, and with one the model's plan within it is
    ``budget_plan`` (:func:`plan_within_budget`)."""
    kind = _check_kind(kind)
    k = _check_streams(k)
    if method not in METHODS:
        raise ValueError(f"unknown opmin method {method!r}; known: {', '.join(METHODS)}")
    if kind == "segment":
        th = segment_thresholds(k)
    elif kind == "percentile":
        th = percentile_thresholds(cdf, k)
    elif kind == "kmeans":
        th = kmeans_thresholds(cdf, k, seed)
    else:
        if op_budget is not None and not (np.isfinite(op_budget) and op_budget > 0):
            raise ValueError(
                f"OP budget must be > 0 segments, got {op_budget}: raise sim.op_ratio "
                "(the budget is op_ratio x logical segments less one segment per stream "
                "and the GC reserve)"
            )
        solve = om.algorithm1 if method == "algorithm1" else om.optimal_thresholds
        waf1 = solve(cdf, k)
        if op_budget is None or op_budget >= waf1.op:
            p = om.plan(cdf, waf1.thresholds)
            return OracleThresholds(kind, waf1.thresholds, p, op_budget, p if op_budget is not None else None)
        p = om.thresholds_for_op(cdf, k, op_budget, method)
        return OracleThresholds(kind, p.thresholds, p, op_budget, p)
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
    stream at bind time (``kind``; ``opmin`` within :func:`op_budget_segments` at the run's
    ``op_ratio``); an explicit list gives them in blocks (``K - 1`` non-decreasing values; 0
    leaves a stream empty, e.g. ``[0]`` with two user streams is §3.1's single stream).
    ``victim``: the selector (default the paper's CB, ``cost_benefit_sepbit``; ``null`` =
    ``sim.victim``). ``gc_free_segments``: the GC reserve left out of ``opmin``'s budget (keep it
    equal to ``sim.gc_free_segments``)."""

    name = "kstream_oracle"
    needs_future = True
    place_user = kstream_user
    place_gc = kstream_gc
    on_reclaim = no_reclaim_hook

    def __init__(
        self,
        n_groups=None,
        kind="opmin",
        n_user_streams=5,
        thresholds="search",
        method="algorithm1",
        victim=DEFAULT_VICTIM,
        gc_free_segments=2,
        seed=0,
        inv=None,
        **params,
    ):
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
        self.k, self.method, self.seed, self.inv = k, method, int(seed), inv
        self.gc_free_segments = int(gc_free_segments)
        if victim is not None:
            self.victim = str(victim)
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
        return f"{self.name}[{self.kind}]"

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
            budget = float(ctx.n_segments - logical - self.n_groups - self.gc_free_segments)
            if self.kind == "opmin" and budget <= 0:
                raise ValueError(
                    f"policy {self.name}: no OP left for invalid data ({ctx.n_segments} physical "
                    f"segments, {logical} of data, {self.n_groups} open, {self.gc_free_segments} "
                    "GC reserve); raise sim.op_ratio"
                )
            self.found = oracle_thresholds(
                self.kind, cdf, self.k, budget if budget > 0 else None, self.method, self.seed
            )
            bounds = thresholds_to_blocks(self.found.thresholds, seg)
        self.bounds = bounds
        return KStreamState(inv=inv, bounds=bounds.astype(np.int64))

    def summary(self, state) -> dict:
        out = {"oracle_kind": self.kind, "oracle_thresholds_blocks": [int(x) for x in state.bounds]}
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
