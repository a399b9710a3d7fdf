"""NoSep: no separation, every block goes to one open segment.

Checked against the SepBIT authors' simulator (fallfish/sepbit, ``trace_replay/src/main/java/
gcsimulator/placement/NoSep.java``: the base ``Separator.classify`` returns 0 for every write,
run with ``--setNumOpenSegments 1``): the same placement. What differs is the GC around it (their
garbage-proportion trigger with a 15% floor per victim, sealing on the filling write, their
Cost-Benefit with the square root of the age): see :mod:`dogi_ml.sim.victims` and
``notes/baselines.md``.
"""

import numba as nb

from dogi_ml.errors import ConfigError
from dogi_ml.sim.policy_api import PlacementPolicy, no_reclaim_hook

from . import register


@nb.njit(cache=True)
def nosep_user(s, p, lba, now):
    return 0


@nb.njit(cache=True)
def nosep_gc(s, p, lba, victim, now):
    return 0


@register
class NoSep(PlacementPolicy):
    name = "nosep"
    default_groups = 1
    place_user = nosep_user
    place_gc = nosep_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=1, **params):
        # every write goes to group 0: more groups would be open and empty, the result the same
        # (policy.n_groups=4 ran one group and listed three empty ones, without a word)
        if n_groups != 1:
            raise ConfigError(
                f"policy=nosep places every write in one group (no separation), so policy.n_groups={n_groups} "
                "would leave the others empty",
                "drop policy.n_groups (nosep's is 1), or choose a scheme that separates (policy=sepgc, sepbit, ...)",
            )
        super().__init__(n_groups, **params)
