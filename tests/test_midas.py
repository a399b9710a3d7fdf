"""MiDAS: its model against closed forms and the simulator, the policy's invariants, behaviour and errors."""

import time

import numpy as np
import pytest
from helpers import hotcold_writes, zipf_writes

from dogi_ml.markov.midas import (
    Device,
    HotStats,
    build_uid,
    chain_matrix,
    chain_waf,
    predict,
    search,
    two_class_fifo_waf,
)
from dogi_ml.markov.waf import fifo_waf
from dogi_ml.policies import make_policy
from dogi_ml.policies import midas as M
from dogi_ml.sim import SimConfig, Simulator, check_invariants
from dogi_ml.sim.policy_api import record
from dogi_ml.sim.state import SEG_SEALED

# 563 physical segments, as the default scale (and MiDAS's 512 at paper scale)
CAP, SEG = 32768, 64
BIG = 1 << 30


def run(policy, writes, **cfg):
    sim = Simulator(make_policy(policy), SimConfig(segment_blocks=SEG, **cfg), CAP)
    return sim, sim.run(writes)


def offline_uid_counts(writes, unit, window):
    """Update intervals within one epoch of writes, counted the slow way."""
    pos = np.argsort(writes, kind="stable")
    lba = writes[pos]
    same = lba[1:] == lba[:-1]
    iv = np.diff(pos)[same]
    e = window // unit
    counts = np.bincount(np.minimum(iv // unit, e - 1), minlength=e)
    once = int(np.count_nonzero(np.unique(writes, return_counts=True)[1] == 1))
    return counts, once


# -- the model ----------------------------------------------------------------------------------
def test_two_class_fifo_is_lambert_w_when_the_classes_are_alike():
    for rho in (1.05, 1.1, 1.28, 2.0):
        for r in (0.2, 0.5, 0.0, 1.0):
            assert float(two_class_fifo_waf(rho, r, r)) == pytest.approx(float(fifo_waf(rho)), rel=1e-9)
    # skew lowers nothing: a hot class written more often than its share of space costs more under FIFO
    assert float(two_class_fifo_waf(1.28, 0.8, 0.2)) > float(fifo_waf(1.28))
    with pytest.raises(ValueError, match="must exceed 1"):
        two_class_fifo_waf(1.0, 0.5, 0.5)


@pytest.mark.parametrize("hot,share", [(0.2, 0.8), (0.1, 0.9)])
def test_two_class_fifo_matches_the_simulator_on_hot_cold(hot, share):
    """The last group's model (Desnoyers' hot/cold FIFO) against a FIFO-cleaned log: within 2%."""
    cap = 65536
    writes = hotcold_writes(cap, 20 * cap, hot=hot, hot_share=share, seed=1)
    sim = Simulator(make_policy("nosep"), SimConfig(segment_blocks=64, op_ratio=0.25, victim="fifo"), cap)
    r = sim.run(writes)
    rho = sim.n_segments * 64 / cap
    assert r["waf"] == pytest.approx(float(two_class_fifo_waf(rho, share, hot)), rel=0.02)


def test_chain_is_the_stationary_flow():
    rng = np.random.default_rng(0)
    vr = rng.uniform(0.1, 0.9, (5, 4))
    t, vh = rng.uniform(0, 0.8, 5), rng.uniform(0, 0.3, 5)
    got = chain_waf(t, vh, vr)
    # closed form: G1 takes the non-hot user writes and G0's valid blocks; group k passes vr_k on
    a = 1 - t + t * vh
    copies = t * vh
    for k in range(3):
        copies = copies + vr[:, k] * a
        a = a * vr[:, k]
    a_last = a / (1 - vr[:, 3])
    copies = copies + vr[:, 3] * a_last
    assert got == pytest.approx(1 + copies, rel=1e-9)
    # and what MiDAS computes: the chain iterated from (0.1, 0.9, 0, ...)
    m = chain_matrix(t, vh, vr)
    x = np.zeros((5, 6))
    x[:, 0], x[:, 1] = 0.1, 0.9
    for _ in range(2000):
        x = np.einsum("bi,bij->bj", x, m)
    assert got == pytest.approx((1 - x[:, 0]) / x[:, 0], rel=1e-6)
    # one group, no hot traffic: WAF = 1 / (1 - vr)
    assert float(chain_waf(0.0, 0.0, [[0.75]])[0]) == pytest.approx(4.0)


def test_one_group_model_is_the_lambert_w_closed_form():
    """Hot group from the UID catching the short intervals, one group holding the rest at one
    long interval (a single temperature): the model is the Lambert-W FIFO closed form of the last
    group's space over its live data, weighted by the traffic reaching it."""
    unit, seg = 16, 64
    counts = np.zeros(512)
    counts[0], counts[300] = 1000.0, 1000.0  # half the writes die at once, half much later
    uid = build_uid(counts, unit)
    dev = Device(segment_blocks=seg, segments=600, live_blocks=30000)
    pred = predict(uid, dev, [[599]], hot_size=1)
    t = uid.counts[0] / uid.counts.sum()
    # one hot segment holds the writes of the first m buckets that die there: m * unit * t blocks
    m = int(np.ceil(0.5 * seg / (unit * t)))
    live_hot = m * unit * (1 - t)  # blocks younger than the hot stage, still valid
    w_last = float(fifo_waf(599 * seg / (30000 - live_hot)))
    assert pred.hot_traffic[0] == pytest.approx(t)
    assert pred.valid_ratios[0, 1] == pytest.approx(1 - 1 / w_last)
    assert pred.waf[0] == pytest.approx(1 + (1 - t) * (w_last - 1))


def test_uid_edge_correction_and_censored_blocks():
    uid = build_uid(np.ones(8), unit=4, once_written=5)
    i = np.arange(1, 8)
    expected = np.concatenate([[1.0], 1 + ((8 % i) + i / 2) / 8])
    expected[-1] = 6 * (1 + ((8 % 7) + 3.5) / 8)
    assert uid.counts == pytest.approx(expected)
    assert uid.window == 32
    with pytest.raises(ValueError, match="non-negative"):
        build_uid(-np.ones(4), 4)


def test_search_finds_a_local_optimum_fast():
    writes = zipf_writes(CAP, 6 * CAP, theta=1.0, seed=11)
    unit, window = SEG // 4, 4 * CAP
    counts, once = offline_uid_counts(writes[CAP : CAP + window], unit, window)
    uid = build_uid(counts, unit, once)
    dev = Device(segment_blocks=SEG, segments=561, live_blocks=CAP)
    t0 = time.perf_counter()
    conf = search(uid, dev, HotStats(traffic=0.4, valid=0.05, size=2))
    assert time.perf_counter() - t0 < 1.0
    assert conf.hot_from_uid and conf.n_groups >= 3
    assert sum(conf.sizes) == dev.segments and min(conf.sizes) >= 1
    groups, g0 = np.asarray(conf.sizes[1:], float), conf.sizes[0]
    assert predict(uid, dev, [groups], hot_size=g0).waf[0] == pytest.approx(conf.waf)
    # no single segment moved between a group and the last one lowers the modelled WAF
    for i in range(len(groups) - 1):
        for d in (-1, 1):
            g = groups.copy()
            g[i] += d
            g[-1] -= d
            assert predict(uid, dev, [g], hot_size=g0).waf[0] >= conf.waf - 1e-9
    # an untrusted hot filter: G0 keeps its measured size
    conf2 = search(uid, dev, HotStats(traffic=0.1, valid=0.3, size=5))
    assert not conf2.hot_from_uid and conf2.sizes[0] == 5 and sum(conf2.sizes) == dev.segments


def test_model_rejects_bad_inputs():
    uid = build_uid(np.ones(64), 16)
    with pytest.raises(ValueError, match="no live data"):
        Device(segment_blocks=64, segments=100, live_blocks=0)
    dev = Device(segment_blocks=64, segments=100, live_blocks=5000)
    with pytest.raises(ValueError, match="needs hot_size"):
        predict(uid, dev, [[99]])
    with pytest.raises(ValueError, match="out of range"):
        predict(uid, dev, [[99]], hot=HotStats(traffic=0.0, valid=0.1, size=2))
    with pytest.raises(ValueError, match="empty"):
        search(build_uid(np.zeros(64), 16), dev, HotStats(0.3, 0.05, 2))
    # a configuration whose groups outlive the epoch, or leave the last group no room, is infeasible
    assert not np.isfinite(predict(uid, dev, [[98, 1]], hot_size=1).waf[0])


# -- the policy ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zipf_run():
    writes = zipf_writes(CAP, 12 * CAP, theta=1.0, seed=11)
    sim, r = run("midas", writes, debug_invariants=True)
    return writes, sim, r


def test_policy_keeps_invariants_and_reconfigures(zipf_run):
    writes, sim, r = zipf_run
    assert sim.victim_name == "midas"
    assert r["user_writes"] == writes.size
    assert sum(g["user_writes"] for g in r["groups"]) == r["user_writes"]
    assert sum(g["gc_writes"] for g in r["groups"]) == r["gc_writes"]
    assert int((sim.state.l2p >= 0).sum()) == CAP and int(sim.state.seg_valid.sum()) == CAP
    m = r["midas"]
    applied = [h for h in m["history"] if h["applied"]]
    assert m["reconfigurations"] == len(applied) >= 1
    for h in applied:
        assert h["n_groups"] >= 3 and h["predicted_waf"] < h["measured_waf"]
        assert sum(h["sizes"]) == sim.n_segments - 2
    # user writes only to G0 (hot) and G1; G0's victims are nearly all invalid
    assert all(g["user_writes"] == 0 for g in r["groups"][2:])
    assert r["groups"][0]["user_writes"] > 0.2 * r["user_writes"]
    assert r["groups"][0]["victim_valid_ratio"] < 0.15


def test_policy_counts_update_intervals_like_the_offline_uid():
    writes = zipf_writes(CAP, 6 * CAP, theta=1.0, seed=11)
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG), CAP)
    sim.prefill()
    window = 4 * CAP
    # the first epoch covers the second capacity of writes after the prefill; it closes on the next write
    sim.feed(writes[: CAP + window + 1])
    cfg, unit = record(sim.pstate.scalars), SEG // 4
    counts, once = offline_uid_counts(writes[CAP : CAP + window], unit, window)
    assert cfg.uid_done_buckets == window // unit
    assert np.array_equal(sim.pstate.uid_done[: window // unit], counts)
    assert cfg.uid_done_once == once


def test_beats_nosep_on_hot_cold_and_zipf(zipf_run):
    hc = hotcold_writes(CAP, 12 * CAP)
    assert run("midas", hc)[1]["waf"] < run("nosep", hc)[1]["waf"] - 0.5
    writes, _, r = zipf_run
    assert r["waf"] < run("nosep", writes)[1]["waf"] - 1.0


def test_reconfiguration_follows_a_phase_shift():
    """Zipf 1.0 then a more skewed Zipf 1.3 on another layout: the applied configuration changes."""
    writes = np.concatenate(
        [zipf_writes(CAP, 12 * CAP, theta=1.0, seed=5), zipf_writes(CAP, 12 * CAP, theta=1.3, seed=6)]
    )
    sim, r = run("midas", writes, debug_invariants=True)
    shift = CAP + 12 * CAP
    applied = [h for h in r["midas"]["history"] if h["applied"]]
    before = [h for h in applied if h["t"] <= shift]
    after = [h for h in applied if h["t"] > shift + 4 * CAP]  # an epoch fully in the new phase
    assert before and after
    a, b = before[-1], after[-1]
    assert a["n_groups"] != b["n_groups"] or a["sizes"] != b["sizes"]
    assert b["hot_traffic"] > a["hot_traffic"] + 0.1  # more of the writes are hot
    # the policy's groups follow the applied configuration
    final = r["midas"]
    if not final["naive_mida"]:
        assert final["sizes"] == b["sizes"][:-1]


def test_irregular_group_falls_back_to_naive_mida(zipf_run):
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG, debug_invariants=True), CAP)
    sim.run(writes[: 8 * CAP])
    p, cfg = sim.pstate, record(sim.pstate.scalars)
    assert cfg.applied == 1 and cfg.naive_on == 0 and cfg.naive_start >= 3
    groups = sim.policy._groups(sim)
    tail = int(np.count_nonzero(groups >= 2))
    old_last, retired = int(cfg.last_group), int(cfg.retired_segments)
    merged_open = [int(sim.state.open_seg[g]) for g in range(3, old_last + 1) if sim.state.open_seg[g] >= 0]
    assert merged_open  # groups 3.. were written since the configuration
    # group 2's victims turn out far more valid than modelled
    p.predicted_valid[2] = 0.3
    p.victim_valid_sum[2], p.victim_count[2] = 9.0, 10
    M._err_check(sim.state, p)
    assert (cfg.naive_start, cfg.naive_on, cfg.last_group) == (2, 1, 2 + M.NAIVE_N - 1)
    assert cfg.fallbacks == 1
    # merged, nothing moved; the merged groups' half-written open segments are sealed into group 2
    assert cfg.retired_segments == retired + len(merged_open)
    assert all(sim.state.seg_state[seg] == SEG_SEALED and p.seg_owner[seg] == 2 for seg in merged_open)
    assert np.all(sim.state.open_seg[3:] < 0)
    assert int(np.count_nonzero(sim.policy._groups(sim) == 2)) == tail + len(merged_open)
    check_invariants(sim.state)
    sim.feed(writes[8 * CAP : 10 * CAP])
    check_invariants(sim.state)
    # GC that cannot keep up merges from before the group receiving the copies
    cfg.naive_start, cfg.naive_on = 4, 0
    M._set_naive(p, False)
    overruns = int(cfg.overrun_merges)
    M._gc_overrun(sim.state, p, 3)
    assert (cfg.naive_start, cfg.naive_on) == (2, 1) and cfg.overrun_merges == overruns + 1


def _open_groups(sim):
    return [g for g in range(sim.n_groups) if sim.state.open_seg[g] >= 0]


def test_no_group_out_of_use_keeps_an_open_segment(zipf_run):
    """The reconfigurations of the zipf run (naive MiDA off, splits) leave open segments only in
    groups still in use; turning naive MiDA off seals its groups' open segments."""
    _, sim, r = zipf_run
    cfg = record(sim.pstate.scalars)
    assert r["midas"]["retire"] == "changed" and r["midas"]["retired_segments"] >= M.NAIVE_N - 1
    assert max(_open_groups(sim)) <= cfg.last_group
    assert make_policy("midas", retire="none").label() == "midas[retire=none]"


@pytest.mark.parametrize("naive", [0, 1], ids=["smaller-configuration", "fallback"])
@pytest.mark.parametrize("mode", ["changed", "unused", "none"])
def test_merge_retires_the_groups_it_drops(zipf_run, mode, naive):
    """Groups 2.. merged into group 2, as a smaller configuration (naive MiDA off: group 2 is
    the last) or a fallback (naive MiDA on: groups 3..5 go on as its groups) does it.
    ``changed`` seals every merged group's open segment into group 2 (naive MiDA's groups restart
    empty), ``unused`` only those of groups past the new last one (into it), ``none`` leaves them
    open (the old behaviour: out of use after a smaller configuration, their space stranded).
    The run goes on with its invariants, and GC reclaims the retired segments."""
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas", retire=mode), SimConfig(segment_blocks=SEG, debug_invariants=True), CAP)
    sim.run(writes[: 8 * CAP])
    p, s, cfg = sim.pstate, sim.state, record(sim.pstate.scalars)
    assert cfg.naive_on == 0 and cfg.naive_start >= 3
    new_last = 2 + naive * (M.NAIVE_N - 1)
    before = {g: int(s.open_seg[g]) for g in _open_groups(sim)}
    assert max(before) > 2  # merged groups hold open segments
    retired0 = int(cfg.retired_segments)
    cfg.naive_on = naive
    M._merge_to(s, p, 2)
    assert cfg.last_group == new_last
    lo = {"changed": 3, "unused": new_last + 1, "none": BIG}[mode]
    for g, seg in before.items():
        if g >= lo:
            assert s.open_seg[g] < 0 and s.seg_state[seg] == SEG_SEALED
            assert p.seg_owner[seg] == (2 if mode == "changed" else new_last)
        else:
            assert s.open_seg[g] == seg  # in use (or, with none, stranded): left open
    assert cfg.retired_segments - retired0 == sum(g >= lo for g in before)
    stranded = [g for g in _open_groups(sim) if g > cfg.last_group]
    # out of use yet open: the spare space issue 12 is about
    assert bool(stranded) == (mode == "none" and max(before) > new_last)
    check_invariants(s)
    sim.feed(writes[8 * CAP : 10 * CAP])  # debug_invariants: checked after every chunk
    if mode == "none":
        return
    assert max(_open_groups(sim)) <= cfg.last_group
    # a retired segment is a victim like any sealed one: GC reclaims it
    retired = [seg for g, seg in before.items() if g >= lo]
    assert not retired or any(s.seg_state[seg] != SEG_SEALED or p.seg_owner[seg] < 0 for seg in retired)


def test_bad_parameters():
    with pytest.raises(ValueError, match="max_groups"):
        make_policy("midas", max_groups=1)
    with pytest.raises(ValueError, match="needs n_groups >= 13"):
        make_policy("midas", 6)
    with pytest.raises(ValueError, match="needs n_groups >= 18"):
        make_policy("midas", 13, max_groups=14)
    with pytest.raises(ValueError, match="epoch_capacities"):
        make_policy("midas", epoch_capacities=0)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_policy("midas", hot_bits=2)
    with pytest.raises(ValueError, match="retire must be one of"):
        make_policy("midas", retire="always")
    with pytest.raises(ValueError, match="shorter than 4 interval buckets"):
        Simulator(make_policy("midas", epoch_capacities=0.001), SimConfig(segment_blocks=SEG), CAP)
    assert make_policy("midas", max_groups=4).n_groups == 13  # unused groups stay empty
    assert make_policy("midas", 8, max_groups=4).n_groups == 8
