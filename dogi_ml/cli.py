"""``python -m dogi_ml <command> [hydra overrides]``.

Every command composes ``conf/<command>.yaml`` with Hydra, runs, prints a short human summary
and writes machine-readable JSON (its path is printed). Configs are found relative to the
package, outputs go under the working directory.
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import dogi_ml.conf

# The configs ship inside the package (dogi_ml.conf), so wheels and editable installs find them alike.
CONF_DIR = str(Path(dogi_ml.conf.__file__).resolve().parent)

COMMANDS = {
    "train": "learn block lifetimes: +workload=NAME [model=NAME]; logs to MLflow",
    "oracle": "NoDaP's offline group search: +workload=NAME [oracle.max_groups=8]",
    "simulate": "run placement schemes over a workload: +workload=NAME policy=NAME sim.victim=NAME",
    "ingest": "convert a trace to the binary format: path=FILE format=NAME out=DIR",
    "stats": "show a binary trace's header and statistics: path=FILE.dtr",
    "print": "print a binary trace's requests as text: path=FILE.dtr [head=N]",
    "export": "deploy a model: int8 C header, ONNX, manifest: +workload=NAME [model=NAME] [export.run_id=ID]",
    "bench": "measure simulator and annotation throughput",
    "stage": "one DVC pipeline stage: stage NAME [params=params.yaml] [out=data/dvc] (see dvc.yaml)",
}


class UsageError(ValueError):
    """Bad command-line input; printed without a traceback."""


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def available(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


def require_workload(cfg: DictConfig) -> None:
    if "workload" not in cfg or cfg.workload is None:
        _fail("no workload given; add +workload=NAME, one of: " + ", ".join(available("workload"))
              + " (files: +workload=file workload.path=FILE workload.format=NAME)")


def output_dir() -> Path:
    """The current Hydra run's output directory (under the working directory)."""
    from hydra.core.hydra_config import HydraConfig
    return Path(HydraConfig.get().runtime.output_dir)


def _guard(fn):
    """Run a command body, turning our input errors into one clear line and exit status 2."""
    def wrapper(cfg: DictConfig):
        from dogi_ml.sim import SimulationError
        from dogi_ml.traces.trace import TraceFormatError
        try:
            return fn(cfg)
        except (UsageError, TraceFormatError, SimulationError, FileNotFoundError, ValueError) as exc:
            _fail(str(exc))
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# -- simulate ----------------------------------------------------------------------------------
@_guard
def _simulate(cfg: DictConfig):
    from dogi_ml.pipeline.simulate import simulate, write_json
    from dogi_ml.report import print_sim_summary
    from dogi_ml.traces.workload import load_workload

    require_workload(cfg)
    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    deployed = (cfg.get("model") or {}).get("deployed")
    if deployed:
        # model.deployed=int8: the learned scheme places with the exported integer model
        if "deployed" not in (policy_cfg.get("params") or {}):
            _fail(f"model.deployed={deployed} needs a learned policy with a deployed form (policy=dogi), "
                  f"not policy={policy_cfg['name']}")
        policy_cfg["params"]["deployed"] = deployed
    result = simulate(trace, policy_cfg, OmegaConf.to_container(cfg.sim, resolve=True), progress=cfg.progress)
    out = Path(cfg.sim.output) if cfg.sim.output else output_dir() / "result.json"
    if cfg.get("output") and not _multirun():
        out = Path(cfg.output)      # a single run: output=PATH.json is the result itself
    result["workload_config"] = OmegaConf.to_container(cfg.workload, resolve=True)
    write_json(result, out)
    print_sim_summary(result)
    print(f"result: {out}")
    png = None
    if cfg.get("plot", True):
        from dogi_ml.report import plot_results
        png = plot_results([result], out.with_suffix('.png'))
        print(f"plot:   {png}")
    if cfg.get("mlflow", True):
        _log_simulation(cfg, result, [out, png])
    return result["waf"]


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    try:
        return HydraConfig.get().mode.name == "MULTIRUN"
    except ValueError:
        return False


def _log_simulation(cfg: DictConfig, result: dict, files) -> None:
    """One MLflow run per simulation (a child of the sweep's parent run under ``-m``)."""
    from hydra.core.hydra_config import HydraConfig

    from dogi_ml.tracking import flatten, mlflow_run

    sweep_dir = Path(HydraConfig.get().sweep.dir) if _multirun() else None
    scheme = result.get("scheme") or result["policy"]
    tags = {"workload": str(result.get("workload")), "policy": result["policy"], "scheme": scheme,
            "command": "simulate"}
    with mlflow_run("simulate", f"{scheme} on {result.get('workload')}", sweep_dir=sweep_dir, tags=tags) as (mlflow, _):
        params = {k: v for k, v in flatten(OmegaConf.to_container(cfg, resolve=True)).items()
                  if k.split(".")[0] in ("policy", "sim", "workload")}
        mlflow.log_params({k: (str(v)[:500] if v is not None else "null") for k, v in params.items()})
        metrics = {k: float(result[k]) for k in ("waf", "user_accuracy", "gc_accuracy", "mispredict_ratio",
                                                  "inference_ns_per_block", "train_seconds", "appends_per_second",
                                                  "elapsed_s", "gc_writes", "user_writes")
                   if isinstance(result.get(k), (int, float))}
        mlflow.log_metrics(metrics)
        series = result.get("waf_series") or {}
        for i, w in enumerate(series.get("waf", [])[:1000]):
            mlflow.log_metric("waf_window", w, step=i)
        for f in files:
            if f is not None and Path(f).exists():
                mlflow.log_artifact(str(f))


# -- train -------------------------------------------------------------------------------------
@_guard
def _train(cfg: DictConfig):
    from dogi_ml.pipeline.train import run_train

    require_workload(cfg)
    return run_train(cfg, output_dir())


# -- oracle ------------------------------------------------------------------------------------
@_guard
def _oracle(cfg: DictConfig):
    import json

    import numpy as np

    from dogi_ml.pipeline.simulate import simulation_writes
    from dogi_ml.report import console
    from dogi_ml.sim import SimConfig
    from dogi_ml.traces.workload import load_workload
    from dogi_ml.oracles.nodap import search

    require_workload(cfg)
    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    sim_cfg = SimConfig.from_mapping(OmegaConf.to_container(cfg.sim, resolve=True))
    writes, cap = simulation_writes(trace, sim_cfg.capacity_blocks)
    o = cfg.oracle
    cands = np.asarray(list(o.candidates), np.int64) if o.candidates else None
    res = search(writes, cap, sim_cfg, max_groups=int(o.max_groups), min_gain=float(o.min_gain),
                 candidates=cands, log=console.print)
    console.print(f"NoDaP on {cfg.workload.name}: {res['n_groups']} groups, BIR bounds {res['bounds']}, "
                  f"WAF {res['waf']:.4f}")
    out = output_dir() / "nodap.json"
    out.write_text(json.dumps({"workload": cfg.workload.name, **res}, indent=2))
    print(f"result: {out}")
    print(f"simulate with: python -m dogi_ml simulate +workload={cfg.workload.name} policy=nodap "
          f"'policy.params.bounds={res['bounds']}' policy.n_groups={res['n_groups']}")


# -- ingest ------------------------------------------------------------------------------------
@_guard
def _ingest(cfg: DictConfig):
    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import ingest

    if cfg.path in (None, "???") or cfg.format in (None, "???"):
        raise UsageError("ingest needs path=FILE and format=NAME, e.g. "
                         "python -m dogi_ml ingest path=trace.csv format=msr out=data/")
    opts = {"skip_malformed": bool(cfg.skip_malformed)}
    if cfg.volumes:
        opts["volumes"] = list(cfg.volumes)
    if cfg.delimited:
        opts["delimited"] = OmegaConf.to_container(cfg.delimited, resolve=True)
    binary, stats = ingest(cfg.path, cfg.format, cfg.out, **opts)
    print_stats(stats, title=f"ingested {cfg.path}")
    if stats.get("skipped_lines"):
        print(f"skipped {stats['skipped_lines']} malformed line(s)")
    print(f"binary trace: {binary}")
    print(f"statistics:   {Path(cfg.out) / (Path(binary).stem + '.stats.json')}")


# -- stats / print -----------------------------------------------------------------------------
def _load_binary(cfg):
    from dogi_ml.traces.binfmt import read_binary
    if cfg.path in (None, "???"):
        raise UsageError("give path=FILE.dtr (a trace written by `python -m dogi_ml ingest`)")
    return read_binary(cfg.path)


@_guard
def _stats(cfg: DictConfig):
    from dogi_ml.pipeline.simulate import write_json
    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import read_header

    header = read_header(cfg.path) if cfg.path not in (None, "???") else None
    trace = _load_binary(cfg)
    stats = trace.stats()
    print_stats({**{f"header.{k}": v for k, v in header.items() if not isinstance(v, (dict, list))},
                 **stats}, title=str(cfg.path))
    out = output_dir() / "stats.json"
    write_json({"header": header, "stats": stats}, out)
    print(f"json: {out}")


@_guard
def _print(cfg: DictConfig):
    from dogi_ml.traces.trace import OP_NAMES
    trace = _load_binary(cfg)
    n = min(int(cfg.head), trace.n_requests)
    print("ts_us\tvolume\top\tlba\tnblocks")
    for i in range(n):
        print(f"{trace.ts_us[i]}\t{trace.volumes[trace.volume[i]]}\t{OP_NAMES.get(int(trace.op[i]), '?')}"
              f"\t{trace.lba[i]}\t{trace.nblocks[i]}")
    if n < trace.n_requests:
        print(f"... {trace.n_requests - n} more requests (head={cfg.head})")


# -- export ------------------------------------------------------------------------------------
@_guard
def _export(cfg: DictConfig):
    from dogi_ml.pipeline.export import run_export
    return run_export(cfg, output_dir())


# -- bench -------------------------------------------------------------------------------------
@_guard
def _bench(cfg: DictConfig):
    from dogi_ml.bench import run_bench
    run_bench(cfg, output_dir())


_BODIES = {"train": _train, "oracle": _oracle, "simulate": _simulate, "ingest": _ingest, "stats": _stats, "print": _print, "bench": _bench,
           "export": _export}


def _stage(args: list[str]) -> None:
    """DVC stages take plain ``key=value`` arguments and read params.yaml (what DVC tracks)."""
    from dogi_ml.pipeline.stages import STAGES, run_stage
    if not args or "=" in args[0]:
        _fail(f"usage: python -m dogi_ml stage NAME [params=params.yaml] [out=data/dvc]; NAME one of {', '.join(STAGES)}")
    opts = {}
    for a in args[1:]:
        key, sep, value = a.partition("=")
        if not sep or key not in ("params", "out"):
            _fail(f"stage: unexpected argument {a!r}; use params=FILE and out=DIR")
        opts[key] = value
    try:
        run_stage(args[0], **opts)
    except (ValueError, FileNotFoundError) as exc:
        _fail(str(exc))


def usage() -> str:
    lines = ["usage: python -m dogi_ml <command> [hydra overrides]", "", "commands:"]
    lines += [f"  {name:<9} {text}" for name, text in COMMANDS.items()]
    lines += ["", "config groups: " + ", ".join(
        f"{g} ({', '.join(available(g))})" for g in ("workload", "model", "policy", "sim", "experiment"))]
    lines += ["Hydra: add -m for sweeps (e.g. policy=nosep,sepbit -m), --cfg job to show the config."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return
    command, rest = argv[0], argv[1:]
    if command == "stage":
        _stage(rest)
        return
    if command not in _BODIES:
        _fail(f"unknown command {command!r}; known: {', '.join(COMMANDS)}")
    body = _BODIES[command]
    task = hydra.main(config_path=CONF_DIR, config_name=command, version_base="1.3")(body)
    sys.argv = [f"dogi_ml-{command}", *rest]
    task()
