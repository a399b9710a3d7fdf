"""NoSep: no separation, every block goes to one open segment."""
import numba as nb

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
