"""FK: SepBIT's ideal placement with future knowledge (SepBIT, FAST'22, Sec. 2.2 and 4.1).

A block (user-written or GC-rewritten) whose invalidation comes within ``t`` user-written
blocks goes to open segment ``ceil(t / s)`` (``s`` = segment size in blocks); with a limited
number of open segments the last group takes every block that belongs further out, including
blocks that are never invalidated.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS, P_SEG_BLOCKS

from .annotate import NEVER, annotate


@nb.njit(cache=True, inline="always")
def _group_for(s, remaining):
    last = s.prm[P_NGROUPS] - 1
    if remaining >= NEVER // 2:
        return last
    g = (remaining + s.prm[P_SEG_BLOCKS] - 1) // s.prm[P_SEG_BLOCKS] - 1
    if g < 0:
        g = 0
    return min(g, last)


class FutureState(NamedTuple):
    """The future-knowledge oracles' kernel state."""

    inv: np.ndarray  # invalidation time of every write of the stream (prefill included)
    death: np.ndarray  # per LBA: the logical time its current version dies


@nb.njit(cache=True)
def fk_place_user(s, p, lba, now):
    t = p.inv[now]
    p.death[lba] = now + t
    return _group_for(s, t)


@nb.njit(cache=True)
def fk_place_gc(s, p, lba, victim, now):
    return _group_for(s, p.death[lba] - now)


class FutureKnowledge(PlacementPolicy):
    """FK placement: groups by remaining invalidation time, from the annotation."""

    name = "fk"
    needs_future = True
    place_user = fk_place_user
    place_gc = fk_place_gc
    on_reclaim = no_reclaim_hook

    def bind(self, ctx: SimContext) -> FutureState:
        inv, _prev = annotate(ctx.stream)
        return FutureState(inv=inv, death=np.full(ctx.capacity, NEVER, np.int64))
