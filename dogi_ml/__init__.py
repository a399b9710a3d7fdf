"""dogi_ml: data placement for log-structured storage."""

__version__ = "0.1.0"

# Before any project module defines a Numba function: Numba's cache of the project's functions
# is keyed on every project module they reach, not on their own file alone (dogi_ml.numba_cache).
from . import numba_cache as _numba_cache  # noqa: E402

_numba_cache.install()

# The Python API (dogi_ml.api), loaded on first use so that `import dogi_ml.traces` and the CLI
# do not pay for Hydra, pandas and the pipeline.
_API = (
    "load_trace",
    "generate",
    "annotate",
    "simulate",
    "compare",
    "train",
    "export_model",
    "compose",
    "SimResult",
    "TrainResult",
)
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'dogi_ml' has no attribute {name!r}")


# (``dogi_ml.export`` is the deployment subpackage, export/; the API's function is export_model)


def __dir__():
    return sorted(list(globals()) + list(_API))
