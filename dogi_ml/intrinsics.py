"""CPU hints for the Numba kernels: a leaf module (numba and llvmlite only), so every layer's
kernels can use it (the simulator's loop, the feature pass)."""

from __future__ import annotations

import numba as nb
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to fetch ``arr[idx]`` into cache (LLVM ``llvm.prefetch``; no effect on
    results). The loops prefetch their per-LBA entries a few writes ahead: their random
    accesses, not arithmetic, bound their speed."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(arr)(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # rw=1 (we write these entries), locality=3 (keep in all cache levels), data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@nb.njit(cache=True, inline="always")
def prefetch_span(arr, start, count):
    """:func:`prefetch` of elements ``start .. start + count - 1`` of C-contiguous ``arr`` (flat
    indices, e.g. one row of a per-LBA table), one hint per 64-byte cache line."""
    step = max(1, 64 // arr.itemsize)
    for off in range(0, count, step):
        prefetch(arr, start + off)
