"""WARCIP: clustering user writes by rewrite interval (Yang et al., SYSTOR'19), as the SepBIT
authors built it for their comparison (FAST'22 §4.1: five classes for user-written blocks, one
for GC-rewritten blocks).

Checked line by line against their simulator (fallfish/sepbit, ``trace_replay/src/main/java/
gcsimulator/placement/Warcip.java``, ``--setSeparateMethod WARCIP --setNumOpenSegments 6``) and
written as it works there:

- Clusters are a list; position 0 is the GC class (every GC write, ``classify(true)`` -> 0; group
  0 here), positions 1.. are user clusters, each with one open segment (a group here), a centre,
  ``numBlocks`` (user blocks in its open segment) and ``numWrites`` (user writes this period).
  All centres start at 0.
- User write (``append`` + ``classify``): rewrite interval ``ui = now - last user write +
  penalty`` (0 for a never-written LBA), then the penalty is cleared. The nearest centre wins,
  scanning from the last position down to 1 with a strict ``<`` (a tie keeps the higher
  position). That centre becomes ``(centre * numBlocks + ui) / (numBlocks + 1)``, a running mean
  over the blocks of the cluster's open segment (reset when the segment seals, so the first block
  of a new segment sets the centre to its own interval).
- GC write (``gcAppend``): penalty = time since the LBA's last user write, added to its next
  rewrite interval.
- Segment sealed (``sealSegment``, on the write that fills it): a user cluster's seal counts
  towards 256; a cluster marked for merging disappears instead of opening a new segment. Every
  256 sealed user segments (``splitAndMerge``): the first user cluster with more than half of the
  period's user writes is split, if fewer than ``n_groups`` clusters exist (a new cluster before
  it, centre = the mean of its neighbours' centres, the GC class's 0 included); if none is split,
  the first user cluster with fewer writes than a segment holds is marked for merging (if none is
  marked yet). Then the period's counts restart.
- A merged cluster's group is free for a later split (the lowest free group is taken); its full
  segment is sealed at the next call into the policy (``retire_group``; the engine seals a full
  segment only when its group appends again, which a merged group never does).

Where ours differs from their code, and why:

- Clock: theirs is the trace's wall-clock time in microseconds (``globalTimestampInUs``); ours is
  the simulator's logical clock, user-written blocks so far (synthetic workloads have no
  timestamps; every other scheme here measures time this way). A GC write's penalty uses the time
  of the last user write (their clock during GC is the last request's timestamp).
- Their requests of several blocks share one timestamp; ours are single blocks.
- GC and victims: see :mod:`dogi_ml.sim.victims` and ``notes/baselines.md``.

Our earlier WARCIP (an online k-means over ``log2(interval)`` with learning rate ``alpha``,
sorted centroids evenly spaced at the start, the last group for GC writes, no split or merge) was
an interpretation no text we have describes, so it is gone rather than kept as a variant.
"""

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError
from dogi_ml.sim.kernels import retire_group
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, record, scalar_fields
from dogi_ml.sim.state import P_SEG_BLOCKS

from . import register

PERIOD = 256  # sealed user segments between splitAndMerge calls
NO_DIFF = np.finfo(np.float64).max  # their Double.MAX_VALUE
SCALARS = scalar_fields(
    clusters=np.int64,  # clusters in the list (position 0, the GC class, included)
    max_clusters=np.int64,  # n_groups (their numOpenSegments)
    period_writes=np.int64,  # totNumWrites: user writes since the last splitAndMerge
    sealed_user=np.int64,  # numSealedUserWrittenSegments, up to PERIOD
    next_merge=np.int64,  # nextMerge: the position to merge when its segment seals, -1 none
    retire=np.int64,  # a merged cluster's group whose full segment is still open, -1 none
)


class WarcipState(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    centers: np.ndarray  # float64[n_groups] per position: centre (mean rewrite interval)
    seg_writes: np.ndarray  # int64[n_groups] per position: numBlocksInSegments
    period_counts: np.ndarray  # int64[n_groups] per position: numWritesOfClusters
    group_of: np.ndarray  # int64[n_groups] per position: its group (their openSegments entry)
    penalty: np.ndarray  # int64[capacity] penaltyTime per LBA


@nb.njit(cache=True)
def _retire_merged(s, p, now):
    """Seal a merged cluster's full segment (it will never append again)."""
    st = p.scalars[0]
    g = st.retire
    if g >= 0:
        st.retire = -1
        seg = s.open_seg[g]
        if seg >= 0 and s.seg_wp[seg] == s.prm[P_SEG_BLOCKS]:
            retire_group(s, g, now)


@nb.njit(cache=True)
def _split(p, st, pos):
    """A new cluster at ``pos`` (the others move up), centre between its neighbours."""
    m = st.clusters
    free = 0  # the lowest group no cluster holds (no allocation: the loop runs without NRT)
    taken = True
    while taken:
        taken = False
        for i in range(m):
            if p.group_of[i] == free:
                taken = True
                free += 1
                break
    for i in range(m, pos, -1):
        p.centers[i] = p.centers[i - 1]
        p.seg_writes[i] = p.seg_writes[i - 1]
        p.period_counts[i] = p.period_counts[i - 1]
        p.group_of[i] = p.group_of[i - 1]
    st.clusters = m + 1
    p.centers[pos] = (p.centers[pos - 1] + p.centers[pos + 1]) / 2
    p.period_counts[pos] = 0
    p.seg_writes[pos] = 0
    p.group_of[pos] = free


@nb.njit(cache=True)
def _merge(p, st, pos):
    """Drop the cluster at ``pos`` (the others move down); its group's segment is full."""
    m = st.clusters
    st.retire = p.group_of[pos]
    for i in range(pos, m - 1):
        p.centers[i] = p.centers[i + 1]
        p.seg_writes[i] = p.seg_writes[i + 1]
        p.period_counts[i] = p.period_counts[i + 1]
        p.group_of[i] = p.group_of[i + 1]
    st.clusters = m - 1


@nb.njit(cache=True)
def _split_and_merge(s, p, st):
    split = False
    for i in range(1, st.clusters):
        if p.period_counts[i] > st.period_writes // 2:
            if st.clusters < st.max_clusters:
                _split(p, st, i)
                split = True
                break
    if not split:
        for i in range(1, st.clusters):
            if p.period_counts[i] < s.prm[P_SEG_BLOCKS]:
                if st.next_merge == -1:
                    st.next_merge = i
                break
    st.period_writes = 0
    p.period_counts[:] = 0


@nb.njit(cache=True)
def _seal_user(s, p, st, pos):
    """Their ``sealSegment`` for a user cluster whose segment this write fills."""
    st.sealed_user += 1
    if st.next_merge == pos:
        _merge(p, st, pos)
        st.next_merge = -1
    else:
        p.seg_writes[pos] = 0
    if st.sealed_user == PERIOD:
        st.sealed_user = 0
        _split_and_merge(s, p, st)


@nb.njit(cache=True)
def warcip_user(s, p, lba, now):
    _retire_merged(s, p, now)
    st = p.scalars[0]
    last = s.lba_time[lba]
    ui = now - last + p.penalty[lba] if last >= 0 else 0
    p.penalty[lba] = 0
    nearest = 1
    min_diff = NO_DIFF
    for i in range(st.clusters - 1, 0, -1):
        diff = abs(p.centers[i] - ui)
        if diff < min_diff:
            nearest = i
            min_diff = diff
    n = p.seg_writes[nearest]
    p.centers[nearest] = (p.centers[nearest] * n + ui) / (n + 1)
    p.seg_writes[nearest] = n + 1
    p.period_counts[nearest] += 1
    st.period_writes += 1
    g = p.group_of[nearest]
    seg_blocks = s.prm[P_SEG_BLOCKS]
    seg = s.open_seg[g]
    filled = 1 if seg < 0 or s.seg_wp[seg] == seg_blocks else s.seg_wp[seg] + 1
    if filled == seg_blocks:
        _seal_user(s, p, st, nearest)
    return g


@nb.njit(cache=True)
def warcip_gc(s, p, lba, victim, now):
    # their clock during GC is the last request's: the last user write's time, now - 1
    p.penalty[lba] = now - 1 - s.lba_time[lba]
    return p.group_of[0]


@nb.njit(cache=True)
def warcip_reclaim(s, p, victim, now):
    _retire_merged(s, p, now)


@register
class WARCIP(PlacementPolicy):
    name = "warcip"
    default_groups = 6
    place_user = warcip_user
    place_gc = warcip_gc
    on_reclaim = warcip_reclaim

    def __init__(self, n_groups=6, **params):
        if int(n_groups) < 2:
            raise ConfigError(
                f"policy=warcip needs >= 2 groups (1 GC class + user clusters), got policy.n_groups={n_groups}",
                "give policy.n_groups=6 (the default)",
            )
        super().__init__(n_groups, **params)

    def bind(self, ctx: SimContext) -> tuple:
        k = self.n_groups
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.clusters = k
        st.max_clusters = k
        st.next_merge = -1
        st.retire = -1
        return WarcipState(
            scalars=scalars,
            centers=np.zeros(k, np.float64),
            seg_writes=np.zeros(k, np.int64),
            period_counts=np.zeros(k, np.int64),
            group_of=np.arange(k, dtype=np.int64),
            penalty=np.zeros(ctx.capacity, np.int64),
        )

    def summary(self, state) -> dict:
        m = int(record(state.scalars).clusters)
        return {
            "warcip_centers_blocks": [round(float(c)) for c in state.centers[1:m]],
            "warcip_groups": [int(g) for g in state.group_of[1:m]],
        }
