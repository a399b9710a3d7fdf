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
engine's state, and open segments of merged groups stay open (MiDAS copies their valid blocks
into the merged group's open segment); the search runs between chunks, at most a quarter
capacity of writes after the epoch ends (MiDAS runs it in a thread while writes continue); GC
that cannot keep up merges from before the group receiving the copies (MiDAS's choice depends on
which groups have been collected since the last configuration); the epoch doubles at most 3 times.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext
from dogi_ml.sim.state import C_GC, C_USER, P_NSEG, P_SEG_BLOCKS, SEG_OPEN, SEG_SEALED
from dogi_ml.sim.victims import register_victim
from dogi_ml.markov.midas import Device, HotStats, build_uid, search

from . import register

HF_MAX = 3            # hot-filter counter ceiling (2 bits)
HF_HOT = 3            # counter value that sends a user write to G0
NAIVE_N = 4           # naive MiDA groups from the naive start on
ILOOP = 25            # collections within one user write that count as GC not keeping up
QUEUE_MAX = 10        # hot-filter periods averaged for the model
ERR_SHARE = 0.3       # irregular-group check every 0.3 epoch
ERR_TOL = 0.1         # victims this much more valid than modelled make a group irregular
G0_VALID_MAX = 0.18   # model skipped when G0's victims are this valid (0.3 for a 1-segment G0)
G0_VALID_MAX_ONE = 0.3
MAX_DOUBLINGS = 3     # the epoch doubles at most this many times
BIG = 1 << 62

# policy state: p[...]
P_CFG, P_SIZES, P_OWNER, P_HF, P_MARK, P_UID, P_UID_DONE, P_F, P_QUEUE, P_PRED, P_ERR_VR, P_ERR_N, \
    P_CNT, P_OLD, P_OLD_T = range(15)

# p[P_CFG] (int64) indices
(K_NS, K_MIDA, K_LAST, K_UNIT, K_WINDOW, K_MAX_WINDOW, K_EPOCH_START, K_EPOCH_ID, K_DONE, K_DONE_E,
 K_DONE_ONCE, K_DONE_AT, K_CAP, K_PREFILL, K_TARGET, K_VGROUP, K_RUN_NOW, K_RUN, K_APPLIED, K_COMMIT,
 K_ERR_FLAG, K_ERR_WRITE, K_TMP_ERR, K_MGNUM, K_COLD, K_LEFT, K_TW, K_Q_N, K_Q_IDX, K_SNAP_NEXT,
 K_SNAP_U0, K_SNAP_G0, K_SNAP_U1, K_SNAP_G1, K_FALLBACKS, K_INF_GC, K_ERR_CNT, N_CFG) = range(38)

# p[P_F] (float64) indices: hot-filter period accumulators
F_SEG_AGE, F_SEG_NUM, F_G0_VR_SUM, F_G0_VR_NUM, F_G0_TRAFFIC, F_TOT_TRAFFIC, N_F = range(7)


# -- group bookkeeping (kernel and Python hooks) ---------------------------------------------
@nb.njit(cache=True)
def _logical(s, p, seg):
    """A segment's MiDAS group: the policy's relabelling if any, else the engine's group; groups
    past the last (left over from a larger configuration) count as the last."""
    g = p[P_OWNER][seg]
    if g < 0:
        g = s.seg_group[seg]
    last = p[P_CFG][K_LAST]
    return last if g > last else g


@nb.njit(cache=True)
def _relabel(s, p, lo, hi, to):
    """Sealed segments of groups ``lo..hi`` now belong to ``to`` (no data moves)."""
    owner = p[P_OWNER]
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            g = _logical(s, p, seg)
            if lo <= g <= hi:
                owner[seg] = to


@nb.njit(cache=True)
def _set_naive(p, on):
    cfg = p[P_CFG]
    cfg[K_MIDA] = 1 if on else 0
    cfg[K_LAST] = cfg[K_NS] + (NAIVE_N - 1 if on else 0)


@nb.njit(cache=True)
def _merge_to(s, p, g):
    """Groups ``g`` .. last become one group ``g`` (MiDAS's merge_group, repeated)."""
    cfg = p[P_CFG]
    _relabel(s, p, g + 1, BIG, g)
    cfg[K_NS] = g
    _set_naive(p, cfg[K_MIDA] == 1)
    if g == 1:
        # everything merged: no configuration left to check
        cfg[K_APPLIED] = 0
        cfg[K_ERR_FLAG] = 0
        cfg[K_ERR_WRITE] = 0


@nb.njit(cache=True)
def _naive_off(s, p):
    """Naive MiDA off: its groups fold into the naive start, which becomes the last group."""
    cfg = p[P_CFG]
    ns = cfg[K_NS]
    _relabel(s, p, ns + 1, ns + NAIVE_N - 1, ns)
    _set_naive(p, False)


@nb.njit(cache=True)
def _split_to(s, p, new_last):
    """More groups: the last group's segments move to ``new_last``; the new middle groups start empty."""
    cfg = p[P_CFG]
    ns = cfg[K_NS]
    _relabel(s, p, ns, ns, new_last)
    cfg[K_NS] = new_last
    _set_naive(p, False)


@nb.njit(cache=True)
def _move_oldest(s, p, g, k, to):
    """The ``k`` oldest sealed segments of group ``g`` move to group ``to`` (MiDAS's move_margin_seg)."""
    owner = p[P_OWNER]
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
    cfg, f, q = p[P_CFG], p[P_F], p[P_QUEUE]
    if f[F_G0_TRAFFIC] > 0 and f[F_TOT_TRAFFIC] > 0:
        i = cfg[K_Q_IDX]
        q[3 * i] = f[F_G0_TRAFFIC] / f[F_TOT_TRAFFIC]
        q[3 * i + 1] = f[F_G0_VR_SUM] / f[F_G0_VR_NUM]
        q[3 * i + 2] = _sealed_count(s, p, 0)
        cfg[K_Q_IDX] = (i + 1) % QUEUE_MAX
        if cfg[K_Q_N] < QUEUE_MAX:
            cfg[K_Q_N] += 1
    prev = float(cfg[K_TW])
    age = f[F_SEG_AGE] / f[F_SEG_NUM]
    if prev > 0:
        # damp the estimate; a jump to twice the old window is capped at 1.5x
        age = 1.5 * prev if age >= 2 * prev else (age + prev) / 2
    cfg[K_TW] = int(age)
    cfg[K_LEFT] = cfg[K_TW] - 1
    for k in range(N_F):
        f[k] = 0.0


@nb.njit(cache=True)
def _hf_active(s, p):
    """Common start of a hot-filter update: the warm-up, then the period's end."""
    cfg = p[P_CFG]
    if cfg[K_COLD] > 0:
        cfg[K_COLD] -= 1
        return False
    if cfg[K_LEFT] <= 0 and p[P_F][F_SEG_NUM] > 0:
        _hf_rollover(s, p)
    return True


@nb.njit(cache=True)
def _hf_overwrite(s, p, lba, old, now):
    """A user overwrite: was the old copy short-lived (in G0, or young in G1)?"""
    if not _hf_active(s, p):
        return
    cfg, hf = p[P_CFG], p[P_HF]
    cfg[K_LEFT] -= 1
    seg = old // s.prm[P_SEG_BLOCKS]
    g = _logical(s, p, seg)
    if g == 0:
        if hf[lba] < HF_MAX:
            hf[lba] += 1
    elif g == 1:
        age = 0 if s.seg_state[seg] == SEG_OPEN else now - s.seg_seal_time[seg]
        if age <= cfg[K_TW]:
            if hf[lba] < HF_MAX:
                hf[lba] += 1
        elif hf[lba] > 0:
            hf[lba] -= 1


@nb.njit(cache=True)
def _hf_relocated(s, p, lba, g):
    """GC found the block still valid in G0 or G1: less hot (a G0 block doubly so)."""
    if not _hf_active(s, p):
        return
    hf = p[P_HF]
    if hf[lba] > 0:
        hf[lba] -= 1
        if g == 0 and hf[lba] > 0:
            hf[lba] -= 1


# -- UID epoch and fallback --------------------------------------------------------------------
@nb.njit(cache=True)
def _finish_epoch(s, p, now):
    """Hand the epoch's interval counts to the Python hook and start the next epoch."""
    cfg, uid, done, mark = p[P_CFG], p[P_UID], p[P_UID_DONE], p[P_MARK]
    start, eid = cfg[K_EPOCH_START], cfg[K_EPOCH_ID]
    once = 0
    for lba in range(s.lba_time.shape[0]):
        if s.lba_time[lba] >= start and mark[lba] != eid:
            once += 1       # written once in the epoch: its interval is longer than what is left
    e = cfg[K_WINDOW] // cfg[K_UNIT]
    for j in range(uid.shape[0]):
        done[j] = uid[j] if j < e else 0
        uid[j] = 0
    cfg[K_DONE] = 1
    cfg[K_DONE_E] = e
    cfg[K_DONE_ONCE] = once
    cfg[K_DONE_AT] = now
    cfg[K_EPOCH_START] = now
    cfg[K_EPOCH_ID] = eid + 1


@nb.njit(cache=True)
def _clear_err(p):
    vr, n = p[P_ERR_VR], p[P_ERR_N]
    for g in range(vr.shape[0]):
        vr[g] = 0.0
        n[g] = 0


@nb.njit(cache=True)
def _fallback(s, p, g):
    """Groups ``g``.. are merged and naive MiDA restarts from ``g``."""
    cfg = p[P_CFG]
    cfg[K_MIDA] = 1
    _merge_to(s, p, g)
    cfg[K_FALLBACKS] += 1


@nb.njit(cache=True)
def _err_check(s, p):
    """Compare the victims' valid ratios with the model's; the first irregular group falls back."""
    cfg, pred, vr, n = p[P_CFG], p[P_PRED], p[P_ERR_VR], p[P_ERR_N]
    ns = cfg[K_NS]
    upto = ns if cfg[K_MIDA] == 1 else ns + 1
    for g in range(1, upto):
        if n[g] > 0 and pred[g] - vr[g] / n[g] <= -ERR_TOL:
            if g <= cfg[K_MGNUM] // 2:
                cfg[K_TMP_ERR] += 1
            _fallback(s, p, g)
            break
    _clear_err(p)
    cfg[K_ERR_WRITE] = 0


@nb.njit(cache=True)
def _gc_overrun(s, p, target):
    """GC could not keep up: merge from before the group receiving the copies."""
    cfg = p[P_CFG]
    if cfg[K_APPLIED] == 1 and target <= cfg[K_MGNUM] // 2:
        cfg[K_TMP_ERR] += 1
    ns = cfg[K_NS]
    if ns != 1:
        g = max(1, min(target, ns) - 1)
        _fallback(s, p, g)
        cfg[K_INF_GC] += 1


# -- the three placement functions and the victim selector ------------------------------------
@nb.njit(cache=True)
def midas_user(s, p, lba, now):
    cfg, f = p[P_CFG], p[P_F]
    if now >= cfg[K_SNAP_NEXT]:
        # WAF of the last capacity of user writes (MiDAS's "TMP WAF") is what a model must beat
        cfg[K_SNAP_NEXT] += cfg[K_CAP]
        cfg[K_SNAP_U0] = cfg[K_SNAP_U1]
        cfg[K_SNAP_G0] = cfg[K_SNAP_G1]
        cfg[K_SNAP_U1] = s.ctr[C_USER]
        cfg[K_SNAP_G1] = s.ctr[C_GC]
    start = cfg[K_EPOCH_START]
    if now >= start:
        if now - start >= cfg[K_WINDOW]:
            _finish_epoch(s, p, now)
            start = now
        prev = s.lba_time[lba]
        if prev >= start:
            unit = cfg[K_UNIT]
            b = (now - prev) // unit
            e = cfg[K_WINDOW] // unit
            p[P_UID][b if b < e else e - 1] += 1
            p[P_MARK][lba] = cfg[K_EPOCH_ID]
    old = s.l2p[lba]
    if old >= 0:
        _hf_overwrite(s, p, lba, old, now)
    if cfg[K_ERR_FLAG] == 1:
        cfg[K_ERR_WRITE] += 1
        if cfg[K_ERR_WRITE] > ERR_SHARE * cfg[K_WINDOW]:
            _err_check(s, p)
    counted = now >= cfg[K_PREFILL]
    if counted:
        f[F_TOT_TRAFFIC] += 1.0
    if p[P_HF][lba] >= HF_HOT:
        if counted:
            f[F_G0_TRAFFIC] += 1.0
        return 0
    return 1


@nb.njit(cache=True)
def midas_gc(s, p, lba, victim, now):
    cfg = p[P_CFG]
    g = cfg[K_VGROUP]
    if g <= 1:
        _hf_relocated(s, p, lba, g)
    return cfg[K_TARGET]


@nb.njit(cache=True)
def midas_reclaim(s, p, victim, now):
    cfg, f = p[P_CFG], p[P_F]
    g = _logical(s, p, victim)
    last = cfg[K_LAST]
    target = g + 1 if g < last else last
    cfg[K_VGROUP] = g
    cfg[K_TARGET] = target
    v = s.seg_valid[victim] / s.prm[P_SEG_BLOCKS]
    if g == 0:
        f[F_SEG_AGE] += now - s.seg_seal_time[victim]
        f[F_SEG_NUM] += 1.0
        f[F_G0_VR_SUM] += v
        f[F_G0_VR_NUM] += 1.0
    if cfg[K_ERR_FLAG] == 1:
        p[P_ERR_VR][g] += v
        p[P_ERR_N][g] += 1
    elif cfg[K_APPLIED] == 1:
        # the configuration counts as in force once every group has been collected
        ns = cfg[K_NS]
        cfg[K_COMMIT] |= 1 << min(g, ns)
        if cfg[K_COMMIT] == (1 << (ns + 1)) - 1:
            cfg[K_ERR_FLAG] = 1
            cfg[K_ERR_WRITE] = 0
            _clear_err(p)
    p[P_OWNER][victim] = -1          # the segment is freed: its next group comes from the engine
    if now == cfg[K_RUN_NOW]:
        cfg[K_RUN] += 1
    else:
        cfg[K_RUN_NOW] = now
        cfg[K_RUN] = 1
    if cfg[K_RUN] % ILOOP == 0:
        _gc_overrun(s, p, target)


@nb.njit(cache=True)
def midas_victim(s, p, now):
    """The oldest segment of the first FIFO group over its size, else cost-benefit in the last."""
    cfg, sizes, cnt, old, old_t = p[P_CFG], p[P_SIZES], p[P_CNT], p[P_OLD], p[P_OLD_T]
    ns = cfg[K_NS]
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
    return fewest       # the last group holds nothing sealed yet: fewest valid blocks anywhere


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

    def __init__(self, n_groups=None, max_groups: int = 9, epoch_capacities: float = 4.0, **params):
        max_groups = int(max_groups)
        if not 2 <= max_groups <= 60:        # one bit per group in a 64-bit mask (commit check)
            raise ValueError(f"policy midas: max_groups (groups after G0 the search may use) must be in "
                             f"[2, 60], got {max_groups}")
        if not float(epoch_capacities) > 0:
            raise ValueError(f"policy midas: epoch_capacities must be > 0, got {epoch_capacities}")
        need = 1 + max_groups + NAIVE_N - 1
        n_groups = need if n_groups is None else int(n_groups)
        if n_groups < need:
            raise ValueError(f"policy midas: max_groups={max_groups} needs n_groups >= {need} (G0, up to "
                             f"{max_groups} groups, {NAIVE_N - 1} naive-MiDA groups past the last), "
                             f"got n_groups={n_groups}")
        super().__init__(n_groups, **params)
        self.max_groups = max_groups
        self.epoch_capacities = float(epoch_capacities)
        self.history: list[dict] = []

    def accepted_params(self) -> tuple[str, ...]:
        return ("max_groups", "epoch_capacities")

    def bind(self, ctx: SimContext) -> tuple:
        cap, seg = ctx.capacity, ctx.segment_blocks
        unit = max(1, seg // 4)                    # a quarter segment, as MiDAS's simulator
        window = int(round(self.epoch_capacities * cap / unit)) * unit
        if window < 4 * unit:
            raise ValueError(f"policy midas: an epoch of {self.epoch_capacities} x {cap} blocks is shorter "
                             f"than 4 interval buckets of {unit} blocks; raise epoch_capacities")
        max_window = window << MAX_DOUBLINGS
        g = self.n_groups
        cfg = np.zeros(N_CFG, np.int64)
        cfg[K_NS] = 1
        cfg[K_MIDA] = 1
        cfg[K_LAST] = 1 + NAIVE_N - 1
        cfg[K_UNIT] = unit
        cfg[K_WINDOW] = window
        cfg[K_MAX_WINDOW] = max_window
        # the first epoch starts once the space has been written over once after the prefill
        cfg[K_EPOCH_START] = ctx.prefill_blocks + cap
        cfg[K_CAP] = cap
        cfg[K_PREFILL] = ctx.prefill_blocks
        cfg[K_RUN_NOW] = -1
        cfg[K_COLD] = cap                          # hot filter warm-up: one capacity of overwrites
        cfg[K_TW] = cap
        cfg[K_LEFT] = cap
        cfg[K_SNAP_NEXT] = ctx.prefill_blocks + cap
        self._segments = ctx.n_segments
        self.history = []
        # the configuration search runs between chunks: keep them short against the epoch
        self.max_chunk_blocks = max(unit, cap // 4)
        return (
            cfg,
            np.zeros(g, np.int64),                     # designated sealed segments of FIFO groups
            np.full(ctx.n_segments, -1, np.int32),     # relabelled group of a segment, -1 = engine's
            np.zeros(cap, np.int8),                    # hot-filter counters
            np.full(cap, -1, np.int32),                # epoch in which the block was written twice
            np.zeros(max_window // unit, np.int64),    # UID being counted
            np.zeros(max_window // unit, np.int64),    # UID of the last finished epoch
            np.zeros(N_F, np.float64),
            np.zeros(3 * QUEUE_MAX, np.float64),       # hot-filter periods: traffic, valid, size
            np.zeros(g, np.float64),                   # modelled valid ratio per group
            np.zeros(g, np.float64),                   # victims' valid ratios since the last check
            np.zeros(g, np.int64),
            np.zeros(g, np.int64),                     # victim selector scratch: sealed per group,
            np.zeros(g, np.int64),                     # oldest segment,
            np.zeros(g, np.int64),                     # its seal time
        )

    # -- reconfiguration ---------------------------------------------------------------------
    def between_chunks(self, sim) -> None:
        cfg = sim.pstate[P_CFG]
        if cfg[K_DONE]:
            cfg[K_DONE] = 0
            self._reconfigure(sim)

    def _hot_stats(self, p) -> HotStats:
        cfg, q = p[P_CFG], p[P_QUEUE].reshape(QUEUE_MAX, 3)
        n = int(cfg[K_Q_N])
        cfg[K_Q_N] = 0
        cfg[K_Q_IDX] = 0
        if n == 0:
            return HotStats(traffic=0.01, valid=0.05, size=1)   # MiDAS's defaults without data
        rows = q[:n]
        return HotStats(traffic=float(rows[:, 0].mean()), valid=float(rows[:, 1].mean()),
                        size=int(np.floor(rows[:, 2].mean() + 1 + 0.5)))   # + the open segment

    def _groups(self, sim) -> np.ndarray:
        """MiDAS group of every sealed segment (-1 for the others)."""
        s, p = sim.state, sim.pstate
        last = int(p[P_CFG][K_LAST])
        g = np.where(p[P_OWNER] >= 0, p[P_OWNER], s.seg_group).astype(np.int64)
        g = np.minimum(g, last)
        return np.where(s.seg_state == SEG_SEALED, g, -1)

    def _double_epoch(self, cfg) -> None:
        cfg[K_WINDOW] = min(int(cfg[K_WINDOW]) * 2, int(cfg[K_MAX_WINDOW]))

    def _reconfigure(self, sim) -> None:
        s, p = sim.state, sim.pstate
        cfg = p[P_CFG]
        seg = int(s.prm[P_SEG_BLOCKS])
        entry = {"t": int(cfg[K_DONE_AT]), "applied": False}
        self.history.append(entry)
        hot = self._hot_stats(p)
        entry["hot_filter"] = {"traffic": hot.traffic, "valid": hot.valid, "size": hot.size}
        groups = self._groups(sim)
        ns, last = int(cfg[K_NS]), int(cfg[K_LAST])
        if hot.valid > (G0_VALID_MAX if hot.size > 1 else G0_VALID_MAX_ONE) or not np.any(groups == last):
            entry["skipped"] = "G0 victims too valid" if np.any(groups == last) else "last group empty"
            self._double_epoch(cfg)
            return
        uid = build_uid(p[P_UID_DONE][: int(cfg[K_DONE_E])], int(cfg[K_UNIT]), float(cfg[K_DONE_ONCE]))
        tail = groups >= ns
        full = int(np.count_nonzero(tail & (s.seg_valid == seg)))
        static = int(seg * (full - 0.05 * np.count_nonzero(tail)))
        if static < 0.2 * self._segments * seg:
            static = 0                          # MiDAS ignores static data below 20% of the device
        dev = Device(segment_blocks=seg, segments=self._segments - int(sim.cfg.gc_free_segments),
                     live_blocks=int(np.count_nonzero(s.l2p >= 0)), static_blocks=static)
        conf = search(uid, dev, hot, max_groups=self.max_groups)
        du = int(cfg[K_SNAP_U1] - cfg[K_SNAP_U0])
        measured = ((du + int(cfg[K_SNAP_G1] - cfg[K_SNAP_G0])) / du) if du > 0 else sim.waf
        apply = conf.n_groups > 2 and conf.waf < measured
        entry.update(n_groups=conf.n_groups, sizes=conf.sizes, predicted_waf=conf.waf,
                     valid_ratios=[round(float(v), 4) for v in conf.valid_ratios], measured_waf=float(measured),
                     hot_traffic=conf.hot_traffic, hot_from_uid=conf.hot_from_uid, static_blocks=static)
        # two configurations in a row with early irregular groups: observe a longer epoch
        if apply:
            cfg[K_ERR_CNT] = cfg[K_ERR_CNT] + 1 if cfg[K_TMP_ERR] else 0
            if cfg[K_ERR_CNT] >= 2:
                self._double_epoch(cfg)
        elif cfg[K_TMP_ERR]:
            cfg[K_ERR_CNT] += 1
        cfg[K_TMP_ERR] = 0
        if apply:
            self._apply(sim, conf)
            entry["applied"] = True

    def _apply(self, sim, conf) -> None:
        s, p = sim.state, sim.pstate
        cfg = p[P_CFG]
        if cfg[K_MIDA]:
            _naive_off(s, p)
        new_last = conf.n_groups - 1
        if new_last < cfg[K_NS]:
            _merge_to(s, p, new_last)
        elif new_last > cfg[K_NS]:
            _split_to(s, p, new_last)
        sizes = p[P_SIZES]
        sizes[:] = 0
        sizes[:new_last] = np.maximum(np.asarray(conf.sizes[:new_last]) - 1, 0)   # minus the open segment
        groups = self._groups(sim)
        for g in range(new_last):
            extra = int(np.count_nonzero(groups == g)) - int(sizes[g])
            if extra > 0:
                _move_oldest(s, p, g, extra, new_last)
        pred = p[P_PRED]
        pred[:] = 0.0
        pred[: conf.n_groups] = conf.valid_ratios
        cfg[K_APPLIED] = 1
        cfg[K_COMMIT] = 0
        cfg[K_ERR_FLAG] = 0
        cfg[K_ERR_WRITE] = 0
        cfg[K_MGNUM] = conf.n_groups
        _clear_err(p)

    def summary(self, state) -> dict:
        cfg = state[P_CFG]
        ns = int(cfg[K_NS])
        return {"midas": {
            "reconfigurations": sum(1 for h in self.history if h["applied"]),
            "models": len(self.history),
            "naive_mida": bool(cfg[K_MIDA]),
            "naive_start": ns,
            "last_group": int(cfg[K_LAST]),
            # segments (open one included) of the FIFO groups before the naive start / last group
            "sizes": [int(x) + 1 for x in state[P_SIZES][:ns]] if ns > 1 else [],
            "fallbacks": int(cfg[K_FALLBACKS]),
            "gc_overrun_merges": int(cfg[K_INF_GC]),
            "epoch_blocks": int(cfg[K_WINDOW]),
            "history": self.history,
        }}
