"""Group-configuration model and search (DOGI §4.3), fed by PLog records and the hot group.

PLog holds ``<predicted category, actual invalidation time>`` pairs for sampled *non-hot* user
writes. A *configuration* merges the ``K`` ordered categories into contiguous intermediate groups
``G1..GN``; group ``g``'s BIR upper bound is the upper bound of its last category (the last
group is open-ended). In front of them sits ``G_hot`` (BIR ``[1, mu]``), which takes a share
``h`` of *all* user writes (the Hot Filter's share).

The model (a chain after Desnoyers' and MiDAS' Markov models, with the hot group as in the
authors' optimiser, ``prototype/app/group_optimizer.cc``). All rates are per user-written block:

- user traffic: ``G_hot`` gets ``h``; intermediate group ``g`` gets ``f_g = (1 - h) q_g``, with
  ``q_g`` its PLog share (PLog shares are fractions of the non-hot writes; the paper's input
  ``p_ii`` is the fraction of all user-written blocks);
- a bounded group (``G_hot``, ``G1..G(N-1)``) keeps every block until its segment expires. A
  segment is opened at rate ``w_g / S`` (``w_g``: all blocks entering ``g``), fills in
  ``F_g = S / w_g`` and is reclaimed at age ``A_g = max(b_g, F_g)`` after its first write, so the
  group holds ``w_g A_g`` physical blocks. A block written ``x F_g`` after the segment opened
  (``x`` uniform) is copied if it is still valid at age ``A_g - x F_g``; ``m_g`` is that
  probability over the group's PLog records and ``r_g`` the mean time the block stays valid
  there (``E[min(inv, A_g - x F_g)]``), so the group's logical data is ``w_g r_g``. With
  ``segment_blocks=0`` the fill time is ignored (``A_g = b_g``, ``m_g = P(inv > b_g)``);
- survivors move one group on and copies cascade: ``w_{g+1} = f_{g+1} + m_g w_g``. Hot survivors
  (``h m_hot``) go to ``G1``; ``hot_survivors="die_in_g1"`` (default, the authors' code: their
  ``r1_eff`` counts them as invalid in G1) ends them there, ``"chain"`` lets them leave G1 at
  G1's ratio like its other blocks. A block entering ``g`` from ``g - 1`` is copied on at
  ``g``'s own ratio ``m_g`` (as in the authors' code);
- the last group keeps everything long-lived and is cleaned FIFO: its valid ratio at cleaning is
  the Lambert-W closed form (:func:`dogi_ml.markov.waf.fifo_valid_ratio`) for the space left to
  it, ``rho_N = (rho C - sum_g w_g A_g - reserved) / (C - sum_g w_g r_g)``, ``reserved``: physical
  blocks that never hold data (free segments kept for GC, the unwritten part of the last
  group's open segment). A configuration whose bounded groups do not fit scores infinity.
  ``static_blocks`` (default 0) takes logical data that is never rewritten out of that FIFO (as
  DOGI's Frozen Filter or a greedy / cost-benefit victim leaves it alone): the closed form then
  runs on the rest, ``(phys_N - static) / (live_N - static)``.

``reclaim_wait="queue"`` (default ``"none"``): an expired segment is not reclaimed at ``A_g``
but when a GC round reaches it. Rounds come once per segment the user writes open, and the
expired segments take the share ``freed`` of them (the space per user write the bounded
groups' reclaims return), so they wait as in an M/D/1 queue, ``W = S freed / (2 (1 - freed))``
on average: none with probability ``1 - freed``, else about exponentially. ``m_g`` and ``r_g``
are averaged over that wait and the held space grows by ``w_g W`` (a few fixed-point passes,
since the wait moves ``m_g``). Against the chain oracle this makes the hot group's copies match
(reclaim at expiry counts about twice the survivors the oracle copies: zipf at 1 GiB 0.039
modelled vs 0.012 simulated per user write, 0.014 with the wait); the last group's FIFO term
is then the main error (docs/dogi.md, "The Markov model against the chain oracle").

WAF = 1 + (hot and cascade copies) + ``w_N u / (1 - u)``. With one group and no hot group this
is exactly the FIFO closed form; with ``h = 0`` and ``segment_blocks = 0`` it is the chain model
without a hot group (this module's previous model).

A configuration with an intermediate group whose user traffic ``f_g`` is zero or below
``min_user_share`` (a share of all user writes; the authors' ``kUserTrafficThreshold`` 0.0005 by
default) scores infinity: such a group holds only blocks copied from its neighbour and would act
as a free relay (the paper's text leaves this out; ``min_user_share=0`` rejects only groups with
no user write at all). :func:`best_configuration` scores all ``2^(K-1)`` configurations (512 for
ten categories) and returns the lowest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .waf import contiguous_splits, fifo_valid_ratio

HOT_SURVIVORS = ("die_in_g1", "chain")
RECLAIM_WAITS = ("none", "queue")
#: fixed-point passes of the reclaim wait (it moves the valid ratios, which move the wait)
WAIT_PASSES = 4
#: points of the exponential part of the wait, and the highest load the queue is given
WAIT_POINTS = 3
MAX_LOAD = 0.95
RECLAIM_WAIT_DEFAULT = "none"
#: the authors' user-traffic floor of a group, a share of all user writes (group_optimizer.cc)
AUTHORS_MIN_USER_SHARE = 0.0005


@dataclass
class Configuration:
    groups: list[list[int]]  # categories of each intermediate group
    bounds: list[float]  # BIR upper bound of each group (inf for the last)
    waf: float  # modelled WAF
    fractions: list[float]  # PLog share of each group (fraction of the non-hot writes)
    mispredict: list[float]  # share of a group's blocks still valid when its segment is reclaimed
    user_shares: list[float] = field(default_factory=list)  # user traffic, fraction of all user writes
    inflow: list[float] = field(default_factory=list)  # all blocks entering (user + copies), per user write
    hot_share: float = 0.0
    hot_mispredict: float = 0.0
    rejected: int = 0  # configurations rejected for a group without user traffic


@dataclass
class HotGroup:
    """``G_hot`` for the model: ``share`` of all user writes, BIR upper bound ``bound`` (mu).
    Its survivors at reclaim come from ``inv`` (invalidation times of hot-classified writes,
    e.g. with perfect predictions) or, without samples, from ``valid_ratio`` (measured: valid
    share of the reclaimed G_hot segments); ``residence`` (mean time valid in G_hot) defaults
    to half the segment's reclaim age."""

    share: float = 0.0
    bound: float = 0.0
    inv: np.ndarray | None = None
    valid_ratio: float = 0.0
    residence: float | None = None

    def __post_init__(self):
        if not 0.0 <= float(self.share) < 1.0:
            raise ValueError(
                f"hot share must lie in [0, 1) (fraction of all user writes classified hot), got {self.share}"
            )
        if float(self.share) > 0 and not float(self.bound) > 0:
            raise ValueError(f"the hot group needs its BIR upper bound (mu, in blocks) > 0, got {self.bound}")
        if not 0.0 <= float(self.valid_ratio) <= 1.0:
            raise ValueError(f"hot valid_ratio must lie in [0, 1], got {self.valid_ratio}")
        self._tail = None if self.inv is None else _Tail(np.asarray(self.inv, np.float64))

    def stats(self, age: float, fill: float) -> tuple[float, float]:
        if self._tail is not None and self._tail.n:
            return self._tail.stats(age, fill)
        r = age / 2 if self.residence is None else float(self.residence)
        return float(self.valid_ratio), r


class _Tail:
    """Sorted invalidation times with prefix sums: survival and residence of a bounded group
    in O(log n) for any reclaim age ``A`` and fill time ``F`` (see the module docstring)."""

    def __init__(self, inv: np.ndarray):
        x = np.sort(np.asarray(inv, np.float64))
        self.x = x
        self.n = x.size
        self.c1 = np.concatenate([[0.0], np.cumsum(x)])
        self.c2 = np.concatenate([[0.0], np.cumsum(x * x)])

    def stats(self, age, fill: float):
        """``(m, r)``: share still valid at reclaim, mean time valid in the group; ``age`` may
        be an array (one ``(m, r)`` pair per age)."""
        n = self.n
        if n == 0:
            return 0.0, 0.0
        x, c1, c2 = self.x, self.c1, self.c2
        scalar = np.ndim(age) == 0
        age = np.asarray(age, np.float64)
        i1 = np.searchsorted(x, age, side="right")
        alive = n - i1  # outlive even the first block's age
        if fill <= 0:
            m, r = alive / n, (c1[i1] + age * alive) / n
        else:
            lo = age - fill
            i0 = np.searchsorted(x, lo, side="right")  # dead before the last block's reclaim age
            cnt = i1 - i0
            s1 = c1[i1] - c1[i0]
            s2 = c2[i1] - c2[i0]
            # block in (lo, age]: valid at reclaim with probability (inv - lo) / F; mean time valid
            # E_x[min(inv, age - x F)] = ((inv^2 - lo^2) / 2 + inv (age - inv)) / F
            m = (alive + (s1 - cnt * lo) / fill) / n
            r = (c1[i0] + alive * (age - fill / 2) + ((s2 - cnt * lo * lo) / 2 + age * s1 - s2) / fill) / n
        return (float(m), float(r)) if scalar else (m, r)


def plog_stats(pred: np.ndarray, inv: np.ndarray, n_categories: int) -> tuple[np.ndarray, list]:
    """Per category: share of records, and for each record its actual invalidation time sorted
    (for counting how many exceed a bound). Returns ``(share[K], records_by_category list)``."""
    pred = np.asarray(pred, np.int64)
    inv = np.asarray(inv)
    if pred.shape != inv.shape:
        raise ValueError(f"PLog needs one invalidation time per prediction, got {pred.shape} and {inv.shape}")
    if pred.size and (pred.min() < 0 or pred.max() >= n_categories):
        raise ValueError(f"PLog categories must lie in [0, {n_categories}), got [{pred.min()}, {pred.max()}]")
    share = np.bincount(pred, minlength=n_categories).astype(np.float64) / max(1, pred.size)
    return share, [np.sort(inv[pred == c]) for c in range(n_categories)]


@dataclass(frozen=True)
class Options:
    """The model's switches (see the module docstring)."""

    hot_survivors: str = "die_in_g1"
    min_user_share: float = AUTHORS_MIN_USER_SHARE
    segment_blocks: float = 0.0
    reserved_blocks: float = 0.0
    static_blocks: float = 0.0
    reclaim_wait: str = RECLAIM_WAIT_DEFAULT

    def __post_init__(self):
        if self.reclaim_wait not in RECLAIM_WAITS:
            raise ValueError(f"reclaim_wait must be one of {RECLAIM_WAITS}, got {self.reclaim_wait!r}")
        if self.hot_survivors not in HOT_SURVIVORS:
            raise ValueError(f"hot_survivors must be one of {HOT_SURVIVORS}, got {self.hot_survivors!r}")
        if not 0.0 <= float(self.min_user_share) < 1.0:
            raise ValueError(
                f"min_user_share must lie in [0, 1) (a share of all user writes), got {self.min_user_share}"
            )
        for name in ("segment_blocks", "reserved_blocks", "static_blocks"):
            if float(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def _chain(q, bounds, group_stats, capacity, rho, hot: HotGroup, opt: Options):
    """The model for one configuration. ``q``: PLog shares of the intermediate groups;
    ``group_stats(g, age, fill) -> (m, r)``. Returns ``(waf, inflow[N], mispredict[N], m_hot)``.
    With ``reclaim_wait="queue"`` the bounded groups' reclaim age includes the wait of an
    expired segment for its GC round (see :func:`queue_wait`), solved by a few fixed-point
    passes."""
    q = np.asarray(q, np.float64)
    n = q.size
    user = (1.0 - float(hot.share)) * q
    if np.any(user <= 0) or np.any(user < opt.min_user_share):
        return float("inf"), np.zeros(n), np.zeros(n), 0.0
    out = _chain_pass(user, bounds, group_stats, capacity, rho, hot, opt, 0.0, 0.0)
    if opt.reclaim_wait == "queue" and opt.segment_blocks > 0:
        for _ in range(WAIT_PASSES):
            load = min(max(out[4], 0.0), MAX_LOAD)
            wait = queue_wait(load, opt.segment_blocks)
            out = _chain_pass(user, bounds, group_stats, capacity, rho, hot, opt, wait, load)
    return out[:4]


def queue_wait(freed: float, segment_blocks: float) -> float:
    """Mean wait (user writes) of an expired segment for its GC round. A round runs each time a
    user write opens a segment (one per ``S`` user writes; GC copies are paid within the
    round), and an expired segment's round nets it ``1 - m`` segments, so expired segments
    are served as in an M/D/1 queue at load ``freed`` (the share of the user writes' space the
    bounded groups' reclaims return): ``W = S freed / (2 (1 - freed))``. The oracle's victims
    (oldest expired first) wait about this long (measured on zipf, load ~0.78: 70-100 user
    writes at 64-block segments, ~900 at 512)."""
    load = min(max(float(freed), 0.0), MAX_LOAD)
    return float(segment_blocks) * load / (2.0 * (1.0 - load))


def _waited(stats, wait: float, load: float):
    """``stats(..., age, fill)`` averaged over the wait: none with probability ``1 - load`` (the
    GC round finds no expired segment ahead), else exponential with mean ``wait / load``
    (``WAIT_POINTS`` equal-probability points). The valid ratio is convex in the age, so the
    hot group's survivors come mostly from the segments reclaimed at once."""
    if wait <= 0 or load <= 0:
        return stats
    k = np.arange(WAIT_POINTS)
    offsets = np.concatenate([[0.0], -np.log(1.0 - (k + 0.5) / WAIT_POINTS) * (wait / load)])
    weights = np.concatenate([[1.0 - load], np.full(WAIT_POINTS, load / WAIT_POINTS)])

    def averaged(*args):
        *head, age, fill = args
        m, r = stats(*head, age + offsets, fill)  # all the ages in one call
        return float(weights @ np.broadcast_to(m, offsets.shape)), float(weights @ np.broadcast_to(r, offsets.shape))

    return averaged


def _chain_pass(user, bounds, group_stats, capacity, rho, hot: HotGroup, opt: Options, wait: float, load: float):
    """One pass of the model with bounded segments reclaimed on average ``wait`` user writes
    after they expire (``load``: the queue's load, see :func:`_waited`). Returns ``(waf,
    inflow, mispredict, m_hot, freed)``; ``freed``: space per user write returned by the
    bounded groups' reclaims (their load on the GC rounds)."""
    n = user.size
    hot_stats = _waited(hot.stats, wait, load)
    group_stats = _waited(group_stats, wait, load)
    h = float(hot.share)
    inflow = np.zeros(n)
    mis = np.zeros(n)
    S = float(opt.segment_blocks)
    held = 0.0  # physical blocks held by bounded groups (valid and dead until reclaim)
    live = 0.0  # logical data among them
    copies = 0.0
    freed = 0.0
    m_hot = 0.0
    carry = 0.0  # blocks moving on into the next group, per user write
    dying = 0.0  # of which die in the next group whatever its ratio (hot survivors, die_in_g1)
    if h > 0:
        fill = S / h
        age = max(float(hot.bound), fill)
        m_hot, r_hot = hot_stats(age, fill)
        held += h * (age + wait)
        live += h * r_hot
        carry = h * m_hot
        copies += carry
        freed += h - carry
        dying = carry if opt.hot_survivors == "die_in_g1" else 0.0
    for g in range(n - 1):
        w = user[g] + carry
        fill = S / w
        age = max(float(bounds[g]), fill)
        m, r = group_stats(g, age, fill)
        inflow[g] = w
        mis[g] = m
        held += w * (age + wait)
        live += w * r
        carry = (w - dying) * m
        copies += carry
        freed += w * (1.0 - m)
        dying = 0.0
    w_last = user[-1] + carry
    inflow[-1] = w_last
    live_last = capacity - live
    phys_last = rho * capacity - held - float(opt.reserved_blocks)
    if live_last <= 0 or phys_last <= live_last:
        return float("inf"), inflow, mis, m_hot, freed  # the bounded groups would not fit in the space
    # static data (never rewritten) kept out of the cleaning: the FIFO runs on the rest
    static = min(float(opt.static_blocks), live_last)
    if live_last - static <= 0:
        return 1.0 + copies, inflow, mis, m_hot, freed
    u = float(fifo_valid_ratio((phys_last - static) / (live_last - static)))
    return 1.0 + copies + w_last * u / (1.0 - u), inflow, mis, m_hot, freed


def chain_waf(
    fractions,
    mispredict,
    bounds,
    capacity: float,
    rho: float = 1.1,
    residence=None,
    *,
    hot_share: float = 0.0,
    hot_bound: float = 0.0,
    hot_mispredict: float = 0.0,
    hot_residence: float | None = None,
    hot_survivors: str = "die_in_g1",
    min_user_share: float = 0.0,
    reserved_blocks: float = 0.0,
    static_blocks: float = 0.0,
) -> float:
    """The model above for one configuration from per-group scalars, without fill time
    (``bounds[-1]`` ignored: the last group is open-ended). ``fractions``: PLog shares (of the
    non-hot writes); ``mispredict[g]``: share still valid at ``b_g``; ``residence[g]``:
    ``E[min(inv, b_g)]`` (default ``b_g / 2``). The hot group: ``hot_share`` of all user
    writes, BIR ``hot_bound``, ``hot_mispredict`` of it still valid at reclaim."""
    opt = Options(hot_survivors, min_user_share, 0.0, reserved_blocks, static_blocks)
    f = np.asarray(fractions, np.float64)
    m = np.asarray(mispredict, np.float64)
    b = np.asarray(bounds, np.float64)
    r = b / 2 if residence is None else np.asarray(residence, np.float64)
    if not (f.size == m.size == b.size == r.size):
        raise ValueError(
            f"fractions, mispredict, bounds, residence must have one entry per group, got "
            f"{f.size}, {m.size}, {b.size}, {r.size}"
        )
    hot = HotGroup(
        hot_share,
        hot_bound,
        valid_ratio=hot_mispredict,
        residence=hot_bound / 2 if hot_residence is None else hot_residence,
    )
    return _chain(f, b, lambda g, age, fill: (m[g], r[g]), capacity, rho, hot, opt)[0]


class _Ranges:
    """Merged PLog tails of every contiguous category range (55 for ten categories)."""

    def __init__(self, by_cat):
        k = len(by_cat)
        self.tails = {}
        for lo in range(k):
            for hi in range(lo, k):
                self.tails[lo, hi] = _Tail(np.concatenate(by_cat[lo : hi + 1]) if hi > lo else by_cat[lo])


def _score(groups_row, share, ranges, cat_upper, capacity, rho, hot, opt):
    n = int(groups_row[-1]) + 1
    starts = np.searchsorted(groups_row, np.arange(n), side="left")
    ends = np.append(starts[1:], len(groups_row)) - 1
    q = np.array([share[starts[g] : ends[g] + 1].sum() for g in range(n)])
    b = np.array([cat_upper[ends[g]] for g in range(n)], np.float64)
    tails = [ranges.tails[int(starts[g]), int(ends[g])] for g in range(n)]
    waf, inflow, mis, m_hot = _chain(q, b, lambda g, age, fill: tails[g].stats(age, fill), capacity, rho, hot, opt)
    return waf, q, b, inflow, mis, m_hot


def score_all(
    share,
    by_cat,
    cat_upper,
    capacity: float,
    rho: float = 1.1,
    *,
    hot: HotGroup | None = None,
    hot_survivors: str = "die_in_g1",
    min_user_share: float = AUTHORS_MIN_USER_SHARE,
    segment_blocks: float = 0,
    reserved_blocks: float = 0.0,
    static_blocks: float = 0.0,
    reclaim_wait: str = RECLAIM_WAIT_DEFAULT,
) -> tuple[np.ndarray, np.ndarray]:
    """Modelled WAF of every contiguous configuration: ``(splits [S, K], waf [S])``; infinity
    for a configuration that does not fit or has a group without user traffic."""
    opt = Options(hot_survivors, min_user_share, segment_blocks, reserved_blocks, static_blocks, reclaim_wait)
    hot = hot or HotGroup()
    cat_upper = np.asarray(cat_upper, np.float64)
    if len(cat_upper) != len(share):
        raise ValueError(f"{len(cat_upper)} category bounds for {len(share)} categories")
    return _score_all(share, _Ranges(by_cat), cat_upper, capacity, rho, hot, opt)


def _score_all(share, ranges, cat_upper, capacity, rho, hot, opt):
    splits = contiguous_splits(len(share))
    wafs = np.array([_score(row, share, ranges, cat_upper, capacity, rho, hot, opt)[0] for row in splits])
    return splits, wafs


def best_configuration(
    pred,
    inv,
    cat_upper,
    capacity: float,
    rho: float = 1.1,
    n_groups: int | None = None,
    *,
    hot_share: float = 0.0,
    hot_bound: float = 0.0,
    hot_inv=None,
    hot_valid_ratio: float = 0.0,
    segment_blocks: float = 0,
    reserved_blocks: float = 0.0,
    static_blocks: float = 0.0,
    reclaim_wait: str = RECLAIM_WAIT_DEFAULT,
    hot_survivors: str = "die_in_g1",
    min_user_share: float = AUTHORS_MIN_USER_SHARE,
) -> Configuration:
    """Score all ``2^(K-1)`` merges of the categories and return the lowest-WAF one; with
    ``n_groups``, the lowest among the merges into exactly that many groups (Fig. 13's sweep).

    ``pred``/``inv``: the PLog (non-hot writes). The hot group: ``hot_share`` (fraction of all
    user writes classified hot), ``hot_bound`` (mu), and its survivors from ``hot_inv`` (actual
    invalidation times of hot writes) or ``hot_valid_ratio`` (valid share of reclaimed G_hot
    segments). ``segment_blocks`` turns on the segment fill time; ``reserved_blocks``: physical
    blocks that never hold data; ``static_blocks``: logical blocks never rewritten, kept out of
    the last group's cleaning (0: the uniform FIFO over all its data). A group with user
    traffic below ``min_user_share`` (or none) rejects its configuration."""
    cat_upper = np.asarray(cat_upper, np.float64)
    hot = HotGroup(hot_share, hot_bound, inv=hot_inv, valid_ratio=hot_valid_ratio)
    opt = Options(hot_survivors, min_user_share, segment_blocks, reserved_blocks, static_blocks, reclaim_wait)
    share, by_cat = plog_stats(pred, inv, len(cat_upper))
    ranges = _Ranges(by_cat)
    splits, modelled = _score_all(share, ranges, cat_upper, capacity, rho, hot, opt)
    n_groups_of = splits[:, -1] + 1
    rejected = int(sum(_has_empty_group(row, share, hot.share, min_user_share) for row in splits))
    wafs = modelled
    if n_groups is not None:
        if not 1 <= int(n_groups) <= len(cat_upper):
            raise ValueError(f"n_groups must lie in [1, {len(cat_upper)}], got {n_groups}")
        wafs = np.where(n_groups_of == int(n_groups), wafs, np.inf)
        if not np.isfinite(wafs).any():
            # every merge into n groups overflows the model's space or has an empty group: take
            # the first merge into n groups whose groups all receive user writes, else the first
            ok = np.array([not _has_empty_group(row, share, hot.share, min_user_share) for row in splits])
            pick = (n_groups_of == int(n_groups)) & ok
            if not pick.any():
                pick = n_groups_of == int(n_groups)
            wafs = np.where(pick, 0.0, np.inf)
    best = int(np.argmin(wafs))
    conf = _configuration(splits[best], share, ranges, cat_upper, capacity, rho, hot, opt)
    conf.rejected = rejected
    return conf


def evaluate_configuration(
    groups: list[list[int]],
    pred,
    inv,
    cat_upper,
    capacity: float,
    rho: float = 1.1,
    *,
    hot_share: float = 0.0,
    hot_bound: float = 0.0,
    hot_inv=None,
    hot_valid_ratio: float = 0.0,
    segment_blocks: float = 0,
    reserved_blocks: float = 0.0,
    static_blocks: float = 0.0,
    reclaim_wait: str = RECLAIM_WAIT_DEFAULT,
    hot_survivors: str = "die_in_g1",
    min_user_share: float = AUTHORS_MIN_USER_SHARE,
) -> Configuration:
    """The model for one given merge of the categories (``groups``: contiguous lists covering
    ``0..K-1``); same inputs as :func:`best_configuration`."""
    cat_upper = np.asarray(cat_upper, np.float64)
    k = len(cat_upper)
    flat = [c for g in groups for c in g]
    if flat != list(range(k)) or any(not g for g in groups):
        raise ValueError(f"groups must split the categories 0..{k - 1} into non-empty contiguous runs, got {groups}")
    opt = Options(hot_survivors, min_user_share, segment_blocks, reserved_blocks, static_blocks, reclaim_wait)
    hot = HotGroup(hot_share, hot_bound, inv=hot_inv, valid_ratio=hot_valid_ratio)
    share, by_cat = plog_stats(pred, inv, k)
    row = np.concatenate([[g] * len(c) for g, c in enumerate(groups)]).astype(np.int64)
    return _configuration(row, share, _Ranges(by_cat), cat_upper, capacity, rho, hot, opt)


def _configuration(row, share, ranges, cat_upper, capacity, rho, hot, opt) -> Configuration:
    waf, q, b, inflow, mis, m_hot = _score(row, share, ranges, cat_upper, capacity, rho, hot, opt)
    n = int(row[-1]) + 1
    cats = [np.flatnonzero(row == g).tolist() for g in range(n)]
    bounds = [float(x) for x in b[:-1]] + [float("inf")]
    return Configuration(
        groups=cats,
        bounds=bounds,
        waf=float(waf),
        fractions=q.tolist(),
        mispredict=mis.tolist(),
        user_shares=((1.0 - hot.share) * q).tolist(),
        inflow=inflow.tolist(),
        hot_share=float(hot.share),
        hot_mispredict=float(m_hot),
    )


def _has_empty_group(row, share, h, min_user_share) -> bool:
    n = int(row[-1]) + 1
    user = (1.0 - h) * np.bincount(row, weights=share, minlength=n)
    return bool(np.any(user <= 0) or np.any(user < min_user_share))
