"""NoDaP: the DOGI paper's near-optimal data-placement oracle (dogi-fast26 §3).

``N`` groups ``G1..GN``; group ``i < N`` covers block invalidation times (BIR) up to
``bounds[i]`` user-written blocks, ``GN`` everything longer. Every write (user or GC) goes to the
group whose BIR covers its true *remaining* invalidation time, from the annotation.

Victim selection: scan ``G1..G(N-1)`` for an expired segment, i.e. one whose residence time
since its first write exceeds its group's BIR upper bound (all its blocks should be dead);
the oldest such segment of the lowest group is taken. If none has expired, the segment with
the fewest valid blocks in ``GN``; if no segment of ``GN`` holds garbage, the fewest valid
anywhere.

Group sizes are not fixed here: groups draw segments from one free pool, so a group's size is
whatever its traffic and BIR keep alive (the offline search below tunes the BIRs).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS, P_NSEG, SEG_SEALED
from dogi_ml.sim.victims import register_victim

from .annotate import NEVER, annotate


@nb.njit(cache=True)
def _group_of(bounds, remaining):
    for g in range(bounds.shape[0]):
        if remaining <= bounds[g]:
            return g
    return bounds.shape[0]


@nb.njit(cache=True)
def nodap_user(s, p, lba, now):
    inv, death, bounds = p
    t = inv[now]
    death[lba] = now + t if t < NEVER else NEVER
    return _group_of(bounds, t)


@nb.njit(cache=True)
def nodap_gc(s, p, lba, victim, now):
    inv, death, bounds = p
    d = death[lba]
    return _group_of(bounds, d - now if d < NEVER else NEVER)


@nb.njit(cache=True)
def nodap_victim(s, p, now):
    bounds = p[2]
    last = s.prm[P_NGROUPS] - 1
    nseg = s.prm[P_NSEG]
    # the oldest expired segment of the lowest group that has one
    best = -1
    best_group = last
    best_open = 1 << 62
    for seg in range(nseg):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        g = s.seg_group[seg]
        # expired, and holding garbage (a block relocated into the segment late may outlive it)
        if g < last and now - s.seg_open_time[seg] > bounds[g] and s.seg_valid[seg] < s.seg_wp[seg]:
            if g < best_group or (g == best_group and s.seg_open_time[seg] < best_open):
                best, best_group, best_open = seg, g, s.seg_open_time[seg]
    if best >= 0:
        return best
    fewest = 1 << 62
    any_best = -1
    any_fewest = 1 << 62
    for seg in range(nseg):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        v = s.seg_valid[seg]
        if s.seg_group[seg] == last and v < fewest and v < s.seg_wp[seg]:
            fewest, best = v, seg
        if v < any_fewest:
            any_fewest, any_best = v, seg
    # GN holds no garbage yet (e.g. right after the prefill): the fewest valid anywhere
    return best if best >= 0 else any_best


register_victim("nodap", nodap_victim)


class NoDaP(PlacementPolicy):
    """NoDaP placement with its own victim selector (``sim.victim`` is ignored)."""

    name = "nodap"
    victim = "nodap"
    needs_future = True
    place_user = nodap_user
    place_gc = nodap_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=None, bounds=None, **params):
        self.unresolved = bounds == "search"
        if self.unresolved:
            # resolved on the trace by the simulate pipeline (oracles.nodap.search), which then
            # builds the policy again with the bounds found
            super().__init__(int(n_groups) if n_groups else 2, **params)
            self.bounds = np.zeros(0, np.int64)
            return
        if not bounds:
            raise ValueError("policy nodap needs params.bounds: the BIR upper bounds of G1..G(N-1) in "
                             "blocks, increasing (e.g. [4096, 65536]); search them with oracles.nodap.search")
        b = [int(x) for x in bounds]
        if any(x <= 0 for x in b) or any(y <= x for x, y in zip(b, b[1:])):
            raise ValueError(f"policy nodap: bounds must be positive and increasing, got {b}")
        if n_groups is not None and int(n_groups) != len(b) + 1:
            raise ValueError(f"policy nodap: {len(b)} bounds make {len(b) + 1} groups, but n_groups={n_groups}")
        super().__init__(len(b) + 1, **params)
        self.bounds = np.asarray(b, np.int64)

    def bind(self, ctx: SimContext) -> tuple:
        if self.unresolved:
            raise ValueError("policy nodap: bounds=search must be resolved before the run (the simulate "
                             "command does it with oracles.nodap.search); give explicit bounds otherwise")
        inv, _prev = annotate(ctx.stream)
        return (inv, np.full(ctx.capacity, NEVER, np.int64), self.bounds.copy())

    def summary(self, state) -> dict:
        return {"nodap_bounds": [int(x) for x in self.bounds]}


def search(writes: np.ndarray, capacity: int, sim_config, max_groups: int = 8, min_gain: float = 0.05,
           candidates: np.ndarray | None = None, log=None) -> dict:
    """Offline configuration search with the simulator (DOGI §3): start with two groups, pick
    the best BIR boundary; then repeatedly add the boundary that lowers WAF most; stop when the
    gain is below ``min_gain`` (5%) or at ``max_groups``. Candidates default to powers of two
    from one segment to four capacities. Returns the best bounds, WAF, and the search history."""
    from dogi_ml.sim import Simulator

    seg = int(sim_config.segment_blocks)
    if candidates is None:
        hi = 4 * capacity
        candidates = np.unique(np.array([seg * 2 ** k for k in range(64) if seg * 2 ** k <= hi], np.int64))

    def waf(bounds):
        pol = NoDaP(bounds=list(bounds))
        return Simulator(pol, sim_config, capacity, stream=writes).run(writes)["waf"]

    history = []
    best_bounds: list[int] = []
    best_waf = float("inf")
    while len(best_bounds) + 1 < max_groups:
        trials = []
        for c in candidates:
            if int(c) in best_bounds:
                continue
            b = sorted(best_bounds + [int(c)])
            trials.append((waf(b), b))
        if not trials:
            break
        w, b = min(trials, key=lambda x: x[0])
        history.append({"n_groups": len(b) + 1, "bounds": b, "waf": w, "tried": len(trials)})
        if log:
            log(f"  NoDaP search: {len(b) + 1} groups, bounds {b}: WAF {w:.4f}")
        if best_bounds and w > best_waf * (1 - min_gain):
            if w < best_waf:
                best_bounds, best_waf = b, w
            break
        best_bounds, best_waf = b, w
    return {"bounds": best_bounds, "waf": best_waf, "n_groups": len(best_bounds) + 1, "history": history}
