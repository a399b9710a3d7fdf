"""Online, causal features of every user-written block (DOGI §4.2.2, Table 3 and its candidates).

One Numba pass over a trace's requests in time order. The feature row of a block write uses
only what happened before it (plus the request it belongs to), with bounded per-LBA memory:
one 32-byte row per logical block and a few counters per 2 MiB chunk. Row ``i`` belongs to the
``i``-th user-written block (``Trace.block_writes[i]``), logical time ``i``.

Windows scale with capacity: the paper's 40 M-block window at 128 GiB (33,554,432 blocks) is
1.19 x capacity, so ``window_blocks = round(40e6 / 33554432 * capacity)`` by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from dogi_ml.intrinsics import prefetch
from dogi_ml.traces.trace import OP_READ, OP_WRITE, Trace

PAPER_CAPACITY = 33_554_432  # 128 GiB in 4 KiB blocks
PAPER_WINDOW = 40_000_000  # DOGI's bitmap window, in user-written blocks
CHUNK_BLOCKS = 512  # 2 MiB chunks
#: "latest invalidation time" of a block never written before
NO_PREVIOUS = np.int64(1 << 40)

#: Feature names, in column order. The first six are DOGI's selected features (Table 3).
FEATURES = (
    "lba",  # logical block address
    "prev_lba",  # LBA of the block written immediately before this one
    "freq",  # writes to this LBA within the current window
    "chunk_freq",  # writes so far to the 2 MiB chunk holding this LBA
    "recency_freq",  # 8-bit bitmap of windows with a write, recent windows weigh 2^i
    "latest_inv",  # time since this LBA's previous write (NO_PREVIOUS if none)
    "req_blocks",  # size of the request, in blocks
    "sequential",  # 1 if the request starts where the previous write request ended
    "chunk_reads",  # blocks read so far in this chunk
    "chunk_writes",  # blocks written so far in this chunk (before this request)
    "rw_ratio_milli",  # global read/write block ratio so far, x1000
    "write_count",  # writes of this LBA so far (this one excluded)
)
DOGI_FEATURES = FEATURES[:6]
#: address-like or binary features: the models' input scaler keeps them linear (no log transform)
NO_LOG = frozenset({"lba", "prev_lba", "sequential"})
(
    F_LBA,
    F_PREV_LBA,
    F_FREQ,
    F_CHUNK_FREQ,
    F_RECENCY,
    F_LATEST_INV,
    F_REQ_BLOCKS,
    F_SEQ,
    F_CHUNK_READS,
    F_CHUNK_WRITES,
    F_RW_RATIO,
    F_WRITE_COUNT,
) = range(len(FEATURES))


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


def extract_features(trace: Trace, config: FeatureConfig | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    """int64 matrix ``[n, len(FEATURES)]``: row ``i`` for block write ``i``, or, with ``rows``
    (sorted block-write indices), one row per index (memory bounded by the sample, not the
    trace; the pass still updates the per-LBA state for every write)."""
    stream = FeatureStream(trace, config)
    n = int(trace.block_writes.size)
    if rows is None:
        out = stream.next(n)
    else:
        sel = np.ascontiguousarray(rows, dtype=np.int64)
        if sel.size and (np.any(np.diff(sel) <= 0) or sel[0] < 0 or sel[-1] >= n):
            raise ValueError(f"rows must be strictly increasing block-write indices in [0, {n})")
        out = stream.select(sel) if sel.size else np.empty((0, len(FEATURES)), np.int64)
    return out


_EXTRACT_CHUNK = 1 << 22  # requests per window
#: a FeatureStream's per-LBA state, one 32-byte row (half a cache line) per LBA: a write reads
#: and updates all of it, so one row costs one cache miss where six arrays cost six
LBA_STATE = np.dtype(
    [
        ("last_time", np.int64),  # block-write time of the LBA's last write, -1 if none
        ("write_count", np.int32),  # its writes so far
        ("win_stamp", np.int32),  # the window win_count counts in, -1 before any
        ("win_count", np.int32),  # its writes in that window
        ("bm_stamp", np.int32),  # the window the bitmap's most significant bit stands for
        ("bitmap", np.uint8),  # windows with a write, the latest in bit 7
    ],
    align=True,
)
#: the pass hints the per-LBA row (and chunk counter) of the request this many ahead into
#: cache: on a large device each is a cache miss per write otherwise (8: best of 4..32 measured)
PREFETCH_AHEAD = 8
_NO_ROWS = np.empty(0, np.int64)


# scalar state of a FeatureStream: reads and writes so far (blocks), previous LBA and request
# end, block-write time, the request being expanded and the next block in it, and that
# request's sequential flag and read/write ratio (fixed at its start)
S_READS, S_WRITES, S_PREV_LBA, S_PREV_END, S_T, S_REQ, S_OFF, S_SEQ, S_RATIO, S_SEL = range(10)


@nb.njit(cache=True, nogil=True)
def _extract_range(
    lba,
    nblocks,
    op,
    step,
    base,
    chunk_blocks,
    window,
    lba_rows,
    chunk_w,
    chunk_r,
    scal,
    rows,
    out,
    limit,
    columns,
):
    """One pass over the requests in time order, resumable: fill ``out`` with the next
    ``out.shape[0]`` block writes' rows, keeping every piece of state (per LBA one :data:`LBA_STATE` row: last write
    time, write count, window stamp and count, 8-bit window bitmap; per 2 MiB chunk: reads and
    writes; the scalars in ``scal``) in the arrays passed in. ``lba``/``nblocks``/``op`` hold
    the requests from index ``base`` on (a window of the trace). At most ``limit`` block writes
    are processed; their rows go to ``out`` in order, or, with ``rows`` (sorted block-write
    indices, the next one at ``scal[S_SEL]``), only those rows, to ``out[position in rows]``.
    With ``columns`` (feature indices), ``out`` holds only those columns, in that order (a
    policy's model inputs, written straight into its buffer). ``step`` is 0 where ``nblocks``
    and ``op`` are one value for every request (a generated trace's constant columns, passed
    as one element, not copied), else 1. Returns the block writes processed (fewer than
    ``limit`` when the window ends). Runs without the GIL (a policy's feature thread)."""
    k = 0
    select = rows.shape[0] > 0
    pick = columns.shape[0] > 0
    full = np.empty(len(FEATURES), np.int64)
    sel = scal[S_SEL]
    scratch = np.empty(out.shape[1], np.int64)
    # the scalars live in locals inside the loop (kept in registers), back in scal at the end
    r = scal[S_REQ] - base
    reads = scal[S_READS]
    writes = scal[S_WRITES]
    prev_lba = scal[S_PREV_LBA]
    prev_end = scal[S_PREV_END]
    t = scal[S_T]
    j = scal[S_OFF]
    seq = scal[S_SEQ]
    ratio = scal[S_RATIO]
    n_req = lba.shape[0]
    while k < limit and r < n_req:
        if r + PREFETCH_AHEAD < n_req:
            ahead = lba[r + PREFETCH_AHEAD]
            prefetch(lba_rows, ahead)
            prefetch(chunk_w, ahead // chunk_blocks)
        nb_ = nblocks[r * step]
        start = lba[r]
        rop = op[r * step]
        if rop == OP_READ:
            for jj in range(nb_):
                chunk_r[(start + jj) // chunk_blocks] += 1
            reads += nb_
            r += 1
            continue
        if rop != OP_WRITE:
            r += 1
            continue
        if j == 0:
            seq = 1 if start == prev_end else 0
            ratio = (reads * 1000) // writes if writes > 0 else 0
        while j < nb_ and k < limit:
            a = start + j
            c = a // chunk_blocks
            w = t // window
            st = lba_rows[a]  # a reference: its fields are read and written in place
            if st.win_stamp != w:
                st.win_stamp = w
                st.win_count = 0
            shift = w - st.bm_stamp
            if shift > 0:
                st.bitmap = 0 if shift >= 8 else (st.bitmap >> shift)
                st.bm_stamp = w
            dest = -1
            if pick:
                row = full  # all columns, the chosen ones copied to out below
                if not select:
                    dest = k
            elif not select:
                row = out[k]
            else:
                row = scratch
            if select and sel < rows.shape[0] and rows[sel] == t:
                if pick:
                    dest = sel
                else:
                    row = out[sel]
                sel += 1
            # (otherwise the row is computed, the state advances, and it is not kept)
            row[F_LBA] = a
            row[F_PREV_LBA] = prev_lba
            row[F_FREQ] = st.win_count
            row[F_CHUNK_FREQ] = chunk_w[c]
            row[F_RECENCY] = st.bitmap
            row[F_LATEST_INV] = t - st.last_time if st.last_time >= 0 else NO_PREVIOUS
            row[F_REQ_BLOCKS] = nb_
            row[F_SEQ] = seq
            row[F_CHUNK_READS] = chunk_r[c]
            row[F_CHUNK_WRITES] = chunk_w[c]
            row[F_RW_RATIO] = ratio
            row[F_WRITE_COUNT] = st.write_count
            if dest >= 0:
                for q in range(columns.shape[0]):
                    out[dest, q] = full[columns[q]]
            st.win_count += 1
            st.bitmap |= 0x80  # the current window is the most significant bit
            st.write_count += 1
            st.last_time = t
            chunk_w[c] += 1
            prev_lba = a
            t += 1
            j += 1
            k += 1
        if j == nb_:
            writes += nb_
            prev_end = start + nb_
            j = 0
            r += 1
    scal[S_REQ] = r + base
    scal[S_READS] = reads
    scal[S_WRITES] = writes
    scal[S_PREV_LBA] = prev_lba
    scal[S_PREV_END] = prev_end
    scal[S_T] = t
    scal[S_OFF] = j
    scal[S_SEQ] = seq
    scal[S_RATIO] = ratio
    scal[S_SEL] = sel
    return k


@nb.njit(cache=True)
def _take_columns(X, columns, out):
    for i in range(X.shape[0]):
        for c in range(columns.shape[0]):
            out[i, c] = X[i, columns[c]]


def take_columns(X: np.ndarray, columns, out: np.ndarray | None = None) -> np.ndarray:
    """``X[:, columns]`` into ``out`` (new if None) in one pass: numpy's column gather of a
    feature matrix costs ~80 ns per row, several times the features themselves."""
    columns = np.asarray(columns, np.int64)
    if out is None:
        out = np.empty((X.shape[0], columns.size), X.dtype)
    if out.shape != (X.shape[0], columns.size):
        raise ValueError(f"out has shape {out.shape}, expected {(X.shape[0], columns.size)}")
    _take_columns(X, columns, out)
    return out


class FeatureStream:
    """The causal features of every block write, produced chunk by chunk in time order with
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
        lba_rows = np.zeros(n_lbas, LBA_STATE)
        lba_rows["last_time"] = -1
        lba_rows["win_stamp"] = -1
        self.state = (lba_rows, np.zeros(n_chunks, np.int64), np.zeros(n_chunks, np.int64))
        self.scal = np.zeros(10, np.int64)
        self.scal[S_PREV_LBA] = -1
        self.scal[S_PREV_END] = -1

    @property
    def position(self) -> int:
        """Block writes produced so far."""
        return int(self.scal[S_T])

    def next(self, n: int) -> np.ndarray:
        """int64 ``[m, len(FEATURES)]`` rows of the next ``m = min(n, remaining)`` block writes."""
        n = max(0, int(n))
        out = np.empty((n, len(FEATURES)), np.int64)
        t = self.trace
        k = 0
        while k < n and self.scal[S_REQ] < t.n_requests:
            # a window of requests, contiguous: a generated trace's constant columns are
            # broadcast views, and Numba's loop over a strided array runs several times slower
            lo = int(self.scal[S_REQ])
            hi = min(t.n_requests, lo + max(n - k, 1 << 16))
            k += self._run(lo, hi, _NO_ROWS, out[k:], n - k)
        return out[:k]

    def next_into(self, out: np.ndarray, columns: np.ndarray) -> int:
        """The next ``out.shape[0]`` block writes' features ``columns`` (indices into
        :data:`FEATURES`, int64) straight into ``out`` (int64, C-contiguous ``[n, len(columns)]``):
        the same values as ``next(n)[:, columns]`` without the full matrix, the column gather or
        a copy of the trace's constant columns. Returns the rows filled (fewer at the trace's
        end). The kernel releases the GIL, so another thread may run this while the simulator
        runs (one thread at a time per stream)."""
        columns = np.ascontiguousarray(columns, np.int64)
        n = int(out.shape[0])
        if columns.ndim != 1 or columns.size == 0 or columns.min() < 0 or columns.max() >= len(FEATURES):
            raise ValueError(f"columns must be a non-empty list of feature indices in [0, {len(FEATURES)})")
        if out.dtype != np.int64 or not out.flags.c_contiguous or out.shape != (n, columns.size):
            raise ValueError(f"out must be a C-contiguous int64 array [n, {columns.size}], got {out.dtype} {out.shape}")
        t = self.trace
        k = 0
        while k < n and self.scal[S_REQ] < t.n_requests:
            lo = int(self.scal[S_REQ])
            hi = min(t.n_requests, lo + max(n - k, 1 << 16))
            k += self._run(lo, hi, _NO_ROWS, out[k:], n - k, columns)
        return k

    def _run(self, lo: int, hi: int, rows: np.ndarray, out: np.ndarray, limit: int, columns=_NO_ROWS) -> int:
        t = self.trace
        nblocks, op, step = _request_columns(t, lo, hi)
        return _extract_range(
            _window(t.lba, lo, hi),
            nblocks,
            op,
            step,
            lo,
            int(self.config.chunk_blocks),
            int(self.config.window),
            *self.state,
            self.scal,
            rows,
            out,
            limit,
            columns,
        )

    def select(self, rows: np.ndarray) -> np.ndarray:
        """From the start of the trace to its end, the rows of block writes ``rows`` only
        (sorted, strictly increasing): one pass, memory bounded by the selection."""
        if self.position or self.scal[S_REQ]:
            raise RuntimeError("FeatureStream.select runs over the whole trace; use a new stream")
        t = self.trace
        out = np.empty((rows.size, len(FEATURES)), np.int64)
        while self.scal[S_REQ] < t.n_requests:
            lo = int(self.scal[S_REQ])
            self._run(lo, min(t.n_requests, lo + _EXTRACT_CHUNK), rows, out, 1 << 62)
        return out


def _window(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.ascontiguousarray(a[lo:hi])


def _request_columns(t: Trace, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Requests ``lo .. hi``'s sizes and ops, contiguous (Numba's loop over a strided array runs
    several times slower), and the kernel's index step: a generated trace's constant columns
    are broadcast views (stride 0), passed as their one value with step 0 instead of copied."""
    nb_, op = t.nblocks, t.op
    if nb_.strides[0] == 0 and op.strides[0] == 0:
        return np.ascontiguousarray(nb_[lo : lo + 1]), np.ascontiguousarray(op[lo : lo + 1]), 0
    return _window(nb_, lo, hi), _window(op, lo, hi), 1


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


def lba_sequences(
    features: np.ndarray, prev: np.ndarray, index: np.ndarray, history: int = 8, feature_rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
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
