"""MiDA, DAC and WARCIP: behaviour, invariants, WAF ordering, golden counts."""

import numpy as np
import pytest
from helpers import CAP, SEG, hotcold_writes, run, zipf_writes

from dogi_ml.pipeline.simulate import simulation_writes
from dogi_ml.policies import make_policy, policy_names
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.generators import generate

HEURISTICS = ["mida", "dac", "warcip"]


def test_registered_with_configs():
    assert set(HEURISTICS) <= set(policy_names())
    assert make_policy("mida", 4).n_groups == 4


@pytest.mark.parametrize("policy", HEURISTICS)
@pytest.mark.parametrize("victim", ["greedy", "cost_benefit"])
def test_invariants(policy, victim, zipf_small):
    sim, r = run(policy, zipf_small, victim, debug_invariants=True, chunk_blocks=8192)
    assert r["user_writes"] == zipf_small.size and r["gc_writes"] > 0
    assert int(sim.state.seg_valid.sum()) == CAP


# The authors' DAC (a new LBA starts at level 0) is no better than NoSep under greedy victims on
# this small trace (7.196 vs 7.180; its levels 1-5 take 1/4 of the user writes but hold few
# segments), so it is held to the ordering under cost-benefit, where it separates (4.55 vs 6.96).
ORDER_VICTIM = {"dac": "cost_benefit"}


@pytest.mark.parametrize("policy", HEURISTICS)
def test_below_nosep_and_above_fk_on_hot_cold(policy):
    writes = hotcold_writes(CAP, 8 * CAP)
    victim = ORDER_VICTIM.get(policy, "greedy")
    waf = {p: run(p, writes, victim)[1]["waf"] for p in ("nosep", "fk", policy)}
    assert waf["fk"] < waf[policy] < waf["nosep"], waf


def test_mida_group_is_migration_count():
    sim, r = run("mida", zipf_writes(CAP, 4 * CAP, seed=2))
    mig = sim.pstate.migrations
    assert mig.max() == sim.n_groups - 1
    # a block sits in the group of its migration count
    seg = sim.state.l2p // SEG
    groups = sim.state.seg_group[seg]
    np.testing.assert_array_equal(groups, np.minimum(mig, sim.n_groups - 1))
    assert r["groups"][0]["gc_writes"] == 0 and all(g["user_writes"] == 0 for g in r["groups"][1:])


def test_dac_promotes_on_user_writes_and_demotes_on_gc():
    pol = make_policy("dac", 4)
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim.compile()
    sim.feed(np.array([5, 5, 5, 5, 5, 7], np.int64))
    region = sim.pstate.region
    # a new LBA starts at level 0 (the authors' DAC.java); each rewrite promotes, capped at the hottest
    assert region[5] == 3 and region[7] == 0 and region[6] == 0
    sim_p = Simulator(make_policy("dac", 4, variant="paper"), SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim_p.compile()
    sim_p.feed(np.array([5, 5, 5, 5, 5, 7], np.int64))
    assert sim_p.pstate.region[5] == 3 and sim_p.pstate.region[7] == 1  # SepBIT's text: every write promotes
    sim2, _ = run("dac", zipf_writes(CAP, 4 * CAP, seed=4))
    seg = sim2.state.l2p // SEG
    np.testing.assert_array_equal(sim2.state.seg_group[seg], sim2.pstate.region)


def test_warcip_clusters_by_rewrite_interval():
    """The authors' WARCIP: GC writes only in group 0, user writes only in the clusters; a block's
    cluster centre tracks its rewrite interval, so hot blocks (short intervals) sit in clusters
    with far smaller centres than cold ones."""
    writes = hotcold_writes(CAP, 8 * CAP, hot=0.05, hot_share=0.9)
    sim, r = run("warcip", writes)
    assert r["groups"][0]["user_writes"] == 0 and r["groups"][0]["gc_writes"] == r["gc_writes"]
    assert all(g_["gc_writes"] == 0 for g_ in r["groups"][1:])
    centre = dict(zip(r["warcip_groups"], r["warcip_centers_blocks"]))
    seg = sim.state.l2p // SEG
    g = sim.state.seg_group[seg]
    hot_lbas = np.unique(writes[writes < int(CAP * 0.05)])
    cold_lbas = np.setdiff1d(np.arange(CAP), hot_lbas)
    hot_c = [centre[int(x)] for x in g[hot_lbas] if int(x) in centre]
    cold_c = [centre[int(x)] for x in g[cold_lbas] if int(x) in centre]
    assert hot_c and cold_c
    assert 10 * np.mean(hot_c) < np.mean(cold_c), (np.mean(hot_c), np.mean(cold_c))


def test_warcip_merges_and_splits():
    """Every 256 sealed user segments a cluster with under a segment's writes is marked and merged
    away when its segment seals (its full segment is sealed for GC, not left open), and a cluster
    with over half the writes is split while fewer than n_groups exist."""
    writes = zipf_writes(CAP, 16 * CAP, seed=5)
    pol = make_policy("warcip")
    sim = Simulator(pol, SimConfig(segment_blocks=16, debug_invariants=True, chunk_blocks=4096), CAP)
    sim.prefill()
    counts = set()
    for i in range(0, writes.size, 4096):
        sim.feed(writes[i : i + 4096])
        m = int(sim.pstate.scalars[0]["clusters"])
        counts.add(m)
        groups = sorted(int(x) for x in sim.pstate.group_of[:m])
        assert groups[0] == 0 and len(set(groups)) == m  # the GC class keeps group 0
        held = set(groups)
        for grp in range(sim.n_groups):
            seg = int(sim.state.open_seg[grp])
            if grp not in held and seg >= 0:
                assert sim.state.seg_wp[seg] < SEG  # a merged group's full segment was sealed
    assert min(counts) < sim.n_groups, counts


def test_fk_group_is_remaining_time_over_segment_size():
    """FK as the authors' FK.java: group floor(t / s) for a block invalidated t user writes later
    (so t = s goes to group 1); SepBIT's text (variant paper): the ceil(t/s)-th segment, 0-based
    ceil(t/s) - 1 (t = s goes to group 0). Never-rewritten blocks: the last group in both."""
    seg = 4
    # LBAs 0 and 1 rewritten exactly 4 writes later, LBA 2 8 writes later, LBA 3 never again
    writes = np.array([0, 1, 2, 3, 0, 1, 4, 5, 6, 9, 2, 7], np.int64)
    for variant, expect in (("code", {0: 1, 1: 1, 2: 2}), ("paper", {0: 0, 1: 0, 2: 1})):
        pol = make_policy("fk", variant=variant)
        sim = Simulator(pol, SimConfig(segment_blocks=seg, prefill=False, op_ratio=4.0), 16, stream=writes)
        sim.compile()
        groups = []
        for w in writes[:4]:
            sim.feed(np.array([w], np.int64))
            groups.append(int(sim.state.seg_group[sim.state.l2p[w] // seg]))
        assert groups[:3] == [expect[0], expect[1], expect[2]], (variant, groups)
        assert groups[3] == sim.n_groups - 1  # LBA 3 is never written again
    with pytest.raises(ValueError, match="unknown variant"):
        make_policy("fk", variant="x")


def test_bad_parameters():
    with pytest.raises(ValueError, match="mida needs 2..255"):
        make_policy("mida", 1)
    with pytest.raises(ValueError, match="warcip needs >= 2 groups"):
        make_policy("warcip", 1)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_policy("warcip", 6, alpha=0.01)  # the log-space k-means is gone (see warcip.py)
    with pytest.raises(ValueError, match="unknown variant"):
        make_policy("sepbit", 6, variant="fast")
    with pytest.raises(ValueError, match="unknown parameter"):
        make_policy("dac", 6, alpha=0.1)


# Golden GC-write counts (CAP=8192, SEG=64, OP 10%, prefill): computed once with this code and
# checked in, so any change in behaviour shows up. Zipf: conftest.zipf_writes(seed=11), 8x.
GOLDEN_ZIPF = {
    ("mida", "greedy"): 371439,  # WAF 6.6677
    ("mida", "cost_benefit"): 305593,  # WAF 5.6630
    ("dac", "greedy"): 297500,  # WAF 5.5395
    ("dac", "cost_benefit"): 278881,  # WAF 5.2554
    ("warcip", "greedy"): 349756,  # WAF 6.3369
    ("warcip", "cost_benefit"): 312894,  # WAF 5.7744
}

# Every scheme on the generated workloads (seed 0, capacity 8192, 8x written), greedy victims.
GOLDEN_GENERATED = {
    ("ycsb_a", "nosep"): 358524,  # WAF 6.4706
    ("ycsb_a", "sepgc"): 204987,  # WAF 4.1279
    ("ycsb_a", "sepbit"): 185198,  # WAF 3.8259
    ("ycsb_a", "mida"): 215592,  # WAF 4.2897
    ("ycsb_a", "dac"): 196628,  # WAF 4.0003
    ("ycsb_a", "warcip"): 228667,  # WAF 4.4892
    ("ycsb_a", "fk"): 186165,  # WAF 3.8407
    ("varmail", "nosep"): 50792,  # WAF 1.7750
    ("varmail", "sepgc"): 26023,  # WAF 1.3971
    ("varmail", "sepbit"): 21696,  # WAF 1.3311
    ("varmail", "mida"): 31796,  # WAF 1.4852
    ("varmail", "dac"): 23839,  # WAF 1.3638
    ("varmail", "warcip"): 34784,  # WAF 1.5308
    ("varmail", "fk"): 24114,  # WAF 1.3680
}


@pytest.mark.parametrize("key", sorted(GOLDEN_ZIPF))
def test_golden_zipf(key, zipf_small):
    _, r = run(*key[:1], zipf_small, key[1])
    assert r["gc_writes"] == GOLDEN_ZIPF[key], f"{key}: WAF {r['waf']:.6f}"


@pytest.fixture(scope="module")
def generated():
    out = {}
    for wl in ("ycsb_a", "varmail"):
        out[wl] = simulation_writes(generate(wl, capacity_blocks=CAP, n_writes=8 * CAP, seed=0), CAP)[0]
    return out


@pytest.mark.parametrize("key", sorted(GOLDEN_GENERATED))
def test_golden_generated(key, generated):
    wl, policy = key
    _, r = run(policy, generated[wl])
    assert r["gc_writes"] == GOLDEN_GENERATED[key], f"{key}: WAF {r['waf']:.6f}"


# Every scheme on a real trace: Tencent CBS cut 490 (../shared/data), capacity = its write WSS
# (6,541 blocks), 16-block segments, 25% OP, greedy victims.
GOLDEN_TENCENT = {
    "nosep": 95965,  # WAF 2.6070
    "sepgc": 49855,  # WAF 1.8349
    "sepbit": 38449,  # WAF 1.6439
    "mida": 44437,  # WAF 1.7441
    "dac": 42095,  # WAF 1.7049
    "warcip": 52539,  # WAF 1.8798
    "fk": 29171,  # WAF 1.4885
}


@pytest.mark.parametrize("policy", sorted(GOLDEN_TENCENT))
def test_golden_real_trace(policy, shared_traces):
    from dogi_ml.traces.readers import read_trace

    writes, cap = simulation_writes(read_trace(shared_traces / "tencent_cut_490.csv", "flashnet_tencent"), None)
    assert (cap, writes.size) == (6541, 59717)
    pol = make_policy(policy)
    sim = Simulator(
        pol,
        SimConfig(segment_blocks=16, op_ratio=0.25, debug_invariants=True),
        cap,
        stream=writes if pol.needs_future else None,
    )
    r = sim.run(writes)
    assert r["gc_writes"] == GOLDEN_TENCENT[policy], f"{policy}: WAF {r['waf']:.6f}"
