"""A sweep's Hydra callbacks: a failed hook ends the command with status 2 and one line (Hydra only
warned, and the command exited 0); ``mlflow=false`` keeps a sweep out of MLflow altogether; two
commands opening a fresh ./mlruns.db at once both work."""

from __future__ import annotations

import fcntl
import importlib
import subprocess
import sys
import time

import pytest
from helpers import REPO, run_cli
from omegaconf import OmegaConf

from dogi_ml import callbacks

SMALL = ["workload.capacity_blocks=8192", "workload.write_volume=4", "sim.segment_blocks=64", "progress=false"]


def _callback_targets() -> set[str]:
    """Every callback class a config of conf/ names (``hydra.callbacks.*._target_``)."""
    targets = set()
    for path in (REPO / "conf").rglob("*.yaml"):
        found = OmegaConf.select(OmegaConf.load(path), "hydra.callbacks")
        for entry in (found or {}).values():
            targets.add(str(entry["_target_"]))
    return targets


def test_every_hook_of_every_configured_callback_is_reported():
    """Each hook a configured callback defines keeps its failure for the CLI (callbacks.reported):
    a hook left bare would fail as a Hydra warning and the command would exit 0."""
    targets = _callback_targets()
    assert len(targets) >= 8  # the comparisons of every report, and the MLflow parent run
    bare = []
    for target in sorted(targets):
        module, _, name = target.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        for hook in callbacks.HOOKS:
            if hook in cls.__dict__ and not getattr(cls.__dict__[hook], "reported", False):
                bare.append(f"{target}.{hook}")
    assert bare == []


def test_a_reported_hook_keeps_its_failure_and_returns():
    class Report:
        @callbacks.reported
        def on_multirun_end(self, config, **kwargs):
            raise FileNotFoundError(2, "No such file or directory", config)

    callbacks.clear_failures()
    try:
        assert Report().on_multirun_end("/nowhere/out") is None  # Hydra's next hooks still run
        [(hook, exc)] = callbacks.failures()
        assert hook == "Report.on_multirun_end" and isinstance(exc, FileNotFoundError)
    finally:
        callbacks.clear_failures()


def test_a_sweep_whose_report_cannot_be_written_exits_2(tmp_path):
    """output= in a folder that cannot be made: the tables print, the files are not written, and
    the command says so in one line and exits 2 (it exited 0 after a Hydra warning)."""
    proc = run_cli(
        ["simulate", "-m", "+workload=zipf", "policy=nosep,sepbit", "+experiment=dogi_fig10", *SMALL,
         "mlflow=false", "output=/proc/no_such_dir/fig.json"],
        tmp_path,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [
        "error: PaperComparison.on_multirun_end: [Errno 2] No such file or directory: '/proc/no_such_dir' "
        f"-- check the path (relative paths start from {tmp_path})"
    ]
    assert "Traceback" not in proc.stderr and "UserWarning" not in proc.stderr
    assert "WAF per workload and scheme" in proc.stdout  # the sweep itself ran


def test_a_sweep_counts_its_jobs_as_the_sweeper_makes_them():
    """The sweep line "job k/N" counts the preset's sweeper params as well as the command line's (a DOGI preset
    with one workload on the command line printed "job 6/1" for ten jobs)."""
    from dogi_ml.tracking import _sweep_size

    def sweep(task, params):
        return OmegaConf.create({"hydra": {"sweeper": {"params": params}, "overrides": {"task": task}}})

    preset = {"+workload": "zipf,ycsb_a,varmail", "++policy.params.intermediate_groups": "null,2,3,4,5"}
    assert _sweep_size(sweep([], preset)) == 15
    assert _sweep_size(sweep(["+workload=zipf", "mlflow=false"], preset)) == 5  # the command line wins
    assert _sweep_size(sweep(["policy=a,b", "seed=range(0,3)"], None)) == 6


def test_a_joblib_sweep_counts_its_finished_jobs(tmp_path):
    """Under the joblib launcher each job ends in its own process: the lines count 1, 2, 3 of 3
    (each said "job 1/3"), and the record of finished jobs is gone after the sweep."""
    sweep = tmp_path / "sweep"
    proc = run_cli(["simulate", "-m", "+workload=zipf", "policy=nosep,sepgc,sepbit", *SMALL, "mlflow=false",
                    "hydra/launcher=joblib", f"hydra.sweep.dir={sweep}"], tmp_path)  # fmt: skip
    lines = sorted(ln.split(" done:")[0] for ln in proc.stderr.splitlines() if ln.startswith("job "))
    assert lines == ["job 1/3", "job 2/3", "job 3/3"], proc.stderr
    assert not (sweep / ".jobs_done").exists()


def test_a_sweep_with_mlflow_false_writes_nothing_to_mlflow(tmp_path):
    """mlflow=false: no parent run, so no ./mlruns.db (the sweep made one, with an empty parent
    run, and a stale parent file of an earlier sweep in the same folder was closed again)."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "mlflow_parent_run.json").write_text('{"run_id": "0123456789abcdef"}')
    run_cli(["simulate", "-m", "+workload=zipf", "policy=nosep,sepbit", *SMALL, "mlflow=false",
             f"hydra.sweep.dir={sweep}"], tmp_path)  # fmt: skip
    assert not (tmp_path / "mlruns.db").exists()
    assert not (sweep / "mlflow_parent_run.json").exists()
    assert len(list(sweep.glob("*/result.json"))) == 2


OPEN_STORE = "from dogi_ml import tracking; print(tracking.experiment_id('train'))"
#: imports MLflow first and says so, then opens the store
OPEN_STORE_AFTER_IMPORT = f"import mlflow; print('ready', flush=True); {OPEN_STORE}"


def _open_store(cwd, code: str = OPEN_STORE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_the_store_is_opened_under_a_lock(tmp_path):
    """While another process holds ./mlruns.db.lock, opening the store waits for it: no
    ./mlruns.db appears until the lock is released (unlocked, SQLite creates the file as soon as
    the store is first opened, within a second of the import), then the store opens."""
    with open(tmp_path / "mlruns.db.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = _open_store(tmp_path, OPEN_STORE_AFTER_IMPORT)
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(6.0)
        opened_while_locked = (tmp_path / "mlruns.db").exists()
        fcntl.flock(lock, fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=120)
    assert not opened_while_locked, "the store was opened while another process held its lock"
    assert proc.returncode == 0 and out.strip() == "1", err


@pytest.mark.parametrize("trial", range(2))
def test_three_commands_opening_a_fresh_store_at_once_all_work(tmp_path, trial):
    """Without the lock 7 of 9 such processes failed in MLflow's schema migration."""
    procs = [_open_store(tmp_path) for _ in range(3)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert [r[2] for r in results] == [0, 0, 0], [r[1][-300:] for r in results]
    assert len({r[0] for r in results}) == 1  # one experiment, the same id for all three
