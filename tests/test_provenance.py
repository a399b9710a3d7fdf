"""The commit stamp of results files (dogi_ml/provenance.py): code changes mark it, results don't."""

from __future__ import annotations

import subprocess

from dogi_ml.provenance import code_commit


def _git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def _repo(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "fig.json").write_text('{"waf": 1.5}\n')
    (tmp_path / "engine.py").write_text("X = 1\n")
    (tmp_path / "other.py").write_text("Y = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return tmp_path, _git(tmp_path, "rev-parse", "HEAD")


def test_a_regenerated_results_file_does_not_mark_the_code_dirty(tmp_path):
    repo, head = _repo(tmp_path)
    (repo / "docs" / "results" / "fig.json").write_text('{"waf": 1.4}\n')
    assert code_commit(root=repo) == head


def test_a_changed_code_file_marks_the_stamp(tmp_path):
    repo, head = _repo(tmp_path)
    (repo / "engine.py").write_text("X = 2\n")
    assert code_commit(root=repo) == head + " + uncommitted changes"
    # the stamp of named files looks at those files only
    assert code_commit(("other.py",), root=repo) == head
    assert code_commit(("engine.py",), root=repo) == head + " + uncommitted changes"


def test_outside_a_checkout_the_stamp_says_so(tmp_path):
    assert code_commit(root=tmp_path) == "unknown (not a git checkout)"
