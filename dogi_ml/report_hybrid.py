"""The hybrid's comparison (issue 40, docs/hybrid.md): one WAF table of every scheme per workload,
the hybrid's GC-write cut against the best seed scheme and the share of the gap between that
scheme and NoDaP it closes.

    python -m dogi_ml.report_hybrid OUT SWEEP_DIR [SWEEP_DIR ...] [--reuse PAPER.json ...]

``OUT`` is a path prefix: ``OUT.json`` (``{workload: {scheme: {waf, victim, settings}}}`` plus
``_summary``), ``OUT.md`` and ``OUT.png``. ``--reuse`` adds the cells of a DOGI-style summary
(``docs/results/dogi_fig10.json``) that the sweeps do not hold, marked ``reused`` with the file (a
cell that file had itself reused keeps the name of the file it came from).

    python -m dogi_ml.report_hybrid --redraw OUT

rewrites ``OUT.md`` and ``OUT.png`` from ``OUT.json`` alone (no sweep needed; the title is kept
from ``OUT.md``'s heading unless ``--title`` gives one). Every figure carries the digest of the
table it draws (:func:`dogi_ml.plotting.data_digest`, the PNG's ``Source`` text), so a figure left behind by a
later JSON is found (tests/test_hybrid.py checks every docs/results file).

    python -m dogi_ml.report_hybrid --closed-form OUT SWEEP_DIR [SWEEP_DIR ...]

writes ``OUT.json`` and ``OUT.md`` instead: the closed form of FIFO groups of independent writes
(:func:`fifo_groups_waf`) against the runs of the sweeps it applies to (``nosep`` with the FIFO
victim rule on ``uniform`` and ``zipf``: one group; the hybrid with ``lifetimes=popularity`` on
``zipf``: its last plan's groups), the workload's write probabilities from its generator.

    python -m dogi_ml.report_hybrid --planner OUT SWEEP_DIR [SWEEP_DIR ...]

writes ``OUT.json`` and ``OUT.md``: each hybrid run's planner against the simulator
(:func:`planner_tracking`: every plan's modelled WAF against the WAF measured over the period it
then ran, averaged over the run's last plans) and the run's WAF.

    python -m dogi_ml.report_hybrid --lifetime-shape OUT WORKLOAD [WORKLOAD ...]

writes ``OUT.json`` and ``OUT.md``: how far each workload's lifetimes are from memoryless given
the LBA's write probability (:func:`lifetime_shape`; ``WORKLOAD`` names a ``conf/workload`` file).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

import numpy as np

from dogi_ml.callbacks import reported
from dogi_ml.plotting import data_digest, markdown_title, redraw_source, redraw_stem, save_figure
from dogi_ml.report import Callback, collect_results, scheme_of, settings_of, write_table

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
            # count_reset's changes of the write stream (docs/hybrid.md "Counts that restart at a change")
            **({"count_changes": r["count_changes"]} if r.get("count_changes") is not None else {}),
        }
    return out


def summarise(table: dict) -> dict:
    """Per workload: the best seed scheme, the hybrid's WAF, its GC-write change against that
    scheme (``(WAF_h - 1) / (WAF_best - 1) - 1``) and the share of the best-to-NoDaP gap it closes
    (``(WAF_best - WAF_h) / (WAF_best - WAF_nodap)``); ``variants``: the same GC-write change for
    every hybrid run of the table (``hybrid[...]``: other switches, other lifetime sources)."""
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
        if seeds and entry["best_seed_waf"] > 1.0:
            b = entry["best_seed_waf"]
            entry["variants"] = {
                s: (c["waf"] - 1.0) / (b - 1.0) - 1.0 for s, c in row.items() if s.startswith("hybrid")
            }
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
    variants = [s for s in schemes if s.startswith("hybrid")]
    if len(variants) > 1:
        lines += ["", "GC writes against the best seed scheme, per hybrid run:", ""]
        lines += ["| hybrid run | " + " | ".join(workloads) + " |", "|---|" + "---:|" * len(workloads)]
        for s in variants:
            cells = [
                _fmt(summary.get(w, {}).get("variants", {}).get(s), "+.1%") if s in table[w] else "" for w in workloads
            ]
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
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
    # the hybrid runs this report ran itself (a reused table's are in their own plot), after the default
    ran = {s for w in workloads for s, cell in table[w].items() if s.startswith("hybrid[") and not cell.get("reused")}
    hybrids = ["hybrid", *sorted(ran)]
    shown = [s for s in (*SEED_SCHEMES, *hybrids, *ORACLES) if any(s in table[w] for w in workloads)]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(workloads)) + 2, 4.5))
    width = 0.8 / max(1, len(shown))
    # tab20: up to 20 schemes without a colour repeating (the default cycle repeats after 10)
    colours = plt.get_cmap("tab20").colors
    for i, s in enumerate(shown):
        xs = [j + i * width for j, w in enumerate(workloads) if s in table[w]]
        ys = [table[w][s]["waf"] for w in workloads if s in table[w]]
        ax.bar(
            xs,
            ys,
            width,
            label=textwrap.fill(s, 40),
            color=colours[i % len(colours)],
            hatch="//" if s in hybrids else None,
        )
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))], workloads)
    ax.set_ylabel("WAF")
    # beside the axes, so it hides no bar
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(textwrap.fill(title, 110), fontsize=10)  # over the whole figure: the legend takes a side
    return save_figure(fig, path, source=data_digest(table))


def write(
    out: str | Path,
    results: list[dict],
    reuse: list[str] = (),
    title: str = "",
    workload: str | None = None,
    keep_workloads: bool = False,
) -> list[Path]:
    """The files above; ``workload`` names every result's workload (a preset's ``report_workload``,
    e.g. phase_shift run with ``reshuffle=false``). A reused file fills the cells of the workloads
    the results ran; with ``keep_workloads`` its other workloads are kept too (a table updated with
    runs of some of its workloads)."""
    if workload:
        results = [{**r, "workload": workload} for r in results]
    table = _cells(results)
    for path in reuse:
        old = json.loads(Path(path).read_text())
        for w, row in old.items():
            if w.startswith("_"):
                continue  # the reused file's summary: made anew below
            if w not in table:
                if not keep_workloads:
                    continue
                table[w] = {}
            for s, c in row.items():
                if s not in table[w]:
                    table[w][s] = {
                        "waf": c["waf"],
                        "victim": (c.get("settings") or {}).get("victim"),
                        "settings": c.get("settings"),
                        # a cell the reused file itself took from another keeps that file's name
                        "reused": c.get("reused") or str(path),
                    }
    order = {w: i for i, w in enumerate(WORKLOADS)}
    table = dict(sorted(table.items(), key=lambda kv: order.get(kv[0], len(order))))
    summary = summarise(table)
    stem = redraw_stem(out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    js = stem.with_suffix(".json")
    js.write_text(json.dumps({**table, "_summary": summary}, indent=2, default=float))
    # drawn from the table as read back, so the figure's digest is the file's
    return [js, *_draw(stem, read_table(js), title)]


def read_table(path: str | Path) -> dict:
    """The table of a JSON file :func:`write` wrote (its workloads; ``_summary`` left out)."""
    return _table_of(json.loads(Path(path).read_text()))


def _table_of(data: dict) -> dict:
    return {w: row for w, row in data.items() if not w.startswith("_")}


def _draw(stem: Path, table: dict, title: str) -> list[Path]:
    summary = summarise(table)
    md = stem.with_suffix(".md")
    md.write_text(markdown(table, summary, title))
    png = plot(table, summary, stem.with_suffix(".png"), title)
    print(md.read_text())
    return [md, png]


def figure_data(out: str | Path) -> dict:
    """The table ``OUT.json`` holds, as :func:`plot` draws it, or a clear exit: no such file, one
    report_hybrid did not write (no ``_summary``), or one whose ``_summary`` is not the one its
    table gives (a file edited by hand, or written by another version of :func:`summarise`)."""
    _, js, data = redraw_source(out)
    if not isinstance(data, dict) or "_summary" not in data:
        raise SystemExit(f"error: --redraw {out}: {js} has no _summary, so report_hybrid did not write it")
    table = _table_of(data)
    stored = json.loads(json.dumps(summarise(table), default=float))
    if stored != data["_summary"]:
        raise SystemExit(
            f"error: --redraw {out}: {js}'s _summary is not the one its table gives; "
            "rebuild it from its sweeps (docs/results/regenerate.sh hybrid)"
        )
    return table


def redraw(out: str | Path, title: str | None = None) -> list[Path]:
    """``OUT.md`` and ``OUT.png`` anew from ``OUT.json`` alone (:func:`figure_data`): the title
    from ``OUT.md``'s heading when ``title`` is None."""
    table = figure_data(out)
    stem = redraw_stem(out)
    return _draw(stem, table, markdown_title(stem.with_suffix(".md")) if title is None else title)


# -- closed form: FIFO groups of independent writes ------------------------------------------------


def fifo_group_terms(p: np.ndarray, period: float) -> tuple[float, float]:
    """One group of LBAs written independently with probabilities ``p`` per user write, its
    segments reclaimed in FIFO order ``period`` user writes after they were written, survivors
    rewritten into the group: ``(GC copies per user write, blocks the group occupies)``. A block
    of rate ``p`` survives a period with probability ``q = exp(-p T)`` (geometric lifetimes, in
    the continuum), so it is copied ``q / (1 - q)`` times per user write; every written block
    (user or copy) holds its space for ``T``: ``T sum p / (1 - q)``. (One group of uniform ``p``
    is Desnoyers' FIFO formula, WAF ``1 / (1 - u)`` with ``u = exp(-(1 - u) / alpha)``.)"""
    x = p * float(period)
    alive = np.exp(-x)
    dead = -np.expm1(-x)
    return float(np.sum(p * alive / dead)), float(period) * float(np.sum(p / dead))


def _fifo_period(p: np.ndarray, multiplier: float) -> float:
    """The period minimising copies + ``multiplier`` x space (convex in log T), by golden section."""
    from scipy.optimize import minimize_scalar

    def cost(log_t):
        copies, space = fifo_group_terms(p, np.exp(log_t))
        return copies + multiplier * space

    res = minimize_scalar(cost, bounds=(0.0, np.log(1e15)), method="bounded", options={"xatol": 1e-9})
    return float(np.exp(res.x))


def fifo_groups_waf(groups: list[np.ndarray], space_blocks: float) -> tuple[float, list[float]]:
    """WAF of FIFO groups (:func:`fifo_group_terms`) sharing ``space_blocks`` physical blocks, the
    space split to minimise the copies (a Lagrange multiplier on the space, by bisection; one
    group: its period fills the space). Returns ``(WAF, periods)``."""
    from scipy.optimize import brentq

    groups = [np.asarray(g, np.float64) for g in groups if len(g)]
    if len(groups) == 1:
        period = brentq(lambda t: fifo_group_terms(groups[0], t)[1] - space_blocks, 1e-6, 1e15, xtol=1e-9)
        return 1.0 + fifo_group_terms(groups[0], period)[0], [period]
    lo, hi = np.log(1e-15), np.log(1e3)
    for _ in range(80):  # the space used falls as the multiplier grows
        mid = (lo + hi) / 2
        used = sum(fifo_group_terms(g, _fifo_period(g, np.exp(mid)))[1] for g in groups)
        lo, hi = (mid, hi) if used > space_blocks else (lo, mid)
    periods = [_fifo_period(g, np.exp(hi)) for g in groups]
    return 1.0 + sum(fifo_group_terms(g, t)[0] for g, t in zip(groups, periods)), periods


def _write_probabilities(workload_cfg: dict) -> np.ndarray:
    """Per LBA, the probability that a user write goes to it, from the workload's generator."""
    from dogi_ml.policies.hybrid import generator_lifetimes
    from dogi_ml.traces.workload import load_workload

    cap = int(workload_cfg["capacity_blocks"])
    if workload_cfg.get("generator") == "uniform":
        wss = max(1, int(cap * float((workload_cfg.get("params") or {}).get("wss_fraction", 1.0))))
        return np.r_[np.full(wss, 1.0 / wss), np.zeros(cap - wss)]
    trace = load_workload(workload_cfg, log=lambda *a: None)
    expected, _ = generator_lifetimes(trace.meta, cap, int(trace.block_writes.size))
    if expected.shape[0] != 1:
        raise SystemExit(
            f"--closed-form: workload {workload_cfg.get('name')!r} is phased; the closed form is for one law"
        )
    return 1.0 / expected[0]


def closed_form(results: list[dict]) -> list[dict]:
    """The closed form against each run it applies to: ``nosep`` with the FIFO rule (one group),
    the hybrid with ``lifetimes=popularity`` and no Hot Filter on zipf (its last plan's groups, by
    the bucket of each LBA's expected lifetime). The space is the physical blocks less the GC's free reserve and one
    open segment per group beyond the first."""
    from dogi_ml.policies.hybrid import bucket_time, lifetime_bucket

    rows = []
    for r in results:
        name, wl = scheme_of(r), r.get("workload_config") or {}
        one_group = r.get("policy") == "nosep" and r.get("victim") == "fifo"
        hybrid = r.get("hybrid") or {}
        # the plan's groups only: with the Hot Filter a hot group outside the plan takes part of the traffic
        planned = (
            hybrid.get("lifetimes") == "popularity" and not hybrid.get("hot_filter") and wl.get("generator") == "zipf"
        )
        if not (one_group or planned):
            continue
        p = _write_probabilities(wl)
        if one_group:
            groups, k, plan = [p[p > 0]], 1, None
        else:
            plan = r["training_history"][-1]
            thresholds = np.asarray(plan["planned_thresholds"], np.float64)
            member = np.searchsorted(thresholds, bucket_time(lifetime_bucket(1.0 / p)), side="left")
            k = thresholds.size + 1
            groups = [p[member == i] for i in range(k)]
        seg = int(r["segment_blocks"])
        space = (int(r["physical_segments"]) - int(r["config"]["gc_free_segments"]) - (k - 1)) * seg
        waf, _ = fifo_groups_waf(groups, space)
        rows.append(
            {
                "workload": r["workload"],
                "scheme": name,
                "groups": k,
                "closed_form_waf": waf,
                "simulated_waf": r["waf"],
                "planner_modelled_waf": None if plan is None else plan["modelled_waf"],
                "space_blocks": space,
            }
        )
    return rows


def write_closed_form(out: str | Path, results: list[dict]) -> list[Path]:
    rows = closed_form(results)
    if not rows:
        raise SystemExit("--closed-form: no nosep run with the FIFO rule and no hybrid popularity run on zipf")
    lines = [
        "# FIFO groups of independent writes: closed form against the simulator",
        "",
        "| workload | run | groups | closed form | simulated | simulated / closed form - 1 | planner's modelled WAF |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workload']} | {row['scheme']} | {row['groups']} | {row['closed_form_waf']:.4f} | "
            f"{row['simulated_waf']:.4f} | {row['simulated_waf'] / row['closed_form_waf'] - 1:+.2%} | "
            f"{_fmt(row['planner_modelled_waf'], '.4f')} |"
        )
    return write_table(out, rows, lines)


# -- the planner's WAF model against the simulator -------------------------------------------------

#: plans averaged per run (the last ones: the planner's samples span the whole horizon by then)
TRACKED_PLANS = 10


def planner_tracking(result: dict, last: int = TRACKED_PLANS) -> dict | None:
    """A hybrid run's plans: each plan's modelled WAF against the WAF measured over the period it
    then ran (the next retraining's ``measured_waf``), the means over the last ``last`` such pairs;
    ``None`` for a run without two consecutive planned periods."""
    history = result.get("training_history") or []
    pairs = [
        (h["modelled_waf"], nxt["measured_waf"])
        for h, nxt in zip(history, history[1:])
        if h.get("planned_groups") and h.get("modelled_waf") and nxt.get("measured_waf")
    ][-last:]
    if not pairs:
        return None
    modelled, measured = (float(np.mean(x)) for x in zip(*pairs))
    # the FIFO-group planner records its Little's-law tail with every plan; MINOS's OP model does not
    fifo = any(h.get("planned_tail_scale") is not None for h in history)
    return {
        "workload": result["workload"],
        "scheme": scheme_of(result),
        "planner": "fifo" if fifo else "opmodel",
        "plans": len(pairs),
        "modelled_waf": modelled,
        "measured_waf": measured,
        "modelled_over_measured": modelled / measured,
        "groups": history[-1].get("planned_groups"),
        "waf": result["waf"],
    }


def write_planner(out: str | Path, results: list[dict]) -> list[Path]:
    rows = [t for r in results if (t := planner_tracking(r)) is not None]
    if not rows:
        raise SystemExit("--planner: no hybrid run with planned periods in the sweeps")
    order = {w: i for i, w in enumerate(WORKLOADS)}
    rows.sort(key=lambda t: (order.get(t["workload"], len(order)), t["scheme"], t["planner"]))
    lines = [
        "# The hybrid's planner: modelled WAF against the simulator",
        "",
        f"Means over each run's last {TRACKED_PLANS} plans: a plan's modelled WAF against the WAF measured over the "
        "period it then ran.",
        "",
        "| workload | run | planner | plans | modelled WAF | measured WAF | modelled / measured | K (last plan) | run WAF |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t in rows:
        lines.append(
            f"| {t['workload']} | {t['scheme']} | {t['planner']} | {t['plans']} | {t['modelled_waf']:.3f} | {t['measured_waf']:.3f} | "
            f"{t['modelled_over_measured']:.3f} | {t['groups']} | {t['waf']:.4f} |"
        )
    return write_table(out, rows, lines)


# -- how memoryless a workload's lifetimes are ---------------------------------------------------------

#: ages (in units of the LBA's expected lifetime) at which the survival is compared with exp(-a)
SHAPE_AGES = (0.25, 1.0, 4.0)


def lifetime_shape(writes: np.ndarray, n_lbas: int) -> dict:
    """Whether the lifetimes of a write stream are what independent draws would give: for the
    writes of the first half of the trace to LBAs whose in-hindsight expected lifetime
    ``e = N / c`` is at most ``N / 64`` (their lifetimes are rarely censored by the trace's end,
    cut at ``N / 2``), the lifetime in units of ``e``, ``u = t / e``. Memoryless: ``P(u > a) =
    exp(-a)`` and a survivor's mean remaining ``E[u - a | u > a] = 1`` at every age ``a``.
    Also the share of the variance of ``log2 t`` that the LBA's ``e`` (quarter-octave buckets)
    explains, and with the previous write's interval as well (what a causal predictor sees
    beyond the rate)."""
    from dogi_ml.oracles.annotate import annotate
    from dogi_ml.policies.hybrid import lifetime_bucket

    w = np.asarray(writes, np.int64)
    n = w.size
    half = n // 2
    inv, prev = annotate(w)
    counts = np.bincount(w, minlength=n_lbas)
    expected = n / counts[w[:half]]
    t = np.minimum(inv[:half], half).astype(np.float64)
    rated = expected <= n / 64
    u = t[rated] / expected[rated]
    ages = {}
    for a in SHAPE_AGES:
        alive = u > a
        ages[f"{a:g}"] = {
            "survival": float(alive.mean()),
            "memoryless_survival": float(np.exp(-a)),
            "mean_remaining": float((u[alive] - a).mean()) if alive.any() else None,  # None: no survivor
        }

    def explained(y, keys):
        if not y.var() > 0:
            return None  # every lifetime alike: nothing to explain
        _, group, size = np.unique(keys, return_inverse=True, return_counts=True)
        total = np.bincount(group, y)
        within = np.bincount(group, y * y) - total * total / size
        return 1.0 - within.sum() / (y.size * y.var())

    seen = prev[:half] >= 0
    y = np.log2(t[seen])
    rate = lifetime_bucket(expected[seen])
    gap = lifetime_bucket((np.arange(half) - prev[:half])[seen])
    return {
        "writes": int(n),
        "rated_share": float(rated.mean()),
        "ages": ages,
        "explained_by_rate": explained(y, rate),
        "explained_by_rate_and_last_interval": explained(y, rate * 1000 + gap),
    }


def counts_against_generator(trace, n_lbas: int) -> dict | None:
    """For a workload whose generator's probabilities ``p`` are known
    (:func:`dogi_ml.policies.hybrid.generator_lifetimes`), how its counts ``c`` per window of
    ``L`` writes agree with them: the z-scores ``(c - L p) / sqrt(L p (1 - p))`` over every window
    and LBA (mean 0 and variance 1 within sampling error if the counts are draws from ``p``);
    ``None`` for other workloads."""
    from dogi_ml.policies.hybrid import PROBABILITY_GENERATORS, generator_lifetimes

    if trace.meta.get("generator") not in PROBABILITY_GENERATORS:
        return None
    w = np.asarray(trace.block_writes, np.int64)
    expected, window = generator_lifetimes(trace.meta, n_lbas, w.size)
    z = []
    for j in range(expected.shape[0]):
        part = w[j * window : (j + 1) * window]
        p = 1.0 / expected[j]
        z.append((np.bincount(part, minlength=n_lbas) - part.size * p) / np.sqrt(part.size * p * (1 - p)))
    z = np.concatenate(z)
    return {"windows": int(expected.shape[0]), "z_mean": float(z.mean()), "z_var": float(z.var()), "n": int(z.size)}


def write_lifetime_shape(out: str | Path, workloads: list[str], conf_dir: str | Path | None = None) -> list[Path]:
    import yaml

    import dogi_ml.conf
    from dogi_ml.traces.workload import load_workload

    conf = Path(conf_dir) if conf_dir else Path(dogi_ml.conf.__file__).resolve().parent / "workload"
    rows = {}
    for name in workloads:
        path = conf / f"{name}.yaml"
        if not path.exists():
            raise SystemExit(f"--lifetime-shape: no workload {name!r} ({path} not found)")
        cfg = yaml.safe_load(path.read_text())
        trace = load_workload(cfg, log=lambda *a: None)
        rows[name] = lifetime_shape(trace.block_writes, int(cfg["capacity_blocks"]))
        rows[name]["counts_against_generator"] = counts_against_generator(trace, int(cfg["capacity_blocks"]))
    head = " | ".join(f"P(u>{a:g}) [exp] | E[u-{a:g} given u>{a:g}]" for a in SHAPE_AGES)
    lines = [
        "# Lifetimes in units of the LBA's expected lifetime (u = t / e): memoryless or not",
        "",
        f"| workload | writes rated | {head} | var(log2 t) explained: rate | rate + last interval |",
        "|---|---:|" + "---:|---:|" * len(SHAPE_AGES) + "---:|---:|",
    ]
    for name, r in rows.items():
        cells = []
        for a in SHAPE_AGES:
            g = r["ages"][f"{a:g}"]
            cells += [f"{g['survival']:.3f} [{g['memoryless_survival']:.3f}]", _fmt(g["mean_remaining"], ".2f")]
        lines.append(
            f"| {name} | {r['rated_share']:.0%} | " + " | ".join(cells) + f" | {_fmt(r['explained_by_rate'], '.1%')} | "
            f"{_fmt(r['explained_by_rate_and_last_interval'], '.1%')} |"
        )
    checked = {name: r["counts_against_generator"] for name, r in rows.items() if r["counts_against_generator"]}
    if checked:
        lines += [
            "",
            "Counts per window against the generator's probabilities, z = (c - L p) / sqrt(L p (1 - p)) per "
            "window and LBA (draws from p: mean 0, variance 1; standard errors 1/sqrt(n) and sqrt(2/n)):",
            "",
            "| workload | windows | z mean | z variance | n |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, c in checked.items():
            lines.append(f"| {name} | {c['windows']} | {c['z_mean']:+.4f} | {c['z_var']:.4f} | {c['n']} |")
    return write_table(out, rows, lines)


class HybridComparison(Callback):
    """Hydra callback of ``+experiment=hybrid*``: the table above from the sweep, at ``output``
    (default: the sweep directory's ``hybrid``)."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        results = collect_results(sweep_dir, rows_by_victim=False)
        if results:
            out = config.get("output") or sweep_dir / "hybrid"
            title = str(config.get("title") or "")
            for p in write(out, results, title=title, workload=config.get("report_workload")):
                print(f"wrote:   {p}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dogi_ml.report_hybrid", description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("sweeps", nargs="*", help="sweep directories (--lifetime-shape: workload names)")
    ap.add_argument("--reuse", action="append", default=[])
    ap.add_argument(
        "--keep-workloads", action="store_true", help="keep the reused files' workloads the sweeps did not run"
    )
    ap.add_argument("--title", default=None)
    ap.add_argument("--workload", default=None, help="name every result's workload so")
    ap.add_argument("--closed-form", action="store_true", help="the FIFO closed form against the sweeps' runs")
    ap.add_argument("--lifetime-shape", action="store_true", help="how memoryless the named workloads' lifetimes are")
    ap.add_argument("--planner", action="store_true", help="each hybrid run's modelled WAF against the simulator")
    ap.add_argument("--redraw", action="store_true", help="OUT.md and OUT.png from OUT.json alone")
    a = ap.parse_args(argv)
    if a.redraw:
        if a.sweeps:
            ap.error("--redraw draws from OUT.json alone: give no sweep directories")
        for p in redraw(a.out, a.title):
            print(f"wrote:   {p}")
        return
    if not a.sweeps:
        ap.error("give at least one sweep directory (--lifetime-shape: workload names)")
    if a.lifetime_shape:
        for p in write_lifetime_shape(a.out, a.sweeps):
            print(f"wrote:   {p}")
        return
    results = collect_results(*(Path(d) for d in a.sweeps), rows_by_victim=False)
    if not results:
        raise SystemExit(f"no result.json under {', '.join(a.sweeps)}")
    if a.planner:
        for p in write_planner(a.out, results):
            print(f"wrote:   {p}")
        return
    if a.closed_form:
        for p in write_closed_form(a.out, results):
            print(f"wrote:   {p}")
        return
    for p in write(a.out, results, a.reuse, a.title or "", a.workload, a.keep_workloads):
        print(f"wrote:   {p}")


if __name__ == "__main__":
    main()
