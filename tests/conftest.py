"""Shared fixtures: small deterministic traces and the location of ../shared/data."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("DOGI_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def shared_traces() -> Path:
    d = shared_data_dir() / "traces"
    if not d.is_dir():
        pytest.skip(f"real trace samples not found at {d} (they live in ../shared/data beside the repo)")
    return d


def zipf_writes(capacity: int, n: int, theta: float = 1.0, seed: int = 7) -> np.ndarray:
    """Zipf(theta) block writes, ranks scrambled over the address space (like fio)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, capacity + 1) ** theta
    cdf = np.cumsum(p / p.sum())
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n)), capacity - 1)
    return rng.permutation(capacity)[ranks].astype(np.int64)


def hotcold_writes(capacity: int, n: int, hot: float = 0.1, hot_share: float = 0.9, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    nhot = int(capacity * hot)
    is_hot = rng.random(n) < hot_share
    return np.where(is_hot, rng.integers(0, nhot, n), rng.integers(nhot, capacity, n)).astype(np.int64)
