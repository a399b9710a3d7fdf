"""MiDAS (Oh et al., FAST'24) in the simulator, after the authors' public trace simulator.

Groups (simulator ids): ``0`` is G0 (hot), ``1`` is G1, and so on.

- **Hot filter**: a 2-bit counter per block. Overwriting a block whose old copy is in G0, or in
  G1 and younger than G0's mean victim age, counts it up; an old G1 copy older than that counts
  it down; GC relocating it out of G0 or G1 counts it down (twice out of G0). A user write goes
  to G0 when the counter is 3, else to G1. G0's mean victim age is re-estimated each period of
  that many overwrites (warm-up: one capacity of overwrites).
- **Relocation**: GC moves a victim's valid blocks from group ``g`` to ``g + 1``; the last group
  keeps its own.
- **Victims**: groups before the last are FIFO at a designated size: the first group holding
  more sealed segments than its size gives its oldest. Otherwise cost-benefit
  (``invalid * sqrt(age) / valid``) over the last group.
- **Naive MiDA**: at the start, and after a fallback from group ``ns`` on, groups ``ns..ns+3``
  are plain migration groups sharing the cost-benefit pool (with ``ns = 1``, G0 is in it too).
- **Reconfiguration**: each epoch (4x capacity of user writes) the update intervals of all user
  writes are counted (:mod:`dogi_ml.markov.midas` builds the UID); between chunks the group number and
  sizes of lowest modelled WAF are searched and applied if the model's WAF is below the WAF
  measured over the last capacity of writes and G0 has at least two groups after it.
- **Fallback**: once every group has been collected under a new configuration, the valid ratio
  of each group's victims is compared with the model's every 0.3 epoch; a group whose victims
  are 0.1 more valid than predicted is irregular: it and all later groups are merged and naive
  MiDA restarts from it. 25 collections within one user write (GC that cannot keep up) merge
  the same way from the group receiving the copies. The epoch doubles after a skipped model
  (G0's victims too valid, last group empty) or after two configurations in a row with early
  irregular groups.

Departures from the authors' code, and why: update intervals are counted for every block (our
simulator already keeps each block's last write time; MiDAS samples 1 in 100 to save memory);
merged or moved segments are relabelled in a policy table, since the policy may not write the
engine's state; the open segment of a group whose role changes (merged into another, naive MiDA
turned off, the last group moved by a split) is sealed half-written by the engine's
``retire_group`` and joins the group its data now belongs to, where GC collects it like any
sealed segment (MiDAS copies a merged group's valid blocks into the merged group's open segment
without counting the copies, and seals naive MiDA's open segments into the naive start;
``retire`` selects this, only groups that receive no more writes, or none as before); the
search runs between chunks, at most a quarter capacity of writes after the epoch ends (MiDAS runs
it in a thread while writes continue); GC that cannot keep up merges from before the group
receiving the copies (MiDAS's choice depends on which groups have been collected since the last
configuration); the epoch doubles at most 3 times.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.markov.midas import Device, HotStats, build_uid, search
from dogi_ml.sim.kernels import retire_group
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, record, scalar_fields
from dogi_ml.sim.state import C_GC, C_NOW, C_USER, P_NSEG, P_SEG_BLOCKS, SEG_OPEN, SEG_SEALED
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
MAX_DOUBLINGS = 3  # the epoch doubles at most this many times
BIG = 1 << 62
#: ``retire``: which open segments are sealed when the groups change (kernel codes)
RETIRE_MODES = {"none": 0, "unused": 1, "changed": 2}
RETIRE_NONE, RETIRE_UNUSED, RETIRE_CHANGED = 0, 1, 2

#: MiDAS's scalar parameters and counters (``MidasState.scalars``, one record)
SCALARS = scalar_fields(
    naive_start=np.int64,  # ns: the last configured group, where naive MiDA starts when on
    naive_on=np.int64,  # 1: groups ns..ns+3 are naive-MiDA migration groups
    last_group=np.int64,  # the last group in use (ns, or ns + 3 with naive MiDA)
    bucket_blocks=np.int64,  # UID bucket width in user writes (a quarter segment)
    epoch_blocks=np.int64,  # UID epoch length in user writes
    max_epoch_blocks=np.int64,  # the epoch's ceiling after doublings
    epoch_start=np.int64,  # logical time the current epoch started
    epoch_id=np.int64,  # the current epoch's number (overwrite_epoch marks)
    uid_ready=np.int64,  # 1: a finished epoch's UID waits for the Python hook
    uid_done_buckets=np.int64,  # buckets of that UID
    uid_done_once=np.int64,  # blocks written once in that epoch
    uid_done_at=np.int64,  # logical time that epoch ended
    capacity=np.int64,  # logical blocks
    prefill=np.int64,  # prefill writes (not counted as traffic)
    gc_target=np.int64,  # group receiving the current victim's valid blocks
    victim_group=np.int64,  # the current victim's group
    run_time=np.int64,  # user-write time of the current run of collections
    run_collections=np.int64,  # collections within that user write
    applied=np.int64,  # 1: a model configuration is in force
    collected_mask=np.int64,  # bit g: group g collected since the configuration was applied
    checking=np.int64,  # 1: every group collected, victims' valid ratios are being checked
    check_writes=np.int64,  # user writes since the last irregular-group check
    early_irregular=np.int64,  # irregular groups in the first half since the last model
    model_groups=np.int64,  # groups of the configuration in force
    warmup_left=np.int64,  # hot-filter updates left in the warm-up
    period_left=np.int64,  # overwrites left in the hot-filter period
    g0_age_window=np.int64,  # G0's mean victim age: a younger G1 copy counts as hot
    periods_queued=np.int64,  # hot-filter periods kept for the model (<= QUEUE_MAX)
    period_slot=np.int64,  # the next period's row in hot_periods
    snapshot_at=np.int64,  # logical time of the next WAF snapshot
    snap_user0=np.int64,  # user / GC writes at the snapshot before last ...
    snap_gc0=np.int64,
    snap_user1=np.int64,  # ... and at the last: their difference is the measured WAF
    snap_gc1=np.int64,
    fallbacks=np.int64,  # irregular-group fallbacks
    overrun_merges=np.int64,  # merges because GC could not keep up
    irregular_streak=np.int64,  # configurations in a row with early irregular groups
    retire_mode=np.int64,  # RETIRE_*: open segments sealed when the groups change
    retired_segments=np.int64,  # open segments sealed half-written that way
    # the hot-filter period's accumulators
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
    fifo_sizes: np.ndarray  # int64 per group: designated sealed segments of FIFO groups
    seg_owner: np.ndarray  # int32 per segment: relabelled group, -1 = the engine's
    hot_counter: np.ndarray  # int8 per LBA: the hot filter's 2-bit counter
    overwrite_epoch: np.ndarray  # int32 per LBA: epoch in which the block was written twice
    uid: np.ndarray  # int64 per bucket: update intervals counted this epoch
    uid_done: np.ndarray  # int64 per bucket: the UID of the last finished epoch
    hot_periods: np.ndarray  # float64 [QUEUE_MAX, 3]: G0 traffic share, victim validity, size
    predicted_valid: np.ndarray  # float64 per group: modelled valid ratio of its victims
    victim_valid_sum: np.ndarray  # float64 per group: victims' valid ratios since the last check
    victim_count: np.ndarray  # int64 per group: victims counted in that sum
    scratch_sealed: np.ndarray  # int64 per group: victim selector scratch, sealed segments,
    scratch_oldest: np.ndarray  # int64 per group: oldest sealed segment,
    scratch_oldest_time: np.ndarray  # int64 per group: its seal time


# -- group bookkeeping (kernel and Python hooks) ---------------------------------------------
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
    """Groups ``g`` .. last become one group ``g`` (MiDAS's merge_group, repeated). With
    ``retire=changed`` the merged groups' open segments join ``g`` too (MiDAS copies their
    blocks into ``g``'s open segment); the groups after ``g`` restart empty as naive MiDA's."""
    cfg = p.scalars[0]
    _retire_changed(s, p, g + 1, cfg.last_group, g)
    _relabel(s, p, g + 1, BIG, g)
    cfg.naive_start = g
    _set_naive(p, cfg.naive_on == 1)
    _retire_unused(s, p)
    if g == 1:
        # everything merged: no configuration left to check
        cfg.applied = 0
        cfg.checking = 0
        cfg.check_writes = 0


@nb.njit(cache=True)
def _naive_off(s, p):
    """Naive MiDA off: its groups fold into the naive start, which becomes the last group (MiDAS
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
    MiDAS hands it to the new last group)."""
    cfg = p.scalars[0]
    ns = cfg.naive_start
    _retire_changed(s, p, ns, new_last - 1, new_last)
    _relabel(s, p, ns, ns, new_last)
    cfg.naive_start = new_last
    _set_naive(p, False)


@nb.njit(cache=True)
def _move_oldest(s, p, g, k, to):
    """The ``k`` oldest sealed segments of group ``g`` move to group ``to`` (MiDAS's move_margin_seg)."""
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
    n = 0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and _logical(s, p, seg) == g:
            n += 1
    return n


# -- hot filter --------------------------------------------------------------------------------
@nb.njit(cache=True)
def _hf_rollover(s, p):
    """End of a hot-filter period: record G0's traffic, victim validity and size for the model,
    and re-estimate the age window from G0's victims."""
    cfg, q = p.scalars[0], p.hot_periods
    if cfg.g0_traffic > 0 and cfg.user_traffic > 0:
        i = cfg.period_slot
        q[i, 0] = cfg.g0_traffic / cfg.user_traffic
        q[i, 1] = cfg.g0_valid_sum / cfg.g0_valid_victims
        q[i, 2] = _sealed_count(s, p, 0)
        cfg.period_slot = (i + 1) % QUEUE_MAX
        if cfg.periods_queued < QUEUE_MAX:
            cfg.periods_queued += 1
    prev = float(cfg.g0_age_window)
    age = cfg.g0_victim_age_sum / cfg.g0_victims
    if prev > 0:
        # damp the estimate; a jump to twice the old window is capped at 1.5x
        age = 1.5 * prev if age >= 2 * prev else (age + prev) / 2
    cfg.g0_age_window = int(age)
    cfg.period_left = cfg.g0_age_window - 1
    cfg.g0_victim_age_sum = 0.0
    cfg.g0_victims = 0.0
    cfg.g0_valid_sum = 0.0
    cfg.g0_valid_victims = 0.0
    cfg.g0_traffic = 0.0
    cfg.user_traffic = 0.0


@nb.njit(cache=True)
def _hf_active(s, p):
    """Common start of a hot-filter update: the warm-up, then the period's end."""
    cfg = p.scalars[0]
    if cfg.warmup_left > 0:
        cfg.warmup_left -= 1
        return False
    if cfg.period_left <= 0 and cfg.g0_victims > 0:
        _hf_rollover(s, p)
    return True


@nb.njit(cache=True)
def _hf_overwrite(s, p, lba, old, now):
    """A user overwrite: was the old copy short-lived (in G0, or young in G1)?"""
    if not _hf_active(s, p):
        return
    cfg, hf = p.scalars[0], p.hot_counter
    cfg.period_left -= 1
    seg = old // s.prm[P_SEG_BLOCKS]
    g = _logical(s, p, seg)
    if g == 0:
        if hf[lba] < HF_MAX:
            hf[lba] += 1
    elif g == 1:
        age = 0 if s.seg_state[seg] == SEG_OPEN else now - s.seg_seal_time[seg]
        if age <= cfg.g0_age_window:
            if hf[lba] < HF_MAX:
                hf[lba] += 1
        elif hf[lba] > 0:
            hf[lba] -= 1


@nb.njit(cache=True)
def _hf_relocated(s, p, lba, g):
    """GC found the block still valid in G0 or G1: less hot (a G0 block doubly so)."""
    if not _hf_active(s, p):
        return
    hf = p.hot_counter
    if hf[lba] > 0:
        hf[lba] -= 1
        if g == 0 and hf[lba] > 0:
            hf[lba] -= 1


# -- UID epoch and fallback --------------------------------------------------------------------
@nb.njit(cache=True)
def _finish_epoch(s, p, now):
    """Hand the epoch's interval counts to the Python hook and start the next epoch."""
    cfg, uid, done, mark = p.scalars[0], p.uid, p.uid_done, p.overwrite_epoch
    start, eid = cfg.epoch_start, cfg.epoch_id
    once = 0
    for lba in range(s.lba_time.shape[0]):
        if s.lba_time[lba] >= start and mark[lba] != eid:
            once += 1  # written once in the epoch: its interval is longer than what is left
    e = cfg.epoch_blocks // cfg.bucket_blocks
    for j in range(uid.shape[0]):
        done[j] = uid[j] if j < e else 0
        uid[j] = 0
    cfg.uid_ready = 1
    cfg.uid_done_buckets = e
    cfg.uid_done_once = once
    cfg.uid_done_at = now
    cfg.epoch_start = now
    cfg.epoch_id = eid + 1


@nb.njit(cache=True)
def _clear_err(p):
    vr, n = p.victim_valid_sum, p.victim_count
    for g in range(vr.shape[0]):
        vr[g] = 0.0
        n[g] = 0


@nb.njit(cache=True)
def _fallback(s, p, g):
    """Groups ``g``.. are merged and naive MiDA restarts from ``g``."""
    cfg = p.scalars[0]
    cfg.naive_on = 1
    _merge_to(s, p, g)
    cfg.fallbacks += 1


@nb.njit(cache=True)
def _err_check(s, p):
    """Compare the victims' valid ratios with the model's; the first irregular group falls back."""
    cfg, pred, vr, n = p.scalars[0], p.predicted_valid, p.victim_valid_sum, p.victim_count
    ns = cfg.naive_start
    upto = ns if cfg.naive_on == 1 else ns + 1
    for g in range(1, upto):
        if n[g] > 0 and pred[g] - vr[g] / n[g] <= -ERR_TOL:
            if g <= cfg.model_groups // 2:
                cfg.early_irregular += 1
            _fallback(s, p, g)
            break
    _clear_err(p)
    cfg.check_writes = 0


@nb.njit(cache=True)
def _gc_overrun(s, p, target):
    """GC could not keep up: merge from before the group receiving the copies."""
    cfg = p.scalars[0]
    if cfg.applied == 1 and target <= cfg.model_groups // 2:
        cfg.early_irregular += 1
    ns = cfg.naive_start
    if ns != 1:
        g = max(1, min(target, ns) - 1)
        _fallback(s, p, g)
        cfg.overrun_merges += 1


# -- the three placement functions and the victim selector ------------------------------------
@nb.njit(cache=True)
def midas_user(s, p, lba, now):
    cfg = p.scalars[0]
    if now >= cfg.snapshot_at:
        # WAF of the last capacity of user writes (MiDAS's "TMP WAF") is what a model must beat
        cfg.snapshot_at += cfg.capacity
        cfg.snap_user0 = cfg.snap_user1
        cfg.snap_gc0 = cfg.snap_gc1
        cfg.snap_user1 = s.ctr[C_USER]
        cfg.snap_gc1 = s.ctr[C_GC]
    start = cfg.epoch_start
    if now >= start:
        if now - start >= cfg.epoch_blocks:
            _finish_epoch(s, p, now)
            start = now
        prev = s.lba_time[lba]
        if prev >= start:
            unit = cfg.bucket_blocks
            b = (now - prev) // unit
            e = cfg.epoch_blocks // unit
            p.uid[b if b < e else e - 1] += 1
            p.overwrite_epoch[lba] = cfg.epoch_id
    old = s.l2p[lba]
    if old >= 0:
        _hf_overwrite(s, p, lba, old, now)
    if cfg.checking == 1:
        cfg.check_writes += 1
        if cfg.check_writes > ERR_SHARE * cfg.epoch_blocks:
            _err_check(s, p)
    counted = now >= cfg.prefill
    if counted:
        cfg.user_traffic += 1.0
    if p.hot_counter[lba] >= HF_HOT:
        if counted:
            cfg.g0_traffic += 1.0
        return 0
    return 1


@nb.njit(cache=True)
def midas_gc(s, p, lba, victim, now):
    cfg = p.scalars[0]
    g = cfg.victim_group
    if g <= 1:
        _hf_relocated(s, p, lba, g)
    return cfg.gc_target


@nb.njit(cache=True)
def midas_reclaim(s, p, victim, now):
    cfg = p.scalars[0]
    g = _logical(s, p, victim)
    last = cfg.last_group
    target = g + 1 if g < last else last
    cfg.victim_group = g
    cfg.gc_target = target
    v = s.seg_valid[victim] / s.prm[P_SEG_BLOCKS]
    if g == 0:
        cfg.g0_victim_age_sum += now - s.seg_seal_time[victim]
        cfg.g0_victims += 1.0
        cfg.g0_valid_sum += v
        cfg.g0_valid_victims += 1.0
    if cfg.checking == 1:
        p.victim_valid_sum[g] += v
        p.victim_count[g] += 1
    elif cfg.applied == 1:
        # the configuration counts as in force once every group has been collected
        ns = cfg.naive_start
        cfg.collected_mask |= 1 << min(g, ns)
        if cfg.collected_mask == (1 << (ns + 1)) - 1:
            cfg.checking = 1
            cfg.check_writes = 0
            _clear_err(p)
    p.seg_owner[victim] = -1  # the segment is freed: its next group comes from the engine
    if now == cfg.run_time:
        cfg.run_collections += 1
    else:
        cfg.run_time = now
        cfg.run_collections = 1
    if cfg.run_collections % ILOOP == 0:
        _gc_overrun(s, p, target)


@nb.njit(cache=True)
def midas_victim(s, p, now):
    """The oldest segment of the first FIFO group over its size, else cost-benefit in the last."""
    cfg, sizes, cnt, old, old_t = p.scalars[0], p.fifo_sizes, p.scratch_sealed, p.scratch_oldest, p.scratch_oldest_time
    ns = cfg.naive_start
    seg_blocks = s.prm[P_SEG_BLOCKS]
    for g in range(cnt.shape[0]):
        cnt[g] = 0
        old[g] = -1
        old_t[g] = BIG
    best = -1
    best_score = -1.0
    fewest = -1
    fewest_valid = BIG
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] != SEG_SEALED:
            continue
        v = s.seg_valid[seg]
        if v < fewest_valid:
            fewest_valid = v
            fewest = seg
        g = _logical(s, p, seg)
        if ns > 1 and g < ns:
            cnt[g] += 1
            if s.seg_seal_time[seg] < old_t[g]:
                old_t[g] = s.seg_seal_time[seg]
                old[g] = seg
        else:
            # MiDAS's cost-benefit: invalid * sqrt(age) / valid; an all-invalid segment first
            score = np.inf if v == 0 else (seg_blocks - v) * np.sqrt(now - s.seg_seal_time[seg] + 1.0) / v
            if score > best_score:
                best_score = score
                best = seg
    if ns > 1:
        for g in range(ns):
            if cnt[g] > sizes[g]:
                return old[g]
    if best >= 0:
        return best
    return fewest  # the last group holds nothing sealed yet: fewest valid blocks anywhere


register_victim("midas", midas_victim)


@register
class MiDAS(PlacementPolicy):
    """MiDAS placement with its own victim selector (``sim.victim`` is ignored)."""

    name = "midas"
    victim = "midas"
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
        self.history: list[dict] = []

    def accepted_params(self) -> tuple[str, ...]:
        return ("max_groups", "epoch_capacities", "retire")

    def label(self) -> str:
        return self.name if self.retire == "changed" else f"{self.name}[retire={self.retire}]"

    def bind(self, ctx: SimContext) -> tuple:
        cap, seg = ctx.capacity, ctx.segment_blocks
        unit = max(1, seg // 4)  # a quarter segment, as MiDAS's simulator
        window = int(round(self.epoch_capacities * cap / unit)) * unit
        if window < 4 * unit:
            raise ValueError(
                f"policy midas: an epoch of {self.epoch_capacities} x {cap} blocks is shorter "
                f"than 4 interval buckets of {unit} blocks; raise epoch_capacities"
            )
        max_window = window << MAX_DOUBLINGS
        g = self.n_groups
        scalars = new_scalars(SCALARS)
        cfg = record(scalars)
        cfg.naive_start = 1
        cfg.naive_on = 1
        cfg.last_group = 1 + NAIVE_N - 1
        cfg.bucket_blocks = unit
        cfg.epoch_blocks = window
        cfg.max_epoch_blocks = max_window
        # the first epoch starts once the space has been written over once after the prefill
        cfg.epoch_start = ctx.prefill_blocks + cap
        cfg.capacity = cap
        cfg.prefill = ctx.prefill_blocks
        cfg.run_time = -1
        cfg.warmup_left = cap  # hot filter warm-up: one capacity of overwrites
        cfg.g0_age_window = cap
        cfg.period_left = cap
        cfg.snapshot_at = ctx.prefill_blocks + cap
        cfg.retire_mode = RETIRE_MODES[self.retire]
        self._segments = ctx.n_segments
        self.history = []
        # the configuration search runs between chunks: keep them short against the epoch
        self.max_chunk_blocks = max(unit, cap // 4)
        return MidasState(
            scalars=scalars,
            fifo_sizes=np.zeros(g, np.int64),
            seg_owner=np.full(ctx.n_segments, -1, np.int32),
            hot_counter=np.zeros(cap, np.int8),
            overwrite_epoch=np.full(cap, -1, np.int32),
            uid=np.zeros(max_window // unit, np.int64),
            uid_done=np.zeros(max_window // unit, np.int64),
            hot_periods=np.zeros((QUEUE_MAX, 3), np.float64),
            predicted_valid=np.zeros(g, np.float64),
            victim_valid_sum=np.zeros(g, np.float64),
            victim_count=np.zeros(g, np.int64),
            scratch_sealed=np.zeros(g, np.int64),
            scratch_oldest=np.zeros(g, np.int64),
            scratch_oldest_time=np.zeros(g, np.int64),
        )

    # -- reconfiguration ---------------------------------------------------------------------
    def between_chunks(self, sim) -> None:
        cfg = record(sim.pstate.scalars)
        if cfg.uid_ready:
            cfg.uid_ready = 0
            self._reconfigure(sim)

    def _hot_stats(self, p) -> HotStats:
        cfg, q = record(p.scalars), p.hot_periods
        n = int(cfg.periods_queued)
        cfg.periods_queued = 0
        cfg.period_slot = 0
        if n == 0:
            return HotStats(traffic=0.01, valid=0.05, size=1)  # MiDAS's defaults without data
        rows = q[:n]
        return HotStats(
            traffic=float(rows[:, 0].mean()),
            valid=float(rows[:, 1].mean()),
            size=int(np.floor(rows[:, 2].mean() + 1 + 0.5)),
        )  # + the open segment

    def _groups(self, sim) -> np.ndarray:
        """MiDAS group of every sealed segment (-1 for the others)."""
        s, p = sim.state, sim.pstate
        last = int(record(p.scalars).last_group)
        g = np.where(p.seg_owner >= 0, p.seg_owner, s.seg_group).astype(np.int64)
        g = np.minimum(g, last)
        return np.where(s.seg_state == SEG_SEALED, g, -1)

    def _double_epoch(self, cfg) -> None:
        cfg.epoch_blocks = min(int(cfg.epoch_blocks) * 2, int(cfg.max_epoch_blocks))

    def _reconfigure(self, sim) -> None:
        s, p = sim.state, sim.pstate
        cfg = record(p.scalars)
        seg = int(s.prm[P_SEG_BLOCKS])
        entry = {"t": int(cfg.uid_done_at), "applied": False}
        self.history.append(entry)
        hot = self._hot_stats(p)
        entry["hot_filter"] = {"traffic": hot.traffic, "valid": hot.valid, "size": hot.size}
        groups = self._groups(sim)
        ns, last = int(cfg.naive_start), int(cfg.last_group)
        if hot.valid > (G0_VALID_MAX if hot.size > 1 else G0_VALID_MAX_ONE) or not np.any(groups == last):
            entry["skipped"] = "G0 victims too valid" if np.any(groups == last) else "last group empty"
            self._double_epoch(cfg)
            return
        uid = build_uid(p.uid_done[: int(cfg.uid_done_buckets)], int(cfg.bucket_blocks), float(cfg.uid_done_once))
        tail = groups >= ns
        full = int(np.count_nonzero(tail & (s.seg_valid == seg)))
        static = int(seg * (full - 0.05 * np.count_nonzero(tail)))
        if static < 0.2 * self._segments * seg:
            static = 0  # MiDAS ignores static data below 20% of the device
        dev = Device(
            segment_blocks=seg,
            segments=self._segments - int(sim.cfg.gc_free_segments),
            live_blocks=int(np.count_nonzero(s.l2p >= 0)),
            static_blocks=static,
        )
        conf = search(uid, dev, hot, max_groups=self.max_groups)
        du = int(cfg.snap_user1 - cfg.snap_user0)
        measured = ((du + int(cfg.snap_gc1 - cfg.snap_gc0)) / du) if du > 0 else sim.waf
        apply = conf.n_groups > 2 and conf.waf < measured
        entry.update(
            n_groups=conf.n_groups,
            sizes=conf.sizes,
            predicted_waf=conf.waf,
            valid_ratios=[round(float(v), 4) for v in conf.valid_ratios],
            measured_waf=float(measured),
            hot_traffic=conf.hot_traffic,
            hot_from_uid=conf.hot_from_uid,
            static_blocks=static,
        )
        # two configurations in a row with early irregular groups: observe a longer epoch
        if apply:
            cfg.irregular_streak = cfg.irregular_streak + 1 if cfg.early_irregular else 0
            if cfg.irregular_streak >= 2:
                self._double_epoch(cfg)
        elif cfg.early_irregular:
            cfg.irregular_streak += 1
        cfg.early_irregular = 0
        if apply:
            self._apply(sim, conf)
            entry["applied"] = True

    def _apply(self, sim, conf) -> None:
        s, p = sim.state, sim.pstate
        cfg = record(p.scalars)
        if cfg.naive_on:
            _naive_off(s, p)
        new_last = conf.n_groups - 1
        if new_last < cfg.naive_start:
            _merge_to(s, p, new_last)
        elif new_last > cfg.naive_start:
            _split_to(s, p, new_last)
        sizes = p.fifo_sizes
        sizes[:] = 0
        sizes[:new_last] = np.maximum(np.asarray(conf.sizes[:new_last]) - 1, 0)  # minus the open segment
        groups = self._groups(sim)
        for g in range(new_last):
            extra = int(np.count_nonzero(groups == g)) - int(sizes[g])
            if extra > 0:
                _move_oldest(s, p, g, extra, new_last)
        pred = p.predicted_valid
        pred[:] = 0.0
        pred[: conf.n_groups] = conf.valid_ratios
        cfg.applied = 1
        cfg.collected_mask = 0
        cfg.checking = 0
        cfg.check_writes = 0
        cfg.model_groups = conf.n_groups
        _clear_err(p)

    def summary(self, state) -> dict:
        cfg = record(state.scalars)
        ns = int(cfg.naive_start)
        return {
            "midas": {
                "reconfigurations": sum(1 for h in self.history if h["applied"]),
                "models": len(self.history),
                "naive_mida": bool(cfg.naive_on),
                "naive_start": ns,
                "last_group": int(cfg.last_group),
                # segments (open one included) of the FIFO groups before the naive start / last group
                "sizes": [int(x) + 1 for x in state.fifo_sizes[:ns]] if ns > 1 else [],
                "fallbacks": int(cfg.fallbacks),
                "gc_overrun_merges": int(cfg.overrun_merges),
                "retire": self.retire,
                "retired_segments": int(cfg.retired_segments),
                "epoch_blocks": int(cfg.epoch_blocks),
                "history": self.history,
            }
        }
