"""ADAPT (ICPP'25, shared/papers/adapt-icpp25.txt): access-density-aware placement for
log-structured storage on SSD arrays, where a partial chunk is zero-padded once it has waited
past the SLA (the engine's chunk layer: ``sim.raid_chunk_blocks``, ``sim.raid_chunk_timeout_us``).

Six groups (§3.1), as SepBIT's classes: group 0 hot user writes, group 1 cold user writes,
groups 2..5 GC writes (2: blocks reclaimed from the hot group; 3..5 by age against 4l and 16l,
``l`` the hot/cold threshold).

- Hot/cold threshold (§3.2): a user write is hot when its lifespan (user writes since the LBA's
  previous write) is below ``l``. Until the ghost sets speak, ``l`` is SepBIT's: the mean lifespan
  of the last 16 reclaimed hot segments (the "lifespan of segments in the hot group" the paper
  starts from). The ghost sets (:mod:`dogi_ml.policies._adapt_ghost`, sampled at rate ``r``,
  segments and chunk timeout scaled by ``r``) simulate the two user groups under a series of
  thresholds; the best one is applied once 10% of the capacity has been written since the last
  application, or earlier when its WA is steady.
- Cross-group dynamic aggregation (§3.3), in ``on_chunk_due``: when the hot group's chunk is due,
  its blocks without a shadow are shadow-appended into the cold group's unfilled chunk (which is
  flushed now; the hot chunk keeps its blocks, lazy append, and its timer restarts); when the
  cold group's chunk is due, the hot group's pending blocks fill its padding the same way. The
  condition follows Eq. (1): a group aggregates while its chunks do get padded (it cannot fill
  them alone, ``P_i > 0``), and stops once the blocks already aggregated in the hot chunk plus the
  new ones exceed the group's average padding per padded chunk, ``S_ck - C_i``.
- Proactive demotion (§3.4): per GC group a cascade of Bloom filters (FIFO eviction,
  :mod:`dogi_ml.policies._adapt_bloom`) holds LBAs that GC migrated from that group back into it;
  a user write whose best score reaches ``demote_score`` goes straight to that GC group.

Shadow copies are modelled by the engine as slots that hold no live data (see
:func:`dogi_ml.sim.kernels.shadow_append`): they expire when the original's chunk is flushed.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.kernels import shadow_append
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, record, scalar_fields
from dogi_ml.sim.state import P_CHUNK

from . import register

HOT, COLD = 0, 1
NC_WINDOW = 16  # hot segments averaged for the initial threshold (SepBIT's window)
SCALARS = scalar_fields(
    window_sum=np.int64,  # lifespans of the last 16 reclaimed hot segments; -1 = none yet (l = +inf)
    lifespan_sum=np.int64,
    lifespans=np.int64,
    threshold=np.int64,  # hot/cold threshold l in user writes; -1 = the SepBIT window's (or +inf)
    aggregate=np.int64,  # 1: cross-group aggregation on
    demote=np.int64,  # 1: proactive demotion on
    demote_score=np.int64,  # Bloom filters (of a GC group's cascade) that must hold the LBA
    demotions=np.int64,  # user writes sent straight to a GC group
    shadow_calls=np.int64,  # shadow appends done
    shadowed=np.int64,  # blocks shadow-appended
    agg_stops=np.int64,  # due hot chunks padded because of the stop rule
    agg_no_room=np.int64,  # due hot chunks padded because the cold group had no unfilled chunk
    inserted=np.int64,  # LBAs inserted into the cascades
)


class AdaptState(NamedTuple):
    scalars: np.ndarray
    demoted: np.ndarray  # int64[6]: user writes demoted per group


@nb.njit(cache=True)
def _threshold(st):
    """The hot/cold threshold in user writes (-1 = +inf)."""
    if st.threshold >= 0:
        return st.threshold
    if st.window_sum < 0:
        return -1
    return st.window_sum // NC_WINDOW


@nb.njit(cache=True)
def adapt_user(s, p, lba, now):
    st = p.scalars[0]
    last = s.lba_time[lba]
    if last < 0:
        return COLD
    l = _threshold(st)
    if l < 0 or now - last < l:
        return HOT
    return COLD


@nb.njit(cache=True)
def adapt_gc(s, p, lba, victim, now):
    vg = s.seg_group[victim]
    if vg == HOT:
        return 2
    st = p.scalars[0]
    l = _threshold(st)
    if l < 0:
        return 3
    age = now - s.lba_time[lba]
    if age < 4 * l:
        return 3
    if age < 16 * l:
        return 4
    return 5


@nb.njit(cache=True)
def adapt_reclaim(s, p, victim, now):
    if s.seg_group[victim] == HOT:
        st = p.scalars[0]
        st.lifespans += 1
        st.lifespan_sum += now - s.seg_open_time[victim]
        if st.lifespans == NC_WINDOW:
            st.window_sum = st.lifespan_sum
            st.lifespans = 0
            st.lifespan_sum = 0


@nb.njit(cache=True)
def _avg_padding(s, g):
    """The group's mean padding per padded chunk, ``S_ck - C_i`` of Eq. (1); -1 if it never padded."""
    n = s.group_pad_chunks[g]
    if n == 0:
        return -1
    return s.group_pad[g] // n


@nb.njit(cache=True)
def adapt_chunk_due(s, p, group, due_us):
    """Cross-group aggregation (§3.3) when a user group's chunk passes its deadline."""
    st = p.scalars[0]
    if not st.aggregate or group > COLD:
        return None
    pending = s.chunk_fill[HOT] - s.chunk_shadowed[HOT]
    if pending <= 0:
        return None
    room = s.prm[P_CHUNK] - s.chunk_fill[COLD]
    if s.chunk_fill[COLD] == 0 or room <= 0:
        if group == HOT:
            st.agg_no_room += 1
        return None
    # Eq. (1): aggregate only for a group that cannot fill its chunks alone, and stop once the
    # aggregated blocks of this chunk exceed its mean padding per chunk
    avg_pad = _avg_padding(s, HOT)
    if avg_pad < 0 or s.chunk_shadowed[HOT] + min(pending, room) > avg_pad:
        if group == HOT:
            st.agg_stops += 1
        return None
    k = shadow_append(s, HOT, COLD, due_us)
    if k > 0:
        st.shadow_calls += 1
        st.shadowed += k
    return None


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
            raise ValueError(f"policy adapt uses exactly 6 groups (2 user + 4 GC), got n_groups={n_groups}")
        super().__init__(n_groups, **params)
        self.aggregate = bool(params.get("aggregate", True))
        self.demote = bool(params.get("demote", True))
        self.demote_score = int(params.get("demote_score", 2))
        if self.demote_score < 1:
            raise ValueError(f"policy adapt: demote_score must be >= 1, got {self.demote_score}")

    def accepted_params(self):
        return ("aggregate", "demote", "demote_score")

    def label(self) -> str:
        off = [n for n, on in (("agg", self.aggregate), ("demote", self.demote)) if not on]
        return self.name if not off else f"{self.name}[-{'-'.join(off)}]"

    def bind(self, ctx: SimContext) -> tuple:
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.window_sum = -1
        st.threshold = -1
        st.aggregate = int(self.aggregate)
        st.demote = int(self.demote)
        st.demote_score = self.demote_score
        return AdaptState(scalars=scalars, demoted=np.zeros(6, np.int64))

    def summary(self, state) -> dict:
        st = record(state.scalars)
        return {
            "adapt_threshold": None if int(st.threshold) < 0 else int(st.threshold),
            "adapt_shadow_appends": int(st.shadow_calls),
            "adapt_shadowed_blocks": int(st.shadowed),
            "adapt_aggregation_stops": int(st.agg_stops),
            "adapt_no_room": int(st.agg_no_room),
            "adapt_demotions": int(st.demotions),
        }
