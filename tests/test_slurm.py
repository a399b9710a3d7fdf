"""Sweeps on a real SLURM cluster (issue 41): ``hydra/launcher=slurm`` submits submitit job arrays
to the one-node cluster that ``.ci/slurm_up.sh`` brings up; ``sacct`` must have seen every array
task, and the results must equal the joblib launcher's on this machine to the last digit.

Without a responding SLURM node the tests skip with the reason, and fail under ``CI=true``
(``.ci/run`` starts the cluster)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_cli, skip_or_fail_in_ci

# Small jobs: one core and 2 GB each, so both cores of a CI machine run array tasks at once
SLURM_RESOURCES = [
    "hydra/launcher=slurm",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=2",
    "hydra.launcher.timeout_min=10",
]
SMALL_SIM = [
    "workload.capacity_blocks=16384",
    "workload.write_volume=2",
    "sim.segment_blocks=64",
    "plot=false",
]
# measured, not computed: differs from run to run and between launchers
TIMING_KEYS = ("elapsed_s", "compile_s", "appends_per_second", "loop_cpu_s", "appends_per_cpu_second")


def without_thread_counts(numerics: dict) -> dict:
    """The numerics record minus its thread counts: a SLURM task without CPU binding sees the
    node's cores where a joblib worker is limited to one thread; the pinned numerics make the
    results independent of them (what the comparison checks), so they are not a difference."""
    out = {k: v for k, v in numerics.items() if k != "numba_threads"}
    out["openblas"] = sorted((lib["library"], lib["core"]) for lib in numerics.get("openblas", []))
    return out


def require_slurm() -> None:
    """Skip (fail under CI=true) unless sinfo answers with a node that can take jobs."""
    if shutil.which("sinfo") is None or shutil.which("sacct") is None:
        skip_or_fail_in_ci(
            "no SLURM client (sinfo/sacct) on PATH: apt-get install slurm-wlm slurmdbd munge mariadb-server, "
            "then .ci/slurm_up.sh as root"
        )
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    states = set(proc.stdout.split())
    if proc.returncode != 0 or not states & {"idle", "mixed", "allocated"}:
        why = (proc.stderr.strip() or f"node states {sorted(states)}").splitlines()[-1]
        skip_or_fail_in_ci(f"no SLURM node takes jobs (sinfo: {why}): start one with .ci/slurm_up.sh as root")


def submitit_job_ids(sweep_dir: Path) -> list[str]:
    """The SLURM job ids (``ARRAY_TASK``) submitit recorded in the sweep's ``.submitit`` folder."""
    return sorted(p.name for p in (sweep_dir / ".submitit").iterdir() if p.is_dir() and "_" in p.name)


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """``{job id: state}`` of these jobs as SLURM's accounting recorded them."""
    arrays = sorted({j.split("_")[0] for j in job_ids})
    proc = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(arrays)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return dict(line.split("|", 1) for line in proc.stdout.splitlines() if line.strip())


def job_results(sweep_dir: Path) -> dict[str, dict]:
    """``{policy: result}`` of a simulate sweep, without the timing fields."""
    out = {}
    for path in sorted(sweep_dir.glob("*/result.json")):
        result = json.loads(path.read_text())
        for key in TIMING_KEYS:
            result.pop(key, None)
        result["numerics"] = without_thread_counts(result["numerics"])
        out[result["policy"]] = result
    return out


def only_sweep_dir(cwd: Path) -> Path:
    (sweep_dir,) = [p.parent for p in cwd.glob("multirun/simulate/*/*/multirun.yaml")]
    return sweep_dir


@pytest.mark.slow
def test_simulate_sweep_on_slurm_equals_joblib(tmp_path):
    """Three schemes as one submitit job array: sacct lists every task COMPLETED, and each job's
    result equals the joblib launcher's to the last digit."""
    require_slurm()
    sweep = ["simulate", "-m", "+workload=zipf", "policy=nosep,sepgc,sepbit", *SMALL_SIM]
    results = {}
    for launcher, extra in (("slurm", SLURM_RESOURCES), ("joblib", ["hydra/launcher=joblib"])):
        cwd = tmp_path / launcher
        cwd.mkdir()
        run_cli([*sweep, *extra], cwd)
        sweep_dir = only_sweep_dir(cwd)
        results[launcher] = job_results(sweep_dir)
        if launcher == "slurm":
            ids = submitit_job_ids(sweep_dir)
            assert len(ids) == 3 and len({i.split("_")[0] for i in ids}) == 1, ids  # one array, three tasks
            states = sacct_states(ids)
            assert {i: states.get(i) for i in ids} == dict.fromkeys(ids, "COMPLETED"), states
    assert set(results["slurm"]) == {"nosep", "sepgc", "sepbit"}
    assert results["slurm"] == results["joblib"]
