"""DAC: Dynamic dAta Clustering (Chiang et al.), as the SepBIT authors built it.

Each logical block has a temperature level (its region; regions are groups, 0 = coldest). A
rewrite promotes the block one level hotter, a GC write demotes it one level colder, and the
block goes to the open segment of its (new) level. DAC does not separate user from GC writes:
all groups take both.

Checked line by line against the SepBIT authors' simulator (fallfish/sepbit,
``trace_replay/src/main/java/gcsimulator/placement/DAC.java``, run as ``--setSeparateMethod DAC
--setNumOpenSegments 6``):

- ``append``: an LBA never written before gets level 0 (``levels.put(lba, 0)``); a rewrite
  moves it up one level, capped at ``numOpenSegments - 1``. ``gcAppend``: down one level,
  floored at 0. ``classify`` returns the level for both kinds of write. We do the same (default,
  ``variant: code``): a first write lands in region 0.
- ``variant: paper``: every user write promotes, a first write included (so it lands in
  region 1), which is how SepBIT's text describes DAC (FAST'22 §4.1: "Each user write promotes
  the LBA to a hotter segment while each GC write demotes the LBA to a colder segment"); this was
  our only version before the check.
- Their levels live in an on-disk index map with ``-1`` for "never written"; ours is one byte
  per block, and "never written" is the engine's ``lba_time < 0``.
- GC and victims (both variants): see :mod:`dogi_ml.sim.victims` and ``notes/baselines.md``
  (their GC is triggered by garbage proportion, ours by default by free segments).
"""

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS

from . import register

VARIANTS = ("code", "paper")


class DACState(NamedTuple):
    """DAC's Numba state, by name."""

    region: np.ndarray  # uint8[capacity] each block's level, 0 = coldest
    first_promotes: np.ndarray  # int64[1] 1 (variant paper): a first write is promoted too


@nb.njit(cache=True)
def dac_user(s, p, lba, now):
    region = p.region
    if s.lba_time[lba] < 0 and p.first_promotes[0] == 0:
        r = 0  # the authors' code: a new LBA starts at level 0 and is written there
    else:
        r = region[lba] + 1
    last = s.prm[P_NGROUPS] - 1
    if r > last:
        r = last
    region[lba] = r
    return r


@nb.njit(cache=True)
def dac_gc(s, p, lba, victim, now):
    region = p.region
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
            raise ConfigError(
                f"policy=dac needs 2..255 regions, got policy.n_groups={n_groups}",
                "give policy.n_groups=6 (the default)",
            )
        super().__init__(n_groups, **params)
        self.variant = str(params.get("variant", "code"))
        if self.variant not in VARIANTS:
            raise ValueError(
                f"policy dac: unknown variant {self.variant!r}; known: {', '.join(VARIANTS)} "
                f"(code = the SepBIT authors' DAC.java, paper = SepBIT's text)"
            )

    def accepted_params(self):
        return ("variant",)

    def label(self) -> str:
        return self.name if self.variant == "code" else f"{self.name}[{self.variant}]"

    def bind(self, ctx: SimContext) -> tuple:
        return DACState(
            region=np.zeros(ctx.capacity, np.uint8), first_promotes=np.array([int(self.variant == "paper")], np.int64)
        )
