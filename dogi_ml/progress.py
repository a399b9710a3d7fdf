"""The one place that decides whether long work shows a progress bar.

Bars go to stderr (stdout keeps the summaries and JSON paths). They are off when
``DOGI_ML_QUIET=1`` (set by ``python -m dogi_ml --quiet``, inherited by sweep jobs), when stderr
is not a terminal, or when the caller's config says ``progress=false``. ``DOGI_ML_PROGRESS=1``
forces them on even without a terminal (tests, logs that want them); quiet still wins.
"""

from __future__ import annotations

import os
import sys

__all__ = ["QUIET_ENV", "FORCE_ENV", "enabled", "bar", "set_quiet"]

QUIET_ENV = "DOGI_ML_QUIET"
FORCE_ENV = "DOGI_ML_PROGRESS"

_TRUE = ("1", "true", "yes", "on")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def set_quiet(quiet: bool = True) -> None:
    """Silence bars for this process and the processes it starts (``--quiet``)."""
    if quiet:
        os.environ[QUIET_ENV] = "1"
    else:
        os.environ.pop(QUIET_ENV, None)


#: seconds between redraws (tests set 0 to see every update of a fast job)
MIN_INTERVAL_S = 0.2


def enabled(requested: bool | None = None) -> bool:
    """Whether to show a bar: never when quiet or ``requested`` is False; else on a TTY or forced."""
    if _flag(QUIET_ENV) or requested is False:
        return False
    if _flag(FORCE_ENV):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def bar(total: float | None = None, desc: str = "", unit: str = "it", requested: bool | None = None, **kwargs):
    """A tqdm bar on stderr with rate and ETA, or a disabled one (same API, prints nothing).

    ``requested`` is the caller's config (``progress``); extra keyword arguments go to tqdm
    (e.g. ``unit_scale=True``, ``unit_divisor=1024`` for bytes)."""
    from tqdm import tqdm

    show = enabled(requested)
    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("mininterval", MIN_INTERVAL_S)
    return tqdm(total=total, desc=desc, unit=unit, disable=not show, file=sys.stderr, **kwargs)
