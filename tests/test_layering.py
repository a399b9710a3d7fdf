"""DESIGN.md's layering, enforced with import-linter (contracts in pyproject.toml).

import-linter (grimp) finds a package's modules by walking its directory, and ``dogi_ml``'s
subpackages live in top-level folders mapped by ``[tool.setuptools.package-dir]``: the source
tree (and the editable install) has no ``dogi_ml/models``. So the contracts are checked on the
installed layout: the wheel is built from a copy of the sources with setuptools' PEP 517
backend (about 1 s; ``pip install --target`` took about 3.5 s, mostly pip itself), unpacked into a
temporary directory, and lint-imports runs with that directory first on ``PYTHONPATH``, from a
working directory without a ``dogi_ml`` folder.

``make lint`` runs this module as a script: ``python tests/test_layering.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# setuptools.build_meta writes build/ and *.egg-info beside pyproject.toml: run it in the copy
_BUILD = """
import sys
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1]))
"""


def build_installed_copy(dest: Path) -> Path:
    """Build the wheel from a copy of the sources and unpack it; returns the directory that holds
    the installed ``dogi_ml`` (put it on ``PYTHONPATH``)."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = {"dogi_ml", *conf["tool"]["setuptools"].get("package-dir", {}).values()}
    src, wheels, site = dest / "src", dest / "wheels", dest / "site"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    for folder in sorted(folders):
        shutil.copytree(ROOT / folder, src / folder, ignore=skip)
    for name in ("pyproject.toml", conf["project"].get("readme", "README.md")):
        shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-c", _BUILD, str(wheels)], cwd=src, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the wheel failed:\n{proc.stdout}\n{proc.stderr}")
    wheel = wheels / proc.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def lint_imports(site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """lint-imports on the installed copy in ``site`` (run from ``cwd``, which has no dogi_ml/)."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        raise FileNotFoundError("lint-imports not found; install the test extra: pip install -e '.[test]'")
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    return subprocess.run(
        [exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env
    )


def check(tmp: Path) -> subprocess.CompletedProcess:
    site = build_installed_copy(tmp)
    return lint_imports(site, tmp)


def test_import_contracts_hold(tmp_path):
    proc = check(tmp_path)
    out = proc.stdout + proc.stderr
    assert "does not exist" not in out, out  # the checker saw the installed layout
    assert proc.returncode == 0, out
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout
    # every contract in pyproject.toml was checked
    n = len(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"])
    assert f"Contracts: {n} kept, 0 broken." in proc.stdout, proc.stdout


def test_checked_copy_is_the_installed_layout(tmp_path):
    """The mapped folders are inside the built package, and it is that copy Python imports."""
    site = build_installed_copy(tmp_path)
    for sub in ("features", "models", "export", "markov", "oracles", "rl", "conf"):
        assert (site / "dogi_ml" / sub / "__init__.py").exists(), sub
    proc = subprocess.run(
        [sys.executable, "-c", "import dogi_ml.models, sys; print(dogi_ml.models.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert Path(proc.stdout.strip()).is_relative_to(site), proc.stdout + proc.stderr


# direct imports between dogi_ml's parts (pipeline and export module by module), for the record
_GRAPH = """
import collections, grimp
graph = grimp.build_graph("dogi_ml", cache_dir=None)
def part(m):
    p = m.split(".")
    return ".".join(p[:3] if len(p) > 2 and p[1] in ("pipeline", "export") else p[:2])
edges = collections.defaultdict(set)
for m in graph.modules:
    for n in graph.find_modules_directly_imported_by(m):
        if part(m) != part(n):
            edges[part(m)].add(part(n))
for a in sorted(edges):
    print(a, "->", ", ".join(sorted(edges[a])))
"""


def main(argv: list[str]) -> int:
    """``make lint``: the contracts' report; exit status 1 if one is broken. ``--graph`` adds
    the import graph between dogi_ml's parts."""
    with tempfile.TemporaryDirectory(prefix="dogi_ml-lint-") as tmp:
        site = build_installed_copy(Path(tmp))
        proc = lint_imports(site, Path(tmp))
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if "--graph" in argv:
            print("\nimport graph (direct imports between parts of dogi_ml):", flush=True)
            subprocess.run(
                [sys.executable, "-c", _GRAPH], cwd=tmp, env={**os.environ, "PYTHONPATH": str(site)}, check=True
            )
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
