"""One C99 header per deployed model: integer only, ``<stdint.h>`` only, no libc, no allocation.

The header holds ``static inline`` functions and ``static const`` tables; it builds with
``gcc -std=c99 -Wall -Wextra -Werror -pedantic -ffreestanding -nostdlib -c`` and as C++. Every
function takes raw ``int64_t`` features in the manifest's order and applies the manifest's
integer input rules itself (:mod:`dogi_ml.export.quantize`), so a caller passes what the feature
extractor produced. Entry points (``P`` is the prefix, ``dogi`` by default):

* MLP and trees: ``int32_t P_predict_one(const int64_t *features, int32_t *logits)`` (class;
  ``logits`` may be 0) and ``void P_predict_batch(const int64_t *features, int32_t n,
  int32_t *classes, int32_t *logits)`` (``features`` is ``[n][P_N_FEATURES]`` row-major,
  ``logits`` ``[n][P_N_CLASSES]`` or 0).
* GRU: ``int32_t P_gru_step(const int64_t *features, int16_t *h, int32_t *logits)`` advances
  the caller's hidden state ``h[P_HIDDEN]`` (Q15, zeros for an LBA never seen) by one write
  and returns the class; ``P_gru_step_batch`` does it for ``n`` blocks, each with its own
  state; ``P_gru_predict_sequence`` runs a whole history from a zero state.
* Q-table (:class:`dogi_ml.rl.export.IntQTable`, GC relocation): ``int32_t P_relocate(...)``,
  ``P_encode_state`` and ``P_best_action`` (:mod:`dogi_ml.export.qtable`).
"""

from __future__ import annotations

from .c_common import COMPILE_FLAGS  # noqa: F401  (cbuild compiles with them)
from .c_mlp import emit_mlp
from .gru import emit_gru
from .integer import ExportError
from .qtable import emit_qtable
from .trees import emit_trees


def emit_header(q, prefix: str = "dogi", source: str | None = None) -> str:
    """The C header of a deployed model (:func:`dogi_ml.export.quantize.quantize_model`)."""
    if not prefix.isidentifier():
        raise ExportError(f"header prefix must be a C identifier, got {prefix!r}")
    kind = getattr(q, "kind", None)
    if kind == "mlp":
        return emit_mlp(q, prefix, source)
    if kind == "gru":
        return emit_gru(q, prefix, source)
    if kind == "trees":
        return emit_trees(q, prefix, source)
    if kind == "qtable":
        return emit_qtable(q, prefix, source)
    raise ExportError(f"no C header for {type(q).__name__}")
