"""Shared test helpers (plain functions; fixtures live in ``conftest.py``).

Import as ``from helpers import ...``: pytest puts ``tests/`` on ``sys.path`` (the folder has no
``__init__.py``), whichever way it is started (``pytest`` or ``python -m pytest``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator

REPO = Path(__file__).resolve().parents[1]

# The standard small simulation of the engine and heuristics tests: 8192 blocks, 64-block segments.
# DOGI's small-trace settings (tests/test_dogi.py, tests/test_hybrid.py): retrain often, keep the
# model on (the base design's ghost often wins on a small trace; tests of the ML path skip it)
DOGI_SMALL = dict(
    retrain_every=16384,
    min_samples=300,
    max_samples=20000,
    model_params={"epochs": 4, "patience": 2},
    fallback_compare="none",
)


def small_fleet_spec():
    """Fleet volumes of 2-3K blocks written about three times over (tests/test_study.py,
    tests/test_slurm.py): a job simulates in milliseconds."""
    from dogi_ml.traces.fleet import FleetSpec

    return FleetSpec(
        wss_median=2560,
        wss_min=2048,
        wss_max=3072,
        traffic_median=3.0,
        traffic_min=2.5,
        traffic_max=3.5,
        theta_range=(0.0, 0.8),
    )


CAP = 8192
SEG = 64


def shared_data_dir() -> Path:
    """``../shared/data`` beside the repository, or ``$DOGI_SHARED_DATA``."""
    return Path(os.environ.get("DOGI_SHARED_DATA", REPO.parent / "shared" / "data"))


def skip_or_fail_in_ci(why: str) -> None:
    """A prerequisite is missing: skip the test with ``why``, but fail it under ``CI=true`` (CI
    installs every prerequisite, so a skip there would pass a test that never ran)."""
    import pytest

    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{why} (CI=true: a missing prerequisite fails the run instead of skipping it)")
    pytest.skip(why)


def require_compiler(cxx: bool = False) -> str:
    """The C (``cxx``: C++) compiler the toolkit would build with (``export.cbuild.find_compiler``:
    ``$CC``/``$CXX`` or gcc/cc/clang on PATH); without one the test skips, or fails under CI=true."""
    from dogi_ml.export.cbuild import find_compiler

    cc = find_compiler(cxx=cxx)
    if cc is None:
        what, var = ("C++", "CXX") if cxx else ("C", "CC")
        skip_or_fail_in_ci(f"no {what} compiler on PATH (apt-get install {'g++' if cxx else 'gcc'}, or set {var})")
    return cc


def zipf_writes(capacity: int, n: int, theta: float = 1.0, seed: int = 7) -> np.ndarray:
    """Zipf(theta) block writes, ranks scrambled over the address space (like fio)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, capacity + 1) ** theta
    cdf = np.cumsum(p / p.sum())
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n)), capacity - 1)
    return rng.permutation(capacity)[ranks].astype(np.int64)


def hotcold_writes(capacity: int, n: int, hot: float = 0.1, hot_share: float = 0.9, seed: int = 3) -> np.ndarray:
    """A share ``hot_share`` of the writes on the first ``hot`` fraction of the blocks, uniform
    within each part."""
    rng = np.random.default_rng(seed)
    nhot = int(capacity * hot)
    is_hot = rng.random(n) < hot_share
    return np.where(is_hot, rng.integers(0, nhot, n), rng.integers(nhot, capacity, n)).astype(np.int64)


def run(policy: str, writes, victim=None, cap=CAP, **cfg):
    """Simulate ``policy`` (default groups) over ``writes`` with prefill, 64-block segments and
    ``SimConfig`` overrides ``cfg``; returns ``(simulator, result)``."""
    pol = make_policy(policy)
    sim = Simulator(
        pol, SimConfig(segment_blocks=SEG, victim=victim, **cfg), cap, stream=writes if pol.needs_future else None
    )
    return sim, sim.run(writes)


def run_cli(args, cwd, check=True):
    """``python -m dogi_ml ARGS`` in ``cwd`` with a private cache; fails the test (stdout and
    stderr shown) on a non-zero exit unless ``check`` is false. Returns the completed process."""
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        DOGI_ML_CACHE=str(Path(cwd) / "cache"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "dogi_ml", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def odd_shape_mlp(n_rows: int, seed: int = 4):
    """(quantized model, its training rows): an MLP with an odd feature count, odd hidden widths
    and an odd class count (5 -> 7 -> 9 -> 5), the shapes that exercise every partial pass and
    padding of the integer kernels."""
    from dogi_ml.export.quantize import quantize_model
    from dogi_ml.models import make_model

    rng = np.random.default_rng(seed)
    X = np.stack(
        [
            rng.integers(0, 1 << 20, n_rows),
            rng.geometric(0.2, n_rows),
            rng.integers(-500, 500, n_rows),
            rng.pareto(1.1, n_rows).astype(np.int64) * 100,
            rng.integers(0, 64, n_rows),
        ],
        axis=1,
    ).astype(np.int64)
    y = (np.log2(X[:, 3] + 1).astype(np.int64) + X[:, 1]) % 5
    model = make_model("mlp", 5, 5, seed=0, epochs=2, patience=2, hidden=[7, 9])
    model.scaler.log_columns = [1, 3]
    model.fit(X, y)
    return quantize_model(model, X), X


#: the frozen bundles' test scale (tests/test_hybrid_frozen.py, tests/test_hybrid_frozen_counts_zns.py):
#: 4K blocks written 6 times over, exported on 32-block segments (the hybrid keeps 18 group slots
#: open), deployed on those or on the harness's 64-block zones
FROZEN_CAP = 4096
FROZEN_EXPORT_SIM = {"segment_blocks": 32, "op_ratio": 0.25, "gc_free_segments": 2, "victim": None}
#: the hybrid runs that export the bundles: small enough to retrain five times on the trace
FROZEN_HYBRID_PARAMS = {
    "deployed": "int8", "score": "argmax", "retrain_every": 4096, "min_samples": 300, "max_samples": 20000,
    "model_params": {"epochs": 4, "patience": 2}, "fallback_compare": "none", "fallback_accuracy": 0.0,
}  # fmt: skip


def frozen_test_trace(directory: Path):
    """A skewed 4K-block workload (zipf 1.0, seed 3) written 6 times over (24K writes), as a .dtr
    file in ``directory``: the hybrid retrains five times and its plan applies from the third."""
    from dogi_ml.traces.binfmt import read_binary, write_trace
    from dogi_ml.traces.generators import generate

    t = generate("zipf", capacity_blocks=FROZEN_CAP, n_writes=6 * FROZEN_CAP, seed=3, theta=1.0)
    t.name = "zipf4k"
    t = read_binary(write_trace(t, Path(directory) / "zipf4k.dtr"))
    t.meta["capacity_blocks"] = FROZEN_CAP
    return t


def export_keeping_policy(trace, params: dict, out: Path) -> tuple:
    """(bundle directory, replay mode=bundle's result, the hybrid policy after its run): a hybrid
    run's bundle through replay's mode=bundle path, the policy kept for the tests to inspect."""
    import pytest

    import dogi_ml.policies.hybrid_frozen as hf
    from dogi_ml.pipeline.replay import export_dogi_bundle

    seen = {}
    export = hf.export_bundle

    def keep_policy(policy, bundle_dir, **kw):
        seen["policy"] = policy
        return export(policy, bundle_dir, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hf, "export_bundle", keep_policy)
        r = export_dogi_bundle(trace, {"name": "hybrid", "params": params}, FROZEN_EXPORT_SIM, out)
    return out, r, seen["policy"]


class Stop(Exception):
    """Raised after the k-th checkpoint of :func:`run_stopped`: the run is interrupted there."""


def run_stopped(trace, policy, sim_cfg, k: int, monkeypatch) -> int:
    """Run (``dogi_ml.pipeline.simulate.simulate``) until the k-th checkpoint is on disk, then
    stop; the checkpoints taken (tests/test_checkpoint.py, tests/test_hybrid_reset.py)."""
    import pytest

    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.sim import checkpoint as ckpt

    save = ckpt.Checkpointer.save

    def save_then_stop(self, sim, position):
        path = save(self, sim, position)
        if self.saved == k:
            raise Stop
        return path

    with monkeypatch.context() as m:
        m.setattr(ckpt.Checkpointer, "save", save_then_stop)
        with pytest.raises(Stop):
            simulate(trace, policy, sim_cfg, progress=False)
    return k


def docs_results(*names) -> dict:
    """Workload -> (its runs, its ``_summary``) over docs/results/NAME.json files (later ones add
    runs to a workload): what the docs' hand-written tables are checked against."""
    out: dict = {}
    for name in names:
        data = json.loads((REPO / "docs/results" / f"{name}.json").read_text())
        for workload, summary in data["_summary"].items():
            runs, _ = out.get(workload, ({}, None))
            out[workload] = ({**runs, **data[workload]}, summary)
    return out


def docs_row(label: str, page: str = "docs/hybrid.md") -> list[str]:
    """The cells after the first of ``page``'s table row whose first cell is ``label``."""
    text = (REPO / page).read_text()
    row = re.search(rf"^\s*\| {re.escape(label)} \|(.*)\|\s*$", text, re.M)
    assert row, f"{page} has no row {label!r}"
    return [c.strip() for c in row.group(1).split("|")]


def table_cells(lines: list[str], header: int) -> list[list[str]]:
    """The body rows of the Markdown table whose header row is ``lines[header]``: each row's cells,
    stripped, up to the first line that is not a table row (the header and its ``|---|`` rule
    left out)."""
    rows = []
    for line in lines[header + 2 :]:
        if not line.lstrip().startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def docs_table(page: str | Path, head: str) -> list[list[str]]:
    """The body rows of ``page``'s table whose header row is exactly ``head``."""
    lines = (REPO / page).read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == head), None)
    assert start is not None, f"{page} has no table headed {head!r}"
    return table_cells(lines, start)


class DocsCells:
    """Collects every cell of ``page`` compared with docs/results and every mismatch, so that one
    failure lists them all."""

    def __init__(self, page: str | Path):
        self.page, self.checked, self.bad = page, 0, []

    def eq(self, where: str, page: str, expected: str) -> None:
        self.checked += 1
        if page != expected:
            self.bad.append(f"{where}: page {page!r}, JSON {expected!r}")

    def done(self, n: int) -> None:
        """Fails on any mismatch, or when other than ``n`` cells were compared (a table grew or
        lost rows)."""
        assert not self.bad, f"{self.page} differs from docs/results:\n" + "\n".join(self.bad)
        assert self.checked == n, self.checked


def docs_text(page: str | Path) -> str:
    """``page`` (relative to the checkout) with its line breaks and indents as single spaces, so a
    figure quoted across a line break is found."""
    return " ".join((REPO / page).read_text().split())


def docs_percent(change: float) -> str:
    """A change as the docs print it: one decimal with its sign, an unsigned 0.0 for none."""
    text = f"{100 * change:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text
