"""Shiro (issue 14): Algorithm 1's step rules and inflection point, the digit inputs, is_seq,
Adjusted Greedy (Eq. 1), the cached-state GRU step against torch's window forward, and runs:
the frozen hierarchical agent = the untrained Q-agent block for block (= PHFTL-style age
classes), determinism, the int8 Q-table = the float table, parameter errors.

The rl agent's own tests (state bins, reward credit vs a brute-force per-decision record, toy
learning, C header) are in ``test_rl.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numba as nb
import numpy as np
import pytest
from helpers import run_cli

from dogi_ml.cli import CONF_DIR
from dogi_ml.oracles.annotate import NEVER as NEVER_CLOCK
from dogi_ml.policies import make_policy
from dogi_ml.policies._gru import fast_tanh, gru_step
from dogi_ml.policies._online import PENDING
from dogi_ml.policies._sequence import cdf_knee
from dogi_ml.policies.shiro import (
    G_GC1,
    N_COUNT_STATES,
    N_GROUPS,
    ThresholdSearch,
    count_state,
    count_state_table,
    encode_digits,
    encode_windows,
    first_read_clocks,
    gru_infer,
    logistic_accuracy,
    n_inputs,
    paper_is_seq,
    recent_counts,
)
from dogi_ml.rl import qlearning as ql
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.policy_api import NoState, new_scalars, record, scalar_fields
from dogi_ml.sim.state import SEG_SEALED, new_state
from dogi_ml.sim.victims import ANY_SCHEME_VICTIMS, GENERAL_VICTIMS, VICTIMS, adjusted_greedy, get_victim
from dogi_ml.traces.generators import generate
from dogi_ml.traces.trace import OP_READ, OP_WRITE, Trace

CAP = 8192
SIM = dict(segment_blocks=32, op_ratio=0.2, debug_invariants=True)
# small and fast: 25% windows, one in 2 writes sampled, a short first training
FAST = dict(
    window=0.25,
    sample_every=2,
    min_samples=600,
    max_train=3000,
    model_params={"epochs": 8, "batch_size": 64, "patience": 3},
)


@nb.njit
def gru_init_states(hist, digits, h_all, wih_t, whh_t, bih, bhh):
    """The reference for the first states: every LBA's state after its previous ``history - 1``
    writes as float32 rows (``hist``, zero rows where it had fewer: as the training windows'
    padding), stepped from zero through every row (what Shiro did before its compact rows)."""
    H = h_all.shape[1]
    x = np.empty(wih_t.shape[0], np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    for lba in range(hist.shape[0]):
        h = h_all[lba]
        h[:] = 0.0
        for j in range(hist.shape[1]):
            encode_digits(hist[lba, j], digits, x)
            gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh)


# -- Algorithm 1 -------------------------------------------------------------------------------
def test_inflection_point_on_a_known_curve():
    # 900 lifetimes spread over 1..100, then a tail of 100 up to 10,000: the knee is at ~100
    life = np.concatenate([np.linspace(1, 100, 900), np.linspace(100, 10_000, 100)])
    rng = np.random.default_rng(0)
    assert cdf_knee(rng.permutation(life)) == 100
    # an exponential CDF's knee, normalised: max of y - x is where the slope of F^-1 is 1
    # (L = -m ln(1 - y), dL/dy normalised to 1 at y = 1 - m / span)
    m, n = 50.0, 20_000
    y = (np.arange(n) + 0.5) / n
    L = -m * np.log1p(-y)
    span = L[-1] - L[0]
    expect = -m * np.log(m / span)
    assert abs(cdf_knee(L) - expect) <= 1.0
    assert cdf_knee(np.array([7, 7, 7])) == 7 and cdf_knee(np.array([])) == 1


def _value_at(L, q):
    return int(np.percentile(L, min(100, max(0, q)), method="lower"))


def test_algorithm1_step_rules_on_scripted_windows():
    L = np.arange(1, 1001)
    s = ThresholdSearch(step=5)
    assert s.pick(np.r_[np.full(900, 3), np.full(100, 4000)], lambda t: 1.0) == 3  # first: the knee
    s.threshold = 500  # p = 50 on L

    def higher(t):
        return t / 1000

    def lower(t):
        return 1 - t / 1000

    def middle(prev):
        return lambda t: 1 - abs(t - prev) / 1000

    # (the step a window uses is the one left by the previous window)
    # previous window: no adjustment; now up -> no rule applies, step stays 5
    assert s.pick(L, higher) == _value_at(L, 55) == 550 and s.step == 5
    # up again (p 55 + 5): same direction -> step 6
    assert s.pick(L, higher) == _value_at(L, 60) == 600 and s.step == 6
    # down (p 60 - 6): opposite direction -> step 5
    assert s.pick(L, lower) == _value_at(L, 54) == 540 and s.step == 5
    # stay: adjusted before, not now -> step 4
    assert s.pick(L, middle(540)) == 540 and s.step == 4
    # stay again: no adjustment in both -> step 5
    assert s.pick(L, middle(540)) == 540 and s.step == 5
    log = [e["candidates"] for e in s.log[1:]]
    assert [t for t, _ in log[0]] == [450, 500, 550]
    # the same direction again and again: the step grows to its cap of 10
    steps = []
    for _ in range(7):
        s.pick(L, higher)
        steps.append(s.step)
    assert steps == [5, 6, 7, 8, 9, 10, 10] and s.threshold == 1000  # p + step clipped at 100
    # at the top p + step = p: no adjustment after one -> the step shrinks
    s.pick(L, higher)
    assert s.threshold == 1000 and s.step == 9
    # ties: the first strictly best candidate (p - step) wins, as written
    s2 = ThresholdSearch(step=5)
    s2.threshold = 500
    assert s2.pick(L, lambda t: 0.5) == 450
    # every score 0 (no model could be trained): the threshold stays
    s3 = ThresholdSearch(step=5)
    s3.threshold = 500
    assert s3.pick(L, lambda t: 0.0) == 500 and s3.step == 6
    with pytest.raises(ValueError, match="step"):
        ThresholdSearch(step=-1)


def test_logistic_probe_is_balanced_and_scores_separable_data():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(0, 1, 900), rng.normal(4, 1, 100)]
    y = np.r_[np.zeros(900, int), np.ones(100, int)]
    acc = logistic_accuracy(x[:, None], y, seed=0)
    assert acc > 0.9  # balanced 100 + 100: the majority class alone would score 0.5
    assert logistic_accuracy(x[:, None], np.r_[np.zeros(995, int), np.ones(5, int)], seed=0) == 0.0


# -- inputs ------------------------------------------------------------------------------------
def test_hexadecimal_digit_inputs():
    digits = np.array([3, 0, 2])
    out = np.empty(6, np.float32)
    encode_digits(np.array([0x1A3, 1.0, 0x7F0], np.float32), digits, out)
    np.testing.assert_allclose(out * 15, [1, 10, 3, 15, 15, 15], atol=1e-5)  # flag 1 -> 1 (x 15); 0x7F0 clips to FF
    encode_digits(np.array([-5, 0.0, 0x2B], np.float32), digits, out)
    np.testing.assert_allclose(out * 15, [0, 0, 0, 0, 2, 11], atol=1e-5)
    X = np.random.default_rng(2).integers(0, 5000, (7, 4, 3)).astype(np.float32)
    X[..., 1] = X[..., 1] % 2
    W = encode_windows(X, digits)
    assert W.shape == (7, 4, 6)
    for i in range(7):
        for j in range(4):
            encode_digits(X[i, j], digits, out)
            np.testing.assert_allclose(W[i, j], out, rtol=0, atol=1e-7)


def test_is_seq_is_32_requests_covering_128_kib_in_order():
    # 8-block writes at 0, 8, 16, 24 (a read and a far write between): 32 blocks in order at the 4th
    lba = [0, 8, 5000, 16, 9000, 24, 32, 100, 108]
    nb_ = [8, 8, 4, 8, 1, 8, 8, 8, 8]
    op = [OP_WRITE, OP_WRITE, OP_READ, OP_WRITE, OP_WRITE, OP_WRITE, OP_WRITE, OP_WRITE, OP_WRITE]
    tr = Trace(ts_us=np.arange(9), lba=lba, nblocks=nb_, op=op, volume=np.zeros(9))
    seq = paper_is_seq(tr)
    per_req = [seq[np.flatnonzero(tr.block_write_request == r)[0]] for r in (0, 1, 3, 4, 5, 6, 7, 8)]
    assert per_req == [0, 0, 0, 0, 1, 1, 0, 0]
    assert seq.size == tr.block_writes.size
    # a run older than 32 write requests is forgotten
    lba2 = [0, 8, 16] + [10_000 + 10 * k for k in range(31)] + [24]
    tr2 = Trace(ts_us=np.arange(35), lba=lba2, nblocks=[8] * 35, op=[OP_WRITE] * 35, volume=np.zeros(35))
    assert paper_is_seq(tr2)[-1] == 0


# -- Adjusted Greedy ---------------------------------------------------------------------------
class _Probe(NamedTuple):
    scalars: np.ndarray


# An uncached compilation: a cached library function must never see a type defined in a test
# module (its cache index would then fail to load in any process that cannot import the test).
_adjusted_greedy = nb.njit(cache=False)(adjusted_greedy.py_func)


def test_adjusted_greedy_is_eq1_and_greedy_without_a_short_group():
    s = new_state(capacity=64, n_segments=6, segment_blocks=10, n_groups=3, gc_free_segments=1)
    s.seg_state[:] = SEG_SEALED
    s.seg_valid[:] = [6, 3, 4, 4, 9, 10]
    s.seg_group[:] = [1, 0, 0, 2, 1, 0]
    s.seg_seal_time[:] = [0, 990, 100, 0, 0, 0]
    sc = new_scalars(scalar_fields(short_group=np.int64, hot_threshold=np.int64))
    sc[0]["short_group"], sc[0]["hot_threshold"] = 0, 500
    now = 1000
    # Eq. 1: seg 1 (short, C = 10): 0.7 / (1 + 0.3 * 50) = 0.044; seg 2 (short, C = 900):
    # 0.6 / (1 + 0.4 * 0.556) = 0.491; seg 3 (group 2): 0.6; seg 0: 0.4
    assert _adjusted_greedy(s, _Probe(sc), now) == 3
    sc[0]["hot_threshold"] = 1
    assert _adjusted_greedy(s, _Probe(sc), now) == 1  # tiny T: seg 1's 0.7 / (1 + 0.3 / 10) = 0.68
    # a policy without the fields: plain greedy (fewest valid)
    assert _adjusted_greedy(s, NoState(np.zeros(1, np.int64)), now) == 1
    assert get_victim("adjusted_greedy") is VICTIMS["adjusted_greedy"] is adjusted_greedy
    assert "adjusted_greedy" in ANY_SCHEME_VICTIMS and "adjusted_greedy" not in GENERAL_VICTIMS


class _Eq1Probe(NamedTuple):
    scalars: np.ndarray
    seg_short: np.ndarray
    seal_clock: np.ndarray


def test_eq1_readings_choose_the_discounted_segments_and_the_clock():
    """Adjusted Greedy's readings (``eq1_segments``, ``eq1_clock``): which segments Eq. 1 discounts
    and what C counts, each choosing a different victim on one state (scores worked by hand)."""
    s = new_state(capacity=64, n_segments=4, segment_blocks=10, n_groups=4, gc_free_segments=1)
    s.seg_state[:] = SEG_SEALED
    s.seg_valid[:] = [5, 6, 7, 9]
    s.seg_group[:] = [0, 3, 1, 2]  # seg 0: the short group; seg 1: a GC segment holding short pages
    s.seg_seal_time[:] = [990, 990, 0, 0]
    sc = new_scalars(
        scalar_fields(
            short_group=np.int64, hot_threshold=np.int64, eq1_segments=np.int64, eq1_flash=np.int64,
            flash_clock=np.int64,
        )
    )  # fmt: skip
    st = sc[0]
    st["short_group"], st["hot_threshold"] = 0, 100
    p = _Eq1Probe(sc, np.asarray([5, 2, 0, 0], np.int32), np.asarray([3000, 3000, 0, 0], np.int64))
    now = 1000  # C = 10 user writes since seg 0 and 1 were sealed
    # short_group: seg 0 = 0.5 / (1 + 0.5 * 100 / 10) = 0.083; seg 1 = 0.4 (greedy); seg 2 = 0.3
    assert _adjusted_greedy(s, p, now) == 1
    st["eq1_segments"] = 1  # short_pages: seg 1 holds short pages too: 0.4 / (1 + 0.6 * 10) = 0.057
    assert _adjusted_greedy(s, p, now) == 2
    st["eq1_segments"] = 2  # all: seg 2 (C = 1000) 0.3 / (1 + 0.7 * 0.1) = 0.280; seg 3 0.1 / 1.09
    assert _adjusted_greedy(s, p, now) == 2
    st["eq1_segments"], st["eq1_flash"] = 1, 1
    st["flash_clock"] = 5000  # C = 2000 blocks written (user and GC) since seg 0 and 1 were sealed:
    assert _adjusted_greedy(s, p, now) == 0  # seg 0 = 0.5 / (1 + 0.5 * 0.05) = 0.488, seg 1 = 0.388
    st["eq1_segments"], st["eq1_flash"] = 0, 0  # the text's reading again: seg 1, as a policy without the fields
    assert _adjusted_greedy(s, p, now) == 1


def test_recent_counts_on_a_scripted_trace():
    """``feature_counts=recent``: requests (not blocks) to the block's 2 MiB chunk and the read /
    write block ratio over the current and previous window; values worked by hand, windows of 4
    block writes."""
    req = [(0, 1, OP_WRITE), (1, 2, OP_WRITE), (600, 1, OP_READ), (510, 4, OP_WRITE), (0, 1, OP_WRITE),
           (2, 1, OP_READ), (3, 1, OP_WRITE), (4, 1, OP_WRITE)]  # fmt: skip
    n = len(req)
    t = Trace(
        ts_us=np.arange(n), lba=[r[0] for r in req], nblocks=[r[1] for r in req], op=[r[2] for r in req],
        volume=np.zeros(n),
    )  # fmt: skip
    c = recent_counts(t, span=4)
    # block writes: 0 | 1 2 | 510 511 512 513 | 0 (window 2 begins: the first one's counts carry on) |
    # 3 (window 3: window 1's carry on, window 1's read of chunk 0 counts) | 4
    assert c["chunk_writes"].tolist() == [0, 1, 1, 2, 2, 0, 0, 3, 1, 2]
    assert c["chunk_reads"].tolist() == [0, 0, 0, 0, 0, 1, 1, 0, 1, 1]
    assert c["rw_ratio_milli"].tolist() == [0, 0, 0, 333, 333, 333, 333, 142, 1000, 500]


def test_lifetime_window_any_samples_every_rewrite(trace):
    """``lifetime_window``: the window's lifetime samples are the rewrites of pages written in it
    (within) or every rewrite (any), counted as a brute force does; only ``any`` lets Algorithm 1's
    threshold exceed a window. No model is trained (placement does not depend on torch)."""
    window = CAP // 4
    out = {}
    for lw in ("within", "any"):
        sim, r = simulate(trace, min_samples=10**9, agent="hierarchical", lifetime_window=lw)
        h = [e for e in r["training_history"] if "window_lifetimes" in e]
        out[lw] = [e["window_lifetimes"] for e in h], [e["hot_threshold"] for e in h]
    brute = {}
    for lw in ("within", "any"):
        lbas = np.concatenate([np.arange(CAP), trace.block_writes])
        last = np.full(CAP, -1, np.int64)
        counts = []
        for k in range(len(out[lw][0])):
            lo, hi = (0 if k == 0 else CAP + k * window), CAP + (k + 1) * window
            n = 0
            for now in range(lo, hi):
                lba = lbas[now]
                if now >= CAP and last[lba] >= 0 and (lw == "any" or last[lba] >= lo):
                    n += 1
                last[lba] = now
            counts.append(n)
        brute[lw] = counts
    assert out["within"][0] == brute["within"] and out["any"][0] == brute["any"]
    assert sum(brute["any"]) > 1.5 * sum(brute["within"])
    assert max(out["within"][1][1:]) < window < max(out["any"][1][1:])


# -- runs ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace():
    return generate("hotcold", capacity_blocks=CAP, n_writes=5 * CAP, seed=5, hot_traffic=0.8, hot_fraction=0.1)


def simulate(trace, **params):
    pol = make_policy("shiro", **{**FAST, **params})
    sim = Simulator(pol, SimConfig(**SIM), CAP, trace=trace)
    return sim, sim.run(trace.block_writes)


@pytest.fixture(scope="module")
def learned(trace, tmp_path_factory):
    path = tmp_path_factory.mktemp("shiro") / "q.npy"
    return path, simulate(trace, save_qtable=str(path), epsilon=0.05, seed=3)


def test_learning_run_reports_and_uses_every_group(learned, trace):
    path, (sim, r) = learned
    assert r["victim"] == "adjusted_greedy" and r["n_groups"] == N_GROUPS and r["scheme"] == "shiro"
    assert r["user_writes"] == trace.block_writes.size
    g = r["groups"]
    # GC writes land in user groups only as counted spills (the free pool ran dry mid-victim)
    assert sum(g[k]["gc_writes"] for k in range(3)) <= r["gc_spills"] < 0.01 * r["gc_writes"]
    assert all(g[k]["user_writes"] == 0 for k in range(3, 8))
    assert g[0]["user_writes"] > 0 and g[1]["user_writes"] > 0 and g[2]["user_writes"] > 0
    assert r["mode"] == "model" and r["retrains"] >= 10
    # Algorithm 1 ran: the first window's knee, then logistic-regression probes
    hist = [h for h in r["training_history"] if "algorithm1" in h]
    assert hist[0]["algorithm1"]["rule"] == "inflection point"
    assert any(len(h["algorithm1"].get("candidates", [])) == 3 for h in hist)
    assert 1 <= r["hot_threshold"] <= 0.25 * CAP  # in-window lifetimes are shorter than a window
    assert r["user_accuracy"] > 0.7 and r["user_f1"] is not None
    assert r["accuracy_over_time"] and r["accuracy_over_time"][-1]["user_accuracy"] == pytest.approx(
        r["user_accuracy"], abs=0.05
    )
    c = r["agent_counters"]
    assert c["decisions"] == r["gc_writes"] and c["gc_ops"] == r["reclaimed_segments"]
    assert c["explorations"] > 0 and c["credited"] > 0.5 * c["decisions"]
    assert r["qtable_bytes"] == ql.N_STATES * ql.N_ACTIONS * 8 and r["qtable_int8_bytes"] == 450_000
    assert r["gru_step_ns_per_block"] > 0 and r["train_seconds_per_window"] > 0
    assert np.asarray(r["gc_destinations"]).sum() == r["gc_writes"]
    assert path.exists() and r["states_departing_from_rule"] > 0


def test_per_lba_rows_give_the_separate_arrays_results(trace):
    """Issue 18: Shiro's per-LBA prediction, previous GC action and the sample ring's pending slot
    in one 8-byte row place every block as the three separate arrays did. Golden numbers from
    0972bcc (separate arrays), with no model ever trained (exact on any machine: no torch), so
    the learning agent's seeded exploration and its previous-action state decide the GC writes."""
    sim, r = simulate(trace, min_samples=10**9, epsilon=0.05, seed=3)
    c = r["agent_counters"]
    assert r["mode"] == "fallback (no model yet)"
    assert (r["waf"], r["gc_writes"], c["explorations"], c["credited"]) == (3.2868408203125, 93669, 4581, 89196)
    assert np.asarray(r["gc_destinations"])[2, 3:].tolist() == [24158, 1989, 2283, 2878, 2579]
    p, ring = sim.pstate, sim.policy.ring
    assert p.rows.dtype.itemsize == 8 and np.shares_memory(ring.pending, p.rows)
    # the ring's per-LBA slots live in the rows: each sampled LBA's slot holds its pending sample
    lbas = np.flatnonzero(p.rows["ring_slot"] >= 0)
    slots = p.rows["ring_slot"][lbas]
    assert lbas.size > 0 and (ring.lba[slots] == lbas).all() and (ring.inv[slots] == PENDING).all()
    # the previous GC action is reset by each user write: relocated-since LBAs hold an action
    assert set(np.unique(p.rows["prev"])) <= {ql.PREV_NEVER, *range(ql.N_ACTIONS)}


def test_hierarchical_agent_equals_untrained_agent_and_age_classes(trace):
    sim_h, r_h = simulate(trace, agent="hierarchical")
    sim_q, r_q = simulate(trace, epsilon=0.0)  # learning, never exploring: the initial rule acts
    for name in ("l2p", "p2l", "seg_group", "group_gc", "group_user"):
        assert np.array_equal(getattr(sim_h.state, name), getattr(sim_q.state, name)), name
    assert r_h["waf"] == r_q["waf"] and r_h["gc_writes"] > 20 * SIM["segment_blocks"]
    assert r_q["agent_counters"]["credited"] > 0 and r_q["agent_counters"]["explorations"] == 0
    # PHFTL-style age classes: user segments -> GC level 1, level k -> k + 1, level 5 stays
    dest = np.asarray(r_h["gc_destinations"])
    expect = {0: G_GC1, 1: G_GC1, 2: G_GC1, 3: 4, 4: 5, 5: 6, 6: 7, 7: 7}
    for src in range(N_GROUPS):
        row = dest[src]
        assert row.sum() == row[expect[src]], (src, row.tolist())
    assert dest[3, 4] > 0 and dest[4, 5] > 0


def test_eq1_bookkeeping_is_exact_in_a_run(trace):
    """``eq1_segments=short_pages`` keeps each segment's valid blocks predicted short-living and
    ``eq1_clock=flash`` every block written, as a recount from the final mapping and the run's
    counters give them; each reading moves the run (Adjusted Greedy's choices change)."""
    base = simulate(trace, agent="hierarchical")[1]
    sim, r = simulate(trace, agent="hierarchical", eq1_segments="short_pages", eq1_clock="flash")
    s, p = sim.state, sim.pstate
    live = np.flatnonzero(s.p2l >= 0)
    short = p.rows["pred"][s.p2l[live]] == ql.PRED_SHORT
    recount = np.bincount(live[short] // SIM["segment_blocks"], minlength=p.seg_short.size)
    assert p.seg_short.sum() > 100 and np.array_equal(p.seg_short, recount)
    st = p.scalars[0]
    assert st["flash_clock"] == CAP + r["user_writes"] + r["gc_writes"]
    # the flash clock orders the seals as the user clock does (GC seals several segments at one
    # user time), and seal_clock - seg_seal_time is the GC writes before the seal (a GC pass
    # seals at user time now + 1)
    sealed = np.flatnonzero(s.seg_state == SEG_SEALED)
    order = sealed[np.lexsort((p.seal_clock[sealed], s.seg_seal_time[sealed]))]
    assert (np.diff(p.seal_clock[order]) >= 0).all()
    gc_before = p.seal_clock[sealed] - s.seg_seal_time[sealed]
    assert gc_before.min() >= -1 and 0 < gc_before.max() <= r["gc_writes"]
    for params in ({"eq1_segments": "short_pages"}, {"eq1_clock": "flash"}, {"eq1_segments": "all"}):
        assert simulate(trace, agent="hierarchical", **params)[1]["gc_writes"] != base["gc_writes"], params
    assert r["scheme"] == "shiro[hierarchical,eq1=short_pages,clock=flash]"


def test_determinism_same_seed_same_run(learned, trace):
    _, (sim1, r1) = learned
    sim2, r2 = simulate(trace, epsilon=0.05, seed=3)
    assert r1["waf"] == r2["waf"] and r1["agent_counters"] == r2["agent_counters"]
    assert np.array_equal(sim1.state.p2l, sim2.state.p2l)
    assert np.array_equal(sim1.pstate.agent.q, sim2.pstate.agent.q)
    assert r1["thresholds"] == r2["thresholds"] and r1["user_confusion"] == r2["user_confusion"]


def test_int8_table_runs_like_the_float_table(learned, trace):
    path, _ = learned
    sim_f, r_f = simulate(trace, deployed="float", qtable=str(path))
    sim_i, r_i = simulate(trace, deployed="int8", qtable=str(path))
    assert r_i["waf"] == r_f["waf"] and np.array_equal(sim_i.state.p2l, sim_f.state.p2l)
    assert r_i["qtable_bytes"] == 450_000 and r_i["scheme"] == "shiro[int8]"
    assert r_f["agent_counters"]["credited"] == 0  # frozen
    # the learned table is not the rule: some relocations leave the hierarchical path
    dest = np.asarray(r_f["gc_destinations"])
    rule = {0: 3, 1: 3, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 7}
    assert sum(dest[s].sum() - dest[s, rule[s]] for s in range(N_GROUPS)) > 0


def test_fast_tanh_against_numpy():
    """The GRU step's rational tanh (and the sigmoid built on it) against float64 numpy over
    [-12, 12], the clamped tails included: within 5e-7 (a few float32 ulps), odd, saturating at +-1."""
    import numba as nb

    @nb.njit
    def apply(xs, out):
        for i in range(xs.shape[0]):
            out[i] = fast_tanh(xs[i])

    xs = np.linspace(-12, 12, 400_001, dtype=np.float32)
    out = np.empty_like(xs)
    apply(xs, out)
    ref = np.tanh(xs.astype(np.float64))
    assert np.abs(out - ref).max() < 5e-7
    assert np.array_equal(out[::-1], -out) and abs(out[-1]) <= 1.0
    sig = 0.5 + 0.5 * out[::2]  # sigmoid(2x) = (1 + tanh(x)) / 2
    assert np.abs(sig - 1 / (1 + np.exp(-2 * xs[::2].astype(np.float64)))).max() < 2e-7


def test_cached_state_step_equals_torch_window_forward(learned):
    import torch

    _, (sim, _) = learned
    pol = sim.policy
    data = pol.ring.collect(int(sim.state.ctr[0]), long_bound=1)
    W = pol.ring_windows[data["slot"][-64:]]  # 64 windows of 20 writes (zero-padded in front)
    X = encode_windows(W, pol.digits)
    with torch.no_grad():
        ref = pol.model.net(torch.from_numpy(X)).numpy().argmax(axis=1)
    # per window: the state after its first 19 rows from zero, then one step on the last
    h = np.zeros((len(W), pol.h_all.shape[1]), np.float32)
    gru_init_states(np.ascontiguousarray(W[:, :-1]), pol.digits, h, *pol.weights[:4])
    out = np.empty(len(W), np.int8)
    gru_infer(np.arange(len(W), dtype=np.int64), W, pol.digits, h, *pol.weights, float(2**40), out)
    known = W[:, -1, 0] < 2**40
    assert known.sum() > 10
    assert np.array_equal(out[known], ref[known])
    assert np.all(out[~known] == ql.PRED_UNSEEN)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"agent": "greedy"}, "agent must be one of"),
        ({"deployed": "int4"}, "deployed must be null, float or int8"),
        ({"deployed": "int8"}, "needs params.qtable"),
        ({"deployed": "int8", "agent": "hierarchical"}, "needs agent=qlearning"),
        ({"qtable": np.zeros((3, 5))}, "qtable must have shape"),
        ({"qtable": "/nonexistent/q.npy"}, "does not exist"),
        ({"digits": [1, 2]}, "digits needs one entry"),
        ({"window": 0}, "window is a share"),
        ({"background_training": "yes"}, "background_training must be true or false"),
        ({"features": ["req_blocks", "latest_inv"], "digits": [2, 2]}, "must start with latest_inv"),
        ({"hot_threshold": -3}, "hot_threshold must be null"),
        ({"epsilon": 2.0}, "epsilon"),
        ({"horizon": 0}, "horizon"),
        ({"step": -1}, "step"),
        ({"victim": "nope"}, r"policy=shiro cannot run with policy.victim='nope'"),
        ({"bogus": 1}, r"unknown parameter\(s\) \['bogus'\]"),
        ({"min_window_samples": 0}, "min_window_samples must be >= 1"),
        ({"sample_every": 0}, "sample_every must be >= 1"),
        ({"lifetime_window": "all"}, "lifetime_window must be one of within, any"),
        ({"feature_counts": "windowed"}, "feature_counts must be one of cumulative, recent"),
        ({"eq1_segments": "short"}, "eq1_segments must be one of short_group, short_pages, all"),
        ({"eq1_clock": "wall"}, "eq1_clock must be one of user, flash"),
        ({"agent": "credit", "credit_state": "lba"}, "credit_state must be one of table1, counts, counts_read"),
        (
            {"agent": "frequency", "credit_state": "counts"},
            "credit_state=counts is agent=credit's state; set agent=credit",
        ),
        ({"agent": "credit", "credit_start": "frequency"}, "credit_start=frequency starts the count state's table"),
        ({"agent": "credit", "credit_start": "oracle", "credit_state": "counts"}, "credit_start must be one of"),
        ({"agent": "sepbit_age", "credit_reward": "segment"}, "credit_reward=segment is agent=credit's"),
        ({"agent": "credit", "credit_reward": "copies"}, "credit_reward must be one of block, segment, hindsight"),
        (
            {"agent": "credit", "credit_reward": "hindsight", "credit_quantile": 1.5},
            "credit_quantile must be a number in",
        ),
        (
            {"agent": "credit", "credit_quantile": 0.7},
            r"credit_quantile=0.7 weighs the hindsight credit's levels; set credit_reward=hindsight or drop",
        ),
        (
            {"agent": "credit", "credit_state": "counts", "deployed": "float", "qtable": np.zeros((90000, 5))},
            r"qtable must have shape \(4800, 5\) for credit_state=counts, got \(90000, 5\)",
        ),
    ],
)
def test_bad_parameters_fail_clearly(params, match):
    with pytest.raises(ValueError, match=match):
        make_policy("shiro", **params)
    with pytest.raises(ValueError, match="exactly 8 groups"):
        make_policy("shiro", n_groups=7)


def test_ablation_variants_keep_gc_writes_in_one_group(trace):
    for name in ("sepbit_ng", "phftl_ng"):
        pol = make_policy(name) if name == "sepbit_ng" else make_policy(name, retrain_every=4096, min_samples=200)
        sim = Simulator(pol, SimConfig(**SIM), CAP, trace=trace)
        r = sim.run(trace.block_writes)
        gc = [g["gc_writes"] for g in r["groups"]]
        first = 2
        assert gc[first] == r["gc_writes"] > 0, (name, gc)
        assert r["scheme"].endswith("-NG")


def test_sequence_stream_uses_the_engines_compacted_lbas():
    """A file trace whose written LBAs exceed the capacity (its working set) runs on them
    compacted in order; the per-LBA windows (PHFTL, Shiro) must index the same numbers (they
    wrote past the end of their rows before: a crash on the Tencent samples)."""
    from dogi_ml.pipeline.simulate import simulation_writes
    from dogi_ml.policies._sequence import SequenceStream

    lba = np.array([900, 30, 900, 7000, 30, 5], np.int64)
    tr = Trace(ts_us=np.arange(6), lba=lba, nblocks=np.ones(6), op=np.full(6, OP_WRITE), volume=np.zeros(6))
    writes, cap = simulation_writes(tr, 4)
    stream = SequenceStream(tr, cap, ["latest_inv", "req_blocks"], 3, 8, log=False)
    assert np.array_equal(stream.lbas, writes) and stream.lbas.max() == 3 == cap - 1
    w = stream.next(6)
    assert w[2, -2, 0] == 2**40 and w[2, -1, 0] == 2  # LBA 900's window: its first write, then 2 later


# -- the compact per-LBA rows (DigitRowStream) -------------------------------------------------


def _random_gru(n_in, hidden=8, seed=0):
    rng = np.random.default_rng(seed)
    f = np.float32
    return (rng.normal(0, 0.5, (n_in, 3 * hidden)).astype(f), rng.normal(0, 0.5, (hidden, 3 * hidden)).astype(f),
            rng.normal(0, 0.1, 3 * hidden).astype(f), rng.normal(0, 0.1, 3 * hidden).astype(f))  # fmt: skip


@pytest.mark.parametrize("history", [1, 4, 20])
def test_digit_row_stream_equals_the_window_stream(trace, history):
    """Shiro's compact rows against :class:`SequenceStream`'s float32 windows, on the same writes
    in chunks of several sizes: each write's own row is the raw row; a sampled write's window is
    the raw window with its earlier rows clipped as the digits clip them (the same inputs), also
    where the LBA's ring has wrapped; the first states built from the rings equal
    :func:`gru_init_states` over the float rows bit for bit. A feature of 7 digits holds values
    above 2^24 (stored in 32 bits from their float32 value) and a 0-digit one a fractional value."""
    from dogi_ml.policies._gru import gru_padding_states
    from dogi_ml.policies._sequence import SequenceStream
    from dogi_ml.policies._shiro_rows import KIND_FLOAT, KIND_I8, KIND_U16, KIND_U32, DigitRowStream

    names = ["latest_inv", "req_blocks", "sequential", "chunk_writes", "rw_ratio_milli", "chunk_reads"]
    digits = [6, 3, 0, 1, 7, 0]
    n = trace.block_writes.size
    rng = np.random.default_rng(1)
    over = {
        "sequential": rng.random(n).astype(np.float32),  # 0 digits, fractional: kept as float32
        "rw_ratio_milli": rng.integers(0, 2**27, n).astype(np.float32),  # 7 digits, above 2^24
        "chunk_reads": rng.integers(-3, 100, n).astype(np.int8),  # 0 digits, int8: kept in 8 bits
    }
    ref = SequenceStream(trace, CAP, names, history, 5000, log=False, overrides=over)
    rows = DigitRowStream(trace, CAP, names, history, 5000, digits, 3, overrides=over)
    assert rows.rings.kind.tolist() == [KIND_U32, KIND_U16, KIND_FLOAT, KIND_U16, KIND_U32, KIND_I8]
    # one block per LBA: its row count, then its rows packed (4 + 2 + 2 + 4 + 1 bytes; the float
    # feature apart), padded to whole int32
    R = history - 1
    assert rows.rings.f32.nbytes == CAP * R * 4 and rows.rings.data.nbytes == CAP * (-(-(4 + R * 13) // 4) * 4)
    assert rows.rings.f32.nbytes + rows.rings.data.nbytes <= ref.hist.nbytes + 4 * CAP  # + the counts
    assert np.shares_memory(rows.count, rows.rings.data)
    d = np.asarray(digits)
    top = np.array([float(16**k - 1) if k else np.inf for k in digits], np.float32)
    done, checked, wrapped = 0, 0, 0
    for m in (1, 7, 4096, 5000, 333, 5000):
        m = min(m, n - done)
        first = (done * 7 + 1) % 3  # a phase per chunk
        ks = np.arange(first, m, 3)
        rows.sample(first, len(ks))
        own = rows.next(m)
        win = ref.next(m)
        assert own.shape == (m, 1, len(names)) and np.array_equal(own[:, 0], win[:, -1])
        got = rows.sampled_windows()
        assert len(got) == len(ks)
        if len(ks):
            want = win[ks]
            assert np.array_equal(got[:, -1], want[:, -1])  # the write's own row: raw
            clipped = np.where(d > 0, np.clip(np.floor(want[:, :-1]), 0, top), want[:, :-1])
            assert np.array_equal(got[:, :-1], clipped)
            assert np.array_equal(encode_windows(got, d), encode_windows(want, d))
            checked += len(ks)
            wrapped += int(np.sum(rows.count[ref.lbas[done : done + m][ks]] > history))
        done += m
    assert checked > 1000 and (history == 1 or wrapped > 50)
    w = _random_gru(n_inputs(digits))
    h_ref = np.empty((CAP, 8), np.float32)
    gru_init_states(ref.hist, d, h_ref, *w)
    h = np.full((CAP, 8), np.nan, np.float32)
    padding = gru_padding_states(history - 1, w[0].shape[0], *w)
    rows.init_states(0, CAP // 3, padding, h, *w)
    rows.init_states(CAP // 3, CAP, padding, h, *w)
    assert np.array_equal(h, h_ref)


def test_gru_infer_split_by_lba_equals_one_call():
    """Two disjoint LBA shares of one chunk (as the two threads take them) give the same classes
    and states as one call over all its writes, repeated LBAs included."""
    rng = np.random.default_rng(2)
    digits = np.array([6, 3, 0, 4, 4, 4])
    n, cap = 3000, 256
    lbas = rng.integers(0, cap, n).astype(np.int64)
    X = rng.integers(0, 70_000, (n, 1, 6)).astype(np.float32)
    X[::7, 0, 0] = 2**40  # first writes: unseen
    w = _random_gru(n_inputs(digits))
    rest = (rng.normal(0, 1, (2, 8)).astype(np.float32), rng.normal(0, 0.1, 2).astype(np.float32))
    h1 = rng.normal(0, 0.3, (cap, 8)).astype(np.float32)
    h2 = h1.copy()
    out1 = np.full(n, -1, np.int8)
    out2 = np.full(n, -1, np.int8)
    gru_infer(lbas, X, digits, h1, *w, *rest, float(2**40), out1)
    gru_infer(lbas, X, digits, h2, *w, *rest, float(2**40), out2, 0, 23, 64)
    assert np.all(out2[(lbas & 63) >= 23] == -1)  # the other share's writes untouched
    gru_infer(lbas, X, digits, h2, *w, *rest, float(2**40), out2, 23, 64, 64)
    assert np.array_equal(out1, out2) and np.array_equal(h1, h2)
    assert set(np.unique(out1)) == {0, 1, 2}


def test_background_training_deploys_each_epoch_one_window_later(trace):
    """With the threshold fixed and the agent's rule frozen, the training data of every window
    comes from the trace alone; so the background run trains the same sequence of models as the
    one-thread run and serves each one window later (the first, trained to convergence, at once)."""
    deployed = {}

    def run(background):
        pol = make_policy("shiro", **{**FAST, "hot_threshold": 500, "agent": "hierarchical",
                                      "background_training": background})  # fmt: skip
        seen = deployed.setdefault(background, [])
        before = pol.before_chunk

        def spy(sim, start, n_writes):
            before(sim, start, n_writes)
            if pol.model is not None:
                seen.append(tuple(np.asarray(x).tobytes() for x in pol.weights))

        pol.before_chunk = spy
        sim = Simulator(pol, SimConfig(**SIM), CAP, trace=trace)
        return sim.run(trace.block_writes)

    r_sync, r_bg = run(False), run(True)
    sync, bg = deployed[False], deployed[True]
    assert len(sync) == len(bg) > 8
    models = list(dict.fromkeys(sync))  # distinct models in order of deployment
    assert len(models) > 8
    assert bg[0] == sync[0] and bg[1] == sync[0]  # the first model: at once; then one window late
    assert bg[2:] == sync[1:-1]
    assert r_bg["background_train_seconds"] > 0 and r_sync["background_train_seconds"] == 0
    assert 0 <= r_bg["training_wait_seconds"] <= r_bg["background_train_seconds"]
    assert any("background" in h.get("action", "") for h in r_bg["training_history"])


READING_ROWS = sorted(p.stem for p in (Path(CONF_DIR) / "shiro_reading").glob("*.yaml"))
COST_BENEFIT_ROWS = ("sepbit", "phftl", "cb", "cb_age")


def reading_policy(row: str):
    """The policy of a readings preset's row (conf/shiro_reading), merged over the preset's."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from dogi_ml.policies import policy_params

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose("simulate", ["+workload=zipf", "+experiment=shiro_readings", f"+shiro_reading={row}"])
    pc = OmegaConf.to_container(cfg.policy)
    return make_policy(pc["name"], pc["n_groups"], victim=pc["victim"], **policy_params(cfg.policy))


@pytest.mark.parametrize("row", READING_ROWS)
def test_every_reading_row_instantiates_with_its_rule(row):
    p = reading_policy(row)
    rule = "greedy" if row.endswith("_greedy") else "cost_benefit" if row in COST_BENEFIT_ROWS else "adjusted_greedy"
    assert p.victim == rule
    assert p.name == ("shiro" if row not in ("sepbit", "sepbit_greedy", "phftl", "phftl_greedy") else row.split("_")[0])


def test_reading_rows_are_told_apart_by_their_labels():
    """Each Shiro row of the readings presets has its own label (the report's row), naming its
    readings off the text's defaults: the text's own row is plain ``shiro``."""
    labels = {row: reading_policy(row).label() for row in READING_ROWS if reading_policy(row).name == "shiro"}
    assert labels["shiro"] == "shiro" and labels["life_any"] == "shiro[life=any]"
    assert labels["readings_all"] == "shiro[life=any,counts=recent,eq1=short_pages,clock=flash]"
    assert labels["cb_age"] == "shiro[sepbit_age,cost_benefit]"
    assert len(set(labels.values())) == len(labels) >= 9


def test_count_state_equals_its_plain_python_twin():
    """credit_state=counts' state index and agent=frequency's level against tests/naive.py, on
    random counts, ages and thresholds (bin edges included), and the starting tables' rules."""
    from naive import shiro_count_state, shiro_frequency_level

    rng = np.random.default_rng(3)
    cases = [(0, 100, 5, 10, 3), (1, 10, 10, 10, 0), (4, 16, 1, 1, 7), (3, 10**9, 10**7, 57, 2)]
    for _ in range(3000):
        t = int(rng.integers(1, 5000))
        w = int(rng.integers(0, 50))
        counted = int(rng.integers(w, w * 10 ** int(rng.integers(1, 6)) + 2))
        cases.append(
            (w, counted, int(rng.integers(0, 10 ** int(rng.integers(1, 8)))), t, int(rng.integers(0, N_GROUPS)))
        )
    for w, counted, age, t, seg in cases:
        assert count_state(w, counted, age, t, seg) == shiro_count_state(w, counted, age, t, seg), (w, counted, age, t)
    assert max(shiro_count_state(*c) for c in cases) < N_COUNT_STATES
    # the frequency start's rule: the state's count bin mapped to agent=frequency's level (at the
    # bin's lower edge; bins are half octaves, the bands whole powers of 4)
    greedy = count_state_table(0.5, "frequency").argmax(axis=1)
    for w, counted, age, t, seg in cases:
        assert greedy[count_state(w, counted, age, t, seg)] == shiro_frequency_level(w, counted, t)
    table = count_state_table(0.5)
    assert np.array_equal(table.argmax(axis=1), [ql.hierarchical_action(s % N_GROUPS) for s in range(N_COUNT_STATES)])
    assert set(np.unique(table)) == {0.0, -2.0}


def test_decayed_counts_are_the_sum_of_their_writes_weights(trace):
    """count_halflife=H: each LBA's count weighs a write k user writes old by 2^(-k / (H capacities)),
    kept lazily (decayed at the LBA's next write); equal to the sum over its writes written out
    (tests/naive.py)."""
    from naive import decayed_write_counts

    sim, r = simulate(trace, agent="frequency", count_halflife=0.5)
    st = sim.pstate
    decay = record(st.scalars).count_decay
    assert decay == pytest.approx(np.log(2) / (0.5 * CAP), rel=1e-15)
    counts, last = decayed_write_counts(trace.block_writes, decay)
    lbas = np.fromiter(counts, np.int64)
    assert np.allclose(st.lba_decayed[lbas], [counts[x] for x in lbas], rtol=1e-12, atol=0)
    assert np.array_equal(st.lba_counted_at[lbas], [last[x] for x in lbas])
    assert sim.policy.label() == "shiro[frequency,halflife=0.5]"
    _, r_none = simulate(trace, agent="frequency")
    assert r_none["gc_writes"] != r["gc_writes"]
    with pytest.raises(ValueError, match="count_halflife=0.5 decays the write counts of agent=frequency and"):
        make_policy("shiro", count_halflife=0.5)
    with pytest.raises(ValueError, match="count_halflife must be > 0"):
        make_policy("shiro", agent="frequency", count_halflife=0)


def test_frequency_agent_and_the_credit_agent_started_from_it(trace):
    """agent=frequency counts every user write after the prefill and relocates by the band of the
    LBA's expected lifetime; the credit agent on the count state, started from that rule, relocates
    as it does block for block without exploration, and departs from it with exploration."""
    sim_f, r_f = simulate(trace, agent="frequency")
    st = sim_f.pstate
    assert st.lba_writes.sum() == record(st.scalars).freq_clock == trace.block_writes.size
    assert sim_f.policy.label() == "shiro[frequency]" and r_f["gc_writes"] > 20 * SIM["segment_blocks"]
    sim_c, r_c = simulate(trace, agent="credit", credit_state="counts", credit_start="frequency", epsilon=0.0)
    for name in ("l2p", "p2l", "seg_group"):
        assert np.array_equal(getattr(sim_f.state, name), getattr(sim_c.state, name)), name
    assert r_c["waf"] == r_f["waf"] and r_c["agent_counters"]["credited"] > 0
    assert sim_c.policy.label() == "shiro[credit,state=counts,start=frequency,epsilon=0.0]"
    _, r_e = simulate(trace, agent="credit", credit_state="counts", credit_start="frequency", credit_reward="segment")
    assert r_e["agent_counters"]["explorations"] > 0 and r_e["gc_destinations"] != r_f["gc_destinations"]
    # golden (measured with this change, the module's small hot/cold trace)
    assert r_f["waf"] == pytest.approx(2.48220, abs=5e-5)


def test_hindsight_credit_agent_learns_from_every_death(trace):
    """credit_reward=hindsight: each decision is credited at its block's death (or once it has
    outlived the last band), every level at once, so the table moves away from the rule it started
    at without any exploration; the label names what differs from the defaults."""
    sim, r = simulate(trace, agent="credit", credit_state="counts", credit_reward="hindsight", epsilon=0.0, alpha=0.001)
    c = r["agent_counters"]
    assert c["explorations"] == 0 and c["copied"] == 0 and c["died"] > 0
    assert c["died"] + c["censored"] + c["pending"] == c["opened"]
    q = sim.pstate.credit
    visited = q.visits.sum(axis=1) > 0
    assert (q.visits[visited] == q.visits[visited][:, :1]).all()  # every level of a state credited together
    start = count_state_table(float(sim.policy.cfg["credit_gamma"]))
    assert (q.q[visited].argmax(axis=1) != start[visited].argmax(axis=1)).any()
    assert sim.policy.label() == "shiro[credit,state=counts,reward=hindsight,alpha=0.001,epsilon=0.0]"


# -- credit_state=counts_read: the count state and a bit, read since the user write ----------------
@pytest.fixture(scope="module")
def ycsb_trace():
    return generate("ycsb_a", capacity_blocks=CAP, n_writes=5 * CAP, seed=2)


# no classifier (its first training never comes): the user groups do not depend on the reads
# through Shiro's read features, and the runs are quick
READ_LEARN = dict(
    agent="credit", credit_state="counts_read", credit_reward="hindsight", epsilon=0.0, alpha=0.001, min_samples=10**9
)


def test_first_read_clocks_equal_their_plain_python_twin(ycsb_trace):
    """Per user write, the clock of the first read of its LBA before its next write, against
    tests/naive.py: on a hand-made trace (multi-block requests, trims, a read beyond the capacity,
    reads before any trace write, a read after the last write) with and without a prefill, and on a
    small ycsb_a trace (its first 3,000 requests)."""
    from naive import first_read_clocks as naive_clocks

    R, W, T = OP_READ, OP_WRITE, 2
    reqs = [(3, 2, R), (0, 4, W), (2, 1, R), (2, 2, R), (1, 1, T), (1, 1, R), (5, 3, W), (6, 4, R), (9, 1, R),
            (0, 1, W), (0, 1, R), (5, 1, R), (7, 1, W)]  # fmt: skip
    hand = Trace(
        ts_us=np.arange(len(reqs)), lba=[r[0] for r in reqs], nblocks=[r[1] for r in reqs], op=[r[2] for r in reqs],
        volume=np.zeros(len(reqs)),
    )  # fmt: skip
    cap = 8
    for prefill in (cap, 0):
        got = first_read_clocks(hand, prefill, cap)
        want = naive_clocks(reqs, cap, prefill=prefill > 0, never=int(got.max()) if (got > 10**9).any() else 2**62)
        assert got.tolist() == want, prefill
    # by hand, with the prefill (clocks 0-7): LBAs 3 and 4's prefill writes are read before the trace's
    # first write (clock 8); its write of LBA 2 (clock 10) is read before the next write (clock 12);
    # LBA 0's prefill write is overwritten unread
    got = first_read_clocks(hand, cap, cap)
    assert got[3] == got[4] == 8 and got[10] == 12 and got[0] == NEVER_CLOCK
    t = ycsb_trace
    n = 3000
    sub = Trace(t.ts_us[:n], t.lba[:n], t.nblocks[:n], t.op[:n], t.volume[:n])
    reqs = list(zip(sub.lba.tolist(), sub.nblocks.tolist(), sub.op.tolist()))
    got = first_read_clocks(sub, CAP, CAP)
    assert (got < NEVER_CLOCK).sum() > 100  # reads follow writes on ycsb
    assert got.tolist() == naive_clocks(reqs, CAP, never=NEVER_CLOCK)
    with pytest.raises(ValueError, match="a prefill of 5 blocks"):
        first_read_clocks(sub, 5, CAP)


def test_first_read_clocks_on_a_trace_whose_lbas_the_run_compacts(shared_traces, tmp_path):
    """A file trace's written blocks are compacted to 0 .. wss - 1 when they do not fit the capacity
    (pipeline.simulate.simulation_writes): the clocks are computed on those LBAs, the reads mapped
    alike (a read of a block never written is ignored). A reader's dense address space also holds
    the read-only blocks, so the trace's own block numbers run past the capacity: the kernel indexed
    its per-LBA array with them and corrupted the heap (an abort, no error message).
    Against the plain-Python twin on the mapped requests, and a whole run of the sample."""
    from naive import first_read_clocks as naive_clocks

    from dogi_ml.pipeline.simulate import simulation_writes
    from dogi_ml.traces.readers import read_trace

    full = read_trace(shared_traces / "tencent_cut_211.csv", "flashnet_tencent", progress=False)
    n = 4000
    t = Trace(full.ts_us[:n], full.lba[:n], full.nblocks[:n], full.op[:n], full.volume[:n])
    writes, cap = simulation_writes(t, None)
    assert int(t.block_writes.max()) >= cap > int(writes.max())  # compacted
    written = np.unique(t.block_writes)
    dense = {x: i for i, x in enumerate(written.tolist())}
    mapped = [
        (dense[x], 1, op)
        for x0, k, op in zip(t.lba.tolist(), t.nblocks.tolist(), t.op.tolist())
        for x in range(x0, x0 + k)
        if op in (OP_READ, OP_WRITE) and x in dense
    ]
    got = first_read_clocks(t, cap, cap)
    assert (got < NEVER_CLOCK).sum() > 50
    assert got.tolist() == naive_clocks(mapped, cap, never=NEVER_CLOCK)
    out = tmp_path / "run.json"
    run_cli(
        ["simulate", "+workload=trace_tencent_211", f"workload.path={shared_traces / 'tencent_cut_211.csv'}",
         "policy=shiro", *(f"policy.params.{k}={v}" for k, v in READ_LEARN.items()), "sim.segment_blocks=32",
         "sim.op_ratio=0.15", "mlflow=false", "plot=false", "progress=false", f"output={out}"],
        tmp_path,
    )  # fmt: skip
    r = json.loads(out.read_text())
    assert r["read_decisions"] > 0 and r["user_writes"] == full.block_writes.size


def test_the_read_bit_is_causal_and_counts(ycsb_trace):
    """The counts_read agent's decisions up to a user write depend on the reads before it only:
    removing every read after write M leaves the run fed M writes unchanged (mapping, counters, Q
    table), while removing the reads before it changes it; the bit is set in some decisions, and
    with no reads at all the run is credit_state=counts' (its table doubled)."""
    t = ycsb_trace
    writes = t.block_writes
    m = len(writes) // 2
    req_of_m = int(t.block_write_request[m])  # the request of write M, the first not fed

    def without_reads(keep):
        sel = (t.op != OP_READ) | keep
        return Trace(t.ts_us[sel], t.lba[sel], t.nblocks[sel], t.op[sel], t.volume[sel])

    def run_to_m(trace):
        sim = Simulator(make_policy("shiro", **{**FAST, **READ_LEARN}), SimConfig(**SIM), CAP, trace=trace)
        sim.prefill()
        sim.feed(writes[:m])
        return sim, sim.result()

    idx = np.arange(t.n_requests)
    full, r_full = run_to_m(t)
    cut, r_cut = run_to_m(without_reads(idx < req_of_m))
    early, r_early = run_to_m(without_reads(idx >= req_of_m))
    assert r_full["read_decisions"] > 0 and r_full["gc_writes"] > 10 * SIM["segment_blocks"]
    for name in ("l2p", "p2l", "seg_group"):
        assert np.array_equal(getattr(full.state, name), getattr(cut.state, name)), name
    assert np.array_equal(full.pstate.credit.q, cut.pstate.credit.q)
    assert r_cut["waf"] == r_full["waf"] and r_cut["read_decisions"] == r_full["read_decisions"]
    assert (
        r_early["read_decisions"] < r_full["read_decisions"] and r_early["gc_destinations"] != r_full["gc_destinations"]
    )
    # no reads: the bit is never set, and the run is the count state's, level for level
    no_reads = without_reads(np.zeros(t.n_requests, bool))
    none_sim, r_none = run_to_m(no_reads)
    counts = Simulator(
        make_policy("shiro", **{**FAST, **READ_LEARN, "credit_state": "counts"}), SimConfig(**SIM), CAP, trace=no_reads
    )
    counts.prefill()
    counts.feed(writes[:m])
    assert r_none["read_decisions"] == 0 and r_none["waf"] == counts.result()["waf"]
    assert np.array_equal(none_sim.pstate.credit.q[:N_COUNT_STATES], counts.pstate.credit.q)
    assert none_sim.policy.label() == "shiro[credit,state=counts_read,reward=hindsight,alpha=0.001,epsilon=0.0]"


def test_counts_read_table_deploys_frozen_and_as_int8(ycsb_trace, tmp_path):
    """The counts_read agent's table (2 x 4,800 states) saves with its state, runs frozen as float and
    int8 alike, and is refused when read with credit_state=counts, naming the shape."""
    path = tmp_path / "read.npy"
    _, r = simulate(ycsb_trace, **READ_LEARN, save_qtable=str(path))
    assert np.load(path).shape == (2 * N_COUNT_STATES, 5) and r["states_departing_from_rule"] > 0
    assert json.loads(path.with_suffix(".json").read_text())["credit_state"] == "counts_read"
    frozen = dict(agent="credit", credit_state="counts_read", qtable=str(path), min_samples=10**9)
    sim_f, r_f = simulate(ycsb_trace, **frozen, deployed="float")
    sim_i, r_i = simulate(ycsb_trace, **frozen, deployed="int8")
    assert r_i["waf"] == r_f["waf"] and np.array_equal(sim_i.state.p2l, sim_f.state.p2l)
    assert r_f["read_decisions"] > 0 and r_i["qtable_bytes"] == 2 * N_COUNT_STATES * 5
    with pytest.raises(ValueError, match="credit_state=counts_read"):
        make_policy("shiro", agent="credit", credit_state="counts", qtable=str(path), deployed="float")


def test_count_state_table_deploys_frozen_and_as_int8(trace, tmp_path):
    """The hindsight agent on the count state saves its table with the state it indexes
    (PATH.json: credit_state, count_halflife); frozen, as float and as int8, it relocates alike
    (the same WAF and the same final mapping), credits nothing, and a run that would read the
    table with another half-life (other states) is refused, naming the key."""
    path = tmp_path / "counts.npy"
    learn = dict(agent="credit", credit_state="counts", credit_reward="hindsight", epsilon=0.0, alpha=0.001)
    _, r = simulate(trace, **learn, count_halflife=0.5, save_qtable=str(path))
    assert r["qtable_path"] == str(path) and np.load(path).shape == (N_COUNT_STATES, 5)
    assert json.loads(path.with_suffix(".json").read_text())["count_halflife"] == 0.5
    frozen = dict(agent="credit", credit_state="counts", count_halflife=0.5, qtable=str(path))
    sim_f, r_f = simulate(trace, **frozen, deployed="float")
    sim_i, r_i = simulate(trace, **frozen, deployed="int8")
    assert r_i["waf"] == r_f["waf"] and np.array_equal(sim_i.state.p2l, sim_f.state.p2l)
    assert r_f["agent_counters"]["opened"] == 0 and r_i["qtable_bytes"] == N_COUNT_STATES * 5
    assert r_f["states_departing_from_rule"] > 0  # a learned table, not the starting rule
    with pytest.raises(ValueError, match=r"learned with count_halflife=0.5 .* set policy.params.count_halflife=0.5"):
        make_policy("shiro", **{**frozen, "count_halflife": 0.25}, deployed="float")
