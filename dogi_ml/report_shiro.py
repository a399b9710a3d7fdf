"""Shiro evaluation tables, Markdown and plots (shared/papers/shiro.txt §V: Figs. 7-9, Table V).

WAF both ways: the project's ``(U + G) / U`` and the paper's ``(F - U) / U = G / U`` (flash
writes beyond the host's, per host write). :class:`ShiroComparison` is the Hydra callback of the
presets ``+experiment=shiro_fig7|shiro_fig7_traces|shiro_fig9|shiro_agent|shiro_table5``; the
same report can be built from finished sweep directories::

    python -m dogi_ml.report_shiro OUT_PREFIX SWEEP_DIR [SWEEP_DIR ...] [--title T] [--note TEXT] [--readings]

writing ``OUT_PREFIX.json``, ``OUT_PREFIX.md`` and ``OUT_PREFIX.png`` (``--readings``: the readings
report's JSON and Markdown, the command read from each sweep's ``multirun.yaml``). The figure
carries the digest of the summary it draws (:func:`dogi_ml.plotting.data_digest`, the PNG's
``Source`` text), so a figure left behind by a later JSON is found (tests/test_report_shiro.py
checks every docs/results file)::

    python -m dogi_ml.report_shiro --redraw OUT_PREFIX [--title T] [--note TEXT]

rewrites ``OUT_PREFIX.md`` and ``OUT_PREFIX.png`` from ``OUT_PREFIX.json`` alone (no sweep needed;
the title and the note are kept from ``OUT_PREFIX.md`` unless given).

:class:`ShiroReadings` is the callback of ``+experiment=shiro_readings|shiro_watermarks|
shiro_readings_default`` (:func:`readings_report`): one row per scheme and setup, the paper's WAF
per workload, each Shiro row's cut against SepBIT and PHFTL both with the baselines' paper rule
(cost-benefit) and with the same rule family as the row (greedy for Adjusted Greedy), and whether
the paper's ordering (Shiro below PHFTL and SepBIT) holds; the JSON records the command, the scale
and the commit.
"""

from __future__ import annotations

import argparse
import json
import textwrap
import time
from pathlib import Path

import numpy as np

from dogi_ml.callbacks import reported
from dogi_ml.plotting import data_digest, redraw_source, redraw_stem, save_figure
from dogi_ml.provenance import code_commit
from dogi_ml.report import Callback, collect_results, console, settings_cell, settings_markdown, settings_of

SHIRO = "shiro"
ORDER = ("nosep", "sepgc", "sepbit", "sepbit-NG", "midas", "phftl", "phftl-NG", "shiro-NG")


NEVER_IDLE_US = 10**11  # an idle gap this long never occurs: background GC configured but off


def scheme(r: dict) -> str:
    """The scheme's label, ``+bg`` when background GC in idle gaps was on."""
    cfg = r.get("config") or {}
    bg = cfg.get("gc_background_free_ratio") and (cfg.get("gc_idle_gap_us") or NEVER_IDLE_US) < NEVER_IDLE_US
    return (r.get("scheme") or r["policy"]) + ("+bg" if bg else "")


def _order(s: str) -> tuple:
    return (s.startswith("shiro"), ORDER.index(s) if s in ORDER else len(ORDER), s)


def shiro_summary(results: list[dict]) -> dict:
    """``{workload: {scheme: {waf, paper_waf, ...classifier and overhead figures}}}``."""
    out: dict = {}
    for r in results:
        e = {
            "waf": r["waf"],
            "paper_waf": (r["waf"] - 1.0) if r.get("waf") else None,
            "victim": r["victim"],
            "settings": settings_of(r),
        }
        for k in (
            "user_accuracy",
            "user_precision",
            "user_recall",
            "user_f1",
            "user_predictions_scored",
            "hot_threshold",
            "gru_step_ns_per_block",
            "train_seconds_per_window",
            "train_seconds",
            "retrains",
            "qtable_bytes",
            "qtable_int8_bytes",
            "states_departing_from_rule",
            "read_decisions",
            "agent_counters",
            "gc_spills",
            "background_gc_passes",
            "background_gc_writes",
            "elapsed_s",
        ):
            if r.get(k) is not None:
                e[k] = r[k]
        conf = r.get("user_confusion")
        if r.get("user_precision") is None and conf is not None and np.shape(conf) == (2, 2):
            # PHFTL reports its confusion in the same layout (rows: predicted hot / non-hot)
            from dogi_ml.policies.shiro import classifier_metrics

            e.update({k: v for k, v in classifier_metrics(conf).items() if k != "user_confusion"})
        if r.get("accuracy_over_time"):
            e["accuracy_over_time"] = [
                [a["user_writes"], a["user_accuracy"]]
                for a in r["accuracy_over_time"]
                if a["user_accuracy"] is not None
            ]
        out.setdefault(str(r.get("workload")), {})[scheme(r)] = e
    return out


def reductions(summary: dict, ref: str = SHIRO) -> dict:
    """Per workload: the reference scheme's cut of the paper's WAF (G/U) vs every other scheme (%)."""
    out = {}
    for wl, schemes in summary.items():
        row = {}
        for bg in ("", "+bg"):  # background-GC runs against Shiro's background-GC run
            mine = schemes.get(ref + bg, {}).get("paper_waf")
            if not mine:
                continue
            for s, v in schemes.items():
                if s != ref + bg and s.endswith("+bg") == bool(bg) and v.get("paper_waf"):
                    row[s] = 100.0 * (1.0 - mine / v["paper_waf"])
        if row:
            out[wl] = row
    return out


def agent_decision_ns(n: int = 2_000_000, seed: int = 0) -> float:
    """ns per agent decision (state encoding, epsilon-greedy choice, pending-decision record),
    with one GC operation every 64 decisions, timed in a Numba loop."""
    from dogi_ml.rl import qlearning as ql
    from dogi_ml.rl.qlearning import decision_loop

    rng = np.random.default_rng(seed)
    life = rng.integers(1, 1 << 20, n)
    valid = rng.integers(0, 257, n)
    kind = rng.integers(0, 8, n)
    qt = ql.new_qtable(256, seed=1)
    decision_loop(qt, life[:1000], valid[:1000], kind[:1000])  # compile / load
    qt = ql.new_qtable(256, seed=1)
    t0 = time.perf_counter()
    decision_loop(qt, life, valid, kind)
    return 1e9 * (time.perf_counter() - t0) / n


def _f(v, fmt="{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def markdown(summary: dict, title: str, note: str = "") -> str:
    """The report: WAF tables (both definitions), Shiro's cut, classifier metrics, overheads."""
    wls = sorted(summary)
    schemes = sorted({s for v in summary.values() for s in v}, key=_order)
    lines = [f"# {title}", ""]
    if note:
        lines += [note.strip(), ""]
    for key, name in (
        ("waf", "WAF, project definition (U + G) / U"),
        ("paper_waf", "WAF, paper definition (F - U) / U"),
    ):
        lines += [f"## {name}", "", "| workload | " + " | ".join(schemes) + " |", "|---" * (len(schemes) + 1) + "|"]
        for wl in wls:
            row = [_f(summary[wl].get(s, {}).get(key)) for s in schemes]
            best = min((v for v in row if v != "-"), key=float, default=None)
            row = [f"**{v}**" if v == best else v for v in row]
            lines.append(f"| {wl} | " + " | ".join(row) + " |")
        lines.append("")
    red = reductions(summary)
    if red:
        others = sorted({s for v in red.values() for s in v}, key=_order)
        lines += [
            "## Shiro's cut of the paper's WAF vs each scheme (%; positive: Shiro writes less)",
            "",
            "| workload | " + " | ".join(others) + " |",
            "|---" * (len(others) + 1) + "|",
        ]
        for wl in sorted(red):
            lines.append(f"| {wl} | " + " | ".join(_f(red[wl].get(s), "{:+.1f}") for s in others) + " |")
        lines.append("")
    learned = [s for s in schemes if any(summary[w].get(s, {}).get("user_accuracy") is not None for w in wls)]
    if SHIRO in learned:  # Shiro's variants share its classifier: one table for it (and PHFTL's)
        learned = [s for s in learned if s in (SHIRO, "phftl")]
    if learned:
        lines += ["## Page classifier (Table V layout; positive class: short-living)", ""]
        for s in learned:
            lines += [
                f"**{s}**",
                "",
                "| metric | " + " | ".join(wls) + " | average |",
                "|---" * (len(wls) + 2) + "|",
            ]
            for key, name in (
                ("user_accuracy", "accuracy"),
                ("user_precision", "precision"),
                ("user_recall", "recall"),
                ("user_f1", "F1"),
            ):
                vals = [summary[w].get(s, {}).get(key) for w in wls]
                avg = np.mean([v for v in vals if v is not None]) if any(v is not None for v in vals) else None
                lines.append(f"| {name} | " + " | ".join(_f(v) for v in vals) + f" | {_f(avg)} |")
            lines.append("")
    over = [s for s in schemes if s.startswith(SHIRO)]
    if over:
        lines += [
            "## Overheads (Shiro runs)",
            "",
            "| workload | scheme | GRU step ns/block | training s/window | Q-table bytes | agent decisions |"
            " explored | credited | threshold T |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for wl in wls:
            for s in over:
                e = summary[wl].get(s)
                if not e:
                    continue
                c = e.get("agent_counters") or {}
                lines.append(
                    f"| {wl} | {s} | {_f(e.get('gru_step_ns_per_block'), '{:.0f}')} | "
                    f"{_f(e.get('train_seconds_per_window'), '{:.3f}')} | {e.get('qtable_bytes', '-')} | "
                    f"{c.get('decisions', '-')} | {c.get('explorations', '-')} | {c.get('credited', '-')} | "
                    f"{e.get('hot_threshold', '-')} |"
                )
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict, path: Path, title: str = "") -> Path:
    """Paper-WAF bars per workload and scheme; the classifier's cumulative accuracy over time
    (Fig. 8) where Shiro ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = sorted(summary)
    schemes = sorted({s for v in summary.values() for s in v}, key=_order)
    curves = [(wl, s, e["accuracy_over_time"]) for wl in wls for s, e in summary[wl].items() if
              s == SHIRO and e.get("accuracy_over_time")]  # fmt: skip
    fig, axes = plt.subplots(1, 1 + bool(curves), figsize=(7 + 5 * bool(curves), 4.2), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(wls))
    width = 0.8 / max(1, len(schemes))
    # up to 10 schemes matplotlib's default colours; more: tab20's 20, then hatched, so that no two
    # schemes of the legend look alike
    many = len(schemes) > 10
    for i, s in enumerate(schemes):
        style = {"color": plt.get_cmap("tab20")(i % 20), "hatch": "//" if i >= 20 else None} if many else {}
        ax.bar(x + i * width, [summary[w].get(s, {}).get("paper_waf") or np.nan for w in wls], width, label=s, **style)
    ax.set_xticks(x + 0.4 - width / 2, wls, rotation=20, fontsize=8)
    ax.set_ylabel("WAF, paper definition (F - U) / U")
    ax.set_title("WAF per scheme")
    handles, labels = ax.get_legend_handles_labels()
    if curves:
        ax = axes[0][1]
        for wl, _, pts in curves:
            a = np.asarray(pts, float)
            ax.plot(a[:, 0] / max(a[-1, 0], 1), a[:, 1], label=wl)
        ax.set_xlabel("user writes / run length")
        ax.set_ylabel("cumulative accuracy")
        ax.set_ylim(0, 1)
        ax.set_title("Shiro page classifier accuracy over time (Fig. 8)")
        ax.legend(fontsize=7)
    layout = _fit_title_and_legend(fig, title, handles, labels)
    return save_figure(fig, path, source=data_digest(summary), **layout)


def _fit_title_and_legend(fig, title: str, handles: list, labels: list, margin_in: float = 0.15) -> dict:
    """Lay out what a long report would clip: the schemes' legend below the axes, in as many
    columns as fit the figure's width (the figure widened if one label alone does not), the figure
    grown by the legend's height, and the title wrapped to the width. Returns the ``tight_layout``
    arguments (:func:`dogi_ml.plotting.save_figure`) that keep the axes clear of the legend."""
    renderer = fig.canvas.get_renderer()
    dpi = fig.dpi
    width, height = fig.get_size_inches()
    legend_in = 0.0
    if handles:
        for ncols in range(len(labels), 0, -1):
            legend = fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=ncols, fontsize=7)
            box = legend.get_window_extent(renderer)
            if box.width / dpi <= width - 2 * margin_in or ncols == 1:
                break
            legend.remove()
        width = max(width, box.width / dpi + 2 * margin_in)
        legend_in = box.height / dpi + margin_in
    if title:
        suptitle = fig.suptitle(title)
        one_line = suptitle.get_window_extent(renderer).height / dpi
        for chars in range(len(title), 0, -1):  # the widest wrap that fits
            suptitle.set_text(textwrap.fill(title, chars, break_long_words=False, break_on_hyphens=False))
            if suptitle.get_window_extent(renderer).width / dpi <= width - 2 * margin_in:
                break
        height += one_line * suptitle.get_text().count("\n")
    height += legend_in
    fig.set_size_inches(width, height)
    return {"rect": (0, legend_in / height, 1, 1)} if legend_in else {}


def write_report(results: list[dict], prefix: Path, title: str, note: str = "", bench: bool = True) -> dict:
    summary = shiro_summary(results)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    extra = {}
    if bench and any(s.startswith(SHIRO) for v in summary.values() for s in v):
        extra["agent_decision_ns"] = agent_decision_ns()
    payload = {"summary": summary, "shiro_paper_waf_cut_pct": reductions(summary), **extra}
    js = prefix.with_suffix(".json")
    js.write_text(json.dumps(payload, indent=2, default=float))
    # drawn from the payload as read back, so the figure's digest is the file's
    _draw(prefix, json.loads(js.read_text()), title, note, results)
    return payload


def report_markdown(payload: dict, title: str, note: str = "", results: list[dict] | None = None) -> str:
    """The report's Markdown from its JSON ``payload``: :func:`markdown`, the settings that differ
    between the runs (``results``; None: the settings each summary entry records) and the agent's
    decision time when it was measured."""
    summary = payload["summary"]
    md = markdown(summary, title, note) + settings_markdown(_runs_of(summary) if results is None else results)
    if "agent_decision_ns" in payload:
        md += f"\nAgent decision (encode + epsilon-greedy + record, Numba): {payload['agent_decision_ns']:.0f} ns.\n"
    return md


def _runs_of(summary: dict) -> list[dict]:
    """Stand-ins for the runs of a summary, as much of them as :func:`settings_markdown` reads: the
    workload, the scheme (the label less the ``+bg`` :func:`scheme` adds, as the runs name it) and
    the settings."""
    return [
        {"workload": wl, "policy": s.removesuffix("+bg"), "settings": e.get("settings")}
        for wl, row in summary.items()
        for s, e in row.items()
    ]


def _draw(prefix: Path, payload: dict, title: str, note: str, results: list[dict] | None = None) -> list[Path]:
    md = report_markdown(payload, title, note, results)
    prefix.with_suffix(".md").write_text(md)
    png = plot(payload["summary"], prefix.with_suffix(".png"), title)
    console.print(md, markup=False)  # scheme labels such as "shiro[cb]" are text, not rich markup
    return [prefix.with_suffix(".md"), png]


def read_report(prefix: str | Path) -> dict:
    """The payload of ``PREFIX.json`` as :func:`write_report` wrote it, or a clear exit: no such
    file, a readings report (no figure), a file without the summary, or one whose stored cut is not
    the one its summary gives (edited by hand, or written by another version of :func:`reductions`)."""
    _, js, payload = redraw_source(prefix)
    if not isinstance(payload, dict):
        payload = {}  # refused below: not a report's payload
    if "cuts" in payload:
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is a readings report, which has no figure; "
            "rebuild it with report_shiro --readings from its sweeps"
        )
    if not {"summary", "shiro_paper_waf_cut_pct"} <= set(payload):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} has no summary and shiro_paper_waf_cut_pct, so report_shiro did "
            "not write it; pass the PREFIX of a report_shiro figure report"
        )
    if json.loads(json.dumps(reductions(payload["summary"]), default=float)) != payload["shiro_paper_waf_cut_pct"]:
        raise SystemExit(
            f"error: --redraw {prefix}: {js}'s shiro_paper_waf_cut_pct is not the one its summary gives; "
            "rebuild it from its sweeps (docs/results/regenerate.sh shiro)"
        )
    return payload


def figure_data(prefix: str | Path) -> dict:
    """The summary ``PREFIX.json`` holds, as :func:`plot` draws it (:func:`read_report` refuses a
    file it cannot draw from)."""
    return read_report(prefix)["summary"]


def title_and_note(md: Path) -> tuple[str, str]:
    """The title and the note of a report's Markdown as :func:`markdown` lays them out (the heading,
    then the note's lines up to the first section); ``("Shiro", "")``, the defaults, without one."""
    if not md.is_file():
        return "Shiro", ""
    lines = md.read_text().split("\n")
    title = lines[0][2:] if lines[0].startswith("# ") else ""
    body = []
    for line in lines[1:]:
        if line.startswith("## "):
            break
        body.append(line)
    return title, "\n".join(body).strip()


def redraw(prefix: str | Path, title: str | None = None, note: str | None = None) -> list[Path]:
    """``PREFIX.md`` and ``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`read_report`
    refuses a file it cannot draw from): the title and the note kept from ``PREFIX.md`` where not
    given, the settings table from the settings each summary entry records."""
    prefix = redraw_stem(prefix)
    payload = read_report(prefix)
    kept_title, kept_note = title_and_note(prefix.with_suffix(".md"))
    return _draw(prefix, payload, kept_title if title is None else title, kept_note if note is None else note)


class ShiroComparison(Callback):
    """Hydra callback: after ``-m``, the Shiro report of the sweep at ``output=PREFIX`` (default:
    the sweep directory's ``shiro``): PREFIX.json, PREFIX.md, PREFIX.png."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if not results:
            return
        prefix = Path(config.get("output") or sweep_dir / "shiro")
        write_report(results, prefix, str(config.get("title") or "Shiro"))


# -- readings of the paper's text (docs/shiro.md "Where the gap to the paper comes from") ----------
#: Adjusted Greedy is greedy for a scheme without a short-living group: the baselines' "same rule"
SAME_RULE = {"adjusted_greedy": "greedy"}
BASELINES = ("sepbit", "phftl")
PAPER_BASELINE_RULE = "cost_benefit"  # shiro.txt §V-A: for baselines that did not specify one


def setup_of(r: dict) -> str:
    """The GC setup of a run in a few words: its free reserve and whether the device was prefilled."""
    st = settings_of(r)
    parts = [f"reserve {st.get('gc_free_segments')}"]
    if st.get("gc_background"):
        parts.append("bg " + settings_cell(st["gc_background"]))
    parts.append("prefilled" if st.get("prefill", True) else "fresh")
    return ", ".join(parts)


def row_of(r: dict) -> str:
    """A run's row: its scheme label (Shiro's names its readings and any victim rule but Adjusted
    Greedy), a baseline's with its victim rule."""
    label = r.get("scheme") or r["policy"]
    if not label.startswith(SHIRO):
        label = f"{label} ({r['victim']})"
    return label


def _rule(r: dict) -> str:
    return str(settings_of(r).get("victim") or r.get("victim"))


def readings_summary(results: list[dict]) -> dict:
    """``{setup: {row: {workload: {waf, paper_waf, victim, hot_threshold, user_accuracy, ...}}}}``."""
    out: dict = {}
    for r in results:
        e = {"waf": r["waf"], "paper_waf": r["waf"] - 1.0, "victim": _rule(r), "settings": settings_of(r)}
        for k in ("hot_threshold", "user_accuracy", "user_f1", "gc_spills", "elapsed_s"):
            if r.get(k) is not None:
                e[k] = r[k]
        out.setdefault(setup_of(r), {}).setdefault(row_of(r), {})[str(r.get("workload"))] = e
    return out


def readings_cuts(summary: dict) -> dict:
    """Per setup, Shiro row and workload: the row's cut of the paper's WAF (%, positive: Shiro
    writes less) against each baseline with the paper's rule (``vs_sepbit``, ``vs_phftl``:
    cost-benefit) and with the row's own rule family (``vs_sepbit_same``, ``vs_phftl_same``:
    greedy for Adjusted Greedy, cost-benefit for cost-benefit), and ``ordering`` /
    ``ordering_same``: whether the row is below both (None where a baseline run is missing)."""
    out: dict = {}
    for setup, rows in summary.items():
        for row, per_wl in rows.items():
            if not row.startswith(SHIRO):
                continue
            for wl, e in per_wl.items():
                same = SAME_RULE.get(e["victim"], e["victim"])
                c: dict = {}
                for tag, rule in (("", PAPER_BASELINE_RULE), ("_same", same)):
                    below = []
                    for b in BASELINES:
                        ref = rows.get(f"{b} ({rule})", {}).get(wl)
                        if ref is None or not ref["paper_waf"]:
                            c[f"vs_{b}{tag}"] = None
                            below.append(None)
                            continue
                        c[f"vs_{b}{tag}"] = 100.0 * (1.0 - e["paper_waf"] / ref["paper_waf"])
                        below.append(e["paper_waf"] < ref["paper_waf"])
                    c[f"ordering{tag}"] = None if None in below else all(below)
                out.setdefault(setup, {}).setdefault(row, {})[wl] = c
    return out


def _row_order(row: str) -> tuple:
    base = row.split(" ")[0]
    return (row.startswith(SHIRO), BASELINES.index(base) if base in BASELINES else len(BASELINES), row != SHIRO, row)


def readings_markdown(summary: dict, cuts: dict, title: str, meta: dict, note: str = "") -> str:
    """The readings report: per setup, the paper's WAF per row and workload, then each Shiro row's
    cut against the baselines (paper's rule / same rule) and whether the ordering holds."""
    lines = [f"# {title}", ""]
    if note:
        lines += [note.strip(), ""]
    lines += [f"Command: `{meta['command']}`", "", f"Code: {meta['commit']}", ""]
    for setup in sorted(summary):
        rows = sorted(summary[setup], key=_row_order)
        wls = sorted({w for r in summary[setup].values() for w in r})
        lines += [f"## WAF, paper definition (F - U) / U ({setup})", "", "| scheme | " + " | ".join(wls) + " |"]
        lines.append("|---" * (len(wls) + 1) + "|")
        for row in rows:
            cells = []
            for w in wls:
                e = summary[setup][row].get(w)
                cells.append("-" if e is None else f"{e['paper_waf']:.3f}")
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        lines.append("")
        if setup in cuts:
            lines += [
                f"Shiro's cut (%, positive: Shiro writes less) vs SepBIT / PHFTL with cost-benefit (the paper's "
                f"rule for them) and with the row's own rule; ordering: below both ({setup})",
                "",
                "| scheme | " + " | ".join(wls) + " | ordering held (paper's rule) | (same rule) |",
                "|---" * (len(wls) + 3) + "|",
            ]
            for row in sorted(cuts[setup], key=_row_order):
                cells, held, held_same = [], 0, 0
                for w in wls:
                    c = cuts[setup][row].get(w)
                    if c is None:
                        cells.append("-")
                        continue
                    pair = [_f(c.get(k), "{:+.1f}") for k in ("vs_sepbit", "vs_phftl")]
                    same = [_f(c.get(k), "{:+.1f}") for k in ("vs_sepbit_same", "vs_phftl_same")]
                    cells.append(
                        f"{' / '.join(pair)}" + (f" ({' / '.join(same)})" if c["ordering_same"] is not None else "")
                    )
                    held += bool(c["ordering"])
                    held_same += bool(c["ordering_same"])
                n = len([w for w in wls if cuts[setup][row].get(w)])
                n_same = len([w for w in wls if (cuts[setup][row].get(w) or {}).get("ordering_same") is not None])
                same_cell = f"{held_same}/{n_same}" if n_same else "-"
                lines.append(f"| {row} | " + " | ".join(cells) + f" | {held}/{n} | {same_cell} |")
            lines.append("")
        th = [row for row in rows if row.startswith(SHIRO)]
        if th:
            lines += [
                f"Algorithm 1's final threshold T (blocks) and the classifier's accuracy ({setup})",
                "",
                "| scheme | " + " | ".join(wls) + " |",
                "|---" * (len(wls) + 1) + "|",
            ]
            for row in th:
                cells = []
                for w in wls:
                    e = summary[setup][row].get(w) or {}
                    cells.append(f"{e.get('hot_threshold', '-')} / {_f(e.get('user_accuracy'))}")
                lines.append(f"| {row} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def scale_of(results: list[dict]) -> dict:
    """Per workload: capacity, user writes per capacity, OP, segment size (the runs' own)."""
    out = {}
    for r in results:
        st = settings_of(r)
        cap = st.get("capacity_blocks") or r.get("capacity_blocks")
        out[str(r.get("workload"))] = {
            "capacity_blocks": cap,
            "writes_per_capacity": round(r["user_writes"] / cap, 3) if cap else None,
            "op_ratio": st.get("op_ratio"),
            "segment_blocks": st.get("segment_blocks"),
        }
    return out


def readings_report(results: list[dict], prefix: Path, title: str, command: str, note: str = "") -> dict:
    """Write ``PREFIX.json`` and ``PREFIX.md`` of a readings sweep; return the JSON payload."""
    summary = readings_summary(results)
    cuts = readings_cuts(summary)
    meta = {"command": command, "commit": code_commit(), "scale": scale_of(results)}
    payload = {**meta, "summary": summary, "cuts": cuts}
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".json").write_text(json.dumps(payload, indent=2, default=float))
    md = readings_markdown(summary, cuts, title, meta, note)
    prefix.with_suffix(".md").write_text(md)
    console.print(md, markup=False)
    return payload


class ShiroReadings(Callback):
    """Hydra callback of the readings presets: :func:`readings_report` of the sweep at
    ``output=PREFIX`` (default: the sweep directory's ``readings``)."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if not results:
            return
        prefix = Path(config.get("output") or sweep_dir / "readings")
        command = "python -m dogi_ml simulate -m " + " ".join(config.hydra.overrides.task)
        readings_report(results, prefix, str(config.get("title") or "Shiro readings"), command)


def sweep_command(sweep_dir: Path) -> str:
    """The command that ran a sweep, from its ``multirun.yaml`` (Hydra's record of the overrides)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(Path(sweep_dir) / "multirun.yaml")
    return "python -m dogi_ml simulate -m " + " ".join(cfg.hydra.overrides.task)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("sweeps", nargs="*")
    ap.add_argument("--title", default=None, help="default: Shiro (--redraw: the heading of PREFIX.md)")
    ap.add_argument("--note", default=None, help="text or a file of it (--redraw: default the note of PREFIX.md)")
    ap.add_argument("--readings", action="store_true", help="the readings report (readings_report), not Figs. 7-9")
    ap.add_argument("--redraw", action="store_true", help="PREFIX.md and PREFIX.png from PREFIX.json alone")
    a = ap.parse_args(argv)
    note = Path(a.note).read_text() if a.note and Path(a.note).exists() else a.note
    if a.redraw:
        if a.sweeps or a.readings:
            ap.error("--redraw draws a figure report from PREFIX.json alone: give no sweep directory nor --readings")
        for p in redraw(a.prefix, a.title, note):
            print(f"wrote:   {p}")
        return
    if not a.sweeps:
        ap.error("give at least one sweep directory (or --redraw PREFIX)")
    title = "Shiro" if a.title is None else a.title
    results = collect_results(*(Path(d) for d in a.sweeps))
    if not results:
        raise SystemExit(f"no */result.json under {a.sweeps}")
    if a.readings:
        command = "; ".join(sweep_command(Path(d)) for d in a.sweeps)
        readings_report(results, Path(a.prefix), title, command, note or "")
        return
    write_report(results, Path(a.prefix), title, note or "")


if __name__ == "__main__":
    main()
