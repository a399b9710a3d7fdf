"""What the command bodies share: the packaged configs, the Hydra run's directories, the
workload check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dogi_ml.conf
from dogi_ml.errors import ConfigError

# The configs ship inside the package (dogi_ml.conf), so wheels and editable installs find them alike.
CONF_DIR = str(Path(dogi_ml.conf.__file__).resolve().parent)


def available(group: str) -> list[str]:
    """The config names of a Hydra config group (``workload``, ``policy``, ...)."""
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


def compose_config(command: str, overrides: Sequence[str] = ()):
    """The config ``python -m dogi_ml COMMAND OVERRIDES...`` runs with (an OmegaConf DictConfig);
    an unknown command or a bad override is a :class:`ConfigError` (``dogi_ml.api.compose`` and
    ``pipeline/frozen_seeds`` compose through it)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not (Path(CONF_DIR) / f"{command}.yaml").exists():
        raise ConfigError(
            f"unknown command {command!r}",
            "use one of: " + ", ".join(sorted(p.stem for p in Path(CONF_DIR).glob("*.yaml"))),
        )
    try:
        with initialize_config_dir(config_dir=CONF_DIR, job_name=command, version_base="1.3"):
            return hydra_compose(config_name=command, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(
            f"{command}: {' '.join(str(exc).split())}",
            "check the setting names (python -m dogi_ml " + command + " --cfg job shows them)",
        ) from None


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
