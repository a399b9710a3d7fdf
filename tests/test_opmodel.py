"""MINOS §3's OP model (dogi_ml.markov.opmodel): closed forms, exactness, Algorithm 1 against brute
force, the inverse questions, monotonicity and bad input."""

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import wrightomega

from dogi_ml.markov.opmodel import (
    InvalidationCDF,
    algorithm1,
    assign_streams,
    cal_op,
    min_op_for_waf,
    op_waf_frontier,
    optimal_thresholds,
    plan,
    single_stream_op,
    single_stream_waf,
    stream_ops,
    thresholds_for_op,
    two_stream_plan,
)
from dogi_ml.oracles.annotate import NEVER, annotate


def quantile_cdf(dist, n):
    """Empirical CDF of the ``n`` mid-quantile points of ``dist``: within ``1 / (2n)`` of the true
    CDF everywhere, without sampling noise."""
    return InvalidationCDF(dist.ppf((np.arange(n) + 0.5) / n))


def random_small_cdf(seed):
    """2-12 atoms on 1..29 with random masses, never-invalidated mass on odd seeds."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 13))
    t = rng.integers(1, 30, n).astype(float)
    return InvalidationCDF(t, rng.random(n) + 0.01, never_weight=rng.random() * (seed % 2))


def brute_force(cdf, k, end=None):
    """min CalOP over every non-decreasing threshold vector on a grid holding 0, the jump points,
    the midpoints between them and 20 points beyond; CalOP evaluated independently of the module
    as the mean over blocks of the time each lies dead before its stream is reclaimed."""
    end = cdf.t_max if end is None else end
    pts = np.unique(np.r_[0.0, cdf.t, (cdf.t[1:] + cdf.t[:-1]) / 2, np.linspace(0, end, 20)])
    pts = pts[pts <= end]
    best, arg = np.inf, None
    p = np.diff(np.r_[0.0, cdf.F])
    for th in itertools.combinations_with_replacement(pts, k - 1):
        full = np.r_[th, end]
        s = np.searchsorted(full, cdf.t, side="left")  # stream of each atom
        dead = np.where(s < k, full[np.minimum(s, k - 1)] - cdf.t, 0.0)
        dead[cdf.t > end] = 0.0  # past the last reclaim: still valid
        op = float(np.sum(p * dead))
        if op < best - 1e-12:
            best, arg = op, np.array(th)
    return best, arg


# -- the CDF ---------------------------------------------------------------------------------------


def test_cdf_from_annotation_times_and_never_marker():
    writes = np.array([0, 1, 0, 2, 1, 0, 3, 3])
    inv, _ = annotate(writes)  # [2, 3, 3, NEVER, NEVER, NEVER, 1, NEVER]
    c = InvalidationCDF.from_times(inv, segment_blocks=2, never_marker=NEVER)
    assert c.t.tolist() == [0.5, 1.0, 1.5]
    assert c.never_fraction == pytest.approx(4 / 8)
    assert c([0.4, 0.5, 1.2, 1.5, 99]).tolist() == pytest.approx([0, 1 / 8, 2 / 8, 4 / 8, 4 / 8])
    # a mask (or +inf) instead of the marker gives the same CDF
    m = InvalidationCDF.from_times(np.where(inv == NEVER, 7, inv), 2, never_mask=inv == NEVER)
    f = InvalidationCDF.from_times(np.where(inv == NEVER, np.inf, inv.astype(float)), 2)
    for other in (m, f):
        assert np.array_equal(other.t, c.t) and np.allclose(other.F, c.F)
        assert other.never_fraction == c.never_fraction
    # integral of the step function by hand: int_0^1.5 F = 1/8 * 1 + 1/8 * 0.5 + 2/8 * 0
    assert float(c.integral(1.5)) == pytest.approx(0.125 + 0.0625)
    assert float(c.integral(3.0)) == pytest.approx(0.1875 + 0.5 * 1.5)
    # quantiles: inf {t: F(t) >= p}, inf above F's top (never-invalidated mass)
    assert c.quantile([0, 0.1, 0.125, 0.2, 0.5, 0.6]).tolist() == [0, 0.5, 0.5, 1.0, 1.5, np.inf]


def test_cdf_from_a_sample_matches_the_full_stream():
    """Uniform random writes over N LBAs: invalidation times are geometric, i.e. exponential with
    mean N / S segments. A 1-in-10 sample of write events and a 1-in-10 sample of LBAs (times
    counted in the sampled stream, rescaled) both estimate the full CDF."""
    n_lba, seg = 4000, 40
    writes = np.random.default_rng(3).integers(0, n_lba, 400_000)
    inv, _ = annotate(writes)
    full = InvalidationCDF.from_times(inv, seg, never_marker=NEVER)
    assert full.never_fraction == pytest.approx(n_lba / writes.size, rel=0.01)
    ts = np.array([5.0, 50, 100, 200])
    expo = (1 - np.exp(-ts * seg / n_lba)) * (1 - full.never_fraction)
    assert full(ts) == pytest.approx(expo, abs=0.01)

    pick = np.random.default_rng(4).random(inv.size) < 0.1
    ev = InvalidationCDF.from_sample(inv[pick], 0.1, seg, never_marker=NEVER)
    assert ev.total_weight == pytest.approx(writes.size, rel=0.02)

    sub = writes[writes % 10 == 0]
    inv_s, _ = annotate(sub)
    sp = InvalidationCDF.from_sample(inv_s, 0.1, seg, never_marker=NEVER, spatial=True)
    for est in (ev, sp):
        assert est(ts) == pytest.approx(full(ts), abs=0.02)
        assert float(cal_op(est, [20.0, 60.0], 300.0)) == pytest.approx(
            float(cal_op(full, [20.0, 60.0], 300.0)), rel=0.03
        )


# -- §3.1 and §3.2 closed forms ------------------------------------------------------------------------


def test_uniform_closed_forms():
    """Invalidation times uniform on (0, L]: F(t) = t/L.

    - one stream (§3.1): WAF(T) = 1 + (1 - T/L); OP(T) = int_0^T t/L dt = T^2 / (2L).
    - CalOP: stream (a, b] holds int_a^b (t - a)/L dt = (b - a)^2 / (2L), so CalOP = sum_i
      (tau_i - tau_{i-1})^2 / (2L); with sum_i (tau_i - tau_{i-1}) = L fixed this is least for
      equal spacing (convexity), tau_i = iL/K, giving L / (2K).
    - target WAF w (§3.2 construction): the last stream is reclaimed at T = L (2 - w) and the K
      streams split [0, T] evenly: OP = T^2 / (2 L K).
    """
    L, n = 10.0, 200_000
    c = quantile_cdf(stats.uniform(0, L), n)
    tol = 2 * L / n  # the quantile points' discretisation
    for T in (1.0, 4.0, 7.5, L):
        assert float(single_stream_waf(c, T)) == pytest.approx(2 - T / L, abs=1 / n)
        assert float(single_stream_op(c, T)) == pytest.approx(T * T / (2 * L), abs=tol)
    th = np.array([1.0, 2.5, 6.0])
    gaps = np.diff(np.r_[0, th, L])
    assert stream_ops(c, th, L) == pytest.approx(gaps**2 / (2 * L), abs=tol)
    for k in (1, 2, 3, 6):
        r = algorithm1(c, k)
        assert r.op == pytest.approx(L / (2 * k), rel=1e-4)
        assert r.thresholds == pytest.approx(L * np.arange(1, k) / k, abs=1e-3)
        assert optimal_thresholds(c, k).op == pytest.approx(L / (2 * k), rel=1e-4)
    for w in (1.1, 1.3, 1.6):
        p = min_op_for_waf(c, 3, w)
        T = L * (2 - w)
        assert p.end == pytest.approx(T, abs=1e-3) and p.waf == pytest.approx(w, abs=1e-4)
        assert p.op_total == pytest.approx(T * T / (2 * L * 3), rel=1e-3)


def test_exponential_closed_forms():
    """Invalidation times exponential with rate lam: F(t) = 1 - exp(-lam t).

    - one stream: WAF(T) = 1 + exp(-lam T); OP(T) = int_0^T F = T - (1 - exp(-lam T)) / lam.
    - stream (a, b]: int_a^b (exp(-lam a) - exp(-lam t)) dt = (b - a) e^{-lam a} - (e^{-lam a} -
      e^{-lam b}) / lam.
    - two streams, cold reclaimed at T: OP(tau) = OP(T) - F(tau)(T - tau) (the hot stream's
      savings, §3.2). Stationary point: f(tau)(T - tau) = F(tau), i.e. with u = lam tau, c = lam T:
      c - u = e^u - 1. Put v = c + 1 - u: v e^v = e^{c+1}, so v = W(e^{c+1}) = omega(c + 1) (Wright
      omega) and tau* = (c + 1 - omega(c + 1)) / lam -- the unique maximiser of the log-concave
      F(tau)(T - tau).
    - target WAF w with one stream: T = -ln(w - 1) / lam.
    """
    lam, n = 0.5, 400_000
    c = quantile_cdf(stats.expon(scale=1 / lam), n)
    F = lambda t: 1 - np.exp(-lam * t)  # noqa: E731
    for T in (0.5, 2.0, 6.0, 12.0):
        assert float(single_stream_waf(c, T)) == pytest.approx(1 + np.exp(-lam * T), abs=1 / n)
        assert float(single_stream_op(c, T)) == pytest.approx(T - F(T) / lam, rel=1e-4)
    th, end = np.array([0.7, 2.0, 5.0]), 11.0
    full = np.r_[0, th, end]
    a, b = full[:-1], full[1:]
    want = (b - a) * np.exp(-lam * a) - (np.exp(-lam * a) - np.exp(-lam * b)) / lam
    assert stream_ops(c, th, end) == pytest.approx(want, rel=1e-4)
    for T in (2.0, 6.0, 12.0):
        cT = lam * T
        tau = (cT + 1 - wrightomega(cT + 1)) / lam
        best = T - F(T) / lam - F(tau) * (T - tau)
        for r in (algorithm1(c, 2, T), optimal_thresholds(c, 2, T)):
            assert r.thresholds[0] == pytest.approx(tau, rel=2e-3)
            assert r.op == pytest.approx(best, rel=1e-4)
    for w in (1.05, 1.2, 1.5):
        p = min_op_for_waf(c, 1, w)
        T = -np.log(w - 1) / lam
        assert p.end == pytest.approx(T, rel=1e-3) and p.op_total == pytest.approx(T - F(T) / lam, rel=1e-3)


def test_two_stream_saving_and_valid_data_invariant():
    """§3.2: the hot stream saves exactly F(tau)(T - tau) of OP (paper: 0.7 x 806 = 564 segments)
    and the valid data held, int_0^T (1 - F), does not depend on the thresholds (263 segments there
    for both configurations)."""
    c = quantile_cdf(stats.lognorm(1.5, scale=50), 50_000)
    T = 400.0
    valid = T - float(c.integral(T))
    for tau in (5.0, 60.0, 194.0, T):
        p = two_stream_plan(c, tau, T)
        assert float(single_stream_op(c, T)) - p.op_total == pytest.approx(float(c(tau)) * (T - tau), rel=1e-9)
        assert p.waf == pytest.approx(float(single_stream_waf(c, T)))
        assert p.valid.sum() == pytest.approx(valid, rel=1e-9)
        assert p.traffic.sum() == pytest.approx(1.0) and p.traffic[0] == pytest.approx(float(c(tau)))
        assert p.space == pytest.approx(p.traffic * np.r_[tau, T])
        assert p.op_share.sum() == pytest.approx(1.0)
    k6 = plan(c, [2.0, 10.0, 30.0, 90.0, 200.0], T)
    assert k6.valid.sum() == pytest.approx(valid, rel=1e-9)


def test_cal_op_is_exact_on_the_empirical_cdf():
    """CalOP equals the mean, over blocks, of the time each lies dead before its stream's segments
    are reclaimed, tau_{s(t)} - t (never-invalidated blocks: 0), with streams by assign_streams."""
    rng = np.random.default_rng(11)
    times = np.ceil(rng.lognormal(3, 1.5, 20_000))
    never = rng.random(times.size) < 0.1
    c = InvalidationCDF.from_times(np.where(never, NEVER, times), segment_blocks=8, never_marker=NEVER)
    t = times / 8
    end = c.t_max
    for th in ([3.0], [1.0, 2.5, 10.0, 40.0], [c.t[5], c.t[5], c.t[100]]):
        full = np.r_[th, end]
        s = assign_streams(np.where(never, np.inf, t), th)
        assert s[never].min() == len(th)  # never-invalidated blocks go last
        dead = np.where(never, 0.0, full[s] - t)
        assert float(cal_op(c, th)) == pytest.approx(dead.mean(), rel=1e-12, abs=1e-12)
        counts = np.bincount(s, minlength=len(full)) / t.size
        assert plan(c, th).traffic == pytest.approx(counts, abs=1e-12)
    # batched evaluation equals one-by-one
    grid = np.sort(rng.uniform(0, end, (50, 3)), axis=1)
    assert cal_op(c, grid) == pytest.approx([float(cal_op(c, g)) for g in grid], rel=1e-12)


# -- Algorithm 1 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_algorithm1_is_the_brute_force_optimum_for_two_streams(seed):
    """K = 2: one coordinate, so Algorithm 1's exact line search is the global optimum."""
    c = random_small_cdf(seed)
    best, _ = brute_force(c, 2)
    assert algorithm1(c, 2).op == pytest.approx(best, abs=1e-12)
    assert optimal_thresholds(c, 2).op == pytest.approx(best, abs=1e-12)
    T = float(c.t[len(c.t) // 2])
    assert algorithm1(c, 2, T).op == pytest.approx(brute_force(c, 2, T)[0], abs=1e-12)


@pytest.mark.parametrize("seed", range(60))
def test_three_streams_brute_force(seed):
    """K = 3: the dynamic program is the brute-force optimum; Algorithm 1 (a coordinate descent)
    stops at a point no single-threshold move improves, never below the optimum."""
    c = random_small_cdf(seed)
    best, _ = brute_force(c, 3)
    assert optimal_thresholds(c, 3).op == pytest.approx(best, abs=1e-12)
    r = algorithm1(c, 3)
    assert r.op >= best - 1e-12 and r.op <= r.start_op + 1e-12
    pts = np.r_[0.0, c.t]
    for i in range(2):
        for x in pts:
            th = r.thresholds.copy()
            th[i] = x
            if np.all(np.diff(th) >= 0):
                assert float(cal_op(c, th)) >= r.op - 1e-12


@pytest.mark.parametrize(
    "dist",
    [stats.uniform(0, 10), stats.truncexpon(5, scale=2), stats.gamma(0.5), stats.lognorm(1)],
    ids=["uniform", "truncexpon", "gamma", "lognorm"],
)
@pytest.mark.parametrize("n", [50, 1000])
def test_algorithm1_reaches_the_optimum_for_three_streams_on_smooth_cdfs(dist, n):
    c = quantile_cdf(dist, n)
    assert algorithm1(c, 3).op == pytest.approx(
        brute_force(c, 3)[0] if n == 50 else optimal_thresholds(c, 3).op, rel=1e-12
    )


def test_algorithm1_can_stop_at_a_local_optimum():
    """Atoms at 7, 13, 22 (masses 0.0629, 0.5333, 0.4038): the equal quantiles are (13, 22), the
    third stream is empty and no single move helps; the optimum (7, 13) needs no OP at all."""
    c = InvalidationCDF([7.0, 13.0, 22.0], [0.0628745, 0.59620259 - 0.0628745, 1 - 0.59620259])
    r = algorithm1(c, 3)
    assert r.thresholds.tolist() == [13.0, 22.0] and r.updates == 0
    assert r.op == pytest.approx(0.0628745 * 6)
    e = optimal_thresholds(c, 3)
    assert e.thresholds.tolist() == [7.0, 13.0] and e.op == pytest.approx(0.0, abs=1e-12)


def test_more_streams_never_need_more_op():
    c = quantile_cdf(stats.lognorm(2, scale=20), 5000)
    ops = [optimal_thresholds(c, k).op for k in range(1, 9)]
    assert np.all(np.diff(ops) <= 1e-9)
    assert ops[0] == pytest.approx(float(c.integral(c.t_max)))
    a = [algorithm1(c, k).op for k in range(1, 9)]
    assert np.all(np.array(a) >= np.array(ops) - 1e-9)


# -- monotonicity and the inverse questions ----------------------------------------------------------


def test_op_grows_and_waf_falls_with_T():
    c = quantile_cdf(stats.gamma(0.4, scale=30), 20_000)
    T = np.linspace(0, c.t_max, 400)
    op, waf = single_stream_op(c, T), single_stream_waf(c, T)
    assert np.all(np.diff(op) > 0) and np.all(np.diff(waf) <= 0)
    assert waf[0] == 2.0 and waf[-1] == pytest.approx(1.0)
    k3 = [min_op_for_waf(c, 3, w, method="exact").op_total for w in np.linspace(1.0, 1.9, 30)]
    assert np.all(np.diff(k3) <= 1e-12)


@pytest.mark.parametrize("method", ["algorithm1", "exact"])
def test_min_op_for_waf_and_thresholds_for_op_agree(method):
    rng = np.random.default_rng(5)
    times = np.r_[rng.exponential(2, 3000), rng.uniform(40, 60, 1000)]
    c = InvalidationCDF(times, never_weight=200)
    assert c.never_fraction == pytest.approx(200 / 4200)
    floor = 1 + c.never_fraction
    for k in (1, 2, 4):
        for w in (floor, 1.1, 1.3):
            p = min_op_for_waf(c, k, w, method)
            assert p.waf <= w + 1e-12 and p.op_total == pytest.approx(float(cal_op(c, p.thresholds, p.end)))
            # the end is the least reclaim age reaching w: one jump earlier misses it
            j = np.searchsorted(c.t, p.end)
            assert j == 0 or 1 + (1 - c.F[j - 1]) > w
            q = thresholds_for_op(c, k, p.op_total, method)
            assert q.op_total <= p.op_total + 1e-9 and q.waf <= p.waf + 1e-12
            if method == "exact" and p.op_total > 0:
                tight = thresholds_for_op(c, k, p.op_total * (1 - 1e-6), method)
                assert tight.waf > w
    one = min_op_for_waf(c, 3, floor, method)
    assert one.end == c.t_max and one.waf == pytest.approx(floor)
    assert one.waf_excluding_never == pytest.approx(1.0) and one.never_fraction == c.never_fraction
    # never-invalidated blocks left out of the GC count: WAF 1 is reachable, at the same plan
    kept = min_op_for_waf(c, 3, 1.0, method, never_migrated=False)
    assert kept.end == c.t_max and kept.op_total == pytest.approx(one.op_total)
    for w in (1.02, 1.2):
        q = min_op_for_waf(c, 3, w, method, never_migrated=False)
        same = min_op_for_waf(c, 3, w + c.never_fraction, method)  # the same target, counted the paper's way
        assert q.waf_excluding_never <= w + 1e-12 and q.end == same.end and q.op_total == same.op_total
    assert thresholds_for_op(c, 3, 1e9, method).waf == pytest.approx(floor)
    # with no OP a stream can still hold the earliest atom, reclaimed the moment its blocks die;
    # three streams the three earliest
    assert thresholds_for_op(c, 1, 0.0, method).waf == pytest.approx(2 - c.F[0])
    zero = thresholds_for_op(c, 3, 0.0, method)
    assert zero.op_total == 0.0 and zero.end == c.t[2] and zero.waf == pytest.approx(2 - c.F[2])


def test_frontier_is_the_optimum_at_every_reclaim_age():
    c = random_small_cdf(7)
    for k in (1, 2, 3):
        T, waf, op = op_waf_frontier(c, k)
        assert np.array_equal(T, c.t) and np.all(np.diff(waf) < 0) and np.all(np.diff(op) >= -1e-12)
        for j, t in enumerate(T):
            assert op[j] == pytest.approx(brute_force(c, k, t)[0], abs=1e-12)
            assert waf[j] == pytest.approx(float(single_stream_waf(c, t)))
    c = quantile_cdf(stats.lognorm(1.2, scale=30), 3000)
    T, waf, op = op_waf_frontier(c, 4)
    for j in (0, 10, 500, 2999):
        assert op[j] == pytest.approx(optimal_thresholds(c, 4, T[j]).op, rel=1e-9, abs=1e-12)
    for budget in (0.5, 5.0, 20.0):
        p = thresholds_for_op(c, 4, budget, "exact")
        assert p.op_total <= budget * (1 + 1e-9) and p.end == T[np.flatnonzero(op <= budget)[-1]]
        assert p.waf <= thresholds_for_op(c, 4, budget).waf + 1e-12


# -- bad input ------------------------------------------------------------------------------------


def test_bad_input_errors():
    c = InvalidationCDF([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="empty invalidation-time CDF: no blocks"):
        InvalidationCDF([])
    with pytest.raises(ValueError, match="every block is never invalidated"):
        InvalidationCDF.from_times([NEVER, NEVER], never_marker=NEVER)
    with pytest.raises(ValueError, match="pass never_marker"):
        InvalidationCDF.from_times(np.array([3, NEVER]))
    with pytest.raises(ValueError, match="must be > 0 segments"):
        InvalidationCDF([3.0, -1.0])
    with pytest.raises(ValueError, match="must be finite"):
        InvalidationCDF([3.0, np.nan])
    with pytest.raises(ValueError, match="one weight per time"):
        InvalidationCDF([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="sampling rate must lie in"):
        InvalidationCDF.from_sample([1, 2], rate=0)
    with pytest.raises(ValueError, match="segment_blocks must be > 0"):
        InvalidationCDF.from_times([1, 2], segment_blocks=0)
    for k in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="integer >= 1"):
            algorithm1(c, k)
    with pytest.raises(ValueError, match="integer >= 1"):
        min_op_for_waf(c, 0, 1.2)
    with pytest.raises(ValueError, match=r"thresholds must lie in \[0, 3\]"):
        two_stream_plan(c, 5.0)
    with pytest.raises(ValueError, match=r"thresholds must lie in \[0, 2\]"):
        two_stream_plan(c, 2.5, 2.0)
    with pytest.raises(ValueError, match="thresholds must lie in"):
        cal_op(c, [-0.5])
    with pytest.raises(ValueError, match="non-decreasing"):
        cal_op(c, [2.0, 1.0])
    with pytest.raises(ValueError, match="need 2 thresholds"):
        algorithm1(c, 3, init=[1.0])
    with pytest.raises(ValueError, match="T must be finite and >= 0"):
        single_stream_waf(c, -1.0)
    with pytest.raises(ValueError, match="below this workload's floor"):
        min_op_for_waf(InvalidationCDF([1.0], never_weight=1.0), 2, 1.2)
    min_op_for_waf(InvalidationCDF([1.0], never_weight=1.0), 2, 1.2, never_migrated=False)  # reachable
    with pytest.raises(ValueError, match="OP budget"):
        thresholds_for_op(c, 2, -1.0)
    with pytest.raises(ValueError, match="method must be"):
        min_op_for_waf(c, 2, 1.1, method="grid")
