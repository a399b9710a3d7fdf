"""MINOS §3.3 oracles in the ``oracle`` command: one oracle on a workload (``oracle.kind=opmin|
segment|percentile|kmeans``), Table 1 (WAF per oracle and OP ratio, ``+experiment=minos_table1``)
and the model-vs-simulator checks of Figs. 3 and 5.

Simulation setup for the table and the checks (``oracle.table``): the logical capacity is the
trace's write working set and there is no prefill (``prefill: false``), so the live data the
simulator holds is the data whose invalidation times make ``F``; with a prefill, the first pass
over the space adds a capacity's worth of writes outside ``F`` (cold prefill blocks pile up in
the last stream) and the model's OP falls short (measured in ``notes/minos_oracles.md``).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np

from dogi_ml.markov import opmodel as om
from dogi_ml.oracles import minos_oracles as mo
from dogi_ml.oracles.annotate import annotate
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator

LABELS = {
    "segment": "Segment Oracle",
    "percentile": "Percentile Oracle",
    "kmeans": "K-Means Oracle",
    "opmin": "OP-Minimized Oracle",
}


class OracleBench:
    """One workload ready for oracle runs: compacted writes, annotation, ``F``."""

    def __init__(self, writes, sim: dict, capacity="wss", prefill=False):
        w = np.ascontiguousarray(writes, np.int64)
        if capacity == "wss":
            uniq, dense = np.unique(w, return_inverse=True)
            w, cap = dense.astype(np.int64), int(uniq.size)
        else:
            cap = int(capacity)
        self.writes, self.capacity, self.prefill = w, cap, bool(prefill)
        self.sim = {**sim, "prefill": self.prefill, "capacity_blocks": cap}
        self.seg = int(self.sim.get("segment_blocks", 512))
        self.gc_free = int(self.sim.get("gc_free_segments", 2))
        stream = np.concatenate([np.arange(cap, dtype=np.int64), w]) if self.prefill else w
        self.inv = annotate(stream)[0]
        self.cdf = mo.workload_cdf(self.inv, cap if self.prefill else 0, self.seg)

    def run(
        self,
        op_ratio: float,
        kind: str = "opmin",
        k: int = 5,
        thresholds_blocks=None,
        method: str = "algorithm1",
        victim: str | None = mo.DEFAULT_VICTIM,
    ) -> dict:
        params = {
            "kind": kind,
            "n_user_streams": k,
            "method": method,
            "victim": victim,
            "gc_free_segments": self.gc_free,
            "inv": self.inv,
            "thresholds": "search" if thresholds_blocks is None else [int(x) for x in thresholds_blocks],
        }
        pol = make_policy("kstream_oracle", None, **params)
        cfg = SimConfig.from_mapping({**self.sim, "op_ratio": float(op_ratio)})
        r = Simulator(pol, cfg, self.capacity, stream=self.writes).run(self.writes)
        return {
            "waf": float(r["waf"]),
            "gc_writes": int(r["gc_writes"]),
            "user_writes": int(r["user_writes"]),
            "thresholds_blocks": r["oracle_thresholds_blocks"],
            **{
                k2: r[k2]
                for k2 in (
                    "model_waf",
                    "model_op_segments",
                    "model_reclaim_age",
                    "model_waf1_op_segments",
                    "oracle_thresholds_segments",
                    "op_budget_segments",
                )
                if k2 in r
            },
        }


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def table1(bench: OracleBench, ops, kinds, k=5, method="algorithm1", log=print) -> dict:
    """WAF per oracle (rows) and OP ratio (columns), simulated and modelled."""
    out = {}
    for kind in kinds:
        out[kind] = {}
        for op in ops:
            t0 = time.perf_counter()
            r = bench.run(op, kind, k, method=method)
            r["seconds"] = round(time.perf_counter() - t0, 2)
            out[kind][f"{op:g}"] = r
            log(
                f"  {kind:10s} OP {op:.0%}: WAF {r['waf']:.4f} (model {_f(r.get('model_waf'))}) "
                f"thresholds {r['thresholds_blocks']}"
            )
    return out


def model_checks(bench: OracleBench, quantiles=(0.5, 0.7, 0.8, 0.9), taus=None, waf_target=1.2, log=print) -> dict:
    """Figs. 3 and 5: the model's WAF and OP against the paper's two-tier experiment replayed on
    the trace (:func:`~dogi_ml.oracles.minos_oracles.two_tier_replay`: Tier 1 streams reclaimed
    at their ages, Tier 2 unbounded) and against the simulator given that OP.

    Fig. 3 (across ``T``): one user stream reclaimed at ``T = F^{-1}(q)``, OP ``int_0^T F``.
    Fig. 5 (across ``tau``): two user streams, the hot one ``t <= tau`` reclaimed at ``tau``, the
    cold one at ``T`` where the WAF without never-rewritten blocks is ``waf_target``. The
    simulator gets ``op_ratio_for_budget(model OP)`` (one open segment per stream, GC reserve)
    and CB victims; migrated blocks go to its GC stream, inside the physical space, where the
    model's Tier 2 is free. Gaps are ``measured / model - 1``."""
    cdf, seg = bench.cdf, bench.seg
    rows = {"fig3": [], "fig5": []}

    def one(plan, thresholds_blocks, ages_blocks, fig, x):
        k = len(ages_blocks)
        op = mo.op_ratio_for_budget(plan.op_total, bench.capacity, seg, k + 1, bench.gc_free)
        rep = mo.two_tier_replay(bench.inv, thresholds_blocks, ages_blocks, seg)
        r = bench.run(op, "segment", k, thresholds_blocks=thresholds_blocks)
        model = float(plan.waf_excluding_never)
        row = {
            "x": x,
            "model_waf": model,
            "model_op_segments": float(plan.op_total),
            "model_op_ratio": float(plan.op_total) * seg / bench.capacity,
            "replay_waf": rep["waf"],
            "replay_op_segments": rep["op_segments"],
            "replay_waf_gap": rep["waf"] / model - 1.0,
            "replay_op_gap": rep["op_segments"] / plan.op_total - 1.0 if plan.op_total > 0 else None,
            "sim_op_ratio": op,
            "sim_waf": r["waf"],
            "sim_waf_gap": r["waf"] / model - 1.0,
        }
        rows[fig].append(row)
        log(
            f"  {fig} {x:>8.1f}: model WAF {model:.4f} OP {plan.op_total:7.1f} seg | two-tier replay "
            f"WAF {rep['waf']:.4f} ({row['replay_waf_gap']:+.2%}) OP {rep['op_segments']:7.1f} | "
            f"simulator WAF {r['waf']:.4f} ({row['sim_waf_gap']:+.2%})"
        )

    for q in quantiles:
        T = float(cdf.quantile(q * cdf.F[-1]))
        # stream 0 (t <= 0) stays empty: the single stream of §3.1
        one(om.plan(cdf, [0.0], T), [0], [0, round(T * seg)], "fig3", T)
    # the cold stream's reclaim age for waf_target counting only blocks that die (the simulator's
    # never-rewritten final contents are not migrated): 2 - F(T) - never_fraction = waf_target
    T = float(min(cdf.quantile(2.0 - waf_target - cdf.never_fraction), cdf.t_max))
    if taus is None:
        taus = cdf.quantile(np.array([0.3, 0.5, 0.6, 0.7, 0.75]) * float(cdf(T)))
    for tau in taus:
        tb = mo.thresholds_to_blocks([float(min(tau, T))], seg)
        one(om.two_stream_plan(cdf, tb[0] / seg, T), tb, [int(tb[0]), round(T * seg)], "fig5", tb[0] / seg)
    return rows


def _workload_writes(wcfg, cache_dir, log):
    from dogi_ml.pipeline.simulate import simulation_writes
    from dogi_ml.traces.workload import load_workload

    trace = load_workload(wcfg, cache_dir=cache_dir, log=log)
    return simulation_writes(trace, None)[0]


def run_minos_oracle(cfg, out_dir: Path) -> dict:
    """``python -m dogi_ml oracle +workload=NAME oracle.kind=opmin|segment|percentile|kmeans``:
    the oracle's thresholds at ``sim.op_ratio``, the model's plan and the simulated WAF."""
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.common import require_workload
    from dogi_ml.pipeline.simulate import simulation_writes, write_json
    from dogi_ml.report import console
    from dogi_ml.traces.workload import load_workload

    require_workload(cfg)
    o = cfg.oracle
    sim = OmegaConf.to_container(cfg.sim, resolve=True)
    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    writes, cap = simulation_writes(trace, sim.get("capacity_blocks"))
    bench = OracleBench(writes, sim, capacity=cap, prefill=bool(sim.get("prefill", True)))
    r = bench.run(float(sim["op_ratio"]), str(o.kind), int(o.n_user_streams), method=str(o.method))
    console.print(
        f"{LABELS[str(o.kind)]} on {cfg.workload.name} at OP {float(sim['op_ratio']):.0%}: "
        f"thresholds {r['thresholds_blocks']} blocks, simulated WAF {r['waf']:.4f}, "
        f"model WAF {_f(r.get('model_waf'))} within {r.get('op_budget_segments')} segments of OP "
        f"(WAF 1 needs {r.get('model_waf1_op_segments', float('nan')):.1f})"
    )
    out = write_json(
        {"workload": cfg.workload.name, "kind": str(o.kind), "op_ratio": float(sim["op_ratio"]), **r},
        out_dir / f"{o.kind}.json",
    )
    print(f"result: {out}")
    print(
        f"simulate with: python -m dogi_ml simulate +workload={cfg.workload.name} policy=kstream_oracle "
        f"policy.params.kind={o.kind} 'policy.params.thresholds={r['thresholds_blocks']}' "
        f"sim.op_ratio={float(sim['op_ratio']):g}"
    )
    return r


def run_minos_table(cfg, out_dir: Path) -> dict:
    """``python -m dogi_ml oracle +experiment=minos_table1``: Table 1 on every listed workload
    (files that are absent are skipped), the Figs. 3/5 checks on the first; JSON and a plot."""
    from omegaconf import OmegaConf

    from dogi_ml.report import console

    t = OmegaConf.to_container(cfg.oracle.table, resolve=True)
    sim = OmegaConf.to_container(cfg.sim, resolve=True)
    ops, kinds = [float(x) for x in t["ops"]], [str(x) for x in t["kinds"]]
    for kind in kinds:
        mo._check_kind(kind)
    k = int(cfg.oracle.n_user_streams)
    result = {
        "ops": ops,
        "kinds": kinds,
        "n_user_streams": k,
        "method": str(cfg.oracle.method),
        "victim": mo.DEFAULT_VICTIM,
        "workloads": {},
    }
    for name, w in t["workloads"].items():
        wcfg = dict(w["workload"])
        if wcfg.get("source") == "file" and not Path(wcfg["path"]).exists():
            console.print(f"[yellow]skip {name}: {wcfg['path']} is absent[/yellow]")
            result["workloads"][name] = {"skipped": f"{wcfg['path']} absent"}
            continue
        console.print(f"[bold]{name}[/bold]")
        writes = _workload_writes(wcfg, cfg.cache_dir, console.print)
        bench = OracleBench(writes, {**sim, **(w.get("sim") or {})}, capacity="wss", prefill=bool(t["prefill"]))
        entry = {
            "capacity_blocks": bench.capacity,
            "segment_blocks": bench.seg,
            "user_writes": int(writes.size),
            "never_fraction": bench.cdf.never_fraction,
            "paper": w.get("paper"),
            "waf1_op_ratio": {
                kd: float(mo.oracle_thresholds(kd, bench.cdf, k, None, str(cfg.oracle.method)).plan.op_total)
                * bench.seg
                / bench.capacity
                for kd in kinds
            },
            "table": table1(bench, ops, kinds, k, str(cfg.oracle.method), log=console.print),
        }
        if t.get("model_checks") and "checks" not in result:
            entry["model_checks"] = model_checks(bench, log=console.print)
            result["checks"] = name
        result["workloads"][name] = entry
    print_table(result)
    out = Path(cfg.get("output") or out_dir / "minos_table1.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=float))
    png = plot_table(result, out.with_suffix(".png"))
    print(f"result: {out}\nplot:   {png}")
    return result


def ordering_holds(table: dict, op: str) -> bool:
    """OP-Min < K-Means < Percentile < Segment (WAF) at OP ``op``, where all four ran."""
    order = [k for k in ("opmin", "kmeans", "percentile", "segment") if k in table]
    wafs = [table[k][op]["waf"] for k in order]
    return all(a < b for a, b in itertools.pairwise(wafs))


def print_table(result: dict) -> None:
    from rich.table import Table

    from dogi_ml.report import console

    for name, e in result["workloads"].items():
        if "table" not in e:
            continue
        tab = Table(title=f"MINOS Table 1 - {name} (WAF; model in brackets, - = over budget; paper / gap)")
        tab.add_column("Policy")
        for op in result["ops"]:
            tab.add_column(f"OP {op:.0%}", justify="right")
        paper = e.get("paper") or {}
        for kind in result["kinds"]:
            cells = []
            for op in result["ops"]:
                r = e["table"][kind][f"{op:g}"]
                cell = f"{r['waf']:.3f} [{_f(r.get('model_waf'))}]"
                if kind in paper:
                    p = float(paper[kind][result["ops"].index(op)])
                    cell += f"\n{p:.3f} / {r['waf'] - p:+.3f}"
                cells.append(cell)
            tab.add_row(LABELS[kind], *cells)
        ok = [ordering_holds(e["table"], f"{op:g}") for op in result["ops"]]
        tab.caption = "ordering OP-Min < K-Means < Percentile < Segment: " + " ".join("yes" if x else "NO" for x in ok)
        console.print(tab)


def plot_table(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, e in result["workloads"].items() if "table" in e]
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(4.2 * max(1, len(names)), 3.6), squeeze=False)
    ops = [100 * x for x in result["ops"]]
    for ax, name in zip(axes[0], names):
        e = result["workloads"][name]
        for kind in result["kinds"]:
            (line,) = ax.plot(
                ops, [e["table"][kind][f"{op:g}"]["waf"] for op in result["ops"]], "o-", label=LABELS[kind]
            )
            if e.get("paper") and kind in e["paper"]:
                ax.plot(ops, e["paper"][kind], "x--", color=line.get_color(), alpha=0.6)
        ax.set_title(name)
        ax.set_xlabel("OP ratio (%)")
        ax.set_ylabel("WAF (x--: paper)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
