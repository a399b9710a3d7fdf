"""A tabular Q-learning agent for GC relocation, usable from the simulator's Numba loop.

Shiro (shared/papers/shiro.txt §III-C) steers each valid block of a GC victim to one of 5 GC
levels with a Q-table. This module is that agent, without a placement scheme around it:

- **State** (Table I), one integer in ``[0, N_STATES)`` from :func:`encode_state`:
  the block's current lifetime (time since its last user write) in 25 log2 bins ``[1, 2), [2, 4),
  ..., [2^24, inf)`` (lifetimes below 1 share the first bin); the victim segment's valid
  proportion in 25 bins of 0.04 (a full segment shares the last bin); the victim's segment type
  (``SEG_USER_SHORT``, ``SEG_USER_LONG``, ``SEG_USER_UNSEEN``, then ``SEG_GC_FIRST + j`` for GC
  level ``j + 1``, ``j`` in 0..4); the classifier's prediction for the block (``PRED_SHORT``,
  ``PRED_LONG``, ``PRED_UNSEEN``); the block's previous action (GC level index 0..4, or
  ``PREV_NEVER`` if it was never relocated). 25 x 25 x 8 x 3 x 6 = 90,000 states.
- **Actions**: the GC level index ``a`` in 0..4 (destination level ``a + 1``).
- **Policy**: epsilon-greedy (:func:`choose_action`): with probability ``epsilon`` (default 1%,
  the paper's) a uniformly drawn action from the agent's own seeded generator, else the
  greedy one (ties go to the lowest level).
- **Reward**: the average invalid proportion of the victims of the next ``horizon`` GC
  operations (default 200) after the decision. A decision recorded while GC operation ``e`` is
  running (after ``on_gc`` for it) is rewarded by victims ``e + 1 .. e + horizon``; it is
  credited by the ``on_gc`` of victim ``e + horizon``. No record is kept per relocated block:
  :func:`record_decision` adds one to a count per distinct (state, action) of the current GC
  epoch, and the reward is computed from a running integer sum of the victims' invalid blocks
  (exact: invalid blocks / (horizon x segment blocks)). Decisions of the last ``horizon`` epochs
  of a run are still pending at its end.
- **Update** (:func:`update`), for ``n`` decisions of the same (state, action) sharing one
  reward ``r``: ``n`` applications of ``Q <- Q + alpha (T - Q)`` with the fixed target
  ``T = r + gamma max_a' Q(s', a')``, in closed form ``Q <- T + (1 - alpha)^n (Q - T)``.
  ``alpha`` is the learning rate (default 0.1). ``gamma`` the discount (default 0): the reward
  already spans ``horizon`` future GC operations, which is how Shiro makes it long-term, so the
  default does not bootstrap. With ``gamma > 0``, ``s'`` is the state the block carries into its
  next relocation as far as known now (:func:`successor_state`): its segment type becomes GC level
  ``a + 1`` and its previous action ``a``; its lifetime and next victim's valid proportion are not
  known yet and keep their bins.
- **Initial table** (:func:`hierarchical_table`): the hierarchical rule (user segments to GC level
  1, GC level ``k`` to ``k + 1``, the top level to itself), so an untrained agent behaves like
  age-based relocation.

The agent state is a :class:`QTable` (a NamedTuple of numpy arrays, with a one-element ``scalars``
record for parameters and counters), built by :func:`new_qtable`. The kernels take it as an
argument; a placement policy keeps it as a field of its own state.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

N_LIFETIME_BINS = 25
N_VALID_BINS = 25
N_SEGMENT_TYPES = 8
N_PREDICTIONS = 3
N_PREVIOUS = 6
N_ACTIONS = 5
N_STATES = N_LIFETIME_BINS * N_VALID_BINS * N_SEGMENT_TYPES * N_PREDICTIONS * N_PREVIOUS

# segment types (Table I: 3 kinds of user segments, 5 levels of GC segments)
SEG_USER_SHORT = 0
SEG_USER_LONG = 1
SEG_USER_UNSEEN = 2
SEG_GC_FIRST = 3  # GC level j + 1 is segment type SEG_GC_FIRST + j
# classifier predictions
PRED_SHORT = 0
PRED_LONG = 1
PRED_UNSEEN = 2
# previous action: a GC level index 0..4, or never relocated
PREV_NEVER = 5

DEFAULT_HORIZON = 200
DEFAULT_EPSILON = 0.01
DEFAULT_ALPHA = 0.1
DEFAULT_GAMMA = 0.0

SCALARS = np.dtype(
    [
        ("alpha", np.float64),  # learning rate
        ("gamma", np.float64),  # discount
        ("epsilon", np.float64),  # exploration probability
        ("horizon", np.int64),  # GC operations whose victims reward a decision
        ("segment_blocks", np.int64),  # blocks per victim segment (the invalid proportion's denominator)
        ("learn", np.int64),  # 1: record and credit decisions; 0: frozen table
        ("rng", np.uint64),  # splitmix64 state of the exploration draws
        ("gc_ops", np.int64),  # on_gc calls so far; decisions go to epoch gc_ops - 1
        ("cum_invalid", np.int64),  # invalid blocks of every victim so far
        ("decisions", np.int64),  # choose_action calls
        ("explorations", np.int64),  # of which random
        ("recorded", np.int64),  # record_decision calls that entered an epoch
        ("unrecorded", np.int64),  # before the first on_gc, or while frozen (never credited)
        ("overflow", np.int64),  # dropped: more distinct (state, action) in one epoch than epoch_capacity
        ("rejected", np.int64),  # dropped: state or action out of range (e.g. encode_state's -1)
        ("credited", np.int64),  # decisions whose reward has been applied
    ]
)


class QTable(NamedTuple):
    """The agent: Q-values, diagnostics and the pending (not yet rewarded) decisions.

    ``pend_*`` rows form a ring of ``horizon + 1`` GC epochs; row ``e % (horizon + 1)`` holds
    epoch ``e``'s distinct keys ``state * N_ACTIONS + action`` and their counts. ``mark_*`` map a
    key to its slot in the current epoch's row (valid while ``mark_epoch[key]`` is that epoch).
    """

    scalars: np.ndarray  # one SCALARS record
    q: np.ndarray  # float64[N_STATES, N_ACTIONS]
    visits: np.ndarray  # int64[N_STATES, N_ACTIONS]: decisions credited
    reward_sum: np.ndarray  # float64[N_STATES, N_ACTIONS]: rewards credited (sum over decisions)
    epoch_cum: np.ndarray  # int64[horizon + 1]: cum_invalid after each epoch's victim
    pend_key: np.ndarray  # int32[horizon + 1, epoch_capacity]
    pend_count: np.ndarray  # int32[horizon + 1, epoch_capacity]
    pend_len: np.ndarray  # int32[horizon + 1]
    mark_epoch: np.ndarray  # int64[N_STATES * N_ACTIONS]
    mark_slot: np.ndarray  # int32[N_STATES * N_ACTIONS]


# -- state encoding ------------------------------------------------------------------------
@nb.njit(cache=True)
def lifetime_bin(lifetime):
    """floor(log2(lifetime)) capped at 24; lifetimes below 2 (0 and negatives too) give 0."""
    if lifetime < 2:
        return 0
    # a binary search over the bit positions: six steps that compile to conditional moves,
    # where shifting one bit at a time took up to 24 iterations and a mispredicted exit
    v = np.int64(lifetime)
    b = 0
    for step in (32, 16, 8, 4, 2, 1):
        hi = v >> step
        if hi != 0:
            v = hi
            b += step
    return b if b < N_LIFETIME_BINS - 1 else N_LIFETIME_BINS - 1


@nb.njit(cache=True)
def valid_bin(valid, segment_blocks):
    """floor(25 x valid / segment_blocks) in 0..24 (bins of 0.04; a full segment is bin 24)."""
    if valid <= 0 or segment_blocks <= 0:
        return 0
    b = (valid * N_VALID_BINS) // segment_blocks
    return b if b < N_VALID_BINS else N_VALID_BINS - 1


@nb.njit(cache=True)
def encode_state(lifetime, valid, segment_blocks, segment_type, prediction, previous):
    """The state index of a block about to be relocated, or -1 if a categorical component is
    out of range (``segment_type`` 0..7, ``prediction`` 0..2, ``previous`` 0..5).

    ``lifetime``: time since the block's last user write; ``valid`` and ``segment_blocks``: the
    victim's valid blocks and size. Layout: ``(((l * 25 + v) * 8 + t) * 3 + p) * 6 + prev``.
    """
    return encode_binned_state(
        lifetime_bin(lifetime), valid_bin(valid, segment_blocks), segment_type, prediction, previous
    )


@nb.njit(cache=True, inline="always")
def encode_binned_state(lifetime_bin_, valid_bin_, segment_type, prediction, previous):
    """:func:`encode_state` from the lifetime's and valid proportion's bins (a GC pass bins its
    victim's valid proportion once)."""
    if (
        segment_type < 0
        or segment_type >= N_SEGMENT_TYPES
        or prediction < 0
        or prediction >= N_PREDICTIONS
        or previous < 0
        or previous >= N_PREVIOUS
    ):
        return -1
    s = lifetime_bin_ * N_VALID_BINS + valid_bin_
    s = (s * N_SEGMENT_TYPES + segment_type) * N_PREDICTIONS + prediction
    return s * N_PREVIOUS + previous


@nb.njit(cache=True)
def successor_state(state, action):
    """``state`` with segment type GC level ``action + 1`` and previous action ``action`` (the
    bootstrap state of :func:`update` when ``gamma > 0``)."""
    rest = state // (N_PREVIOUS * N_PREDICTIONS * N_SEGMENT_TYPES)
    pred = (state // N_PREVIOUS) % N_PREDICTIONS
    s = (rest * N_SEGMENT_TYPES + SEG_GC_FIRST + action) * N_PREDICTIONS + pred
    return s * N_PREVIOUS + action


def decode_state(state: int) -> tuple[int, int, int, int, int]:
    """(lifetime bin, valid bin, segment type, prediction, previous action) of a state index."""
    state = int(state)
    if not 0 <= state < N_STATES:
        raise ValueError(f"state {state} is outside [0, {N_STATES})")
    prev = state % N_PREVIOUS
    state //= N_PREVIOUS
    pred = state % N_PREDICTIONS
    state //= N_PREDICTIONS
    seg_type = state % N_SEGMENT_TYPES
    state //= N_SEGMENT_TYPES
    return state // N_VALID_BINS, state % N_VALID_BINS, seg_type, pred, prev


# -- acting --------------------------------------------------------------------------------
@nb.njit(cache=True)
def greedy_action(table, state):
    """The action with the largest value in ``table[state]`` (float or integer table; ties go
    to the lowest level); -1 for a negative state."""
    if state < 0:
        return -1
    best = 0
    for a in range(1, N_ACTIONS):
        if table[state, a] > table[state, best]:
            best = a
    return best


@nb.njit(cache=True)
def _next_u64(st):
    """splitmix64: the next 64 random bits of the record's generator."""
    x = st.rng + np.uint64(0x9E3779B97F4A7C15)
    st.rng = x
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def choose_action(qt, state):
    """Epsilon-greedy action for ``state`` (-1 for a negative state). Draws one uniform number
    per call while ``epsilon > 0`` and a second one when exploring, so a run is reproducible
    from the seed."""
    if state < 0:
        return -1
    st = qt.scalars[0]
    st.decisions += 1
    if st.epsilon > 0.0:
        u = np.float64(_next_u64(st) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
        if u < st.epsilon:
            st.explorations += 1
            return np.int64(_next_u64(st) % np.uint64(N_ACTIONS))
    return greedy_action(qt.q, state)


# -- learning ------------------------------------------------------------------------------
@nb.njit(cache=True)
def record_decision(qt, state, action):
    """Count one decision ``(state, action)`` in the current GC epoch (its reward comes
    ``horizon`` GC operations later). Returns False if it was dropped: the epoch already holds
    ``epoch_capacity`` distinct pairs (counted in ``overflow``). Decisions before the first
    :func:`on_gc`, or while the table is frozen, are counted in ``unrecorded`` only; a state
    or action out of range is dropped (False) and counted in ``rejected``."""
    st = qt.scalars[0]
    if state < 0 or state >= N_STATES or action < 0 or action >= N_ACTIONS:
        st.rejected += 1
        return False
    if st.gc_ops == 0 or st.learn == 0:
        st.unrecorded += 1
        return True
    epoch = st.gc_ops - 1
    row = epoch % (st.horizon + 1)
    key = state * N_ACTIONS + action
    if qt.mark_epoch[key] == epoch:
        qt.pend_count[row, qt.mark_slot[key]] += 1
        st.recorded += 1
        return True
    n = qt.pend_len[row]
    if n >= qt.pend_key.shape[1]:
        st.overflow += 1
        return False
    qt.pend_key[row, n] = key
    qt.pend_count[row, n] = 1
    qt.pend_len[row] = n + 1
    qt.mark_epoch[key] = epoch
    qt.mark_slot[key] = n
    st.recorded += 1
    return True


@nb.njit(cache=True)
def update(qt, state, action, reward, count):
    """Apply ``count`` decisions of ``(state, action)`` that earned ``reward`` each:
    ``count`` steps ``Q <- Q + alpha (T - Q)``, ``T = reward + gamma max Q(successor)``."""
    st = qt.scalars[0]
    target = reward
    if st.gamma != 0.0:
        nxt = successor_state(state, action)
        target += st.gamma * qt.q[nxt, greedy_action(qt.q, nxt)]
    keep = (1.0 - st.alpha) ** count
    qt.q[state, action] = target + keep * (qt.q[state, action] - target)
    qt.visits[state, action] += count
    qt.reward_sum[state, action] += count * reward


@nb.njit(cache=True)
def on_gc(qt, invalid_blocks):
    """Start a GC operation whose victim holds ``invalid_blocks`` invalid blocks (of
    ``segment_blocks``): credit the epoch ``horizon`` operations back with the mean invalid
    proportion of the victims since, then open a new epoch for the decisions that follow."""
    st = qt.scalars[0]
    h = st.horizon
    k = st.gc_ops
    st.cum_invalid += invalid_blocks
    if st.learn != 0:
        e = k - h
        if e >= 0:
            row = e % (h + 1)
            reward = (st.cum_invalid - qt.epoch_cum[row]) / (h * st.segment_blocks)
            n = qt.pend_len[row]
            for i in range(n):
                key = qt.pend_key[row, i]
                c = qt.pend_count[row, i]
                update(qt, key // N_ACTIONS, key % N_ACTIONS, reward, c)
                st.credited += c
            qt.pend_len[row] = 0
        qt.epoch_cum[k % (h + 1)] = st.cum_invalid
        qt.pend_len[k % (h + 1)] = 0
    st.gc_ops = k + 1


@nb.njit(cache=True)
def decision_loop(qt, lifetimes, valid, segment_type, per_gc=64):
    """Decisions as a GC loop makes them (for timing): one :func:`on_gc` every ``per_gc``
    decisions, then per block :func:`encode_state`, :func:`choose_action`, :func:`record_decision`
    (prediction long, never relocated before)."""
    sb = qt.scalars[0].segment_blocks
    for i in range(lifetimes.shape[0]):
        if i % per_gc == 0:
            on_gc(qt, sb - valid[i])
        s = encode_state(lifetimes[i], valid[i], sb, segment_type[i], PRED_LONG, PREV_NEVER)
        a = choose_action(qt, s)
        record_decision(qt, s, a)


# -- construction (Python) -----------------------------------------------------------------
def hierarchical_action(segment_type: int) -> int:
    """The hierarchical rule: a user segment's blocks go to GC level 1 (action 0), GC level
    ``k``'s to ``k + 1``, the top level's stay on top."""
    if not 0 <= segment_type < N_SEGMENT_TYPES:
        raise ValueError(f"segment type {segment_type} is outside [0, {N_SEGMENT_TYPES})")
    if segment_type < SEG_GC_FIRST:
        return 0
    return min(segment_type - SEG_GC_FIRST + 1, N_ACTIONS - 1)


def hierarchical_table(preferred: float = 1.0, other: float = 0.0) -> np.ndarray:
    """The initial Q-table: ``preferred`` for the hierarchical action of every state, ``other``
    elsewhere (``preferred`` at or above the best reachable reward keeps the rule until
    experience shows better)."""
    if not preferred > other:
        raise ValueError(f"the preferred action's value ({preferred}) must exceed the others' ({other})")
    seg_type = (np.arange(N_STATES) // (N_PREVIOUS * N_PREDICTIONS)) % N_SEGMENT_TYPES
    rule = np.array([hierarchical_action(t) for t in range(N_SEGMENT_TYPES)])[seg_type]
    q = np.full((N_STATES, N_ACTIONS), float(other))
    q[np.arange(N_STATES), rule] = float(preferred)
    return q


def greedy_actions(table: np.ndarray) -> np.ndarray:
    """The greedy action of every state (ties to the lowest level), like :func:`greedy_action`."""
    return np.asarray(table).argmax(axis=1)


def new_qtable(
    segment_blocks: int,
    *,
    horizon: int = DEFAULT_HORIZON,
    alpha: float = DEFAULT_ALPHA,
    gamma: float = DEFAULT_GAMMA,
    epsilon: float = DEFAULT_EPSILON,
    seed: int = 1,
    epoch_capacity: int | None = None,
    learn: bool = True,
    initial: np.ndarray | None = None,
) -> QTable:
    """A fresh agent.

    ``segment_blocks``: blocks per victim (the reward's denominator); ``horizon``: GC operations
    whose victims reward a decision (Shiro: 200); ``alpha`` learning rate in (0, 1]; ``gamma``
    discount in [0, 1); ``epsilon`` exploration probability in [0, 1] (Shiro: 1%); ``seed`` of the
    exploration draws; ``epoch_capacity``: distinct (state, action) pairs one GC epoch can hold
    (default ``segment_blocks``: one GC operation relocates at most that many blocks);
    ``learn=False`` freezes the table (no recording, no credit); ``initial``: the starting
    Q-table (default :func:`hierarchical_table`).
    """
    if int(segment_blocks) < 1:
        raise ValueError(f"segment_blocks must be >= 1, got {segment_blocks}")
    if int(horizon) < 1:
        raise ValueError(f"horizon must be >= 1 GC operation, got {horizon}")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha (learning rate) must be in (0, 1], got {alpha}")
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma (discount) must be in [0, 1), got {gamma}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon (exploration probability) must be in [0, 1], got {epsilon}")
    cap = int(segment_blocks) if epoch_capacity is None else int(epoch_capacity)
    if cap < 1:
        raise ValueError(f"epoch_capacity must be >= 1, got {epoch_capacity}")
    q = hierarchical_table() if initial is None else np.array(initial, dtype=np.float64)
    if q.shape != (N_STATES, N_ACTIONS):
        raise ValueError(f"initial Q-table must have shape ({N_STATES}, {N_ACTIONS}), got {q.shape}")
    scalars = np.zeros(1, SCALARS)
    st = scalars.view(np.recarray)[0]
    st.alpha, st.gamma, st.epsilon = float(alpha), float(gamma), float(epsilon)
    st.horizon, st.segment_blocks, st.learn = int(horizon), int(segment_blocks), int(bool(learn))
    st.rng = np.uint64((int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF)
    h = int(horizon) + 1
    return QTable(
        scalars=scalars,
        q=np.ascontiguousarray(q),
        visits=np.zeros((N_STATES, N_ACTIONS), np.int64),
        reward_sum=np.zeros((N_STATES, N_ACTIONS), np.float64),
        epoch_cum=np.zeros(h, np.int64),
        pend_key=np.zeros((h, cap), np.int32),
        pend_count=np.zeros((h, cap), np.int32),
        pend_len=np.zeros(h, np.int32),
        mark_epoch=np.full(N_STATES * N_ACTIONS, -1, np.int64),
        mark_slot=np.zeros(N_STATES * N_ACTIONS, np.int32),
    )


def counters(qt: QTable) -> dict:
    """The agent's counters as plain ints (decisions, explorations, recorded, credited, ...)."""
    st = qt.scalars[0]
    names = ("gc_ops", "decisions", "explorations", "recorded", "unrecorded", "overflow", "rejected", "credited")
    return {n: int(st[n]) for n in names} | {
        "pending": int(qt.pend_count.sum(where=np.arange(qt.pend_count.shape[1])[None, :] < qt.pend_len[:, None]))
    }
