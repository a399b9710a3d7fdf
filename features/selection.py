"""Feature selection report (DOGI §4.2.2, Table 3): Pearson correlation and mutual information
of each candidate feature with the label, as a table and a plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dogi_ml.plotting import save_figure

from .extract import FEATURES

DESCRIPTIONS = {
    "lba": "Logical block address",
    "prev_lba": "LBA of the block written immediately before this one",
    "freq": "# of writes to this LBA in the current window",
    "chunk_freq": "# of writes to the 2 MiB chunk holding this LBA",
    "recency_freq": "8-bit bitmap of windows with a write, recent bits weigh more",
    "latest_inv": "Time since the last write of this LBA",
    "req_blocks": "Request size in blocks",
    "sequential": "Request continues the previous write request",
    "chunk_reads": "Blocks read from this 2 MiB chunk so far",
    "chunk_writes": "Blocks written to this 2 MiB chunk so far",
    "rw_ratio_milli": "Global read/write ratio so far (x1000)",
    "write_count": "# of writes of this LBA so far",
}


def feature_report(X: np.ndarray, y: np.ndarray, names=FEATURES, seed: int = 0, max_rows: int = 100_000) -> list[dict]:
    """Per feature: |Pearson r| with the class index and mutual information (nats) with the
    class, on at most ``max_rows`` rows (evenly spaced in time, not shuffled)."""
    from sklearn.feature_selection import mutual_info_classif

    if len(X) > max_rows:
        idx = np.linspace(0, len(X) - 1, max_rows).astype(np.int64)
        X, y = X[idx], y[idx]
    Xf = np.asarray(X, np.float64)
    yf = np.asarray(y, np.float64)
    mi = mutual_info_classif(Xf, y, discrete_features=False, random_state=seed)
    rows = []
    for j, name in enumerate(names):
        col = Xf[:, j]
        pcc = float(np.corrcoef(col, yf)[0, 1]) if col.std() > 0 and yf.std() > 0 else 0.0
        rows.append({"feature": name, "description": DESCRIPTIONS.get(name, ""), "pcc": abs(pcc), "mi": float(mi[j])})
    return rows


def plot_feature_report(rows: list[dict], path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["feature"] for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    ax.barh(y - 0.2, [r["pcc"] for r in rows], height=0.4, label="|Pearson r|")
    ax.barh(y + 0.2, [r["mi"] for r in rows], height=0.4, label="mutual information (nats)")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.legend()
    ax.set_title(title or "feature relevance to the lifetime class")
    return save_figure(fig, path)
