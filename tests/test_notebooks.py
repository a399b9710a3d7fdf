"""The notebooks (notebooks/NN_topic.py, paired .ipynb): the pairs agree and carry no outputs,
and each runs at its default scale (scale=1) without a failing cell, well within two minutes."""

import sys
import time

import pytest
from helpers import REPO

sys.path.insert(0, str(REPO / "notebooks"))
import execute  # noqa: E402  (notebooks/execute.py)

NOTEBOOKS = execute.notebooks()


def test_there_are_notebooks():
    assert [p.stem for p in NOTEBOOKS][:5] == ["01_traces", "02_placement", "03_dogi", "04_learning", "05_export"]


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_agrees_and_has_no_outputs(py):
    import nbformat

    pair = py.with_suffix(".ipynb")
    assert pair.exists(), f"{pair.name} missing: python notebooks/execute.py --sync {py.relative_to(REPO)}"
    stored = nbformat.read(pair, as_version=4)
    fresh = execute.to_notebook(py)
    assert [(c.cell_type, c.source) for c in stored.cells] == [(c.cell_type, c.source) for c in fresh.cells], (
        f"{pair.name} differs from {py.name}: python notebooks/execute.py --sync"
    )
    assert all(
        not c.get("outputs") and c.get("execution_count") is None for c in stored.cells if c.cell_type == "code"
    ), f"{pair.name} carries outputs: python notebooks/execute.py --sync"
    params = [c for c in fresh.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "scale = 1" in params[0].source, "one papermill parameters cell with scale = 1"


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_at_default_scale(py, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlruns.db'}")
    monkeypatch.delenv("DOGI_ML_CACHE", raising=False)  # traces cached in the notebook's own directory
    t0 = time.perf_counter()
    out = execute.execute(py, tmp_path / f"{py.stem}.ipynb", scale=1, cwd=tmp_path, timeout=300)
    elapsed = time.perf_counter() - t0
    import nbformat

    nb = nbformat.read(out, as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert any(
        o.get("output_type") == "display_data" and "image/png" in o.get("data", {})
        for c in nb.cells
        for o in c.get("outputs", [])
    ), "the notebook shows no figure"
    assert elapsed < 120, f"{py.name} took {elapsed:.0f} s at scale 1 (budget: 2 minutes on 2 cores)"
