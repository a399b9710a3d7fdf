"""Run the notebooks: ``notebooks/NN_topic.py`` (jupytext percent format: the source, reviewed as
plain text) is paired with ``NN_topic.ipynb`` (committed without outputs, for Jupyter users);
execution goes through papermill with the ``scale`` parameter, then optionally to HTML.

    python notebooks/execute.py [--scale N] [--html DIR] [--out DIR] [--sync] [NOTEBOOK.py ...]

``--sync`` only rewrites the ``.ipynb`` pairs from the ``.py`` sources (outputs stripped);
``tests/test_notebooks.py`` checks that the pairs agree and runs each notebook at scale 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNEL = "python3"


def notebooks() -> list[Path]:
    """The notebook sources, in order (``NN_topic.py``)."""
    return sorted(p for p in HERE.glob("[0-9][0-9]_*.py"))


def to_notebook(py: Path):
    """The notebook of a percent-format source, without outputs, with a python3 kernel."""
    import jupytext
    nb = jupytext.read(py)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def sync(py: Path) -> Path:
    """Write the ``.ipynb`` pair of ``py`` (no outputs)."""
    import nbformat
    path = py.with_suffix(".ipynb")
    nbformat.write(to_notebook(py), path)
    return path


def execute(py: Path, out: Path, scale: float = 1, cwd: Path | None = None, timeout: int = 600) -> Path:
    """Run the notebook of ``py`` with ``scale`` (papermill); a failing cell raises
    ``papermill.PapermillExecutionError`` naming it. Returns the executed notebook's path."""
    import nbformat
    import papermill as pm

    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".input.ipynb")
    nbformat.write(to_notebook(py), src)
    try:
        pm.execute_notebook(str(src), str(out), parameters={"scale": scale}, kernel_name=KERNEL,
                            cwd=str(cwd or out.parent), progress_bar=False, execution_timeout=timeout)
    finally:
        src.unlink(missing_ok=True)
    return out


def to_html(ipynb: Path, html_dir: Path) -> Path:
    """Render an executed notebook to HTML under ``html_dir``."""
    import nbformat
    from nbconvert import HTMLExporter

    html_dir.mkdir(parents=True, exist_ok=True)
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(ipynb, as_version=4))
    path = html_dir / (ipynb.stem + ".html")
    path.write_text(body, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="NN_topic.py sources (default: all)")
    ap.add_argument("--scale", type=float, default=1, help="the notebooks' scale parameter (1: CI scale)")
    ap.add_argument("--out", type=Path, default=Path("outputs/notebooks"), help="executed notebooks and their work files")
    ap.add_argument("--html", type=Path, default=None, help="render the executed notebooks to HTML here")
    ap.add_argument("--sync", action="store_true", help="only rewrite the .ipynb pairs from the .py sources")
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or notebooks()
    for py in paths:
        if args.sync:
            print(f"paired: {sync(py)}")
            continue
        t0 = time.perf_counter()
        done = execute(py, args.out.resolve() / f"{py.stem}.ipynb", scale=args.scale, cwd=args.out.resolve())
        line = f"{py.name}: {time.perf_counter() - t0:.1f} s -> {done}"
        if args.html is not None:
            line += f", {to_html(done, args.html)}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
