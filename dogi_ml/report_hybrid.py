"""The hybrid's comparison (issue 40, docs/hybrid.md): one WAF table of every scheme per workload,
the hybrid's GC-write cut against the best seed scheme and the share of the gap between that
scheme and NoDaP it closes.

    python -m dogi_ml.report_hybrid OUT SWEEP_DIR [SWEEP_DIR ...] [--reuse PAPER.json ...]

``OUT`` is a path prefix: ``OUT.json`` (``{workload: {scheme: {waf, victim, settings}}}`` plus
``_summary``), ``OUT.md`` and ``OUT.png``. ``--reuse`` adds the cells of a DOGI-style summary
(``docs/results/dogi_fig10.json``) that the sweeps do not hold, marked ``reused`` with the file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dogi_ml.plotting import save_figure
from dogi_ml.report import Callback, collect_results, scheme_of, settings_of

#: the seed papers' schemes (what "the best seed scheme" is taken over)
SEED_SCHEMES = ("sepbit", "midas", "dogi", "minos", "shiro", "adapt", "phftl", "mldt")
ORACLES = ("fk", "nodap", "kstream_oracle[opmin]")
#: the tables' column order (others follow in the order met)
WORKLOADS = ("zipf", "ycsb_a", "ycsb_f", "varmail", "phase_shift", "zipf_hc_alternating")


def _cells(results: list[dict]) -> dict:
    out: dict = {}
    for r in results:
        out.setdefault(str(r.get("workload")), {})[scheme_of(r)] = {
            "waf": r["waf"],
            "victim": r.get("victim"),
            "settings": settings_of(r),
            **({"planned_groups": r["planned_groups"]} if r.get("planned_groups") is not None else {}),
        }
    return out


def summarise(table: dict) -> dict:
    """Per workload: the best seed scheme, the hybrid's WAF, its GC-write change against that
    scheme (``(WAF_h - 1) / (WAF_best - 1) - 1``) and the share of the best-to-NoDaP gap it closes
    (``(WAF_best - WAF_h) / (WAF_best - WAF_nodap)``)."""
    out = {}
    for w, row in table.items():
        seeds = {s: row[s]["waf"] for s in SEED_SCHEMES if s in row}
        entry: dict = {}
        if seeds:
            best = min(seeds, key=seeds.get)
            entry["best_seed"] = best
            entry["best_seed_waf"] = seeds[best]
        if "hybrid" in row and seeds:
            h = row["hybrid"]["waf"]
            b = entry["best_seed_waf"]
            entry["hybrid_waf"] = h
            entry["gc_change_vs_best"] = (h - 1.0) / (b - 1.0) - 1.0 if b > 1.0 else None
            entry["waf_change_vs_best"] = h / b - 1.0
            if "nodap" in row and b > row["nodap"]["waf"]:
                entry["nodap_waf"] = row["nodap"]["waf"]
                entry["gap_closed"] = (b - h) / (b - row["nodap"]["waf"])
        out[w] = entry
    return out


def _fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def markdown(table: dict, summary: dict, title: str = "") -> str:
    workloads = list(table)
    schemes: list[str] = []
    for w in workloads:
        for s in table[w]:
            if s not in schemes:
                schemes.append(s)

    def order(s):
        if s in SEED_SCHEMES:
            return (0, SEED_SCHEMES.index(s), s)
        if s.startswith("hybrid"):
            return (1, 0 if s == "hybrid" else 1, s)
        return (2, 0, s)

    schemes.sort(key=order)
    lines = [f"# {title}" if title else "", "", "| scheme | " + " | ".join(workloads) + " |"]
    lines.append("|---|" + "---:|" * len(workloads))
    for s in schemes:
        cells = []
        for w in workloads:
            c = table[w].get(s)
            if c is None:
                cells.append("")
                continue
            mark = "*" if c.get("reused") else ""
            best = summary.get(w, {}).get("best_seed") == s
            txt = f"{c['waf']:.3f}{mark}"
            cells.append(f"**{txt}**" if best else txt)
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "| workload | best seed | its WAF | hybrid | GC writes vs best | WAF vs best | gap to NoDaP closed |"]
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for w in workloads:
        e = summary.get(w, {})
        lines.append(
            f"| {w} | {e.get('best_seed', '-')} | {_fmt(e.get('best_seed_waf'))} | {_fmt(e.get('hybrid_waf'))} | "
            f"{_fmt(e.get('gc_change_vs_best'), '+.1%')} | {_fmt(e.get('waf_change_vs_best'), '+.1%')} | "
            f"{_fmt(e.get('gap_closed'), '.1%')} |"
        )
    victims = sorted({(s, c.get("victim")) for w in workloads for s, c in table[w].items()})
    lines += ["", "Victim rule per scheme: " + ", ".join(f"{s}: {v}" for s, v in victims if v) + "."]
    if any(c.get("reused") for w in workloads for c in table[w].values()):
        files = sorted({c["reused"] for w in workloads for c in table[w].values() if c.get("reused")})
        lines.append(f"\n\\* reused from {', '.join(files)} (same settings; not rerun by this command).")
    return "\n".join(lines).lstrip("\n") + "\n"


def plot(table: dict, summary: dict, path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(table)
    shown = [s for s in (*SEED_SCHEMES, "hybrid", *ORACLES) if any(s in table[w] for w in workloads)]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(workloads)), 4.5))
    width = 0.8 / max(1, len(shown))
    for i, s in enumerate(shown):
        xs = [j + i * width for j, w in enumerate(workloads) if s in table[w]]
        ys = [table[w][s]["waf"] for w in workloads if s in table[w]]
        ax.bar(xs, ys, width, label=s, hatch="//" if s == "hybrid" else None)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))], workloads)
    ax.set_ylabel("WAF")
    ax.legend(fontsize=7, ncol=4)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title)
    return save_figure(fig, path)


def write(
    out: str | Path, results: list[dict], reuse: list[str] = (), title: str = "", workload: str | None = None
) -> list[Path]:
    """The files above; ``workload`` names every result's workload (a preset's ``report_workload``,
    e.g. phase_shift run with ``reshuffle=false``)."""
    if workload:
        results = [{**r, "workload": workload} for r in results]
    table = _cells(results)
    for path in reuse:
        old = json.loads(Path(path).read_text())
        for w, row in old.items():
            if w not in table:
                continue
            for s, c in row.items():
                if s not in table[w]:
                    table[w][s] = {
                        "waf": c["waf"],
                        "victim": (c.get("settings") or {}).get("victim"),
                        "settings": c.get("settings"),
                        "reused": str(path),
                    }
    order = {w: i for i, w in enumerate(WORKLOADS)}
    table = dict(sorted(table.items(), key=lambda kv: order.get(kv[0], len(order))))
    summary = summarise(table)
    stem = Path(out)
    stem = stem.with_suffix("") if stem.suffix == ".json" else stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    js = stem.with_suffix(".json")
    js.write_text(json.dumps({**table, "_summary": summary}, indent=2, default=float))
    md = stem.with_suffix(".md")
    md.write_text(markdown(table, summary, title))
    png = plot(table, summary, stem.with_suffix(".png"), title)
    print(md.read_text())
    return [js, md, png]


class HybridComparison(Callback):
    """Hydra callback of ``+experiment=hybrid*``: the table above from the sweep, at ``output``
    (default: the sweep directory's ``hybrid``)."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir)
        if results:
            out = config.get("output") or sweep_dir / "hybrid"
            title = str(config.get("title") or "")
            for p in write(out, results, title=title, workload=config.get("report_workload")):
                print(f"wrote:   {p}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dogi_ml.report_hybrid", description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--reuse", action="append", default=[])
    ap.add_argument("--title", default="")
    ap.add_argument("--workload", default=None, help="name every result's workload so")
    a = ap.parse_args(argv)
    results = [r for d in a.sweeps for r in collect_results(Path(d))]
    if not results:
        raise SystemExit(f"no result.json under {', '.join(a.sweeps)}")
    for p in write(a.out, results, a.reuse, a.title, a.workload):
        print(f"wrote:   {p}")


if __name__ == "__main__":
    main()
