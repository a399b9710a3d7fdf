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

The batch kernels run 128 rows per pass. The classes kernels (``int8_mlp_classes*``) keep the
activations as int16 pairs and run the dot products and the requantisation as LLVM IR, with
x86's ``pmaddwd`` on AVX2 CPUs (see ``PAIR_ROWS``): DOGI's MLP in 68 ns per block on one Zen 3
core, against 257 ns for the previous kernel, which stays as the logits kernel
(:func:`int8_mlp_logits`: int32 lanes, two outputs x two inputs per pass; ~70 ns on an AVX-512
core, ~260 on Zen 3). This module imports numpy, numba and llvmlite only (the simulator's
policies may import it).
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


def batch_scratch(args) -> tuple:
    """Scratch for :func:`int8_mlp_classes_into` given ``kernel_args()`` (a tile's activation
    pairs, running argmax, packed weights and requantisation constants), so a caller that runs
    it per chunk allocates nothing per call. Only its shapes depend on the model: a call packs
    the weights into it when they differ from the ones it holds (compared value by value).
    One scratch per thread."""
    return _new_pair_scratch(args[2])


@nb.njit(cache=True)
def _new_scratch(dims):
    width = np.int64(0)
    for d in dims:
        width = max(width, d)
    units = (width + 1) // 2 * 2
    # two layers' int16 activations ``[unit, row]`` (an even count: units go in pairs), and the
    # int32 accumulators of two outputs for the tile's rows
    return np.zeros((2 * units, TILE), np.int16), np.zeros((2, TILE), np.int32)


@nb.njit(cache=True, inline="always")
def _code(v, lo, hi, mul, sh, qmax, log, table):
    """One raw feature value's int16 code (:func:`input_code` with a rule row's constants)."""
    v = np.int64(v)
    if log:
        if v < 0:
            g = -_log2_q8_fast((U(0) - U(v)) + U(1), table)
        else:
            g = _log2_q8_fast(U(v) + U(1), table)
    else:
        g = v
    g = lo if g < lo else g
    g = hi if g > hi else g
    return np.int32(np.int64(((U(g) - U(lo)) * mul) >> sh) - qmax)


@nb.njit(cache=True, inline="always")
def _codes(X, r0, n, pre, table, A):
    """Input codes of rows ``r0 .. r0+n`` into ``A [feature, row]``: feature by feature, so
    each rule's constants stay in registers and its branch is taken the same way for every row."""
    for f in range(X.shape[1]):
        row = A[f]
        lo, hi, mul, sh, qmax = pre[f, 1], pre[f, 2], U(pre[f, 3]), U(pre[f, 4]), pre[f, 5]
        log = pre[f, 0] == LOG_KIND
        for r in range(n):
            row[r] = np.int16(_code(X[r0 + r, f], lo, hi, mul, sh, qmax, log, table))
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
def _mlp_tile(X, r0, n, pre, table, dims, w, b, mul, shift, scratch, out_logits):
    """Rows ``r0 .. r0+n`` (``n <= TILE``) of ``X``: int32 logits to ``out_logits[r0:]``.

    Batch-major: activations are int16 ``S[unit, row]`` and every inner loop runs over the
    tile's rows, two inputs x two outputs per pass (each loaded value feeds two multiply-adds),
    in int32 (LLVM vectorises it; the first kernel's int64 products did not: x86 has no packed
    64-bit multiply before AVX-512). 70 ns per block for the DOGI MLP against 270 ns on an
    AVX-512 core; ~260 ns on Zen 3, where LLVM leaves the two-output loop scalar.
    int32 is exact: input codes and activations fit int16, weights int8, and the exporter
    bounds every accumulator to int32 (as the C header computes); hidden requantisation
    multiplies a 16-bit value by a 13-bit multiplier; only the last layer's ``acc * m`` needs
    int64. The logits kernel: classes come from :func:`_pairs_batch` (the tests compare its
    classes with this kernel's argmax)."""
    S, extra = scratch
    units = S.shape[0] // 2
    acc0 = extra[0]
    acc1 = extra[1]
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
                    out_logits[r0 + r, o] = min(max(v, INT32_MIN), INT32_MAX)
        wo += n_in * n_out
        bo += n_out
        src = dst


# -- the classes kernel: input pairs, one multiply-add instruction per two inputs -----------------
#
# Activations are kept as int16 pairs ``P[pair, row]`` (one int32 holds units 2j and 2j+1 of a
# row), weights as the matching int16 pairs of an output. A pair of a row times a pair of weights,
# summed, is one lane of x86's ``pmaddwd`` (AVX2: eight rows per instruction). LLVM does not form
# that instruction from Numba's loops, and the loop it does form keeps the accumulators in memory
# (each multiply-add loads and stores them): 257 ns per block for DOGI's 6-32-32-10 MLP on a Zen 3
# core against 49.6 for the C header (-O2). So the dot products and the requantisation that
# follows them are written as LLVM IR (two intrinsics below): sixteen rows x two outputs per
# call, the four accumulators in registers across the inputs, the requantised results stored
# once. On other CPUs (or with ``DOGI_ML_INT8_PORTABLE=1``) the same IR uses plain vector
# multiplies instead of ``pmaddwd``: the same integers, slower.

PAIR_ROWS = 16  # rows per intrinsic call: two vectors of eight int32 lanes
PAIR_GAP = 64  # int32s between the two activation regions' rows (see _new_pair_scratch)


def _target_has_pmaddwd() -> bool:
    """Whether the CPU Numba compiles for has AVX2 (``llvm.x86.avx2.pmadd.wd``)."""
    import os
    import platform

    import llvmlite.binding as llb
    from numba.core import config

    if os.environ.get("DOGI_ML_INT8_PORTABLE", "") not in ("", "0"):
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    if config.CPU_FEATURES is not None:
        return "+avx2" in str(config.CPU_FEATURES).split(",")
    if config.CPU_NAME is not None:  # a named (e.g. generic) target: features unknown here
        return False
    return bool(llb.get_host_cpu_features().get("avx2", False))


PMADDWD = _target_has_pmaddwd()

_I16, _I32, _I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
_V16x16, _V8x32, _V8x64 = ir.VectorType(_I16, 16), ir.VectorType(_I32, 8), ir.VectorType(_I64, 8)


def _splat(builder, scalar, vty):
    v = builder.insert_element(ir.Constant(vty, None), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(
        v, ir.Constant(vty, None), ir.Constant(ir.VectorType(_I32, vty.count), [0] * vty.count)
    )


def _pair_madd(builder, x, w):
    """``pmaddwd(x, w)``: lane i = x.lo[i] * w.lo[i] + x.hi[i] * w.hi[i] (int16 halves, int32 sum)."""
    if PMADDWD:
        fn = builder.module.declare_intrinsic(
            "llvm.x86.avx2.pmadd.wd", fnty=ir.FunctionType(_V8x32, [_V16x16, _V16x16])
        )
        return builder.call(fn, [builder.bitcast(x, _V16x16), builder.bitcast(w, _V16x16)])
    sixteen = ir.Constant(_V8x32, [16] * 8)
    lo = lambda v: builder.ashr(builder.shl(v, sixteen), sixteen)  # noqa: E731
    hi = lambda v: builder.ashr(v, sixteen)  # noqa: E731
    return builder.add(builder.mul(lo(x), lo(w)), builder.mul(hi(x), hi(w)))


def _emit_pair_dot(context, builder, sig, args):
    """The loop shared by both intrinsics: for outputs ``o`` and ``o + 1`` (weight pairs
    ``W2[w_off + k]`` and ``W2[w_off + n_k2 + k]``) and rows ``x_off .. x_off + 16`` of ``P``
    (pair ``k`` of a row at ``P[x_off + k * TILE]``), the int32 sums starting from the biases
    ``Q[q_off]``, ``Q[q_off + 1]``. Returns ``[o0 rows 0-7, o0 rows 8-15, o1 rows 0-7, o1 rows 8-15]``."""
    P, x_off, W2, w_off, n_k2, Q, q_off = args[:7]
    pa = context.make_array(sig.args[0])(context, builder, P).data
    wa = context.make_array(sig.args[2])(context, builder, W2).data
    qa = context.make_array(sig.args[5])(context, builder, Q).data
    init = [
        _splat(
            builder,
            builder.trunc(builder.load(builder.gep(qa, [builder.add(q_off, ir.Constant(_I64, o))])), _I32),
            _V8x32,
        )
        for o in (0, 1)
    ]
    entry = builder.block
    loop = builder.append_basic_block("pairs.loop")
    done = builder.append_basic_block("pairs.done")
    builder.branch(loop)
    builder.position_at_end(loop)
    k = builder.phi(_I64)
    k.add_incoming(ir.Constant(_I64, 0), entry)
    accs = []
    for o in (0, 1):
        for _ in (0, 1):
            phi = builder.phi(_V8x32)
            phi.add_incoming(init[o], entry)
            accs.append(phi)
    row = builder.add(x_off, builder.mul(k, ir.Constant(_I64, TILE)))
    xs = [
        builder.load(
            builder.bitcast(builder.gep(pa, [builder.add(row, ir.Constant(_I64, 8 * v))]), _V8x32.as_pointer()), align=4
        )
        for v in (0, 1)
    ]
    new = []
    for o in (0, 1):
        wk = builder.add(builder.add(w_off, builder.mul(n_k2, ir.Constant(_I64, o))), k)
        wpair = _splat(builder, builder.load(builder.gep(wa, [wk])), _V8x32)
        for v in (0, 1):
            total = builder.add(accs[2 * o + v], _pair_madd(builder, xs[v], wpair))
            accs[2 * o + v].add_incoming(total, loop)
            new.append(total)
    k_next = builder.add(k, ir.Constant(_I64, 1))
    k.add_incoming(k_next, loop)
    builder.cbranch(builder.icmp_signed("<", k_next, n_k2), loop, done)
    builder.position_at_end(done)
    return new, pa, qa


def _q(builder, qa, q_off, nq, part, o):
    """``Q[part * nq + q_off + o]`` (int64): part 0 bias, 1 multiplier, 2 shift."""
    i = builder.add(builder.add(builder.mul(nq, ir.Constant(_I64, part)), q_off), ir.Constant(_I64, o))
    return builder.load(builder.gep(qa, [i]))


def _smin(builder, a, b):
    return builder.select(builder.icmp_signed("<", a, b), a, b)


def _smax(builder, a, b):
    return builder.select(builder.icmp_signed(">", a, b), a, b)


_PAIR_ARGS = (
    nb.types.int32[::1],
    nb.types.int64,
    nb.types.int32[::1],
    nb.types.int64,
    nb.types.int64,
    nb.types.int64[::1],
    nb.types.int64,
    nb.types.int64,
)


@nb.extending.intrinsic
def _pairs_hidden(typingctx, P, x_off, W2, w_off, n_k2, Q, q_off, nq, out_off):
    """A hidden layer's outputs ``o, o + 1`` for 16 rows: dot products, the 16-bit requantisation
    of :func:`_hidden` (int32 lanes; the multiplier is 13 bits, so ``t * m`` fits), and the two
    uint8 results stored as one pair per row at ``P[out_off + row]``."""
    sig = nb.types.void(*_PAIR_ARGS, nb.types.int64)

    def codegen(context, builder, signature, args):
        args = [args[0]] + [
            context.cast(builder, a, t, nb.types.int64) if isinstance(t, nb.types.Integer) else a
            for a, t in zip(args[1:], signature.args[1:])
        ]
        sums, pa, qa = _emit_pair_dot(context, builder, signature, args)
        q_off, nq, out_off = args[6], args[7], args[8]
        halves = []
        for o in (0, 1):
            m = _splat(builder, builder.trunc(_q(builder, qa, q_off, nq, 1, o), _I32), _V8x32)
            s = _splat(builder, builder.trunc(_q(builder, qa, q_off, nq, 2, o), _I32), _V8x32)
            for v in (0, 1):
                t = builder.ashr(sums[2 * o + v], s)
                t = _smax(
                    builder, _smin(builder, t, ir.Constant(_V8x32, [32767] * 8)), ir.Constant(_V8x32, [-32768] * 8)
                )
                r = builder.ashr(builder.mul(t, m), ir.Constant(_V8x32, [16] * 8))
                r = _smax(builder, _smin(builder, r, ir.Constant(_V8x32, [ACT_MAX] * 8)), ir.Constant(_V8x32, [0] * 8))
                halves.append(r)
        for v in (0, 1):
            pair = builder.or_(builder.shl(halves[2 + v], ir.Constant(_V8x32, [16] * 8)), halves[v])
            ptr = builder.gep(pa, [builder.add(out_off, ir.Constant(_I64, 8 * v))])
            builder.store(pair, builder.bitcast(ptr, _V8x32.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@nb.extending.intrinsic
def _pairs_last(typingctx, P, x_off, W2, w_off, n_k2, Q, q_off, nq, TB, tb_off, o0, n_out):
    """The last layer's outputs ``o0, o0 + 1`` (the second only if ``o0 + 1 < n_out``) for 16
    rows: dot products, the logits' 64-bit requantisation (``(|a| m + half) >> s`` as unsigned
    32 x 32 -> 64 products, sign restored, saturated to int32), and the running argmax kept in
    ``TB[tb_off + row]`` (max) and ``TB[TILE + tb_off + row]`` (class; first max wins; ``o0 == 0``
    starts it)."""
    sig = nb.types.void(*_PAIR_ARGS, nb.types.int32[::1], nb.types.int64, nb.types.int64, nb.types.int64)

    def codegen(context, builder, signature, args):
        args = [
            context.cast(builder, a, t, nb.types.int64) if isinstance(t, nb.types.Integer) else a
            for a, t in zip(args, signature.args)
        ]
        sums, pa, qa = _emit_pair_dot(context, builder, signature, args)
        q_off, nq, TB, tb_off, o0, n_out = args[6:12]
        tba = context.make_array(signature.args[8])(context, builder, TB).data
        top_ptr = [
            builder.bitcast(builder.gep(tba, [builder.add(tb_off, ir.Constant(_I64, 8 * v))]), _V8x32.as_pointer())
            for v in (0, 1)
        ]
        cls_ptr = [
            builder.bitcast(
                builder.gep(tba, [builder.add(tb_off, ir.Constant(_I64, TILE + 8 * v))]), _V8x32.as_pointer()
            )
            for v in (0, 1)
        ]
        top = [builder.load(p, align=4) for p in top_ptr]
        cls = [builder.load(p, align=4) for p in cls_ptr]
        zero = ir.Constant(_V8x32, [0] * 8)
        for o in (0, 1):
            m = _splat(builder, _q(builder, qa, q_off, nq, 1, o), _V8x64)
            s64 = _q(builder, qa, q_off, nq, 2, o)
            s = _splat(builder, s64, _V8x64)
            half = _splat(builder, builder.lshr(builder.shl(ir.Constant(_I64, 1), s64), ir.Constant(_I64, 1)), _V8x64)
            o_here = builder.add(o0, ir.Constant(_I64, o))
            valid = builder.icmp_signed("<", o_here, n_out)
            first = builder.icmp_signed("==", o_here, ir.Constant(_I64, 0))
            label = _splat(builder, builder.trunc(o_here, _I32), _V8x32)
            for v in (0, 1):
                a = sums[2 * o + v]
                neg = builder.icmp_signed("<", a, zero)
                mag32 = builder.select(neg, builder.sub(zero, a), a)  # |INT32_MIN| = 2**31 as unsigned
                mag = builder.lshr(builder.add(builder.mul(builder.zext(mag32, _V8x64), m), half), s)
                limit = builder.select(
                    neg, ir.Constant(_V8x64, [1 << 31] * 8), ir.Constant(_V8x64, [(1 << 31) - 1] * 8)
                )
                mag = builder.select(builder.icmp_unsigned("<", mag, limit), mag, limit)
                mag = builder.trunc(mag, _V8x32)
                logit = builder.select(neg, builder.sub(zero, mag), mag)
                better = builder.icmp_signed(">", logit, top[v])
                take = builder.and_(
                    _splat(builder, valid, ir.VectorType(ir.IntType(1), 8)),
                    builder.or_(better, _splat(builder, first, ir.VectorType(ir.IntType(1), 8))),
                )
                top[v] = builder.select(take, logit, top[v])
                cls[v] = builder.select(take, label, cls[v])
        for v in (0, 1):
            builder.store(top[v], top_ptr[v], align=4)
            builder.store(cls[v], cls_ptr[v], align=4)
        return context.get_dummy_value()

    return sig, codegen


@nb.njit(cache=True)
def _pack_pairs(dims, w, b, mul, shift, W2, Q):
    """Weights as int16 pairs per output (``W2``, zero past an odd width or an odd output count),
    and bias / multiplier / shift per output (``Q``, three blocks of ``nq``; zero for a padding
    output, so a padding hidden unit is 0). Outputs are padded to even counts per layer."""
    nq = Q.shape[0] // 3
    wo = 0  # the model's arrays, unpadded
    mo = 0
    qo = 0  # the packed ones
    w2o = 0
    for layer in range(dims.shape[0] - 1):
        n_in = dims[layer]
        n_out = dims[layer + 1]
        k2 = (n_in + 1) // 2
        for o in range((n_out + 1) // 2 * 2):
            real = o < n_out
            Q[qo + o] = b[mo + o] if real else 0
            Q[nq + qo + o] = mul[mo + o] if real else 0
            Q[2 * nq + qo + o] = shift[mo + o] if real else 0
            for k in range(k2):
                lo = np.int32(w[wo + o * n_in + 2 * k]) if real else np.int32(0)
                hi = np.int32(w[wo + o * n_in + 2 * k + 1]) if real and 2 * k + 1 < n_in else np.int32(0)
                W2[w2o + o * k2 + k] = (hi << 16) | (lo & 0xFFFF)
        wo += n_in * n_out
        mo += n_out
        qo += (n_out + 1) // 2 * 2
        w2o += (n_out + 1) // 2 * 2 * k2


@nb.njit(cache=True)
def _pair_sizes(dims):
    """Lengths of the pair kernel's scratch arrays for layer widths ``dims``: activation pairs,
    running max and class, packed weights, requantisation constants, the packed model's copy."""
    width = np.int64(0)
    n_w2 = np.int64(0)
    nq = np.int64(0)
    n_model = np.int64(0)
    for layer in range(dims.shape[0] - 1):
        out2 = (dims[layer + 1] + 1) // 2 * 2
        width = max(width, max(dims[layer], out2))
        n_w2 += out2 * ((dims[layer] + 1) // 2)
        nq += out2
        n_model += dims[layer] * dims[layer + 1] + 3 * dims[layer + 1]
    pairs = (width + 1) // 2
    # two regions of activation pairs ``[pair, row]`` (codes in the first, layers alternate);
    # the second starts 256 bytes past a multiple of 512 from the first, so a call's stores
    # never share their address's low 12 bits with the next call's loads (x86's 4K aliasing
    # would stall them)
    return 2 * (pairs * TILE + PAIR_GAP), 2 * TILE, n_w2, 3 * nq, n_model + 1


@nb.njit(cache=True)
def _new_pair_scratch(dims):
    n_p, n_tb, n_w2, n_q, n_seen = _pair_sizes(dims)
    # (the copy of the packed model: a call with the same values skips the packing, ~4 us)
    return (
        np.zeros(n_p, np.int32),
        np.zeros(n_tb, np.int32),
        np.zeros(n_w2, np.int32),
        np.zeros(n_q, np.int64),
        np.zeros(n_seen, np.int64),
    )


@nb.njit(cache=True, inline="always")
def _codes_pairs(X, r0, n, pre, table, P):
    """:func:`_codes` into the pair layout: features ``2j`` and ``2j + 1`` of row ``r`` are the
    low and high int16 halves of ``P[j * TILE + r]`` (a zero high half past an odd feature
    count), two features per pass and one 32-bit store per row and pair."""
    F = X.shape[1]
    for j in range((F + 1) >> 1):
        f0 = 2 * j
        f1 = min(f0 + 1, F - 1)
        lo0, hi0, mul0, sh0, q0 = pre[f0, 1], pre[f0, 2], U(pre[f0, 3]), U(pre[f0, 4]), pre[f0, 5]
        lo1, hi1, mul1, sh1, q1 = pre[f1, 1], pre[f1, 2], U(pre[f1, 3]), U(pre[f1, 4]), pre[f1, 5]
        log0 = pre[f0, 0] == LOG_KIND
        log1 = pre[f1, 0] == LOG_KIND
        keep_hi = np.int32(-1) if f0 + 1 < F else np.int32(0)
        base = j * TILE
        for r in range(n):
            c0 = _code(X[r0 + r, f0], lo0, hi0, mul0, sh0, q0, log0, table)
            c1 = _code(X[r0 + r, f1], lo1, hi1, mul1, sh1, q1, log1, table)
            P[base + r] = ((c1 & keep_hi) << 16) | (c0 & 0xFFFF)


@nb.njit(cache=True, inline="always")
def _packed_from(seen, w, b, mul, shift):
    """Whether ``seen`` holds exactly ``w, b, mul, shift`` (then the packed arrays are theirs);
    if not, stores them there (the caller packs). A comparison of every value, not of the
    arrays' addresses: a model changed in place is packed again."""
    nw, nb_ = w.shape[0], b.shape[0]
    diff = np.int64(0) if seen[nw + 3 * nb_] == 1 else np.int64(1)
    for i in range(nw):  # no early exit: the loop vectorises
        diff |= seen[i] ^ np.int64(w[i])
    for i in range(nb_):
        diff |= (seen[nw + i] ^ np.int64(b[i])) | (seen[nw + nb_ + i] ^ mul[i]) | (seen[nw + 2 * nb_ + i] ^ shift[i])
    if diff == 0:
        return True
    for i in range(nw):
        seen[i] = w[i]
    for i in range(nb_):
        seen[nw + i] = b[i]
        seen[nw + nb_ + i] = mul[i]
        seen[nw + 2 * nb_ + i] = shift[i]
    seen[nw + 3 * nb_] = 1
    return False


@nb.njit(cache=True)
def _pairs_batch(X, pre, table, dims, w, b, mul, shift, scratch, out_cls):
    """Classes of every row of ``X`` by the pair kernel (see ``PAIR_ROWS``), 128 rows a tile."""
    P, TB, W2, Q, packed_from = scratch
    # the intrinsics do not check bounds: the scratch must be this model's shape
    n_p, n_tb, n_w2, n_q, n_seen = _pair_sizes(dims)
    if (
        P.shape[0] != n_p
        or TB.shape[0] != n_tb
        or W2.shape[0] != n_w2
        or Q.shape[0] != n_q
        or packed_from.shape[0] != n_seen
    ):
        raise ValueError("int8 MLP scratch made for other layer widths: call batch_scratch(args) for this model")
    if X.shape[1] != dims[0] or pre.shape[0] != dims[0]:
        raise ValueError("int8 MLP: the features' columns do not match the model's input width")
    if w.shape[0] + 3 * b.shape[0] + 1 != n_seen or mul.shape[0] != b.shape[0] or shift.shape[0] != b.shape[0]:
        raise ValueError("int8 MLP: the weights or requantisation constants do not match the layer widths")
    if out_cls.shape[0] < X.shape[0]:
        raise ValueError("int8 MLP: the output array is shorter than the feature rows")
    if not _packed_from(packed_from, w, b, mul, shift):
        _pack_pairs(dims, w, b, mul, shift, W2, Q)
    nq = Q.shape[0] // 3
    region = P.shape[0] // 2  # int32s from the first layer region to the second
    L = dims.shape[0] - 1
    for r0 in range(0, X.shape[0], TILE):
        n = min(TILE, X.shape[0] - r0)
        _codes_pairs(X, r0, n, pre, table, P)
        # rows past ``n`` in a last, partial tile compute on stale pairs and are not read
        rows = (n + PAIR_ROWS - 1) // PAIR_ROWS * PAIR_ROWS
        w2o = 0
        qo = 0
        src = 0
        for layer in range(L):
            n_in = dims[layer]
            n_out = dims[layer + 1]
            k2 = (n_in + 1) // 2
            dst = region - src
            for o0 in range(0, n_out, 2):
                w_off = w2o + o0 * k2
                if layer < L - 1:
                    out = dst + (o0 >> 1) * TILE
                    for r in range(0, rows, PAIR_ROWS):
                        _pairs_hidden(P, src + r, W2, w_off, k2, Q, qo + o0, nq, out + r)
                else:
                    for r in range(0, rows, PAIR_ROWS):
                        _pairs_last(P, src + r, W2, w_off, k2, Q, qo + o0, nq, TB, r, o0, n_out)
            w2o += (n_out + 1) // 2 * 2 * k2
            qo += (n_out + 1) // 2 * 2
            src = dst
        for r in range(n):
            out_cls[r0 + r] = TB[TILE + r]


@nb.njit(cache=True)
def _mlp_batch(X, pre, table, dims, w, b, mul, shift, scratch, out_logits):
    for r0 in range(0, X.shape[0], TILE):
        n = min(TILE, X.shape[0] - r0)
        _mlp_tile(X, r0, n, pre, table, dims, w, b, mul, shift, scratch, out_logits)


@nb.njit(cache=True)
def int8_mlp_logits(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> int32 logits ``out [n, classes]``."""
    _mlp_batch(X, pre, log_table, dims, w, b, mul, shift, _new_scratch(dims), out)


@nb.njit(cache=True)
def int8_mlp_classes(X, pre, log_table, dims, w, b, mul, shift, out):
    """Raw int64 features ``X [n, F]`` -> classes ``out [n]`` (first max of the int32 logits)."""
    _pairs_batch(X, pre, log_table, dims, w, b, mul, shift, _new_pair_scratch(dims), out)


@nb.njit(cache=True, nogil=True)
def int8_mlp_classes_into(X, pre, log_table, dims, w, b, mul, shift, scratch, out):
    """:func:`int8_mlp_classes` with the caller's ``scratch`` (:func:`batch_scratch`): nothing
    allocated per call, and the GIL released (a second thread may run it)."""
    _pairs_batch(X, pre, log_table, dims, w, b, mul, shift, scratch, out)


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
