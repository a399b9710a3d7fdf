"""WARCIP: clustering user writes by rewrite interval (Yang et al.), as configured in SepBIT
(FAST'22) §4.1: ``n_groups - 1`` classes for user-written blocks, one for GC-rewritten blocks.

A user write's rewrite interval is the time since its LBA's previous user write. The classes are
an online 1-D k-means over ``log2(interval)`` (intervals span orders of magnitude): the write
joins the nearest centroid, which then moves towards it by ``alpha``; centroids stay sorted, so
class 0 holds the shortest intervals. First writes (no interval yet) go to the class with the
longest intervals. Centroids start evenly spaced in log space between one segment and four
times the capacity.
"""
import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, no_reclaim_hook, record, scalar_fields
from dogi_ml.sim.state import P_NGROUPS

from . import register

SCALARS = scalar_fields(alpha=np.float64)   # the k-means learning rate


class WarcipState(NamedTuple):
    centroids: np.ndarray     # float64 per user class: log2 of its rewrite interval, ascending
    scalars: np.ndarray       # one SCALARS record


@nb.njit(cache=True)
def warcip_user(s, p, lba, now):
    centroids = p.centroids
    k = centroids.shape[0]
    last = s.lba_time[lba]
    if last < 0:
        return k - 1
    x = math.log2(now - last + 1.0)
    best = 0
    best_d = abs(x - centroids[0])
    for c in range(1, k):
        d = abs(x - centroids[c])
        if d < best_d:
            best_d = d
            best = c
    centroids[best] += p.scalars[0].alpha * (x - centroids[best])
    # keep the order (a centroid may pass a neighbour)
    c = best
    while c > 0 and centroids[c] < centroids[c - 1]:
        centroids[c], centroids[c - 1] = centroids[c - 1], centroids[c]
        c -= 1
    while c < k - 1 and centroids[c] > centroids[c + 1]:
        centroids[c], centroids[c + 1] = centroids[c + 1], centroids[c]
        c += 1
    return best


@nb.njit(cache=True)
def warcip_gc(s, p, lba, victim, now):
    return s.prm[P_NGROUPS] - 1


@register
class WARCIP(PlacementPolicy):
    name = "warcip"
    default_groups = 6
    place_user = warcip_user
    place_gc = warcip_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=6, **params):
        if int(n_groups) < 2:
            raise ValueError(f"policy warcip needs >= 2 groups (user classes + 1 GC class), got n_groups={n_groups}")
        super().__init__(n_groups, **params)
        self.alpha = float(params.get("alpha", 0.01))
        if not 0 < self.alpha <= 1:
            raise ValueError(f"policy warcip: alpha must be in (0, 1], got {self.alpha}")

    def accepted_params(self):
        return ("alpha",)

    def bind(self, ctx: SimContext) -> tuple:
        k = self.n_groups - 1
        lo, hi = math.log2(ctx.segment_blocks), math.log2(4 * ctx.capacity)
        centroids = np.linspace(lo, hi, k) if k > 1 else np.array([(lo + hi) / 2])
        scalars = new_scalars(SCALARS)
        record(scalars).alpha = self.alpha
        return WarcipState(centroids=centroids.astype(np.float64), scalars=scalars)

    def summary(self, state) -> dict:
        return {"warcip_centroids_blocks": [round(2.0 ** c) for c in state.centroids]}
