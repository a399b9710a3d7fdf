"""MiDAS (Oh et al., FAST'24) in the simulator, after the authors' public trace simulator
(``sungkyun123/MiDAS-Simulation``: ``ssdsimul.cpp``, ``algorithm.cpp``, ``hf.cpp``, ``model.cpp``).

Groups (simulator ids): ``0`` is G0 (hot), ``1`` is G1, and so on.

- **Hot filter** (``hf.cpp``): a 2-bit counter per block. Overwriting a block whose old copy is in
  G0, or in G1 and younger than G0's mean victim age, counts it up; an old G1 copy older than that
  counts it down; GC relocating it out of G0 or G1 counts it down (twice out of G0). A user write
  goes to G0 when the counter is 3, else to G1. G0's mean victim age is re-estimated each period
  of that many overwrites (warm-up: one logical capacity of updates); each period's G0 traffic
  share, victims' valid ratio and size are queued (10 at most) for the model.
- **Relocation**: GC moves a victim's valid blocks from group ``g`` to ``g + 1``; the last group
  keeps its own.
- **Victims** (``gc_victim_group``, ``victim_selection``): groups before the last are FIFO at a
  designated size: the first group holding more sealed segments than its size gives its oldest.
  Otherwise the last group's segments are chosen by the run's victim rule (``SimContext.
  victim_rule``, their ``{fifo|greedy|cost-benefit}`` argument; their cost-benefit is
  ``cost_benefit_sqrt``, ``invalid * sqrt(age) / valid``; also ``cost_benefit`` and
  ``cost_benefit_sepbit``), ties to the segment sealed first.
- **Naive MiDA**: at the start, and after a fallback from group ``ns`` on, groups ``ns..ns+3``
  are plain migration groups sharing the last group's pool (with ``ns = 1``, G0 is in it too).
- **Reconfiguration** (``model.cpp``, ``checking_ginfo``): after the prefill and one more logical
  capacity of writes, each epoch of 4 device (physical) capacities of writes counts the update
  intervals of one LBA in 100 (:mod:`dogi_ml.markov.midas` turns them into the UID). When the
  epoch ends the configuration search runs at once (:func:`dogi_ml.markov.midas.gcs_search`) and
  a configuration of more than two groups applies if its modelled WAF is at most the WAF measured
  over the last device capacity of writes (their ``TMP_WAF``, sampled every device capacity of
  writes from the first prefill write). A search that finds no configuration of more than two
  groups ends the modelling for the run, as theirs does.
- **Fallback**: once every group has been collected under a new configuration, every 0.3 epoch
  the valid ratio of each group's victims is compared with the model's; a group whose victims are
  0.1 more valid than predicted is irregular: it and all later groups are merged and naive MiDA
  restarts from it. 25 collections within one user write (GC that cannot keep up) merge from
  before the group receiving the copies, or, before every group has been collected, from before
  ``commit_g``: 0 until the configuration's first GC pass ends, then the group before the last
  (their ``checking_config_apply`` tests ``commit_bit && pow(2, i)``, true for every group once
  any was collected; kept as theirs). The epoch doubles when the model is skipped
  (G0's victims too valid, the last group empty) and after two configurations in a row with an
  irregular group in the first half.

Departures from the authors' code, and why:

- The search runs in the kernel at the write that ends the epoch, and its configuration applies
  there: theirs runs it in a thread while writes go on, so where it applies depends on the
  machine (the reference runs, ``docs/peers.md``, make their search synchronous too).
- Merged or moved segments are relabelled in a policy table, since the policy may not write the
  engine's state; the open segment of a group whose role changes (merged into another, naive MiDA
  turned off, the last group moved by a split) is sealed half-written by the engine's
  ``retire_group`` and joins the group its data now belongs to, where GC collects it like any
  sealed segment (theirs copies a merged group's valid blocks into the merged group's open segment
  without counting the copies, and seals naive MiDA's open segments into the naive start marking
  half of each invalid; ``retire`` selects this, only groups that receive no more writes, or none).
- GC that cannot keep up merges after the 25th collection of a user write and GC goes on (theirs
  stops collecting for that write: the engine owns the GC loop).
- A hot-filter counter is not decremented below 0 (theirs aborts on it at the block's next write).
- Their time stamp of the largest sampled LBA (the largest multiple of 100 below the capacity,
  when the capacity is not one) lies one past their array, is never reset and starts as whatever
  the heap holds; ours has a slot for it, reset with the others.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.markov.midas import (
    ABORTED,
    FNUMBER,
    FOUND,
    NULL_ABORT,
    SAMPLING,
    UINT_MAX,
    begin_search,
    gcs_search,
    new_gcs_state,
    new_gcs_work,
    reset_class_counts,
    resize_counts,
)
from dogi_ml.sim.kernels import retire_group
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, record, scalar_fields
from dogi_ml.sim.state import C_GC, C_NOW, P_NSEG, P_SEG_BLOCKS, SEG_FREE, SEG_OPEN, SEG_SEALED
from dogi_ml.sim.victims import register_victim

from . import register

HF_MAX = 3  # hot-filter counter ceiling (2 bits)
HF_HOT = 3  # counter value that sends a user write to G0
NAIVE_N = 4  # naive MiDA groups from the naive start on
ILOOP = 25  # collections within one user write that count as GC not keeping up
QUEUE_MAX = 10  # hot-filter periods averaged for the model
ERR_SHARE = 0.3  # irregular-group check every 0.3 epoch
ERR_TOL = 0.1  # victims this much more valid than modelled make a group irregular
G0_VALID_MAX = 0.18  # model skipped when G0's victims are this valid (0.3 for a 1-segment G0)
G0_VALID_MAX_ONE = 0.3
COMMIT_ALL = 19  # theirs ``commit_g == 19``: every group collected since the configuration
STATIC_SHARE = 0.05  # segments' share assumed updated when counting static data
HISTORY = 512  # searches kept for the summary
BIG = 1 << 62
#: ``retire``: which open segments are sealed when the groups change (kernel codes)
RETIRE_MODES = {"none": 0, "unused": 1, "changed": 2}
RETIRE_NONE, RETIRE_UNUSED, RETIRE_CHANGED = 0, 1, 2
#: the generic victim rules MiDAS's last group can use (their fifo / greedy / cost-benefit, and the
#: other deterministic cost-benefit scores); kernel codes
RULES = {"fifo": 0, "greedy": 1, "cost_benefit_sqrt": 2, "cost_benefit": 3, "cost_benefit_sepbit": 4}
R_FIFO, R_GREEDY, R_CB_SQRT, R_CB, R_CB_SEPBIT = 0, 1, 2, 3, 4
#: search outcomes in the history (kernel codes)
H_SKIP_VALID, H_SKIP_EMPTY, H_GAVE_UP, H_FEW_GROUPS, H_FOUND = 0, 1, 2, 3, 4
H_TEXT = {
    H_SKIP_VALID: "skipped: G0's victims too valid",
    H_SKIP_EMPTY: "skipped: last group empty",
    H_GAVE_UP: "no configuration (the model restarts)",
    H_FEW_GROUPS: "at most two groups (modelling stops)",
    H_FOUND: "configuration",
}

#: MiDAS's scalar parameters and counters (``MidasState.scalars``, one record)
SCALARS = scalar_fields(
    naive_start=np.int64,  # ns: the last configured group, where naive MiDA starts when on
    naive_on=np.int64,  # 1: groups ns..ns+3 are naive-MiDA migration groups
    last_group=np.int64,  # the last group in use (ns, or ns + 3 with naive MiDA)
    rule=np.int64,  # RULES code of the last group's victim rule
    max_groups=np.int64,  # groups after G0 the search may use
    free_segments=np.int64,  # the GC reserve (theirs FREENUM)
    capacity=np.int64,  # logical blocks
    device_blocks=np.int64,  # physical blocks (theirs PGNUM): the progress interval
    prefill=np.int64,  # prefill writes (the hot filter starts after them)
    utilization=np.int64,  # logical blocks written at least once
    # the model's clock and UID (theirs mini_model)
    unit=np.int64,  # UID bucket width in writes (a quarter segment)
    tw=np.int64,  # epoch length in buckets (theirs time_window)
    load_left=np.int64,  # writes before the model's clock starts (the prefill and one capacity)
    current_time=np.int64,  # buckets of the epoch so far
    request_time=np.int64,  # writes in the current bucket
    model_on=np.int64,  # 1: the epoch is being counted
    first_count=np.int64,  # re-writes within a probe bucket (all LBAs)
    first_len=np.int64,  # LBAs listed in the current probe bucket
    uid_overflow=np.int64,  # intervals past the counts array (a bug if ever > 0)
    search_aborted=np.int64,  # 1: a search reached a group of size 0 (theirs aborts the program)
    # the WAF of the last device capacity of writes (theirs TMP_WAF)
    snap_now=np.int64,
    snap_gc=np.int64,
    tmp_waf=np.float64,
    # the configuration found and the one in force (theirs ginfo)
    ginfo_valid=np.int64,
    ginfo_gnum=np.int64,
    ginfo_waf=np.float64,
    ginfo_traffic=np.float64,
    model_groups=np.int64,  # groups of the configuration in force (theirs M_gnum)
    config_version=np.int64,  # 1: a configuration is in force
    commit_g=np.int64,  # group up to which the configuration is in force; COMMIT_ALL: all
    commit_bit=np.int64,  # bit g: group g collected since the configuration
    commit_pending=np.int64,  # 1: collections since commit_g was last updated
    err_flag=np.int64,  # 1: victims' valid ratios are being checked
    err_write=np.int64,  # user writes since the last irregular-group check
    err_cnt=np.int64,  # configurations in a row with early irregular groups
    tmp_err_cnt=np.int64,  # early irregular groups since the last configuration
    # GC bookkeeping
    gc_target=np.int64,  # group receiving the current victim's valid blocks
    victim_group=np.int64,  # the current victim's group
    run_time=np.int64,  # user-write time of the current run of collections
    run_collections=np.int64,  # collections within that user write
    fallbacks=np.int64,  # irregular-group fallbacks
    overrun_merges=np.int64,  # merges because GC could not keep up
    retire_mode=np.int64,  # RETIRE_*: open segments sealed when the groups change
    retired_segments=np.int64,  # open segments sealed half-written that way
    searches=np.int64,  # searches run (history rows written: min(searches, HISTORY))
    reconfigurations=np.int64,  # configurations applied
    # the hot filter
    warmup_left=np.int64,  # hot-filter updates left in the warm-up
    period_left=np.int64,  # overwrites left in the hot-filter period
    g0_age_window=np.int64,  # G0's mean victim age: a younger G1 copy counts as hot
    periods_queued=np.int64,  # hot-filter periods kept for the model (<= QUEUE_MAX)
    period_slot=np.int64,  # the next period's row in hot_periods
    g0_victim_age_sum=np.float64,  # ages of G0's victims since sealing
    g0_victims=np.float64,  # G0 victims counted in the age sum
    g0_valid_sum=np.float64,  # valid ratios of G0's victims
    g0_valid_victims=np.float64,  # G0 victims counted in the valid sum
    g0_traffic=np.float64,  # user writes sent to G0
    user_traffic=np.float64,  # user writes
)


class MidasState(NamedTuple):
    """MiDAS's state in the Numba loop."""

    scalars: np.ndarray  # one SCALARS record
    gcs: np.ndarray  # the search's persistent state (dogi_ml.markov.midas.GCS_STATE)
    work: tuple  # the search's scratch (dogi_ml.markov.midas.GcsWork)
    fifo_sizes: np.ndarray  # int64 per group: designated sealed segments of FIFO groups
    seg_owner: np.ndarray  # int32 per segment: relabelled group, -1 = the engine's
    stamp: np.ndarray  # int64 per segment: theirs seg_stamp, the write count (from 1) when it was sealed
    hot_counter: np.ndarray  # int8 per LBA: the hot filter's 2-bit counter
    stamps: np.ndarray  # int64 per sampled LBA: 2 x last write time in the epoch, +1 if written once
    counts: np.ndarray  # int64 per bucket: update intervals counted this epoch (grown between chunks)
    probes: np.ndarray  # int64 [FNUMBER]: buckets whose re-writes are counted over all LBAs
    probe_lbas: np.ndarray  # int64: LBAs written in the current probe bucket
    hot_periods: np.ndarray  # float64 [QUEUE_MAX, 3]: G0 traffic share, victim validity, size
    ginfo_sizes: np.ndarray  # int64 per group: the configuration found (segments, G0 first)
    ginfo_vr: np.ndarray  # float64 per group: its modelled valid ratios
    commit_vr: np.ndarray  # float64 per group: those of the configuration in force
    err_vpg: np.ndarray  # float64 per group: victims' valid ratios since the last check
    err_epg: np.ndarray  # float64 per group: victims counted in that sum
    out_sizes: np.ndarray  # search output scratch
    out_vr: np.ndarray
    hist_i: np.ndarray  # int64 [HISTORY, 6]: time, outcome, groups, applied, hot from the UID, static blocks
    hist_f: np.ndarray  # float64 [HISTORY, 6]: modelled WAF, measured WAF, hot traffic, G0 traffic/valid/size
    hist_sizes: np.ndarray  # int64 [HISTORY, groups]
    hist_vr: np.ndarray  # float64 [HISTORY, groups]
    scratch_sealed: np.ndarray  # int64 per group: victim selector scratch, sealed segments,
    scratch_oldest: np.ndarray  # int64 per group: oldest sealed segment,
    scratch_oldest_time: np.ndarray  # int64 per group: its seal time


# -- group bookkeeping -------------------------------------------------------------------------
@nb.njit(cache=True)
def _logical(s, p, seg):
    """A segment's MiDAS group: the policy's relabelling if any, else the engine's group; groups
    past the last (left over from a larger configuration) count as the last."""
    g = p.seg_owner[seg]
    if g < 0:
        g = s.seg_group[seg]
    last = p.scalars[0].last_group
    return last if g > last else g


@nb.njit(cache=True)
def _relabel(s, p, lo, hi, to):
    """Sealed segments of groups ``lo..hi`` now belong to ``to`` (no data moves)."""
    owner = p.seg_owner
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            g = _logical(s, p, seg)
            if lo <= g <= hi:
                owner[seg] = to


@nb.njit(cache=True)
def _set_naive(p, on):
    cfg = p.scalars[0]
    cfg.naive_on = 1 if on else 0
    cfg.last_group = cfg.naive_start + (NAIVE_N - 1 if on else 0)


@nb.njit(cache=True)
def _retire(s, p, lo, hi, to):
    """Seal the open segments of engine groups ``lo..hi`` (the engine's ``retire_group``) and
    label them MiDAS group ``to``: half-written, they become GC victims of the group their data
    now belongs to instead of spare space held for the rest of the run."""
    cfg = p.scalars[0]
    now = s.ctr[C_NOW]
    for g in range(max(lo, 0), min(hi, s.open_seg.shape[0] - 1) + 1):
        seg = retire_group(s, g, now)
        if seg >= 0:
            p.seg_owner[seg] = to
            p.stamp[seg] = now + 1
            cfg.retired_segments += 1


@nb.njit(cache=True)
def _retire_changed(s, p, lo, hi, to):
    """:func:`_retire` when groups whose role changed are retired (``retire=changed``)."""
    if p.scalars[0].retire_mode == RETIRE_CHANGED:
        _retire(s, p, lo, hi, to)


@nb.njit(cache=True)
def _retire_unused(s, p):
    """Groups past the last receive no more writes: seal their open segments into the last
    group, where their sealed segments count already (``retire=unused`` or ``changed``)."""
    cfg = p.scalars[0]
    if cfg.retire_mode != RETIRE_NONE:
        _retire(s, p, cfg.last_group + 1, BIG, cfg.last_group)


@nb.njit(cache=True)
def _merge_to(s, p, g):
    """Groups ``g`` .. last become one group ``g`` (their merge_group, repeated). With
    ``retire=changed`` the merged groups' open segments join ``g`` too (theirs copies their
    blocks into ``g``'s open segment); the groups after ``g`` restart empty as naive MiDA's."""
    cfg = p.scalars[0]
    _retire_changed(s, p, g + 1, cfg.last_group, g)
    _relabel(s, p, g + 1, BIG, g)
    cfg.naive_start = g
    _set_naive(p, cfg.naive_on == 1)
    _retire_unused(s, p)
    if g == 1:
        # everything merged (their hot_merge): no configuration left
        cfg.err_flag = 0
        cfg.err_write = 0
        cfg.config_version = 0


@nb.njit(cache=True)
def _naive_off(s, p):
    """Naive MiDA off: its groups fold into the naive start, which becomes the last group (theirs
    seals their open segments into it)."""
    cfg = p.scalars[0]
    ns = cfg.naive_start
    _retire_changed(s, p, ns + 1, ns + NAIVE_N - 1, ns)
    _relabel(s, p, ns + 1, ns + NAIVE_N - 1, ns)
    _set_naive(p, False)
    _retire_unused(s, p)


@nb.njit(cache=True)
def _split_to(s, p, new_last):
    """More groups: the last group's segments move to ``new_last``; the new middle groups start
    empty (with ``retire=changed`` the old last group's open segment moves too, sealed, as
    theirs hands it to the new last group)."""
    cfg = p.scalars[0]
    ns = cfg.naive_start
    _retire_changed(s, p, ns, new_last - 1, new_last)
    _relabel(s, p, ns, ns, new_last)
    cfg.naive_start = new_last
    _set_naive(p, False)


@nb.njit(cache=True)
def _move_oldest(s, p, g, k, to):
    """The ``k`` oldest sealed segments of group ``g`` move to group ``to`` (their move_margin_seg)."""
    owner = p.seg_owner
    for _ in range(k):
        best = -1
        best_t = BIG
        for seg in range(s.prm[P_NSEG]):
            if s.seg_state[seg] == SEG_SEALED and _logical(s, p, seg) == g and s.seg_seal_time[seg] < best_t:
                best_t = s.seg_seal_time[seg]
                best = seg
        if best < 0:
            return
        owner[best] = to


@nb.njit(cache=True)
def _sealed_count(s, p, g):
    """Sealed segments of group ``g`` (theirs TOTAL_GNUM[g])."""
    n = 0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and _logical(s, p, seg) == g:
            n += 1
    return n


@nb.njit(cache=True, inline="always")
def _stamp_if_sealing(s, p, g, t):
    """The engine seals group ``g``'s open segment at this append if it is full: stamp it with
    ``t``, their write count at the time (a user write's own number, counted from 1; during GC
    the number of the user write whose GC it is)."""
    seg = s.open_seg[g]
    if seg >= 0 and s.seg_wp[seg] == s.prm[P_SEG_BLOCKS]:
        p.stamp[seg] = t


# -- hot filter (hf.cpp) -----------------------------------------------------------------------
@nb.njit(cache=True)
def _hf_rollover(s, p):
    """End of a hot-filter period (their hf_convert_generate_to_run): queue G0's traffic, victim
    validity and size for the model, and re-estimate the age window from G0's victims."""
    cfg, q = p.scalars[0], p.hot_periods
    if cfg.g0_traffic != 0 and cfg.model_on == 1:
        i = cfg.period_slot
        q[i, 0] = cfg.g0_traffic / cfg.user_traffic
        q[i, 1] = cfg.g0_valid_sum / cfg.g0_valid_victims
        q[i, 2] = _sealed_count(s, p, 0)
        cfg.period_slot = (i + 1) % QUEUE_MAX
        if cfg.periods_queued < QUEUE_MAX:
            cfg.periods_queued += 1
    prev = float(cfg.g0_age_window)
    age = cfg.g0_victim_age_sum / cfg.g0_victims
    if prev != 0.0:
        # damp the estimate; a jump to twice the old window is capped at 1.5x
        age = prev * 1.5 if age >= prev * 2 else (age + prev) / 2.0
    cfg.g0_age_window = np.int64(age)
    cfg.period_left = cfg.g0_age_window - 1
    cfg.g0_victim_age_sum = 0.0
    cfg.g0_victims = 0.0
    cfg.g0_valid_sum = 0.0
    cfg.g0_valid_victims = 0.0
    cfg.g0_traffic = 0.0
    cfg.user_traffic = 0.0


@nb.njit(cache=True, inline="always")
def _hf_active(s, p, now):
    """Common start of a hot-filter update (their hf_generate): after the prefill, the warm-up,
    then the period's end."""
    cfg = p.scalars[0]
    if now < cfg.prefill:
        return False
    if cfg.warmup_left > 0:
        cfg.warmup_left -= 1
        return False
    if cfg.period_left <= 0 and cfg.g0_victims > 0:
        _hf_rollover(s, p)
    return True


@nb.njit(cache=True, inline="always")
def _hf_overwrite(s, p, lba, old, now):
    """A user overwrite: was the old copy short-lived (in G0, or young in G1)?"""
    if not _hf_active(s, p, now):
        return
    cfg, hf = p.scalars[0], p.hot_counter
    cfg.period_left -= 1
    seg = old // s.prm[P_SEG_BLOCKS]
    g = _logical(s, p, seg)
    if g == 0:
        if hf[lba] < HF_MAX:
            hf[lba] += 1
    elif g == 1:
        age = 0 if s.seg_state[seg] == SEG_OPEN else now + 1 - p.stamp[seg]
        if age <= cfg.g0_age_window:
            if hf[lba] < HF_MAX:
                hf[lba] += 1
        elif hf[lba] > 0:
            hf[lba] -= 1


@nb.njit(cache=True, inline="always")
def _hf_relocated(s, p, lba, g, now):
    """GC found the block still valid in G0 or G1: less hot (a G0 block doubly so)."""
    if not _hf_active(s, p, now):
        return
    hf = p.hot_counter
    if hf[lba] > 0:
        hf[lba] -= 1
        if g == 0 and hf[lba] > 0:
            hf[lba] -= 1


# -- the model's clock and UID (model.cpp) -----------------------------------------------------
@nb.njit(cache=True)
def _model_initialize(p, on):
    """Their model_initialize: a new epoch from the next write."""
    cfg = p.scalars[0]
    for i in range(p.stamps.shape[0]):
        p.stamps[i] = UINT_MAX
    for i in range(min(cfg.tw, p.counts.shape[0])):
        p.counts[i] = 0
    cfg.first_count = 0
    cfg.current_time = 0
    cfg.request_time = 0
    reset_class_counts(p.gcs)
    cfg.tmp_err_cnt = 0
    cfg.model_on = 1 if on else 0


@nb.njit(cache=True)
def _double_epoch(p):
    """Their model_resizing_timewindow(time_window * 2); the counts array grows between chunks."""
    cfg = p.scalars[0]
    cfg.tw *= 2
    for i in range(min(cfg.tw, p.counts.shape[0])):
        p.counts[i] = 0


@nb.njit(cache=True, inline="always")
def _check_time_window(cfg):
    """Their check_time_window: advance the model's clock; True when the write is counted."""
    if cfg.current_time == cfg.tw:
        return False
    if cfg.load_left > 0:
        cfg.load_left -= 1
    elif cfg.current_time < cfg.tw:
        cfg.request_time += 1
        if cfg.request_time == cfg.unit:
            cfg.current_time += 1
            cfg.request_time = 0
    return not (cfg.current_time == 0 and cfg.request_time == 0)


@nb.njit(cache=True)
def _probe(p, lba):
    """Their check_first_interval: re-writes of any LBA within a probe bucket."""
    cfg, lbas = p.scalars[0], p.probe_lbas
    if cfg.request_time == 0:
        cfg.first_len = 0
    found = False
    for j in range(cfg.first_len):
        if lbas[j] == lba:
            found = True
            break
    if found:
        cfg.first_count += 1
    else:
        lbas[cfg.first_len] = lba
        cfg.first_len += 1
    if cfg.request_time == cfg.unit - 1:
        cfg.first_len = 0


@nb.njit(cache=True)
def _update_count(p, idx):
    """Their update_count: the sampled LBA's update interval, in buckets."""
    cfg, stamps = p.scalars[0], p.stamps
    t = cfg.current_time * cfg.unit + cfg.request_time
    st = stamps[idx]
    if st == UINT_MAX:
        stamps[idx] = (t << 1) + 1
    elif st == UINT_MAX - 1:
        stamps[idx] = t << 1
    else:
        iv = (t - (st >> 1)) // cfg.unit
        if iv >= cfg.tw:
            iv = cfg.tw - 1
        stamps[idx] = t << 1
        if iv >= p.counts.shape[0]:
            cfg.uid_overflow += 1
            iv = p.counts.shape[0] - 1
        p.counts[iv] += 1


@nb.njit(cache=True)
def _check_interval(s, p, lba, now):
    """Their check_interval: the probes, the epoch's end (the search), the sampled LBAs."""
    cfg = p.scalars[0]
    for i in range(FNUMBER):
        if cfg.current_time < p.probes[i]:
            break
        if cfg.current_time == p.probes[i]:
            _probe(p, lba)
    if cfg.current_time >= cfg.tw:
        cfg.model_on = 0
        _search(s, p, now)
        return
    if lba % SAMPLING == 0:
        _update_count(p, lba // SAMPLING)


@nb.njit(cache=True)
def _history(p, now, outcome, g0_traffic, g0_valid, g0_size):
    cfg = p.scalars[0]
    k = cfg.searches
    cfg.searches += 1
    if k >= HISTORY:
        return
    p.hist_i[k, 0] = now
    p.hist_i[k, 1] = outcome
    p.hist_f[k, 3] = g0_traffic
    p.hist_f[k, 4] = g0_valid
    p.hist_f[k, 5] = g0_size


@nb.njit(cache=True)
def _search(s, p, now):
    """Their making_group_configuration3 around the search: the static blocks, the hot filter's
    averages, the checks that skip the model (and double the epoch), the UID, the search."""
    cfg, gcs = p.scalars[0], p.gcs
    seg_blocks = s.prm[P_SEG_BLOCKS]
    nseg = s.prm[P_NSEG]
    ns = cfg.naive_start
    # static data: segments of the last group(s) (or free) without an invalid block, less 5% of
    # the last groups' sealed segments
    static = 0
    for seg in range(nseg):
        if s.seg_state[seg] == SEG_FREE:
            static += seg_blocks
        elif _logical(s, p, seg) >= ns and s.seg_wp[seg] == s.seg_valid[seg]:
            static += seg_blocks
    static = np.int64(static - seg_blocks * _sealed_count(s, p, cfg.last_group) * STATIC_SHARE)
    if cfg.naive_on == 1:
        for i in range(NAIVE_N):
            static = np.int64(static - seg_blocks * _sealed_count(s, p, ns + i) * STATIC_SHARE)
    # the hot filter's periods, oldest first
    n = cfg.periods_queued
    traffic, valid, size = 0.01, 0.05, 1.0
    if n > 0:
        t_sum, v_sum, z_sum = 0.0, 0.0, 0.0
        first = (cfg.period_slot - n) % QUEUE_MAX
        for k in range(n):
            row = (first + k) % QUEUE_MAX
            t_sum += p.hot_periods[row, 0]
            v_sum += p.hot_periods[row, 1]
            z_sum += p.hot_periods[row, 2]
        traffic = t_sum / n
        valid = v_sum / n
        size = np.floor(z_sum / n + 1.0 + 0.5)
    cfg.periods_queued = 0
    cfg.period_slot = 0
    begin_search(gcs, traffic, valid, size, cfg.utilization, static)
    outcome = -1
    if size > 1.0:
        if valid > G0_VALID_MAX:
            outcome = H_SKIP_VALID
    elif valid > G0_VALID_MAX_ONE:
        outcome = H_SKIP_VALID
    if outcome < 0 and _sealed_count(s, p, cfg.last_group) < 1:
        outcome = H_SKIP_EMPTY
    if outcome >= 0:
        _history(p, now, outcome, traffic, valid, size)
        _double_epoch(p)
        _model_initialize(p, True)
        return
    total = resize_counts(p.counts, cfg.tw, cfg.first_count, p.stamps, cfg.capacity // SAMPLING)
    status, gnum, waf, hot = gcs_search(
        gcs,
        p.work,
        p.counts,
        cfg.tw,
        cfg.unit,
        seg_blocks,
        cfg.device_blocks,
        nseg,
        cfg.free_segments,
        total,
        cfg.max_groups,
        p.out_sizes,
        p.out_vr,
    )
    k = cfg.searches
    if status == ABORTED:
        cfg.search_aborted = 1
        status = NULL_ABORT
    if status == NULL_ABORT:
        _history(p, now, H_GAVE_UP, traffic, valid, size)
        _model_initialize(p, True)
        return
    _history(p, now, H_FOUND if gnum > 2 else H_FEW_GROUPS, traffic, valid, size)
    if k < HISTORY:
        p.hist_i[k, 2] = gnum
        p.hist_i[k, 4] = 1 - gcs[0].real_flag
        p.hist_i[k, 5] = gcs[0].no_access
        p.hist_f[k, 0] = waf
        p.hist_f[k, 2] = hot
        for i in range(p.hist_sizes.shape[1]):
            p.hist_sizes[k, i] = p.out_sizes[i]
            p.hist_vr[k, i] = p.out_vr[i]
    if status == FOUND and gnum > 2:
        cfg.ginfo_valid = 1
        cfg.ginfo_gnum = gnum
        cfg.ginfo_waf = waf
        cfg.ginfo_traffic = hot
        for i in range(p.ginfo_sizes.shape[0]):
            p.ginfo_sizes[i] = p.out_sizes[i]
            p.ginfo_vr[i] = p.out_vr[i]


# -- applying a configuration and checking it (algorithm.cpp) ----------------------------------
@nb.njit(cache=True)
def _clear_err(p):
    for g in range(p.err_vpg.shape[0]):
        p.err_vpg[g] = 0.0
        p.err_epg[g] = 0.0


@nb.njit(cache=True)
def _change_config(s, p):
    """Their change_config_2: merge or split to the new group number, then the FIFO groups'
    designated sizes (G1's one less for its open segment), the oldest segments over a size moved
    to the last group."""
    cfg = p.scalars[0]
    old_n = cfg.naive_start + 1
    new_n = cfg.ginfo_gnum
    cfg.model_groups = new_n
    if new_n < old_n:
        _merge_to(s, p, new_n - 1)
    elif new_n > old_n:
        _split_to(s, p, new_n - 1)
    ns = cfg.naive_start
    for i in range(new_n):
        size = p.ginfo_sizes[i] - 1
        if i == 1:
            size -= 1
        p.fifo_sizes[i] = size
        if i != ns:
            total = _sealed_count(s, p, i)
            if size < total:
                _move_oldest(s, p, i, total - size, ns)


@nb.njit(cache=True)
def _checking_ginfo(s, p, now):
    """Their checking_ginfo: a configuration found applies if its modelled WAF is at most the
    measured one; the epoch doubles after two configurations in a row with early irregular groups.
    Called (by midas_user) only when there is one (``ginfo_valid``): their early return."""
    cfg = p.scalars[0]
    cfg.err_write = 0
    cfg.err_flag = 0
    _clear_err(p)
    apply = not (cfg.tmp_waf < cfg.ginfo_waf)
    if apply:
        if cfg.tmp_err_cnt != 0:
            cfg.err_cnt += 1
        else:
            cfg.err_cnt = 0
        if cfg.err_cnt >= 2:
            _double_epoch(p)
    elif cfg.tmp_err_cnt != 0:
        cfg.err_cnt += 1
    cfg.tmp_err_cnt = 0
    if apply:
        if cfg.naive_on == 1:
            _naive_off(s, p)
        cfg.commit_g = 0
        _change_config(s, p)
        for i in range(p.ginfo_vr.shape[0]):
            p.commit_vr[i] = p.ginfo_vr[i]
        cfg.config_version = 1
        cfg.commit_bit = 0
        cfg.err_flag = 0
        cfg.err_write = 0
        cfg.reconfigurations += 1
    k = cfg.searches - 1
    if 0 <= k < HISTORY:
        p.hist_i[k, 3] = 1 if apply else 0
        p.hist_f[k, 1] = cfg.tmp_waf
    _model_initialize(p, True)
    cfg.ginfo_valid = 0


@nb.njit(cache=True)
def _fallback(s, p, g):
    """Groups ``g``.. are merged and naive MiDA restarts from ``g``."""
    cfg = p.scalars[0]
    cfg.naive_on = 1
    _merge_to(s, p, g)
    cfg.fallbacks += 1


@nb.njit(cache=True)
def _err_handling(s, p):
    """Their err_handling: the first group whose victims are 0.1 more valid than modelled falls
    back with every later group."""
    cfg = p.scalars[0]
    cfg.err_flag = 1
    ns = cfg.naive_start
    upto = ns if cfg.naive_on == 1 else cfg.last_group + 1
    for g in range(1, upto):
        real = p.err_vpg[g] / p.err_epg[g] if p.err_epg[g] > 0 else np.nan
        if p.commit_vr[g] - real <= -ERR_TOL:
            _fallback(s, p, g)
            if g <= cfg.model_groups // 2:
                cfg.tmp_err_cnt += 1
            break
    _clear_err(p)


@nb.njit(cache=True, inline="always")
def _checking_err_time(s, p):
    cfg = p.scalars[0]
    if cfg.err_flag == 1:
        cfg.err_write += 1
    if cfg.err_write > cfg.tw * cfg.unit * ERR_SHARE:
        _err_handling(s, p)
        cfg.err_write = 0


@nb.njit(cache=True)
def _commit_check(p):
    """Their checking_config_apply after a GC pass: ``commit_g`` follows the collected groups
    (as theirs computes it: the last FIFO group once any group was collected), and once every
    group has been collected the victims' valid ratios start being checked."""
    cfg = p.scalars[0]
    if cfg.commit_g == COMMIT_ALL:
        return
    for i in range(cfg.naive_start):
        if cfg.commit_bit != 0:
            cfg.commit_g = i
        else:
            break
    if cfg.commit_bit == (1 << (cfg.naive_start + 1)) - 1:
        cfg.err_flag = 1
        cfg.commit_g = COMMIT_ALL


@nb.njit(cache=True)
def _gc_overrun(s, p, target):
    """Their infinite_gc_handling: GC could not keep up; merge from before the group receiving
    the copies (before every group was collected: from before ``commit_g``), naive MiDA on."""
    cfg = p.scalars[0]
    if cfg.config_version == 1 and target <= cfg.model_groups // 2:
        cfg.tmp_err_cnt += 1
    g = target
    if cfg.commit_g != COMMIT_ALL:
        g = cfg.commit_g
    ns = cfg.naive_start
    if ns == 1:
        cfg.config_version = 0
        return
    if g >= ns:
        g = ns
    g = max(g - 1, 1)
    if g < ns:
        _merge_to(s, p, g)
    if cfg.commit_g != COMMIT_ALL and cfg.commit_g >= cfg.naive_start:
        cfg.err_flag = 1
        cfg.commit_g = COMMIT_ALL
    if cfg.naive_on == 0:
        _set_naive(p, True)
    cfg.overrun_merges += 1


# -- the three placement functions and the victim selector ------------------------------------
# midas_user, midas_gc and their small per-write helpers are inline="always"
# (dogi_ml/sim/_loop_template.py says why), and _checking_ginfo, which is not, is called only when
# there is a configuration to check. On zipf 1 GiB: 5.2 M appends per CPU second before, 7.3 M after.
@nb.njit(cache=True, inline="always")
def midas_user(s, p, lba, now):
    cfg = p.scalars[0]
    if now % cfg.device_blocks == 2 % cfg.device_blocks:
        # their progress print: the WAF of the writes since the last one ("TMP_WAF")
        du = now - cfg.snap_now + 1
        gc = s.ctr[C_GC]
        dg = gc - cfg.snap_gc if gc >= cfg.snap_gc else gc
        cfg.tmp_waf = (du + dg) / du
        cfg.snap_now = now
        cfg.snap_gc = gc
    if cfg.commit_pending == 1:
        cfg.commit_pending = 0
        _commit_check(p)
    old = s.l2p[lba]
    if old >= 0:
        _hf_overwrite(s, p, lba, old, now)
    else:
        cfg.utilization += 1
    group = 1
    if now >= cfg.prefill:
        cfg.user_traffic += 1.0
        if p.hot_counter[lba] >= HF_HOT:
            cfg.g0_traffic += 1.0
            group = 0
    _stamp_if_sealing(s, p, group, now + 1)
    # their modeling_check (after the write; the write's group is already chosen)
    if cfg.model_on == 1 and _check_time_window(cfg):
        _check_interval(s, p, lba, now)
    if cfg.ginfo_valid != 0:
        _checking_ginfo(s, p, now)
    _checking_err_time(s, p)
    return group


@nb.njit(cache=True, inline="always")
def midas_gc(s, p, lba, victim, now):
    cfg = p.scalars[0]
    g = cfg.victim_group
    if g <= 1:
        _hf_relocated(s, p, lba, g, now)
    _stamp_if_sealing(s, p, cfg.gc_target, now)
    return cfg.gc_target


@nb.njit(cache=True)
def midas_reclaim(s, p, victim, now):
    cfg = p.scalars[0]
    g = _logical(s, p, victim)
    ns = cfg.naive_start
    last = cfg.last_group
    target = g + 1 if g < last else last
    cfg.victim_group = g
    cfg.gc_target = target
    v = s.seg_valid[victim] / s.prm[P_SEG_BLOCKS]
    if g == 0 and now >= cfg.prefill:
        cfg.g0_victim_age_sum += now - p.stamp[victim]
        cfg.g0_victims += 1.0
        cfg.g0_valid_sum += v
        cfg.g0_valid_victims += 1.0
    if cfg.commit_g == COMMIT_ALL and cfg.err_flag == 1:
        p.err_vpg[g] += v
        p.err_epg[g] += 1.0
    # the group the victim came from, as their gc_victim_group names it (the pool: the naive start)
    cfg.commit_bit |= 1 << (g if ns > 1 and g < ns else ns)
    cfg.commit_pending = 1
    p.seg_owner[victim] = -1  # the segment is freed: its next group comes from the engine
    if now == cfg.run_time:
        cfg.run_collections += 1
    else:
        cfg.run_time = now
        cfg.run_collections = 1
    if cfg.run_collections % ILOOP == 0:
        _gc_overrun(s, p, target)


@nb.njit(cache=True)
def _pool_better(rule, score, seal, v, best, best_score, best_seal, best_v):
    """Whether a pool segment beats the best so far under ``rule`` (ties: sealed first)."""
    if best < 0:
        return True
    if rule == R_FIFO:
        return seal < best_seal
    if rule == R_GREEDY:
        return v < best_v or (v == best_v and seal < best_seal)
    return score > best_score or (score == best_score and seal < best_seal)


@nb.njit(cache=True)
def midas_victim(s, p, now):
    """The oldest segment of the first FIFO group over its size, else the last group's (the pool's)
    best segment under the run's rule."""
    cfg, sizes, cnt, old, old_t = p.scalars[0], p.fifo_sizes, p.scratch_sealed, p.scratch_oldest, p.scratch_oldest_time
    ns = cfg.naive_start
    rule = cfg.rule
    seg_blocks = s.prm[P_SEG_BLOCKS]
    for g in range(cnt.shape[0]):
        cnt[g] = 0
        old[g] = -1
        old_t[g] = BIG
    best, best_score, best_seal, best_v = -1, -1.0, BIG, BIG
    empty, empty_seal = -1, BIG  # a pool segment with no valid block: taken at once (cost-benefit)
    fewest = -1
    fewest_valid = BIG
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        v = s.seg_valid[seg]
        seal = s.seg_seal_time[seg]
        if v < fewest_valid:
            fewest_valid = v
            fewest = seg
        g = _logical(s, p, seg)
        if ns > 1 and g < ns:
            cnt[g] += 1
            if seal < old_t[g]:
                old_t[g] = seal
                old[g] = seg
            continue
        if v == 0 and rule != R_FIFO and rule != R_GREEDY and rule != R_CB:
            if seal < empty_seal:
                empty_seal = seal
                empty = seg
            continue
        age = float(now - p.stamp[seg])
        score = 0.0
        if rule == R_CB_SQRT:
            score = (seg_blocks - v) * np.sqrt(age) / v
        elif rule == R_CB:
            score = (seg_blocks - v) * age / (seg_blocks + v)
        elif rule == R_CB_SEPBIT:
            score = (seg_blocks - v) * age / v
        if _pool_better(rule, score, seal, v, best, best_score, best_seal, best_v):
            best, best_score, best_seal, best_v = seg, score, seal, v
    if ns > 1:
        for g in range(ns):
            if cnt[g] > sizes[g] and old[g] >= 0:
                return old[g]
    if empty >= 0:
        return empty
    if best >= 0:
        return best
    return fewest  # the last group holds nothing sealed yet: fewest valid blocks anywhere


register_victim("midas", midas_victim)


@register
class MiDAS(PlacementPolicy):
    """MiDAS placement with its own victim selector: FIFO in the groups before the last, the run's
    victim rule (``policy.victim`` / ``sim.victim``) in the last."""

    name = "midas"
    #: the authors' default rule for the last group: their cost-benefit, invalid * sqrt(age) / valid
    victim = "cost_benefit_sqrt"
    selector = "midas"
    victim_rules = tuple(RULES)
    victim_note = "FIFO in the groups before the last, the victim rule in the last"
    default_groups = 1 + 9 + NAIVE_N - 1
    place_user = midas_user
    place_gc = midas_gc
    on_reclaim = midas_reclaim

    def __init__(
        self, n_groups=None, max_groups: int = 9, epoch_capacities: float = 4.0, retire: str = "changed", **params
    ):
        max_groups = int(max_groups)
        if retire not in RETIRE_MODES:
            raise ValueError(
                f"policy midas: retire must be one of {sorted(RETIRE_MODES)} (which open segments "
                f"are sealed when the groups change), got {retire!r}"
            )
        if not 2 <= max_groups <= 60:  # one bit per group in a 64-bit mask (commit check)
            raise ValueError(
                f"policy midas: max_groups (groups after G0 the search may use) must be in [2, 60], got {max_groups}"
            )
        if not float(epoch_capacities) > 0:
            raise ValueError(f"policy midas: epoch_capacities must be > 0, got {epoch_capacities}")
        need = 1 + max_groups + NAIVE_N - 1
        n_groups = need if n_groups is None else int(n_groups)
        if n_groups < need:
            raise ValueError(
                f"policy midas: max_groups={max_groups} needs n_groups >= {need} (G0, up to "
                f"{max_groups} groups, {NAIVE_N - 1} naive-MiDA groups past the last), "
                f"got n_groups={n_groups}"
            )
        super().__init__(n_groups, **params)
        self.max_groups = max_groups
        self.epoch_capacities = float(epoch_capacities)
        self.retire = retire
        self.rule = None

    def accepted_params(self) -> tuple[str, ...]:
        return ("max_groups", "epoch_capacities", "retire")

    def label(self) -> str:
        return self.name if self.retire == "changed" else f"{self.name}[retire={self.retire}]"

    def bind(self, ctx: SimContext) -> tuple:
        rule = ctx.victim_rule
        if rule not in RULES:
            raise ValueError(
                f"policy midas: its last group cannot use victim rule {rule!r}; set policy.victim or "
                f"sim.victim to one of {', '.join(RULES)}"
            )
        self.rule = rule
        cap, seg = ctx.capacity, ctx.segment_blocks
        unit = max(1, seg // 4)  # a quarter segment, as theirs
        device = ctx.n_segments * seg
        tw = int(self.epoch_capacities * device) // unit
        if tw <= FNUMBER + 1:
            raise ValueError(
                f"policy midas: an epoch of {self.epoch_capacities} x {device} blocks holds {tw} interval "
                f"buckets of {unit} blocks, too few for its {FNUMBER} probes; raise epoch_capacities"
            )
        g = self.n_groups
        n = self.max_groups + 1
        scalars = new_scalars(SCALARS)
        cfg = record(scalars)
        cfg.naive_start = 1
        cfg.naive_on = 1
        cfg.last_group = 1 + NAIVE_N - 1
        cfg.rule = RULES[rule]
        cfg.max_groups = self.max_groups
        cfg.free_segments = ctx.gc_free_segments
        cfg.capacity = cap
        cfg.device_blocks = device
        cfg.prefill = ctx.prefill_blocks
        cfg.unit = unit
        cfg.tw = tw
        cfg.load_left = ctx.prefill_blocks + cap  # their clock starts after the prefill and one capacity
        cfg.model_on = 1
        cfg.commit_g = COMMIT_ALL
        cfg.run_time = -1
        cfg.warmup_left = cap  # hot filter warm-up: one capacity of updates
        cfg.g0_age_window = cap
        cfg.period_left = cap
        cfg.retire_mode = RETIRE_MODES[self.retire]
        # the probe buckets, at 1/11 .. 10/11 of the first epoch (not moved when it doubles)
        probes = np.array([tw // (FNUMBER + 1) * (i + 1) for i in range(FNUMBER)], np.int64)
        # the search runs in the kernel; between chunks the counts array grows if the epoch doubled
        self.max_chunk_blocks = max(unit, cap // 4)
        return MidasState(
            scalars=scalars,
            gcs=new_gcs_state(),
            work=new_gcs_work(self.max_groups),
            fifo_sizes=np.zeros(g, np.int64),
            seg_owner=np.full(ctx.n_segments, -1, np.int32),
            stamp=np.zeros(ctx.n_segments, np.int64),
            hot_counter=np.zeros(cap, np.int8),
            stamps=np.full(cap // SAMPLING + 1, UINT_MAX, np.int64),
            counts=np.zeros(tw * 2, np.int64),
            probes=probes,
            probe_lbas=np.zeros(unit + 1, np.int64),
            hot_periods=np.zeros((QUEUE_MAX, 3), np.float64),
            ginfo_sizes=np.zeros(n, np.int64),
            ginfo_vr=np.zeros(n, np.float64),
            commit_vr=np.zeros(max(n, g), np.float64),
            err_vpg=np.zeros(g, np.float64),
            err_epg=np.zeros(g, np.float64),
            out_sizes=np.zeros(n, np.int64),
            out_vr=np.zeros(n, np.float64),
            hist_i=np.zeros((HISTORY, 6), np.int64),
            hist_f=np.zeros((HISTORY, 6), np.float64),
            hist_sizes=np.zeros((HISTORY, n), np.int64),
            hist_vr=np.zeros((HISTORY, n), np.float64),
            scratch_sealed=np.zeros(g, np.int64),
            scratch_oldest=np.zeros(g, np.int64),
            scratch_oldest_time=np.zeros(g, np.int64),
        )

    def between_chunks(self, sim) -> None:
        p = sim.pstate
        cfg = record(p.scalars)
        if cfg.uid_overflow:
            raise RuntimeError(f"policy midas: {int(cfg.uid_overflow)} update intervals fell past the counts array")
        if cfg.search_aborted:
            raise RuntimeError("policy midas: the configuration search reached a group of 0 segments (theirs aborts)")
        # a doubled epoch needs more buckets than the array holds: intervals reach them no sooner
        # than the old epoch's length into the new one, and chunks are a quarter capacity at most
        tw = int(cfg.tw)
        if tw > p.counts.shape[0]:
            grown = np.zeros(2 * tw, np.int64)
            grown[: p.counts.shape[0]] = p.counts
            sim.pstate = p._replace(counts=grown)

    def history(self, state) -> list[dict]:
        """The searches run, oldest first (at most HISTORY)."""
        cfg = record(state.scalars)
        out = []
        for k in range(min(int(cfg.searches), HISTORY)):
            hi, hf = state.hist_i[k], state.hist_f[k]
            outcome = int(hi[1])
            entry = {
                "t": int(hi[0]),
                "outcome": H_TEXT[outcome],
                "applied": bool(hi[3]),
                "hot_filter": {"traffic": float(hf[3]), "valid": float(hf[4]), "size": int(hf[5])},
            }
            if outcome in (H_FOUND, H_FEW_GROUPS):
                gn = int(hi[2])
                entry.update(
                    n_groups=gn,
                    sizes=[int(x) for x in state.hist_sizes[k, :gn]],
                    valid_ratios=[round(float(x), 4) for x in state.hist_vr[k, :gn]],
                    predicted_waf=float(hf[0]),
                    hot_traffic=float(hf[2]),
                    hot_from_uid=bool(hi[4]),
                    static_blocks=int(hi[5]),
                )
            if outcome == H_FOUND:
                entry["measured_waf"] = float(hf[1])
            out.append(entry)
        return out

    def summary(self, state) -> dict:
        cfg = record(state.scalars)
        ns = int(cfg.naive_start)
        return {
            "midas": {
                "victim_rule": self.rule,
                "reconfigurations": int(cfg.reconfigurations),
                "models": int(cfg.searches),
                "modelling": bool(cfg.model_on) or bool(cfg.ginfo_valid),
                "naive_mida": bool(cfg.naive_on),
                "naive_start": ns,
                "last_group": int(cfg.last_group),
                # designated sealed segments of the FIFO groups before the naive start
                "fifo_sizes": [int(x) for x in state.fifo_sizes[:ns]] if ns > 1 else [],
                "fallbacks": int(cfg.fallbacks),
                "gc_overrun_merges": int(cfg.overrun_merges),
                "retire": self.retire,
                "retired_segments": int(cfg.retired_segments),
                "epoch_blocks": int(cfg.tw) * int(cfg.unit),
                "history": self.history(state),
            }
        }
