"""ML-DT (Chakraborttii & Litz, SYSTOR'21; DOGI §2.2, Table 1): a TCN regresses the
invalidation ("death") time of each user write into one of 19 user groups; every GC-written
block goes to a single GC group (live-block isolation). Victims: cost-benefit (DOGI §5.1).

Groups ``0 .. U-1`` (``U = user_groups``, 19) are lifetime bins, log-spaced: bin ``k`` holds
predicted lifetimes in ``(b[k-1], b[k]]`` with ``b[k] = top * 2^(k - U + 2)`` blocks, i.e. each
bound doubles and the last bounded bin ends at ``top = top_bin x capacity`` (2x capacity by
default; 2 MiB .. 256 GiB at 128 GiB); bin ``U-1`` is open-ended. Group ``U`` is the GC group.
(ML-DT's paper is not in ``../shared/papers``; DOGI gives only the counts. The bins here are
this toolkit's choice.)

The TCN (two residual blocks of dilated causal convolutions, 32 channels: four convolution
layers and ~10K parameters against the GRU's one layer and ~4K, so larger than PHFTL's model as
DOGI says, but kept small enough for the default runs) reads the LBA's last ``history`` writes'
features and regresses ``log2(1 + lifetime)`` with mean squared error (``task: regression``);
the predicted lifetime's bin is the group. Training is online as in DOGI
and PHFTL: one in ``sample_every`` user writes sampled, labelled on overwrite (a sample still
live after ``top`` blocks is labelled with its age, a lower bound that already falls in the last
bin), retrained from scratch every ``retrain_every`` user writes on the latest ``max_train``
labelled samples; inference batched per chunk. Before the first model every user write goes to
the middle bin.

Accuracy is scored online at overwrite: the group predicted for the LBA's previous write against
the bin of its actual lifetime (``user_accuracy``), plus the mean absolute error in log2 units
(``user_log2_mae``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.kernels import prefetch
from dogi_ml.sim.policy_api import SimContext, new_scalars, no_reclaim_hook, record

from . import register
from ._online import RingArrays, ring_fill
from ._sequence import SequencePolicy, count_and_sample, fit_sequence_model, sequence_scalars

SCALARS = sequence_scalars(
    fallback_group=np.int64,  # user group before the first model (the middle bin)
    gc_group=np.int64,  # the one GC group
    log2_error_sum=np.float64,  # |predicted - actual| log2(1 + lifetime) of scored user writes
    log2_errors=np.float64,  # how many were scored
)


class MldtState(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    pred_group: np.ndarray  # int8 per write of the current chunk: predicted bin, -1 if none
    pred_value: np.ndarray  # float32 per write of the chunk: regressed log2(1 + lifetime)
    bounds: np.ndarray  # int64: upper bounds of the bounded bins
    lba_class: np.ndarray  # int8 per LBA: bin predicted for its live version, -1 if none
    lba_log_pred: np.ndarray  # float32 per LBA: the regressed value for its live version
    user_confusion: np.ndarray  # int64 [predicted bin, actual bin] of overwritten user writes
    ring: RingArrays  # online training samples
    ring_windows: np.ndarray  # float32 [ring slot, history, feature]: each sample's window
    windows: np.ndarray  # float32 [write of the chunk, history, feature]


@nb.njit(cache=True)
def _bin_of(bounds, v):
    """Bin ``k`` with ``bounds[k-1] < v <= bounds[k]``; ``len(bounds)`` past the last bound."""
    for k in range(bounds.shape[0]):
        if v <= bounds[k]:
            return k
    return bounds.shape[0]


@nb.njit(cache=True)
def mldt_user(s, p, lba, now):
    st = p.scalars[0]
    last = s.lba_time[lba]
    if last >= 0:
        v = now - last
        pc = p.lba_class[lba]
        if pc >= 0:
            p.user_confusion[pc, _bin_of(p.bounds, v)] += 1
            st.log2_error_sum += abs(p.lba_log_pred[lba] - math.log2(1.0 + v))
            st.log2_errors += 1.0
        ring_fill(p.ring, lba, v)
    if now < st.prefill:
        p.lba_class[lba] = -1
        return st.fallback_group
    g = st.fallback_group
    pc = -1
    if st.mode == 1:
        k = now - st.chunk_start
        c = p.pred_group[k]
        if c >= 0:
            g = c
            pc = c
            p.lba_log_pred[lba] = p.pred_value[k]
    p.lba_class[lba] = pc
    count_and_sample(st, p.ring, p.ring_windows, p.windows, lba, now, pc)
    return g


@nb.njit(cache=True, inline="always")
def mldt_prefetch(p, lba):
    """The engine's cache hint for the per-LBA entries ``mldt_user`` touches (no effect on results)."""
    prefetch(p.lba_class, lba)
    prefetch(p.lba_log_pred, lba)
    prefetch(p.ring.pending, lba)


@nb.njit(cache=True)
def mldt_gc(s, p, lba, victim, now):
    return p.scalars[0].gc_group


def lifetime_bounds(capacity: int, user_groups: int, top_bin: float) -> np.ndarray:
    """Upper bounds of bins ``0 .. user_groups-2`` (the last bin is open-ended), doubling up
    to ``top_bin x capacity``; at least 1 block apart at small capacities."""
    top = top_bin * capacity
    b = np.array([top * 2.0 ** (k - user_groups + 2) for k in range(user_groups - 1)])
    out = np.maximum(np.round(b), 1).astype(np.int64)
    for k in range(1, out.size):  # tiny capacities: keep the bins non-empty
        out[k] = max(out[k], out[k - 1] + 1)
    return out


@register
class MLDT(SequencePolicy):
    name = "mldt"
    default_groups = 20
    place_user = mldt_user
    place_gc = mldt_gc
    prefetch_lba = mldt_prefetch
    on_reclaim = no_reclaim_hook

    MODEL = "tcn"
    SPLIT_INFERENCE = True  # by rows: whole batches of windows on each thread
    #: the TCN's forward is a chain of small products whose Python overhead between them holds
    #: the GIL: with both threads inferring, batches of 4096 take 624 ns per window of wall,
    #: batches of 1024 982 ns (``python -m dogi_ml bench``, its tcn_inference section)
    INFER_BATCH = 4096
    MODEL_DEFAULTS = {
        "channels": [32, 32],
        "kernel": 3,
        "dropout": 0.1,
        "epochs": 4,
        "patience": 2,
        "batch_size": 256,
        "lr": 1e-3,
        "task": "regression",
    }
    DEFAULTS = {
        "features": ["lba", "latest_inv", "freq", "recency_freq", "write_count", "req_blocks"],
        "user_groups": 19,
        "top_bin": 2.0,  # upper bound of the last bounded bin, x capacity
    }

    def __init__(self, n_groups=20, **params):
        super().__init__(n_groups, **params)
        u = self.cfg["user_groups"]
        if isinstance(u, bool) or not isinstance(u, (int, np.integer)) or not 2 <= u <= 127:
            raise ValueError(f"policy mldt: user_groups must be an integer in [2, 127], got {u!r}")
        if int(n_groups) != int(u) + 1:
            raise ValueError(
                f"policy mldt: n_groups must be user_groups + 1 = {int(u) + 1} (one GC group), got {n_groups}"
            )
        if not float(self.cfg["top_bin"]) > 0:
            raise ValueError(f"policy mldt: top_bin must be > 0 (x capacity), got {self.cfg['top_bin']}")
        if self.cfg["model_params"].get("task") != "regression":
            raise ValueError("policy mldt regresses the lifetime: model_params.task must be regression")

    def _bind_state(self, ctx: SimContext) -> tuple:
        u = int(self.cfg["user_groups"])
        self.bounds = lifetime_bounds(ctx.capacity, u, float(self.cfg["top_bin"]))
        self.log_bounds = np.log2(1.0 + self.bounds.astype(np.float64))
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.fallback_group = u // 2
        st.gc_group = u
        return MldtState(
            scalars=scalars,
            pred_group=np.full(self.max_chunk_blocks, -1, np.int8),
            pred_value=np.zeros(self.max_chunk_blocks, np.float32),
            bounds=self.bounds,
            lba_class=np.full(ctx.capacity, -1, np.int8),
            lba_log_pred=np.zeros(ctx.capacity, np.float32),
            user_confusion=np.zeros((u, u), np.int64),
            **self._sampling_arrays(),
        )

    # -- inference -------------------------------------------------------------------------
    def _clear_predictions(self, n: int) -> None:
        self.state.pred_group[:n] = -1

    def _deploy_predictions(self, out: np.ndarray, offset: int) -> None:
        n = len(out)
        self.state.pred_value[offset : offset + n] = out
        self.state.pred_group[offset : offset + n] = self._groups(out)

    def _groups(self, log_lifetime: np.ndarray) -> np.ndarray:
        """Bin of each regressed ``log2(1 + lifetime)`` (compared in the log domain)."""
        return np.searchsorted(self.log_bounds, log_lifetime, side="left").astype(np.int8)

    # -- training --------------------------------------------------------------------------
    def _train(self, now: int, entry: dict) -> bool:
        c = self.cfg
        top = int(self.bounds[-1])
        data = self.ring.collect(now, long_bound=top)
        inv = data["inv"]
        y_group = np.searchsorted(self.bounds, inv, side="left")
        entry.update({"labelled_samples": int(len(inv)), "pending_samples": data["n_pending"]})
        if self.model is not None:
            recent = (data["time"] >= now - self.retrain_every) & (data["pred"] >= 0)
            if recent.any():
                entry["online_accuracy"] = float(np.mean(data["pred"][recent] == y_group[recent]))
        if len(inv) < int(c["min_samples"]):
            entry["action"] = "waiting for samples"
            return self.model is not None
        idx = self._latest(data)
        X = self._windows(data, idx)
        # censored samples carry their age (> top); cap so one old block does not dominate the loss
        y = np.log2(1.0 + np.minimum(inv[idx], 2 * top)).astype(np.float32)
        model, val, secs = fit_sequence_model(
            self.MODEL, c["model_params"], X, y, 1, seed=int(c["seed"]) + len(self.history)
        )
        self.train_s += secs
        pred = model.predict(X[val])
        entry.update(
            {
                "train_seconds": secs,
                "train_rows": int(val.start),
                "epochs": len(model.history),
                "validation_accuracy": float(np.mean(self._groups(pred) == y_group[idx][val])) if len(pred) else None,
                "validation_log2_mae": float(np.mean(np.abs(pred - y[val]))) if len(pred) else None,
                "action": "model deployed",
            }
        )
        self.model = model
        return True

    # -- results ---------------------------------------------------------------------------
    def summary(self, state) -> dict:
        conf = state.user_confusion
        total = int(conf.sum())
        st = record(state.scalars)
        err_sum, err_n = st.log2_error_sum, st.log2_errors
        return {
            "user_accuracy": float(np.trace(conf) / total) if total else None,
            "user_accuracy_within_one_group": float(sum(np.trace(conf, k) for k in (-1, 0, 1)) / total)
            if total
            else None,
            "user_log2_mae": float(err_sum / err_n) if err_n else None,
            "user_confusion": conf.tolist(),  # rows: predicted group, columns: actual
            "user_predictions_scored": total,
            "group_bounds": self.bounds.tolist(),
            **self.common_summary(),
        }
