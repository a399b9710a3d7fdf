"""Human summaries in the terminal (rich tables) and the multirun comparison table.

The DOGI presets' paper figure (``PREFIX.png`` beside ``PREFIX.json``, :func:`write_paper_files`)
carries the digest of the summary it draws (:func:`dogi_ml.plotting.data_digest`, the PNG's
``Source`` text); ::

    python -m dogi_ml.report --redraw PREFIX [--title T]

redraws ``PREFIX.png`` from ``PREFIX.json`` alone (no sweep needed). The title is a run input the JSON
does not hold (the preset's ``title``): the redraw keeps the one the figure recorded
(:func:`dogi_ml.plotting.figure_title`) unless ``--title`` gives another. Fig. 12b, DOGI's GC
destinations (``PREFIX_gc_destinations.png``), is drawn from ``PREFIX_gc_destinations.json`` (each
DOGI run's matrix, with its workload, scheme and WAF) and redraws the same way
(``--redraw PREFIX_gc_destinations``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dogi_ml.callbacks import reported
from dogi_ml.plotting import data_digest, figure_title, redraw_source, redraw_stem, save_figure

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
    head = Table(title=escape(f"{r.get('workload', '?')} / {scheme_of(r)} / victim {r['victim']}"), show_header=False)
    head.add_column(style="bold")
    head.add_column(justify="right")
    aps = r.get("appends_per_second")
    rows = [
        ("WAF", r["waf"]),
        ("user writes", r["user_writes"]),
        ("GC writes", r["gc_writes"]),
        ("reclaimed segments", r["reclaimed_segments"]),
        ("victim valid ratio", r["victim_valid_ratio"]),
        ("capacity (blocks)", r["capacity_blocks"]),
        ("physical segments", r["physical_segments"]),
        ("state memory (MiB)", r["state_bytes"] / 2**20),
        ("elapsed (s)", r["elapsed_s"]),
        ("appends/s", aps),
    ]
    for k, v in rows:
        head.add_row(k, _fmt(v))
    console.print(head)
    groups = Table(title="per group")
    for col in ("group", "user writes", "GC writes", "reclaimed", "victim valid ratio"):
        groups.add_column(col, justify="right")
    for g in r["groups"]:
        groups.add_row(
            str(g["group"]),
            _fmt(g["user_writes"]),
            _fmt(g["gc_writes"]),
            _fmt(g["reclaimed_segments"]),
            _fmt(g["victim_valid_ratio"]),
        )
    console.print(groups)
    if aps:
        console.print(
            f"throughput: {aps / 1e6:.1f} M block appends/s "
            f"({r['user_writes'] + r['gc_writes']:,} appends in {r['elapsed_s']:.2f} s)"
        )


def print_train_summary(s: dict) -> None:
    """The end-of-run table of ``train``: accuracies, then recall and precision per class (over
    hot, c1..c10 with DOGI labels, where the model's classes fold truly hot rows into c1)."""
    t = Table(title=f"train: {s['model']} on {s['workload']}", show_header=False)
    hot = s.get("accuracy_all_classes") is not None
    rows = (
        ("accuracy_all_classes", "accuracy, all classes incl. hot (test; Fig. 11)"),
        ("accuracy_nonhot", "accuracy, truly non-hot rows (test)"),
        ("hot_row_share", "truly hot rows (test share)"),
        ("accuracy", "accuracy, model classes: hot rows as c1 (test)" if hot else "accuracy (test)"),
        ("macro_f1", "macro-F1 (test)"),
        ("majority_baseline", "majority-class baseline"),
        ("latency_ns_per_block", "latency ns/block (batch 128)"),
        ("latency_ns_per_block_batch1", "latency ns/block (batch 1)"),
        ("train_seconds", "training s"),
        ("n_parameters", "parameters"),
        ("epochs_run", "epochs"),
    )
    for key, label in rows:
        if s.get(key) is not None:
            t.add_row(label, _fmt(s[key]))
    console.print(t)
    per_class = s.get("per_class") or {}
    pc = Table(
        title="per-class recall and precision (test"
        + ("; true class by invalidation time, hot included)" if hot else ")"),
        caption="recall: right / rows truly of the class; precision: right / rows predicted as it",
    )
    for col in ("class", "recall", "precision", "true rows"):
        pc.add_column(col, justify="left" if col == "class" else "right")
    for n in per_class.get("recall", {}):
        pc.add_row(n, *[_fmt(per_class[key].get(n)) for key in ("recall", "precision", "support")])
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


# -- effective settings ---------------------------------------------------------------------------
#: the effective settings (``result["settings"]``, :meth:`dogi_ml.sim.Simulator.result`) a comparison
#: shows as columns when runs of one workload differ in them
COMPARED_SETTINGS = (
    "victim",
    "victim_d",
    "gc_trigger",
    "gc_garbage_ratio",
    "gc_free_segments",
    "gc_high_free_segments",
    "gc_background",
    "op_ratio",
    "segment_blocks",
    "capacity_blocks",
    "prefill",
    "raid_chunk_blocks",
    "raid_chunk_timeout_us",
    "arrival",
    "numerics",
)


def settings_of(r: dict) -> dict:
    """A result's effective settings (and the numerics level it ran at); for a result written
    before they were recorded, what its top-level fields tell (victim, OP, segment size,
    capacity, prefill)."""
    if r.get("settings"):
        out = dict(r["settings"])
    else:
        cfg = r.get("config") or {}
        out = {
            "victim": r.get("victim"),
            "gc_trigger": cfg.get("gc_trigger"),
            "op_ratio": r.get("op_ratio"),
            "segment_blocks": r.get("segment_blocks"),
            "capacity_blocks": r.get("capacity_blocks"),
            "prefill": bool(r.get("prefill_blocks")) if "prefill_blocks" in r else None,
        }
    if r.get("numerics"):  # the floating-point code path (dogi_ml.determinism): portable, avx2 or native
        out["numerics"] = r["numerics"].get("mode")
    return out


def differing_settings(results: list[dict], exclude=()) -> list[str]:
    """The compared settings (:data:`COMPARED_SETTINGS`, in that order) whose values differ between
    runs of the same workload, less ``exclude`` (settings a report's layout already shows)."""
    seen: dict = {}
    for r in results:
        st = settings_of(r)
        for k in COMPARED_SETTINGS:
            seen.setdefault((k, str(r.get("workload"))), set()).add(json.dumps(st.get(k), sort_keys=True))
    return [
        k for k in COMPARED_SETTINGS if k not in exclude and any(len(v) > 1 for (key, _), v in seen.items() if key == k)
    ]


def settings_cell(v: Any) -> str:
    """A setting in a table cell (a dict such as ``gc_background`` as ``k=v`` pairs)."""
    if isinstance(v, dict):
        return " ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:g}"
    return _fmt(v)


def settings_table_rows(results: list[dict], keys: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The distinct ``(workload, scheme, cells)`` of the runs, one cell per key, sorted."""
    rows = {
        (str(r.get("workload")), scheme_of(r), tuple(settings_cell(settings_of(r).get(k)) for k in keys))
        for r in results
    }
    return sorted(rows)


def print_differing_settings(results: list[dict], out: Console | None = None, exclude=()) -> list[str]:
    """The table of settings that differ between runs of one workload (nothing if none do), less
    ``exclude``; the keys shown. For comparisons whose layout has no column per setting."""
    keys = differing_settings(results, exclude)
    if keys:
        t = Table(title="settings that differ between runs of a workload (effective values)")
        for col in ("workload", "scheme", *keys):
            t.add_column(col)
        for w, sc, cells in settings_table_rows(results, keys):
            t.add_row(escape(w), escape(sc), *[escape(c) for c in cells])
        (out or console).print(t)
    return keys


def settings_markdown(results: list[dict], exclude=()) -> str:
    """:func:`print_differing_settings` as a Markdown section ("" if no setting differs)."""
    keys = differing_settings(results, exclude)
    if not keys:
        return ""
    lines = [
        "",
        "Settings that differ between runs of a workload (effective values, as each result records them):",
        "",
        "| workload | scheme | " + " | ".join(keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    lines += [f"| {w} | {sc} | " + " | ".join(cells) + " |" for w, sc, cells in settings_table_rows(results, keys)]
    return "\n".join(lines) + "\n"


def comparison_rows(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        rows.append(
            {
                "workload": r.get("workload"),
                "policy": r["policy"],
                "scheme": scheme_of(r),  # the policy with its switches, e.g. "minos[agg1]"
                "victim": r["victim"],
                "waf": r["waf"],
                "gc_writes": r["gc_writes"],
                "user_writes": r["user_writes"],
                "appends_per_second": r.get("appends_per_second"),
                "settings": settings_of(r),
            }
        )
    return sorted(rows, key=lambda x: (str(x["workload"]), x["waf"] if x["waf"] is not None else 1e9))


def print_comparison(results: list[dict], title: str = "comparison") -> None:
    """One row per run; beside the victim rule, a column for every effective setting the runs of
    a workload differ in (OP, segment size, GC trigger, prefill, ...)."""
    extra = [k for k in differing_settings(results) if k != "victim"]
    t = Table(title=title)
    for col in ("workload", "scheme", "victim", *extra, "WAF", "GC writes", "M appends/s"):
        t.add_column(col, justify="left" if col in ("workload", "scheme", "victim", *extra) else "right")
    for row in comparison_rows(results):
        aps = row["appends_per_second"]
        t.add_row(
            escape(str(row["workload"])),
            escape(row["scheme"]),  # a label, not rich markup
            escape(str(row["victim"])),
            *[escape(settings_cell(row["settings"].get(k))) for k in extra],
            _fmt(row["waf"]),
            _fmt(row["gc_writes"]),
            f"{aps / 1e6:.1f}" if aps else "-",
        )
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
        label = f"{scheme_of(r)}/{r['victim']}" + (
            f" {r['workload']}" if len({x.get("workload") for x in results}) > 1 else ""
        )
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
    return save_figure(fig, path)


try:  # the Hydra callback is optional: the table also prints from `collect_results`
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


class ComparisonTable(Callback):
    """Hydra callback: after a ``-m`` sweep, print one table of every job's result and write
    ``comparison.json`` in the sweep directory."""

    @reported
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


def collect_results(*sweep_dirs: Path, rows_by_victim: bool = True) -> list[dict]:
    """Every ``*/result.json`` of the sweep directories, in order, with :func:`tell_apart` applied
    over all of them (``rows_by_victim``: see there)."""
    results = []
    for sweep_dir in sweep_dirs:
        for path in sorted(Path(sweep_dir).glob("*/result.json")):
            results.append(json.loads(path.read_text()))
    return tell_apart(results, rows_by_victim=rows_by_victim)


#: a policy parameter that only names where an output goes: runs differing in it ran alike
OUTPUT_ONLY_POLICY_KEYS = frozenset({"params.save_qtable"})
#: policy settings tell_apart does not name besides those: the group count and victim rule, which
#: every result carries as its own fields (``n_groups``, ``victim``) and the reports that sweep
#: them key their rows by (MINOS's stream sweep, ADAPT's victim rules); for a report whose rows are
#: keyed by scheme alone, runs that differ in nothing but the victim rule are told apart by it
UNNAMED_POLICY_KEYS = OUTPUT_ONLY_POLICY_KEYS | {"n_groups", "victim"}


def tell_apart(results: list[dict], rows_by_victim: bool = True) -> list[dict]:
    """Runs of one workload whose scheme labels agree but whose policies were configured
    differently (``policy_config``: a swept parameter the label does not name, such as
    ``policy.params.epsilon``) get the differing settings appended to their label,
    ``shiro{params.epsilon=0.1}``, so a table keyed by scheme shows each instead of keeping the last
    one. Runs configured alike whose WAF differs are reported on stderr (a rerun that did not
    reproduce). Results written before ``policy_config`` was recorded are left as they are.
    ``rows_by_victim=False`` (a report keyed by scheme alone, e.g. the hybrid's): runs that differ
    in nothing but their victim rule (``policy.victim`` or ``sim.victim`` swept) get the rule each
    ran, ``hybrid{victim=hybrid(cost_benefit_sepbit)}``; with True such a report keys them by the
    rule itself."""
    from dogi_ml.sim.checkpoint import flat_identity

    groups: dict = {}
    for r in results:
        groups.setdefault((str(r.get("workload")), scheme_of(r)), []).append(r)
    for (workload, scheme), runs in groups.items():
        configured = [r for r in runs if isinstance(r.get("policy_config"), dict)]
        policies = [
            {k: v for k, v in flat_identity("", r["policy_config"]).items() if k not in OUTPUT_ONLY_POLICY_KEYS}
            for r in configured
        ]
        named = [{k: v for k, v in p.items() if k not in UNNAMED_POLICY_KEYS} for p in policies]
        keys = sorted({k for f in named for k in f})
        differing = [k for k in keys if len({f.get(k) for f in named}) > 1]
        if not differing and not rows_by_victim and len({str(r.get("victim")) for r in runs}) > 1:
            # nothing but the victim rule tells them apart (policy.victim or sim.victim swept, the
            # label silent on it; every result names its rule, with or without policy_config)
            for r in runs:
                r["scheme"] = f"{scheme}{{victim={r.get('victim')}}}"
        if len(configured) < 2:
            continue
        if not differing:
            # runs alike in everything, the victim rule included, still have to agree
            _report_unreproduced(workload, scheme, configured, policies)
            continue
        for r, f in zip(configured, named):
            tags = ",".join(f"{k}={json.loads(f[k]) if k in f else None}" for k in differing)
            r["scheme"] = f"{scheme}{{{tags}}}"
    return results


def _report_unreproduced(workload: str, scheme: str, runs: list[dict], policies: list[dict]) -> None:
    """Say (stderr) when runs configured alike in every respect (``policies``: each run's policy
    config, flat, without its output path; the effective settings; the workload config) give
    different WAFs."""
    alike: dict = {}
    for r, policy in zip(runs, policies):
        identity = json.dumps([policy, settings_of(r), r.get("workload_config")], sort_keys=True, default=str)
        alike.setdefault(identity, set()).add(r.get("waf"))
    for wafs in alike.values():
        if len(wafs) > 1:
            print(
                f"report: runs of {scheme} on {workload} configured alike give different WAFs "
                f"({', '.join(str(w) for w in sorted(wafs, key=str))}); the tables keep the last",
                file=sys.stderr,
            )


# -- paper comparison (DOGI Figs. 10-14) ---------------------------------------------------------
ORACLES = ("nodap", "fk")


def scheme_of(r: dict) -> str:
    return r.get("scheme") or r["policy"]


def paper_summary(results: list[dict]) -> dict:
    """``{workload: {scheme: {"waf", "user_accuracy", "gc_accuracy", ...}}}`` (learned schemes
    carry their accuracies; the last run wins if a pair repeats)."""
    out: dict = {}
    for r in results:
        entry = {"waf": r["waf"]}
        for k in (
            "user_accuracy",
            "gc_accuracy",
            "inference_ns_per_block",
            "n_intermediate_groups",
            "train_seconds",
            "retrains",
        ):
            if r.get(k) is not None:
                entry[k] = r[k]
        entry["settings"] = settings_of(r)
        if r.get("configuration"):
            entry["configuration"] = r["configuration"]
        if r.get("nodap_bounds"):
            entry["bounds"] = r["nodap_bounds"]
        mis = r.get("mispredict_ratio")
        if mis is not None:
            entry["mispredict_ratio"] = mis
        out.setdefault(str(r.get("workload")), {})[scheme_of(r)] = entry
    return out


def dogi_reductions(summary: dict) -> dict:
    """Per workload: DOGI's WAF reduction (%) vs the best non-oracle, non-DOGI scheme."""
    out = {}
    for wl, schemes in summary.items():
        dogi = schemes.get("dogi", {}).get("waf")
        base = {
            s: v["waf"] for s, v in schemes.items() if not s.startswith("dogi") and s not in ORACLES and v.get("waf")
        }
        if dogi and base:
            best = min(base, key=base.get)
            out[wl] = {
                "best_baseline": best,
                "best_baseline_waf": base[best],
                "dogi_waf": dogi,
                "reduction_pct": 100.0 * (1 - dogi / base[best]),
            }
    return out


def print_paper_tables(summary: dict) -> None:
    # wide tables: piped output would otherwise wrap every cell at 80 columns
    out = console if console.is_terminal else Console(highlight=False, width=200)
    schemes = sorted({s for v in summary.values() for s in v}, key=lambda s: (s in ORACLES, s.startswith("dogi"), s))
    t = Table(title="WAF per workload and scheme (lower is better)")
    t.add_column("workload")
    for s in schemes:
        t.add_column(escape(s), justify="right")
    t.add_column("DOGI vs best baseline", justify="right")
    red = dogi_reductions(summary)
    for wl in sorted(summary):
        row = [_fmt(summary[wl].get(s, {}).get("waf")) for s in schemes]
        r = red.get(wl)
        row.append(f"{r['reduction_pct']:+.1f}% vs {escape(r['best_baseline'])}" if r else "-")
        t.add_row(escape(wl), *row)  # a trace file's name, not rich markup
    out.print(t)
    learned = [s for s in schemes if any("user_accuracy" in summary[w].get(s, {}) for w in summary)]
    if learned:
        a = Table(title="prediction accuracy: user-written (Fig. 11) / GC-written (Fig. 12) blocks")
        a.add_column("workload")
        for s in learned:
            a.add_column(escape(s), justify="right")
        for wl in sorted(summary):
            cells = []
            for s in learned:
                e = summary[wl].get(s, {})
                u, g = e.get("user_accuracy"), e.get("gc_accuracy")
                cells.append("-" if u is None else f"{u:.3f}" + (f" / {g:.3f}" if g is not None else ""))
            a.add_row(escape(wl), *cells)
        out.print(a)
        n = Table(title="batched inference, ns per predicted block (features + model, per chunk)")
        n.add_column("workload")
        for s in learned:
            n.add_column(escape(s), justify="right")
        for wl in sorted(summary):
            n.add_row(escape(wl), *[_fmt(summary[wl].get(s, {}).get("inference_ns_per_block")) for s in learned])
        out.print(n)


def plot_paper(summary: dict, path: Path, title: str = "") -> Path:
    """Grouped WAF bars per workload (Fig. 10), user/GC accuracy bars (Figs. 11-12), and WAF and
    misprediction over the number of groups where a run fixed it (Fig. 13). The figure carries
    the digest of ``summary`` (every panel is drawn from it alone)."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    workloads = sorted(summary)
    schemes = sorted({s for v in summary.values() for s in v}, key=lambda s: (s in ORACLES, s.startswith("dogi"), s))
    fixed_n = {}
    for wl in workloads:
        for s, e in summary[wl].items():
            m = re.search(r"N=(\d+)", s)
            if m:
                fixed_n.setdefault(wl, []).append(
                    (int(m.group(1)), e["waf"], e.get("mispredict_ratio"), e.get("user_accuracy"))
                )
    acc_schemes = [s for s in schemes if any(summary[w].get(s, {}).get("user_accuracy") is not None for w in workloads)]
    panels = 1 + bool(acc_schemes) + len(fixed_n)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels + 2, 4.2), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(workloads))
    width = 0.8 / max(1, len(schemes))
    # tab20: up to 20 schemes without a colour repeating (the default cycle repeats after 10); a
    # scheme keeps its colour in the accuracy panel
    palette = plt.get_cmap("tab20").colors
    colour = {s: palette[i % len(palette)] for i, s in enumerate(schemes)}
    for i, s in enumerate(schemes):
        vals = [summary[w].get(s, {}).get("waf") or np.nan for w in workloads]
        ax.bar(x + i * width, vals, width, label=s, color=colour[s])
    ax.set_xticks(x + 0.4 - width / 2, workloads, rotation=20)
    ax.set_ylabel("WAF")
    ax.set_title("WAF per scheme (Fig. 10)")
    # below the axes, as the accuracy panel's: inside, it hid the tallest bars (NoSep's)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    k = 1
    if acc_schemes:
        ax = axes[0][k]
        k += 1
        width = 0.8 / max(1, len(acc_schemes))
        for i, s in enumerate(acc_schemes):
            u = [summary[w].get(s, {}).get("user_accuracy") or np.nan for w in workloads]
            g = [summary[w].get(s, {}).get("gc_accuracy") or np.nan for w in workloads]
            ax.bar(x + i * width, u, width, label=f"{s} user", color=colour[s])
            ax.scatter(x + i * width, g, marker="x", color="k", zorder=3, label="GC-written" if i == 0 else None)
        ax.set_xticks(x + 0.4 - width / 2, workloads, rotation=20)
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy")
        ax.set_title("prediction accuracy (bars: user, x: GC) (Figs. 11-12)")
        # below the axes: with ten schemes (Fig. 13) a legend inside hid bars
        ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    for wl, pts in sorted(fixed_n.items()):
        # one panel per workload: the WAF differences across N are small against other workloads
        ax = axes[0][k]
        k += 1
        ax2 = ax.twinx()
        pts.sort()
        n = [p[0] for p in pts]
        ax.plot(n, [p[1] for p in pts], marker="o", color="tab:blue", label="WAF")
        ax2.plot(
            n,
            [p[2] if p[2] is not None else np.nan for p in pts],
            ls="--",
            marker=".",
            color="tab:orange",
            label="misprediction ratio",
        )
        chosen = summary[wl].get("dogi", {})
        if chosen.get("n_intermediate_groups"):
            ax.scatter(
                [chosen["n_intermediate_groups"]], [chosen["waf"]], color="red", zorder=4, s=60, label="DOGI's choice"
            )
        ax.set_xlabel("intermediate groups N")
        ax.set_ylabel("WAF (solid)")
        ax2.set_ylabel("misprediction ratio (dashed)")
        ax.set_title(f"{wl}: group count (Fig. 13)")
        ax.legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, dpi=120, source=data_digest(summary), title=title)


#: the suffix of Fig. 12b's files beside a DOGI preset's ``PATH.json``
GC_DESTINATIONS = "_gc_destinations"
#: the groups a GC-destination matrix is indexed by (its rows and columns), as DOGI numbers them
#: (dogi_ml/policies/dogi.py: G_HOT, the intermediate groups, G_FRZN, the three fallback groups, and
#: with final_tiers the two tiers of GN's survivors and G_frzn's old survivors)
GC_GROUP_NAMES = ["hot"] + [f"G{k}" for k in range(1, 11)] + ["frzn", "fb-user", "fb-young", "fb-old"]
GC_GROUP_NAMES += ["tier1", "tier2", "frzn-old"]


def gc_destinations_data(results: list[dict]) -> list[dict]:
    """What Fig. 12b draws, ``PATH_gc_destinations.json``: one entry per run that reports GC
    destinations (DOGI's), in the runs' order, with its workload, scheme, WAF (so the matrix can
    be matched to the run the summary quotes) and ``gc_destinations``, the blocks GC wrote from
    each source group (row) to each destination group (column)."""
    return [
        {
            "workload": str(r.get("workload")),
            "scheme": scheme_of(r),
            "waf": r["waf"],
            "gc_destinations": [[int(v) for v in row] for row in r["gc_destinations"]],
        }
        for r in results
        if r.get("gc_destinations")
    ]


def write_gc_destinations(runs: list[dict], path: Path) -> Path:
    """``runs`` (:func:`gc_destinations_data`) as ``path``, one run a line (a matrix on one line
    keeps the file short and its diffs per run)."""
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in runs) + "\n]\n")
    return path


def plot_gc_destinations(runs: list[dict], path: Path, title: str = "") -> Path | None:
    """Fig. 12b: for each run of ``runs`` (:func:`gc_destinations_data`), the share of GC-written
    blocks each source group sends to each destination group (rows: source, normalised). The PNG
    records the digest of ``runs`` (:func:`dogi_ml.plotting.data_digest`)."""
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cols = min(4, len(runs))
    rows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[len(runs) :]:
        ax.axis("off")
    for ax, r in zip(axes.flat, runs):
        m = np.asarray(r["gc_destinations"], float)
        used = np.flatnonzero(m.sum(axis=0) + m.sum(axis=1))
        m = m[np.ix_(used, used)]
        share = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        ax.imshow(share, vmin=0, vmax=1, cmap="Blues")
        labels = [GC_GROUP_NAMES[i] if i < len(GC_GROUP_NAMES) else str(i) for i in used]
        ax.set_xticks(range(len(used)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(used)), labels, fontsize=7)
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
        ax.set_title(f"{r['workload']} / {r['scheme']}", fontsize=9)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, source=data_digest(runs), title=title or None)


class PaperComparison(Callback):
    """Hydra callback for the DOGI reproduction sweeps: after ``-m``, the WAF table with DOGI's
    reduction vs the best baseline and NoDaP, the accuracy table, a plot, and the JSON
    ``{workload: {scheme: {waf, user_accuracy, ...}}}`` at ``output=PATH.json`` (default: the
    sweep directory's ``paper.json``)."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir, rows_by_victim=False)
        if not results:
            return
        summary = paper_summary(results)
        print_paper_tables(summary)
        print_differing_settings(results, console if console.is_terminal else Console(highlight=False, width=200))
        for path in write_paper_files(
            results, summary, config.get("output"), sweep_dir, str(config.get("title") or "")
        ):
            console.print(f"wrote:   {path}")


#: DOGI's own figures beside the paper table (``<output>_accuracy.json``): its accuracies counted
#: as the paper counts them, per class, and what its search and fallback decided
DOGI_DETAIL_KEYS = (
    "waf",
    "user_accuracy",
    "user_accuracy_nonhot",
    "user_accuracy_strict",
    "user_recall_per_class",
    "user_precision_per_class",
    "gc_accuracy",
    "mispredict_ratio",
    "model_agreement",
    "base_ghost_waf",
    "hot_threshold",
    "n_intermediate_groups",
    "configuration",
    "fallbacks",
    "mode",
    "retired_segments",
)


def write_table(out: str | Path, rows, lines: list[str]) -> list[Path]:
    """``OUT.json`` (the rows) and ``OUT.md`` (the markdown ``lines``) of a table that is not a
    sweep's comparison (:mod:`dogi_ml.report_hybrid`'s extra tables,
    :mod:`dogi_ml.pipeline.frozen_seeds`); prints the markdown."""
    stem = Path(out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    js = stem.with_suffix(".json")
    js.write_text(json.dumps(rows, indent=2, default=float))
    md = stem.with_suffix(".md")
    md.write_text("\n".join(lines) + "\n")
    print(md.read_text())
    return [js, md]


def write_paper_files(results: list[dict], summary: dict, output, sweep_dir: Path, title: str = "") -> list[Path]:
    """The DOGI presets' files: ``PATH.json`` (the summary), ``PATH_reductions.json`` (DOGI vs the
    best baseline per workload), ``PATH_accuracy.json`` (DOGI's details per workload) and
    ``PATH.png``, and with runs that report their GC destinations (DOGI's) Fig. 12b:
    ``PATH_gc_destinations.json`` (:func:`gc_destinations_data`) and ``PATH_gc_destinations.png``;
    ``PATH`` = ``output`` without its ``.json``, or the sweep directory's ``paper``. Each figure is
    drawn from its JSON as read back, so its digest is the file's (:func:`redraw`)."""
    out = Path(output) if output else Path(sweep_dir) / "paper.json"
    stem = redraw_stem(out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = [stem.with_suffix(".json")]
    written[0].write_text(json.dumps(summary, indent=2, default=float))
    red = dogi_reductions(summary)
    if red:  # a sweep with DOGI and a baseline
        reductions = Path(f"{stem}_reductions.json")
        reductions.write_text(json.dumps(red, indent=2))
        written.append(reductions)
    details = {
        str(r.get("workload")): {k: r[k] for k in DOGI_DETAIL_KEYS if r.get(k) is not None}
        for r in results
        if scheme_of(r) == "dogi"
    }
    if details:
        accuracy = Path(f"{stem}_accuracy.json")
        accuracy.write_text(json.dumps(details, indent=2, default=float))
        written.append(accuracy)
    # drawn from the summary as read back, so the figure's digest is the file's
    written.append(plot_paper(json.loads(written[0].read_text()), stem.with_suffix(".png"), title=title))
    gc = gc_destinations_data(results)
    if gc:
        gc_json = write_gc_destinations(gc, Path(f"{stem}{GC_DESTINATIONS}.json"))
        written += [gc_json, plot_gc_destinations(json.loads(gc_json.read_text()), gc_json.with_suffix(".png"))]
    return written


def figure_data(prefix: str | Path) -> dict | list:
    """What ``PREFIX.png`` draws, read from ``PREFIX.json``: the summary :func:`write_paper_files`
    wrote and :func:`plot_paper` draws, or for ``PATH_gc_destinations`` (Fig. 12b) the runs'
    matrices :func:`plot_gc_destinations` draws; or a clear exit: no such file, or one that is
    neither (``PREFIX_accuracy.json``, ``PREFIX_reductions.json``)."""
    stem, js, data = redraw_source(prefix)
    if stem.name.endswith(GC_DESTINATIONS):
        if not (isinstance(data, list) and data and all(_is_gc_run(r) for r in data)):
            raise SystemExit(
                f"error: --redraw {prefix}: {js} is not a list of GC-destination runs "
                "([{workload, scheme, waf, gc_destinations: square matrix}, ...]); write it anew from its sweep"
            )
        return data
    # {workload: {scheme: {"waf": ...}}}: what paper_summary gives and plot_paper draws
    if not (
        isinstance(data, dict)
        and data
        and all(
            isinstance(row, dict) and row and all(isinstance(e, dict) and "waf" in e for e in row.values())
            for row in data.values()
        )
    ):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is not a paper summary ({{workload: {{scheme: {{waf, ...}}}}}}); "
            "give the PREFIX of a DOGI preset's output=PREFIX.json"
        )
    return data


def _is_gc_run(r) -> bool:
    """One entry of :func:`gc_destinations_data`: named, with a square matrix of counts."""
    if not (isinstance(r, dict) and {"workload", "scheme", "waf", "gc_destinations"} <= r.keys()):
        return False
    m = r["gc_destinations"]
    return isinstance(m, list) and bool(m) and all(isinstance(row, list) and len(row) == len(m) for row in m)


def redraw(prefix: str | Path, title: str | None = None) -> Path:
    """``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`figure_data`), titled ``title``
    (None: the title the figure recorded): the paper figure, or Fig. 12b for
    ``PATH_gc_destinations``."""
    stem = redraw_stem(prefix)
    data = figure_data(stem)
    if title is None:
        title = figure_title(stem.with_suffix(".png"))
    if stem.name.endswith(GC_DESTINATIONS):
        return plot_gc_destinations(data, stem.with_suffix(".png"), title=title)
    return plot_paper(data, stem.with_suffix(".png"), title=title)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m dogi_ml.report",
        description="redraw a DOGI paper figure (PREFIX.png) from its summary (PREFIX.json) alone, or Fig. 12b "
        "(PATH_gc_destinations.png) from its runs' matrices",
    )
    ap.add_argument("--redraw", metavar="PREFIX", required=True, help="PREFIX.png from PREFIX.json")
    ap.add_argument("--title", default=None, help="the figure's title (default: the one the figure recorded)")
    a = ap.parse_args(argv)
    print(f"wrote:   {redraw(a.redraw, a.title)}")


if __name__ == "__main__":
    main()
