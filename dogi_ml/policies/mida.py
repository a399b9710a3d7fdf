"""MiDA: groups by migration count.

User-written blocks go to group 0; each time GC relocates a block it moves one group further
(its migration count + 1, capped at the last group), so blocks that survive many collections
(cold data) end up together. A user write resets the block's count. The count is one byte per
logical block. (The migration-count idea as used for GC-written data by MiDAS and its
predecessors; cf. dogi-fast26 §2, Table 1.)
"""

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS

from . import register


class MidaState(NamedTuple):
    migrations: np.ndarray  # uint8 per LBA: GC relocations since its last user write (capped)


@nb.njit(cache=True)
def mida_user(s, p, lba, now):
    p.migrations[lba] = 0
    return 0


@nb.njit(cache=True)
def mida_gc(s, p, lba, victim, now):
    mig = p.migrations
    m = mig[lba] + 1
    last = s.prm[P_NGROUPS] - 1
    if m > last:
        m = last
    mig[lba] = m
    return m


@register
class MiDA(PlacementPolicy):
    name = "mida"
    default_groups = 6
    place_user = mida_user
    place_gc = mida_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=6, **params):
        if not 2 <= int(n_groups) <= 255:
            raise ConfigError(
                f"policy=mida needs 2..255 groups (1 user + migration levels), got policy.n_groups={n_groups}",
                "give policy.n_groups=6 (the default)",
            )
        super().__init__(n_groups, **params)

    def bind(self, ctx: SimContext) -> tuple:
        return MidaState(migrations=np.zeros(ctx.capacity, np.uint8))
