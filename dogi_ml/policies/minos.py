"""MINOS: virtual streams, ID-Vectors and OP-guided clustering into physical streams (§4).

Per write (the critical path, Algorithm 2 and §4.2):

- **Virtual stream prediction**: a user write of a never-written block goes to virtual stream
  ``N_user - 1``; an update's lifetime ``dt = now - last user write`` feeds the user CDF (a
  multi-quantile P² estimator over ``N_user - 1`` equiprobable cells) and its cell is the
  target; with *correlative prediction* the block's previous virtual stream moves at most one
  step toward it. A GC write's survival time ``dt`` feeds the GC CDF (``N_gc`` cells) and picks
  virtual stream ``N_user + cell``.
- **ID-Vectors**: logical time is cut into slots of one segment of *user* writes (§1: the
  invalidation time is "the volume of subsequent logical writes"; §3: "logical time in units of
  segments written"; ``slot_clock=all`` counts GC writes too); per virtual
  stream and slot a write counter and an invalidation counter live in a ring of ``L`` slots
  (default: the number of segments). A write counts in its stream's current slot; when a block
  is overwritten, the invalidation counts in the slot and virtual stream of its last user write,
  and, if GC moved it since, also in the slot and virtual stream of that GC write (the paper's
  per-block metadata: write slot and stream id for both).
- **Physical placement**: the write goes to the physical stream (group) its virtual stream is
  mapped to.

The overwritten copy's entry is a cache miss on most user writes: the engine's ``prefetch_lba``
hook hands MINOS each LBA 16 writes ahead, and the user write 8 writes before it prefetches that
LBA's entry (:func:`minos_prefetch`); a hint only, results never depend on it.

Every ``W_recluster`` slots (8) the ``N_user + N_gc`` virtual streams are clustered into ``K``
physical streams (= ``n_groups``, 6) by Algorithm 3 with the OP distance of Eqs. (1)-(3), decay
``alpha = 1 - 1/L`` (:mod:`dogi_ml.policies._minos_cluster`), inside the simulator's loop, so
the period is exact in segments written. Until the first clustering, user virtual streams are
spread evenly over the first ``K - 1`` physical streams and GC ones share the last.

**Spatial Metadata Aggregation** (``agg`` = 1, 8, 32): one metadata entry (last user write
time, both write slots and stream ids) shared by ``agg`` adjacent *physical* blocks (§4.4:
"physically contiguous data", written together to one stream); a write sets the entry of the
block it lands on (the engine's next append position, predicted from its open segment and free
stack), GC carries the user fields along. ``agg_space=logical`` shares entries among adjacent
LBAs instead (much lossier for small random writes). ``agg_ids=block`` shares only the slots
and the time: each physical block keeps its own user and GC stream ids (4 + 4 bits), so the
invalidations of an entry's blocks count for the streams that wrote them (beyond the paper,
whose entry holds one pair; with 4 KiB random writes an entry's blocks come from different
virtual streams). Table 5's memory is :func:`metadata_mib_per_tib`. With ``agg=1`` the last
user write time is the engine's own ``lba_time`` (the same value, stored once), and both spaces
give identical runs.

Ablations: ``correlative=false`` (jump straight to the target), ``search=full`` (merge any two
clusters, "w/o AC"), ``distance=avg`` (AvgDist: difference of mean invalidation times, decayed
per slot by ``alpha``). Victims: cost-benefit ``gp/(1-gp) * age`` (§2.3, the paper's default;
``policy.victim`` to change, ``policy.victim=null`` to follow ``sim.victim``).

Departures: lifetimes are in user-written blocks from the engine's clock (the paper stores
32-bit slots); invalidations older than the ring are dropped, as the ring has no slot for them.
The P² markers learn from a deterministic 1-in-``p2_every`` sample of the lifetimes (default 8;
every lifetime is still *queried*): the marker update costs ~40-47 ns with 11 cells, two to
three SepBIT appends, and the sample moved GC writes by -1.0..+0.05% on the Fig. 11 workloads;
``p2_every=1`` is the paper's per-write update.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.kernels import _roomiest_group, prefetch
from dogi_ml.sim.policy_api import (
    PlacementPolicy,
    SimContext,
    new_scalars,
    no_reclaim_hook,
    record,
    refuse_unread_params,
    scalar_fields,
)
from dogi_ml.sim.state import C_FREE

from . import register
from ._minos_cluster import (
    adjacent_distances,
    cluster_adjacent,
    cluster_avg,
    cluster_full,
    decay_table,
    id_vectors,
    p2_new,
    p2_quantiles,
    p2_query,
    p2_update,
    slot_weights,
)

AHEAD = 8  # user writes between prefetching an overwritten copy's entry and reading it
SEARCH = {"adjacent": 0, "full": 1}
DISTANCE = {"op": 0, "avg": 1}
SLOT_CLOCK = {"all": 0, "user": 1}
AGG = (1, 8, 32)
#: which block of an aggregated entry it describes: ``last`` the latest written (every landing
#: block overwrites it), ``median`` the block at offset ``agg/2 - 1`` (only the first half writes)
AGG_OWNER = ("last", "median")
#: where an aggregated entry's virtual stream ids live: ``entry`` one pair per entry (the paper's
#: shared entry), ``block`` one pair per physical block (4 + 4 bits) beside the shared slots
AGG_IDS = ("entry", "block")
#: writes per virtual stream per time slot below which the OP distance has too few counts: at 2
#: (32-block segments, 16 streams) MINOS trailed SepBIT on Zipf-H, from 4 (64 blocks) it led
#: (docs/minos.md, "Slot density")
SPARSE_SLOT_WRITES = 4
BLOCK_BYTES = 4096
TIB = 1 << 40

#: MINOS's scalar parameters and counters (``MinosState.scalars``, one record): the per-write
#: path reads them at fixed offsets from one pointer instead of one small array each
SCALARS = scalar_fields(
    # parameters (fixed for the run)
    n_user=np.int64,  # user virtual streams
    n_gc=np.int64,  # GC virtual streams
    k_phys=np.int64,  # physical streams (= groups)
    ring_len=np.int64,  # L, slots in the ID-Vector ring
    recluster_every=np.int64,  # W_recluster, slots between clusterings
    seg_blocks=np.int64,  # blocks per slot (one segment)
    agg_shift=np.int64,  # log2 of the blocks sharing one metadata entry
    entry_writers=np.int64,  # blocks at entry offsets below this set the shared entry (AGG_OWNER)
    block_ids=np.int64,  # 1: each physical block keeps its own stream ids (AGG_IDS "block")
    physical=np.int64,  # 1: entries cover physical blocks (the paper), 0: LBAs
    correlative=np.int64,  # 1: move one virtual stream toward the target
    p2_every=np.int64,  # P² markers updated on every p2_every-th lifetime (1 = all)
    search=np.int64,  # SEARCH code
    distance=np.int64,  # DISTANCE code
    log_on=np.int64,  # 1: record the clusterings (H = mapping_log), 0: off (H = 1, unused)
    slot_user=np.int64,  # 1: slots advance on user writes only (logical time), 0: on every write
    # P² sampling: lifetimes left before the next user / GC marker update
    p2_skip_user=np.int64,
    p2_skip_gc=np.int64,
    # clock (kept incrementally: no integer division on the per-write path)
    clock=np.int64,  # blocks that filled slots (user + GC; user only with slot_clock=user)
    slot=np.int64,  # current time slot = clock // seg_blocks
    pos=np.int64,  # its ring position = slot % L
    slot_fill=np.int64,  # blocks written in it = clock % seg_blocks (not "fill": a numpy record method)
    reclusters=np.int64,  # clusterings run
    user_now=np.int64,  # the engine's clock at the latest user write
    # lookahead (a cache hint, never read for results; see minos_prefetch)
    hint=np.int64,  # the LBA the engine's prefetch hook was last given
    ahead_pos=np.int64,  # the next slot of ``MinosState.ahead``
)

#: one metadata entry (physical block or LBA >> agg_shift), one row: ``time`` the last user
#: write's time (agg > 1 only; with agg = 1 it is the engine's lba_time), ``user`` and ``gc``
#: the slot and virtual stream of the last user write and of the last GC write since, packed
#: (slot << 8 | vs + 1; 0 = none)
META_ROW = np.dtype([("time", np.int64), ("user", np.int64), ("gc", np.int64)])


class MinosState(NamedTuple):
    """MINOS's Numba state: arrays only, by name; scalars in the ``scalars`` record."""

    scalars: np.ndarray  # SCALARS[1]
    meta: np.ndarray  # META_ROW[entries]
    # agg_ids=block: per physical block, its user (low byte) and GC (high byte) stream id + 1
    # (0 = none); a one-element dummy otherwise
    blk_ids: np.ndarray  # uint16[physical blocks]
    # ID-Vectors: rows 0..N-1 live counters over ring positions, rows N..2N-1 clustering scratch
    id_w: np.ndarray  # float32[2N, L + pad] (columns L.. unused, see _minos_cluster.id_vectors)
    id_i: np.ndarray  # float32[2N, L + pad]
    inv_decay: np.ndarray  # float32[L] alpha**-position
    weights: np.ndarray  # float32[L] scratch: alpha**age per position
    # totals (never forgotten; for checks and reports)
    tot_w: np.ndarray  # int64[N]
    tot_i: np.ndarray  # int64[N]
    gc_superseded: np.ndarray  # int64[N] GC writes whose block GC moved again before any overwrite
    # AvgDist: decayed invalidation-time sums and counts per virtual stream
    life_sum: np.ndarray  # float64[N]
    life_cnt: np.ndarray  # float64[N]
    # P² markers: user CDF (N_user - 1 cells) and GC CDF (N_gc cells)
    uq: np.ndarray  # float64[N_user] marker heights
    un: np.ndarray  # float64[N_user] marker positions
    ucount: np.ndarray  # int64[1] observations
    gq: np.ndarray  # float64[N_gc + 1]
    gn: np.ndarray
    gcount: np.ndarray
    # mapping and clustering scratch
    vs_map: np.ndarray  # int64[N] physical stream of each virtual stream
    sc_a: np.ndarray  # int64[N]
    sc_b: np.ndarray  # int64[N]
    sc_c: np.ndarray  # int64[N]
    sc_d: np.ndarray  # float32[N]
    sc_f: np.ndarray  # float64[N]
    sc_g: np.ndarray  # float64[N]
    sc_mat: np.ndarray  # float32[N, N]
    # the last ``mapping_log`` clusterings (Fig. 19): slot and mapping, a ring
    log_slot: np.ndarray  # int64[H]
    log_time: np.ndarray  # int64[H] the engine's user-write clock at that clustering
    log_map: np.ndarray  # int64[H, N]
    # the LBAs of the next AHEAD user writes, as the prefetch hook saw them (a ring)
    ahead: np.ndarray  # int64[AHEAD]


# -- the per-write path ------------------------------------------------------------------------


@nb.njit(cache=True)
def recluster(p):
    """Algorithm 3 (or an ablation) over the ring as it stands: newest slot = the current one."""
    st = p.scalars[0]
    n = st.n_user + st.n_gc
    k = st.k_phys
    if st.distance == 1:
        cluster_avg(p.life_sum, p.life_cnt, n, k, p.vs_map, p.sc_a, p.sc_f, p.sc_g)
    else:
        slot_weights(p.inv_decay, st.pos, p.weights)
        if st.search == 1:
            cluster_full(p.id_w, p.id_i, n, k, p.weights, p.vs_map, p.sc_a, p.sc_b, p.sc_mat)
        else:
            cluster_adjacent(p.id_w, p.id_i, n, k, p.weights, p.vs_map, p.sc_a, p.sc_b, p.sc_c, p.sc_d)
    if st.log_on == 1:
        row = st.reclusters % p.log_slot.shape[0]
        p.log_slot[row] = st.slot
        p.log_time[row] = st.user_now
        for v in range(n):
            p.log_map[row, v] = p.vs_map[v]
    st.reclusters += 1


@nb.njit(cache=True)
def _next_slot(p):
    """The current slot is full: recluster every ``W_recluster`` slots (on the full ring), then
    open the next slot and clear its ring column (once per segment of writes: not inlined)."""
    st = p.scalars[0]
    st.slot_fill = 0
    nxt = st.slot + 1
    if nxt % st.recluster_every == 0:
        recluster(p)
    L = st.ring_len
    npos = st.pos + 1 if st.pos + 1 < L else 0
    st.slot = nxt
    st.pos = npos
    n = st.n_user + st.n_gc
    for v in range(n):
        p.id_w[v, npos] = 0.0
        p.id_i[v, npos] = 0.0
    if st.distance == 1:
        decay = 1.0 - 1.0 / L
        for v in range(n):
            p.life_sum[v] *= decay
            p.life_cnt[v] *= decay


@nb.njit(cache=True, inline="always")
def _count_write(p, st, vs, user):
    """A block joins ``vs`` in the current slot; returns its packed (slot, vs). Filling the slot
    reclusters every ``W_recluster`` slots, then opens and clears the next (:func:`_next_slot`).
    With ``slot_clock=user`` only user writes (``user``) fill slots: GC writes count in the
    current slot without advancing the clock."""
    slot = st.slot
    p.id_w[vs, st.pos] += 1.0
    p.tot_w[vs] += 1
    if not user and st.slot_user == 1:
        return (slot << 8) | (vs + 1)
    st.clock += 1
    fill = st.slot_fill + 1
    if fill < st.seg_blocks:
        st.slot_fill = fill
    else:
        _next_slot(p)
    return (slot << 8) | (vs + 1)


@nb.njit(cache=True, inline="always")
def _count_invalid(p, st, packed, life):
    """An overwrite invalidates a block written as ``packed`` (slot << 8 | vs + 1)."""
    vs = (packed & 255) - 1
    p.tot_i[vs] += 1
    age = st.slot - (packed >> 8)
    L = st.ring_len
    if age < L:  # still in the ring: its position is the current one, age slots back
        pos = st.pos - age
        p.id_i[vs, pos if pos >= 0 else pos + L] += 1.0
    if st.distance == 1:
        p.life_sum[vs] += life
        p.life_cnt[vs] += 1.0


@nb.njit(cache=True, inline="always")
def _p2_sampled(left, every, q, n, count, dt):
    """Feed ``dt`` to a P² estimator on every ``every``-th lifetime (a deterministic 1-in-k
    sample; the markers' warm-up takes every lifetime so the first clusterings see a CDF);
    ``left`` lifetimes were left before this one's turn; returns the new count."""
    left -= 1
    if left <= 0 or count[0] <= q.shape[0]:
        p2_update(q, n, count, dt)
        left = every
    return left


@nb.njit(cache=True, inline="always")
def _landing_entry(s, st, group):
    """The physical block the engine's next append to ``group`` fills: the
    open segment's write pointer, or offset 0 of the segment the free stack gives next
    (``sim.kernels._append``); with none free, a GC block spills into the open segment with the
    most room (``_roomiest_group``, as the GC loop does); -1 if there is none either."""
    sb = st.seg_blocks
    seg = s.open_seg[group]
    if seg < 0 or s.seg_wp[seg] == sb:
        nfree = s.ctr[C_FREE]
        if nfree > 0:
            return s.free_stack[nfree - 1] * sb
        spill = _roomiest_group(s)
        if spill < 0:
            return -1
        seg = s.open_seg[spill]
    return seg * sb + s.seg_wp[seg]


@nb.njit(cache=True, inline="always")
def _writes_entry(st, block):
    """Whether a block landing on physical ``block`` (>= 0) sets its shared entry: with
    ``agg_owner=median`` only the first half of an entry's blocks do, so the entry describes the
    block at offset ``agg/2 - 1``; with ``last`` (and ``agg=1``) every block does."""
    return (block & ((1 << st.agg_shift) - 1)) < st.entry_writers


@nb.njit(cache=True, inline="always")
def _old_entry(s, st, lba):
    """Metadata entry of ``lba``'s current copy (-1 if it has none)."""
    if st.physical == 1:
        old = s.l2p[lba]
        return old >> st.agg_shift if old >= 0 else -1
    return lba >> st.agg_shift if s.lba_time[lba] >= 0 else -1


@nb.njit(cache=True, inline="always")
def _own_ids(p, block, o_user, o_gc):
    """``agg_ids=block``: the entry's packed fields with the stream ids of physical ``block``
    itself. The slots stay the entry's; a block GC moved while the entry's latest writer was a
    user write takes that write's slot (the entry's blocks land within a few appends)."""
    ids = np.int64(p.blk_ids[block])
    if o_user != 0 and (ids & 255) != 0:
        o_user = ((o_user >> 8) << 8) | (ids & 255)
    g = ids >> 8
    if g == 0:
        return o_user, np.int64(0)
    return o_user, (((o_gc if o_gc != 0 else o_user) >> 8) << 8) | g


@nb.njit(cache=True, inline="always")
def minos_prefetch(p, lba):
    """The engine's ``prefetch_lba`` hook, 16 user writes (8 GC relocations) ahead. MINOS's
    entries are per *physical* block (``l2p[lba] >> agg_shift``), which this hook (no ``s``)
    cannot read, and whose ``l2p`` entry the engine is only now fetching: the LBA waits in the
    ``hint`` scalar for :func:`_prefetch_overwritten`. With ``agg_space=logical`` the entry is
    known here and fetched at once."""
    st = p.scalars[0]
    st.hint = lba
    if st.physical == 0:
        prefetch(p.meta, lba >> st.agg_shift)


@nb.njit(cache=True, inline="always")
def _prefetch_overwritten(s, p, st):
    """Prefetch the entry that the user write ``AHEAD`` writes from now will read (its LBA's
    current copy). Its LBA was queued ``AHEAD`` user writes ago from the hook's hint (16 writes
    ahead then), and the engine has since fetched that LBA's ``l2p`` entry (and read it in this
    very iteration). Where the hook is not called (a chunk's last 16 writes) or a GC pass left a
    relocated LBA in the hint, the prefetch is wasted, never wrong: results do not depend on it."""
    k = st.ahead_pos
    la = p.ahead[k]
    p.ahead[k] = st.hint
    st.ahead_pos = k + 1 if k + 1 < AHEAD else 0
    if la >= 0:
        old = s.l2p[la]
        if old >= 0:
            prefetch(p.meta, old >> st.agg_shift)
            if st.block_ids == 1:
                prefetch(p.blk_ids, old)


@nb.njit(cache=True, inline="always")
def minos_user(s, p, lba, now):
    st = p.scalars[0]
    shift = st.agg_shift
    st.user_now = now
    meta = p.meta
    if st.physical == 1:
        _prefetch_overwritten(s, p, st)
    eo = _old_entry(s, st, lba)
    # the overwritten copy's entry, all three fields up front (see minos_gc)
    o_time = o_user = o_gc = 0
    if eo >= 0:
        old = meta[eo]
        o_time, o_user, o_gc = old.time, old.user, old.gc
        if st.block_ids == 1:
            o_user, o_gc = _own_ids(p, s.l2p[lba], o_user, o_gc)
    if o_user == 0:
        vs = st.n_user - 1  # a first write
    else:
        last = s.lba_time[lba] if shift == 0 else o_time
        dt = float(now - last)
        # the stream first (Algorithm 2: update, query, one step toward the target), then the
        # bookkeeping, which nothing on this write reads: the group is known sooner
        st.p2_skip_user = _p2_sampled(st.p2_skip_user, st.p2_every, p.uq, p.un, p.ucount, dt)
        target = p2_query(p.uq, p.ucount, dt)
        prev = (o_user & 255) - 1
        if st.correlative == 1:
            vs = prev - (1 if prev > target else (-1 if prev < target else 0))
        else:
            vs = target
        # the overwritten copy: its user write's slot, and its GC write's if GC moved it since
        _count_invalid(p, st, o_user, dt)
        if o_gc != 0:
            _count_invalid(p, st, o_gc, dt)
    packed = _count_write(p, st, vs, True)  # may recluster: the group is read after it
    group = p.vs_map[vs]
    if st.physical == 1:
        blk = _landing_entry(s, st, group)
        en = blk >> shift if blk >= 0 and _writes_entry(st, blk) else -1
        if st.block_ids == 1 and blk >= 0:
            p.blk_ids[blk] = vs + 1
    else:
        en = lba >> shift
    if en >= 0:
        row = meta[en]
        row.time = now
        row.user = packed
        row.gc = 0
    return group


@nb.njit(cache=True, inline="always")
def minos_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    shift = st.agg_shift
    meta = p.meta
    eo = _old_entry(s, st, lba)
    old = meta[eo]
    # all three fields up front: the stores to the landing entry below then never hold them up
    o_time, o_user, o_gc = old.time, old.user, old.gc
    if st.block_ids == 1:
        o_user, o_gc = _own_ids(p, s.l2p[lba], o_user, o_gc)
    last = s.lba_time[lba] if shift == 0 else o_time
    dt = float(now - last)
    st.p2_skip_gc = _p2_sampled(st.p2_skip_gc, st.p2_every, p.gq, p.gn, p.gcount, dt)
    vs = st.n_user + p2_query(p.gq, p.gcount, dt)
    if o_gc != 0:
        p.gc_superseded[(o_gc & 255) - 1] += 1
    packed = _count_write(p, st, vs, False)
    group = p.vs_map[vs]
    if st.physical == 1:
        # the block's user metadata moves with it to its new physical place
        blk = _landing_entry(s, st, group)
        if st.block_ids == 1 and blk >= 0:
            p.blk_ids[blk] = (o_user & 255) | ((vs + 1) << 8)
        if blk >= 0 and _writes_entry(st, blk):
            row = meta[blk >> shift]
            row.time = o_time
            row.user = o_user
            row.gc = packed
    else:
        meta[eo].gc = packed
    return group


def entries(state: MinosState) -> dict:
    """The metadata entries decoded: u_vs, u_slot, g_vs, g_slot (-1 = none) and u_time."""
    m = state.meta
    out = {"u_time": m["time"].copy()}
    for key, col in (("u", "user"), ("g", "gc")):
        v = m[col]
        out[f"{key}_vs"] = np.where(v != 0, (v & 255) - 1, -1)
        out[f"{key}_slot"] = np.where(v != 0, v >> 8, -1)
    return out


def block_ids(state: MinosState) -> dict:
    """``agg_ids=block``: each physical block's own stream ids decoded, u_vs and g_vs (-1 = none)."""
    if record(state.scalars).block_ids != 1:
        raise ValueError("block_ids: this MINOS state keeps its stream ids per entry (agg_ids=entry); see entries()")
    ids = state.blk_ids.astype(np.int64)
    return {"u_vs": (ids & 255) - 1, "g_vs": (ids >> 8) - 1}


# -- reports and benchmark ---------------------------------------------------------------------


def metadata_mib_per_tib(agg: int, *, ids: str = "entry", segment_bytes: int = 512 << 20, n_virtual: int = 16) -> dict:
    """Table 5's memory: per-block metadata (user and GC: 32-bit write slot + 4-bit stream id,
    9 bytes) shared by ``agg`` blocks, per TiB of 4 KiB blocks; plus the ID-Vectors (two 32-bit
    counters per virtual stream and slot, L = segments per TiB). ``ids="block"`` (``agg_ids``):
    only the two slots are shared, each block keeps its two 4-bit stream ids."""
    if ids not in AGG_IDS:
        raise ValueError(f"ids must be one of {', '.join(AGG_IDS)}, got {ids!r}")
    blocks = TIB // BLOCK_BYTES
    if ids == "entry":
        meta = blocks * 2 * (32 + 4) / 8 / agg / (1 << 20)
    else:
        meta = blocks * (2 * 32 / 8 / agg + 2 * 4 / 8) / (1 << 20)
    L = TIB // segment_bytes
    ring = n_virtual * L * 2 * 4 / (1 << 20)
    return {"agg": agg, "metadata_mib": meta, "id_vectors_mib": ring, "total_mib": meta + ring}


def _bench_counters(n: int, L: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """ID-Vectors shaped like a skewed workload: stream ``v`` writes ~64 blocks a slot and has
    invalidated a share of them that falls with the slot's age, slower for colder streams."""
    rng = np.random.default_rng(seed)
    W = np.zeros((2 * n, L), np.float32)
    I = np.zeros((2 * n, L), np.float32)
    age = np.arange(L)[::-1]
    for v in range(n):
        w = rng.poisson(64, L).astype(np.float32)
        frac = 1.0 - np.exp(-age / (4.0 * 1.6**v))
        W[v] = w
        I[v] = np.floor(w * frac * rng.uniform(0.9, 1.0, L))
    return W, I


#: the segment counts of the paper's Table 4
TABLE4_SEGMENTS = (512, 1024, 2048, 4096, 8192)


def _timed(fn, *args) -> int:
    """Nanoseconds of one call ``fn(*args)``."""
    t0 = time.perf_counter_ns()
    fn(*args)
    return time.perf_counter_ns() - t0


def bench_clustering(segments=TABLE4_SEGMENTS, n: int = 16, k: int = 6, repeats: int = 200) -> dict:
    """Microseconds per clustering (Algorithm 3, adjacent, OP distance) at ``L`` = each segment
    count, ``n`` virtual streams into ``k``: median of ``repeats`` timed calls after a warm-up
    (Table 4). Returns ``{"n": n, "k": k, "us": {L: us}}``."""
    out = {}
    for L in segments:
        W0, I0 = _bench_counters(n, L)
        W, I = id_vectors(2 * n, L)  # the policy's layout
        W[:, :L] = W0
        I[:, :L] = I0
        wt = np.empty(L, np.float32)
        slot_weights(decay_table(L), L // 3, wt)
        res = np.empty(n, np.int64)
        a, b, c = (np.empty(n, np.int64) for _ in range(3))
        d = np.empty(n, np.float32)
        cluster_adjacent(W, I, n, k, wt, res, a, b, c, d)
        times = [_timed(cluster_adjacent, W, I, n, k, wt, res, a, b, c, d) for _ in range(repeats)]
        out[int(L)] = float(np.median(times)) / 1e3
    return {"n": n, "k": k, "us": out}


def distance_passes(n: int, k: int) -> int:
    """Full-length OP distances Algorithm 3 computes at most per clustering of ``n`` streams into
    ``k``: the ``n - 1`` adjacent pairs, then two per merge pass (``n - k - 1`` passes: the last
    merge only relinks). Each one sums one term per slot."""
    return (n - 1) + 2 * max(n - k - 1, 0)


@nb.njit(cache=True)
def _repeat_three(W, I, wt, dist, reps):
    for _ in range(reps):
        adjacent_distances(W, I, 4, wt, dist)


def bench_distance_floor(
    segments=TABLE4_SEGMENTS, n: int = 16, k: int = 6, slots: int = 512, repeats: int = 500
) -> dict:
    """The arithmetic floor of the clustering on this CPU: picoseconds per OP-distance term
    (Eq. (2) times its weight, summed) of the shipped kernel on four rows of ``slots`` slots that
    stay in L1, best of 50. A clustering at ``L`` slots computes at most ``distance_passes(n, k) * L``
    terms, so ``floor_us[L]`` = that many terms at this rate for each ``L`` in ``segments``: the
    time left without the merges' sums, cache misses and the search (a floor up to timing noise:
    on a shared VM two timings in one process can still differ by 10-20%)."""
    rng = np.random.default_rng(0)
    W, I = id_vectors(4, slots)  # the policy's padded layout (no 4K aliasing between rows)
    W[:, :slots] = rng.poisson(64, (4, slots))
    I[:, :slots] = np.floor(W[:, :slots] * rng.uniform(0.0, 1.0, (4, slots)))
    wt = rng.uniform(0.37, 1.0, slots).astype(np.float32)
    dist = np.zeros(4, np.float32)
    _repeat_three(W, I, wt, dist, 10)
    best = min(_timed(_repeat_three, W, I, wt, dist, repeats) for _ in range(50))
    ps = best * 1e3 / (repeats * 3 * slots)
    passes = distance_passes(n, k)
    return {"ps_per_term": ps, "passes": passes, "floor_us": {int(L): ps * passes * L / 1e6 for L in segments}}


# -- the policy --------------------------------------------------------------------------------


@register
class Minos(PlacementPolicy):
    """MINOS placement (see the module docstring); groups are the K physical streams."""

    name = "minos"
    default_groups = 6
    victim = "cost_benefit_sepbit"
    place_user = minos_user
    place_gc = minos_gc
    on_reclaim = no_reclaim_hook
    prefetch_lba = minos_prefetch

    DEFAULTS = {
        "n_user": 12,
        "n_gc": 4,
        "ring_len": None,
        "recluster_every": 8,
        "agg": 8,
        "agg_space": "physical",
        "agg_owner": "last",
        "agg_ids": "entry",
        "correlative": True,
        "search": "adjacent",
        "distance": "op",
        "mapping_log": 0,
        "p2_every": 8,
        "slot_clock": "user",
    }

    def accepted_params(self) -> tuple[str, ...]:
        return tuple(self.DEFAULTS)

    def __init__(self, n_groups=6, **params):
        super().__init__(n_groups, **params)
        cfg = {**self.DEFAULTS, **params}
        self.n_user = _int_param("n_user", cfg["n_user"], 2, "the new-write stream and at least one update stream")
        self.n_gc = _int_param("n_gc", cfg["n_gc"], 1, "at least one GC virtual stream")
        n = self.n_user + self.n_gc
        if n > 255:
            raise ValueError(
                f"policy minos: n_user + n_gc = {n} exceeds 255 virtual streams "
                "(8-bit stream ids); lower n_user or n_gc"
            )
        if self.n_groups < 2 or self.n_groups > n:
            raise ValueError(
                f"policy minos: n_groups (K physical streams) must be in 2..{n} "
                f"(n_user + n_gc virtual streams), got {self.n_groups}"
            )
        self.ring_len = (
            None
            if cfg["ring_len"] is None
            else _int_param("ring_len", cfg["ring_len"], 2, "a ring of at least 2 slots")
        )
        self.recluster_every = _int_param("recluster_every", cfg["recluster_every"], 1, "recluster every >= 1 segments")
        agg = cfg["agg"]
        if agg not in AGG and not (isinstance(agg, int) and agg >= 1 and agg & (agg - 1) == 0):
            raise ValueError(f"policy minos: agg must be a power of two (1, 8 or 32 in the paper), got {agg!r}")
        self.agg = int(agg)
        if cfg["agg_space"] not in ("physical", "logical"):
            raise ValueError(
                f"policy minos: agg_space must be physical (the paper: adjacent physical "
                f"blocks share an entry) or logical (adjacent LBAs), got {cfg['agg_space']!r}"
            )
        self.agg_space = cfg["agg_space"]
        if cfg["agg_owner"] not in AGG_OWNER:
            raise ValueError(
                f"policy minos: agg_owner must be last (an aggregated entry describes the latest "
                f"block written into it) or median (the block at offset agg/2 - 1), got {cfg['agg_owner']!r}"
            )
        self.agg_owner = cfg["agg_owner"]
        if self.agg == 1:  # an entry of one block describes that block: median ran as last, without a word
            why = "chooses which block a shared entry describes, and policy.params.agg=1 shares none"
            refuse_unread_params(cfg, self.DEFAULTS, ("agg_owner",), why, "policy.params.agg=8")
        if cfg["agg_ids"] not in AGG_IDS:
            raise ValueError(
                f"policy minos: agg_ids must be entry (one pair of stream ids per shared entry, the "
                f"paper) or block (each physical block keeps its own), got {cfg['agg_ids']!r}"
            )
        if cfg["agg_ids"] == "block" and self.agg_space != "physical":
            raise ValueError(
                "policy minos: agg_ids=block keeps stream ids per physical block; it needs agg_space=physical"
            )
        self.agg_ids = cfg["agg_ids"]
        if not isinstance(cfg["correlative"], bool):
            raise ValueError(f"policy minos: correlative must be true or false, got {cfg['correlative']!r}")
        self.correlative = cfg["correlative"]
        for key, table in (("search", SEARCH), ("distance", DISTANCE)):
            if cfg[key] not in table:
                raise ValueError(f"policy minos: {key} must be one of {', '.join(table)}, got {cfg[key]!r}")
        if cfg["distance"] == "avg" and cfg["search"] == "full":
            raise ValueError(
                "policy minos: distance=avg (AvgDist) clusters adjacent streams only; use search=adjacent with it"
            )
        self.search = cfg["search"]
        self.distance = cfg["distance"]
        self.mapping_log = _int_param(
            "mapping_log", cfg["mapping_log"], 0, "the number of latest clusterings to keep, 0 = none"
        )
        self.p2_every = _int_param(
            "p2_every", cfg["p2_every"], 1, "update the P² markers on every k-th lifetime, 1 = every one (the paper)"
        )
        if cfg["slot_clock"] not in SLOT_CLOCK:
            raise ValueError(
                f"policy minos: slot_clock must be all (a slot = one segment of user + GC writes) "
                f"or user (one segment of user writes, the paper's logical time), got {cfg['slot_clock']!r}"
            )
        self.slot_clock = cfg["slot_clock"]

    def bind(self, ctx: SimContext) -> MinosState:
        n = self.n_user + self.n_gc
        K = self.n_groups
        L = self.ring_len if self.ring_len is not None else int(ctx.n_segments)
        if L < 2:
            raise ValueError(f"policy minos: the ID-Vector ring needs >= 2 slots, got L={L}")
        per_stream = int(ctx.segment_blocks) / n
        if per_stream < SPARSE_SLOT_WRITES:
            warnings.warn(
                f"policy minos: a time slot (one segment, {ctx.segment_blocks} blocks) holds "
                f"{per_stream:.1f} writes per virtual stream ({n} streams); the OP distance compares "
                f"streams slot by slot, and at 2 per stream MINOS trailed SepBIT on Zipf-H "
                f"(docs/minos.md, 'Slot density'). Segments of >= {SPARSE_SLOT_WRITES * n} blocks or "
                "fewer virtual streams (n_user, n_gc) give denser slots",
                stacklevel=2,
            )
        blocks = int(ctx.n_segments) * int(ctx.segment_blocks) if self.agg_space == "physical" else int(ctx.capacity)
        entries = -(-blocks // self.agg)
        uq, un, ucount = p2_new(self.n_user - 1)
        gq, gn, gcount = p2_new(self.n_gc)
        id_w, id_i = id_vectors(2 * n, L)
        # before the first clustering: user streams evenly over K-1 physical streams, GC on the last
        vs_map = np.empty(n, np.int64)
        vs_map[: self.n_user] = np.arange(self.n_user) * (K - 1) // self.n_user
        vs_map[self.n_user :] = K - 1
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.n_user, st.n_gc, st.k_phys, st.ring_len = self.n_user, self.n_gc, K, L
        st.recluster_every, st.seg_blocks = self.recluster_every, ctx.segment_blocks
        st.agg_shift, st.physical = self.agg.bit_length() - 1, int(self.agg_space == "physical")
        st.entry_writers = max(1, self.agg // 2) if self.agg_owner == "median" else self.agg
        st.block_ids = int(self.agg_ids == "block")
        st.correlative, st.p2_every = int(self.correlative), self.p2_every
        st.search, st.distance = SEARCH[self.search], DISTANCE[self.distance]
        st.log_on = int(self.mapping_log > 0)
        st.slot_user = SLOT_CLOCK[self.slot_clock]
        st.p2_skip_user = st.p2_skip_gc = 1
        st.hint = -1
        return MinosState(
            scalars=scalars,
            meta=np.zeros(entries, META_ROW),
            blk_ids=np.zeros(blocks if self.agg_ids == "block" else 1, np.uint16),
            id_w=id_w,
            id_i=id_i,
            inv_decay=decay_table(L),
            weights=np.zeros(L, np.float32),
            tot_w=np.zeros(n, np.int64),
            tot_i=np.zeros(n, np.int64),
            gc_superseded=np.zeros(n, np.int64),
            life_sum=np.zeros(n, np.float64),
            life_cnt=np.zeros(n, np.float64),
            uq=uq,
            un=un,
            ucount=ucount,
            gq=gq,
            gn=gn,
            gcount=gcount,
            vs_map=vs_map,
            sc_a=np.zeros(n, np.int64),
            sc_b=np.zeros(n, np.int64),
            sc_c=np.zeros(n, np.int64),
            sc_d=np.zeros(n, np.float32),
            sc_f=np.zeros(n, np.float64),
            sc_g=np.zeros(n, np.float64),
            sc_mat=np.zeros((n, n), np.float32),
            log_slot=np.full(max(self.mapping_log, 1), -1, np.int64),
            log_time=np.full(max(self.mapping_log, 1), -1, np.int64),
            log_map=np.full((max(self.mapping_log, 1), n), -1, np.int64),
            ahead=np.full(AHEAD, -1, np.int64),
        )

    def label(self) -> str:
        switches = []
        if self.agg != 8:
            switches.append(f"agg{self.agg}")
        if self.agg_space != "physical":
            switches.append("lba")
        if self.agg_owner != "last" and self.agg > 1:
            switches.append(f"own{self.agg_owner}")
        if self.agg_ids != "entry":
            switches.append(f"ids{self.agg_ids}")
        if not self.correlative:
            switches.append("noCP")
        if self.search == "full":
            switches.append("full")
        if self.distance == "avg":
            switches.append("avgdist")
        if self.p2_every != 8:
            switches.append(f"p2every{self.p2_every}")
        if self.slot_clock != "user":
            switches.append(f"slot{self.slot_clock}")
        return self.name + (f"[{','.join(switches)}]" if switches else "")

    def summary(self, state: MinosState) -> dict:
        out = {}
        if self.mapping_log:
            done = int(record(state.scalars).reclusters)
            h = state.log_slot.shape[0]
            rows = [i % h for i in range(max(0, done - h), done)]
            out["minos_mapping_log"] = [
                {
                    "slot": int(state.log_slot[r]),
                    "user_time": int(state.log_time[r]),
                    "mapping": state.log_map[r].tolist(),
                }
                for r in rows
            ]
        return out | {
            "minos_mapping": state.vs_map.tolist(),
            "minos_reclusters": int(record(state.scalars).reclusters),
            # None until the estimator has seen as many lifetimes as it has markers (JSON has no NaN)
            "minos_user_quantiles": [None if np.isnan(x) else float(x) for x in p2_quantiles(state.uq, state.ucount)],
            "minos_gc_quantiles": [None if np.isnan(x) else float(x) for x in p2_quantiles(state.gq, state.gcount)],
            "minos_vs_writes": state.tot_w.tolist(),
            "minos_metadata_mib_per_tib": metadata_mib_per_tib(
                self.agg, ids=self.agg_ids, n_virtual=self.n_user + self.n_gc
            )["metadata_mib"],
        }


def _int_param(name: str, value, low: int, why: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"policy minos: {name} must be an integer >= {low} ({why}), got {value!r}")
    return int(value)
