"""Figure output shared by the reports, the model evaluation and the feature selection plots."""

from __future__ import annotations

from pathlib import Path


def save_figure(fig, path: str | Path, dpi: int = 110, **layout) -> Path:
    """Lay out ``fig`` (``tight_layout(**layout)``), write it to ``path`` (parent folders made)
    and close it, so sweeps that draw hundreds of figures do not keep them all in memory."""
    import matplotlib.pyplot as plt

    fig.tight_layout(**layout)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
