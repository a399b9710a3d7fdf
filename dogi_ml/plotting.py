"""Figure output shared by the reports, the model evaluation and the feature selection plots."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: the PNG text keys of the data a figure was drawn from and of its title (:func:`save_figure`)
SOURCE_KEY = "Source"
TITLE_KEY = "Title"


def save_figure(
    fig, path: str | Path, dpi: int = 110, source: str | None = None, title: str | None = None, **layout
) -> Path:
    """Lay out ``fig`` (``tight_layout(**layout)``), write it to ``path`` (parent folders made)
    and close it, so sweeps that draw hundreds of figures do not keep them all in memory.
    ``source`` (e.g. a digest of the table drawn) goes into the PNG's text chunk ``Source``, so a
    figure can be checked against the table it claims to show (:func:`figure_source`); ``title``
    (the one drawn, a run input no JSON holds) into ``Title``, so a redraw keeps it
    (:func:`figure_title`)."""
    import matplotlib.pyplot as plt

    fig.tight_layout(**layout)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {}
    if source is not None:
        metadata[SOURCE_KEY] = source
    if title:
        metadata[TITLE_KEY] = title
    fig.savefig(path, dpi=dpi, metadata=metadata or None)
    plt.close(fig)
    return path


def figure_source(path: str | Path) -> str | None:
    """The ``source`` :func:`save_figure` wrote into the PNG at ``path`` (None: a figure drawn
    without one)."""
    return _png_text(path).get(SOURCE_KEY)


def figure_title(path: str | Path) -> str:
    """The ``title`` :func:`save_figure` wrote into the PNG at ``path`` ("" without one, or
    without the file)."""
    return _png_text(path).get(TITLE_KEY, "") if Path(path).is_file() else ""


def _png_text(path: str | Path) -> dict:
    from PIL import Image

    with Image.open(path) as image:
        return dict(image.text)


def data_digest(data) -> str:
    """SHA-256 of ``data`` as JSON (keys sorted, numpy numbers as floats): the ``source`` a report
    gives :func:`save_figure` for the table it draws, so a figure and a JSON file that disagree
    have different digests (a float survives the JSON round trip, so the file read back gives the
    same digest)."""
    text = json.dumps(data, sort_keys=True, default=float)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def markdown_title(md: str | Path) -> str:
    """The title a report's Markdown at ``md`` was written with (its ``# `` heading), for a redraw
    to keep; "" without the file or a heading (a table written without a title starts at its rows)."""
    md = Path(md)
    first = md.read_text().split("\n", 1)[0] if md.is_file() else ""
    return first[2:] if first.startswith("# ") else ""


def redraw_stem(prefix: str | Path) -> Path:
    """A report's ``output=PREFIX`` or ``--redraw PREFIX`` as the stem its files share (a ``.json``
    suffix dropped)."""
    stem = Path(prefix)
    return stem.with_suffix("") if stem.suffix == ".json" else stem


def redraw_source(prefix: str | Path) -> tuple[Path, Path, object]:
    """What a report's ``--redraw PREFIX`` reads: the stem (:func:`redraw_stem`), its JSON file
    and the file's content, or a one-line exit naming the file: none there, or not JSON."""
    stem = redraw_stem(prefix)
    js = stem.with_suffix(".json")
    if not js.is_file():
        raise SystemExit(f"error: --redraw {prefix}: no {js} to draw from")
    try:
        return stem, js, json.loads(js.read_text())
    except ValueError as e:
        raise SystemExit(f"error: --redraw {prefix}: {js} is not JSON ({e}); write it anew from its runs") from e
