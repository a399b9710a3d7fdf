"""The in-memory trace: block-granular requests plus the derived block-write stream.

Every reader and generator produces a :class:`Trace`. Addresses are in 4 KiB blocks and, once
a trace is finalised, dense: ``0..n_blocks-1`` in the original address order (see
:func:`remap_dense`). Time in the simulator is logical (one tick per user-written block); the
wall-clock ``ts_us`` is kept for features and statistics only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

from dogi_ml.errors import DogiMLError

BLOCK_SIZE = 4096
SECTOR_SIZE = 512

# Request operation codes (``Trace.op``).
OP_READ = 0
OP_WRITE = 1
OP_TRIM = 2  # kept in the trace so it shows up in statistics; it writes no block
OP_NAMES = {OP_READ: "read", OP_WRITE: "write", OP_TRIM: "trim"}

# What a trace may hold. Byte offsets and request ends stay below 2^62 (4 EiB), so offset + size
# and every block address computed from them fit an int64 with room to spare; a request is at most
# 4 GiB (Linux counts a bio's bytes in 32 bits, bvec_iter.bi_size: no block request is larger; a
# corrupt size field cannot make one line cost gigabytes); wall-clock stamps stay within +-2^62 µs.
# Readers reject anything beyond these with the file and line rather than let numpy wrap it around.
MAX_BYTES = 1 << 62
MAX_REQUEST_BYTES = 1 << 32
MAX_TS_US = 1 << 62


#: the exit status of a bad input file, text trace or ``.dtr`` (``dogi_ml/zns/exit_codes.py``'s
#: ``BAD_INPUT``: this layer sits below ``dogi_ml.zns``, so the value is repeated here and a test
#: checks that they agree)
BAD_INPUT_EXIT = 3


class TraceFormatError(DogiMLError):
    """Malformed trace input; the message names the file, the line and the reason.

    The command line exits with :data:`BAD_INPUT_EXIT` (``exit_status``), as for a damaged
    ``.dtr`` (its :class:`~dogi_ml.traces.binfmt.DtrFormatError` is a subclass): 3 says the input
    file is bad whatever its format, 2 that the command line is (a setting, a path to nothing)."""

    exit_status = BAD_INPUT_EXIT


class TraceWarning(UserWarning):
    """Input accepted with something to report: lines skipped (``skip_malformed``), time stamps
    going backwards. The message names the file, counts the cases and gives the first line."""


@dataclass
class Trace:
    """Requests of a block trace, addresses in 4 KiB blocks.

    Arrays (one entry per request, all the same length):
      ``ts_us`` int64 wall-clock microseconds, ``lba`` int64 first block, ``nblocks`` int32
      blocks touched (>= 1), ``op`` uint8 (``OP_READ``/``OP_WRITE``/``OP_TRIM``), ``volume``
      int32 index into ``volumes``.
    """

    ts_us: np.ndarray
    lba: np.ndarray
    nblocks: np.ndarray
    op: np.ndarray
    volume: np.ndarray
    volumes: list[str] = field(default_factory=lambda: ["0"])
    name: str = "trace"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ts_us = _array(self.ts_us, np.int64)
        self.lba = _array(self.lba, np.int64)
        self.nblocks = _array(self.nblocks, np.int32)
        self.op = _array(self.op, np.uint8)
        self.volume = _array(self.volume, np.int32)
        n = len(self.lba)
        for name in ("ts_us", "nblocks", "op", "volume"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Trace array {name!r} has {len(getattr(self, name))} entries, lba has {n}")
        self._writes: np.ndarray | None = None
        self._write_req: np.ndarray | None = None

    # -- sizes -------------------------------------------------------------------------
    @property
    def n_requests(self) -> int:
        return int(len(self.lba))

    @property
    def is_write(self) -> np.ndarray:
        return self.op == OP_WRITE

    @property
    def max_lba(self) -> int:
        if self.n_requests == 0:
            return -1
        if self.nblocks.strides == (0,):  # constant request size: no n-sized temporary
            return int(self.lba.max()) + int(self.nblocks[0]) - 1
        return int(_max_end(self.lba, self.nblocks))

    # -- block-write stream ------------------------------------------------------------
    def _single_block_writes(self) -> bool:
        """Every request writes one block (generated traces, or their cached .dtr files): the
        block-write stream is ``lba`` itself, with no copy (paper-scale traces are 1B writes)."""
        if _constant(self.nblocks, 1) and _constant(self.op, OP_WRITE):
            return True
        return bool(self.n_requests) and bool(_all_single_writes(self.nblocks, self.op))

    def _derive_writes(self) -> None:
        if self._single_block_writes():
            self._writes, self._write_req = self.lba, None
            return
        self._writes, self._write_req = expand_writes(self.lba, self.nblocks, self.op)

    @property
    def block_writes(self) -> np.ndarray:
        """LBA of every user-written 4 KiB block, in order (int64)."""
        if self._writes is None:
            self._derive_writes()
        return self._writes

    @property
    def block_write_request(self) -> np.ndarray:
        """Index of the request each block write came from (int64)."""
        if self._writes is None:
            self._derive_writes()
        if self._write_req is None:
            self._write_req = np.arange(self._writes.size, dtype=np.int64)
        return self._write_req

    def stats(self) -> dict:
        """Summary statistics (requests, writes, write WSS, traffic/WSS, time span...)."""
        writes = self.block_writes
        wss = distinct_count(writes)
        span_us = int(self.ts_us.max() - self.ts_us.min()) if self.n_requests else 0
        reads, writes_req, trims, read_blocks = _op_counts(self.op, self.nblocks)
        return {
            "name": self.name,
            "requests": self.n_requests,
            "read_requests": int(reads),
            "write_requests": int(writes_req),
            "trim_requests": int(trims),
            "read_blocks": int(read_blocks),
            "write_blocks": int(writes.size),
            "wss_blocks": wss,
            "wss_gib": wss * BLOCK_SIZE / 2**30,
            "traffic_over_wss": (writes.size / wss) if wss else 0.0,
            "max_lba": self.max_lba,
            "volumes": len(self.volumes),
            "time_span_s": span_us / 1e6,
            **{k: v for k, v in self.meta.items() if isinstance(v, (int, float, str))},
        }

    def select(self, mask: np.ndarray, name: str | None = None) -> Trace:
        """A new trace with the requests where ``mask`` is true (addresses unchanged)."""
        return Trace(
            self.ts_us[mask],
            self.lba[mask],
            self.nblocks[mask],
            self.op[mask],
            self.volume[mask],
            list(self.volumes),
            name or self.name,
            dict(self.meta),
        )

    def split_volumes(self) -> dict[str, Trace]:
        """One dense-remapped trace per volume."""
        out = {}
        for i, vol in enumerate(self.volumes):
            sub = self.select(self.volume == i, name=f"{self.name}.{vol}")
            if sub.n_requests:
                sub.volume[:] = 0
                sub.volumes = [vol]
                out[vol] = remap_dense(sub)
        return out


@nb.njit(cache=True)
def _count_writes(nblocks, op):
    total = 0
    for i in range(nblocks.shape[0]):
        if op[i] == OP_WRITE:
            total += nblocks[i]
    return total


@nb.njit(cache=True)
def _fill_writes(lba, nblocks, op, out, req):
    k = 0
    for i in range(lba.shape[0]):
        if op[i] == OP_WRITE:
            for j in range(nblocks[i]):
                out[k] = lba[i] + j
                req[k] = i
                k += 1


def expand_writes(lba: np.ndarray, nblocks: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand write requests into one entry per 4 KiB block: (lbas, request index)."""
    n = _count_writes(nblocks, op)
    out = np.empty(n, np.int64)
    req = np.empty(n, np.int64)
    _fill_writes(lba, nblocks, op, out, req)
    return out, req


def lbas_to_compact(writes: np.ndarray, capacity: int) -> np.ndarray | None:
    """The sorted distinct LBAs of the block writes ``writes`` when they do not fit ``capacity``
    (the largest is at or past it, e.g. a file trace whose dense address space also holds
    read-only blocks): a run then writes the i-th of them as LBA i, order kept
    (``np.searchsorted(result, lba)``). None when the writes fit as they are. The simulate pipeline
    compacts its stream by this rule, and a policy that reads the trace itself maps its blocks by
    it."""
    if writes.size and int(writes.max()) >= capacity:
        return np.unique(writes)
    return None


def bytes_to_blocks(offset_bytes: np.ndarray, size_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First 4 KiB block and number of blocks touched by byte ranges (unaligned ranges cover
    every block they touch). Zero-length ranges give 0 blocks; callers decide what to do."""
    offset_bytes = np.asarray(offset_bytes, dtype=np.int64)
    size_bytes = np.asarray(size_bytes, dtype=np.int64)
    first = offset_bytes // BLOCK_SIZE
    last = (offset_bytes + np.maximum(size_bytes, 1) - 1) // BLOCK_SIZE
    n = np.where(size_bytes > 0, last - first + 1, 0)
    return first, n.astype(np.int64)


@nb.njit(cache=True)
def _dense_starts(vol, start, end, out):
    """``out[i]``: the number of touched blocks before ``start[i]`` (volume-major), for requests
    sorted by (volume, start); touched = the union of the [start, end) ranges. One pass that
    merges the ranges as it goes: no array of every touched block (a 4 GiB read costs nothing)."""
    done = 0  # touched blocks in the merged ranges closed so far
    cur_vol, cur_start, cur_end = -1, 0, 0
    for i in range(vol.shape[0]):
        if vol[i] != cur_vol or start[i] > cur_end:  # a new merged range begins
            if cur_vol != -1:
                done += cur_end - cur_start
            cur_vol, cur_start, cur_end = vol[i], start[i], end[i]
        elif end[i] > cur_end:
            cur_end = end[i]
        out[i] = done + (start[i] - cur_start)


def remap_dense(trace: Trace) -> Trace:
    """Map the touched blocks to ``0..n-1`` preserving address order within and across
    volumes (volume-major), so a sparse 500 GiB volume costs memory only for what it touches.

    A request whose blocks are contiguous in the original space stays contiguous: the
    touched-block set is closed under the request's own range.
    """
    if trace.n_requests == 0:
        return trace
    ends = trace.lba + trace.nblocks
    order = np.lexsort((trace.lba, trace.volume))  # by volume, then address
    dense = np.empty(trace.n_requests, np.int64)
    _dense_starts(trace.volume[order], trace.lba[order], ends[order], dense)
    new_lba = np.empty_like(trace.lba)
    new_lba[order] = dense
    meta = dict(trace.meta)
    meta["remapped"] = 1
    meta["original_max_lba"] = int(ends.max() - 1)
    return Trace(trace.ts_us, new_lba, trace.nblocks, trace.op, trace.volume, list(trace.volumes), trace.name, meta)


def _array(a, dtype) -> np.ndarray:
    """``a`` as a 1-D array of ``dtype``; a constant broadcast view (stride 0) of that dtype is
    kept as is, so a generated trace's constant columns cost no memory."""
    if isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and (a.flags.c_contiguous or a.strides == (0,)):
        return a
    return np.ascontiguousarray(a, dtype=dtype)


def _constant(a: np.ndarray, value) -> bool:
    return a.ndim == 1 and a.size > 0 and a.strides == (0,) and a[0] == value


@nb.njit(cache=True)
def _mark_distinct(values, seen):
    n = 0
    for v in values:
        if seen[v] == 0:
            seen[v] = 1
            n += 1
    return n


def distinct_count(values: np.ndarray) -> int:
    """Number of distinct non-negative values: a byte map when the value range is at most a few
    times the count (blocks of a volume), else a sort."""
    if values.size == 0:
        return 0
    top = int(values.max())
    if int(values.min()) >= 0 and top < max(4 * values.size, 1 << 26):
        return int(_mark_distinct(values, np.zeros(top + 1, np.uint8)))
    return int(np.unique(values).size)


@nb.njit(cache=True)
def _max_end(lba, nblocks):
    top = -1
    for i in range(lba.shape[0]):
        e = lba[i] + nblocks[i] - 1
        if e > top:
            top = e
    return top


@nb.njit(cache=True)
def _op_counts(op, nblocks):
    """(read requests, write requests, trim requests, read blocks) in one pass, no temporaries."""
    r = w = t = rb = 0
    for i in range(op.shape[0]):
        o = op[i]
        if o == OP_READ:
            r += 1
            rb += nblocks[i]
        elif o == OP_WRITE:
            w += 1
        elif o == OP_TRIM:
            t += 1
    return r, w, t, rb


@nb.njit(cache=True)
def _all_single_writes(nblocks, op):
    for i in range(op.shape[0]):
        if nblocks[i] != 1 or op[i] != OP_WRITE:
            return False
    return True
