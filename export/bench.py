"""Per-block inference time of the deployed forms at a batch size, on one core: the compiled C
header (timed inside C), the Numba kernel, PyTorch float and onnxruntime (one thread)."""

from __future__ import annotations

import time

import numpy as np

from dogi_ml.models.evaluate import one_core


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


def bench_deployed(
    model,
    q,
    X: np.ndarray,
    batch: int = 128,
    cmodels: dict | None = None,
    onnx_paths: dict | None = None,
    min_seconds: float = 0.3,
) -> dict:
    """ns/block per implementation at ``batch`` on the rows ``X`` (raw features).

    ``cmodels``: label -> compiled :class:`dogi_ml.export.cbuild.CModel`; ``onnx_paths``: label -> file.
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
                    out["torch_float_with_scaling"] = (
                        ns_per_call(
                            lambda: model.net(torch.from_numpy(model.scaler.transform(xb))).argmax(dim=1), min_seconds
                        )
                        / batch
                    )
            finally:
                torch.set_num_threads(saved)
        elif model is not None:
            out["model_predict_float"] = ns_per_call(lambda: model.predict(xb), min_seconds) / batch
        for label, path in (onnx_paths or {}).items():
            from .onnx_export import session

            sess = session(path, threads=1)
            feed = {"features": xb.astype(np.float64)}
            out[label] = ns_per_call(lambda sess=sess, feed=feed: sess.run(["class"], feed), min_seconds) / batch
    return out


def synthetic_dogi_mlp(n: int = 60_000, capacity: int = 262_144, seed: int = 0):
    """A DOGI-sized MLP (6 -> 32 -> 32 -> 10) trained briefly on synthetic raw features with the
    six DOGI features' ranges, and its feature rows (for timing; the data do not change the cost)."""
    from dogi_ml.models import make_model

    rng = np.random.Generator(np.random.PCG64(seed))
    lba = rng.integers(0, capacity, n)
    prev = rng.integers(0, capacity, n)
    freq = rng.geometric(0.3, n)
    chunk = rng.integers(0, 50 * 512, n)
    rec = rng.integers(0, 256, n)
    inv = np.minimum(rng.pareto(1.2, n) * 200 + 1, 1 << 40).astype(np.int64)
    X = np.stack([lba, prev, freq, chunk, rec, inv], axis=1).astype(np.int64)
    y = np.clip(np.log2(inv + 1).astype(np.int64) - freq // 2 - 3, 0, 9)
    model = make_model("mlp", 10, 6, seed=seed, epochs=3, patience=3)
    model.scaler.log_columns = [2, 3, 4, 5]
    model.fit(X, y)
    return model, X


def run_export_bench(batch: int = 128, min_seconds: float = 0.3, work_dir=None) -> dict:
    """The bench command's export section: the DOGI MLP's deployed forms at ``batch``."""
    import tempfile
    from pathlib import Path

    from .c_header import emit_header
    from .cbuild import build_shared, find_compiler
    from .onnx_export import export_float, export_qdq
    from .quantize import quantize_mlp

    model, X = synthetic_dogi_mlp()
    q = quantize_mlp(model, X)
    d = Path(work_dir or tempfile.mkdtemp(prefix="dogi_export_bench_"))
    d.mkdir(parents=True, exist_ok=True)
    cmodels = {}
    if find_compiler() is not None:
        (d / "dogi_mlp.h").write_text(emit_header(q))
        # plain -O2 (x86-64: the AVX2 pass where cpuid reports it, else SSE2), the SSE2 pass
        # alone (what a pre-AVX2 x86-64 CPU runs) and a build for this CPU
        for label, flags in (
            ("c_O2", ()),
            ("c_O2_sse2_only", ("-DDOGI_NO_AVX2",)),
            ("c_O2_march_native", ("-march=native",)),
        ):
            cmodels[label] = build_shared(d / "dogi_mlp.h", "mlp", 6, 10, extra_flags=flags)
    onnx_paths = {
        "onnxruntime_float": export_float(model, d / "mlp_float.onnx"),
        "onnxruntime_int8_qdq": export_qdq(q, model.scaler, d / "mlp_int8_qdq.onnx"),
    }
    res = bench_deployed(
        model, q, X[:8192], batch=batch, cmodels=cmodels, onnx_paths=onnx_paths, min_seconds=min_seconds
    )
    res["model"] = "mlp 6 -> 32 -> 32 -> 10 (synthetic DOGI features)"
    res["compiler"] = find_compiler()
    res["c_batch_paths"] = {label: cm.batch_path for label, cm in cmodels.items()}
    return res
