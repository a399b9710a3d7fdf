"""The one base class of user errors: bad config, bad input, a missing prerequisite.

The command line prints a :class:`DogiMLError` on one line, ``error: <problem> -- <fix>``, with
exit status 2 and no traceback; any other exception is a bug here and keeps its traceback.
A leaf module: every layer may import it (``traces`` and ``sim`` included).
"""

from __future__ import annotations


class DogiMLError(ValueError):
    """Something the user can fix. ``problem`` says what is wrong, ``fix`` what to do about it
    (a subclass may set a class-level ``fix`` that fits all its cases).

    A ``ValueError`` so that callers which caught the ``ValueError`` of bad input keep working.
    """

    fix: str | None = None

    def __init__(self, problem: str, fix: str | None = None):
        # args carry the fix too, so a pickled error (a Hydra launcher's worker) keeps it
        super().__init__(*((problem,) if fix is None else (problem, fix)))
        self.problem = problem
        if fix is not None:
            self.fix = fix

    def __str__(self) -> str:
        return f"{self.problem} -- {self.fix}" if self.fix else self.problem


class ConfigError(DogiMLError):
    """A configuration (Hydra overrides, params.yaml) that cannot be run as given."""


class UsageError(DogiMLError):
    """Bad command-line input (a command's arguments)."""
