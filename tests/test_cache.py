"""Compiled code is keyed on every project module it reaches (issue 11 §2), and
``python -m dogi_ml cache info|clear`` shows and prunes the caches."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numba
import pytest
from numba.core import caching

import dogi_ml
from dogi_ml import numba_cache as nc
from dogi_ml.pipeline import cache as cache_cmd

REPO = Path(__file__).resolve().parents[1]


# -- the import closure ------------------------------------------------------------------------
@pytest.fixture
def fake_project(tmp_path, monkeypatch):
    """A throwaway package (unique name, so the per-process memos never mix two of them):
    ``a`` imports ``b`` (which imports ``d``) and ``.c``; ``e`` only under ``if``; ``lazy``
    only inside a function; ``unrelated`` is imported by nobody."""
    name = f"kcproj_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    root.mkdir()
    files = {
        "__init__.py": "",
        "a.py": f"""
            import os
            from {name} import b
            from .c import THING
            if os.environ.get("NEVER_SET_ANYWHERE"):
                from {name} import e

            def later():
                from {name} import lazy
                return lazy
            """,
        "b.py": f"import {name}.d\n",
        "c.py": "THING = 1\n",
        "d.py": "X = 1\n",
        "e.py": "Y = 1\n",
        "lazy.py": "Z = 1\n",
        "unrelated.py": "W = 1\n",
    }
    for fname, text in files.items():
        (root / fname).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, root


def _key(name, root):
    return nc.module_key(f"{name}.a", str(root / "a.py"), project=name)


def _edit(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)  # a size change, so even a coarse mtime sees it


def test_closure_follows_module_level_imports_transitively(fake_project):
    name, root = fake_project
    closure = nc.import_closure((root / "a.py").read_text(), f"{name}.a", project=name)
    assert closure == {f"{name}.{m}": str(root / f"{m}.py") for m in ("b", "c", "d", "e")}


@pytest.mark.parametrize(
    "module,changes", [("d", True), ("c", True), ("e", True), ("a", True), ("unrelated", False), ("lazy", False)]
)
def test_key_changes_with_reachable_sources_only(fake_project, module, changes):
    name, root = fake_project
    before = _key(name, root)
    assert _key(name, root) == before  # stable while nothing changes
    _edit(root / f"{module}.py", "\nADDED = 2\n")
    assert (_key(name, root) != before) is changes


def test_key_covers_versions(fake_project, monkeypatch):
    name, root = fake_project
    source = (root / "a.py").read_text()
    before = nc.source_key(source, f"{name}.a", project=name)
    assert f"numba {numba.__version__}" in nc.versions() and f"dogi_ml {dogi_ml.__version__}" in nc.versions()
    monkeypatch.setattr(nc, "versions", lambda: "dogi_ml 9.9; numba 0.0")
    assert nc.source_key(source, f"{name}.a", project=name) != before


def test_project_closure_reaches_helpers_through_mapped_subpackages():
    """DOGI's Numba functions inline ``_online``'s ring helpers and use ``features.extract``
    (installed from ``features/``); ``models`` is imported only inside functions."""
    path = nc.module_file("dogi_ml.policies.dogi")
    closure = nc.import_closure(Path(path).read_text(), "dogi_ml.policies.dogi")
    assert closure["dogi_ml.policies._online"].endswith(os.path.join("policies", "_online.py"))
    assert closure["dogi_ml.features.extract"] == nc.module_file("dogi_ml.features.extract")
    assert Path(closure["dogi_ml.features.extract"]).parent.name == "features"
    assert "dogi_ml.sim.state" in closure
    assert not any(m.startswith("dogi_ml.models") for m in closure)


def test_project_functions_use_the_project_locator(tmp_path, monkeypatch):
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    assert impl._locator_classes[0] is nc.ProjectCacheLocator
    from dogi_ml.sim import kernels

    locator = kernels._fail._cache._impl.locator
    assert isinstance(locator, nc.ProjectCacheLocator)
    assert locator.get_source_stamp() == nc.module_key("dogi_ml.sim.kernels", kernels.__file__)
    monkeypatch.setenv("DOGI_ML_KERNEL_CACHE", str(tmp_path / "kc"))
    fresh = nc.ProjectCacheLocator.from_function(kernels._fail.py_func, kernels.__file__)
    assert Path(fresh.get_cache_path()).parent == tmp_path / "kc" / "numba"
    assert Path(fresh.get_cache_path()).name.startswith("dogi_ml.sim.kernels-")
    # functions outside the project keep Numba's own locators
    assert nc.ProjectCacheLocator.from_function(test_project_functions_use_the_project_locator, __file__) is None


# -- stale machine code, end to end ---------------------------------------------------------------
RUN = """
import json
import numpy as np
from numba.core import event
import dogi_ml
import dogi_ml.policies._online as online
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator

compiled = []
class Compiles(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        compiled.append(f"{f.__module__}.{f.__qualname__}")
    def on_end(self, ev):
        pass
event.register("numba:compile", Compiles())

cap = 8192
writes = (np.random.default_rng(1).zipf(1.3, 6 * cap) % cap).astype(np.int64)
policy = make_policy("dogi", variant="base", predictor="latest")
sim = Simulator(policy, SimConfig.from_mapping({"segment_blocks": 32}), cap)
sim.prefill()
sim.feed(writes)
print(json.dumps({"waf": sim.result()["waf"], "samples": int(policy.ring.count[0]),
                  "compiled": compiled, "files": [dogi_ml.__file__, online.__file__]}))
"""


def _copy_project(dest: Path) -> Path:
    """The package as installed: dogi_ml/ with the card's top-level folders inside it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.pyc", "run-*")
    pkg = dest / "dogi_ml"
    shutil.copytree(REPO / "dogi_ml", pkg, ignore=ignore)
    for sub in ("features", "models", "export", "markov", "oracles", "rl", "conf"):
        shutil.copytree(REPO / sub, pkg / sub, ignore=ignore)
    return pkg


def _run(args, env, cwd):
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_an_edited_helper_module_is_never_served_stale(tmp_path):
    """DOGI's ``dogi_user`` (policies/dogi.py, inlined into the loop) calls ``ring_record`` from
    policies/_online.py. Neither the old loop key nor Numba's own cache looked at _online.py:
    after an edit there, the loop came from cache with the old ``ring_record`` inside."""
    pkg = _copy_project(tmp_path / "src")
    kc = tmp_path / "kernels"
    env = {**os.environ, "PYTHONPATH": str(pkg.parent), "DOGI_ML_KERNEL_CACHE": str(kc)}
    env.pop("NUMBA_DISABLE_JIT", None)
    script = tmp_path / "run.py"
    script.write_text(RUN)

    first = json.loads(_run([str(script)], env, tmp_path))
    assert first["files"] == [str(pkg / "__init__.py"), str(pkg / "policies" / "_online.py")]
    assert first["samples"] > 0
    assert any(c.endswith(".run_chunk") for c in first["compiled"])

    # unchanged sources, new process: everything comes from the cache, nothing compiles
    again = json.loads(_run([str(script)], env, tmp_path))
    assert again["compiled"] == []
    assert again["samples"] == first["samples"] and again["waf"] == first["waf"]

    # edit the helper only: every sample now counts twice
    online = pkg / "policies" / "_online.py"
    text = online.read_text()
    assert text.count("\n    ring.count[0] += 1\n") == 1, "ring_record changed; update this test's edit"
    online.write_text(text.replace("\n    ring.count[0] += 1\n", "\n    ring.count[0] += 2\n"))
    edited = json.loads(_run([str(script)], env, tmp_path))
    assert edited["samples"] == 2 * first["samples"]
    assert "dogi_ml.policies._online.ring_record" in edited["compiled"]
    # dogi_user is inlined into the loop (inline="always"): it has no compiled function of its own
    assert "dogi_ml.policies.dogi.dogi_user" not in first["compiled"] + edited["compiled"]
    assert any(c.endswith(".run_chunk") for c in edited["compiled"])
    assert not any(c.startswith("dogi_ml.sim.kernels.") for c in edited["compiled"])  # unaffected: cached

    # Numba wrote nothing into the source tree; `cache info` knows every file it wrote
    assert not [p for p in pkg.rglob("*") if p.suffix in (".nbi", ".nbc")]
    report = json.loads(_run(["-m", "dogi_ml.pipeline.cache", "info", "kernels", "--json"], env, tmp_path))["kernels"]
    assert report["unknown"] == []
    assert report["kinds"]["loop"]["entries"] == 2  # one loop per source state
    assert report["kinds"]["numba"]["entries"] >= 10 and report["kinds"]["records"]["entries"] == 1
    _run(["-m", "dogi_ml.pipeline.cache", "clear", "kernels"], env, tmp_path)
    assert [p for p in kc.rglob("*") if p.is_file()] == []


POLLUTE = """
import sys
from typing import NamedTuple
import numpy as np
from dogi_ml.sim.policy_api import no_reclaim_hook
{define}
no_reclaim_hook(0, State(np.zeros(1)), 0, 0)
print(sorted(no_reclaim_hook.stats.cache_hits.values()) and "hit" or "compiled")
"""


def test_an_index_naming_an_unimportable_type_is_a_miss(tmp_path):
    """A project kernel compiled for a type from a test module (or a scratch script) puts that
    type in the shared cache index; a process that cannot import the module must recompile,
    not fail with ModuleNotFoundError while loading the index."""
    kc = tmp_path / "kernels"
    for name in ("gone", "kept"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}_state_mod.py").write_text(
            "from typing import NamedTuple\nimport numpy as np\nclass State(NamedTuple):\n    a: np.ndarray\n"
        )
    env = {**os.environ, "DOGI_ML_KERNEL_CACHE": str(kc)}
    env.pop("NUMBA_DISABLE_JIT", None)
    for name in ("gone", "kept"):
        (tmp_path / f"{name}.py").write_text(POLLUTE.format(define=f"from {name}_state_mod import State"))
    both = {**env, "PYTHONPATH": os.pathsep.join([str(tmp_path / "gone"), str(tmp_path / "kept")])}
    assert _run([str(tmp_path / "gone.py")], both, tmp_path).strip() == "compiled"
    kept = {**env, "PYTHONPATH": str(tmp_path / "kept")}  # the scratch module is gone for the next process
    assert _run([str(tmp_path / "kept.py")], kept, tmp_path).strip() == "compiled"
    assert _run([str(tmp_path / "kept.py")], kept, tmp_path).strip() == "hit"  # its own entry was saved


# -- cache info / clear -------------------------------------------------------------------------
DAY = 86400.0


def _file(path: Path, size: int, age_days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    t = time.time() - age_days * DAY
    os.utime(path, (t, t))
    return path


@pytest.fixture
def caches(tmp_path, monkeypatch):
    kc, base = tmp_path / "kernels", tmp_path / "cache"
    monkeypatch.setenv("DOGI_ML_KERNEL_CACHE", str(kc))
    monkeypatch.setenv("DOGI_ML_CACHE", str(base))
    pyc = kc / "__pycache__"
    _file(kc / "loop_old.py", 100, 10)
    _file(pyc / "loop_old.run_chunk-89.py311.nbi", 10, 10)
    _file(pyc / "loop_old.run_chunk-89.py311.1.nbc", 1000, 10)
    _file(kc / "loop_new.py", 100, 0.1)
    _file(pyc / "loop_new.run_chunk-89.py311.nbi", 10, 0.1)
    fdir = kc / "numba" / "dogi_ml.policies.x-12345678"
    _file(fdir / "x.f-10.py311.nbi", 20, 5)
    _file(fdir / "x.f-10.py311.1.nbc", 2000, 5)
    _file(fdir / "x.f-10.py311.2.nbc", 3000, 1)  # a second signature, written later
    _file(fdir / "x.g-20.py311.nbi", 20, 3)
    _file(kc / "import-records.json", 50, 0.5)
    _file(kc / "notes.txt", 7, 30)  # not ours: listed, never removed
    traces = base / "traces"
    _file(traces / "zipf-abc.dtr", 4096, 20)
    _file(traces / "annotations" / "annot-def.npz", 512, 2)
    _file(traces / "nodap" / "search-0123456789abcdef.jsonl", 300, 1)
    return kc, traces


def test_info_counts_sizes_and_oldest(caches, capsys):
    kc, traces = caches
    assert cache_cmd.main(["info", "--json", "--oldest", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    k = report["kernels"]
    assert k["path"] == str(kc.resolve())
    assert k["kinds"]["loop"] == {"entries": 2, "files": 5, "bytes": 1220}
    assert k["kinds"]["numba"] == {"entries": 2, "files": 4, "bytes": 5040}
    assert k["kinds"]["records"] == {"entries": 1, "files": 1, "bytes": 50}
    assert (k["entries"], k["files"], k["bytes"]) == (5, 10, 6310)
    assert [e["name"] for e in k["oldest"]] == [
        "loop_old",
        "dogi_ml.policies.x-12345678/x.g-20.py311",
        "dogi_ml.policies.x-12345678/x.f-10.py311",
    ]
    assert k["unknown"] == [str(kc / "notes.txt")]
    t = report["traces"]
    assert t["path"] == str(traces.resolve())
    assert t["kinds"] == {
        "trace": {"entries": 1, "files": 1, "bytes": 4096},
        "annotation": {"entries": 1, "files": 1, "bytes": 512},
        "nodap": {"entries": 1, "files": 1, "bytes": 300},
    }
    assert t["oldest"][0]["name"] == "zipf-abc.dtr"

    assert cache_cmd.main(["info"]) == 0
    text = capsys.readouterr().out
    assert f"kernels cache: {kc.resolve()}" in text and "specialised loops" in text
    assert "loop_old" in text and "1 unknown file(s)" in text


def test_clear_older_than_keeps_recent_entries(caches, capsys):
    kc, traces = caches
    assert cache_cmd.main(["clear", "kernels", "--older-than", "2", "--dry-run"]) == 0
    assert "would remove 2 entries (4 files, 1.1 KiB); 3 entries kept" in capsys.readouterr().out
    assert (kc / "loop_old.py").exists()
    assert cache_cmd.main(["clear", "kernels", "--older-than", "2"]) == 0
    left = sorted(str(p.relative_to(kc)) for p in kc.rglob("*") if p.is_file())
    assert left == [
        "__pycache__/loop_new.run_chunk-89.py311.nbi",
        "import-records.json",
        "loop_new.py",
        "notes.txt",
        "numba/dogi_ml.policies.x-12345678/x.f-10.py311.1.nbc",
        "numba/dogi_ml.policies.x-12345678/x.f-10.py311.2.nbc",
        "numba/dogi_ml.policies.x-12345678/x.f-10.py311.nbi",
    ]
    assert (traces / "zipf-abc.dtr").exists()  # the other cache is untouched


def test_clear_all_leaves_only_foreign_files_and_is_idempotent(caches, capsys):
    kc, traces = caches
    assert cache_cmd.main(["clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 5 entries (10 files" in out and "removed 3 entries (3 files" in out
    assert [p for p in kc.rglob("*")] == [kc / "notes.txt"]  # emptied folders go too
    assert [p for p in traces.rglob("*")] == []
    assert cache_cmd.main(["clear", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["kernels"]["removed_entries"] == 0 and again["traces"]["removed_entries"] == 0


def test_empty_and_missing_caches(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOGI_ML_KERNEL_CACHE", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("DOGI_ML_CACHE", str(tmp_path / "nor-here"))
    assert cache_cmd.main(["info"]) == 0
    assert capsys.readouterr().out.count("empty (no such folder)") == 2
    assert cache_cmd.main(["clear"]) == 0
    assert "removed 0 entries" in capsys.readouterr().out
    assert not (tmp_path / "nothing-here").exists()


def test_bad_arguments_are_usage_errors(capsys):
    assert cache_cmd.main(["prune"]) == 2
    assert "invalid choice: 'prune'" in capsys.readouterr().err
    assert cache_cmd.main(["clear", "--older-than", "-1"]) == 2
    assert "--older-than must be >= 0 days" in capsys.readouterr().err
    assert cache_cmd.main([]) == 2
    assert cache_cmd.main(["--help"]) == 0
    assert "info" in capsys.readouterr().out


@pytest.mark.parametrize("days", ["-1", "nan"])
def test_clear_older_than_refuses_a_negative_or_nan_age(caches, capsys, days):
    """NaN compared false with every age, so nothing was removed and the command said so, exit 0."""
    kc, _ = caches
    assert cache_cmd.main(["clear", "kernels", "--older-than", days]) != 0
    assert f"--older-than must be >= 0 days, got {float(days)}" in capsys.readouterr().err
    assert (kc / "loop_old.py").exists()
