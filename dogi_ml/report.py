"""Human summaries in the terminal (rich tables) and the multirun comparison table."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(highlight=False)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if abs(v) >= 1e6:
            return f"{v:,.0f}"
        return f"{v:.4f}" if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def print_sim_summary(r: dict) -> None:
    """One run: headline numbers, then per-group traffic."""
    head = Table(title=f"{r.get('workload', '?')} / {r['policy']} / victim {r['victim']}", show_header=False)
    head.add_column(style="bold")
    head.add_column(justify="right")
    aps = r.get("appends_per_second")
    rows = [
        ("WAF", r["waf"]), ("user writes", r["user_writes"]), ("GC writes", r["gc_writes"]),
        ("reclaimed segments", r["reclaimed_segments"]), ("victim valid ratio", r["victim_valid_ratio"]),
        ("capacity (blocks)", r["capacity_blocks"]), ("physical segments", r["physical_segments"]),
        ("state memory (MiB)", r["state_bytes"] / 2**20), ("elapsed (s)", r["elapsed_s"]),
        ("appends/s", aps),
    ]
    for k, v in rows:
        head.add_row(k, _fmt(v))
    console.print(head)
    groups = Table(title="per group")
    for col in ("group", "user writes", "GC writes", "reclaimed", "victim valid ratio"):
        groups.add_column(col, justify="right")
    for g in r["groups"]:
        groups.add_row(str(g["group"]), _fmt(g["user_writes"]), _fmt(g["gc_writes"]),
                       _fmt(g["reclaimed_segments"]), _fmt(g["victim_valid_ratio"]))
    console.print(groups)
    if aps:
        console.print(f"throughput: {aps / 1e6:.1f} M block appends/s "
                      f"({r['user_writes'] + r['gc_writes']:,} appends in {r['elapsed_s']:.2f} s)")


def print_train_summary(s: dict) -> None:
    """The end-of-run table of ``train``."""
    t = Table(title=f"train: {s['model']} on {s['workload']}", show_header=False)
    for key, label in (("accuracy", "accuracy (test)"), ("macro_f1", "macro-F1 (test)"),
                       ("majority_baseline", "majority-class baseline"), ("latency_ns_per_block", "latency ns/block (batch 128)"),
                       ("latency_ns_per_block_batch1", "latency ns/block (batch 1)"), ("train_seconds", "training s"),
                       ("n_parameters", "parameters"), ("epochs_run", "epochs")):
        if s.get(key) is not None:
            t.add_row(label, _fmt(s[key]))
    console.print(t)
    pc = Table(title="per-class accuracy (test)")
    names = s.get("class_names") or []
    for n in names:
        pc.add_column(n, justify="right")
    pc.add_row(*[_fmt(s["per_class_accuracy"].get(i, s["per_class_accuracy"].get(str(i)))) for i in range(len(names))])
    console.print(pc)


def print_feature_report(rows: list[dict], selected: list[str]) -> None:
    """DOGI Table 3's shape: each candidate feature's |Pearson r| and mutual information."""
    t = Table(title="feature relevance (training rows; * = model input)")
    for col in ("feature", "description", "PCC", "MI"):
        t.add_column(col, justify="right" if col in ("PCC", "MI") else "left")
    for r in rows:
        mark = "*" if r["feature"] in selected else " "
        t.add_row(f"{mark}{r['feature']}", r["description"], f"{r['pcc']:.3f}", f"{r['mi']:.3f}")
    console.print(t)


def print_stats(stats: dict, title: str = "trace") -> None:
    t = Table(title=title, show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    for k, v in stats.items():
        if isinstance(v, (dict, list)):
            continue
        t.add_row(str(k), _fmt(v))
    console.print(t)


def comparison_rows(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        rows.append({"workload": r.get("workload"), "policy": r["policy"], "victim": r["victim"],
                     "waf": r["waf"], "gc_writes": r["gc_writes"], "user_writes": r["user_writes"],
                     "appends_per_second": r.get("appends_per_second")})
    return sorted(rows, key=lambda x: (str(x["workload"]), x["waf"] if x["waf"] is not None else 1e9))


def print_comparison(results: list[dict], title: str = "comparison") -> None:
    t = Table(title=title)
    for col in ("workload", "policy", "victim", "WAF", "GC writes", "M appends/s"):
        t.add_column(col, justify="right" if col not in ("workload", "policy", "victim") else "left")
    for row in comparison_rows(results):
        aps = row["appends_per_second"]
        t.add_row(str(row["workload"]), row["policy"], row["victim"], _fmt(row["waf"]),
                  _fmt(row["gc_writes"]), f"{aps / 1e6:.1f}" if aps else "-")
    console.print(t)


def plot_results(results: list[dict], path: Path, title: str = "") -> Path:
    """Instantaneous WAF over time (one line per run) and final WAF per run, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    labels = []
    for r in results:
        label = f"{r['policy']}/{r['victim']}" + (f" {r['workload']}" if len({x.get('workload') for x in results}) > 1 else "")
        labels.append(label)
        s = r.get("waf_series") or {}
        cap = r.get("capacity_blocks") or 1
        if s.get("t"):
            ax_t.plot([x / cap for x in s["t"]], s["waf"], label=label, lw=1.2)
    ax_t.set_xlabel("user writes / capacity (prefill included)")
    ax_t.set_ylabel("instantaneous WAF")
    ax_t.grid(alpha=0.3)
    if labels:
        ax_t.legend(fontsize=8)
    wafs = [r["waf"] or 0 for r in results]
    ax_b.barh(labels, wafs, color="tab:blue")
    for i, w in enumerate(wafs):
        ax_b.text(w, i, f" {w:.3f}", va="center", fontsize=8)
    ax_b.set_xlabel("WAF")
    ax_b.invert_yaxis()
    fig.suptitle(title or (results[0].get("workload", "") if results else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


try:  # the Hydra callback is optional: the table also prints from `collect_results`
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


class ComparisonTable(Callback):
    """Hydra callback: after a ``-m`` sweep, print one table of every job's result and write
    ``comparison.json`` in the sweep directory."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if not results:
            return
        print_comparison(results, title=f"comparison ({len(results)} runs)")
        out = sweep_dir / "comparison.json"
        out.write_text(json.dumps(comparison_rows(results), indent=2))
        png = plot_results(results, sweep_dir / "comparison.png", title=f"comparison ({len(results)} runs)")
        console.print(f"comparison: {out}\nplot:       {png}")


def collect_results(sweep_dir: Path) -> list[dict]:
    results = []
    for path in sorted(Path(sweep_dir).glob("*/result.json")):
        results.append(json.loads(path.read_text()))
    return results
