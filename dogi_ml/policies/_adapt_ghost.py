"""ADAPT's density-aware threshold adaptation (§3.2): sampled ghost sets of the two user groups.

Sampling (SHARDS-style spatial sampling, Waldspurger et al. FAST'15): an LBA is sampled iff
``splitmix64(lba ^ seed) >> 40 < rate_num`` with ``rate_num = round(r * 2^24)``, so the sampled
LBAs are a fixed, uniform-by-hash ``r`` share of the address space, and every write of a sampled
LBA is seen. An unsampled write costs one hash and one compare (:func:`ghost_on_user_write`
returns at once). Sampled LBAs live in an open-addressing table (linear probing, index = the
hash's low bits) holding the LBA and the sampled time of its last write.

Access interval: the number of sampled user writes since the LBA's previous write (its lifespan
in the sampled stream, ``r`` times its lifespan in user writes on average), i.e. the quantity
ADAPT's real hot/cold test compares (``now - lba_time[lba]``, as SepBIT). The paper's text counts
*unique* intervening blocks (a distance tree); we count writes so the ghost's threshold means the
same thing as the threshold it is applied as. A first write (no previous one) is cold.

Ghost sets: ``n_sets`` independent simulations of a two-group (hot 0 / cold 1) user-written log,
ghost ``i`` placing a sampled write hot iff its interval is below ``thr[i]`` segments
(``thr[i] * segment_blocks * a`` sampled writes, compared exactly in integers), ``a`` the measured
share of user writes sampled (§3.2: intervals are scaled "by the actual sampling rate"; sampling
picks LBAs, so under skew ``a`` differs from ``r``: 0.099 for zipf 0.9 at r = 0.0625; ``r`` until
256 writes were sampled, or always with ``actual_rate=False``). Each ghost has its
own segments of ``ghost_seg = round(segment_blocks * r)`` blocks (at least 2, else an error: a
ghost of 1-block segments never discards a valid block), one open segment per
group (sealed when the group's next append finds it full, as the engine does) and a GC triggered
as the engine's garbage-proportion trigger (SepBIT's simulator's): while ``sealed_invalid * 10^6 >
gp_ppm * log_blocks`` (the invalid blocks of sealed segments, an open segment's counted in when it
seals, over the blocks written into the segments in use), collect the sealed segment with the fewest valid blocks (lowest index on a tie, as
``victims.greedy``) and *discard* its valid blocks, counting them (in the real system they leave
the user groups for the GC groups). Freed segments go on top of a free stack (popped first;
initially segment 0 is on top).

GC groups (``gc_groups``, beyond §3.2): a ghost that discards the valid blocks of its user
victims charges a threshold only for the first move of each block, so it prefers thresholds that
leave cold victims nearly full of valid blocks (cheap to discard once, dear to copy again later).
With ``gc_groups`` each ghost is the whole six-group system instead: GC copies a victim's valid
blocks into four ghost GC groups by ADAPT's (SepBIT's) classes -- from the hot group -> 2, else by
age against ``4 l`` -> 3, ``16 l`` -> 4, older -> 5, ``l`` the mean lifespan of the ghost's last
16 reclaimed hot segments (before any: 3) -- victims are chosen among all its sealed segments, and
every copy counts in its WA. GC-group chunks are not padded in the ghosts.

Chunk padding (the engine's chunk layer, scaled): with ``chunk_blocks > 0``, a timeout and times
(``time_us >= 0``), each ghost group fills chunks of ``chunk_blocks``; a partial chunk whose oldest
block arrived more than ``chunk_timeout_us / a`` µs before a later sampled write (the sampled
stream is ``1/a`` times sparser, so the timeout grows by ``1/a``) is padded, before that write is
placed: the padding blocks take slots, are invalid from the start and count as written. With
``aggregate`` the ghosts first try ADAPT's cross-group aggregation on a due chunk (the rule of
``adapt.adapt_chunk_due``: shadow the hot chunk's pending blocks into the cold group's unfilled
chunk, Eq. (1)'s stop rule), so a threshold is judged under the padding the real groups pay.
Ghost WA = (user writes + discarded + padding + shadow) / user writes, since the last adjustment.

Thresholds and adjustment: the ghosts start on an exponential window ``thr[i] = start * 2^i``
ghost segments. An adjustment picks the ghost with the lowest WA (the lowest threshold on a
tie), returns its threshold in user writes (``thr * segment_blocks``: "scaled to real segment
size") and moves the window: best ghost ``k`` inside the window -> linear window from
``thr[k-1]`` to ``thr[k+1]`` (evenly spaced, at least one segment apart); best at an edge (WA
monotonic in the threshold) -> an exponential window again, reaching two steps past that edge.
The window never reaches past a ceiling (``max_threshold_segments``, default 16 capacities of
segments): past it, it turns linear up to the ceiling. The ghosts keep their logs (only the
thresholds change) and restart their WA counters.
An adjustment happens when the user writes since the last one reach ``adjust_fraction`` (10%) of
the capacity, or earlier when the best ghost's WA is steady: at two consecutive checkpoints
(every ``steady_window`` sampled writes) the same ghost is best, it reclaimed segments in between
and its WA changed by at most ``steady_tol`` (relative).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.policies._adapt_bloom import splitmix64
from dogi_ml.policies.sepbit import NC_WINDOW as LIFESPAN_WINDOW  # reclaimed hot segments per lifespan average
from dogi_ml.sim.policy_api import new_scalars, record, scalar_fields

R_BITS = 24
R_MOD = 1 << R_BITS  # sampling resolution: r = rate_num / 2^24
HOT, COLD = 0, 1
N_GROUPS = 6  # hot, cold, and (with gc_groups) GC groups 2..5 as ADAPT's: from hot, < 4l, < 16l, older
MIN_MEASURED = 256  # sampled writes before the measured sampling rate replaces r

SCALARS = scalar_fields(
    rate_num=np.int64,  # r * 2^24
    seed=np.uint64,
    n_sets=np.int64,
    segment_blocks=np.int64,  # the real system's segment size (threshold unit)
    ghost_seg=np.int64,  # blocks per ghost segment
    n_seg=np.int64,  # segments per ghost
    gp_ppm=np.int64,  # ghost GC: garbage proportion limit in parts per million
    chunk=np.int64,  # blocks per chunk (0: no padding emulation)
    timeout_us=np.int64,  # ghost chunk timeout, µs (the real one / r)
    aggregate=np.int64,  # 1: the ghosts emulate ADAPT's cross-group aggregation (§3.3)
    actual_rate=np.int64,  # 1: scale intervals and the timeout by the measured sampling rate
    authentic=np.int64,  # 1: adjust by volume only once the best ghost reclaimed a segment
    act_num=np.int64,  # the rate in use (* 2^24): measured (sampled / seen writes) or r
    timeout_real=np.int64,  # the real chunk timeout, µs
    capacity=np.int64,  # real logical capacity (blocks)
    table_mask=np.int64,
    sampled=np.int64,  # sampled writes so far (the ghosts' clock)
    tracked=np.int64,  # distinct sampled LBAs in the table
    overflow=np.int64,  # sampled writes dropped (table full; should stay 0)
    no_space=np.int64,  # ghost appends dropped for want of a segment (should stay 0)
    adjustments=np.int64,
    linear=np.int64,  # 1 once the window went linear (after the first adjustment)
    applied=np.int64,  # threshold (user writes) of the last adjustment, -1 none yet
    last_adjust_now=np.int64,  # logical time (user writes) of the last adjustment
    adjust_every=np.int64,  # user writes between adjustments (10% of the capacity)
    steady_window=np.int64,  # sampled writes between steadiness checkpoints
    next_check=np.int64,  # sampled time of the next checkpoint
    steady_tol=np.float64,
    prev_best=np.int64,  # best ghost at the previous checkpoint, -1 none
    prev_wa=np.float64,
    prev_reclaimed=np.int64,  # its reclaimed segments at that checkpoint
    steady_adjusts=np.int64,  # adjustments triggered by steadiness (the rest by volume)
    max_thr=np.int64,  # the window's ceiling (ghost segments)
    gc_groups=np.int64,  # 1: ghost GC copies valid blocks into four ghost GC groups (SepBIT's classes)
)


class GhostSets(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    keys: np.ndarray  # int64[T]: sampled LBA per table slot, -1 empty
    last: np.ndarray  # int64[T]: sampled time of its last write
    thr: np.ndarray  # int64[M]: hot/cold threshold of each ghost, in ghost segments
    loc: np.ndarray  # int32[M, T]: ghost slot holding the LBA's copy, -1 none (never / discarded)
    p2l: np.ndarray  # int32[M, n_seg * ghost_seg]: table slot of the block in a ghost slot, -1 invalid
    seg_valid: np.ndarray  # int32[M, n_seg]
    seg_wp: np.ndarray  # int32[M, n_seg]
    seg_sealed: np.ndarray  # int8[M, n_seg]: 1 sealed (a GC candidate)
    # the sealed segments by valid count, so GC finds its victim without scanning every segment:
    sealed_bits: np.ndarray  # uint64[M, ghost_seg + 1, ceil(n_seg / 64)]: bit seg of row v: sealed, v valid
    sealed_n: np.ndarray  # int64[M, ghost_seg + 1]: sealed segments with v valid blocks
    free_stack: np.ndarray  # int32[M, n_seg]
    n_free: np.ndarray  # int64[M]
    open_seg: np.ndarray  # int32[M, 2 or N_GROUPS]: open segment of each group, -1 none
    # with gc_groups only (else empty):
    seg_group: np.ndarray  # int8[M, n_seg]: group of the segment's blocks
    seg_born: np.ndarray  # int64[M, n_seg]: sampled time the segment was opened
    life_sum: np.ndarray  # int64[M]: lifespans (sampled writes) of the hot segments reclaimed in this window
    life_n: np.ndarray  # int64[M]: ... how many
    life_window: np.ndarray  # int64[M]: the last full window's sum (16 l), -1 none yet
    sealed_invalid: np.ndarray  # int64[M]: invalid blocks of sealed segments, padding too (GC trigger)
    log_blocks: np.ndarray  # int64[M]: blocks written into the segments in use (the trigger's whole)
    written: np.ndarray  # int64[M]: user blocks written since the last adjustment
    discarded: np.ndarray  # int64[M]: valid blocks discarded by ghost GC since then
    padding: np.ndarray  # int64[M]: padding blocks since then
    reclaimed: np.ndarray  # int64[M]: segments reclaimed since then
    chunk_fill: np.ndarray  # int64[M, 2]
    chunk_due: np.ndarray  # int64[M, 2]: arrival (µs) of the open chunk's oldest block not shadowed, -1 none
    chunk_ts: np.ndarray  # int64[M, 2, chunk]: arrival (µs) of each block of the open chunk
    chunk_sh: np.ndarray  # int64[M, 2]: blocks of the open chunk shadowed elsewhere (aggregation)
    shadow: np.ndarray  # int64[M]: shadow blocks written since the last adjustment (count in WA)
    pad_sum: np.ndarray  # int64[M, 2]: padding blocks per group, whole run (Eq. (1)'s P_i, as the engine's)
    pad_n: np.ndarray  # int64[M, 2]: padded chunks per group, whole run


def _window(start: int, n: int) -> np.ndarray:
    return np.array([start << i for i in range(n)], np.int64)


def new_ghost_sets(
    capacity: int,
    segment_blocks: int,
    rate: float = 0.001,
    n_sets: int = 8,
    gp_ppm: int = 150_000,
    chunk_blocks: int = 0,
    chunk_timeout_us: int = 0,
    start_segments: int = 1,
    adjust_fraction: float = 0.1,
    steady_window: int = 0,
    steady_tol: float = 0.01,
    seed: int = 0x5EED,
    max_threshold_segments: int = 0,
    aggregate: bool = False,
    actual_rate: bool = True,
    authentic: bool = False,
    gc_groups: bool = False,
) -> GhostSets:
    """Ghost sets for a log of ``capacity`` logical blocks in segments of ``segment_blocks``.

    ``rate`` is the sampling rate ``r`` (0 < r <= 1); ``gp_ppm`` the ghost GC's garbage
    proportion limit (the real system's, 15% in SepBIT's setup); ``chunk_blocks`` /
    ``chunk_timeout_us`` the real chunk layer (0 = no padding emulation; the ghosts use the
    timeout divided by ``r``); ``start_segments`` the first window's smallest threshold (ghost
    segments); ``steady_window`` sampled writes between steadiness checks (0: 2% of the
    capacity's sampled share, at least 4 ghost segments); ``max_threshold_segments`` the window's
    ceiling (0: 16 capacities' worth of segments: beyond a few capacities every rewrite is hot, and
    a WA falling with the threshold would otherwise double the window at every adjustment);
    ``aggregate`` makes the ghosts' chunks aggregate across their two groups as ADAPT's real
    groups do (:func:`dogi_ml.policies.adapt.adapt_chunk_due`, §3.3), so a threshold is judged by
    the padding the real system pays with it (timed runs only); ``actual_rate`` scales the
    sampled intervals and the chunk timeout by the measured sampling rate (sampled writes / user
    writes, §3.2's "actual sampling rate") instead of ``r``: sampling picks LBAs, so under skew the
    sampled share of *writes* differs from ``r`` (zipf 0.9: 0.099 at r = 0.0625); ``authentic``: an
    adjustment by volume waits until the best ghost has reclaimed a segment since the last one;
    ``gc_groups``: each ghost copies its GC victims' valid blocks into four GC groups (the whole
    system, see the module docstring) instead of discarding them."""
    if not 0.0 < float(rate) <= 1.0:
        raise ValueError(f"ghost sets: rate must be in (0, 1], got {rate}")
    rate_num = max(1, round(float(rate) * R_MOD))
    if int(capacity) < 1 or int(segment_blocks) < 1:
        raise ValueError(f"ghost sets: capacity and segment_blocks must be >= 1, got {capacity}, {segment_blocks}")
    if int(n_sets) < 2:
        raise ValueError(f"ghost sets: n_sets must be >= 2 (a window of thresholds), got {n_sets}")
    if not 0 < int(gp_ppm) < 1_000_000:
        raise ValueError(f"ghost sets: gp_ppm must be in (0, 10^6), got {gp_ppm}")
    if int(chunk_blocks) < 0 or int(chunk_timeout_us) < 0:
        raise ValueError("ghost sets: chunk_blocks and chunk_timeout_us must be >= 0")
    if int(start_segments) < 1:
        raise ValueError(f"ghost sets: start_segments must be >= 1, got {start_segments}")
    r = rate_num / R_MOD
    ghost_seg = round(int(segment_blocks) * r)
    if ghost_seg < 2:
        raise ValueError(
            f"ghost sets: a ghost segment would hold {int(segment_blocks) * r:.3g} blocks (segment_blocks "
            f"{segment_blocks} x rate {rate}); a ghost GC over 1-block segments never discards a valid block, "
            f"so its WA says nothing: use rate >= {8 / int(segment_blocks):.3g} (8-block ghost segments) "
            f"or larger segments"
        )
    # sampled LBAs: binomial(capacity, r); size the table for 6 sigma more, at most half full
    expected = int(capacity) * r
    max_tracked = min(int(capacity), int(expected + 6 * math.sqrt(expected) + 16))
    t_size = 1 << max(4, math.ceil(math.log2(2 * max_tracked)))
    # a ghost log holds at most its live blocks over (1 - gp), two open segments and a chunk's
    # padding per group; 4 spare segments for a GC that cannot keep up within one write (with GC
    # groups 4 more open ones and 4 more spares: a GC pass may open every GC group before it
    # frees its victim)
    gp = int(gp_ppm) / 1e6
    n_seg = math.ceil((max_tracked / (1 - gp) + 2 * int(chunk_blocks)) / ghost_seg) + 2 + 4
    if gc_groups:
        n_seg += 8
    m = int(n_sets)
    scalars = new_scalars(SCALARS)
    st = record(scalars)
    st.rate_num = rate_num
    st.seed = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    st.n_sets = m
    st.segment_blocks = int(segment_blocks)
    st.ghost_seg = ghost_seg
    st.n_seg = n_seg
    st.gp_ppm = int(gp_ppm)
    timed = int(chunk_blocks) > 0 and int(chunk_timeout_us) > 0
    st.chunk = int(chunk_blocks) if timed else 0
    st.timeout_us = int(chunk_timeout_us) * R_MOD // rate_num if timed else 0
    st.aggregate = int(bool(aggregate)) if timed else 0
    st.actual_rate = int(bool(actual_rate))
    st.authentic = int(bool(authentic))
    st.gc_groups = int(bool(gc_groups))
    st.act_num = rate_num
    st.timeout_real = int(chunk_timeout_us) if timed else 0
    st.capacity = int(capacity)
    st.table_mask = t_size - 1
    st.applied = -1
    st.adjust_every = max(1, int(float(adjust_fraction) * int(capacity)))
    st.steady_window = int(steady_window) if steady_window else max(4 * ghost_seg, int(0.02 * expected))
    st.next_check = st.steady_window
    st.steady_tol = float(steady_tol)
    st.prev_best = -1
    st.max_thr = int(max_threshold_segments) or 16 * -(-int(capacity) // int(segment_blocks))
    if st.max_thr < int(start_segments) << (int(n_sets) - 1):
        raise ValueError(
            f"ghost sets: the first window reaches {int(start_segments) << (int(n_sets) - 1)} segments, above "
            f"max_threshold_segments {st.max_thr}; lower start_segments or n_sets, or raise the ceiling"
        )
    free = np.tile(np.arange(n_seg - 1, -1, -1, dtype=np.int32), (m, 1))  # segment 0 on top
    return GhostSets(
        scalars=scalars,
        keys=np.full(t_size, -1, np.int64),
        last=np.zeros(t_size, np.int64),
        thr=_window(int(start_segments), m),
        loc=np.full((m, t_size), -1, np.int32),
        p2l=np.full((m, n_seg * ghost_seg), -1, np.int32),
        seg_valid=np.zeros((m, n_seg), np.int32),
        seg_wp=np.zeros((m, n_seg), np.int32),
        seg_sealed=np.zeros((m, n_seg), np.int8),
        sealed_bits=np.zeros((m, ghost_seg + 1, -(-n_seg // 64)), np.uint64),
        sealed_n=np.zeros((m, ghost_seg + 1), np.int64),
        free_stack=free,
        n_free=np.full(m, n_seg, np.int64),
        # the GC groups' state only with gc_groups (the paper's ghosts' memory is Fig. 12b's)
        open_seg=np.full((m, N_GROUPS if gc_groups else 2), -1, np.int32),
        seg_group=np.zeros((m, n_seg if gc_groups else 0), np.int8),
        seg_born=np.zeros((m, n_seg if gc_groups else 0), np.int64),
        life_sum=np.zeros(m if gc_groups else 0, np.int64),
        life_n=np.zeros(m if gc_groups else 0, np.int64),
        life_window=np.full(m if gc_groups else 0, -1, np.int64),
        sealed_invalid=np.zeros(m, np.int64),
        log_blocks=np.zeros(m, np.int64),
        written=np.zeros(m, np.int64),
        discarded=np.zeros(m, np.int64),
        padding=np.zeros(m, np.int64),
        reclaimed=np.zeros(m, np.int64),
        chunk_fill=np.zeros((m, 2), np.int64),
        chunk_due=np.full((m, 2), -1, np.int64),
        chunk_ts=np.zeros((m, 2, max(1, int(chunk_blocks) if timed else 1)), np.int64),
        chunk_sh=np.zeros((m, 2), np.int64),
        shadow=np.zeros(m, np.int64),
        pad_sum=np.zeros((m, 2), np.int64),
        pad_n=np.zeros((m, 2), np.int64),
    )


# -- one ghost's log -----------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def _seal_open(g, i, seg):
    """Ghost ``i``'s open segment ``seg`` is full: sealed, its invalid blocks now garbage."""
    _seal(g, i, seg)
    g.sealed_invalid[i] += g.seg_wp[i, seg] - g.seg_valid[i, seg]


@nb.njit(cache=True, inline="always")
def _seal(g, i, seg):
    """Segment ``seg`` of ghost ``i`` is full: a GC candidate, in the row of its valid count."""
    v = g.seg_valid[i, seg]
    g.seg_sealed[i, seg] = 1
    g.sealed_bits[i, v, seg >> 6] |= np.uint64(1) << np.uint64(seg & 63)
    g.sealed_n[i, v] += 1


@nb.njit(cache=True, inline="always")
def _unseal(g, i, seg):
    v = g.seg_valid[i, seg]
    g.seg_sealed[i, seg] = 0
    g.sealed_bits[i, v, seg >> 6] &= ~(np.uint64(1) << np.uint64(seg & 63))
    g.sealed_n[i, v] -= 1


@nb.njit(cache=True, inline="always")
def _invalidate(g, i, seg):
    """A block of ghost ``i``'s segment ``seg`` became invalid (a sealed one moves down a row)."""
    if g.seg_sealed[i, seg]:
        _unseal(g, i, seg)
        g.seg_valid[i, seg] -= 1
        _seal(g, i, seg)
        g.sealed_invalid[i] += 1
    else:
        g.seg_valid[i, seg] -= 1


@nb.njit(cache=True)
def _lowest_sealed(g, i, v):
    """The lowest-numbered sealed segment of ghost ``i`` with ``v`` valid blocks (one exists)."""
    row = g.sealed_bits[i, v]
    w = 0
    while row[w] == 0:
        w += 1
    word = row[w]
    b = 0
    while (word >> np.uint64(b)) & np.uint64(1) == 0:
        b += 1
    return w * 64 + b


@nb.njit(cache=True)
def _collect(g, i):
    """Reclaim ghost ``i``'s sealed segment with the fewest valid blocks (lowest index on a tie),
    discarding its valid blocks, or with ``gc_groups`` copying them into the GC groups; False if it
    has no sealed segment (with ``gc_groups``: none with an invalid block, a copy would free
    nothing)."""
    st = g.scalars[0]
    gs = st.ghost_seg
    best_valid = 0
    while best_valid <= gs and g.sealed_n[i, best_valid] == 0:
        best_valid += 1
    if best_valid > gs or (st.gc_groups and best_valid == gs):
        return False
    best = _lowest_sealed(g, i, best_valid)
    _unseal(g, i, best)
    base = best * gs
    if st.gc_groups:
        victim_group = g.seg_group[i, best]
        if victim_group == HOT:
            _hot_reclaimed(g, i, best)
        for off in range(g.seg_wp[i, best]):
            slot = g.p2l[i, base + off]
            if slot >= 0:
                g.p2l[i, base + off] = -1
                phys = _next_slot(g, i, _gc_class(g, i, victim_group, slot))
                if phys < 0:
                    st.no_space += 1
                    g.loc[i, slot] = -1
                    continue
                g.p2l[i, phys] = slot
                g.loc[i, slot] = phys
                g.seg_valid[i, phys // gs] += 1
    else:
        for off in range(g.seg_wp[i, best]):
            slot = g.p2l[i, base + off]
            if slot >= 0:
                g.loc[i, slot] = -1
                g.p2l[i, base + off] = -1
    g.discarded[i] += best_valid
    g.sealed_invalid[i] -= g.seg_wp[i, best] - best_valid
    g.log_blocks[i] -= g.seg_wp[i, best]
    g.reclaimed[i] += 1
    g.seg_valid[i, best] = 0
    g.seg_wp[i, best] = 0
    nf = g.n_free[i]
    g.free_stack[i, nf] = best
    g.n_free[i] = nf + 1
    return True


@nb.njit(cache=True)
def _hot_reclaimed(g, i, seg):
    """A hot segment of ghost ``i`` is reclaimed: its lifespan joins the window of 16 whose mean
    is the ghost's ``l`` (SepBIT's, as ADAPT's real lifespan layer measures it)."""
    g.life_sum[i] += g.scalars[0].sampled - g.seg_born[i, seg]
    g.life_n[i] += 1
    if g.life_n[i] == LIFESPAN_WINDOW:
        g.life_window[i] = g.life_sum[i]
        g.life_sum[i] = 0
        g.life_n[i] = 0


@nb.njit(cache=True)
def _gc_class(g, i, victim_group, slot):
    """The GC group of a valid block GC copies out of a ``victim_group`` segment (as
    ``sepbit.sepbit_gc``): 2 from the hot group, else by its age against 4 l and 16 l."""
    if victim_group == HOT:
        return 2
    window = g.life_window[i]  # 16 l
    if window < 0:
        return 3
    age = g.scalars[0].sampled - g.last[slot]
    if LIFESPAN_WINDOW * age < 4 * window:
        return 3
    if age < window:
        return 4
    return 5


@nb.njit(cache=True)
def _gc(g, i):
    """Ghost ``i``'s GC: collect while the garbage proportion exceeds the limit."""
    st = g.scalars[0]
    while g.sealed_invalid[i] * 1_000_000 > st.gp_ppm * g.log_blocks[i]:
        if not _collect(g, i):
            break


@nb.njit(cache=True)
def _next_slot(g, i, grp):
    """The next slot (global index) of ghost ``i``'s group ``grp`` in its open segment, opening a
    free one (sealing the full one) when needed; -1 if that needs a segment and none is free."""
    st = g.scalars[0]
    gs = st.ghost_seg
    seg = g.open_seg[i, grp]
    if seg < 0 or g.seg_wp[i, seg] == gs:
        if seg >= 0:
            _seal_open(g, i, seg)
            g.open_seg[i, grp] = -1
        nf = g.n_free[i] - 1
        if nf < 0:
            return -1
        seg = g.free_stack[i, nf]
        g.n_free[i] = nf
        g.open_seg[i, grp] = seg
        if st.gc_groups:
            g.seg_group[i, seg] = grp
            g.seg_born[i, seg] = st.sampled
    off = g.seg_wp[i, seg]
    g.seg_wp[i, seg] = off + 1
    g.log_blocks[i] += 1
    return seg * gs + off


@nb.njit(cache=True)
def _slot_for(g, i, grp):
    """A free slot in ghost ``i``'s user group ``grp``, collecting first if its open segment is
    full and no segment is free; -1 if none even then."""
    seg = g.open_seg[i, grp]
    if (seg < 0 or g.seg_wp[i, seg] == g.scalars[0].ghost_seg) and g.n_free[i] == 0:
        if seg >= 0:
            _seal_open(g, i, seg)
            g.open_seg[i, grp] = -1
        if not _collect(g, i):
            return -1
    return _next_slot(g, i, grp)


@nb.njit(cache=True)
def _fillers(g, i, grp, n):
    """``n`` slots of ghost ``i``'s group ``grp`` that hold no live data (padding, shadow copies)."""
    for _ in range(n):
        if _slot_for(g, i, grp) < 0:
            g.scalars[0].no_space += 1
            break


@nb.njit(cache=True)
def _pad(g, i, grp):
    """Pad ghost ``i``'s partial chunk of group ``grp`` to a whole chunk (invalid slots)."""
    n = g.scalars[0].chunk - g.chunk_fill[i, grp]
    _fillers(g, i, grp, n)
    g.padding[i] += n
    g.pad_sum[i, grp] += n
    g.pad_n[i, grp] += 1
    g.chunk_fill[i, grp] = 0
    g.chunk_sh[i, grp] = 0
    g.chunk_due[i, grp] = -1


@nb.njit(cache=True)
def _aggregate(g, i):
    """ADAPT's cross-group aggregation in ghost ``i`` when a user chunk is due (the rule of
    :func:`dogi_ml.policies.adapt.adapt_chunk_due` and the engine's ``shadow_append``): the hot
    chunk's blocks without a shadow go into the cold group's unfilled chunk, which is flushed now
    (padded if still partial); the hot chunk keeps them (lazy append) and its deadline moves to
    its oldest block still without a shadow. Eq. (1): only a group that has padded before, and
    only while the blocks shadowed from this chunk stay within its mean padding per chunk."""
    st = g.scalars[0]
    chunk = st.chunk
    pending = g.chunk_fill[i, HOT] - g.chunk_sh[i, HOT]
    fd = g.chunk_fill[i, COLD]
    if pending <= 0 or fd == 0:
        return
    k = min(pending, chunk - fd)
    n = g.pad_n[i, HOT]
    if n == 0 or g.chunk_sh[i, HOT] + k > g.pad_sum[i, HOT] // n:
        return
    _fillers(g, i, COLD, k)
    g.shadow[i] += k
    if fd + k == chunk:
        g.chunk_fill[i, COLD] = 0
        g.chunk_sh[i, COLD] = 0
        g.chunk_due[i, COLD] = -1
    else:
        g.chunk_fill[i, COLD] = fd + k
        _pad(g, i, COLD)
    start = g.chunk_sh[i, HOT]
    g.chunk_sh[i, HOT] = start + k
    if start + k < g.chunk_fill[i, HOT]:
        g.chunk_due[i, HOT] = g.chunk_ts[i, HOT, start + k]
    else:
        g.chunk_due[i, HOT] = -1


@nb.njit(cache=True)
def _flush_due(g, i, time_us):
    """Flush ghost ``i``'s chunks whose deadline passed before ``time_us``, earliest first (hot
    first on a tie), as the engine does: aggregation first when on, else padding."""
    st = g.scalars[0]
    timeout = st.timeout_us
    while True:
        grp = -1
        best = 0
        for h in range(2):
            d = g.chunk_due[i, h]
            if d >= 0 and d + timeout < time_us and (grp < 0 or d + timeout < best):
                grp = h
                best = d + timeout
        if grp < 0:
            return
        if st.aggregate:
            _aggregate(g, i)
        d = g.chunk_due[i, grp]
        if d >= 0 and d + timeout <= best:
            _pad(g, i, grp)


@nb.njit(cache=True)
def _ghost_write(g, i, slot, hot, time_us):
    """One sampled user write of table slot ``slot`` into ghost ``i``."""
    st = g.scalars[0]
    chunked = st.chunk > 0 and time_us >= 0
    if chunked:
        _flush_due(g, i, time_us)
    old = g.loc[i, slot]
    if old >= 0:
        g.p2l[i, old] = -1
        _invalidate(g, i, old // st.ghost_seg)
        g.loc[i, slot] = -1
    grp = HOT if hot else COLD
    phys = _slot_for(g, i, grp)
    if phys < 0:
        st.no_space += 1
        return
    g.p2l[i, phys] = slot
    g.loc[i, slot] = phys
    g.seg_valid[i, phys // st.ghost_seg] += 1
    g.written[i] += 1
    if chunked:
        f = g.chunk_fill[i, grp]
        g.chunk_ts[i, grp, f] = time_us
        if g.chunk_due[i, grp] < 0:
            g.chunk_due[i, grp] = time_us
        f += 1
        if f == st.chunk:  # full: persisted (shadowed blocks lazily appended), no padding
            f = 0
            g.chunk_sh[i, grp] = 0
            g.chunk_due[i, grp] = -1
        g.chunk_fill[i, grp] = f
    _gc(g, i)


# -- the sampled stream ----------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def ghost_sampled(g, lba):
    """Whether ``lba`` is in the sample (one hash, one compare)."""
    st = g.scalars[0]
    return np.int64(splitmix64(np.uint64(lba) ^ st.seed) >> np.uint64(64 - R_BITS)) < st.rate_num


@nb.njit(cache=True)
def _table_slot(g, lba):
    """Table slot of sampled ``lba`` (inserted if new), -1 if the table is full."""
    st = g.scalars[0]
    mask = st.table_mask
    i = np.int64(splitmix64(np.uint64(lba) ^ st.seed) & np.uint64(mask))
    for _ in range(mask + 1):
        k = g.keys[i]
        if k == lba:
            return i
        if k < 0:
            if 10 * (st.tracked + 1) > 9 * (mask + 1):
                return -1
            g.keys[i] = lba
            g.last[i] = -1
            st.tracked += 1
            return i
        i = (i + 1) & mask
    return -1


@nb.njit(cache=True)
def ghost_wa(g, i):
    """Ghost ``i``'s WA since the last adjustment: (written + discarded + padding + shadow) /
    written (0.0 before its first write)."""
    w = g.written[i]
    if w == 0:
        return 0.0
    return (w + g.discarded[i] + g.padding[i] + g.shadow[i]) / w


@nb.njit(cache=True)
def _best(g):
    best = -1
    best_wa = 0.0
    for i in range(g.thr.shape[0]):
        wa = ghost_wa(g, i)
        if g.written[i] > 0 and (best < 0 or wa < best_wa):
            best = i
            best_wa = wa
    return best, best_wa


@nb.njit(cache=True)
def ghost_best(g):
    """``(threshold, wa)``: the best ghost's threshold in user writes (``thr * segment_blocks``)
    and its WA; ``(-1, 0.0)`` before any sampled write."""
    k, wa = _best(g)
    if k < 0:
        return -1, 0.0
    return g.thr[k] * g.scalars[0].segment_blocks, wa


@nb.njit(cache=True)
def _clamp_window(g):
    """Keep the window under its ceiling: a window reaching past it becomes linear from its first
    threshold to the ceiling (or, if that too is past it, exponential ending at the ceiling)."""
    m = g.thr.shape[0]
    top = g.scalars[0].max_thr
    if g.thr[m - 1] <= top:
        return
    lo = g.thr[0]
    if lo + m - 1 > top:
        for j in range(m):
            g.thr[j] = max(1, top >> (m - 1 - j))
    else:
        for j in range(m):
            g.thr[j] = lo + (top - lo) * j // (m - 1)
    for j in range(1, m):  # distinct thresholds (a ceiling below n_sets segments is exceeded)
        if g.thr[j] <= g.thr[j - 1]:
            g.thr[j] = g.thr[j - 1] + 1


@nb.njit(cache=True)
def _next_window(g, k):
    _move_window(g, k)
    _clamp_window(g)


@nb.njit(cache=True)
def _move_window(g, k):
    """Move the thresholds after ghost ``k`` won (see the module docstring)."""
    m = g.thr.shape[0]
    st = g.scalars[0]
    if 0 < k < m - 1:
        lo = g.thr[k - 1]
        hi = g.thr[k + 1]
        if hi - lo >= m - 1:
            for j in range(m):
                g.thr[j] = lo + ((hi - lo) * j + (m - 1) // 2) // (m - 1)
        else:  # too narrow for distinct values: step one segment around the winner
            start = max(1, g.thr[k] - m // 2)
            for j in range(m):
                g.thr[j] = start + j
        st.linear = 1
        return
    # the best is at an edge: WA is monotonic in the threshold over the window
    if k == 0:
        start = max(1, g.thr[0] >> (m - 2))  # the window ends two steps above the old first
    else:
        start = max(1, g.thr[m - 1] >> 1)  # ... begins one step below the old last
    for j in range(m):
        g.thr[j] = start << j


@nb.njit(cache=True)
def ghost_adjust(g, now):
    """Apply the best ghost now: return its threshold in user writes (-1 if no ghost has
    written yet, and then nothing changes), move the window, restart the WA counters."""
    st = g.scalars[0]
    k, _ = _best(g)
    if k < 0:
        return -1
    applied = g.thr[k] * st.segment_blocks
    _next_window(g, k)
    for i in range(g.thr.shape[0]):
        g.written[i] = 0
        g.discarded[i] = 0
        g.padding[i] = 0
        g.shadow[i] = 0
        g.reclaimed[i] = 0
    st.applied = applied
    st.adjustments += 1
    st.last_adjust_now = now
    st.prev_best = -1
    st.next_check = st.sampled + st.steady_window
    return applied


@nb.njit(cache=True)
def ghost_restart_window(g, start_segments):
    """Put the thresholds back on an exponential window from ``start_segments`` (>= 1) ghost
    segments, e.g. around the cold-start threshold (the hot segments' lifespan, §3.2) once it is
    known; the WA counters restart, the logs stay."""
    start = max(1, start_segments)
    for i in range(g.thr.shape[0]):
        g.thr[i] = start << i
        g.written[i] = 0
        g.discarded[i] = 0
        g.padding[i] = 0
        g.shadow[i] = 0
        g.reclaimed[i] = 0
    _clamp_window(g)
    st = g.scalars[0]
    st.linear = 0
    st.prev_best = -1
    st.next_check = st.sampled + st.steady_window


@nb.njit(cache=True)
def _steady(g):
    """A checkpoint: whether the best ghost's WA is steady since the previous one."""
    st = g.scalars[0]
    k, wa = _best(g)
    steady = (
        k >= 0
        and k == st.prev_best
        and g.reclaimed[k] > st.prev_reclaimed
        and abs(wa - st.prev_wa) <= st.steady_tol * st.prev_wa
    )
    st.prev_best = k
    st.prev_wa = wa
    st.prev_reclaimed = g.reclaimed[k] if k >= 0 else 0
    return steady


@nb.njit(cache=True)
def _authentic(g):
    """Whether the best ghost's WA counts GC (§3.2: ADAPT "monitors write volume and GC conditions
    to determine whether ghost sets have an authentic simulation"): with ``authentic`` set, the
    best ghost must have reclaimed a segment since the last adjustment; a WA of padding alone (a
    prefill, a young log) says nothing about GC."""
    st = g.scalars[0]
    if not st.authentic:
        return True
    k, _ = _best(g)
    return k >= 0 and g.reclaimed[k] > 0


@nb.njit(cache=True)
def _sampled_write(g, lba, now, time_us):
    """:func:`ghost_on_user_write` for a sampled LBA."""
    st = g.scalars[0]
    slot = _table_slot(g, lba)
    if slot < 0:
        st.overflow += 1
        return -1
    t = st.sampled
    prev = g.last[slot]
    seen = prev >= 0
    if st.actual_rate and t >= MIN_MEASURED:
        # the measured share of user writes sampled (now + 1 writes seen, t + 1 sampled)
        st.act_num = max(1, min(R_MOD, (t + 1) * R_MOD // max(1, now + 1)))
        if st.chunk > 0:
            st.timeout_us = st.timeout_real * R_MOD // st.act_num
    # hot iff interval < thr * segment_blocks * rate, in integers: interval * 2^24 < thr * S * num
    lhs = (t - prev) * R_MOD
    unit = st.segment_blocks * st.act_num
    for i in range(g.thr.shape[0]):
        _ghost_write(g, i, slot, seen and lhs < g.thr[i] * unit, time_us)
    g.last[slot] = t
    st.sampled = t + 1
    if now - st.last_adjust_now >= st.adjust_every and _authentic(g):
        return ghost_adjust(g, now)
    if st.sampled >= st.next_check:
        st.next_check = st.sampled + st.steady_window
        if _steady(g):
            st.steady_adjusts += 1
            return ghost_adjust(g, now)
    return -1


@nb.njit(cache=True, inline="always")
def ghost_on_user_write(g, lba, now, time_us):
    """Feed one user write (``now`` its logical time, ``time_us`` its wall-clock time in µs, or
    -1 when the run has no times). Returns the new hot/cold threshold in user writes when this
    write triggered an adjustment, else -1. Inlined into the caller, so an unsampled LBA costs
    one hash and one compare (a call would copy the whole state tuple, ~70 ns)."""
    if not ghost_sampled(g, lba):
        return -1
    return _sampled_write(g, lba, now, time_us)


def ghost_summary(g: GhostSets) -> dict:
    """The ghosts' state for a run's result (Python)."""
    st = record(g.scalars)
    thr, wa = ghost_best(g)
    return {
        "ghost_thresholds_segments": [int(x) for x in g.thr],
        "ghost_wa": [float(ghost_wa(g, i)) for i in range(g.thr.shape[0])],
        "ghost_best_threshold": int(thr),
        "ghost_best_wa": float(wa),
        "ghost_applied_threshold": int(st.applied),
        "ghost_adjustments": int(st.adjustments),
        "ghost_steady_adjustments": int(st.steady_adjusts),
        "ghost_sampled_writes": int(st.sampled),
        "ghost_sampled_lbas": int(st.tracked),
        "ghost_dropped": int(st.overflow + st.no_space),
        "ghost_rate": st.rate_num / R_MOD,
        "ghost_measured_rate": st.act_num / R_MOD,
    }


# -- memory -----------------------------------------------------------------------------------
def ghost_bytes(g: GhostSets) -> int:
    """Bytes the sampling table and the ghost sets occupy."""
    return int(sum(a.nbytes for a in g))


def memory_breakdown(g: GhostSets, cascade=None) -> dict:
    """ADAPT's extra memory (Fig. 12b) by part, in bytes and per logical block of the capacity:
    ``sampling`` (the table of sampled LBAs and their last write times), ``ghost_sets`` (per
    ghost: each sampled LBA's slot, the slots' owners, per-segment metadata, counters),
    ``filters`` (the Bloom cascades, if given). ``per_sampled_block`` divides by the sampled
    LBAs the table was sized for (its slots / 2) instead."""
    sampling = g.keys.nbytes + g.last.nbytes + g.scalars.nbytes
    ghosts = ghost_bytes(g) - sampling
    filters = 0 if cascade is None else sum(a.nbytes for a in cascade)
    cap = int(record(g.scalars).capacity)
    sized_for = g.keys.shape[0] // 2
    parts = {"sampling": sampling, "ghost_sets": ghosts, "filters": filters}
    return {
        "bytes": dict(parts, total=sum(parts.values())),
        "per_block": {k: v / cap for k, v in dict(parts, total=sum(parts.values())).items()},
        "per_sampled_block": {"sampling": sampling / sized_for, "ghost_sets": ghosts / sized_for},
        "n_sets": int(g.thr.shape[0]),
        "table_slots": int(g.keys.shape[0]),
    }
