"""``dvc repro`` runs the stage pipeline offline in a temporary git repository."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO


def sh(cmd, cwd, env):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_dvc_repro_offline(tmp_path):
    dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    if not Path(dvc).exists():
        pytest.fail("dvc not found; install the test extra: pip install -e '.[test]'")
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        DVC_NO_ANALYTICS="1",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    shutil.copy(REPO / "dvc.yaml", tmp_path)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["workload"].update(capacity_blocks=16384, write_volume=6.0)
    params["model"]["params"]["epochs"] = 2
    params["latency_budget_s"] = 0.02
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    # the code dependencies DVC hashes
    for dep in ("dogi_ml/traces/generators.py", "oracles/annotate.py"):
        (tmp_path / dep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / dep, tmp_path / dep)
    for dep in ("features", "models"):
        shutil.copytree(REPO / dep, tmp_path / dep, ignore=shutil.ignore_patterns("__pycache__"))
    sh(["git", "init", "-q"], tmp_path, env)
    sh([dvc, "init", "-q"], tmp_path, env)
    out = sh([dvc, "repro"], tmp_path, env)
    for stage in ("generate", "annotate", "features", "train", "evaluate"):
        assert f"Running stage '{stage}'" in out
    metrics = yaml.safe_load((tmp_path / "data/dvc/metrics.json").read_text())
    assert 0 <= metrics["accuracy"] <= 1 and metrics["latency_ns_per_block"] > 0
    assert "up to date" in sh([dvc, "repro"], tmp_path, env)
    # a model parameter change reruns train and evaluate only
    params["model"]["params"]["epochs"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = sh([dvc, "repro"], tmp_path, env)
    assert "Running stage 'train'" in out and "Running stage 'evaluate'" in out
    assert "Running stage 'generate'" not in out and "Running stage 'features'" not in out
    assert "accuracy" in sh([dvc, "metrics", "show"], tmp_path, env)
