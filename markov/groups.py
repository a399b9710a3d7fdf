"""Group-configuration model and search (DOGI §4.3), fed by PLog records.

PLog holds ``<predicted category, actual invalidation time>`` pairs for sampled non-hot user
writes. A *configuration* merges the ``K`` ordered categories into contiguous groups; group
``g``'s BIR upper bound is the upper bound of its last category (the last group is open-ended).

The WAF model of a configuration (a chain, after Desnoyers' and MiDAS' Markov models):

- ``f_g``: share of user writes predicted into group ``g``'s categories;
- ``m_g``: misprediction ratio, the share of blocks entering ``g`` still valid when its
  segments expire (actual invalidation time beyond ``g``'s bound); they are copied to ``g+1``,
  so copies cascade: ``in_{g+1} = f_{g+1} + m_g * in_g``;
- a transient group ``g`` keeps every block (valid or dead) until its segment expires: it
  occupies ``in_g * b_g`` physical blocks (``b_g`` its bound, in user-written blocks), of which
  ``in_g * E[min(inv, b_g)]`` are live logical data;
- the last group keeps everything long-lived and is cleaned FIFO; its valid ratio at cleaning
  comes from the Lambert-W closed form (:func:`dogi_ml.markov.waf.fifo_valid_ratio`) with the physical
  space left to it: ``rho_N = (rho * C - sum_g in_g * b_g) / (C - sum_g in_g * E[min(inv, b_g)])``.
  A configuration whose transient groups do not fit scores infinity.

WAF = 1 + sum of copies + ``in_N * u / (1 - u)``. With one group this is exactly the FIFO closed
form. :func:`best_configuration` scores all ``2^(K-1)`` configurations (512 for ten categories)
and returns the lowest.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .waf import contiguous_splits, fifo_valid_ratio


@dataclass
class Configuration:
    groups: list[list[int]]      # categories of each group
    bounds: list[float]          # BIR upper bound of each group (inf for the last)
    waf: float                   # modelled WAF
    fractions: list[float]
    mispredict: list[float]


def plog_stats(pred: np.ndarray, inv: np.ndarray, n_categories: int) -> tuple[np.ndarray, np.ndarray]:
    """Per category: share of records, and for each record its actual invalidation time sorted
    (for counting how many exceed a bound). Returns ``(share[K], records_by_category list)``."""
    pred = np.asarray(pred, np.int64)
    if pred.size and (pred.min() < 0 or pred.max() >= n_categories):
        raise ValueError(f"PLog categories must lie in [0, {n_categories}), got [{pred.min()}, {pred.max()}]")
    share = np.bincount(pred, minlength=n_categories).astype(np.float64) / max(1, pred.size)
    return share, [np.sort(np.asarray(inv)[pred == c]) for c in range(n_categories)]


def chain_waf(fractions, mispredict, bounds, capacity: float, rho: float = 1.1, residence=None) -> float:
    """The chain model above for one configuration (``bounds[-1]`` ignored: the last group is
    open-ended). ``residence[g]``: mean time a block entering transient group ``g`` stays valid
    there, ``E[min(inv, b_g)]`` (default ``b_g / 2``); it sets the logical data the group holds."""
    f = np.asarray(fractions, np.float64)
    m = np.asarray(mispredict, np.float64)
    b = np.asarray(bounds, np.float64)
    r = b / 2 if residence is None else np.asarray(residence, np.float64)
    n = f.size
    inflow = 0.0
    copies = 0.0
    held = 0.0          # physical blocks held by transient groups (valid and dead until expiry)
    live = 0.0          # logical data among them
    for g in range(n - 1):
        enter = f[g] + inflow
        held += enter * b[g]
        live += enter * r[g]
        inflow = enter * m[g]
        copies += inflow
    in_last = f[-1] + inflow
    live_last = capacity - live
    phys_last = rho * capacity - held
    if live_last <= 0 or phys_last <= live_last:
        return float("inf")   # the transient groups would not fit in the over-provisioned space
    u = float(fifo_valid_ratio(phys_last / live_last))
    return 1.0 + copies + in_last * u / (1.0 - u)


def score_all(share, by_cat, cat_upper, capacity: float, rho: float = 1.1) -> tuple[np.ndarray, np.ndarray]:
    """Modelled WAF of every contiguous configuration: ``(splits [S, K], waf [S])``."""
    k = len(share)
    splits = contiguous_splits(k)
    wafs = np.empty(len(splits))
    for s, groups in enumerate(splits):
        n = int(groups[-1]) + 1
        f = np.zeros(n)
        m = np.zeros(n)
        b = np.zeros(n)
        r = np.zeros(n)
        for g in range(n):
            cats = np.flatnonzero(groups == g)
            f[g] = share[cats].sum()
            b[g] = cat_upper[cats[-1]]
            total = sum(len(by_cat[c]) for c in cats)
            if total and g < n - 1:
                beyond = sum(len(by_cat[c]) - np.searchsorted(by_cat[c], b[g], side="right") for c in cats)
                m[g] = beyond / total
                r[g] = sum(np.minimum(by_cat[c], b[g]).sum() for c in cats) / total
        wafs[s] = chain_waf(f, m, b, capacity, rho, r)
    return splits, wafs


def best_configuration(pred, inv, cat_upper, capacity: float, rho: float = 1.1,
                       n_groups: int | None = None) -> Configuration:
    """Score all ``2^(K-1)`` merges of the categories and return the lowest-WAF one; with
    ``n_groups``, the lowest among the merges into exactly that many groups (Fig. 13's sweep)."""
    cat_upper = np.asarray(cat_upper, np.float64)
    share, by_cat = plog_stats(pred, inv, len(cat_upper))
    splits, modelled = score_all(share, by_cat, cat_upper, capacity, rho)
    wafs = modelled
    if n_groups is not None:
        if not 1 <= int(n_groups) <= len(cat_upper):
            raise ValueError(f"n_groups must lie in [1, {len(cat_upper)}], got {n_groups}")
        wafs = np.where(splits[:, -1] + 1 == int(n_groups), wafs, np.inf)
        if not np.isfinite(wafs).any():
            # every merge into n groups overflows the model's space: take the first such merge
            wafs = np.where(splits[:, -1] + 1 == int(n_groups), 0.0, np.inf)
    best = int(np.argmin(wafs))
    groups = splits[best]
    n = int(groups[-1]) + 1
    cats = [np.flatnonzero(groups == g).tolist() for g in range(n)]
    f = [float(share[c].sum()) for c in cats]
    mis = []
    for g, c in enumerate(cats):
        b = cat_upper[c[-1]]
        total = sum(len(by_cat[x]) for x in c)
        beyond = sum(len(by_cat[x]) - np.searchsorted(by_cat[x], b, side="right") for x in c)
        mis.append(float(beyond / total) if total and g < n - 1 else 0.0)
    bounds = [float(cat_upper[c[-1]]) for c in cats[:-1]] + [float("inf")]
    return Configuration(groups=cats, bounds=bounds, waf=float(modelled[best]), fractions=f, mispredict=mis)
