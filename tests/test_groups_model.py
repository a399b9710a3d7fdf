"""The group-configuration model with the hot group (markov.groups): limits, the hot share,
empty-group rejection, the fill-time tail statistics, and agreement with the simulator under
perfect placement (oracles.chain)."""

import numpy as np
import pytest

from dogi_ml.markov.groups import (
    AUTHORS_MIN_USER_SHARE,
    HotGroup,
    _Tail,
    best_configuration,
    chain_waf,
    evaluate_configuration,
    plog_stats,
    score_all,
)
from dogi_ml.markov.waf import contiguous_splits, fifo_valid_ratio, fifo_waf


def _old_chain_waf(f, m, b, capacity, rho, r):
    """The model before the hot group (commit 866d585), written out: no hot group, no fill time."""
    inflow = copies = held = live = 0.0
    for g in range(len(f) - 1):
        enter = f[g] + inflow
        held += enter * b[g]
        live += enter * r[g]
        inflow = enter * m[g]
        copies += inflow
    live_last, phys_last = capacity - live, rho * capacity - held
    if live_last <= 0 or phys_last <= live_last:
        return float("inf")
    u = float(fifo_valid_ratio(phys_last / live_last))
    return 1.0 + copies + (f[-1] + inflow) * u / (1.0 - u)


def _plog(seed=0, n=20000, k=10, cap=262144, empty=()):
    from dogi_ml.features.labels import category_bounds

    rng = np.random.default_rng(seed)
    bounds = category_bounds(cap)[1:].astype(float)
    upper = np.append(bounds, np.inf)
    cats = np.setdiff1d(np.arange(k), empty)
    pred = rng.choice(cats, n)
    lo = np.append([0.0], bounds)
    inv = np.exp(rng.uniform(np.log1p(lo[pred]), np.log(np.minimum(upper[pred], 8 * cap))))
    late = rng.random(n) < 0.2
    inv[late] *= 2.5
    return pred, inv, upper, cap


def test_without_hot_group_the_model_is_the_previous_one():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 6))
        f = rng.dirichlet(np.ones(n))
        m = rng.uniform(0, 0.5, n)
        b = np.sort(rng.uniform(100, 20000, n))
        r = b * rng.uniform(0.1, 0.6, n)
        assert chain_waf(f, m, b, 262144, 1.2, r) == pytest.approx(_old_chain_waf(f, m, b, 262144, 1.2, r), rel=1e-12)
    # every configuration, scored from PLog records, with hot share 0 and no fill time
    pred, inv, upper, cap = _plog()
    share, by_cat = plog_stats(pred, inv, 10)
    splits, new = score_all(share, by_cat, upper, cap, 1.1, min_user_share=0.0)
    for groups, waf in zip(splits, new):
        n = groups[-1] + 1
        f, m, b, r = [], [], [], []
        for g in range(n):
            cats = np.flatnonzero(groups == g)
            sel = np.isin(pred, cats)
            bound = upper[cats[-1]]
            last = g == n - 1
            f.append(sel.mean())
            m.append(float((inv[sel] > bound).mean()) if not last else 0.0)
            r.append(float(np.minimum(inv[sel], bound).mean()) if not last else 0.0)
            b.append(bound)
        assert waf == pytest.approx(_old_chain_waf(f, m, b, cap, 1.1, r), rel=1e-9)


def test_hot_share_scales_the_plog_shares_and_adds_hot_copies():
    """One intermediate group behind G_hot: closed form by hand."""
    cap, rho, h, mu = 100_000, 1.2, 0.6, 500.0
    for hot_m in (0.0, 0.1):
        waf = chain_waf(
            [1.0], [0.0], [np.inf], cap, rho, hot_share=h, hot_bound=mu, hot_mispredict=hot_m, hot_residence=100.0
        )
        u = float(fifo_valid_ratio((rho * cap - h * mu) / (cap - h * 100.0)))
        # hot survivors go to G1, here the last group: copied there, then cleaned FIFO with the rest
        last = (1 - h) + h * hot_m
        assert waf == pytest.approx(1 + h * hot_m + last * u / (1 - u), rel=1e-12)
    # the case: PLog shares treated as shares of all user writes inflate every term
    f, m, b = [0.3, 0.3, 0.4], [0.2, 0.1, 0.0], [2000.0, 8000.0, np.inf]
    without = chain_waf(f, m, b, cap, rho)
    with_hot = chain_waf(f, m, b, cap, rho, hot_share=0.58, hot_bound=100.0)
    assert with_hot < without
    copies = 0.42 * (0.3 * 0.2 + (0.3 + 0.3 * 0.2) * 0.1)
    assert with_hot - 1 == pytest.approx(
        copies + 0.42 * (0.4 + (0.3 + 0.3 * 0.2) * 0.1) * _u_over(cap, rho, f, m, b, 0.58, 100.0), rel=1e-12
    )


def _u_over(cap, rho, f, m, b, h, mu):
    w0 = (1 - h) * f[0]
    w1 = (1 - h) * f[1] + w0 * m[0]
    held = h * mu + w0 * b[0] + w1 * b[1]
    live = h * mu / 2 + w0 * b[0] / 2 + w1 * b[1] / 2
    u = float(fifo_valid_ratio((rho * cap - held) / (cap - live)))
    return u / (1 - u)


def test_hot_survivors_die_in_g1_or_follow_its_ratio():
    f, m, b = [0.5, 0.5], [0.3, 0.0], [5000.0, np.inf]
    kw = dict(hot_share=0.5, hot_bound=100.0, hot_mispredict=0.2)
    die = chain_waf(f, m, b, 100_000, 1.2, **kw)
    chain = chain_waf(f, m, b, 100_000, 1.2, hot_survivors="chain", **kw)
    assert chain > die  # hot survivors copied again out of G1 at G1's ratio
    with pytest.raises(ValueError, match="hot_survivors must be one of"):
        chain_waf(f, m, b, 100_000, 1.2, hot_survivors="later", **kw)
    with pytest.raises(ValueError, match=r"hot share must lie in \[0, 1\)"):
        chain_waf(f, m, b, 100_000, 1.2, hot_share=1.0, hot_bound=100.0)
    with pytest.raises(ValueError, match="BIR upper bound"):
        chain_waf(f, m, b, 100_000, 1.2, hot_share=0.3)


def test_one_group_is_the_fifo_closed_form():
    for rho in (1.1, 1.3):
        assert chain_waf([1.0], [0.0], [np.inf], capacity=1000, rho=rho) == pytest.approx(float(fifo_waf(rho)))
    pred, inv, upper, cap = _plog()
    one = evaluate_configuration([list(range(10))], pred, inv, upper, cap, 1.1, segment_blocks=512)
    assert one.waf == pytest.approx(float(fifo_waf(1.1)), rel=1e-12)
    assert one.mispredict == [0.0] and one.user_shares == [1.0]


def test_perfect_separation_costs_nothing():
    """Every block dies before its segment is reclaimed, and the open-ended group gets (almost)
    nothing: WAF 1. With the fill time on, a block dies in time only if it dies before the
    *last* block of its segment is reclaimed (inv <= b - S / w)."""
    cap, S = 1_000_000, 512
    rng = np.random.default_rng(5)
    upper = np.array([10_000.0, 40_000.0, np.inf])
    pred = np.concatenate([np.zeros(5000, int), np.ones(4999, int), [2]])
    inv = np.where(pred == 0, rng.uniform(1, 6_000, pred.size), rng.uniform(10_001, 30_000, pred.size))
    inv[-1] = 1e15
    hot_inv = rng.uniform(1, 500, 1000)
    kw = dict(hot_share=0.5, hot_bound=2000.0, hot_inv=hot_inv, segment_blocks=S, min_user_share=0.0)
    conf = evaluate_configuration([[0], [1], [2]], pred, inv, upper, cap, 1.1, **kw)
    assert conf.mispredict[:2] == [0.0, 0.0] and conf.hot_mispredict == 0.0
    assert conf.inflow[-1] == pytest.approx(0.5 / pred.size, rel=1e-12)  # nothing cascades into GN
    assert conf.waf == pytest.approx(1.0, abs=5e-4)  # its own FIFO copies only
    # blocks dying after the last block's reclaim age are copied: m > 0
    late = evaluate_configuration([[0], [1], [2]], pred, np.where(pred == 0, inv + 3_000, inv), upper, cap, 1.1, **kw)
    assert late.mispredict[0] > 0 and late.waf > conf.waf


@pytest.mark.parametrize("age,fill", [(1000.0, 0.0), (1000.0, 400.0), (1000.0, 1000.0), (300.0, 50.0)])
def test_tail_statistics_match_monte_carlo(age, fill):
    """Survival and residence with the fill time, against averaging over write positions."""
    rng = np.random.default_rng(7)
    inv = rng.exponential(600, 4000)
    m, r = _Tail(inv).stats(age, fill)
    x = ((np.arange(2000) + 0.5) / 2000)[:, None]  # write positions in the segment
    reclaim_age = age - x * fill
    assert m == pytest.approx(np.mean(inv[None, :] > reclaim_age), abs=1e-3)
    assert r == pytest.approx(np.mean(np.minimum(inv[None, :], reclaim_age)), rel=1e-4)
    assert _Tail(np.array([])).stats(age, fill) == (0.0, 0.0)


def test_a_group_without_user_writes_is_rejected():
    """ycsb_a's case: c2 receives no user write; a group made of it alone used to score as a
    free relay. Every configuration with such a group scores infinity and is never chosen."""
    pred, inv, upper, cap = _plog(empty=(1, 2))
    share, by_cat = plog_stats(pred, inv, 10)
    splits, wafs = score_all(share, by_cat, upper, cap, 1.1)
    empty = np.array([any(share[row == g].sum() == 0 for g in range(row[-1] + 1)) for row in splits])
    assert empty.sum() > 0 and np.all(np.isinf(wafs[empty])) and np.isfinite(wafs[~empty]).any()
    # the previous model scored some of them finite, and one better than its non-empty neighbour
    relay = [[0], [1], [2, 3, 4, 5, 6, 7, 8, 9]]
    f = [share[c].sum() for c in relay]
    b = [upper[c[-1]] for c in relay]
    m = [
        float((inv[np.isin(pred, c)] > bb).mean()) if i < 2 and f[i] else 0.0 for i, (c, bb) in enumerate(zip(relay, b))
    ]
    r = [
        float(np.minimum(inv[np.isin(pred, c)], bb).mean()) if i < 2 and f[i] else 0.0
        for i, (c, bb) in enumerate(zip(relay, b))
    ]
    assert np.isfinite(_old_chain_waf(f, m, b, cap, 1.1, r))
    assert evaluate_configuration(relay, pred, inv, upper, cap, 1.1).waf == np.inf
    best = best_configuration(pred, inv, upper, cap, 1.1)
    assert all(s > 0 for s in best.user_shares) and best.rejected == int(empty.sum())
    assert all(2 not in g or len(g) > 1 for g in best.groups)
    # forced group counts also avoid empty groups while a merge without one exists
    for n in (2, 3, 8):
        forced = best_configuration(pred, inv, upper, cap, 1.1, n_groups=n)
        assert len(forced.groups) == n and all(s > 0 for s in forced.user_shares)


def test_user_traffic_floor_is_the_authors_by_default():
    """A group below 0.0005 of all user writes is rejected by default (the authors' floor);
    min_user_share=0 keeps it (only a group with no user write is rejected)."""
    pred, inv, upper, cap = _plog()
    pred = pred.copy()
    pred[pred == 1] = 0
    pred[:8] = 1  # c2: 8 records of 20000 = 0.0004 of the PLog
    splits_row = [[0], [1], list(range(2, 10))]
    assert AUTHORS_MIN_USER_SHARE == 0.0005
    assert evaluate_configuration(splits_row, pred, inv, upper, cap, 1.1).waf == np.inf
    assert np.isfinite(evaluate_configuration(splits_row, pred, inv, upper, cap, 1.1, min_user_share=0.0).waf)
    # the floor applies to shares of *all* user writes: with a hot share, a PLog share must be larger
    pred[:30] = 1  # 0.0015 of the PLog
    assert np.isfinite(evaluate_configuration(splits_row, pred, inv, upper, cap, 1.1).waf)
    assert evaluate_configuration(splits_row, pred, inv, upper, cap, 1.1, hot_share=0.8, hot_bound=100.0).waf == np.inf
    with pytest.raises(ValueError, match="min_user_share must lie"):
        best_configuration(pred, inv, upper, cap, 1.1, min_user_share=1.5)
    with pytest.raises(ValueError, match="contiguous runs"):
        evaluate_configuration([[0, 2], [1]] + [[k] for k in range(3, 10)], pred, inv, upper, cap)


def test_search_with_hot_group_returns_the_exhaustive_optimum_fast():
    import time

    pred, inv, upper, cap = _plog()
    hot_inv = np.random.default_rng(2).uniform(1, 3000, 5000)
    kw = dict(hot_share=0.58, hot_bound=2000.0, hot_inv=hot_inv, segment_blocks=512, reserved_blocks=1280.0)
    t0 = time.perf_counter()
    best = best_configuration(pred, inv, upper, cap, 1.1, **kw)
    assert time.perf_counter() - t0 < 2.0
    allw = [
        evaluate_configuration(
            [np.flatnonzero(row == g).tolist() for g in range(row[-1] + 1)], pred, inv, upper, cap, 1.1, **kw
        ).waf
        for row in contiguous_splits(10)[::7]
    ]
    assert best.waf <= min(allw) + 1e-12
    assert best.hot_share == 0.58 and sum(best.user_shares) == pytest.approx(0.42)
    assert best.inflow[0] >= best.user_shares[0]  # G1 also takes the hot survivors
    assert 0 < best.hot_mispredict < 1


def test_hot_group_from_a_measured_valid_ratio():
    hot = HotGroup(0.5, 1000.0, valid_ratio=0.05)
    assert hot.stats(1000.0, 100.0) == (0.05, 500.0)
    with pytest.raises(ValueError, match="valid_ratio"):
        HotGroup(0.5, 1000.0, valid_ratio=1.5)


def test_model_agrees_with_the_simulator_under_perfect_placement():
    """A small zipf run: the chain oracle places every write by its true invalidation time into
    the model's best configuration (hot group + merged categories, expiry victims, survivors
    to the next group, FIFO in the last group); modelled and simulated WAF within 3%."""
    from helpers import zipf_writes

    from dogi_ml.oracles.chain import model_vs_simulator
    from dogi_ml.sim import SimConfig

    cap = 32768
    writes = zipf_writes(cap, 12 * cap, theta=1.0, seed=4)
    res = model_vs_simulator(writes, cap, SimConfig(segment_blocks=64))
    assert len(res["groups"]) >= 2 and res["hot_share"] > 0.2
    assert res["model_waf"] == pytest.approx(res["sim_waf"], rel=0.03), res


def test_static_data_is_kept_out_of_the_last_groups_fifo():
    """static_blocks: data never rewritten is left alone; the closed form runs on the rest."""
    cap, rho = 100_000, 1.1
    assert chain_waf([1.0], [0.0], [np.inf], cap, rho, static_blocks=0.0) == pytest.approx(float(fifo_waf(rho)))
    for static in (20_000.0, 60_000.0):
        rest = (rho * cap - static) / (cap - static)
        assert chain_waf([1.0], [0.0], [np.inf], cap, rho, static_blocks=static) == pytest.approx(float(fifo_waf(rest)))
    # all data static: nothing left to clean in the last group, only the chain's copies remain
    assert chain_waf([0.5, 0.5], [0.2, 0.0], [1000.0, np.inf], cap, rho, static_blocks=cap) == pytest.approx(
        1 + 0.5 * 0.2
    )
    with pytest.raises(ValueError, match="static_blocks must be >= 0"):
        chain_waf([1.0], [0.0], [np.inf], cap, rho, static_blocks=-1.0)


def test_chain_oracle_rejects_bad_configurations():
    from dogi_ml.oracles.chain import ChainOracle, perfect_assignment

    with pytest.raises(ValueError, match="mu must be positive and below increasing bounds"):
        ChainOracle(mu=500, bounds=[400, 800])
    with pytest.raises(ValueError, match="gc must be one of"):
        ChainOracle(mu=100, bounds=[400], gc="oldest")
    with pytest.raises(ValueError, match="final must be one of"):
        ChainOracle(mu=100, bounds=[400], final="random")
    # perfect placement: hot up to mu, then the first group whose bound covers the time
    assert perfect_assignment(np.array([1, 100, 101, 400, 401, 10**18]), 100, [400]).tolist() == [0, 0, 1, 1, 2, 2]
