"""Which code produced a result: the git commit a results file or a fleet study records.

A results file is stamped with the commit of the code that made it, and ``+ uncommitted changes``
when that code differs from the commit. Only code counts: the results themselves
(``docs/results/``) are rewritten by the run being stamped, so their being modified says nothing
about the code (a regeneration in a clean clone otherwise stamped every file "uncommitted").
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Paths whose changes do not change the code: what the regeneration itself writes
NOT_CODE = ("docs/results",)


def code_commit(files=(), root: Path = ROOT) -> str:
    """The last commit of ``files`` (the whole repository if none), ``+ uncommitted changes`` when
    any tracked file among them (outside :data:`NOT_CODE`) differs from it."""

    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()

    paths = [*files] if files else ["."]
    excluded = [f":(exclude){p}" for p in NOT_CODE]
    try:
        head = git("log", "-1", "--format=%H", "--", *files) if files else git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *paths, *excluded)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" + uncommitted changes" if dirty else "")
