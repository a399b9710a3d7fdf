"""Synthetic block workloads, seeded and deterministic.

Every generator returns a :class:`Trace` with exactly ``n_writes`` user-written 4 KiB blocks
(the last write request is shortened if needed) over ``[0, capacity_blocks)``. ``meta`` holds
``generator``, ``capacity_blocks``, ``seed``, the effective parameters (``meta["params"]``, and
``param_<name>`` per scalar) and, for the modelled workloads, the region layout
(``layout_<region>: [first block, blocks]``) and event counters. Time stamps are synthetic and
strictly increasing.

Random draws come from ``numpy.random.Generator(PCG64(seed))``; the stateful models (buffer
pool, file system) run in Numba over pre-drawn random streams, so a seed gives bit-identical
arrays, and a shorter run is a prefix of a longer one with the same seed.

- ``uniform``: uniform random 4 KiB overwrites over a working set.
- ``zipf``: Zipf(theta) over a working set, ranks scrambled over the addresses, as fio's
  ``random_distribution=zipf:theta``.
- ``hotcold``: ``hot_traffic`` of the writes go to ``hot_fraction`` of the space.
- ``ycsb_a`` / ``ycsb_f``: YCSB on an InnoDB-style database at the block level (:func:`ycsb`).
- ``varmail``: a Filebench varmail-like mail server on an ext4-like journaling file system
  (:func:`varmail`).
- ``phase_shift``: Zipf 1.01 and Zipf 0.8 alternating every ``phase_writes`` writes, the hot set
  moving at every phase.

``generate(kind, capacity_blocks=..., n_writes=..., seed=..., **params)`` is the entry point;
it validates the parameters. ``GENERATORS`` maps names to the generator functions.
"""

from __future__ import annotations

import inspect
import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.progress import bar as progress_bar

from .trace import OP_READ, OP_TRIM, OP_WRITE, Trace

REQUEST_INTERVAL_US = 10  # synthetic clock: one request every 10 µs (100 K IOPS)
DB_STATEMENT_US = 50  # YCSB clock: one database statement every 50 µs
BLOCK_BYTES = 4096


class GeneratorParameterError(ValueError):
    """A generator's parameter ``param`` out of its range: ``"<param> <problem>"``, or
    ``"<param>=<value> ..."`` when the problem starts with ``=<value>``. The workload loader names
    the parameter as the user set it (``workload.params.<param>``, ``workload.capacity_blocks``)."""

    def __init__(self, param: str, problem: str):
        self.param = param
        self.problem = problem
        super().__init__(self.named(param))

    def named(self, key: str) -> str:
        """The message with ``key`` (the setting as the user wrote it) for the argument's name."""
        return f"{key}{'' if self.problem.startswith('=') else ' '}{self.problem}"


# -- Zipf ---------------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _alias_tables(weights):
    """Vose's alias method: O(n) tables for O(1) sampling of a discrete distribution."""
    n = weights.shape[0]
    scaled = weights * (n / weights.sum())
    prob = np.ones(n, np.float64)
    alias = np.arange(n).astype(np.int32)
    small = np.empty(n, np.int32)
    large = np.empty(n, np.int32)
    ns = 0
    nl = 0
    for i in range(n):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        g = large[nl]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    # the leftovers keep probability 1 (their deficit is rounding error)
    return prob, alias


@nb.njit(cache=True)
def _alias_draw(u, prob, alias, out):
    n = prob.shape[0]
    for k in range(u.shape[0]):
        x = u[k] * n
        i = int(x)
        if i >= n:
            i = n - 1
        out[k] = i if (x - i) < prob[i] else alias[i]


@nb.njit(cache=True)
def _scramble_one(x, n, sp):
    """A seeded bijection of [0, n): add / xorshift / odd-multiply rounds modulo the smallest
    power of two >= n, cycle-walked back into [0, n) (under 2 steps on average)."""
    if n <= 1:
        return x
    mask = sp[0]
    sh = sp[1]
    y = np.uint64(x)
    while True:
        for r in range(3):
            y = (y + sp[2 + r]) & mask
            y ^= y >> sh
            y = (y * sp[5 + r]) & mask
            y ^= y >> sh
        if y < np.uint64(n):
            return np.int64(y)


@nb.njit(cache=True)
def _scramble_array(x, n, sp, out):
    for i in range(x.shape[0]):
        out[i] = _scramble_one(x[i], n, sp)


def _scramble_params(n: int, rng: np.random.Generator) -> np.ndarray:
    bits = max(1, (int(n) - 1).bit_length())
    mask = (1 << bits) - 1
    keys = rng.integers(0, 1 << 62, 6, dtype=np.int64).astype(np.uint64) & np.uint64(mask)
    keys[3:] |= np.uint64(1)  # odd multipliers are bijective modulo 2**bits
    return np.concatenate([np.array([mask, (bits + 1) // 2], np.uint64), keys])


@nb.njit(cache=True)
def _zh_helper1(x):  # log1p(x) / x, stable near 0
    if abs(x) > 1e-8:
        return math.log1p(x) / x
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))


@nb.njit(cache=True)
def _zh_helper2(x):  # expm1(x) / x, stable near 0
    if abs(x) > 1e-8:
        return math.expm1(x) / x
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))


@nb.njit(cache=True)
def _zh(x, s):
    return math.exp(-s * math.log(x))


@nb.njit(cache=True)
def _zh_integral(x, s):
    log_x = math.log(x)
    return _zh_helper2((1.0 - s) * log_x) * log_x


@nb.njit(cache=True)
def _zh_integral_inverse(x, s):
    t = x * (1.0 - s)
    if t < -1.0:
        t = -1.0
    return math.exp(_zh_helper1(t) * x)


@nb.njit(cache=True)
def _zipf_rejection_fill(rng, n, s, scramble, sp, out):
    """Rejection-inversion sampling of Zipf(s) over 1..n (Hörmann & Derflinger 1996, as in
    Apache Commons Math), written as 0-based ranks, optionally scrambled by ``_scramble_one``."""
    h_x1 = _zh_integral(1.5, s) - 1.0
    h_n = _zh_integral(n + 0.5, s)
    squeeze = 2.0 - _zh_integral_inverse(_zh_integral(2.5, s) - _zh(2.0, s), s)
    for i in range(out.shape[0]):
        k = 1
        if n > 1:
            while True:
                u = h_n + rng.random() * (h_x1 - h_n)
                x = _zh_integral_inverse(u, s)
                k = int(x + 0.5)
                if k < 1:
                    k = 1
                elif k > n:
                    k = n
                if k - x <= squeeze or u >= _zh_integral(k + 0.5, s) - _zh(k, s):
                    break
        out[i] = _scramble_one(k - 1, n, sp) if scramble else k - 1


class ZipfSampler:
    """Zipf(theta) over ``n`` items: P(rank i) ∝ 1 / i**theta (i = 1..n), any theta >= 0 (0: uniform).

    Like fio's ``random_distribution=zipf:theta``, ranks are scrambled over ``[0, n)`` so hot
    items are spread over the address space. Two exact methods, each with its own stream:

    - ``method="alias"`` (default): Walker/Vose alias tables, one uniform draw and one lookup per
      sample; ranks scrambled by a seeded permutation (``perm[rank]``). ~20 bytes per item and an
      O(n) build (a few seconds at 20 M items).
    - ``method="rejection"``: rejection-inversion (Hörmann & Derflinger), no table: O(1) memory
      and no build, ~1.1 uniform draws per sample; ranks scrambled by a seeded bijective hash
      (fio also hashes). For very large ``n`` (YCSB's record keys at paper scale).

    ``sample`` can be called repeatedly; the stream does not depend on how it is split into
    calls (the alias method draws in chunks of ``CHUNK``, bounding temporaries).
    """

    CHUNK = 1 << 22

    def __init__(self, n: int, theta: float, seed: int = 0, scramble: bool = True, method: str = "alias"):
        n = int(n)
        if n < 1:
            raise ValueError(f"Zipf needs at least one item, got n={n}")
        theta = float(theta)
        if not (theta >= 0 and math.isfinite(theta)):
            # theta 0 is the uniform distribution (ADAPT's Fig. 11 sweeps alpha from 0)
            raise GeneratorParameterError("theta", f"must be >= 0 (and finite; 0 = uniform), got {theta}")
        if method not in ("alias", "rejection"):
            raise ValueError(f"Zipf method must be 'alias' or 'rejection', got {method!r}")
        self.n = n
        self.theta = theta
        self.method = method
        self.scramble = bool(scramble)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.perm = None
        if method == "alias":
            weights = np.arange(1, self.n + 1, dtype=np.float64) ** -self.theta
            self.prob, self.alias = _alias_tables(weights)
            del weights
            self.perm = self.rng.permutation(self.n).astype(np.int64) if scramble else None
        else:
            self._sp = _scramble_params(n, self.rng)

    def probabilities(self) -> np.ndarray:
        """Exact P(rank) for ranks 0..n-1 (0 = most popular)."""
        w = np.arange(1, self.n + 1, dtype=np.float64) ** -self.theta
        return w / w.sum()

    def address_of_rank(self, ranks) -> np.ndarray:
        """Where ranks land in ``[0, n)`` (the identity without scrambling)."""
        ranks = np.ascontiguousarray(ranks, dtype=np.int64)
        if not self.scramble:
            return ranks.copy()
        if self.perm is not None:
            return self.perm[ranks]
        out = np.empty_like(ranks)
        _scramble_array(ranks.ravel(), self.n, self._sp, out.ravel())
        return out

    def _draw(self, k: int, scramble: bool) -> np.ndarray:
        k = int(k)
        if k < 0:
            raise ValueError(f"cannot draw {k} samples")
        out = np.empty(k, np.int64)
        if self.method == "rejection":
            _zipf_rejection_fill(self.rng, self.n, self.theta, scramble and self.scramble, self._sp, out)
            return out
        # a bar only for draws of several chunks (~1 s and up; small draws skip even its set-up);
        # it never touches the values
        bar = progress_bar(k, "zipf draws", "blk", unit_scale=True) if k >= 2 * self.CHUNK else None
        for a in range(0, k, self.CHUNK):
            b = min(k, a + self.CHUNK)
            _alias_draw(self.rng.random(b - a), self.prob, self.alias, out[a:b])
            if scramble and self.perm is not None:
                # per chunk: an in-place take over the whole array buffers a full copy (GBs at paper scale)
                out[a:b] = self.perm[out[a:b]]
            if bar is not None:
                bar.update(b - a)
        if bar is not None:
            bar.close()
        return out

    def sample_ranks(self, k: int) -> np.ndarray:
        """``k`` 0-based ranks (0 = most popular), int64."""
        return self._draw(k, False)

    def sample(self, k: int) -> np.ndarray:
        """``k`` items in ``[0, n)`` (scrambled ranks), int64."""
        return self._draw(k, True)


# -- helpers ------------------------------------------------------------------------------------------
def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _ts(n: int) -> np.ndarray:
    t = np.arange(n, dtype=np.int64)
    t *= REQUEST_INTERVAL_US  # in place: no second n-sized temporary
    return t


def _single_block_trace(lbas: np.ndarray, name: str) -> Trace:
    n = lbas.size
    # constant columns as broadcast views: at paper scale (1B writes) each would be GBs
    return Trace(
        ts_us=_ts(n),
        lba=lbas,
        nblocks=np.broadcast_to(np.int32(1), (n,)),
        op=np.broadcast_to(np.uint8(OP_WRITE), (n,)),
        volume=np.broadcast_to(np.int32(0), (n,)),
        name=name,
    )


def _fraction(name, v, lo_open=True, hi_closed=True, lo=0.0, hi=1.0):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise GeneratorParameterError(name, f"must be a number, got {v!r}")
    v = float(v)
    ok = (v > lo if lo_open else v >= lo) and (v <= hi if hi_closed else v < hi)
    if not ok:
        raise GeneratorParameterError(
            name, f"must be in {'(' if lo_open else '['}{lo:g}, {hi:g}{']' if hi_closed else ')'}, got {v}"
        )
    return v


def _int_at_least(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or int(v) != v:
        raise GeneratorParameterError(name, f"must be an integer >= {lo}, got {v!r}")
    if int(v) < lo:
        raise GeneratorParameterError(name, f"must be >= {lo}, got {v}")
    return int(v)


def _working_set(capacity: int, wss_fraction: float) -> int:
    _fraction("wss_fraction", wss_fraction)
    return max(1, int(capacity * float(wss_fraction)))


def _trim_to_writes(lba, nblocks, op, n_writes, ts=None):
    """Cut the request arrays right after the ``n_writes``-th written block."""
    w = np.where(op == OP_WRITE, nblocks.astype(np.int64), 0)
    cum = np.cumsum(w)
    if cum.size == 0 or cum[-1] < n_writes:
        raise RuntimeError(
            f"generator produced {0 if cum.size == 0 else int(cum[-1])} block writes, fewer than {n_writes}"
        )
    last = int(np.searchsorted(cum, n_writes))  # first request reaching n_writes
    lba, nblocks, op = lba[: last + 1].copy(), nblocks[: last + 1].copy(), op[: last + 1].copy()
    excess = int(cum[last] - n_writes)
    if excess:
        nblocks[-1] -= excess
    if ts is not None:
        return lba, nblocks, op, ts[: last + 1].copy()
    return lba, nblocks, op


def _requests_trace(lba, nblocks, op, n_writes, name, ts=None) -> Trace:
    """A trace cut at exactly ``n_writes`` block writes; ``ts`` (optional) is made strictly
    increasing (a burst of requests at one instant is spread 1 µs apart)."""
    if ts is None:
        lba, nblocks, op = _trim_to_writes(lba, nblocks, op, n_writes)
        ts = _ts(lba.size)
    else:
        lba, nblocks, op, ts = _trim_to_writes(lba, nblocks, op, n_writes, ts)
        idx = np.arange(ts.size, dtype=np.int64)
        ts = np.maximum.accumulate(ts - idx) + idx
    n = lba.size
    return Trace(ts_us=ts, lba=lba, nblocks=nblocks, op=op, volume=np.zeros(n, np.int32), name=name)


# -- simple distributions -------------------------------------------------------------------------------
def uniform(capacity_blocks, n_writes, seed=0, wss_fraction=1.0):
    """Uniform random 4 KiB overwrites over the first ``wss_fraction`` of the space."""
    wss = _working_set(capacity_blocks, wss_fraction)
    return _single_block_trace(_rng(seed).integers(0, wss, n_writes, dtype=np.int64), "uniform")


def zipf(capacity_blocks, n_writes, seed=0, theta=1.0, wss_fraction=1.0, request_blocks=1):
    """fio ``rw=randwrite, random_distribution=zipf:theta``: Zipf(theta) writes of
    ``request_blocks`` aligned blocks over the first ``wss_fraction`` of the space, ranks
    scrambled over the addresses."""
    wss = _working_set(capacity_blocks, wss_fraction)
    request_blocks = _int_at_least("request_blocks", request_blocks, 1)
    if request_blocks > wss:
        raise GeneratorParameterError(
            "request_blocks", f"={request_blocks} is larger than the working set ({wss} blocks)"
        )
    slots = wss // request_blocks
    n_req = -(-n_writes // request_blocks)
    lba = ZipfSampler(slots, theta, seed).sample(n_req)
    if request_blocks == 1:
        return _single_block_trace(lba, "zipf")
    lba *= request_blocks
    nblocks = np.full(n_req, request_blocks, np.int32)
    return _requests_trace(lba, nblocks, np.full(n_req, OP_WRITE, np.uint8), n_writes, "zipf")


def _n_hot(capacity_blocks, hot_fraction):
    return min(capacity_blocks - 1, max(1, int(round(capacity_blocks * float(hot_fraction)))))


def hotcold(capacity_blocks, n_writes, seed=0, hot_traffic=0.8, hot_fraction=0.2):
    """``hot_traffic`` of the writes go uniformly to a hot set of ``hot_fraction`` of the space
    (scattered over the addresses by a seeded permutation: :func:`hotcold_hot_set`), the rest
    uniformly to the cold set."""
    hot_fraction = _fraction("hot_fraction", hot_fraction, hi_closed=False)
    hot_traffic = _fraction("hot_traffic", hot_traffic, lo_open=False)
    if capacity_blocks < 2:
        raise GeneratorParameterError("capacity_blocks", f"={capacity_blocks}: hotcold needs at least 2 blocks")
    rng = _rng(seed)
    nhot = _n_hot(capacity_blocks, hot_fraction)
    perm = rng.permutation(capacity_blocks).astype(np.int64)
    is_hot = rng.random(n_writes) < hot_traffic
    idx = np.where(is_hot, rng.integers(0, nhot, n_writes), rng.integers(nhot, capacity_blocks, n_writes))
    trace = _single_block_trace(perm[idx], "hotcold")
    trace.meta["hot_blocks"] = int(nhot)
    return trace


def hotcold_hot_set(capacity_blocks, seed=0, hot_fraction=0.2) -> np.ndarray:
    """The hot LBAs :func:`hotcold` uses for this capacity, seed and ``hot_fraction``."""
    return _rng(seed).permutation(capacity_blocks).astype(np.int64)[: _n_hot(capacity_blocks, hot_fraction)]


def phase_shift(capacity_blocks, n_writes, seed=0, theta_a=1.01, theta_b=0.8, phase_writes=None, reshuffle=True):
    """Zipf ``theta_a`` and Zipf ``theta_b`` alternating every ``phase_writes`` writes (default
    2 x capacity), starting with ``theta_a``. With ``reshuffle`` every phase scrambles the ranks
    over the addresses anew (a new seeded bijection), so the hot set moves; without it all phases
    share one scramble and only the skew changes. Ranks come from table-free rejection-inversion
    (:class:`ZipfSampler` ``method="rejection"``). ``meta["phase_starts"]`` lists the write index
    of each phase, ``meta["phase_thetas"]`` its exponent."""
    phase = 2 * capacity_blocks if phase_writes is None else _int_at_least("phase_writes", phase_writes, 1)
    for name, theta in (("theta_a", theta_a), ("theta_b", theta_b)):
        _fraction(name, theta, lo_open=False, hi_closed=False, hi=math.inf)  # the sampler's message would say "theta"
    samplers = [
        ZipfSampler(capacity_blocks, theta_a, seed, scramble=False, method="rejection"),
        ZipfSampler(capacity_blocks, theta_b, seed + 1, scramble=False, method="rejection"),
    ]
    prng = _rng(seed + 2)
    shared = None if reshuffle else _scramble_params(capacity_blocks, prng)
    out = np.empty(n_writes, np.int64)
    starts = []
    for k, start in enumerate(range(0, n_writes, phase)):
        ranks = samplers[k % 2].sample_ranks(min(phase, n_writes - start))
        sp = _scramble_params(capacity_blocks, prng) if reshuffle else shared
        _scramble_array(ranks, capacity_blocks, sp, out[start : start + ranks.size])
        starts.append(start)
    trace = _single_block_trace(out, "phase_shift")
    trace.meta["phase_starts"] = starts
    trace.meta["phase_thetas"] = [float(theta_a if k % 2 == 0 else theta_b) for k in range(len(starts))]
    return trace


# -- YCSB on an InnoDB-style database --------------------------------------------------------------------
PAGE_BLOCKS = 4  # 16 KiB InnoDB pages

# scalar state of the buffer-pool kernel (one int64 array, so runs resume across chunks)
(
    _Y_USED,
    _Y_LSN,
    _Y_SLOT,
    _Y_WRITTEN,
    _Y_NDIRTY,
    _Y_PAGE_READS,
    _Y_LRU_FLUSH,
    _Y_CLEAN_FLUSH,
    _Y_SYNC_FLUSH,
    _Y_REDO_WRITES,
    _Y_DW_WRITES,
    _Y_RECORD_READS,
    _Y_UPDATES,
    _Y_OPS,
    _Y_NSTATE,
) = range(15)
# configuration of the kernel
(
    _C_POOL,
    _C_TABLE,
    _C_REDO,
    _C_REDO_BLOCKS,
    _C_RPB,
    _C_DW,
    _C_DW_BATCH,
    _C_DW_SINGLE,
    _C_FLUSH_EVERY,
    _C_FLUSH_BATCH,
    _C_LWM_AGE,
    _C_ASYNC_AGE,
    _C_ASYNC_TARGET,
    _C_MAX_DIRTY,
    _C_NCFG,
) = range(15)


@nb.njit(cache=True)
def _dl_remove(prev, nxt, x):
    p = prev[x]
    q = nxt[x]
    nxt[p] = q
    prev[q] = p


@nb.njit(cache=True)
def _dl_push_front(prev, nxt, head, x):
    q = nxt[head]
    nxt[head] = x
    prev[x] = head
    nxt[x] = q
    prev[q] = x


@nb.njit(cache=True)
def _dl_push_back(prev, nxt, head, x):
    p = prev[head]
    prev[head] = x
    nxt[x] = head
    prev[x] = p
    nxt[p] = x


@nb.njit(cache=True)
def _emit(out_lba, out_nb, out_op, k, lba, nb_, op):
    out_lba[k] = lba
    out_nb[k] = nb_
    out_op[k] = op
    return k + 1


@nb.njit(cache=True)
def _ycsb_flush_oldest(
    limit, until_age, st, cfg, fl_prev, fl_next, oldest, batch, out_lba, out_nb, out_op, out_t, t, k, counter
):
    """Flush dirty pages from the head of the flush list (oldest modification first): at most
    ``limit`` pages, and only while the checkpoint age exceeds ``until_age``. Each doublewrite
    batch goes sequentially to the doublewrite area, then its pages are written in place."""
    head = fl_prev.shape[0] - 1
    lsn = st[_Y_LSN]
    nbatch = 0
    while nbatch < limit:
        p = fl_next[head]
        if p == head or lsn - oldest[p] <= until_age:
            break
        _dl_remove(fl_prev, fl_next, p)
        oldest[p] = -1
        batch[nbatch] = p
        nbatch += 1
    st[_Y_NDIRTY] -= nbatch
    st[counter] += nbatch
    dw_batch = cfg[_C_DW_BATCH]
    b = 0
    while b < nbatch:
        n = nbatch - b
        if dw_batch > 0:
            if n > dw_batch:
                n = dw_batch
            out_t[k] = t
            k = _emit(out_lba, out_nb, out_op, k, cfg[_C_DW], n * PAGE_BLOCKS, OP_WRITE)
            st[_Y_WRITTEN] += n * PAGE_BLOCKS
            st[_Y_DW_WRITES] += n * PAGE_BLOCKS
        for j in range(b, b + n):
            out_t[k] = t
            k = _emit(out_lba, out_nb, out_op, k, cfg[_C_TABLE] + batch[j] * PAGE_BLOCKS, PAGE_BLOCKS, OP_WRITE)
        st[_Y_WRITTEN] += n * PAGE_BLOCKS
        b += n
    return k


@nb.njit(cache=True)
def _ycsb_kernel(
    ops,
    pages,
    start,
    op_base,
    st,
    cfg,
    lru_prev,
    lru_next,
    in_pool,
    fl_prev,
    fl_next,
    oldest,
    batch,
    n_writes,
    out_lba,
    out_nb,
    out_op,
    out_t,
    margin,
):
    """Run statements ``start..`` until the stream ends, ``n_writes`` blocks are written, or the
    output buffer is nearly full. Returns (next statement, requests emitted). ``out_t`` gets
    the global statement index of each request."""
    head = lru_prev.shape[0] - 1  # sentinel of both lists
    pool_pages = cfg[_C_POOL]
    table = cfg[_C_TABLE]
    rpb = cfg[_C_RPB]
    flush_every = cfg[_C_FLUSH_EVERY]
    cap = out_lba.shape[0]
    k = 0
    i = start
    while i < ops.shape[0]:
        if st[_Y_WRITTEN] >= n_writes or k + margin > cap:
            break
        t = op_base + i
        p = pages[i]
        st[_Y_OPS] += 1
        # -- fetch the page: a miss reads it, evicting the LRU page (flushed first if dirty)
        if in_pool[p] == 0:
            out_t[k] = t
            k = _emit(out_lba, out_nb, out_op, k, table + p * PAGE_BLOCKS, PAGE_BLOCKS, OP_READ)
            st[_Y_PAGE_READS] += 1
            if st[_Y_USED] < pool_pages:
                st[_Y_USED] += 1
            else:
                v = lru_prev[head]
                _dl_remove(lru_prev, lru_next, v)
                in_pool[v] = 0
                if oldest[v] >= 0:  # single-page flush: a doublewrite slot, then in place
                    _dl_remove(fl_prev, fl_next, v)
                    oldest[v] = -1
                    st[_Y_NDIRTY] -= 1
                    st[_Y_LRU_FLUSH] += 1
                    if cfg[_C_DW_SINGLE] > 0:
                        slot = cfg[_C_DW_BATCH] + st[_Y_SLOT]
                        st[_Y_SLOT] = (st[_Y_SLOT] + 1) % cfg[_C_DW_SINGLE]
                        out_t[k] = t
                        k = _emit(out_lba, out_nb, out_op, k, cfg[_C_DW] + slot * PAGE_BLOCKS, PAGE_BLOCKS, OP_WRITE)
                        st[_Y_WRITTEN] += PAGE_BLOCKS
                        st[_Y_DW_WRITES] += PAGE_BLOCKS
                    out_t[k] = t
                    k = _emit(out_lba, out_nb, out_op, k, table + v * PAGE_BLOCKS, PAGE_BLOCKS, OP_WRITE)
                    st[_Y_WRITTEN] += PAGE_BLOCKS
            in_pool[p] = 1
        else:
            _dl_remove(lru_prev, lru_next, p)
        _dl_push_front(lru_prev, lru_next, head, p)
        if ops[i] == 0:
            st[_Y_RECORD_READS] += 1
        else:
            # -- update: dirty the page (it joins the flush list at its first modification) and
            # commit: the current redo block is rewritten until full, then the log moves on
            st[_Y_UPDATES] += 1
            lsn = st[_Y_LSN]
            if oldest[p] < 0:
                oldest[p] = lsn
                _dl_push_back(fl_prev, fl_next, head, p)
                st[_Y_NDIRTY] += 1
            out_t[k] = t
            k = _emit(out_lba, out_nb, out_op, k, cfg[_C_REDO] + (lsn // rpb) % cfg[_C_REDO_BLOCKS], 1, OP_WRITE)
            st[_Y_WRITTEN] += 1
            st[_Y_REDO_WRITES] += 1
            st[_Y_LSN] = lsn + 1
            # the log must not overwrite records of pages still dirty: past the async limit,
            # flush the oldest pages until the checkpoint age is back under the target
            q = fl_next[head]
            if q != head and st[_Y_LSN] - oldest[q] > cfg[_C_ASYNC_AGE]:
                k = _ycsb_flush_oldest(
                    batch.shape[0],
                    cfg[_C_ASYNC_TARGET],
                    st,
                    cfg,
                    fl_prev,
                    fl_next,
                    oldest,
                    batch,
                    out_lba,
                    out_nb,
                    out_op,
                    out_t,
                    t,
                    k,
                    _Y_SYNC_FLUSH,
                )
        # -- page cleaner: adaptive flushing of the oldest pages once the checkpoint age passes
        # the low-water mark, or when too much of the pool is dirty
        if flush_every > 0 and (t + 1) % flush_every == 0:
            q = fl_next[head]
            if q != head and (st[_Y_LSN] - oldest[q] > cfg[_C_LWM_AGE] or st[_Y_NDIRTY] > cfg[_C_MAX_DIRTY]):
                k = _ycsb_flush_oldest(
                    cfg[_C_FLUSH_BATCH],
                    -1,
                    st,
                    cfg,
                    fl_prev,
                    fl_next,
                    oldest,
                    batch,
                    out_lba,
                    out_nb,
                    out_op,
                    out_t,
                    t,
                    k,
                    _Y_CLEAN_FLUSH,
                )
        i += 1
    return i, k


def ycsb(
    capacity_blocks,
    n_writes,
    seed=0,
    read_modify_write=False,
    name="ycsb",
    read_fraction=0.5,
    zipf_theta=0.99,
    records_per_page=16,
    pool_fraction=0.1,
    redo_fraction=0.02,
    redo_records_per_block=16,
    doublewrite_pages=128,
    flush_every=64,
    flush_batch=32,
    checkpoint_lwm=0.1,
    max_dirty_fraction=0.9,
):
    """YCSB at the block level of an InnoDB-style database (MySQL, ``innodb_flush_log_at_trx_commit=1``).

    This is a model, not a trace of MySQL; it keeps the mechanisms that shape block lifetimes.

    **Layout** ``[doublewrite | redo log | tablespace]``: a doublewrite area of
    ``doublewrite_pages`` 16 KiB pages (120 batch + 8 single-page slots by default, as InnoDB
    5.7; 0 turns doublewrite off), a circular redo log of ``redo_fraction`` of the capacity, and
    a tablespace of 16 KiB pages (4 blocks, 4-block aligned) filling the rest.

    **Operations** pick records 0..R-1 (``records_per_page`` 1 KiB records a page, R filling the
    tablespace) with YCSB's zipfian constant ``zipf_theta`` = 0.99; popularity ranks are scrambled
    over the keys by a bijective hash (YCSB hashes ranks over a 10**10 key space, so its key
    popularity is somewhat flatter), so hot records are spread over pages. YCSB-A is
    ``read_fraction`` reads and the rest updates; YCSB-F replaces updates by read-modify-writes
    (a read of the record, then its update: two statements on the page). The clock advances
    ``DB_STATEMENT_US`` per statement, so F spends more time per written block than A.

    **Buffer pool** of ``pool_fraction`` of the table's pages, true LRU. Any access to a page not
    in the pool reads it (a 4-block read request); when the pool is full the LRU page is evicted,
    written back first if dirty (a single-page flush: a doublewrite slot, then in place).

    **Updates** dirty the page and commit: the redo record is appended to the current 4 KiB log
    block, which is written at every commit and advances after ``redo_records_per_block``
    commits, wrapping around the log. A dirty page enters the flush list at its first
    modification (its *oldest LSN*).

    **Flushing**: every ``flush_every`` statements the page cleaner flushes up to
    ``flush_batch`` of the oldest dirty pages if the checkpoint age (LSN - oldest dirty LSN)
    is above ``checkpoint_lwm`` of the log capacity (adaptive flushing's low-water mark) or more
    than ``max_dirty_fraction`` of the pool is dirty. When the age passes 7/8 of the log, the
    oldest pages are flushed synchronously until it is back under 3/4 (the log never overwrites
    records of unflushed pages). A flush batch is first written sequentially into the
    doublewrite area (in chunks of the batch area's size), then each page in place. So hot pages
    are written about once per checkpoint window, cold pages when they are evicted.

    **Simplified away**: the B-tree (inner pages, splits, secondary indexes), undo logs and
    purge, the change buffer, InnoDB's midpoint LRU insertion and read-ahead, group commit and
    log padding, the binary log, file-system metadata, concurrency between clients, and the
    YCSB load phase (the simulator's prefill stands for the loaded table).
    """
    read_fraction = _fraction("read_fraction", read_fraction, lo_open=False, hi_closed=False)
    pool_fraction = _fraction("pool_fraction", pool_fraction)
    redo_fraction = _fraction("redo_fraction", redo_fraction, hi_closed=False, hi=0.5)
    checkpoint_lwm = _fraction("checkpoint_lwm", checkpoint_lwm, lo_open=False, hi_closed=False, hi=0.875)
    max_dirty_fraction = _fraction("max_dirty_fraction", max_dirty_fraction)
    zipf_theta = float(zipf_theta)
    if not (zipf_theta > 0 and math.isfinite(zipf_theta)):
        raise GeneratorParameterError("zipf_theta", f"must be > 0, got {zipf_theta}")
    records_per_page = _int_at_least("records_per_page", records_per_page, 1)
    redo_records_per_block = _int_at_least("redo_records_per_block", redo_records_per_block, 1)
    doublewrite_pages = _int_at_least("doublewrite_pages", doublewrite_pages, 0)
    if doublewrite_pages == 1:
        raise GeneratorParameterError(
            "doublewrite_pages", "must be 0 (no doublewrite) or >= 2 (batch area + single-page slots)"
        )
    flush_every = _int_at_least("flush_every", flush_every, 0)
    flush_batch = _int_at_least("flush_batch", flush_batch, 1)

    redo_blocks = max(8, int(capacity_blocks * redo_fraction))
    dw_blocks = doublewrite_pages * PAGE_BLOCKS
    table_blocks = capacity_blocks - redo_blocks - dw_blocks
    n_pages = max(0, table_blocks) // PAGE_BLOCKS
    if n_pages < 16:
        raise GeneratorParameterError(
            "capacity_blocks",
            f"={capacity_blocks} is too small: it leaves {n_pages} table pages after "
            f"the redo log ({redo_blocks} blocks) and the doublewrite area ({dw_blocks} blocks); give "
            f"at least {redo_blocks + dw_blocks + 64} blocks or shrink doublewrite_pages / redo_fraction",
        )
    pool_pages = max(2, int(n_pages * pool_fraction))
    dw_single = 0 if doublewrite_pages == 0 else max(1, min(8, doublewrite_pages // 16))
    dw_batch = doublewrite_pages - dw_single
    dw_base, redo_base, table_base = 0, dw_blocks, dw_blocks + redo_blocks
    log_capacity = redo_blocks * redo_records_per_block  # in commits
    cfg = np.zeros(_C_NCFG, np.int64)
    cfg[_C_POOL], cfg[_C_TABLE], cfg[_C_REDO], cfg[_C_REDO_BLOCKS] = pool_pages, table_base, redo_base, redo_blocks
    cfg[_C_RPB], cfg[_C_DW], cfg[_C_DW_BATCH], cfg[_C_DW_SINGLE] = redo_records_per_block, dw_base, dw_batch, dw_single
    cfg[_C_FLUSH_EVERY], cfg[_C_FLUSH_BATCH] = flush_every, flush_batch
    cfg[_C_LWM_AGE] = int(checkpoint_lwm * log_capacity)
    cfg[_C_ASYNC_AGE] = log_capacity * 7 // 8
    cfg[_C_ASYNC_TARGET] = log_capacity * 3 // 4
    cfg[_C_MAX_DIRTY] = int(max_dirty_fraction * pool_pages)

    st = np.zeros(_Y_NSTATE, np.int64)
    lru_prev = np.full(n_pages + 1, n_pages, np.int64)
    lru_next = np.full(n_pages + 1, n_pages, np.int64)
    fl_prev = np.full(n_pages + 1, n_pages, np.int64)
    fl_next = np.full(n_pages + 1, n_pages, np.int64)
    in_pool = np.zeros(n_pages, np.uint8)
    oldest = np.full(n_pages, -1, np.int64)
    batch = np.empty(pool_pages + 1, np.int64)

    n_records = n_pages * records_per_page
    keys_sampler = ZipfSampler(n_records, zipf_theta, seed, method="rejection")
    op_rng = _rng(seed + 1)
    margin = 16 + 3 * (pool_pages + 1)
    out_cap = max(1 << 20, 4 * margin)
    chunk_ops = 1 << 19
    parts = []
    op_base = 0
    while st[_Y_WRITTEN] < n_writes:
        keys = keys_sampler.sample(chunk_ops)
        is_update = op_rng.random(chunk_ops) >= read_fraction
        if read_modify_write:  # F: a read-modify-write is a read of the record, then its update
            reps = np.where(is_update, 2, 1)
            keys = np.repeat(keys, reps)
            ops = np.repeat(is_update.astype(np.uint8), reps)
            ops[(np.cumsum(reps) - reps)[is_update]] = 0
        else:
            ops = is_update.astype(np.uint8)
        pages = keys // records_per_page
        i = 0
        while i < ops.size and st[_Y_WRITTEN] < n_writes:
            lba = np.empty(out_cap, np.int64)
            nbk = np.empty(out_cap, np.int32)
            op = np.empty(out_cap, np.uint8)
            t = np.empty(out_cap, np.int64)
            i, k = _ycsb_kernel(
                ops,
                pages,
                i,
                op_base,
                st,
                cfg,
                lru_prev,
                lru_next,
                in_pool,
                fl_prev,
                fl_next,
                oldest,
                batch,
                n_writes,
                lba,
                nbk,
                op,
                t,
                margin,
            )
            parts.append((lba[:k].copy(), nbk[:k].copy(), op[:k].copy(), t[:k].copy()))
        op_base += ops.size
    lba, nbk, op, t = (np.concatenate([p[j] for p in parts]) for j in range(4))
    trace = _requests_trace(lba, nbk, op, n_writes, name, ts=t * DB_STATEMENT_US)
    trace.meta.update(
        {
            "layout_doublewrite": [dw_base, dw_blocks],
            "layout_redo": [redo_base, redo_blocks],
            "layout_table": [table_base, n_pages * PAGE_BLOCKS],
            "table_pages": int(n_pages),
            "pool_pages": int(pool_pages),
            "records": int(n_records),
            "read_modify_write": bool(read_modify_write),
            "db_statements": int(st[_Y_OPS]),
            "record_reads": int(st[_Y_RECORD_READS]),
            "updates": int(st[_Y_UPDATES]),
            "page_reads": int(st[_Y_PAGE_READS]),
            "lru_flushes": int(st[_Y_LRU_FLUSH]),
            "cleaner_flushes": int(st[_Y_CLEAN_FLUSH]),
            "sync_flushes": int(st[_Y_SYNC_FLUSH]),
            "redo_block_writes": int(st[_Y_REDO_WRITES]),
            "doublewrite_block_writes": int(st[_Y_DW_WRITES]),
        }
    )
    return trace


def ycsb_a(
    capacity_blocks,
    n_writes,
    seed=0,
    read_fraction=0.5,
    zipf_theta=0.99,
    records_per_page=16,
    pool_fraction=0.1,
    redo_fraction=0.02,
    redo_records_per_block=16,
    doublewrite_pages=128,
    flush_every=64,
    flush_batch=32,
    checkpoint_lwm=0.1,
    max_dirty_fraction=0.9,
):
    """YCSB-A (50% reads, 50% updates, zipfian 0.99) on the InnoDB model of :func:`ycsb`."""
    kw = {k: v for k, v in locals().items() if k not in ("capacity_blocks", "n_writes", "seed")}
    return ycsb(capacity_blocks, n_writes, seed, read_modify_write=False, name="ycsb_a", **kw)


def ycsb_f(
    capacity_blocks,
    n_writes,
    seed=0,
    read_fraction=0.5,
    zipf_theta=0.99,
    records_per_page=16,
    pool_fraction=0.1,
    redo_fraction=0.02,
    redo_records_per_block=16,
    doublewrite_pages=128,
    flush_every=64,
    flush_batch=32,
    checkpoint_lwm=0.1,
    max_dirty_fraction=0.9,
):
    """YCSB-F (50% reads, 50% read-modify-writes, zipfian 0.99) on the InnoDB model of :func:`ycsb`."""
    kw = {k: v for k, v in locals().items() if k not in ("capacity_blocks", "n_writes", "seed")}
    return ycsb(capacity_blocks, n_writes, seed, read_modify_write=True, name="ycsb_f", **kw)


# -- varmail-like mail server on an ext4-like journaling file system -----------------------------------
GROUP_BLOCKS = 32768  # blocks per block group (one block bitmap each)
INODES_PER_GROUP = 8192  # inodes per group (one inode bitmap each)
INODES_PER_BLOCK = 16  # 256-byte inodes
DIRENTS_PER_BLOCK = 128  # directory entries per 4 KiB directory block
MAX_FILE_BLOCKS = 32  # a mail file stops growing at 128 KiB

# scalar state of the file-system kernel
(
    _V_HINT,
    _V_CURSOR,
    _V_JPOS,
    _V_SINCE_CKPT,
    _V_WRITTEN,
    _V_NEXIST,
    _V_NNON,
    _V_NTXN,
    _V_DATA_WRITES,
    _V_JOURNAL_WRITES,
    _V_CKPT_WRITES,
    _V_READ_BLOCKS,
    _V_TRIM_BLOCKS,
    _V_ITER,
    _V_CKPTS,
    _V_FULL,
    _V_NSTATE,
) = range(17)
# configuration
(
    _F_DATA,
    _F_NDATA,
    _F_GDT,
    _F_BBM,
    _F_IBM,
    _F_ITABLE,
    _F_DIR,
    _F_NDIR,
    _F_JOURNAL,
    _F_NJOURNAL,
    _F_CKPT_EVERY,
    _F_APPEND_BYTES,
    _F_NEXT_FIT,
    _F_TRIMS,
    _F_META_END,
    _F_NCFG,
) = range(16)


class _FileSystem(NamedTuple):
    """The file-system model's arrays, one argument to its kernels (they took up to 16
    positional arrays, easy to pass in the wrong order). The per-block helpers (``_bm_*``,
    ``_fs_alloc``, ``_fs_dirty``) still take the arrays they use: handing them the whole tuple
    made the generator about 3x slower."""

    st: np.ndarray  # int64 [_V_NSTATE]: cursors and counters (_V_*)
    cfg: np.ndarray  # int64 [_F_NCFG]: layout and options (_F_*)
    used: np.ndarray  # uint8 per data block: allocated
    cnt1: np.ndarray  # int32 per 64 data blocks: how many are allocated
    cnt2: np.ndarray  # int32 per 4096 data blocks: how many are allocated
    fblocks: np.ndarray  # int32 [file, block]: the file's data blocks (-1: none)
    fsize: np.ndarray  # int64 per file: size in bytes
    txn_flag: np.ndarray  # uint8 per metadata block: dirty in the running transaction
    txn_list: np.ndarray  # int64: the running transaction's dirty blocks (st[_V_NTXN] of them)
    ckpt_flag: np.ndarray  # uint8 per metadata block: journaled, not yet checkpointed
    elist: np.ndarray  # int64: the existing files (st[_V_NEXIST] of them)
    epos: np.ndarray  # int64 per file: its index in elist (-1: absent)
    nlist: np.ndarray  # int64: the absent files (st[_V_NNON] of them)
    npos: np.ndarray  # int64 per file: its index in nlist (-1: existing)


@nb.njit(cache=True)
def _bm_find(used, cnt1, cnt2, n, start):
    """First free block >= start, or -1. ``cnt1``/``cnt2`` count used blocks per 64/4096."""
    i = start
    while i < n:
        if (i & 4095) == 0 and cnt2[i >> 12] == 4096:
            i += 4096
            continue
        if (i & 63) == 0 and cnt1[i >> 6] == 64:
            i += 64
            continue
        if used[i] == 0:
            return i
        i += 1
    return -1


@nb.njit(cache=True)
def _bm_set(used, cnt1, cnt2, d, v):
    if v:
        used[d] = 1
        cnt1[d >> 6] += 1
        cnt2[d >> 12] += 1
    else:
        used[d] = 0
        cnt1[d >> 6] -= 1
        cnt2[d >> 12] -= 1


@nb.njit(cache=True)
def _fs_alloc(goal, st, cfg, used, cnt1, cnt2):
    """One data block: the goal if free (files grow contiguously), else first fit from the
    lowest free block (ext4-like reuse of freed space) or next fit from a roving cursor."""
    n = cfg[_F_NDATA]
    # invariant: every block below st[_V_HINT] is in use
    if 0 <= goal < n and used[goal] == 0:
        d = goal
        if d == st[_V_HINT]:
            st[_V_HINT] = d + 1
    elif cfg[_F_NEXT_FIT]:
        d = _bm_find(used, cnt1, cnt2, n, st[_V_CURSOR])
        if d < 0:
            d = _bm_find(used, cnt1, cnt2, n, 0)
        st[_V_CURSOR] = d + 1  # only the roving search moves the cursor, not contiguous growth
    else:
        d = _bm_find(used, cnt1, cnt2, n, st[_V_HINT])
        if d >= 0:
            st[_V_HINT] = d + 1
    if d < 0:
        return -1
    _bm_set(used, cnt1, cnt2, d, True)
    return d


@nb.njit(cache=True)
def _fs_dirty(b, txn_flag, txn_list, st):
    if txn_flag[b] == 0:
        txn_flag[b] = 1
        txn_list[st[_V_NTXN]] = b
        st[_V_NTXN] += 1


@nb.njit(cache=True)
def _fs_runs(blocks, a, b, base, op, out_lba, out_nb, out_op, k):
    """Emit blocks[a:b] (data-area indices) as requests of contiguous runs."""
    j = a
    while j < b:
        s = blocks[j]
        n = 1
        while j + n < b and blocks[j + n] == s + n:
            n += 1
        k = _emit(out_lba, out_nb, out_op, k, base + s, n, op)
        j += n
    return k


@nb.njit(cache=True)
def _fs_file_meta(f, fs, dirent):
    cfg, txn_flag, txn_list, st = fs.cfg, fs.txn_flag, fs.txn_list, fs.st
    _fs_dirty(cfg[_F_ITABLE] + f // INODES_PER_BLOCK, txn_flag, txn_list, st)
    if dirent:
        _fs_dirty(cfg[_F_IBM] + f // INODES_PER_GROUP, txn_flag, txn_list, st)
        _fs_dirty(cfg[_F_DIR] + (f * 2654435761) % cfg[_F_NDIR], txn_flag, txn_list, st)
        _fs_dirty(cfg[_F_GDT], txn_flag, txn_list, st)


@nb.njit(cache=True)
def _fs_append(f, nbytes, fs, emit, out_lba, out_nb, out_op, k):
    """Append ``nbytes`` to file ``f``: allocate the new blocks and (if ``emit``) write every block
    touched, including the partly filled last block, which is written again."""
    st, cfg, fblocks, fsize = fs.st, fs.cfg, fs.fblocks, fs.fsize
    txn_flag, txn_list = fs.txn_flag, fs.txn_list
    old = fsize[f]
    new = min(old + nbytes, MAX_FILE_BLOCKS * BLOCK_BYTES)
    _fs_file_meta(f, fs, False)  # size / mtime / extents
    if new <= old:
        return k
    nb_old = (old + BLOCK_BYTES - 1) // BLOCK_BYTES
    nb_new = (new + BLOCK_BYTES - 1) // BLOCK_BYTES
    got = nb_old
    for j in range(nb_old, nb_new):
        goal = fblocks[f, j - 1] + 1 if j > 0 else -1
        d = _fs_alloc(goal, st, cfg, fs.used, fs.cnt1, fs.cnt2)
        if d < 0:
            st[_V_FULL] += 1
            break
        fblocks[f, j] = d
        got = j + 1
        _fs_dirty(cfg[_F_BBM] + (cfg[_F_DATA] + d) // GROUP_BLOCKS, txn_flag, txn_list, st)
    if got > nb_old:
        _fs_dirty(cfg[_F_GDT], txn_flag, txn_list, st)
    new = min(new, got * BLOCK_BYTES)
    if new <= old:
        return k  # file system full: nothing written
    fsize[f] = new
    if emit:
        first = old // BLOCK_BYTES  # the partly filled last block is written again
        k = _fs_runs(fblocks[f], first, got, cfg[_F_DATA], OP_WRITE, out_lba, out_nb, out_op, k)
        st[_V_WRITTEN] += got - first
        st[_V_DATA_WRITES] += got - first
    return k


@nb.njit(cache=True)
def _fs_commit(fs, out_lba, out_nb, out_op, k):
    """fsync: a journal transaction (descriptor, copies of the dirty metadata blocks, commit
    block) appended to the ring; a checkpoint when enough journal has been written."""
    st, cfg, txn_flag, txn_list, ckpt_flag = fs.st, fs.cfg, fs.txn_flag, fs.txn_list, fs.ckpt_flag
    ntxn = st[_V_NTXN]
    if ntxn == 0:
        return k
    for j in range(ntxn):
        b = txn_list[j]
        txn_flag[b] = 0
        ckpt_flag[b] = 1
    st[_V_NTXN] = 0
    n = ntxn + 2
    ring = cfg[_F_NJOURNAL] - 1  # block 0 of the journal is its superblock
    base = cfg[_F_JOURNAL] + 1
    pos = st[_V_JPOS]
    first = min(n, ring - pos)
    k = _emit(out_lba, out_nb, out_op, k, base + pos, first, OP_WRITE)
    if first < n:
        k = _emit(out_lba, out_nb, out_op, k, base, n - first, OP_WRITE)
    st[_V_JPOS] = (pos + n) % ring
    st[_V_WRITTEN] += n
    st[_V_JOURNAL_WRITES] += n
    st[_V_SINCE_CKPT] += n
    if st[_V_SINCE_CKPT] >= cfg[_F_CKPT_EVERY]:
        # checkpoint: write the journaled metadata in place (address order, merged runs), then
        # move the journal tail (journal superblock)
        st[_V_SINCE_CKPT] = 0
        st[_V_CKPTS] += 1
        b = 0
        meta_end = cfg[_F_META_END]
        while b < meta_end:
            if ckpt_flag[b] == 1:
                s = b
                while b < meta_end and ckpt_flag[b] == 1:
                    ckpt_flag[b] = 0
                    b += 1
                k = _emit(out_lba, out_nb, out_op, k, s, b - s, OP_WRITE)
                st[_V_WRITTEN] += b - s
                st[_V_CKPT_WRITES] += b - s
            else:
                b += 1
        k = _emit(out_lba, out_nb, out_op, k, cfg[_F_JOURNAL], 1, OP_WRITE)
        st[_V_WRITTEN] += 1
        st[_V_JOURNAL_WRITES] += 1
    return k


@nb.njit(cache=True)
def _fs_list_move(f, src, src_pos, dst, dst_pos, st, src_n, dst_n):
    """Move file id ``f`` from one dense id list to another (O(1) swap-remove)."""
    p = src_pos[f]
    last = src[st[src_n] - 1]
    src[p] = last
    src_pos[last] = p
    st[src_n] -= 1
    src_pos[f] = -1
    dst[st[dst_n]] = f
    dst_pos[f] = st[dst_n]
    st[dst_n] += 1


@nb.njit(cache=True)
def _fs_init(init_sizes, fs):
    """The preallocated file set (not traced: the simulator's prefill stands for it)."""
    st = fs.st
    dummy_l = np.empty(0, np.int64)
    dummy_n = np.empty(0, np.int32)
    dummy_o = np.empty(0, np.uint8)
    for f in range(init_sizes.shape[0]):
        if init_sizes[f] > 0:
            _fs_list_move(f, fs.nlist, fs.npos, fs.elist, fs.epos, st, _V_NNON, _V_NEXIST)
            _fs_append(f, init_sizes[f], fs, False, dummy_l, dummy_n, dummy_o, 0)
    for j in range(st[_V_NTXN]):
        fs.txn_flag[fs.txn_list[j]] = 0
    st[_V_NTXN] = 0


@nb.njit(cache=True)
def _varmail_kernel(u, start, fs, n_writes, out_lba, out_nb, out_op, margin):
    """Run varmail iterations ``start..`` (one row of ``u`` each) until the stream ends,
    ``n_writes`` blocks are written, or the output buffer is nearly full."""
    st, cfg, fblocks, fsize = fs.st, fs.cfg, fs.fblocks, fs.fsize
    txn_flag, txn_list = fs.txn_flag, fs.txn_list
    elist, epos, nlist, npos = fs.elist, fs.epos, fs.nlist, fs.npos
    cap = out_lba.shape[0]
    data = cfg[_F_DATA]
    append_bytes = cfg[_F_APPEND_BYTES]
    k = 0
    i = start
    while i < u.shape[0]:
        if st[_V_WRITTEN] >= n_writes or k + margin > cap:
            break
        st[_V_ITER] += 1
        # 1. deletefile (a random existing file): free its blocks; the metadata joins the
        # running transaction (committed by the next fsync)
        if st[_V_NEXIST] > 0:
            f = elist[int(u[i, 0] * st[_V_NEXIST])]
            nbf = (fsize[f] + BLOCK_BYTES - 1) // BLOCK_BYTES
            if cfg[_F_TRIMS] and nbf > 0:
                k = _fs_runs(fblocks[f], 0, nbf, data, OP_TRIM, out_lba, out_nb, out_op, k)
                st[_V_TRIM_BLOCKS] += nbf
            for j in range(nbf):
                d = fblocks[f, j]
                _bm_set(fs.used, fs.cnt1, fs.cnt2, d, False)
                if d < st[_V_HINT]:
                    st[_V_HINT] = d
                _fs_dirty(cfg[_F_BBM] + (data + d) // GROUP_BLOCKS, txn_flag, txn_list, st)
            if nbf > 0:
                _fs_dirty(cfg[_F_GDT], txn_flag, txn_list, st)
            fsize[f] = 0
            _fs_file_meta(f, fs, True)
            _fs_list_move(f, elist, epos, nlist, npos, st, _V_NEXIST, _V_NNON)
        # 2. createfile (a random absent entry), appendfilerand, fsync
        if st[_V_NNON] > 0:
            f = nlist[int(u[i, 1] * st[_V_NNON])]
            _fs_list_move(f, nlist, npos, elist, epos, st, _V_NNON, _V_NEXIST)
            _fs_file_meta(f, fs, True)
            k = _fs_append(f, 1 + int(u[i, 2] * append_bytes), fs, True, out_lba, out_nb, out_op, k)
            k = _fs_commit(fs, out_lba, out_nb, out_op, k)
        # 3. openfile, readwholefile, appendfilerand, fsync
        if st[_V_NEXIST] > 0:
            f = elist[int(u[i, 3] * st[_V_NEXIST])]
            nbf = (fsize[f] + BLOCK_BYTES - 1) // BLOCK_BYTES
            k = _fs_runs(fblocks[f], 0, nbf, data, OP_READ, out_lba, out_nb, out_op, k)
            st[_V_READ_BLOCKS] += nbf
            k = _fs_append(f, 1 + int(u[i, 4] * append_bytes), fs, True, out_lba, out_nb, out_op, k)
            k = _fs_commit(fs, out_lba, out_nb, out_op, k)
        # 4. openfile, readwholefile
        if st[_V_NEXIST] > 0:
            f = elist[int(u[i, 5] * st[_V_NEXIST])]
            nbf = (fsize[f] + BLOCK_BYTES - 1) // BLOCK_BYTES
            k = _fs_runs(fblocks[f], 0, nbf, data, OP_READ, out_lba, out_nb, out_op, k)
            st[_V_READ_BLOCKS] += nbf
        i += 1
    return i, k


def varmail(
    capacity_blocks,
    n_writes,
    seed=0,
    n_files=None,
    append_kib=16,
    mean_file_kib=16,
    prealloc=0.8,
    journal_fraction=0.02,
    checkpoint_every=1024,
    allocator="first_fit",
    emit_trims=False,
):
    """A Filebench varmail-like mail server on an ext4-like journaling file system (data=ordered).

    This is a model, not a trace of ext4; it keeps the mechanisms that shape block lifetimes.

    **Layout** (flex_bg style, metadata packed at the front)::

        [superblock | group descriptors | block bitmaps | inode bitmaps | inode table |
         directory blocks | journal (its superblock + a ring) | data]

    Only the used part of the inode table (16 inodes a block); one big directory with
    ``DIRENTS_PER_BLOCK`` entries a block (entries placed by a hash of the file id).

    **File set**: ``n_files`` entries (default: capacity / 32, a file set of about 1/8 of the
    space at 16 KiB per mail), ``prealloc`` of them existing at the start with gamma(1.5) sizes of
    mean ``mean_file_kib`` (Filebench's preallocation; not traced, the simulator's prefill stands
    for it). Files stop growing at ``MAX_FILE_BLOCKS`` blocks.

    **Flow** (one iteration, as varmail's): deletefile (a random existing file); createfile (a
    random absent entry), appendfilerand (1..``append_kib`` KiB), fsync; openfile (random),
    readwholefile, appendfilerand, fsync; openfile (random), readwholefile. An append writes the
    partly filled last block again plus the new blocks; reads are issued for whole files (no
    page cache).

    **Metadata**: every change dirties its metadata blocks (inode block; inode bitmap, directory
    block and group descriptors on create/delete; block bitmaps and group descriptors on
    allocation/free). An fsync writes the file's data, then commits a journal transaction:
    descriptor + a copy of each metadata block dirtied since the last commit + commit block,
    appended sequentially to the ring (wrapping). Every ``checkpoint_every`` journal blocks (at
    most 3/4 of the ring) the journaled metadata is written in place (merged runs, address
    order), then the journal superblock. So the group descriptors, active bitmaps, journal
    superblock, directory and inode blocks are the hot blocks.

    **Allocator** over a bitmap of data blocks: an append first tries the block after the file's
    last one (files grow contiguously), else ``first_fit`` takes the lowest free block (freed
    blocks are reused soon, like ext4's goal-directed allocation into freed space: a data block
    lives about as long as its mail), or ``next_fit`` a roving cursor (the allocator laps the
    data area, as a log-structured file system would). A delete frees the blocks; with
    ``emit_trims`` it also issues trims of them (``-o discard``).

    **Simplified away**: extent trees and htree index blocks, delayed allocation and
    preallocation windows, the page cache, inode allocation policy (inode = entry id), the
    freed-block reuse delay until commit, the superblock's lazy counters, time-driven (5 s)
    commits (only fsyncs commit), and concurrency between Filebench threads.
    """
    append_kib = float(append_kib)
    if not append_kib > 0:
        raise GeneratorParameterError("append_kib", f"must be > 0, got {append_kib}")
    mean_file_kib = float(mean_file_kib)
    if not mean_file_kib > 0:
        raise GeneratorParameterError("mean_file_kib", f"must be > 0, got {mean_file_kib}")
    prealloc = _fraction("prealloc", prealloc, lo_open=False)
    journal_fraction = _fraction("journal_fraction", journal_fraction, hi_closed=False, hi=0.5)
    checkpoint_every = _int_at_least("checkpoint_every", checkpoint_every, 1)
    if allocator not in ("first_fit", "next_fit"):
        raise GeneratorParameterError("allocator", f"must be 'first_fit' or 'next_fit', got {allocator!r}")
    nf = max(16, capacity_blocks // 32) if n_files is None else _int_at_least("n_files", n_files, 2)

    journal_blocks = max(16, int(capacity_blocks * journal_fraction))
    n_groups = -(-capacity_blocks // GROUP_BLOCKS)
    n_igroups = -(-nf // INODES_PER_GROUP)
    itable_blocks = -(-nf // INODES_PER_BLOCK)
    dir_blocks = -(-nf // DIRENTS_PER_BLOCK)
    gdt = 1
    bbm = gdt + 1
    ibm = bbm + n_groups
    itable = ibm + n_igroups
    dirb = itable + itable_blocks
    journal = dirb + dir_blocks
    data = journal + journal_blocks
    n_data = capacity_blocks - data
    mean_blocks = mean_file_kib * 1024 / BLOCK_BYTES
    if n_data < 64 or nf * max(1.0, mean_blocks) > 0.75 * n_data:
        raise GeneratorParameterError(
            "capacity_blocks",
            f"={capacity_blocks} is too small for {nf} files of {mean_file_kib:g} KiB: "
            f"the data area has {max(n_data, 0)} blocks after {data} blocks of metadata and journal; "
            f"the file set must fit in 3/4 of it (lower n_files or mean_file_kib)",
        )
    max_append = int(append_kib * 1024)
    cfg = np.zeros(_F_NCFG, np.int64)
    cfg[_F_DATA], cfg[_F_NDATA], cfg[_F_GDT], cfg[_F_BBM], cfg[_F_IBM] = data, n_data, gdt, bbm, ibm
    cfg[_F_ITABLE], cfg[_F_DIR], cfg[_F_NDIR] = itable, dirb, dir_blocks
    cfg[_F_JOURNAL], cfg[_F_NJOURNAL] = journal, journal_blocks
    # a checkpoint must come before the ring wraps onto transactions not yet checkpointed
    cfg[_F_CKPT_EVERY] = min(checkpoint_every, (journal_blocks - 1) * 3 // 4)
    cfg[_F_APPEND_BYTES] = max_append
    cfg[_F_NEXT_FIT] = allocator == "next_fit"
    cfg[_F_TRIMS] = bool(emit_trims)
    cfg[_F_META_END] = journal

    st = np.zeros(_V_NSTATE, np.int64)
    used = np.zeros(n_data, np.uint8)
    cnt1 = np.zeros(-(-n_data // 64), np.int32)
    cnt2 = np.zeros(-(-n_data // 4096), np.int32)
    fblocks = np.full((nf, MAX_FILE_BLOCKS), -1, np.int32)
    fsize = np.zeros(nf, np.int64)
    txn_flag = np.zeros(journal, np.uint8)
    txn_list = np.empty(journal, np.int64)
    ckpt_flag = np.zeros(journal, np.uint8)
    elist = np.empty(nf, np.int64)
    epos = np.full(nf, -1, np.int64)
    nlist = np.arange(nf, dtype=np.int64)
    npos = np.arange(nf, dtype=np.int64)
    st[_V_NNON] = nf

    rng = _rng(seed)
    exists = rng.random(nf) < prealloc
    sizes = np.ceil(rng.gamma(1.5, mean_file_kib * 1024 / 1.5, nf)).astype(np.int64)
    init_sizes = np.where(exists, np.clip(sizes, 1, MAX_FILE_BLOCKS * BLOCK_BYTES), 0).astype(np.int64)
    fs = _FileSystem(st, cfg, used, cnt1, cnt2, fblocks, fsize, txn_flag, txn_list, ckpt_flag, elist, epos, nlist, npos)
    _fs_init(init_sizes, fs)

    margin = 8 * MAX_FILE_BLOCKS + 2 * (max_append // BLOCK_BYTES + 2) + journal + 64
    out_cap = max(1 << 20, 4 * margin)
    chunk = 1 << 16
    parts = []
    while st[_V_WRITTEN] < n_writes:
        u = rng.random((chunk, 6))
        i = 0
        while i < chunk and st[_V_WRITTEN] < n_writes:
            lba = np.empty(out_cap, np.int64)
            nbk = np.empty(out_cap, np.int32)
            op = np.empty(out_cap, np.uint8)
            i, k = _varmail_kernel(u, i, fs, n_writes, lba, nbk, op, margin)
            parts.append((lba[:k].copy(), nbk[:k].copy(), op[:k].copy()))
    lba, nbk, op = (np.concatenate([p[j] for p in parts]) for j in range(3))
    trace = _requests_trace(lba, nbk, op, n_writes, "varmail")
    trace.meta.update(
        {
            "layout_metadata": [0, journal],
            "layout_gdt": [gdt, 1],
            "layout_block_bitmaps": [bbm, n_groups],
            "layout_inode_bitmaps": [ibm, n_igroups],
            "layout_inodes": [itable, itable_blocks],
            "layout_dirs": [dirb, dir_blocks],
            "layout_journal": [journal, journal_blocks],
            "layout_data": [data, n_data],
            "n_files": int(nf),
            "iterations": int(st[_V_ITER]),
            "data_block_writes": int(st[_V_DATA_WRITES]),
            "journal_block_writes": int(st[_V_JOURNAL_WRITES]),
            "checkpoint_block_writes": int(st[_V_CKPT_WRITES]),
            "checkpoints": int(st[_V_CKPTS]),
            "read_blocks_issued": int(st[_V_READ_BLOCKS]),
            "trim_blocks": int(st[_V_TRIM_BLOCKS]),
            "live_files": int(st[_V_NEXIST]),
            "live_data_blocks": int(used.sum()),
            "allocation_failures": int(st[_V_FULL]),
        }
    )
    return trace


# -- registry and entry point ---------------------------------------------------------------------------
GENERATORS = {
    "uniform": uniform,
    "zipf": zipf,
    "hotcold": hotcold,
    "ycsb_a": ycsb_a,
    "ycsb_f": ycsb_f,
    "varmail": varmail,
    "phase_shift": phase_shift,
}

_FIXED = ("capacity_blocks", "n_writes", "seed")


def default_params(kind: str) -> dict:
    """The parameters generator ``kind`` accepts (besides capacity, n_writes and seed) and their
    defaults."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; known: {', '.join(sorted(GENERATORS))}")
    sig = inspect.signature(GENERATORS[kind])
    return {p.name: p.default for p in sig.parameters.values() if p.name not in _FIXED}


def accepted_params(kind: str) -> tuple[str, ...]:
    """The names of the parameters generator ``kind`` accepts."""
    return tuple(default_params(kind))


def generate(kind: str, *, capacity_blocks: int, n_writes: int, seed: int = 0, **params) -> Trace:
    """Run generator ``kind`` (see the module docstring); bad names or values raise ValueError."""
    defaults = default_params(kind)
    unknown = [p for p in params if p not in defaults]
    if unknown:
        raise ValueError(
            f"generator {kind!r}: unknown parameter(s) {unknown}; accepted: {', '.join(defaults) or 'none'}"
        )
    for pname, v, lo in (("capacity_blocks", capacity_blocks, 1), ("n_writes", n_writes, 1), ("seed", seed, 0)):
        _int_at_least(pname, v, lo)
    capacity_blocks, n_writes, seed = int(capacity_blocks), int(n_writes), int(seed)
    effective = {**defaults, **params}
    trace = GENERATORS[kind](capacity_blocks, n_writes, seed, **effective)
    trace.name = kind
    trace.meta.update({"generator": kind, "capacity_blocks": capacity_blocks, "seed": seed, "params": dict(effective)})
    for k, v in effective.items():
        if isinstance(v, (bool, int, float, str)):
            trace.meta[f"param_{k}"] = v
    return trace


# -- arrival processes (wall-clock time for the RAID chunk layer) -----------------------------------------
#: Request densities of ADAPT's sensitivity study (§4.3): light = every interval above the 100 µs
#: chunk timeout, medium and heavy = mean intervals below it; heavy is dense enough that even five
#: user groups fill 64 KiB chunks within the timeout. (mean µs, minimum µs) of the gaps.
DENSITIES = {"light": (200.0, 101.0), "medium": (20.0, 0.0), "heavy": (1.0, 0.0)}


def arrival_times(n_requests: int, mean_interval_us: float, seed: int = 0, min_interval_us: float = 0.0) -> np.ndarray:
    """Request times in µs (int64, non-decreasing, first at 0) of a seeded arrival process:
    gaps of ``min_interval_us`` plus an exponential with the rest of the mean, i.e. a Poisson
    process of rate ``1 / mean_interval_us`` when ``min_interval_us`` is 0."""
    n = _int_at_least("n_requests", n_requests, 0)
    mean, low = float(mean_interval_us), float(min_interval_us)
    if not mean > 0 or not 0 <= low <= mean:
        raise ValueError(
            f"arrival process needs mean_interval_us > 0 and 0 <= min_interval_us <= mean, got {mean} and {low}"
        )
    gaps = _rng(seed).exponential(mean - low, n) + low if mean > low else np.full(n, low)
    if n:
        gaps[0] = 0.0
    # whole-µs gaps (rounded half up), so every gap keeps the minimum exactly
    gaps = np.floor(gaps + 0.5)
    if n and not gaps.sum() < 2.0**62:  # the int64 clock wrapped (1e300: every time -2^63), without a word
        raise GeneratorParameterError(
            "mean_interval_us",
            f"={mean:g}: {n} requests end at {gaps.sum():.3g} µs, past the 64-bit clock (2^62 µs, 146,000 years)",
        )
    return np.cumsum(gaps.astype(np.int64))


def density_arrivals(n_requests: int, density, seed: int = 0) -> np.ndarray:
    """:func:`arrival_times` for a named density (``light``/``medium``/``heavy``) or a mean gap in µs."""
    if isinstance(density, str):
        if density not in DENSITIES:
            raise ValueError(f"unknown density {density!r}; known: {', '.join(DENSITIES)} or a mean gap in µs")
        mean, low = DENSITIES[density]
        return arrival_times(n_requests, mean, seed, low)
    return arrival_times(n_requests, float(density), seed)


def spread_ties(ts_us: np.ndarray) -> np.ndarray:
    """Coarse time stamps made fine: requests sharing one stamp are spread evenly over the time
    up to the next distinct stamp (the last group over the mean gap of the others), so a trace
    with 1 s granularity (Tencent as re-encoded by FlashNet) keeps its request rate per second
    instead of one burst per second. Strictly increasing input is returned unchanged."""
    ts = np.asarray(ts_us, dtype=np.int64)
    n = ts.size
    if n < 2 or np.all(np.diff(ts) > 0):
        return ts.copy()
    ts = np.maximum.accumulate(ts)
    starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]])
    counts = np.diff(np.r_[starts, n])
    stamps = ts[starts]
    nxt = np.r_[stamps[1:], stamps[-1] + (int(np.mean(np.diff(stamps))) if stamps.size > 1 else counts[-1])]
    width = (nxt - stamps).astype(np.float64)
    rank = np.arange(n) - np.repeat(starts, counts)
    return (np.repeat(stamps, counts) + np.floor(rank * np.repeat(width / counts, counts))).astype(np.int64)
