"""A wheel is a complete install: namespaced packages, configs inside, commands that run anywhere.

The wheel is built from the checkout and installed into a fresh virtual environment whose only
other packages are the test environment's (added through a ``.pth`` file, which does not run the
editable install's finder), then ``simulate`` and ``train`` run from an unrelated directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

CARD_FOLDERS = ("features", "models", "export", "markov", "oracles", "rl")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory) -> tuple[Path, str]:
    """The wheel and what its build printed."""
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    src = tmp_path_factory.mktemp("src") / "dogi_ml"
    skip_top = {
        ".git",
        ".venv",
        "build",
        "dist",
        ".cache",
        "outputs",
        "multirun",
        "mlruns.db",
        "mlartifacts",
        ".pytest_cache",
        "docs",
        "data",
        "notebooks",
    }

    def ignore(folder, names):
        return [
            n
            for n in names
            if (Path(folder) == REPO and n in skip_top) or n == "__pycache__" or n.endswith(".egg-info")
        ]

    shutil.copytree(REPO, src, ignore=ignore)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("dogi_ml-*.whl")
    return whl, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build) -> Path:
    return wheel_build[0]


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # dependencies from the test environment, appended after the wheel's own site-packages
    (site / "zz_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _run(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["DOGI_ML_CACHE"] = str(cwd / "cache")
    proc = subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_wheel_builds_without_setuptools_warnings_and_ships_the_sources_it_compiles(wheel_build):
    """Every folder setuptools takes for a package is listed (a data folder it was not told of,
    export/firmware once, made every install print a 20-line warning), and the C sources compiled
    on first use are in the wheel."""
    whl, log = wheel_build
    assert "is absent from setuptools' `packages` configuration" not in log, log
    names = set(zipfile.ZipFile(whl).namelist())
    for folder, package in (("export/firmware", "export/firmware"), ("dogi_ml/zns", "zns")):
        sources = [p for p in (REPO / folder).iterdir() if p.suffix in (".c", ".h", ".ld")]
        assert sources, folder
        missing = [p.name for p in sources if f"dogi_ml/{package}/{p.name}" not in names]
        assert not missing, f"{folder}: {missing} not in the wheel"


def test_wheel_ships_namespaced_packages_and_configs(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert not tops & set(CARD_FOLDERS), f"generic top-level names in the wheel: {sorted(tops & set(CARD_FOLDERS))}"
    for folder in CARD_FOLDERS:
        assert f"dogi_ml/{folder}/__init__.py" in names, folder
    # every config in the checkout is in the wheel
    configs = sorted(str(p.relative_to(REPO / "conf")) for p in (REPO / "conf").rglob("*.yaml"))
    missing = [c for c in configs if f"dogi_ml/conf/{c}" not in names]
    assert not missing, f"configs missing from the wheel (list their folder in pyproject's packages): {missing}"


def test_wheel_install_runs_simulate_and_train_from_anywhere(venv_python, tmp_path):
    where = _run(
        venv_python,
        [
            "-c",
            "import dogi_ml, dogi_ml.models, dogi_ml.cli as c; "
            "print(dogi_ml.__file__); print(dogi_ml.models.__file__); print(c.CONF_DIR)",
        ],
        tmp_path,
    )
    site = str(venv_python.parents[1])
    for line in where.stdout.split():
        assert line.startswith(site), f"imported from outside the wheel install: {line}"
    # the generic names are not importable from the install
    probe = subprocess.run([str(venv_python), "-c", "import markov"], cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'markov'" in probe.stderr

    out = tmp_path / "sim.json"
    small = ["workload.capacity_blocks=8192", "workload.write_volume=4", "sim.segment_blocks=64", "progress=false"]
    sim = _run(
        venv_python,
        [
            "-m",
            "dogi_ml",
            "simulate",
            "+workload=zipf",
            "policy=sepbit",
            "plot=false",
            "mlflow=false",
            f"sim.output={out}",
            *small,
        ],
        tmp_path,
    )
    result = json.loads(out.read_text())
    assert result["user_writes"] == 4 * 8192 and result["waf"] > 1.0, sim.stdout
    train = _run(
        venv_python,
        [
            "-m",
            "dogi_ml",
            "train",
            "+workload=ycsb_a",
            "workload.capacity_blocks=16384",
            "workload.write_volume=6",
            "latency_budget_s=0.02",
            "model.params.epochs=2",
        ],
        tmp_path,
    )
    assert "accuracy" in train.stdout.lower(), train.stdout
    assert (tmp_path / "mlruns.db").exists()
