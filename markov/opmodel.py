"""The OP model of MINOS §3 (``../shared/papers/minos.txt``): WAF and over-provisioning (OP)
from a workload's invalidation-time CDF, and the OP-minimising separation thresholds.

Notation (§3.1). ``F(t)`` is the share of written blocks whose invalidation time is at most
``t``; ``t`` counts *segments' worth of user writes* (an annotated time in user-written blocks
divided by the segment size). Blocks that are never invalidated are part of the mass but of no
finite time: ``F`` tops out at ``1 - never_fraction`` and they count in ``1 - F(t)`` everywhere.

- One stream, Tier 1 of ``T`` segments (§3.1): GC reaches a segment at age ``T``, finds
  ``1 - F(T)`` of it valid, so the asymptotic WAF is ``1 + (1 - F(T))``; the invalid data held
  in Tier 1 -- the OP -- is ``int_0^T F(t) dt`` (the valid rest is ``int_0^T (1 - F) dt``).
- Streams split by thresholds (§3.2, Algorithm 1): stream ``i`` takes the blocks with
  ``tau_{i-1} < t <= tau_i`` (``tau_0 = 0``) and keeps its segments until age ``tau_i``, by which
  time all its data is dead: WAF 1 for that stream, OP ``int_{tau_{i-1}}^{tau_i} (F(t) -
  F(tau_{i-1})) dt`` (CalOP, line 3). The last stream takes everything above ``tau_{K-1}``
  (never-invalidated blocks included) and is reclaimed at age ``tau_K``: with ``tau_K`` the
  largest finite invalidation time this is the WAF-1 configuration of §3.3 (WAF ``1 +
  never_fraction``, exactly 1 without never-invalidated blocks); with a smaller ``tau_K = T`` it is
  §3.2's cold stream, which alone pays the GC: WAF ``1 + (1 - F(T))``.

On the empirical (piecewise-constant, right-continuous) CDF every integral is exact: with the
sorted distinct times ``t_j`` of mass ``p_j``, ``int_a^b (F(t) - F(a)) dt = sum_{a < t_j <= b}
p_j (b - t_j)`` -- each block of stream ``i`` lies dead for ``tau_i - t`` before its segment is
reclaimed -- which two cumulative sums (of ``p_j`` and ``p_j t_j``) give in O(log n).
With the other thresholds fixed, CalOP is piecewise linear in ``tau_i`` and never increases to
the left inside a flat step of ``F``, so the optimum lies on ``F``'s jump points (or on the
neighbouring threshold): Algorithm 1's line search looks exactly there (:func:`algorithm1`),
and :func:`optimal_thresholds` finds the global optimum over the same points by dynamic
programming. Units: OP and stream space are in segments (at one segment of user writes per
unit of ``t``); divide by the logical capacity in segments for an OP ratio.

For the paper's validations: Fig. 3 is :func:`single_stream_waf` / :func:`single_stream_op` over
``T``; Fig. 5 is :func:`two_stream_plan` over ``tau`` with the cold stream reclaimed at
``T = cdf.quantile(2 - waf_target)``; an oracle's per-stream OP comes from :class:`StreamPlan`
(``op``, ``op_share``, ``space``) and its block-to-stream rule from :func:`assign_streams`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

__all__ = [
    "InvalidationCDF",
    "StreamPlan",
    "Algorithm1Result",
    "single_stream_waf",
    "single_stream_op",
    "two_stream_plan",
    "assign_streams",
    "stream_ops",
    "cal_op",
    "plan",
    "algorithm1",
    "optimal_thresholds",
    "op_waf_frontier",
    "min_op_for_waf",
    "thresholds_for_op",
]


class InvalidationCDF:
    """Empirical invalidation-time CDF ``F(t)``, ``t`` in segments (MINOS §3.1).

    Built from every block's time (:meth:`from_times`, exact), from a sample of blocks
    (:meth:`from_sample`) or from a histogram (the constructor). Stored as the sorted distinct
    finite times ``t`` (all > 0), the cumulative mass ``F`` at each (right-continuous) and the
    cumulative ``sum p_j t_j`` for exact integrals; ``never_fraction`` is the mass of blocks
    never invalidated.
    """

    def __init__(self, times, weights=None, never_weight: float = 0.0):
        """``times``: finite invalidation times in segments (> 0, any order, repeats allowed);
        ``weights``: the mass of each (default 1 per entry); ``never_weight``: the mass of
        never-invalidated blocks, in the same unit as ``weights``."""
        t = np.asarray(times, dtype=np.float64).ravel()
        if weights is None:
            w = np.ones(t.size, np.float64)
        else:
            w = np.asarray(weights, dtype=np.float64).ravel()
            if w.shape != t.shape:
                raise ValueError(f"weights has {w.size} entries for {t.size} times; give one weight per time")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError("weights must be finite and >= 0")
        never_weight = float(never_weight)
        if not np.isfinite(never_weight) or never_weight < 0:
            raise ValueError(f"never_weight must be finite and >= 0, got {never_weight}")
        if t.size and not np.all(np.isfinite(t)):
            raise ValueError(
                "invalidation times must be finite: pass never-invalidated blocks as never_weight "
                "(or through from_times' never_marker / never_mask)"
            )
        if t.size and t.min() <= 0:
            raise ValueError(
                f"invalidation times must be > 0 segments (a block dies at a later write), got "
                f"min {t.min()}; check the sign and the segment-size conversion"
            )
        keep = w > 0
        t, w = t[keep], w[keep]
        if t.size == 0:
            what = "every block is never invalidated (F = 0 everywhere)" if never_weight > 0 else "no blocks"
            raise ValueError(
                f"empty invalidation-time CDF: {what}; build it from at least one block with a finite invalidation time"
            )
        order = np.argsort(t, kind="stable")
        t, w = t[order], w[order]
        starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
        self.t = t[starts]  # distinct times, increasing
        mass = np.add.reduceat(w, starts)
        self.total_weight = float(mass.sum() + never_weight)
        p = mass / self.total_weight
        self.F = np.cumsum(p)  # F(t_j), right-continuous
        self.S = np.cumsum(p * self.t)  # sum_{k <= j} p_k t_k
        self.never_fraction = never_weight / self.total_weight
        self.t_max = float(self.t[-1])  # largest finite invalidation time

    # -- construction from the annotation ------------------------------------------------
    @classmethod
    def from_times(cls, times, segment_blocks: float = 1.0, *, never_marker=None, never_mask=None):
        """Every block's invalidation time in user-written blocks (``oracles.annotate``'s
        ``inv``), converted to segments by ``segment_blocks``. Never-invalidated blocks are those
        equal to ``never_marker`` (pass ``oracles.annotate.NEVER``), flagged in ``never_mask``,
        or ``+inf``; they stay in the mass (``1 - F`` counts them)."""
        return cls._from(times, segment_blocks, never_marker, never_mask, weight=1.0, time_scale=1.0)

    @classmethod
    def from_sample(
        cls,
        times,
        rate: float,
        segment_blocks: float = 1.0,
        *,
        never_marker=None,
        never_mask=None,
        spatial: bool = False,
    ):
        """Invalidation times of a sample of the written blocks taken at ``rate`` (0 < rate <= 1);
        each stands for ``1 / rate`` blocks (``total_weight`` is then the estimated number of
        writes). ``spatial=False``: the sample is of write events, times counted in the full
        stream's writes (F is estimated as is). ``spatial=True``: the sample is of LBAs (every
        write of a sampled LBA, SHARDS-style) and times were counted in the *sampled* stream's
        writes, which sees ``rate`` of the traffic, so they are scaled by ``1 / rate``."""
        rate = float(rate)
        if not 0 < rate <= 1:
            raise ValueError(f"sampling rate must lie in (0, 1], got {rate}")
        return cls._from(
            times,
            segment_blocks,
            never_marker,
            never_mask,
            weight=1.0 / rate,
            time_scale=1.0 / rate if spatial else 1.0,
        )

    @classmethod
    def _from(cls, times, segment_blocks, never_marker, never_mask, weight, time_scale):
        raw = np.asarray(times).ravel()
        segment_blocks = float(segment_blocks)
        if not segment_blocks > 0:
            raise ValueError(f"segment_blocks must be > 0, got {segment_blocks}")
        never = np.zeros(raw.size, bool)
        if never_marker is not None:
            never |= raw == never_marker
        elif raw.dtype.kind in "iu" and raw.size and raw.max() >= 1 << 60:
            raise ValueError(
                "times hold values >= 2**60, the annotation's NEVER marker: pass "
                "never_marker=dogi_ml.oracles.annotate.NEVER (or a never_mask)"
            )
        if never_mask is not None:
            m = np.asarray(never_mask, bool).ravel()
            if m.shape != raw.shape:
                raise ValueError(f"never_mask has {m.size} entries for {raw.size} times")
            never |= m
        finite = raw[~never].astype(np.float64)
        inf = np.isposinf(finite)
        n_never = int(never.sum() + inf.sum())
        return cls(
            finite[~inf] * (time_scale / segment_blocks),
            np.full(int((~inf).sum()), weight),
            never_weight=n_never * weight,
        )

    # -- F, its integral, quantiles ------------------------------------------------------
    def _index(self, x):
        """Number of distinct times <= x."""
        return np.searchsorted(self.t, x, side="right")

    def __call__(self, x):
        """``F(x)``, vectorised (0 below the first time)."""
        x = np.asarray(x, np.float64)
        j = self._index(x)
        return np.where(j > 0, self.F[np.maximum(j - 1, 0)], 0.0)

    def partial_moment(self, x):
        """``sum_{t_j <= x} p_j t_j``, vectorised."""
        x = np.asarray(x, np.float64)
        j = self._index(x)
        return np.where(j > 0, self.S[np.maximum(j - 1, 0)], 0.0)

    def integral(self, x):
        """``int_0^x F(t) dt = F(x) x - sum_{t_j <= x} p_j t_j`` (exact), vectorised."""
        x = np.asarray(x, np.float64)
        if np.any(x < 0):
            raise ValueError("integral of F from 0 to a negative time")
        return self(x) * x - self.partial_moment(x)

    def quantile(self, p):
        """``inf {t : F(t) >= p}`` (0 for ``p <= 0``; ``inf`` where ``p`` exceeds ``F``'s top,
        ``1 - never_fraction``), vectorised. A relative slack of 1e-12 absorbs rounding in
        ``F``'s cumulative sum."""
        p = np.asarray(p, np.float64)
        j = np.searchsorted(self.F, p - 1e-12, side="left")
        out = np.where(j < self.t.size, self.t[np.minimum(j, self.t.size - 1)], np.inf)
        return np.where(p <= 0, 0.0, out)

    def equal_quantiles(self, k: int, end: float | None = None) -> np.ndarray:
        """Algorithm 1's start (line 6): the ``k - 1`` thresholds with ``F(tau_i) = i/k`` of the
        mass that dies by ``end`` (``F(end)``; default ``t_max``, where this is ``i/k`` without
        never-invalidated blocks)."""
        k = _check_k(k)
        end = self.t_max if end is None else float(end)
        top = float(self(end))
        q = self.quantile(np.arange(1, k) / k * top)
        return np.minimum(q, end)

    def __repr__(self) -> str:
        return (
            f"InvalidationCDF({self.t.size} distinct times in (0, {self.t_max:g}] segments, "
            f"never_fraction={self.never_fraction:.4g}, total_weight={self.total_weight:g})"
        )


# -- §3.1 / §3.2 ------------------------------------------------------------------------------


def single_stream_waf(cdf: InvalidationCDF, T):
    """§3.1: asymptotic WAF ``1 + (1 - F(T))`` of one stream whose Tier 1 holds ``T`` segments."""
    T = _nonneg(T, "T")
    return 1.0 + (1.0 - cdf(T))


def single_stream_op(cdf: InvalidationCDF, T):
    """§3.1: OP (invalid data in Tier 1, segments) ``int_0^T F(t) dt``."""
    return cdf.integral(_nonneg(T, "T"))


def two_stream_plan(cdf: InvalidationCDF, tau: float, T: float | None = None) -> StreamPlan:
    """§3.2: hot stream ``t <= tau`` reclaimed at age ``tau`` (WAF 1), cold stream reclaimed at
    ``T >= tau`` (default ``t_max``: WAF-1 configuration) carrying all GC writes, ``1 - F(T)``."""
    return plan(cdf, [tau], T)


# -- CalOP and stream plans --------------------------------------------------------------------


def assign_streams(times, thresholds) -> np.ndarray:
    """Stream index (0-based) of each invalidation time under ``thresholds`` (``K - 1``
    increasing values): stream ``i`` holds ``tau_{i-1} < t <= tau_i``, the last stream everything
    above ``tau_{K-1}`` (``inf`` and any never-invalidated marker larger than every threshold
    included). Same units as the thresholds."""
    th = np.asarray(thresholds, np.float64).ravel()
    if th.size and np.any(np.diff(th) < 0):
        raise ValueError(f"thresholds must be non-decreasing, got {th}")
    return np.searchsorted(th, np.asarray(times, np.float64), side="left")


def stream_ops(cdf: InvalidationCDF, thresholds, end: float | None = None) -> np.ndarray:
    """Per-stream OP (segments) of Algorithm 1's CalOP, line 3: ``int_{tau_{i-1}}^{tau_i} (F(t) -
    F(tau_{i-1})) dt`` with ``tau_0 = 0`` and ``tau_K = end`` (default ``t_max``). Computed as
    ``(F(tau_i) - F(tau_{i-1})) tau_i - (S(tau_i) - S(tau_{i-1}))``, ``S`` the partial first
    moment: exact on the empirical CDF. ``thresholds`` may be ``[..., K-1]`` (batched); returns
    ``[..., K]``."""
    tau = _full_thresholds(cdf, thresholds, end)
    F = cdf(tau)
    S = cdf.partial_moment(tau)
    F[..., 0] = 0.0  # tau_0 = 0: F(0) = 0 (times are > 0)
    S[..., 0] = 0.0
    return np.diff(F, axis=-1) * tau[..., 1:] - np.diff(S, axis=-1)


def cal_op(cdf: InvalidationCDF, thresholds, end: float | None = None):
    """Algorithm 1's ``CalOP(tau, F)``: total OP (segments) for the ``K - 1`` inner thresholds
    (``tau_K = end``, default ``t_max``: the OP that makes every stream's GC free, WAF 1).
    Batched over leading axes of ``thresholds``."""
    return stream_ops(cdf, thresholds, end).sum(axis=-1)


@dataclass
class StreamPlan:
    """A separation of the traffic into ``K`` streams (MINOS §3.2-§3.3). Arrays have one entry
    per stream; volumes are in segments."""

    thresholds: np.ndarray  # K-1 inner thresholds tau_1..tau_{K-1} (segments)
    end: float  # tau_K: age at which the last stream is reclaimed
    traffic: np.ndarray  # share of user writes each stream receives (sums to 1)
    reclaim_age: np.ndarray  # tau_1..tau_{K-1}, end
    op: np.ndarray  # invalid data each stream holds (CalOP's OP_stream)
    space: np.ndarray  # Tier-1 segments each stream holds: traffic x reclaim age
    waf: float  # 1 + (1 - F(end)): only the last stream migrates valid data
    op_total: float
    never_fraction: float  # share of writes never invalidated (all in the last stream)

    @property
    def waf_excluding_never(self) -> float:
        """WAF counting only blocks that die after ``end`` as migrated, not the never-invalidated
        ones: what a finite-trace simulation shows if the segments holding the final contents are
        never cleaned (with ``end = t_max``: 1). The paper's ``waf`` counts them (§3.1)."""
        return self.waf - self.never_fraction

    @property
    def k(self) -> int:
        return self.traffic.size

    @property
    def valid(self) -> np.ndarray:
        """Valid data each stream holds (space - op)."""
        return self.space - self.op

    @property
    def op_share(self) -> np.ndarray:
        """Each stream's share of the total OP (zeros if the total is 0)."""
        return self.op / self.op_total if self.op_total > 0 else np.zeros_like(self.op)


def plan(cdf: InvalidationCDF, thresholds, end: float | None = None) -> StreamPlan:
    """The :class:`StreamPlan` of given inner thresholds (``end`` as in :func:`cal_op`)."""
    tau = _full_thresholds(cdf, thresholds, end)
    if tau.ndim != 1:
        raise ValueError("plan takes one threshold vector; use cal_op / stream_ops for batches")
    F = cdf(tau)
    F[0] = 0.0
    traffic = np.diff(F)
    traffic[-1] = 1.0 - F[-2]  # the last stream takes the rest
    ops = stream_ops(cdf, tau[1:-1], tau[-1])
    return StreamPlan(
        thresholds=tau[1:-1].copy(),
        end=float(tau[-1]),
        traffic=traffic,
        reclaim_age=tau[1:].copy(),
        op=ops,
        space=traffic * tau[1:],
        waf=float(1.0 + (1.0 - F[-1])),
        op_total=float(ops.sum()),
        never_fraction=cdf.never_fraction,
    )


# -- Algorithm 1 -------------------------------------------------------------------------------


@dataclass
class Algorithm1Result:
    thresholds: np.ndarray  # K-1 thresholds minimising CalOP (segments)
    op: float  # CalOP at them
    start_op: float  # CalOP at the equal-quantile start (line 7)
    sweeps: int  # passes of the while loop (lines 9-17), the last one changing nothing
    updates: int  # accepted threshold moves (line 15)


def algorithm1(
    cdf: InvalidationCDF, k: int, end: float | None = None, *, init=None, max_sweeps: int = 10_000
) -> Algorithm1Result:
    """MINOS Algorithm 1: coordinate descent over the ``k - 1`` thresholds from equal quantiles
    (line 6, or ``init``), each ``tau_i`` set to the arg-min of CalOP over ``[tau_{i-1},
    tau_{i+1}]`` (line 12) and kept only if CalOP strictly drops (line 14, by more than 1e-12
    relative, so rounding cannot cycle); stops after a sweep with no update. ``end`` is
    ``tau_K`` (default ``t_max``).

    The line search is exact: with the others fixed, CalOP as a function of ``tau_i = x`` is
    ``const - F(tau_{i-1}) x - F(x) (tau_{i+1} - x)``, linear with slope >= 0 inside each flat
    step of ``F``, so only ``tau_{i-1}`` and ``F``'s jump points in ``(tau_{i-1}, tau_{i+1}]``
    are candidates; they are scored in one vectorised pass."""
    k = _check_k(k)
    end = _end(cdf, end)
    tau = cdf.equal_quantiles(k, end) if init is None else _check_thresholds(init, k, end)
    op_min = float(cal_op(cdf, tau, end))
    start_op, updates, sweeps = op_min, 0, 0
    tol = 1e-12 * max(op_min, float(cdf.integral(end)), 1e-300)
    full = np.r_[0.0, tau, end]
    converged = k == 1
    while not converged:
        if sweeps >= max_sweeps:
            raise RuntimeError(f"Algorithm 1 did not converge in {max_sweeps} sweeps (k={k})")
        sweeps += 1
        converged = True
        for i in range(1, k):
            a, b = full[i - 1], full[i + 1]
            lo, hi = np.searchsorted(cdf.t, a, side="right"), np.searchsorted(cdf.t, b, side="right")
            cand = np.r_[a, cdf.t[lo:hi]]
            Fa = 0.0 if i == 1 else float(cdf(a))
            Fc = np.r_[Fa, cdf.F[lo:hi]]
            best = cand[np.argmin(-Fa * cand - Fc * (b - cand))]  # line 12
            trial = full.copy()
            trial[i] = best
            op_new = float(cal_op(cdf, trial[1:-1], end))  # line 13
            if op_new < op_min - tol:  # lines 14-17
                full, op_min = trial, op_new
                updates += 1
                converged = False
    return Algorithm1Result(thresholds=full[1:-1], op=op_min, start_op=start_op, sweeps=sweeps, updates=updates)


# -- exact global optimum (dynamic programming) -------------------------------------------------


@nb.njit(cache=True)
def _max_chain(xs, fx, end, n_inner, arg):
    """max over 0 <= tau_1 <= ... <= tau_{n_inner} <= end, each from ``xs``, of
    ``sum_i F(tau_i) (tau_{i+1} - tau_i)`` (``tau_{n_inner+1} = end``): layer by layer,
    ``D_k(y) = max_{x <= y} D_{k-1}(x) + F(x) y - F(x) x``, an upper envelope of lines with
    increasing slopes ``F(x)`` queried at increasing ``y`` (monotone convex-hull trick, O(m) per
    layer). ``arg[k, j]``: the best ``tau_{k+1}`` index given ``tau_{k+2} = xs[j]`` (``j = m``: end).
    Returns the maximum at ``end`` and the last layer's ``D(xs[j])`` (the maximum were ``end`` at
    ``xs[j]``: the whole frontier in one pass)."""
    m = xs.shape[0]
    prev = np.zeros(m)
    cur = np.zeros(m)
    hull = np.empty(m, np.int64)
    slope = np.empty(m)
    icpt = np.empty(m)
    final = 0.0
    for k in range(n_inner):
        head = 0
        tail = 0
        for j in range(m + 1):
            if j < m:
                slope[j] = fx[j]
                icpt[j] = prev[j] - fx[j] * xs[j]
                # drop the last hull line while the new one overtakes its predecessor no later
                while tail - head >= 2:
                    l1 = hull[tail - 2]
                    l2 = hull[tail - 1]
                    if (icpt[l1] - icpt[j]) * (slope[l2] - slope[l1]) <= (icpt[l1] - icpt[l2]) * (slope[j] - slope[l1]):
                        tail -= 1
                    else:
                        break
                hull[tail] = j
                tail += 1
                y = xs[j]
            else:
                y = end
            while (
                tail - head >= 2
                and slope[hull[head + 1]] * y + icpt[hull[head + 1]] >= slope[hull[head]] * y + icpt[hull[head]]
            ):
                head += 1
            best = hull[head]
            arg[k, j] = best
            v = slope[best] * y + icpt[best]
            if j < m:
                cur[j] = v
            else:
                final = v
        for j in range(m):
            prev[j] = cur[j]
    return final, prev


def _dp(cdf, k, end):
    """Run the dynamic program for ``k`` streams over the jump points <= ``end``; returns
    ``(xs, arg, D)`` with ``xs = (0, jump points...)`` and ``D[j]`` the best chain value with the
    last stream reclaimed at ``xs[j]``."""
    n = int(np.searchsorted(cdf.t, end, side="right"))
    xs = np.r_[0.0, cdf.t[:n]]
    fx = np.r_[0.0, cdf.F[:n]]
    arg = np.empty((k - 1, xs.size + 1), np.int64 if xs.size >= 2**31 else np.int32)
    _, D = _max_chain(xs, fx, float(end), k - 1, arg)
    return xs, arg, D


def _backtrack(xs, arg, j):
    """The thresholds of the best chain whose last stream is reclaimed at query ``j``."""
    tau = np.empty(arg.shape[0])
    for layer in range(arg.shape[0] - 1, -1, -1):
        j = int(arg[layer, j])
        tau[layer] = xs[j]
    return tau


def optimal_thresholds(cdf: InvalidationCDF, k: int, end: float | None = None) -> Algorithm1Result:
    """The global minimum of CalOP over the ``k - 1`` thresholds (``tau_K = end``, default
    ``t_max``), exact on the empirical CDF: the optimum lies on ``{0} U`` jump points (see
    :func:`algorithm1`), and ``CalOP = int_0^end F - sum_i F(tau_i)(tau_{i+1} - tau_i)`` is a
    chain, maximised by dynamic programming in O(k n) (Numba). Not in the paper: a reference for
    Algorithm 1, which is a local search. ``sweeps``/``updates`` are 0; ``start_op`` is the
    equal-quantile CalOP."""
    k = _check_k(k)
    end = _end(cdf, end)
    start_op = float(cal_op(cdf, cdf.equal_quantiles(k, end), end))
    if k == 1:
        return Algorithm1Result(np.empty(0), start_op, start_op, 0, 0)
    xs, arg, _ = _dp(cdf, k, end)
    tau = _backtrack(xs, arg, xs.size)
    # the value is recomputed by CalOP itself rather than taken from the recursion
    return Algorithm1Result(tau, float(cal_op(cdf, tau, end)), start_op, 0, 0)


def op_waf_frontier(cdf: InvalidationCDF, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The least OP for every WAF the model can reach with ``k`` streams: for each jump point
    ``T`` (the last stream's reclaim age, where WAF steps down), ``(T, 1 + (1 - F(T)), min CalOP
    with tau_K = T)``, from one dynamic-programming pass (O(k n)). WAF falls and OP rises along
    the arrays; the last entry is the WAF-1 plan (``T = t_max``)."""
    k = _check_k(k)
    T = cdf.t
    integral = cdf.F * T - cdf.S  # int_0^{t_j} F, exactly
    if k == 1:
        op = integral
    else:
        _, _, D = _dp(cdf, k, cdf.t_max)
        op = np.maximum(integral - D[1:], 0.0)  # D[0] is the point 0
    return T.copy(), 1.0 + (1.0 - cdf.F), op


# -- the inverse questions ------------------------------------------------------------------------


def _solve(cdf, k, end, method):
    if method == "algorithm1":
        return algorithm1(cdf, k, end)
    if method == "exact":
        return optimal_thresholds(cdf, k, end)
    raise ValueError(f"method must be 'algorithm1' or 'exact', got {method!r}")


def min_op_for_waf(
    cdf: InvalidationCDF, k: int, waf_target: float, method: str = "algorithm1", *, never_migrated: bool = True
) -> StreamPlan:
    """Least OP reaching ``waf_target`` with ``k`` streams, §3.2's construction: the last stream
    alone pays the GC, reclaimed at the smallest age ``T`` with ``1 + (1 - F(T)) <= waf_target``
    (``T = F^{-1}(2 - waf_target)``; ``t_max`` for the floor), and the ``k - 1`` inner thresholds
    minimise CalOP with ``tau_K = T`` (Algorithm 1, or ``method="exact"``).
    ``k = 1`` is §3.1's single stream. ``never_migrated=False`` targets
    :attr:`StreamPlan.waf_excluding_never` instead (floor 1 rather than ``1 + never_fraction``)."""
    k = _check_k(k)
    w = float(waf_target)
    never = cdf.never_fraction if never_migrated else 0.0
    reachable = 1.0 + never
    if not w >= reachable - 1e-12:
        raise ValueError(
            f"WAF target {w} is below this workload's floor {reachable:.6g} = 1 + the share "
            "of never-invalidated blocks, which every GC pass migrates (never_migrated=False "
            "leaves them out)"
        )
    T = min(float(cdf.quantile(2.0 - w - (cdf.never_fraction - never))), cdf.t_max)
    return plan(cdf, _solve(cdf, k, T, method).thresholds, T)


def thresholds_for_op(cdf: InvalidationCDF, k: int, op_budget: float, method: str = "algorithm1") -> StreamPlan:
    """Lowest WAF reachable with at most ``op_budget`` segments of OP and ``k`` streams (the
    inverse of :func:`min_op_for_waf`): the largest reclaim age ``T`` of the last stream whose
    minimised CalOP fits the budget (WAF only drops at a jump of ``F``, and the least OP for a
    reclaim age grows with it). ``method="exact"`` reads it off :func:`op_waf_frontier` (one
    dynamic program); ``"algorithm1"`` bisects over the jump points, running Algorithm 1 at each
    probe. A budget of at least the WAF-1 CalOP returns the WAF-1 plan (reclaim age ``t_max``)."""
    k = _check_k(k)
    budget = float(op_budget)
    if not (np.isfinite(budget) and budget >= 0):
        raise ValueError(f"OP budget must be a finite number of segments >= 0, got {op_budget}")
    if method == "exact":
        T, _, op = op_waf_frontier(cdf, k)
        fits = np.flatnonzero(op <= budget * (1 + 1e-12))
        j = int(fits[-1]) if fits.size else -1  # the largest reclaim age within the budget
        if j < 0:
            return plan(cdf, np.zeros(k - 1), 0.0)
        if k == 1:
            return plan(cdf, [], float(T[j]))
        xs, arg, _ = _dp(cdf, k, float(T[j]))
        return plan(cdf, _backtrack(xs, arg, xs.size), float(T[j]))
    ops = {}

    def op_at(j):  # minimised CalOP with the last stream reclaimed at t[j]
        if j not in ops:
            ops[j] = _solve(cdf, k, float(cdf.t[j]), method)
        return ops[j].op

    lo, hi = -1, cdf.t.size - 1  # invariant: op_at(lo) fits (lo=-1: T=0)
    if op_at(hi) <= budget:
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if op_at(mid) <= budget:
            lo = mid
        else:
            hi = mid
    if lo < 0:
        return plan(cdf, np.zeros(k - 1), 0.0)
    return plan(cdf, ops[lo].thresholds, float(cdf.t[lo]))


# -- argument checks ------------------------------------------------------------------------------


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"number of streams K must be an integer >= 1, got {k!r}")
    return int(k)


def _nonneg(x, name):
    x = np.asarray(x, np.float64)
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise ValueError(f"{name} must be finite and >= 0 segments, got {x}")
    return x


def _end(cdf, end) -> float:
    if end is None:
        return cdf.t_max
    e = float(_nonneg(end, "end (tau_K, the last stream's reclaim age)"))
    return e


def _check_thresholds(th, k, end):
    th = np.asarray(th, np.float64)
    if th.shape != (k - 1,):
        raise ValueError(f"K={k} streams need {k - 1} thresholds, got shape {th.shape}")
    return _validate(th, end)


def _validate(th, end):
    if th.shape[-1:] and th.shape[-1] > 0:
        if np.any(~np.isfinite(th)) or np.any(th < 0) or np.any(th > end):
            raise ValueError(
                f"thresholds must lie in [0, {end:g}] (tau_K, the last stream's reclaim age), "
                f"got {th if th.size <= 8 else f'values in [{np.nanmin(th):g}, {np.nanmax(th):g}]'}"
            )
        if np.any(np.diff(th, axis=-1) < 0):
            raise ValueError("thresholds must be non-decreasing (tau_1 <= ... <= tau_{K-1})")
    return th


def _full_thresholds(cdf, thresholds, end):
    """``[..., K+1]`` array ``(0, tau_1, ..., tau_{K-1}, end)`` after checks."""
    end = _end(cdf, end)
    th = np.asarray(thresholds, np.float64)
    if th.ndim == 0:
        th = th[None]
    th = _validate(th, end)
    zeros = np.zeros(th.shape[:-1] + (1,))
    return np.concatenate([zeros, th, zeros + end], axis=-1)
