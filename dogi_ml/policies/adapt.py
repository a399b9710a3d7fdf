"""ADAPT (ICPP'25, shared/papers/adapt-icpp25.txt): access-density-aware placement for
log-structured storage on SSD arrays, where a partial chunk is zero-padded once it has waited
past the SLA (the engine's chunk layer: ``sim.raid_chunk_blocks``, ``sim.raid_chunk_timeout_us``).

Six groups (§3.1), as SepBIT's classes: group 0 hot user writes, group 1 cold user writes,
groups 2..5 GC writes (2: blocks reclaimed from the hot group; 3..5 by age against 4l and 16l,
``l`` the hot/cold threshold).

- Lifespan layer "like SepBIT" (§3.1): SepBIT's own functions (:mod:`dogi_ml.policies.sepbit`,
  ``base: code`` = the authors' simulator, the same SepBIT the evaluation compares with; ``paper``
  = Algorithm 1) decide hot/cold and the GC groups, so with the three mechanisms off ADAPT places
  exactly as that SepBIT (tested). (Before, ADAPT had its own Algorithm-1 copy while the baseline
  ran the code variant: YCSB-A light 10.24 vs SepBIT 9.80 with every mechanism off.)
- Hot/cold threshold (§3.2): a user write is hot when its lifespan (user writes since the LBA's
  previous write) is below ``l``. Until the ghost sets speak, ``l`` is SepBIT's: the mean lifespan
  of the last 16 reclaimed hot segments (the "lifespan of segments in the hot group" the paper
  starts from). The ghost sets (:mod:`dogi_ml.policies._adapt_ghost`, sampled at rate ``r``,
  segments scaled by ``r``, intervals and chunk timeout by the measured sampled share of writes,
  aggregation emulated) simulate the two user groups under a series of thresholds; the best one
  is applied once 10% of the capacity has been written since the last application, or earlier
  when its WA is steady.
- Cross-group dynamic aggregation (§3.3), in ``on_chunk_due``: when the hot group's chunk is due,
  its blocks without a shadow are shadow-appended into the cold group's unfilled chunk (which is
  flushed now; the hot chunk keeps its blocks, lazy append, and its timer restarts); when the
  cold group's chunk is due, the hot group's pending blocks fill its padding the same way. The
  condition follows Eq. (1): a group aggregates while its chunks do get padded (it cannot fill
  them alone, ``P_i > 0``), and stops once the blocks already aggregated in the hot chunk plus the
  new ones exceed the group's average padding per padded chunk, ``S_ck - C_i``.
- Beyond the paper's text (switches, off by default; §3.3 names the hot user group as the
  source): ``gc_aggregate`` applies the same shadow append to the GC groups' partial chunks at a
  GC pass's end (the engine pads each; the coldest becomes the shadow group), ``gc_into_cold``
  lets a GC group left alone shadow into the cold user group's unfilled chunk while that group's
  chunks are padded by at least as many blocks on average (Eq. (1)'s condition).
- Proactive demotion (§3.4): per GC group a cascade of Bloom filters (FIFO eviction,
  :mod:`dogi_ml.policies._adapt_bloom`) holds LBAs that GC migrated from that group back into it
  (groups 3..5 only: group 2 takes blocks from the hot group alone, so nothing ever returns to it);
  a user write whose best score reaches ``demote_score`` goes straight to that GC group, if the
  lifespan test calls it cold (``demote_hot: false``; §3.4 rests on a block's prior lifespan
  predicting its next one, and a short one just now contradicts the filters' older history).

Shadow copies are modelled by the engine as slots that hold no live data (see
:func:`dogi_ml.sim.kernels.shadow_append`): they expire when the original's chunk is flushed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.sim.kernels import chunk_flush_pad, shadow_append
from dogi_ml.sim.policy_api import (
    PlacementPolicy,
    SimContext,
    new_scalars,
    record,
    refuse_unread_params,
    scalar_fields,
)
from dogi_ml.sim.state import C_NOW_US, P_CHUNK, P_SEG_BLOCKS, P_TIME_ON

from . import register
from ._adapt_bloom import (
    BloomCascade,
    cascade_best,
    cascade_bytes,
    cascade_insert,
    cascade_score,
    new_cascade,
    optimal_hashes,
)
from ._adapt_ghost import (
    R_MOD,
    GhostSets,
    ghost_bytes,
    ghost_on_user_write,
    ghost_restart_window,
    memory_breakdown,
    new_ghost_sets,
)
from .sepbit import NC_WINDOW, SepBIT, sepbit_classify, sepbit_gc, sepbit_hot_created, sepbit_reclaim
from .sepbit import VARIANTS as SEPBIT_VARIANTS

HOT, COLD = 0, 1
GC_FIRST, GC_LAST = 2, 5  # the four GC groups
RA_FIRST = 3  # first GC group a block can migrate back into (2 is fed by the hot group only)
RA_GROUPS = 3  # GC groups 3, 4, 5 carry an RA identifier
SCALARS = scalar_fields(
    threshold=np.int64,  # hot/cold threshold l in user writes; -1 = the SepBIT window's (or +inf)
    ghost=np.int64,  # 1: the ghost sets set the threshold
    cold_start=np.int64,  # 1: centre the ghosts' first window on SepBIT's l once known (§3.2)
    started=np.int64,  # 1: that window is set
    max_thr_segments=np.int64,  # ceiling of a ghost's threshold (segments): 16 capacities
    adjustments=np.int64,  # thresholds applied from the ghost sets
    aggregate=np.int64,  # 1: cross-group aggregation on
    demote=np.int64,  # 1: proactive demotion on
    demote_score=np.int64,
    demote_coldest=np.int64,  # 1: only the coldest GC group's cascade demotes
    demote_hot=np.int64,  # 1: a write the lifespan test calls hot may be demoted too
    demotions=np.int64,  # user writes sent straight to a GC group
    shadow_calls=np.int64,  # shadow appends done
    shadowed=np.int64,  # blocks shadow-appended
    agg_stops=np.int64,  # due hot chunks padded because of the stop rule
    agg_no_room=np.int64,  # due hot chunks padded because the cold group had no unfilled chunk
    inserted=np.int64,  # LBAs inserted into the cascades
    gc_aggregate=np.int64,  # 1: GC-pass ends aggregate the GC groups' partial chunks (gc_aggregate)
    gc_agg_passes=np.int64,  # GC-pass ends where GC chunks were shadow-appended into a colder one
    gc_shadowed=np.int64,  # GC-written blocks shadow-appended at GC-pass ends
    gc_into_cold=np.int64,  # 1: ... a lone GC group's chunk may shadow into the cold user group's (gc_into_cold)
    gc_into_cold_calls=np.int64,  # GC groups' chunks shadow-appended into the cold user group's
)


class AdaptState(NamedTuple):
    scalars: np.ndarray
    demoted: np.ndarray  # int64[6]: user writes demoted per group
    ghost: GhostSets  # sampled ghost sets of the two user groups (§3.2)
    sep: tuple  # SepBIT's state (its l, FIFO queue, creation times): the lifespan layer (§3.1)
    bloom: BloomCascade  # one Bloom-filter cascade per GC group 3..5 (§3.4), index = group - RA_FIRST


@nb.njit(cache=True)
def adapt_user(s, p, lba, now):
    st = p.scalars[0]
    if st.ghost:
        if st.cold_start and not st.started and st.threshold < 0 and p.sep.scalars[0].window_sum >= 0:
            # SepBIT's l (mean lifespan of 16 reclaimed hot segments) is known: the ghosts'
            # exponential window restarts with it in the middle (§3.2's cold start)
            st.started = 1
            l_seg = p.sep.scalars[0].window_sum // (NC_WINDOW * s.prm[P_SEG_BLOCKS])
            ghost_restart_window(p.ghost, max(1, l_seg >> (p.ghost.thr.shape[0] // 2)))
        t_us = s.ctr[C_NOW_US] if s.prm[P_TIME_ON] else -1
        thr = ghost_on_user_write(p.ghost, lba, now, t_us)
        if thr >= 0:
            st.threshold = thr
            st.adjustments += 1
            # WA monotonic in the threshold keeps doubling the ghosts' window; past a few
            # capacities every rewrite is hot anyway, and the products would overflow int64
            thr_cap = st.max_thr_segments
            for i in range(p.ghost.thr.shape[0]):
                if p.ghost.thr[i] > thr_cap:
                    p.ghost.thr[i] = thr_cap
    # SepBIT's own decision and bookkeeping (its FIFO queue, hot segments' creation times), so
    # ADAPT's lifespan layer is the SepBIT it is compared with ("like SepBIT", §3.1)
    sep = p.sep.scalars[0]
    g = sepbit_classify(s, p.sep, lba, now)
    if st.threshold >= 0:
        # the ghost sets' threshold replaces SepBIT's l once applied (§3.2)
        last = s.lba_time[lba]
        g = HOT if last >= 0 and now - last < st.threshold else COLD
    if st.demote and (g == COLD or st.demote_hot):
        # proactive demotion: a block GC keeps migrating back into the same GC group goes there.
        # Only a block whose lifespan just now was long (cold) unless demote_hot: §3.4 rests on a
        # block's prior lifespan predicting its next, and a short one contradicts the filters
        if st.demote_coldest:
            k = RA_GROUPS - 1
            score = cascade_score(p.bloom, k, lba)
        else:
            k, score = cascade_best(p.bloom, lba)
        if k >= 0 and score >= st.demote_score:
            st.demotions += 1
            p.demoted[RA_FIRST + k] += 1
            g = RA_FIRST + k
    if g == HOT and sep.fifo:
        sepbit_hot_created(s, sep, now)  # booked where the block lands, as SepBIT books its Class 1
    return g


@nb.njit(cache=True)
def adapt_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    vg = s.seg_group[victim]
    # SepBIT's GC classes: from the hot group -> 2, else by age against 4l and 16l
    g = sepbit_gc(s, p.sep, lba, victim, now)
    if st.demote and g == vg and g >= RA_FIRST:
        # a valid block migrated back into its own GC group: the RA identifier learns it (§3.4)
        cascade_insert(p.bloom, g - RA_FIRST, lba)
        st.inserted += 1
    return g


@nb.njit(cache=True)
def adapt_reclaim(s, p, victim, now):
    sepbit_reclaim(s, p.sep, victim, now)


@nb.njit(cache=True)
def _avg_padding(s, g):
    """The group's mean padding per padded chunk, ``S_ck - C_i`` of Eq. (1); -1 if it never padded."""
    n = s.group_pad_chunks[g]
    if n == 0:
        return -1
    return s.group_pad[g] // n


@nb.njit(cache=True)
def _gc_pass_aggregate(s, p, t_us):
    """A GC pass ended with partial chunks in GC groups (each would be padded now): §3.3's shadow
    append applied to them. The coldest of them is the shadow group (§3.3's group selection); the
    hotter ones' blocks without a shadow fill its padding, hottest first, and it is flushed; a group
    whose blocks all got a shadow keeps its chunk open (lazy append, no deadline: GC writes have no
    SLA of their own) for the next passes to fill, and is not padded (its flag cleared). Repeated
    while two such groups remain. With ``gc_into_cold``, a GC group left alone then shadows into the
    cold user group's unfilled chunk (flushed at its own deadline or when full), if it fits."""
    chunk = s.prm[P_CHUNK]
    st = p.scalars[0]
    total = 0
    while True:
        dst = -1
        for g in range(GC_LAST, GC_FIRST - 1, -1):
            if s.group_gc_pass[g] and s.chunk_fill[g] > s.chunk_shadowed[g]:
                dst = g
                break
        if dst < 0:
            break
        moved = 0
        for src in range(GC_FIRST, dst):
            if not s.group_gc_pass[src]:
                continue
            pend = s.chunk_fill[src] - s.chunk_shadowed[src]
            if pend <= 0:
                continue
            room = chunk - s.chunk_fill[dst]
            if pend < room:
                moved += shadow_append(s, src, dst, t_us, False)  # leaves dst's chunk open for more
                s.group_gc_pass[src] = 0
            else:
                # fills the shadow group's chunk (flushed whole); src keeps any rest for the next round
                moved += shadow_append(s, src, dst, t_us)
                if s.chunk_fill[src] == s.chunk_shadowed[src]:
                    s.group_gc_pass[src] = 0
                break
        if moved == 0:
            break
        chunk_flush_pad(s, dst)  # no-op when the last shadow append filled it
        st.gc_agg_passes += 1
        total += moved
    if st.gc_into_cold:
        for src in range(GC_FIRST, GC_LAST + 1):
            if not s.group_gc_pass[src]:
                continue
            pend = s.chunk_fill[src] - s.chunk_shadowed[src]
            room = chunk - s.chunk_fill[COLD]
            if pend <= 0 or s.chunk_fill[COLD] == 0 or pend > room:
                continue
            # Eq. (1)'s condition for the cold group as the shadow group: its chunks must leave
            # room on average (mean padding per chunk flushed), else shadows displace its own blocks
            if pend * s.group_chunks[COLD] > s.group_pad[COLD]:
                continue
            # fits (pend <= room): a chunk it completes is flushed whole, else it stays open for
            # the cold group's own blocks until its deadline
            total += shadow_append(s, src, COLD, t_us, False)
            s.group_gc_pass[src] = 0
            st.gc_into_cold_calls += 1
    st.gc_shadowed += total
    return total


@nb.njit(cache=True)
def adapt_chunk_due(s, p, group, due_us):
    """Cross-group aggregation (§3.3) when a chunk passes its deadline: the due chunk's blocks
    without a shadow (hot group, or a GC group holding demoted user writes) are shadow-appended
    into the cold user group's unfilled chunk; when the cold group's own chunk is due, the hot
    group's pending blocks fill its padding instead. At a GC pass's end (``s.group_gc_pass[group]``
    set), with ``gc_aggregate``: :func:`_gc_pass_aggregate`."""
    st = p.scalars[0]
    if s.group_gc_pass[group]:
        if st.gc_aggregate:
            _gc_pass_aggregate(s, p, due_us)
        return None
    if not st.aggregate:
        return None
    src = HOT if group == COLD else group
    pending = s.chunk_fill[src] - s.chunk_shadowed[src]
    if pending <= 0:
        return None
    room = s.prm[P_CHUNK] - s.chunk_fill[COLD]
    if s.chunk_fill[COLD] == 0 or room <= 0:
        if group == HOT:
            st.agg_no_room += 1
        return None
    # Eq. (1): aggregate only for a group that cannot fill its chunks alone, and stop once the
    # aggregated blocks of this chunk exceed its mean padding per chunk
    avg_pad = _avg_padding(s, src)
    if avg_pad < 0 or s.chunk_shadowed[src] + min(pending, room) > avg_pad:
        if group == HOT:
            st.agg_stops += 1
        return None
    k = shadow_append(s, src, COLD, due_us)
    if k > 0:
        st.shadow_calls += 1
        st.shadowed += k
    return None


def _switch(params: dict, key: str, default: bool) -> bool:
    """Switch ``key`` of ``params`` (``default`` when unset): true or false, else a one-line error
    naming it (``bool()`` read ``ghost=maybe`` as true without a word)."""
    return checked_setting(params.get(key, default), f"policy.params.{key}", bool)


#: parameters that only one part of ADAPT reads, and their defaults: with that part off
#: (``ghost: false``, ``demote: false``) a value other than the default was ignored without a word
PART_PARAMS = {
    "ghost": {
        "rate": 0.001,
        "min_sampled": 4096,
        "min_ghost_segment": 2,
        "n_sets": 8,
        "ghost_aggregate": True,
        "ghost_cold_start": True,
    },
    "demote": {"demote_score": 4, "filters": 4, "filter_items": 0.0625, "filter_bits": 8},
}


@register
class ADAPT(PlacementPolicy):
    name = "adapt"
    default_groups = 6
    place_user = adapt_user
    place_gc = adapt_gc
    on_reclaim = adapt_reclaim
    on_chunk_due = adapt_chunk_due

    def __init__(self, n_groups=6, **params):
        if n_groups != 6:
            raise ConfigError(
                f"policy=adapt uses exactly 6 groups (2 user + 4 GC), got policy.n_groups={n_groups}",
                "drop policy.n_groups",
            )
        super().__init__(n_groups, **params)
        self.aggregate = _switch(params, "aggregate", True)
        self.demote = _switch(params, "demote", True)
        self.ghost = _switch(params, "ghost", True)
        # the ghosts emulate the aggregation the real groups do (else they judge thresholds by
        # the padding of a system without it; only meaningful with aggregate on)
        self.ghost_aggregate = _switch(params, "ghost_aggregate", PART_PARAMS["ghost"]["ghost_aggregate"])
        # §3.2's cold start: the ghosts' first window is centred on SepBIT's l (the hot segments'
        # lifespan) once it is known, and they apply a threshold only after a ghost GC
        self.ghost_cold_start = _switch(params, "ghost_cold_start", PART_PARAMS["ghost"]["ghost_cold_start"])
        # the ghosts simulate the GC groups too and count every copy (else, as §3.2, they
        # discard a user victim's valid blocks and count only that first move)
        self.ghost_gc_groups = _switch(params, "ghost_gc_groups", False)
        # a fixed hot/cold threshold (user writes) in place of SepBIT's l, for studies of the
        # threshold itself (the ghost sets would move it)
        fixed = params.get("threshold")
        if fixed is not None and (isinstance(fixed, bool) or not isinstance(fixed, int) or fixed < 1):
            raise ValueError(f"policy adapt: threshold must be a number of user writes >= 1 or null, got {fixed!r}")
        if fixed is not None and self.ghost:
            raise ValueError(
                "policy adapt: a fixed threshold would be moved by the ghost sets; set ghost: false with it"
            )
        self.fixed_threshold = fixed
        if self.ghost_gc_groups and not self.ghost:
            raise ValueError(
                "policy adapt: ghost_gc_groups changes the ghost sets, which ghost: false turns off; set both"
            )
        # the SepBIT ADAPT's lifespan layer is built on: code (the authors' simulator, as the
        # sepbit baseline) or paper (Algorithm 1 as printed)
        base = str(params.get("base", "code"))
        if base not in SEPBIT_VARIANTS:
            raise ValueError(
                f"policy adapt: base must be one of {', '.join(SEPBIT_VARIANTS)} (the SepBIT variant its lifespan "
                f"layer runs), got {base!r}"
            )
        self.base = SepBIT(variant=base)
        # §3.3's shadow append applied to the GC groups' partial chunks at a GC pass's end
        self.gc_aggregate = _switch(params, "gc_aggregate", False)
        self.gc_into_cold = _switch(params, "gc_into_cold", False)
        if self.gc_into_cold and not self.gc_aggregate:
            raise ValueError("policy adapt: gc_into_cold acts at GC-pass ends only with gc_aggregate: true; set both")
        self.demote_score = int(params.get("demote_score", PART_PARAMS["demote"]["demote_score"]))
        # only the coldest GC group's cascade demotes (§3.4 aims at "long-lived cold blocks"; its
        # rule takes the best score over all GC groups, the default)
        self.demote_coldest = _switch(params, "demote_coldest", False)
        self.demote_hot = _switch(params, "demote_hot", False)
        if (self.demote_coldest or self.demote_hot) and not self.demote:
            raise ValueError(
                "policy adapt: demote_coldest / demote_hot shape the demotion, which demote: false turns off; "
                "set demote: true with them"
            )
        self.rate = float(params.get("rate", PART_PARAMS["ghost"]["rate"]))
        self.min_sampled = int(params.get("min_sampled", PART_PARAMS["ghost"]["min_sampled"]))
        self.min_ghost_segment = int(params.get("min_ghost_segment", PART_PARAMS["ghost"]["min_ghost_segment"]))
        self.n_sets = int(params.get("n_sets", PART_PARAMS["ghost"]["n_sets"]))
        self.filters = int(params.get("filters", PART_PARAMS["demote"]["filters"]))
        self.filter_items = float(params.get("filter_items", PART_PARAMS["demote"]["filter_items"]))
        self.filter_bits = int(params.get("filter_bits", PART_PARAMS["demote"]["filter_bits"]))
        for key in ("min_sampled", "min_ghost_segment", "n_sets", "filters"):
            # -1 ran: an empty ghost set, a ghost segment of no block
            checked_setting(getattr(self, key), f"policy.params.{key}", int, minimum=1, example=8)
        if self.demote_score < 1 or self.demote_score > self.filters:
            raise ValueError(
                f"policy adapt: demote_score must be in 1..filters={self.filters}, got {self.demote_score}"
            )
        if not 0 < self.rate <= 1:
            raise ValueError(f"policy adapt: rate must be in (0, 1], got {self.rate}")
        if not 0 < self.filter_items <= 1 or self.filter_bits < 1:
            raise ValueError("policy adapt: filter_items must be in (0, 1] and filter_bits >= 1")
        for part, defaults in PART_PARAMS.items():
            if not getattr(self, part):
                why = f"is read by ADAPT's {part} part, which policy.params.{part}=false turns off"
                refuse_unread_params(params, defaults, defaults, why, f"policy.params.{part}=true")

    def accepted_params(self):
        return (
            "aggregate",
            "demote",
            "ghost",
            "ghost_aggregate",
            "ghost_cold_start",
            "ghost_gc_groups",
            "threshold",
            "gc_aggregate",
            "gc_into_cold",
            "base",
            "demote_score",
            "demote_coldest",
            "demote_hot",
            "rate",
            "min_sampled",
            "min_ghost_segment",
            "n_sets",
            "filters",
            "filter_items",
            "filter_bits",
        )

    def label(self) -> str:
        off = [n for n, on in (("ghost", self.ghost), ("agg", self.aggregate), ("demote", self.demote)) if not on]
        name = self.name if not off else f"{self.name}[-{'-'.join(off)}]"
        on = [
            n
            for n, v in (
                ("gcagg", self.gc_aggregate),
                ("gccold", self.gc_into_cold),
                ("ghostgc", self.ghost_gc_groups),
                ("dcold", self.demote and self.demote_coldest),
            )
            if v
        ]
        name = name if not on else f"{name}[+{'+'.join(on)}]"
        return name if self.base.variant == "code" else f"{name}[{self.base.variant}]"

    def effective_rate(self, capacity: int, segment_blocks: int) -> float:
        """The sampling rate: ``rate``, raised so the sample holds about ``min_sampled`` LBAs
        (the paper's 0.001 is for TB-scale volumes; a reduced-scale run would sample a handful)
        and a ghost segment (``segment_blocks x r``) holds ``min_ghost_segment`` blocks."""
        floor = max(self.min_sampled / max(1, capacity), self.min_ghost_segment / max(1, segment_blocks))
        return min(1.0, max(self.rate, floor))

    def bind(self, ctx: SimContext) -> tuple:
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.threshold = -1 if self.fixed_threshold is None else self.fixed_threshold
        st.aggregate = int(self.aggregate)
        st.gc_aggregate = int(self.gc_aggregate)
        st.gc_into_cold = int(self.gc_into_cold)
        st.demote = int(self.demote)
        st.demote_score = self.demote_score
        st.demote_coldest = int(self.demote_coldest)
        st.demote_hot = int(self.demote_hot)
        st.ghost = int(self.ghost)
        st.cold_start = int(self.ghost_cold_start)
        st.max_thr_segments = max(1, 16 * ctx.capacity // ctx.segment_blocks)
        physical = ctx.n_segments * ctx.segment_blocks
        # the ghosts' GC trigger: the garbage share the real log settles at (its over-provisioning)
        gp_ppm = min(900_000, max(10_000, round(1e6 * (1 - ctx.capacity / physical))))
        ghost = new_ghost_sets(
            ctx.capacity,
            ctx.segment_blocks,
            rate=self.effective_rate(ctx.capacity, ctx.segment_blocks),
            n_sets=self.n_sets,
            gp_ppm=gp_ppm,
            chunk_blocks=ctx.chunk_blocks if ctx.timed else 0,
            chunk_timeout_us=ctx.chunk_timeout_us if ctx.timed else 0,
            aggregate=self.aggregate and self.ghost_aggregate,
            authentic=self.ghost_cold_start,
            gc_groups=self.ghost_gc_groups,
        )
        # each GC group's cascade: `filters` filters of filter_items x capacity LBAs each, at
        # filter_bits bits per LBA (rounded up to a power of two)
        items = max(16, int(self.filter_items * ctx.capacity))
        bits = 1 << max(6, math.ceil(math.log2(items * self.filter_bits)))
        bloom = new_cascade(self.filters, bits, optimal_hashes(bits, items), items, seed=0xADA, n_groups=RA_GROUPS)
        return AdaptState(
            scalars=scalars, demoted=np.zeros(6, np.int64), ghost=ghost, sep=self.base.bind(ctx), bloom=bloom
        )

    def memory_at(self, capacity: int, segment_blocks: int, op_ratio: float = 0.1, chunk_blocks: int = 16) -> dict:
        """ADAPT's extra memory (Fig. 12b) for a log of ``capacity`` blocks at this policy's
        sampling rate *without* the reduced-scale floor (``min_sampled``), e.g. the paper's
        r = 0.001 on a 1 TiB volume: the ghost sets and cascades are built (numpy allocates their
        pages lazily) and measured, nothing is run."""
        n_seg = int(capacity * (1 + op_ratio)) // segment_blocks
        ctx = SimContext(
            capacity, segment_blocks, n_seg, capacity, chunk_blocks=chunk_blocks, chunk_timeout_us=100, timed=True
        )
        keep = self.min_sampled
        self.min_sampled = 0
        try:
            st = self.bind(ctx)
        finally:
            self.min_sampled = keep
        return memory_breakdown(st.ghost, st.bloom if self.demote else None)

    def summary(self, state) -> dict:
        st = record(state.scalars)
        gst = record(state.ghost.scalars)
        return {
            "adapt_threshold": None if int(st.threshold) < 0 else int(st.threshold),
            "adapt_sepbit_threshold": self.base.summary(state.sep)["sepbit_threshold"],
            "adapt_shadow_appends": int(st.shadow_calls),
            "adapt_shadowed_blocks": int(st.shadowed),
            "adapt_aggregation_stops": int(st.agg_stops),
            "adapt_no_room": int(st.agg_no_room),
            "adapt_gc_agg_passes": int(st.gc_agg_passes),
            "adapt_gc_shadowed_blocks": int(st.gc_shadowed),
            "adapt_gc_into_cold": int(st.gc_into_cold_calls),
            "adapt_demotions": int(st.demotions),
            "adapt_demoted_per_group": [int(x) for x in state.demoted],
            "adapt_ghost_adjustments": int(st.adjustments),
            "adapt_sampled_writes": int(gst.sampled),
            "adapt_measured_rate": int(gst.act_num) / R_MOD,
            "adapt_ghost_thresholds": [int(x) for x in state.ghost.thr],
            # sampled writes or ghost appends dropped (table full, no free ghost segment): should be 0
            "adapt_ghost_dropped": int(gst.overflow + gst.no_space),
            "adapt_memory": memory_breakdown(state.ghost, state.bloom if self.demote else None),
            "adapt_extra_bytes": (ghost_bytes(state.ghost) if self.ghost else 0)
            + (cascade_bytes(state.bloom) if self.demote else 0),
        }
