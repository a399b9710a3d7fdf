"""The frozen bundles on unseen traffic (issue 40, docs/hybrid.md "Deployment"): the hybrid's and
DOGI's deployment bundles learned on one seed of a generated workload, each deployed on another
seed of the same generator (out of sample) and on its own (in sample), beside the online schemes on
the unseen seed.

    python -m dogi_ml.pipeline.frozen_seeds OUT WORKLOAD [WORKLOAD ...] [--runs DIR]
        [--learn-seed 0] [--deploy-seed 1] [--set HYDRA_OVERRIDE ...]
        [--scheme-set POLICY=HYDRA_OVERRIDE ...] [--frozen hybrid_frozen,dogi_frozen]
        [--online hybrid,dogi,minos,shiro]

``--scheme-set hybrid=++policy.params.lifetimes=select`` applies an override to one policy's runs
only (the hybrid's bundle run and its online run): the count bundle's table is made with
``--scheme-set hybrid=++policy.params.lifetimes=select --scheme-set hybrid=++policy.params.hot_filter=auto
--frozen hybrid_frozen``.

Every run is composed as the command line composes it (``replay mode=bundle +workload=W
workload.seed=S policy=hybrid ++policy.params.deployed=int8`` for a bundle, ``simulate +workload=W
workload.seed=S policy=hybrid_frozen policy.params.bundle=DIR`` for a deployment) with
conf/experiment/hybrid.yaml's victim rule, under the command line's numerics; the bundles and each
run's result JSON stay under ``--runs`` (default ``multirun/results/hybrid_frozen_seeds``).
Writes ``OUT.json`` and ``OUT.md`` (:func:`write_frozen_seeds`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, DogiMLError
from dogi_ml.pipeline.common import available, compose_config
from dogi_ml.pipeline.replay import export_dogi_bundle
from dogi_ml.pipeline.simulate import simulate, write_json
from dogi_ml.report import scheme_of, write_table

#: the frozen schemes and the online run that exports each one's bundle (``replay mode=bundle``)
FROZEN_SOURCES = {"hybrid_frozen": "hybrid", "dogi_frozen": "dogi"}
#: conf/experiment/hybrid.yaml's victim rule: cost-benefit wherever a scheme follows the run's rule
FROZEN_SEEDS_SIM = ("sim.victim=cost_benefit", "sim.victim_for=followers")
#: online schemes run on the deployment seed beside the frozen ones (MINOS and Shiro, with its own
#: Adjusted Greedy: the best seed schemes of the hybrid table that need no bundle, on phase_shift and
#: varmail)
FROZEN_SEEDS_ONLINE = ("hybrid", "dogi", "minos", "shiro")


def _seeded_run_config(command: str, workload: str, seed: int, policy: str, overrides) -> tuple:
    """(workload trace, policy config, sim config) of ``python -m dogi_ml COMMAND +workload=W
    workload.seed=SEED policy=P OVERRIDES``, composed as the command line composes it."""
    from omegaconf import OmegaConf

    from dogi_ml.policies import configured_victim
    from dogi_ml.traces.workload import load_workload

    cfg = compose_config(command, [f"+workload={workload}", f"workload.seed={seed}", f"policy={policy}", *overrides])
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    sim_cfg = OmegaConf.to_container(cfg.sim, resolve=True)
    configured_victim(policy_cfg, sim_cfg)  # a victim-rule conflict fails before the trace is built
    return load_workload(cfg.workload, cache_dir=cfg.cache_dir, log=lambda *a: None), policy_cfg, sim_cfg


def _run_fields(result: dict) -> dict:
    return {
        "waf": float(result["waf"]),
        "user_writes": int(result["user_writes"]),
        "gc_writes": int(result["gc_writes"]),
        "scheme": scheme_of(result),
        "victim": result.get("victim"),
    }


def _seeded_simulate(runs: Path, workload: str, policy: str, seed: int, overrides, trace=None, label=None) -> tuple:
    """One ``simulate`` run of :func:`frozen_seeds` (``trace``: run on this trace instead of the
    workload's); its result JSON is kept as ``runs/<workload>/<label>.json``. Returns (the run's
    figures, the workload's trace)."""
    t, policy_cfg, sim_cfg = _seeded_run_config("simulate", workload, seed, policy, overrides)
    label = label or f"{policy}_seed{seed}"
    r = simulate(t if trace is None else trace, policy_cfg, sim_cfg, progress=False)
    r["workload_seed"] = seed  # the seed of the workload's generator (its own config does not travel with a result)
    write_json(r, runs / workload / f"{label}.json")
    return _run_fields(r), t


def frozen_seeds(
    workloads,
    runs_dir: str | Path,
    learn_seed: int = 0,
    deploy_seed: int = 1,
    overrides=(),
    scheme_overrides: dict | None = None,
    online=FROZEN_SEEDS_ONLINE,
    frozen=tuple(FROZEN_SOURCES),
    log=print,
) -> dict:
    """The frozen schemes out of sample: per workload, the bundles of a hybrid and a DOGI run on
    seed ``learn_seed`` (``replay mode=bundle ... policy.params.deployed=int8``, written under
    ``runs_dir/bundles/<workload>/<scheme>``), each deployed (``hybrid_frozen`` / ``dogi_frozen``)
    on seed ``deploy_seed`` (unseen traffic) and on ``learn_seed`` (in sample), beside the online
    schemes ``online`` on ``deploy_seed`` (``frozen``: which frozen schemes). On zipf also seed
    ``deploy_seed``'s draws with seed ``learn_seed``'s hot set (:func:`zipf_relabelled`), which separates the new draws from the
    moved hot set. ``overrides`` (Hydra) apply to every run, ``scheme_overrides[policy]`` to that
    policy's runs (for a frozen scheme's source, its bundle run); each run's result JSON is kept
    under ``runs_dir/<workload>/``."""

    learn_seed, deploy_seed = int(learn_seed), int(deploy_seed)
    if learn_seed == deploy_seed:
        raise ConfigError(
            f"--learn-seed and --deploy-seed are both {learn_seed}: the in-sample run is made beside the "
            "out-of-sample one already",
            "give two different seeds",
        )
    if not workloads:
        raise ConfigError("--frozen-seeds: no workload named", "name generated workloads, e.g. zipf ycsb_a")
    for w in workloads:
        if w not in available("workload"):
            raise ConfigError(
                f"--frozen-seeds: unknown workload {w!r}", "use one of: " + ", ".join(available("workload"))
            )
        if compose_config("simulate", [f"+workload={w}"]).workload.get("source", "generator") != "generator":
            raise ConfigError(
                f"--frozen-seeds: workload {w!r} is a trace file, which has no seed to change",
                "name generated workloads (conf/workload files with source: generator)",
            )
    unknown = [f for f in frozen if f not in FROZEN_SOURCES]
    if unknown:
        raise ConfigError(
            f"--frozen-seeds: {unknown[0]!r} is not a frozen scheme", "use " + " or ".join(FROZEN_SOURCES)
        )
    scheme_overrides = dict(scheme_overrides or {})
    runs = Path(runs_dir)
    common = [*FROZEN_SEEDS_SIM, *overrides]
    rows: dict = {}
    for w in workloads:
        row: dict = {"bundles": {}, "deployed": {}, "online": {}}
        for frozen_scheme in frozen:
            source = FROZEN_SOURCES[frozen_scheme]
            bundle_run = [*common, "++policy.params.deployed=int8", *scheme_overrides.get(source, ())]
            t0, policy_cfg, sim_cfg = _seeded_run_config("replay", w, learn_seed, source, bundle_run)
            log(f"{w}: the {source} run on seed {learn_seed} exports its bundle")
            made = export_dogi_bundle(t0, policy_cfg, sim_cfg, runs / "bundles" / w / source)
            row["bundles"][frozen_scheme] = {
                "path": made["bundle"],
                "seed": learn_seed,
                "run": source,
                "run_waf": float(made["waf"]),
                "retrains": int(made["retrains"]),
            }
            deploy = [*common, *scheme_overrides.get(frozen_scheme, ()), f"policy.params.bundle={made['bundle']}"]
            log(f"{w}: {frozen_scheme} on seeds {deploy_seed} and {learn_seed}")
            out, t1 = _seeded_simulate(runs, w, frozen_scheme, deploy_seed, deploy)
            inside, _ = _seeded_simulate(runs, w, frozen_scheme, learn_seed, deploy)
            row["deployed"][frozen_scheme] = {"out_of_sample": out, "in_sample": inside}
            wcfg = compose_config("simulate", [f"+workload={w}", *overrides]).workload
            moved = zipf_relabelled(t1, dict(wcfg), learn_seed, deploy_seed) if wcfg.generator == "zipf" else None
            if moved is not None:
                label = f"{frozen_scheme}_seed{deploy_seed}_hotset{learn_seed}"
                same, _ = _seeded_simulate(runs, w, frozen_scheme, deploy_seed, deploy, trace=moved, label=label)
                row["deployed"][frozen_scheme]["out_of_sample_learned_hot_set"] = same
        for policy in online:
            log(f"{w}: {policy} (online) on seed {deploy_seed}")
            row["online"][policy], _ = _seeded_simulate(
                runs, w, policy, deploy_seed, [*common, *scheme_overrides.get(policy, ())]
            )
        t0 = _seeded_run_config("simulate", w, learn_seed, "nosep", common)[0]
        t1 = _seeded_run_config("simulate", w, deploy_seed, "nosep", common)[0]
        row["hot_set"] = hot_set_overlap(t0.block_writes, t1.block_writes, int(t0.meta["capacity_blocks"]))
        rows[w] = row
    return {
        "learn_seed": learn_seed,
        "deploy_seed": deploy_seed,
        "settings": common,
        "scheme_settings": {k: list(v) for k, v in scheme_overrides.items()},
        "online": list(online),
        "workloads": rows,
    }


# -- the zipf control, the hot sets and the table -------------------------------------------------


def zipf_rank_map(seed_from: int, seed_to: int, n: int, theta: float) -> np.ndarray:
    """The LBA map that moves zipf's hot set of seed ``seed_from`` onto seed ``seed_to``'s: the
    zipf generator (``dogi_ml.traces.generators.zipf``) scrambles ranks over the addresses with a
    permutation drawn from the seed, so ``map[lba]`` is the address seed ``seed_to`` gives the
    rank that seed ``seed_from`` put at ``lba``."""
    from dogi_ml.traces.generators import ZipfSampler

    rank_at = np.empty(n, np.int64)
    rank_at[ZipfSampler(n, theta, seed_from).perm] = np.arange(n, dtype=np.int64)
    return ZipfSampler(n, theta, seed_to).perm[rank_at]


def zipf_relabelled(trace, workload_cfg: dict, learn_seed: int, deploy_seed: int):
    """Seed ``deploy_seed``'s zipf draws with seed ``learn_seed``'s hot set: its trace with every
    LBA moved by :func:`zipf_rank_map` (single-block requests over the whole space only)."""
    from dogi_ml.traces.trace import Trace

    params = workload_cfg.get("params") or {}
    n = int(workload_cfg["capacity_blocks"])
    if params.get("request_blocks", 1) != 1 or params.get("wss_fraction", 1.0) != 1.0:
        return None
    moved = zipf_rank_map(deploy_seed, learn_seed, n, float(params.get("theta", 1.0)))
    out = Trace(trace.ts_us, moved[trace.lba], trace.nblocks, trace.op, trace.volume, name=trace.name)
    out.meta = dict(trace.meta)
    return out


def hot_set_overlap(learn_writes: np.ndarray, deploy_writes: np.ndarray, n: int, top: float = 0.01) -> dict:
    """How much of the deployment trace's traffic goes to the learning trace's hottest LBAs: the
    ``top`` share of LBAs most written in each trace, the share of each trace's writes they take,
    and the share of the deployment trace's writes that land on the learning trace's hot set."""
    k = max(1, int(n * top))
    learn_counts = np.bincount(learn_writes, minlength=n)
    deploy_counts = np.bincount(deploy_writes, minlength=n)
    learn_hot = np.argsort(-learn_counts, kind="stable")[:k]
    deploy_hot = np.argsort(-deploy_counts, kind="stable")[:k]
    return {
        "top_share": top,
        "learn_hot_share_of_learn_writes": float(learn_counts[learn_hot].sum() / learn_writes.size),
        "deploy_hot_share_of_deploy_writes": float(deploy_counts[deploy_hot].sum() / deploy_writes.size),
        "learn_hot_share_of_deploy_writes": float(deploy_counts[learn_hot].sum() / deploy_writes.size),
        "hot_sets_shared": float(np.intersect1d(learn_hot, deploy_hot).size / k),
    }


def _change(new: float, old: float) -> str:
    return f"{new / old - 1:+.1%}"


def write_frozen_seeds(out: str | Path, table: dict) -> list[Path]:
    """``OUT.json`` (:func:`frozen_seeds`'s table) and ``OUT.md``."""
    a, b = table["learn_seed"], table["deploy_seed"]
    online = table["online"]
    lines = [
        f"# The frozen bundles out of sample: learned on seed {a}, deployed on seed {b}",
        "",
        f"Each bundle is exported by an online run on seed {a} (`replay mode=bundle ... "
        f"policy.params.deployed=int8`) and deployed on seed {b} (out of sample) and on seed {a} (in sample). "
        f"Settings: `{' '.join(table['settings'])}`"
        + "".join(f"; {p} only: `{' '.join(v)}`" for p, v in table.get("scheme_settings", {}).items())
        + ". GC writes in blocks.",
        "",
        f"| workload | frozen scheme | bundle's run, seed {a} (online) | in sample, seed {a} | out of sample, seed {b} "
        f"| WAF out / in | GC writes in | GC writes out | GC writes out / in | online on seed {b} | "
        f"frozen / online, seed {b} (GC writes) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w, row in table["workloads"].items():
        for frozen, d in row["deployed"].items():
            src = row["bundles"][frozen]
            inside, out_ = d["in_sample"], d["out_of_sample"]
            live = row["online"].get(src["run"])
            lines.append(
                f"| {w} | {frozen} | {src['run_waf']:.4f} | {inside['waf']:.4f} | {out_['waf']:.4f} | "
                f"{_change(out_['waf'], inside['waf'])} | {inside['gc_writes']} | {out_['gc_writes']} | "
                f"{_change(out_['gc_writes'], inside['gc_writes'])} | "
                + (f"{live['waf']:.4f} | {_change(out_['gc_writes'], live['gc_writes'])} |" if live else "- | - |")
            )
    if online:
        lines += [
            "",
            f"Online schemes on seed {b} (WAF, GC writes):",
            "",
            "| workload | " + " | ".join(online) + " |",
            "|---|" + "---:|" * len(online),
        ]
        for w, row in table["workloads"].items():
            cells = [f"{row['online'][p]['waf']:.4f} ({row['online'][p]['gc_writes']})" for p in online]
            lines.append(f"| {w} | " + " | ".join(cells) + " |")
    moved = [
        (w, frozen, d) for w, row in table["workloads"].items() for frozen, d in row["deployed"].items()
        if "out_of_sample_learned_hot_set" in d
    ]  # fmt: skip
    if moved:
        lines += [
            "",
            f"The same out-of-sample draws with seed {a}'s hot set (zipf: seed {b}'s trace with every LBA moved to "
            f"where seed {a} puts its rank):",
            "",
            f"| workload | frozen scheme | in sample, seed {a} | seed {b}'s draws, seed {a}'s hot set | seed {b} | "
            "GC writes: hot set kept / in sample |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for w, frozen, d in moved:
            same = d["out_of_sample_learned_hot_set"]
            lines.append(
                f"| {w} | {frozen} | {d['in_sample']['waf']:.4f} | {same['waf']:.4f} | {d['out_of_sample']['waf']:.4f} | "
                f"{_change(same['gc_writes'], d['in_sample']['gc_writes'])} |"
            )
    top = next(iter(table["workloads"].values()))["hot_set"]["top_share"]
    lines += [
        "",
        f"Hot sets: the {top:.0%} most written LBAs of each seed's trace and the share of writes they take:",
        "",
        f"| workload | seed {a}'s hot set, of seed {a}'s writes | seed {b}'s hot set, of seed {b}'s writes | "
        f"seed {a}'s hot set, of seed {b}'s writes | LBAs in both hot sets |",
        "|---|---:|---:|---:|---:|",
    ]
    for w, row in table["workloads"].items():
        h = row["hot_set"]
        lines.append(
            f"| {w} | {h['learn_hot_share_of_learn_writes']:.1%} | {h['deploy_hot_share_of_deploy_writes']:.1%} | "
            f"{h['learn_hot_share_of_deploy_writes']:.1%} | {h['hot_sets_shared']:.1%} |"
        )
    return write_table(out, table, lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dogi_ml.pipeline.frozen_seeds", description=__doc__.splitlines()[0])
    ap.add_argument("out", help="path prefix of OUT.json and OUT.md")
    ap.add_argument("workloads", nargs="+", help="generated workloads (conf/workload names)")
    ap.add_argument("--runs", default="multirun/results/hybrid_frozen_seeds", help="the bundles and the runs' JSON")
    ap.add_argument("--learn-seed", type=int, default=0, help="the seed the bundles are learned on")
    ap.add_argument("--deploy-seed", type=int, default=1, help="the unseen seed they are deployed on")
    ap.add_argument("--set", action="append", default=[], help="a Hydra override for every run")
    ap.add_argument(
        "--scheme-set",
        action="append",
        default=[],
        metavar="POLICY=OVERRIDE",
        help="a Hydra override for one policy's runs (a frozen scheme's source: its bundle run)",
    )
    ap.add_argument("--frozen", default=",".join(FROZEN_SOURCES), help="the frozen schemes, comma-separated")
    ap.add_argument("--online", default=",".join(FROZEN_SEEDS_ONLINE), help="the online schemes on the unseen seed")
    a = ap.parse_args(argv)
    from dogi_ml.determinism import pin_process

    try:
        scheme_overrides: dict = {}
        for item in a.scheme_set:
            policy, sep, override = item.partition("=")
            if not sep or not policy or not override:
                raise ConfigError(
                    f"--scheme-set {item!r} names no policy and override",
                    "write --scheme-set POLICY=OVERRIDE, e.g. --scheme-set hybrid=++policy.params.lifetimes=select",
                )
            scheme_overrides.setdefault(policy, []).append(override)
        pin_process()  # may run this command line again, pinned: the command line's numerics
        table = frozen_seeds(
            a.workloads,
            a.runs,
            a.learn_seed,
            a.deploy_seed,
            overrides=a.set,
            scheme_overrides=scheme_overrides,
            online=tuple(p for p in a.online.split(",") if p),
            frozen=tuple(f for f in a.frozen.split(",") if f),
        )
    except DogiMLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    for p in write_frozen_seeds(a.out, table):
        print(f"wrote:   {p}")


if __name__ == "__main__":
    main()
