"""dogi_ml: data placement for log-structured storage."""
__version__ = "0.1.0"

# Before any project module defines a Numba function: Numba's cache of the project's functions
# is keyed on every project module they reach, not on their own file alone (dogi_ml.numba_cache).
from . import numba_cache as _numba_cache  # noqa: E402

_numba_cache.install()
