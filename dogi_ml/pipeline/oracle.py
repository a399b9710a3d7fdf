"""The ``oracle`` command: NoDaP's offline group search on a workload, the configuration to
simulate with (``oracle.kind=nodap``, the default); the MINOS §3.3 oracles
(``oracle.kind=opmin|segment|percentile|kmeans``, and ``opbudget``, the OP-budget plan that is not
the paper's) and their Table 1 (``+experiment=minos_table1``) are in
:mod:`dogi_ml.pipeline.minos_table`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.pipeline.common import require_workload, sim_config
from dogi_ml.pipeline.simulate import check_mode_settings, simulation_writes

#: the ``oracle`` options each ``oracle.kind`` reads (``kind`` itself every one); the MINOS kinds'
#: ``method`` is their optimiser's (OP-Min and the OP-budget plan only), ``percentile_of`` the
#: Percentile Oracle's mass; ``table`` comes with +experiment=minos_table1
ORACLE_READS = {
    "nodap": ("max_groups", "min_gain", "candidates", "group_sizes", "steps", "max_evals_per_n", "explore_fraction"),
    "opmin": ("n_user_streams", "method"),
    "opbudget": ("n_user_streams", "method"),
    "segment": ("n_user_streams",),
    "kmeans": ("n_user_streams",),
    "percentile": ("n_user_streams", "percentile_of"),
    "minos_table1": ("n_user_streams", "method", "percentile_of", "table"),
}


def check_oracle_options(oracle: dict) -> None:
    """Refuse an ``oracle`` option set to another value than its default (conf/oracle.yaml) when
    the run's ``oracle.kind`` does not read it: ``oracle.kind=opmin oracle.max_groups=4`` ran
    OP-Min and never looked at NoDaP's search bound. Table 1 reads ``method`` and
    ``percentile_of`` only when its ``kinds`` hold an oracle that does."""
    import yaml

    from dogi_ml.pipeline.common import CONF_DIR

    defaults = yaml.safe_load((Path(CONF_DIR) / "oracle.yaml").read_text())["oracle"]
    kind = str(oracle.get("kind", "nodap"))
    reads = set(ORACLE_READS.get(kind, ()))
    for key, value in oracle.items():
        if key == "kind" or (key in defaults and value == defaults[key]):
            continue
        readers = [k for k, keys in ORACLE_READS.items() if key in keys]
        if not readers:  # not an option of any kind (a preset's typo): conf/oracle.yaml lists them
            raise ConfigError(f"oracle.{key}: no oracle reads such a setting", "see conf/oracle.yaml for the options")
        if kind == "minos_table1" and key in ("method", "percentile_of"):
            # the table runs its oracle.table.kinds, and only some of them read these
            kinds = list((oracle.get("table") or {}).get("kinds") or ())
            wanted = [k for k in readers if k != "minos_table1"]
            if not set(kinds) & set(wanted):
                one = len(wanted) == 1
                raise ConfigError(
                    f"oracle.{key}={value} is read only by the {' and '.join(wanted)} oracle{'' if one else 's'}, "
                    f"and oracle.table.kinds={kinds} {'does not run it' if one else 'runs neither'}",
                    f"add {wanted[0]} to oracle.table.kinds, or drop oracle.{key}",
                )
            continue
        if key in reads:
            continue
        what, drop = f"oracle.{key}={value}", f"oracle.{key}"
        if key == "table":
            what, drop = "oracle.table (from +experiment=minos_table1)", "+experiment=minos_table1"
        raise ConfigError(
            f"{what} is read only by oracle.kind={'|'.join(readers)}, and this run is oracle.kind={kind}",
            f"set oracle.kind={readers[0]} to use it, or drop {drop}",
        )


def _checked_steps(steps) -> tuple:
    """``oracle.steps`` as floats; a string (``steps=abc``) was read one character at a time,
    ending in float()'s message with no key. Their order and signs are the search's to check."""
    from omegaconf import OmegaConf

    if isinstance(steps, str) or not OmegaConf.is_list(steps):
        raise ConfigError(
            f"oracle.steps={steps!r} is not a list of step sizes", "give e.g. oracle.steps=[1.0,0.5,0.25]"
        )
    return tuple(checked_setting(x, "oracle.steps", float, example="[1.0,0.5,0.25]") for x in steps)


def run_oracle(cfg, out_dir: Path) -> dict:
    """Search the group bounds (``oracle.max_groups``, ``oracle.min_gain``, ``oracle.candidates``),
    write ``nodap.json`` and print the ``simulate`` command that replays the result. Other
    ``oracle.kind`` values go to :mod:`dogi_ml.pipeline.minos_table`."""
    from omegaconf import DictConfig

    if not isinstance(cfg.oracle, DictConfig):  # oracle=opmin replaced the whole section
        raise ConfigError(
            f"oracle={cfg.oracle} replaces the oracle section, which is a mapping of settings",
            f"give oracle.kind={cfg.oracle}",
        )
    from omegaconf import OmegaConf

    from dogi_ml.pipeline import minos_table

    kind = str(cfg.oracle.get("kind", "nodap"))
    if kind not in ORACLE_READS:
        raise ConfigError(
            f"unknown oracle.kind {kind!r}", f"use one of: {', '.join(ORACLE_READS)} (+experiment=minos_table1)"
        )
    check_oracle_options(OmegaConf.to_container(cfg.oracle, resolve=True))
    sim = OmegaConf.to_container(cfg.sim, resolve=True)
    if kind == "minos_table1":  # null placeholders that the table sets per run
        sim = {k: v for k, v in sim.items() if k not in minos_table.TABLE_SIM_KEYS}
    # NoDaP and the MINOS oracles choose their own victims and time no write: a victim_d, arrival,
    # ... set here would be ignored
    victims = "NoDaP's own selector" if kind == "nodap" else "the MINOS oracles' CB [SepBIT] rule"
    check_mode_settings(sim_config(sim), victims_by=victims)
    if kind == "minos_table1":
        return minos_table.run_minos_table(cfg, out_dir)
    if kind != "nodap":
        return minos_table.run_minos_oracle(cfg, out_dir)
    from dogi_ml.oracles.nodap import search
    from dogi_ml.pipeline.cache import nodap_journal
    from dogi_ml.report import console
    from dogi_ml.traces.workload import load_workload

    require_workload(cfg)
    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    sim_cfg = sim_config(OmegaConf.to_container(cfg.sim, resolve=True))
    writes, cap = simulation_writes(trace, sim_cfg.capacity_blocks)
    o = cfg.oracle
    if o.candidates is not None and (isinstance(o.candidates, str) or not OmegaConf.is_list(o.candidates)):
        raise ConfigError(
            f"oracle.candidates={o.candidates!r} is not a list of BIR bounds", "give e.g. oracle.candidates=[64,1024]"
        )
    cands = (
        np.asarray(
            [checked_setting(c, "oracle.candidates", minimum=1, example="[64,1024]") for c in o.candidates], np.int64
        )
        if o.candidates
        else None
    )
    res = search(
        writes,
        cap,
        sim_cfg,
        max_groups=checked_setting(o.max_groups, "oracle.max_groups", minimum=2, example=10),
        min_gain=checked_setting(o.min_gain, "oracle.min_gain", float, minimum=0.0, below=1.0, example=0.05),
        candidates=cands,
        log=console.print,
        group_sizes=str(o.group_sizes),
        steps=_checked_steps(o.steps),
        max_evals_per_n=checked_setting(o.max_evals_per_n, "oracle.max_evals_per_n", minimum=1, example=120),
        explore_fraction=checked_setting(
            o.explore_fraction, "oracle.explore_fraction", float, above=0.0, maximum=1.0, example=1.0
        ),
        progress=bool(cfg.get("progress", True)),
        journal=nodap_journal(writes, cap, sim_cfg, cfg.cache_dir),
    )
    console.print(
        f"NoDaP on {cfg.workload.name}: {res['n_groups']} groups, BIR bounds {res['bounds']}, WAF {res['waf']:.4f}"
    )
    out = Path(cfg.output) if cfg.get("output") else out_dir / "nodap.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"workload": cfg.workload.name, **res}, indent=2))
    print(f"result: {out}")
    sizes = f" 'policy.params.sizes={res['sizes']}'" if res.get("sizes") is not None else ""
    print(
        f"simulate with: python -m dogi_ml simulate +workload={cfg.workload.name} policy=nodap "
        f"'policy.params.bounds={res['bounds']}'{sizes} policy.n_groups={res['n_groups']}"
    )
    return res
