"""SepGC: user-written blocks in one group, GC-rewritten blocks in another."""
import numba as nb

from dogi_ml.sim.policy_api import PlacementPolicy, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS

from . import register


@nb.njit(cache=True)
def sepgc_user(s, p, lba, now):
    return 0


@nb.njit(cache=True)
def sepgc_gc(s, p, lba, victim, now):
    return s.prm[P_NGROUPS] - 1


@register
class SepGC(PlacementPolicy):
    name = "sepgc"
    default_groups = 2
    place_user = sepgc_user
    place_gc = sepgc_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=2, **params):
        if n_groups != 2:
            raise ValueError(f"policy sepgc uses exactly 2 groups (user, GC), got n_groups={n_groups}")
        super().__init__(n_groups, **params)
