"""Shared fixtures (plain helper functions live in ``helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CAP, require_compiler, shared_data_dir, skip_or_fail_in_ci, zipf_writes


@pytest.fixture
def shared_traces() -> Path:
    """The real trace samples in ../shared/data/traces; without them the test is skipped (failed
    under CI=true, which runs with ../shared beside the checkout)."""
    d = shared_data_dir() / "traces"
    if not d.is_dir():
        skip_or_fail_in_ci(f"real trace samples not found at {d} (they live in ../shared/data beside the repo)")
    return d


@pytest.fixture(scope="session")
def c_compiler() -> str:
    """The C compiler's path. Session-scoped so that, requested with ``usefixtures`` by a module,
    it is checked before the module's own fixtures build anything with it."""
    return require_compiler()


@pytest.fixture(scope="session")
def cxx_compiler() -> str:
    """The C++ compiler's path (as ``c_compiler``)."""
    return require_compiler(cxx=True)


@pytest.fixture(scope="session")
def zipf_small():
    """Zipf 1.0 over the standard 8192 blocks, written 8 times (seed 11): the golden-count trace."""
    return zipf_writes(CAP, 8 * CAP, theta=1.0, seed=11)


@pytest.fixture(scope="session", autouse=True)
def _no_machine_wide_numerics_variable():
    """Command lines the tests start run as on a machine that exports none of the variables the
    default numerics level pins: a machine that exports one (OPENBLAS_CORETYPE=Haswell on a class
    of CI machines) makes every command print a replacement warning before its output, and the
    tests that assert a command's exact stderr (one error line) would see two lines.
    tests/test_determinism.py starts its own processes with such a variable and checks the
    replacement and its warning."""
    from dogi_ml import determinism

    with pytest.MonkeyPatch.context() as mp:
        for key in determinism.machine_conflicts():
            mp.delenv(key)
        yield


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test leaves the environment as it found it. Commands run in-process export variables
    that every later test of the same worker, and the commands it starts, would inherit:
    mlflow.set_tracking_uri() exports MLFLOW_TRACKING_URI (a later test's runs went to its
    database), and ``python -m dogi_ml -q`` exports DOGI_ML_QUIET=1 for its jobs (a later test that
    reads a sweep's "job k/N" lines found none, depending on which files its worker ran first).
    tests/test_progress.py checks it."""
    import os

    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)
