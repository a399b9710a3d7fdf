"""A GRU step in Numba, for the schemes that keep a hidden state per LBA (Shiro always,
PHFTL with ``inference: cached``): one step per write from the LBA's cached state instead of the
whole window of its last writes.

The weights come from the torch models (:class:`models.torch_models.GRU`, one layer and a
linear head), transposed so that the step's accumulations vectorise (:func:`torch_gru_weights`).
States kept for a whole device are stored as int16 in Q15 (:data:`STATE_SCALE`): a GRU's state
is a convex mix of tanh outputs and its previous value, so it stays in [-1, 1], and 2 bytes per
unit keep a paper-scale device's states at 2.1 GB (32 units x 33.5M LBAs) instead of 4.3.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from dogi_ml.intrinsics import prefetch, prefetch_span

__all__ = [
    "STATE_SCALE",
    "fast_tanh",
    "gru_cached_classes",
    "gru_head_class",
    "gru_padding_states",
    "gru_step",
    "torch_gru_weights",
]

# tanh as the rational function of Eigen's ``ptanh_float`` (odd degree-13 numerator, even
# degree-6 denominator, input clamped to +-7.905...; max error 3.3e-7 against float64 tanh, a
# test): plain multiplies and one division, so the gate loops vectorise, where libm's scalar
# ``expf``/``tanhf`` calls (96 a step) took 3/4 of the step
_T_CLAMP = np.float32(7.90531110763549805)
_A1, _A3, _A5, _A7, _A9, _A11, _A13 = (np.float32(c) for c in (
    4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
    -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16))  # fmt: skip
_B0, _B2, _B4, _B6 = (np.float32(c) for c in (
    4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06))  # fmt: skip
_HALF = np.float32(0.5)

# fastmath without "contract", "reassoc", "arcp" and "afn": with them LLVM fuses multiply-adds,
# regroups sums and uses reciprocal estimates as the CPU it compiles for allows, and a step's
# state differed in its last bits between AVX-512, AVX2 and SSE machines (docs/performance.md,
# "Numerics"); these flags keep the loops branch-free and vectorised with the same bits everywhere
_SAME_BITS_FM = {"nnan", "ninf", "nsz"}


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always", error_model="numpy")
def fast_tanh(x):
    """float32 tanh by a rational approximation (error < 5e-7); branch-free, vectorisable."""
    x = x if x < _T_CLAMP else _T_CLAMP
    x = x if x > -_T_CLAMP else -_T_CLAMP
    x2 = x * x
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    return x * p / q


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always", error_model="numpy")
def _accumulate(g, w, v):
    """``g += v @ w`` eight rows of ``w`` per pass over ``g``: the gate sums (96 for hidden 32)
    are loaded and stored once per eight inputs instead of once per input, the round trips the
    step waited on (298 -> 213 ns a step in cache). The eight products are summed pairwise."""
    K = v.shape[0]
    G = g.shape[0]
    k = 0
    while k + 8 <= K:
        v0, v1, v2, v3, v4, v5, v6, v7 = v[k], v[k + 1], v[k + 2], v[k + 3], v[k + 4], v[k + 5], v[k + 6], v[k + 7]
        w0, w1, w2, w3, w4, w5, w6, w7 = w[k], w[k + 1], w[k + 2], w[k + 3], w[k + 4], w[k + 5], w[k + 6], w[k + 7]
        for j in range(G):
            g[j] += ((w0[j] * v0 + w1[j] * v1) + (w2[j] * v2 + w3[j] * v3)) + (
                (w4[j] * v4 + w5[j] * v5) + (w6[j] * v6 + w7[j] * v7)
            )
        k += 8
    while k + 2 <= K:
        v0, v1 = v[k], v[k + 1]
        w0, w1 = w[k], w[k + 1]
        for j in range(G):
            g[j] += w0[j] * v0 + w1[j] * v1
        k += 2
    while k < K:
        vk = v[k]
        wk = w[k]
        for j in range(G):
            g[j] += wk[j] * vk
        k += 1


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, error_model="numpy")
def gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh):
    """PyTorch's GRU cell in place on ``h`` (gates r, z, n), with the weights transposed
    (``wih_t [inputs, 3H]``, ``whh_t [H, 3H]``: each input scales one contiguous row, so the
    accumulation vectorises) and sigmoid(v) = (1 + tanh(v/2)) / 2 by :func:`fast_tanh`.
    The sums run in another order than torch's: the last bits differ, the predictions match
    (tests against torch's GRU)."""
    H = h.shape[0]
    G = 3 * H
    for j in range(G):
        gi[j] = bih[j]
        gh[j] = bhh[j]
    _accumulate(gi, wih_t, x)
    _accumulate(gh, whh_t, h)
    for j in range(H):
        r = _HALF + _HALF * fast_tanh(_HALF * (gi[j] + gh[j]))
        z = _HALF + _HALF * fast_tanh(_HALF * (gi[H + j] + gh[H + j]))
        n = fast_tanh(gi[2 * H + j] + r * gh[2 * H + j])
        h[j] = n + z * (h[j] - n)


@nb.njit(cache=True, inline="always")
def gru_head_class(h, wo, bo):
    """The two-output linear head's argmax on state ``h`` (0 on a tie, as torch's argmax)."""
    l0 = bo[0]
    l1 = bo[1]
    for k in range(h.shape[0]):
        l0 += wo[0, k] * h[k]
        l1 += wo[1, k] * h[k]
    return 0 if l0 >= l1 else 1


#: int16 units per 1.0 of a stored state (Q15)
STATE_SCALE = np.float32(32767.0)
_INV_SCALE = np.float32(1.0 / 32767.0)
#: writes ahead whose stored state :func:`gru_cached_classes` hints into cache
STATE_PREFETCH = 8


def torch_gru_weights(net, mean=None, std=None) -> tuple:
    """``(wih_t, whh_t, bih, bhh, wo, bo)`` float32 of a torch ``_GRUNet`` (``net.gru``, one
    layer; ``net.head``), the two GRU matrices transposed, as :func:`gru_step` takes them. With
    the input scaler's ``mean`` and ``std``, standardisation is folded into the input weights
    (``W x_s = (W / std) x - W mean / std``), so the step takes raw (unscaled) rows."""
    g = net.gru

    def a(t):
        return t.detach().cpu().numpy().astype(np.float64)

    wih_t, bih = a(g.weight_ih_l0).T, a(g.bias_ih_l0)
    if mean is not None:
        std = np.asarray(std, np.float64)
        bih = bih - (np.asarray(mean, np.float64) / std) @ wih_t
        wih_t = wih_t / std[:, None]
    out = (wih_t, a(g.weight_hh_l0).T, bih, a(g.bias_hh_l0), a(net.head.weight), a(net.head.bias))
    return tuple(np.ascontiguousarray(w, np.float32) for w in out)


@nb.njit(cache=True, inline="always")
def _all_zero(row):
    for v in row:
        if v != 0.0:
            return False
    return True


@nb.njit(cache=True)
def gru_padding_states(steps, n_inputs, wih_t, whh_t, bih, bhh):
    """``[k]``: the state after ``k`` all-zero input rows from zero (``k = 0 .. steps``), i.e.
    after a window's left padding: a rebuild starts there instead of stepping through it."""
    H = whh_t.shape[0]
    out = np.zeros((steps + 1, H), np.float32)
    h = np.zeros(H, np.float32)
    x = np.zeros(n_inputs, np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    for k in range(1, steps + 1):
        gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh)
        out[k] = h
    return out


@nb.njit(cache=True, nogil=True)
def gru_cached_classes(
    lbas, X, states, stamps, gen, padding, wih_t, whh_t, bih, bhh, wo, bo, out, share_lo=0, share_hi=1, shares=1
):
    """The class (argmax of the head) of each write ``i`` by one GRU step on its row ``X[i, -1]``
    from its LBA's stored state (``states[lba]``, int16 Q15), which it replaces.

    A state whose ``stamps[lba]`` is not the model generation ``gen`` was computed by an earlier
    model (or never): it is rebuilt from zero over the window's previous rows ``X[i, :-1]``, so
    that prediction is exactly the window model's. Its ``k`` leading all-zero rows (the padding
    of an LBA with fewer earlier writes) are not stepped through: from zero they always lead to
    ``padding[k]`` (:func:`gru_padding_states`, once per model). Returns the number of rebuilds.

    Only the writes whose LBA's share ``lba % shares`` (``shares`` a power of two) is in
    ``share_lo .. share_hi - 1`` are stepped (default: all), so two threads can take disjoint
    shares of the same windows: each LBA's writes stay in order on one thread, and the states
    and classes are the same as in one call."""
    H = states.shape[1]
    rebuilt = 0
    h = np.empty(H, np.float32)
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    last = X.shape[1] - 1
    n = lbas.shape[0]
    mask = shares - 1
    for i in range(n):
        if i + STATE_PREFETCH < n:
            ahead = lbas[i + STATE_PREFETCH]
            if share_lo <= (ahead & mask) < share_hi:
                prefetch_span(states, ahead * H, H)
                prefetch(stamps, ahead)
        lba = lbas[i]
        if not share_lo <= (lba & mask) < share_hi:
            continue
        row = states[lba]
        if stamps[lba] != gen:
            stamps[lba] = gen
            rebuilt += 1
            pad = 0
            while pad < last and _all_zero(X[i, pad]):
                pad += 1
            h[:] = padding[pad]
            for j in range(pad, last):
                gru_step(h, X[i, j], wih_t, whh_t, bih, bhh, gi, gh)
        else:
            for k in range(H):
                h[k] = row[k] * _INV_SCALE
        gru_step(h, X[i, last], wih_t, whh_t, bih, bhh, gi, gh)
        for k in range(H):
            row[k] = np.int16(round(h[k] * STATE_SCALE))
        out[i] = gru_head_class(h, wo, bo)
    return rebuilt
