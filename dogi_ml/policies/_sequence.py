"""Sequence inputs and online training shared by the sequence-model schemes (PHFTL, ML-DT).

A sequence model sees, for a user write, the feature rows of its LBA's last ``history`` writes
(oldest first, left-padded with zeros), exactly as the ``train`` pipeline builds its sequence
datasets (:func:`features.extract.lba_sequences`). The per-write features are computed once
per trace (causal, :func:`._online.trace_features`) together with ``prev``, the index of the
previous write of the same LBA (known at write time; only the *next* write is future). Windows
are built per chunk, for exactly the writes the loop applies next, so memory is bounded by the
chunk, not by the trace.

Count- and time-like columns are log-transformed once here (``log2(1 + x)``, as the models'
input scaler would do per window), so the model's scaler only standardises: the same model,
several times cheaper at inference.

:class:`SequencePolicy` is the common skeleton: sampling ring, retraining between chunks,
batched inference before a chunk, timing. Subclasses supply labels, the model's output
mapping and their Numba placement functions.
"""
from __future__ import annotations

import time

import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext
from dogi_ml.sim.victims import GENERAL_VICTIMS

from ._online import SampleRing, log_columns, trace_features

PAPER_CAPACITY = 33_554_432          # 128 GiB in 4 KiB blocks: the paper's parameters scale from it
#: rows per forward pass at inference: small batches keep the activations in cache (measured
#: ~1.5x faster than 8192 for the GRU and the TCN on one core)
INFER_BATCH = 1024

_PREV_CACHE: dict = {}


def previous_writes(trace) -> np.ndarray:
    """``prev[i]``: index of the previous write of the LBA written at ``i`` (``-1`` if none),
    for every block write of ``trace`` (cached per trace). Causal: ``annotate`` also returns
    the invalidation times, which are dropped here."""
    from oracles.annotate import annotate

    key = (id(trace), int(trace.block_writes.size))
    prev = _PREV_CACHE.get(key)
    if prev is None:
        _PREV_CACHE.clear()
        _, prev = annotate(trace.block_writes)
        _PREV_CACHE[key] = prev
    return prev


def log_features(X: np.ndarray, names: list[str]) -> np.ndarray:
    """``sign(x) * log2(1 + |x|)`` on the columns the models' scaler logs (float32 copy)."""
    X = np.array(X, np.float32)
    for c in log_columns(names):
        v = X[:, c]
        X[:, c] = np.sign(v) * np.log2(1.0 + np.abs(v))
    return X


class SequenceInputs:
    """Per-write features (already log-transformed) and ``prev`` of one trace."""

    def __init__(self, features: np.ndarray, prev: np.ndarray, history: int):
        if int(history) < 1:
            raise ValueError(f"history must be >= 1, got {history}")
        if features.shape[0] != prev.shape[0]:
            raise ValueError(f"features have {features.shape[0]} rows but prev has {prev.shape[0]}")
        self.features = np.ascontiguousarray(features, dtype=np.float32)
        self.prev = np.ascontiguousarray(prev, dtype=np.int64)
        self.history = int(history)

    @classmethod
    def from_trace(cls, trace, capacity: int, names: list[str], history: int) -> "SequenceInputs":
        return cls(log_features(trace_features(trace, capacity, list(names)), list(names)),
                   previous_writes(trace), history)

    @property
    def n_rows(self) -> int:
        return self.features.shape[0]

    def windows(self, rows: np.ndarray) -> np.ndarray:
        """float32 ``[len(rows), history, F]``: each row's LBA history, newest last."""
        from features.extract import lba_sequences

        return lba_sequences(self.features, self.prev, np.asarray(rows, np.int64), self.history)[0]

    def chunk(self, lo: int, hi: int) -> np.ndarray:
        """Windows of the block writes ``lo .. hi - 1`` (one chunk of the simulation)."""
        return self.windows(np.arange(lo, hi, dtype=np.int64))


def fit_sequence_model(name: str, params: dict, X: np.ndarray, y: np.ndarray, n_out: int, seed: int,
                       val_fraction: float = 0.2):
    """Train a sequence model on time-ordered windows, the latest ``val_fraction`` held out
    (early stopping, validation metrics). Inputs are pre-logged (:func:`log_features`), so the
    scaler only standardises. Returns ``(model, val_slice, seconds)``."""
    from models import make_model

    model = make_model(name, n_out, X.shape[-1], seed=seed, **params)
    if not getattr(model, "sequence", False):
        raise ValueError(f"model {name} is not a sequence model (gru, tcn); it cannot take per-LBA histories")
    model.scaler.log_columns = []
    cut = int(len(X) * (1.0 - val_fraction))
    t0 = time.perf_counter()
    model.fit(X[:cut], y[:cut], X[cut:], y[cut:])
    return model, slice(cut, len(X)), time.perf_counter() - t0


def scaled(value: float, capacity: int, floor: int = 1) -> int:
    """A paper value at 128 GiB, scaled to ``capacity`` blocks."""
    return max(floor, int(round(value * capacity / PAPER_CAPACITY)))


class SequencePolicy(PlacementPolicy):
    """Skeleton of an online-trained sequence-model placement scheme.

    Subclasses set ``name``, ``DEFAULTS`` (merged over :attr:`COMMON`), the Numba functions,
    and implement :meth:`_bind_state`, :meth:`_train` and :meth:`_deploy_predictions`.
    Conventions of the policy state tuple: ``p[0]`` is the int64 scalar array with
    :data:`CHUNK_START`, :data:`PREFILL`, :data:`EVERY`, :data:`COUNT`, :data:`MODE` first.
    """

    COMMON = {
        "model_params": {},          # merged over the scheme's model defaults
        "features": [],
        "history": 8,                # writes per LBA window (as conf/model/gru.yaml)
        "sample_every": 10,          # one in N user writes becomes a training sample
        "max_samples": 100_000,      # ring size; x sample_every should exceed the longest label bound
        "max_train": 16_000,         # latest labelled samples used per retraining
        "min_samples": 2_000,        # labelled samples needed before the first model
        "retrain_every": None,       # user writes between retrainings; None = 100 GiB (26M blocks) scaled
        "victim": "cost_benefit",    # DOGI §5.1: PHFTL, SepBIT and ML-DT use cost-benefit
        "seed": 0,
    }
    DEFAULTS: dict = {}
    MODEL: str = ""
    MODEL_DEFAULTS: dict = {}

    def __init__(self, n_groups: int, **params):
        accepted = {**self.COMMON, **self.DEFAULTS}
        unknown = set(params) - set(accepted)
        if unknown:
            raise ValueError(f"policy {self.name}: unknown parameter(s) {sorted(unknown)}; accepted: {sorted(accepted)}")
        cfg = {**accepted, **params}
        cfg["model_params"] = {**self.MODEL_DEFAULTS, **dict(cfg["model_params"] or {})}
        for key in ("history", "sample_every", "max_samples", "max_train", "min_samples"):
            if int(cfg[key]) < 1:
                raise ValueError(f"policy {self.name}: {key} must be >= 1, got {cfg[key]}")
        if cfg["retrain_every"] is not None and int(cfg["retrain_every"]) < 1:
            raise ValueError(f"policy {self.name}: retrain_every must be >= 1 user writes, got {cfg['retrain_every']}")
        if cfg["victim"] not in GENERAL_VICTIMS:
            raise ValueError(f"policy {self.name}: victim must be one of {', '.join(GENERAL_VICTIMS)}, got {cfg['victim']!r}")
        if not cfg["features"]:
            raise ValueError(f"policy {self.name}: params.features is empty")
        from features.extract import FEATURES
        bad = [f for f in cfg["features"] if f not in FEATURES]
        if bad:
            raise ValueError(f"policy {self.name}: unknown feature(s) {bad}; known: {', '.join(FEATURES)}")
        from models import make_model
        # unknown model parameters fail here rather than at the first retraining
        make_model(self.MODEL, 2, len(cfg["features"]), **cfg["model_params"])
        self.cfg = cfg
        self.victim = cfg["victim"]     # the engine takes a policy's selector over sim.victim
        super().__init__(n_groups)

    # -- setup -----------------------------------------------------------------------------
    def bind(self, ctx: SimContext) -> tuple:
        c = self.cfg
        if ctx.trace is None:
            raise ValueError(f"policy {self.name} needs the trace (its features) to run its model: "
                             "use the simulate command or pass trace= to the Simulator")
        self.capacity = cap = ctx.capacity
        self.prefill = ctx.prefill_blocks
        self.retrain_every = int(c["retrain_every"] or scaled(26_000_000, cap, 1000))
        self.max_chunk_blocks = self.retrain_every   # retraining happens between chunks
        self.inputs = SequenceInputs.from_trace(ctx.trace, cap, list(c["features"]), int(c["history"]))
        self.ring = SampleRing(cap, int(c["max_samples"]))
        self.model = None
        self.last_train = 0
        self.history: list[dict] = []
        self.infer_s = 0.0
        self.infer_blocks = 0
        self.train_s = 0.0
        self.state = self._bind_state(ctx)
        st = self.state[0]
        st[PREFILL] = self.prefill
        st[EVERY] = int(c["sample_every"])
        st[MODE] = 0
        return self.state

    def _bind_state(self, ctx: SimContext) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- between chunks --------------------------------------------------------------------
    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        st = self.state[0]
        st[CHUNK_START] = start
        if self.model is None or st[MODE] == 0:
            return
        a = start - self.prefill                 # feature row of the chunk's first write
        lo, hi = max(a, 0), min(a + n_writes, self.inputs.n_rows)
        self._clear_predictions(n_writes)        # writes beyond the trace's features: no prediction
        if hi <= lo:
            return
        t0 = time.perf_counter()
        X = self.inputs.chunk(lo, hi)
        out = np.concatenate([self._model_output(X[i:i + INFER_BATCH]) for i in range(0, len(X), INFER_BATCH)])
        self._deploy_predictions(out, lo - a)
        self.infer_s += time.perf_counter() - t0
        self.infer_blocks += hi - lo

    def _model_output(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(X)

    def _clear_predictions(self, n: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _deploy_predictions(self, out: np.ndarray, offset: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def between_chunks(self, sim) -> None:
        user = sim.user_writes
        if user - self.last_train < self.retrain_every:
            return
        self.last_train = user
        now = int(sim.state.ctr[0])
        entry = {"user_writes": user}
        if self._train(now, entry):
            self.state[0][MODE] = 1
        self.history.append(entry)

    def _train(self, now: int, entry: dict) -> bool:  # pragma: no cover - abstract
        """Retrain from the ring; fill ``entry``; return True if a model is deployed."""
        raise NotImplementedError

    def _latest(self, data: dict) -> np.ndarray:
        """Indices of the latest ``max_train`` labelled samples (time order)."""
        n = len(data["row"])
        return np.arange(max(0, n - int(self.cfg["max_train"])), n)

    def common_summary(self) -> dict:
        return {
            "retrains": sum(1 for h in self.history if "train_seconds" in h),
            "train_seconds": self.train_s,
            "inference_ns_per_block": 1e9 * self.infer_s / self.infer_blocks if self.infer_blocks else None,
            "inferred_blocks": self.infer_blocks,
            "mode": "model" if self.state[0][MODE] else "fallback (no model yet)",
            "training_history": self.history,
        }


# indices shared by the schemes' int64 state array p[0]
CHUNK_START, PREFILL, EVERY, COUNT, MODE = range(5)
N_COMMON_ST = 5
