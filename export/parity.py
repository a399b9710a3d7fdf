"""Bit-exactness checks: the Python integer reference against the Numba kernel and the C header
on many feature vectors, extreme values included."""

from __future__ import annotations

import numpy as np

from .quantize import ExportError

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SPECIAL = np.array(
    [
        0,
        1,
        -1,
        2,
        255,
        256,
        1 << 20,
        1 << 31,
        -(1 << 31),
        (1 << 31) - 1,
        1 << 40,
        (1 << 40) + 1,
        (1 << 53) + 1,
        1 << 62,
        -(1 << 62),
        (1 << 62) + 1,
        -(1 << 62) - 1,
        INT64_MAX,
        INT64_MIN,
        INT64_MAX - 1,
        INT64_MIN + 1,
    ],
    np.int64,
)


def extreme_features(n_features: int, n: int, seed: int = 0, reference: np.ndarray | None = None) -> np.ndarray:
    """``n`` raw feature rows mixing special values (0, +-1, 2**31, 2**40, +-2**62, int64 limits),
    random values of every magnitude and sign, and (with ``reference``) real rows, real rows
    perturbed and real rows with one column pushed to an extreme."""
    rng = np.random.Generator(np.random.PCG64(seed))
    parts = []
    k = n // 4
    # every cell a special value
    parts.append(SPECIAL[rng.integers(0, SPECIAL.size, size=(k, n_features))])
    # random magnitudes 2**0 .. 2**63, random signs
    mag = rng.integers(0, 63, size=(k, n_features))
    vals = rng.integers(0, INT64_MAX, size=(k, n_features), dtype=np.int64) >> (62 - mag).clip(0, 62)
    parts.append(np.where(rng.random((k, n_features)) < 0.5, -vals, vals))
    rest = n - 2 * k
    if reference is not None and len(reference):
        ref = np.asarray(reference, np.int64).reshape(-1, n_features)
        base = ref[rng.integers(0, len(ref), size=rest)]
        third = rest // 3
        jitter = rng.integers(-3, 4, size=(third, n_features))
        base[:third] = base[:third] + jitter
        idx = rng.integers(0, n_features, size=rest - 2 * third)
        base[2 * third :, :][np.arange(rest - 2 * third), idx] = SPECIAL[rng.integers(0, SPECIAL.size, size=idx.size)]
        parts.append(base)
    else:
        parts.append(rng.integers(-(1 << 20), 1 << 20, size=(rest, n_features)))
    X = np.concatenate(parts)[:n]
    return np.ascontiguousarray(X, dtype=np.int64)


def _cmp(ref_logits, ref_cls, logits, cls) -> dict:
    return {
        "classes_equal": int((np.asarray(cls) == ref_cls).sum()),
        "logits_equal_rows": int((np.asarray(logits) == ref_logits).all(axis=1).sum()),
        "identical": bool(np.array_equal(cls, ref_cls) and np.array_equal(logits, ref_logits)),
    }


def parity(q, X: np.ndarray, cmodel=None, numba: bool = True, other_builds: dict | None = None) -> dict:
    """Compare the Python reference with the Numba kernel (MLP) and the compiled header on the
    rows ``X`` (``[n, F]``; for a GRU: one step each from random states). ``other_builds``:
    label -> further compiled builds of the header (e.g. its SSE2 pass alone), batch path only."""
    X = np.ascontiguousarray(X, dtype=np.int64)
    out = {"vectors": int(X.shape[0])}
    if q.kind == "gru":
        rng = np.random.Generator(np.random.PCG64(1))
        h = rng.integers(-(1 << 15), 1 << 15, size=(X.shape[0], q.hidden)).astype(np.int16)
        ref_logits, ref_h = q.step(X, h.astype(np.int64))
        ref_cls = ref_logits.argmax(axis=1)
        if cmodel is not None:
            h2 = h.copy()
            cls, logits = cmodel.gru_step_batch(X, h2)
            out["python_vs_c"] = {
                **_cmp(ref_logits, ref_cls, logits, cls),
                "state_equal_rows": int((h2.astype(np.int64) == ref_h).all(axis=1).sum()),
            }
            out["python_vs_c"]["identical"] &= bool(np.array_equal(h2.astype(np.int64), ref_h))
        return out
    ref_logits = q.logits_int(X)
    ref_cls = ref_logits.argmax(axis=1)
    if numba and q.kind == "mlp":
        from .numba_kernel import int8_mlp_classes, int8_mlp_logits

        args = q.kernel_args()
        logits = np.empty((X.shape[0], q.n_classes), np.int32)
        int8_mlp_logits(X, *args, logits)
        cls = np.empty(X.shape[0], np.int64)
        int8_mlp_classes(X, *args, cls)
        out["python_vs_numba"] = _cmp(ref_logits, ref_cls, logits, cls)
    if cmodel is not None:
        cls, logits = cmodel.predict_batch(X)
        out["python_vs_c"] = {**_cmp(ref_logits, ref_cls, logits, cls), "batch_path": cmodel.batch_path}
        # the single-block entry point on a sample
        sample = np.linspace(0, X.shape[0] - 1, min(2000, X.shape[0])).astype(np.int64)
        one = [cmodel.predict_one(X[i]) for i in sample]
        out["python_vs_c_single"] = _cmp(
            ref_logits[sample], ref_cls[sample], np.array([lg for _, lg in one]), np.array([c for c, _ in one])
        )
    for label, cm in (other_builds or {}).items():
        cls, logits = cm.predict_batch(X)
        out[f"python_vs_c_{label}"] = {**_cmp(ref_logits, ref_cls, logits, cls), "batch_path": cm.batch_path}
    return out


def all_identical(report: dict) -> bool:
    """True when every comparison in a :func:`parity` report is identical."""
    checks = [v for v in report.values() if isinstance(v, dict)]
    if not checks:
        raise ExportError("the parity report compares nothing (no Numba kernel and no compiled header)")
    return all(v["identical"] for v in checks)
