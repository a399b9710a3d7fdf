"""A Hydra callback hook that fails ends the command with a non-zero status: :func:`reported`.

Hydra calls every callback hook inside ``try/except Exception`` and turns what it raises into a
Python warning (``hydra/_internal/callbacks.py``), and the command goes on to exit 0. A sweep's
report is written by such a hook (``PaperComparison.on_multirun_end`` and the other comparisons),
so a sweep whose tables and figures were never written (``output=`` in a folder that cannot be
made, a bug in a report) printed a warning among its tables and exited 0, as if they had been.

Each hook of dogi_ml's callbacks is decorated with :func:`reported`: what it raises is kept
(:func:`failures`) instead of reaching Hydra, and once Hydra returns ``python -m dogi_ml``
(``dogi_ml.cli``) prints each (one line for an error the user can fix, the traceback for a bug)
and exits with status 2. The sweep's other hooks still run (the MLflow parent run is still closed
after a report failed). ``tests/test_callbacks.py`` checks that every hook of every callback the
configs name is decorated.
"""

from __future__ import annotations

import functools

#: the hooks Hydra calls (hydra.experimental.callback.Callback's methods), for the test
HOOKS = (
    "on_run_start",
    "on_run_end",
    "on_multirun_start",
    "on_multirun_end",
    "on_job_start",
    "on_job_end",
    "on_compose_config",
)

#: (``Class.hook``, exception) of each hook that failed in this process, in order
_FAILURES: list[tuple[str, BaseException]] = []


def failures() -> list[tuple[str, BaseException]]:
    """The hooks that failed in this process so far: ``(Class.hook, exception)``, oldest first."""
    return list(_FAILURES)


def clear_failures() -> None:
    """Forget the failures kept so far (a caller that runs several commands in one process)."""
    _FAILURES.clear()


def reported(hook):
    """``hook`` (a callback's method) that keeps what it raises (:func:`failures`) instead of
    raising it to Hydra, which would print it as a warning and go on to exit 0."""

    @functools.wraps(hook)
    def run(self, *args, **kwargs):
        try:
            return hook(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - kept; the CLI prints it and exits non-zero
            _FAILURES.append((f"{type(self).__name__}.{hook.__name__}", exc))
            return None

    run.reported = True
    return run
