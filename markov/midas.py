"""MiDAS's group-configuration model and search (Oh et al., FAST'24), as the authors' simulator
computes them (``sungkyun123/MiDAS-Simulation``, ``model.cpp``).

MiDAS splits storage into a hot group ``G0`` (fed by a hot filter), and ``G1..Gn``: user writes
that are not hot go to ``G1``; GC moves the valid blocks of a victim from ``Gi`` to ``Gi+1``
(the last group keeps its own). ``G0..G(n-1)`` are cleaned FIFO at a designated size, the last
group by the run's victim rule. This module picks ``n`` and the sizes; it follows the authors'
code statement by statement (Numba), so that a configuration search on the same inputs gives the
same configuration, bit for bit (checked against dumps of their search, ``docs/peers.md``).

**UID** (update-interval distribution, ``resizing_model``): during an epoch the interval between
two writes of a sampled block (one LBA in :data:`SAMPLING`) is counted in buckets of ``unit``
blocks (a quarter segment); a sampled block written once in the epoch counts in the last bucket.
Bucket 0 is replaced by the re-writes within one bucket counted over every block in
:data:`FNUMBER` probe buckets, scaled to the epoch and the sample. Bucket ``i >= 1`` grows by
``int(count * (E mod i + i/2) / E)`` (``E`` buckets) for the intervals the epoch's edges cut off
(:func:`resize_counts`).

**Valid ratios** (``two_valid_ratio_predictor``, :func:`predict_valid`): the groups are stages in a
block's life. A group of ``k`` segments fed ``a`` of the user writes keeps a block for ``k/a - 1/(2a)``
segments of user writes, so group ``i`` covers the buckets from ``P_i`` to ``P_i + T_i``; of the
blocks entering it, those whose interval falls there die in it: its valid ratio is ``1 - dead /
entering``. The hot group is the first stage: with an accurate hot filter (G0's victims at most
10% valid and at least 15% of the writes hot) it is sized from the UID (its traffic is the share
of intervals it catches); otherwise from the hot filter's measured traffic, valid ratio and size.
The last group holds the remaining live data (``utilization`` minus the earlier groups' live
blocks) in the remaining space, modelled by Desnoyers' hot/cold FIFO equation
(:func:`none_fifo_predict`, ``None_FIFO_predict``), its hot class being the intervals up to 0.7x
their mean; the shares ``r`` (requests) and ``f`` (blocks) accumulate over every configuration a
search evaluates, as theirs do.

**WAF** (``two_WAF_predictor``, :func:`chain_waf`): a Markov chain over {user write, G0,
G1..Gn} iterated 2000 times from (0.1, 0.9) x the physical blocks.

**Search** (``making_group_configuration3``, :func:`gcs_search`): the hot size first (1..29
segments, while each step gains 0.05), then groups added one at a time, each new group's size
scanned segment by segment out of the last group (50 segments kept out); then four rounds that
re-tune the hot size and each group's size in turn. The lowest modelled WAF wins.

Their arithmetic is kept where it changes results: group sizes are unsigned 32-bit, the user
writes of the chain are truncated to an integer, the last group's request-weighted age to an
unsigned integer after every addition. Two things are not theirs, both without effect on the
result: the chain stops once an iteration leaves it unchanged to the last bit (theirs runs on
with the same values), and its sparse matrix is multiplied skipping the zeros (same sums).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

#: the authors' constants (``model.cpp``, ``model_create`` and ``making_group_configuration3``)
SAMPLING = 100  # one LBA in 100 has its update intervals counted
FNUMBER = 10  # probe buckets for bucket 0's re-writes
MARGIN = 50  # segments kept out of the group-size scans and off the epoch's end
HOT_SCAN = 30  # hot sizes 1..29 segments
HOT_GAIN = 0.05  # a larger hot group must lower the modelled WAF this much (first scan)
VALID_THRESH = 0.1  # G0's victims at most this valid ...
TRAFFIC_THRESH = 0.15  # ... and at least this share of the writes hot: hot group sized from the UID
HOT_CLASS = 0.7  # the last group's hot class: intervals up to this share of their mean
CHAIN_ITERS = 2000
UINT_MAX = 4294967295
U32 = 0xFFFFFFFF
#: search outcomes: a configuration (possibly of <= 2 groups); the model restarts; a group size
#: reached 0 (their code aborts the program there)
FOUND, NULL_ABORT, ABORTED = 0, 1, 2

#: the search's persistent state (theirs: ``model_q``, ``real_flag`` and the counts in ``mmodel``)
GCS_STATE = np.dtype(
    [
        ("real_flag", np.int64),  # 1: hot group from the hot filter's measurements
        ("g0_traffic", np.float64),  # the hot filter's G0 share of writes, victims' valid ratio, size
        ("g0_valid", np.float64),
        ("g0_size", np.float64),
        ("calc_traffic", np.float64),  # hot traffic of the hot size under evaluation (from the UID)
        ("calc_size", np.int64),
        ("calc_unit", np.int64),
        ("extra_size", np.int64),
        ("best_extra_size", np.int64),
        ("best_extra_traffic", np.float64),
        ("best_extra_unit", np.float64),
        ("hot_req", np.int64),  # the last group's hot/total requests and blocks, accumulated
        ("tot_req", np.int64),
        ("hot_lba", np.float64),
        ("tot_lba", np.float64),
        ("no_access", np.int64),  # static blocks (theirs ``no_access_lba``)
        ("utilization", np.int64),  # live logical blocks
        ("evaluated", np.int64),  # predictor calls (ours, for reports)
    ]
)


def new_gcs_state() -> np.ndarray:
    return np.zeros(1, GCS_STATE)


class GcsWork(NamedTuple):
    """The search's scratch arrays, allocated once (the simulator's loop allocates nothing)."""

    opt_cfg: np.ndarray  # int64 [n, n]: best sizes per group count
    opt_vr: np.ndarray  # float64 [n, n]: their valid ratios
    opt_waf: np.ndarray  # float64 [n]
    cfg: np.ndarray  # int64 [n]: sizes under evaluation (theirs uint32)
    vr: np.ndarray  # float64 [n]
    final_cfg: np.ndarray  # int64 [n]
    final_vr: np.ndarray  # float64 [n]
    ninv: np.ndarray  # int64 [n]: invalidations per group
    v2: np.ndarray  # float64 [n + 2]: the chain's valid ratios
    base: np.ndarray  # float64 [n + 2]: the chain's state before / after an iteration
    res: np.ndarray


def new_gcs_work(max_groups: int) -> GcsWork:
    """Scratch for :func:`gcs_search` with up to ``max_groups`` groups after G0."""
    n = int(max_groups) + 1
    return GcsWork(
        opt_cfg=np.zeros((n, n), np.int64),
        opt_vr=np.zeros((n, n)),
        opt_waf=np.zeros(n),
        cfg=np.zeros(n, np.int64),
        vr=np.zeros(n),
        final_cfg=np.zeros(n, np.int64),
        final_vr=np.zeros(n),
        ninv=np.zeros(n, np.int64),
        v2=np.zeros(n + 2),
        base=np.zeros(n + 2),
        res=np.zeros(n + 2),
    )


@nb.njit(cache=True, inline="always")
def _u32(x):
    return x & U32


@nb.njit(cache=True, inline="always")
def _d2u32(x):
    """C's conversion of a double to ``uint32_t`` (x86-64: truncate to 64 bits, keep the low 32)."""
    return np.int64(x) & U32


@nb.njit(cache=True, error_model="numpy")
def _fifo_excess(w, op, r, f):
    return (
        1.0
        + r / (math.exp(r * op / (f * w)) - 1.0)
        + (1.0 - r) / (math.exp((1.0 - r) * op / ((1.0 - f) * w)) - 1.0)
        - w
    )


@nb.njit(cache=True, error_model="numpy")
def none_fifo_predict(op, r, f):
    """Their ``None_FIFO_predict``: WAF of a FIFO-cleaned log of ``op`` = space / live data where a
    share ``r`` of the writes goes to a share ``f`` of the data, as the first ``w`` in steps of
    1, 0.1, 0.01 and 0.001 past the root of ``1 + r/(e^(r op/(f w)) - 1) + (1-r)/(e^((1-r) op/((1-f) w)) - 1) = w``."""
    if op <= 1:
        return 0.0
    w = 1.0
    test = 1.0
    while test > 0:
        test = _fifo_excess(w, op, r, f)
        w += 1.0
    w -= 2.0
    test = 1.0
    while test > 0:
        test = _fifo_excess(w, op, r, f)
        w += 0.1
    w -= 0.2
    test = 1.0
    while test > 0:
        test = _fifo_excess(w, op, r, f)
        w += 0.01
    w -= 0.02
    test = 1.0
    while test > 0:
        test = _fifo_excess(w, op, r, f)
        w += 0.001
    w -= 0.001
    return w


@nb.njit(cache=True, error_model="numpy")
def chain_waf(vr, gn, real_flag, g0_valid, g0_traffic, calc_traffic, pgnum, v2, base, res):
    """Their ``two_WAF_predictor``: the chain over (user write, G0, G1..Gn) iterated 2000 times
    from 0.1 / 0.9 of the ``pgnum`` physical blocks in the first two states; WAF = (copies of the
    last iteration + its user writes) / its user writes, the user writes truncated to an integer."""
    k = gn + 2
    for j in range(k):
        v2[j] = 0.0
        res[j] = 0.0
    v2[0] = 1.0
    v2[1] = g0_valid if real_flag else 0.0
    for i in range(gn):
        v2[i + 2] = vr[i]
    t = g0_traffic if real_flag else calc_traffic
    res[0] = pgnum * 0.1
    res[1] = pgnum * 0.9
    past = 0
    tmp_tot = 0.0
    for _ in range(CHAIN_ITERS):
        tmp_tot = 0.0
        same = True
        for j in range(k):
            base[j] = res[j]
        # result[j] = sum_k base[k] * m[k][j], k ascending, zeros skipped (adding +0.0 changes nothing)
        acc = 0.0
        for q in range(k):
            acc += base[q] * (1.0 - v2[q])
        if acc != res[0]:
            same = False
        res[0] = acc
        acc = base[0] * t
        if acc != res[1]:
            same = False
        res[1] = acc
        for j in range(2, k):
            acc = 0.0
            if j == 2:
                acc += base[0] * (1.0 - t)
            acc += base[j - 1] * v2[j - 1]
            if j == k - 1:
                acc += base[j] * v2[j]
            if acc != res[j]:
                same = False
            res[j] = acc
        if gn == 1:
            tmp_tot += res[2] - res[0] * v2[1]
        else:
            for j in range(gn - 1):
                tmp_tot += res[j + 3]
            tmp_tot += res[1] * v2[1]
        past = _d2u32(res[0])
        if same:
            break  # a fixed point: the remaining iterations repeat this one
    return (tmp_tot + past) / past


@nb.njit(cache=True, inline="always")
def _first_bucket_at(past, tw, unit, pps):
    """The first bucket ``j < tw`` whose start ``j * unit / pps`` (segments) is not before
    ``past``, else ``tw``: what their scan of every bucket from 0 finds. Their code walks
    ``j = 0, 1, ...`` once per group of each of the search's evaluations; without the walk
    MiDAS's loop on zipf 1 GiB (three searches) takes 1.61 s instead of 1.77 s, the same
    configurations. A bucket's start grows with ``j``, so a guess from ``past`` corrected one
    bucket at a time by the same comparison lands on the same bucket, including for a NaN
    ``past`` (0) and an infinite one (``tw``)."""
    j = 0
    if past > 0:
        j = tw if not (past < tw * unit / pps) else min(tw, np.int64(past * pps / unit))
        while j > 0 and (j - 1) * unit / pps >= past:
            j -= 1
    while j < tw and j * unit / pps < past:
        j += 1
    return j


@nb.njit(cache=True, error_model="numpy")
def predict_valid(st, counts, tw, unit, pps, segnum, cfg, gn, tot_cnt, extra_cnt, vr, ninv):
    """Their ``two_valid_ratio_predictor``: valid ratios ``vr[:gn]`` of the groups ``cfg[:gn]`` (G1..Gn,
    segments) behind a hot group of ``extra_cnt`` segments; False where theirs returns NULL. It
    updates the search state as theirs does (hot traffic and size of the scanned hot group, the
    last group's accumulated class counts) and may shrink ``cfg[gn-1]`` (the hot group's gap)."""
    s = st[0]
    s.evaluated += 1
    for i in range(vr.shape[0]):
        vr[i] = 0.0
    for i in range(gn):
        ninv[i] = 0
    mig_rate = 1.0
    ref_rate = 1.0
    invalid_cnt = 0
    global_valid = 0.0
    past = 0.0
    lg_req = 0
    lifespan_num = 0
    group_time = 0.0
    s.extra_size = 0
    step = unit / pps  # segments per bucket
    if cfg[0] < step:
        for i in range(gn):
            vr[i] = 1.0
        return True
    if s.real_flag == 0:
        if s.calc_unit == 0:
            for i in range(tw):
                invalid_cnt += counts[i]
                tmp_tr = invalid_cnt / tot_cnt
                cur = (i + 1) * unit / pps
                extr = np.floor(cur * tmp_tr + 0.5)
                if extr >= extra_cnt:
                    past += cur
                    s.calc_traffic = tmp_tr
                    tot_cnt -= invalid_cnt
                    if extr > extra_cnt:
                        cfg[gn - 1] = _d2u32(cfg[gn - 1] - (extr - extra_cnt))
                    s.calc_size = np.int64(extr)
                    s.calc_unit = i + 1
                    break
        else:
            for i in range(s.calc_unit):
                invalid_cnt += counts[i]
                tmp_vr = 1.0 - invalid_cnt / tot_cnt
                global_valid += tmp_vr * unit * ref_rate
            tmp_tr = invalid_cnt / tot_cnt
            cur = s.calc_unit * unit / pps
            extr = np.floor(cur * tmp_tr + 0.5)
            past += cur
            s.calc_traffic = tmp_tr
            tot_cnt -= invalid_cnt
            s.calc_size = np.int64(extr)
    else:
        mig_rate = 1.0 / s.g0_traffic
        ref_rate = s.g0_traffic
        group_time = extra_cnt * mig_rate - mig_rate / 2.0
        for i in range(tw):
            cur = i * unit / pps
            if cur < group_time:
                invalid_cnt += counts[i]
                tmp_vr = 1.0 - invalid_cnt / tot_cnt
                global_valid += tmp_vr * ref_rate * unit
            else:
                s.calc_unit = i
                break
        past += group_time
        s.calc_traffic = invalid_cnt / tot_cnt
        tot_cnt -= invalid_cnt

    g1_traffic = 1.0 - s.calc_traffic
    if s.real_flag:
        g1_traffic = 1.0 - s.g0_traffic + s.g0_traffic * s.g0_valid
    horizon = np.float64(tw * unit // pps - MARGIN)
    for i in range(gn):
        invalid_cnt = 0
        mig_rate = 1.0 / g1_traffic
        ref_rate = g1_traffic
        for j in range(i):
            mig_rate *= 1.0 / vr[j]
            ref_rate *= vr[j]
        group_time = cfg[i] * mig_rate - mig_rate / 2
        if i != gn - 1 and np.float64(_d2u32(group_time)) + past >= horizon:
            return False
        dead_before = 0
        for q in range(i):
            dead_before += ninv[q]
        # buckets j with past <= j*step < past + group_time
        j = _first_bucket_at(past, tw, unit, pps)
        while j < tw:
            cur = j * unit / pps
            if cur >= group_time + past:
                break
            invalid_cnt += counts[j]
            if i < gn - 1:
                tmp_vr = 1.0 - invalid_cnt / (tot_cnt - dead_before)
                global_valid += tmp_vr * ref_rate * unit
            j += 1
        if i == gn - 1:
            first = _first_bucket_at(past, tw, unit, pps)
            for q in range(first, tw):
                cur = q * unit / pps
                lg_req = np.int64(np.uint64(lg_req + counts[q] * cur))
                lifespan_num += counts[q]
            evg = lg_req / lifespan_num
            span = np.float64(tw * unit - 50)
            for q in range(first, tw):
                cur = q * unit / pps
                s.tot_req += counts[q]
                lba_num = counts[q] / (span / cur)
                s.tot_lba += lba_num
                if cur <= evg * HOT_CLASS:
                    s.hot_lba += lba_num
                    s.hot_req += counts[q]
        ninv[i] = invalid_cnt
        valid_ratio = 1.0 - invalid_cnt / (tot_cnt - dead_before)
        if i < gn - 1:
            vr[i] = valid_ratio
            past += group_time

    if s.no_access < 0 or s.no_access < segnum * pps * 0.2:
        s.no_access = 0
    new_util = np.float64(s.utilization) - np.float64(s.no_access)
    new_group_size = np.float64(cfg[gn - 1]) * pps - np.float64(s.no_access)
    if new_util < global_valid:
        return False
    last_vp = new_util - global_valid
    if last_vp < 0:
        return False
    r = s.hot_req / s.tot_req
    f = s.hot_lba / s.tot_lba
    last_waf = none_fifo_predict(new_group_size / last_vp, r, f)
    if 1.0 - 1.0 / last_waf > 1.0:
        return False
    # their greedy variant (DES 2): the space not reduced by the static blocks
    c = 1.0 + 1.0 / np.float64(2 * pps)
    last_waf = none_fifo_predict(c * np.float64(cfg[gn - 1]) * pps / last_vp, r, f) / c
    vr[gn - 1] = 1.0 - 1.0 / last_waf
    for k in range(gn):
        if vr[k] <= 0.0:
            return False
    return True


@nb.njit(cache=True)
def begin_search(st, g0_traffic, g0_valid, g0_size, utilization, no_access):
    """The start of their ``making_group_configuration3``: the hot filter's averages, the live and
    static blocks; the scan state reset (the hot group's bucket count from the last search stays)."""
    s = st[0]
    s.g0_traffic = g0_traffic
    s.g0_valid = g0_valid
    s.g0_size = g0_size
    s.utilization = utilization
    s.no_access = no_access
    s.extra_size = 0
    s.best_extra_size = 0
    s.best_extra_traffic = 0.0
    s.calc_traffic = 0.0
    s.calc_size = 0


@nb.njit(cache=True)
def reset_class_counts(st):
    """Their ``model_initialize``: the last group's accumulated class counts restart."""
    s = st[0]
    s.hot_req = 0
    s.tot_req = 0
    s.hot_lba = 0.0
    s.tot_lba = 0.0


@nb.njit(cache=True)
def resize_counts(counts, tw, first_count, stamps, n_stamps):
    """Their ``resizing_model``: the finished epoch's raw counts to the UID (in place); returns the
    total. Sampled blocks (the first ``n_stamps`` of ``stamps``) written once in the epoch go to the last bucket; bucket 0 becomes the
    probed re-writes scaled to the epoch and the sample; the other buckets grow for the intervals
    cut by the epoch's edges."""
    for i in range(n_stamps):
        st = stamps[i]
        if st != UINT_MAX and (st & 1) == 1 and st != UINT_MAX - 1:
            counts[tw - 1] += 1
    counts[0] = first_count * tw // FNUMBER // SAMPLING
    tot = counts[0]
    for i in range(1, tw):
        left = ((tw % i * 2 + i) / 2.0) / i
        counts[i] = counts[i] + np.int64((left * counts[i]) / (tw / i))
        tot += counts[i]
    return tot


@nb.njit(cache=True, error_model="numpy")
def gcs_search(st, work, counts, tw, unit, pps, pgnum, segnum, freenum, total, max_groups, out_sizes, out_vr):
    """Their ``making_group_configuration3`` from the resized UID on: the configuration of lowest
    modelled WAF. Writes the groups' sizes (``out_sizes[0]`` the hot group, then G1..Gn) and valid
    ratios; returns ``(status, groups, waf, hot traffic)``: NULL_ABORT where theirs gives up and
    restarts the model, else FOUND (``groups <= 2``: no configuration, theirs keeps the current one)."""
    s = st[0]
    n = max_groups + 1
    opt_cfg, opt_vr, opt_waf, cfg, vr = work.opt_cfg, work.opt_vr, work.opt_waf, work.cfg, work.vr
    final_cfg, final_vr, ninv, v2, base, res = work.final_cfg, work.final_vr, work.ninv, work.v2, work.base, work.res
    for i in range(n):
        opt_waf[i] = 10000.0
        cfg[i] = 0
        vr[i] = 0.0
        final_cfg[i] = 0
        final_vr[i] = 0.0
        for q in range(n):
            opt_cfg[i, q] = 0
            opt_vr[i, q] = 0.0
    opt_cfg[0, 0] = segnum - freenum
    opt_vr[0, 0] = 1.0
    opt_traffic = 0.0
    final_waf = 100.0
    final_gnum = 0
    for q in range(n):
        cfg[q] = opt_cfg[0, q]
    g0_desig = 1
    if s.g0_valid > VALID_THRESH or s.g0_traffic < TRAFFIC_THRESH:
        s.real_flag = 1
        g0_desig = np.int64(s.g0_size)
        cfg[0] = _u32(cfg[0] - g0_desig)
        s.calc_unit = 0
        if not predict_valid(st, counts, tw, unit, pps, segnum, cfg, 1, total, g0_desig, vr, ninv):
            return NULL_ABORT, 0, 0.0, 0.0
        w = chain_waf(vr, 1, s.real_flag, s.g0_valid, s.g0_traffic, s.calc_traffic, pgnum, v2, base, res)
        if w > 100:
            return NULL_ABORT, 0, 0.0, 0.0
        opt_waf[0] = w
        opt_cfg[0, 0] = cfg[0]
        opt_vr[0, 0] = vr[0]
        s.best_extra_size = g0_desig
        s.best_extra_traffic = s.calc_traffic
        opt_traffic = s.g0_traffic
    else:
        s.real_flag = 0
        for i in range(1, HOT_SCAN):
            if i <= s.calc_size:
                continue
            cfg[0] = _u32(segnum - freenum - i)
            s.calc_unit = 0
            if not predict_valid(st, counts, tw, unit, pps, segnum, cfg, 1, total, i, vr, ninv):
                break
            w = chain_waf(vr, 1, s.real_flag, s.g0_valid, s.g0_traffic, s.calc_traffic, pgnum, v2, base, res)
            if w < opt_waf[0] - HOT_GAIN:
                s.best_extra_size = s.calc_size
                s.best_extra_traffic = s.calc_traffic
                s.best_extra_unit = s.calc_unit
                opt_waf[0] = w
                opt_cfg[0, 0] = cfg[0]
                opt_vr[0, 0] = vr[0]
            else:
                break
        s.calc_traffic = s.best_extra_traffic
        g0_desig = s.best_extra_size
        s.calc_unit = np.int64(s.best_extra_unit)
        opt_traffic = s.calc_traffic

    # phase 1: add groups one at a time
    max_size = _u32(opt_cfg[0, 0] - MARGIN)
    tmp_max = max_size
    for i in range(max_groups - 1):
        gnum = i + 2
        for q in range(n):
            cfg[q] = opt_cfg[i, q]
        cfg[i + 1] = cfg[i]
        cfg[i] = 1
        max_size = tmp_max
        for j in range(1, max_size):
            cfg[i] = j
            cfg[i + 1] = _u32(cfg[i + 1] - 1)
            if cfg[i + 1] == 0:
                return ABORTED, 0, 0.0, 0.0
            if predict_valid(st, counts, tw, unit, pps, segnum, cfg, gnum, total, g0_desig, vr, ninv):
                w = chain_waf(vr, gnum, s.real_flag, s.g0_valid, s.g0_traffic, s.calc_traffic, pgnum, v2, base, res)
                if opt_waf[i + 1] > w:
                    opt_waf[i + 1] = w
                    for q in range(n):
                        opt_cfg[i + 1, q] = cfg[q]
                        opt_vr[i + 1, q] = vr[q]
                    tmp_max = _u32(max_size - opt_cfg[i + 1, i])
    best = -1
    for i in range(n):
        if final_waf > opt_waf[i]:
            final_gnum = i + 1
            best = i
            final_waf = opt_waf[i]
    if best >= 0:
        for q in range(n):
            final_cfg[q] = opt_cfg[best, q]
            final_vr[q] = opt_vr[best, q]

    # phase 2: four rounds re-tuning the hot size, then each group's size
    s.calc_size = 0
    for _ in range(4):
        if final_waf == 100:
            break
        if s.real_flag == 0:
            for q in range(n):
                cfg[q] = final_cfg[q]
            gnum = final_gnum
            cfg[gnum - 1] = _u32(cfg[gnum - 1] + g0_desig)
            initial_last = cfg[gnum - 1]
            s.calc_size = 0
            for i in range(1, HOT_SCAN):
                if i <= s.calc_size:
                    continue
                cfg[gnum - 1] = _u32(initial_last - i)
                s.calc_unit = 0
                if not predict_valid(st, counts, tw, unit, pps, segnum, cfg, gnum, total, i, vr, ninv):
                    break
                w = chain_waf(vr, gnum, s.real_flag, s.g0_valid, s.g0_traffic, s.calc_traffic, pgnum, v2, base, res)
                if w < final_waf:
                    s.best_extra_size = s.calc_size
                    s.best_extra_traffic = s.calc_traffic
                    s.best_extra_unit = s.calc_unit
                    final_waf = w
                    for q in range(n):
                        final_cfg[q] = cfg[q]
                        final_vr[q] = vr[q]
                    g0_desig = i
                    opt_traffic = s.calc_traffic
        gnum = final_gnum
        for q in range(n):
            cfg[q] = final_cfg[q]
        s.calc_unit = np.int64(s.best_extra_unit)
        for i in range(max_groups - 1):
            if i < gnum - 1:
                cfg[gnum - 1] = _u32(cfg[gnum - 1] + cfg[i])
            else:
                cfg[i + 1] = cfg[i]
                gnum += 1
            max_size = _u32(cfg[gnum - 1] - MARGIN)
            added = False
            cfg[i] = 0
            for j in range(1, max_size):
                cfg[i] = j
                cfg[gnum - 1] = _u32(cfg[gnum - 1] - 1)
                if not predict_valid(st, counts, tw, unit, pps, segnum, cfg, gnum, total, g0_desig, vr, ninv):
                    break
                w = chain_waf(vr, gnum, s.real_flag, s.g0_valid, s.g0_traffic, s.calc_traffic, pgnum, v2, base, res)
                if final_waf > w:
                    final_gnum = gnum
                    final_waf = w
                    for q in range(n):
                        final_cfg[q] = cfg[q]
                        final_vr[q] = vr[q]
                    added = True
            for q in range(n):
                cfg[q] = final_cfg[q]
            if not added and i >= final_gnum - 1:
                break

    # the hot group in front
    final_gnum += 1
    for i in range(out_sizes.shape[0]):
        out_sizes[i] = 0
        out_vr[i] = 0.0
    for i in range(final_gnum - 1):
        out_sizes[i + 1] = final_cfg[i]
        out_vr[i + 1] = final_vr[i]
    out_sizes[0] = s.best_extra_size
    return FOUND, final_gnum, final_waf, opt_traffic
