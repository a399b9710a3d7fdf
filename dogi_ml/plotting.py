"""Figure output shared by the reports, the model evaluation and the feature selection plots."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: the PNG text key naming the data a figure was drawn from (:func:`save_figure`'s ``source``)
SOURCE_KEY = "Source"


def save_figure(fig, path: str | Path, dpi: int = 110, source: str | None = None, **layout) -> Path:
    """Lay out ``fig`` (``tight_layout(**layout)``), write it to ``path`` (parent folders made)
    and close it, so sweeps that draw hundreds of figures do not keep them all in memory.
    ``source`` (e.g. a digest of the table drawn) goes into the PNG's text chunk ``Source``, so a
    figure can be checked against the table it claims to show (:func:`figure_source`)."""
    import matplotlib.pyplot as plt

    fig.tight_layout(**layout)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={SOURCE_KEY: source} if source is not None else None)
    plt.close(fig)
    return path


def figure_source(path: str | Path) -> str | None:
    """The ``source`` :func:`save_figure` wrote into the PNG at ``path`` (None: a figure drawn
    without one)."""
    from PIL import Image

    with Image.open(path) as image:
        return image.text.get(SOURCE_KEY)


def data_digest(data) -> str:
    """SHA-256 of ``data`` as JSON (keys sorted, numpy numbers as floats): the ``source`` a report
    gives :func:`save_figure` for the table it draws, so a figure and a JSON file that disagree
    have different digests (a float survives the JSON round trip, so the file read back gives the
    same digest)."""
    text = json.dumps(data, sort_keys=True, default=float)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
