"""DAC: Dynamic dAta Clustering (Chiang et al.), as described in SepBIT (FAST'22) §4.1.

Each logical block has a temperature counter, its region: a user write promotes the block one
region hotter, a GC write demotes it one region colder; the block is written to the open
segment of its (new) region. Regions are groups, 0 = coldest. A block never written before
starts in region 0, so its first user write lands in region 1. DAC does not separate user from
GC writes: all groups take both.
"""
import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS

from . import register


@nb.njit(cache=True)
def dac_user(s, p, lba, now):
    region = p[0]
    r = region[lba] + 1
    last = s.prm[P_NGROUPS] - 1
    if r > last:
        r = last
    region[lba] = r
    return r


@nb.njit(cache=True)
def dac_gc(s, p, lba, victim, now):
    region = p[0]
    r = region[lba]
    if r > 0:
        r -= 1
    region[lba] = r
    return r


@register
class DAC(PlacementPolicy):
    name = "dac"
    default_groups = 6
    place_user = dac_user
    place_gc = dac_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=6, **params):
        if not 2 <= int(n_groups) <= 255:
            raise ValueError(f"policy dac needs 2..255 regions, got n_groups={n_groups}")
        super().__init__(n_groups, **params)

    def bind(self, ctx: SimContext) -> tuple:
        return (np.zeros(ctx.capacity, np.uint8),)
