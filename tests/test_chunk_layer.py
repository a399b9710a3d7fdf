"""Real time, the RAID chunk layer (padding under an SLA) and the GC trigger options (issue 16).

Scripted sequences use SepGC (group 0 user writes, group 1 GC writes) with greedy victims, so
the whole file adds one compiled loop at most; the parity goldens reuse the loops of test_sim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import CAP, run

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, SimulationError, Simulator, check_invariants
from dogi_ml.sim.state import C_FREE, C_RECLAIMED, P_GC_FREE

# Layer off: results of the engine before real time existed (commit 4d757e1), on the golden
# trace of test_sim (zipf_small): GC writes, WAF, GC writes per group, reclaimed segments.
OFF_GOLDEN = {
    ("mida", "greedy"): [371439, 6.6677093505859375, [0, 56811, 46523, 39429, 33988, 194688], 6820],
    ("dac", "greedy"): [297500, 5.53948974609375, [280571, 4425, 2694, 3519, 6291, 0], 5664],
    ("warcip", "greedy"): [349756, 6.33685302734375, [349756, 0, 0, 0, 0, 0], 6482],
    ("sepgc", "cost_benefit"): [271729, 5.1462554931640625, [0, 271729], 5260],
}


@pytest.mark.parametrize("key", sorted(OFF_GOLDEN))
def test_layer_off_is_bit_identical_to_the_untimed_engine(key, zipf_small):
    policy, victim = key
    _, r = run(policy, zipf_small, victim)
    got = [r["gc_writes"], r["waf"], [g["gc_writes"] for g in r["groups"]], r["reclaimed_segments"]]
    assert got == OFF_GOLDEN[key]
    assert "padding_blocks" not in r and "background_gc_passes" not in r


def _sim(**cfg):
    base = dict(
        segment_blocks=16,
        op_ratio=2.0,
        prefill=False,
        raid_chunk_blocks=4,
        raid_chunk_timeout_us=100,
        debug_invariants=True,
        victim="greedy",
    )
    base.update(cfg)
    return Simulator(make_policy("sepgc"), SimConfig(**base), 64)


def test_exact_padding_on_a_sparse_sequence():
    sim = _sim()
    # chunk of 4, timeout 100 µs: [0 10 20] waits past 100 -> 1 padding block when 500 arrives;
    # [500 505 510 515] fills; [1000] is padded with 3 when 1200 arrives; 100 + 0 joins at the edge
    w = np.arange(11, dtype=np.int64)
    t = np.array([0, 10, 20, 500, 505, 510, 515, 1000, 1200, 1250, 1300], np.int64)
    sim.prefill(0)
    sim.feed(w, times=t)
    r = sim.result()
    assert r["padding_blocks"] == 4 and r["padded_chunks"] == 2 and r["chunks_flushed"] == 3
    assert r["waf"] == (11 + 4) / 11
    assert r["groups"][0]["padding_blocks"] == 4 and r["groups"][1]["padding_blocks"] == 0
    assert r["padding_traffic_ratio"] == 4 / 15
    # [1200 1250 1300] is pending: 1300 - 1200 = 100 is not past the deadline
    assert int(sim.state.chunk_fill[0]) == 3
    # padding takes physical slots that hold nothing
    seg = int(sim.state.open_seg[0])
    assert int(sim.state.seg_wp[seg]) == 15 and int(sim.state.seg_valid[seg]) == 11


def test_no_padding_when_requests_are_dense():
    sim = _sim()
    rng = np.random.default_rng(5)
    w = rng.integers(0, 64, 4000)
    sim.prefill(0)
    sim.feed(w, times=np.arange(4000, dtype=np.int64) // 4)  # 4 writes per µs
    r = sim.result()
    assert r["gc_writes"] > 0
    # user chunks always fill in time; GC passes relocate whole victims: pads only at pass ends
    assert r["groups"][0]["padding_blocks"] == 0
    assert r["groups"][1]["padding_blocks"] <= 3 * r["gc_bursts"]


def test_gc_pass_ending_inside_a_chunk_is_padded_and_series_counts_padding():
    sim = _sim(series_window=500)
    rng = np.random.default_rng(1)
    n = 3000
    w = rng.integers(0, 64, n)
    t = np.cumsum(rng.exponential(60, n)).astype(np.int64)
    sim.prefill(0)
    sim.feed(w, times=t)
    check_invariants(sim.state)
    r = sim.result()
    gc_group = r["groups"][1]
    assert gc_group["gc_writes"] > 0 and 0 < gc_group["padding_blocks"] <= 3 * r["gc_bursts"]
    assert int(sim.state.chunk_fill[1]) == 0  # every pass left its GC chunk flushed
    assert r["waf"] == pytest.approx((n + r["gc_writes"] + r["padding_blocks"]) / n)
    _, inst = sim.waf_series()
    assert inst.size == n // 500
    u = n // 500 * 500
    assert inst.mean() * 500 * inst.size == pytest.approx(u + r["gc_writes"] + r["padding_blocks"], rel=0.05)


def test_timed_run_needs_times_and_sane_config():
    sim = _sim()
    sim.prefill(0)
    with pytest.raises(SimulationError, match="needs wall-clock times"):
        sim.feed(np.arange(4))
    with pytest.raises(SimulationError, match="non-decreasing"):
        sim.feed(np.arange(4), times=np.array([5, 4, 6, 7]))
    with pytest.raises(SimulationError, match="does not divide"):
        _sim(raid_chunk_blocks=5)
    with pytest.raises(SimulationError, match="both"):
        _sim(gc_idle_gap_us=10)


def test_gc_free_ratio_sets_the_low_watermark():
    sim = _sim(raid_chunk_blocks=0, gc_free_ratio=0.3)
    assert int(sim.state.prm[P_GC_FREE]) == math.ceil(0.3 * sim.n_segments) == 4
    rng = np.random.default_rng(2)
    w = rng.integers(0, 64, 2000)
    r1 = sim.run(w)
    r2 = _sim(raid_chunk_blocks=0, gc_free_segments=4).run(w)
    assert r1["gc_writes"] == r2["gc_writes"] > 0
    with pytest.raises(SimulationError, match="share in"):
        _sim(gc_free_ratio=1.5)


def test_background_gc_runs_in_idle_gaps_only():
    # 12 segments; background target ceil(0.25 * 12) = 3 free, foreground below 2 free
    cfg = dict(raid_chunk_blocks=0, gc_background_free_ratio=0.25, gc_idle_gap_us=1000)
    rng = np.random.default_rng(3)
    w = rng.integers(0, 64, 600)
    dense = _sim(**cfg)
    r = dense.run(w, times=np.arange(600, dtype=np.int64))
    assert r["background_gc_passes"] == 0 and r["gc_writes"] > 0
    t = np.arange(600, dtype=np.int64)
    t[300:] += 5000  # one idle gap of 5 ms before write 300
    sim = _sim(**cfg)
    sim.prefill(0)
    sim.feed(w[:300], times=t[:300])
    free_before, reclaimed_before = int(sim.state.ctr[C_FREE]), int(sim.state.ctr[C_RECLAIMED])
    sim.feed(w[300:301], times=t[300:301])
    r = sim.result()
    assert free_before < 3 and r["background_gc_passes"] == 1
    # the pass collected up to the target, then the write (no foreground GC needed above 2 free)
    assert int(sim.state.ctr[C_FREE]) >= 2 and r["reclaimed_segments"] > reclaimed_before
    assert r["background_gc_writes"] <= r["gc_writes"]
    with pytest.raises(SimulationError, match="at most"):
        _sim(**{**cfg, "gc_background_free_ratio": 0.9})


def test_arrival_processes_and_coarse_stamps():
    from dogi_ml.traces.generators import density_arrivals, spread_ties

    light = density_arrivals(10_000, "light", seed=1)
    assert light[0] == 0 and np.all(np.diff(light) > 100) and 190 < np.diff(light).mean() < 210
    heavy = density_arrivals(10_000, "heavy", seed=1)
    assert 0.9 < np.diff(heavy).mean() < 1.1
    np.testing.assert_array_equal(heavy, density_arrivals(10_000, "heavy", seed=1))
    with pytest.raises(ValueError, match="unknown density"):
        density_arrivals(10, "busy")
    spread = spread_ties(np.array([0, 0, 0, 0, 1000, 1000, 3000]))
    np.testing.assert_array_equal(spread, [0, 250, 500, 750, 1000, 2000, 3000])


def test_pipeline_times_from_trace_and_arrival():
    from dogi_ml.pipeline.simulate import write_times
    from dogi_ml.traces.trace import OP_READ, OP_WRITE, Trace

    tr = Trace(
        ts_us=[0, 40, 90, 300],
        lba=[0, 5, 9, 2],
        nblocks=[2, 1, 3, 1],
        op=[OP_WRITE, OP_READ, OP_WRITE, OP_WRITE],
        volume=[0, 0, 0, 0],
    )
    np.testing.assert_array_equal(write_times(tr), [0, 0, 90, 90, 90, 300])
    timed = write_times(tr, "medium", seed=4)
    assert timed.size == 6 and timed[0] == timed[1] == 0 and np.all(np.diff(timed) >= 0)


def test_chunk_layer_over_the_pipeline(zipf_small):
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.traces.generators import generate

    tr = generate("zipf", capacity_blocks=CAP, n_writes=2 * CAP, seed=3, theta=0.9)
    sim_cfg = {"segment_blocks": 64, "raid_chunk_blocks": 16, "raid_chunk_timeout_us": 100, "victim": "greedy"}
    sparse = simulate(tr, {"name": "sepgc"}, {**sim_cfg, "arrival": "light"}, progress=False)
    dense = simulate(tr, {"name": "sepgc"}, {**sim_cfg, "arrival": "heavy"}, progress=False)
    # light: every gap is over the timeout, so each user block is padded to a whole chunk
    assert sparse["groups"][0]["padding_blocks"] == 15 * (sparse["user_writes"] - 1)  # the last one is pending
    assert dense["padding_traffic_ratio"] < 0.1 * sparse["padding_traffic_ratio"]
    assert sparse["waf"] > dense["waf"]
