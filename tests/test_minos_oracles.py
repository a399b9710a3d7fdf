"""MINOS §3.3 oracles: thresholds on hand-made CDFs, the K-stream placement, the theory's promise
(OP >= CalOP + one segment per stream gives WAF 1), Table 1's ordering, the Figs. 3/5 model
check, bad parameters."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import run_cli, zipf_writes

from dogi_ml.markov import opmodel as om
from dogi_ml.oracles import minos_oracles as mo
from dogi_ml.oracles.annotate import NEVER, annotate
from dogi_ml.pipeline.minos_table import (
    OracleBench,
    model_checks,
    ordering_holds,
    table1,
)
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator

SEG = 64


@pytest.fixture(scope="module")
def bench():
    """Zipf 1.01 over 16384 blocks written 8 times; capacity = write working set, no prefill."""
    w = zipf_writes(16384, 8 * 16384, theta=1.01, seed=3)
    return OracleBench(w, {"segment_blocks": SEG}, capacity="wss", prefill=False)


# -- thresholds on hand-made CDFs ----------------------------------------------------------------
def test_segment_thresholds_are_segment_multiples():
    assert mo.segment_thresholds(5).tolist() == [1, 2, 3, 4]
    cdf = om.InvalidationCDF(np.arange(1, 11))
    r = mo.oracle_thresholds("segment", cdf, 3)
    assert r.thresholds.tolist() == [1, 2] and r.plan.traffic.tolist() == pytest.approx([0.1, 0.1, 0.8])


def test_percentile_thresholds_are_equal_quantiles():
    # ten times 1..10 of equal mass, and 1/6 of the mass never invalidated (F tops at 5/6)
    cdf = om.InvalidationCDF(np.arange(1, 11), never_weight=2)
    assert mo.oracle_thresholds("percentile", cdf, 5).thresholds.tolist() == [2, 4, 6, 8]
    assert mo.oracle_thresholds("percentile", cdf, 2).thresholds.tolist() == [5]


def _brute_kmeans(x, w, k):
    """Least weighted within-cluster sum of squares over every split of sorted 1-D data into k
    intervals (optimal 1-D k-means clusters are intervals); returns each cluster's largest value."""
    best, best_cut = np.inf, None
    for cut in itertools.combinations(range(1, len(x)), k - 1):
        parts = np.split(np.arange(len(x)), cut)
        sse = sum(float(np.sum(w[p] * (x[p] - np.average(x[p], weights=w[p])) ** 2)) for p in parts)
        if sse < best - 1e-9:
            best, best_cut = sse, [x[p[-1]] for p in parts[:-1]]
    return best_cut


def test_kmeans_thresholds_equal_brute_force():
    times = np.array([1, 2, 2, 3, 10, 11, 12, 12, 12, 30, 31, 60, 61, 62, 200])
    cdf = om.InvalidationCDF(times, never_weight=3)
    mass = np.diff(np.r_[0.0, cdf.F])
    for k in (2, 3, 4, 5):
        got = mo.oracle_thresholds("kmeans", cdf, k).thresholds.tolist()
        assert got == _brute_kmeans(cdf.t, mass, k), k
    # the clustering's own labels are what t <= tau assigns
    centres, labels = mo.kmeans_1d(cdf.t, mass, 4)
    assert np.all(np.diff(centres) > 0)
    assert om.assign_streams(cdf.t, mo.kmeans_thresholds(cdf, 4)).tolist() == labels.tolist()


def test_opmin_is_algorithm1_or_the_exact_optimum():
    rng = np.random.default_rng(5)
    cdf = om.InvalidationCDF(np.ceil(rng.lognormal(3, 1.5, 5000)))
    for k in (2, 5):
        r1 = mo.oracle_thresholds("opmin", cdf, k)
        rx = mo.oracle_thresholds("opmin", cdf, k, method="exact")
        assert r1.thresholds.tolist() == om.algorithm1(cdf, k).thresholds.tolist()
        assert rx.thresholds.tolist() == om.optimal_thresholds(cdf, k).thresholds.tolist()
        assert rx.plan.op_total <= r1.plan.op_total + 1e-9
        assert rx.plan.waf_excluding_never == pytest.approx(1.0)
    # with less OP than WAF 1 needs: thresholds_for_op's plan, within the budget
    need = om.optimal_thresholds(cdf, 5).op
    r = mo.oracle_thresholds("opmin", cdf, 5, op_budget=need / 3, method="exact")
    ref = om.thresholds_for_op(cdf, 5, need / 3, "exact")
    assert r.thresholds.tolist() == ref.thresholds.tolist() and r.plan.op_total <= need / 3 + 1e-9
    assert r.budget_plan.waf > 1.0


def test_fixed_thresholds_within_a_budget():
    cdf = om.InvalidationCDF(np.arange(1, 101))
    th = [10.0, 20.0]
    # inner streams: 0.01 x (0 + 1 + ... + 9) = 0.45 each; the last one reclaimed at T holds
    # 0.01 x (T-20)(T-21)/2, within 10 - 0.9 up to T = 63
    p = mo.plan_within_budget(cdf, th, 10.0)
    assert p.end == 63 and p.op_total == pytest.approx(0.9 + 0.01 * 43 * 42 / 2)
    assert om.cal_op(cdf, th, 64) > 10
    assert p.waf == pytest.approx(1 + 0.37)
    assert mo.plan_within_budget(cdf, th, 60.0).end == 100  # enough for WAF 1
    assert mo.plan_within_budget(cdf, th, 0.5) is None  # the inner streams alone need 0.9


def test_thresholds_to_blocks_keeps_jump_points():
    inv = np.array([7, 130, 1000, 64 * 3])
    assert mo.thresholds_to_blocks(inv / 64, 64).tolist() == inv.tolist()
    assert mo.thresholds_to_blocks([1.5], 64).tolist() == [96]


# -- the placement --------------------------------------------------------------------------------
def test_user_writes_follow_the_thresholds_and_gc_goes_to_its_stream(bench):
    r = bench.run(0.2, "percentile")
    b = np.asarray(r["thresholds_blocks"])
    inv = bench.inv.astype(np.float64)
    inv[bench.inv == NEVER] = np.inf
    expect = np.bincount(om.assign_streams(inv, b), minlength=6)
    pol = make_policy("kstream_oracle", None, kind="percentile", thresholds=list(b), inv=bench.inv)
    res = Simulator(
        pol, SimConfig(segment_blocks=SEG, op_ratio=0.2, prefill=False), bench.capacity, stream=bench.writes
    ).run(bench.writes)
    assert [g["user_writes"] for g in res["groups"]] == expect.tolist()
    assert all(g["gc_writes"] == 0 for g in res["groups"][:5]) and res["groups"][5]["gc_writes"] == res["gc_writes"] > 0
    assert res["victim"] == "cost_benefit_sepbit" and res["waf"] == pytest.approx(r["waf"])


def test_the_theorys_promise():
    """Each oracle given OP >= its CalOP (WAF-1 thresholds) plus one segment per stream, beyond
    the open segments and the GC reserve, reaches WAF 1.000 in the simulator: on a long trace
    (32 capacities written, where the stationary model fits)."""
    w = zipf_writes(8192, 32 * 8192, theta=1.01, seed=3)
    b = OracleBench(w, {"segment_blocks": 32}, capacity="wss", prefill=False)
    for kind in mo.KINDS:
        need = mo.oracle_thresholds(kind, b.cdf, 5).plan.op_total + 6
        op = mo.op_ratio_for_budget(need, b.capacity, 32, 6)
        assert mo.op_budget_segments(b.capacity, 32, op, 6) >= need
        r = b.run(op, kind)
        assert r["gc_writes"] == 0 or r["waf"] <= 1.001, (kind, need, op, r["waf"])
    # with clearly less OP than that, opmin pays GC, and the model says so
    need = mo.oracle_thresholds("opmin", b.cdf, 5).plan.op_total
    r = b.run(mo.op_ratio_for_budget(need / 4, b.capacity, 32, 6), "opmin")
    assert r["waf"] > 1.001 and r["model_waf"] > 1.0


def test_finite_trace_op_is_enough_for_no_gc_at_all(bench):
    """The exact finite-trace OP (peak dead data in segments not yet wholly dead) suffices for
    zero GC writes with every oracle; CalOP misses the finite trace's last-stream deaths."""
    for kind in mo.KINDS:
        o = mo.oracle_thresholds(kind, bench.cdf, 5)
        tb = mo.thresholds_to_blocks(o.thresholds, SEG)
        need = mo.finite_trace_op(bench.inv, tb, SEG)
        r = bench.run(mo.op_ratio_for_budget(need, bench.capacity, SEG, 6), kind, thresholds_blocks=tb)
        assert r["gc_writes"] == 0, (kind, need)
        r = bench.run(mo.op_ratio_for_budget(need / 2, bench.capacity, SEG, 6), kind, thresholds_blocks=tb)
        assert r["gc_writes"] > 0, (kind, need)


def test_finite_trace_op_by_hand():
    # two streams split at 2 blocks, segments of 2 blocks; LBAs 0,1,0,2,1,3 ...
    w = np.array([0, 1, 0, 2, 1, 3, 0, 2])
    inv, _ = annotate(w)  # [2, 3, 4, 5, NEVER, NEVER, NEVER, NEVER]
    # stream 0 (t <= 2): time 0 (dies 2) -> one half-filled segment; stream 1: times 1,2 | 3,4 | 5,6 | 7
    # deaths: seg(1,2) at 4, 6 (frees at 6); seg(3,4) at 8, never; the rest never
    # dead held: time 2: block 0 (its segment holds nothing else, it frees at 2 -> not held);
    # time 4: block 1 held until 6; time 8: block 3 held forever -> peak 1 block = 0.5 segment
    assert mo.finite_trace_op(inv, [2], 2) == 0.5


def test_table_ordering_on_small_zipf(bench):
    """OP-Min < K-Means < Percentile < Segment at 30% OP. (On this small trace K-Means still wins
    at 15-20%: 1.159 vs 1.214 at 15%, 1.103 vs 1.111 at 20%; OP-Min from 25% on.)"""
    t = table1(bench, [0.3], list(mo.KINDS), log=lambda *a: None)
    wafs = {k: t[k]["0.3"]["waf"] for k in t}
    assert ordering_holds(t, "0.3"), wafs
    assert wafs["opmin"] < 1.03 < wafs["kmeans"], wafs


def test_two_tier_replay_by_hand():
    # 16 LBAs written round-robin 64 times: every block dies exactly 16 writes later (the last
    # round never); segments of 4 blocks, sealed at their last write
    w = np.tile(np.arange(16), 64)
    inv, _ = annotate(w)
    # block j of a segment (j = 0..3) is written 3 - j before the seal and dies 16 after its
    # write: at a reclaim A writes after the seal it is valid iff j > A - 13, else it has been
    # dead for A - 13 - j writes
    r = mo.two_tier_replay(inv, [0], [0, 13], 4)
    assert r["waf"] == pytest.approx(1.75, abs=0.01)  # j = 1, 2, 3 migrate
    r = mo.two_tier_replay(inv, [0], [0, 16], 4)
    assert r["waf"] == 1.0  # all dead
    assert r["op_segments"] == pytest.approx((3 + 2 + 1 + 0) / 4 / 4, rel=0.02)
    r = mo.two_tier_replay(inv, [0], [0, 20], 4, warmup_blocks=100)
    assert r["waf"] == 1.0 and r["op_segments"] == pytest.approx((7 + 6 + 5 + 4) / 4 / 4, rel=0.02)
    with pytest.raises(ValueError, match="no window"):
        mo.two_tier_replay(inv, [0], [0, 5000], 4)


@pytest.fixture(scope="module")
def checks(bench):
    return model_checks(bench, log=lambda *a: None)


def test_model_matches_the_two_tier_replay_across_T_and_tau(checks):
    """Figs. 3 and 5 as the paper ran them (Tier 2 unbounded): WAF within 2%, OP within 2% or one
    segment per stream (a segment frees after its last block's reclaim age, not each block's)."""
    for fig, k in (("fig3", 2), ("fig5", 2)):
        for r in checks[fig]:
            assert abs(r["replay_waf_gap"]) <= 0.02, (fig, r)
            assert abs(r["replay_op_segments"] - r["model_op_segments"]) <= max(0.02 * r["model_op_segments"], k), (
                fig,
                r,
            )
    # the paper's point (Fig. 5): the same WAF target costs less OP with a better tau
    ops = [r["model_op_segments"] for r in checks["fig5"]]
    assert max(ops) > 2 * min(ops)


@pytest.mark.xfail(
    strict=True,
    reason="the model's Tier 2 (migrated data) is free space; the simulator's GC "
    "stream holds it and its garbage inside the OP. Measured on this trace: Fig. 3 (T at "
    "F = 0.5..0.9) simulator WAF +82%, +51%, +28%, +10% above the model; Fig. 5 (WAF "
    "target 1.2) +37% to +52%; at WAF 1 the model holds (test_the_theorys_promise)",
)
def test_model_matches_simulator_across_T_and_tau(checks):
    gaps = [abs(r["sim_waf_gap"]) for fig in checks.values() for r in fig]
    assert max(gaps) <= 0.02, gaps


# -- bad parameters -------------------------------------------------------------------------------
def test_bad_parameters_have_clear_errors(bench):
    cdf = bench.cdf
    with pytest.raises(ValueError, match="unknown oracle kind 'bogus'.*opmin"):
        mo.oracle_thresholds("bogus", cdf, 5)
    with pytest.raises(ValueError, match="K >= 2 user streams"):
        mo.oracle_thresholds("segment", cdf, 1)
    with pytest.raises(ValueError, match="OP budget must be > 0"):
        mo.oracle_thresholds("opmin", cdf, 5, op_budget=0)
    with pytest.raises(ValueError, match="op_ratio must be > 0"):
        mo.op_budget_segments(16384, SEG, 0.0, 6)
    with pytest.raises(ValueError, match="unknown opmin method"):
        mo.oracle_thresholds("opmin", cdf, 5, method="newton")
    with pytest.raises(ValueError, match="K >= 2 user streams"):
        make_policy("kstream_oracle", None, n_user_streams=1)
    with pytest.raises(ValueError, match="make 6 groups"):
        make_policy("kstream_oracle", 4)
    with pytest.raises(ValueError, match="4 non-negative, non-decreasing thresholds"):
        make_policy("kstream_oracle", None, thresholds=[10, 5, 20, 30])
    with pytest.raises(ValueError, match="unknown oracle kind"):
        make_policy("kstream_oracle", None, kind="fifo")
    # 209 physical segments: 200 of data, 6 open, and a GC reserve of 5 leave nothing for opmin
    pol = make_policy("kstream_oracle", None, kind="opmin", gc_free_segments=5)
    with pytest.raises(ValueError, match="no OP left.*raise sim.op_ratio"):
        Simulator(pol, SimConfig(segment_blocks=SEG, op_ratio=0.05, prefill=False), bench.capacity, stream=bench.writes)
    with pytest.raises(ValueError, match="at least 5 distinct"):
        mo.kmeans_thresholds(om.InvalidationCDF([1, 2, 2, 3]), 5)


def test_oracle_command_kinds(tmp_path):
    small = [
        "+workload=zipf",
        "workload.capacity_blocks=8192",
        "workload.write_volume=4",
        "sim.segment_blocks=64",
        "workload.params.theta=1.01",
        "sim.op_ratio=0.25",
    ]
    proc = run_cli(["oracle", *small, "oracle.kind=percentile"], tmp_path)
    assert "Percentile Oracle on zipf at OP 25%" in proc.stdout and "policy=kstream_oracle" in proc.stdout
    proc = run_cli(["oracle", *small, "oracle.kind=segment-ish"], tmp_path, check=False)
    assert proc.returncode == 2 and "unknown oracle.kind 'segment-ish'" in proc.stderr and "opmin" in proc.stderr
