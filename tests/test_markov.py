"""Closed-form WAF models against the simulator; configuration enumeration."""
import numpy as np
import pytest

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator
from markov.waf import contiguous_splits, fifo_valid_ratio, fifo_waf


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
    sim = Simulator(make_policy("nosep"), SimConfig(segment_blocks=seg, op_ratio=op, victim="fifo", gc_free_segments=1), cap)
    r = sim.run(writes)
    rho = sim.n_segments * seg / cap
    assert r["waf"] == pytest.approx(float(fifo_waf(rho)), rel=0.03)


def test_contiguous_splits():
    s = contiguous_splits(10)
    assert s.shape == (512, 10)
    assert np.all(np.diff(s, axis=1) >= 0) and np.all(np.diff(s, axis=1) <= 1) and np.all(s[:, 0] == 0)
    assert len({tuple(r) for r in s}) == 512
    assert s[0].tolist() == [0] * 10 and s[-1].tolist() == list(range(10))
