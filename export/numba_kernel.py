"""The deployed int8 MLP as Numba functions, for simulator policies (no Python objects).

Bit-identical to :class:`dogi_ml.export.quantize.QuantizedMLP` (the Python reference) and to the C
header: same input rules, same int32 accumulation and rounding. Arguments are plain numpy
arrays, so a policy keeps them in its state tuple and calls the kernel inside its loop::

    args = qmodel.kernel_args()          # or load_export(dir).kernel_args()
    # args = (pre, log_table, dims, w, b, mul, shift)
    logits = np.empty((n, args[2][-1]), np.int32)
    int8_mlp_logits(X_int64, *args, logits)          # [n, F] raw features -> int32 logits
    classes = np.empty(n, np.int64)
    int8_mlp_classes(X_int64, *args, classes)        # -> classes (argmax, first max wins)
    c = int8_mlp_predict_one(x_row_int64, *args, scratch)   # one block; scratch = mlp_scratch(args)

This module imports numpy and numba only (the simulator's policies may import it).
"""

from __future__ import annotations

import numba as nb
import numpy as np

ACT_MAX = 255
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
LOG_KIND = 1
U = np.uint64


@nb.njit(cache=True, inline="always")
def rshift_round(x, s):
    """x / 2**s rounded half away from zero (int64)."""
    half = (np.int64(1) << (s - 1)) if s > 0 else np.int64(0)
    if x >= 0:
        return (x + half) >> s
    return -((-x + half) >> s)


@nb.njit(cache=True)
def log2_q8(u, table):
    """log2(u) in Q8 for 1 <= u < 2**64 (uint64; see export.fixedpoint)."""
    n = np.int64(0)
    t = u
    for sh in (32, 16, 8, 4, 2, 1):
        if t >= (U(1) << U(sh)):
            t >>= U(sh)
            n += sh
    m9 = np.int64((u << U(63 - n)) >> U(54)) - 512
    return (n << 8) + table[(m9 + 1) >> 1]


@nb.njit(cache=True)
def input_code(v, f, pre, table):
    """Integer code of raw feature ``v`` (column ``f``) by the manifest's rule row ``pre[f]``
    (``kind, lo, hi, mul, shift, qmax``)."""
    v = np.int64(v)
    if pre[f, 0] == LOG_KIND:
        if v < 0:
            g = -log2_q8((U(0) - U(v)) + U(1), table)
        else:
            g = log2_q8(U(v) + U(1), table)
    else:
        g = v
    if g < pre[f, 1]:
        g = pre[f, 1]
    elif g > pre[f, 2]:
        g = pre[f, 2]
    d = U(g) - U(pre[f, 1])
    return np.int64((d * U(pre[f, 3])) >> U(pre[f, 4])) - pre[f, 5]


@nb.njit(cache=True)
def _mlp_row(x, pre, table, dims, w, b, mul, shift, buf_a, buf_b, logits):
    """One block: raw features ``x`` -> int32 ``logits``; returns the class. (Unsigned
    indices spare Numba's negative-index wraparound, so LLVM vectorises the dot products.)"""
    F = dims[0]
    for f in range(F):
        buf_a[f] = input_code(x[f], f, pre, table)
    wo = U(0)
    bo = U(0)
    L = dims.shape[0] - 1
    src = buf_a
    dst = buf_b
    for layer in range(L):
        n_in = U(dims[layer])
        n_out = U(dims[layer + 1])
        last = layer == L - 1
        for o in range(n_out):
            acc = np.int64(b[bo + U(o)])
            row = wo + U(o) * n_in
            for i in range(n_in):
                acc += np.int64(w[row + U(i)]) * src[U(i)]
            if not last:
                # 16-bit hidden requantisation (export.quantize.hidden_requantize)
                t = acc >> shift[bo + U(o)]
                if t > 32767:
                    t = 32767
                elif t < -32768:
                    t = -32768
                r = (t * mul[bo + U(o)]) >> 16
                if r < 0:
                    r = 0
                elif r > ACT_MAX:
                    r = ACT_MAX
                dst[U(o)] = r
                continue
            r = rshift_round(acc * mul[bo + U(o)], shift[bo + U(o)])
            if r > INT32_MAX:
                r = INT32_MAX
            elif r < INT32_MIN:
                r = INT32_MIN
            logits[U(o)] = r
        wo += n_in * n_out
        bo += n_out
        src, dst = dst, src
    best = 0
    for c in range(1, dims[L]):
        if logits[c] > logits[best]:
            best = c
    return best


CHUNK = 128  # rows per pass of the batch kernels (working set ~ max(dims) x CHUNK x 2 int64)


@nb.njit(cache=True)
def _mlp_chunk(X, r0, n, pre, table, dims, w, b, mul, shift, A, Bm, acc, out):
    """Rows ``r0 .. r0+n`` of ``X`` -> int32 logits ``out[r0:r0+n]``, batch-major: activations
    are ``[unit, row]`` so the inner loops run over rows (vectorised by LLVM)."""
    for r in range(n):
        for f in range(dims[0]):
            A[f, r] = input_code(X[r0 + r, f], f, pre, table)
    L = dims.shape[0] - 1
    wo = 0
    bo = 0
    src = A
    dst = Bm
    for layer in range(L):
        n_in = dims[layer]
        n_out = dims[layer + 1]
        for o in range(n_out):
            bias = np.int64(b[bo + o])
            for r in range(n):
                acc[r] = bias
            for i in range(n_in):
                wv = np.int64(w[wo + o * n_in + i])
                srow = src[i]
                for r in range(n):
                    acc[r] += wv * srow[r]
            m = mul[bo + o]
            s = shift[bo + o]
            half = (np.int64(1) << s) >> 1
            if layer == L - 1:
                for r in range(n):
                    a = acc[r]
                    v = ((-a if a < 0 else a) * m + half) >> s
                    v = -v if a < 0 else v
                    out[r0 + r, o] = min(max(v, INT32_MIN), INT32_MAX)
            else:
                # 16-bit hidden requantisation (export.quantize.hidden_requantize)
                drow = dst[o]
                for r in range(n):
                    t = acc[r] >> s
                    t = t if t < 32767 else np.int64(32767)
                    t = t if t > -32768 else np.int64(-32768)
                    v = (t * m) >> 16
                    v = v if v > 0 else np.int64(0)
                    drow[r] = v if v < ACT_MAX else np.int64(ACT_MAX)
        wo += n_in * n_out
        bo += n_out
        src, dst = dst, src


@nb.njit(cache=True)
def int8_mlp_logits(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> int32 logits ``out [n, classes]``."""
    width = np.int64(0)
    for d in dims:
        width = max(width, d)
    A = np.empty((width, CHUNK), np.int64)
    Bm = np.empty((width, CHUNK), np.int64)
    acc = np.empty(CHUNK, np.int64)
    for r0 in range(0, X.shape[0], CHUNK):
        n = min(CHUNK, X.shape[0] - r0)
        _mlp_chunk(X, r0, n, pre, log_table, dims, w, b, mul, shift, A, Bm, acc, out)


@nb.njit(cache=True)
def int8_mlp_classes(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> classes ``out [n]`` (first max of the int32 logits)."""
    n_cls = dims[dims.shape[0] - 1]
    logits = np.empty((X.shape[0], n_cls), np.int32)
    int8_mlp_logits(X, pre, log_table, dims, w, b, mul, shift, logits)
    for r in range(X.shape[0]):
        best = 0
        for c in range(1, n_cls):
            if logits[r, c] > logits[r, best]:
                best = c
        out[r] = best


@nb.njit(cache=True)
def int8_mlp_predict_one(x, pre, log_table, dims, w, b, mul, shift, scratch):
    """One block's class from its raw features ``x [F]``; ``scratch`` from :func:`mlp_scratch`
    (int64, ``2 * max(dims) + classes``), so the per-block call allocates nothing."""
    n_cls = dims[dims.shape[0] - 1]
    half = (scratch.shape[0] - n_cls) // 2
    return _mlp_row(
        x,
        pre,
        log_table,
        dims,
        w,
        b,
        mul,
        shift,
        scratch[:half],
        scratch[half : 2 * half],
        scratch[2 * half : 2 * half + n_cls],
    )


def mlp_scratch(args) -> np.ndarray:
    """Scratch buffer for :func:`int8_mlp_predict_one` given ``kernel_args()``."""
    dims = args[2]
    return np.zeros(2 * int(max(dims)) + int(dims[-1]), np.int64)


def kernel_args(qmodel) -> tuple:
    """``(pre, log_table, dims, w, b, mul, shift)`` of a :class:`dogi_ml.export.quantize.QuantizedMLP`."""
    return qmodel.kernel_args()
