"""A relocation agent credited per decision: each relocated block's own outcome rewards the
decision that placed it (issue 40's "Q-learning agent that learns").

Shiro's paper agent (:mod:`dogi_ml.rl.qlearning`) rewards every decision of a GC operation with one
number, the mean invalid share of the next 200 victims; thousands of decisions share it, so the
actions taken within one state are not compared on their own effect. Here every decision is
credited with what happened to the block it placed:

- a relocation decision ``(s, a)`` for a block (LBA) stays **pending** on that LBA;
- if the block is **invalidated** (user overwrite) before the segment it was written to is
  reclaimed, the decision cost no further copy: reward 0, a terminal outcome (target 0);
- if that segment is **reclaimed** while the block is still valid, the block is copied again
  (by the same GC operation, which makes its next decision ``(s', a')``): reward -1 and the
  target ``-1 + gamma max_b Q(s', b)``, ``s'`` the block's real next state. So ``Q(s, a)`` estimates
  minus the (discounted) number of further copies a block placed by ``a`` in state ``s`` costs:
  with ``gamma = 0``, minus the probability that it is copied again; ``gamma -> 1`` counts every
  further copy until the block dies. The sum over blocks of their copies is the run's GC writes,
  so the per-block objective adds up to the device's.

With ``share=True`` (Shiro's ``credit_reward=segment``) the reclaim of a segment with ``v`` valid
blocks of ``S`` instead credits every decision whose block was in it, dead or alive, ``-v/S``
(the dead ones at the reclaim, terminal; the live ones at their relocation, with the bootstrap):
the credits still add up to the GC writes, and a block that dies early in a segment of long-lived
ones pays its share of their copies instead of nothing. ``on_reclaim`` then needs ``valid``.

With ``hindsight_edges`` (Shiro's ``credit_reward=hindsight``) a decision is credited instead at its
block's death, every action at once: the block's remaining lifetime ``r`` after the decision names
the right action ``b`` (the number of ``edges x unit`` at or below ``r``), and action ``a`` is
credited minus ``q (b - a)`` if it was too low (the block would be copied again) or
``(1 - q) (a - b)`` if too high (its slot idles among longer-lived blocks), ``q`` =
``hindsight_quantile``; ``Q(s, a)`` estimates minus that expected loss, so the greedy action is the
``q``-quantile of the right actions of the state's blocks. The outcome does not depend on the
action taken: the actions of a state are compared on the same blocks, which the per-copy credit
cannot do (there a level's outcome depends on what else is sent to it). Each LBA keeps its
decisions since its user write (``CHAIN``, the oldest dropped and counted as ``censored``); a
decision whose block has outlived the last edge is credited at the LBA's next relocation (its
right action is known: the last), so the longest-lived blocks are not credited last or never.

A block is relocated only from the segment its previous relocation wrote it to (a user write
clears its pending decision), so the reclaim is seen exactly at the block's next relocation: no
per-segment list is kept, one pending ``(state, action)`` per LBA (5 bytes) is all.

**Update**: ``Q <- Q + max(alpha, 1/n) (T - Q)``, ``n`` the decisions of ``(s, a)`` credited so far
(this one included): the sample mean of the first ``1/alpha`` outcomes, then an exponential
average with rate ``alpha``, so the starting value leaves no bias once a pair has been tried.
**Initial table**: the hierarchical rule (:func:`dogi_ml.rl.qlearning.hierarchical_table`) with
the rule's action at 0 (no further copy: the best value) and the others at ``-1 / (1 - gamma)``
(a copy at every reclaim forever: the worst), so an untried action is never preferred to a tried
one and an untrained agent relocates as the rule does; other actions are tried by the
epsilon-greedy exploration (default 1%, the paper's) and win a state when their measured outcome
is better.

**API** (Numba; the agent is a :class:`CreditAgent` NamedTuple a policy keeps in its state)::

    from dogi_ml.rl import credit
    agent = credit.new_credit_agent(capacity, gamma=0.5, alpha=0.1, epsilon=0.01, seed=1)
    # GC, one valid block ``lba`` of the victim, ``state`` its index (any encoding in [0, n_states)):
    a = credit.choose_action(agent, state)      # epsilon-greedy; -1 for a state out of range
    credit.on_relocate(agent, lba, state, a)    # credits lba's pending decision (copied again), opens (state, a)
    # a user write (or trim) of ``lba``, before or after its new placement:
    credit.on_invalidate(agent, lba)            # credits lba's pending decision (died before a reclaim)

``n_states`` / ``n_actions`` default to Table I (90,000 x 5, the table :mod:`dogi_ml.rl.export`
quantises); any other sizes work with ``initial`` given. ``learn=False`` freezes the table (greedy
with ``epsilon=0``; nothing pending). :func:`counters` reports decisions, explorations and the
outcomes credited.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from .qlearning import N_ACTIONS, N_STATES, _next_u64, hierarchical_table

DEFAULT_GAMMA = 0.5
DEFAULT_ALPHA = 0.1
DEFAULT_EPSILON = 0.01
NO_DECISION = -1  # pend_state of an LBA with no pending decision
CHAIN = 16  # hindsight: decisions kept per LBA until its block dies (the oldest dropped beyond)

SCALARS = np.dtype(
    [
        ("alpha", np.float64),  # learning rate once a pair has 1/alpha outcomes
        ("gamma", np.float64),  # discount of further copies
        ("dead_cost", np.float64),  # weight of a dead block's idle share (its slot's time dead before the reclaim)
        ("share", np.int64),  # 1: each decision whose block was in a reclaimed segment is credited its valid share
        ("hindsight", np.int64),  # 1: at a block's death every action of each of its decisions is credited (below)
        ("unit", np.float64),  # hindsight: the scale of edges (the caller keeps it current)
        ("quantile", np.float64),  # hindsight: a level too low costs quantile, too high 1 - quantile
        ("censored", np.int64),  # hindsight: decisions dropped from a full chain before their block died
        ("cost", np.float64),  # share=1: the segment being reclaimed's valid blocks / its size
        ("epsilon", np.float64),  # exploration probability
        ("learn", np.int64),  # 1: record and credit decisions; 0: frozen table
        ("rng", np.uint64),  # splitmix64 state of the exploration draws
        ("decisions", np.int64),  # choose_action calls with a valid state
        ("explorations", np.int64),  # of which random
        ("opened", np.int64),  # decisions left pending on their LBA
        ("rejected", np.int64),  # on_relocate with a state, action or LBA out of range
        ("died", np.int64),  # credited: invalidated before its segment was reclaimed (hindsight: every credit)
        ("copied", np.int64),  # credited: copied again (reward -1)
    ]
)


class CreditAgent(NamedTuple):
    """The agent: Q-values, diagnostics and one pending decision per LBA."""

    scalars: np.ndarray  # one SCALARS record
    q: np.ndarray  # float64[n_states, n_actions]
    visits: np.ndarray  # int64[n_states, n_actions]: outcomes credited
    reward_sum: np.ndarray  # float64[n_states, n_actions]: rewards credited (-1 per copy)
    pend_state: (
        np.ndarray
    )  # int32 per LBA: the state of its pending decision, NO_DECISION if none (unused by hindsight: chain_*)
    pend_action: np.ndarray  # int8 per LBA: ... and its action
    pend_time: np.ndarray  # int64 per LBA: ... and when it was made (dead_cost > 0)
    dead_state: np.ndarray  # int32 [n_segments, segment_blocks]: decisions whose block died in the segment
    dead_action: np.ndarray  # int8 [n_segments, segment_blocks]   (dead_cost > 0: credited at its reclaim)
    dead_placed: np.ndarray  # int64 [n_segments, segment_blocks]: when the decision was made
    dead_time: np.ndarray  # int64 [n_segments, segment_blocks]: when its block died
    dead_len: np.ndarray  # int32 per segment
    edges: np.ndarray  # float64[n_actions - 1], hindsight: the right action of lifetime r is #{edges <= r / unit}
    chain_state: np.ndarray  # int32 [capacity, CHAIN], hindsight: the LBA's decisions since its user write ...
    chain_time: np.ndarray  # int64 [capacity, CHAIN]   ... and when each was made
    chain_len: np.ndarray  # int8 per LBA


@nb.njit(cache=True, inline="always")
def greedy_action(table, state):
    """The action with the largest value in ``table[state]`` (ties go to the lowest action), as
    :func:`dogi_ml.rl.qlearning.greedy_action` for any number of actions; -1 for a state out of range."""
    if state < 0 or state >= table.shape[0]:
        return -1
    best = 0
    for a in range(1, table.shape[1]):
        if table[state, a] > table[state, best]:
            best = a
    return best


@nb.njit(cache=True)
def choose_action(agent, state):
    """Epsilon-greedy action for ``state`` (-1 out of range). One uniform draw per call while
    ``epsilon > 0``, a second when exploring: a run is reproducible from the seed."""
    if state < 0 or state >= agent.q.shape[0]:
        return -1
    st = agent.scalars[0]
    st.decisions += 1
    if st.epsilon > 0.0:
        u = np.float64(_next_u64(st) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
        if u < st.epsilon:
            st.explorations += 1
            return np.int64(_next_u64(st) % np.uint64(agent.q.shape[1]))
    return greedy_action(agent.q, state)


@nb.njit(cache=True, inline="always")
def _credit(agent, state, action, reward, target):
    """One outcome of ``(state, action)``: ``Q <- Q + max(alpha, 1/n) (target - Q)``."""
    n = agent.visits[state, action] + 1
    agent.visits[state, action] = n
    agent.reward_sum[state, action] += reward
    rate = 1.0 / n
    alpha = agent.scalars[0].alpha
    if rate < alpha:
        rate = alpha
    agent.q[state, action] += rate * (target - agent.q[state, action])


@nb.njit(cache=True, inline="always")
def hindsight_action(agent, remaining):
    """The action a decision should have taken for a block that then lived ``remaining``: the
    number of ``edges x unit`` at or below it."""
    st = agent.scalars[0]
    a = 0
    while a < agent.edges.shape[0] and remaining >= agent.edges[a] * st.unit:
        a += 1
    return a


@nb.njit(cache=True, inline="always")
def _hindsight_loss(agent, a, b):
    """What action ``a`` cost a block whose right action was ``b``: ``q`` per level too low (the
    block is copied again), ``1 - q`` per level too high (its slot idles in a longer-lived
    segment); ``q = scalars.quantile``. The action of least expected loss is the state's
    ``q``-quantile right action."""
    q = agent.scalars[0].quantile
    return (b - a) * q if a < b else (a - b) * (1.0 - q)


@nb.njit(cache=True, inline="always")
def _credit_every_action(agent, state, right):
    """One decision in ``state`` whose right action turned out ``right``: every action credited
    minus its :func:`_hindsight_loss`."""
    for a in range(agent.q.shape[1]):
        loss = _hindsight_loss(agent, a, right)
        _credit(agent, state, a, -loss, -loss)


@nb.njit(cache=True)
def _credit_hindsight(agent, lba, now):
    """``lba``'s block died at ``now``: each decision of its chain, made at ``t`` in state ``s``,
    learns what every action would have been worth, minus :func:`_hindsight_loss` against the
    action ``b`` that the block's remaining lifetime ``now - t`` called for
    (:func:`hindsight_action`). The outcome does not depend on the action taken, so the actions of
    a state are compared on the same blocks, and ``Q(s, a)`` estimates minus the expected loss: its
    argmax is the ``quantile``-quantile right action of the state's blocks (the median at 0.5)."""
    st = agent.scalars[0]
    n = agent.chain_len[lba]
    agent.chain_len[lba] = 0
    for i in range(n):
        _credit_every_action(agent, agent.chain_state[lba, i], hindsight_action(agent, now - agent.chain_time[lba, i]))
    st.died += n


@nb.njit(cache=True)
def _credit_known(agent, lba, now):
    """Credit now the decisions of ``lba``'s chain whose block has already outlived the last edge:
    their right action is the last whatever happens next (waiting for the death would credit the
    longest-lived blocks last, or never, and bias every state towards short lifetimes). Returns
    the chain's new length."""
    st = agent.scalars[0]
    last = agent.q.shape[1] - 1
    n = agent.chain_len[lba]
    kept = 0
    for i in range(n):
        s = agent.chain_state[lba, i]
        t = agent.chain_time[lba, i]
        if hindsight_action(agent, now - t) == last:
            _credit_every_action(agent, s, last)
            st.died += 1
        else:
            agent.chain_state[lba, kept] = s
            agent.chain_time[lba, kept] = t
            kept += 1
    agent.chain_len[lba] = kept
    return kept


@nb.njit(cache=True)
def on_invalidate(agent, lba, segment, now):
    """``lba``'s live block, in ``segment``, is invalidated at time ``now``: its pending decision (if
    any) cost no further copy. With ``dead_cost == 0`` it is credited now (reward 0, terminal);
    otherwise it waits in the segment's list for :func:`on_reclaim`. With ``hindsight`` every
    decision of the block's chain is credited now (:func:`_credit_hindsight`)."""
    if agent.scalars[0].hindsight != 0:
        _credit_hindsight(agent, lba, now)
        return
    s = agent.pend_state[lba]
    if s == NO_DECISION:
        return
    st = agent.scalars[0]
    agent.pend_state[lba] = NO_DECISION
    if st.dead_cost == 0.0 and st.share == 0:
        _credit(agent, s, agent.pend_action[lba], 0.0, 0.0)
        st.died += 1
        return
    n = agent.dead_len[segment]
    if n >= agent.dead_state.shape[1]:
        st.rejected += 1  # more deaths than slots: the caller's segment is not the block's
        return
    agent.dead_state[segment, n] = s
    agent.dead_action[segment, n] = agent.pend_action[lba]
    agent.dead_placed[segment, n] = agent.pend_time[lba]
    agent.dead_time[segment, n] = now
    agent.dead_len[segment] = n + 1


@nb.njit(cache=True)
def on_reclaim(agent, segment, now, valid=0):
    """``segment`` is reclaimed at time ``now`` with ``valid`` valid blocks: every decision whose
    block died in it is credited (terminal) ``-dead_cost x (now - died) / (now - placed)``, the
    share of the block's time in the segment its slot spent dead (a block that dies long before
    its segment is reclaimed wasted its slot, one that dies just before fitted it), and with
    ``share`` also ``-valid / segment_blocks``, which the segment's live blocks are then credited at
    their relocation. Nothing to do with neither (deaths were credited as they happened)."""
    st = agent.scalars[0]
    if st.share != 0:
        st.cost = valid / agent.dead_state.shape[1]
    if st.dead_cost == 0.0 and st.share == 0:
        return  # deaths were credited as they happened (no per-segment lists)
    n = agent.dead_len[segment]
    if n == 0:
        return
    agent.dead_len[segment] = 0
    for i in range(n):
        reward = -st.cost if st.share != 0 else 0.0
        if st.dead_cost != 0.0:
            span = now - agent.dead_placed[segment, i]
            idle = (now - agent.dead_time[segment, i]) / span if span > 0 else 0.0
            reward -= st.dead_cost * idle
        _credit(agent, agent.dead_state[segment, i], agent.dead_action[segment, i], reward, reward)
    st.died += n


@nb.njit(cache=True)
def on_relocate(agent, lba, state, action, now):
    """``lba``'s block is relocated with ``action`` from state ``state``: its pending decision (the
    one that wrote it to the segment now reclaimed) is credited -1 with the bootstrap
    ``gamma max Q(state)``, and ``(state, action)`` becomes its pending decision. Returns False
    (counted in ``rejected``) for a state, action or LBA out of range; a frozen agent records
    nothing."""
    st = agent.scalars[0]
    q = agent.q
    if (
        state < 0
        or state >= q.shape[0]
        or action < 0
        or action >= q.shape[1]
        or lba < 0
        or lba >= agent.pend_state.shape[0]
    ):
        st.rejected += 1
        return False
    if st.learn == 0:
        return True
    if st.hindsight != 0:
        n = _credit_known(agent, lba, now)
        if n == agent.chain_state.shape[1]:  # full: the oldest decision is dropped uncredited
            for i in range(n - 1):
                agent.chain_state[lba, i] = agent.chain_state[lba, i + 1]
                agent.chain_time[lba, i] = agent.chain_time[lba, i + 1]
            n -= 1
            st.censored += 1
        agent.chain_state[lba, n] = state
        agent.chain_time[lba, n] = now
        agent.chain_len[lba] = n + 1
        st.opened += 1
        return True
    s = agent.pend_state[lba]
    if s != NO_DECISION:
        reward = -st.cost if st.share != 0 else -1.0
        target = reward
        if st.gamma != 0.0:
            target += st.gamma * q[state, greedy_action(q, state)]
        _credit(agent, s, agent.pend_action[lba], reward, target)
        st.copied += 1
    agent.pend_state[lba] = state
    agent.pend_action[lba] = action
    if st.dead_cost != 0.0:
        agent.pend_time[lba] = now
    st.opened += 1
    return True


# -- construction (Python) -----------------------------------------------------------------
def initial_table(gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """Table I's hierarchical rule in this agent's units: the rule's action 0 (no further copy),
    the others ``-1 / (1 - gamma)`` (a copy at every reclaim, forever)."""
    return hierarchical_table(preferred=0.0, other=-1.0 / (1.0 - float(gamma)))


def new_credit_agent(
    capacity: int,
    *,
    gamma: float = DEFAULT_GAMMA,
    alpha: float = DEFAULT_ALPHA,
    epsilon: float = DEFAULT_EPSILON,
    seed: int = 1,
    learn: bool = True,
    initial: np.ndarray | None = None,
    dead_cost: float = 0.0,
    n_segments: int = 1,
    segment_blocks: int = 1,
    share: bool = False,
    hindsight_edges=None,
    hindsight_quantile: float = 0.5,
) -> CreditAgent:
    """A fresh agent for LBAs ``0 .. capacity - 1``.

    ``gamma`` in [0, 1): discount of further copies (0: minus the probability of one more copy);
    ``alpha`` in (0, 1]: the learning rate once a pair has ``1/alpha`` outcomes; ``epsilon`` in
    [0, 1]: exploration probability; ``seed`` of the exploration draws; ``learn=False`` freezes
    the table; ``initial``: the starting table, any ``[n_states, n_actions]`` (default
    :func:`initial_table`, Table I's 90,000 x 5). ``hindsight_edges`` (``n_actions - 1``
    increasing positive numbers, in units the caller sets in ``scalars.unit``) turns on the
    hindsight credit (:func:`_credit_hindsight`) instead of the per-copy one.
    """
    if int(capacity) < 1:
        raise ValueError(f"capacity must be >= 1 LBA, got {capacity}")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha (learning rate) must be in (0, 1], got {alpha}")
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma (discount of further copies) must be in [0, 1), got {gamma}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon (exploration probability) must be in [0, 1], got {epsilon}")
    if not 0.0 <= dead_cost < float("inf"):
        raise ValueError(f"dead_cost (weight of a dead block's idle share) must be >= 0, got {dead_cost}")
    if (dead_cost > 0 or share) and (int(n_segments) < 1 or int(segment_blocks) < 1):
        raise ValueError(
            f"dead_cost > 0 and share need n_segments and segment_blocks >= 1, got {n_segments}, {segment_blocks}"
        )
    q = initial_table(gamma) if initial is None else np.array(initial, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] < 1 or not 1 <= q.shape[1] <= 127:
        raise ValueError(f"initial table must be [n_states >= 1, 1..127 actions], got shape {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("initial table holds NaN or infinite values")
    if not 0.0 < hindsight_quantile < 1.0:
        raise ValueError(f"hindsight_quantile must be in (0, 1), got {hindsight_quantile}")
    if hindsight_edges is not None:
        edges = np.asarray(hindsight_edges, dtype=np.float64)
        if edges.shape != (q.shape[1] - 1,) or np.any(edges <= 0) or np.any(np.diff(edges) <= 0):
            raise ValueError(
                f"hindsight_edges must be {q.shape[1] - 1} increasing positive numbers (one per action but "
                f"the last), got {hindsight_edges!r}"
            )
        if share or dead_cost > 0:
            raise ValueError("hindsight_edges replace the per-copy credit: drop share and dead_cost")
    else:
        edges = np.zeros(0, np.float64)
    scalars = np.zeros(1, SCALARS)
    st = scalars.view(np.recarray)[0]
    st.alpha, st.gamma, st.epsilon, st.learn = float(alpha), float(gamma), float(epsilon), int(bool(learn))
    st.dead_cost = float(dead_cost)
    st.share = int(bool(share))
    st.hindsight = int(hindsight_edges is not None)
    st.unit = 1.0
    st.quantile = float(hindsight_quantile)
    rows, cols = (int(n_segments), int(segment_blocks)) if dead_cost > 0 or share else (1, 1)
    # the paper agent's seeding (dogi_ml.rl.qlearning.new_qtable): the same seed draws the same numbers
    st.rng = np.uint64((int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF)
    return CreditAgent(
        scalars=scalars,
        q=np.ascontiguousarray(q),
        visits=np.zeros(q.shape, np.int64),
        reward_sum=np.zeros(q.shape, np.float64),
        pend_state=np.full(int(capacity), NO_DECISION, np.int32),
        pend_action=np.zeros(int(capacity), np.int8),
        pend_time=np.zeros(int(capacity) if dead_cost > 0 else 1, np.int64),
        dead_state=np.zeros((rows, cols), np.int32),
        dead_action=np.zeros((rows, cols), np.int8),
        dead_placed=np.zeros((rows, cols), np.int64),
        dead_time=np.zeros((rows, cols), np.int64),
        dead_len=np.zeros(rows, np.int32),
        edges=edges,
        chain_state=np.zeros((int(capacity), CHAIN) if st.hindsight else (1, 1), np.int32),
        chain_time=np.zeros((int(capacity), CHAIN) if st.hindsight else (1, 1), np.int64),
        chain_len=np.zeros(int(capacity) if st.hindsight else 1, np.int8),
    )


def counters(agent: CreditAgent) -> dict:
    """The agent's counters as plain ints: decisions, explorations, opened, died, copied,
    rejected, credited (died + copied) and pending (decisions whose block is still where it was put)."""
    st = agent.scalars[0]
    names = ("decisions", "explorations", "opened", "died", "copied", "rejected", "censored")
    out = {n: int(st[n]) for n in names}
    out["credited"] = out["died"] + out["copied"]
    out["pending"] = (
        int(agent.chain_len.sum()) if st["hindsight"] else int(np.count_nonzero(agent.pend_state != NO_DECISION))
    )
    return out


# Table I's sizes, for callers that size their own tables like the default one
TABLE_SHAPE = (N_STATES, N_ACTIONS)
