"""Classification metrics, confusion-matrix image, and per-block inference latency."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from dogi_ml.plotting import save_figure


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> dict:
    """Accuracy, macro-F1 (over classes present in truth or prediction), per-class recall and
    precision, the confusion matrix and the majority-class baseline accuracy.

    ``confusion_matrix[t][p]`` counts rows of true class ``t`` predicted ``p``. Recall of class
    ``c``: its correct predictions over the rows truly in ``c`` (row ``c``); precision: over
    the rows predicted ``c`` (column ``c``); ``None`` where that count is zero. ``support``
    counts rows per true class, ``predicted`` per predicted class."""
    from sklearn.metrics import confusion_matrix, f1_score

    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    labels = np.arange(n_classes)
    cm = confusion_matrix(y_true, y_pred, labels=labels)
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    present = np.union1d(np.unique(y_true), np.unique(y_pred))
    majority = float(np.bincount(y_true, minlength=n_classes).max() / max(1, y_true.size))
    return {
        "accuracy": float((y_true == y_pred).mean()) if y_true.size else float("nan"),
        "macro_f1": float(f1_score(y_true, y_pred, labels=present, average="macro", zero_division=0)),
        "majority_baseline": majority,
        "per_class_recall": _ratios(np.diag(cm), support),
        "per_class_precision": _ratios(np.diag(cm), predicted),
        "support": {int(c): int(s) for c, s in enumerate(support)},
        "predicted": {int(c): int(s) for c, s in enumerate(predicted)},
        "confusion_matrix": cm.tolist(),
    }


def _ratios(num: np.ndarray, den: np.ndarray) -> dict:
    return {int(c): (float(num[c] / den[c]) if den[c] else None) for c in range(den.size)}


def plot_confusion(cm, class_names: list[str], path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cm = np.asarray(cm, float)
    norm = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(class_names)), class_names, rotation=45, ha="right")
    ax.set_yticks(range(len(class_names)), class_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            if cm[i, j]:
                ax.text(
                    j,
                    i,
                    f"{norm[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if norm[i, j] > 0.5 else "black",
                )
    fig.colorbar(im, ax=ax, label="fraction of the true class")
    ax.set_title(title)
    return save_figure(fig, path)


def inference_latency(model, X: np.ndarray, batch_sizes=(1, 128), budget_s: float = 1.0) -> dict:
    """Nanoseconds per block of ``model.predict`` at each batch size, on the calling thread(s)
    (the train command runs with one thread). Repeats until ``budget_s`` per batch size."""
    # one core, as the targets are stated (threads of BLAS/LightGBM would otherwise spread)
    with one_core():
        return _measure(model, X, batch_sizes, budget_s)


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


def _measure(model, X, batch_sizes, budget_s) -> dict:
    out = {}
    for bs in batch_sizes:
        batch = np.ascontiguousarray(X[:bs]) if len(X) >= bs else np.resize(X, (bs,) + X.shape[1:])
        model.predict(batch)  # warm-up
        n, t0 = 0, time.perf_counter()
        while True:
            model.predict(batch)
            n += 1
            el = time.perf_counter() - t0
            if el > budget_s or n >= 10_000:
                break
        out[bs] = el / (n * bs) * 1e9
    return out
