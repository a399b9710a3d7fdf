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
from dogi_ml.pipeline.simulate import simulation_writes


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
    kind = str(cfg.oracle.get("kind", "nodap"))
    if kind != "nodap":
        from dogi_ml.oracles.minos_oracles import KINDS
        from dogi_ml.pipeline import minos_table

        if kind == "minos_table1":
            return minos_table.run_minos_table(cfg, out_dir)
        if kind not in KINDS:
            raise ConfigError(
                f"unknown oracle.kind {kind!r}",
                f"use one of: nodap, {', '.join(KINDS)}, minos_table1 (+experiment=minos_table1)",
            )
        return minos_table.run_minos_oracle(cfg, out_dir)
    from omegaconf import OmegaConf

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
        min_gain=float(o.min_gain),
        candidates=cands,
        log=console.print,
        group_sizes=str(o.group_sizes),
        steps=tuple(float(x) for x in o.steps),
        max_evals_per_n=int(o.max_evals_per_n),
        explore_fraction=float(o.explore_fraction),
        progress=bool(cfg.get("progress", True)),
        journal=nodap_journal(writes, cap, sim_cfg, cfg.cache_dir),
    )
    console.print(
        f"NoDaP on {cfg.workload.name}: {res['n_groups']} groups, BIR bounds {res['bounds']}, WAF {res['waf']:.4f}"
    )
    out = out_dir / "nodap.json"
    out.write_text(json.dumps({"workload": cfg.workload.name, **res}, indent=2))
    print(f"result: {out}")
    sizes = f" 'policy.params.sizes={res['sizes']}'" if res.get("sizes") is not None else ""
    print(
        f"simulate with: python -m dogi_ml simulate +workload={cfg.workload.name} policy=nodap "
        f"'policy.params.bounds={res['bounds']}'{sizes} policy.n_groups={res['n_groups']}"
    )
    return res
