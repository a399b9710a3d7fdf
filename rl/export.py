"""The Q-table in firmware form: signed integers (int8 by default, Shiro's 439 KB table for
90,000 states x 5 actions), read by greedy lookup only.

:func:`quantize_table` scales the float table symmetrically (``round(q x scale)``, ``scale =
(2^(bits-1) - 1) / max|q|``). Rounding keeps the order of values within a row except where it
makes the best action tie with a lower level (ties go to the lowest level, as in
:func:`dogi_ml.rl.qlearning.greedy_action`), which would change the deployed decision: learned
values of actions tried in a state often lie within one step (1/127 of the peak) of each other
(measured: 32 of 1,052 visited states on a small relocation run). So by default those rows are
repaired, one step each: the best action's value rises by one (or, at the top of the range, the
tied ones drop by one), and the integer table's greedy action equals the float table's in every
state. :func:`argmax_agreement` checks it.
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
    repaired: int = 0  # rows moved one step so the greedy action survives rounding
    kind = "qtable"  # what dogi_ml.export.c_header.emit_header dispatches on

    def greedy(self) -> np.ndarray:
        """The greedy action of every state (ties to the lowest level)."""
        return greedy_actions(self.table)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes)


def quantize_table(q: np.ndarray, bits: int = 8, keep_greedy: bool = True) -> IntQTable:
    """The integer form of a float Q-table (``bits`` 8 or 16); ``keep_greedy`` repairs the rows
    where rounding would change the greedy action (see the module docstring)."""
    if bits not in INT_TYPES:
        raise ValueError(f"bits must be one of {sorted(INT_TYPES)}, got {bits}")
    q = np.asarray(q, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != N_ACTIONS:
        raise ValueError(f"Q-table must have shape (states, {N_ACTIONS}) (Table I: {N_STATES} states), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("Q-table holds NaN or infinite values; it cannot be quantised")
    top = (1 << (bits - 1)) - 1
    peak = float(np.abs(q).max())
    scale = top / peak if peak > 0 else 1.0
    table = np.clip(np.rint(q * scale), -top, top).astype(np.int64)
    repaired = 0
    if keep_greedy:
        want = greedy_actions(q)
        rows = np.flatnonzero(greedy_actions(table) != want)
        for s in rows:
            b = want[s]
            # rounding is monotone, so the best value now ties with a lower level's
            if table[s, b] < top:
                table[s, b] += 1
            else:
                tied = np.flatnonzero(table[s] >= table[s, b])
                table[s, tied[tied != b]] -= 1
        repaired = int(rows.size)
    return IntQTable(
        table=np.ascontiguousarray(table.astype(INT_TYPES[bits])), scale=scale, bits=bits, repaired=repaired
    )


def argmax_agreement(q: np.ndarray, iq: IntQTable) -> tuple[float, np.ndarray]:
    """(share of states whose greedy action the integer table keeps, the states where it does not)."""
    a, b = greedy_actions(q), iq.greedy()
    differ = np.flatnonzero(a != b)
    return 1.0 - differ.size / a.size, differ
