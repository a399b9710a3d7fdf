"""MiDAS: its configuration search against the authors' own (their search's inputs and result), its
closed forms against independent references, its update-interval counts against an offline count,
and the policy's invariants, behaviour, victim rules and errors."""

import json
import math
from pathlib import Path

import naive
import numpy as np
import pytest
from helpers import hotcold_writes, zipf_writes

from dogi_ml.errors import ConfigError
from dogi_ml.markov import midas as mm
from dogi_ml.markov.waf import fifo_waf
from dogi_ml.policies import make_policy
from dogi_ml.policies import midas as M
from dogi_ml.sim import SimConfig, Simulator, check_invariants
from dogi_ml.sim.policy_api import SimContext, record
from dogi_ml.sim.state import SEG_SEALED

# 563 physical segments, as the default scale (1/8 of its blocks per segment)
CAP, SEG = 32768, 64
BIG = 1 << 30
REFERENCE = Path(__file__).with_name("data") / "midas_gcs_reference.json"


def run(policy, writes, **cfg):
    sim = Simulator(make_policy(policy), SimConfig(segment_blocks=SEG, **cfg), CAP)
    return sim, sim.run(writes)


# -- the configuration search against theirs ----------------------------------------------------
@pytest.mark.parametrize("case", json.loads(REFERENCE.read_text())["cases"], ids=lambda c: c["name"])
def test_search_gives_the_authors_configuration_bit_for_bit(case):
    """Their search's inputs, printed by their simulator at its first configuration on a zipf and a
    hotcold trace (the second with an untrusted hot filter: G0 from its measurements), give the
    same sizes, valid ratios, WAF and hot traffic to the last bit, and the same last-group class
    counts accumulated over the whole search."""
    i, t = case["inputs"], case["theirs"]
    st = mm.new_gcs_state()
    st[0]["calc_unit"], st[0]["best_extra_unit"] = i["calc_unit"], i["best_extra_unit"]
    mm.begin_search(st, i["g0_traffic"], i["g0_valid"], i["g0_size"], i["utilization"], i["no_access"])
    sizes, vr = np.zeros(10, np.int64), np.zeros(10)
    status, n, waf, hot = mm.gcs_search(
        st,
        mm.new_gcs_work(9),
        np.asarray(i["counts"], np.int64),
        i["tw"],
        i["unit"],
        i["pps"],
        i["pgnum"],
        i["segnum"],
        i["freenum"],
        i["total_count"],
        9,
        sizes,
        vr,
    )
    assert status == mm.FOUND and n == t["groups"]
    assert sizes[:n].tolist() == t["sizes"]
    assert vr[:n].tolist() == t["valid_ratios"]
    assert (waf, hot) == (t["waf"], t["hot_traffic"])
    assert bool(st[0]["real_flag"] == 0) == t["hot_from_uid"]
    assert (st[0]["hot_req"], st[0]["tot_req"], st[0]["hot_lba"]) == (t["hot_requests"], t["requests"], t["hot_blocks"])


# -- closed forms ----------------------------------------------------------------------------------
def hot_cold_root(op, r, f):
    """The root w >= 1 of Desnoyers' two-class FIFO equation, by bisection (the test's own)."""

    def excess(w):
        return 1 + r / math.expm1(r * op / (f * w)) + (1 - r) / math.expm1((1 - r) * op / ((1 - f) * w)) - w

    lo, hi = 1.0, 2.0
    while excess(hi) > 0:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return lo


@pytest.mark.parametrize(
    "op,r,f", [(1.05, 0.5, 0.5), (1.28, 0.3, 0.3), (2.0, 0.8, 0.8), (1.1, 0.8, 0.2), (1.3, 0.6, 0.1)]
)
def test_none_fifo_predict_steps_to_the_root_of_the_hot_cold_equation(op, r, f):
    """Their stepped search lands on the first 0.001 step at or past the root; with one class
    (r = f) the root is the Lambert-W closed form of a FIFO log."""
    root = hot_cold_root(op, r, f)
    if r == f:
        assert root == pytest.approx(float(fifo_waf(op)), rel=1e-9)
    w = mm.none_fifo_predict(op, r, f)
    assert root - 1e-9 <= w < root + 0.001 + 1e-9
    assert mm.none_fifo_predict(1.0, r, f) == 0.0  # no room: theirs returns 0


def chain_reference(vr, real_flag, g0_valid, t, pgnum):
    """Their chain's last iteration, from its stationary distribution (solved here)."""
    gn = len(vr)
    k = gn + 2
    v2 = [1.0, g0_valid if real_flag else 0.0, *vr]
    m = np.zeros((k, k))
    m[0, 1], m[0, 2] = t, 1 - t
    for i in range(1, k):
        m[i, 0] = 1 - v2[i]
        m[i, min(i + 1, k - 1)] += v2[i]
    a = m.T - np.eye(k)
    a[-1, :] = 1.0
    pi = np.linalg.solve(a, np.eye(k)[-1]) * pgnum
    past = math.floor(pi[0])  # theirs keeps the user writes as an unsigned integer
    copies = pi[2] - pi[0] * v2[1] if gn == 1 else pi[3:].sum() + pi[1] * v2[1]
    return (copies + past) / past


@pytest.mark.parametrize("gn", [1, 2, 5, 9])
@pytest.mark.parametrize("real_flag", [0, 1])
def test_chain_waf_is_its_stationary_flow(gn, real_flag):
    rng = np.random.default_rng(gn)
    vr = rng.uniform(0.3, 0.95, gn)
    v2, base, res = np.zeros(12), np.zeros(12), np.zeros(12)
    got = mm.chain_waf(vr, gn, real_flag, 0.07, 0.35, 0.55, 524288, v2, base, res)
    t = 0.35 if real_flag else 0.55
    assert got == pytest.approx(chain_reference(list(vr), real_flag, 0.07, t, 524288), rel=1e-9)


def test_uid_resizing_follows_their_integer_arithmetic():
    tw, first_count = 12, 57
    counts = np.array([9, 7, 5, 11, 3, 2, 8, 1, 0, 4, 6, 2], np.int64)
    stamps = np.array([mm.UINT_MAX, (5 << 1) + 1, 7 << 1, (3 << 1) + 1, mm.UINT_MAX - 1, (1 << 1) + 1], np.int64)
    expected = [int(c) for c in counts]
    expected[-1] += 2  # written once in the epoch: the two flagged stamps among the first five
    expected[0] = first_count * tw // mm.FNUMBER // mm.SAMPLING
    for i in range(1, tw):
        expected[i] += int((((tw % i) * 2 + i) / 2.0 / i) * expected[i] / (tw / i))
    total = mm.resize_counts(counts, tw, first_count, stamps, 5)
    assert counts.tolist() == expected and total == sum(expected)


# -- the update intervals as the policy counts them ------------------------------------------------
def test_first_bucket_at_is_their_scan_from_zero():
    """The search's first bucket at or after ``past`` (markov/midas.py ``_first_bucket_at``) is
    the bucket their walk from bucket 0 stops at (tests/naive.py), for pasts on, just around and
    between bucket starts, beyond the last bucket, zero, negative, NaN and infinite."""
    rng = np.random.default_rng(5)
    for tw, unit, pps in ((9008, 128, 512), (100, 3, 7), (50, 16, 16), (1, 5, 3)):
        starts = np.arange(tw + 2) * unit / pps
        pasts = [0.0, -1.0, np.nan, np.inf, -np.inf, *starts, *np.nextafter(starts, -np.inf)]
        pasts += [*np.nextafter(starts, np.inf), *rng.uniform(-1, starts[-1] * 1.1, 300)]
        for past in pasts:
            assert mm._first_bucket_at(past, tw, unit, pps) == naive.midas_first_bucket(past, tw, unit, pps), (past, tw)


def test_policy_counts_update_intervals_like_an_offline_count():
    """The first epoch (after the prefill and one capacity, 4 device capacities long): intervals
    between writes of the sampled LBAs (one in 100), in buckets of a quarter segment, and the
    re-writes of any LBA within the ten probe buckets, counted offline from the writes."""
    writes = zipf_writes(CAP, 6 * CAP, theta=1.0, seed=11)
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG), CAP)
    cfg, unit = record(sim.pstate.scalars), SEG // 4
    tw = int(cfg.tw)
    assert tw * unit == 4 * sim.n_segments * SEG
    sim.prefill()
    epoch = writes[CAP : CAP + tw * unit - 1]  # their clock's times 1 .. tw * unit - 1
    sim.feed(writes[: CAP + tw * unit - 1])  # the next write ends the epoch
    counts = np.zeros(tw, np.int64)
    last = {}
    for t, lba in enumerate(epoch.tolist(), start=1):
        if lba % mm.SAMPLING == 0:
            if lba in last:
                counts[min((t - last[lba]) // unit, tw - 1)] += 1
            last[lba] = t
    assert np.array_equal(sim.pstate.counts[:tw], counts)
    probes = [tw // (mm.FNUMBER + 1) * (k + 1) for k in range(mm.FNUMBER)]
    rewrites = 0
    for c in probes:
        bucket = epoch[c * unit - 1 : c * unit - 1 + unit]  # times c * unit .. c * unit + unit - 1
        rewrites += bucket.size - np.unique(bucket).size
    assert cfg.first_count == rewrites
    assert cfg.model_on == 1 and (cfg.current_time, cfg.request_time) == (tw - 1, unit - 1)


# -- the policy ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def zipf_run():
    writes = zipf_writes(CAP, 12 * CAP, theta=1.0, seed=11)
    sim, r = run("midas", writes, debug_invariants=True)
    return writes, sim, r


def test_policy_keeps_invariants_and_reconfigures(zipf_run):
    writes, sim, r = zipf_run
    assert sim.victim_name == "midas(cost_benefit_sqrt)"
    assert r["user_writes"] == writes.size
    assert sum(g["user_writes"] for g in r["groups"]) == r["user_writes"]
    assert sum(g["gc_writes"] for g in r["groups"]) == r["gc_writes"]
    assert int((sim.state.l2p >= 0).sum()) == CAP and int(sim.state.seg_valid.sum()) == CAP
    m = r["midas"]
    applied = [h for h in m["history"] if h["applied"]]
    assert m["reconfigurations"] == len(applied) >= 1 and m["models"] == len(m["history"])
    for h in applied:
        # applied when the model's WAF is at most the WAF of the last device capacity of writes
        assert h["n_groups"] >= 3 and h["predicted_waf"] <= h["measured_waf"]
        assert len(h["sizes"]) == h["n_groups"] and h["valid_ratios"][0] == 0.0
    # user writes only to G0 (hot) and G1; G0's victims are nearly all invalid
    assert all(g["user_writes"] == 0 for g in r["groups"][2:])
    assert r["groups"][0]["user_writes"] > 0.2 * r["user_writes"]
    assert r["groups"][0]["victim_valid_ratio"] < 0.15


def test_beats_nosep_on_hot_cold_and_zipf(zipf_run):
    hc = hotcold_writes(CAP, 12 * CAP)
    assert run("midas", hc)[1]["waf"] < run("nosep", hc)[1]["waf"] - 0.5
    writes, _, r = zipf_run
    assert r["waf"] < run("nosep", writes)[1]["waf"] - 1.0


def test_applied_configuration_sets_the_fifo_groups(zipf_run):
    """Their change_config_2: each FIFO group's designated size is its segments less the open
    one, G1's one less again; groups hold no more sealed segments than that once collected."""
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG, debug_invariants=True), CAP)
    sim.prefill()
    first = None
    for start in range(0, writes.size, CAP // 4):
        sim.feed(writes[start : start + CAP // 4])
        cfg = record(sim.pstate.scalars)
        if cfg.reconfigurations == 1 and cfg.naive_on == 0:
            first = sim.policy.history(sim.pstate)[-1]
            break
    assert first is not None and first["applied"]
    sizes = first["sizes"]
    n = len(sizes)
    assert cfg.naive_start == n - 1 and cfg.model_groups == n
    expected = [s - 1 for s in sizes[: n - 1]]
    expected[1] -= 1
    assert sim.pstate.fifo_sizes[: n - 1].tolist() == expected
    assert np.allclose(sim.pstate.commit_vr[:n], first["valid_ratios"], atol=1e-4)


def test_each_rule_of_the_authors_simulator_runs_in_the_last_group():
    """The last group's victims follow the run's rule (their fifo / greedy / cost-benefit
    argument; cost_benefit_sqrt is theirs); the groups before it stay FIFO whatever the rule."""
    writes = zipf_writes(CAP, 8 * CAP, theta=1.0, seed=3)
    wafs = {}
    for rule in M.RULES:
        sim = Simulator(make_policy("midas", victim=None), SimConfig(segment_blocks=SEG, victim=rule), CAP)
        r = sim.run(writes)
        assert sim.victim_name == f"midas({rule})" and r["midas"]["victim_rule"] == rule
        wafs[rule] = r["waf"]
    assert len(set(wafs.values())) == len(wafs)  # each rule picks differently
    assert wafs["fifo"] > wafs["greedy"]  # a FIFO last group copies its cold data again and again


def test_rules_midas_cannot_honour_are_rejected():
    pol = make_policy("midas", victim=None)
    ctx = SimContext(capacity=CAP, segment_blocks=SEG, n_segments=563, prefill_blocks=CAP, victim_rule="d_choices")
    with pytest.raises(ValueError) as e:
        pol.bind(ctx)
    msg = str(e.value)
    assert "\n" not in msg and "policy.victim" in msg and "sim.victim" in msg and "cost_benefit_sqrt" in msg
    # the engine's resolution says the same before binding
    with pytest.raises(ConfigError, match="cost_benefit_sqrt"):
        Simulator(make_policy("midas", victim=None), SimConfig(segment_blocks=SEG, victim="d_choices"), CAP)
    # the configured default is the authors' cost-benefit
    assert make_policy("midas").victim == "cost_benefit_sqrt"


def test_irregular_group_falls_back_to_naive_mida(zipf_run):
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG, debug_invariants=True), CAP)
    sim.prefill()
    for start in range(0, writes.size, CAP // 4):
        sim.feed(writes[start : start + CAP // 4])
        cfg = record(sim.pstate.scalars)
        if cfg.reconfigurations == 1 and cfg.naive_on == 0 and cfg.naive_start >= 3:
            break
    p, s = sim.pstate, sim.state
    assert cfg.config_version == 1 and cfg.naive_start >= 3
    retired, fallbacks = int(cfg.retired_segments), int(cfg.fallbacks)
    merged_open = [int(s.open_seg[g]) for g in range(3, int(cfg.last_group) + 1) if s.open_seg[g] >= 0]
    # group 2's victims turn out far more valid than modelled: their err_handling falls back there
    p.commit_vr[2] = 0.3
    p.err_vpg[:] = 0.0
    p.err_epg[:] = 0.0
    p.err_vpg[2], p.err_epg[2] = 4.5, 10.0
    p.err_epg[1], p.err_vpg[1] = 10.0, 10.0 * p.commit_vr[1]  # group 1 as modelled
    M._err_handling(s, p)
    assert (cfg.naive_start, cfg.naive_on, cfg.last_group) == (2, 1, 2 + M.NAIVE_N - 1)
    assert cfg.fallbacks == fallbacks + 1 and cfg.err_flag == 1
    assert not p.err_epg.any()  # the check restarts
    # the merged groups' half-written open segments are sealed into group 2
    assert cfg.retired_segments == retired + len(merged_open)
    assert all(s.seg_state[seg] == SEG_SEALED and p.seg_owner[seg] == 2 for seg in merged_open)
    check_invariants(s)
    sim.feed(writes[8 * CAP : 10 * CAP])
    check_invariants(s)


@pytest.mark.parametrize("commit_g,target,expected", [(M.COMMIT_ALL, 3, 2), (M.COMMIT_ALL, 9, 3), (2, 4, 1), (0, 4, 1)])
def test_gc_that_cannot_keep_up_merges_as_their_infinite_gc_handling(zipf_run, commit_g, target, expected):
    """From before the group receiving the copies once every group was collected, else from
    before ``commit_g`` (everything merged from 0 or 1); naive MiDA comes back on."""
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas"), SimConfig(segment_blocks=SEG), CAP)
    sim.run(writes[: 8 * CAP])
    p, cfg = sim.pstate, record(sim.pstate.scalars)
    cfg.naive_start, cfg.naive_on, cfg.commit_g = 4, 0, commit_g
    M._set_naive(p, False)
    merges = int(cfg.overrun_merges)
    M._gc_overrun(sim.state, p, target)
    assert (cfg.naive_start, cfg.naive_on) == (expected, 1) and cfg.overrun_merges == merges + 1
    assert cfg.commit_g == (M.COMMIT_ALL if commit_g != M.COMMIT_ALL and commit_g >= expected else commit_g)


def _open_groups(sim):
    return [g for g in range(sim.n_groups) if sim.state.open_seg[g] >= 0]


def test_no_group_out_of_use_keeps_an_open_segment(zipf_run):
    """The reconfigurations of the zipf run (naive MiDA off, splits, merges) leave open segments
    only in groups still in use; turning naive MiDA off seals its groups' open segments."""
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
    open (out of use after a smaller configuration, their space stranded).
    The run goes on with its invariants, and GC reclaims the retired segments."""
    writes, _, _ = zipf_run
    sim = Simulator(make_policy("midas", retire=mode), SimConfig(segment_blocks=SEG, debug_invariants=True), CAP)
    sim.prefill()
    for start in range(0, writes.size, CAP // 4):
        sim.feed(writes[start : start + CAP // 4])
        cfg = record(sim.pstate.scalars)
        if cfg.naive_on == 0 and cfg.naive_start >= 3 and max(_open_groups(sim)) > 2:
            break
    p, s = sim.pstate, sim.state
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
    assert bool(stranded) == (mode == "none" and max(before) > new_last)
    check_invariants(s)
    sim.feed(writes[10 * CAP : 11 * CAP])  # debug_invariants: checked after every chunk
    if mode == "none":
        return
    assert max(_open_groups(sim)) <= cfg.last_group
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
    with pytest.raises(ValueError, match="too few for its 10 probes"):
        Simulator(make_policy("midas", epoch_capacities=0.001), SimConfig(segment_blocks=SEG), CAP)
    assert make_policy("midas", max_groups=4).n_groups == 13  # unused groups stay empty
    assert make_policy("midas", 8, max_groups=4).n_groups == 8
