"""MINOS evaluation tables and plots (Figs. 11, 14-19 of the MINOS paper).

The metric is GC writes per user write, ``WAF - 1``. Per workload (and per sensitivity setting:
over-provisioning, physical streams, segment size) MINOS's GC writes are compared with the best
non-oracle baseline's. :class:`MinosComparison` is the Hydra callback of the presets
``+experiment=minos_fig11|minos_fig17|minos_fig17_segment|minos_fig18``; the same summary can
be built from several finished sweep directories with::

    python -m dogi_ml.report_minos OUT_PREFIX SWEEP_DIR [SWEEP_DIR ...] [--title T]

which writes ``OUT_PREFIX.json`` and ``OUT_PREFIX.png``. A sweep of one setting whose runs record
``waf_series`` (Fig. 18) adds a time panel of instantaneous WAF: its JSON then holds, beside the
summary, each run's series with its ``capacity_blocks`` (x = t / capacity) and the
``phase_boundaries`` the panel marks. ``--clustering RESULT.json`` plots Fig. 19 (the virtual ->
physical mapping over time) from one MINOS run with ``mapping_log``; its JSON holds the whole
mapping log (``user_time``, ``slot`` and ``mapping`` lists), the capacity, the phase boundaries,
the number of user streams and the moments printed beneath the plot.

    python -m dogi_ml.report_minos --redraw OUT_PREFIX [--title T]

redraws ``OUT_PREFIX.png`` from ``OUT_PREFIX.json`` alone (no sweep or run needed), for any of
these files. Each figure carries the digest of the data it draws (:func:`figure_data`,
:func:`dogi_ml.plotting.data_digest`, the PNG's ``Source`` text): the bar chart's summary, with
Fig. 18's series and phase boundaries, or Fig. 19's data. The title is a run input the JSON does
not hold (the preset's ``title``): the redraw keeps the one the figure recorded
(:func:`dogi_ml.plotting.figure_title`) unless ``--title`` gives another.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dogi_ml.callbacks import reported
from dogi_ml.plotting import data_digest, figure_title, redraw_source, redraw_stem, save_figure
from dogi_ml.report import Callback, collect_results, print_differing_settings, scheme_of, settings_of

MINOS = "minos"
# oracle policies never count as "the best baseline"
ORACLES = ("fk", "nodap", "kstream_oracle", "minos_oracle")
# sensitivity keys that make a result a different setting (Figs. 14-16)
SETTING_KEYS = ("op_ratio", "n_groups", "segment_blocks")
# one colour per scheme in every figure (MINOS red)
COLORS = {"sepgc": "tab:gray", "mida": "tab:blue", "sepbit": "tab:green", "midas": "tab:orange", "minos": "tab:red"}
# Fig. 19: its title, and what it draws besides the mapping log (:func:`clustering_data`)
CLUSTERING_TITLE = "MINOS Fig. 19 - virtual -> physical stream mapping over time (Zipf 1.01 / 0.8 alternating)"
CLUSTERING_KEYS = ("capacity_blocks", "phase_boundaries", "user_streams", "moments")


def _color(scheme: str) -> str | None:
    return COLORS.get(scheme.split("[")[0])


def phase_boundaries(r: dict) -> list[float]:
    """Where the phases of a ``phase_shift`` run change, in user writes / capacity (prefill
    included, as the WAF series' x axis): every ``phase_writes`` (default 2 capacities)."""
    wl = r.get("workload_config") or {}
    if wl.get("generator") != "phase_shift":
        return []
    cap = r.get("capacity_blocks") or 1
    phase = (wl.get("params") or {}).get("phase_writes") or 2 * cap
    total = r.get("user_writes") or 0
    pre = r.get("prefill_blocks") or 0
    return [(pre + x) / cap for x in range(phase, total - pre, phase)]


def _setting(r: dict, varied: tuple[str, ...]) -> str:
    """The workload plus the sensitivity values this sweep varies, e.g. ``zipf_h op=0.15``.
    ``n_groups`` is varied only for the schemes that use it (MiDAS keeps its own count)."""
    parts = [str(r.get("workload"))]
    short = {"op_ratio": "op", "n_groups": "streams", "segment_blocks": "seg"}
    for k in varied:
        parts.append(f"{short[k]}={r.get(k)}")
    return " ".join(parts)


def varied_keys(results: list[dict]) -> tuple[str, ...]:
    """The sensitivity keys whose value differs between runs of the same policy on the same
    workload (a per-workload segment size, as for the trace samples, is not a sweep)."""
    out = []
    for k in SETTING_KEYS:
        per_policy: dict = {}
        for r in results:
            per_policy.setdefault((r["policy"], r.get("workload")), set()).add(r.get(k))
        if any(len(v) > 1 for v in per_policy.values()):
            out.append(k)
    return tuple(out)


def minos_summary(results: list[dict]) -> dict:
    """``{"varied": [...], "settings": {setting: {"schemes": {scheme: {waf, gc_writes_per_user,
    n_groups, victim}}, "minos": ..., "best_baseline": ..., "reduction_pct": ...}}}``.

    ``reduction_pct`` = 100 (1 - MINOS's (WAF-1) / the best non-oracle baseline's (WAF-1)): the
    paper's "GC writes cut" (positive: MINOS writes less)."""
    varied = varied_keys(results)
    settings: dict = {}
    order: dict = {}  # numeric order of the settings (streams=6 before streams=10)
    for r in results:
        if r.get("waf") is None:
            continue
        # MiDAS and SepGC keep their own stream counts: in a stream sweep they appear once
        keys = tuple(k for k in varied if not (k == "n_groups" and r["policy"] in ("midas", "sepgc")))
        key = _setting(r, keys)
        order[key] = (str(r.get("workload")), *(float(r.get(k) or 0) for k in keys))
        scheme = scheme_of(r)
        settings.setdefault(key, {"schemes": {}})["schemes"][scheme] = {
            "policy": r["policy"],
            "waf": r["waf"],
            "gc_writes_per_user": r["waf"] - 1.0,
            "n_groups": r.get("n_groups"),
            "victim": r.get("victim"),
            "op_ratio": r.get("op_ratio"),
            "segment_blocks": r.get("segment_blocks"),
            "workload": r.get("workload"),
            "settings": settings_of(r),
        }
    for entry in settings.values():
        schemes = entry["schemes"]
        mine = {s: v for s, v in schemes.items() if v["policy"] == MINOS}
        base = {s: v for s, v in schemes.items() if v["policy"] not in (MINOS, *ORACLES)}
        if "minos" in mine:
            m = mine["minos"]
        elif mine:
            m = mine[sorted(mine)[0]]
        else:
            m = None
        if m is not None and base:
            best = min(base, key=lambda s: base[s]["waf"])
            b = base[best]["gc_writes_per_user"]
            entry.update(
                {
                    "minos_waf": m["waf"],
                    "best_baseline": best,
                    "best_baseline_waf": base[best]["waf"],
                    "reduction_pct": 100.0 * (1.0 - m["gc_writes_per_user"] / b) if b > 0 else None,
                    "minos_lowest": m["waf"] <= base[best]["waf"],
                }
            )
    return {"varied": list(varied), "settings": {k: settings[k] for k in sorted(settings, key=order.get)}}


def print_minos_table(summary: dict, title: str = "MINOS: GC writes per user write (WAF - 1)") -> None:
    console = Console(highlight=False, width=220)
    schemes = sorted(
        {s for e in summary["settings"].values() for s in e["schemes"]}, key=lambda s: (s.startswith(MINOS), s)
    )
    t = Table(title=title)
    t.add_column("setting")
    for s in schemes:
        t.add_column(escape(s), justify="right")  # "minos[agg1]" is a label, not rich markup
    t.add_column("best baseline")
    t.add_column("MINOS cut %", justify="right")
    for key, e in summary["settings"].items():
        cells = [f"{e['schemes'][s]['gc_writes_per_user']:.3f}" if s in e["schemes"] else "-" for s in schemes]
        red = e.get("reduction_pct")
        t.add_row(
            escape(key), *cells, escape(str(e.get("best_baseline", "-"))), f"{red:+.1f}" if red is not None else "-"
        )
    console.print(t)


def draws_time_panel(data: dict) -> bool:
    """Whether :func:`plot_minos` adds Fig. 18's time panel: one setting, with WAF series."""
    return len(data["settings"]) == 1 and any((s or {}).get("t") for s in (data.get("waf_series") or {}).values())


def plot_minos(data: dict, path: Path, title: str = "") -> Path:
    """Bars of WAF - 1 per setting and scheme from a summary (:func:`minos_summary`); with WAF
    series of one setting (Fig. 18: ``waf_series`` {scheme: {t, waf, capacity_blocks}} and
    ``phase_boundaries``, as :func:`write_minos` stores them) a second panel of instantaneous WAF
    over time. The figure carries the digest of ``data`` (:func:`drawn_data` of a file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    settings = list(data["settings"])
    schemes = sorted(
        {s for e in data["settings"].values() for s in e["schemes"]}, key=lambda s: (s.startswith(MINOS), s)
    )
    series = draws_time_panel(data)
    fig, axes = plt.subplots(
        1,
        2 if series else 1,
        figsize=(14 if series else max(8, 1.2 * len(settings) + 4), 4.8),
        squeeze=False,
        gridspec_kw={"width_ratios": [2, 1]} if series else None,
    )
    if series:
        ax_t = axes[0][0]
        runs = next(iter(data["settings"].values()))["schemes"]

        def is_minos(scheme: str) -> bool:
            return runs.get(scheme, {}).get("policy") == MINOS

        drawn = [k for k, s in data["waf_series"].items() if (s or {}).get("t")]
        # MINOS last and thicker, on top of the baselines
        for scheme in sorted(drawn, key=lambda k: (is_minos(k), k)):
            s = data["waf_series"][scheme]
            ax_t.plot(
                [x / s["capacity_blocks"] for x in s["t"]],
                s["waf"],
                label=scheme,
                lw=2.0 if is_minos(scheme) else 1.0,
                color=_color(scheme),
            )
        for x in data["phase_boundaries"]:
            ax_t.axvline(x, color="grey", lw=0.6, ls=":")
        ax_t.set_xlabel("writes / capacity (prefill included)")
        ax_t.set_ylabel("instantaneous WAF")
        ax_t.grid(alpha=0.3)
        ax_t.legend(fontsize=8)
    ax = axes[0][-1]
    x = np.arange(len(settings))
    width = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        vals = [data["settings"][k]["schemes"].get(s, {}).get("gc_writes_per_user", np.nan) for k in settings]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=s, color=_color(s))
    ax.set_xticks(x)
    ax.set_xticklabels(
        settings, rotation=30 if len(settings) > 3 else 0, ha="right" if len(settings) > 3 else "center", fontsize=8
    )
    ax.set_ylabel("GC writes per user write (WAF - 1)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    return save_figure(fig, path, source=data_digest(data), title=title)


def write_minos(results: list[dict], prefix: Path, title: str = "") -> dict:
    """Print the table and write ``prefix.json`` (summary, plus for single-setting sweeps the
    instantaneous WAF series, each with its run's ``capacity_blocks``, and the
    ``phase_boundaries``) and ``prefix.png``, drawn from ``prefix.json`` as read back
    (:func:`drawn_data`), so its digest is the file's."""
    summary = minos_summary(results)
    print_minos_table(summary, title=title or "MINOS: GC writes per user write (WAF - 1)")
    print_differing_settings(results, Console(highlight=False, width=220), exclude=SETTING_KEYS)
    out = dict(summary)
    if len(summary["settings"]) == 1:
        # the time panel's x is t / capacity: each series keeps its run's capacity beside it
        out["waf_series"] = {
            scheme_of(r): {**r["waf_series"], "capacity_blocks": r.get("capacity_blocks") or 1}
            for r in results
            if r.get("waf_series")
        }
        if out["waf_series"]:
            out["phase_boundaries"] = phase_boundaries(results[0])  # the runs share their workload
    mappings = {scheme_of(r): r["minos_mapping_log"] for r in results if r.get("minos_mapping_log")}
    if mappings:
        out["minos_mapping_log"] = mappings
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    js = prefix.with_suffix(".json")
    js.write_text(json.dumps(out, indent=1, default=float))
    png = plot_minos(drawn_data(json.loads(js.read_text())), prefix.with_suffix(".png"), title=title)
    Console().print(f"results: {js}\nplot:    {png}")
    return summary


def read_summary(path: str | Path) -> dict:
    """The summary of a JSON file :func:`write_minos` wrote (``varied`` and ``settings``; the WAF
    series and mapping logs beside them left out): what a bar chart without a time panel draws."""
    return _summary(json.loads(Path(path).read_text()))


def _summary(data: dict) -> dict:
    return {k: data[k] for k in ("varied", "settings")}


def drawn_data(data: dict) -> dict:
    """What :func:`plot_minos` draws of a :func:`write_minos` file's content: the summary, and
    for Fig. 18 (:func:`draws_time_panel`) the WAF series and phase boundaries beside it."""
    if draws_time_panel(data):
        return _summary(data) | {k: data[k] for k in ("waf_series", "phase_boundaries")}
    return _summary(data)


def _series_problem(data: dict) -> str | None:
    """Why Fig. 18's time panel cannot be drawn from ``data`` (None: it can)."""
    if not isinstance(data.get("phase_boundaries"), list):
        return "no phase_boundaries list"
    for scheme, s in data["waf_series"].items():
        if not (s or {}).get("t"):
            continue
        if not isinstance(s.get("waf"), list) or len(s["waf"]) != len(s["t"]):
            return f"{scheme}'s waf is not a list as long as its t"
        if not isinstance(s.get("capacity_blocks"), (int, float)) or s["capacity_blocks"] <= 0:
            return f"{scheme}'s series has no positive capacity_blocks"
    return None


def _clustering_problem(data: dict) -> str | None:
    """Why Fig. 19 cannot be drawn from ``data`` (None: it can)."""
    log = data["mapping_log"]
    if not isinstance(log, dict):
        return "its mapping_log is a list of rows, not the whole log's user_time and mapping lists"
    times, rows = log.get("user_time"), log.get("mapping")
    if not (isinstance(times, list) and isinstance(rows, list) and times and len(times) == len(rows)):
        return "its mapping_log has no user_time and mapping lists of one length"
    if any(not isinstance(r, list) or len(r) != len(rows[0]) for r in rows):
        return "its mapping_log's mapping rows are not lists of one length"
    for key, kind in (("capacity_blocks", (int, float)), ("user_streams", int), ("phase_boundaries", list)):
        if not isinstance(data.get(key), kind):
            return f"no {key}"
    if data["capacity_blocks"] <= 0:
        return "capacity_blocks is not positive"
    moments = data.get("moments")
    if not isinstance(moments, list) or any(
        not isinstance(m, dict) or {"user_time", "theta", "mapping"} - set(m) for m in moments
    ):
        return "no moments list of user_time, theta and mapping"
    return None


def figure_data(prefix: str | Path) -> dict:
    """The data the figure of ``PREFIX.json`` draws (its ``Source`` is this data's digest): a bar
    chart's summary (:func:`read_summary`), with Fig. 18's WAF series and phase boundaries
    (:func:`drawn_data`), or Fig. 19's (:data:`CLUSTERING_KEYS` and the mapping log's
    ``user_time`` and ``mapping``); or a one-line exit: a missing file, not one report_minos wrote,
    or one missing what its figure draws (written before the JSON held it)."""
    stem, js, data = redraw_source(prefix)
    if not isinstance(data, dict):
        data = {}  # refused below: not a MINOS summary
    if "mapping_log" in data:
        problem = _clustering_problem(data)
        if problem:
            raise SystemExit(
                f"error: --redraw {prefix}: {js} is a Fig. 19 file that cannot be drawn ({problem}); "
                f"write it anew from its run: python -m dogi_ml.report_minos {stem} --clustering RESULT.json"
            )
        return clustering_drawn(data)
    if not ("varied" in data and "settings" in data):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is not a MINOS summary (no varied and settings); "
            "give the OUT_PREFIX of a file report_minos wrote"
        )
    problem = _series_problem(data) if draws_time_panel(data) else None
    if problem:
        raise SystemExit(
            f"error: --redraw {prefix}: {js} holds WAF series (Fig. 18) whose time panel cannot be drawn "
            f"({problem}); rebuild it from its sweep: python -m dogi_ml.report_minos {stem} SWEEP_DIR"
        )
    return drawn_data(data)


def redraw(prefix: str | Path, title: str | None = None) -> Path:
    """``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`figure_data`): a bar chart, Fig. 18
    or Fig. 19, titled ``title`` (None: the title the figure recorded)."""
    stem = redraw_stem(prefix)
    data = figure_data(stem)
    png = stem.with_suffix(".png")
    if title is None:
        title = figure_title(png)
    if "mapping_log" in data:
        return plot_clustering(data, png, title=title or CLUSTERING_TITLE)
    return plot_minos(data, png, title=title)


def clustering_drawn(data: dict) -> dict:
    """What :func:`plot_clustering` draws of Fig. 19's data (:func:`clustering_data` or a
    ``--clustering`` file): :data:`CLUSTERING_KEYS` and the mapping log's ``user_time`` and
    ``mapping`` (its ``slot``, the run's other results left out)."""
    log = data["mapping_log"]
    return {k: data[k] for k in CLUSTERING_KEYS} | {
        "mapping_log": {"user_time": log["user_time"], "mapping": log["mapping"]}
    }


def clustering_data(result: dict, moments: int = 2) -> dict:
    """What Fig. 19 draws of a MINOS run with ``mapping_log``: the capacity (x = user writes /
    capacity), the phase boundaries, the number of user streams (the line between user and GC
    virtual streams), the mapping at the end of the first ``moments`` phases of a ``phase_shift``
    run (``[{"user_time", "theta", "mapping"}...]``) and the whole mapping log as lists
    (``user_time``, ``slot``, ``mapping``; ``slot`` is not drawn)."""
    import numpy as np

    log = result.get("minos_mapping_log")
    if not log:
        raise ValueError("the result has no minos_mapping_log: run MINOS with policy.params.mapping_log=N")
    cap = result.get("capacity_blocks") or 1
    t = np.array([e["user_time"] for e in log]) / cap
    bounds = phase_boundaries(result)
    thetas = (result.get("workload_config") or {}).get("params") or {}
    chosen = []
    for k, b in enumerate(bounds[:moments]):
        i = int(np.searchsorted(t, b)) - 1  # the last clustering before the phase ends
        if i >= 0:
            theta = thetas.get("theta_a", 1.01) if k % 2 == 0 else thetas.get("theta_b", 0.8)
            chosen.append({"user_time": int(log[i]["user_time"]), "theta": theta, "mapping": log[i]["mapping"]})
    return {
        "capacity_blocks": cap,
        "phase_boundaries": bounds,
        "user_streams": len(result.get("minos_user_quantiles") or []) + 2,
        "moments": chosen,
        "mapping_log": {
            "user_time": [e["user_time"] for e in log],
            "slot": [e["slot"] for e in log],
            "mapping": [e["mapping"] for e in log],
        },
    }


def plot_clustering(data: dict, path: Path, title: str = CLUSTERING_TITLE) -> Path:
    """Fig. 19 from :func:`clustering_data` (or a Fig. 19 file's :func:`figure_data`): MINOS's
    virtual -> physical mapping over time (heat map: x = user writes / capacity, y = virtual
    stream, colour = physical stream), with the mapping at the chosen moments printed beneath.
    The figure carries the digest of what it draws (``slot`` left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    data = clustering_drawn(data)
    log = data["mapping_log"]
    cap = data["capacity_blocks"]
    t = np.array(log["user_time"]) / cap
    m = np.array(log["mapping"]).T
    fig, ax = plt.subplots(figsize=(12, 4.2))
    im = ax.pcolormesh(
        t,
        np.arange(m.shape[0] + 1) - 0.5,
        m[:, :-1] if m.shape[1] > 1 else m,
        cmap="tab10",
        vmin=-0.5,
        vmax=9.5,
        shading="flat",
    )
    for b in data["phase_boundaries"]:
        ax.axvline(b, color="white", lw=0.8, ls=":")
    for c in data["moments"]:
        ax.axvline(c["user_time"] / cap, color="black", lw=1.5)
    fig_text = "   ".join(
        f"at {c['user_time'] / cap:.2f} (end of a Zipf {c['theta']} phase): {c['mapping']}" for c in data["moments"]
    )
    n_user = data["user_streams"]
    ax.axhline(n_user - 0.5, color="black", lw=0.8)
    ax.set_xlabel("user writes / capacity (prefill included); dotted: phase changes")
    ax.set_ylabel(f"virtual stream (0..{n_user - 1} user, then GC)")
    fig.colorbar(im, ax=ax, label="physical stream", ticks=range(10))
    ax.set_title(title)
    fig.text(0.01, 0.01, "solid lines, mapping of virtual streams 0..15 - " + fig_text, fontsize=7)
    # the bottom strip is left to the moments' text
    return save_figure(fig, path, source=data_digest(data), title=title, rect=(0, 0.06, 1, 1))


def write_clustering(result: dict, prefix: Path, title: str = CLUSTERING_TITLE) -> dict:
    """Fig. 19 of one MINOS run: ``prefix.json`` (:func:`clustering_data`, with the run's
    workload, WAF, effective settings and float code path) and ``prefix.png``, drawn from
    ``prefix.json`` as read back (:func:`figure_data`), so its digest is the file's. Returns the
    file's content."""
    out = clustering_data(result)
    out = {
        "moments": out["moments"],
        "clusterings": len(out["mapping_log"]["user_time"]),
        "workload": result.get("workload"),
        "waf": result.get("waf"),
        # the run's effective settings and the float code path that made it
        "settings": result.get("settings"),
        "numerics": result.get("numerics"),
        **{k: out[k] for k in CLUSTERING_KEYS if k != "moments"},
        "mapping_log": out["mapping_log"],
    }
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    js = prefix.with_suffix(".json")
    js.write_text(json.dumps(out))
    plot_clustering(json.loads(js.read_text()), prefix.with_suffix(".png"), title=title)
    return out


class MinosComparison(Callback):
    """Hydra callback of the MINOS presets: after ``-m``, the GC-writes table with MINOS's cut vs
    the best baseline, written to ``output`` (a path prefix; default ``<sweep dir>/minos``)."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if not results:
            return
        prefix = Path(str(config.get("output"))).with_suffix("") if config.get("output") else sweep_dir / "minos"
        write_minos(results, prefix, title=str(config.get("title") or ""))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="MINOS table and plot from finished simulate sweeps; "
        "--clustering RESULT.json: the Fig. 19 mapping plot of one run; "
        "--redraw: PREFIX.png from PREFIX.json alone (any of these figures)"
    )
    ap.add_argument("prefix", type=Path, help="output path prefix (writes PREFIX.json and PREFIX.png)")
    ap.add_argument("sweeps", type=Path, nargs="*", help="simulate -m sweep directories (*/result.json)")
    ap.add_argument(
        "--title",
        default=None,
        help="the figure's title (--clustering: default Fig. 19's; --redraw: default the title the figure recorded)",
    )
    ap.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="SCHEME",
        help="leave out the runs of this scheme label (repeatable); e.g. --drop minos to set "
        "minos[agg1] against the baselines of a full sweep",
    )
    ap.add_argument(
        "--clustering",
        type=Path,
        help="a MINOS result.json run with mapping_log: writes Fig. 19 and the JSON it draws from",
    )
    ap.add_argument(
        "--redraw", action="store_true", help="PREFIX.png from PREFIX.json alone (bar chart, Fig. 18 or Fig. 19)"
    )
    a = ap.parse_args(argv)
    if a.redraw:
        if a.sweeps or a.clustering:
            ap.error("--redraw draws from PREFIX.json alone: give no sweep directories and no --clustering")
        print(f"wrote:   {redraw(a.prefix, a.title)}")
        return
    if a.clustering:
        out = write_clustering(
            json.loads(a.clustering.read_text()), a.prefix.with_suffix(""), a.title or CLUSTERING_TITLE
        )
        Console().print(f"moments: {out['moments']}\nplot: {a.prefix.with_suffix('.png')}")
        return
    results = collect_results(*a.sweeps)
    if not results:
        raise SystemExit(f"no */result.json under {', '.join(map(str, a.sweeps))}: run the sweep first")
    labels = sorted({scheme_of(r) for r in results})
    unknown = [d for d in a.drop if d not in labels]
    if unknown:
        raise SystemExit(f"--drop {', '.join(unknown)}: no run has that scheme; the runs have {', '.join(labels)}")
    results = [r for r in results if scheme_of(r) not in a.drop]
    write_minos(results, a.prefix.with_suffix(""), title=a.title or "")


if __name__ == "__main__":
    main()
