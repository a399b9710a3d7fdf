"""SepBIT (Wang et al., FAST'22) as its authors built it; Algorithm 1 as printed is a variant.

Six classes, one open segment each (0-based groups here: Class k is group k-1):

- user writes: the lifespan ``v`` of the block being invalidated (time since the LBA's last user
  write; none for a first write) against the threshold ``l``: short -> Class 1, else Class 2;
- GC writes: a block reclaimed from Class 1 -> Class 3; otherwise by its age
  ``g = t - last user write``: [0, 4l) -> Class 4, [4l, 16l) -> Class 5, [16l, inf) -> Class 6;
- ``l`` = mean lifespan (reclaim time minus creation time) of the last 16 reclaimed Class-1
  segments, starting at +inf.

Checked line by line against the authors' simulator (fallfish/sepbit, ``trace_replay/src/main/
java/gcsimulator/``: ``placement/SepBIT.java``, ``Log.java``, ``Segment.java``, ``GCWorker.java``).
The default, ``variant: code``, follows their code where it differs from Algorithm 1:

- FIFO queue (``SepBIT.classify``, user branch): Class 1 iff ``accessId - lba2fifo[lba] <
  min(threshold, fifo.size())``. The queue holds the most recent user writes; after each insert
  it is trimmed to ``min(valid blocks, l)`` entries, dequeuing a second entry while longer than
  ``l`` (when ``l`` falls it shrinks by one per write, when ``l`` grows it grows by one per
  write). An LBA whose last write has left the queue reads ``-1`` and fails the test, so: Class 1
  iff ``v < l`` and ``v < L``, ``L`` = the queue length before this write. We keep ``L`` only:
  ``L += 1`` per user write, ``-1`` if ``L > min(V, l)``, another ``-1`` if still ``L > l``, with
  ``V`` = their ``log.getnValidBlocks()`` (see :func:`_fifo_cap`). While ``l = +inf`` Class 1
  thus takes the rewrites of the last ``V`` writes (about the capacity after prefill), not every
  rewrite. SepBIT's §3.4 ("Memory usage") describes this queue; Algorithm 1 does not.
- Creation time (``collectSegment``: ``log.accessId - segment.meta.createdAccessId``): their
  segment is created when the previous one of its class fills (``Log.sealSegment`` ->
  ``Separator.sealSegment`` -> ``Log.openSegment``; the first ones at log creation, time 0), not
  at its first append. We record it per Class-1 segment (``created``). Under the engine's chunk
  layer (not in their simulator) padding or ADAPT's lazy appends may fill a Class-1 segment after
  SepBIT's last write to it; its successor is then created at that write + 1.
- Clock: their ``accessId`` is 1-based (incremented before the block is placed) and GC runs at
  the id of the last user write, so a block's GC age is one less than ours would be
  (``now - last write - 1``); user lifespans ``v`` and segment lifespans agree.
- ``l = totLifespan / 16`` in floating point; we compare ``16 v`` with the window's sum (exact).
  (Our earlier version rounded ``l`` down.)
- GC classes: level 3, plus one per factor 4 while ``age >= 4l * 4^k``, capped at 5: the same as
  the three ranges above. Class 3 for blocks from Class 1: the same.

``variant: paper`` is Algorithm 1 as printed (our only version before the check): Class 1 iff
``v < l`` (every rewrite while ``l = +inf``), creation = first append (§3.4: "the time when the
first block is appended to the segment"), ``g = t - last user write`` with ``t`` = user writes
so far.

Outside the policy (the engine; see ``notes/baselines.md``): their GC runs after every request
while the volume's garbage proportion (invalid blocks in sealed segments over all stored blocks)
exceeds 15%, and collects one segment among the sealed ones whose own GP is at least 15%, with no
free-space limit; ours by default runs below ``sim.gc_free_segments`` free segments
(``sim.gc_trigger=garbage_proportion`` is theirs without the per-victim 15% floor). Their segments
seal on the write that fills them, ours on the group's next append. Their Cost-Benefit is
``sim.victim=cost_benefit_sqrt``.
"""

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, record, scalar_fields
from dogi_ml.sim.state import P_NGROUPS, P_SEG_BLOCKS

from . import register

INF = np.int64(1 << 58)  # a lifespan for "never written"; far above any run
NC_WINDOW = 16
VARIANTS = ("code", "paper")
SCALARS = scalar_fields(
    window_sum=np.int64,  # lifespans of the last complete window: l = window_sum / NC_WINDOW; -1 = +inf
    lifespan_sum=np.int64,  # lifespans of the Class-1 segments reclaimed in the current window
    lifespans=np.int64,  # how many (the window closes at NC_WINDOW)
    fifo=np.int64,  # 1: the authors' FIFO queue, clock and creation times (variant code)
    fifo_len=np.int64,  # the FIFO queue's length (their fifo.size())
    distinct=np.int64,  # distinct LBAs written so far (valid blocks, for the queue's cap)
    next_created=np.int64,  # creation time of Class 1's next segment (when its current one fills)
    opening_created=np.int64,  # creation time of the Class-1 segment being opened now
    tracked=np.int64,  # the Class-1 open segment whose creation time is recorded (-1 none)
    fill_seen=np.int64,  # 1: a write of ours filled Class 1's open segment (next_created is its time)
    last_hot=np.int64,  # time of the last user write placed in Class 1 (-1 none)
)


class SepbitState(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    created: np.ndarray  # int64[n_segments] creation time of Class-1 segments (variant code)


@nb.njit(cache=True)
def _fifo_cap(s, st, rewrite):
    """Their ``log.getnValidBlocks()`` at a user write: blocks stored minus the invalid ones in
    sealed segments, before this block is appended (its old copy already invalidated); a full
    segment counts as sealed (they seal on the write that fills it)."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    n = st.distinct - (1 if rewrite else 0)
    for g in range(s.prm[P_NGROUPS]):
        seg = s.open_seg[g]
        if seg >= 0 and s.seg_wp[seg] < seg_blocks:
            n += s.seg_wp[seg] - s.seg_valid[seg]
    return n


@nb.njit(cache=True)
def sepbit_user(s, p, lba, now):
    cls = sepbit_classify(s, p, lba, now)
    st = p.scalars[0]
    if cls == 0 and st.fifo:
        sepbit_hot_created(s, st, now)
    return cls


@nb.njit(cache=True)
def sepbit_classify(s, p, lba, now):
    """A user write's class (0: Class 1, 1: Class 2) with the FIFO queue's bookkeeping, but not
    the creation-time bookkeeping of a Class-1 placement (:func:`sepbit_hot_created`): for a
    caller that may place the block elsewhere (ADAPT) and books it only where it lands."""
    st = p.scalars[0]
    if st.fifo:
        # A Class-1 segment opened since the last write gets the creation time kept for it.
        seg0 = s.open_seg[0]
        if seg0 >= 0 and seg0 != st.tracked:
            p.created[seg0] = st.opening_created
            st.tracked = seg0
    last = s.lba_time[lba]
    rewrite = last >= 0
    v = now - last
    ws = st.window_sum
    short = rewrite and (ws < 0 or NC_WINDOW * v < ws)  # v < l
    if st.fifo:
        # v < min(l, queue length): the old write is still in the queue (see the module docstring)
        size = st.fifo_len
        short = short and v < size
        cap = _fifo_cap(s, st, rewrite)
        size += 1
        if size > cap or (ws >= 0 and NC_WINDOW * size > ws):
            size -= 1
            if ws >= 0 and NC_WINDOW * size > ws:
                size -= 1
        st.fifo_len = size
        if not rewrite:
            st.distinct += 1
    return 0 if short else 1


@nb.njit(cache=True)
def sepbit_hot_created(s, st, now):
    """Creation-time bookkeeping (code variant) of a write placed in Class 1: it opens a new
    Class-1 segment (which takes the creation time kept for it) or fills the open one (the next
    one is created as this one fills). ADAPT calls it for the blocks it sends to its hot group."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    seg = s.open_seg[0]
    if seg < 0 or s.seg_wp[seg] == seg_blocks:
        if seg >= 0 and not st.fill_seen and st.last_hot >= 0:
            # blocks that are not our writes filled it (the chunk layer's padding, lazy appends),
            # right after our last write to it: that is when their next segment is created
            st.next_created = st.last_hot + 1
        st.opening_created = st.next_created  # this write opens a new Class-1 segment
        st.fill_seen = 0
        wp_after = 1
    else:
        wp_after = s.seg_wp[seg] + 1
    if wp_after == seg_blocks:
        st.next_created = now + 1  # their next segment is created as this one fills
        st.fill_seen = 1
    st.last_hot = now


@nb.njit(cache=True)
def sepbit_gc(s, p, lba, victim, now):
    if s.seg_group[victim] == 0:
        return 2
    st = p.scalars[0]
    ws = st.window_sum
    if ws < 0:
        return 3
    # their age counts 1-based write ids: the GC time is the id of the last user write
    g = now - s.lba_time[lba] - st.fifo
    if NC_WINDOW * g < 4 * ws:  # g < 4l
        return 3
    if g < ws:  # g < 16l
        return 4
    return 5


@nb.njit(cache=True)
def sepbit_reclaim(s, p, victim, now):
    st = p.scalars[0]
    if s.seg_group[victim] == 0:
        created = p.created[victim] if st.fifo else s.seg_open_time[victim]
        st.lifespans += 1
        st.lifespan_sum += now - created
        if st.lifespans == NC_WINDOW:
            st.window_sum = st.lifespan_sum
            st.lifespans = 0
            st.lifespan_sum = 0


@register
class SepBIT(PlacementPolicy):
    name = "sepbit"
    default_groups = 6
    place_user = sepbit_user
    place_gc = sepbit_gc
    on_reclaim = sepbit_reclaim

    def __init__(self, n_groups=6, **params):
        if n_groups != 6:
            raise ConfigError(
                f"policy=sepbit uses exactly 6 classes (Algorithm 1), got policy.n_groups={n_groups}",
                "drop policy.n_groups",
            )
        super().__init__(n_groups, **params)
        self.variant = str(params.get("variant", "code"))
        if self.variant not in VARIANTS:
            raise ValueError(
                f"policy sepbit: unknown variant {self.variant!r}; known: {', '.join(VARIANTS)} "
                f"(code = the authors' SepBIT.java, paper = Algorithm 1 as printed)"
            )

    def accepted_params(self):
        return ("variant",)

    def label(self) -> str:
        return self.name if self.variant == "code" else f"{self.name}[{self.variant}]"

    def bind(self, ctx: SimContext) -> tuple:
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.window_sum = -1
        st.fifo = int(self.variant == "code")
        st.tracked = -1
        st.last_hot = -1
        return SepbitState(scalars=scalars, created=np.zeros(ctx.n_segments, np.int64))

    def summary(self, state) -> dict:
        ws = int(record(state.scalars).window_sum)
        return {"sepbit_threshold": None if ws < 0 else ws / NC_WINDOW}
