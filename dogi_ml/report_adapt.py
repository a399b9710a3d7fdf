"""ADAPT evaluation tables and plots (Figs. 8, 9 and 11 of shared/papers/adapt-icpp25.txt).

Runs carry the RAID chunk layer (``sim.raid_chunk_blocks``), so WA = (user + GC + padding +
shadow) / user and each result has ``padding_traffic_ratio``. Per setting (workload, write
density ``sim.arrival``, YCSB's ``zipf_theta``) and victim rule, the table holds every scheme's
WA and padding share, and ADAPT's reduction of WA (and of GC + padding writes, WA - 1) against
each other scheme, next to the paper's ranges. :class:`AdaptComparison` is the Hydra callback of
``+experiment=adapt_fig8|adapt_fig9|adapt_fig11``; from finished sweeps::

    python -m dogi_ml.report_adapt OUT_PREFIX SWEEP_DIR [SWEEP_DIR ...] [--figure fig8|fig9|fig11] [--title T]
        [--reuse EARLIER.json]   # rows of schemes the sweeps lack (e.g. unchanged baselines) from it

writes ``OUT_PREFIX.md``, ``OUT_PREFIX.json`` and ``OUT_PREFIX.png``. The figure carries the digest
of the summary it draws (:func:`dogi_ml.plotting.data_digest`, the PNG's ``Source`` text), so a
figure left behind by a later JSON is found (tests/test_adapt.py checks every docs/results file)::

    python -m dogi_ml.report_adapt --redraw OUT_PREFIX [--title T] [--figure fig8|fig9|fig11]

rewrites ``OUT_PREFIX.md`` and ``OUT_PREFIX.png`` from ``OUT_PREFIX.json`` alone (no sweep needed;
the title is kept from ``OUT_PREFIX.md``'s heading and the figure told by the JSON's ``paper``
unless given).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dogi_ml.callbacks import reported
from dogi_ml.plotting import data_digest, markdown_title, redraw_source, redraw_stem, save_figure
from dogi_ml.report import Callback, collect_results, scheme_of, settings_markdown, settings_of

ADAPT = "adapt"
#: ADAPT with the switches beyond the paper's text (conf/adapt_scheme/adapt_ext.yaml): compared
#: with the five other schemes as ADAPT is, in a column of its own
ADAPT_EXT = "adapt[+gcagg+gccold+ghostgc+dcold]"
CONTENDERS = (ADAPT, ADAPT_EXT)
ORDER = ("sepgc", "dac", "warcip", "mida", "sepbit", "adapt")
BASELINES = ORDER[:-1]  # the five schemes ADAPT is compared with
COLORS = {
    "sepgc": "tab:gray",
    "dac": "tab:purple",
    "warcip": "tab:brown",
    "mida": "tab:blue",
    "sepbit": "tab:green",
    "adapt": "tab:red",
    "adapt[-demote]": "salmon",
    "adapt[-ghost-demote]": "tab:orange",
    ADAPT_EXT: "darkred",
}
#: the paper's figures, for the side-by-side column (ADAPT's WA reduction vs the other schemes)
PAPER = {
    "fig8": "Ali greedy: -30.8 (SepGC), -32.5 (MiDA), -33.1 (DAC), -30.8 (WARCIP), -21.8% (SepBIT); "
    "Tencent greedy: -14.8 .. -36.1%; MSRC greedy: -31.4, -46.3, -39.1, -41.5, -23.3%; "
    "cost-benefit: Ali -21 .. -38.2%, Tencent -12.5 .. -35.4%",
    "fig9": "Ali: 88% of volumes under 25% padding with ADAPT vs 70% with SepBIT; Tencent: every volume "
    "under 6.7% (ADAPT, SepBIT), 7.8% (MiDA), 11.2% (DAC, WARCIP); padding -40 .. -72.1% vs the others",
    "fig11": "light: GC writes -21.2 .. -53.5% vs the others; heavy: -5.2 .. -22.4%; "
    "skew: lowest WA at alpha 0.9; ADAPT lowest in every setting",
}


def setting_of(r: dict) -> str:
    """Workload, write density and (for YCSB) the Zipf constant of a run, e.g. ``ycsb_a light``."""
    cfg = r.get("config") or {}
    wl = r.get("workload_config") or {}
    parts = [str(r.get("workload"))]
    if wl.get("source") == "file" and wl.get("path"):
        parts = [Path(str(wl["path"])).stem]
    if cfg.get("arrival") is not None:
        parts.append(str(cfg["arrival"]))
    params = wl.get("params") or {}
    theta = params.get("zipf_theta", params.get("theta"))
    if theta is not None:
        parts.append(f"a={theta:g}")
    return " ".join(parts)


DENSITY_ORDER = {"light": 0, "medium": 1, "heavy": 2}


def _setting_key(setting: str) -> tuple:
    """Settings in a readable order: workload, then density light -> heavy, then skew; from the
    label :func:`setting_of` gives a run (``zipf medium a=0.3``), so a merged summary's settings
    sort as the runs' do."""
    words = setting.split()
    arrival = next((w for w in words[1:] if not w.startswith("a=")), "")
    theta = next((float(w[2:]) for w in words[1:] if w.startswith("a=")), 0.0)
    return words[0], DENSITY_ORDER.get(arrival, 3), arrival, theta


def _sort_key(r: dict) -> tuple:
    return _setting_key(setting_of(r))


def adapt_summary(results: list[dict]) -> dict:
    """``{setting: {victim: {scheme: {waf, padding_ratio, gc_writes, padding, shadow, user}}}}``."""
    out: dict = {}
    for r in sorted(results, key=_sort_key):
        entry = {
            "waf": r["waf"],
            "padding_ratio": r.get("padding_traffic_ratio"),
            "gc_writes": r["gc_writes"],
            "padding": r.get("padding_blocks", 0),
            "shadow": r.get("shadow_blocks", 0),
            "user": r["user_writes"],
            "n_groups": r.get("n_groups"),
            "settings": settings_of(r),
        }
        out.setdefault(setting_of(r), {}).setdefault(r.get("victim", "?"), {})[scheme_of(r)] = entry
    return out


def _ordered(schemes) -> list[str]:
    return sorted(schemes, key=lambda s: (ORDER.index(s.split("[")[0]) if s.split("[")[0] in ORDER else 99, s))


def reductions(summary: dict, adapt: str = ADAPT) -> dict:
    """ADAPT's (or the variant ``adapt``'s) reduction (%) of WA, of extra writes (WA - 1) and of
    padding against each scheme."""
    out: dict = {}
    for setting, by_victim in summary.items():
        for victim, schemes in by_victim.items():
            a = schemes.get(adapt)
            if not a:
                continue
            row = {}
            for s, e in schemes.items():
                if s == adapt:
                    continue
                row[s] = {
                    "waf": 100 * (a["waf"] - e["waf"]) / e["waf"],
                    "extra": 100 * (a["waf"] - e["waf"]) / (e["waf"] - 1) if e["waf"] > 1 else None,
                    "padding": (100 * (a["padding"] - e["padding"]) / e["padding"] if e["padding"] else None),
                }
            best = min(schemes, key=lambda s: schemes[s]["waf"])
            out.setdefault(setting, {})[victim] = {"vs": row, "lowest": best}
    return out


def _fmt(x, nd=3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def lowest_of_six(schemes: dict, adapt: str = ADAPT) -> str:
    """The scheme of lowest WA among the paper's five baselines and ``adapt`` (ablations aside);
    "-" if none of them ran."""
    six = [s for s in schemes if s in BASELINES or s == adapt]
    return min(six, key=lambda s: schemes[s]["waf"]) if six else "-"


def markdown(summary: dict, figure: str, title: str = "") -> str:
    schemes = _ordered({s for bv in summary.values() for sc in bv.values() for s in sc})
    contenders = [a for a in CONTENDERS if a in schemes]
    lines = [f"# {title or 'ADAPT ' + figure}", ""]
    lines += ["## WA = (user + GC + padding + shadow) / user", ""]
    six_heads = ["lowest of the six" + ("" if a == ADAPT else f" (ADAPT = {a})") for a in contenders or [ADAPT]]
    lines.append("| setting | victim | " + " | ".join(schemes) + " | lowest | " + " | ".join(six_heads) + " |")
    lines.append("|---|---|" + "---|" * len(schemes) + "---|" + "---|" * len(six_heads))
    for setting in summary:
        for victim, sc in sorted(summary[setting].items()):
            low = min(sc, key=lambda s: sc[s]["waf"])
            lows = [lowest_of_six(sc, a) for a in contenders or [ADAPT]]
            cells = [
                (f"**{_fmt(sc[s]['waf'])}**" if s == low else _fmt(sc[s]["waf"])) if s in sc else "" for s in schemes
            ]
            lines.append(f"| {setting} | {victim} | " + " | ".join(cells) + f" | {low} | " + " | ".join(lows) + " |")
    lines += ["", "## Padding traffic ratio (padding / all blocks written)", ""]
    lines.append("| setting | victim | " + " | ".join(schemes) + " |")
    lines.append("|---|---|" + "---|" * len(schemes))
    for setting in summary:
        for victim, sc in sorted(summary[setting].items()):
            cells = [
                f"{100 * sc[s]['padding_ratio']:.1f}%" if s in sc and sc[s]["padding_ratio"] is not None else ""
                for s in schemes
            ]
            lines.append(f"| {setting} | {victim} | " + " | ".join(cells) + " |")
    for adapt in contenders:
        red = reductions(summary, adapt)
        others = [s for s in schemes if s != adapt]
        lines += ["", f"## {adapt} against each scheme: WA change (extra writes WA-1 change; padding change)", ""]
        lines.append("| setting | victim | " + " | ".join(others) + " |")
        lines.append("|---|---|" + "---|" * len(others))
        for setting, bv in red.items():
            for victim, row in sorted(bv.items()):
                cells = []
                for s in others:
                    v = row["vs"].get(s)
                    cells.append(f"{_pct(v['waf'])} ({_pct(v['extra'])}; {_pct(v['padding'])})" if v else "")
                lines.append(f"| {setting} | {victim} | " + " | ".join(cells) + " |")
    if contenders:
        lines += ["", f"Paper ({figure}): {PAPER.get(figure, '')}", ""]
    return "\n".join(lines) + "\n"


def plot_adapt(summary: dict, path: Path, figure: str, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    schemes = _ordered({s for bv in summary.values() for sc in bv.values() for s in sc})
    victims = sorted({v for bv in summary.values() for v in bv})
    settings = list(summary)
    if figure == "fig9":
        fig, axes = plt.subplots(1, len(victims), figsize=(5 * len(victims), 3.6), squeeze=False)
        for ax, victim in zip(axes[0], victims):
            for s in schemes:
                vals = sorted(
                    100 * summary[st][victim][s]["padding_ratio"]
                    for st in settings
                    if victim in summary[st] and s in summary[st][victim]
                )
                if vals:
                    ax.step(vals, np.arange(1, len(vals) + 1) / len(vals), where="post", label=s, color=COLORS.get(s))
            ax.set_xlabel("padding traffic ratio (%)")
            ax.set_ylabel("CDF over runs")
            ax.set_title(victim)
            ax.legend(fontsize=7)
    else:
        fig, axes = plt.subplots(
            len(victims), 1, figsize=(max(6, 1.2 * len(settings) * len(schemes) / 3), 3.4 * len(victims)), squeeze=False
        )
        width = 0.8 / max(1, len(schemes))
        x = np.arange(len(settings))
        for ax, victim in zip(axes[:, 0], victims):
            for k, s in enumerate(schemes):
                vals = [summary[st].get(victim, {}).get(s, {}).get("waf", np.nan) for st in settings]
                ax.bar(x + k * width, vals, width, label=s, color=COLORS.get(s))
            ax.set_xticks(x + width * (len(schemes) - 1) / 2)
            ax.set_xticklabels(settings, rotation=20, fontsize=7, ha="right")
            ax.set_ylabel(f"WA ({victim})")
            ax.legend(fontsize=7, ncol=len(schemes))
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path, source=data_digest(summary))


def merge_summary(summary: dict, previous: dict) -> dict:
    """``summary`` plus what it lacks from ``previous`` (an earlier result JSON's ``summary``):
    the schemes it lacks, setting by setting (after a change to ADAPT only, rerun its variants and
    keep the unchanged baselines' rows), and the settings it lacks (a new setting run alone joins
    the earlier ones), in :func:`_setting_key`'s order."""
    out = {st: {v: dict(sc) for v, sc in bv.items()} for st, bv in summary.items()}
    for st, bv in previous.items():
        mine = out.setdefault(st, {})
        for v, sc in bv.items():
            row = mine.setdefault(v, {})
            for scheme, entry in sc.items():
                row.setdefault(scheme, entry)
    return {st: out[st] for st in sorted(out, key=_setting_key)}


def write_adapt(results: list[dict], prefix: Path, figure: str, title: str = "", reuse: dict | None = None) -> dict:
    summary = adapt_summary(results)
    if reuse:
        summary = merge_summary(summary, reuse)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    js = prefix.with_suffix(".json")
    js.write_text(
        json.dumps(
            {
                "summary": summary,
                "reductions": reductions(summary),
                "reductions_ext": reductions(summary, ADAPT_EXT),
                "paper": PAPER.get(figure),
            },
            indent=2,
        )
    )
    # drawn from the summary as read back, so the figure's digest is the file's
    _draw(prefix, json.loads(js.read_text())["summary"], figure, title, results)
    return summary


def report_markdown(summary: dict, figure: str, title: str = "", results: list[dict] | None = None) -> str:
    """The report's Markdown: :func:`markdown` and the settings that differ between the runs
    (``results``; None: the settings each summary entry records)."""
    # the tables show the victim rule and the swept setting (density or skew) already
    runs = _runs_of(summary) if results is None else results
    return markdown(summary, figure, title) + settings_markdown(runs, ("victim", "arrival"))


def _runs_of(summary: dict) -> list[dict]:
    """Stand-ins for the runs of a summary, as much of them as :func:`settings_markdown` reads: the
    workload (the setting's first word, :func:`setting_of`), the scheme and the settings."""
    return [
        {"workload": setting.split()[0], "policy": s, "settings": e.get("settings")}
        for setting, by_victim in summary.items()
        for schemes in by_victim.values()
        for s, e in schemes.items()
    ]


def _draw(prefix: Path, summary: dict, figure: str, title: str, results: list[dict] | None = None) -> list[Path]:
    md, png = prefix.with_suffix(".md"), prefix.with_suffix(".png")
    md.write_text(report_markdown(summary, figure, title, results))
    plot_adapt(summary, png, figure, title)
    print(f"results: {md}\nplot:    {png}")
    return [md, png]


def read_report(prefix: str | Path) -> dict:
    """The content of ``PREFIX.json`` as :func:`write_adapt` wrote it, or a clear exit: no such
    file, a file without the summary, or one whose stored reductions are not the ones its summary
    gives (edited by hand, or written by another version of :func:`reductions`)."""
    _, js, data = redraw_source(prefix)
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} has no summary, so report_adapt did not write it; "
            "pass the PREFIX of a report_adapt report"
        )
    summary = data["summary"]
    for key, adapt in (("reductions", ADAPT), ("reductions_ext", ADAPT_EXT)):
        if data.get(key) != json.loads(json.dumps(reductions(summary, adapt))):
            raise SystemExit(
                f"error: --redraw {prefix}: {js}'s {key} is not the one its summary gives; "
                "rebuild it from its sweeps (docs/results/regenerate.sh adapt)"
            )
    return data


def figure_data(prefix: str | Path) -> dict:
    """The summary ``PREFIX.json`` holds, as :func:`plot_adapt` draws it (:func:`read_report`
    refuses a file it cannot draw from)."""
    return read_report(prefix)["summary"]


def figure_of(data: dict) -> str | None:
    """The figure a report JSON was written for, told by its ``paper`` text (:data:`PAPER`); None
    when it is none of them (a figure of no paper text, or a text changed since)."""
    return next((f for f, text in PAPER.items() if text == data.get("paper")), None)


def title_of(md: Path, figure: str) -> str:
    """The title of a report's Markdown (its heading); "" for the heading :func:`markdown` gives a
    report without one (``ADAPT fig8``), whose figure has no title, or without the file."""
    title = markdown_title(md)
    return "" if title == f"ADAPT {figure}" else title


def redraw(prefix: str | Path, title: str | None = None, figure: str | None = None) -> list[Path]:
    """``PREFIX.md`` and ``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`read_report`
    refuses a file it cannot draw from): the title kept from ``PREFIX.md`` and the figure told by
    the JSON (:func:`figure_of`) where not given, the settings table from the settings each summary
    entry records."""
    prefix = redraw_stem(prefix)
    data = read_report(prefix)
    figure = figure or figure_of(data)
    if figure is None:
        raise SystemExit(
            f"error: --redraw {prefix}: the paper text of {prefix.with_suffix('.json')} is none of "
            f"report_adapt.PAPER's, so its figure is unknown; give --figure ({'|'.join(sorted(PAPER))})"
        )
    if title is None:
        title = title_of(prefix.with_suffix(".md"), figure)
    return _draw(prefix, data["summary"], figure, title)


class AdaptComparison(Callback):
    """Hydra callback of the ADAPT presets: after ``-m``, the WA / padding tables with ADAPT's
    reductions, written to ``output`` (a path prefix; default ``<sweep dir>/adapt``)."""

    def __init__(self, figure: str = "fig8"):
        self.figure = figure

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if not results:
            return
        prefix = Path(str(config.get("output"))).with_suffix("") if config.get("output") else sweep_dir / "adapt"
        write_adapt(results, prefix, self.figure, title=str(config.get("title") or ""))


def _earlier_summary(path: Path) -> dict:
    """The ``summary`` of an earlier ``PREFIX.json`` (``--reuse``), or a clear exit."""
    try:
        summary = json.loads(path.read_text()).get("summary")
    except (OSError, ValueError, AttributeError) as e:
        raise SystemExit(f"--reuse {path}: cannot read it as a report JSON ({e}); pass an earlier PREFIX.json") from e
    if not isinstance(summary, dict):
        raise SystemExit(f"--reuse {path}: no 'summary' in it; pass the PREFIX.json an earlier report_adapt wrote")
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="ADAPT tables and plot from finished simulate sweeps")
    ap.add_argument("prefix", type=Path, help="output path prefix (writes PREFIX.md, .json, .png)")
    ap.add_argument("sweeps", type=Path, nargs="*", help="simulate -m sweep directories (*/result.json)")
    ap.add_argument(
        "--figure", default=None, choices=sorted(PAPER), help="default: fig8 (--redraw: the one the JSON tells)"
    )
    ap.add_argument("--title", default=None, help="--redraw: default the heading of PREFIX.md")
    ap.add_argument(
        "--reuse",
        type=Path,
        help="an earlier PREFIX.json: schemes and settings missing from the sweeps are taken from it",
    )
    ap.add_argument("--redraw", action="store_true", help="PREFIX.md and PREFIX.png from PREFIX.json alone")
    a = ap.parse_args(argv)
    if a.redraw:
        if a.sweeps or a.reuse:
            ap.error("--redraw draws from PREFIX.json alone: give no sweep directory nor --reuse")
        for p in redraw(a.prefix, a.title, a.figure):
            print(f"wrote:   {p}")
        return
    if not a.sweeps:
        ap.error("give at least one sweep directory (or --redraw PREFIX)")
    results = collect_results(*a.sweeps)
    if not results:
        raise SystemExit(f"no */result.json under {', '.join(map(str, a.sweeps))}: run the sweep first")
    reuse = _earlier_summary(a.reuse) if a.reuse else None
    write_adapt(results, a.prefix.with_suffix(""), a.figure or "fig8", title=a.title or "", reuse=reuse)


if __name__ == "__main__":
    main()
