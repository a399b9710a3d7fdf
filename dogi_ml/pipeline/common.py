"""What the command bodies share: the packaged configs, the Hydra run's directories, the
workload check."""

from __future__ import annotations

from pathlib import Path

import dogi_ml.conf
from dogi_ml.errors import ConfigError

# The configs ship inside the package (dogi_ml.conf), so wheels and editable installs find them alike.
CONF_DIR = str(Path(dogi_ml.conf.__file__).resolve().parent)


def available(group: str) -> list[str]:
    """The config names of a Hydra config group (``workload``, ``policy``, ...)."""
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


def require_workload(cfg) -> None:
    if "workload" not in cfg or cfg.workload is None:
        raise ConfigError(
            "no workload given",
            "add +workload=NAME, one of: "
            + ", ".join(available("workload"))
            + " (files: +workload=file workload.path=FILE workload.format=NAME)",
        )


def output_dir() -> Path:
    """The current Hydra run's output directory (under the working directory)."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def multirun() -> bool:
    """Whether this is one job of a Hydra sweep (``-m``); False outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().mode.name == "MULTIRUN"
    except ValueError:
        return False


def sweep_dir() -> Path | None:
    """The sweep's directory under ``-m`` (its jobs share an MLflow parent run), else None."""
    if not multirun():
        return None
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().sweep.dir)
