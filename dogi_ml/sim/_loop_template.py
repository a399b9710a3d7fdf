"""The specialised per-block loop: a template, copied once per (policy, victim selector).

``dogi_ml.sim.specialise`` copies this file into the kernel cache, replacing the import marked
``# SPECIALISE`` with one policy's Numba functions and one victim selector, so Numba compiles
direct calls (inlinable) and caches the result on disk across processes; first-class function
arguments would recompile in every process.

Both loops are compiled with ``_nrt=False``: the state is a tuple of arrays, and every inlined
helper that takes it would otherwise cost a reference-count increment and decrement per array
per block (measured: 5 M -> 70 M appends/s). The loops allocate nothing, so they need no NRT.
A policy's per-block functions (its ``place_user``/``place_gc`` and what they call on every
write) are declared ``inline="always"``: a Numba call passes every tuple argument flattened into
its arrays' fields (some 480 arguments for the hybrid's ``hybrid_user``), and LLVM left such
calls out of line once a function grew (hybrid 2.2x DOGI's loop cost per block, inlined 1.1x;
Shiro 5.7 M -> 19.2 M appends per CPU second; docs/performance.md).
``run_chunk`` releases the GIL (``nogil``): a Python thread may run another simulator (DOGI's
ghost) or a policy's next-chunk features while it runs.
"""

from __future__ import annotations

import numba as nb

from dogi_ml.sim._placeholders import (  # SPECIALISE
    on_chunk_due,
    on_reclaim,
    place_gc,
    place_user,
    prefetch_lba,
    select_victim,
)
from dogi_ml.sim.kernels import (
    _any_sealed_garbage,
    _append,
    _fail,
    _gc_needed,
    _invalidate,
    _roomiest_group,
    chunk_flush_pad,
    chunk_note,
    prefetch,
    recompute_due,
)
from dogi_ml.sim.state import (
    C_BG_GC,
    C_BG_PASSES,
    C_ERROR,
    C_FREE,
    C_GC,
    C_GC_BURSTS,
    C_INVALID,
    C_NEXT_DUE_US,
    C_NOW,
    C_NOW_US,
    C_PAD,
    C_RECLAIMED,
    C_SEALED_INVALID,
    C_SERIES_EXTRA,
    C_SERIES_GC,
    C_SERIES_USER,
    C_SHADOW,
    C_SPILLS,
    C_USER,
    C_WRITTEN,
    ERR_BAD_GROUP,
    ERR_BAD_VICTIM,
    ERR_GC_STUCK,
    ERR_LBA_RANGE,
    ERR_NO_GAIN,
    ERR_NO_VICTIM,
    ERR_OK,
    ERR_OUT_OF_SEGMENTS,
    P_BG_FREE,
    P_CAPACITY,
    P_CHUNK,
    P_CHUNK_TIMEOUT_US,
    P_GC_FREE,
    P_GC_GP_PPM,
    P_GC_HIGH,
    P_IDLE_GAP_US,
    P_NGROUPS,
    P_NSEG,
    P_SEG_BLOCKS,
    P_TIME_ON,
    P_WINDOW,
    SEG_FREE,
    SEG_SEALED,
)

PREFETCH_FAR = 16
PREFETCH_NEAR = 8


@nb.njit(cache=True, _nrt=False)
def collect_one(s, p, now):
    """Reclaim one victim segment: relocate its valid blocks, then free it."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    ngroups = s.prm[P_NGROUPS]
    chunked = s.prm[P_CHUNK] > 0
    victim = select_victim(s, p, now)
    if victim < 0:
        return _fail(s, ERR_NO_VICTIM, 0)
    if victim >= s.prm[P_NSEG] or s.seg_state[victim] != SEG_SEALED:
        return _fail(s, ERR_BAD_VICTIM, victim)
    if s.seg_valid[victim] >= seg_blocks and not _any_sealed_garbage(s):
        # Relocating a fully valid segment is the selector's call (FIFO does it), but when no
        # sealed segment holds garbage at all, GC can never free space. (A retired segment's
        # unwritten tail counts as space freed, hence seg_blocks rather than its write pointer.)
        return _fail(s, ERR_NO_GAIN, victim)
    on_reclaim(s, p, victim, now)
    vgroup = s.seg_group[victim]
    s.group_reclaimed[vgroup] += 1
    s.group_reclaimed_valid[vgroup] += s.seg_valid[victim]
    base = victim * seg_blocks
    wp = s.seg_wp[victim]
    for off in range(wp):
        if off + PREFETCH_NEAR < wp:
            ahead = s.p2l[base + off + PREFETCH_NEAR]
            if ahead >= 0:
                prefetch(s.l2p, ahead)
                prefetch(s.lba_time, ahead)
                prefetch_lba(p, ahead)
        lba = s.p2l[base + off]
        if lba < 0:
            continue
        g = place_gc(s, p, lba, victim, now)
        if g < 0 or g >= ngroups:
            return _fail(s, ERR_BAD_GROUP, g)
        s.p2l[base + off] = -1
        if not _append(s, g, lba, now):
            # Several GC groups filled up during one victim and the free pool ran dry: put the
            # block in the open segment with the most room and count the spill (rare; reported).
            g = _roomiest_group(s)
            if g < 0 or not _append(s, g, lba, now):
                return _fail(s, ERR_OUT_OF_SEGMENTS, g)
            s.ctr[C_SPILLS] += 1
        s.group_gc[g] += 1
        if chunked:
            chunk_note(s, g, s.ctr[C_NOW_US])
            s.group_gc_pass[g] = 1
    s.ctr[C_GC] += s.seg_valid[victim]
    s.ctr[C_INVALID] -= s.seg_wp[victim] - s.seg_valid[victim]
    s.ctr[C_SEALED_INVALID] -= s.seg_wp[victim] - s.seg_valid[victim]
    s.ctr[C_WRITTEN] -= s.seg_wp[victim]
    s.ctr[C_RECLAIMED] += 1
    s.seg_state[victim] = SEG_FREE
    s.seg_valid[victim] = 0
    s.seg_wp[victim] = 0
    s.seg_group[victim] = -1
    nfree = s.ctr[C_FREE]
    s.free_stack[nfree] = victim
    s.ctr[C_FREE] = nfree + 1
    return ERR_OK


@nb.njit(cache=True, _nrt=False)
def end_gc_pass(s, p):
    """A GC pass ended: GC writes are bulk, so a chunk a pass wrote into and left partial is
    flushed now with padding (chunk layer only). The policy's ``on_chunk_due`` sees each such
    group first, with ``s.group_gc_pass[g]`` still set (it is 0 at every deadline call): it may
    persist the chunk's blocks elsewhere (ADAPT's GC aggregation) and clear the flag of every
    group it dealt with, whose chunk is then not padded. The default hook does nothing."""
    for g in range(s.group_gc_pass.shape[0]):
        if s.group_gc_pass[g]:
            on_chunk_due(s, p, g, s.ctr[C_NOW_US])
            if s.group_gc_pass[g]:
                s.group_gc_pass[g] = 0
                chunk_flush_pad(s, g)


@nb.njit(cache=True, _nrt=False)
def flush_due_chunks(s, p, t_us):
    """Flush every chunk whose deadline is before ``t_us``, earliest first: the policy's
    ``on_chunk_due`` may persist the pending blocks elsewhere (shadow append), else padding."""
    timeout = s.prm[P_CHUNK_TIMEOUT_US]
    while s.ctr[C_NEXT_DUE_US] < t_us:
        due = s.ctr[C_NEXT_DUE_US]
        g = -1
        for h in range(s.chunk_due_us.shape[0]):
            d = s.chunk_due_us[h]
            if d >= 0 and d + timeout == due:
                g = h
                break
        if g < 0:  # stale cache of the earliest deadline (cannot happen; be safe)
            recompute_due(s)
            continue
        on_chunk_due(s, p, g, due)
        d = s.chunk_due_us[g]
        if d >= 0 and d + timeout <= due:
            chunk_flush_pad(s, g)
        recompute_due(s)


@nb.njit(cache=True, _nrt=False)
def background_gc(s, p, now):
    """Collect victims in an idle gap until ``P_BG_FREE`` segments are free or no victim frees
    space; returns an error code (ERR_NO_GAIN ends the pass quietly)."""
    target = s.prm[P_BG_FREE]
    gc_before = s.ctr[C_GC]
    s.ctr[C_BG_PASSES] += 1
    rounds = 0
    rc = ERR_OK
    while s.ctr[C_FREE] < target:
        rounds += 1
        if rounds > s.prm[P_NSEG]:
            break
        rc = collect_one(s, p, now)
        if rc != ERR_OK:
            if rc == ERR_NO_GAIN:
                s.ctr[C_ERROR] = ERR_OK
                rc = ERR_OK
            break
    s.ctr[C_BG_GC] += s.ctr[C_GC] - gc_before
    if s.prm[P_CHUNK] > 0:
        end_gc_pass(s, p)
    return rc


@nb.njit(cache=True, _nrt=False, nogil=True)
def run_chunk(s, p, writes, times, series_t, series_user, series_gc):
    """Apply ``writes`` (one LBA per user-written block) to the state; ``times`` holds each
    write's wall-clock time in µs when the run is timed (``P_TIME_ON``), else it is empty.

    Returns ``(error_code, n_series_samples)``. On error the state is left consistent up to the
    failing block; the error argument is in ``ctr[C_ERROR_ARG]``.
    """
    capacity = s.prm[P_CAPACITY]
    ngroups = s.prm[P_NGROUPS]
    window = s.prm[P_WINDOW]
    gc_free = s.prm[P_GC_FREE]
    gc_high = s.prm[P_GC_HIGH]
    nseg = s.prm[P_NSEG]
    gp_ppm = s.prm[P_GC_GP_PPM]
    timed = s.prm[P_TIME_ON] > 0
    chunked = s.prm[P_CHUNK] > 0
    bg_free = s.prm[P_BG_FREE]
    idle_gap = s.prm[P_IDLE_GAP_US]
    t_us = s.ctr[C_NOW_US]
    nseries = 0
    # next multiple of the window (a compare per write instead of a division)
    next_sample = (s.ctr[C_USER] // window + 1) * window if window > 0 else (1 << 62)
    s.ctr[C_ERROR] = ERR_OK
    n = writes.shape[0]
    for i in range(n):
        # Prefetch two stages ahead: the maps of a later write's LBA, then (once that entry
        # is in cache) the physical slot it will invalidate.
        if i + PREFETCH_FAR < n:
            ahead = writes[i + PREFETCH_FAR]
            if ahead >= 0 and ahead < capacity:
                prefetch(s.l2p, ahead)
                prefetch(s.lba_time, ahead)
                prefetch_lba(p, ahead)  # the policy's own per-LBA tables (no-op by default)
        if i + PREFETCH_NEAR < n:
            ahead = writes[i + PREFETCH_NEAR]
            if ahead >= 0 and ahead < capacity:
                old_ahead = s.l2p[ahead]
                if old_ahead >= 0:
                    prefetch(s.p2l, old_ahead)
        lba = writes[i]
        if lba < 0 or lba >= capacity:
            return _fail(s, ERR_LBA_RANGE, lba), nseries
        now = s.ctr[C_NOW]
        if timed:
            t_prev = t_us
            t_us = times[i]
            if chunked and s.ctr[C_NEXT_DUE_US] < t_us:
                flush_due_chunks(s, p, t_us)
            if bg_free > 0 and t_us - t_prev > idle_gap and s.ctr[C_FREE] < bg_free:
                # background GC runs in the idle gap, once the gap has lasted idle_gap
                s.ctr[C_NOW_US] = t_prev + idle_gap
                rc = background_gc(s, p, now)
                if rc != ERR_OK:
                    return rc, nseries
            s.ctr[C_NOW_US] = t_us
        old = s.l2p[lba]
        if old >= 0:
            _invalidate(s, old)
        g = place_user(s, p, lba, now)
        if g < 0 or g >= ngroups:
            return _fail(s, ERR_BAD_GROUP, g), nseries
        if not _append(s, g, lba, now):
            return _fail(s, ERR_OUT_OF_SEGMENTS, g), nseries
        if chunked:
            chunk_note(s, g, t_us)
        s.lba_time[lba] = now
        s.group_user[g] += 1
        s.ctr[C_USER] += 1
        s.ctr[C_NOW] = now + 1
        # The free-segment test first and by hand: it is the common case and costs a compare.
        if s.ctr[C_FREE] < gc_free or (gp_ppm > 0 and _gc_needed(s)):
            # Below the low watermark a burst collects up to the high one (gc_high == gc_free
            # unless sim.gc_high_free_segments is set: then one victim per round, as before).
            target = gc_high if s.ctr[C_FREE] < gc_free else gc_free
            s.ctr[C_GC_BURSTS] += 1
            rounds = 0
            while s.ctr[C_FREE] < target or (gp_ppm > 0 and _gc_needed(s)):
                rounds += 1
                if rounds > nseg:
                    # Only the high watermark unmet: end the burst, the low one holds.
                    if s.ctr[C_FREE] >= gc_free and not (gp_ppm > 0 and _gc_needed(s)):
                        break
                    return _fail(s, ERR_GC_STUCK, rounds), nseries
                rc = collect_one(s, p, now + 1)
                if rc != ERR_OK:
                    # A garbage-proportion trigger, or a burst towards the high watermark, with
                    # nothing worth collecting is not an error as long as free segments remain
                    # at or above the low watermark.
                    if rc == ERR_NO_GAIN and s.ctr[C_FREE] >= gc_free:
                        s.ctr[C_ERROR] = ERR_OK
                        break
                    return rc, nseries
            if chunked:
                end_gc_pass(s, p)
        if s.ctr[C_USER] == next_sample:
            next_sample += window
            if nseries < series_t.shape[0]:
                series_t[nseries] = now + 1
                series_user[nseries] = s.ctr[C_USER] - s.ctr[C_SERIES_USER]
                # padding and shadow blocks (chunk layer) count with GC as extra writes
                extra = s.ctr[C_PAD] + s.ctr[C_SHADOW]
                series_gc[nseries] = s.ctr[C_GC] - s.ctr[C_SERIES_GC] + extra - s.ctr[C_SERIES_EXTRA]
                s.ctr[C_SERIES_USER] = s.ctr[C_USER]
                s.ctr[C_SERIES_GC] = s.ctr[C_GC]
                s.ctr[C_SERIES_EXTRA] = extra
                nseries += 1
    return ERR_OK, nseries
