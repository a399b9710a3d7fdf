"""Integer primitives shared by the Python reference, the Numba kernel and the C header.

Everything here is exact integer arithmetic on numpy ``int64`` arrays; the same operations are
written out in C (:mod:`dogi_ml.export.c_header`) and in Numba (:mod:`dogi_ml.export.numba_kernel`), so the
three agree bit for bit. The rules:

* ``rshift_round(x, s)``: ``x / 2**s`` rounded half away from zero, computed on the magnitude
  (``(|x| + 2**(s-1)) >> s``, sign restored), so no right shift of a negative number is needed.
* ``requantize(acc, m, s) = rshift_round(acc * m, s)``: a real multiplier ``M ~ m / 2**s``
  with ``m`` in ``[2**30, 2**31]`` (gemmlowp/TFLite style); ``acc`` is an int32 accumulator,
  so the int64 product cannot overflow.
* ``log2_q8(u)`` for ``1 <= u < 2**64``: ``log2(u)`` in Q8 fixed point: the integer part is
  the index of the highest set bit, the fraction ``T[i]`` from a 257-entry table of
  ``round(256 * log2(1 + i/256))``, indexed by the 9 bits below the highest rounded to 8
  (``i = (m9 + 1) >> 1``; error below 0.006, 1.5 Q8 units). Values fit 15 bits.
* ``sigmoid_q15(a)`` for a Q12 input: a 257-entry table of ``round(32768 * sigmoid(x))`` on
  ``x in [-8, 8]`` (steps of 1/16), linearly interpolated; ``tanh_q15(a) = 2 sigmoid(2a) - 1``.
"""

from __future__ import annotations

import math

import numpy as np

LOG2_FRAC = 8  # Q8 logarithms
LOG2_TABLE_BITS = 8  # 256 table steps per octave
SIG_IN_FRAC = 12  # sigmoid/tanh inputs in Q12
SIG_OUT_FRAC = 15  # ... outputs in Q15
SIG_RANGE = 8  # table covers [-8, 8]
MAX_SHIFT = 62
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
#: the largest |sign(v) log2_q8(1 + |v|)| over all int64 v (1 + |v| <= 2**63 + 1: 63 * 256)
LOG2_Q8_MAX = 63 << LOG2_FRAC
#: a raw value used by the tests' extreme rows (beyond any calibration range)
RAW_LIMIT = 1 << 62


def log2_table() -> np.ndarray:
    """``round(2**8 * log2(1 + i/256))`` for i = 0..256 (int64)."""
    n = 1 << LOG2_TABLE_BITS
    return np.array([round((1 << LOG2_FRAC) * math.log2(1.0 + i / n)) for i in range(n + 1)], np.int64)


def sigmoid_table() -> np.ndarray:
    """``round(2**15 * sigmoid(-8 + i/16))`` for i = 0..256 (int64)."""
    return np.array(
        [round((1 << SIG_OUT_FRAC) / (1.0 + math.exp(-(-SIG_RANGE + i / 16.0)))) for i in range(257)], np.int64
    )


LOG2_TABLE = log2_table()
SIGMOID_TABLE = sigmoid_table()


def quantize_multiplier(real: float, max_shift: int = MAX_SHIFT) -> tuple[int, int]:
    """``(m, s)`` with ``m / 2**s ~ real``, ``m`` in ``[2**30, 2**31]`` where the shift allows."""
    if not (real > 0 and math.isfinite(real)):
        raise ValueError(f"requantisation multiplier must be positive and finite, got {real!r}")
    e = math.floor(math.log2(real))
    s = 30 - e
    if s < 0:
        raise ValueError(f"requantisation multiplier {real:g} is too large (>= 2**30)")
    s = min(s, max_shift)
    m = int(round(real * 2.0**s))
    if m == 0:
        raise ValueError(f"requantisation multiplier {real:g} underflows a shift of {max_shift}")
    return m, s


def rshift_round(x: np.ndarray, s) -> np.ndarray:
    """``x / 2**s`` rounded half away from zero (int64 in, int64 out; ``s`` scalar or array)."""
    x = np.asarray(x, np.int64)
    s = np.asarray(s, np.int64)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    mag = (np.abs(x) + half) >> s
    return np.where(x < 0, -mag, mag)


def requantize(acc: np.ndarray, m, s) -> np.ndarray:
    """``rshift_round(acc * m, s)``; ``acc`` must be within int32 (checked by the quantiser)."""
    return rshift_round(np.asarray(acc, np.int64) * np.asarray(m, np.int64), s)


def log2_q8(u: np.ndarray) -> np.ndarray:
    """``log2(u)`` in Q8 for integers ``1 <= u < 2**64`` (uint64 or non-negative int64)."""
    u = np.asarray(u)
    if u.size and (u.min() < 1):
        raise ValueError("log2_q8 needs u >= 1")
    u = u.astype(np.uint64)
    n = highest_bit(u)
    # the 9 bits below the leading one (u << (63 - n) puts the leading one at bit 63)
    m9 = (np.left_shift(u, (63 - n).astype(np.uint64)) >> np.uint64(54)).astype(np.int64) - 512
    idx = (m9 + 1) >> 1
    return (n << LOG2_FRAC) + LOG2_TABLE[idx]


def highest_bit(u: np.ndarray) -> np.ndarray:
    """``floor(log2(u))`` (int64) of ``uint64`` values ``u >= 1``."""
    t = np.array(u, np.uint64, copy=True)
    n = np.zeros(t.shape, np.int64)
    for sh in (32, 16, 8, 4, 2, 1):
        big = t >= (np.uint64(1) << np.uint64(sh))
        t = np.where(big, t >> np.uint64(sh), t)
        n += np.where(big, sh, 0)
    return n


def signed_log2_q8(v: np.ndarray) -> np.ndarray:
    """``sign(v) * log2_q8(1 + |v|)`` for any int64 ``v`` (``|v| + 1`` taken in uint64)."""
    v = np.asarray(v, np.int64)
    mag = np.where(v < 0, np.uint64(0) - v.astype(np.uint64), v.astype(np.uint64))
    lg = log2_q8(mag + np.uint64(1))
    return np.where(v < 0, -lg, lg)


def sigmoid_q15(a: np.ndarray) -> np.ndarray:
    """Sigmoid of a Q12 value, in Q15 (table + linear interpolation)."""
    a = np.clip(np.asarray(a, np.int64), -(SIG_RANGE << SIG_IN_FRAC), (SIG_RANGE << SIG_IN_FRAC) - 1)
    u = a + (SIG_RANGE << SIG_IN_FRAC)  # [0, 65535]
    idx = u >> 8
    rem = u & 255
    lo = SIGMOID_TABLE[idx]
    return lo + (((SIGMOID_TABLE[idx + 1] - lo) * rem + 128) >> 8)


def tanh_q15(a: np.ndarray) -> np.ndarray:
    """tanh of a Q12 value, in Q15: ``2 * sigmoid(2a) - 1``."""
    return 2 * sigmoid_q15(2 * np.asarray(a, np.int64)) - (1 << SIG_OUT_FRAC)
