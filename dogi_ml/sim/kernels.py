"""Building blocks of the per-block loop (append, invalidate, open a segment), in Numba.

The loop itself lives in ``_loop_template`` and is specialised per (policy, victim selector)
by :func:`specialise`. Nothing here knows any policy.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import numba as nb

from dogi_ml.intrinsics import prefetch  # noqa: F401 (re-exported: the policies import it from here)
from dogi_ml.numba_cache import kernel_cache_dir, source_key

from .state import (
    C_CHUNKS,
    C_ERROR,
    C_ERROR_ARG,
    C_FREE,
    C_INVALID,
    C_LAZY,
    C_NEXT_DUE_US,
    C_NOW_US,
    C_PAD,
    C_PAD_CHUNKS,
    C_SEALED_INVALID,
    C_SHADOW,
    C_WRITTEN,
    NO_DUE,
    P_CHUNK,
    P_CHUNK_TIMEOUT_US,
    P_GC_FREE,
    P_GC_GP_PPM,
    P_NSEG,
    P_SEG_BLOCKS,
    P_SEG_SHIFT,
    SEG_FREE,
    SEG_OPEN,
    SEG_SEALED,
)


@nb.njit(cache=True, inline="always")
def segment_of(s, phys):
    """Segment holding physical block ``phys`` (a shift when the segment size allows)."""
    shift = s.prm[P_SEG_SHIFT]
    if shift >= 0:
        return phys >> shift
    return phys // s.prm[P_SEG_BLOCKS]


@nb.njit(cache=True, inline="always")
def _invalidate(s, phys):
    s.p2l[phys] = -1
    seg = segment_of(s, phys)
    s.seg_valid[seg] -= 1
    s.ctr[C_INVALID] += 1
    if s.seg_state[seg] == SEG_SEALED:
        s.ctr[C_SEALED_INVALID] += 1


@nb.njit(cache=True)
def _open_new_segment(s, group, now):
    """Seal the group's full open segment (if any) and give it a fresh one; False if none free."""
    old = s.open_seg[group]
    if old >= 0:
        s.seg_state[old] = SEG_SEALED
        s.seg_seal_time[old] = now
        s.ctr[C_SEALED_INVALID] += s.seg_wp[old] - s.seg_valid[old]
    nfree = s.ctr[C_FREE]
    if nfree == 0:
        s.open_seg[group] = -1
        return False
    seg = s.free_stack[nfree - 1]
    s.ctr[C_FREE] = nfree - 1
    s.seg_state[seg] = SEG_OPEN
    s.seg_group[seg] = group
    s.seg_wp[seg] = 0
    s.seg_valid[seg] = 0
    s.seg_open_time[seg] = now
    s.open_seg[group] = seg
    return True


@nb.njit(cache=True, inline="always")
def _append(s, group, lba, now):
    """Append one block of ``lba`` to ``group``'s open segment; False if out of segments."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    seg = s.open_seg[group]
    if seg < 0 or s.seg_wp[seg] == seg_blocks:
        if not _open_new_segment(s, group, now):
            return False
        seg = s.open_seg[group]
    phys = seg * seg_blocks + s.seg_wp[seg]
    s.seg_wp[seg] += 1
    s.ctr[C_WRITTEN] += 1
    s.seg_valid[seg] += 1
    s.p2l[phys] = lba
    s.l2p[lba] = phys
    return True


@nb.njit(cache=True)
def _any_sealed_garbage(s):
    """Whether reclaiming some sealed segment frees space: one holding fewer valid blocks than
    a segment's size (garbage, or the unwritten tail of a retired segment)."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and s.seg_valid[seg] < seg_blocks:
            return True
    return False


@nb.njit(cache=True)
def _roomiest_group(s):
    """The group whose open segment has the most free slots, -1 if none has any."""
    best = -1
    best_room = 0
    seg_blocks = s.prm[P_SEG_BLOCKS]
    for g in range(s.open_seg.shape[0]):
        seg = s.open_seg[g]
        if seg >= 0 and seg_blocks - s.seg_wp[seg] > best_room:
            best_room = seg_blocks - s.seg_wp[seg]
            best = g
    return best


@nb.njit(cache=True)
def _fail(s, code, arg):
    s.ctr[C_ERROR] = code
    s.ctr[C_ERROR_ARG] = arg
    return code


@nb.njit(cache=True, inline="always")
def _gc_needed(s):
    if s.ctr[C_FREE] < s.prm[P_GC_FREE]:
        return True
    ppm = s.prm[P_GC_GP_PPM]
    if ppm > 0:
        # the garbage proportion as the SepBIT authors' simulator keeps it (fallfish/sepbit,
        # trace_replay Log.Stat): invalid blocks of sealed segments (an open segment's count in
        # when it seals) over the blocks written into the segments in use (written, not
        # capacity; an open segment's unwritten tail not counted)
        return s.ctr[C_SEALED_INVALID] * 1_000_000 > ppm * s.ctr[C_WRITTEN]
    return False


@nb.njit(cache=True)
def retire_group(s, group, now):
    """Seal ``group``'s open segment at time ``now`` even though it is not full; return it
    (``-1`` if the group had no open segment).

    For groups going out of use (a scheme shrinking or replacing its groups): otherwise their
    half-written open segments hold spare space for the rest of the run, since only sealed
    segments are GC victims. The segment is sealed exactly as a full one is (state, seal time),
    so every victim selector sees it: reclaiming it costs its valid blocks and frees a whole
    segment. Nothing is moved and no counter changes (the unwritten tail is neither valid nor
    invalid). The group's next append, if any, opens a fresh segment. A never-written open
    segment (not produced by the engine, but possible) goes back to the free stack instead, since
    an empty sealed segment would be a victim that frees nothing.

    Callable from a policy's Numba functions and, between chunks, through
    :meth:`dogi_ml.sim.Simulator.retire_group`."""
    seg = s.open_seg[group]
    if seg < 0:
        return -1
    if s.prm[P_CHUNK] > 0:
        chunk_flush_pad(s, group)  # the chunk layer persists the pending blocks first
    s.open_seg[group] = -1
    if s.seg_wp[seg] == 0:
        s.seg_state[seg] = SEG_FREE
        s.seg_group[seg] = -1
        s.seg_valid[seg] = 0
        nfree = s.ctr[C_FREE]
        s.free_stack[nfree] = seg
        s.ctr[C_FREE] = nfree + 1
        return -1
    s.seg_state[seg] = SEG_SEALED
    s.seg_seal_time[seg] = now
    s.ctr[C_SEALED_INVALID] += s.seg_wp[seg] - s.seg_valid[seg]
    return seg


# -- RAID chunk layer (see notes/chunk_api.md) ----------------------------------------------
@nb.njit(cache=True)
def recompute_due(s):
    """Set ``ctr[C_NEXT_DUE_US]`` to the earliest chunk deadline of any group."""
    best = NO_DUE
    timeout = s.prm[P_CHUNK_TIMEOUT_US]
    for g in range(s.chunk_due_us.shape[0]):
        d = s.chunk_due_us[g]
        if d >= 0 and d + timeout < best:
            best = d + timeout
    s.ctr[C_NEXT_DUE_US] = best


@nb.njit(cache=True)
def _chunk_done(s, g):
    """Group ``g``'s open chunk was flushed (full or padded): start an empty one."""
    sh = s.chunk_shadowed[g]
    if sh > 0:
        # the originals of shadowed blocks are persisted now (lazy append): their shadows expire
        s.group_lazy[g] += sh
        s.ctr[C_LAZY] += sh
    s.chunk_fill[g] = 0
    s.chunk_shadowed[g] = 0
    s.group_chunks[g] += 1
    s.ctr[C_CHUNKS] += 1
    if s.chunk_due_us[g] >= 0:
        s.chunk_due_us[g] = -1
        recompute_due(s)


@nb.njit(cache=True, inline="always")
def chunk_note(s, g, t_us):
    """A block was just appended to group ``g``'s open segment at time ``t_us`` (µs)."""
    chunk = s.prm[P_CHUNK]
    f = s.chunk_fill[g]
    s.chunk_ts[g * chunk + f] = t_us
    if s.chunk_due_us[g] < 0:
        s.chunk_due_us[g] = t_us
        if t_us + s.prm[P_CHUNK_TIMEOUT_US] < s.ctr[C_NEXT_DUE_US]:
            s.ctr[C_NEXT_DUE_US] = t_us + s.prm[P_CHUNK_TIMEOUT_US]
    f += 1
    if f == chunk:
        _chunk_done(s, g)
    else:
        s.chunk_fill[g] = f


@nb.njit(cache=True, inline="always")
def _write_fillers(s, g, n):
    """Append ``n`` blocks that hold no live data (padding or shadow copies) to ``g``'s open
    segment: they take physical slots and are invalid from the start. The caller guarantees
    room (a partial chunk never crosses a segment end: chunks divide segments)."""
    seg = s.open_seg[g]
    s.seg_wp[seg] += n
    s.ctr[C_WRITTEN] += n
    s.ctr[C_INVALID] += n


@nb.njit(cache=True)
def chunk_flush_pad(s, g):
    """Flush group ``g``'s partial chunk now, padding it to a whole chunk; padding blocks."""
    f = s.chunk_fill[g]
    if f == 0:
        return 0
    pad = s.prm[P_CHUNK] - f
    _write_fillers(s, g, pad)
    s.group_pad[g] += pad
    s.ctr[C_PAD] += pad
    s.group_pad_chunks[g] += 1
    s.ctr[C_PAD_CHUNKS] += 1
    _chunk_done(s, g)
    return pad


@nb.njit(cache=True)
def shadow_append(s, src, dst, t_us, flush=True):
    """Cross-group aggregation (ADAPT §3.3): copy ``src``'s pending blocks that have no shadow
    yet (as many as fit) into ``dst``'s partial chunk as shadow blocks, and flush that chunk now
    (padding what is left; with ``flush=False`` a chunk the shadows do not complete stays open
    for more, and the caller flushes it). The originals stay in ``src``'s chunk (lazy append)
    and count as shadowed; ``src``'s deadline moves to its oldest block still without a shadow
    (none: no deadline). Shadows take slots and count as written, but are never valid data: they expire
    once ``src``'s chunk is flushed, long before their segment can be a victim. Returns the
    blocks shadowed (0 if ``dst`` has no partial chunk or ``src`` nothing to shadow)."""
    chunk = s.prm[P_CHUNK]
    fd = s.chunk_fill[dst]
    if src == dst or fd == 0 or chunk == 0:
        return 0
    start = s.chunk_shadowed[src]
    k = s.chunk_fill[src] - start
    if k > chunk - fd:
        k = chunk - fd
    if k <= 0:
        return 0
    _write_fillers(s, dst, k)
    s.group_shadow[dst] += k
    s.ctr[C_SHADOW] += k
    s.chunk_fill[dst] = fd + k
    if fd + k == chunk:
        _chunk_done(s, dst)
    elif flush:
        chunk_flush_pad(s, dst)
    s.chunk_shadowed[src] = start + k
    if start + k < s.chunk_fill[src]:
        s.chunk_due_us[src] = s.chunk_ts[src * chunk + start + k]
    else:
        s.chunk_due_us[src] = -1
    recompute_due(s)
    return k


@nb.njit(cache=True)
def now_us(s):
    """Wall-clock time (µs) of the current user write (0 when the run has no times)."""
    return s.ctr[C_NOW_US]


# -- specialisation ------------------------------------------------------------------------
# the template's placeholder import, the statement marked "# SPECIALISE" (found, not restated
# here, so a hook added to the template needs no second copy of the statement)
_MARKER = re.compile(r"^from dogi_ml\.sim\._placeholders import \(  # SPECIALISE\n[^)]*\)$", re.MULTILINE)
_LOADED: dict[str, object] = {}


def _origin(fn) -> tuple[str, str]:
    py = getattr(fn, "py_func", None)
    if py is None:
        raise TypeError(f"{fn!r} is not a Numba-compiled function (decorate it with @numba.njit)")
    module = sys.modules[py.__module__]
    if getattr(module, py.__name__, None) is not fn:
        raise TypeError(f"{py.__module__}.{py.__name__} must be a module-level Numba function")
    return py.__module__, py.__name__


def specialise(place_user, place_gc, on_reclaim, on_chunk_due, prefetch_lba, select_victim):
    """The compiled ``run_chunk`` for one policy's functions and one victim selector.

    The template is written out with direct imports of the six functions, as
    ``loop_<key>.py`` in the kernel cache. The key hashes that code, the sources of every project
    module it reaches through imports (the template's kernels and state, the modules defining
    the six functions and every helper module they import, transitively) and the versions of
    dogi_ml, Numba and NumPy (:func:`dogi_ml.numba_cache.source_key`): an edit anywhere the loop
    can reach gives a new file, so Numba's on-disk cache never serves a stale loop."""
    template = (Path(__file__).with_name("_loop_template.py")).read_text()
    names = ("place_user", "place_gc", "on_reclaim", "on_chunk_due", "prefetch_lba", "select_victim")
    imports = []
    for name, fn in zip(names, (place_user, place_gc, on_reclaim, on_chunk_due, prefetch_lba, select_victim)):
        mod, attr = _origin(fn)
        imports.append(f"from {mod} import {attr} as {name}")
    code, found = _MARKER.subn(lambda _: "\n".join(imports), template, count=1)
    if not found:
        raise RuntimeError("loop template lost its SPECIALISE marker")
    key = source_key(code, "dogi_ml_loop")[:20]
    if key in _LOADED:
        return _LOADED[key]
    cache = kernel_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"loop_{key}.py"
    if not path.exists() or path.read_text() != code:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(code)
        tmp.replace(path)  # atomic, so parallel processes never see half a file
    spec = importlib.util.spec_from_file_location(f"dogi_ml_loop_{key}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    _LOADED[key] = module.run_chunk
    return module.run_chunk
