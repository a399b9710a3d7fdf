"""Shiro's per-LBA write history, kept compact (:class:`DigitRowStream`).

Shiro's GRU infers from each LBA's cached state, one step on the write's own row, so a chunk needs
only those rows; whole windows (the LBA's last ``history`` rows) are needed only for the sampled
writes (training) and once per LBA when the first model builds its state. :class:`SequenceStream`
keeps ``history - 1`` float32 rows per LBA and writes a window for every write: 15.3 GB of rows
and ~330 ns a write at 128 GiB with Shiro's 20 x 6. Here each LBA's rows are a ring (only the new
row is written), and a row's features are stored as the integers the digit inputs can tell apart:
a feature of ``d`` hexadecimal digits is clipped to ``[0, 16^d - 1]`` by the encoding anyway, so
it is kept clipped, in 16 bits up to 4 digits and 32 bits up to 8; a flag given per write as int8
(Shiro's ``is_seq``) in 8 bits; any other feature stays float32. Shiro's 6 features take 13 bytes
a row instead of 24 (8.3 GB at 128 GiB instead of 15.3). An LBA's rows and its row count are one
block of bytes (:class:`RowRings`), so a write touches one or two cache lines of it instead of one
per storage kind and one for the count: 252 -> 171 ns a write over 33.5M LBAs (the paper's 128
GiB), 209 -> 109 over 8.4M, measured on :func:`_advance_rows` alone.

The windows read back are float32 again and encode to the same digits as the raw rows (clipping
twice is clipping once; a stored integer above 2^24 is the float32 value it came from). Only the
last row of a window, the write's own, is its raw row: the logistic-regression probes of
Algorithm 1 read its unclipped values.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.intrinsics import prefetch, prefetch_span

from ._gru import gru_step
from ._sequence import SequenceStream

KIND_FLOAT, KIND_U16, KIND_U32, KIND_I8 = 0, 1, 2, 3
KINDS = (KIND_FLOAT, KIND_U16, KIND_U32, KIND_I8)
#: writes ahead whose per-LBA ring position and row are hinted into cache
ROW_PREFETCH = 8


class RowRings(NamedTuple):
    """Every LBA's last ``R`` rows (a ring: row ``k`` of an LBA in slot ``k % R``) and its row
    count, in one block of bytes per LBA, so a write touches one or two cache lines (count and
    slot) instead of one per storage kind. A block is the count (int32, bytes 0-3), then ``R``
    rows of ``row_bytes``: the 32-bit features, the 16-bit ones, the 8-bit ones (little-endian);
    ``*_features[c]`` is the feature in column ``c`` of its kind (one loop per kind, no
    per-value dispatch). Features kept as float32 live in ``f32`` (none of Shiro's six)."""

    kind: np.ndarray  # int64 per feature: KIND_*
    top: np.ndarray  # float64 per feature: the digits' largest value (16^d - 1)
    f32_features: np.ndarray
    u16_features: np.ndarray
    u32_features: np.ndarray
    i8_features: np.ndarray
    f32: np.ndarray  # float32 [capacity, R, features kept as they are]
    data: np.ndarray  # uint8 [capacity, block]: count, then R packed rows (block a multiple of 4)
    count: np.ndarray  # int32 per LBA: rows it has had (a view of data's first 4 bytes per LBA)


def row_bytes(kind: np.ndarray) -> int:
    """Bytes of one packed row: 4 per 32-bit feature, 2 per 16-bit, 1 per 8-bit (floats apart)."""
    return int(4 * np.sum(kind == KIND_U32) + 2 * np.sum(kind == KIND_U16) + np.sum(kind == KIND_I8))


def new_row_rings(kind: np.ndarray, top: np.ndarray, capacity: int, R: int) -> RowRings:
    """Empty rings (no rows yet) for ``capacity`` LBAs of ``R`` rows each."""
    block = -(-(4 + R * row_bytes(kind)) // 4) * 4  # int32-aligned counts
    data = np.zeros((capacity, block), np.uint8)
    return RowRings(
        kind, top, *(np.flatnonzero(kind == k).astype(np.int64) for k in KINDS),
        np.zeros((capacity, R, int(np.sum(kind == KIND_FLOAT))), np.float32), data, data.view(np.int32)[:, 0],
    )  # fmt: skip


def storage_kinds(digits, int8_columns=()) -> np.ndarray:
    """Per feature: how its rows are stored (``KIND_*``) for ``digits[f]`` hexadecimal digits;
    ``int8_columns``: features whose values all fit int8 (a scheme's own flag column)."""
    kinds = []
    for f, d in enumerate(digits):
        d = int(d)
        if d == 0 and f in int8_columns:
            kinds.append(KIND_I8)
        else:
            kinds.append(KIND_U16 if 1 <= d <= 4 else KIND_U32 if 5 <= d <= 8 else KIND_FLOAT)
    return np.asarray(kinds, np.int64)


@nb.njit(cache=True, inline="always")
def _clip(v, top):
    """A feature's clip to its digits (:func:`encode_digits`; the rings store values clipped): <= 0 -> 0, >= top -> top, else int(v)."""
    return np.int64(0) if v <= 0 else (np.int64(top) if v >= top else np.int64(v))


@nb.njit(cache=True)
def encode_digits(row, digits, out):
    """``row`` (raw feature values) as input neurons: feature ``f`` as ``digits[f]`` hexadecimal
    digits, most significant first, each / 15 (values clipped to ``[0, 16^k - 1]``); a feature
    with 0 digits is one neuron holding its value (a flag)."""
    k = 0
    for f in range(digits.shape[0]):
        nd = digits[f]
        if nd == 0:
            out[k] = row[f]
            k += 1
            continue
        iv = _clip(row[f], (1 << (4 * nd)) - 1)
        for j in range(nd):
            out[k + j] = ((iv >> (4 * (nd - 1 - j))) & 15) / 15.0
        k += nd


@nb.njit(cache=True, inline="always")
def _row_size(rings):
    """Bytes of one packed row (:func:`row_bytes` of the rings' kinds)."""
    return 4 * rings.u32_features.shape[0] + 2 * rings.u16_features.shape[0] + rings.i8_features.shape[0]


@nb.njit(cache=True, inline="always")
def _row_start(rings, slot):
    """Byte offset of ring slot ``slot`` in an LBA's block."""
    return 4 + slot * _row_size(rings)


@nb.njit(cache=True, inline="always")
def _get_le(d, lba, b, nbytes):
    """The unsigned little-endian integer in bytes ``b .. b + nbytes - 1`` of the LBA's block
    (``nbytes`` is a constant at each call: the loop unrolls)."""
    v = np.uint32(0)
    for k in range(nbytes):
        v |= np.uint32(d[lba, b + k]) << (8 * k)
    return v


@nb.njit(cache=True, inline="always")
def _put_le(d, lba, b, nbytes, v):
    """``v`` (non-negative, < 2^(8 nbytes)) little-endian into bytes ``b ..`` of the LBA's block."""
    for k in range(nbytes):
        d[lba, b + k] = np.uint8((v >> (8 * k)) & 255)


@nb.njit(cache=True, inline="always")
def _load_row(rings, lba, slot, out, w, j):
    """The LBA's ring row ``slot`` into ``out[w, j]`` (float32, one entry per feature; indexed in
    place: a view per row costs more than the copy)."""
    d = rings.data
    o = _row_start(rings, slot)
    n32 = rings.u32_features.shape[0]
    n16 = rings.u16_features.shape[0]
    for c in range(n32):
        out[w, j, rings.u32_features[c]] = np.float32(_get_le(d, lba, o + 4 * c, 4))
    o16 = o + 4 * n32
    for c in range(n16):
        out[w, j, rings.u16_features[c]] = np.float32(_get_le(d, lba, o16 + 2 * c, 2))
    o8 = o16 + 2 * n16
    for c in range(rings.i8_features.shape[0]):
        out[w, j, rings.i8_features[c]] = np.float32(np.int8(d[lba, o8 + c]))
    for c in range(rings.f32_features.shape[0]):
        out[w, j, rings.f32_features[c]] = rings.f32[lba, slot, c]


@nb.njit(cache=True, inline="always")
def _store_row(rings, lba, slot, rows_t, i):
    """Write ``i``'s row (``rows_t[:, i]``) into the LBA's ring slot, each feature in its kind."""
    d = rings.data
    o = _row_start(rings, slot)
    n32 = rings.u32_features.shape[0]
    n16 = rings.u16_features.shape[0]
    for c in range(n32):
        f = rings.u32_features[c]
        _put_le(d, lba, o + 4 * c, 4, _clip(rows_t[f, i], rings.top[f]))
    o16 = o + 4 * n32
    for c in range(n16):
        f = rings.u16_features[c]
        _put_le(d, lba, o16 + 2 * c, 2, _clip(rows_t[f, i], rings.top[f]))
    o8 = o16 + 2 * n16
    for c in range(rings.i8_features.shape[0]):
        d[lba, o8 + c] = np.uint8(np.int8(rows_t[rings.i8_features[c], i]) & 255)
    for c in range(rings.f32_features.shape[0]):
        rings.f32[lba, slot, c] = rows_t[rings.f32_features[c], i]


@nb.njit(cache=True, inline="always")
def _gather_window(rings, lba, count, out, w):
    """The LBA's last ``R`` rows, oldest first, into ``out[w, :R]`` (zeros before its first)."""
    R = rings.f32.shape[1]
    pad = R - count if count < R else 0
    for j in range(pad):
        for f in range(out.shape[2]):
            out[w, j, f] = 0.0
    for j in range(pad, R):
        _load_row(rings, lba, (count - R + j) % R, out, w, j)


@nb.njit(cache=True, nogil=True)
def _advance_rows(lbas, rows_t, rings, out, k0, first, every, samples):
    """Each write's own row to ``out[i, 0]``; then its row joins its LBA's ring. Writes ``k = k0 +
    i`` with ``k >= first`` and ``(k - first) % every == 0`` are sampled: their window (the LBA's
    last ``R`` rows, then this one) goes to ``samples[(k - first) // every]``. Returns the number
    of windows written."""
    R = rings.f32.shape[1]
    F = rows_t.shape[0]
    n = lbas.shape[0]
    count = rings.count
    block = rings.data.shape[1]
    rb = _row_size(rings)
    written = 0
    for i in range(n):
        if R > 0 and i + 2 * ROW_PREFETCH < n:
            prefetch(rings.data, lbas[i + 2 * ROW_PREFETCH] * block)  # the count: the block's first line
        if R > 0 and i + ROW_PREFETCH < n:
            ahead = lbas[i + ROW_PREFETCH]
            slot = count[ahead] % R
            start = ahead * block + _row_start(rings, slot)
            prefetch(rings.data, start)  # the slot's first and last byte: the row may straddle lines
            prefetch(rings.data, start + rb - 1)
            nf = rings.f32.shape[2]
            prefetch_span(rings.f32, (ahead * R + slot) * nf, nf)
        lba = lbas[i]
        for f in range(F):
            out[i, 0, f] = rows_t[f, i]
        c = count[lba]
        k = k0 + i
        if k >= first and (k - first) % every == 0:
            w = (k - first) // every
            _gather_window(rings, lba, c, samples, w)
            for f in range(F):
                samples[w, R, f] = rows_t[f, i]
            written += 1
        if R > 0:
            _store_row(rings, lba, c % R, rows_t, i)
        count[lba] = c + 1
    return written


@nb.njit(cache=True, nogil=True)
def gru_init_from_rows(lo, hi, rings, digits, padding, h_all, wih_t, whh_t, bih, bhh):
    """LBAs ``lo .. hi-1``: the state after the LBA's last ``R`` rows from zero (zero rows where
    it had fewer writes, as the training windows' padding: the state after ``k`` of them is
    ``padding[k]``, so they are not stepped through)."""
    R = rings.f32.shape[1]
    H = h_all.shape[1]
    rows = np.empty((1, 1, rings.kind.shape[0]), np.float32)
    row = rows[0, 0]
    x = np.empty(wih_t.shape[0], np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    for lba in range(lo, hi):
        c = rings.count[lba]
        pad = R - c if c < R else 0
        h = h_all[lba]
        for u in range(H):
            h[u] = padding[pad, u]
        for j in range(pad, R):
            _load_row(rings, lba, (c - R + j) % R, rows, 0, 0)
            encode_digits(row, digits, x)
            gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh)


class DigitRowStream(SequenceStream):
    """:class:`SequenceStream` for Shiro: ``next(n)`` gives each write's own row only
    (``[n, 1, F]``), the per-LBA rows are a ring of clipped integers, and the windows of the
    sampled writes (set per chunk by :meth:`sample`) go to ``samples``."""

    def __init__(self, trace, capacity, names, history, max_rows, digits, sample_every, overrides=None):
        self.digits = np.asarray([int(d) for d in digits], np.int64)
        if len(self.digits) != len(names):
            raise ValueError(f"digits has {len(self.digits)} entries for {len(names)} features")
        self.sample_every = int(sample_every)
        super().__init__(trace, capacity, names, history, max_rows, log=False, overrides=overrides)
        self.sample(0, 0)

    def _allocate(self, capacity: int, max_rows: int, F: int) -> None:
        # a flag given per write as int8 (Shiro's is_seq) keeps 1 byte a row, not 4
        small = [c for c, v in self.overrides.items() if v.dtype in (np.int8, np.bool_)]
        kind = storage_kinds(self.digits, small)
        top = np.asarray([float((1 << (4 * int(d))) - 1) for d in self.digits], np.float64)
        R = self.history - 1

        self.rings = new_row_rings(kind, top, capacity, R)
        self.buffer = np.zeros((max_rows, 1, F), np.float32)
        self.samples = np.zeros((max_rows // self.sample_every + 1, self.history, F), np.float32)

    @property
    def count(self) -> np.ndarray:
        """Rows each LBA has had (its ring's next slot is ``count % R``)."""
        return self.rings.count

    @property
    def nbytes(self) -> int:
        r = self.rings
        return int(r.f32.nbytes + r.data.nbytes + self.samples.nbytes)

    def sample(self, first: int, n: int) -> None:
        """The chunk about to be streamed samples ``n`` writes, every ``sample_every``-th from its
        write ``first`` (offsets as :meth:`next`'s)."""
        self.sample_first = int(first)
        self.sample_count = int(n)
        self.samples_written = 0

    def _advance(self, lbas: np.ndarray, rows_t: np.ndarray, out: np.ndarray, offset: int) -> None:
        first = self.sample_first if self.sample_count else np.iinfo(np.int64).max
        self.samples_written += _advance_rows(
            lbas, rows_t, self.rings, out, offset, first, self.sample_every, self.samples
        )

    def sampled_windows(self) -> np.ndarray:
        """The chunk's sampled windows (:meth:`sample`), zeros for writes past the trace's end."""
        self.samples[self.samples_written : self.sample_count] = 0.0
        return self.samples[: self.sample_count]

    def init_states(self, lo, hi, padding, h_all, wih_t, whh_t, bih, bhh) -> None:
        """:func:`gru_init_from_rows` for LBAs ``lo .. hi-1``."""
        gru_init_from_rows(lo, hi, self.rings, self.digits, padding, h_all, wih_t, whh_t, bih, bhh)
