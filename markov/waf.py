"""WAF models (numpy/scipy only).

- :func:`fifo_valid_ratio` / :func:`fifo_waf`: a single log cleaned FIFO (or greedy in the
  limit of uniform traffic, to first order) under uniform random overwrites, with physical space
  ``rho`` x logical. A block written at the head survives until the tail reaches it, i.e. for
  ``rho (1 - u)`` logical capacities' worth of user writes, so the valid ratio ``u`` at cleaning
  solves ``u = exp(-rho (1 - u))``, whose closed form is ``u = -W(-rho e^-rho) / rho``
  (Lambert W, principal branch; Desnoyers 2012, and the FIFO model used by MiDAS/DOGI).
  WAF = 1 / (1 - u).
- :func:`contiguous_splits`: every way to merge ``k`` ordered categories into contiguous
  groups (``2^(k-1)``; DOGI's 512 configurations for ten categories).
"""

from __future__ import annotations

import numpy as np
from scipy.special import lambertw


def fifo_valid_ratio(rho: float | np.ndarray) -> np.ndarray:
    """Valid fraction of the reclaimed segment for FIFO cleaning, uniform writes, physical =
    ``rho`` x logical (``rho`` > 1)."""
    rho = np.asarray(rho, np.float64)
    if np.any(rho <= 1):
        raise ValueError(f"physical/logical ratio must exceed 1, got {rho}")
    return np.real(-lambertw(-rho * np.exp(-rho), 0) / rho)


def fifo_waf(rho: float | np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 - fifo_valid_ratio(rho))


def contiguous_splits(k: int) -> np.ndarray:
    """All ``2^(k-1)`` merges of categories ``0..k-1`` into contiguous groups, as a
    ``[2^(k-1), k]`` array of group indices (row ``s``: bit ``j`` of ``s`` set = a new group
    starts at category ``j + 1``)."""
    if k < 1:
        raise ValueError(f"need at least one category, got {k}")
    s = np.arange(2 ** (k - 1), dtype=np.int64)[:, None]
    starts = (s >> np.arange(k - 1)) & 1  # [S, k-1]
    return np.concatenate([np.zeros((s.shape[0], 1), np.int64), np.cumsum(starts, axis=1)], axis=1)
