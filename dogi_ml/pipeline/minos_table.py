"""MINOS §3.3 oracles in the ``oracle`` command: one oracle on a workload (``oracle.kind=opmin|
segment|percentile|kmeans|opbudget``), Table 1 (WAF per oracle and OP ratio,
``+experiment=minos_table1``) and the model-vs-simulator checks of Figs. 3 and 5.

Table 1 runs every workload at each of its segment sizes (``oracle.table.workloads.NAME.
segment_blocks``) in each device mode (``oracle.table.modes``): ``empty`` (no prefill, so the live
data the simulator holds is the data whose invalidation times make ``F``) and ``prefilled`` (the
logical space written once first, as the other experiments run; the prefill blocks are placed by
the same thresholds on their own invalidation times, ``F`` stays the measured writes'). The
logical capacity is the trace's write working set. The Figs. 3/5 checks run on the first
workload's first segment size, from an empty device.

The table's Markdown and plot are drawn from its JSON alone (the plot carries the JSON's digest,
:func:`dogi_ml.plotting.data_digest`, in the PNG's ``Source`` text); ::

    python -m dogi_ml.pipeline.minos_table --redraw PREFIX

rewrites ``PREFIX.md`` and ``PREFIX.png`` from ``PREFIX.json`` (no oracle run needed).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from dogi_ml.determinism import numerics_record
from dogi_ml.errors import ConfigError
from dogi_ml.markov import opmodel as om
from dogi_ml.oracles import minos_oracles as mo
from dogi_ml.oracles.annotate import annotate
from dogi_ml.pipeline.common import sim_config
from dogi_ml.plotting import data_digest, redraw_source, redraw_stem, save_figure
from dogi_ml.policies import make_policy
from dogi_ml.sim import Simulator

LABELS = {
    "segment": "Segment Oracle",
    "percentile": "Percentile Oracle",
    "kmeans": "K-Means Oracle",
    "opmin": "OP-Minimized Oracle",
    "opbudget": "OP-budget plan (not the paper's)",
}
#: Table 1's claim, best first: OP-Min < K-Means < Percentile < Segment
ORDER = ("opmin", "kmeans", "percentile", "segment")
#: device modes of the table: whether the logical space is written once before the trace
MODES = {"empty": False, "prefilled": True}
#: the keys an ``oracle.table`` and each of its workloads may hold
TABLE_KEYS = {"ops", "kinds", "modes", "model_checks", "workloads"}
WORKLOAD_KEYS = {"workload", "segment_blocks", "sim", "paper"}
#: sim keys the table sets itself, per workload and mode: the experiment leaves them null, so a
#: value here came from the user, and is refused rather than overridden
TABLE_SIM_KEYS = {
    "segment_blocks": "oracle.table.workloads.NAME.segment_blocks (a list)",
    "prefill": "oracle.table.modes (empty, prefilled)",
    "capacity_blocks": "nothing: the table runs at each trace's write working set",
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
        percentile_of: str = "writes",
    ) -> dict:
        params = {
            "kind": kind,
            "n_user_streams": k,
            "method": method,
            "percentile_of": percentile_of,
            "inv": self.inv,
            "thresholds": "search" if thresholds_blocks is None else [int(x) for x in thresholds_blocks],
        }
        pol = make_policy("kstream_oracle", None, victim=victim, **params)
        cfg = sim_config({**self.sim, "op_ratio": float(op_ratio)})
        r = Simulator(pol, cfg, self.capacity, stream=self.writes).run(self.writes)
        return {
            "waf": float(r["waf"]),
            "gc_writes": int(r["gc_writes"]),
            "user_writes": int(r["user_writes"]),
            "victim": r["victim"],
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


def table1(bench: OracleBench, ops, kinds, k=5, method="algorithm1", percentile_of="writes", log=print) -> dict:
    """WAF per oracle (rows) and OP ratio (columns), simulated and modelled."""
    out = {}
    for kind in kinds:
        out[kind] = {}
        for op in ops:
            r = bench.run(op, kind, k, method=method, percentile_of=percentile_of)
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
    """``python -m dogi_ml oracle +workload=NAME oracle.kind=opmin|segment|percentile|kmeans|opbudget``:
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
    prefill = bool(sim.get("prefill", True))
    bench = OracleBench(writes, sim, capacity=cap, prefill=prefill)
    kind, op = str(o.kind), float(sim["op_ratio"])
    r = bench.run(op, kind, int(o.n_user_streams), method=str(o.method), percentile_of=str(o.percentile_of))
    console.print(
        f"{LABELS[kind]} on {cfg.workload.name} at OP {op:.0%} ({'prefilled' if prefill else 'empty'} device, "
        f"{bench.seg}-block segments): thresholds {r['thresholds_blocks']} blocks, simulated WAF {r['waf']:.4f}, "
        f"model WAF {_f(r.get('model_waf'))} within {r.get('op_budget_segments')} segments of OP "
        f"(WAF 1 needs {r.get('model_waf1_op_segments', float('nan')):.1f})"
    )
    out = write_json(
        {
            "workload": cfg.workload.name,
            "kind": kind,
            "method": str(o.method),
            "percentile_of": str(o.percentile_of),
            "op_ratio": op,
            "segment_blocks": bench.seg,
            "prefill": prefill,
            "capacity_blocks": bench.capacity,
            **r,
        },
        Path(cfg.output) if cfg.get("output") else out_dir / f"{kind}.json",  # output=PATH.json: the result
    )
    print(f"result: {out}")
    print(
        f"simulate with: python -m dogi_ml simulate +workload={cfg.workload.name} policy=kstream_oracle "
        f"policy.params.kind={kind} 'policy.params.thresholds={r['thresholds_blocks']}' "
        f"sim.op_ratio={op:g} sim.segment_blocks={bench.seg} sim.prefill={str(prefill).lower()}"
    )
    return r


def _check_table_config(t: dict, sim: dict) -> None:
    """Every key of ``oracle.table`` known, no sim key the table sets itself given by the user."""
    unknown = set(t) - TABLE_KEYS
    if unknown:
        raise ConfigError(f"unknown oracle.table key(s) {sorted(unknown)}", f"known: {', '.join(sorted(TABLE_KEYS))}")
    for mode in t["modes"]:
        if mode not in MODES:
            raise ConfigError(f"unknown oracle.table.modes entry {mode!r}", f"use {', '.join(MODES)}")
    for kind in t["kinds"]:
        mo._check_kind(kind)
    for key, where in TABLE_SIM_KEYS.items():
        if sim.get(key) is not None:
            raise ConfigError(f"sim.{key}={sim[key]} is set, but Table 1 sets it per run", f"set {where}")
    for name, w in t["workloads"].items():
        unknown = set(w) - WORKLOAD_KEYS
        if unknown:
            raise ConfigError(
                f"unknown key(s) {sorted(unknown)} in oracle.table.workloads.{name}",
                f"known: {', '.join(sorted(WORKLOAD_KEYS))}",
            )
        clash = set(w.get("sim") or {}) & set(TABLE_SIM_KEYS)
        if clash:
            raise ConfigError(
                f"oracle.table.workloads.{name}.sim sets {sorted(clash)}, which the table sets per run",
                f"set {'; '.join(TABLE_SIM_KEYS[k] for k in sorted(clash))}",
            )
        seg = w.get("segment_blocks")
        if not seg or not all(isinstance(s, int) and s > 0 for s in seg):
            raise ConfigError(
                f"oracle.table.workloads.{name}.segment_blocks must be a list of positive block counts, got {seg!r}",
                "e.g. segment_blocks: [512, 128]",
            )


def run_minos_table(cfg, out_dir: Path) -> dict:
    """``python -m dogi_ml oracle +experiment=minos_table1``: Table 1 on every listed workload
    (files that are absent are skipped) at each of its segment sizes in each device mode, the
    Figs. 3/5 checks on the first; JSON, Markdown and a plot."""
    from omegaconf import OmegaConf

    from dogi_ml.report import console

    t = OmegaConf.to_container(cfg.oracle.table, resolve=True)
    sim = OmegaConf.to_container(cfg.sim, resolve=True)
    _check_table_config(t, sim)
    ops, kinds, modes = [float(x) for x in t["ops"]], [str(x) for x in t["kinds"]], [str(x) for x in t["modes"]]
    k, method, percentile_of = int(cfg.oracle.n_user_streams), str(cfg.oracle.method), str(cfg.oracle.percentile_of)
    mo._check_percentile_of(percentile_of)
    result = {
        "ops": ops,
        "kinds": kinds,
        "modes": modes,
        "n_user_streams": k,
        "method": method,
        "percentile_of": percentile_of,
        "victim": mo.DEFAULT_VICTIM,
        "gc_free_segments": int(sim["gc_free_segments"]),
        "rows": [],
        "skipped": {},
    }
    for name, w in t["workloads"].items():
        wcfg = dict(w["workload"])
        if wcfg.get("source") == "file" and not Path(wcfg["path"]).exists():
            console.print(f"[yellow]skip {name}: {wcfg['path']} is absent[/yellow]")
            result["skipped"][name] = f"{wcfg['path']} absent"
            continue
        writes = _workload_writes(wcfg, cfg.cache_dir, console.print)
        for seg, mode in itertools.product(w["segment_blocks"], modes):
            console.print(f"[bold]{name}[/bold], {mode} device, {seg}-block segments")
            run_sim = {**sim, **(w.get("sim") or {}), "segment_blocks": int(seg)}
            bench = OracleBench(writes, run_sim, capacity="wss", prefill=MODES[mode])
            row = {
                "workload": name,
                "mode": mode,
                "segment_blocks": int(seg),
                "capacity_blocks": bench.capacity,
                "segments_per_capacity": bench.capacity / int(seg),
                "user_writes": int(writes.size),
                "never_fraction": bench.cdf.never_fraction,
                "paper": w.get("paper"),
                "waf1_op_ratio": {
                    kd: float(mo.oracle_thresholds(kd, bench.cdf, k, None, method, percentile_of).plan.op_total)
                    * bench.seg
                    / bench.capacity
                    for kd in kinds
                },
                "table": table1(bench, ops, kinds, k, method, percentile_of, log=console.print),
            }
            row["ordering"] = {f"{op:g}": ordering_relations(row["table"], f"{op:g}") for op in ops}
            if t.get("model_checks") and "checks" not in result and mode == "empty":
                row["model_checks"] = model_checks(bench, log=console.print)
                result["checks"] = {"workload": name, "mode": mode, "segment_blocks": int(seg)}
            result["rows"].append(row)
    result["numerics"] = numerics_record()  # the float code path that made it (dogi_ml.determinism)
    print_table(result)
    out = Path(cfg.get("output") or out_dir / "minos_table1.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=float) + "\n")
    # drawn from the result as read back, so the figure's digest is the file's
    md, png = _draw(out, json.loads(out.read_text()))
    print(f"result: {out}\ntable:  {md}\nplot:   {png}")
    return result


def ordering_relations(table: dict, op: str) -> str:
    """How Table 1's claimed order OP-Min < K-Means < Percentile < Segment came out at OP ``op``,
    over the oracles that ran: one of ``<``, ``=`` (exactly equal WAF) or ``>`` between each
    neighbouring pair, e.g. ``"<<<"`` (holds), ``"=<<"`` (OP-Min ties K-Means)."""
    order = [k for k in ORDER if k in table]
    wafs = [table[k][op]["waf"] for k in order]
    return "".join("<" if a < b else "=" if a == b else ">" for a, b in itertools.pairwise(wafs))


def ordering_holds(table: dict, op: str) -> bool:
    """OP-Min < K-Means < Percentile < Segment (WAF), strictly, at OP ``op``, where all four ran."""
    return set(ordering_relations(table, op)) <= {"<"}


def _row_title(row: dict) -> str:
    return (
        f"{row['workload']}, {row['mode']} device, {row['segment_blocks']}-block segments "
        f"({row['segments_per_capacity']:.0f} per capacity)"
    )


def print_table(result: dict) -> None:
    from rich.table import Table

    from dogi_ml.report import console

    for row in result["rows"]:
        tab = Table(title=f"MINOS Table 1 - {_row_title(row)} (WAF; model in brackets, - = over budget; paper / gap)")
        tab.add_column("Policy")
        for op in result["ops"]:
            tab.add_column(f"OP {op:.0%}", justify="right")
        paper = row.get("paper") or {}
        for kind in result["kinds"]:
            cells = []
            for op in result["ops"]:
                r = row["table"][kind][f"{op:g}"]
                cell = f"{r['waf']:.3f} [{_f(r.get('model_waf'))}]"
                if kind in paper:
                    p = float(paper[kind][result["ops"].index(op)])
                    cell += f"\n{p:.3f} / {r['waf'] - p:+.3f}"
                cells.append(cell)
            tab.add_row(LABELS[kind], *cells)
        tab.caption = "OP-Min ? K-Means ? Percentile ? Segment: " + " ".join(
            row["ordering"][f"{op:g}"] for op in result["ops"]
        )
        console.print(tab)


def markdown(result: dict) -> str:
    """Table 1 as Markdown: one line per (workload, mode, segment size, oracle), the paper's row
    (bold) after each workload's, and the ordering per OP."""
    ops = result["ops"]
    heads = " | ".join(f"OP {100 * op:g}%" for op in ops)
    lines = [
        "# MINOS Table 1 - WAF of the four oracles (simulated)",
        "",
        f"{result['n_user_streams']} user streams + 1 GC stream, `{result['victim']}` victims, GC reserve "
        f"{result['gc_free_segments']} segments, OP-Min by `{result['method']}`, Percentile at i/K of the "
        f"{'measured writes' if result['percentile_of'] == 'writes' else 'ever-invalidated writes'}; capacity = "
        "each trace's write working set. Generated by `python -m dogi_ml oracle +experiment=minos_table1 "
        "output=docs/results/minos_table1.json`.",
        "",
        f"| workload | mode | segment (blocks) | segments per capacity | oracle | {heads} |",
        "|---|---|---|---|---|" + "---|" * len(ops),
    ]
    rows = result["rows"]
    for i, row in enumerate(rows):
        where = f"| {row['workload']} | {row['mode']} | {row['segment_blocks']} | {row['segments_per_capacity']:.0f} |"
        for kind in result["kinds"]:
            cells = " | ".join(f"{row['table'][kind][f'{op:g}']['waf']:.3f}" for op in ops)
            lines.append(f"{where} {LABELS[kind]} | {cells} |")
        last_of_workload = i + 1 == len(rows) or rows[i + 1]["workload"] != row["workload"]
        for kind in result["kinds"] if last_of_workload else ():
            if kind in (row.get("paper") or {}):
                cells = " | ".join(f"**{float(x):.3f}**" for x in row["paper"][kind])
                lines.append(f"| {row['workload']} | paper (Table 1) | | | {LABELS[kind]} | {cells} |")
    lines += [
        "",
        "## Ordering OP-Min < K-Means < Percentile < Segment",
        "",
        "Per OP, the relation between each neighbouring pair in that order (`<` as claimed, `=` equal WAF, "
        "`>` reversed).",
        "",
        f"| workload | mode | segment (blocks) | {heads} |",
        "|---|---|---|" + "---|" * len(ops),
    ]
    for row in result["rows"]:
        cells = " | ".join(
            "holds" if ordering_holds(row["table"], f"{op:g}") else f"`{row['ordering'][f'{op:g}']}`" for op in ops
        )
        lines.append(f"| {row['workload']} | {row['mode']} | {row['segment_blocks']} | {cells} |")
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(f"{n} ({why})" for n, why in result["skipped"].items())]
    return "\n".join(lines) + "\n"


def plot_table(result: dict, path: Path) -> Path:
    """WAF over the OP ratio per oracle, one panel per row (the paper's values dashed); the figure
    carries the digest of ``result``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    n = max(1, len(rows))
    cols = min(4, n)
    nrows = -(-n // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.6 * nrows), squeeze=False)
    ops = [100 * x for x in result["ops"]]
    for ax, row in zip(axes.flat, rows):
        for kind in result["kinds"]:
            (line,) = ax.plot(
                ops, [row["table"][kind][f"{op:g}"]["waf"] for op in result["ops"]], "o-", label=LABELS[kind]
            )
            if row.get("paper") and kind in row["paper"]:
                ax.plot(ops, row["paper"][kind], "x--", color=line.get_color(), alpha=0.6)
        ax.set_title(f"{row['workload']}\n{row['mode']}, {row['segment_blocks']}-block segments", fontsize=9)
        ax.set_xlabel("OP ratio (%)")
        ax.set_ylabel("WAF (x--: paper)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(rows) :]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize=7)
    return save_figure(fig, path, dpi=120, source=data_digest(result))


#: the keys of a Table 1 result :func:`markdown` and :func:`plot_table` read
DRAWN_KEYS = (
    "ops",
    "kinds",
    "rows",
    "n_user_streams",
    "victim",
    "gc_free_segments",
    "method",
    "percentile_of",
    "skipped",
)


def _draw(js: Path, result: dict) -> tuple[Path, Path]:
    """The Markdown and the plot beside the JSON file ``js`` of ``result``."""
    md = js.with_suffix(".md")
    md.write_text(markdown(result))
    return md, plot_table(result, js.with_suffix(".png"))


def figure_data(prefix: str | Path) -> dict:
    """The Table 1 result ``PREFIX.json`` holds (:func:`run_minos_table` wrote it), as
    :func:`markdown` and :func:`plot_table` draw it, or a clear exit: a missing file, or one
    without the table's keys."""
    _, js, result = redraw_source(prefix)
    missing = [k for k in DRAWN_KEYS if not isinstance(result, dict) or k not in result]
    if missing:
        raise SystemExit(
            f"error: --redraw {prefix}: {js} has no {', '.join(missing)}, so it is not a Table 1 result; "
            "rebuild it: python -m dogi_ml oracle +experiment=minos_table1 output=PREFIX.json"
        )
    return result


def redraw(prefix: str | Path) -> tuple[Path, Path]:
    """``PREFIX.md`` and ``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`figure_data`)."""
    return _draw(redraw_stem(prefix).with_suffix(".json"), figure_data(prefix))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m dogi_ml.pipeline.minos_table",
        description="redraw MINOS Table 1 (PREFIX.md, PREFIX.png) from its result (PREFIX.json) alone",
    )
    ap.add_argument("--redraw", metavar="PREFIX", required=True, help="PREFIX.md and PREFIX.png from PREFIX.json")
    a = ap.parse_args(argv)
    for path in redraw(a.redraw):
        print(f"wrote:   {path}")


if __name__ == "__main__":
    main()
