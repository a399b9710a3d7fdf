"""PHFTL (Sun et al., DAC'23; DOGI §2.2, Table 1): a GRU classifies each user write as hot or
non-hot; GC-written blocks go through five age-based GC groups.

Groups: 0 = hot user writes, 1 = non-hot user writes, 2..6 = GC groups 1..5. A valid block
relocated out of a user group goes to GC group 1; out of GC group k to k + 1; the last GC group
keeps its blocks (SepBIT/MiDAS-style age classes: the more often a block survived GC, the
older it is). Victims: cost-benefit (DOGI §5.1).

The classifier (one GRU layer, hidden 32, as PHFTL's successor Shiro) reads the LBA's last
``history`` writes' features: Shiro's set (the previous lifetime, request size, sequentiality,
chunk writes and reads, global read/write ratio). It is trained online: one in
``sample_every`` user writes is sampled, labelled when its LBA is overwritten (or once it has
outlived the hot threshold: then it is known to be non-hot), and the model is retrained from
scratch every ``retrain_every`` user writes on the latest ``max_train`` labelled samples.
Inference (``inference: window``, the default) is batched per chunk over windows of the writes
about to be applied: ``history`` GRU steps per write. ``inference: cached`` keeps a hidden state
per LBA instead, as Shiro does (:func:`dogi_ml.policies._gru.gru_cached_classes`): one step per
write on its own row, so the state carries the LBA's whole history since the model was deployed
rather than its last ``history`` writes (int16 per unit: 64 bytes per LBA, 2.1 GB at 128 GiB). A
retraining starts from scratch, so states computed by the previous model mean nothing to the new
one: an LBA's first write after it rebuilds the state from its window (that prediction is the
window model's, at ``history`` steps); every later write is one step.

The hot threshold (``hot_threshold: null``) is Shiro's initial labelling rule, re-derived at every
retraining: the knee of the sampled lifetimes' CDF (the sample farthest from the chord of the
sorted-lifetime curve), over samples old enough that their lifetime (capped at the capacity)
is known. Shiro's further per-window adjustment with three logistic-regression probes is not
implemented. An integer fixes the threshold instead.

Before the first model every user write is non-hot. Accuracy (hot vs non-hot) is scored online
when an LBA is overwritten: the class predicted for its previous write against its actual
lifetime vs the threshold in force.
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.kernels import prefetch
from dogi_ml.sim.policy_api import SimContext, new_scalars, no_reclaim_hook, record

from . import register
from ._gru import gru_cached_classes, gru_padding_states, torch_gru_weights
from ._online import RingArrays, ring_fill
from ._sequence import SHARES, SequencePolicy, cdf_knee, count_and_sample, fit_sequence_model, sequence_scalars

__all__ = ["PHFTL", "cdf_knee"]

G_HOT, G_COLD, G_GC1 = 0, 1, 2
N_GC = 5
N_GROUPS = 2 + N_GC
SCALARS = sequence_scalars(hot_threshold=np.int64)  # a lifetime <= hot_threshold is hot
INFERENCE = ("window", "cached")


class PhftlState(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    preds: np.ndarray  # int8 per write of the current chunk: 0 hot, 1 non-hot, -1 none
    lba_class: np.ndarray  # int8 per LBA: class predicted for its live version, -1 if none
    user_confusion: np.ndarray  # int64 [predicted, actual] hot/non-hot of overwritten user writes
    ring: RingArrays  # online training samples
    ring_windows: np.ndarray  # float32 [ring slot, history, feature]: each sample's window
    windows: np.ndarray  # float32 [write of the chunk, history, feature]


@nb.njit(cache=True)
def phftl_user(s, p, lba, now):
    st = p.scalars[0]
    last = s.lba_time[lba]
    if last >= 0:
        v = now - last
        pc = p.lba_class[lba]
        if pc >= 0:
            p.user_confusion[pc, 0 if v <= st.hot_threshold else 1] += 1
        ring_fill(p.ring, lba, v)
    if now < st.prefill:
        p.lba_class[lba] = -1
        return G_COLD
    g = G_COLD
    pc = -1
    if st.mode == 1:
        c = p.preds[now - st.chunk_start]
        if c >= 0:
            g = c  # class 0 = hot -> group 0, 1 = non-hot -> group 1
            pc = c
    p.lba_class[lba] = pc
    count_and_sample(st, p.ring, p.ring_windows, p.windows, lba, now, pc)
    return g


@nb.njit(cache=True, inline="always")
def phftl_prefetch(p, lba):
    """The engine's cache hint for the per-LBA entries ``phftl_user`` touches (no effect on results)."""
    prefetch(p.lba_class, lba)
    prefetch(p.ring.pending, lba)


@nb.njit(cache=True)
def phftl_gc(s, p, lba, victim, now):
    vg = s.seg_group[victim]
    if vg < G_GC1:
        return G_GC1
    return min(vg + 1, N_GROUPS - 1)


@register
class PHFTL(SequencePolicy):
    name = "phftl"
    default_groups = N_GROUPS
    place_user = phftl_user
    place_gc = phftl_gc
    prefetch_lba = phftl_prefetch
    on_reclaim = no_reclaim_hook

    MODEL = "gru"
    SPLIT_INFERENCE = True  # by rows (window) or by LBA (cached)
    OUTPUT_DTYPE = np.int8
    MODEL_DEFAULTS = {"hidden": 32, "epochs": 4, "patience": 2, "batch_size": 256, "lr": 1e-3}
    DEFAULTS = {
        # Shiro's features: previous lifetime, request size, sequential, chunk writes/reads, r/w ratio
        "features": ["latest_inv", "req_blocks", "sequential", "chunk_writes", "chunk_reads", "rw_ratio_milli"],
        "hot_threshold": None,  # None = knee of the lifetime CDF at each retraining; int = fixed
        "inference": "window",  # window: history steps per write; cached: one step from the LBA's state
    }

    def __init__(self, n_groups=N_GROUPS, **params):
        if int(n_groups) != N_GROUPS:
            raise ValueError(
                f"policy phftl has exactly {N_GROUPS} groups (2 user + {N_GC} GC), got n_groups={n_groups}"
            )
        super().__init__(n_groups, **params)
        t = self.cfg["hot_threshold"]
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1):
            raise ValueError(
                f"policy phftl: hot_threshold must be null (knee of the lifetime CDF) or a "
                f"positive number of blocks, got {t!r}"
            )
        if self.cfg["inference"] not in INFERENCE:
            raise ValueError(
                f"policy phftl: inference must be one of {', '.join(INFERENCE)}, got {self.cfg['inference']!r}"
            )
        self.cached = self.cfg["inference"] == "cached"

    def _bind_state(self, ctx: SimContext) -> tuple:
        self.states = None  # inference: cached: int16 [LBA, hidden], allocated with the first model
        self.stamps = None  # uint16 per LBA: the model generation its state was computed by
        self.generation = 0
        self.states_rebuilt = 0
        scalars = new_scalars(SCALARS)
        t = self.cfg["hot_threshold"]
        record(scalars).hot_threshold = int(t) if t is not None else 1
        return PhftlState(
            scalars=scalars,
            preds=np.full(self.max_chunk_blocks, -1, np.int8),
            lba_class=np.full(ctx.capacity, -1, np.int8),
            user_confusion=np.zeros((2, 2), np.int64),
            **self._sampling_arrays(),
        )

    # -- inference -------------------------------------------------------------------------
    def _clear_predictions(self, n: int) -> None:
        self.state.preds[:n] = -1

    def _deploy_predictions(self, out: np.ndarray, offset: int) -> None:
        self.state.preds[offset : offset + len(out)] = out

    def _infer_chunk(self, X: np.ndarray, row: int) -> np.ndarray:
        if not self.cached:
            return super()._infer_chunk(X, row)
        out = self._new_output(len(X))
        self.states_rebuilt += self._infer_share(X, row, out, 0, SHARES)
        return out

    def _infer_share(self, X: np.ndarray, row: int, out: np.ndarray, lo: int, hi: int) -> int:
        if not self.cached:
            return super()._infer_share(X, row, out, lo, hi)
        lbas = np.ascontiguousarray(self.stream.lbas[row : row + len(X)], dtype=np.int64)
        return gru_cached_classes(
            lbas, X, self.states, self.stamps, self.generation, self.padding, *self.gru_weights, out, lo, hi, SHARES
        )

    def _deploy_model(self, model) -> None:
        """Deploy a new model; with cached states, a new generation (every state is stale)."""
        self.model = model
        if not self.cached:
            return
        if self.states is None:
            self.states = np.zeros((self.capacity, model.net.gru.hidden_size), np.int16)
            self.stamps = np.zeros(self.capacity, np.uint16)  # generation 0: no state yet
        self.generation += 1
        if self.generation > np.iinfo(np.uint16).max:  # a wrapped stamp must not look current
            self.stamps[:] = 0
            self.generation = 1
        self.gru_weights = torch_gru_weights(model.net, model.scaler.mean, model.scaler.std)
        steps = int(self.cfg["history"]) - 1
        self.padding = gru_padding_states(steps, len(self.cfg["features"]), *self.gru_weights[:4])

    # -- training --------------------------------------------------------------------------
    def _threshold(self, now: int) -> int:
        """The knee over samples written at least a capacity ago (their lifetime, capped at
        the capacity, is known); all labelled samples while there are too few of those."""
        if self.cfg["hot_threshold"] is not None:
            return int(self.cfg["hot_threshold"])
        horizon = self.capacity
        data = self.ring.collect(now, long_bound=horizon)
        old = data["time"] <= now - horizon
        inv = data["inv"][old] if old.sum() >= int(self.cfg["min_samples"]) else data["inv"]
        return cdf_knee(np.minimum(inv, horizon)) if inv.size else int(record(self.state.scalars).hot_threshold)

    def _train(self, now: int, entry: dict) -> bool:
        c = self.cfg
        st = record(self.state.scalars)
        thresh = self._threshold(now)
        data = self.ring.collect(now, long_bound=thresh)  # pending and older than T: non-hot
        y_all = (data["inv"] > thresh).astype(np.int64)
        entry.update(
            {"labelled_samples": int(len(y_all)), "pending_samples": data["n_pending"], "hot_threshold": thresh}
        )
        if self.model is not None:
            recent = (data["time"] >= now - self.retrain_every) & (data["pred"] >= 0)
            if recent.any():
                entry["online_accuracy"] = float(np.mean(data["pred"][recent] == y_all[recent]))
        if len(y_all) < int(c["min_samples"]):
            entry["action"] = "waiting for samples"
            return self.model is not None
        idx = self._latest(data)
        X = self._windows(data, idx)
        y = y_all[idx]
        model, val, secs = fit_sequence_model(
            self.MODEL, c["model_params"], X, y, 2, seed=int(c["seed"]) + len(self.history)
        )
        self.train_s += secs
        pred = model.predict(X[val])
        entry.update(
            {
                "train_seconds": secs,
                "train_rows": int(val.start),
                "hot_fraction": float(np.mean(y == 0)),
                "validation_accuracy": float(np.mean(pred == y[val])) if len(pred) else None,
                "epochs": len(model.history),
                "action": "model deployed",
            }
        )
        self._deploy_model(model)
        st.hot_threshold = thresh
        return True

    # -- results ---------------------------------------------------------------------------
    def summary(self, state) -> dict:
        conf = state.user_confusion
        total = int(conf.sum())
        return {
            "user_accuracy": float(np.trace(conf) / total) if total else None,
            "user_accuracy_hot": float(conf[0, 0] / conf[0].sum()) if conf[0].sum() else None,
            "user_accuracy_nonhot": float(conf[1, 1] / conf[1].sum()) if conf[1].sum() else None,
            "user_confusion": conf.tolist(),  # rows: predicted hot/non-hot, columns: actual
            "user_predictions_scored": total,
            "hot_threshold": int(record(state.scalars).hot_threshold),
            "inference": self.cfg["inference"],
            "states_rebuilt": self.states_rebuilt if self.cached else None,  # first writes after a retraining
            **self.common_summary(),
        }
