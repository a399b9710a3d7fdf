"""Labels from the future-knowledge annotation, and DOGI's causal sampling of training rows.

The label of a block write is its invalidation time (user-written blocks until the next write
of its LBA; ``NEVER`` if none). Encodings:

- ``dogi``: hot (``inv <= mu``) or one of ten categories c1..c10 (DOGI §4.3): c1 covers
  ``(mu, 1% of capacity]``, each next upper bound doubles, c10 is open-ended; a hot threshold
  near or past 1% stretches the lower categories (:func:`category_bounds`). Class indices:
  0 = hot, 1..10 = c1..c10 (the model is trained on non-hot rows, classes c1..c10).
- ``quantile``: ten equal-frequency bins of the invalidation time (as the authors' public code).
- ``binary``: short (``inv <= threshold``) vs long.
- ``log``: ``log2(1 + inv)`` for regression (never-invalidated rows get ``log2(1 + horizon)``).

``mu`` defaults to the paper's 200K blocks at 128 GiB, scaled with capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dogi_ml.oracles.annotate import NEVER
from dogi_ml.oracles.categories import (  # noqa: F401  (re-exported: the labels' public names)
    MIN_BOUND_RATIO,
    N_CATEGORIES,
    PAPER_CAPACITY,
    PAPER_MU,
    category_bounds,
    scaled_mu,
)


def dogi_classes(inv: np.ndarray, capacity: int, mu: int | None = None) -> np.ndarray:
    """0 = hot, 1..10 = c1..c10, by invalidation time (``NEVER`` falls in c10)."""
    bounds = category_bounds(capacity, mu)
    return np.searchsorted(bounds, inv, side="left").astype(np.int64)


def quantile_edges(inv: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """Inner edges of ``n_bins`` equal-frequency bins (fit on training rows only)."""
    return np.unique(np.quantile(inv, np.linspace(0, 1, n_bins + 1)[1:-1]))


def quantile_classes(inv: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.searchsorted(edges, inv, side="right").astype(np.int64)


def binary_classes(inv: np.ndarray, threshold: int) -> np.ndarray:
    return (inv > threshold).astype(np.int64)


def log_lifetime(inv: np.ndarray, horizon: int) -> np.ndarray:
    return np.log2(1.0 + np.minimum(inv, horizon)).astype(np.float64)


@dataclass
class Sample:
    """Rows chosen for training/testing, in time order, with their labels."""

    rows: np.ndarray  # block-write indices (time order)
    inv: np.ndarray  # invalidation time of each row
    is_hot: np.ndarray  # inv <= mu at the row's time, by the causal hot filter (latest inv)


def dogi_sample(
    latest_inv: np.ndarray,
    inv: np.ndarray,
    capacity: int,
    *,
    mu: int | None = None,
    every: int = 10,
    cap: int = 500_000,
    start: int | None = None,
    horizon: int | None = None,
) -> np.ndarray:
    """DOGI's sampling: one in ``every`` non-hot user writes (non-hot by the hot filter: latest
    invalidation time > mu), from ``start`` (default: after 2x capacity written, as the
    authors' code) up to ``cap`` rows. Rows whose true invalidation lies beyond ``horizon``
    (the end of the trace) keep ``NEVER``: they are long-lived, which is what c10 means.
    Returns row indices in time order."""
    mu = scaled_mu(capacity, mu)
    start = 2 * capacity if start is None else int(start)
    n = latest_inv.size
    candidates = np.flatnonzero(latest_inv[start:] > mu) + start
    rows = candidates[::every][:cap]
    if rows.size == 0 and n:
        raise ValueError(
            f"no non-hot writes to sample after {start} blocks (trace has {n}); the trace is "
            "shorter than 2x its capacity or every write is hot: write more (workload.write_volume) "
            "or set data.sample_start"
        )
    return rows


def time_split(rows: np.ndarray, train_fraction: float = 0.7, val_fraction: float = 0.1):
    """Train / validation / test by time (earlier rows train, later rows test); never shuffled."""
    n = rows.size
    a = int(n * train_fraction)
    b = int(n * (train_fraction + val_fraction))
    if a < 1 or b >= n:
        raise ValueError(f"{n} sampled rows are too few for a {train_fraction}/{val_fraction}/rest split")
    return rows[:a], rows[a:b], rows[b:]


def never_mask(inv: np.ndarray) -> np.ndarray:
    return inv >= NEVER
