"""DOGI's invalidation-time categories (dogi-fast26 §4.3): the hot threshold and the c1..c10 ladder.

They classify the annotation's invalidation times, so they sit beside it: ``features.labels``
labels training rows with them and ``oracles.chain`` places blocks by them.
"""

from __future__ import annotations

import numpy as np

PAPER_CAPACITY = 33_554_432
PAPER_MU = 200_000
N_CATEGORIES = 10
#: every category's upper bound is at least this many times the bound below it (see category_bounds;
#: the integer arithmetic there is written for 3/2)
MIN_BOUND_RATIO = 1.5


def scaled_mu(capacity: int, mu: int | None = None) -> int:
    """The hot threshold for ``capacity`` (paper: 200K blocks at 128 GiB), or ``mu`` when given
    (at least 1: a 0 once stood for "unset" here and replaced a user's 0 by the default)."""
    if mu is None:
        return max(1, int(round(PAPER_MU * capacity / PAPER_CAPACITY)))
    if int(mu) < 1:
        raise ValueError(f"the hot threshold mu must be at least 1 block, got {mu}")
    return int(mu)


def category_bounds(capacity: int, mu: int | None = None) -> np.ndarray:
    """Upper bounds of hot, c1..c9 (c10 is open-ended).

    Each bound is the larger of the paper's (c1 ends at 1% of the capacity, c2 at 2%, doubling
    on) and 1.5x the bound below it, rounded up. At the paper's hot threshold (0.6% of the
    capacity) and below 2/3 of 1% this is the paper's layout; a threshold past that (DOGI's hot
    filter stepped up to its cap, or a large ``data.mu``) stretches c1 to ``1.5 * mu`` instead of
    collapsing it to ``(mu, 1%]``, a single block at ``mu = 1% - 1``, and the stretch fades
    back into the paper's ladder after a few categories. Every category spans at least a third
    of its upper bound, so none is ever empty."""
    mu = scaled_mu(capacity, mu)
    paper = capacity // 100
    bounds = [mu]
    for i in range(N_CATEGORIES - 1):
        stretched = -(-bounds[-1] * 3 // 2)  # ceil(MIN_BOUND_RATIO * previous), exact; > previous as mu >= 1
        bounds.append(max(paper << i, stretched))
    return np.array(bounds, np.int64)
