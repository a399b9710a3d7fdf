"""Closed-form WAF models against the simulator; configuration enumeration."""

import numpy as np
import pytest

from dogi_ml.markov.waf import contiguous_splits, fifo_valid_ratio, fifo_waf
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator


def test_fifo_fixed_point():
    for rho in (1.05, 1.1, 1.28, 2.0):
        u = float(fifo_valid_ratio(rho))
        assert u == pytest.approx(np.exp(-rho * (1 - u)), rel=1e-12)
        assert 0 < u < 1
    assert float(fifo_waf(1.1)) == pytest.approx(5.6775, abs=1e-3)  # u = 0.8239
    with pytest.raises(ValueError, match="must exceed 1"):
        fifo_waf(1.0)


@pytest.mark.parametrize("op", [0.1, 0.25])
def test_fifo_closed_form_matches_the_simulator(op):
    """One group, FIFO victims, uniform random overwrites: simulated WAF within 3% of the formula."""
    cap, seg = 65536, 64
    writes = np.random.default_rng(0).integers(0, cap, 20 * cap)
    sim = Simulator(
        make_policy("nosep"), SimConfig(segment_blocks=seg, op_ratio=op, victim="fifo", gc_free_segments=1), cap
    )
    r = sim.run(writes)
    rho = sim.n_segments * seg / cap
    assert r["waf"] == pytest.approx(float(fifo_waf(rho)), rel=0.03)


def test_contiguous_splits():
    s = contiguous_splits(10)
    assert s.shape == (512, 10)
    assert np.all(np.diff(s, axis=1) >= 0) and np.all(np.diff(s, axis=1) <= 1) and np.all(s[:, 0] == 0)
    assert len({tuple(r) for r in s}) == 512
    assert s[0].tolist() == [0] * 10 and s[-1].tolist() == list(range(10))


def _plog(seed=0, n=20000, k=10, cap=262144):
    from dogi_ml.features.labels import category_bounds

    rng = np.random.default_rng(seed)
    bounds = category_bounds(cap)[1:].astype(float)  # c1..c9 upper bounds
    upper = np.append(bounds, np.inf)
    pred = rng.integers(0, k, n)
    lo = np.append([0.0], bounds)
    # actual times mostly inside the predicted category, 20% one category later
    inv = np.exp(rng.uniform(np.log1p(lo[pred]), np.log(np.minimum(upper[pred], 8 * cap))))
    late = rng.random(n) < 0.2
    inv[late] *= 2.5
    return pred, inv, upper, cap


def test_chain_model_is_the_closed_form_for_one_group():
    from dogi_ml.markov.groups import chain_waf

    for rho in (1.1, 1.3):
        assert chain_waf([1.0], [0.0], [np.inf], capacity=1000, rho=rho) == pytest.approx(float(fifo_waf(rho)))


def test_search_returns_the_exhaustive_optimum_fast():
    import time

    from dogi_ml.markov.groups import best_configuration, chain_waf, plog_stats

    pred, inv, upper, cap = _plog()
    t0 = time.perf_counter()
    best = best_configuration(pred, inv, upper, cap)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, elapsed
    # exhaustive check, written independently: every merge, scored from the raw records
    share, _ = plog_stats(pred, inv, 10)
    wafs = []
    for groups in contiguous_splits(10):
        n = groups[-1] + 1
        f, m, b, r = [], [], [], []
        for g in range(n):
            sel = np.isin(pred, np.flatnonzero(groups == g))
            bound = upper[np.flatnonzero(groups == g)[-1]]
            f.append(sel.mean())
            last = g == n - 1
            m.append(float((inv[sel] > bound).mean()) if sel.any() and not last else 0.0)
            r.append(float(np.minimum(inv[sel], bound).mean()) if sel.any() and not last else 0.0)
            b.append(bound)
        wafs.append(chain_waf(f, m, b, cap, 1.1, r))
    assert best.waf == pytest.approx(min(wafs))
    assert best.groups[0][0] == 0 and best.groups[-1][-1] == 9
    assert sum(len(g) for g in best.groups) == 10 and best.bounds[-1] == np.inf


def test_more_misprediction_means_fewer_groups():
    from dogi_ml.markov.groups import best_configuration

    pred, inv, upper, cap = _plog()
    clean = best_configuration(pred, np.minimum(inv, upper[pred]), upper, cap)
    rng = np.random.default_rng(1)
    noisy = best_configuration(rng.permutation(pred), inv, upper, cap)  # predictions carry no information
    assert clean.waf < noisy.waf
    assert len(noisy.groups) <= len(clean.groups)
