"""rl/: the tabular Q-learning agent (Shiro's GC relocation) on scripted toys and in the simulator.

The simulator runs use a test-only policy (:class:`RelocationProbe`): SepBIT-like user placement
(3 user groups: short / long by a fixed lifespan threshold, unseen for first writes) and 5 GC
levels chosen by age-based relocation, by the agent, or by a deployed integer table.
"""

from __future__ import annotations

import ctypes
import subprocess
from typing import NamedTuple

import numba as nb
import numpy as np
import pytest
from helpers import hotcold_writes

from dogi_ml.export.c_common import COMPILE_FLAGS
from dogi_ml.export.c_header import emit_header
from dogi_ml.export.integer import ExportError
from dogi_ml.export.qtable import emit_qtable
from dogi_ml.rl import qlearning as ql
from dogi_ml.rl.export import argmax_agreement, quantize_table
from dogi_ml.rl.qlearning import (
    N_ACTIONS,
    N_STATES,
    PRED_LONG,
    PRED_SHORT,
    PRED_UNSEEN,
    PREV_NEVER,
    SEG_GC_FIRST,
    QTable,
    choose_action,
    encode_state,
    greedy_action,
    new_qtable,
    on_gc,
    record_decision,
)
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext
from dogi_ml.sim.state import P_SEG_BLOCKS

CAP, SEG = 8192, 64
THRESHOLD = 2048  # user lifespan below which a rewrite goes to the "short" group
MODE_AGE, MODE_AGENT, MODE_DEPLOYED = 0, 1, 2
LOG_SIZE = 1 << 19
PROBE_SCALARS = np.dtype(
    [("mode", np.int64), ("threshold", np.int64), ("victim_valid", np.int64), ("n_log", np.int64), ("n_gc", np.int64)]
)


# -- the test-only placement policy ------------------------------------------------------------
class ProbeState(NamedTuple):
    scalars: np.ndarray
    pred: np.ndarray  # int8[capacity]: the "classifier's" prediction at the last user write
    prev: np.ndarray  # int8[capacity]: the block's previous GC action, PREV_NEVER if none
    agent: QTable
    qint: np.ndarray  # the integer table of MODE_DEPLOYED
    log_epoch: np.ndarray  # per-decision record, for the brute-force check only
    log_state: np.ndarray
    log_action: np.ndarray
    log_invalid: np.ndarray  # per GC operation: the victim's invalid blocks


@nb.njit(cache=True)
def probe_user(s, p, lba, now):
    last = s.lba_time[lba]
    if last < 0:
        kind = PRED_UNSEEN
    elif now - last < p.scalars[0].threshold:
        kind = PRED_SHORT
    else:
        kind = PRED_LONG
    p.pred[lba] = kind
    p.prev[lba] = PREV_NEVER
    return kind  # user groups 0..2 are segment types 0..2


@nb.njit(cache=True)
def probe_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    seg_type = s.seg_group[victim]  # groups 3..7 are GC levels 1..5
    if st.mode == MODE_AGE:
        a = 0 if seg_type < SEG_GC_FIRST else min(seg_type - SEG_GC_FIRST + 1, N_ACTIONS - 1)
    else:
        state = encode_state(
            now - s.lba_time[lba], st.victim_valid, s.prm[P_SEG_BLOCKS], seg_type, p.pred[lba], p.prev[lba]
        )
        if st.mode == MODE_DEPLOYED:
            a = greedy_action(p.qint, state)
        else:
            a = choose_action(p.agent, state)
            record_decision(p.agent, state, a)
            n = st.n_log
            if n < p.log_state.shape[0]:
                p.log_epoch[n] = p.agent.scalars[0].gc_ops - 1
                p.log_state[n] = state
                p.log_action[n] = a
                st.n_log = n + 1
        if a < 0:
            return -1
    p.prev[lba] = a
    return SEG_GC_FIRST + a


@nb.njit(cache=True)
def probe_reclaim(s, p, victim, now):
    st = p.scalars[0]
    st.victim_valid = s.seg_valid[victim]
    invalid = s.prm[P_SEG_BLOCKS] - s.seg_valid[victim]
    if st.mode == MODE_AGENT:
        on_gc(p.agent, invalid)
    if st.n_gc < p.log_invalid.shape[0]:
        p.log_invalid[st.n_gc] = invalid
    st.n_gc += 1


class RelocationProbe(PlacementPolicy):
    name = "rl_probe"
    place_user = probe_user
    place_gc = probe_gc
    on_reclaim = probe_reclaim

    def __init__(self, mode: int, agent: QTable | None = None, qint=None):
        super().__init__(3 + N_ACTIONS)
        self.mode, self.agent, self.qint = mode, agent, qint

    def bind(self, ctx: SimContext) -> ProbeState:
        sc = np.zeros(1, PROBE_SCALARS)
        sc[0]["mode"], sc[0]["threshold"] = self.mode, THRESHOLD
        agent = self.agent if self.agent is not None else new_qtable(ctx.segment_blocks, learn=False, epsilon=0.0)
        qint = self.qint if self.qint is not None else np.zeros((N_STATES, N_ACTIONS), np.int8)
        return ProbeState(
            scalars=sc,
            pred=np.full(ctx.capacity, PRED_UNSEEN, np.int8),
            prev=np.full(ctx.capacity, PREV_NEVER, np.int8),
            agent=agent,
            qint=qint,
            log_epoch=np.zeros(LOG_SIZE, np.int64),
            log_state=np.zeros(LOG_SIZE, np.int64),
            log_action=np.zeros(LOG_SIZE, np.int64),
            log_invalid=np.zeros(LOG_SIZE, np.int64),
        )


@pytest.fixture(scope="module")
def writes():
    return hotcold_writes(CAP, 4 * CAP, hot=0.1, hot_share=0.9, seed=5)


def simulate(mode, writes, agent=None, qint=None):
    sim = Simulator(
        RelocationProbe(mode, agent, qint),
        SimConfig(segment_blocks=SEG, op_ratio=0.15, chunk_blocks=8192, debug_invariants=True),
        CAP,
    )
    res = sim.run(writes)
    return sim, res


def brute_force_q(epochs, states, actions, invalid, horizon, alpha, seg):
    """One record per decision, one update per decision in decision order (gamma = 0)."""
    q = ql.hierarchical_table()
    visits = np.zeros_like(q, dtype=np.int64)
    rsum = np.zeros_like(q)
    cum = np.concatenate([[0], np.cumsum(invalid)])  # cum[k + 1] = invalid of victims 0..k
    order = np.argsort(epochs, kind="stable")
    for i in order:
        e = epochs[i]
        if e < 0 or e + horizon >= len(invalid):
            continue  # not rewarded yet
        r = (cum[e + horizon + 1] - cum[e + 1]) / (horizon * seg)
        s, a = states[i], actions[i]
        q[s, a] += alpha * (r - q[s, a])
        visits[s, a] += 1
        rsum[s, a] += r
    return q, visits, rsum


# -- state encoding --------------------------------------------------------------------------
def test_lifetime_bin_equals_halving_one_bit_at_a_time():
    """The binary-search lifetime bin against the plain definition (halve while >= 2, at most 24
    times) on every value up to 5,000 and around every power of two up to 2^62."""

    def naive(v):
        b = 0
        while v >= 2 and b < 24:
            v >>= 1
            b += 1
        return b

    values = [*range(-5, 5000), *(2**k + d for k in range(1, 63) for d in (-1, 0, 1)), 2**63 - 1]
    assert [ql.lifetime_bin(v) for v in values] == [naive(v) for v in values]


def test_state_encoding_bins():
    assert N_STATES == 25 * 25 * 8 * 3 * 6 == 90000
    lb = [ql.lifetime_bin(v) for v in (-5, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, (1 << 24) - 1, 1 << 24, 1 << 40)]
    assert lb == [0, 0, 0, 1, 1, 2, 2, 3, 9, 10, 23, 24, 24]
    seg = 100
    vb = [ql.valid_bin(v, seg) for v in (0, 3, 4, 7, 8, 50, 95, 96, 99, 100)]
    assert vb == [0, 0, 1, 1, 2, 12, 23, 24, 24, 24]
    assert ql.valid_bin(1, 25) == 1 and ql.valid_bin(0, 25) == 0 and ql.valid_bin(24, 25) == 24
    rng = np.random.default_rng(0)
    for _ in range(300):
        life, valid = int(rng.integers(0, 1 << 30)), int(rng.integers(0, 513))
        t, p, prev = int(rng.integers(0, 8)), int(rng.integers(0, 3)), int(rng.integers(0, 6))
        s = encode_state(life, valid, 512, t, p, prev)
        lbin = min(int(np.log2(life)), 24) if life >= 2 else 0
        vbin = min(valid * 25 // 512, 24)
        assert s == (((lbin * 25 + vbin) * 8 + t) * 3 + p) * 6 + prev
        assert ql.decode_state(s) == (lbin, vbin, t, p, prev)
    assert encode_state(5, 1, 64, 8, 0, 0) == -1 and encode_state(5, 1, 64, 0, 3, 0) == -1
    assert encode_state(5, 1, 64, 0, 0, 6) == -1 and encode_state(5, 1, 64, -1, 0, 0) == -1
    assert greedy_action(ql.hierarchical_table(), -1) == -1
    with pytest.raises(ValueError, match="outside"):
        ql.decode_state(N_STATES)
    # successor: GC level a + 1, previous action a, the other components kept
    s = encode_state(300, 20, 64, 1, PRED_LONG, PREV_NEVER)
    assert ql.decode_state(ql.successor_state(s, 2)) == (8, 7, SEG_GC_FIRST + 2, PRED_LONG, 2)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="alpha"):
        new_qtable(64, alpha=0.0)
    with pytest.raises(ValueError, match="gamma"):
        new_qtable(64, gamma=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        new_qtable(64, epsilon=1.5)
    with pytest.raises(ValueError, match="horizon"):
        new_qtable(64, horizon=0)
    with pytest.raises(ValueError, match="shape"):
        new_qtable(64, initial=np.zeros((10, 5)))
    with pytest.raises(ValueError, match="NaN"):
        quantize_table(np.full((N_STATES, N_ACTIONS), np.nan))
    float_table = quantize_table(ql.hierarchical_table())
    with pytest.raises(ExportError, match="quantise"):
        emit_qtable(type(float_table)(table=ql.hierarchical_table(), scale=1.0, bits=8), "x")
    with pytest.raises(ExportError, match="identifier"):
        emit_qtable(float_table, "not a name")


# -- the initial table ---------------------------------------------------------------------
def test_initial_table_is_the_hierarchical_rule():
    q = ql.hierarchical_table()
    seg_type = np.array([ql.decode_state(s)[2] for s in range(0, N_STATES, 7)])
    expect = np.where(seg_type < SEG_GC_FIRST, 0, np.minimum(seg_type - SEG_GC_FIRST + 1, N_ACTIONS - 1))
    assert np.array_equal(ql.greedy_actions(q)[::7], expect)
    assert [ql.hierarchical_action(t) for t in range(8)] == [0, 0, 0, 1, 2, 3, 4, 4]


def test_untrained_agent_relocates_like_age_based_block_for_block(writes):
    sim_age, res_age = simulate(MODE_AGE, writes)
    agent = new_qtable(SEG, epsilon=0.0, seed=1)  # learning, no exploration
    sim_rl, res_rl = simulate(MODE_AGENT, writes, agent)
    assert res_age["gc_writes"] > 20 * SEG
    for name in ("l2p", "p2l", "seg_group", "group_gc", "group_user", "group_reclaimed_valid"):
        assert np.array_equal(getattr(sim_age.state, name), getattr(sim_rl.state, name)), name
    assert res_rl["waf"] == res_age["waf"]
    c = ql.counters(agent)
    assert c["decisions"] == res_rl["gc_writes"] == c["recorded"]
    assert c["gc_ops"] == res_rl["reclaimed_segments"] and c["credited"] > 0 and c["explorations"] == 0
    # with Shiro's 1% exploration the agent departs from the rule
    explorer = new_qtable(SEG, seed=1)
    simulate(MODE_AGENT, writes, explorer)
    assert ql.counters(explorer)["explorations"] > 0


# -- reward credit -------------------------------------------------------------------------
def test_reward_credit_equals_brute_force_per_decision_records(writes):
    horizon, alpha = 50, 0.2
    agent = new_qtable(SEG, horizon=horizon, alpha=alpha, epsilon=0.05, seed=7)
    sim, res = simulate(MODE_AGENT, writes, agent)
    p = sim.pstate
    n, n_gc = int(p.scalars[0]["n_log"]), int(p.scalars[0]["n_gc"])
    assert n == res["gc_writes"] < LOG_SIZE and n_gc == res["reclaimed_segments"]
    q, visits, rsum = brute_force_q(
        p.log_epoch[:n], p.log_state[:n], p.log_action[:n], p.log_invalid[:n_gc], horizon, alpha, SEG
    )
    assert visits.sum() == ql.counters(agent)["credited"] > 1000
    assert np.array_equal(visits, agent.visits)
    np.testing.assert_allclose(agent.reward_sum, rsum, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(agent.q, q, rtol=1e-12, atol=1e-12)
    # the aggregation did aggregate: fewer pending records than decisions
    assert ql.counters(agent)["pending"] == n - visits.sum()
    assert int(agent.pend_len.sum()) < ql.counters(agent)["pending"]


def test_reward_credit_on_a_scripted_run_with_repeated_pairs():
    horizon, alpha, seg = 5, 0.3, 32
    agent = new_qtable(seg, horizon=horizon, alpha=alpha, epsilon=0.3, seed=3, epoch_capacity=15)
    rng = np.random.default_rng(1)
    states = rng.choice(N_STATES, 3, replace=False)
    log, invalid = [], []
    for k in range(60):
        inv = int(rng.integers(0, seg + 1))
        on_gc(agent, inv)
        invalid.append(inv)
        for _ in range(int(rng.integers(0, 9))):
            s = int(rng.choice(states))
            a = choose_action(agent, s)
            assert record_decision(agent, s, a)
            log.append((k, s, a))
    e, s, a = (np.array(x) for x in zip(*log))
    q, visits, rsum = brute_force_q(e, s, a, np.array(invalid), horizon, alpha, seg)
    np.testing.assert_allclose(agent.q, q, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(agent.reward_sum, rsum, rtol=1e-12, atol=1e-12)
    assert np.array_equal(agent.visits, visits) and visits.max() > 1


def test_epoch_overflow_is_counted_not_silent():
    agent = new_qtable(16, horizon=2, epsilon=0.0, epoch_capacity=2)
    on_gc(agent, 3)
    assert record_decision(agent, 10, 0) and record_decision(agent, 11, 0) and record_decision(agent, 10, 0)
    assert not record_decision(agent, 12, 1)
    assert ql.counters(agent)["overflow"] == 1 and ql.counters(agent)["recorded"] == 3
    assert not record_decision(agent, -1, 0) and not record_decision(agent, 10, N_ACTIONS)
    assert ql.counters(agent)["rejected"] == 2 and choose_action(agent, -1) == -1


# -- learning ------------------------------------------------------------------------------
@pytest.mark.parametrize("horizon", [1, 8])
def test_agent_learns_the_better_action_of_a_toy(horizon):
    """Four states; in each, one action (not the hierarchical one) makes the next victims emptier."""
    seg = 100
    states = [encode_state(1000, 50, seg, t, PRED_LONG, PREV_NEVER) for t in (0, 3, 5, 7)]
    best = {states[0]: 3, states[1]: 0, states[2]: 4, states[3]: 1}
    assert all(ql.hierarchical_action(ql.decode_state(s)[2]) != best[s] for s in states)
    agent = new_qtable(seg, horizon=horizon, alpha=0.1, epsilon=0.2, seed=11)
    rng = np.random.default_rng(2)
    good = 1
    for _ in range(6000):
        on_gc(agent, 90 if good else 30)  # this victim's emptiness follows the last decision
        s = states[int(rng.integers(0, 4))]
        a = choose_action(agent, s)
        record_decision(agent, s, a)
        good = a == best[s]
    assert [greedy_action(agent.q, s) for s in states] == [best[s] for s in states]
    assert agent.q[states[0], 3] > agent.q[states[0], 0]


def test_determinism(writes):
    runs = []
    for seed in (5, 5, 6):
        agent = new_qtable(SEG, horizon=20, epsilon=0.05, seed=seed)
        sim, res = simulate(MODE_AGENT, writes, agent)
        runs.append((agent, sim, res))
    (a1, s1, r1), (a2, s2, r2), (_, s3, _) = runs
    assert np.array_equal(a1.q, a2.q) and np.array_equal(a1.visits, a2.visits)
    assert np.array_equal(s1.state.p2l, s2.state.p2l) and r1["waf"] == r2["waf"]
    assert a1.scalars.tobytes() == a2.scalars.tobytes()
    assert not np.array_equal(s1.state.p2l, s3.state.p2l)  # another seed explores otherwise


# -- the integer table ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(writes):
    agent = new_qtable(SEG, horizon=20, alpha=0.3, epsilon=0.1, seed=2)
    simulate(MODE_AGENT, writes, agent)
    return agent


def test_int8_table_run_equals_float_table_run(writes, trained):
    iq = quantize_table(trained.q)
    assert iq.table.dtype == np.int8 and iq.nbytes == 450000  # Shiro's 439 KB
    share, differ = argmax_agreement(trained.q, iq)
    visited = np.flatnonzero(trained.visits.sum(axis=1))
    assert share == 1.0 and differ.size == 0
    # plain rounding would have changed visited states' actions; the repair moved one step each
    naive = quantize_table(trained.q, keep_greedy=False)
    _, naive_differ = argmax_agreement(trained.q, naive)
    assert iq.repaired == naive_differ.size > 0 and np.isin(naive_differ, visited).all()
    step = np.abs(iq.table.astype(int) - naive.table.astype(int))
    assert step.max() == 1 and np.array_equal(np.flatnonzero(step.any(axis=1)), naive_differ)
    assert np.abs(naive.table / naive.scale - trained.q).max() <= 0.5 / naive.scale + 1e-12
    frozen = QTable(*trained)._replace(scalars=trained.scalars.copy(), q=trained.q.copy())
    st = frozen.scalars.view(np.recarray)[0]
    st.learn, st.epsilon = 0, 0.0
    sim_f, res_f = simulate(MODE_AGENT, writes, frozen)
    sim_i, res_i = simulate(MODE_DEPLOYED, writes, qint=iq.table)
    assert res_i["waf"] == res_f["waf"]
    assert np.array_equal(sim_i.state.p2l, sim_f.state.p2l)
    assert res_i["gc_writes"] > 20 * SEG
    assert np.array_equal(frozen.q, trained.q)  # frozen: no update
    # the learned table departs from the rule somewhere it was tried
    assert np.any(ql.greedy_actions(trained.q)[visited] != ql.greedy_actions(ql.hierarchical_table())[visited])


def test_c_header_compiles_freestanding_and_matches_python(tmp_path, trained, c_compiler):
    iq = quantize_table(trained.q)
    text = emit_header(iq, "shiro")
    assert "float" not in text and "double" not in text and "#include <stdint.h>" in text
    assert "static const int8_t shiro_qtable[90000][5]" in text
    h = tmp_path / "shiro_qtable.h"
    h.write_text(text)
    src = tmp_path / "use.c"
    src.write_text(
        f'#include "{h}"\nint32_t use(int64_t l, int64_t v, int64_t s, int32_t t, int32_t p, int32_t q)'
        " { return shiro_relocate(l, v, s, t, p, q); }\n"
    )
    obj = tmp_path / "use.o"
    proc = subprocess.run(
        [c_compiler, *COMPILE_FLAGS, "-O2", str(src), "-o", str(obj)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    nm = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=False)
    assert nm.stdout.strip() == "", f"the header needs symbols from outside: {nm.stdout}"
    # a shared build with a small driver, called through ctypes
    drv = tmp_path / "drv.c"
    drv.write_text(
        f'#include "{h}"\n'
        "void drv_best(int32_t n, int32_t *out) { int32_t s; for (s = 0; s < n; ++s) out[s] = shiro_best_action(s); }\n"
        "void drv_encode(int32_t n, const int64_t *x, int32_t *out) { int32_t i; for (i = 0; i < n; ++i)"
        " out[i] = shiro_encode_state(x[6*i], x[6*i+1], x[6*i+2], (int32_t)x[6*i+3], (int32_t)x[6*i+4],"
        " (int32_t)x[6*i+5]); }\n"
    )
    so = tmp_path / "drv.so"
    proc = subprocess.run(
        [c_compiler, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", str(drv), "-o", str(so)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(so))
    best = np.empty(N_STATES, np.int32)
    lib.drv_best(ctypes.c_int32(N_STATES), best.ctypes.data_as(ctypes.c_void_p))
    assert np.array_equal(best, iq.greedy())
    rng = np.random.default_rng(4)
    n = 2000
    x = np.stack(
        [
            rng.integers(-3, 1 << 40, n),
            rng.integers(-1, 600, n),
            rng.choice([64, 100, 512], n),
            rng.integers(-1, 9, n),
            rng.integers(-1, 4, n),
            rng.integers(-1, 7, n),
        ],
        axis=1,
    ).astype(np.int64)
    out = np.empty(n, np.int32)
    lib.drv_encode(
        ctypes.c_int32(n), np.ascontiguousarray(x).ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p)
    )
    expect = [encode_state(*map(int, row)) for row in x]
    assert np.array_equal(out, expect) and (out == -1).any() and (out >= 0).sum() > 100


def test_update_with_discount_bootstraps_on_the_successor():
    """n aggregated decisions = n single updates toward r + gamma max Q(successor)."""
    s = encode_state(5000, 30, 64, 1, PRED_SHORT, PREV_NEVER)
    nxt = ql.successor_state(s, 2)
    agents = [new_qtable(64, alpha=0.25, gamma=0.5, epsilon=0.0) for _ in range(2)]
    for qt in agents:
        qt.q[nxt] = [0.1, 0.7, 0.2, 0.3, 0.4]
        qt.q[s, 2] = 0.05
    ql.update(agents[0], s, 2, 0.6, 3)
    for _ in range(3):
        ql.update(agents[1], s, 2, 0.6, 1)
    target = 0.6 + 0.5 * 0.7
    assert agents[0].q[s, 2] == pytest.approx(target + 0.75**3 * (0.05 - target), rel=1e-14)
    assert agents[0].q[s, 2] == pytest.approx(agents[1].q[s, 2], rel=1e-14)
    assert agents[0].visits[s, 2] == 3 and agents[0].reward_sum[s, 2] == pytest.approx(1.8)
