"""MiDAS's group-configuration model (Oh et al., FAST'24), after the authors' public simulator.

MiDAS splits storage into a hot group ``G0`` (fed by a hot filter), and ``G1..Gn``: user writes
that are not hot go to ``G1``; GC moves the valid blocks of a victim from ``Gi`` to ``Gi+1``
(the last group keeps its own). ``G0..G(n-1)`` are cleaned FIFO at a fixed size, the last
group by cost-benefit. This module picks ``n`` and the sizes.

**UID** (update-interval distribution): during an epoch (4x the logical capacity of user writes)
the interval between two writes of the same block is counted in buckets of ``unit`` blocks
(a quarter segment). A block written once in the epoch is counted in the last bucket; then each
bucket ``i`` is scaled by ``1 + (E mod i + i/2) / E`` (``E`` buckets) for the intervals the epoch's
edges cut off (:func:`build_uid`).

**Valid ratios** (:func:`predict`): the groups are stages in a block's life. A group holding
``k`` segments and receiving ``a`` blocks per user write keeps a block for ``(k - 1/2) S / a``
user writes (``S`` blocks per segment, half a segment for the open one), so group ``i`` covers
ages ``[P_i, P_i + T_i)``. Of the blocks entering it, those whose update interval falls in that
range die there: its valid ratio at FIFO cleaning is ``1 - dead / entering``, and the next group
receives ``a * vr``. The hot group is the first stage: with an accurate hot filter it is sized
from the UID (the shortest intervals, victims assumed all invalid); otherwise from the hot
filter's measured traffic, valid ratio and size. The last group holds the remaining live data
in the remaining space and is modelled as a FIFO log with two temperatures
(:func:`two_class_fifo_waf`, Desnoyers' hot/cold model, MiDAS's ``None_FIFO_predict``), the hot
class being the intervals below 0.7x the group's mean.

**WAF** (:func:`chain_waf`): a Markov chain over {user write, G0, G1..Gn}: a written block
returns to "user write" when invalidated (probability ``1 - vr``) or moves to the next group
(``vr``); WAF is total writes over user writes at the stationary distribution.

**Search** (:func:`search`, MiDAS's GCS): the hot size first, then groups added one at a time,
each new group's size scanned segment by segment out of the last group; then four rounds that
re-tune the hot size and each group's size in turn. The lowest modelled WAF wins.

Departures from the authors' code (each where theirs is inconsistent): the chain's stationary
distribution is solved, not iterated 2000 times; with a single group after G0 their sum also
counts G1's user writes as copies; the last group's class shares are computed for each
configuration (theirs accumulate over every configuration a search evaluates); the hot group's
live blocks are counted in every evaluation (their first hot-size scan leaves them out); static
data leaves both the last group's space and its live data (their greedy variant removes it from
the live data only); the epoch-length check is in blocks, not whole segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: MiDAS's constants (paper scale: 512 segments): segments kept out of group-size scans and of
#: the epoch-length check, largest hot group tried, the hot-size gain needed in the first scan
PAPER_SEGMENTS = 512
PAPER_MARGIN = 50
PAPER_MAX_HOT = 29
HOT_GAIN = 0.05
#: the last group's hot class: intervals below this share of the group's mean interval
HOT_CLASS_SHARE = 0.7
#: the hot filter is trusted (hot group sized from the UID) when its victims hold at most this
#: valid share and it takes at least this share of the user writes
HOT_VALID_MAX = 0.1
HOT_TRAFFIC_MIN = 0.15


@dataclass(frozen=True)
class UID:
    """Update-interval distribution: ``counts[j]`` intervals in ``[j*unit, (j+1)*unit)`` blocks."""

    counts: np.ndarray
    unit: int

    @property
    def window(self) -> int:
        return self.counts.size * self.unit


def build_uid(raw_counts, unit: int, once_written: float = 0.0) -> UID:
    """The UID of one epoch: raw per-bucket counts, plus the blocks written only once in the epoch
    (in the last bucket), scaled for the intervals cut by the epoch's edges (as MiDAS does)."""
    c = np.asarray(raw_counts, np.float64).copy()
    if c.ndim != 1 or c.size < 2:
        raise ValueError(f"a UID needs at least 2 buckets, got shape {c.shape}")
    if int(unit) < 1:
        raise ValueError(f"UID bucket width must be >= 1 block, got {unit}")
    if np.any(c < 0) or once_written < 0:
        raise ValueError("UID counts must be non-negative")
    e = c.size
    c[-1] += once_written
    i = np.arange(1, e)
    # a block with interval i*unit fits e/i times in the epoch; on average (e mod i)/i + 1/2
    # of one more interval is cut by the edges
    c[1:] *= 1.0 + ((e % i) + i / 2.0) / e
    return UID(counts=c, unit=int(unit))


@dataclass(frozen=True)
class Device:
    """What the model needs of the storage: segment size, segments the groups share (physical
    minus the GC reserve), live logical blocks, and static blocks (data never updated, left out
    of the last group's live data and space, as MiDAS's ``no_access_lba``)."""

    segment_blocks: int
    segments: int
    live_blocks: int
    static_blocks: int = 0
    margin: int | None = None  # default: MiDAS's 50 of 512 segments, scaled
    max_hot: int | None = None  # default: MiDAS's 29 of 512 segments, scaled

    def __post_init__(self):
        if self.segment_blocks < 1 or self.segments < 2:
            raise ValueError(
                f"device needs segment_blocks >= 1 and segments >= 2, got {self.segment_blocks}, {self.segments}"
            )
        if self.live_blocks <= 0:
            raise ValueError(f"device has no live data (live_blocks={self.live_blocks})")
        if self.margin is None:
            object.__setattr__(self, "margin", max(1, round(PAPER_MARGIN * self.segments / PAPER_SEGMENTS)))
        if self.max_hot is None:
            object.__setattr__(self, "max_hot", max(1, round(PAPER_MAX_HOT * self.segments / PAPER_SEGMENTS)))


@dataclass(frozen=True)
class HotStats:
    """The hot filter's recent behaviour: share of user writes sent to G0, valid ratio of G0's
    victims, G0's size in segments (open one included)."""

    traffic: float
    valid: float
    size: int

    @property
    def trusted(self) -> bool:
        return self.valid <= HOT_VALID_MAX and self.traffic >= HOT_TRAFFIC_MIN


@dataclass
class Configuration:
    """A group configuration: ``sizes[0]`` is G0 (hot), ``sizes[1:]`` G1..Gn, in segments."""

    sizes: list[int]
    valid_ratios: list[float]
    waf: float
    hot_traffic: float
    hot_from_uid: bool
    evaluated: int = 0
    history: list = field(default_factory=list)

    @property
    def n_groups(self) -> int:
        return len(self.sizes)


# -- closed forms ------------------------------------------------------------------------------
def two_class_fifo_waf(op, r, f, iters: int = 64) -> np.ndarray:
    """WAF of a FIFO-cleaned log with ``op`` = physical/live space, where a share ``r`` of the
    writes goes uniformly to a share ``f`` of the data and the rest uniformly to the rest:
    the root ``w >= 1`` of ``w = 1 + r / (e^(r op / (f w)) - 1) + (1-r) / (e^((1-r) op / ((1-f) w)) - 1)``
    (a block of a class survives one pass of the log with probability ``e^(-rate * op / w)``).
    With ``r == f`` (or a class empty) it is the Lambert-W closed form :func:`dogi_ml.markov.waf.fifo_waf`."""
    op, r, f = np.broadcast_arrays(np.asarray(op, np.float64), np.asarray(r, np.float64), np.asarray(f, np.float64))
    if np.any(op <= 1):
        raise ValueError(f"physical/live ratio must exceed 1, got min {op.min()}")
    # degenerate class splits are one uniform class
    uniform = (r <= 0) | (r >= 1) | (f <= 0) | (f >= 1)
    r = np.where(uniform, 0.5, r)
    f = np.where(uniform, 0.5, f)

    def excess(w):
        with np.errstate(over="ignore"):
            return (1.0 + r / np.expm1(r * op / (f * w)) + (1 - r) / np.expm1((1 - r) * op / ((1 - f) * w))) - w

    lo = np.ones_like(op)
    hi = np.full_like(op, 2.0)
    # the excess is positive at w = 1 and falls without bound: double until it is negative
    for _ in range(64):
        pos = excess(hi) > 0
        if not pos.any():
            break
        lo = np.where(pos, hi, lo)
        hi = np.where(pos, hi * 2, hi)
    for _ in range(iters):
        mid = (lo + hi) / 2
        pos = excess(mid) > 0
        lo = np.where(pos, mid, lo)
        hi = np.where(pos, hi, mid)
    return (lo + hi) / 2


def chain_matrix(hot_traffic, hot_valid, vr) -> np.ndarray:
    """Transition matrices ``[B, n+2, n+2]`` over states (user write, G0, G1..Gn)."""
    vr = np.atleast_2d(np.asarray(vr, np.float64))
    b, n = vr.shape
    t = np.broadcast_to(np.asarray(hot_traffic, np.float64), (b,))
    vh = np.broadcast_to(np.asarray(hot_valid, np.float64), (b,))
    m = np.zeros((b, n + 2, n + 2))
    m[:, 0, 1] = t  # a user write goes to G0 ...
    m[:, 0, 2] = 1 - t  # ... or to G1
    m[:, 1, 0] = 1 - vh  # G0's victims: invalid blocks are gone, valid ones go to G1
    m[:, 1, 2] = vh
    for k in range(n):
        s = k + 2
        m[:, s, 0] = 1 - vr[:, k]
        m[:, s, min(s + 1, n + 1)] += vr[:, k]  # the last group keeps its valid blocks
    return m


def chain_waf(hot_traffic, hot_valid, vr) -> np.ndarray:
    """WAF of the chain at its stationary distribution ``pi``: every state but "user write" is a
    block write, so WAF = (1 - pi_0) / pi_0 (MiDAS iterates the chain 2000 times; we solve)."""
    m = chain_matrix(hot_traffic, hot_valid, vr)
    b, k, _ = m.shape
    a = np.swapaxes(m, 1, 2) - np.eye(k)  # pi (M - I) = 0, transposed
    a[:, -1, :] = 1.0  # ... with sum(pi) = 1 in place of one equation
    rhs = np.zeros((b, k, 1))
    rhs[:, -1, 0] = 1.0
    with np.errstate(all="ignore"):
        pi = np.linalg.solve(a, rhs)[:, :, 0]
    return (1.0 - pi[:, 0]) / pi[:, 0]


# -- the model ---------------------------------------------------------------------------------
class _Tables:
    """Prefix sums over the UID so that a stage's dead, live and class counts are O(1)."""

    def __init__(self, uid: UID, dev: Device):
        c = uid.counts
        self.e = c.size
        self.unit = uid.unit
        self.total = float(c.sum())
        if self.total <= 0:
            raise ValueError("the UID is empty (no update interval was observed in the epoch)")
        self.cum = np.concatenate([[0.0], np.cumsum(c)])  # cum[m] = sum_{j<m} c_j
        self.ccum = np.concatenate([[0.0], np.cumsum(self.cum[1:])])  # sum_{j<m} cum[j+1]
        self.cj = np.concatenate([[0.0], np.cumsum(c * np.arange(self.e))])  # sum_{j<m} j c_j
        m = np.arange(1, self.e + 1)
        # hot group sized from the UID: catching intervals below m buckets takes a share
        # cum[m]/total of the writes for m buckets of time, i.e. this many segments
        self.hot_segments = np.floor(m * self.unit * self.cum[1:] / self.total / dev.segment_blocks + 0.5)

    def bucket(self, t) -> np.ndarray:
        """Index of the first bucket starting at or after ``t`` blocks, clipped to [0, E]."""
        return np.clip(np.ceil(np.asarray(t) / self.unit - 1e-9), 0, self.e).astype(np.int64)


@dataclass
class Prediction:
    waf: np.ndarray  # [B] (inf where infeasible)
    valid_ratios: np.ndarray  # [B, n+1]: G0, G1..Gn
    hot_traffic: np.ndarray  # [B]
    hot_size: np.ndarray  # [B] segments given to G0 (taken from the last group when sized from the UID)


def predict(
    uid: UID, dev: Device, sizes, hot: HotStats | None = None, hot_size=None, _tables: _Tables | None = None
) -> Prediction:
    """Modelled WAF of configurations ``sizes [B, n]`` (segments of G1..Gn, open one included).

    The hot group comes either from the UID (``hot_size [B]`` segments, an accurate hot filter)
    or, with ``hot`` given, from the filter's measurements."""
    tb = _tables or _Tables(uid, dev)
    sizes = np.atleast_2d(np.asarray(sizes, np.float64))
    b, n = sizes.shape
    seg = float(dev.segment_blocks)
    u = tb.unit
    cum, ccum = tb.cum, tb.ccum
    bad = np.any(sizes < 1, axis=1)

    if hot is None:
        if hot_size is None:
            raise ValueError("predict needs hot_size (hot group from the UID) or hot (measured filter)")
        h = np.broadcast_to(np.asarray(hot_size, np.int64), (b,))
        m = np.searchsorted(tb.hot_segments, h, side="left") + 1  # buckets the hot group catches
        bad |= (h < 1) | (m > tb.e)
        m = np.minimum(m, tb.e)
        g0_size = tb.hot_segments[m - 1]
        gap = g0_size - h  # the UID asks more than h: taken from the last group
        t = cum[m] / tb.total
        vh = np.zeros(b)
        past = m * float(u)
        live = u * (m - ccum[m] / tb.total)  # live blocks younger than the hot stage
        inflow = 1.0 - t
    else:
        if not 0 < hot.traffic <= 1 or not 0 <= hot.valid < 1 or hot.size < 1:
            raise ValueError(f"hot filter stats out of range: {hot}")
        t = np.full(b, float(hot.traffic))
        vh = np.full(b, float(hot.valid))
        past = np.full(b, (hot.size - 0.5) * seg / hot.traffic)
        m = tb.bucket(past)
        gap = np.zeros(b)
        g0_size = np.full(b, float(hot.size))
        live = hot.traffic * u * (m - ccum[m] / tb.total)
        inflow = 1.0 - t + t * vh
    remaining = tb.total - cum[m]
    dead_before = np.zeros(b)
    vr = np.zeros((b, n + 1))
    vr[:, 0] = vh
    horizon = tb.e * u - dev.margin * seg  # stages must end inside the epoch

    for i in range(n - 1):
        bad |= ~(inflow > 0)
        stay = (sizes[:, i] - 0.5) * seg / np.where(inflow > 0, inflow, 1.0)
        bad |= past + stay >= horizon
        lo, hi = tb.bucket(past), tb.bucket(past + stay)
        dead = cum[hi] - cum[lo]
        entering = remaining - dead_before
        with np.errstate(divide="ignore", invalid="ignore"):
            v = 1.0 - dead / entering
            # live blocks: per bucket of age, the share of the entering blocks still valid
            live += inflow * u * ((hi - lo) - (ccum[hi] - ccum[lo] - (hi - lo) * cum[lo]) / entering)
        bad |= ~(entering > 0) | ~(v > 0)
        vr[:, i + 1] = v
        dead_before += dead
        past += stay
        inflow = inflow * np.where(v > 0, v, 1.0)

    # last group: two temperature classes split at 0.7x its mean interval
    lo = tb.bucket(past)
    n_cnt = cum[-1] - cum[lo]
    n_time = tb.cj[-1] - tb.cj[lo]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_j = n_time / n_cnt
        thr = np.clip(np.floor(HOT_CLASS_SHARE * np.nan_to_num(mean_j)) + 1, lo, tb.e).astype(np.int64)
        r = np.where(n_cnt > 0, (cum[thr] - cum[lo]) / n_cnt, 1.0)
        f = np.where(n_time > 0, (tb.cj[thr] - tb.cj[lo]) / n_time, 1.0)
    live_last = dev.live_blocks - dev.static_blocks - live
    space_last = (sizes[:, -1] - gap) * seg - dev.static_blocks
    with np.errstate(divide="ignore", invalid="ignore"):
        op = space_last / live_last
    bad |= ~(live_last > 0) | ~(op > 1)
    w_last = two_class_fifo_waf(np.where(bad, 2.0, op), r, f)
    vr[:, n] = 1.0 - 1.0 / w_last
    waf = chain_waf(t, vh, np.where(bad[:, None], 0.5, vr[:, 1:]))
    waf = np.where(bad | ~np.isfinite(waf), np.inf, waf)
    return Prediction(waf=waf, valid_ratios=vr, hot_traffic=t, hot_size=g0_size)


# -- the search (MiDAS's GCS) ------------------------------------------------------------------
def search(uid: UID, dev: Device, hot: HotStats, max_groups: int = 9) -> Configuration:
    """The configuration of lowest modelled WAF, searched greedily as MiDAS does (module doc).

    ``max_groups``: most groups besides G0 (MiDAS: 9). Returns the best found, possibly with a
    single group besides G0 (MiDAS then keeps its current configuration)."""
    if max_groups < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    tb = _Tables(uid, dev)
    total, margin = int(dev.segments), int(dev.margin)
    from_uid = hot.trusted
    evaluated = 0
    history = []

    def run(cands: np.ndarray, hot_sizes) -> Prediction:
        nonlocal evaluated
        evaluated += len(cands)
        if from_uid:
            return predict(uid, dev, cands, hot_size=hot_sizes, _tables=tb)
        return predict(uid, dev, cands, hot=hot, _tables=tb)

    # phase 0: the hot group alone in front of one group
    if from_uid:
        hs = np.arange(1, dev.max_hot + 1)
        pred = run((total - hs)[:, None], hs)
        best_waf, hot_h, taken = np.inf, 1, 0.0
        for k, h in enumerate(hs):
            if h <= taken:  # same stage as a smaller size already tried
                continue
            w = pred.waf[k]
            if not np.isfinite(w) or not w < best_waf - HOT_GAIN:
                break
            best_waf, hot_h, taken = w, int(h), pred.hot_size[k]
    else:
        hot_h = int(hot.size)
        best_waf = float(run(np.array([[total - hot_h]]), None).waf[0])
    best = {1: ([total - hot_h], best_waf)}

    # phase 1: add groups one at a time, the new one's size scanned out of the last group
    cap = total - hot_h - margin
    for n in range(2, max_groups + 1):
        base = best[n - 1][0]
        js = np.arange(1, cap)
        if js.size == 0 or not np.isfinite(best[n - 1][1]):
            break
        cands = np.tile(np.asarray(base + [0], np.float64), (js.size, 1))
        cands[:, n - 2] = js
        cands[:, n - 1] = base[-1] - js
        pred = run(cands, hot_h)
        k = int(np.argmin(pred.waf))
        if not np.isfinite(pred.waf[k]):
            break
        best[n] = (cands[k].astype(int).tolist(), float(pred.waf[k]))
        cap -= int(js[k])
    n_best = min(best, key=lambda k: best[k][1])
    final, final_waf = list(best[n_best][0]), best[n_best][1]
    history.append({"phase": 1, "n_groups": n_best + 1, "waf": final_waf})

    # phase 2: four rounds of re-tuning the hot size, then each group's size in turn
    for _ in range(4):
        if not np.isfinite(final_waf):
            break
        if from_uid:
            hs = np.arange(1, dev.max_hot + 1)
            cands = np.tile(np.asarray(final, np.float64), (hs.size, 1))
            cands[:, -1] += hot_h - hs
            pred = run(cands, hs)
            k = int(np.argmin(pred.waf))
            if pred.waf[k] < final_waf:
                final, final_waf, hot_h = cands[k].astype(int).tolist(), float(pred.waf[k]), int(hs[k])
        cfg = list(final)
        for i in range(max_groups - 1):
            improved = False
            if i < len(cfg) - 1:
                trial = list(cfg)
                trial[-1] += trial[i]  # fold group i into the last, then rescan it
            else:
                trial = cfg[:-1] + [0, cfg[-1]]  # a new group before the last
            js = np.arange(1, trial[-1] - margin)
            if js.size:
                cands = np.tile(np.asarray(trial, np.float64), (js.size, 1))
                cands[:, i] = js
                cands[:, -1] = trial[-1] - js
                pred = run(cands, hot_h)
                k = int(np.argmin(pred.waf))
                if pred.waf[k] < final_waf:
                    final, final_waf, improved = cands[k].astype(int).tolist(), float(pred.waf[k]), True
            cfg = list(final)
            if not improved and i >= len(final) - 1:
                break
        history.append({"phase": 2, "n_groups": len(final) + 1, "waf": final_waf})

    pred = run(np.asarray([final], np.float64), hot_h)
    g0 = int(pred.hot_size[0])
    sizes = [g0] + list(final)
    sizes[-1] -= g0 - hot_h if from_uid else 0
    return Configuration(
        sizes=[int(x) for x in sizes],
        valid_ratios=pred.valid_ratios[0].tolist(),
        waf=float(pred.waf[0]),
        hot_traffic=float(pred.hot_traffic[0]),
        hot_from_uid=from_uid,
        evaluated=evaluated,
        history=history,
    )
