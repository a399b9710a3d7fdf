"""rl/credit.py: the relocation agent credited per decision, against a plain-Python twin, on a toy
where one action is clearly better, in the simulator (int8 table = float table, determinism).

The simulator runs use a test-only policy (:class:`CreditProbe`, like ``tests/test_rl.py``'s
probe): user writes split short / long by a fixed lifespan threshold (unseen for first writes),
5 GC levels chosen by the hierarchical rule, the learning agent, its frozen float table, or its
int8 table.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np
import pytest
from helpers import hotcold_writes

from dogi_ml.rl import credit
from dogi_ml.rl import qlearning as ql
from dogi_ml.rl.export import argmax_agreement, quantize_table
from dogi_ml.rl.qlearning import N_ACTIONS, PRED_LONG, PRED_SHORT, PRED_UNSEEN, PREV_NEVER, SEG_GC_FIRST
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.kernels import segment_of
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext
from dogi_ml.sim.state import P_SEG_BLOCKS

CAP, SEG = 8192, 64
THRESHOLD = 2048
MODE_RULE, MODE_AGENT, MODE_INT8 = 0, 1, 2
PROBE_SCALARS = np.dtype([("mode", np.int64), ("victim_valid", np.int64)])


# -- the plain-Python twin -------------------------------------------------------------------
class TwinAgent:
    """The credit rules as the module docstring states them, with dicts and one event at a time
    (no Numba, no shared code): a pending decision per LBA; a death credits 0 (or, with a dead
    cost, waits for its segment's reclaim and is credited minus the cost times the share of its
    time in the segment spent dead); a relocation credits -1 + gamma max Q(new state); the rate
    is max(alpha, 1/n)."""

    def __init__(self, q, alpha, gamma, dead_cost, share=False, segment_blocks=8):
        self.q = [list(map(float, row)) for row in q]
        self.n = {}
        self.rsum = {}
        self.alpha, self.gamma, self.dead_cost = alpha, gamma, dead_cost
        # share: every decision whose block was in a reclaimed segment pays its valid share
        self.share, self.segment_blocks, self.cost = share, segment_blocks, 0.0
        self.pending = {}  # lba -> (state, action, time)
        self.dead = {}  # segment -> [(state, action, placed, died)]

    def credit(self, s, a, reward, target):
        n = self.n.get((s, a), 0) + 1
        self.n[(s, a)] = n
        self.rsum[(s, a)] = self.rsum.get((s, a), 0.0) + reward
        rate = max(self.alpha, 1.0 / n)
        self.q[s][a] += rate * (target - self.q[s][a])

    def relocate(self, lba, s, a, now):
        if lba in self.pending:
            ps, pa, _ = self.pending.pop(lba)
            r = -self.cost if self.share else -1.0
            self.credit(ps, pa, r, r + self.gamma * max(self.q[s]))
        self.pending[lba] = (s, a, now)

    def invalidate(self, lba, seg, now):
        if lba not in self.pending:
            return
        s, a, placed = self.pending.pop(lba)
        if self.dead_cost == 0 and not self.share:
            self.credit(s, a, 0.0, 0.0)
        else:
            self.dead.setdefault(seg, []).append((s, a, placed, now))

    def reclaim(self, seg, now, valid):
        if self.share:
            self.cost = valid / self.segment_blocks
        for s, a, placed, died in self.dead.pop(seg, []):
            r = -self.cost if self.share else 0.0
            if self.dead_cost:
                r -= self.dead_cost * (now - died) / (now - placed)
            self.credit(s, a, r, r)


def _events(seed, n_lbas=6, n_segs=3, n_states=4, n_actions=3, n=400):
    """A random event script: relocations (each LBA lives in one segment at a time), overwrites
    and reclaims, with a clock that moves on."""
    rng = np.random.default_rng(seed)
    where = {}  # lba -> segment of its relocated copy
    out, now = [], 0
    for _ in range(n):
        now += int(rng.integers(1, 4))
        kind = rng.random()
        if kind < 0.5:
            lba = int(rng.integers(n_lbas))
            seg = int(rng.integers(n_segs))
            where[lba] = seg
            out.append(("relocate", lba, int(rng.integers(n_states)), int(rng.integers(n_actions)), now))
        elif kind < 0.8:
            lba = int(rng.integers(n_lbas))
            if lba in where:
                out.append(("invalidate", lba, where.pop(lba), now))
        else:
            seg = int(rng.integers(n_segs))
            # the reclaim relocates the segment's live blocks: their relocations follow it
            live = [x for x, s in where.items() if s == seg]
            out.append(("reclaim", seg, now, len(live)))
            for lba in live:
                dest = int(rng.integers(n_segs))
                where[lba] = dest
                out.append(("relocate", lba, int(rng.integers(n_states)), int(rng.integers(n_actions)), now))
    return out


@pytest.mark.parametrize(
    "gamma,dead_cost,share", [(0.0, 0.0, False), (0.5, 0.0, False), (0.5, 1.0, False), (0.9, 0.3, False),
                              (0.5, 0.0, True), (0.9, 0.3, True)]
)  # fmt: skip
def test_credit_equals_a_plain_python_twin(gamma, dead_cost, share):
    q0 = np.random.default_rng(1).uniform(-2.0, 0.0, (4, 3))
    agent = credit.new_credit_agent(6, gamma=gamma, alpha=0.2, epsilon=0.0, initial=q0, dead_cost=dead_cost,
                                    n_segments=3, segment_blocks=8, share=share)  # fmt: skip
    twin = TwinAgent(q0, 0.2, gamma, dead_cost, share, segment_blocks=8)
    events = _events(seed=7)
    for ev in events:
        if ev[0] == "relocate":
            _, lba, s, a, now = ev
            assert credit.on_relocate(agent, lba, s, a, now)
            twin.relocate(lba, s, a, now)
        elif ev[0] == "invalidate":
            _, lba, seg, now = ev
            credit.on_invalidate(agent, lba, seg, now)
            twin.invalidate(lba, seg, now)
        else:
            _, seg, now, valid = ev
            credit.on_reclaim(agent, seg, now, valid)
            twin.reclaim(seg, now, valid)
    visits = np.zeros((4, 3), np.int64)
    rsum = np.zeros((4, 3))
    for (s, a), n in twin.n.items():
        visits[s, a], rsum[s, a] = n, twin.rsum[(s, a)]
    assert np.array_equal(agent.visits, visits) and visits.sum() > 100
    np.testing.assert_allclose(agent.reward_sum, rsum, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(agent.q, np.array(twin.q), rtol=1e-12, atol=1e-12)
    c = credit.counters(agent)
    assert c["credited"] == visits.sum() and c["opened"] == sum(e[0] == "relocate" for e in events)
    assert c["pending"] == len(twin.pending)
    assert c["copied"] > 0 and c["died"] > 0
    if dead_cost > 0 or share:
        assert (rsum[visits > 0] < 0).any()  # idle or valid shares were charged


def test_credit_on_a_hand_computed_sequence():
    """Two decisions on one block: copied once, then dead; values by hand."""
    q0 = np.array([[0.0, -2.0], [-0.5, -3.0]])
    agent = credit.new_credit_agent(2, gamma=0.5, alpha=0.1, epsilon=0.0, initial=q0)
    credit.on_relocate(agent, 1, 0, 1, 10)  # block 1: state 0, action 1
    credit.on_relocate(agent, 1, 1, 0, 20)  # its segment reclaimed while valid: copied, now state 1
    # first outcome of (0, 1): rate 1/1, Q = -1 + 0.5 x max(Q[1]) = -1 + 0.5 x -0.5
    assert agent.q[0, 1] == -1.25 and agent.visits[0, 1] == 1 and agent.reward_sum[0, 1] == -1.0
    credit.on_invalidate(agent, 1, 0, 30)  # it dies: (1, 0) credited 0 at rate 1
    assert agent.q[1, 0] == 0.0 and agent.visits[1, 0] == 1
    credit.on_invalidate(agent, 1, 0, 31)  # nothing pending any more
    assert credit.counters(agent) == {
        "decisions": 0, "explorations": 0, "opened": 2, "died": 1, "copied": 1, "rejected": 0,
        "censored": 0, "credited": 2, "pending": 0,
    }  # fmt: skip
    # out of range: rejected, counted
    assert not credit.on_relocate(agent, 5, 0, 0, 40) and not credit.on_relocate(agent, 0, 2, 0, 40)
    assert not credit.on_relocate(agent, 0, 0, 2, 40) and credit.counters(agent)["rejected"] == 3
    assert credit.choose_action(agent, -1) == -1 and credit.choose_action(agent, 2) == -1
    # with a dead cost: idle share (reclaim - death) / (reclaim - placed), at the segment's reclaim
    agent = credit.new_credit_agent(2, gamma=0.0, epsilon=0.0, initial=q0, dead_cost=2.0, n_segments=1,
                                    segment_blocks=4)  # fmt: skip
    credit.on_relocate(agent, 0, 1, 0, 100)
    credit.on_invalidate(agent, 0, 0, 110)
    assert agent.visits.sum() == 0  # waits for the reclaim
    credit.on_reclaim(agent, 0, 140)
    assert agent.q[1, 0] == -2.0 * 30 / 40 and agent.visits[1, 0] == 1
    # share: the dead and the copied block of a segment reclaimed with 1 valid block of 4 pay 1/4 each
    agent = credit.new_credit_agent(2, gamma=0.0, epsilon=0.0, initial=q0, n_segments=1, segment_blocks=4,
                                    share=True)  # fmt: skip
    credit.on_relocate(agent, 0, 0, 1, 100)
    credit.on_relocate(agent, 1, 1, 0, 100)
    credit.on_invalidate(agent, 0, 0, 110)
    assert agent.visits.sum() == 0  # waits for the reclaim
    credit.on_reclaim(agent, 0, 140, 1)  # block 1 still valid: it is copied next
    assert agent.q[0, 1] == -0.25 and agent.visits[0, 1] == 1
    credit.on_relocate(agent, 1, 1, 0, 140)
    assert agent.q[1, 0] == -0.25 and agent.visits[1, 0] == 1
    assert credit.counters(agent)["died"] == 1 and credit.counters(agent)["copied"] == 1


class HindsightTwin:
    """The hindsight credit as rl/credit's docstrings state it, in plain Python: each LBA keeps the
    decisions made since its user write (at most CHAIN, the oldest dropped); a decision whose block
    has outlived the last edge is credited at the LBA's next relocation; a death credits every
    decision left; each credit updates every action of the state towards minus the asymmetric
    distance to the right action (q per level too low, 1 - q per level too high)."""

    def __init__(self, q, alpha, edges, quantile, unit, chain):
        self.q = [list(map(float, row)) for row in q]
        self.n = {}
        self.alpha, self.edges, self.quantile, self.unit, self.chain = alpha, edges, quantile, unit, chain
        self.decisions = {}  # lba -> [(state, time)]
        self.censored = 0

    def right(self, lived):
        return sum(lived >= e * self.unit for e in self.edges)

    def credit(self, s, b):
        for a in range(len(self.q[s])):
            loss = (b - a) * self.quantile if a < b else (a - b) * (1 - self.quantile)
            n = self.n.get((s, a), 0) + 1
            self.n[(s, a)] = n
            self.q[s][a] += max(self.alpha, 1.0 / n) * (-loss - self.q[s][a])

    def relocate(self, lba, s, now):
        kept = []
        for ds, t in self.decisions.get(lba, []):
            if self.right(now - t) == len(self.edges):
                self.credit(ds, len(self.edges))
            else:
                kept.append((ds, t))
        if len(kept) == self.chain:
            kept.pop(0)
            self.censored += 1
        self.decisions[lba] = kept + [(s, now)]

    def invalidate(self, lba, now):
        for ds, t in self.decisions.pop(lba, []):
            self.credit(ds, self.right(now - t))


@pytest.mark.parametrize("quantile", [0.5, 0.8])
def test_hindsight_credit_equals_a_plain_python_twin(quantile):
    q0 = np.random.default_rng(3).uniform(-2.0, 0.0, (4, 3))
    edges, unit = (2.0, 6.0), 40.0
    agent = credit.new_credit_agent(6, alpha=0.2, epsilon=0.0, initial=q0, hindsight_edges=edges,
                                    hindsight_quantile=quantile)  # fmt: skip
    agent.scalars[0]["unit"] = unit
    twin = HindsightTwin(q0, 0.2, edges, quantile, unit, credit.CHAIN)
    # a longer script: some blocks are relocated more than CHAIN times before they die
    events = _events(seed=11, n=3000)
    for ev in events:
        if ev[0] == "relocate":
            _, lba, s, a, now = ev
            assert credit.on_relocate(agent, lba, s, a, now)
            twin.relocate(lba, s, now)
        elif ev[0] == "invalidate":
            _, lba, seg, now = ev
            credit.on_invalidate(agent, lba, seg, now)
            twin.invalidate(lba, now)
        else:
            credit.on_reclaim(agent, ev[1], ev[2], ev[3])  # nothing for the hindsight credit
    visits = np.zeros((4, 3), np.int64)
    for (s, a), n in twin.n.items():
        visits[s, a] = n
    assert np.array_equal(agent.visits, visits) and visits.sum() > 300
    np.testing.assert_allclose(agent.q, np.array(twin.q), rtol=1e-12, atol=1e-12)
    c = credit.counters(agent)
    assert c["censored"] == twin.censored > 0
    assert c["pending"] == sum(len(d) for d in twin.decisions.values())
    assert c["died"] == visits[:, 0].sum() and c["copied"] == 0


def test_hindsight_credit_learns_each_state_s_median_band():
    """Blocks of state 0 live 1, 1 or 30; of state 1 always 12; edges (5, 20): the right actions are
    0, 0, 2 and 1. The median of state 0's is 0 (quantile 0.5), its 0.8-quantile 2."""
    for quantile, expected in ((0.5, [0, 1]), (0.8, [2, 1])):
        agent = credit.new_credit_agent(8, alpha=0.01, epsilon=0.0, initial=np.zeros((2, 3)),
                                        hindsight_edges=(5.0, 20.0), hindsight_quantile=quantile)  # fmt: skip
        now = 0
        for k in range(300):
            lba = k % 8
            now += 40
            state, life = (0, (1, 1, 30)[k % 3]) if k % 2 == 0 else (1, 12)
            credit.on_relocate(agent, lba, state, 0, now)
            credit.on_invalidate(agent, lba, 0, now + life)
        assert [credit.greedy_action(agent.q, s) for s in (0, 1)] == expected, quantile


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="gamma"):
        credit.new_credit_agent(4, gamma=1.0)
    with pytest.raises(ValueError, match="alpha"):
        credit.new_credit_agent(4, alpha=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        credit.new_credit_agent(4, epsilon=-0.1)
    with pytest.raises(ValueError, match=r"hindsight_edges must be 4 increasing positive numbers"):
        credit.new_credit_agent(4, hindsight_edges=(1.0, 4.0, 16.0))
    with pytest.raises(ValueError, match=r"hindsight_edges must be 4 increasing"):
        credit.new_credit_agent(4, hindsight_edges=(1.0, 4.0, 4.0, 16.0))
    with pytest.raises(ValueError, match="drop share and dead_cost"):
        credit.new_credit_agent(4, hindsight_edges=(1.0, 4.0, 16.0, 64.0), share=True, n_segments=2, segment_blocks=2)
    with pytest.raises(ValueError, match="hindsight_quantile"):
        credit.new_credit_agent(4, hindsight_edges=(1.0, 4.0, 16.0, 64.0), hindsight_quantile=1.0)
    with pytest.raises(ValueError, match="capacity"):
        credit.new_credit_agent(0)
    with pytest.raises(ValueError, match="dead_cost"):
        credit.new_credit_agent(4, dead_cost=-1.0)
    with pytest.raises(ValueError, match="NaN"):
        credit.new_credit_agent(4, initial=np.full((3, 2), np.nan))
    q = credit.initial_table(0.5)
    rule = ql.greedy_actions(ql.hierarchical_table())
    assert np.array_equal(ql.greedy_actions(q), rule) and q.max() == 0.0 and q.min() == -2.0


# -- learning on a toy -----------------------------------------------------------------------
def _toy(agent_step, n=6000, seed=2):
    """Four states; in each, one action (not the hierarchical one) places a block that dies before
    its segment is reclaimed, every other action's block is copied once, into a fifth state, and
    dies there. ``agent_step(state, lba, now)`` makes one decision and returns its action; the
    toy reports the outcomes through the callbacks it returns."""
    seg = 100
    states = [ql.encode_state(1000, 50, seg, t, PRED_LONG, PREV_NEVER) for t in (0, 3, 5, 7)]
    best = {states[0]: 3, states[1]: 0, states[2]: 4, states[3]: 1}
    assert all(ql.hierarchical_action(ql.decode_state(s)[2]) != best[s] for s in states)
    rng = np.random.default_rng(seed)
    return states, best, rng, n


def test_credit_agent_learns_the_better_action_of_a_toy():
    agent = credit.new_credit_agent(16, gamma=0.5, epsilon=0.2, seed=11)
    states, best, rng, n = _toy(None)
    later = ql.encode_state(1 << 20, 50, 100, SEG_GC_FIRST + 4, PRED_LONG, 4)
    now = 0
    for i in range(n):
        lba = i % 16
        s = states[int(rng.integers(0, 4))]
        a = credit.choose_action(agent, s)
        credit.on_relocate(agent, lba, s, a, now)
        if a == best[s]:
            credit.on_invalidate(agent, lba, 0, now + 1)
        else:  # copied once, then dead
            credit.on_relocate(agent, lba, later, 4, now + 1)
            credit.on_invalidate(agent, lba, 0, now + 2)
        now += 3
    assert [credit.greedy_action(agent.q, s) for s in states] == [best[s] for s in states]
    assert agent.q[states[0], 3] == 0.0 and agent.q[states[0], 0] < -0.9


def test_paper_agent_does_not_learn_the_same_toy():
    """The paper's agent on the same toy, 64 decisions per GC operation, each victim's invalid
    blocks the deaths among the previous operation's decisions (the toy's only link from actions
    to victims): its shared reward leaves it on the rule in most of the four states."""
    agent = ql.new_qtable(100, horizon=200, alpha=0.1, epsilon=0.2, seed=11)
    states, best, rng, n = _toy(None)
    died = 0
    for i in range(n):
        if i % 64 == 0:
            ql.on_gc(agent, min(died, 100))
            died = 0
        s = states[int(rng.integers(0, 4))]
        a = ql.choose_action(agent, s)
        ql.record_decision(agent, s, a)
        died += a == best[s]
    right = sum(ql.greedy_action(agent.q, s) == best[s] for s in states)
    assert right <= 1


# -- in the simulator ------------------------------------------------------------------------
class ProbeState(NamedTuple):
    scalars: np.ndarray
    pred: np.ndarray
    prev: np.ndarray
    agent: credit.CreditAgent
    qint: np.ndarray


@nb.njit(cache=True)
def probe_user(s, p, lba, now):
    last = s.lba_time[lba]
    if p.scalars[0].mode == MODE_AGENT and s.l2p[lba] >= 0:
        credit.on_invalidate(p.agent, lba, segment_of(s, s.l2p[lba]), now)
    kind = PRED_UNSEEN if last < 0 else (PRED_SHORT if now - last < THRESHOLD else PRED_LONG)
    p.pred[lba] = kind
    p.prev[lba] = PREV_NEVER
    return kind


@nb.njit(cache=True)
def probe_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    seg_type = s.seg_group[victim]
    if st.mode == MODE_RULE:
        a = 0 if seg_type < SEG_GC_FIRST else min(seg_type - SEG_GC_FIRST + 1, N_ACTIONS - 1)
    else:
        state = ql.encode_state(
            now - s.lba_time[lba], st.victim_valid, s.prm[P_SEG_BLOCKS], seg_type, p.pred[lba], p.prev[lba]
        )
        if st.mode == MODE_INT8:
            a = ql.greedy_action(p.qint, state)
        else:
            a = credit.choose_action(p.agent, state)
            credit.on_relocate(p.agent, lba, state, a, now)
    p.prev[lba] = a
    return SEG_GC_FIRST + a


@nb.njit(cache=True)
def probe_reclaim(s, p, victim, now):
    p.scalars[0].victim_valid = s.seg_valid[victim]
    if p.scalars[0].mode == MODE_AGENT:
        credit.on_reclaim(p.agent, victim, now)


class CreditProbe(PlacementPolicy):
    name = "credit_probe"
    place_user = probe_user
    place_gc = probe_gc
    on_reclaim = probe_reclaim

    def __init__(self, mode, agent=None, qint=None):
        super().__init__(3 + N_ACTIONS)
        self.mode, self.agent, self.qint = mode, agent, qint

    def bind(self, ctx: SimContext) -> ProbeState:
        sc = np.zeros(1, PROBE_SCALARS)
        sc[0]["mode"] = self.mode
        agent = self.agent if self.agent is not None else credit.new_credit_agent(1, learn=False, epsilon=0.0)
        qint = self.qint if self.qint is not None else np.zeros((1, N_ACTIONS), np.int8)
        return ProbeState(sc, np.full(ctx.capacity, PRED_UNSEEN, np.int8), np.full(ctx.capacity, PREV_NEVER, np.int8),
                          agent, qint)  # fmt: skip


@pytest.fixture(scope="module")
def writes():
    return hotcold_writes(CAP, 4 * CAP, hot=0.1, hot_share=0.9, seed=5)


def simulate(mode, writes, agent=None, qint=None):
    sim = Simulator(
        CreditProbe(mode, agent, qint),
        SimConfig(segment_blocks=SEG, op_ratio=0.15, chunk_blocks=8192, debug_invariants=True),
        CAP,
    )
    return sim, sim.run(writes)


def test_untried_actions_never_win_so_without_exploration_the_agent_is_the_rule(writes):
    sim_rule, res_rule = simulate(MODE_RULE, writes)
    agent = credit.new_credit_agent(CAP, epsilon=0.0, seed=1)
    sim_rl, res_rl = simulate(MODE_AGENT, writes, agent)
    assert res_rule["gc_writes"] > 20 * SEG
    assert np.array_equal(sim_rule.state.p2l, sim_rl.state.p2l) and res_rl["waf"] == res_rule["waf"]
    c = credit.counters(agent)
    assert c["decisions"] == c["opened"] == res_rl["gc_writes"] and c["copied"] > 0 and c["died"] > 0
    assert c["credited"] + c["pending"] == c["opened"]


@pytest.fixture(scope="module")
def trained(writes):
    agent = credit.new_credit_agent(CAP, gamma=0.5, epsilon=0.1, seed=2)
    sim, res = simulate(MODE_AGENT, writes, agent)
    return agent, res


def test_determinism(writes, trained):
    agent, res = trained
    again = credit.new_credit_agent(CAP, gamma=0.5, epsilon=0.1, seed=2)
    _, res2 = simulate(MODE_AGENT, writes, again)
    assert np.array_equal(agent.q, again.q) and np.array_equal(agent.visits, again.visits)
    assert agent.scalars.tobytes() == again.scalars.tobytes() and res2["waf"] == res["waf"]
    other = credit.new_credit_agent(CAP, gamma=0.5, epsilon=0.1, seed=3)
    simulate(MODE_AGENT, writes, other)
    assert not np.array_equal(agent.q, other.q)


def test_int8_table_run_equals_float_table_run(writes, trained):
    agent, _ = trained
    visited = np.flatnonzero(agent.visits.sum(axis=1))
    departs = ql.greedy_actions(agent.q)[visited] != ql.greedy_actions(ql.hierarchical_table())[visited]
    assert departs.any()  # it learned something other than the rule
    iq = quantize_table(agent.q)
    share, differ = argmax_agreement(agent.q, iq)
    assert share == 1.0 and differ.size == 0 and iq.table.dtype == np.int8
    frozen = credit.new_credit_agent(CAP, epsilon=0.0, learn=False, initial=agent.q)
    sim_f, res_f = simulate(MODE_AGENT, writes, frozen)
    sim_i, res_i = simulate(MODE_INT8, writes, qint=iq.table)
    assert res_i["waf"] == res_f["waf"] and np.array_equal(sim_i.state.p2l, sim_f.state.p2l)
    assert res_i["gc_writes"] > 20 * SEG and np.array_equal(frozen.q, agent.q)


# -- in Shiro --------------------------------------------------------------------------------
def test_shiro_credit_and_oracle_agents_account_for_every_relocation(tmp_path):
    """policy=shiro with agent=credit: one decision per GC write, each credited or still pending;
    agent=oracle: one logged level per GC write, and its table keeps the rule where it saw nothing."""
    from dogi_ml.policies.shiro import Shiro, oracle_table
    from dogi_ml.traces.generators import generate

    cap = 4096
    trace = generate("hotcold", capacity_blocks=cap, n_writes=6 * cap, seed=5, hot_traffic=0.8, hot_fraction=0.1)
    fast = dict(window=0.25, sample_every=2, min_samples=400, max_train=2000, hot_threshold=300,
                model_params={"epochs": 2, "batch_size": 64, "patience": 1})  # fmt: skip
    cfg = SimConfig(segment_blocks=32, op_ratio=0.2, debug_invariants=True)
    sim = Simulator(Shiro(agent="credit", **fast), cfg, cap, trace=trace)
    res = sim.run(trace.block_writes)
    c = res["agent_counters"]
    assert res["gc_writes"] > 1000 and c["decisions"] == c["opened"] == res["gc_writes"]
    assert c["credited"] + c["pending"] == c["opened"] and c["died"] > 0 and c["copied"] > 0
    assert res["agent_counters"]["rejected"] == 0 and res["qtable_bytes"] == ql.N_STATES * N_ACTIONS * 8
    pol = Shiro(agent="oracle", **fast)
    assert pol.needs_future and pol.label() == "shiro[oracle,T=300]"
    sim = Simulator(pol, cfg, cap, trace=trace, stream=trace.block_writes)
    res = sim.run(trace.block_writes)
    counts = sim.pstate.credit.visits
    assert counts.sum() == sum(res["table_levels"]) == res["gc_writes"] > 1000
    q = oracle_table(counts)
    seen = np.flatnonzero(counts.sum(axis=1))
    assert np.array_equal(ql.greedy_actions(q)[seen], counts[seen].argmax(axis=1))
    unseen = np.setdiff1d(np.arange(ql.N_STATES), seen)
    assert np.array_equal(ql.greedy_actions(q)[unseen], ql.greedy_actions(ql.hierarchical_table())[unseen])
    with pytest.raises(ValueError, match="agent=qlearning or credit"):
        Shiro(agent="oracle", deployed="float", qtable=q)
    # a rule agent with save_qtable logs its levels likewise and saves their projection
    path = tmp_path / "sepbit.npy"
    sim = Simulator(Shiro(agent="sepbit_age", save_qtable=str(path), **fast), cfg, cap, trace=trace)
    res = sim.run(trace.block_writes)
    counts = sim.pstate.credit.visits
    assert counts.sum() == res["gc_writes"] and counts[:, 4].sum() == 0  # SepBIT's ages use 4 levels
    assert np.array_equal(np.load(path), oracle_table(counts)) and res["qtable_path"] == str(path)
