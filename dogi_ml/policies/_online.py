"""Shared machinery of the learned placement schemes (DOGI, PHFTL, ML-DT).

- online training samples kept by the Numba loop in a ring: the row (block-write index) and
  write time of one in ``every`` chosen writes, the label filled in when the LBA is overwritten
  (a per-LBA slot index plays the paper's hash table);
- collecting those samples between chunks, with right-censoring handled causally: a sample
  not yet overwritten is known to be long-lived only once it has outlived a bound.

The schemes' features come chunk by chunk from :class:`dogi_ml.features.extract.FeatureStream`, so
the policy runs *batched* inference for the writes of the next chunk before the loop applies
them (``before_chunk``) with memory bounded by the chunk.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numba as nb
import numpy as np

#: ``inv`` of a sample whose LBA has not been overwritten yet
PENDING = -1


def log_columns(names: list[str]) -> list[int]:
    """Columns the models' input scaler log-transforms (as the ``train`` pipeline does)."""
    from dogi_ml.features.extract import NO_LOG

    return [i for i, f in enumerate(names) if f not in NO_LOG]


class RingArrays(NamedTuple):
    """The sample ring as the Numba loop sees it (one field of a policy's state)."""

    row: np.ndarray  # int64 per slot: the sample's block-write index (trace row)
    time: np.ndarray  # int64 per slot: its write time
    lba: np.ndarray  # int64 per slot
    pred: np.ndarray  # int16 per slot: what the deployed model predicted, -1 if none
    inv: np.ndarray  # int64 per slot: invalidation time once overwritten, else PENDING
    pending: np.ndarray  # int32 per LBA: the slot of its pending sample, -1 if none
    count: np.ndarray  # int64[1]: samples recorded so far (the next slot is count % size)


class SampleRing:
    """Numpy arrays of the online sample ring (shared with the Numba loop through the policy
    state as a :class:`RingArrays`): ``row, time, lba, pred, inv`` per slot, ``pending`` per
    LBA, ``count``. ``pending`` may be given: an int32 array (or a view, e.g. a field of a
    policy's per-LBA rows) of ``capacity_lbas`` entries, all ``-1``."""

    def __init__(self, capacity_lbas: int, size: int, pending: np.ndarray | None = None):
        if size < 1:
            raise ValueError(f"max_samples must be >= 1, got {size}")
        if pending is not None and (pending.shape != (capacity_lbas,) or pending.dtype != np.int32):
            raise ValueError(
                f"SampleRing: pending must be int32 with one entry per LBA ({capacity_lbas}), "
                f"got {pending.dtype} {pending.shape}"
            )
        self.row = np.full(size, -1, np.int64)
        self.time = np.full(size, -1, np.int64)
        self.lba = np.full(size, -1, np.int64)
        self.pred = np.full(size, -1, np.int16)
        self.inv = np.full(size, PENDING, np.int64)
        self.pending = np.full(capacity_lbas, -1, np.int32) if pending is None else pending
        self.count = np.zeros(1, np.int64)

    def arrays(self) -> RingArrays:
        return RingArrays(self.row, self.time, self.lba, self.pred, self.inv, self.pending, self.count)

    def collect(self, now: int, long_bound: int, since: int = -1) -> dict:
        """Labelled samples in time order: overwritten ones with their invalidation time, and
        pending ones older than ``long_bound`` (known to be longer; their age is a lower bound
        of the invalidation time). ``since``: only samples written at or after that time."""
        n = int(min(self.count[0], self.row.size))
        t = self.time[:n]
        inv = self.inv[:n].copy()
        age = now - t
        long_pending = (inv == PENDING) & (age > long_bound) & (t >= 0)
        inv[long_pending] = age[long_pending]
        keep = (inv != PENDING) & (t >= since) & (t >= 0)
        order = np.argsort(t[keep], kind="stable")
        idx = np.flatnonzero(keep)[order]
        return {
            "slot": idx,
            "row": self.row[idx],
            "time": t[idx],
            "inv": inv[idx],
            "pred": self.pred[idx].astype(np.int64),
            "censored": long_pending[idx],
            "n_pending": int(((self.inv[:n] == PENDING) & ~long_pending).sum()),
        }


@nb.njit(cache=True)
def ring_fill(ring, lba, inv):
    """The LBA is overwritten: if it was sampled, its label is now known."""
    slot = ring.pending[lba]
    if slot >= 0:
        ring.inv[slot] = inv
        ring.pending[lba] = -1


@nb.njit(cache=True)
def ring_record(ring, lba, row, now, pred):
    """Sample this write (the oldest slot is reused once the ring is full); returns its slot."""
    slot = ring.count[0] % ring.row.shape[0]
    old = ring.lba[slot]
    if old >= 0 and ring.pending[old] == slot:
        ring.pending[old] = -1
    ring.row[slot] = row
    ring.time[slot] = now
    ring.lba[slot] = lba
    ring.pred[slot] = pred
    ring.inv[slot] = -1
    ring.pending[lba] = slot
    ring.count[0] += 1
    return slot


def fit_classifier(
    name: str,
    params: dict,
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    names: list[str],
    seed: int,
    val_fraction: float = 0.2,
):
    """Train a registered model on time-ordered rows (the latest ``val_fraction`` held out for
    early stopping and for the returned accuracy). Returns ``(model, val_slice, seconds)``."""
    from dogi_ml.models import make_model

    model = make_model(name, n_classes, X.shape[-1], seed=seed, **params)
    model.scaler.log_columns = log_columns(names)
    cut = int(len(X) * (1.0 - val_fraction))
    t0 = time.perf_counter()
    model.fit(X[:cut], y[:cut], X[cut:], y[cut:])
    return model, slice(cut, len(X)), time.perf_counter() - t0
