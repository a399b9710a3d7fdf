"""Per-block inference time of the deployed forms at a batch size, on one core: the compiled C
header (timed inside C), the Numba kernel, PyTorch float and onnxruntime (one thread)."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

import numpy as np


@contextmanager
def one_core():
    """Pin the process to one CPU for the duration (where the OS allows it)."""
    try:
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(saved)})
    except (AttributeError, OSError):
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            os.sched_setaffinity(0, saved)


def ns_per_call(fn, min_seconds: float = 0.3, repeats: int = 3) -> float:
    """Best-of-``repeats`` nanoseconds per call of ``fn()`` (each repeat runs >= ``min_seconds``)."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        el = time.perf_counter() - t0
        if el >= min_seconds / 4 or n >= 1 << 22:
            break
        n *= 4
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def bench_deployed(model, q, X: np.ndarray, batch: int = 128, cmodels: dict | None = None,
                   onnx_paths: dict | None = None, min_seconds: float = 0.3) -> dict:
    """ns/block per implementation at ``batch`` on the rows ``X`` (raw features).

    ``cmodels``: label -> compiled :class:`export.cbuild.CModel`; ``onnx_paths``: label -> file.
    Missing pieces are skipped."""
    X = np.ascontiguousarray(X, dtype=np.int64)
    if X.shape[0] < batch:
        X = np.ascontiguousarray(np.resize(X, (batch,) + X.shape[1:]))
    xb = np.ascontiguousarray(X[:batch])
    out = {"batch": batch}
    with one_core():
        for label, cm in (cmodels or {}).items():
            out[label] = cm.bench(X, batch, min_seconds=min_seconds)
        if q is not None and q.kind == "mlp":
            from .numba_kernel import int8_mlp_classes
            args = q.kernel_args()
            cls = np.empty(batch, np.int64)
            out["numba_int8"] = ns_per_call(lambda: int8_mlp_classes(xb, *args, cls), min_seconds) / batch
        if model is not None and getattr(model, "net", None) is not None:
            import torch
            saved = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                z = torch.from_numpy(np.ascontiguousarray(model.scaler.transform(xb)))
                with torch.no_grad():
                    out["torch_float"] = ns_per_call(lambda: model.net(z).argmax(dim=1), min_seconds) / batch
                    out["torch_float_with_scaling"] = ns_per_call(
                        lambda: model.net(torch.from_numpy(model.scaler.transform(xb))).argmax(dim=1),
                        min_seconds) / batch
            finally:
                torch.set_num_threads(saved)
        elif model is not None:
            out["model_predict_float"] = ns_per_call(lambda: model.predict(xb), min_seconds) / batch
        for label, path in (onnx_paths or {}).items():
            from .onnx_export import session
            sess = session(path, threads=1)
            feed = {"features": xb.astype(np.float64)}
            out[label] = ns_per_call(lambda: sess.run(["class"], feed), min_seconds) / batch
    return out
