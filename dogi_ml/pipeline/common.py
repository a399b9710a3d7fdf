"""What the command bodies share: the packaged configs, the Hydra run's directories, the
workload check."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import dogi_ml.conf
from dogi_ml.errors import ConfigError, checked_setting, did_you_mean, refuse_unknown_keys

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
            cfg = hydra_compose(config_name=command, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(
            f"{command}: {' '.join(str(exc).split())}",
            "check the setting names (python -m dogi_ml " + command + " --cfg job shows them)",
        ) from None
    check_run_config(command, cfg, overrides)
    return cfg


def check_run_config(command: str, cfg, overrides: Sequence[str]) -> None:
    """Every check a composed config passes before its command runs, in one place for the two
    that compose one (the command line's Hydra task, ``dogi_ml/cli.py``, and :func:`compose_config`):
    a preset's values not replaced by a group named after it, no key appended to one of the
    command's own sections that it would ignore, no top-level setting it does not read."""
    check_preset_order(cfg, overrides)
    check_appended_keys(command, overrides)
    check_root_keys_read(command, cfg)
    check_root_switches(cfg)


#: top-level on/off settings of the commands that have them (a string such as mlflow=abc was true)
ROOT_SWITCHES = ("mlflow", "plot", "progress")


def check_root_switches(cfg) -> None:
    """Each of :data:`ROOT_SWITCHES` the config has is true or false (or null: the default)."""
    for key in ROOT_SWITCHES:
        if key in cfg:
            checked_setting(cfg[key], key, bool, nullable=True)


def _package_of(group: str, option: str) -> str:
    """Where a group option's keys land: its ``# @package`` header, else the group's name
    (``_global_``: the top level, returned as "")."""
    path = Path(CONF_DIR) / group / f"{option}.yaml"
    package = group
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("# @package"):
                package = line.split(None, 2)[2].strip()
                break
            if line.strip() and not line.startswith("#"):
                break
    return "" if package == "_global_" else package


def _preset_content(name: str, seen: tuple = ()) -> dict:
    """The keys an ``experiment`` preset sets itself: its file over the presets its ``defaults``
    name from the same group (``- hybrid_traces``), without ``defaults`` and ``hydra``."""
    from omegaconf import OmegaConf

    path = Path(CONF_DIR) / "experiment" / f"{name}.yaml"
    if not path.exists() or name in seen:
        return {}
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    merged: dict = {}
    for entry in raw.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_" and (Path(CONF_DIR) / "experiment" / f"{entry}.yaml").exists():
            merged = OmegaConf.to_container(OmegaConf.merge(merged, _preset_content(entry, (*seen, name))))
    own = {k: v for k, v in raw.items() if k not in ("defaults", "hydra")}
    return OmegaConf.to_container(OmegaConf.merge(merged, own), resolve=False)


def _leaves(node, prefix: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def check_preset_order(cfg, overrides: Sequence[str]) -> None:
    """Refuse a run in which a config group added after ``+experiment=NAME`` (``+workload=zipf``
    after it) replaced a value the preset sets: Hydra merges the defaults in command-line order, so
    the group's defaults win and the preset's value (its capacity, say) is silently dropped. A value
    the command line sets explicitly (``workload.capacity_blocks=...``) is the user's and passes."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - Hydra reports a bad override itself
        return
    keys = [p.get_key_element().lstrip("+~") for p in parsed]
    # values the command line sets itself (a group's selection, workload=..., sets none)
    explicit = {k for k in keys if not (Path(CONF_DIR) / k).is_dir()}
    for i, (key, p) in enumerate(zip(keys, parsed, strict=True)):
        if key != "experiment" or p.is_sweep_override() or p.value() is None:
            continue
        preset = str(p.value())
        content = _preset_content(preset)
        for q_key, q in zip(keys[i + 1 :], parsed[i + 1 :], strict=True):
            group_dir = Path(CONF_DIR) / q_key
            if q_key == "experiment" or not group_dir.is_dir() or q.is_sweep_override() or q.value() is None:
                continue
            option = str(q.value())
            package = _package_of(q_key, option)
            for path, value in _leaves(content):
                if package and not (path == package or path.startswith(package + ".")):
                    continue
                if isinstance(value, str) and "${" in value:
                    continue
                if any(path == k or path.startswith(k + ".") for k in explicit):
                    continue
                actual = OmegaConf.select(cfg, path, default=None)
                if actual != value:
                    raise ConfigError(
                        f"+{q_key}={option} comes after +experiment={preset}, so its defaults replaced the "
                        f"preset's {path}={value} (the run would use {actual})",
                        f"put +{q_key}={option} before +experiment={preset}, or set {path} explicitly",
                    )


def check_appended_keys(command: str, overrides: Sequence[str]) -> None:
    """Refuse ``+section.key=value`` that adds a key to one of the command's own sections
    (``conf/COMMAND.yaml``'s ``zns``, ``export``, ``oracle``, ...: not a config group, whose keys
    their readers check): that file lists every key the command reads there, so an added one (a
    misspelt ``+zns.verfy=true``) would be ignored without a word."""
    import yaml
    from hydra.core.override_parser.overrides_parser import OverridesParser

    primary = yaml.safe_load((Path(CONF_DIR) / f"{command}.yaml").read_text()) or {}
    groups = set()
    for entry in primary.get("defaults") or []:
        if isinstance(entry, dict):
            groups.update(str(k).split("@")[0].lstrip("/").split("/")[0].removeprefix("override ") for k in entry)
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - Hydra reports a bad override itself
        return
    for p in parsed:
        raw = p.get_key_element()
        if not raw.startswith("+"):
            continue
        path = raw.lstrip("+").split(".")
        if path[0] in groups or path[0] == "hydra":
            continue
        if len(path) == 1:
            # a group selection (+experiment=NAME, +dogi_gap=NAME) is Hydra's to check
            if not (Path(CONF_DIR) / path[0]).is_dir():
                _check_root_key(command, path[0])
            continue
        section = primary.get(path[0])
        for part in path[1:-1]:
            section = section.get(part) if isinstance(section, dict) else None
        if not isinstance(section, dict) or path[-1] in section:
            continue
        where = ".".join(path[:-1])
        raise ConfigError(
            f"{raw.lstrip('+')}: the {command} command has no setting {path[-1]!r} under {where}",
            did_you_mean(where, path[-1], section) or "one of " + ", ".join(f"{where}.{k}" for k in section),
        )


@functools.cache
def command_root_keys(command: str) -> frozenset[str]:
    """The top-level settings the command reads: the keys of its own file, ``conf/COMMAND.yaml``
    (which lists each of them, with its default, also those that only a preset sets, such as
    simulate's ``report_workload``)."""
    import yaml

    own = yaml.safe_load((Path(CONF_DIR) / f"{command}.yaml").read_text()) or {}
    return frozenset(str(k) for k in own if k not in ("defaults", "hydra"))


def _check_root_key(command: str, key: str) -> None:
    """Refuse ``+KEY=value`` at the top level when the command does not read ``KEY``: the run would
    go on without it (``simulate +progess=false``, ``train +title=x``). A key the command's file
    declares is already in the config, and Hydra itself refuses to add it again."""
    keys = command_root_keys(command)
    if key in keys:
        return
    raise ConfigError(
        f"{key}: the {command} command reads no top-level setting {key!r} (conf/{command}.yaml lists them), "
        "so it would ignore it",
        did_you_mean("", key, keys)
        or f"a setting goes under its section (e.g. +policy.params.{key}=..., +workload.params.{key}=...); "
        f"python -m dogi_ml {command} --cfg job lists them",
    )


def check_root_keys_read(command: str, cfg) -> None:
    """Refuse a run whose config holds a top-level setting the command does not read: a preset
    written for another command (``train +experiment=hybrid`` sets simulate's ``title`` and
    ``plot``) would otherwise run with those values ignored. Config groups (``workload``,
    ``policy``, ...) and a preset's own variables (a key its other values interpolate, such as
    ``qtable_from``) are not settings of the command and pass."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    strings = [str(v) for _, v in _leaves(raw) if isinstance(v, str) and "${" in v]
    for key in raw:
        if key in command_root_keys(command) or key == "hydra" or (Path(CONF_DIR) / key).is_dir():
            continue
        if any("${" + key + "}" in s or "${" + key + "." in s for s in strings):
            continue
        raise ConfigError(
            f"{key}: the {command} command reads no top-level setting {key!r}, yet the config sets it "
            "(a preset written for another command?)",
            "run the preset with the command its first comment line names, or drop the setting",
        )


def kept_victim_note(cfg, overrides: Sequence[str]) -> str | None:
    """The line to print when the command line sets ``sim.victim`` and the run's scheme keeps a
    rule of its own instead (``sim.victim_for=followers``, which comparison presets set: the rule
    applies to the schemes that follow one). The result's ``victim`` field names the rule used;
    without this line a user who changed the rule would see the scheme's figures unchanged and not
    know why."""
    from omegaconf import OmegaConf

    from dogi_ml.policies import configured_victim

    keys = {str(o).split("=", 1)[0].lstrip("+~") for o in overrides}
    if "sim.victim" not in keys or cfg.get("policy") is None or cfg.get("sim") is None:
        return None
    wanted = cfg.sim.get("victim")
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    sim_cfg = OmegaConf.to_container(cfg.sim, resolve=True)
    rule, _ = configured_victim(policy_cfg, sim_cfg)
    if wanted is None or rule == wanted:
        return None
    name = policy_cfg["name"]
    note = (
        f"note: policy={name} keeps its own victim rule {rule}: sim.victim={wanted} applies only to schemes "
        f"that follow the run's rule (sim.victim_for={sim_cfg.get('victim_for')})"
    )
    try:  # the fix, if the scheme can take the rule at all (DOGI and NoDaP choose their victims themselves)
        configured_victim({**policy_cfg, "victim": wanted}, sim_cfg)
    except ConfigError:
        return f"{note}; {name} cannot run with {wanted}"
    return f"{note}; set policy.victim={wanted} to run {name} with it"


#: keys of the ``sim`` config group that the pipeline reads itself, not the simulator
SIM_PIPELINE_KEYS = ("output",)


def sim_config(sim_cfg):
    """The ``sim`` group as a :class:`~dogi_ml.sim.SimConfig`; a key that is neither a simulator
    setting nor read by the pipeline (``+sim.bogus=1``, a misspelt one) is refused, naming it:
    ``SimConfig.from_mapping`` alone would drop it without a word."""
    from dataclasses import fields

    from dogi_ml.sim import SimConfig

    data = dict(sim_cfg)
    known = {f.name for f in fields(SimConfig)} | set(SIM_PIPELINE_KEYS)
    refuse_unknown_keys(data, known, "sim", hint="see conf/sim/default.yaml for the settings", what="simulator")
    return SimConfig.from_mapping(data)


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
