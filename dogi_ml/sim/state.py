"""Simulator state: every piece of it is a numpy array, so a run can stop and resume anywhere.

The arrays are bundled in a ``namedtuple`` (:class:`SimArrays`) so Numba kernels can take the
whole state as one argument. Scalars live in two small int64 arrays: ``prm`` (parameters, fixed
for the run) and ``ctr`` (counters that change while running).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

# Segment states
SEG_FREE = 0
SEG_OPEN = 1
SEG_SEALED = 2

# prm indices (parameters)
P_SEG_BLOCKS = 0  # blocks per segment
P_NGROUPS = 1  # groups = open segments
P_NSEG = 2  # physical segments
P_CAPACITY = 3  # logical blocks
P_GC_FREE = 4  # GC runs while free segments < this
P_GC_GP_PPM = 5  # garbage-proportion trigger in parts per million (0 = off)
P_VICTIM_D = 6  # d of d-choices
P_WINDOW = 7  # user writes per instantaneous-WAF sample
P_SEG_SHIFT = 8  # log2(seg_blocks) if a power of two, else -1 (a shift beats a division)
P_GC_HIGH = 9  # a GC burst started below P_GC_FREE collects until this many are free (>= P_GC_FREE)
P_TIME_ON = 10  # 1: user writes carry wall-clock times (µs), ctr[C_NOW_US] is the current one
P_CHUNK = 11  # RAID chunk layer: blocks per chunk, 0 = off
P_CHUNK_TIMEOUT_US = 12  # a partial chunk is padded once its oldest unshadowed block waited longer
P_BG_FREE = 13  # background GC in idle gaps collects until this many segments are free (0 = off)
P_IDLE_GAP_US = 14  # an idle gap is a wait longer than this between two user writes
N_PRM = 15

# ctr indices (counters)
C_NOW = 0  # logical time: user-written blocks so far (prefill included)
C_FREE = 1  # free segments (size of the free stack)
C_USER = 2  # user-written blocks counted for WAF
C_GC = 3  # GC-rewritten blocks counted for WAF
C_RECLAIMED = 4  # segments reclaimed
C_INVALID = 5  # invalid blocks held in open + sealed segments
C_RNG = 6  # xorshift64 state, so d-choices is reproducible across chunks
C_ERROR = 7  # error code of the last kernel call
C_ERROR_ARG = 8
C_SERIES_USER = 9  # user writes at the last series sample
C_SERIES_GC = 10
C_SPILLS = 11  # GC blocks written to another group because no segment was free
C_GC_BURSTS = 12  # times GC was triggered (each trigger collects one or more victims)
C_NOW_US = 13  # wall-clock time (µs) of the current / last user write (0 when time is off)
C_PAD = 14  # padding blocks written by the chunk layer
C_SHADOW = 15  # shadow blocks written (cross-group aggregation)
C_PAD_CHUNKS = 16  # chunks flushed with padding
C_CHUNKS = 17  # chunks flushed (full or padded)
C_LAZY = 18  # blocks flushed in their own chunk after having been shadowed elsewhere
C_NEXT_DUE_US = 19  # earliest chunk deadline (µs), 1 << 62 if none
C_BG_PASSES = 20  # background GC passes (idle gaps in which GC ran)
C_BG_GC = 21  # GC blocks written by background passes (included in C_GC)
C_SERIES_EXTRA = 22  # padding + shadow blocks at the last series sample
C_SEALED_INVALID = 23  # invalid blocks held in sealed segments (the garbage-proportion trigger's garbage)
C_WRITTEN = 24  # blocks written into open + sealed segments (its denominator; padding included)
N_CTR = 25

NO_DUE = 1 << 62

# Error codes returned by the kernels
ERR_OK = 0
ERR_NO_VICTIM = 1  # GC needed but no sealed segment exists
ERR_NO_GAIN = 2  # the best victim is entirely valid: GC cannot free space
ERR_OUT_OF_SEGMENTS = 3  # a group needed a fresh segment and none was free
ERR_LBA_RANGE = 4  # a write addressed a block beyond the logical capacity
ERR_BAD_GROUP = 5  # a policy returned a group outside [0, n_groups)
ERR_BAD_VICTIM = 6  # the victim selector returned a segment that is not sealed
ERR_GC_STUCK = 7  # GC reclaimed as many victims as there are segments without freeing one

ERROR_TEXT = {
    ERR_NO_VICTIM: "garbage collection was needed but no sealed segment exists; "
    "raise sim.op_ratio or lower the number of groups",
    ERR_NO_GAIN: "the chosen GC victim is entirely valid, so GC cannot free space "
    "(over-provisioning exhausted); raise sim.op_ratio or sim.segment_blocks",
    ERR_OUT_OF_SEGMENTS: "a group needed a fresh segment and none was free; raise sim.gc_free_segments or sim.op_ratio",
    ERR_LBA_RANGE: "a write addressed a block at or beyond the logical capacity; "
    "raise sim.capacity_blocks (default: the trace's write working set)",
    ERR_BAD_GROUP: "the placement policy returned a group outside [0, n_groups)",
    ERR_BAD_VICTIM: "the victim selector returned a segment that is not sealed",
    ERR_GC_STUCK: "garbage collection made no progress: it reclaimed as many victims as there are "
    "segments without freeing space (the victim selector keeps choosing segments "
    "whose blocks are all valid); fix the selector or raise sim.op_ratio",
}

SimArrays = namedtuple(
    "SimArrays",
    [
        "prm",
        "ctr",
        "l2p",  # int32[capacity]: physical block of each LBA, -1 if unmapped
        "p2l",  # int32[nseg * seg_blocks]: LBA held by a physical block, -1 if invalid/empty
        "lba_time",  # int64[capacity]: time of the LBA's last user write, -1 if never
        "seg_valid",  # int32[nseg]
        "seg_wp",  # int32[nseg]: write pointer (blocks appended)
        "seg_state",  # int8[nseg]
        "seg_group",  # int32[nseg]
        "seg_open_time",  # int64[nseg]: time of the segment's first append ("creation")
        "seg_seal_time",  # int64[nseg]
        "free_stack",  # int32[nseg]
        "open_seg",  # int32[n_groups]: open segment of each group, -1 if none yet
        "group_user",  # int64[n_groups]
        "group_gc",  # int64[n_groups]
        "group_reclaimed",  # int64[n_groups]: segments of the group reclaimed
        "group_reclaimed_valid",  # int64[n_groups]: valid blocks in those segments
        # RAID chunk layer (see notes/chunk_api.md; length-n_groups arrays even when it is off)
        "chunk_fill",  # int32[n_groups]: blocks in the group's open (unflushed) chunk
        "chunk_shadowed",  # int32[n_groups]: leading blocks of that chunk with a shadow copy elsewhere
        "chunk_due_us",  # int64[n_groups]: arrival (µs) of its oldest unshadowed block, -1 if none
        "chunk_ts",  # int64[n_groups * chunk]: arrival time of each block of the open chunk
        "group_pad",  # int64[n_groups]: padding blocks
        "group_pad_chunks",  # int64[n_groups]: chunks flushed with padding
        "group_shadow",  # int64[n_groups]: shadow blocks written into the group
        "group_chunks",  # int64[n_groups]: chunks flushed
        "group_lazy",  # int64[n_groups]: shadowed blocks later flushed in their own chunk
        "group_gc_pass",  # int8[n_groups]: the group received GC blocks in the current GC pass
    ],
)


def new_state(
    *,
    capacity: int,
    n_segments: int,
    segment_blocks: int,
    n_groups: int,
    gc_free_segments: int,
    gc_garbage_ppm: int = 0,
    victim_d: int = 8,
    window: int = 0,
    seed: int = 1,
    gc_high_free_segments: int = 0,
    time_on: bool = False,
    chunk_blocks: int = 0,
    chunk_timeout_us: int = 100,
    bg_free_segments: int = 0,
    idle_gap_us: int = 0,
) -> SimArrays:
    """Allocate an empty state (all segments free, nothing mapped).

    ``gc_high_free_segments`` is the high watermark of a GC burst; below ``gc_free_segments``
    (0 included) it is the low watermark itself: one victim at a time, as without it."""
    prm = np.zeros(N_PRM, np.int64)
    prm[P_SEG_BLOCKS] = segment_blocks
    prm[P_NGROUPS] = n_groups
    prm[P_NSEG] = n_segments
    prm[P_CAPACITY] = capacity
    prm[P_GC_FREE] = gc_free_segments
    prm[P_GC_HIGH] = max(gc_high_free_segments, gc_free_segments)
    prm[P_GC_GP_PPM] = gc_garbage_ppm
    prm[P_VICTIM_D] = victim_d
    prm[P_WINDOW] = window
    prm[P_SEG_SHIFT] = segment_blocks.bit_length() - 1 if segment_blocks & (segment_blocks - 1) == 0 else -1
    prm[P_TIME_ON] = int(bool(time_on))
    prm[P_CHUNK] = chunk_blocks
    prm[P_CHUNK_TIMEOUT_US] = chunk_timeout_us
    prm[P_BG_FREE] = bg_free_segments
    prm[P_IDLE_GAP_US] = idle_gap_us
    if chunk_blocks and segment_blocks % chunk_blocks:
        raise ValueError(f"chunk of {chunk_blocks} blocks does not divide the segment of {segment_blocks}")
    if n_segments * segment_blocks >= 2**31 - 1:
        raise ValueError(
            f"physical space of {n_segments * segment_blocks} blocks exceeds the simulator's "
            "int32 addressing (8 TiB of 4 KiB blocks)"
        )
    ctr = np.zeros(N_CTR, np.int64)
    ctr[C_FREE] = n_segments
    ctr[C_RNG] = (seed * 0x9E3779B97F4A7C15 + 1) & 0x7FFFFFFFFFFFFFFF or 1
    ctr[C_NEXT_DUE_US] = NO_DUE
    # Pop order: segment 0 first (the stack top is the end of the array).
    free_stack = np.arange(n_segments - 1, -1, -1, dtype=np.int32)
    return SimArrays(
        prm=prm,
        ctr=ctr,
        # int32 halves the cache footprint of the two random-access maps (the hot loop's cost)
        l2p=np.full(capacity, -1, np.int32),
        p2l=np.full(n_segments * segment_blocks, -1, np.int32),
        lba_time=np.full(capacity, -1, np.int64),
        seg_valid=np.zeros(n_segments, np.int32),
        seg_wp=np.zeros(n_segments, np.int32),
        seg_state=np.zeros(n_segments, np.int8),
        seg_group=np.full(n_segments, -1, np.int32),
        seg_open_time=np.zeros(n_segments, np.int64),
        seg_seal_time=np.zeros(n_segments, np.int64),
        free_stack=free_stack,
        open_seg=np.full(n_groups, -1, np.int32),
        group_user=np.zeros(n_groups, np.int64),
        group_gc=np.zeros(n_groups, np.int64),
        group_reclaimed=np.zeros(n_groups, np.int64),
        group_reclaimed_valid=np.zeros(n_groups, np.int64),
        chunk_fill=np.zeros(n_groups, np.int32),
        chunk_shadowed=np.zeros(n_groups, np.int32),
        chunk_due_us=np.full(n_groups, -1, np.int64),
        chunk_ts=np.zeros(n_groups * max(chunk_blocks, 1), np.int64),
        group_pad=np.zeros(n_groups, np.int64),
        group_pad_chunks=np.zeros(n_groups, np.int64),
        group_shadow=np.zeros(n_groups, np.int64),
        group_chunks=np.zeros(n_groups, np.int64),
        group_lazy=np.zeros(n_groups, np.int64),
        group_gc_pass=np.zeros(n_groups, np.int8),
    )


def _state_arrays(arrays) -> list:
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, tuple):
            out.extend(_state_arrays(a))
    return out


def state_nbytes(arrays) -> int:
    """Bytes held by a tuple of arrays (the simulator's or a policy's state), nested tuples of
    arrays (a policy's sub-states) included. A view of another array of the same state (DOGI's
    sample ring's ``pending``, a field of its per-LBA rows) holds no bytes of its own."""
    flat = _state_arrays(arrays)
    held = {id(a) for a in flat}
    return sum(a.nbytes for a in flat if not (isinstance(a.base, np.ndarray) and id(a.base) in held))


class InvariantError(AssertionError):
    """The simulator state is inconsistent (a bug, never bad input)."""


def check_invariants(s: SimArrays) -> None:
    """Verify the state's bookkeeping; raises :class:`InvariantError` naming what broke.

    - every mapped LBA points at a physical block that maps back to it;
    - per-segment valid counts equal the number of live blocks in the mapping;
    - block conservation: live blocks = mapped LBAs; invalid counter = written - valid, its
      sealed part = sealed segments' written - valid, the written counter = written;
    - free + open + sealed = all segments; the free stack holds exactly the free segments.
    """
    seg_blocks = int(s.prm[P_SEG_BLOCKS])
    nseg = int(s.prm[P_NSEG])
    mapped = np.flatnonzero(s.l2p >= 0)
    phys = s.l2p[mapped]
    if np.any(s.p2l[phys] != mapped):
        bad = mapped[np.flatnonzero(s.p2l[phys] != mapped)[0]]
        raise InvariantError(f"LBA {bad} maps to physical block {s.l2p[bad]} which holds LBA {s.p2l[s.l2p[bad]]}")
    live = np.flatnonzero(s.p2l >= 0)
    if live.size != mapped.size:
        raise InvariantError(f"{live.size} live physical blocks but {mapped.size} mapped LBAs")
    counts = np.bincount(live // seg_blocks, minlength=nseg)
    if np.any(counts != s.seg_valid):
        seg = int(np.flatnonzero(counts != s.seg_valid)[0])
        raise InvariantError(f"segment {seg}: valid count {s.seg_valid[seg]} but {counts[seg]} live blocks")
    written = int(s.seg_wp[s.seg_state != SEG_FREE].sum())
    if written - int(s.seg_valid.sum()) != int(s.ctr[C_INVALID]):
        raise InvariantError(
            f"invalid-block counter {s.ctr[C_INVALID]} != written {written} - valid {s.seg_valid.sum()}"
        )
    if written != int(s.ctr[C_WRITTEN]):
        raise InvariantError(
            f"written-block counter {s.ctr[C_WRITTEN]} != {written} blocks in open and sealed segments"
        )
    sealed = s.seg_state == SEG_SEALED
    sealed_invalid = int(s.seg_wp[sealed].sum()) - int(s.seg_valid[sealed].sum())
    if sealed_invalid != int(s.ctr[C_SEALED_INVALID]):
        raise InvariantError(
            f"sealed-invalid counter {s.ctr[C_SEALED_INVALID]} != {sealed_invalid} invalid blocks in sealed segments"
        )
    n_free = int((s.seg_state == SEG_FREE).sum())
    n_open = int((s.seg_state == SEG_OPEN).sum())
    n_sealed = int((s.seg_state == SEG_SEALED).sum())
    if n_free + n_open + n_sealed != nseg:
        raise InvariantError(f"free {n_free} + open {n_open} + sealed {n_sealed} != {nseg} segments")
    if n_free != int(s.ctr[C_FREE]):
        raise InvariantError(f"free counter {s.ctr[C_FREE]} but {n_free} segments are free")
    stack = s.free_stack[:n_free]
    if not np.all(s.seg_state[stack] == SEG_FREE) or np.unique(stack).size != n_free:
        raise InvariantError("free stack does not hold exactly the free segments")
    if np.any(s.seg_valid[s.seg_state == SEG_FREE] != 0) or np.any(s.seg_wp[s.seg_state == SEG_FREE] != 0):
        raise InvariantError("a free segment holds blocks")
    opened = s.open_seg[s.open_seg >= 0]
    if not np.all(s.seg_state[opened] == SEG_OPEN) or n_open != opened.size:
        raise InvariantError("open segments disagree with the groups' open-segment table")
    if np.any(s.seg_wp > seg_blocks) or np.any(s.seg_valid > s.seg_wp):
        raise InvariantError("a segment's valid count or write pointer exceeds its size")
    if np.any(s.seg_wp[s.seg_state == SEG_SEALED] == 0):
        raise InvariantError("a sealed segment holds no block (an empty segment must go back to the free stack)")
    if int(s.group_user.sum()) != int(s.ctr[C_USER]) or int(s.group_gc.sum()) != int(s.ctr[C_GC]):
        raise InvariantError("per-group traffic does not add up to the totals")
    chunk = int(s.prm[P_CHUNK])
    if chunk:
        check_chunk_invariants(s)


def check_chunk_invariants(s: SimArrays) -> None:
    """The chunk layer's bookkeeping: each group's pending chunk is the tail of its open segment
    (chunks tile segments), shadowed blocks are pending ones, deadlines exist exactly for
    chunks with unshadowed blocks, and padding/shadow totals add up."""
    chunk = int(s.prm[P_CHUNK])
    for g in range(s.open_seg.shape[0]):
        seg = int(s.open_seg[g])
        fill = int(s.chunk_fill[g])
        expect = int(s.seg_wp[seg]) % chunk if seg >= 0 else 0
        if fill != expect:
            raise InvariantError(f"group {g}: chunk holds {fill} pending blocks, open segment's tail {expect}")
        if not 0 <= int(s.chunk_shadowed[g]) <= fill:
            raise InvariantError(f"group {g}: {s.chunk_shadowed[g]} shadowed of {fill} pending blocks")
        if (int(s.chunk_due_us[g]) >= 0) != (fill > int(s.chunk_shadowed[g])):
            raise InvariantError(f"group {g}: deadline {s.chunk_due_us[g]} disagrees with its unshadowed blocks")
    if int(s.group_pad.sum()) != int(s.ctr[C_PAD]) or int(s.group_shadow.sum()) != int(s.ctr[C_SHADOW]):
        raise InvariantError("per-group padding or shadow blocks do not add up to the totals")
