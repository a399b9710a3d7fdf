"""MINOS's two numeric kernels, alone so they can be tested and benchmarked without a simulator.

- **Multi-quantile P²** (Jain & Chlamtac, CACM 1985, the equiprobable-cells extension): ``b + 1``
  markers track the ``0, 1/b, ..., 1`` quantiles of a stream in O(b) time and space per
  observation; :func:`p2_query` maps a value to its cell ``0 .. b-1`` (MINOS's ``Query``).
- **Virtual-stream clustering** (MINOS Algorithm 3): ``N`` ordered virtual streams, each an
  ID-Vector of write ``W[v, t]`` and invalidation ``I[v, t]`` counters per time slot, are merged
  greedily into ``K`` clusters by the OP distance of Eqs. (1)-(3)::

      D(x, y) = sum_t alpha^age(t) * |W_x[t] I_y[t] - W_y[t] I_x[t]| / (W_x[t] + W_y[t])

  :func:`cluster_adjacent` merges only neighbouring clusters (the paper's heuristic: two new
  distances per merge, O(N L)); :func:`cluster_full` considers every pair (the ablation "w/o
  AC"); :func:`cluster_avg` is the AvgDist ablation (distance = difference of mean invalidation
  times, as vStream). All return the physical stream of every virtual stream in ``out``;
  physical ids follow the order of each cluster's first virtual stream.

Counters and weights are float32 and the distance loops branch-free, so LLVM vectorises them
(the paper's SIMD clustering). A distance's sum over slots runs in a fixed order written here, not
chosen by the compiler: slot ``t`` adds into partial sum ``t % LANES`` in increasing ``t``, and
the ``LANES`` partial sums are added pairwise (:func:`_lanes_total`). Numba compiles for the host
CPU, so with fast-math reassociation the order was the vector width's (4, 8 or 16 lanes) and
multiply-adds were fused where the CPU has FMA: the distances, hence the clusterings, differed
between CPUs; now they are the same bits on every x86-64 target. Cluster sums go to spare rows
``N .. 2N-1`` of the counter arrays and the partial sums live on the stack, so clustering
allocates nothing and can run inside the simulator's loop.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# -- multi-quantile P² -------------------------------------------------------------------------


def p2_new(cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Markers for ``cells`` equiprobable cells: (heights, 1-based positions, count).

    The desired position of marker ``i`` after ``c`` observations is ``1 + (c-1) i / cells``
    (computed, not stored); ``count`` is a one-element int64 array."""
    if isinstance(cells, bool) or int(cells) < 1:
        raise ValueError(f"P² needs at least 1 cell, got {cells}")
    m = int(cells) + 1
    return np.zeros(m, np.float64), np.arange(1, m + 1, dtype=np.float64), np.zeros(1, np.int64)


@nb.njit(cache=True, inline="always", error_model="numpy")
def _p2_parabolic(q, n, i, d):
    return q[i] + d / (n[i + 1] - n[i - 1]) * (
        (n[i] - n[i - 1] + d) * (q[i + 1] - q[i]) / (n[i + 1] - n[i])
        + (n[i + 1] - n[i] - d) * (q[i] - q[i - 1]) / (n[i] - n[i - 1])
    )


@nb.njit(cache=True, error_model="numpy")
def p2_update(q, n, count, x):
    """Add observation ``x`` to the markers (``q`` heights, ``n`` positions)."""
    m = q.shape[0]
    cells = m - 1
    c = count[0]
    if c < m:
        # warm-up: the first m observations, kept sorted (insertion), become the markers
        j = c
        while j > 0 and q[j - 1] > x:
            q[j] = q[j - 1]
            j -= 1
        q[j] = x
        count[0] = c + 1
        return
    c += 1
    count[0] = c
    # the cell k of x (q[k] <= x < q[k+1]) and the extremes, without data-dependent branches:
    # the comparisons are unpredictable, and counting them gives the same k as a search
    k = 0
    for i in range(1, m - 1):
        k += x >= q[i]
    q[0] = min(q[0], x)
    q[m - 1] = max(q[m - 1], x)
    for i in range(1, m):
        n[i] += 1.0 if i > k else 0.0
    scale = (c - 1.0) / cells
    for i in range(1, m - 1):
        d = 1.0 + scale * i - n[i]
        if (d >= 1.0 and n[i + 1] - n[i] > 1.0) or (d <= -1.0 and n[i - 1] - n[i] < -1.0):
            step = 1.0 if d > 0 else -1.0
            qp = _p2_parabolic(q, n, i, step)
            if q[i - 1] < qp < q[i + 1]:
                q[i] = qp
            else:
                j = i + 1 if step > 0 else i - 1
                q[i] = q[i] + step * (q[j] - q[i]) / (n[j] - n[i])
            n[i] += step


@nb.njit(cache=True, inline="always")
def p2_query(q, count, x):
    """Cell of ``x``: the number of inner quantile markers strictly below it (0 .. cells-1).

    Before the markers exist (fewer observations than markers) the cell is ``x``'s rank among
    the observations so far, scaled to the cells."""
    m = q.shape[0]
    c = count[0]
    if c >= m:
        cell = 0
        for i in range(1, m - 1):
            cell += q[i] < x  # branch-free: the comparisons are unpredictable
        return cell
    if c == 0:
        return 0
    below = 0
    for i in range(c):
        if q[i] < x:
            below += 1
    return min(m - 2, (below * (m - 1)) // c)


@nb.njit(cache=True)
def p2_quantiles(q, count):
    """The inner markers' heights (the ``1/b .. (b-1)/b`` quantiles); NaN before warm-up ends."""
    m = q.shape[0]
    out = np.empty(m - 2, np.float64)
    for i in range(1, m - 1):
        out[i - 1] = q[i] if count[0] >= m else np.nan
    return out


# -- decay weights ---------------------------------------------------------------------------


def decay_table(ring_len: int) -> np.ndarray:
    """``alpha**-s`` for ring positions ``s``, alpha = 1 - 1/L (at most e ~ 2.72, no overflow)."""
    alpha = 1.0 - 1.0 / ring_len
    return (alpha ** -np.arange(ring_len, dtype=np.float64)).astype(np.float32)


def id_vectors(rows: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed ID-Vector counters (write, invalidation): float32 ``[rows, slots + pad]``.

    Only columns ``0 .. slots-1`` are used (the kernels take the ring length from the weights).
    The padding makes every row start 64 bytes further modulo 4 KiB: with rows a multiple of
    4 KiB long, a merge's stores into the sum row and its loads from the member rows fell on the
    same 4 KiB offsets (4K aliasing) and the merge pass ran 1.6x slower at 8192 slots."""
    if rows < 1 or slots < 1:
        raise ValueError(f"ID-Vectors need >= 1 row and slot, got {rows} x {slots}")
    width = -(-slots // 1024) * 1024 + 16
    both = np.zeros((2, rows, width), np.float32)
    return both[0], both[1]


@nb.njit(cache=True)
def slot_weights(inv_table, newest_pos, out):
    """``out[s] = alpha**age(s)``: age 0 at ring position ``newest_pos``, growing backwards.

    No fast math: a float to an integer power is Numba's repeated squaring, the same multiplies
    on every CPU (fast math would allow reassociating them and approximate functions)."""
    L = inv_table.shape[0]
    alpha = 1.0 - 1.0 / L
    a_new = np.float32(alpha**newest_pos)
    a_old = np.float32(alpha ** (newest_pos + L))
    for s in range(newest_pos + 1):
        out[s] = a_new * inv_table[s]
    for s in range(newest_pos + 1, L):
        out[s] = a_old * inv_table[s]


# -- OP distance and clustering ----------------------------------------------------------------

# Fast math without "reassoc", "contract", "arcp" and "afn", so every CPU computes the same bits:
# with "reassoc" LLVM summed the slots in as many partial sums as the target's vector width and
# with "contract" it fused multiply-adds where the CPU has FMA (the distances differed between
# SSE, AVX2 and AVX-512 builds); "arcp" would let a reciprocal estimate replace the division.
# The flags kept only assume finite, non-NaN values and ignore the sign of zero, which no sum
# of these non-negative terms can show.
_SAME_BITS_FM = {"nnan", "ninf", "nsz"}

#: Partial sums of each OP distance (slot ``t`` into ``t % LANES``). Without reassociation LLVM
#: cannot split one running sum into vector lanes itself; independent partial sums it can, and
#: 16 fill one AVX-512 register, two AVX2 or four SSE ones, whatever the CPU (8 were measured
#: not to vectorise: LLVM unrolled their loop before its vectoriser saw it).
LANES = 16  # _lanes_total is written out for 16


@intrinsic
def _stack_f32(typingctx, size):
    """A pointer to ``size`` (a compile-time constant) float32 in the calling kernel's stack frame.

    The partial sums live there, not in a Numba array: a heap array may alias the rows as far as
    LLVM knows, so it kept the sums in memory and every block waited on the last block's store
    (1.6x slower); a stack slot of known size it keeps in vector registers. An intrinsic expands
    where it is called, so the memory belongs to that kernel's frame: use it there, never return
    it. (A raw pointer, not ``nb.carray``: the simulator's loops compile without NRT, and there
    Numba refuses a function that returns an array it was not given, as ``carray``'s does.)"""
    if not isinstance(size, types.IntegerLiteral):
        return None

    def codegen(context, builder, sig, args):
        return cgutils.alloca_once(builder, context.get_value_type(types.float32), size=size.literal_value)

    return types.CPointer(types.float32)(size), codegen


@nb.njit(cache=True, inline="always")
def _zero(acc):
    for j in range(LANES):
        acc[j] = np.float32(0.0)


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always")
def _lanes_total(acc):
    """The partial sums added pairwise: lane ``j + h`` into lane ``j`` for ``h`` = 8, 4, 2, 1
    (written out: loops of constant length LLVM unrolls, where a halving ``h`` left a loop)."""
    for j in range(8):
        acc[j] += acc[j + 8]
    for j in range(4):
        acc[j] += acc[j + 4]
    for j in range(2):
        acc[j] += acc[j + 2]
    return acc[0] + acc[1]


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always")
def _term(wx, ix, wy, iy, w):
    # an empty slot has a zero numerator: a floor of 1 makes 0/0 a plain 0
    return w * abs(wx * iy - wy * ix) / max(wx + wy, np.float32(1.0))


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always")
def _pair_block(acc, wx, ix, wy, iy, wt, t0, count):
    """Slots ``t0 .. t0+count-1`` of one pair into partial sums ``0 .. count-1``."""
    for j in range(count):
        t = t0 + j
        acc[j] += _term(wx[t], ix[t], wy[t], iy[t], wt[t])


@nb.njit(cache=True, fastmath=_SAME_BITS_FM)
def op_distance(W, I, x, y, wt):
    """Eq. (3): decayed sum over slots of Eq. (2) between rows ``x`` and ``y``."""
    acc = _stack_f32(LANES)
    _zero(acc)
    wx, ix, wy, iy = W[x], I[x], W[y], I[y]
    L = wt.shape[0]
    blocks = L // LANES
    for blk in range(blocks):
        _pair_block(acc, wx, ix, wy, iy, wt, blk * LANES, LANES)
    _pair_block(acc, wx, ix, wy, iy, wt, blocks * LANES, L - blocks * LANES)
    return _lanes_total(acc)


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always")
def _three_block(d0, d1, d2, w0, i0, w1, i1, w2, i2, w3, i3, wt, t0, count):
    for j in range(count):
        t = t0 + j
        d0[j] += _term(w0[t], i0[t], w1[t], i1[t], wt[t])
        d1[j] += _term(w1[t], i1[t], w2[t], i2[t], wt[t])
        d2[j] += _term(w2[t], i2[t], w3[t], i3[t], wt[t])


@nb.njit(cache=True, fastmath=_SAME_BITS_FM)
def _three_adjacent(W, I, v, wt, dist):
    """``dist[v + j] = D(v + j, v + j + 1)`` for ``j < 3`` in one pass over the four rows: each
    row is loaded once for both pairs it belongs to (15 pairs of N = 16 cost 5 passes reading
    45 streams instead of 15 reading 75; the kernel is load- and L2-bound at 8192 slots)."""
    w0, i0, w1, i1 = W[v], I[v], W[v + 1], I[v + 1]
    w2, i2, w3, i3 = W[v + 2], I[v + 2], W[v + 3], I[v + 3]
    d0 = _stack_f32(LANES)
    d1 = _stack_f32(LANES)
    d2 = _stack_f32(LANES)
    _zero(d0)
    _zero(d1)
    _zero(d2)
    L = wt.shape[0]
    blocks = L // LANES
    for blk in range(blocks):
        _three_block(d0, d1, d2, w0, i0, w1, i1, w2, i2, w3, i3, wt, blk * LANES, LANES)
    _three_block(d0, d1, d2, w0, i0, w1, i1, w2, i2, w3, i3, wt, blocks * LANES, L - blocks * LANES)
    dist[v] = _lanes_total(d0)
    dist[v + 1] = _lanes_total(d1)
    dist[v + 2] = _lanes_total(d2)


@nb.njit(cache=True)
def adjacent_distances(W, I, n, wt, dist):
    """``dist[v] = D(v, v+1)`` for ``v < n-1``: three pairs per full-length pass, the rest one
    per pass. (A pass over slot blocks, reusing the shared row from L1, was measured slower: the
    loop bound that is not a compile-time 0 turned on Numba's negative-index wraparound and
    vectorisation off. Two pairs per pass gave about the same as three, four or more less.)"""
    v = 0
    while v + 3 < n:
        _three_adjacent(W, I, v, wt, dist)
        v += 3
    while v + 1 < n:
        dist[v] = op_distance(W, I, v, v + 1, wt)
        v += 1


@nb.njit(cache=True, fastmath=_SAME_BITS_FM, inline="always")
def _two_block(dl, dr, wl, il, wm, im, wr, ir, wt, t0, count):
    for j in range(count):
        t = t0 + j
        dl[j] += _term(wl[t], il[t], wm[t], im[t], wt[t])
        dr[j] += _term(wm[t], im[t], wr[t], ir[t], wt[t])


@nb.njit(cache=True, fastmath=_SAME_BITS_FM)
def _merge_and_measure(W, I, a, b, dst, left, right, wt):
    """Row ``dst`` = rows ``a + b``; returns the OP distances of the sum to rows ``left`` and
    ``right`` (-1: none), both in one pass over the slots. The sums are written in a pass of
    their own. Fused into the distances' loop (as before the partial sums), the loop loads rows
    and stores into one, so LLVM checks the rows for overlap before every vectorised block of
    ``LANES`` slots: 5.2-5.7 us per merge with both neighbours at 8192 slots against 4.4 this
    way; chunks of 128-512 slots (their sums, then their distances from L1) were no faster
    (4.7-4.8 against 4.6 us in one process)."""
    wa, ia, wb, ib, wd, idd = W[a], I[a], W[b], I[b], W[dst], I[dst]
    L = wt.shape[0]
    for t in range(L):
        wd[t] = wa[t] + wb[t]
        idd[t] = ia[t] + ib[t]
    if left < 0 or right < 0:
        dl = op_distance(W, I, left, dst, wt) if left >= 0 else np.float32(0.0)
        dr = op_distance(W, I, dst, right, wt) if right >= 0 else np.float32(0.0)
        return dl, dr
    sl = _stack_f32(LANES)
    sr = _stack_f32(LANES)
    _zero(sl)
    _zero(sr)
    wl, il, wr, ir = W[left], I[left], W[right], I[right]
    blocks = L // LANES
    for blk in range(blocks):
        _two_block(sl, sr, wl, il, wd, idd, wr, ir, wt, blk * LANES, LANES)
    _two_block(sl, sr, wl, il, wd, idd, wr, ir, wt, blocks * LANES, L - blocks * LANES)
    return _lanes_total(sl), _lanes_total(sr)


@nb.njit(cache=True)
def _number_clusters(label, n, out):
    """Physical ids in order of each cluster's first virtual stream (Algorithm 3, lines 6-10)."""
    nxt = 0
    for v in range(n):
        out[v] = -1
    for v in range(n):
        if out[v] < 0:
            for u in range(v, n):
                if label[u] == label[v]:
                    out[u] = nxt
            nxt += 1
    return nxt


@nb.njit(cache=True)
def _free_spare(row, nxt, n, ra, rb):
    """The lowest spare row (``n .. 2n-1``) that no cluster head holds and that is neither merge
    source ``ra`` nor ``rb`` (one always exists: at most ``n - 1`` clusters hold spare rows)."""
    for s in range(n, 2 * n):
        if s == ra or s == rb:
            continue
        used = False
        h = 0
        while h >= 0:
            if row[h] == s:
                used = True
                break
            h = nxt[h]
        if not used:
            return s
    return -1


@nb.njit(cache=True)
def cluster_adjacent(W, I, n, k, wt, out, row, nxt, prv, dist):
    """Algorithm 3: merge the closest *adjacent* clusters of ``n`` virtual streams until ``k``.

    ``W``/``I`` have ``2n`` rows: ``0 .. n-1`` the ID-Vectors (read only), ``n .. 2n-1`` scratch
    for cluster sums. ``row``/``nxt``/``prv`` (int64[n]) and ``dist`` (float32[n]) are scratch;
    ``out`` (int64[n]) receives the physical stream of each virtual stream. Ties: lowest index.
    The last merge only relinks (N - K - 1 merge passes: its sum and distances are never read)."""
    for v in range(n):
        row[v] = v
        nxt[v] = v + 1 if v + 1 < n else -1
        prv[v] = v - 1
    adjacent_distances(W, I, n, wt, dist)
    dist[n - 1] = np.inf
    clusters = n
    while clusters > k:
        best = -1
        v = 0
        while v >= 0:
            if nxt[v] >= 0 and (best < 0 or dist[v] < dist[best]):
                best = v
            v = nxt[v]
        a = best
        b = nxt[a]
        left = prv[a]
        right = nxt[b]
        if clusters - 1 == k:
            # the last merge: its sum row and two new distances would never be read
            nxt[a] = right
            break
        # the sum goes to a spare row other than its sources: writing it over row[a] in place
        # was measured 1.5x slower (LLVM's runtime alias check sends overlapping rows to the
        # scalar loop); a spare row no cluster holds is reused, so the rows touched stay few
        # (at 8192 slots the live rows alone fill a 1 MiB L2)
        spare = _free_spare(row, nxt, n, row[a], row[b])
        dl, dr = _merge_and_measure(
            W, I, row[a], row[b], spare, row[left] if left >= 0 else -1, row[right] if right >= 0 else -1, wt
        )
        row[a] = spare
        nxt[a] = right
        if right >= 0:
            prv[right] = a
            dist[a] = dr
        else:
            dist[a] = np.inf
        if left >= 0:
            dist[left] = dl
        clusters -= 1
    # label every virtual stream with its cluster's head
    head = 0
    while head >= 0:
        stop = nxt[head] if nxt[head] >= 0 else n
        for v in range(head, stop):
            row[v] = head
        head = nxt[head]
    return _number_clusters(row, n, out)


@nb.njit(cache=True)
def cluster_full(W, I, n, k, wt, out, row, label, dmat):
    """The "w/o AC" ablation: merge the closest pair of *any* two clusters (first-member order
    breaks ties). ``dmat`` is float32[n, n] scratch, ``label`` int64[n]."""
    for v in range(n):
        row[v] = v
        label[v] = v
    for x in range(n):
        for y in range(x + 1, n):
            dmat[x, y] = op_distance(W, I, x, y, wt)
    spare = n
    clusters = n
    while clusters > k:
        ba = -1
        bb = -1
        for x in range(n):
            if label[x] != x:
                continue
            for y in range(x + 1, n):
                if label[y] == y and (ba < 0 or dmat[x, y] < dmat[ba, bb]):
                    ba = x
                    bb = y
        ra = row[ba]
        rb = row[bb]
        for t in range(wt.shape[0]):
            W[spare, t] = W[ra, t] + W[rb, t]
            I[spare, t] = I[ra, t] + I[rb, t]
        row[ba] = spare
        spare += 1
        for v in range(n):
            if label[v] == bb:
                label[v] = ba
        clusters -= 1
        for z in range(n):
            if label[z] == z and z != ba:
                d = op_distance(W, I, row[ba], row[z], wt)
                if z < ba:
                    dmat[z, ba] = d
                else:
                    dmat[ba, z] = d
    return _number_clusters(label, n, out)


@nb.njit(cache=True)
def cluster_avg(life_sum, life_cnt, n, k, out, label, sums, cnts):
    """The AvgDist ablation: adjacent merges by the difference of mean invalidation times
    (``life_sum / life_cnt`` per virtual stream; an empty stream is at distance 0)."""
    for v in range(n):
        label[v] = v
        sums[v] = life_sum[v]
        cnts[v] = life_cnt[v]
    clusters = n
    while clusters > k:
        best = -1
        bestd = 0.0
        prev = -1
        for v in range(n):
            if label[v] != v:
                continue
            if prev >= 0:
                if cnts[prev] > 0 and cnts[v] > 0:
                    d = abs(sums[prev] / cnts[prev] - sums[v] / cnts[v])
                else:
                    d = 0.0
                if best < 0 or d < bestd:
                    best = prev
                    bestd = d
            prev = v
        # merge best with the next head after it
        nb_ = best + 1
        while label[nb_] != nb_:
            nb_ += 1
        sums[best] += sums[nb_]
        cnts[best] += cnts[nb_]
        for v in range(nb_, n):
            if label[v] == nb_:
                label[v] = best
        clusters -= 1
    return _number_clusters(label, n, out)
