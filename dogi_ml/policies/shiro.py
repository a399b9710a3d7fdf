"""Shiro (Sun et al., shared/papers/shiro.txt §III): a GRU page classifier for user writes and a
Q-learning agent for GC relocation; PHFTL (:mod:`.phftl`) is its DAC'23 predecessor.

Groups (the segment types of Table I): 0 = short-living user writes, 1 = long-living, 2 = unseen
(first write of an LBA, or no model yet), 3..7 = GC levels 1..5. Victims: Adjusted Greedy
(:func:`dogi_ml.sim.victims.adjusted_greedy`, Eq. 1), which reads ``short_group`` and
``hot_threshold`` from this policy's scalars.

**Page Classifier.** One GRU layer of 32, a linear head to 2 outputs (short / long). Inputs per
write: Shiro's features ``prev_lifetime`` (``latest_inv``), ``io_len`` (``req_blocks``),
``is_seq`` (Shiro's definition, :func:`paper_is_seq`: with the current request, the last 32 write
requests cover >= 128 KiB of consecutive data in order), ``chunk_write``, ``chunk_read``,
``rw_rat``; each numeric input is split into hexadecimal digits, one input neuron per digit (value
/ 15; ``digits`` per feature, 0 = a flag fed as is). Each LBA keeps its hidden state: a prediction
is one GRU step from the cached state (``O(1)`` per write), run in Numba per chunk
(:func:`gru_infer`, the LBAs split between two threads) with the weights trained in torch. When
the first model is deployed every LBA's state is built from its last ``history - 1`` writes
(exactly the training windows' prefix); later retrainings keep the cached states (as Shiro's
device does: a state computed with older weights is carried on). Those writes' rows are kept per
LBA in a compact ring (:class:`._shiro_rows.DigitRowStream`: the integers the digits can tell
apart, 13 bytes a row instead of 24), and whole windows are gathered only for the
sampled writes.

**Training** (Algorithm 1, :class:`ThresholdSearch`): one window = ``window`` (5%) of the capacity
in user writes. At each window's end the lifetimes observed inside the window (rewrites of LBAs
written earlier in the same window) set the threshold: the first window at the inflection point
of the sorted lifetimes (:func:`cdf_knee`), later ones by three candidates at percentiles ``p -
step, p, p + step`` scored by a class-balanced scikit-learn logistic regression, with the step
rules of Algorithm 1 (``step <= 10``). Training samples: one in ``sample_every`` user writes (default 10:
Shiro's 10% sample; fewer on a small device, so that a window gives at least
``min_window_samples``), each with its LBA's window of the last ``history`` (20) writes, labelled short
if rewritten within the threshold, long if rewritten later or still live past it. The first model
trains to convergence (early stopping, at most ``model_params.epochs``); then one epoch per window
on the samples whose label became known in it. With ``background_training`` (default) that epoch
runs on a second thread while the next window is simulated, as a device would train beside its
I/O path, and its model serves from the window after that: one window (5% of the capacity) later
than when the simulation waits for it (``background_training: false``, one thread). Algorithm 1's
threshold is applied at once either way.

**GC relocation**: each valid block of a victim gets a GC level from ``agent``:
``qlearning`` (:mod:`dogi_ml.rl.qlearning`: Table I's state, epsilon-greedy with ``epsilon`` 1%,
reward = mean invalid proportion of the next ``horizon`` (200) victims, credited from
``on_reclaim``), ``hierarchical`` (its initial rule, frozen: user -> level 1, level k -> k+1),
``sepbit_age`` (SepBIT's age classes with the threshold ``T`` as SepBIT's ``l``: from the short
group -> level 1, else age < 4T -> 2, < 16T -> 3, else 4), ``single`` (all to level 1: the -NG
ablation, GC separation removed), ``credit`` (:mod:`dogi_ml.rl.credit`: the same state, each
decision credited with its own block's outcome, died before its segment's reclaim or copied again;
``credit_gamma`` discounts further copies), ``oracle`` (a measurement, not a scheme: perfect
knowledge of each block's remaining lifetime, GC level by bands of ``T`` (``ORACLE_BANDS``), each
state's levels counted so that :func:`oracle_table` projects the rule on Table I's states; needs the
write stream in advance; ``save_qtable`` with a rule agent saves its projection likewise), ``frequency`` (the
band of ``T``, as the oracle's, holding the LBA's expected lifetime from its write count: user
writes since the prefill over the LBA's; a causal rule). ``credit_state=counts`` gives the credit
agent :func:`count_state` (the LBA's count bin, the block's age bin, the victim's segment type)
instead of Table I's, starting from the hierarchical rule or ``credit_start=frequency``'s;
``credit_reward=segment`` credits each decision with its segment's valid share at the reclaim,
``credit_reward=hindsight`` every level of each decision, at its block's death, with minus its
distance to the band of ``T`` (``ORACLE_BANDS``, the oracle's) the block's remaining lifetime fell
in: the outcome does not depend on the level taken, so the levels are compared on the same blocks.
``credit_state=counts_read`` adds one bit to that state: whether the LBA has been read since its
user write (read requests are what a device sees besides writes; on ycsb a page read from the device
is in the buffer pool and is written again soon, :func:`first_read_clocks`).
``count_halflife`` (capacities; ``frequency`` and ``credit_state=counts``) decays the counts: a
write ``k`` user writes old weighs ``2^(-k / half-life)``, the elapsed writes likewise
(:func:`expected_lifetime`), so the estimate follows a workload whose popularity moves.
``deployed``: ``float`` runs a given Q-table (``qtable``)
frozen and greedy, ``int8`` its integer form (:func:`dogi_ml.rl.export.quantize_table`).

**Readings of the text** (switches; the defaults are the paper's text where it gives a value;
docs/shiro.md "Where the gap to the paper comes from" measures each):

- ``lifetime_window`` (§III-B: "Any write request targeting a page that has been written before
  in the same window contributes a lifetime sample"): ``within`` (default) counts a rewrite only if
  the page's previous write was in the same window, so every sample is shorter than the window
  (the first window begins at time 0 and so also holds the prefill's writes); ``any`` counts every
  rewrite during the window with its whole lifetime (the device keeps every page's last write time,
  §V-E), so Algorithm 1 sees the lifetimes beyond a window too. Lifetime and window are both in
  logical (user) page writes, as the text defines them.
- ``feature_counts`` (§III-B: "the number of recent read/write requests targeting the larger
  chunk" and "the global read/write ratio"): ``cumulative`` (default, the project's feature
  definitions, :mod:`dogi_ml.features.extract`) counts the blocks written / read in the 2 MiB chunk
  and the read / write blocks since the trace's start; ``recent`` (:func:`recent_counts`) counts
  requests to the chunk, and the block ratio, over the current and the previous window. The text
  names neither the chunk's size nor what "recent" spans; ``cumulative`` stays the default, the
  definition PHFTL shares.
- ``eq1_segments`` (Eq. 1: "superblocks with short-living pages"): ``short_group`` (default) the
  short-living user superblocks (Table I's type); ``short_pages`` every superblock holding a valid
  page the classifier predicted short-living (the prediction travels with a page through GC, as
  Table I's state does; per-segment counts kept exactly in :func:`_eq1_place`); ``all`` every
  superblock, which is not a reading of the text (it says "I" for the others) but bounds what an
  age term everywhere gives.
- ``eq1_clock`` (Eq. 1: "C is the elapsed time (number of pages written) since the superblock was
  closed"): ``user`` (default) counts logical (user) page writes, the unit of ``T``; ``flash``
  counts every page written (user and GC), the FTL's own write counter.

GC watermarks (§III-C: foreground below 5% free superblocks, background below 25% in idle time)
are the simulator's ``sim.gc_free_ratio`` / ``sim.gc_background_free_ratio`` /
``sim.gc_idle_gap_us``, not switches of this policy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.features.extract import CHUNK_BLOCKS, NO_PREVIOUS
from dogi_ml.intrinsics import prefetch, prefetch_span
from dogi_ml.oracles.annotate import NEVER, annotate
from dogi_ml.rl import credit as rl_credit
from dogi_ml.rl import qlearning as ql
from dogi_ml.rl.export import quantize_table
from dogi_ml.sim.kernels import _roomiest_group, segment_of
from dogi_ml.sim.policy_api import SimContext, new_scalars, record
from dogi_ml.sim.state import C_FREE, P_SEG_BLOCKS
from dogi_ml.traces.trace import OP_READ, OP_WRITE, lbas_to_compact

from . import register
from ._gru import STATE_PREFETCH, gru_head_class, gru_padding_states, gru_step, torch_gru_weights
from ._online import RingArrays, ring_fill
from ._sequence import MAX_CHUNK, SHARES, SequencePolicy, cdf_knee, count_and_sample, sequence_scalars
from ._shiro_rows import DigitRowStream, encode_digits

G_SHORT, G_LONG, G_UNSEEN, G_GC1 = 0, 1, 2, 3
N_GC = 5
N_GROUPS = 3 + N_GC
AGENTS = ("qlearning", "hierarchical", "sepbit_age", "single", "credit", "oracle", "frequency")
A_QLEARNING, A_HIERARCHICAL, A_SEPBIT_AGE, A_SINGLE, A_CREDIT, A_ORACLE, A_FREQUENCY = range(7)
#: agent=credit's state: Table I's (``table1``) or the block's write count and age (``counts``:
#: :func:`count_state`)
CREDIT_STATES = ("table1", "counts", "counts_read")
#: the credit states built on the write counts (count_state); counts_read's index is count_state's,
#: plus N_COUNT_STATES when the LBA has been read since its user write
COUNT_STATES = ("counts", "counts_read")
#: credit_state=counts: half-octave bins of x / T from 2^-4 T (bin 0) to 2^8 T (bin 23), for the
#: LBA's expected lifetime from its write count (bin 24: no user write counted yet) and its age
RATIO_BINS = 24
RATIO_OFFSET = 8  # bin of x = T
N_COUNT_BINS = RATIO_BINS + 1
N_COUNT_STATES = N_COUNT_BINS * RATIO_BINS * N_GROUPS
#: Q-table rows per credit_state
STATE_ROWS = {"counts": N_COUNT_STATES, "counts_read": 2 * N_COUNT_STATES}
#: agent=oracle's bands: a block whose true remaining lifetime is below ORACLE_BANDS[k] x T goes to
#: GC level k + 1 (SepBIT's age classes' multiples of T, on the future instead of the past)
ORACLE_BANDS = (1, 4, 16, 64)
#: agent=credit's credit: block (-1 per further copy of the block), segment (its segment's valid
#: share at the reclaim), hindsight (at the block's death, every level against the band of
#: ORACLE_BANDS its remaining lifetime fell in: dogi_ml.rl.credit._credit_hindsight)
CREDIT_REWARDS = ("block", "segment", "hindsight")
LEARNED_AGENTS = ("qlearning", "credit")  # the agents a Q-table drives (deployed needs one)
#: the learners' parameters and the agents that read them (the rules, the oracle and the frequency
#: bands learn nothing; the credit agent has its own discount, credit_gamma, and no horizon)
LEARNER_PARAMS = {
    "epsilon": LEARNED_AGENTS,
    "alpha": LEARNED_AGENTS,
    "gamma": ("qlearning",),
    "horizon": ("qlearning",),
    "credit_gamma": ("credit",),
    "credit_dead_cost": ("credit",),
}
DEPLOYED = (None, "float", "int8")
#: Algorithm 1's lifetime samples (``lifetime_window``): a rewrite of a page written earlier in the
#: same window (``within``, the paper's sentence read literally) or every rewrite in the window (``any``)
LIFETIME_WINDOWS = ("within", "any")
#: chunk_write / chunk_read / rw_rat (``feature_counts``): blocks since the trace's start (``cumulative``,
#: the project's feature definitions) or requests in the current and previous window (``recent``)
FEATURE_COUNTS = ("cumulative", "recent")
RECENT_FEATURES = ("chunk_writes", "chunk_reads", "rw_ratio_milli")
#: Adjusted Greedy's discounted superblocks (``eq1_segments``, :func:`dogi_ml.sim.victims.eq1_segment`):
#: the short-living user group's, every one holding a valid page predicted short-living, or all
EQ1_SEGMENTS = ("short_group", "short_pages", "all")
#: Eq. 1's C (``eq1_clock``): user (logical) pages written since the seal, or every page (user and GC)
EQ1_CLOCKS = ("user", "flash")
SHIRO_FEATURES = ["latest_inv", "req_blocks", "sequential", "chunk_writes", "chunk_reads", "rw_ratio_milli"]
SEQ_REQUESTS = 32  # is_seq: the last 32 write requests ...
SEQ_BLOCKS = 32  # ... cover 128 KiB (32 blocks of 4 KiB) of consecutive data

SCALARS = sequence_scalars(
    hot_threshold=np.int64,  # T: a lifetime <= T is short-living
    short_group=np.int64,  # the group Adjusted Greedy discounts
    agent=np.int64,  # A_* mode
    int8=np.int64,  # 1: greedy on the integer table qint
    victim_valid=np.int64,  # valid blocks of the victim being collected (the agent's state)
    victim_bin=np.int64,  # ... and their bin of the agent's state (ql.valid_bin)
    window_start=np.int64,  # logical time the current labelling window began
    n_life=np.int64,  # lifetimes sampled in the current window
    life_any=np.int64,  # 1: every rewrite in the window is a lifetime sample (lifetime_window=any)
    eq1_segments=np.int64,  # Adjusted Greedy's discounted segments: EQ1_SEGMENTS index
    eq1_flash=np.int64,  # 1: Eq. 1's C counts every block written (eq1_clock=flash)
    flash_clock=np.int64,  # blocks written so far, user and GC (kept with eq1_clock=flash)
    freq_clock=np.int64,  # user writes after the prefill (agent=frequency, credit_state=counts)
    count_state=np.int64,  # 1: agent=credit's state is count_state's
    count_decay=np.float64,  # count_halflife: each count's decay rate per user write, ln 2 / half-life (0: none)
    read_decisions=np.int64,  # credit_state=counts_read: GC decisions whose LBA had been read since its user write
)


#: Shiro's per-LBA state, one 8-byte row per LBA (issue 18): a user write touches one cache line
#: of it instead of three (the prediction, the previous GC action and the sample ring's
#: ``pending`` were three capacity-sized arrays), a GC relocation one instead of two
LBA_ROW = np.dtype(
    [
        ("ring_slot", np.int32),  # the sample ring's slot of its pending sample, -1 if none
        ("pred", np.int8),  # the prediction of its live version (Table I)
        ("prev", np.int8),  # its previous GC action, PREV_NEVER since its user write
    ],
    align=True,
)
assert LBA_ROW.itemsize == 8


def new_lba_rows(capacity: int) -> np.ndarray:
    """Per-LBA rows before any write: unseen, never relocated, not sampled."""
    rows = np.zeros(capacity, LBA_ROW)
    rows["ring_slot"] = -1
    rows["pred"] = ql.PRED_UNSEEN
    rows["prev"] = ql.PREV_NEVER
    return rows


class ShiroState(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    preds: np.ndarray  # int8 per write of the chunk: PRED_SHORT / PRED_LONG / PRED_UNSEEN
    rows: np.ndarray  # LBA_ROW per LBA: prediction, previous GC action, ring slot
    user_confusion: np.ndarray  # int64 [predicted short/long, actual short/long]
    gc_dest: np.ndarray  # int64 [source segment type, destination group]
    life: np.ndarray  # int64: lifetimes observed inside the current window (Algorithm 1)
    agent: ql.QTable
    credit: rl_credit.CreditAgent  # agent=credit (a 1-LBA placeholder otherwise); agent=oracle logs in its visits
    inv: np.ndarray  # agent=oracle: int64 per write (prefill included), user writes until it is overwritten
    death: np.ndarray  # agent=oracle: int64 per LBA, when its live version is overwritten (NEVER: not in the trace)
    qint: np.ndarray  # int8 Q-table of deployed=int8 (a 1 x 5 placeholder otherwise)
    seg_short: np.ndarray  # int32 per segment: valid blocks predicted short (eq1_segments=short_pages)
    seal_clock: np.ndarray  # int64 per segment: flash_clock at its seal (eq1_clock=flash)
    lba_writes: np.ndarray  # int64 per LBA: its user writes after the prefill (agent=frequency, credit_state=counts)
    lba_decayed: np.ndarray  # float64 per LBA: count_halflife's decayed count, as of lba_counted_at (else 1 entry)
    lba_counted_at: np.ndarray  # int64 per LBA: the user write (after the prefill) it was last counted at
    read_at: np.ndarray  # credit_state=counts_read: int64 per user write, first_read_clocks (else 1 entry)
    ring: RingArrays
    ring_windows: np.ndarray
    windows: np.ndarray


# -- features ------------------------------------------------------------------------------
@nb.njit(cache=True)
def _paper_is_seq(lba, nblocks, op, out):
    """Per block write (``out``, in order): 1 if its request is a write that, with it, the last
    ``SEQ_REQUESTS`` write requests hold a run of >= ``SEQ_BLOCKS`` consecutive blocks written in
    order ending with it."""
    ends = np.full(SEQ_REQUESTS, -1, np.int64)
    runs = np.zeros(SEQ_REQUESTS, np.int64)
    k = 0
    w = 0
    for i in range(lba.shape[0]):
        if op[i] != OP_WRITE:
            continue
        start = np.int64(lba[i])
        size = np.int64(nblocks[i])
        run = 0
        # the most recent of the last requests that ended where this one starts
        for j in range(1, SEQ_REQUESTS):
            slot = (k - j) % SEQ_REQUESTS
            if ends[slot] == start:
                run = runs[slot]
                break
        run += size
        flag = 1 if run >= SEQ_BLOCKS else 0
        for b in range(size):
            out[w + b] = flag
        w += size
        slot = k % SEQ_REQUESTS
        ends[slot] = start + size
        runs[slot] = run
        k += 1


def paper_is_seq(trace) -> np.ndarray:
    """Shiro's ``is_seq`` of every block write (int8): its request, together with the recent 32
    write requests, covers >= 128 KiB of consecutive data in sequential order. Written per block
    write in one pass (a paper-scale trace's request index per block write would take 8 GB)."""
    out = np.zeros(trace.block_writes.size, np.int8)
    _paper_is_seq(trace.lba, trace.nblocks, trace.op, out)
    return out


@nb.njit(cache=True, inline="always")
def _roll(epoch, writes, reads, k, e):
    """Entry ``k``'s counts ``[current, previous]`` moved on to epoch ``e``: the current span
    becomes the previous one after one epoch; both are dropped after more than one."""
    if epoch[k] != e:
        keep = epoch[k] == e - 1
        writes[k, 1] = writes[k, 0] if keep else 0
        reads[k, 1] = reads[k, 0] if keep else 0
        writes[k, 0] = 0
        reads[k, 0] = 0
        epoch[k] = e


@nb.njit(cache=True)
def _recent_counts(lba, nblocks, op, chunk_blocks, span, n_chunks, writes_out, reads_out, ratio_out):
    """Per block write (in order): the write and read requests that touched its ``chunk_blocks``
    chunk, and the global read / write block ratio (x 1000), counted over the current and the
    previous epoch of ``span`` block writes, before its request (every block of a request sees the
    same values). ``nblocks`` and ``op`` may be broadcast views (a generated trace's constants)."""
    epoch = np.full(n_chunks + 1, -1, np.int64)  # entry n_chunks: the global block counts
    writes = np.zeros((n_chunks + 1, 2), np.int64)
    reads = np.zeros((n_chunks + 1, 2), np.int64)
    g = n_chunks
    t = 0
    for i in range(lba.shape[0]):
        kind = op[i]
        if kind != OP_WRITE and kind != OP_READ:
            continue
        e = t // span
        start = np.int64(lba[i])
        size = np.int64(nblocks[i])
        lo = start // chunk_blocks
        hi = (start + size - 1) // chunk_blocks
        _roll(epoch, writes, reads, g, e)
        if kind == OP_READ:
            for c in range(lo, hi + 1):
                _roll(epoch, writes, reads, c, e)
                reads[c, 0] += 1
            reads[g, 0] += size
            continue
        w = writes[g, 0] + writes[g, 1]
        ratio = (reads[g, 0] + reads[g, 1]) * 1000 // w if w > 0 else 0
        for b in range(size):
            c = (start + b) // chunk_blocks
            _roll(epoch, writes, reads, c, e)
            writes_out[t + b] = writes[c, 0] + writes[c, 1]
            reads_out[t + b] = reads[c, 0] + reads[c, 1]
            ratio_out[t + b] = ratio
        for c in range(lo, hi + 1):
            writes[c, 0] += 1
        writes[g, 0] += size
        t += size


def recent_counts(trace, span: int, chunk_blocks: int = CHUNK_BLOCKS) -> dict:
    """``feature_counts=recent``: ``chunk_writes`` / ``chunk_reads`` as the write / read requests
    that touched the block's 2 MiB chunk, and ``rw_ratio_milli`` as the read / write block ratio
    (x 1000), over the current and the previous window of ``span`` user writes (Shiro: "the number
    of recent read/write requests targeting the larger chunk", "the global read/write ratio").
    Per block write of ``trace``, int32 (the digit inputs clip them to 16^4 - 1 anyway)."""
    n = trace.block_writes.size
    out = {name: np.zeros(n, np.int32) for name in RECENT_FEATURES}
    n_chunks = max(int(trace.max_lba) + 1, 1) // int(chunk_blocks) + 1
    _recent_counts(
        trace.lba, trace.nblocks, trace.op, int(chunk_blocks), max(1, int(span)), n_chunks,
        out["chunk_writes"], out["chunk_reads"], out["rw_ratio_milli"],
    )  # fmt: skip
    return out


def encode_windows(X: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """:func:`encode_digits` over windows ``[n, history, F]`` -> float32 ``[n, history, D]``."""
    X = np.asarray(X, np.float64)
    cols = []
    for f, nd in enumerate(digits):
        v = X[..., f]
        if nd == 0:
            cols.append(v[..., None])
            continue
        top = (1 << (4 * int(nd))) - 1
        iv = np.clip(v, 0, top).astype(np.int64)
        shifts = 4 * np.arange(int(nd) - 1, -1, -1)
        cols.append(((iv[..., None] >> shifts) & 15) / 15.0)
    return np.concatenate(cols, axis=-1).astype(np.float32)


def n_inputs(digits) -> int:
    return int(sum(max(1, int(d)) for d in digits))


@nb.njit(cache=True, nogil=True)
def gru_infer(lbas, X, digits, h_all, wih_t, whh_t, bih, bhh, wo, bo, no_prev, out, share_lo=0, share_hi=1, shares=1):
    """One GRU step per write ``i`` (features ``X[i, -1]``) from its LBA's cached state, which
    it replaces; ``out[i]`` = 0 short / 1 long (argmax of the head), 2 (unseen) for a first write
    (``latest_inv`` in column 0 at ``no_prev``). Only the writes whose LBA's share ``lba %
    shares`` (a power of two) is in ``share_lo .. share_hi - 1`` are stepped (default: all), so
    two threads can take disjoint shares: each LBA's writes stay in order on one thread."""
    H = h_all.shape[1]
    x = np.empty(wih_t.shape[0], np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    last = X.shape[1] - 1
    n = lbas.shape[0]
    mask = shares - 1
    for i in range(n):
        if i + STATE_PREFETCH < n:
            ahead = lbas[i + STATE_PREFETCH]
            if share_lo <= (ahead & mask) < share_hi:
                # the state (H floats, 128 bytes at 32) of a write ahead: a random row of a
                # capacity-sized table
                prefetch_span(h_all, ahead * H, H)
        lba = lbas[i]
        if not share_lo <= (lba & mask) < share_hi:
            continue
        encode_digits(X[i, last], digits, x)
        h = h_all[lba]
        gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh)
        out[i] = ql.PRED_UNSEEN if X[i, last, 0] >= no_prev else gru_head_class(h, wo, bo)


# -- the placement functions (Numba, inlined into the engine's loop) ------------------------
@nb.njit(cache=True, inline="always")
def _eq1_place(s, p, st, g, short):
    """Eq. 1's bookkeeping for a block about to be appended to group ``g`` (``short``: predicted
    short-living), where the engine will put it (:func:`dogi_ml.sim.kernels._append`): with
    ``eq1_clock=flash`` a full open segment of ``g`` is sealed by this append (its ``seal_clock``)
    and the clock advances; with ``eq1_segments=short_pages`` the destination segment (the open
    one, else the next free one, else the spill's: the open segment with the most room) counts
    the block."""
    seg = s.open_seg[g]
    full = seg < 0 or s.seg_wp[seg] == s.prm[P_SEG_BLOCKS]
    if st.eq1_flash != 0:
        if seg >= 0 and full:
            p.seal_clock[seg] = st.flash_clock
        st.flash_clock += 1
    if short and st.eq1_segments == 1:
        if full:
            nfree = s.ctr[C_FREE]
            seg = s.free_stack[nfree - 1] if nfree > 0 else s.open_seg[_roomiest_group(s)]
        p.seg_short[seg] += 1


@nb.njit(cache=True, inline="always")
def band_level(x, t):
    """The GC level (0-based) of ``x`` in ``ORACLE_BANDS`` of the threshold ``t``: below ``t`` the
    first, below ``4t`` the second, ..., at or above ``64t`` the last (agent=oracle on the true
    remaining lifetime, agent=frequency on the expected one)."""
    a = 0
    while a < len(ORACLE_BANDS) and x >= ORACLE_BANDS[a] * t:
        a += 1
    return a


@nb.njit(cache=True, inline="always")
def ratio_bin(x, t):
    """Half-octave bin of ``x / t`` (both > 0): ``floor(2 log2(x / t)) + RATIO_OFFSET`` clipped to
    ``0 .. RATIO_BINS - 1``."""
    if x <= 0 or t <= 0:
        return 0
    b = np.int64(np.floor(2.0 * np.log2(x / t))) + RATIO_OFFSET
    return min(max(b, 0), RATIO_BINS - 1)


@nb.njit(cache=True)
def count_state(writes, counted, age, t, seg_type):
    """credit_state=counts: the state of a block about to be relocated from the LBA's ``writes``
    among ``counted`` user writes (its expected lifetime ``counted / writes``, bin ``RATIO_BINS``
    when none is counted), its ``age`` (since its user write), both binned against the threshold
    ``t``, and its victim's segment type; ``(count_bin x RATIO_BINS + age_bin) x 8 + seg_type``."""
    expected = counted / writes if writes > 0 else 0.0
    return count_state_of(expected, writes > 0, age, t, seg_type)


@nb.njit(cache=True, inline="always")
def count_state_of(expected, counted, age, t, seg_type):
    """:func:`count_state` from the LBA's ``expected`` lifetime (``counted``: False when none is
    counted: bin ``RATIO_BINS``)."""
    cb = ratio_bin(expected, t) if counted else RATIO_BINS
    return (cb * RATIO_BINS + ratio_bin(max(age, 1), t)) * N_GROUPS + seg_type


@nb.njit(cache=True, inline="always")
def decayed_count(p, st, lba):
    """count_halflife: the LBA's count decayed to now (``st.freq_clock`` user writes after the
    prefill), each of its writes weighing ``exp(-lambda x its age)``."""
    return p.lba_decayed[lba] * np.exp(-st.count_decay * (st.freq_clock - p.lba_counted_at[lba]))


@nb.njit(cache=True, inline="always")
def expected_lifetime(p, st, lba):
    """The LBA's expected lifetime from its write count (agent=frequency, credit_state=counts):
    the user writes counted over the LBA's, ``freq_clock / c``; with count_halflife both decay
    (``lambda = ln 2 / half-life``): ``(1 - exp(-lambda freq_clock)) / lambda`` over the decayed
    count, so the estimate follows a workload whose popularity moves. 0.0 when none is counted."""
    c = p.lba_writes[lba]
    if c <= 0:
        return 0.0
    lam = st.count_decay
    if lam <= 0.0:
        return st.freq_clock / c
    return -np.expm1(-lam * st.freq_clock) / lam / decayed_count(p, st, lba)


@nb.njit(cache=True, inline="always")
def _simulated_lba(x, capacity, written):
    """The simulator's LBA of the trace's block ``x``: its index among the ``written`` LBAs (sorted)
    when the run compacted them, else ``x`` itself; -1 for a block the run never writes."""
    if written.shape[0] > 0:
        i = np.searchsorted(written, x)
        return i if i < written.shape[0] and written[i] == x else -1
    return x if 0 <= x < capacity else -1


@nb.njit(cache=True)
def _first_read_clocks(prefill, lba, nblocks, op, capacity, written, out):
    live = np.full(capacity, -1, np.int64)  # per LBA: its live write, while no read has followed it
    for w in range(prefill):  # the prefill writes LBA w as user write w (dogi_ml/sim/engine.py)
        live[w] = w
    clock = prefill  # the user write the next request comes before
    for r in range(lba.shape[0]):
        if op[r] != OP_WRITE and op[r] != OP_READ:
            continue
        for b in range(nblocks[r]):
            x = _simulated_lba(lba[r] + b, capacity, written)
            if op[r] == OP_WRITE:
                live[x] = clock
                clock += 1
            elif x >= 0 and live[x] >= 0:
                out[live[x]] = clock
                live[x] = -1
    return clock


def first_read_clocks(trace, prefill_blocks: int, capacity: int) -> np.ndarray:
    """Per user write ``w`` (the simulator's clock: the prefill's writes first), the user write
    before which the first read of its LBA after it comes, ``NEVER`` if the LBA is written again
    (or the trace ends) before any read. ``credit_state=counts_read`` reads it only as
    ``first_read_clocks[w] <= now``: the LBA has been read since write ``w`` by the time of the
    decision at user write ``now``, which a device knows (a read that comes later leaves the bit
    unset; tests/test_shiro.py checks that cutting every read after a point changes nothing before
    it). LBAs are the simulator's: a trace whose written blocks do not fit ``capacity`` has them
    compacted in order to ``0 .. wss - 1`` (:func:`dogi_ml.traces.trace.lbas_to_compact`), and its
    reads are mapped alike; a read of a block the run never writes is ignored."""
    if prefill_blocks not in (0, capacity):
        raise ValueError(
            f"first_read_clocks: a prefill of {prefill_blocks} blocks; the simulator writes 0 or {capacity}"
        )
    writes = trace.block_writes
    written = lbas_to_compact(writes, capacity)
    written = np.zeros(0, np.int64) if written is None else written
    if written.size > capacity:
        raise ValueError(f"first_read_clocks: {written.size} written blocks do not fit a capacity of {capacity}")
    out = np.full(prefill_blocks + writes.size, NEVER, np.int64)
    end = _first_read_clocks(prefill_blocks, trace.lba, trace.nblocks, trace.op, capacity, written, out)
    assert end == out.size, (end, out.size)
    return out


def count_state_table(gamma: float, start: str = "hierarchical") -> np.ndarray:
    """credit_state=counts' starting table, as :func:`dogi_ml.rl.credit.initial_table` for Table I:
    the rule's level at 0, the others at ``-1/(1-gamma)``; the rule is the hierarchical one (by the
    victim's segment type) or agent=frequency's (by the count bin: its bands of T)."""
    states = np.arange(N_COUNT_STATES)
    if start == "frequency":
        cb = states // (RATIO_BINS * N_GROUPS)
        edges = [RATIO_OFFSET + 2 * int(np.log2(b)) for b in ORACLE_BANDS]  # bins where E = band x T
        rule = np.searchsorted(np.asarray(edges), cb, side="right")
        rule[cb == RATIO_BINS] = N_GC - 1
    else:
        seg_type = states % N_GROUPS
        rule = np.array([ql.hierarchical_action(t) for t in range(N_GROUPS)])[seg_type]
    q = np.full((N_COUNT_STATES, ql.N_ACTIONS), -1.0 / (1.0 - float(gamma)))
    q[np.arange(N_COUNT_STATES), rule] = 0.0
    return q


# shiro_user, shiro_gc and count_and_sample (policies/_sequence.py) are inline="always"
# (dogi_ml/sim/_loop_template.py says why): on zipf 1 GiB 5.7 M appends per CPU second before,
# 19.2 M after.
@nb.njit(cache=True, inline="always")
def shiro_user(s, p, lba, now):
    st = p.scalars[0]
    row = p.rows[lba]  # a reference: its fields are read and written in place
    if st.eq1_segments == 1 and row.pred == ql.PRED_SHORT and s.l2p[lba] >= 0:
        p.seg_short[segment_of(s, s.l2p[lba])] -= 1  # its old copy (invalidated just before)
    last = s.lba_time[lba]
    if last >= 0:
        v = now - last
        pc = row.pred
        if pc == ql.PRED_SHORT or pc == ql.PRED_LONG:
            p.user_confusion[pc, 0 if v <= st.hot_threshold else 1] += 1
        ring_fill(p.ring, lba, v)
        if (last >= st.window_start or st.life_any != 0) and st.n_life < p.life.shape[0]:
            p.life[st.n_life] = v  # one lifetime sample (lifetime_window: a rewrite inside the window / any rewrite)
            st.n_life += 1
    row.prev = ql.PREV_NEVER
    if now >= st.prefill and p.lba_writes.shape[0] > 1:
        p.lba_writes[lba] += 1
        st.freq_clock += 1
        if st.count_decay > 0.0:
            p.lba_decayed[lba] = decayed_count(p, st, lba) + 1.0
            p.lba_counted_at[lba] = st.freq_clock
    if st.agent == A_CREDIT and s.l2p[lba] >= 0:
        p.credit.scalars[0].unit = st.hot_threshold  # hindsight: bands of the current T, as the oracle's
        rl_credit.on_invalidate(p.credit, lba, segment_of(s, s.l2p[lba]), now)  # its old copy died
    elif st.agent == A_ORACLE:
        d = p.inv[now]
        p.death[lba] = now + d if d < NEVER else NEVER
    if now < st.prefill:
        row.pred = ql.PRED_UNSEEN
        _eq1_place(s, p, st, G_UNSEEN, False)
        return G_UNSEEN
    pred = ql.PRED_UNSEEN
    if st.mode == 1:
        pred = p.preds[now - st.chunk_start]
    row.pred = pred
    count_and_sample(st, p.ring, p.ring_windows, p.windows, lba, now, pred if pred != ql.PRED_UNSEEN else -1)
    _eq1_place(s, p, st, pred, pred == ql.PRED_SHORT)
    return pred  # PRED_SHORT / PRED_LONG / PRED_UNSEEN are groups 0 / 1 / 2


@nb.njit(cache=True, inline="always")
def shiro_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    seg_type = s.seg_group[victim]  # groups are Table I's segment types
    row = p.rows[lba]
    mode = st.agent
    if mode == A_QLEARNING:
        state = ql.encode_binned_state(
            ql.lifetime_bin(now - s.lba_time[lba]), st.victim_bin, seg_type, row.pred, row.prev
        )
        if st.int8 != 0:
            a = ql.greedy_action(p.qint, state)
        else:
            a = ql.choose_action(p.agent, state)
            ql.record_decision(p.agent, state, a)
        if a < 0:
            return -1
    elif mode == A_CREDIT:
        if st.count_state != 0:
            e = expected_lifetime(p, st, lba)
            state = count_state_of(e, p.lba_writes[lba] > 0, now - s.lba_time[lba], st.hot_threshold, seg_type)
            if p.read_at.shape[0] > 1 and p.read_at[s.lba_time[lba]] <= now:  # read since its user write
                state += N_COUNT_STATES
                st.read_decisions += 1
        else:
            state = ql.encode_binned_state(
                ql.lifetime_bin(now - s.lba_time[lba]), st.victim_bin, seg_type, row.pred, row.prev
            )
        if st.int8 != 0:
            a = ql.greedy_action(p.qint, state)
        else:
            a = rl_credit.choose_action(p.credit, state)
            rl_credit.on_relocate(p.credit, lba, state, a, now)
        if a < 0:
            return -1
    elif mode == A_ORACLE:
        # perfect knowledge: the band of the block's true remaining lifetime
        a = band_level(p.death[lba] - now, st.hot_threshold)
    elif mode == A_FREQUENCY:
        # the band of the LBA's expected lifetime from its write count (memoryless: also its
        # expected remaining lifetime); the top level for an LBA with no counted write
        a = band_level(expected_lifetime(p, st, lba), st.hot_threshold) if p.lba_writes[lba] > 0 else N_GC - 1
    elif mode == A_HIERARCHICAL:
        a = 0 if seg_type < G_GC1 else min(seg_type - G_GC1 + 1, N_GC - 1)
    elif mode == A_SEPBIT_AGE:
        if seg_type == G_SHORT:
            a = 0
        else:
            age = now - s.lba_time[lba]
            t = st.hot_threshold
            a = 1 if age < 4 * t else (2 if age < 16 * t else 3)
    else:
        a = 0
    if mode != A_QLEARNING and mode != A_CREDIT and p.credit.visits.shape[0] > 1:
        # a rule's level logged per Table I state (oracle_table projects the rule on the states)
        state = ql.encode_binned_state(
            ql.lifetime_bin(now - s.lba_time[lba]), st.victim_bin, seg_type, row.pred, row.prev
        )
        if state >= 0:
            p.credit.visits[state, a] += 1
    row.prev = a
    g = G_GC1 + a
    p.gc_dest[seg_type, g] += 1
    _eq1_place(s, p, st, g, row.pred == ql.PRED_SHORT)
    return g


@nb.njit(cache=True)
def shiro_reclaim(s, p, victim, now):
    st = p.scalars[0]
    valid = s.seg_valid[victim]
    st.victim_valid = valid
    st.victim_bin = ql.valid_bin(valid, s.prm[P_SEG_BLOCKS])
    p.seg_short[victim] = 0  # its valid blocks are counted again where they are relocated to
    if st.agent == A_QLEARNING and st.int8 == 0:
        ql.on_gc(p.agent, s.prm[P_SEG_BLOCKS] - valid)
    elif st.agent == A_CREDIT:
        rl_credit.on_reclaim(p.credit, victim, now, valid)


@nb.njit(cache=True, inline="always")
def shiro_prefetch(p, lba):
    """The engine's cache hint for the per-LBA entries the placement functions touch (no effect
    on results)."""
    prefetch(p.rows, lba)  # the ring's pending slot is a field of the same row


# -- Algorithm 1 ---------------------------------------------------------------------------
class ThresholdSearch:
    """Shiro's classification threshold adjustment (Algorithm 1).

    :meth:`pick` takes the window's lifetime samples and ``score(t)``, the accuracy of a
    lightweight model on the window's data labelled with threshold ``t``. First call: the
    inflection point (:func:`cdf_knee`). Then: ``p`` = percentile of the previous threshold
    among the samples; candidates at ``p - step, p, p + step`` (in that order, clipped to
    ``[0, 100]``; the first strictly best wins); an *adjustment* is a new threshold value
    different from the previous one, its direction the sign of the change. Step rules, against
    the previous window: no adjustment in both -> ``step + 1``; adjusted before, not now ->
    ``step - 1``; both adjusted, opposite directions -> ``step - 1``; same direction ->
    ``step + 1`` (not adjusted before, adjusted now: unchanged); then ``step = min(|step|, 10)``.
    """

    def __init__(self, step: int = 5, max_step: int = 10):
        if int(step) < 0 or int(max_step) < 1:
            raise ValueError(f"Algorithm 1 needs step >= 0 and max_step >= 1, got {step}, {max_step}")
        self.step = int(step)
        self.max_step = int(max_step)
        self.threshold: int | None = None
        self.last_direction = 0  # 0: no adjustment in the previous window
        self.log: list[dict] = []

    def pick(self, lifetimes: np.ndarray, score) -> int:
        L = np.sort(np.asarray(lifetimes, np.float64))
        if L.size == 0:
            raise ValueError("Algorithm 1 needs at least one lifetime sample in the window")
        if self.threshold is None:
            self.threshold = cdf_knee(L)
            self.log.append({"threshold": self.threshold, "rule": "inflection point"})
            return self.threshold
        prev = self.threshold
        p = 100.0 * np.searchsorted(L, prev, side="right") / L.size
        best_acc, best_t, tried = 0.0, prev, []
        for d in (-1, 0, 1):
            q = min(100.0, max(0.0, p + d * self.step))
            t = max(1, int(np.percentile(L, q, method="lower")))
            acc = float(score(t))
            tried.append((t, acc))
            if acc > best_acc:
                best_acc, best_t = acc, t
        cur = int(np.sign(best_t - prev))
        last = self.last_direction
        if last == 0 and cur == 0:
            self.step += 1
        elif last != 0 and cur == 0:
            self.step -= 1
        elif last != 0 and cur != last:
            self.step -= 1
        elif last != 0 and cur == last:
            self.step += 1
        self.step = min(abs(self.step), self.max_step)
        self.last_direction = cur
        self.threshold = best_t
        self.log.append({"threshold": best_t, "percentile": p, "candidates": tried, "step": self.step})
        return best_t


def logistic_accuracy(X: np.ndarray, y: np.ndarray, seed: int, max_per_class: int = 2000) -> float:
    """Algorithm 1's ``TrainEvalLightModel``: resample to balanced classes (the minority's count,
    at most ``max_per_class`` each), fit a class-balanced logistic regression on 70% and return
    its accuracy on the other 30%; 0 when a class has fewer than 10 samples."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    idx = [np.flatnonzero(y == c) for c in (0, 1)]
    n = min(len(idx[0]), len(idx[1]), int(max_per_class))
    if n < 10:
        return 0.0
    pick = np.concatenate([rng.choice(i, n, replace=False) for i in idx])
    Xb, yb = X[pick], y[pick]
    Xtr, Xte, ytr, yte = train_test_split(Xb, yb, test_size=0.3, stratify=yb, random_state=seed)
    lr = LogisticRegression(class_weight="balanced", solver="liblinear", max_iter=300)  # lbfgs: 20x slower here
    lr.fit(Xtr, ytr)
    return float(lr.score(Xte, yte))


# -- the policy ----------------------------------------------------------------------------
@register
class Shiro(SequencePolicy):
    name = "shiro"
    victim = "adjusted_greedy"  # policy.victim: Eq. 1
    default_groups = N_GROUPS
    place_user = shiro_user
    place_gc = shiro_gc
    on_reclaim = shiro_reclaim
    prefetch_lba = shiro_prefetch

    MODEL = "gru"
    MODEL_DEFAULTS = {"hidden": 32, "epochs": 30, "patience": 3, "batch_size": 256, "lr": 1e-3}
    LOG_INPUTS = False  # the digits take raw values
    SPLIT_INFERENCE = True  # by LBA: each LBA's steps stay in order on one thread
    WINDOWS_AHEAD = False  # the first model's states are built from the rows at the chunk's end
    OUTPUT_DTYPE = np.int8
    DEFAULTS = {
        "features": SHIRO_FEATURES,
        "digits": [6, 3, 0, 4, 4, 4],  # hexadecimal digits per feature (0: a flag, one neuron)
        "history": 20,  # training sequences capped at 20 steps
        "window": 0.05,  # labelling/training window, share of the capacity in user writes
        "lifetime_window": "within",  # Algorithm 1's samples: rewrites of pages written in the window, or any
        "feature_counts": "cumulative",  # chunk_write/chunk_read/rw_rat: since the start, or recent requests
        "eq1_segments": "short_group",  # Adjusted Greedy discounts: the short group's segments | short_pages | all
        "eq1_clock": "user",  # Eq. 1's C: user writes since the seal | flash (user and GC writes)
        "hot_threshold": None,  # None = Algorithm 1; an integer fixes T
        "step": 5,  # Algorithm 1's initial step (percentiles)
        "max_step": 10,
        "lr_max_per_class": 2000,  # balanced logistic-regression sets: samples per class at most
        "agent": "qlearning",
        "deployed": None,  # None: online agent; float / int8: the frozen table `qtable`, greedy
        "qtable": None,  # float Q-table (.npy path or array) for deployed / as the initial table
        "save_qtable": None,  # write the final float Q-table here (.npy)
        "epsilon": ql.DEFAULT_EPSILON,
        "alpha": ql.DEFAULT_ALPHA,
        "gamma": ql.DEFAULT_GAMMA,
        "horizon": ql.DEFAULT_HORIZON,
        "credit_gamma": rl_credit.DEFAULT_GAMMA,  # agent=credit: discount of a block's further copies
        "credit_dead_cost": 0.0,  # agent=credit: weight of a dead block's idle share (its slot dead until the reclaim)
        "credit_reward": "block",  # agent=credit: block (-1 per further copy) | segment (its segment's valid share at reclaim) | hindsight (every level against the band its block's remaining lifetime fell in)
        "credit_quantile": 0.5,  # credit_reward=hindsight: a level too low costs this, too high 1 - this (the level chosen: this quantile of the right ones)
        "credit_state": "table1",  # agent=credit: Table I's state | counts (the LBA's write count and age, count_state)
        "credit_start": "hierarchical",  # credit_state=counts: the starting rule, hierarchical | frequency
        "count_halflife": None,  # agent=frequency / credit_state=counts: capacities after which a write counts half (None: never)
        "retrain_every": None,  # None = window x capacity
        "sample_every": None,  # None: 10 (Shiro's 10% sample), fewer if a window would give < min_window_samples
        "min_window_samples": 1000,
        # a window's epoch trains on the second thread while the next window runs; its model
        # serves from the window after (false: trained before the next window, one thread)
        "background_training": True,
    }

    def __init__(self, n_groups=N_GROUPS, **params):
        if int(n_groups) != N_GROUPS:
            raise ValueError(
                f"policy shiro has exactly {N_GROUPS} groups (3 user + {N_GC} GC levels), got n_groups={n_groups}"
            )
        self.sample_auto = params.get("sample_every") is None
        if self.sample_auto:
            params = {**params, "sample_every": 10}  # checked here, sized to the window at bind
        super().__init__(n_groups, **params)
        c = self.cfg
        if not isinstance(c["background_training"], (bool, np.bool_)):
            raise ValueError(
                f"policy shiro: background_training must be true or false, got {c['background_training']!r}"
            )
        # a negative weight rewarded a slot for staying dead (rl/credit.py's dead branch runs on
        # any non-zero weight); it ran without a word
        checked_setting(c["credit_dead_cost"], "policy.params.credit_dead_cost", float, minimum=0, example=0.5)
        if int(c["min_window_samples"]) < 1:
            raise ValueError(f"policy shiro: min_window_samples must be >= 1, got {c['min_window_samples']}")
        if c["agent"] not in AGENTS:
            raise ValueError(f"policy shiro: agent must be one of {', '.join(AGENTS)}, got {c['agent']!r}")
        if c["deployed"] not in DEPLOYED:
            raise ValueError(f"policy shiro: deployed must be null, float or int8, got {c['deployed']!r}")
        if c["deployed"] is not None and c["agent"] not in LEARNED_AGENTS:
            raise ValueError(
                f"policy shiro: deployed={c['deployed']} runs a Q-table, so it needs agent=qlearning or credit "
                f"(got agent={c['agent']})"
            )
        if c["features"][0] != "latest_inv":
            raise ValueError(
                f"policy shiro: features must start with latest_inv (prev_lifetime: its 'no previous write' "
                f"marks unseen pages), got {c['features']}"
            )
        if len(c["digits"]) != len(c["features"]) or any(int(d) < 0 or int(d) > 15 for d in c["digits"]):
            raise ValueError(
                f"policy shiro: digits needs one entry in 0..15 per feature ({len(c['features'])}), got {c['digits']}"
            )
        if c["lifetime_window"] not in LIFETIME_WINDOWS:
            raise ValueError(
                f"policy shiro: lifetime_window must be one of {', '.join(LIFETIME_WINDOWS)}, got {c['lifetime_window']!r}"
            )
        if c["feature_counts"] not in FEATURE_COUNTS:
            raise ValueError(
                f"policy shiro: feature_counts must be one of {', '.join(FEATURE_COUNTS)}, got {c['feature_counts']!r}"
            )
        for key, known in (("eq1_segments", EQ1_SEGMENTS), ("eq1_clock", EQ1_CLOCKS)):
            if c[key] not in known:
                raise ValueError(f"policy shiro: {key} must be one of {', '.join(known)}, got {c[key]!r}")
        if not 0.0 < float(c["window"]) <= 1.0:
            raise ValueError(f"policy shiro: window is a share of the capacity in (0, 1], got {c['window']}")
        t = c["hot_threshold"]
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1):
            raise ValueError(
                f"policy shiro: hot_threshold must be null (Algorithm 1) or a positive number of blocks, got {t!r}"
            )
        # the learners' numbers by their keys (dogi_ml.rl's own checks name only "gamma", which
        # is two settings here: the paper agent's and the credit agent's)
        learning = {
            "step": dict(minimum=0, example=5),
            "max_step": dict(minimum=1, example=10),
            "horizon": dict(minimum=1, example=ql.DEFAULT_HORIZON),
            "epsilon": dict(minimum=0.0, maximum=1.0, example=ql.DEFAULT_EPSILON),
            "alpha": dict(above=0.0, maximum=1.0, example=ql.DEFAULT_ALPHA),
            "gamma": dict(minimum=0.0, below=1.0, example=ql.DEFAULT_GAMMA),
            "credit_gamma": dict(minimum=0.0, below=1.0, example=rl_credit.DEFAULT_GAMMA),
        }
        for key, bounds in learning.items():
            kind = int if key in ("step", "max_step", "horizon") else float
            checked_setting(c[key], f"policy.params.{key}", kind, **bounds)
        for key, readers in LEARNER_PARAMS.items():
            # under another agent a value set was dropped without a word (the rules learn nothing)
            if c[key] != self.DEFAULTS[key] and c["agent"] not in readers:
                agents = " or ".join(f"agent={a}" for a in readers)
                raise ConfigError(
                    f"policy.params.{key}={c[key]} is read by {agents}, and policy.params.agent={c['agent']}",
                    f"set policy.params.agent={readers[0]} or drop policy.params.{key}",
                )
        self.search = ThresholdSearch(int(c["step"]), int(c["max_step"]))  # checks step values
        # the agent's parameters fail here, not at bind
        ql.new_qtable(1, horizon=int(c["horizon"]), alpha=float(c["alpha"]), gamma=float(c["gamma"]),
                      epsilon=float(c["epsilon"]), epoch_capacity=1)  # fmt: skip
        # credit's own parameters (dogi_ml.rl.credit): fail here, not at bind
        rl_credit.new_credit_agent(1, gamma=float(c["credit_gamma"]), alpha=float(c["alpha"]),
                                   epsilon=float(c["epsilon"]), initial=np.zeros((1, 1)))  # fmt: skip
        if c["credit_state"] not in CREDIT_STATES:
            raise ValueError(
                f"policy shiro: credit_state must be one of {', '.join(CREDIT_STATES)}, got {c['credit_state']!r}"
            )
        for key, known in (("credit_reward", CREDIT_REWARDS), ("credit_start", ("hierarchical", "frequency"))):
            if c[key] not in known:
                raise ValueError(f"policy shiro: {key} must be one of {', '.join(known)}, got {c[key]!r}")
        if c["credit_start"] != "hierarchical" and c["credit_state"] not in COUNT_STATES:
            raise ValueError(
                f"policy shiro: credit_start={c['credit_start']} starts the count state's table; "
                "set credit_state=counts (or counts_read) or drop credit_start"
            )
        if c["credit_reward"] != "block" and c["agent"] != "credit":
            raise ValueError(
                f"policy shiro: credit_reward={c['credit_reward']} is agent=credit's; set agent=credit or drop "
                f"credit_reward (got agent={c['agent']})"
            )
        q = c["credit_quantile"]
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 < q < 1.0:
            raise ValueError(f"policy shiro: credit_quantile must be a number in (0, 1), got {q!r}")
        if q != self.DEFAULTS["credit_quantile"] and c["credit_reward"] != "hindsight":
            raise ValueError(
                f"policy shiro: credit_quantile={q} weighs the hindsight credit's levels; set "
                f"credit_reward=hindsight or drop credit_quantile (got credit_reward={c['credit_reward']})"
            )
        if c["credit_state"] != "table1" and c["agent"] != "credit":
            raise ValueError(
                f"policy shiro: credit_state={c['credit_state']} is agent=credit's state; set agent=credit "
                f"or drop credit_state (got agent={c['agent']})"
            )
        halflife = c["count_halflife"]
        if halflife is not None:
            if isinstance(halflife, bool) or not isinstance(halflife, (int, float)) or not halflife > 0:
                raise ValueError(f"policy shiro: count_halflife must be > 0 (capacities) or null, got {halflife!r}")
            if c["agent"] != "frequency" and c["credit_state"] not in COUNT_STATES:
                raise ValueError(
                    f"policy shiro: count_halflife={halflife} decays the write counts of agent=frequency and "
                    f"credit_state=counts or counts_read; set one of them or drop count_halflife (got agent={c['agent']})"
                )
        self.initial_q = self._load_qtable(c["qtable"], c["credit_state"], c["count_halflife"])
        if c["deployed"] is not None and self.initial_q is None:
            raise ValueError(
                f"policy shiro: deployed={c['deployed']} needs params.qtable (a float Q-table saved with "
                "params.save_qtable=PATH.npy by a learning run)"
            )
        self.digits = np.asarray([int(d) for d in c["digits"]], np.int64)
        self._training_pool = None  # the background epochs' thread, started on first use
        self.needs_future = c["agent"] == "oracle"  # the engine hands its bind the whole write stream
        self.window_from_share = c["retrain_every"] is None

    @staticmethod
    def _load_qtable(q, credit_state: str = "table1", count_halflife=None):
        """The float Q-table ``qtable`` names (a ``.npy`` path or an array), checked against the
        state it will be read with: Table I's 90,000 states, or the count state's
        ``N_COUNT_STATES`` (``credit_state=counts``; twice as many for ``counts_read``). A table a
        run saved has its state beside it (``PATH.json``, :meth:`_save_qtable`): a count-state table
        read with another half-life would put every block in another state's row, so that is
        refused too."""
        if q is None:
            return None
        if isinstance(q, (str, Path)):
            path = Path(q)
            if not path.exists():
                raise ValueError(f"policy shiro: qtable file {path} does not exist (save one with params.save_qtable)")
            saved = path.with_suffix(".json")
            if saved.exists():
                meta = json.loads(saved.read_text())
                run = {"credit_state": credit_state, "count_halflife": count_halflife}
                for key, value in run.items():
                    if key in meta and meta[key] != value:
                        raise ValueError(
                            f"policy shiro: qtable {path} was learned with {key}={meta[key]} ({saved}), "
                            f"this run has {key}={value}: set policy.params.{key}={meta[key]}"
                        )
            q = np.load(path)
        q = np.asarray(q, np.float64)
        n_states = STATE_ROWS.get(credit_state, ql.N_STATES)
        if q.shape != (n_states, ql.N_ACTIONS):
            raise ValueError(
                f"policy shiro: qtable must have shape ({n_states}, {ql.N_ACTIONS}) for credit_state={credit_state}, "
                f"got {q.shape}"
            )
        return q

    def _save_qtable(self, q: np.ndarray, credit_state: str, count_halflife) -> str:
        """``save_qtable``: the float table as ``PATH.npy`` and the state it indexes as
        ``PATH.json`` (read back by :meth:`_load_qtable`)."""
        path = Path(self.cfg["save_qtable"])
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, q)
        meta = {"credit_state": credit_state, "count_halflife": count_halflife}
        path.with_suffix(".json").write_text(json.dumps(meta) + "\n")
        return str(path)

    #: the readings of the paper's text a label names when off their default (Algorithm 1's
    #: samples, the classifier's count features, Eq. 1's discounted segments and clock)
    READINGS = (
        ("lifetime_window", "life"),
        ("feature_counts", "counts"),
        ("eq1_segments", "eq1"),
        ("eq1_clock", "clock"),
    )

    def readings(self) -> list[str]:
        """``short=value`` tags of the reading switches off the paper-text default, and a fixed ``T``."""
        c = self.cfg
        tags = [f"{short}={c[key]}" for key, short in self.READINGS if c[key] != self.DEFAULTS[key]]
        if c["hot_threshold"] is not None:
            tags.append(f"T={c['hot_threshold']}")
        return tags

    def label(self) -> str:
        c = self.cfg
        victim = self.victim_rule or self.victim  # the run's rule once bound (policy.victim may follow sim.victim)
        readings = self.readings()
        if c["agent"] == "single" and victim == "adjusted_greedy" and not c["deployed"] and not readings:
            return "shiro-NG"
        tag = [c["agent"]] if c["agent"] != "qlearning" else []
        if c["deployed"]:
            tag.append(c["deployed"])
            if c["agent"] == "credit" and isinstance(c["qtable"], (str, Path)):
                tag.append(Path(c["qtable"]).stem)  # which saved table (the credit agent's or the oracle's)
        if c["agent"] == "credit":
            for key, short in (
                ("credit_state", "state"),
                ("credit_reward", "reward"),
                ("credit_start", "start"),
                ("credit_quantile", "quantile"),
                ("alpha", "alpha"),
                ("epsilon", "epsilon"),
            ):
                if c[key] != self.DEFAULTS[key]:
                    tag.append(f"{short}={c[key]}")
        if c["count_halflife"] is not None:
            tag.append(f"halflife={c['count_halflife']}")
        tag += readings
        if victim != "adjusted_greedy":
            tag.append(str(victim))
        return "shiro" + (f"[{','.join(tag)}]" if tag else "")  # shiro_cb too: its victim is in the tag

    # -- setup -----------------------------------------------------------------------------
    def bind(self, ctx: SimContext) -> tuple:
        if ctx.trace is None:
            raise ValueError(
                "policy shiro needs the trace (its features) to run its classifier: "
                "use the simulate command or pass trace= to the Simulator"
            )
        if self.window_from_share:
            self.cfg["retrain_every"] = max(1, int(round(float(self.cfg["window"]) * ctx.capacity)))
        self.window_blocks = int(self.cfg["retrain_every"])
        if self.sample_auto:
            # Shiro samples 10% of windows of ~1.7M writes; a small device's window of a few
            # thousand writes would leave Algorithm 1's probes a few dozen noisy samples
            self.cfg["sample_every"] = max(1, min(10, self.window_blocks // int(self.cfg["min_window_samples"])))
        self.search = ThresholdSearch(int(self.cfg["step"]), int(self.cfg["max_step"]))
        self.h_all = None
        self.optimizer = None
        self.window_train_s: list[float] = []
        self._training = None  # the background epoch running: (future, its history entry)
        self.background_train_s = 0.0
        self.training_wait_s = 0.0  # the simulation waiting for a background epoch to finish
        self.window_cut = -1
        state = super().bind(ctx)
        assert self.max_chunk_blocks <= MAX_CHUNK
        return state

    def _ring_pending(self, capacity: int) -> np.ndarray:
        # the per-LBA rows are made here: the sample ring, built before the state, keeps its
        # pending slots in their ring_slot field
        self.lba_rows = new_lba_rows(capacity)
        return self.lba_rows["ring_slot"]

    def _feature_overrides(self, ctx: SimContext) -> dict | None:
        names = self.cfg["features"]
        out = {}
        if "sequential" in names:
            out["sequential"] = paper_is_seq(ctx.trace)
        if self.cfg["feature_counts"] == "recent" and any(f in names for f in RECENT_FEATURES):
            counts = recent_counts(ctx.trace, self.window_blocks)
            out.update({f: v for f, v in counts.items() if f in names})
        return out or None

    def _bind_state(self, ctx: SimContext) -> tuple:
        c = self.cfg
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.hot_threshold = int(c["hot_threshold"]) if c["hot_threshold"] is not None else 1
        st.short_group = G_SHORT
        st.life_any = int(c["lifetime_window"] == "any")
        st.eq1_segments = EQ1_SEGMENTS.index(c["eq1_segments"])
        st.eq1_flash = int(c["eq1_clock"] == "flash")
        st.agent = AGENTS.index(c["agent"])
        st.int8 = int(c["deployed"] == "int8")
        frozen = c["deployed"] is not None or c["agent"] != "qlearning"
        credit_on = c["agent"] == "credit"
        oracle = c["agent"] == "oracle"
        counts = c["agent"] == "frequency" or c["credit_state"] in COUNT_STATES
        st.count_state = int(c["credit_state"] in COUNT_STATES)
        if counts and c["count_halflife"] is not None:
            st.count_decay = np.log(2.0) / (float(c["count_halflife"]) * ctx.capacity)
        # a rule's levels are logged per state when its table is to be saved (always for the oracle)
        log_rule = oracle or (c["agent"] not in LEARNED_AGENTS and bool(c["save_qtable"]))
        if credit_on:
            initial = self.initial_q
            if st.count_state and initial is None:
                initial = count_state_table(float(c["credit_gamma"]), c["credit_start"])
                if c["credit_state"] == "counts_read":  # the same rule whether read or not
                    initial = np.concatenate([initial, initial])
        else:
            initial = np.zeros((ql.N_STATES if log_rule else 1, ql.N_ACTIONS))  # a rule's log, or nothing
        credit = rl_credit.new_credit_agent(
            self.capacity if credit_on else 1,
            gamma=float(c["credit_gamma"]),
            alpha=float(c["alpha"]),
            epsilon=float(c["epsilon"]) if credit_on and c["deployed"] is None else 0.0,
            seed=int(c["seed"]) + 1,
            learn=credit_on and c["deployed"] is None,
            initial=initial,
            dead_cost=float(c["credit_dead_cost"]) if credit_on else 0.0,
            share=credit_on and c["credit_reward"] == "segment",
            hindsight_edges=ORACLE_BANDS if credit_on and c["credit_reward"] == "hindsight" else None,
            hindsight_quantile=float(c["credit_quantile"]),
            n_segments=ctx.n_segments,
            segment_blocks=ctx.segment_blocks,
        )
        agent = ql.new_qtable(
            ctx.segment_blocks,
            horizon=int(c["horizon"]),
            alpha=float(c["alpha"]),
            gamma=float(c["gamma"]),
            epsilon=0.0 if frozen else float(c["epsilon"]),
            seed=int(c["seed"]) + 1,
            learn=not frozen,
            initial=None if st.count_state else self.initial_q,  # a count-state table is the credit agent's
        )
        qint = np.zeros((1, ql.N_ACTIONS), np.int8)
        self.int_table = None
        if c["deployed"] == "int8":
            self.int_table = quantize_table(self.initial_q)
            qint = self.int_table.table
        return ShiroState(
            scalars=scalars,
            preds=np.full(self.max_chunk_blocks, ql.PRED_UNSEEN, np.int8),
            rows=self.lba_rows,
            user_confusion=np.zeros((2, 2), np.int64),
            gc_dest=np.zeros((N_GROUPS, N_GROUPS), np.int64),
            life=np.zeros(self.window_blocks, np.int64),
            agent=agent,
            credit=credit,
            inv=annotate(ctx.stream)[0] if oracle else np.zeros(1, np.int64),
            death=np.full(ctx.capacity if oracle else 1, NEVER, np.int64),
            qint=qint,
            seg_short=np.zeros(ctx.n_segments, np.int32),
            seal_clock=np.zeros(ctx.n_segments, np.int64),
            lba_writes=np.zeros(ctx.capacity if counts else 1, np.int64),
            lba_decayed=np.zeros(ctx.capacity if st.count_decay > 0 else 1, np.float64),
            lba_counted_at=np.zeros(ctx.capacity if st.count_decay > 0 else 1, np.int64),
            read_at=(
                first_read_clocks(ctx.trace, ctx.prefill_blocks, ctx.capacity)
                if c["credit_state"] == "counts_read"
                else np.zeros(1, np.int64)
            ),
            **self._sampling_arrays(),
        )

    def _make_stream(self, ctx: SimContext) -> DigitRowStream:
        c = self.cfg
        return DigitRowStream(
            ctx.trace, self.capacity, list(c["features"]), int(c["history"]), self.max_chunk_blocks, self.digits,
            int(c["sample_every"]), overrides=self._feature_overrides(ctx),
        )  # fmt: skip

    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        st = record(self.state.scalars)
        ks = self._sampled_writes(st, start, n_writes)
        self.stream.sample(ks[0] if len(ks) else 0, len(ks))  # their windows, as the rows stream
        super().before_chunk(sim, start, n_writes)

    def _sampled_windows(self, ks: np.ndarray, keep: int) -> np.ndarray:
        windows = self.stream.sampled_windows()  # streamed with the rows (before_chunk set them)
        assert len(windows) == len(ks)
        return windows[len(ks) - keep :]

    # -- inference -------------------------------------------------------------------------
    def _clear_predictions(self, n: int) -> None:
        self.state.preds[:n] = ql.PRED_UNSEEN

    def _deploy_predictions(self, out: np.ndarray, offset: int) -> None:
        self.state.preds[offset : offset + len(out)] = out

    def _infer_chunk(self, X: np.ndarray, row: int) -> np.ndarray:
        out = self._new_output(len(X))
        self._infer_share(X, row, out, 0, SHARES)
        return out

    def _infer_share(self, X: np.ndarray, row: int, out: np.ndarray, lo: int, hi: int) -> int:
        lbas = np.ascontiguousarray(self.stream.lbas[row : row + len(X)], dtype=np.int64)
        gru_infer(lbas, X, self.digits, self.h_all, *self.weights, float(NO_PREVIOUS), out, lo, hi, SHARES)
        return 0

    # -- training --------------------------------------------------------------------------
    def _last_rows(self, data: dict, idx: np.ndarray) -> np.ndarray:
        """Samples ``idx``'s own writes (their windows' last step), log2(1 + x): the light model's input."""
        rows = self.ring_windows[data["slot"][idx], -1, :].astype(np.float64)
        rows[:, 0] = np.minimum(rows[:, 0], 16.0 * self.capacity)  # a first write's "no previous"
        return np.log2(1.0 + np.maximum(rows, 0.0))

    def _score(self, now: int, t: int) -> float:
        data = self.ring.collect(now, long_bound=t)
        keep = np.flatnonzero(data["time"] <= now - t)[-4 * int(self.cfg["lr_max_per_class"]) :]  # labels known
        if keep.size < 20:
            return 0.0
        X = self._last_rows(data, keep)
        y = (data["inv"][keep] > t).astype(np.int64)
        return logistic_accuracy(X, y, seed=int(self.cfg["seed"]) + len(self.history), max_per_class=int(
            self.cfg["lr_max_per_class"]))  # fmt: skip

    def _train(self, now: int, entry: dict) -> bool:
        c = self.cfg
        st = record(self.state.scalars)
        self._join_training()  # the previous window's epoch: its model serves from the next chunk
        t0 = time.perf_counter()
        n_life = int(st.n_life)
        life = self.state.life[:n_life].copy()
        st.window_start = now
        st.n_life = 0
        entry["window_lifetimes"] = n_life
        if c["hot_threshold"] is not None:
            thresh = int(c["hot_threshold"])
        elif n_life >= 2:
            thresh = self.search.pick(life, lambda t: self._score(now, t))
            entry["algorithm1"] = self.search.log[-1]
        else:
            thresh = int(st.hot_threshold)
        st.hot_threshold = thresh
        entry["hot_threshold"] = thresh
        conf = self.state.user_confusion
        entry["confusion"] = conf.tolist()  # cumulative: accuracy over time (Fig. 8)
        data = self.ring.collect(now, long_bound=thresh)
        done = data["time"] <= now - thresh  # samples whose label is known for sure
        first = self.model is None
        sel = done & (data["time"] > self.window_cut) if not first else done
        idx = np.flatnonzero(sel)
        entry["labelled_samples"] = int(idx.size)
        if first and idx.size < int(c["min_samples"]):
            entry["action"] = "waiting for samples"
            self.window_train_s.append(time.perf_counter() - t0)
            return False
        self.window_cut = now - thresh
        if idx.size == 0:
            entry["action"] = "no new samples"
            self.window_train_s.append(time.perf_counter() - t0)
            return True
        idx = idx[-int(c["max_train"]) :]
        windows = self.ring_windows[data["slot"][idx]]  # a copy: the ring's slots are reused meanwhile
        y = (data["inv"][idx] > thresh).astype(np.int64)
        entry.update({"train_rows": int(len(y)), "short_fraction": float(np.mean(y == 0))})
        seed = int(c["seed"]) + len(self.history)
        if first or not c["background_training"]:
            X = encode_windows(windows, self.digits)
            if first:
                self._fit_first(X, y, entry)
            else:
                self._fit_epoch(X, y, entry, seed)
            self._export_weights()
            if first:
                self._init_states()
        else:
            job = self._training_thread().submit(self._epoch_job, windows, y, entry, seed)
            self._training = (job, entry)
        secs = time.perf_counter() - t0
        self.train_s += secs
        self.window_train_s.append(secs)
        entry["train_seconds"] = secs
        return True

    def _epoch_job(self, windows: np.ndarray, y: np.ndarray, entry: dict, seed: int) -> tuple:
        """Background training (second thread): one epoch on a window's samples; returns the new
        weights (deployed by :meth:`_join_training`) and the seconds it took."""
        t0 = time.perf_counter()
        self._fit_epoch(encode_windows(windows, self.digits), y, entry, seed)
        entry["action"] = "one epoch (background: deployed at the next window's end)"
        return torch_gru_weights(self.model.net), time.perf_counter() - t0

    def _join_training(self) -> None:
        """Wait for the background epoch, if any, and deploy its weights."""
        if self._training is None:
            return
        job, entry = self._training
        self._training = None
        t0 = time.perf_counter()
        self.weights, secs = job.result()
        self.training_wait_s += time.perf_counter() - t0
        self.train_s += secs
        self.background_train_s += secs
        entry["train_seconds"] = entry.get("train_seconds", 0.0) + secs

    def _training_thread(self):
        if self._training_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._training_pool = ThreadPoolExecutor(1, thread_name_prefix="shiro-training")
        return self._training_pool

    def _init_states(self) -> None:
        """Every LBA's state from its last ``history - 1`` rows (the first model's deployment),
        the LBAs split in two halves between the threads."""
        self.h_all = np.empty((self.capacity, int(self.cfg["model_params"]["hidden"])), np.float32)
        w = self.weights[:4]
        padding = gru_padding_states(int(self.cfg["history"]) - 1, w[0].shape[0], *w)
        half = self.capacity // 2
        other = self._window_thread().submit(self.stream.init_states, half, self.capacity, padding, self.h_all, *w)
        self.stream.init_states(0, half, padding, self.h_all, *w)
        other.result()

    def _fit_first(self, X, y, entry) -> None:
        """Train to convergence (early stopping on the latest 20%, at most ``epochs``)."""
        from dogi_ml.models import make_model

        c = self.cfg
        model = make_model("gru", 2, X.shape[-1], seed=int(c["seed"]), **c["model_params"])
        cut = int(len(X) * 0.8)
        model.scaler.mean = np.zeros(X.shape[-1])
        model.scaler.std = np.ones(X.shape[-1])  # digits are already in [0, 1]: no scaling
        model._fit(X[:cut], y[:cut], X[cut:], y[cut:])
        self.model = model
        entry["epochs"] = len(model.history)
        if cut < len(X):
            entry["validation_accuracy"] = float(np.mean(model._proba(X[cut:]).argmax(axis=1) == y[cut:]))
        entry["action"] = "model trained to convergence"

    def _fit_epoch(self, X, y, entry, seed: int) -> None:
        """One epoch of Adam over this window's samples, from the current weights."""
        import torch

        c = self.cfg
        net = self.model.net
        if self.optimizer is None:
            self.optimizer = torch.optim.Adam(net.parameters(), lr=float(c["model_params"]["lr"]))
        gen = torch.Generator().manual_seed(seed)
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        loss_fn = torch.nn.CrossEntropyLoss()
        bs = int(c["model_params"]["batch_size"])
        net.train()
        order = torch.randperm(len(Xt), generator=gen)
        for i in range(0, len(Xt), bs):
            b = order[i : i + bs]
            self.optimizer.zero_grad()
            loss = loss_fn(net(Xt[b]), yt[b])
            loss.backward()
            self.optimizer.step()
        net.eval()
        entry["action"] = "one epoch"

    # -- checkpoints (dogi_ml.sim.checkpoint pickles the policy with the simulator) ------------
    def __getstate__(self) -> dict:
        if self._training is not None:
            self._training[0].result()  # the background epoch steps the optimizer: let it finish
        state = dict(self.__dict__)
        # The model pickles its net as a state_dict and rebuilds it (models/torch_models.py), so an
        # optimizer pickled beside it would step the old tensors: keep its state, rebuild it on
        # the restored net's parameters.
        if state.get("optimizer") is not None:
            state["optimizer"] = state["optimizer"].state_dict()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.optimizer is not None:
            import torch

            saved = self.optimizer
            self.optimizer = torch.optim.Adam(self.model.net.parameters(), lr=float(self.cfg["model_params"]["lr"]))
            self.optimizer.load_state_dict(saved)

    def _export_weights(self) -> None:
        """The torch weights as the float32 arrays :func:`gru_infer` takes."""
        self.weights = torch_gru_weights(self.model.net)

    def summary(self, state) -> dict:
        c = self.cfg
        self._join_training()  # the last window's epoch (its model serves no write)
        conf = state.user_confusion
        out = {**classifier_metrics(conf), "hot_threshold": int(record(state.scalars).hot_threshold)}
        out["accuracy_over_time"] = [
            {"user_writes": h["user_writes"], **classifier_metrics(np.asarray(h["confusion"]))}
            for h in self.history
            if "confusion" in h
        ]
        out["thresholds"] = [h.get("hot_threshold") for h in self.history]
        out["gc_destinations"] = state.gc_dest.tolist()
        out["agent"] = c["agent"]
        out["deployed"] = c["deployed"]
        if c["agent"] in LEARNED_AGENTS:
            q = state.agent.q if c["agent"] == "qlearning" else state.credit.q
            counts = ql.counters(state.agent) if c["agent"] == "qlearning" else rl_credit.counters(state.credit)
            out["agent_counters"] = counts
            out["qtable_bytes"] = int(self.int_table.nbytes if self.int_table is not None else q.nbytes)
            out["qtable_int8_bytes"] = q.size
            rule = ql.greedy_actions(ql.hierarchical_table() if q.shape[0] == ql.N_STATES else count_state_table(0.0))
            rule = np.tile(rule, q.shape[0] // rule.shape[0])  # counts_read: the rule in both halves
            out["states_departing_from_rule"] = int(np.sum(ql.greedy_actions(q) != rule))
            if c["credit_state"] == "counts_read":  # 0 on a trace without reads: the bit was never set
                out["read_decisions"] = int(record(state.scalars).read_decisions)
            if c["save_qtable"]:
                out["qtable_path"] = self._save_qtable(q, c["credit_state"], c["count_halflife"])
        if c["agent"] not in LEARNED_AGENTS and state.credit.visits.shape[0] > 1:
            # the rule's table: each visited state's most frequent level, the hierarchical rule elsewhere
            counts = state.credit.visits
            out["table_states"] = int(np.count_nonzero(counts.sum(axis=1)))
            out["table_levels"] = counts.sum(axis=0).tolist()
            if c["save_qtable"]:  # projected on Table I's states, whatever the rule read
                out["qtable_path"] = self._save_qtable(oracle_table(counts), "table1", None)
        tw = [s for s in self.window_train_s]
        out["train_seconds_per_window"] = float(np.mean(tw)) if tw else None
        out["background_train_seconds"] = self.background_train_s  # on the second thread, within train_seconds
        out["training_wait_seconds"] = self.training_wait_s  # ... of which the simulation waited for
        out["gru_step_ns_per_block"] = 1e9 * self.infer_s / self.infer_blocks if self.infer_blocks else None
        common = self.common_summary()
        common.pop("training_history", None)
        out.update(common)
        out["training_history"] = [{k: v for k, v in h.items() if k != "confusion"} for h in self.history]
        return out


def oracle_table(counts: np.ndarray) -> np.ndarray:
    """A Q-table from a rule's log (``counts[state, level]``; agent=oracle, or a rule agent with
    ``save_qtable``): in every visited state its most frequent level (ties to the lowest) holds 1
    and the others 0; unvisited states keep the hierarchical rule. Run with ``deployed=float`` it is
    the rule projected on Table I's states."""
    counts = np.asarray(counts)
    q = ql.hierarchical_table()
    seen = counts.sum(axis=1) > 0
    q[seen] = 0.0
    q[np.flatnonzero(seen), counts[seen].argmax(axis=1)] = 1.0
    return q


def classifier_metrics(conf) -> dict:
    """Accuracy, precision, recall and F1 of the short-living class from a confusion matrix
    ``[predicted short/long, actual short/long]`` (Table V's metrics)."""
    conf = np.asarray(conf, np.int64)
    total = int(conf.sum())
    tp, fp, fn = int(conf[0, 0]), int(conf[0, 1]), int(conf[1, 0])
    prec = tp / (tp + fp) if tp + fp else None
    rec = tp / (tp + fn) if tp + fn else None
    f1 = 2 * prec * rec / (prec + rec) if prec and rec else None
    return {
        "user_accuracy": float(np.trace(conf) / total) if total else None,
        "user_precision": prec,
        "user_recall": rec,
        "user_f1": f1,
        "user_confusion": conf.tolist(),
        "user_predictions_scored": total,
    }


@register
class ShiroNG(Shiro):
    """Shiro-NG (Fig. 9): Shiro with its GC separation removed (``agent: single``)."""

    name = "shiro_ng"
    DEFAULTS = {**Shiro.DEFAULTS, "agent": "single"}


@register
class ShiroCB(Shiro):
    """Shiro with cost-benefit victims instead of Adjusted Greedy (a comparison point)."""

    name = "shiro_cb"
    victim = "cost_benefit"
