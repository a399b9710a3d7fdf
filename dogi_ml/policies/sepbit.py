"""SepBIT (Wang et al., FAST'22), exactly per its Algorithm 1 (Sec. 3.4).

Six classes, each one open segment (0-based groups here: Class k is group k-1):

- user writes: the lifespan ``v`` of the block being invalidated (time since the LBA's last
  user write; infinite for a first write) against the threshold ``l``: ``v < l`` -> Class 1,
  else Class 2;
- GC writes: a block reclaimed from Class 1 -> Class 3; otherwise by its age
  ``g = t - last user write``: [0, 4l) -> Class 4, [4l, 16l) -> Class 5, [16l, inf) -> Class 6;
- ``l`` = mean lifespan (reclaim time minus creation time) of the last 16 reclaimed Class-1
  segments, starting at +inf.
"""
import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext

from . import register

INF = np.int64(1 << 58)  # 16 * INF still fits in int64
NC_WINDOW = 16
# policy-state indices
ELL, LTOT, NC = 0, 1, 2


@nb.njit(cache=True)
def sepbit_user(s, p, lba, now):
    st = p[0]
    last = s.lba_time[lba]
    v = INF if last < 0 else now - last
    return 0 if v < st[ELL] else 1


@nb.njit(cache=True)
def sepbit_gc(s, p, lba, victim, now):
    if s.seg_group[victim] == 0:
        return 2
    ell = p[0][ELL]
    g = now - s.lba_time[lba]
    if g < 4 * ell:
        return 3
    if g < 16 * ell:
        return 4
    return 5


@nb.njit(cache=True)
def sepbit_reclaim(s, p, victim, now):
    st = p[0]
    if s.seg_group[victim] == 0:
        st[NC] += 1
        st[LTOT] += now - s.seg_open_time[victim]
    if st[NC] == NC_WINDOW:
        st[ELL] = st[LTOT] // st[NC]
        st[NC] = 0
        st[LTOT] = 0


@register
class SepBIT(PlacementPolicy):
    name = "sepbit"
    default_groups = 6
    place_user = sepbit_user
    place_gc = sepbit_gc
    on_reclaim = sepbit_reclaim

    def __init__(self, n_groups=6, **params):
        if n_groups != 6:
            raise ValueError(f"policy sepbit uses exactly 6 classes (Algorithm 1), got n_groups={n_groups}")
        super().__init__(n_groups, **params)

    def bind(self, ctx: SimContext) -> tuple:
        st = np.zeros(3, np.int64)
        st[ELL] = INF
        return (st,)

    def summary(self, state) -> dict:
        ell = int(state[0][ELL])
        return {"sepbit_threshold": None if ell >= INF else ell}
