"""Deployment export: the integer-only deployed form of a lifetime model, bit-exact across the
Python reference, the Numba kernel and the generated C header, plus ONNX files and a manifest.

* :mod:`dogi_ml.export.quantize` — input rules and the int8 MLP (``quantize_model`` dispatches to the
  GRU in :mod:`dogi_ml.export.gru` and the integer trees in :mod:`dogi_ml.export.trees`);
* :mod:`dogi_ml.export.numba_kernel` — the int8 MLP as Numba functions for simulator policies
  (imports numpy and numba only);
* :mod:`dogi_ml.export.c_header` / :mod:`dogi_ml.export.cbuild` — the C99 header and compiling it;
* :mod:`dogi_ml.export.onnx_export` — float and QDQ ONNX; :mod:`dogi_ml.export.manifest` — manifest and loader;
* :mod:`dogi_ml.export.parity` / :mod:`dogi_ml.export.bench` — agreement checks and timings.

Names are imported lazily so that ``import dogi_ml.export.numba_kernel`` stays light.
"""

from __future__ import annotations

_LAZY = {
    "ExportError": "quantize",
    "InputQuantizer": "quantize",
    "QuantizedMLP": "quantize",
    "quantize_mlp": "quantize",
    "quantize_model": "quantize",
    "QuantizedGRU": "gru",
    "quantize_gru": "gru",
    "IntTreeEnsemble": "trees",
    "integer_trees": "trees",
    "emit_header": "c_header",
    "load_export": "manifest",
    "write_manifest": "manifest",
    "ExportedModel": "manifest",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'export' has no attribute {name!r}")
