"""The C header of an integer Q-table (:class:`dogi_ml.rl.export.IntQTable`): Shiro's GC
relocation agent in firmware form.

One ``static const int8_t`` (or ``int16_t``) table ``P_qtable[P_N_STATES][P_N_ACTIONS]`` and
integer-only ``static inline`` functions, ``<stdint.h>`` only, no libc, no floats:

* ``int32_t P_encode_state(int64_t lifetime, int64_t valid, int64_t segment_blocks,
  int32_t segment_type, int32_t prediction, int32_t previous)``: the state index of Table I,
  exactly :func:`dogi_ml.rl.qlearning.encode_state` (``-1`` for an out-of-range category);
* ``int32_t P_best_action(int32_t state)``: the greedy GC level index 0..4 (ties to the lowest;
  ``-1`` for a state out of range);
* ``int32_t P_relocate(...)``: both in one call, with ``encode_state``'s arguments.
"""

from __future__ import annotations

import numpy as np

from dogi_ml.rl.export import IntQTable
from dogi_ml.rl.qlearning import (
    N_ACTIONS,
    N_LIFETIME_BINS,
    N_PREDICTIONS,
    N_PREVIOUS,
    N_SEGMENT_TYPES,
    N_STATES,
    N_VALID_BINS,
)

from .c_common import c_array, epilogue, prologue
from .integer import ExportError

C_TYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t"}


def emit_qtable(iq: IntQTable, prefix: str = "shiro", source: str | None = None) -> str:
    """The C99 header of ``iq`` with identifiers prefixed ``prefix``."""
    if not prefix.isidentifier():
        raise ExportError(f"header prefix must be a C identifier, got {prefix!r}")
    table = np.asarray(iq.table)
    ctype = C_TYPES.get(table.dtype)
    if ctype is None:
        raise ExportError(
            f"Q-table dtype {table.dtype} has no C form; quantise it with "
            f"dogi_ml.rl.export.quantize_table (int8 or int16)"
        )
    if table.shape != (N_STATES, N_ACTIONS):
        raise ExportError(f"Q-table must have shape ({N_STATES}, {N_ACTIONS}), got {table.shape}")
    P, PU = prefix, prefix.upper()
    doc = [
        "Tabular Q-learning agent for GC relocation (Shiro, Table I), integer form.",
        f"Values: {ctype}, q ~ value / {iq.scale:.6g}; the greedy action is the largest value",
        "(ties to the lowest GC level). State = (((l * 25 + v) * 8 + t) * 3 + p) * 6 + prev:",
        "  l lifetime bin floor(log2(lifetime)) in 0..24 (0 below 2), v valid bin",
        "  floor(25 * valid / segment_blocks) in 0..24, t segment type (0 user short, 1 user",
        "  long, 2 user unseen, 3..7 GC levels 1..5), p prediction (0 short, 1 long, 2 unseen),",
        "  prev previous action (0..4, 5 never relocated). Action a: GC level a + 1.",
    ]
    out = [prologue(P, f"{P}: integer Q-table", doc, source)]
    out.append(
        f"#define {PU}_N_STATES {N_STATES}\n#define {PU}_N_ACTIONS {N_ACTIONS}\n"
        f"#define {PU}_LIFETIME_BINS {N_LIFETIME_BINS}\n#define {PU}_VALID_BINS {N_VALID_BINS}\n"
        f"#define {PU}_SEGMENT_TYPES {N_SEGMENT_TYPES}\n#define {PU}_PREDICTIONS {N_PREDICTIONS}\n"
        f"#define {PU}_PREVIOUS {N_PREVIOUS}\n\n"
    )
    out.append(c_array(f"{P}_qtable", ctype, table))
    out.append(f"""
/* floor(log2(lifetime)) capped at {N_LIFETIME_BINS - 1}; lifetimes below 2 give 0 */
static inline int32_t {P}_lifetime_bin(int64_t lifetime)
{{
    int32_t b = 0;
    while (lifetime >= 2 && b < {N_LIFETIME_BINS - 1}) {{ lifetime >>= 1; ++b; }}
    return b;
}}

/* floor({N_VALID_BINS} * valid / segment_blocks) in 0..{N_VALID_BINS - 1} */
static inline int32_t {P}_valid_bin(int64_t valid, int64_t segment_blocks)
{{
    int64_t b;
    if (valid <= 0 || segment_blocks <= 0) return 0;
    b = (valid * {N_VALID_BINS}) / segment_blocks;
    return (b < {N_VALID_BINS}) ? (int32_t)b : {N_VALID_BINS - 1};
}}

static inline int32_t {P}_encode_state(int64_t lifetime, int64_t valid, int64_t segment_blocks,
                                       int32_t segment_type, int32_t prediction, int32_t previous)
{{
    int32_t s;
    if (segment_type < 0 || segment_type >= {N_SEGMENT_TYPES} || prediction < 0 || prediction >= {N_PREDICTIONS}
        || previous < 0 || previous >= {N_PREVIOUS})
        return -1;
    s = {P}_lifetime_bin(lifetime) * {N_VALID_BINS} + {P}_valid_bin(valid, segment_blocks);
    s = (s * {N_SEGMENT_TYPES} + segment_type) * {N_PREDICTIONS} + prediction;
    return s * {N_PREVIOUS} + previous;
}}

static inline int32_t {P}_best_action(int32_t state)
{{
    int32_t a, best = 0;
    if (state < 0 || state >= {N_STATES}) return -1;
    for (a = 1; a < {N_ACTIONS}; ++a)
        if ({P}_qtable[state][a] > {P}_qtable[state][best]) best = a;
    return best;
}}

static inline int32_t {P}_relocate(int64_t lifetime, int64_t valid, int64_t segment_blocks,
                                   int32_t segment_type, int32_t prediction, int32_t previous)
{{
    return {P}_best_action({P}_encode_state(lifetime, valid, segment_blocks, segment_type, prediction, previous));
}}
""")
    out.append(epilogue(P))
    return "".join(out)
