"""FK: future-knowledge placement (SepBIT's ideal placement); the oracle lives in ``oracles``.

Checked line by line against the SepBIT authors' simulator (fallfish/sepbit,
``trace_replay/src/main/java/gcsimulator/placement/FK.java``; lifespans from
``analyze_script/src/annotate_future_knowledge.cc``: next write id minus this write id, the same
as our annotation's ``inv``; never rewritten = infinite in both). Their ``classify``, user and GC
writes alike: ``remaining = lastAccess + lifespan - accessId`` and ``level = remaining / s``
(integer division, ``s`` = segment size in blocks), capped at the last class. So:

- a user write goes to ``floor(t / s)`` (``t`` = user writes until its invalidation); a block
  invalidated exactly ``s`` writes later goes to group 1, not 0;
- a GC write goes to ``floor((death - now + 1) / s)``: their ids are 1-based and GC runs at the
  id of the last user write, so the remaining time is one more than ``death - now`` here.

That is the default (``variant: code``). ``variant: paper`` is SepBIT's text (§4.1: a block
invalidated within ``t`` bytes goes to the ``ceil(t/s)``-th open segment, i.e. 0-based
``ceil(t/s) - 1``), as :class:`dogi_ml.oracles.fk.FutureKnowledge` does it (our only version
before the check). Both put never-rewritten blocks, and any beyond the last class, in the last
group. GC and victims: see :mod:`dogi_ml.sim.victims` and ``notes/baselines.md``.
"""

import numba as nb

from dogi_ml.oracles.annotate import NEVER
from dogi_ml.oracles.fk import FutureKnowledge
from dogi_ml.sim.state import P_NGROUPS, P_SEG_BLOCKS

from . import register

VARIANTS = ("code", "paper")


@nb.njit(cache=True, inline="always")
def _level(s, remaining):
    """Their ``remaining / segment size``, capped at the last group."""
    last = s.prm[P_NGROUPS] - 1
    if remaining >= NEVER // 2:
        return last
    g = remaining // s.prm[P_SEG_BLOCKS]
    return min(g, last)


@nb.njit(cache=True)
def fk_code_user(s, p, lba, now):
    t = p.inv[now]
    p.death[lba] = now + t
    return _level(s, t)


@nb.njit(cache=True)
def fk_code_gc(s, p, lba, victim, now):
    return _level(s, p.death[lba] - now + 1)


@register
class FK(FutureKnowledge):
    default_groups = 6

    def __init__(self, n_groups=6, **params):
        super().__init__(n_groups, **params)
        self.variant = str(params.get("variant", "code"))
        if self.variant not in VARIANTS:
            raise ValueError(
                f"policy fk: unknown variant {self.variant!r}; known: {', '.join(VARIANTS)} "
                f"(code = the SepBIT authors' FK.java, paper = SepBIT's text, ceil(t/s))"
            )
        if self.variant == "code":
            self.place_user = fk_code_user
            self.place_gc = fk_code_gc

    def accepted_params(self):
        return ("variant",)

    def label(self) -> str:
        return self.name if self.variant == "code" else f"{self.name}[{self.variant}]"
