"""SepGC: user-written blocks in one group, GC-rewritten blocks in another.

Checked against the SepBIT authors' simulator (fallfish/sepbit, ``trace_replay/src/main/java/
gcsimulator/placement/SepGC.java``: ``classify`` returns 1 for a GC write, 0 for a user write,
run with ``--setNumOpenSegments 2``): the same placement (group 0 user, group 1 GC). What
differs is the GC around it (their garbage-proportion trigger with a 15% floor per victim,
sealing on the filling write, their Cost-Benefit with the square root of the age): see
:mod:`dogi_ml.sim.victims` and ``notes/baselines.md``.
"""

import numba as nb

from dogi_ml.errors import ConfigError
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
            raise ConfigError(
                f"policy=sepgc uses exactly 2 groups (user, GC), got policy.n_groups={n_groups}", "drop policy.n_groups"
            )
        super().__init__(n_groups, **params)
