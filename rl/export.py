"""The Q-table in firmware form: signed integers (int8 by default, Shiro's 439 KB table for
90,000 states x 5 actions), read by greedy lookup only.

:func:`quantize_table` scales the float table symmetrically (``round(q x scale)``, ``scale =
(2^(bits-1) - 1) / max|q|``) so the integer table keeps the order of values within each row up
to rounding; :func:`argmax_agreement` says in how many states the greedy action survives (ties
that rounding creates go to the lowest level, as in :func:`dogi_ml.rl.qlearning.greedy_action`).
The simulator runs such a table with :func:`dogi_ml.rl.qlearning.greedy_action` on it; its C
header is emitted by :mod:`dogi_ml.export.qtable`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .qlearning import N_ACTIONS, N_STATES, greedy_actions

INT_TYPES = {8: np.int8, 16: np.int16}


@dataclass(frozen=True)
class IntQTable:
    """An integer Q-table: ``table[state, action]`` and the scale it was quantised with
    (``q ~ table / scale``)."""

    table: np.ndarray
    scale: float
    bits: int
    kind = "qtable"     # what dogi_ml.export.c_header.emit_header dispatches on

    def greedy(self) -> np.ndarray:
        """The greedy action of every state (ties to the lowest level)."""
        return greedy_actions(self.table)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes)


def quantize_table(q: np.ndarray, bits: int = 8) -> IntQTable:
    """The integer form of a float Q-table (``bits`` 8 or 16)."""
    if bits not in INT_TYPES:
        raise ValueError(f"bits must be one of {sorted(INT_TYPES)}, got {bits}")
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (N_STATES, N_ACTIONS):
        raise ValueError(f"Q-table must have shape ({N_STATES}, {N_ACTIONS}), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("Q-table holds NaN or infinite values; it cannot be quantised")
    top = (1 << (bits - 1)) - 1
    peak = float(np.abs(q).max())
    scale = top / peak if peak > 0 else 1.0
    table = np.clip(np.rint(q * scale), -top, top).astype(INT_TYPES[bits])
    return IntQTable(table=np.ascontiguousarray(table), scale=scale, bits=bits)


def argmax_agreement(q: np.ndarray, iq: IntQTable) -> tuple[float, np.ndarray]:
    """(share of states whose greedy action the integer table keeps, the states where it does not)."""
    a, b = greedy_actions(q), iq.greedy()
    differ = np.flatnonzero(a != b)
    return 1.0 - differ.size / a.size, differ
