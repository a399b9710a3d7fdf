"""Online, causal features of every user-written block (DOGI §4.2.2, Table 3 and its candidates).

One Numba pass over a trace's requests in time order. The feature row of a block write uses
only what happened before it (plus the request it belongs to), with bounded per-LBA memory:
a few bytes per logical block and a few counters per 2 MiB chunk. Row ``i`` belongs to the
``i``-th user-written block (``Trace.block_writes[i]``), logical time ``i``.

Windows scale with capacity: the paper's 40 M-block window at 128 GiB (33,554,432 blocks) is
1.19 x capacity, so ``window_blocks = round(40e6 / 33554432 * capacity)`` by default.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from dogi_ml.traces.trace import OP_READ, OP_WRITE, Trace

PAPER_CAPACITY = 33_554_432       # 128 GiB in 4 KiB blocks
PAPER_WINDOW = 40_000_000         # DOGI's bitmap window, in user-written blocks
CHUNK_BLOCKS = 512                # 2 MiB chunks
#: "latest invalidation time" of a block never written before
NO_PREVIOUS = np.int64(1 << 40)

#: Feature names, in column order. The first six are DOGI's selected features (Table 3).
FEATURES = (
    "lba",                  # logical block address
    "prev_lba",             # LBA of the block written immediately before this one
    "freq",                 # writes to this LBA within the current window
    "chunk_freq",           # writes so far to the 2 MiB chunk holding this LBA
    "recency_freq",         # 8-bit bitmap of windows with a write, recent windows weigh 2^i
    "latest_inv",           # time since this LBA's previous write (NO_PREVIOUS if none)
    "req_blocks",           # size of the request, in blocks
    "sequential",           # 1 if the request starts where the previous write request ended
    "chunk_reads",          # blocks read so far in this chunk
    "chunk_writes",         # blocks written so far in this chunk (before this request)
    "rw_ratio_milli",       # global read/write block ratio so far, x1000
    "write_count",          # writes of this LBA so far (this one excluded)
)
DOGI_FEATURES = FEATURES[:6]
F_LBA, F_PREV_LBA, F_FREQ, F_CHUNK_FREQ, F_RECENCY, F_LATEST_INV, F_REQ_BLOCKS, F_SEQ, \
    F_CHUNK_READS, F_CHUNK_WRITES, F_RW_RATIO, F_WRITE_COUNT = range(len(FEATURES))


@dataclass(frozen=True)
class FeatureConfig:
    """Feature-extraction parameters (scaled to capacity unless given)."""

    capacity_blocks: int
    window_blocks: int | None = None
    chunk_blocks: int = CHUNK_BLOCKS

    @property
    def window(self) -> int:
        if self.window_blocks:
            return int(self.window_blocks)
        return max(1, int(round(PAPER_WINDOW / PAPER_CAPACITY * self.capacity_blocks)))


@nb.njit(cache=True)
def _extract(lba, nblocks, op, n_lbas, n_chunks, chunk_blocks, window, rows, out):
    # per LBA: last write time, write count, window stamp + count, 8-bit window bitmap
    last_time = np.full(n_lbas, -1, np.int64)
    write_count = np.zeros(n_lbas, np.int32)
    win_stamp = np.full(n_lbas, -1, np.int32)
    win_count = np.zeros(n_lbas, np.int32)
    bitmap = np.zeros(n_lbas, np.uint8)
    bm_stamp = np.zeros(n_lbas, np.int32)
    chunk_w = np.zeros(n_chunks, np.int64)
    chunk_r = np.zeros(n_chunks, np.int64)
    reads = 0
    writes = 0
    prev_lba = -1
    prev_end = -1
    t = 0
    k = 0
    scratch = np.empty(out.shape[1], np.int64)  # rows not asked for are computed, not kept
    for r in range(lba.shape[0]):
        nb_ = nblocks[r]
        start = lba[r]
        if op[r] == OP_READ:
            for j in range(nb_):
                chunk_r[(start + j) // chunk_blocks] += 1
            reads += nb_
            continue
        if op[r] != OP_WRITE:
            continue
        seq = 1 if start == prev_end else 0
        ratio = (reads * 1000) // writes if writes > 0 else 0
        for j in range(nb_):
            a = start + j
            c = a // chunk_blocks
            w = t // window
            # lazily age this LBA's window state to the current window
            if win_stamp[a] != w:
                win_stamp[a] = w
                win_count[a] = 0
            shift = w - bm_stamp[a]
            if shift > 0:
                bitmap[a] = 0 if shift >= 8 else (bitmap[a] >> shift)
                bm_stamp[a] = w
            if rows.shape[0] == 0:
                row = out[t]
            elif k < rows.shape[0] and rows[k] == t:
                row = out[k]
                k += 1
            else:
                row = scratch
            row[F_LBA] = a
            row[F_PREV_LBA] = prev_lba
            row[F_FREQ] = win_count[a]
            row[F_CHUNK_FREQ] = chunk_w[c]
            row[F_RECENCY] = bitmap[a]
            row[F_LATEST_INV] = t - last_time[a] if last_time[a] >= 0 else NO_PREVIOUS
            row[F_REQ_BLOCKS] = nb_
            row[F_SEQ] = seq
            row[F_CHUNK_READS] = chunk_r[c]
            row[F_CHUNK_WRITES] = chunk_w[c]
            row[F_RW_RATIO] = ratio
            row[F_WRITE_COUNT] = write_count[a]
            # then record this write
            win_count[a] += 1
            bitmap[a] |= 0x80          # the current window is the most significant bit
            write_count[a] += 1
            last_time[a] = t
            chunk_w[c] += 1
            prev_lba = a
            t += 1
        writes += nb_
        prev_end = start + nb_
    return t


def extract_features(trace: Trace, config: FeatureConfig | None = None,
                     rows: np.ndarray | None = None) -> np.ndarray:
    """int64 matrix ``[n, len(FEATURES)]``: row ``i`` for block write ``i``, or, with ``rows``
    (sorted block-write indices), one row per index (memory bounded by the sample, not the
    trace; the pass still updates the per-LBA state for every write)."""
    n_lbas = max(int(trace.max_lba) + 1, 1)
    if config is None:
        config = FeatureConfig(capacity_blocks=int(trace.meta.get("capacity_blocks") or n_lbas))
    n_chunks = n_lbas // config.chunk_blocks + 1
    n = int(trace.block_writes.size)
    if rows is None:
        sel = np.empty(0, np.int64)
        out = np.empty((n, len(FEATURES)), np.int64)
    else:
        sel = np.ascontiguousarray(rows, dtype=np.int64)
        if sel.size and (np.any(np.diff(sel) <= 0) or sel[0] < 0 or sel[-1] >= n):
            raise ValueError(f"rows must be strictly increasing block-write indices in [0, {n})")
        out = np.empty((sel.size, len(FEATURES)), np.int64)
    done = _extract(trace.lba, trace.nblocks, trace.op, n_lbas, n_chunks, int(config.chunk_blocks),
                    int(config.window), sel, out)
    assert done == n, (done, n)
    return out


# scalar state of a FeatureStream: reads and writes so far (blocks), previous LBA and request
# end, block-write time, the request being expanded and the next block in it, and that
# request's sequential flag and read/write ratio (fixed at its start)
S_READS, S_WRITES, S_PREV_LBA, S_PREV_END, S_T, S_REQ, S_OFF, S_SEQ, S_RATIO = range(9)


@nb.njit(cache=True)
def _extract_range(lba, nblocks, op, chunk_blocks, window, last_time, write_count, win_stamp, win_count,
                   bitmap, bm_stamp, chunk_w, chunk_r, scal, out):
    """:func:`_extract`, resumable: fill ``out`` with the next ``out.shape[0]`` block writes'
    rows, keeping every piece of state in the arrays passed in. Returns the rows filled."""
    n_out = out.shape[0]
    k = 0
    r = scal[S_REQ]
    while k < n_out and r < lba.shape[0]:
        nb_ = nblocks[r]
        start = lba[r]
        if op[r] == OP_READ:
            for j in range(nb_):
                chunk_r[(start + j) // chunk_blocks] += 1
            scal[S_READS] += nb_
            r += 1
            continue
        if op[r] != OP_WRITE:
            r += 1
            continue
        if scal[S_OFF] == 0:
            scal[S_SEQ] = 1 if start == scal[S_PREV_END] else 0
            scal[S_RATIO] = (scal[S_READS] * 1000) // scal[S_WRITES] if scal[S_WRITES] > 0 else 0
        j = scal[S_OFF]
        while j < nb_ and k < n_out:
            a = start + j
            c = a // chunk_blocks
            t = scal[S_T]
            w = t // window
            if win_stamp[a] != w:
                win_stamp[a] = w
                win_count[a] = 0
            shift = w - bm_stamp[a]
            if shift > 0:
                bitmap[a] = 0 if shift >= 8 else (bitmap[a] >> shift)
                bm_stamp[a] = w
            row = out[k]
            row[F_LBA] = a
            row[F_PREV_LBA] = scal[S_PREV_LBA]
            row[F_FREQ] = win_count[a]
            row[F_CHUNK_FREQ] = chunk_w[c]
            row[F_RECENCY] = bitmap[a]
            row[F_LATEST_INV] = t - last_time[a] if last_time[a] >= 0 else NO_PREVIOUS
            row[F_REQ_BLOCKS] = nb_
            row[F_SEQ] = scal[S_SEQ]
            row[F_CHUNK_READS] = chunk_r[c]
            row[F_CHUNK_WRITES] = chunk_w[c]
            row[F_RW_RATIO] = scal[S_RATIO]
            row[F_WRITE_COUNT] = write_count[a]
            win_count[a] += 1
            bitmap[a] |= 0x80
            write_count[a] += 1
            last_time[a] = t
            chunk_w[c] += 1
            scal[S_PREV_LBA] = a
            scal[S_T] = t + 1
            j += 1
            k += 1
        if j == nb_:
            scal[S_WRITES] += nb_
            scal[S_PREV_END] = start + nb_
            scal[S_OFF] = 0
            r += 1
        else:
            scal[S_OFF] = j
    scal[S_REQ] = r
    return k


class FeatureStream:
    """The features of :func:`extract_features`, produced chunk by chunk in time order with
    memory bounded by the per-LBA state and the chunk (a paper-scale trace's full feature
    matrix would not fit in memory)::

        stream = FeatureStream(trace, config)
        rows = stream.next(1 << 20)      # block writes 0 .. 2^20 - 1
    """

    def __init__(self, trace: Trace, config: FeatureConfig | None = None):
        n_lbas = max(int(trace.max_lba) + 1, 1)
        self.config = config or FeatureConfig(capacity_blocks=int(trace.meta.get("capacity_blocks") or n_lbas))
        n_chunks = n_lbas // self.config.chunk_blocks + 1
        self.trace = trace
        self.state = (np.full(n_lbas, -1, np.int64), np.zeros(n_lbas, np.int32), np.full(n_lbas, -1, np.int32),
                      np.zeros(n_lbas, np.int32), np.zeros(n_lbas, np.uint8), np.zeros(n_lbas, np.int32),
                      np.zeros(n_chunks, np.int64), np.zeros(n_chunks, np.int64))
        self.scal = np.zeros(9, np.int64)
        self.scal[S_PREV_LBA] = -1
        self.scal[S_PREV_END] = -1

    @property
    def position(self) -> int:
        """Block writes produced so far."""
        return int(self.scal[S_T])

    def next(self, n: int) -> np.ndarray:
        """int64 ``[m, len(FEATURES)]`` rows of the next ``m = min(n, remaining)`` block writes."""
        out = np.empty((max(0, int(n)), len(FEATURES)), np.int64)
        t = self.trace
        k = _extract_range(t.lba, t.nblocks, t.op, int(self.config.chunk_blocks), int(self.config.window),
                           *self.state, self.scal, out)
        return out[:k]


def history_rows(prev: np.ndarray, rows: np.ndarray, history: int) -> np.ndarray:
    """Sorted indices of ``rows`` and their LBAs' previous ``history - 1`` writes (what
    :func:`lba_sequences` needs when features are extracted for a sample only)."""
    need = [np.asarray(rows, np.int64)]
    cur = need[0]
    for _ in range(history - 1):
        cur = prev[cur]
        cur = cur[cur >= 0]
        if cur.size == 0:
            break
        need.append(cur)
    return np.unique(np.concatenate(need))


@nb.njit(cache=True)
def _sequences(features, prev, index, history, out, lengths):
    for k in range(index.shape[0]):
        i = index[k]
        depth = 0
        while i >= 0 and depth < history:
            # newest last: fill from the end
            out[k, history - 1 - depth] = features[i]
            depth += 1
            i = prev[i]
        lengths[k] = depth


def lba_sequences(features: np.ndarray, prev: np.ndarray, index: np.ndarray,
                  history: int = 8, feature_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-LBA feature histories for sequence models (PHFTL/Shiro style).

    For each block write ``index[k]``, the feature rows of that LBA's last ``history`` writes up
    to and including it, oldest first, left-padded with zeros: ``[len(index), history, F]``, plus
    the number of real (non-padding) steps. ``prev`` is the annotation's previous-write time.
    If ``features`` holds only the rows ``feature_rows`` (see :func:`history_rows`), pass them.
    Memory is bounded by ``history`` per sample; nothing per LBA is kept.
    """
    if history < 1:
        raise ValueError(f"history must be >= 1, got {history}")
    index = np.ascontiguousarray(index, dtype=np.int64)
    out = np.zeros((index.size, history, features.shape[1]), features.dtype)
    lengths = np.zeros(index.size, np.int64)
    if feature_rows is None:
        _sequences(features, np.ascontiguousarray(prev, dtype=np.int64), index, int(history), out, lengths)
    else:
        # features holds only feature_rows (sorted): translate block-write indices to positions
        pos_prev = np.full(feature_rows.size, -1, np.int64)
        p = prev[feature_rows]
        ok = p >= 0
        pos_prev[ok] = np.searchsorted(feature_rows, p[ok])
        pos = np.searchsorted(feature_rows, index)
        if np.any(feature_rows[np.minimum(pos, feature_rows.size - 1)] != index):
            raise ValueError("feature_rows must contain every index (use history_rows)")
        _sequences(features, pos_prev, pos, int(history), out, lengths)
    return out, lengths
