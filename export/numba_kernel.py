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
    S = batch_scratch(args)                          # per-chunk callers: allocate once
    int8_mlp_classes_into(X_int64, *args, S, classes)   # no allocation, GIL released

The batch kernels run 128 rows per pass in int32 lanes (~70 ns per block for the DOGI MLP on
one core, against ~270 ns for the first, int64 version). This module imports numpy and numba
(and numba's llvmlite, for one intrinsic) only (the simulator's policies may import it).
"""

from __future__ import annotations

import numba as nb
import numba.extending  # noqa: F401  (nb.extending.intrinsic)
import numpy as np
from llvmlite import ir

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


TILE = 128  # rows per pass of the batch kernels: the tile's activations (a few KiB) stay in L1


@nb.extending.intrinsic
def _ctlz64(typingctx, x):
    """Leading zero bits of a uint64 (LLVM's ``ctlz``: one instruction on x86-64 and ARM)."""

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return nb.types.uint64(nb.types.uint64), codegen


@nb.njit(cache=True, inline="always")
def _log2_q8_fast(u, table):
    """:func:`log2_q8` with the exponent from ``ctlz`` instead of six compare-and-shift steps."""
    n = np.int64(63) - np.int64(_ctlz64(u))
    m9 = np.int64((u << U(63 - n)) >> U(54)) - 512
    return (n << 8) + table[(m9 + 1) >> 1]


def batch_scratch(args) -> np.ndarray:
    """Scratch for the batch kernels given ``kernel_args()`` (a tile's int16 activations and
    int32 accumulators), so a caller that runs them per chunk allocates nothing per call."""
    return _new_scratch(args[2])


@nb.njit(cache=True)
def _new_scratch(dims):
    width = np.int64(0)
    for d in dims:
        width = max(width, d)
    units = (width + 1) // 2 * 2
    # two layers' int16 activations ``[unit, row]`` (an even count: units go in pairs), and the
    # int32 accumulators (two outputs), running max and argmax of the tile's rows
    return np.zeros((2 * units, TILE), np.int16), np.zeros((4, TILE), np.int32)


@nb.njit(cache=True, inline="always")
def _codes(X, r0, n, pre, table, A):
    """Input codes of rows ``r0 .. r0+n`` into ``A [feature, row]``: feature by feature, so
    each rule's constants stay in registers and its branch is taken the same way for every row."""
    for f in range(X.shape[1]):
        row = A[f]
        lo, hi, mul, sh, qmax = pre[f, 1], pre[f, 2], U(pre[f, 3]), U(pre[f, 4]), pre[f, 5]
        log = pre[f, 0] == LOG_KIND
        for r in range(n):
            v = np.int64(X[r0 + r, f])
            if log:
                if v < 0:
                    g = -_log2_q8_fast((U(0) - U(v)) + U(1), table)
                else:
                    g = _log2_q8_fast(U(v) + U(1), table)
            else:
                g = v
            g = lo if g < lo else g
            g = hi if g > hi else g
            row[r] = np.int16(np.int64(((U(g) - U(lo)) * mul) >> sh) - qmax)
    if X.shape[1] & 1:
        row = A[X.shape[1]]
        for r in range(n):  # an odd feature count: the unit past it is 0 (inputs go in pairs)
            row[r] = 0


@nb.njit(cache=True, inline="always")
def _hidden(acc, m, s):
    """One hidden unit's 16-bit requantisation (export.quantize.hidden_requantize), in int32."""
    t = acc >> s
    t = t if t < 32767 else np.int32(32767)
    t = t if t > -32768 else np.int32(-32768)
    v = np.int32(t * m) >> 16
    v = v if v > 0 else np.int32(0)
    return np.int16(v if v < ACT_MAX else np.int32(ACT_MAX))


@nb.njit(cache=True)
def _mlp_tile(X, r0, n, pre, table, dims, w, b, mul, shift, scratch, out_logits, out_cls, want_logits):
    """Rows ``r0 .. r0+n`` (``n <= TILE``) of ``X``: classes to ``out_cls[r0:]`` and, with
    ``want_logits``, int32 logits to ``out_logits[r0:]``.

    Batch-major: activations are int16 ``S[unit, row]`` and every inner loop runs over the
    tile's rows, two inputs x two outputs per pass (each loaded value feeds two multiply-adds),
    in int32 (LLVM vectorises it; the first kernel's int64 products did not: x86 has no packed
    64-bit multiply before AVX-512). 70 ns per block for the DOGI MLP against 270 ns.
    int32 is exact: input codes and activations fit int16, weights int8, and the exporter
    bounds every accumulator to int32 (as the C header computes); hidden requantisation
    multiplies a 16-bit value by a 13-bit multiplier; only the last layer's ``acc * m`` needs
    int64."""
    S, extra = scratch
    units = S.shape[0] // 2
    acc0 = extra[0]
    acc1 = extra[1]
    top = extra[2]
    best = extra[3]
    _codes(X, r0, n, pre, table, S)
    L = dims.shape[0] - 1
    wo = 0
    bo = 0
    src = 0  # first row of the layer's input in S (0 or units)
    for layer in range(L):
        n_in = dims[layer]
        n_out = dims[layer + 1]
        dst = units - src
        last = layer == L - 1
        # two outputs per pass over the inputs, taken two at a time
        for o0 in range(0, n_out, 2):
            two = o0 + 1 < n_out
            o1 = o0 + 1 if two else o0
            bias0 = np.int32(b[bo + o0])
            bias1 = np.int32(b[bo + o1])
            for r in range(n):
                acc0[r] = bias0
                acc1[r] = bias1
            for k in range((n_in + 1) >> 1):
                pair = 2 * k + 1 < n_in
                w00 = np.int32(w[wo + o0 * n_in + 2 * k])
                w01 = np.int32(w[wo + o0 * n_in + 2 * k + 1]) if pair else np.int32(0)
                w10 = np.int32(w[wo + o1 * n_in + 2 * k])
                w11 = np.int32(w[wo + o1 * n_in + 2 * k + 1]) if pair else np.int32(0)
                row0 = S[src + 2 * k]
                row1 = S[src + 2 * k + 1]
                for r in range(n):
                    x0 = np.int32(row0[r])
                    x1 = np.int32(row1[r])
                    acc0[r] += np.int32(x0 * w00 + x1 * w01)
                    acc1[r] += np.int32(x0 * w10 + x1 * w11)
            if not last:
                # 16-bit hidden requantisation (export.quantize.hidden_requantize), in int32;
                # (a unit past an odd width is 0: the next layer reads its inputs in pairs)
                m0, s0 = np.int32(mul[bo + o0]), np.int32(shift[bo + o0])
                m1, s1 = np.int32(mul[bo + o1]), np.int32(shift[bo + o1])
                d0 = S[dst + o0]
                d1 = S[dst + o0 + 1]
                for r in range(n):
                    d0[r] = _hidden(acc0[r], m0, s0)
                    d1[r] = _hidden(acc1[r], m1, s1) if two else np.int16(0)
                continue
            for o in range(o0, o0 + (2 if two else 1)):
                acc = acc0 if o == o0 else acc1
                s = shift[bo + o]
                m64 = mul[bo + o]
                half = (np.int64(1) << s) >> 1
                for r in range(n):
                    a = np.int64(acc[r])
                    v = ((-a if a < 0 else a) * m64 + half) >> s
                    v = -v if a < 0 else v
                    v = min(max(v, INT32_MIN), INT32_MAX)
                    if want_logits:
                        out_logits[r0 + r, o] = v
                    v32 = np.int32(v)
                    if o == 0:
                        top[r] = v32
                        best[r] = 0
                    elif v32 > top[r]:  # first max wins
                        top[r] = v32
                        best[r] = o
        wo += n_in * n_out
        bo += n_out
        src = dst
    for r in range(n):
        out_cls[r0 + r] = best[r]


@nb.njit(cache=True)
def _mlp_batch(X, pre, table, dims, w, b, mul, shift, scratch, out_logits, out_cls, want_logits):
    for r0 in range(0, X.shape[0], TILE):
        n = min(TILE, X.shape[0] - r0)
        _mlp_tile(X, r0, n, pre, table, dims, w, b, mul, shift, scratch, out_logits, out_cls, want_logits)


@nb.njit(cache=True)
def int8_mlp_logits(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> int32 logits ``out [n, classes]``."""
    cls = np.empty(X.shape[0], np.int32)
    _mlp_batch(X, pre, log_table, dims, w, b, mul, shift, _new_scratch(dims), out, cls, True)


@nb.njit(cache=True)
def int8_mlp_classes(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> classes ``out [n]`` (first max of the int32 logits)."""
    _mlp_batch(X, pre, log_table, dims, w, b, mul, shift, _new_scratch(dims), np.empty((0, 0), np.int32), out, False)


@nb.njit(cache=True, nogil=True)
def int8_mlp_classes_into(X, pre, log_table, dims, w, b, mul, shift, scratch, out):
    """:func:`int8_mlp_classes` with the caller's ``scratch`` (:func:`batch_scratch`): nothing
    allocated per call, and the GIL released (a second thread may run it)."""
    _mlp_batch(X, pre, log_table, dims, w, b, mul, shift, scratch, np.empty((0, 0), np.int32), out, False)


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
