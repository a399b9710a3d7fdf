"""MINOS evaluation tables and plots (Figs. 11, 14-18 of the MINOS paper).

The metric is GC writes per user write, ``WAF - 1``. Per workload (and per sensitivity setting:
over-provisioning, physical streams, segment size) MINOS's GC writes are compared with the best
non-oracle baseline's. :class:`MinosComparison` is the Hydra callback of the presets
``+experiment=minos_fig11|minos_fig17|minos_fig17_segment|minos_fig18``; the same summary can
be built from several finished sweep directories with::

    python -m dogi_ml.report_minos OUT_PREFIX SWEEP_DIR [SWEEP_DIR ...] [--title T]

which writes ``OUT_PREFIX.json`` and ``OUT_PREFIX.png``; ``--clustering RESULT.json`` plots
Fig. 19 (the virtual -> physical mapping over time) from one MINOS run with ``mapping_log``.

    python -m dogi_ml.report_minos --redraw OUT_PREFIX [--title T]

redraws ``OUT_PREFIX.png`` from ``OUT_PREFIX.json`` alone (no sweep needed). The bar chart carries
the digest of the summary it draws (:func:`dogi_ml.plotting.data_digest`, the PNG's ``Source``
text). The title is a run input the JSON does not hold (the preset's ``title``): the redraw keeps
the one the figure recorded (:func:`dogi_ml.plotting.figure_title`) unless ``--title`` gives
another. Fig. 18's time panel (its phase boundaries come from the runs) and Fig. 19 (the
run's whole mapping log) are not in their JSON: those figures carry no digest and are redrawn
from their runs only.
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


def plot_minos(summary: dict, results: list[dict], path: Path, title: str = "") -> Path:
    """Bars of WAF - 1 per setting and scheme; with ``waf_series`` runs of one workload (Fig. 18)
    a second panel of instantaneous WAF over time. The bars alone carry the digest of ``summary``
    (the time panel draws from ``results``, which the JSON does not hold whole)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    settings = list(summary["settings"])
    schemes = sorted(
        {s for e in summary["settings"].values() for s in e["schemes"]}, key=lambda s: (s.startswith(MINOS), s)
    )
    series = len(settings) == 1 and any((r.get("waf_series") or {}).get("t") for r in results)
    fig, axes = plt.subplots(
        1,
        2 if series else 1,
        figsize=(14 if series else max(8, 1.2 * len(settings) + 4), 4.8),
        squeeze=False,
        gridspec_kw={"width_ratios": [2, 1]} if series else None,
    )
    if series:
        ax_t = axes[0][0]
        for r in sorted(results, key=lambda r: (r["policy"] == MINOS, scheme_of(r))):
            s = r["waf_series"]
            cap = r.get("capacity_blocks") or 1
            ax_t.plot(
                [x / cap for x in s["t"]],
                s["waf"],
                label=scheme_of(r),
                lw=2.0 if r["policy"] == MINOS else 1.0,
                color=_color(scheme_of(r)),
            )
        for x in phase_boundaries(results[0]):
            ax_t.axvline(x, color="grey", lw=0.6, ls=":")
        ax_t.set_xlabel("writes / capacity (prefill included)")
        ax_t.set_ylabel("instantaneous WAF")
        ax_t.grid(alpha=0.3)
        ax_t.legend(fontsize=8)
    ax = axes[0][-1]
    x = np.arange(len(settings))
    width = 0.8 / max(1, len(schemes))
    for i, s in enumerate(schemes):
        vals = [summary["settings"][k]["schemes"].get(s, {}).get("gc_writes_per_user", np.nan) for k in settings]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=s, color=_color(s))
    ax.set_xticks(x)
    ax.set_xticklabels(
        settings, rotation=30 if len(settings) > 3 else 0, ha="right" if len(settings) > 3 else "center", fontsize=8
    )
    ax.set_ylabel("GC writes per user write (WAF - 1)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    return save_figure(fig, path, source=None if series else data_digest(summary), title=title)


def write_minos(results: list[dict], prefix: Path, title: str = "") -> dict:
    """Print the table and write ``prefix.json`` (summary, plus the instantaneous WAF series of
    single-workload sweeps) and ``prefix.png``, drawn from the summary as read back from
    ``prefix.json`` (:func:`read_summary`), so its digest is the file's."""
    summary = minos_summary(results)
    print_minos_table(summary, title=title or "MINOS: GC writes per user write (WAF - 1)")
    print_differing_settings(results, Console(highlight=False, width=220), exclude=SETTING_KEYS)
    out = dict(summary)
    if len(summary["settings"]) == 1:
        out["waf_series"] = {scheme_of(r): r["waf_series"] for r in results if r.get("waf_series")}
    mappings = {scheme_of(r): r["minos_mapping_log"] for r in results if r.get("minos_mapping_log")}
    if mappings:
        out["minos_mapping_log"] = mappings
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".json").write_text(json.dumps(out, indent=1, default=float))
    png = plot_minos(read_summary(prefix.with_suffix(".json")), results, prefix.with_suffix(".png"), title=title)
    Console().print(f"results: {prefix.with_suffix('.json')}\nplot:    {png}")
    return summary


def read_summary(path: str | Path) -> dict:
    """The summary :func:`plot_minos` draws from a JSON file :func:`write_minos` wrote (``varied``
    and ``settings``; the WAF series and mapping logs beside them left out)."""
    data = json.loads(Path(path).read_text())
    return {k: data[k] for k in ("varied", "settings")}


def figure_data(prefix: str | Path) -> dict:
    """The summary of ``PREFIX.json`` the bar chart draws (:func:`read_summary`), or a clear exit:
    a missing file, a Fig. 19 file (``--clustering``: the plot needs the run's whole mapping log)
    and a single-setting file with WAF series (Fig. 18: the time panel needs the runs' phase
    boundaries and capacities), whose figures are redrawn from their runs."""
    stem, js, data = redraw_source(prefix)
    if not isinstance(data, dict):
        data = {}  # refused below: not a MINOS summary
    if "mapping_log" in data:
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is a Fig. 19 file, whose plot needs the run's whole mapping log; "
            f"redraw it from the run: python -m dogi_ml.report_minos {stem} --clustering RESULT.json"
        )
    if not ("varied" in data and "settings" in data):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is not a MINOS summary (no varied and settings); "
            "give the OUT_PREFIX of a file report_minos wrote"
        )
    if any((s or {}).get("t") for s in (data.get("waf_series") or {}).values()):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} holds WAF series (Fig. 18), whose panel needs the runs' phase "
            f"boundaries and capacities, not in the JSON; rebuild it from its sweep: "
            f"python -m dogi_ml.report_minos {stem} SWEEP_DIR"
        )
    return read_summary(js)


def redraw(prefix: str | Path, title: str | None = None) -> Path:
    """``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`figure_data`), titled
    ``title`` (None: the title the figure recorded)."""
    stem = redraw_stem(prefix)
    summary = figure_data(stem)
    if title is None:
        title = figure_title(stem.with_suffix(".png"))
    return plot_minos(summary, [], stem.with_suffix(".png"), title=title)


def plot_clustering(result: dict, path: Path, moments: int = 2) -> dict:
    """Fig. 19: MINOS's virtual -> physical mapping over time from a run with ``mapping_log``
    (heat map: x = user writes / capacity, y = virtual stream, colour = physical stream), with
    the mapping at the end of the first ``moments`` phases of a ``phase_shift`` run printed
    beside it. Returns ``{"moments": [{"user_time", "theta", "mapping"}...]}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    log = result.get("minos_mapping_log")
    if not log:
        raise ValueError("the result has no minos_mapping_log: run MINOS with policy.params.mapping_log=N")
    cap = result.get("capacity_blocks") or 1
    t = np.array([e["user_time"] for e in log]) / cap
    m = np.array([e["mapping"] for e in log]).T
    bounds = phase_boundaries(result)
    thetas = (result.get("workload_config") or {}).get("params") or {}
    chosen = []
    for k, b in enumerate(bounds[:moments]):
        i = int(np.searchsorted(t, b)) - 1
        if i >= 0:
            theta = thetas.get("theta_a", 1.01) if k % 2 == 0 else thetas.get("theta_b", 0.8)
            chosen.append({"user_time": int(log[i]["user_time"]), "theta": theta, "mapping": log[i]["mapping"]})
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
    for b in bounds:
        ax.axvline(b, color="white", lw=0.8, ls=":")
    for c in chosen:
        ax.axvline(c["user_time"] / cap, color="black", lw=1.5)
    fig_text = "   ".join(
        f"at {c['user_time'] / cap:.2f} (end of a Zipf {c['theta']} phase): {c['mapping']}" for c in chosen
    )
    n_user = len(result.get("minos_user_quantiles") or []) + 2
    ax.axhline(n_user - 0.5, color="black", lw=0.8)
    ax.set_xlabel("user writes / capacity (prefill included); dotted: phase changes")
    ax.set_ylabel(f"virtual stream (0..{n_user - 1} user, then GC)")
    fig.colorbar(im, ax=ax, label="physical stream", ticks=range(10))
    ax.set_title("MINOS Fig. 19 - virtual -> physical stream mapping over time (Zipf 1.01 / 0.8 alternating)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.text(0.01, 0.01, "solid lines, mapping of virtual streams 0..15 - " + fig_text, fontsize=7)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"moments": chosen, "clusterings": len(log)}


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
        "--clustering RESULT.json: the Fig. 19 mapping plot of one run"
    )
    ap.add_argument("prefix", type=Path, help="output path prefix (writes PREFIX.json and PREFIX.png)")
    ap.add_argument("sweeps", type=Path, nargs="*", help="simulate -m sweep directories (*/result.json)")
    ap.add_argument("--title", default=None, help="--redraw: default the title the figure recorded")
    ap.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="SCHEME",
        help="leave out the runs of this scheme label (repeatable); e.g. --drop minos to set "
        "minos[agg1] against the baselines of a full sweep",
    )
    ap.add_argument("--clustering", type=Path, help="a MINOS result.json run with mapping_log (Fig. 19)")
    ap.add_argument("--redraw", action="store_true", help="PREFIX.png from PREFIX.json alone")
    a = ap.parse_args(argv)
    if a.redraw:
        if a.sweeps or a.clustering:
            ap.error("--redraw draws from PREFIX.json alone: give no sweep directories and no --clustering")
        print(f"wrote:   {redraw(a.prefix, a.title)}")
        return
    if a.clustering:
        res = json.loads(a.clustering.read_text())
        out = plot_clustering(res, a.prefix.with_suffix(".png"))
        a.prefix.with_suffix(".json").write_text(
            json.dumps(
                {
                    **out,
                    "workload": res.get("workload"),
                    "waf": res.get("waf"),
                    # the run's effective settings and the float code path that made it
                    "settings": res.get("settings"),
                    "numerics": res.get("numerics"),
                    # every clustering is in the run's result; a thinned log (<= 400 rows) is enough here
                    "mapping_log": res["minos_mapping_log"][:: max(1, len(res["minos_mapping_log"]) // 400)],
                }
            )
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
