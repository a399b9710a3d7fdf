"""Hybrid (issue 40): DOGI's online lifetime model, MINOS's OP model as the group planner, GC
relocation by predicted remaining lifetime, expiry victims over the run's rule.

Built on :class:`dogi_ml.policies.dogi.DOGI` (its features, sample ring, online retraining, Hot
Filter, Frozen Filter, Kaplan-Meier remaining-lifetime table, fallback to the base design and
its ghost comparison) with four parts of its own, each a switch (``policy.params``):

- ``lifetimes``: ``model`` -- every non-hot user write gets a predicted lifetime from the model's
  class probabilities, not its argmax class: ``log2 t = sum_k P_k m_k``, ``m_k`` the mean log2
  invalidation time of the labelled samples of class ``k`` (the classes' calibrated centres;
  ``score=argmax`` uses the argmax class's centre only); ``oracle`` -- the true lifetime from the
  annotation (``oracles.annotate``), the "perfect lifetimes through the same planner" bound;
  ``popularity`` -- an oracle too, *not causal*: every write of an LBA gets the LBA's expected
  lifetime ``N / c`` (``N`` trace writes, ``c`` the LBA's writes among them, counted in hindsight
  over the whole trace, or over each window of ``popularity_window`` capacities for a phased
  workload: :func:`popularity_lifetimes`), i.e. its write probability known exactly but not its
  realised future. On a stream of independent draws from fixed per-LBA probabilities (``zipf``)
  that is everything a causal predictor could learn, so this source bounds what a better model
  could reach through the same planner (docs/hybrid.md, "What limits the hybrid"); ``frequency``
  -- causal: the same estimate from the past only, ``t / c_t`` at trace write ``t`` for an LBA
  written ``c_t`` times so far (this write included); with ``frequency_halflife`` both counts
  decay by half every that many capacities, so the estimate follows a workload whose
  popularity moves. Lifetimes are kept as quarter-octave buckets (``bucket = ceil(4 log2 t)``).
- ``groups``: ``opmodel`` -- between chunks (at every retraining) the planner reads the sample
  ring: the samples older than the horizon, each with its predicted and its true (censored at the
  horizon) lifetime. For each number of groups ``K``, the thresholds on the *predicted*
  lifetimes are :func:`markov.opmodel.thresholds_for_op` (the exact dynamic program) for the OP
  budget the device really has (``sim.op_ratio`` of the capacity, less the GC's free reserve, one
  open segment per group and the hot group's dead space); then each group's *true* lifetime CDF
  (the blocks the model puts there, mispredictions included) gives its expiry age, the age at
  which it has spent the OP the plan gave it, and the GC share it will really pay. ``K`` is the
  one with the lowest modelled WAF. Its modelled WAF counts a fraction of the GC writes
  (docs/hybrid.md: a censored sample dies at the horizon, and the OP budgets only the dead space
  of blocks dying inside their group's reclaim age). ``fifo`` -- the same samples, groups of
  consecutive predicted-lifetime buckets each a FIFO log with its own reclaim period, the copies
  and space from the realised lifetimes (:func:`plan_fifo_groups`: its modelled WAF follows the
  simulator's). ``dogi`` -- DOGI's Markov-chain search over its classes.
- ``relocation``: ``predicted`` -- a GC survivor goes to the group whose range covers its
  predicted remaining lifetime (DOGI's Kaplan-Meier table of its class at its age; the oracle's
  true remaining lifetime; for ``popularity`` and ``frequency`` the LBA's expected lifetime now,
  which for a memoryless block is also its expected remaining lifetime at any age), never hotter
  than its source (the model's lifetimes only; the other sources skip the Frozen Filter too);
  ``censored`` -- for a count source (``frequency``, or ``select`` when it chose the counts) the
  Kaplan-Meier mean remaining lifetime of the survivor's predicted-lifetime octave at its age,
  from the plan's samples, memoryless beyond their horizon (:func:`censored_residuals`), instead
  of the memoryless ``e``; for the model's lifetimes the same as ``predicted`` (its class's
  Kaplan-Meier table); refused with the oracles, which know their lifetimes;
  ``age`` -- its age stands for its remaining lifetime; ``dogi`` -- DOGI's ML-Reloc and Frozen
  Filter as they are.
- ``victims``: ``expiry`` -- a dead segment, else the oldest expired segment of a bounded group,
  else the run's victim rule (``policy.victim`` / ``sim.victim``, any general rule); ``rule`` --
  the run's rule only. The rule is the run's: ``sim.victim`` is honoured or refused as for any
  scheme (:func:`dogi_ml.sim.victims.resolve_victim`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numba as nb
import numpy as np
from scipy.stats import kendalltau

from dogi_ml.intrinsics import prefetch_span
from dogi_ml.markov.opmodel import InvalidationCDF, assign_streams, thresholds_for_op
from dogi_ml.oracles.annotate import NEVER, annotate
from dogi_ml.sim.policy_api import SimContext, new_scalars, record, refuse_unread_params, scalar_fields
from dogi_ml.sim.state import P_NSEG, P_SEG_BLOCKS, SEG_SEALED
from dogi_ml.sim.victims import (
    GENERAL_VICTIMS,
    cost_benefit,
    cost_benefit_sepbit,
    cost_benefit_sqrt,
    d_choices,
    fifo,
    greedy,
    register_victim,
)

from . import register
from .dogi import (
    DOGI,
    G_FRZN,
    INF,
    MODE_ML,
    N_CAT,
    N_GROUPS,
    DogiState,
    _remaining,
    dogi_gc,
    dogi_prefetch,
    dogi_user,
    km_steps,
    remaining_table,
)

#: quarter-octave lifetime buckets: bucket b holds lifetimes in (2^((b-1)/4), 2^(b/4)] blocks
N_BUCKETS = 128
NEVER_BUCKET = N_BUCKETS - 1
BUCKETS_PER_OCTAVE = 4
#: the lifetime sources that count each LBA's writes (early_plan plans on their predictions)
COUNTING = ("frequency", "select")
#: the victim rules the hybrid's selector can fall back to, in the order of its rule codes
RULES = tuple(GENERAL_VICTIMS)
# _rule_victim's codes are these positions
assert RULES == ("greedy", "cost_benefit", "cost_benefit_sepbit", "cost_benefit_sqrt", "fifo", "d_choices")
RULE_COST_BENEFIT = RULES.index("cost_benefit")

CHOICES = {
    "lifetimes": ("model", "oracle", "popularity", "frequency", "select"),
    "score": ("expected", "argmax"),
    "groups": ("opmodel", "fifo", "dogi"),
    "relocation": ("predicted", "censored", "age", "dogi"),
    "victims": ("expiry", "rule"),
}

HYBRID_SCALARS = scalar_fields(
    planned=np.int64,  # 1: the planner's configuration is applied (bucket -> group)
    oracle=np.int64,  # 1: lifetimes from the annotation
    popularity=np.int64,  # 1: each LBA's expected lifetime from its hindsight write count
    frequency=np.int64,  # 1: each LBA's expected lifetime from its write count so far (causal)
    counting=np.int64,  # 1: the per-LBA counts are kept (lifetimes=frequency or select)
    variant=np.int64,  # the counts the frequency source reads: an index into freq_decays
    select=np.int64,  # 1: lifetimes=select (the source is chosen at every plan)
    pop_window=np.int64,  # popularity: trace writes per counting window (the whole trace: one window)
    relocation=np.int64,  # 0 predicted, 1 age, 2 DOGI's ML-Reloc, 3 censored
    expiry=np.int64,  # 1: expired segments first (victims=expiry)
    rule=np.int64,  # the run's victim rule, an index into RULES
    reloc_floor=np.int64,  # 1: a survivor never goes to a hotter group than its source
    reset=np.int64,  # 1: count_reset (the undecayed counts restart at a detected change)
    reset_undecayed=np.int64,  # count_reset: the count variant restarted (the undecayed one)
    reset_fast=np.int64,  # count_reset: the count variant it is tested against (the fastest decay)
)
RELOC_PREDICTED, RELOC_AGE, RELOC_DOGI, RELOC_CENSORED = 0, 1, 2, 3
#: relocation=censored's table rows: octaves of the count source's predicted lifetime
N_OCTAVES = N_BUCKETS // BUCKETS_PER_OCTAVE
#: the hybrid's default sampling: one in this many non-hot writes per GiB of capacity (never fewer)
SAMPLE_EVERY_PER_GIB = 10
GIB_BLOCKS = 262_144  # 1 GiB in 4 KiB blocks


class HybridState(NamedTuple):
    """DOGI's state (every field, so DOGI's kernels and methods run on it) and the hybrid's."""

    scalars: np.ndarray
    preds: np.ndarray
    cat2group: np.ndarray
    group_lo: np.ndarray
    group_hi: np.ndarray
    group_final: np.ndarray
    bounds: np.ndarray
    base_bounds: np.ndarray
    remaining: np.ndarray
    age_grid: np.ndarray
    rows: np.ndarray
    user_confusion: np.ndarray
    gc_destinations: np.ndarray
    ring: tuple
    group_expiry: np.ndarray
    chunk_features: np.ndarray
    sample_features: np.ndarray
    hyb: np.ndarray  # one HYBRID_SCALARS record
    scores: np.ndarray  # int8 per write of the current chunk: its lifetime bucket, -1 if none
    bucket2group: np.ndarray  # int64 per bucket: its group G1..GK
    inv: np.ndarray  # oracle: the invalidation time of every write (prefill included); else empty
    death: np.ndarray  # oracle: per LBA, the time its live version dies (NEVER if never); else empty
    expected: np.ndarray  # popularity: float64 per window and LBA, its expected lifetime; else empty
    freq_decays: np.ndarray  # counting: float64 per count variant, its decay rate per user write (0: none)
    freq_total: np.ndarray  # counting: float64 per variant, the (decayed) trace writes up to freq_total_at
    freq_total_at: np.ndarray  # counting: int64 per variant, the time freq_total is for (-1: none yet)
    counts: np.ndarray  # counting: float64 row per LBA (counts_table): [COUNTED_AT] when its counts were last brought up to date, [1 + v] its trace writes so far in variant v (decayed to then); else no rows
    sample_bucket: np.ndarray  # counting: int8 per variant and ring slot, the sample's lifetime bucket when written
    sample_model_bucket: (
        np.ndarray
    )  # select: int8 per ring slot, the model's bucket for the sample when written (-1: none)
    count_residual: np.ndarray  # relocation=censored: float64 [N_OCTAVES, N_AGE_GRID], see censored_residuals
    count_tail: np.ndarray  # relocation=censored: float64, the same shape: the share alive at the horizon
    count_change: np.ndarray  # count_reset: float64 [CHANGE_FIELDS], the change detector's state; else empty
    count_change_at: np.ndarray  # count_reset: int64 [MAX_CHANGE_TIMES], the user writes at which changes were detected


assert HybridState._fields[: len(DogiState._fields)] == DogiState._fields


def lifetime_bucket(t) -> np.ndarray:
    """Quarter-octave bucket of lifetimes ``t`` (user writes, >= 1; ``NEVER`` or beyond the last
    bucket -> ``NEVER_BUCKET``)."""
    t = np.asarray(t, np.float64)
    b = np.ceil(BUCKETS_PER_OCTAVE * np.log2(np.maximum(t, 1.0)))
    return np.where(t >= float(NEVER) / 2, NEVER_BUCKET, np.clip(b, 0, NEVER_BUCKET - 1)).astype(np.int64)


def bucket_time(b) -> np.ndarray:
    """The upper edge of bucket ``b`` in user writes (``inf`` for ``NEVER_BUCKET``)."""
    b = np.asarray(b, np.float64)
    return np.where(b >= NEVER_BUCKET, np.inf, np.exp2(b / BUCKETS_PER_OCTAVE))


# The per-block functions (hybrid_user, hybrid_gc and what they call) are inline="always";
# dogi_ml/sim/_loop_template.py says why. Left to LLVM, the loop called hybrid_user
# (its IR at 498ccbd), and the default hybrid's loop took 1.28 s on zipf 1 GiB against 0.48 s.
@nb.njit(cache=True, inline="always")
def _bucket_of(t):
    if t >= NEVER // 2:
        return NEVER_BUCKET
    if t <= 1:
        return 0
    b = int(np.ceil(BUCKETS_PER_OCTAVE * np.log2(float(t))))
    return min(b, NEVER_BUCKET - 1)


def popularity_lifetimes(stream: np.ndarray, prefill: int, n_lbas: int, window: int | None = None) -> np.ndarray:
    """Per window and LBA, the expected lifetime (user writes) of a write to the LBA if the
    window's writes were independent draws with the LBA's in-hindsight write probability ``c / L``:
    ``L / c``, ``L`` the window's writes, ``c`` the LBA's writes among them; ``NEVER`` for an LBA
    the window never writes. The windows cut the trace's writes (``stream[prefill:]``, the prefill
    excluded: it writes every block once in order, not by popularity) every ``window`` writes
    (``None``: one window, the whole trace; the last one may be shorter). (The lifetime of a write
    with probability ``p`` per write is geometric on 1, 2, ... with mean ``1 / p``, and
    memoryless: ``1 / p`` is also its expected remaining lifetime at any age.) float64, shape
    ``(windows, n_lbas)``."""
    trace_writes = np.asarray(stream[int(prefill) :], np.int64)
    n = trace_writes.size
    window = n if window is None else int(window)
    if window < 1:
        raise ValueError(f"popularity_lifetimes: window must be >= 1 writes, got {window}")
    if n and int(trace_writes.max()) >= n_lbas:
        raise ValueError(f"popularity_lifetimes: a write addresses LBA {int(trace_writes.max())} >= {n_lbas} LBAs")
    starts = range(0, max(n, 1), window)
    out = np.full((len(starts), int(n_lbas)), float(NEVER), np.float64)
    for j, a in enumerate(starts):
        part = trace_writes[a : a + window]
        counts = np.bincount(part, minlength=int(n_lbas)).astype(np.float64)
        written = counts > 0
        out[j, written] = part.size / counts[written]
    return out


#: the generators whose per-LBA write probabilities ``generator_lifetimes`` knows
PROBABILITY_GENERATORS = ("zipf", "phase_shift")


def generator_lifetimes(meta: dict, n_lbas: int, n_trace_writes: int) -> tuple[np.ndarray, int]:
    """``popularity_from=generator``: the expected lifetimes ``1 / p`` from the write probabilities
    ``p`` the generator drew the trace from (``dogi_ml/traces/generators.py``; the trace's
    ``meta``: generator, seed and parameters), as :func:`popularity_lifetimes` estimates them from
    counts. ``zipf``: one window, ``p`` the Zipf law over the working set through the sampler's
    rank-to-address permutation; ``phase_shift``: one window per phase, each phase's Zipf law
    through its scramble. Returns ``(expected (windows, n_lbas), writes per window)``."""
    from dogi_ml.traces.generators import ZipfSampler, _rng, _scramble_array, _scramble_params

    kind = meta.get("generator")
    if kind not in PROBABILITY_GENERATORS:
        raise ValueError(
            f"policy hybrid: popularity_from=generator knows the probabilities of {', '.join(PROBABILITY_GENERATORS)}, "
            f"not of workload {kind or meta.get('name')!r}: use popularity_from=counts"
        )
    cap, seed, params = int(meta["capacity_blocks"]), int(meta["seed"]), dict(meta["params"])
    if cap != n_lbas:
        raise ValueError(
            f"policy hybrid: popularity_from=generator needs the generator's capacity ({cap}) as the run's"
        )
    never = float(NEVER)
    if kind == "zipf":
        if int(params["request_blocks"]) != 1:
            raise ValueError("policy hybrid: popularity_from=generator needs zipf's request_blocks=1")
        wss = max(1, int(cap * float(params["wss_fraction"])))
        sampler = ZipfSampler(wss, float(params["theta"]), seed)
        out = np.full((1, n_lbas), never)
        out[0, sampler.address_of_rank(np.arange(wss))] = 1.0 / sampler.probabilities()
        return out, max(1, int(n_trace_writes))
    phase = 2 * cap if params["phase_writes"] is None else int(params["phase_writes"])
    thetas = (float(params["theta_a"]), float(params["theta_b"]))
    prng = _rng(seed + 2)  # the generator's scramble stream, drawn in the same order
    shared = None if params["reshuffle"] else _scramble_params(cap, prng)
    n_phases = max(1, -(-int(n_trace_writes) // phase))
    out = np.empty((n_phases, n_lbas))
    ranks = np.arange(cap, dtype=np.int64)
    for k in range(n_phases):
        sp = _scramble_params(cap, prng) if params["reshuffle"] else shared
        address = np.empty(cap, np.int64)
        _scramble_array(ranks, cap, sp, address)
        weights = (ranks + 1.0) ** -thetas[k % 2]
        out[k, address] = weights.sum() / weights
    return out, phase


@nb.njit(cache=True, inline="always")
def _expected_lifetime(p, lba, now):
    """``lifetimes=popularity``: the expected (remaining) lifetime of ``lba`` at ``now``, from the
    counting window ``now`` falls in (the prefill: the first window's)."""
    e = p.expected
    t = now - p.scalars[0].prefill
    j = 0 if t < 0 else min(t // p.hyb[0].pop_window, e.shape[0] - 1)
    return e[j, lba]


def scaled_sample_every(capacity: int) -> int:
    """The hybrid's default sampling rate: one in 10 non-hot writes per GiB of ``capacity``
    (blocks), never fewer than 1 in 10."""
    return max(SAMPLE_EVERY_PER_GIB, round(SAMPLE_EVERY_PER_GIB * capacity / GIB_BLOCKS))


def _hot_filter_off(state) -> None:
    """Switch DOGI's Hot Filter off: no lifetime is <= 0, so nothing goes to G_hot, and mu no
    longer adapts."""
    st = record(state.scalars)
    st.hot_threshold = 0
    st.adapt_mu = 0
    state.bounds[0] = 0
    state.group_hi[0] = 0


def order_scores(candidates: list, inv: np.ndarray, horizon: int) -> list[float]:
    """``lifetimes=select``'s score of each candidate's predicted buckets: Kendall's tau-b against
    the samples' lifetimes ``inv`` (user writes; negative: not invalidated yet) censored at
    ``horizon``. Every sample has lived the horizon, so the censoring time is common: a pair's
    order is known unless both outlived it, a tie, which makes tau-b Harrell's concordance
    rescaled. -1 for a constant prediction or fewer than two samples (no order to judge)."""
    censored = np.where((inv >= 0) & (inv <= horizon), inv, horizon + 1)
    scores = []
    for b in candidates:
        ok = b.size > 1 and np.ptp(b) > 0
        tau = kendalltau(b, censored, variant="b").statistic if ok else np.nan
        scores.append(float(tau) if np.isfinite(tau) else -1.0)
    return scores


#: relocation=censored: an octave with fewer mature samples than this keeps the memoryless estimate
MIN_OCTAVE_SAMPLES = 64


def censored_residuals(
    buckets: np.ndarray, inv: np.ndarray, horizon: float, ages: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``relocation=censored``'s tables for a count source, per octave of the samples' predicted
    lifetime (row ``bucket // 4``) and age (columns: ``ages``): ``residual``, the Kaplan-Meier
    mean remaining lifetime restricted to the horizon, ``int_a^h S / S(a)``, and ``tail``, the
    share of those alive at ``a`` still alive at the horizon, ``S(h) / S(a)``; -1 where no sample
    tells (an octave with fewer than ``MIN_OCTAVE_SAMPLES``, ``S(a) = 0`` or ``a >= h``). ``inv``
    is each sample's lifetime (user writes; negative or beyond ``horizon``: alive at the horizon,
    which every sample has lived).

    A survivor of predicted lifetime ``e`` and age ``a`` is then expected to live
    ``residual + tail x e`` more: beyond the horizon, which no sample has seen, memoryless at
    ``e``. For memoryless lifetimes (zipf) that is ``e`` at every age, relocation=predicted's
    estimate; where the hazard falls with age (ycsb: a survivor of one expected lifetime has 2.8
    of them left, docs/hybrid.md) it grows with the age, which the counts alone cannot see."""
    buckets = np.asarray(buckets, np.int64)
    inv = np.asarray(inv, np.float64)
    ages = np.asarray(ages, np.float64)
    died = (inv >= 0) & (inv <= horizon)
    times = np.where(died, inv, float(horizon))
    residual = np.full((N_OCTAVES, ages.size), -1.0)
    tail = np.full((N_OCTAVES, ages.size), -1.0)
    octave = np.minimum(buckets, NEVER_BUCKET) // BUCKETS_PER_OCTAVE
    for o in np.unique(octave):
        sel = octave == o
        if int(sel.sum()) < MIN_OCTAVE_SAMPLES:
            continue
        knots, level, area = km_steps(times[sel], died[sel])
        area_h = area[-1] + level[-1] * (horizon - knots[-1])  # the last level holds up to the horizon
        i = np.searchsorted(knots, ages, side="right") - 1
        s_a = level[i]
        ok = (ages < horizon) & (s_a > 0)
        int_a = area[i] + level[i] * (ages - knots[i])
        residual[o, ok] = (area_h - int_a[ok]) / s_a[ok]
        tail[o, ok] = level[-1] / s_a[ok]
    return residual, tail


@nb.njit(cache=True, inline="always")
def _censored_remaining(p, e, age):
    """``relocation=censored``: the remaining lifetime of a survivor the count source gives
    ``e`` (:func:`censored_residuals`), ``e`` itself where the table has no value."""
    j = np.searchsorted(p.age_grid, age, side="right") - 1
    if j < 0:
        j = 0
    o = _bucket_of(e) // BUCKETS_PER_OCTAVE
    r = p.count_residual[o, j]
    if r < 0:
        return e
    return np.int64(np.ceil(r + p.count_tail[o, j] * e))


def _positive_number(x) -> bool:
    """``x`` is an int or float (not a bool) above 0: the half-lives' and windows' check."""
    return not isinstance(x, bool) and isinstance(x, (int, float)) and x > 0


def _check_halflives(halflives) -> list:
    """``select_halflives`` as a list of half-lives (> 0 capacities, or None: no decay)."""
    if isinstance(halflives, (str, bytes)) or not hasattr(halflives, "__iter__"):
        raise ValueError(f"policy hybrid: select_halflives must be a list of half-lives, got {halflives!r}")
    out = list(halflives)
    if not out:
        raise ValueError("policy hybrid: select_halflives must list at least one half-life (null: no decay)")
    for hl in out:
        if hl is not None and not _positive_number(hl):
            raise ValueError(f"policy hybrid: select_halflives entries must be > 0 (capacities) or null, got {hl!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"policy hybrid: select_halflives lists a half-life twice: {out}")
    return out


def _check_count_reset(hcfg: dict, defaults: dict) -> None:
    """``count_reset`` (a threshold > 0, nats) needs ``lifetimes=select`` with an undecayed count
    source to restart and a decayed one to compare it with; ``count_reset_drift`` (>= 0, nats per
    write) is read only with it."""
    threshold, drift = hcfg["count_reset"], hcfg["count_reset_drift"]
    if threshold is None:
        if drift != defaults["count_reset_drift"]:
            raise ValueError(
                f"policy hybrid: count_reset_drift={drift} is read only by the change test of count_reset, "
                "which is off: set count_reset (a threshold, nats; 50 in docs/hybrid.md) or drop count_reset_drift"
            )
        return
    if not _positive_number(threshold) or threshold > MAX_COUNT_RESET:
        raise ValueError(
            f"policy hybrid: count_reset must be > 0 and <= {MAX_COUNT_RESET:g} (nats) or null, got {threshold!r}"
        )
    if isinstance(drift, bool) or not isinstance(drift, (int, float)) or not drift >= 0:
        raise ValueError(f"policy hybrid: count_reset_drift must be >= 0 (nats per write), got {drift!r}")
    if hcfg["lifetimes"] != "select":
        raise ValueError(
            f"policy hybrid: count_reset={threshold} restarts the undecayed counts of lifetimes=select, "
            f"not lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=select"
        )
    halflives = hcfg["select_halflives"]
    if None not in halflives or all(hl is None for hl in halflives):
        raise ValueError(
            f"policy hybrid: count_reset restarts the undecayed counts and tests them against decayed ones: "
            f"select_halflives must hold null and at least one half-life, got {halflives}"
        )


#: the column of an LBA's row of counts (HybridState.counts) that holds when they were last
#: brought up to date; the variants' counts follow it
COUNTED_AT = 0


def counts_table(n_lbas: int, n_variants: int) -> np.ndarray:
    """Zeroed float64 rows of counts, one per LBA: its time (``COUNTED_AT``) and each variant's
    count. A row is padded to a power of two of 8-byte fields and the first one starts on a
    64-byte boundary, so that a row of up to 8 fields lies in one cache line: a write and a
    survivor touch one line, where a counts row and a separate time array (24 B rows at numpy's
    16-byte alignment, 3 of 8 straddling two lines) took two to three. Times up to 2^53 are exact
    in float64, so the arithmetic and every result are those of an int64 time. (A run resumed
    from a checkpoint gets the rows back at numpy's alignment: the same results, the old speed.)"""
    width = 1 << n_variants.bit_length()  # >= n_variants + 1
    flat = np.zeros(n_lbas * width + 8, np.float64)
    skip = (-flat.ctypes.data % 64) // 8
    return flat[skip : skip + n_lbas * width].reshape(n_lbas, width)


#: count_reset's change test (HybridState.count_change), one float64 each: the CUSUM statistic
#: held as a likelihood ratio (exp of the sum of log ratios, >= 1), its limit (exp(count_reset)),
#: the allowance per write (exp(-count_reset_drift)), the weight of the writes before now in the
#: variant tested against (HYBRID_SCALARS reset_fast) and that variant's decay per write
#: (exp(-lambda)), the epoch's first user write, the time until which the test rests, and the
#: changes detected so far
CH_RATIO, CH_LIMIT, CH_ALLOWANCE, CH_WEIGHT, CH_KEEP, CH_EPOCH, CH_REST, CH_N = range(8)
CHANGE_FIELDS = 8
#: the pseudo-count both count models give every LBA in the change test's likelihoods (so that an
#: LBA not written in the epoch has a finite probability)
CHANGE_PRIOR = 0.5
#: change times kept for the summary (HybridState.count_change_at): the first this many
MAX_CHANGE_TIMES = 64
#: the largest count_reset: the test's statistic is a likelihood ratio, exp(700) < float64's maximum
MAX_COUNT_RESET = 700.0


@nb.njit(cache=True, inline="always")
def _epoch_start(p):
    """The first user write the undecayed counts cover: the trace's first, or the last change."""
    start = p.scalars[0].prefill
    if p.count_change.shape[0] > 0 and p.count_change[CH_EPOCH] > start:
        start = np.int64(p.count_change[CH_EPOCH])
    return start


@nb.njit(cache=True, inline="always")
def _stream_changed(p, c_epoch, c_fast, start, now):
    """``count_reset``: Page's CUSUM test, at every user write, of whether the write stream has
    changed since the epoch began; True when it has, and a new epoch starts at this write.

    The write's LBA had ``c_epoch`` writes in the epoch that began at write ``start``
    (undecayed) and ``c_fast`` in the fastest-decaying counts (both before this write). Each model gives it the probability (count +
    CHANGE_PRIOR) / (writes weighed + CHANGE_PRIOR per LBA); the statistic is the sum of the log
    ratios fast / epoch less ``count_reset_drift`` per write, kept >= 0, and held here as its
    exponential (a product of ratios: no logarithm per write). While the stream is stationary the
    epoch's counts, holding more writes, predict at least as well and the statistic stays near 0;
    after a shift the decayed counts follow the new writes and it climbs by the log ratio's new
    mean per write. Past ``count_reset`` nats the undecayed counts restart (``_count_write``,
    ``_frequency_lifetime``) and the test rests until the epoch holds as many writes as the
    decayed counts weigh (``1 / lambda``), so that it compares two models of equal weight again.
    tests/naive.py ``count_changes`` is its plain-Python twin."""
    ch = p.count_change
    w_fast = ch[CH_WEIGHT]
    ch[CH_WEIGHT] = (w_fast + 1.0) * ch[CH_KEEP]  # this write, one write later
    if now < ch[CH_REST]:
        return False
    n_lbas = float(p.counts.shape[0])
    w_epoch = float(now - start)
    ratio = (c_fast + CHANGE_PRIOR) * (w_epoch + CHANGE_PRIOR * n_lbas)
    ratio /= (w_fast + CHANGE_PRIOR * n_lbas) * (c_epoch + CHANGE_PRIOR)
    r = max(ch[CH_RATIO] * ratio * ch[CH_ALLOWANCE], 1.0)
    changed = r > ch[CH_LIMIT]
    if changed:
        n = np.int64(ch[CH_N])
        if n < p.count_change_at.shape[0]:
            p.count_change_at[n] = now
        ch[CH_N] = n + 1
        ch[CH_EPOCH] = now
        ch[CH_REST] = now - 1.0 / np.log(ch[CH_KEEP])  # 1 / lambda writes on
        p.freq_total_at[:] = -1  # the undecayed totals restart with the epoch
        r = 1.0
    ch[CH_RATIO] = r
    return changed


@nb.njit(cache=True, inline="always")
def _count_write(p, lba, now):
    """Count a trace write of ``lba`` in every count variant: each decays by
    ``exp(-lambda_v age)`` (``lambda_v = freq_decays[v]``, none when 0) up to ``now``, then gains 1.
    With count_reset an undecayed count from before the epoch's start restarts from 0, and the
    counts before this write go to the change test; at a change this write is the new epoch's first."""
    decays = p.freq_decays
    row = p.counts[lba]
    h = p.hyb[0]
    start = _epoch_start(p)
    stale = h.reset and row[COUNTED_AT] < start
    before = row[COUNTED_AT]
    for v in range(decays.shape[0]):
        c = row[1 + v]
        lam = decays[v]
        if lam > 0 and c > 0:
            c *= np.exp(-lam * (now - before))
        elif lam == 0 and stale:
            c = 0.0
        row[1 + v] = c + 1.0
    row[COUNTED_AT] = now
    if h.reset and _stream_changed(p, row[1 + h.reset_undecayed] - 1.0, row[1 + h.reset_fast] - 1.0, start, now):
        row[1 + h.reset_undecayed] = 1.0


@nb.njit(cache=True, inline="always")
def _frequency_lifetime(p, v, lba, now):
    """``lifetimes=frequency``: ``t / c_t`` from count variant ``v``, the trace writes so far
    (``now`` included) over the LBA's, both decayed by ``exp(-lambda age)`` when the variant's
    ``lambda > 0``. ``NEVER`` for an LBA the trace has not written yet, and in the prefill."""
    t = now - p.scalars[0].prefill + 1
    if t <= 0:
        return NEVER
    lam = p.freq_decays[v]
    counted_at = p.counts[lba, COUNTED_AT]
    c = p.counts[lba, 1 + v]
    if lam > 0 and c > 0 and counted_at != now:  # (a user write's own count is current: no exp)
        c *= np.exp(-lam * (now - counted_at))
    if lam == 0 and p.hyb[0].reset:  # count_reset: the undecayed counts cover the epoch only
        start = _epoch_start(p)
        t = now - start + 1
        if counted_at < start:
            c = 0.0
    if c <= 0:
        return NEVER
    if p.freq_total_at[v] != now:  # once per time step: a GC burst's survivors share it
        p.freq_total[v] = float(t) if lam == 0 else np.expm1(-lam * t) / np.expm1(-lam)
        p.freq_total_at[v] = now
    e = np.ceil(p.freq_total[v] / c)
    return NEVER if e >= NEVER // 2 else np.int64(e)


@nb.njit(cache=True, inline="always")
def hybrid_prefetch(p, lba):
    """DOGI's cache hint (the LBA's row), and with per-LBA counts the LBA's row of counts: a user
    write counts them, a survivor of lifetimes=frequency or select reads them (no effect on
    results)."""
    dogi_prefetch(p, lba)
    if p.counts.shape[0] > 0:
        width = p.counts.shape[1]
        prefetch_span(p.counts, lba * width, width)  # one cache line (counts_table)


@nb.njit(cache=True, inline="always")
def hybrid_user(s, p, lba, now):
    """DOGI's placement and bookkeeping (Hot Filter, samples, accuracy), then a non-hot write
    of an applied plan goes to the group of its lifetime bucket."""
    h = p.hyb[0]
    b = -1
    if h.oracle:
        t = p.inv[now]
        p.death[lba] = now + t if t < NEVER else NEVER
        b = _bucket_of(t)
    elif h.popularity:
        b = _bucket_of(_expected_lifetime(p, lba, now))
    elif h.counting and now >= p.scalars[0].prefill:
        _count_write(p, lba, now)
        if h.frequency:
            b = _bucket_of(_frequency_lifetime(p, h.variant, lba, now))
    ring = p.ring
    sampled = ring.count[0]
    g = dogi_user(s, p, lba, now)
    if h.counting and ring.count[0] != sampled:  # DOGI sampled this write: keep its buckets for the planner
        slot = (ring.count[0] - 1) % ring.row.shape[0]
        for v in range(p.freq_decays.shape[0]):
            p.sample_bucket[v, slot] = _bucket_of(_frequency_lifetime(p, v, lba, now))
        if h.select:
            p.sample_model_bucket[slot] = p.scores[now - p.scalars[0].chunk_start]
    st = p.scalars[0]
    if h.planned and st.mode == MODE_ML and g >= 1 and g <= N_CAT:
        if not h.oracle and not h.popularity and not h.frequency:
            b = p.scores[now - st.chunk_start]
        if b >= 0:
            g = p.bucket2group[b]
    return g


@nb.njit(cache=True, inline="always")
def covering_group(group_hi, rem, lo, k):
    """The first bounded group G(lo)..G(k-1) whose upper bound covers ``rem``, else Gk (the
    relocation of the online hybrid and of its frozen bundles, policies/hybrid_frozen.py)."""
    for i in range(lo, k):
        if rem <= group_hi[i]:
            return i
    return k


@nb.njit(cache=True, inline="always")
def hybrid_gc(s, p, lba, victim, now):
    """A survivor to the group whose range covers its predicted remaining lifetime (or its age),
    never hotter than its source (the model's lifetimes: the oracles' estimates stand as they are);
    DOGI's relocation before a model, and with relocation=dogi."""
    h = p.hyb[0]
    st = p.scalars[0]
    if st.mode != MODE_ML or h.relocation == RELOC_DOGI:
        return dogi_gc(s, p, lba, victim, now)
    vg = s.seg_group[victim]
    row = p.rows[lba]
    age = now - s.lba_time[lba]
    nint = st.n_intermediate
    known = h.oracle or h.popularity or h.frequency  # a lifetime source other than the model: no filter or floor
    if st.frozen_filter and not known and row.updated == 0:
        g = G_FRZN  # DOGI's Frozen Filter: not updated since its clock last cleared
    else:
        rem = -1
        if h.relocation == RELOC_PREDICTED or h.relocation == RELOC_CENSORED:
            if h.oracle:
                d = p.death[lba]
                rem = d - now if d < NEVER else INF
            elif h.popularity:
                # memoryless: the expected remaining lifetime is the expected lifetime at any age
                e = _expected_lifetime(p, lba, now)
                rem = INF if e >= NEVER // 2 else np.int64(np.ceil(e))
            elif h.frequency:
                e = _frequency_lifetime(p, h.variant, lba, now)
                if e >= NEVER // 2:
                    rem = INF
                elif h.relocation == RELOC_CENSORED:
                    rem = _censored_remaining(p, e, age)
                else:
                    rem = e
            elif row.lba_class >= 1:
                rem = _remaining(p, row.lba_class - 1, age)
        if rem < 0:
            rem = age  # no estimate: the age stands for the remaining lifetime
        lo = 1
        if h.reloc_floor and not known and vg >= 1 and vg <= nint:
            lo = vg
        g = covering_group(p.group_hi, rem, lo, nint)
    if row.reloc_count < 255:
        row.reloc_count += 1
    row.reloc_group = g
    row.reloc_time = now
    p.gc_destinations[vg, g] += 1
    return g


@nb.njit(cache=True)
def _rule_victim(s, p, now, rule):
    if rule == 0:
        return greedy(s, p, now)
    if rule == 1:
        return cost_benefit(s, p, now)
    if rule == 2:
        return cost_benefit_sepbit(s, p, now)
    if rule == 3:
        return cost_benefit_sqrt(s, p, now)
    if rule == 4:
        return fifo(s, p, now)
    return d_choices(s, p, now)


@nb.njit(cache=True)
def hybrid_victim(s, p, now):
    """``victims=expiry``: a dead segment at once, else the oldest expired segment (residence since
    its first write beyond its group's expiry age) that holds garbage, else the run's rule;
    ``victims=rule``: the run's rule. With the cost-benefit rule the expiry scan also keeps
    :func:`dogi_ml.sim.victims.cost_benefit`'s best (the same score and ties), so one pass over
    the segments does both (the selector was most of the hybrid's per-block cost over DOGI's)."""
    h = p.hyb[0]
    if h.expiry:
        expire = p.group_expiry
        one_pass = h.rule == RULE_COST_BENEFIT
        seg_blocks = s.prm[P_SEG_BLOCKS]
        best = -1
        best_open = 1 << 62
        cb, cb_num, cb_den = -1, -1.0, 1.0
        for seg in range(s.prm[P_NSEG]):
            if s.seg_state[seg] != SEG_SEALED:
                continue
            v = s.seg_valid[seg]
            if v == 0:
                return seg
            g = s.seg_group[seg]
            if expire[g] < INF and now - s.seg_open_time[seg] > expire[g] and v < s.seg_wp[seg]:
                if s.seg_open_time[seg] < best_open:
                    best, best_open = seg, s.seg_open_time[seg]
            if one_pass and best < 0:
                num = float((seg_blocks - v) * (now - s.seg_seal_time[seg] + 1))
                den = float(seg_blocks + v)
                if num * cb_den > cb_num * den:
                    cb, cb_num, cb_den = seg, num, den
        if best >= 0:
            return best
        if one_pass:
            return cb
    return _rule_victim(s, p, now, h.rule)


register_victim("hybrid", hybrid_victim)


# -- the planner --------------------------------------------------------------------------------


@dataclass
class GroupPlan:
    """A configuration of ``k`` groups on predicted lifetimes (user writes)."""

    k: int
    thresholds: np.ndarray  # k-1 upper bounds of G1..G(k-1) on the predicted lifetime (blocks)
    expiry: np.ndarray  # k-1 expiry ages of G1..G(k-1) (blocks; fifo: their reclaim periods)
    modelled_waf: float  # 1 + the copies per write the groups' true lifetimes give
    # opmodel: the OP budget the thresholds were planned for (segments, per non-hot traffic);
    # fifo: the blocks the groups may fill (physical less reserve, open segments, hot group)
    budget: float
    traffic: np.ndarray  # k: share of the planned writes per group
    gc_share: np.ndarray  # k: GC copies per write of each group (modelled)
    end: float  # the last group's reclaim age in the OP model (blocks; fifo: its modelled period)
    last_reclaim: float  # ... and from its members' actual lifetimes (blocks; fifo: the same period)
    space: float = 0.0  # fifo: blocks the groups fill at their periods (<= budget)
    tail_scale: float = 1.0  # fifo: a censored sample's mean remaining lifetime / its predicted one
    candidates: list = field(default_factory=list)  # (k, modelled WAF, budget) of every k tried
    source: str = ""  # lifetimes=select: the lifetime source the plan was made on (source_name)
    # relocation=censored with a count source: censored_residuals' tables (None: the memoryless estimate)
    count_residual: np.ndarray | None = None
    count_tail: np.ndarray | None = None


def _expiry_for_op(cdf: InvalidationCDF, target: float) -> float:
    """The largest age ``e`` with ``int_0^e F <= target`` (segments): the age at which a group
    whose lifetimes follow ``cdf`` has held ``target`` of dead data per unit of its traffic."""
    t, F = cdf.t, cdf.F
    integral = F * t - cdf.S  # int_0^{t_j} F, exact at the jump points
    j = int(np.searchsorted(integral, target, side="right")) - 1
    if j < 0:
        return float(t[0])  # F = 0 below the first time: no dead data before it
    return float(t[j] + (target - integral[j]) / F[j])


def plan_groups(
    predicted: np.ndarray,
    actual: np.ndarray,
    segment_blocks: int,
    op_segments: float,
    max_groups: int = 10,
    open_cost: float = 1.0,
    other_open: int = 2,
    reserve_segments: float = 0.0,
    hot_share: float = 0.0,
    hot_bound: float = 0.0,
    fixed_k: int | None = None,
) -> GroupPlan:
    """The planner (``groups=opmodel``): ``predicted`` and ``actual`` lifetimes (user writes; the
    actual ones ``NEVER`` or ``inf`` when unknown within the horizon) of sampled non-hot writes.

    For each ``k`` in ``1..max_groups``: the OP budget per unit of non-hot traffic is ``(op_segments
    - reserve_segments - open_cost (k + other_open) - hot_share hot_bound / S) / (1 - hot_share)``
    (the hot group holds at most ``hot_bound`` of its writes dead); the thresholds are
    :func:`markov.opmodel.thresholds_for_op` (exact) on the predicted lifetimes' CDF; group ``i``
    gets the plan's OP ``op_i`` and its expiry is the age at which its members' *actual* CDF
    ``G_i`` holds that much dead data (``traffic_i int_0^e G_i = op_i``; with perfect predictions
    ``e = tau_i``), never before ``tau_i`` (members that die sooner than predicted would
    otherwise have their segments reclaimed while the rest still live); the last group's reclaim
    age ``T`` is found the same way from its OP (with perfect predictions: the plan's end).
    Modelled WAF: ``1 +`` the copies per write, a member of a bounded group alive at its expiry
    ``e_i`` copied once and then once per ``T`` it lives on (``1 + floor((t - e_i) / T)``), one of
    the last group once per ``T`` (``floor(t / T)``; the OP model's ``1 - F(T)`` counts only the
    first). The ``k`` of the lowest
    modelled WAF wins (the smaller on a tie); ``fixed_k`` plans that many groups instead."""
    S = float(segment_blocks)
    pred = np.asarray(predicted, np.float64)
    act = np.asarray(actual, np.float64)
    never_pred = ~np.isfinite(pred) | (pred >= float(NEVER) / 2)
    never_act = ~np.isfinite(act) | (act >= float(NEVER) / 2)
    pred_cdf = InvalidationCDF.from_times(np.where(never_pred, 1.0, pred), S, never_mask=never_pred)
    pred_seg = np.where(never_pred, np.inf, pred / S)
    act_seg = np.where(never_act, np.inf, act / S)
    # a block not dead within the horizon lives at least that long: counted at the horizon
    horizon = float(np.max(act_seg[np.isfinite(act_seg)])) if np.isfinite(act_seg).any() else 1.0
    life = np.where(np.isfinite(act_seg), act_seg, horizon)
    best = None
    candidates = []
    for k in range(1, int(max_groups) + 1):
        budget = (op_segments - reserve_segments - open_cost * (k + other_open) - hot_share * hot_bound / S) / max(
            1.0 - hot_share, 1e-9
        )
        if budget <= 0:
            break
        if fixed_k is not None and k != fixed_k:
            continue
        stream = thresholds_for_op(pred_cdf, k, budget, method="exact")
        member = assign_streams(pred_seg, stream.thresholds)
        traffic = np.bincount(member, minlength=k) / member.size
        T = max(float(stream.end), 1e-9)
        T_last = T  # the last group's reclaim age, from its members' actual CDF below
        expiry = np.zeros(k - 1)
        copies = np.zeros(k)
        for i in (k - 1, *range(k - 1)):  # the last group first: its reclaim age paces the copies
            sel = member == i
            if not sel.any():
                if i < k - 1:
                    expiry[i] = stream.reclaim_age[i]
                continue
            t_i = life[sel]
            if i < k - 1:
                # the age at which the members' actual CDF has held the plan's OP for this group
                # (never before its upper threshold: members die by then if the model is right)
                e = stream.reclaim_age[i]
                if traffic[i] > 0:
                    e = max(e, _expiry_for_op(InvalidationCDF(t_i), stream.op[i] / traffic[i]))
                expiry[i] = e
                # a member alive at its group's expiry is copied, then every T in the last group
                alive = t_i > e
                copies[i] = float(np.sum(1.0 + np.floor((t_i[alive] - e) / T_last))) / t_i.size
            else:
                # the last group's real reclaim age: when its members' actual CDF has held its OP
                if traffic[i] > 0:
                    T_last = max(_expiry_for_op(InvalidationCDF(t_i), stream.op[i] / traffic[i]), 1e-9)
                copies[i] = float(np.sum(np.floor(t_i / T_last))) / t_i.size
        waf = 1.0 + float(np.dot(traffic, copies))
        candidates.append((k, waf, float(budget)))
        if best is None or waf < best.modelled_waf - 1e-12:
            best = GroupPlan(
                k=k,
                thresholds=stream.thresholds * S,
                expiry=expiry * S,
                modelled_waf=waf,
                budget=float(budget),
                traffic=traffic,
                gc_share=copies,
                end=T * S,
                last_reclaim=T_last * S,
            )
    if best is None:
        raise ValueError(
            f"hybrid planner: no OP left for even one group ({op_segments:g} OP segments, "
            f"{reserve_segments:g} reserved, {open_cost:g} per open segment); lower sim.gc_free_segments "
            "or raise sim.op_ratio"
        )
    best.candidates = candidates
    return best


#: the planner's reclaim periods: quarter octaves from 2^4 to 2^34 user writes
PLAN_PERIODS = np.exp2(np.arange(16, 137) / BUCKETS_PER_OCTAVE)


def expected_laps(life: np.ndarray, censored: np.ndarray, horizon: float, tail_mean: np.ndarray, period: float):
    """``E[ceil(t / T)]`` per sample for a FIFO reclaim period ``T``: the times a block of lifetime
    ``t`` is written into a group whose segments are reclaimed ``T`` after they were written
    (the user write and a copy per period it outlives). A sample dead within the horizon has its
    ``t``; a censored one lives ``horizon + X`` with ``X`` exponential of mean ``tail_mean``:
    ``n0 + exp(-(n0 T - horizon) / m) / (1 - exp(-T / m))``, ``n0 = ceil(horizon / T)``."""
    laps = np.ceil(life / period)
    if censored.any():
        n0 = np.ceil(horizon / period)
        m = tail_mean[censored]
        laps[censored] = n0 + np.exp(-(n0 * period - horizon) / m) / -np.expm1(-period / m)
    return laps


def plan_fifo_groups(
    predicted: np.ndarray,
    actual: np.ndarray,
    segment_blocks: int,
    op_segments: float,
    max_groups: int = 10,
    open_cost: float = 1.0,
    other_open: int = 2,
    reserve_segments: float = 0.0,
    hot_share: float = 0.0,
    hot_bound: float = 0.0,
    fixed_k: int | None = None,
    *,
    capacity: float | None = None,
    horizon: float | None = None,
    periods: np.ndarray = PLAN_PERIODS,
) -> GroupPlan:
    """The planner of ``groups=fifo``: ``predicted`` and ``actual`` lifetimes (user writes; the
    actual ones ``NEVER`` or ``inf`` when the block outlived ``horizon``, default the largest
    actual one) of sampled non-hot writes, for a device of ``capacity`` logical blocks (default:
    ``predicted``'s mean, i.e. no calibration of the censored tail) and ``op_segments`` of OP.

    Each group is a FIFO log with a reclaim period ``T`` (bounded groups: their expiry age; the
    last one is reclaimed by the run's rule): a member of realised lifetime ``t`` is written
    ``ceil(t / T)`` times (copied at every period it outlives) and fills ``T ceil(t / T)`` of
    space while it and its copies wait, so a group costs ``E[ceil(t / T)] - 1`` copies and ``T
    E[ceil(t / T)]`` blocks per write, the expectations over the *realised* lifetimes of the
    samples whose *predicted* lifetime falls in it (the predictor's confusion, exactly). This is
    the closed form of FIFO groups (``report_hybrid.fifo_group_terms``) with each group's
    empirical lifetimes in place of geometric ones. A censored sample lives on past the horizon
    for an exponential time of mean ``tail_scale`` x its predicted lifetime (memoryless blocks
    with known rates: ``tail_scale = 1``), ``tail_scale`` set so that the samples' mean lifetime
    is ``capacity / (1 - hot_share)`` (Little's law: every logical block is valid, one user write
    per unit of time, the hot group's blocks living next to nothing).

    The groups are runs of consecutive quarter-octave buckets of the predicted lifetime; for a
    multiplier ``lam`` each group's period minimises ``copies + lam space`` and a dynamic program
    finds the best ``k`` runs; ``lam`` is bisected until the groups fill no more than the space
    left: ``(n_segments - reserve - open_cost (k + other_open)) S - hot_share hot_bound`` blocks
    (the logical capacity and the OP; the hot group holds at most ``hot_bound`` per write). The
    ``k`` of the lowest modelled WAF wins (the smaller on a tie); ``fixed_k`` plans that many."""
    S = float(segment_blocks)
    pred = np.asarray(predicted, np.float64)
    act = np.asarray(actual, np.float64)
    if pred.shape != act.shape or pred.size == 0:
        raise ValueError(
            f"hybrid planner: {pred.size} predicted and {act.size} actual lifetimes; give one of each per sample"
        )
    censored = ~np.isfinite(act) | (act >= float(NEVER) / 2)
    if horizon is None:
        horizon = float(act[~censored].max()) if (~censored).any() else 1.0
    horizon = float(horizon)
    life = np.where(censored, horizon, act)
    # predicted lifetimes as their buckets; a block predicted never to die: the last bucket
    bucket = lifetime_bucket(np.where(np.isfinite(pred), pred, float(NEVER)))
    bucket = np.minimum(bucket, NEVER_BUCKET)
    tail_pred = np.where(np.isfinite(pred), np.maximum(pred, 1.0), np.nan)
    finite_tail = tail_pred[np.isfinite(tail_pred)]
    tail_pred = np.where(np.isfinite(tail_pred), tail_pred, finite_tail.max() if finite_tail.size else horizon)
    n = pred.size
    hot = min(max(float(hot_share), 0.0), 0.99)
    target_mean = (float(capacity) if capacity is not None else float(np.mean(tail_pred))) / (1.0 - hot)
    tail_scale = 1.0
    if censored.any():
        excess = n * target_mean - float(life.sum())  # what the censored samples live past the horizon
        tail_scale = max(excess, 1e-9 * n) / float(tail_pred[censored].sum())
    tail_mean = tail_scale * tail_pred
    used, inverse = np.unique(bucket, return_inverse=True)
    B, J = used.size, periods.size
    laps = np.zeros((B, J))
    for j, T in enumerate(periods):
        laps[:, j] = np.bincount(inverse, expected_laps(life, censored, horizon, tail_mean, T), minlength=B)
    count = np.bincount(inverse, minlength=B).astype(np.float64)
    # prefix sums over buckets: a run of buckets a..b is [a, b + 1) of these
    laps_cum = np.vstack([np.zeros(J), np.cumsum(laps, axis=0)])
    count_cum = np.r_[0.0, np.cumsum(count)]
    lo, hi = np.triu_indices(B)  # every run a..b
    run_laps = laps_cum[hi + 1] - laps_cum[lo]  # [runs, J]
    run_count = count_cum[hi + 1] - count_cum[lo]
    weight = (1.0 - hot) / n  # a sample's share of the user writes
    run_copies = weight * (run_laps - run_count[:, None])
    run_space = weight * run_laps * periods[None, :]

    def solve(lam: float, k: int):
        """The best ``k`` runs for multiplier ``lam``: (runs' [lo, hi], periods' index)."""
        cost = run_copies + lam * run_space
        jbest = cost.argmin(axis=1)
        c = np.full((B, B), np.inf)
        c[lo, hi] = cost[np.arange(lo.size), jbest]
        jmat = np.zeros((B, B), np.int64)
        jmat[lo, hi] = jbest
        # D[b]: best cost of buckets 0..b in `layer + 1` runs; arg[layer, b]: the last run's start
        D = c[0].copy()
        arg = np.zeros((k, B), np.int64)
        for layer in range(1, k):
            # last run a..b after `layer` runs of 0..a-1
            tot = D[:-1, None] + c[1:, :]  # [a - 1, b]
            best_a = np.argmin(tot, axis=0)
            Dn = tot[best_a, np.arange(B)]
            arg[layer] = best_a + 1
            D = Dn
        if not np.isfinite(D[B - 1]):
            return None
        runs = []
        b = B - 1
        for layer in range(k - 1, -1, -1):
            a = int(arg[layer, b]) if layer > 0 else 0
            runs.append((a, b, int(jmat[a, b])))
            b = a - 1
        runs.reverse()
        return runs

    idx = np.full((B, B), -1, np.int64)
    idx[lo, hi] = np.arange(lo.size)

    def measure(runs):
        """The runs' copies per write (each), the space they fill and their shares of the samples."""
        copies = np.array([run_copies[idx[a, b], j] for a, b, j in runs])
        space = float(sum(run_space[idx[a, b], j] for a, b, j in runs))
        traffic = np.array([count_cum[b + 1] - count_cum[a] for a, b, _ in runs]) / n
        return copies, space, traffic

    best = None
    candidates = []
    for k in range(1, min(int(max_groups), B) + 1):
        room = (
            (float(op_segments) - float(reserve_segments) - float(open_cost) * (k + other_open)) * S
            + (float(capacity) if capacity is not None else target_mean * (1.0 - hot))
            - hot * float(hot_bound)
        )
        if fixed_k is not None and k != fixed_k:
            continue
        # lam: small -> long periods, few copies, much space; bisect in log lam for the space
        lo_l, hi_l = np.log(1e-18), np.log(1e3)
        runs_hi = solve(np.exp(hi_l), k)
        if runs_hi is None or measure(runs_hi)[1] > room:
            candidates.append((k, float("inf"), room))
            continue
        for _ in range(50):
            mid = (lo_l + hi_l) / 2
            runs = solve(np.exp(mid), k)
            if runs is not None and measure(runs)[1] <= room:
                hi_l = mid
            else:
                lo_l = mid
        runs = solve(np.exp(hi_l), k)
        copies, space, traffic = measure(runs)
        waf = 1.0 + float(copies.sum())
        candidates.append((k, waf, room))
        if best is None or waf < best.modelled_waf - 1e-12:
            per = np.array([periods[j] for _, _, j in runs])
            upper = bucket_time(used[[b for _, b, _ in runs]])
            share = np.divide(copies, traffic * (1.0 - hot), out=np.zeros(k), where=traffic > 0)
            best = GroupPlan(
                k=k,
                thresholds=upper[:-1].astype(np.float64),
                expiry=per[:-1].astype(np.float64),
                modelled_waf=waf,
                budget=room,
                traffic=traffic,
                gc_share=share,
                end=float(per[-1]),
                last_reclaim=float(per[-1]),
                space=space,
                tail_scale=tail_scale,
            )
    if best is None:
        raise ValueError(
            f"hybrid planner: no plan fits the space ({op_segments:g} OP segments, {reserve_segments:g} reserved, "
            f"{open_cost:g} per open segment); lower sim.gc_free_segments or raise sim.op_ratio"
        )
    best.candidates = candidates
    return best


@register
class Hybrid(DOGI):
    name = "hybrid"
    #: the run's rule under the expiry selector: cost-benefit unless sim.victim / policy.victim say otherwise
    victim = "cost_benefit"
    selector = "hybrid"
    victim_rules = RULES
    victim_note = "a dead segment, else the oldest expired segment of a bounded group, else the victim rule"
    place_user = hybrid_user
    place_gc = hybrid_gc
    prefetch_lba = hybrid_prefetch

    HYBRID_DEFAULTS = {
        # model | oracle (true lifetimes) | popularity (oracle: write probabilities) | frequency (causal: counts so far)
        "lifetimes": "model",
        "score": "expected",  # expected (sum_k P_k m_k) | argmax (the argmax class's centre)
        # opmodel (MINOS's OP model on predicted lifetimes) | fifo (FIFO groups of the realised lifetimes) | dogi
        "groups": "opmodel",
        "relocation": "predicted",  # predicted | age | dogi
        "victims": "expiry",  # expiry (expired segments first, then the rule) | rule
        "hot_filter": True,  # DOGI's Hot Filter in front of the model
        "horizon": 4.0,  # capacities: the planner's samples are at least this old (at most half the ring's span)
        "min_horizon": 1.0,  # capacities: below this horizon the planner waits (DOGI's search meanwhile)
        # frequency/select: while waiting, plan on the counts' own predictions taken as the lifetimes
        "early_plan": False,
        "max_groups": 10,  # groups G1..GK the planner may use
        "open_cost": 1.0,  # OP segments each open segment costs the planner
        "fixed_groups": None,  # plan this many groups instead of the modelled-WAF choice (an ablation)
        "popularity_window": None,  # capacities per counting window of lifetimes=popularity (None: the whole trace)
        "popularity_from": "counts",
        "frequency_halflife": None,  # capacities after which lifetimes=frequency's counts weigh half (None: never)
        # lifetimes=select: the count half-lives (capacities, None: no decay) whose sources compete with the model's
        "select_halflives": [None, 1.0, 0.5],
        # lifetimes=select: the CUSUM threshold (nats) past which the undecayed counts restart at a
        # detected change of the write stream (None: never; _stream_changed)
        "count_reset": None,
        "count_reset_drift": 0.3,  # count_reset: the log-likelihood ratio per write the test allows (nats)
    }

    def __init__(self, n_groups=N_GROUPS, **params):
        own = {k: params.pop(k) for k in list(params) if k in self.HYBRID_DEFAULTS}
        hcfg = {**self.HYBRID_DEFAULTS, **own}
        for key, allowed in CHOICES.items():
            if hcfg[key] not in allowed:
                raise ValueError(f"policy hybrid: {key} must be one of {', '.join(allowed)}, got {hcfg[key]!r}")
        oracle_source = hcfg["lifetimes"] in ("oracle", "popularity")
        if hcfg["lifetimes"] != "model" and hcfg["groups"] == "dogi":
            raise ValueError(
                f"policy hybrid: lifetimes={hcfg['lifetimes']} feeds its lifetimes to the OP-model planner; "
                f"groups=dogi searches the model's classes: use groups=opmodel with lifetimes={hcfg['lifetimes']}"
            )
        if hcfg["groups"] == "dogi":  # DOGI's search replaces the planner: its settings ran ignored, without a word
            refuse_unread_params(
                hcfg,
                self.HYBRID_DEFAULTS,
                ("horizon", "min_horizon", "max_groups", "open_cost", "fixed_groups"),
                "steers the OP-model planner, which policy.params.groups=dogi replaces by DOGI's search",
                "policy.params.groups=opmodel",
            )
        if not isinstance(hcfg["hot_filter"], bool) and hcfg["hot_filter"] != "auto":
            raise ValueError(f"policy hybrid: hot_filter must be true, false or auto, got {hcfg['hot_filter']!r}")
        if not 1 <= int(hcfg["max_groups"]) <= N_CAT:
            raise ValueError(f"policy hybrid: max_groups must lie in [1, {N_CAT}], got {hcfg['max_groups']}")
        if hcfg["fixed_groups"] is not None and not 1 <= int(hcfg["fixed_groups"]) <= int(hcfg["max_groups"]):
            raise ValueError(
                f"policy hybrid: fixed_groups must lie in [1, max_groups={hcfg['max_groups']}] or be null, "
                f"got {hcfg['fixed_groups']}"
            )
        if not float(hcfg["horizon"]) > 0 or not float(hcfg["open_cost"]) >= 0 or not float(hcfg["min_horizon"]) >= 0:
            raise ValueError(
                f"policy hybrid: horizon must be > 0, min_horizon and open_cost >= 0, got {hcfg['horizon']}, "
                f"{hcfg['min_horizon']} and {hcfg['open_cost']}"
            )
        if hcfg["relocation"] == "censored" and oracle_source:
            raise ValueError(
                f"policy hybrid: relocation=censored corrects the count sources' memoryless estimate "
                f"(lifetimes=frequency or select); lifetimes={hcfg['lifetimes']} knows its lifetimes: "
                "use relocation=predicted"
            )
        if hcfg["popularity_from"] not in ("counts", "generator"):
            raise ValueError(
                f"policy hybrid: popularity_from must be one of counts, generator, got {hcfg['popularity_from']!r}"
            )
        if hcfg["popularity_from"] != "counts" and hcfg["lifetimes"] != "popularity":
            raise ValueError(
                f"policy hybrid: popularity_from={hcfg['popularity_from']} is a source of lifetimes=popularity, "
                f"not lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=popularity"
            )
        halflife = hcfg["frequency_halflife"]
        if halflife is not None:
            if hcfg["lifetimes"] != "frequency":
                raise ValueError(
                    f"policy hybrid: frequency_halflife={halflife} decays the counts of lifetimes=frequency, "
                    f"not lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=frequency"
                )
            if not _positive_number(halflife):
                raise ValueError(
                    f"policy hybrid: frequency_halflife must be > 0 (capacities) or null, got {halflife!r}"
                )
        if not isinstance(hcfg["early_plan"], bool):
            raise ValueError(f"policy hybrid: early_plan must be true or false, got {hcfg['early_plan']!r}")
        if hcfg["early_plan"] and hcfg["lifetimes"] not in COUNTING:
            raise ValueError(
                f"policy hybrid: early_plan=true plans on the counts of lifetimes=frequency or select, not "
                f"lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=select"
            )
        if hcfg["select_halflives"] != self.HYBRID_DEFAULTS["select_halflives"] or hcfg["lifetimes"] == "select":
            if hcfg["lifetimes"] != "select":
                raise ValueError(
                    f"policy hybrid: select_halflives lists the count sources of lifetimes=select, not "
                    f"lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=select"
                )
            hcfg["select_halflives"] = _check_halflives(hcfg["select_halflives"])
        _check_count_reset(hcfg, self.HYBRID_DEFAULTS)
        window = hcfg["popularity_window"]
        if window is not None and hcfg["popularity_from"] == "generator":
            raise ValueError(
                "policy hybrid: popularity_from=generator takes its windows from the generator (phase_shift's "
                "phases): drop popularity_window"
            )
        if window is not None:
            if hcfg["lifetimes"] != "popularity":
                raise ValueError(
                    f"policy hybrid: popularity_window={window} counts the writes of lifetimes=popularity, "
                    f"not lifetimes={hcfg['lifetimes']}: drop it or set lifetimes=popularity"
                )
            if not _positive_number(window):
                raise ValueError(f"policy hybrid: popularity_window must be > 0 (capacities) or null, got {window!r}")
        if params.get("deployed", "float") != "float":
            raise ValueError("policy hybrid: deployed must be float (the planner reads the model's probabilities)")
        if hcfg["lifetimes"] not in ("model", "select"):
            if params.get("predictor", "latest") != "latest":
                raise ValueError(
                    f"policy hybrid: lifetimes={hcfg['lifetimes']} trains no model; leave params.predictor unset"
                )
            params["predictor"] = "latest"  # DOGI's bookkeeping without a model
        # unless set: one sample in 10 non-hot writes per GiB of capacity (bind), so that the ring's
        # max_samples span the same ~9 capacities at every scale and the planner's horizon
        # (4 capacities, at most half the span) is reached: with DOGI's fixed 1 in 10 the 100K
        # samples spanned 0.58 capacities at 16 GiB and the planner never ran
        self.scaled_sampling = "sample_every" not in params
        super().__init__(n_groups, **params)
        self.hcfg = hcfg
        self.needs_future = oracle_source

    def _count_change(self, freq_decays: np.ndarray) -> np.ndarray:
        """count_reset's detector state (CH_* fields); empty without count_reset."""
        if self.hcfg["count_reset"] is None:
            return np.zeros(0, np.float64)
        change = np.zeros(CHANGE_FIELDS, np.float64)
        change[CH_RATIO] = 1.0
        change[CH_LIMIT] = np.exp(float(self.hcfg["count_reset"]))
        change[CH_ALLOWANCE] = np.exp(-float(self.hcfg["count_reset_drift"]))
        change[CH_KEEP] = np.exp(-freq_decays.max())
        return change

    def freq_decays_of_plan(self) -> float:
        """The decay per user write of the count source the last plan applied (0: undecayed)."""
        return float(self.state.freq_decays[record(self.state.hyb).variant])

    def count_changes(self) -> int:
        """count_reset: the changes of the write stream detected so far (0 without count_reset)."""
        return int(self.state.count_change[CH_N]) if self.state.count_change.size else 0

    def accepted_params(self):
        # DOGI's keys, then the hybrid's; `relocation` is in both (the hybrid's switch), listed once
        return tuple(dict.fromkeys((*self.DEFAULTS, *self.HYBRID_DEFAULTS)))

    def bind(self, ctx: SimContext) -> tuple:
        if self.scaled_sampling:
            self.cfg["sample_every"] = scaled_sample_every(ctx.capacity)
        dogi_state = super().bind(ctx)
        h = self.hcfg
        hyb = new_scalars(HYBRID_SCALARS)
        hr = record(hyb)
        hr.oracle = int(h["lifetimes"] == "oracle")
        hr.popularity = int(h["lifetimes"] == "popularity")
        hr.frequency = int(h["lifetimes"] == "frequency")
        hr.select = int(h["lifetimes"] == "select")
        hr.counting = int(hr.frequency or hr.select)
        hr.reset = int(h["count_reset"] is not None)
        self.count_halflives = (
            [h["frequency_halflife"]] if hr.frequency else list(h["select_halflives"]) if hr.select else []
        )
        freq_decays = np.array(
            [0.0 if hl is None else np.log(2.0) / (float(hl) * ctx.capacity) for hl in self.count_halflives], np.float64
        )
        if hr.reset:
            hr.reset_undecayed = int(np.flatnonzero(freq_decays == 0)[0])
            hr.reset_fast = int(np.argmax(freq_decays))
        hr.relocation = {
            "predicted": RELOC_PREDICTED,
            "censored": RELOC_CENSORED,
            "age": RELOC_AGE,
            "dogi": RELOC_DOGI,
        }[h["relocation"]]
        hr.expiry = int(h["victims"] == "expiry")
        hr.rule = RULES.index(self.victim_rule) if self.victim_rule in RULES else RULES.index("cost_benefit")
        if self.victim_rule is not None and self.victim_rule not in RULES:
            raise ValueError(f"policy hybrid: victim rule {self.victim_rule!r} is not one of {', '.join(RULES)}")
        hr.reloc_floor = int(bool(self.cfg["reloc_floor"]))
        self.hot_filter_on = h["hot_filter"] is not False
        self.hot_filter_off_at = None
        if not self.hot_filter_on:
            _hot_filter_off(dogi_state)
        if hr.oracle:
            inv, _prev = annotate(ctx.stream)
            death = np.full(ctx.capacity, NEVER, np.int64)
        else:
            inv = death = np.zeros(0, np.int64)
        if hr.popularity:
            n_trace = ctx.stream.size - ctx.prefill_blocks
            if h["popularity_from"] == "generator":
                meta = getattr(ctx.trace, "meta", None) or {}
                expected, hr.pop_window = generator_lifetimes(meta, ctx.capacity, n_trace)
            else:
                window = h["popularity_window"]
                hr.pop_window = max(1, n_trace if window is None else int(round(float(window) * ctx.capacity)))
                expected = popularity_lifetimes(ctx.stream, ctx.prefill_blocks, ctx.capacity, int(hr.pop_window))
        else:
            expected = np.zeros((0, 0), np.float64)
        self.state = HybridState(
            *dogi_state,
            hyb=hyb,
            scores=np.full(self.max_chunk_blocks, -1, np.int8),
            bucket2group=np.ones(N_BUCKETS, np.int64),
            inv=inv,
            death=death,
            expected=expected,
            freq_decays=freq_decays,
            freq_total=np.zeros(freq_decays.size, np.float64),
            freq_total_at=np.full(freq_decays.size, -1, np.int64),
            counts=counts_table(ctx.capacity if hr.counting else 0, freq_decays.size),
            sample_bucket=np.full((freq_decays.size, self.ring.row.size if hr.counting else 0), -1, np.int8),
            sample_model_bucket=np.full(self.ring.row.size if hr.select else 0, -1, np.int8),
            count_residual=np.full((N_OCTAVES, dogi_state.age_grid.size), -1.0),
            count_tail=np.full((N_OCTAVES, dogi_state.age_grid.size), -1.0),
            count_change=self._count_change(freq_decays),
            count_change_at=np.full(MAX_CHANGE_TIMES if hr.reset else 0, -1, np.int64),
        )
        self.source_counts: dict[str, int] = {}
        self.n_segments = ctx.n_segments
        self.gc_free_segments = ctx.gc_free_segments
        self.centres = None
        self.plan = None
        self.plans: list[dict] = []
        return self.state

    def _period(self, sim) -> dict:
        """DOGI's measurements since the last retraining; with ``hot_filter=auto`` the Hot Filter
        is switched off for the rest of the run at the first period in which a hot write cost
        more GC copies (copies out of G_hot per hot write) than the average user write (the
        period's WAF - 1): the filter then sends blocks that outlive the hot group's reclaim age
        (varmail: 41% of hot writes copied against 0.17 copies per write; zipf 12% against 1.9)."""
        period = super()._period(sim)
        if self.hcfg["hot_filter"] == "auto" and self.hot_filter_on and period["waf"] is not None:
            if period["hot_share"] > 0 and period["hot_valid_ratio"] > period["waf"] - 1:
                self.hot_filter_on = False
                self.hot_filter_off_at = int(sim.user_writes)
                _hot_filter_off(self.state)
                self.state.group_expiry[0] = INF
        return period

    # -- lifetimes -----------------------------------------------------------------------------
    def _class_centres(self, now: int) -> np.ndarray:
        """Mean log2 invalidation time of the ring's labelled samples per class (DOGI's labels;
        a class without samples: the log2 mid-point of its bounds)."""
        bounds = self.state.bounds.astype(np.float64)
        data = self.ring.collect(now, long_bound=int(bounds[-1]))
        y = np.maximum(np.searchsorted(bounds, data["inv"], side="left"), 1) - 1
        lo = np.log2(np.maximum(np.r_[max(bounds[0], 1.0), bounds[1:]], 1.0))
        hi = np.r_[np.log2(bounds[1:]), np.log2(bounds[-1]) + 1.0]
        centres = (lo + hi) / 2
        logs = np.log2(np.maximum(data["inv"], 1).astype(np.float64))
        for k in range(N_CAT):
            sel = y == k
            if sel.any():
                centres[k] = logs[sel].mean()
        return centres

    def _buckets_of(self, proba: np.ndarray) -> np.ndarray:
        if self.hcfg["score"] == "argmax":
            log_t = self.centres[proba.argmax(axis=1)]
        else:
            log_t = proba @ self.centres
        return np.clip(np.ceil(BUCKETS_PER_OCTAVE * log_t), 0, NEVER_BUCKET - 1).astype(np.int64)

    def _predict_into(self, X: np.ndarray, out: np.ndarray) -> None:
        """DOGI's classes (the argmax of the same probabilities) and, kept for ``before_chunk``,
        the lifetime buckets of the rows."""
        proba = self.model.predict_proba(X)
        out[:] = proba.argmax(axis=1)
        self._last_buckets = self._buckets_of(proba) if self.centres is not None else None

    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        self._last_buckets = None
        super().before_chunk(sim, start, n_writes)
        if self._last_buckets is None:
            self.state.scores[:] = -1  # no buckets for this chunk (no model or classes yet)
            return
        C = max(1, min(int(sim.cfg.chunk_blocks), int(self.max_chunk_blocks)))
        j = start // C
        a = start - self.prefill
        lo, hi = max(a, 0), min(a + n_writes, self.n_trace_writes)
        r0 = lo + self.prefill - j * C
        self.state.scores[r0 : r0 + hi - lo] = self._last_buckets

    def source_names(self) -> list[str]:
        """``lifetimes=select``'s candidates: the model, then one count source per half-life."""
        return ["model"] + ["frequency" if hl is None else f"frequency(halflife={hl:g})" for hl in self.count_halflives]

    def _select_source(self, mature: np.ndarray, inv: np.ndarray, horizon: int, now: int, entry: dict):
        """``lifetimes=select``: the source whose predicted lifetimes ordered the mature samples'
        true lifetimes best (:func:`order_scores`), and its predictions now (lifetime buckets). Each source is judged
        on the buckets it gave the samples when they were written (the model then deployed, the
        counts then), on the samples every source predicted: neither is judged in hindsight (the
        model on the samples it was trained on, the counts with the writes since). The planner
        reads only the order of the predictions (each group's true lifetimes come from the
        samples), so the order is what a source brings."""
        self.centres = self._class_centres(now)
        proba = self.model.predict_proba(self.state.sample_features[mature])
        now_buckets = [self._buckets_of(proba)] + [
            self.state.sample_bucket[v, mature].astype(np.int64) for v in range(len(self.count_halflives))
        ]
        then = [self.state.sample_model_bucket[mature].astype(np.int64)] + now_buckets[1:]
        judged = then[0] >= 0
        # a model without a track record (fewer mature samples it predicted when written than
        # DOGI trains its first model on) is not a candidate yet: the counts compete on them all
        model_judged = int(judged.sum()) >= int(self.cfg["min_samples"])
        if not model_judged:
            judged[:] = True
        entry["source_samples"] = int(judged.sum())
        scores = order_scores([b[judged] for b in then], inv[judged], horizon)
        if not model_judged:
            scores[0] = -1.0
        best = int(np.argmax(scores))  # ties: the first (the model, then the count sources in their order)
        names = self.source_names()
        entry["source_scores"] = dict(zip(names, scores))
        entry["source"] = names[best]
        return names[best], now_buckets[best]

    # -- planning --------------------------------------------------------------------------------
    def _search_and_apply(self, plog: dict, entry: dict, sim, period: dict, reloc: dict, apply: bool = True) -> None:
        if self.hcfg["groups"] == "dogi":
            super()._search_and_apply(plog, entry, sim, period, reloc, apply)
            return
        now = int(sim.state.ctr[0])
        r = self.ring
        n = int(min(r.count[0], r.row.size))
        slots = np.flatnonzero(r.time[:n] >= 0)
        span = now - int(r.time[slots].min()) if slots.size else 0
        horizon = min(int(float(self.hcfg["horizon"]) * self.capacity), span // 2)
        mature = slots[r.time[slots] <= now - horizon]
        entry["planner_samples"] = int(mature.size)
        entry["planner_horizon"] = horizon
        waiting = (
            mature.size < int(self.cfg["min_samples"]) or horizon < float(self.hcfg["min_horizon"]) * self.capacity
        )
        early = waiting and self.hcfg["early_plan"] and slots.size >= int(self.cfg["min_samples"])
        if waiting and not early:
            # too few samples have lived long enough yet: DOGI's search meanwhile
            entry["planner"] = "waiting for mature samples (DOGI's search meanwhile)"
            super()._search_and_apply(plog, entry, sim, period, reloc, apply)
            return
        count_buckets = None  # the samples' buckets when a count source predicts (censored relocation's input)
        if early:
            # no outcome yet: the first count source's predictions of every sample stand for its
            # lifetime (a perfect predictor's plan), censored at the full horizon
            horizon = int(float(self.hcfg["horizon"]) * self.capacity)
            predicted = bucket_time(self.state.sample_bucket[0, slots].astype(np.int64))
            actual = np.where(predicted <= horizon, predicted, NEVER).astype(np.float64)
            source = self.source_names()[1]
            entry["planner"] = f"early: {source}'s predictions as the lifetimes"
        else:
            inv = r.inv[mature]
            actual = np.where((inv >= 0) & (inv <= horizon), inv, NEVER).astype(np.float64)
            if self.hcfg["lifetimes"] == "oracle":
                predicted = bucket_time(lifetime_bucket(self.state.inv[r.time[mature]]))
            elif self.hcfg["lifetimes"] == "popularity":
                e = self.state.expected
                window = int(record(self.state.hyb).pop_window)
                j = np.clip((r.time[mature] - self.prefill) // window, 0, e.shape[0] - 1)
                predicted = bucket_time(lifetime_bucket(e[j, r.lba[mature]]))
            elif self.hcfg["lifetimes"] == "frequency":
                count_buckets = self.state.sample_bucket[0, mature].astype(np.int64)
                predicted = bucket_time(count_buckets)
            elif self.hcfg["lifetimes"] == "select":
                source, source_buckets = self._select_source(mature, inv, horizon, now, entry)
                predicted = bucket_time(source_buckets)
                count_buckets = source_buckets if source != "model" else None
            else:
                self.centres = self._class_centres(now)
                proba = self.model.predict_proba(self.state.sample_features[mature])
                predicted = bucket_time(self._buckets_of(proba))
        st = record(self.state.scalars)
        S = float(self.segment_blocks)
        op_segments = self.n_segments - self.capacity / S
        hot = float(period["hot_share"]) if self.hot_filter_on else 0.0
        planner = plan_fifo_groups if self.hcfg["groups"] == "fifo" else plan_groups
        extra = {"capacity": float(self.capacity), "horizon": float(horizon)} if self.hcfg["groups"] == "fifo" else {}
        plan = planner(
            predicted,
            actual,
            int(S),
            op_segments,
            max_groups=int(self.hcfg["max_groups"]),
            open_cost=float(self.hcfg["open_cost"]),
            other_open=2,  # G_hot and G_frzn
            reserve_segments=float(self.gc_free_segments),
            hot_share=min(hot, 0.99),
            hot_bound=float(st.hot_threshold),
            fixed_k=None if self.hcfg["fixed_groups"] is None else int(self.hcfg["fixed_groups"]),
            **extra,
        )
        entry["modelled_waf"] = plan.modelled_waf
        entry["planned_space"] = plan.space
        entry["planned_tail_scale"] = plan.tail_scale
        entry["planned_groups"] = plan.k
        entry["planned_thresholds"] = [int(x) for x in plan.thresholds]
        entry["planned_expiry"] = [int(x) for x in plan.expiry]
        entry["planner_candidates"] = plan.candidates
        if self.hcfg["lifetimes"] == "select":
            plan.source = source
        if self.hcfg["relocation"] == "censored" and count_buckets is not None:
            plan.count_residual, plan.count_tail = censored_residuals(
                count_buckets, inv, float(horizon), self.state.age_grid
            )
        self._pending_groups, self._pending_reloc = plan, reloc
        if apply:
            self._apply_configuration(plan, reloc)
            entry["configuration"] = self.configuration
            entry["action"] = "configuration applied"

    def _apply_configuration(self, groups, plog) -> None:
        if not isinstance(groups, GroupPlan):
            if isinstance(self.state, HybridState):  # (DOGI's bind applies one before the state is ours)
                record(self.state.hyb).planned = 0
            super()._apply_configuration(groups, plog)
            return
        hr = record(self.state.hyb)
        p = self.state
        st = record(p.scalars)
        plan = groups
        k = plan.k
        st.n_intermediate = k
        glo, ghi, final, expire = p.group_lo, p.group_hi, p.group_final, p.group_expiry
        glo[:] = 0
        ghi[:] = INF
        final[:] = 1
        expire[:] = INF
        ghi[0] = st.hot_threshold
        expire[0] = st.hot_threshold if self.hot_filter_on else INF
        for i in range(k):
            g = 1 + i
            glo[g] = st.hot_threshold if i == 0 else ghi[g - 1] + 1
            if i < k - 1:
                ghi[g] = max(int(np.ceil(plan.thresholds[i])), int(glo[g]))
                expire[g] = max(int(np.ceil(plan.expiry[i])), 1)
        p.cat2group[:] = k  # DOGI's class mapping (read before the bucket's group replaces it)
        edges = bucket_time(np.arange(N_BUCKETS)) / float(self.segment_blocks)
        p.bucket2group[:] = 1 + assign_streams(edges, plan.thresholds / float(self.segment_blocks))
        p.remaining[:] = -1
        p.count_residual[:] = -1.0 if plan.count_residual is None else plan.count_residual
        p.count_tail[:] = -1.0 if plan.count_tail is None else plan.count_tail
        if plog is not None and len(plog["pred"]):
            p.remaining[:] = remaining_table(
                plog["pred"], plog["inv"], plog.get("event"), p.age_grid, self.cfg["reloc_estimate"]
            )
        if hr.select:
            # the plan's source places from now on (the model's buckets come from before_chunk)
            variant = self.source_names().index(plan.source) - 1
            hr.frequency = int(variant >= 0)
            hr.variant = max(variant, 0)
            self.source_counts[plan.source] = self.source_counts.get(plan.source, 0) + 1
        hr.planned = 1
        self.plan = plan
        self.configuration = {
            "groups": k,
            "bounds": [int(ghi[1 + i]) for i in range(k - 1)] + [None],
            "expiry": [int(expire[1 + i]) for i in range(k - 1)] + [None],
            "modelled_waf": plan.modelled_waf,
        }

    # -- results ---------------------------------------------------------------------------------
    def label(self) -> str:
        h = self.hcfg
        parts = [f"{k}={h[k]}" for k in self.HYBRID_DEFAULTS if h[k] != self.HYBRID_DEFAULTS[k]]
        if self.cfg["mu_rule"] != "climb":  # DOGI's switch, listed in conf/policy/hybrid.yaml
            parts.append(f"mu_rule={self.cfg['mu_rule']}")
        return "hybrid" + (f"[{','.join(parts)}]" if parts else "")

    def summary(self, state) -> dict:
        out = super().summary(state)
        out["hybrid"] = dict(self.hcfg)
        out["planned_groups"] = self.plan.k if self.plan is not None else None
        out["planned_modelled_waf"] = self.plan.modelled_waf if self.plan is not None else None
        if self.hcfg["hot_filter"] == "auto":
            out["hot_filter_off_at"] = self.hot_filter_off_at  # user writes; None: on to the end
        if self.hcfg["lifetimes"] == "select":
            out["lifetime_source"] = self.plan.source if self.plan is not None else None
            out["lifetime_sources_applied"] = dict(self.source_counts)
        if self.hcfg["count_reset"] is not None:
            # user writes (the prefill included) at which the undecayed counts restarted: the first
            # MAX_CHANGE_TIMES of count_changes
            out["count_changes"] = self.count_changes()
            out["count_change_at"] = [int(t) for t in state.count_change_at if t >= 0]
        return out
