"""Chain oracle: a DOGI group configuration run with given (e.g. perfect) placements, to check
the group-configuration model (:mod:`dogi_ml.markov.groups`) against the simulator.

Groups: ``0`` = ``G_hot`` (BIR ``[1, mu]``), ``1..N`` = the configuration's intermediate groups
(``bounds``: BIR upper bounds of ``G1..G(N-1)``, ``GN`` open-ended). Every user write goes to
the group given for it in ``assign`` (one entry per write of the stream, prefill included);
:func:`perfect_assignment` builds it from the true invalidation times (a perfect Hot Filter and
a perfect classifier). GC survivors move as the model assumes (``gc="next"``): ``G_hot -> G1``,
``Gg -> G(g+1)``, ``GN`` stays; ``gc="remaining"`` sends them by their true remaining
invalidation time instead (NoDaP's rule).

Victims as DOGI's: a dead segment at once; else the oldest expired segment (residence since its
first write beyond its group's BIR upper bound, holding garbage) of ``G_hot..G(N-1)``; else in
``GN``: the oldest sealed segment (``final="fifo"``, the model's assumption), the fewest valid
(``"greedy"``) or cost-benefit (``"cost_benefit"``, DOGI's default); if ``GN`` holds no garbage,
the fewest valid anywhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext
from dogi_ml.sim.state import P_NGROUPS, P_NSEG, P_SEG_BLOCKS, SEG_SEALED
from dogi_ml.sim.victims import register_victim

from .annotate import NEVER, annotate

FINAL = {"fifo": 0, "greedy": 1, "cost_benefit": 2}
GC_RULES = {"next": 0, "remaining": 1}


@nb.njit(cache=True)
def _by_time(expiry, remaining):
    """Group whose BIR covers ``remaining`` (expiry: upper bounds of G_hot..G(N-1))."""
    for g in range(expiry.shape[0]):
        if remaining <= expiry[g]:
            return g
    return expiry.shape[0]


class ChainState(NamedTuple):
    """The chain oracle's kernel state."""

    assign: np.ndarray  # int8 group of every write of the stream (prefill included)
    inv: np.ndarray  # invalidation time of every write of the stream
    death: np.ndarray  # per LBA: the logical time its current version dies
    expiry: np.ndarray  # G_hot's and G1..G(N-1)'s BIR upper bounds
    opts: np.ndarray  # [last-group victim rule, GC survivor rule]
    reclaim_ages: np.ndarray  # per group: reclaimed segments, summed ages (since first write)


@nb.njit(cache=True)
def _chain_user(s, p, lba, now):
    if p.opts[1] == 1:
        t = p.inv[now]
        p.death[lba] = now + t if t < NEVER else NEVER
    return p.assign[now]


@nb.njit(cache=True)
def _chain_reclaim(s, p, victim, now):
    """Diagnostics: per group, reclaimed segments and the sum of their ages (since first write)."""
    ages = p.reclaim_ages
    g = s.seg_group[victim]
    ages[g, 0] += 1
    ages[g, 1] += now - s.seg_open_time[victim]


@nb.njit(cache=True)
def _chain_gc(s, p, lba, victim, now):
    last = s.prm[P_NGROUPS] - 1
    if p.opts[1] == 1:
        d = p.death[lba]
        return _by_time(p.expiry, d - now if d < NEVER else NEVER)
    g = s.seg_group[victim]
    return g + 1 if g < last else last


@nb.njit(cache=True)
def _chain_victim(s, p, now):
    expiry, opts = p.expiry, p.opts
    last = s.prm[P_NGROUPS] - 1
    nseg = s.prm[P_NSEG]
    seg_blocks = s.prm[P_SEG_BLOCKS]
    best = -1
    best_open = 1 << 62
    for seg in range(nseg):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        if s.seg_valid[seg] == 0:
            return seg
        g = s.seg_group[seg]
        if g < last and now - s.seg_open_time[seg] > expiry[g] and s.seg_valid[seg] < s.seg_wp[seg]:
            if s.seg_open_time[seg] < best_open:
                best, best_open = seg, s.seg_open_time[seg]
    if best >= 0:
        return best
    final = opts[0]
    best_num = -1.0
    best_den = 1.0
    any_best = -1
    any_fewest = 1 << 62
    for seg in range(nseg):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        v = s.seg_valid[seg]
        if v < any_fewest:
            any_fewest, any_best = v, seg
        if s.seg_group[seg] != last or v >= s.seg_wp[seg]:
            continue
        if final == 0:
            num = float(-s.seg_seal_time[seg])
            den = 1.0
        elif final == 1:
            num = float(seg_blocks - v)
            den = 1.0
        else:
            num = float((seg_blocks - v) * (now - s.seg_seal_time[seg] + 1))
            den = float(seg_blocks + v)
        if best < 0 or num * best_den > best_num * den:
            best_num, best_den, best = num, den, seg
    return best if best >= 0 else any_best


register_victim("chain_oracle", _chain_victim)


def perfect_assignment(inv: np.ndarray, mu: float, bounds) -> np.ndarray:
    """Group of every write from its true invalidation time: ``0`` if ``inv <= mu``, else the
    first intermediate group whose BIR upper bound covers it (the last one otherwise)."""
    edges = np.concatenate([[mu], np.asarray(bounds, np.float64)])
    return np.searchsorted(edges, np.asarray(inv), side="left").astype(np.int8)


class ChainOracle(PlacementPolicy):
    """A fixed DOGI configuration run with the given placements (see the module docstring)."""

    name = "chain_oracle"
    victim = "chain_oracle"
    selector = "chain_oracle"
    victim_rules = ()
    victim_note = "an expired segment first, then its final rule (final=fifo|greedy|cost_benefit) in GN"
    needs_future = True
    place_user = _chain_user
    place_gc = _chain_gc
    on_reclaim = _chain_reclaim

    def __init__(self, mu: int, bounds, assign: np.ndarray | None = None, gc: str = "next", final: str = "fifo"):
        b = [int(x) for x in bounds]
        if int(mu) <= 0 or any(x <= int(mu) for x in b[:1]) or any(y <= x for x, y in zip(b, b[1:])):
            raise ValueError(f"chain oracle: mu must be positive and below increasing bounds, got mu={mu}, bounds={b}")
        if gc not in GC_RULES:
            raise ValueError(f"chain oracle: gc must be one of {sorted(GC_RULES)}, got {gc!r}")
        if final not in FINAL:
            raise ValueError(f"chain oracle: final must be one of {sorted(FINAL)}, got {final!r}")
        super().__init__(len(b) + 2)
        self.mu, self.bounds, self.assign = int(mu), b, assign
        self.gc, self.final = gc, final

    def label(self) -> str:
        return f"chain_oracle[{self.gc},{self.final}]"

    def bind(self, ctx: SimContext) -> ChainState:
        inv, _ = annotate(ctx.stream)
        assign = self.assign
        if assign is None:
            assign = perfect_assignment(inv, self.mu, self.bounds)
        assign = np.ascontiguousarray(assign, np.int8)
        if assign.shape[0] != ctx.stream.shape[0]:
            raise ValueError(
                f"chain oracle: {assign.shape[0]} group assignments for {ctx.stream.shape[0]} writes "
                "(the stream includes the prefill)"
            )
        if assign.size and (assign.min() < 0 or assign.max() >= self.n_groups):
            raise ValueError(f"chain oracle: assignments must lie in [0, {self.n_groups})")
        death = np.full(ctx.capacity, NEVER, np.int64)
        expiry = np.array([self.mu] + self.bounds, np.int64)
        opts = np.array([FINAL[self.final], GC_RULES[self.gc]], np.int64)
        return ChainState(
            assign=assign,
            inv=inv,
            death=death,
            expiry=expiry,
            opts=opts,
            reclaim_ages=np.zeros((self.n_groups, 2), np.int64),
        )

    def summary(self, state) -> dict:
        ages = state.reclaim_ages
        return {"mean_reclaim_age": [float(a[1] / a[0]) if a[0] else None for a in ages]}


def perfect_inputs(writes: np.ndarray, capacity: int, mu: int | None = None, prefill: bool = True) -> dict:
    """The model's inputs with perfect predictions: the PLog of every non-hot write of the
    measured run (category and invalidation time from the annotation), the hot share and the
    hot writes' invalidation times; also the stream's annotation and the category bounds."""
    from .categories import category_bounds

    writes = np.ascontiguousarray(writes, np.int64)
    stream = np.concatenate([np.arange(capacity, dtype=np.int64), writes]) if prefill else writes
    inv, _ = annotate(stream)
    bounds = category_bounds(capacity, mu).astype(np.float64)  # [mu, c1..c9 upper]
    mu = int(bounds[0])
    measured = inv[stream.shape[0] - writes.shape[0] :].astype(np.float64)
    measured[measured >= NEVER] = np.inf
    hot = measured <= mu
    cat = np.searchsorted(bounds[1:], measured[~hot], side="left")  # 0..9 = c1..c10
    return {
        "stream": stream,
        "inv": inv,
        "mu": mu,
        "cat_upper": np.append(bounds[1:], np.inf),
        "pred": cat,
        "plog_inv": np.minimum(measured[~hot], 1e15),
        "hot_share": float(hot.mean()),
        "hot_inv": measured[hot],
    }


STATIC_RULES = ("none", "unwritten", "segments")


def static_segment_blocks(inv: np.ndarray, capacity: int, last_bound: float, segment_blocks: int) -> int:
    """Blocks of the prefill's last-group segments that hold only never-rewritten data.

    The prefill writes LBAs ``0..capacity-1`` in order, so the last group (every block living
    longer than ``last_bound``) receives its prefill blocks in LBA order and fills its segments
    with consecutive runs of them. A segment made only of blocks never rewritten never holds
    garbage, and the chain oracle's FIFO (as a greedy or cost-benefit victim rule, and DOGI's
    Frozen Filter) passes over it: that data leaves the cleaning for good. Static blocks mixed
    with rewritten ones are copied on every FIFO pass and stay in the model's FIFO."""
    prefill = np.asarray(inv[:capacity])
    in_last = prefill > last_bound
    never = prefill[in_last] >= NEVER
    full = never.size // segment_blocks
    if full == 0:
        return 0
    whole = never[: full * segment_blocks].reshape(full, segment_blocks).all(axis=1)
    return int(whole.sum()) * segment_blocks


def _period_sim_waf(res: dict, prefill: int, start: int, end: int) -> float | None:
    """Simulated WAF over measured writes ``[start, end)`` from the result's WAF series (windows
    whose end falls in the period; every window holds the same number of user writes)."""
    t = np.asarray(res["waf_series"]["t"], np.int64) - prefill
    w = np.asarray(res["waf_series"]["waf"], np.float64)
    sel = (t > start) & (t <= end)
    return float(w[sel].mean()) if sel.any() else None


def model_vs_simulator(
    writes: np.ndarray,
    capacity: int,
    sim_config,
    mu: int | None = None,
    *,
    groups: list[list[int]] | None = None,
    gc: str = "next",
    final: str = "fifo",
    assign: np.ndarray | None = None,
    pred: np.ndarray | None = None,
    static: str = "segments",
    periods: list[tuple[int, int]] | None = None,
    **model_kw,
) -> dict:
    """Model WAF of a configuration (the model's best, or ``groups``) against the simulated WAF
    of the chain oracle running it. Placement is perfect unless ``assign`` (per write of the
    stream, prefill included) and ``pred`` (the measured non-hot writes' predicted categories,
    for the PLog) are given.

    ``static="segments"`` (default) gives the model the never-rewritten data that sits in
    segments of its own after the prefill (:func:`static_segment_blocks`: the last group's FIFO
    closed form assumes all its data is rewritten, and varmail leaves 86% of its space untouched,
    in whole files); ``"unwritten"`` every block the measured writes never touch (also those
    mixed with rewritten data, which the FIFO keeps copying); ``"none"`` leaves it all in the
    FIFO.
    ``periods``: ranges ``[start, end)`` of the measured writes; for each, the same configuration
    modelled on that period's PLog and hot share against the simulated WAF over the period (a
    non-stationary workload measured per stationary period).

    Besides the WAFs, the copies per user write out of every group (``G_hot``, ``G1..GN``),
    modelled (``h m_hot``, ``w_g m_g``, ``w_N u / (1 - u)``) and simulated (reclaimed segments x
    their valid ratio), to tell which term of the model is off."""
    from dogi_ml.markov.groups import best_configuration, evaluate_configuration
    from dogi_ml.sim import Simulator

    if static not in STATIC_RULES:
        raise ValueError(f"model_vs_simulator: static must be one of {STATIC_RULES}, got {static!r}")
    writes = np.ascontiguousarray(writes, np.int64)
    data = perfect_inputs(writes, capacity, mu, prefill=bool(sim_config.prefill))
    seg = int(sim_config.segment_blocks)
    kw = {"segment_blocks": seg, "reserved_blocks": seg * (int(sim_config.gc_free_segments) + 0.5), **model_kw}
    if static == "unwritten" and sim_config.prefill:
        touched = np.zeros(capacity, bool)
        touched[writes] = True
        kw["static_blocks"] = float(capacity - int(touched.sum()))
    plog_pred = data["pred"] if pred is None else np.asarray(pred)
    n_seg = int(np.floor(capacity * (1.0 + sim_config.op_ratio) / seg))
    rho = n_seg * seg / capacity
    common = dict(hot_share=data["hot_share"], hot_bound=data["mu"], hot_inv=data["hot_inv"], **kw)
    static_seen = set()
    while True:
        if groups is None:
            conf = best_configuration(plog_pred, data["plog_inv"], data["cat_upper"], capacity, rho, **common)
        else:
            conf = evaluate_configuration(
                groups, plog_pred, data["plog_inv"], data["cat_upper"], capacity, rho, **common
            )
        if static != "segments" or not sim_config.prefill:
            break
        # which prefill blocks land in the last group depends on the configuration, and the
        # configuration on the static data: iterate to a fixed point (two or three rounds)
        last_bound = data["cat_upper"][conf.groups[-2][-1]] if len(conf.groups) > 1 else data["mu"]
        blocks = float(static_segment_blocks(data["inv"], capacity, last_bound, seg))
        if blocks == common.get("static_blocks", 0.0) or blocks in static_seen:
            break
        static_seen.add(common.get("static_blocks", 0.0))
        common["static_blocks"] = blocks
    bounds = [int(b) for b in conf.bounds[:-1]]
    if assign is None:
        edges = [data["cat_upper"][g[-1]] for g in conf.groups[:-1]]
        assign = perfect_assignment(data["inv"], data["mu"], edges)
    pol = ChainOracle(data["mu"], bounds, assign=assign, gc=gc, final=final)
    res = Simulator(pol, sim_config, capacity, stream=writes).run(writes)
    user = max(1, int(res["user_writes"]))
    n = len(conf.groups)
    sim_copies = [
        float(g["reclaimed_segments"] * seg * (g["victim_valid_ratio"] or 0.0)) / user for g in res["groups"][: n + 1]
    ]
    model_copies = [conf.hot_share * conf.hot_mispredict] + [w * m for w, m in zip(conf.inflow[:-1], conf.mispredict)]
    model_copies.append(conf.waf - 1.0 - sum(model_copies))
    out = {
        "model_waf": conf.waf,
        "sim_waf": res["waf"],
        "rel_error": conf.waf / res["waf"] - 1,
        "groups": conf.groups,
        "bounds": bounds,
        "hot_share": data["hot_share"],
        "mu": data["mu"],
        "model_mispredict": conf.mispredict,
        "model_inflow": conf.inflow,
        "model_hot_mispredict": conf.hot_mispredict,
        "model_copies": model_copies,
        "sim_copies": sim_copies,
        "static_blocks": float(common.get("static_blocks", 0.0)),
        "sim_groups": res["groups"],
        "sim_reclaim_age": res["mean_reclaim_age"],
        "rejected": conf.rejected,
    }
    if periods:
        out["periods"] = _periods(periods, data, conf.groups, plog_pred, capacity, rho, common, res, writes.shape[0])
    return out


def _periods(periods, data, groups, plog_pred, capacity, rho, common, res, n_measured) -> list[dict]:
    """The configuration modelled on each period's PLog and hot share, against the simulated WAF
    over that period (see :func:`model_vs_simulator`)."""
    from dogi_ml.markov.groups import evaluate_configuration

    measured = data["inv"][data["stream"].shape[0] - n_measured :]
    hot = measured <= data["mu"]
    nonhot_index = np.cumsum(~hot) - 1  # position of each non-hot write in the PLog
    prefill = data["stream"].shape[0] - n_measured
    out = []
    for start, end in periods:
        if not 0 <= start < end <= n_measured:
            raise ValueError(f"model_vs_simulator: period [{start}, {end}) outside the {n_measured} measured writes")
        sel = np.zeros(n_measured, bool)
        sel[start:end] = True
        rows = nonhot_index[sel & ~hot]
        h = float(hot[start:end].mean())
        hot_inv = measured[start:end][hot[start:end]].astype(np.float64)
        kw = {**common, "hot_share": h, "hot_inv": hot_inv}
        conf = evaluate_configuration(
            groups, plog_pred[rows], data["plog_inv"][rows], data["cat_upper"], capacity, rho, **kw
        )
        sim = _period_sim_waf(res, prefill, start, end)
        out.append(
            {
                "start": int(start),
                "end": int(end),
                "hot_share": h,
                "model_waf": conf.waf,
                "sim_waf": sim,
                "rel_error": conf.waf / sim - 1 if sim else None,
            }
        )
    return out
