"""NoDaP: the DOGI paper's near-optimal data-placement oracle (dogi-fast26 §3).

``N`` groups ``G1..GN``; group ``i < N`` covers block invalidation times (BIR) up to
``bounds[i]`` user-written blocks, ``GN`` everything longer. Every write (user or GC) goes to the
group whose BIR covers its true *remaining* invalidation time, from the annotation.

Victim selection: scan ``G1..G(N-1)`` for an expired segment, i.e. one whose residence time
since its first write exceeds its group's BIR upper bound (all its blocks should be dead);
the oldest such segment of the lowest group is taken. If none has expired, the segment with
the fewest valid blocks in ``GN``; if no segment of ``GN`` holds garbage, the fewest valid
anywhere.

Group sizes: the paper's configuration fixes each group's size in segments (its Table 2) and
searches it with the BIRs. Here ``sizes`` caps ``G1..G(N-1)`` (``GN`` has the rest): when no
segment has expired and a capped group holds more segments than its size, GC takes that group's
fewest-valid segment before turning to ``GN``. ``sizes=None`` is the shared pool: a group's size
is whatever its traffic and BIR keep alive. :func:`search` tunes the BIRs per N, then the sizes.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.errors import ConfigError
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from dogi_ml.sim.state import P_NGROUPS, P_NSEG, SEG_FREE, SEG_SEALED
from dogi_ml.sim.victims import register_victim

from .annotate import NEVER, annotate

#: a search's simulation is fed in this many slices; after each, one that can no longer beat the
#: WAF it is compared with stops (a group capped far below its need can copy 70x its writes)
PRUNE_SLICES = 64


class NodapState(NamedTuple):
    """NoDaP's kernel state."""

    inv: np.ndarray  # invalidation time of every write of the stream (prefill included)
    death: np.ndarray  # per LBA: the logical time its current version dies (NEVER if never)
    bounds: np.ndarray  # BIR upper bounds of G1..G(N-1)
    sizes: np.ndarray  # fixed sizes of G1..G(N-1) in segments (0 = no cap)
    held: np.ndarray  # per group: segments held, counted at each victim choice (scratch)
    occupancy: np.ndarray  # summed segments per group, then victim choices counted, first counted time


@nb.njit(cache=True)
def _group_of(bounds, remaining):
    for g in range(bounds.shape[0]):
        if remaining <= bounds[g]:
            return g
    return bounds.shape[0]


@nb.njit(cache=True)
def nodap_user(s, p, lba, now):
    t = p.inv[now]
    death, bounds = p.death, p.bounds
    death[lba] = now + t if t < NEVER else NEVER
    return _group_of(bounds, t)


@nb.njit(cache=True)
def nodap_gc(s, p, lba, victim, now):
    d = p.death[lba]
    bounds = p.bounds
    return _group_of(bounds, d - now if d < NEVER else NEVER)


@nb.njit(cache=True)
def nodap_victim(s, p, now):
    bounds, sizes, held, occupancy = p.bounds, p.sizes, p.held, p.occupancy
    last = s.prm[P_NGROUPS] - 1
    nseg = s.prm[P_NSEG]
    held[:] = 0
    # the oldest expired segment of the lowest group that has one
    best = -1
    best_group = last
    best_open = 1 << 62
    for seg in range(nseg):
        if s.seg_state[seg] == SEG_FREE:
            continue
        g = s.seg_group[seg]
        held[g] += 1
        if s.seg_state[seg] != SEG_SEALED:
            continue
        # expired, and holding garbage (a block relocated into the segment late may outlive it)
        if g < last and now - s.seg_open_time[seg] > bounds[g] and s.seg_valid[seg] < s.seg_wp[seg]:
            if g < best_group or (g == best_group and s.seg_open_time[seg] < best_open):
                best, best_group, best_open = seg, g, s.seg_open_time[seg]
    # mean segments per group at GC time, after the prefill (the search sizes groups from it)
    if now >= occupancy[last + 2]:
        for g in range(last + 1):
            occupancy[g] += held[g]
        occupancy[last + 1] += 1
    if best >= 0:
        return best
    # fixed group sizes: the group furthest over its size gives its fewest-valid segment
    over_group = -1
    most_over = 0
    for g in range(last):
        if sizes[g] > 0 and held[g] - sizes[g] > most_over:
            most_over, over_group = held[g] - sizes[g], g
    if over_group >= 0:
        fewest = 1 << 62
        for seg in range(nseg):
            if s.seg_state[seg] == SEG_SEALED and s.seg_group[seg] == over_group:
                v = s.seg_valid[seg]
                if v < fewest and v < s.seg_wp[seg]:
                    fewest, best = v, seg
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
    """NoDaP placement with its own victim selector (DOGI §3: the oldest expired segment of
    ``G1..G(N-1)``, else the fewest valid blocks in ``GN``); ``sim.victim`` cannot change it.

    ``bounds``: BIR upper bounds of ``G1..G(N-1)`` in blocks; ``sizes``: their sizes in segments
    (``None`` = one shared free pool); ``inv``: ``annotate(stream)[0]`` if already computed (the
    search passes it so each of its runs skips the annotation pass)."""

    name = "nodap"
    victim = "nodap"
    selector = "nodap"
    victim_rules = ()
    victim_note = "the oldest expired segment of G1..G(N-1), else the fewest valid blocks in GN (DOGI §3)"
    needs_future = True
    place_user = nodap_user
    place_gc = nodap_gc
    on_reclaim = no_reclaim_hook

    def __init__(self, n_groups=None, bounds=None, sizes=None, inv=None, **params):
        self.inv = inv
        self.unresolved = bounds == "search"
        if self.unresolved:
            # resolved on the trace by the simulate pipeline (oracles.nodap.search), which then
            # builds the policy again with the bounds found
            super().__init__(int(n_groups) if n_groups else 2, **params)
            self.bounds = np.zeros(0, np.int64)
            self.sizes = None
            return
        if not bounds:
            raise ValueError(
                "policy nodap needs params.bounds: the BIR upper bounds of G1..G(N-1) in "
                "blocks, increasing (e.g. [4096, 65536]); search them with oracles.nodap.search"
            )
        # a string other than "search" was read one character at a time ("invalid literal for
        # int() with base 10: 'b'"); a list of anything but whole numbers is refused with its key too
        whole = not isinstance(bounds, str) and all(
            isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and float(x).is_integer()
            for x in np.atleast_1d(bounds)
        )
        if not whole:
            raise ConfigError(
                f"policy nodap: params.bounds={bounds!r} is neither search nor a list of block counts",
                "give policy.params.bounds=search or e.g. policy.params.bounds=[4096,65536]",
            )
        b = [int(x) for x in bounds]
        if any(x <= 0 for x in b) or any(y <= x for x, y in zip(b, b[1:])):
            raise ValueError(f"policy nodap: bounds must be positive and increasing, got {b}")
        if n_groups is not None and int(n_groups) != len(b) + 1:
            raise ValueError(f"policy nodap: {len(b)} bounds make {len(b) + 1} groups, but n_groups={n_groups}")
        super().__init__(len(b) + 1, **params)
        self.bounds = np.asarray(b, np.int64)
        self.sizes = None
        if sizes is not None:
            if isinstance(sizes, str) or len(sizes) != len(b) or any(int(x) < 0 for x in sizes):
                raise ValueError(
                    f"policy nodap: params.sizes must be {len(b)} segment counts, the sizes "
                    f"of G1..G{len(b)} (0 = no cap; G{len(b) + 1} has the rest), or null for "
                    f"one shared free pool, got {sizes!r}"
                )
            self.sizes = [int(x) for x in sizes]

    def bind(self, ctx: SimContext) -> NodapState:
        if self.unresolved:
            raise ValueError(
                "policy nodap: bounds=search must be resolved before the run (the simulate "
                "command does it with oracles.nodap.search); give explicit bounds otherwise"
            )
        if self.inv is not None and len(self.inv) == len(ctx.stream):
            inv = self.inv
        else:
            inv, _prev = annotate(ctx.stream)
        n = self.n_groups
        sizes = np.zeros(n - 1, np.int64) if self.sizes is None else np.asarray(self.sizes, np.int64)
        # occupancy: summed segments per group, number of GC calls summed, first counted time
        occupancy = np.zeros(n + 2, np.int64)
        occupancy[n + 1] = ctx.prefill_blocks
        return NodapState(
            inv=inv,
            death=np.full(ctx.capacity, NEVER, np.int64),
            bounds=self.bounds.copy(),
            sizes=sizes,
            held=np.zeros(n, np.int64),
            occupancy=occupancy,
        )

    def summary(self, state) -> dict:
        occupancy = state.occupancy
        n = self.n_groups
        calls = int(occupancy[n])
        mean = [round(float(x) / calls, 2) for x in occupancy[:n]] if calls else None
        return {"nodap_bounds": [int(x) for x in self.bounds], "nodap_sizes": self.sizes, "nodap_mean_segments": mean}


def search_fingerprint(writes: np.ndarray, capacity: int, sim_config) -> str:
    """What a NoDaP evaluation's result depends on, as 16 hex digits: the writes, the capacity,
    every simulator setting and :func:`simulation_code_version`."""
    import dataclasses
    import hashlib

    from dogi_ml.sim.checkpoint import array_digest

    settings = dataclasses.asdict(sim_config) if dataclasses.is_dataclass(sim_config) else dict(sim_config)
    payload = {
        "writes": array_digest(writes),
        "capacity": int(capacity),
        "sim": settings,
        "code": simulation_code_version(),
    }
    return hashlib.blake2b(json.dumps(payload, sort_keys=True, default=repr).encode(), digest_size=8).hexdigest()


@functools.cache
def simulation_code_version() -> str:
    """16 hex digits over the sources a NoDaP simulation runs: this module and what it imports
    (the engine, its kernels, the annotation; ``dogi_ml.sim.checkpoint.import_closure``), and the
    engine's loop template, read as text. An edit elsewhere in the project (a report, another
    policy) keeps a search's journal usable; an edit of any of these starts it again. Computed
    once per process, like ``code_version``."""
    from dogi_ml.sim import kernels
    from dogi_ml.sim.checkpoint import import_closure, sources_version

    sim_dir = Path(kernels.__file__).resolve().parent
    return sources_version(
        import_closure("dogi_ml.oracles.nodap") + [sim_dir / "_loop_template.py", sim_dir / "_placeholders.py"]
    )


class _Evaluator:
    """Memoised NoDaP runs: (bounds, sizes) -> result, on a prefix or the whole trace. With a
    ``journal`` file every result is appended to it as it is made (one JSON line, flushed), and a
    journal of the same trace, settings and code (its first line's fingerprint) is read back first:
    a search stopped part-way resumes from its last simulation, and the search being deterministic
    it takes the same path to the same result. A journal of anything else is refused."""

    def __init__(self, writes, capacity, sim_config, bar, journal: Path | None = None):
        from dogi_ml.sim import Simulator

        self._simulator = Simulator
        self.writes = writes
        self.capacity = capacity
        self.cfg = sim_config
        self.bar = bar
        self.cache: dict = {}
        self.inv: dict = {}
        self.runs = 0  # simulations made by this process (a stopped one run again counts twice)
        self.read_back = 0  # settings answered from the journal when first asked
        self.asked: set = set()  # distinct settings asked for (simulated now or read back from the journal)
        self.resumed = 0
        self.journal = None
        if journal is not None:
            self._open_journal(Path(journal), search_fingerprint(writes, capacity, sim_config))

    def _open_journal(self, path: Path, fingerprint: str) -> None:
        if path.exists() and path.stat().st_size > 0:
            with path.open() as f:
                lines = f.read().splitlines()
            try:
                header = json.loads(lines[0])
            except (json.JSONDecodeError, IndexError):
                header = {}
            if header.get("fingerprint") != fingerprint:
                raise ValueError(
                    f"nodap search: the journal {path} belongs to another trace, setting or code version "
                    f"(fingerprint {header.get('fingerprint')!r}, this search's {fingerprint!r}); delete it "
                    "or give another path"
                )
            for line in lines[1:]:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    break  # a line cut short by the stop: the simulations from there run again
                key = (tuple(rec["bounds"]), None if rec["sizes"] is None else tuple(rec["sizes"]), int(rec["n"]))
                self.cache[key] = {
                    "waf": float(rec["waf"]),
                    "mean_segments": rec["mean_segments"],
                    **({"pruned": True} if rec.get("pruned") else {}),
                }
            self.resumed = len(self.cache)
            # drop a cut-short last line before appending
            with path.open("w") as f:
                f.write(lines[0] + "\n")
                for key, res in self.cache.items():
                    f.write(json.dumps(self._record(key, res)) + "\n")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
        self.journal = path.open("a")

    @staticmethod
    def _record(key, res) -> dict:
        bounds, sizes, n = key
        return {
            "bounds": [int(b) for b in bounds],
            "sizes": None if sizes is None else [int(x) for x in sizes],
            "n": n,
            "waf": res["waf"],
            "mean_segments": res["mean_segments"],
            **({"pruned": True} if res.get("pruned") else {}),
        }

    @property
    def evaluated(self) -> int:
        """Distinct settings asked for so far."""
        return len(self.asked)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None

    def __call__(self, bounds, sizes=None, n_writes=None, above: float | None = None) -> dict:
        """The run's ``{"waf", "mean_segments"}``. ``above``: the WAF the caller must beat. A
        simulation that provably ends above it (its GC writes so far already make a higher WAF)
        stops there and returns ``{"waf": that lower bound, "pruned": True}``: the search's
        choices are the same, since it only asks whether the run is better."""
        n = self.writes.size if n_writes is None else int(n_writes)
        key = (tuple(bounds), None if sizes is None else tuple(sizes), n)
        known = self.cache.get(key)
        if key not in self.asked:
            self.asked.add(key)
            self.read_back += known is not None  # asked for the first time: known from the journal

        # a stopped run answers only callers whose bar it already cleared
        if known is None or (known.get("pruned") and (above is None or known["waf"] <= above)):
            self.cache[key] = self._simulate(bounds, sizes, n, above)
            if self.journal is not None:
                self.journal.write(json.dumps(self._record(key, self.cache[key])) + "\n")
                self.journal.flush()
            self.runs += 1
            if self.bar is not None:
                self.bar.update(1)
        return self.cache[key]

    def _simulate(self, bounds, sizes, n: int, above: float | None) -> dict:
        w = self.writes[:n]
        if n not in self.inv:
            stream = np.concatenate([np.arange(self.capacity, dtype=np.int64), w]) if self.cfg.prefill else w
            self.inv[n] = annotate(stream)[0]
        pol = NoDaP(bounds=list(bounds), sizes=None if sizes is None else list(sizes), inv=self.inv[n])
        sim = self._simulator(pol, self.cfg, self.capacity, stream=w)
        sim.prefill(0)
        # the run's user writes when it ends: WAF = (user + GC + padding) / user only grows with
        # the GC writes, so (user + GC so far) / user is a lower bound of the final WAF
        user_at_end = sim.user_writes + n
        step = max(1, -(-n // PRUNE_SLICES))
        for start in range(0, n, step):
            sim.feed(w[start : start + step])
            if above is not None and start + step < n:
                floor = (user_at_end + sim.gc_writes + sim.padding_writes) / user_at_end
                if floor > above:
                    return {"waf": floor, "mean_segments": None, "pruned": True}
        r = sim.result()
        return {"waf": float(r["waf"]), "mean_segments": r["nodap_mean_segments"]}


def _check_search_args(
    writes, capacity, max_groups, min_gain, candidates, group_sizes, steps, max_evals_per_n, explore_fraction
):
    if writes.ndim != 1 or writes.size == 0:
        raise ValueError("nodap search: writes must be a non-empty 1-D array of LBAs")
    if int(writes.min()) < 0 or int(writes.max()) >= capacity:
        raise ValueError(
            f"nodap search: LBAs must lie in [0, capacity={capacity}); raise the capacity "
            "or remap the trace (pipeline.simulate.simulation_writes)"
        )
    if int(max_groups) < 2:
        raise ValueError(f"nodap search: max_groups must be >= 2 (one BIR bound at least), got {max_groups}")
    if not 0 <= float(min_gain) < 1:
        raise ValueError(f"nodap search: min_gain is a fraction in [0, 1) (0.05 = stop below 5%), got {min_gain}")
    if group_sizes not in ("search", "shared"):
        raise ValueError(
            f"nodap search: group_sizes must be 'search' (the paper: fixed sizes, searched "
            f"with the BIRs) or 'shared' (one free pool), got {group_sizes!r}"
        )
    if not steps or any(float(x) <= 0 for x in steps) or list(steps) != sorted(steps, reverse=True):
        raise ValueError(
            f"nodap search: steps are positive log2 step sizes, decreasing (e.g. [1, 0.5, 0.25]), got {steps}"
        )
    if int(max_evals_per_n) < 1:
        raise ValueError(f"nodap search: max_evals_per_n must be >= 1, got {max_evals_per_n}")
    if not 0 < float(explore_fraction) <= 1:
        raise ValueError(
            f"nodap search: explore_fraction is the share of the trace the search explores "
            f"on, in (0, 1], got {explore_fraction}"
        )
    if candidates is not None:
        c = np.asarray(candidates)
        if c.ndim != 1 or c.size == 0 or np.any(c <= 0):
            raise ValueError(f"nodap search: candidates must be positive BIR bounds in blocks, got {candidates}")


def search(
    writes: np.ndarray,
    capacity: int,
    sim_config,
    max_groups: int = 10,
    min_gain: float = 0.05,
    candidates: np.ndarray | None = None,
    log=None,
    group_sizes: str = "search",
    steps=(1.0, 0.5, 0.25),
    max_evals_per_n: int = 120,
    explore_fraction: float = 1.0,
    progress: bool = True,
    journal: str | Path | None = None,
) -> dict:
    """Offline configuration search with the simulator (DOGI §3).

    For N = 2, 3, ...: the N-1 BIR bounds are optimised by coordinate descent in log2 space
    (each bound moved by x2^±step while it lowers WAF, step halving through ``steps``), started
    from the best of: the previous N's optimum with one bound inserted at the best candidate,
    the greedy power-of-two chain (the earlier search, kept so the result is never worse), and the
    annotation's invalidation-time quantiles. With ``group_sizes='search'`` (the paper, Table 2)
    the sizes of G1..G(N-1) are then searched as fractions of their mean shared-pool size, kept
    if they lower WAF, and the bounds descended once more at those sizes. N grows until WAF
    improves by less than ``min_gain`` (and the greedy chain has stopped too) or reaches
    ``max_groups``; the lowest WAF over all N is returned.

    Candidates (the coarse grid) default to powers of two from one segment to four capacities.
    ``explore_fraction`` < 1 explores on that prefix of the trace; each N's choice is then
    verified on the whole trace. Deterministic. ``journal``: a file that keeps every simulation's
    result as it is made, so that the same search run again (same trace, settings and code)
    resumes where it stopped (:class:`_Evaluator`). Returns bounds, sizes (None: shared pool),
    WAF, n_groups, the per-N history, the number of simulations (and of results read back from the
    journal) and the wall time."""
    writes = np.ascontiguousarray(writes, dtype=np.int64)
    capacity = int(capacity)
    _check_search_args(
        writes, capacity, max_groups, min_gain, candidates, group_sizes, steps, max_evals_per_n, explore_fraction
    )
    n_explore = max(1, int(round(writes.size * float(explore_fraction))))
    t0 = time.perf_counter()

    from dogi_ml.progress import bar as progress_bar

    # off with --quiet, when stderr is not a terminal, or progress=False
    bar = progress_bar(None, "NoDaP search", "sim", requested=progress)
    ev = _Evaluator(writes, capacity, sim_config, bar, journal)
    if ev.resumed and log is not None:
        log(f"NoDaP search: {ev.resumed} simulations read back from {journal}")
    try:
        return _search(
            ev, bar, writes, capacity, sim_config, max_groups, min_gain, candidates, log, group_sizes, steps,
            max_evals_per_n, n_explore, t0,
        )  # fmt: skip
    finally:
        ev.close()
        bar.close()


def _search(
    ev, bar, writes, capacity, sim_config, max_groups, min_gain, candidates, log, group_sizes, steps,
    max_evals_per_n, n_explore, t0,
) -> dict:  # fmt: skip
    """:func:`search`'s body, on its evaluator."""
    seg = int(sim_config.segment_blocks)
    hi = 4 * capacity
    if candidates is None:
        candidates = np.array([seg * 2**k for k in range(64) if seg * 2**k <= hi], np.int64)
    grid = sorted({int(c) for c in candidates})
    hi = max(hi, grid[-1])

    def waf(bounds, sizes=None, above=None):
        """WAF on the explored prefix; with ``above``, any figure above it may be a lower bound."""
        return ev(bounds, sizes, n_explore, above)["waf"]

    def full(bounds, sizes=None):
        return ev(bounds, sizes)["waf"]

    def insert_best(base):
        """The best of ``base`` plus one coarse-grid bound (the greedy step)."""
        best, best_w = None, float("inf")
        for trial in (sorted(base + [c]) for c in grid if c not in base):
            w = waf(trial, above=best_w)
            if w < best_w:  # the first of equals, as min() would
                best, best_w = trial, w
        return best, best_w

    # invalidation times of the measured writes (the prefill's blocks are all rewritten or NEVER)
    inv = annotate(writes[:n_explore])[0]
    finite = inv[inv < NEVER]

    def quantile_start(n):
        if finite.size == 0:
            return None
        q = np.quantile(finite, np.arange(1, n) / n, method="lower").astype(np.int64)
        b = sorted({int(min(max(x, 1), hi)) for x in q})
        return b if len(b) == n - 1 else None

    def descend(bounds, budget, sizes=None, step_list=steps):
        """Coordinate descent over log2(bounds) at fixed sizes; returns (bounds, waf, evaluations)."""
        best, best_w = list(bounds), waf(bounds, sizes)
        used = 0
        for step in step_list:
            improved = True
            while improved and used < budget:
                improved = False
                for i in range(len(best)):
                    lo_i = best[i - 1] + 1 if i else 1
                    hi_i = best[i + 1] - 1 if i + 1 < len(best) else hi
                    for direction in (1, -1):
                        x = int(round(best[i] * 2.0 ** (direction * step)))
                        x = min(max(x, lo_i), hi_i)
                        if x == best[i] or used >= budget:
                            continue
                        trial = best[:i] + [x] + best[i + 1 :]
                        used += 1
                        w = waf(trial, sizes, above=best_w)
                        if w < best_w - 1e-12:
                            best, best_w, improved = trial, w, True
                            break
        return best, best_w, used

    def size_search(bounds, base_w, budget):
        """Sizes of G1..G(N-1) as fractions of their mean shared-pool size, one group at a time."""
        mean = ev(bounds, None, n_explore)["mean_segments"]
        if not mean:
            return None, base_w, 0
        sizes = [None] * len(bounds)  # None: not capped yet
        best_w, used = base_w, 0

        def as_sizes(s):
            return None if all(x is None for x in s) else [0 if x is None else x for x in s]

        for frac_set in ((0.25, 0.5, 0.75, 0.9), None):
            for g in range(len(bounds)):
                if frac_set is None:  # refine around the chosen size
                    if sizes[g] is None:
                        continue
                    tries = {max(1, int(round(sizes[g] * f))) for f in (0.85, 1.15)}
                else:
                    tries = {max(1, int(round(mean[g] * f))) for f in frac_set}
                for x in sorted(tries):
                    if used >= budget or x == sizes[g]:
                        continue
                    trial = sizes[:g] + [x] + sizes[g + 1 :]
                    used += 1
                    w = waf(bounds, as_sizes(trial), above=best_w)
                    if w < best_w - 1e-12:
                        sizes, best_w = trial, w
        return as_sizes(sizes), best_w, used

    history = []
    greedy: list[int] = []  # the greedy power-of-two chain
    greedy_w = float("inf")
    greedy_running = True
    greedy_best = ([], float("inf"))
    prev_best: list[int] = []
    prev_w = float("inf")
    overall = None
    n = 2
    while n <= int(max_groups):
        bar.set_postfix_str(f"N={n}")
        before = ev.evaluated
        starts = []
        if greedy_running:
            g_b, g_w = insert_best(greedy)
            if g_b is None:
                greedy_running = False
            else:
                if greedy and g_w > greedy_w * (1 - float(min_gain)):
                    greedy_running = False  # the earlier search stops here
                greedy, greedy_w = g_b, g_w
                if g_w < greedy_best[1]:
                    greedy_best = (g_b, g_w)
                starts.append(g_b)
        ins, _ = insert_best(prev_best) if prev_best else (None, None)
        q = quantile_start(n)
        starts += [b for b in (ins, q) if b is not None]
        if not starts:
            break
        start = min(starts, key=waf)
        bounds, w, _ = descend(start, int(max_evals_per_n))
        shared_bounds = bounds
        sizes = None
        if group_sizes == "search":
            sizes, w, _ = size_search(bounds, w, max(1, int(max_evals_per_n) // 2))
            if sizes is not None:
                # the BIRs again at the sizes found, at the finer steps
                bounds, w, _ = descend(bounds, max(1, int(max_evals_per_n) // 2), sizes, steps[1:] or steps)
        w_full = full(bounds, sizes)
        entry = {
            "n_groups": n,
            "bounds": bounds,
            "sizes": sizes,
            "waf": w_full,
            "shared_pool_waf": full(bounds, None),
            "start": start,
            # the optimum with one shared pool (before the size search) for comparison
            "shared_pool_best": {"bounds": shared_bounds, "waf": full(shared_bounds, None)},
            "tried": ev.evaluated - before,
        }
        history.append(entry)
        if log:
            log(
                f"  NoDaP search: {n} groups, bounds {bounds}, sizes {sizes}: WAF {w_full:.4f} "
                f"({entry['tried']} simulations)"
            )
        if overall is None or w_full < overall["waf"]:
            overall = entry
        gained = not prev_best or w_full <= prev_w * (1 - float(min_gain))
        prev_best, prev_w = bounds, min(prev_w, w_full)
        if not gained and not greedy_running:
            break
        n += 1
    # the greedy chain's own optimum, in case it beat every descent (the descent starts from it,
    # so only a difference between prefix and whole trace can cause this)
    g_bounds = greedy_best[0]
    g_full = full(g_bounds) if g_bounds else float("inf")
    if g_full < overall["waf"]:
        overall = {"n_groups": len(g_bounds) + 1, "bounds": g_bounds, "sizes": None, "waf": g_full}
    bar.close()
    return {
        "bounds": overall["bounds"],
        "sizes": overall["sizes"],
        "waf": overall["waf"],
        "n_groups": overall["n_groups"],
        "history": history,
        # the settings simulated, whether in this process or read back from a journal (the same
        # number for the same search); of them read back (not part of the outcome: TIMING_KEYS)
        "simulations": ev.evaluated,
        "simulations_read_back": ev.read_back,
        # ... of them known only as worse than the figure compared with: stopped part-way
        "simulations_pruned": sum(1 for key in ev.asked if ev.cache[key].get("pruned")),
        "seconds": round(time.perf_counter() - t0, 2),
        "greedy": {"bounds": g_bounds, "waf": g_full},
    }
