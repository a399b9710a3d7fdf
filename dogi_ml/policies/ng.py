"""The "-NG" ablation of Shiro's Fig. 9: a scheme with its GC separation removed.

Each keeps its user-write placement and sends every GC-relocated block to one GC group (its
first), as 2R (SepGC) does: ``sepbit_ng`` (SepBIT's Class 3 for every GC write; Classes 4-6
stay empty) and ``phftl_ng`` (PHFTL's GC group 1 only). Shiro's own is ``policy=shiro
policy.params.agent=single``. MiDAS has no -NG here: its groups *are* its GC separation (the
Markov-model configuration sizes the GC chain), so removing it leaves MiDA's hot filter plus
one GC group, i.e. SepGC with a hot filter.
"""

from __future__ import annotations

import numba as nb

from . import register
from .phftl import G_GC1, PHFTL
from .sepbit import SepBIT


@nb.njit(cache=True)
def sepbit_ng_gc(s, p, lba, victim, now):
    return 2  # Class 3, whatever the block's origin or age


@nb.njit(cache=True)
def phftl_ng_gc(s, p, lba, victim, now):
    return G_GC1


@register
class SepBITNG(SepBIT):
    name = "sepbit_ng"
    place_gc = sepbit_ng_gc

    def label(self) -> str:
        return "sepbit-NG" if self.variant == "code" else f"sepbit-NG[{self.variant}]"


@register
class PHFTLNG(PHFTL):
    name = "phftl_ng"
    place_gc = phftl_ng_gc

    def label(self) -> str:
        return "phftl-NG"
