"""docs/dogi.md's hand-written tables and the figures its text quotes are docs/results/dogi_*.json's:
each cell is compared with its JSON entry, rounded as the page prints it, so a regenerated result
cannot leave the page quoting the old one (and an edited cell cannot drift from its file).

Not checked here (no JSON holds them): the `mu_rule=sepbit` runs in the switch table (except the
dogi_fig10 WAFs it quotes), NoDaP's early-stop counts and its capped-group run, the ML-Reloc
estimates and `fallback_victims=final` measured when the switches were added, the span's sample
counts and the GC-trigger figures (docs/history)."""

from __future__ import annotations

import json

import pytest
from helpers import REPO, DocsCells, docs_text, table_cells

PAGE = "docs/dogi.md"  # the tests read the page through this name (a scratch copy can be put in its place)

WORKLOADS = ["zipf", "ycsb_a", "ycsb_f", "varmail", "phase_shift"]
NAMES = {"nosep": "NoSep", "sepbit": "SepBIT", "midas": "MiDAS", "phftl": "PHFTL", "mldt": "ML-DT"}


def results(name: str) -> dict:
    return json.loads((REPO / "docs/results" / f"{name}.json").read_text())


def table(header: str, columns: list[str]) -> dict[str, list[str]]:
    """First cell -> the other cells of each row of the page's table whose header row is
    ``| header | columns... |``."""
    lines = (REPO / PAGE).read_text().splitlines()
    head = "| " + " | ".join([header, *columns]) + " |"
    start = next((i for i, line in enumerate(lines) if line.strip() == head), None)
    assert start is not None, f"{PAGE} has no table headed {head!r}"
    rows = {}
    for label, *cells in table_cells(lines, start):
        assert len(cells) == len(columns), (label, cells)
        rows[label] = cells
    return rows


def text() -> str:
    return docs_text(PAGE)


def pct(change: float) -> str:
    """A relative change (a fraction) as a signed percentage with one decimal."""
    return f"{100 * change:+.1f}"


def missing(expected: list[str]) -> list[str]:
    page = text()
    return [e for e in expected if e not in page]


def test_fig10_table_is_dogi_fig10_json():
    """Fig. 10: every scheme's WAF (bold: the lowest non-oracle), DOGI against MiDAS, and DOGI
    against the best baseline (dogi_fig10_reductions.json)."""
    fig10, red = results("dogi_fig10"), results("dogi_fig10_reductions")
    schemes = [*NAMES, "dogi", "nodap"]
    rows = table("workload", ["NoSep", "SepBIT", "MiDAS", "PHFTL", "ML-DT", "DOGI", "NoDaP", "DOGI vs MiDAS", "DOGI vs best baseline"])  # fmt: skip
    labels = {"zipf (FIO)": "zipf", **{w: w for w in WORKLOADS[1:]}}
    assert list(rows) == list(labels)
    c = DocsCells(PAGE)
    for label, w in labels.items():
        runs = fig10[w]
        lowest = min(schemes[:-1], key=lambda s: runs[s]["waf"])
        for s, cell in zip(schemes, rows[label]):
            waf = f"{runs[s]['waf']:.3f}"
            c.eq(f"Fig. 10 {label} {s}", cell, f"**{waf}**" if s == lowest else waf)
        c.eq(
            f"Fig. 10 {label} DOGI vs MiDAS", rows[label][7], pct(runs["dogi"]["waf"] / runs["midas"]["waf"] - 1) + "%"
        )
        r = red[w]
        assert r["dogi_waf"] == runs["dogi"]["waf"] and r["best_baseline_waf"] == runs[r["best_baseline"]]["waf"], w
        c.eq(f"Fig. 10 {label} vs best", rows[label][8], f"{-r['reduction_pct']:+.1f}% vs {NAMES[r['best_baseline']]}")
    c.done(5 * 9)


def test_fig10_text_figures():
    """The Fig. 10 text: DOGI's cut against MiDAS (S-type, varmail, all five), against the best
    baseline on average, the phase_shift ghost, DAC's lead on phase_shift and NoDaP's zipf WAF."""
    fig10, red, acc = results("dogi_fig10"), results("dogi_fig10_reductions"), results("dogi_fig10_accuracy")
    more = results("dogi_fig10_more_baselines")
    cut = {w: 100 * (1 - fig10[w]["dogi"]["waf"] / fig10[w]["midas"]["waf"]) for w in WORKLOADS}
    best = {w: NAMES[red[w]["best_baseline"]] for w in WORKLOADS}
    ps = fig10["phase_shift"]
    expected = [
        f"DOGI cuts WAF by {sum(cut[w] for w in WORKLOADS[:3]) / 3:.1f}% on the S-type workloads",
        f"{cut['varmail']:.1f}% on varmail (the paper",
        f"{sum(cut.values()) / 5:.1f}% over the five",
        f"against the best baseline by {sum(red[w]['reduction_pct'] for w in WORKLOADS) / 5:.1f}% on average",
        f"({ps['dogi']['waf']:.3f} against the ghost's {acc['phase_shift']['base_ghost_waf']:.3f}",
        f"except DAC on phase_shift ({pct(ps['dogi']['waf'] / more['phase_shift']['dac']['waf'] - 1)}%)",
        f"with the same bounds, sizes and WAF ({fig10['zipf']['nodap']['waf']!r})",
        "`dogi_fig10`'s " + " / ".join(f"{fig10[w]['dogi']['waf']:.3f}" for w in WORKLOADS),
        f"DOGI on zipf at the default scale {fig10['zipf']['dogi']['waf']:.10f}",
    ]  # fmt: skip
    # the best baseline per workload, as the text names it
    assert best["zipf"] == "MiDAS" and {best[w] for w in ("ycsb_a", "ycsb_f", "phase_shift")} == {"SepBIT"}
    assert best["varmail"] == "PHFTL"
    assert all(more[w][s]["waf"] > fig10[w]["dogi"]["waf"] for w in WORKLOADS for s in more[w] if (w, s) != ("phase_shift", "dac"))  # fmt: skip
    assert not missing(expected), missing(expected)


def test_more_baselines_table_is_dogi_fig10_more_baselines_json():
    more, fig10 = results("dogi_fig10_more_baselines"), results("dogi_fig10")
    rows = table("workload", ["DAC", "WARCIP", "SepGC", "MiDA", "DOGI"])
    labels = {"zipf (FIO)": "zipf", **{w: w for w in WORKLOADS[1:]}}
    assert list(rows) == list(labels)
    c = DocsCells(PAGE)
    for label, w in labels.items():
        for s, cell in zip(["dac", "warcip", "sepgc", "mida"], rows[label]):
            c.eq(f"more baselines {label} {s}", cell, f"{more[w][s]['waf']:.3f}")
        c.eq(f"more baselines {label} DOGI", rows[label][4], f"{fig10[w]['dogi']['waf']:.3f}")
    c.done(5 * 5)


def test_accuracy_table_is_dogi_fig10_accuracy_json():
    """Accuracies: user (all, non-hot), recall per class (- for none), GC, N and the Markov model's
    mean relative error."""
    acc = results("dogi_fig10_accuracy")
    classes = ["hot", *[f"c{i}" for i in range(1, 11)]]
    rows = table("workload", ["accuracy", "non-hot", *classes, "GC", "N", "model vs measured"])
    assert list(rows) == WORKLOADS
    c = DocsCells(PAGE)
    for w in WORKLOADS:
        a, cells = acc[w], rows[w]
        c.eq(f"accuracy {w} accuracy", cells[0], f"{a['user_accuracy']:.3f}")
        c.eq(f"accuracy {w} non-hot", cells[1], f"{a['user_accuracy_nonhot']:.3f}")
        for k, cell in zip(classes, cells[2:13]):
            r = a["user_recall_per_class"][k]
            c.eq(f"accuracy {w} {k}", cell, "-" if r is None else f"{r:.2f}")
        c.eq(f"accuracy {w} GC", cells[13], f"{a['gc_accuracy']:.3f}")
        c.eq(f"accuracy {w} N", cells[14], str(a["n_intermediate_groups"]))
        c.eq(f"accuracy {w} model", cells[15], f"{100 * a['model_agreement']['mean_relative_error']:+.0f}%")
    c.done(5 * 16)


def test_fig11_fig12_table_is_their_json():
    """Figs. 11-12: the model against Latest (dogi_fig11.json) and ML-Reloc against the next group
    (dogi_fig12.json), WAF and accuracies, and the text's ranges."""
    f11, f12 = results("dogi_fig11"), results("dogi_fig12")
    rows = table("workload", ["WAF: model", "Latest", "user accuracy: model", "Latest", "GC accuracy: ML-Reloc", "next group", "WAF: ML-Reloc", "next group"])  # fmt: skip
    assert list(rows) == WORKLOADS
    c = DocsCells(PAGE)
    for w in WORKLOADS:
        m, lat = f11[w]["dogi"], f11[w]["dogi[latest]"]
        r, nxt = f12[w]["dogi"], f12[w]["dogi[reloc=next_group]"]
        values = [m["waf"], lat["waf"], m["user_accuracy"], lat["user_accuracy"], r["gc_accuracy"], nxt["gc_accuracy"], r["waf"], nxt["waf"]]  # fmt: skip
        for i, (v, cell) in enumerate(zip(values, rows[w])):
            c.eq(f"Figs. 11-12 {w} column {i + 1}", cell, f"{v:.3f}")
    c.done(5 * 8)

    def span(xs):
        return f"{min(xs):.1f}-{max(xs):.1f}"

    acc = [100 * (f11[w]["dogi"]["user_accuracy"] - f11[w]["dogi[latest]"]["user_accuracy"]) for w in WORKLOADS]
    waf = {w: 100 * (f11[w]["dogi"]["waf"] / f11[w]["dogi[latest]"]["waf"] - 1) for w in WORKLOADS}
    gc = {w: 100 * (f12[w]["dogi[reloc=next_group]"]["gc_accuracy"] - f12[w]["dogi"]["gc_accuracy"]) for w in WORKLOADS}
    reloc = {w: 100 * (f12[w]["dogi"]["waf"] / f12[w]["dogi[reloc=next_group]"]["waf"] - 1) for w in WORKLOADS}
    others = WORKLOADS[:4]
    expected = [
        f"The model is {span(acc)} points more accurate than Latest",
        f"its WAF {span([-waf[w] for w in ('ycsb_a', 'ycsb_f', 'varmail')])}% lower on ycsb_a, ycsb_f and varmail, "
        f"{-waf['zipf']:.1f}% on zipf, {waf['phase_shift']:.1f}% higher on phase_shift",
        f"{span([gc[w] for w in others])} points below age-based relocation's except on phase_shift "
        f"({gc['phase_shift']:.1f} points below)",
        f"except on phase_shift ({reloc['phase_shift']:+.1f}%)",
    ]
    assert not missing(expected), missing(expected)
    assert max(abs(reloc[w]) for w in others) <= 0.3  # "its WAF within 0.3%"


def test_fig13_table_is_dogi_fig13_json():
    """Fig. 13: WAF and misprediction ratio at N = 2..10 and DOGI's search (its N), and the text's
    comparisons."""
    f13 = results("dogi_fig13")
    ns = range(2, 11)
    rows = table("workload", [*(f"N={n}" for n in ns), "DOGI's search"])
    assert list(rows) == ["zipf WAF", "zipf misprediction", "varmail WAF", "varmail misprediction"]
    c = DocsCells(PAGE)
    for w in ("zipf", "varmail"):
        runs = f13[w]
        for n, waf, mis in zip(ns, rows[f"{w} WAF"], rows[f"{w} misprediction"]):
            c.eq(f"Fig. 13 {w} WAF N={n}", waf, f"{runs[f'dogi[N={n}]']['waf']:.3f}")
            c.eq(f"Fig. 13 {w} misprediction N={n}", mis, f"{runs[f'dogi[N={n}]']['mispredict_ratio']:.3f}")
        d = runs["dogi"]
        c.eq(f"Fig. 13 {w} WAF search", rows[f"{w} WAF"][-1], f"{d['waf']:.3f} (N={d['n_intermediate_groups']})")
        c.eq(f"Fig. 13 {w} misprediction search", rows[f"{w} misprediction"][-1], f"{d['mispredict_ratio']:.3f}")
    c.done(2 * (9 * 2 + 2))

    z = {n: f13["zipf"][f"dogi[N={n}]"]["waf"] for n in ns}
    best = min(z, key=z.get)
    v = f13["varmail"]
    expected = [
        f"minimum at N = {best} ({z[best]:.3f}; N = 4 and 5 {100 * (z[5] / z[best] - 1):.1f}% above it)",
        f"N = 10 is {z[10] / z[best]:.2f}x the minimum",
        f"the search ends at N = {f13['zipf']['dogi']['n_intermediate_groups']} and its run is "
        f"{100 * (1 - f13['zipf']['dogi']['waf'] / z[best]):.1f}% below the best fixed N",
        f"({100 * (v['dogi']['waf'] / v['dogi[N=2]']['waf'] - 1):.1f}% above the fixed N = 2 run)",
    ]  # fmt: skip
    assert f"{100 * (z[4] / z[best] - 1):.1f}" == f"{100 * (z[5] / z[best] - 1):.1f}"  # "N = 4 and 5 0.2% above it"
    assert not missing(expected), missing(expected)


def test_fig14_table_is_dogi_fig14_json():
    """Fig. 14: base / +User / +Grp / +GC and +GC against +Grp, and the text's average."""
    f14 = results("dogi_fig14")
    rows = table("workload", ["base", "+User", "+Grp", "+GC (DOGI)", "+GC vs +Grp"])
    assert list(rows) == WORKLOADS
    c = DocsCells(PAGE)
    for w in WORKLOADS:
        runs = f14[w]
        for s, cell in zip(["dogi[base]", "dogi[+User]", "dogi[+Grp]", "dogi"], rows[w]):
            c.eq(f"Fig. 14 {w} {s}", cell, f"{runs[s]['waf']:.3f}")
        c.eq(f"Fig. 14 {w} +GC vs +Grp", rows[w][4], pct(runs["dogi"]["waf"] / runs["dogi[+Grp]"]["waf"] - 1) + "%")
    c.done(5 * 5)
    mean = sum(1 - f14[w]["dogi"]["waf"] / f14[w]["dogi[+Grp]"]["waf"] for w in WORKLOADS) / 5
    assert not missing([f"on every workload, by {100 * mean:.1f}% on average"])


GAP_ROWS = {
    "as configured": "as configured",
    "DOGI's switches at the paper's text": "DOGI's switches at the paper's text",
    "... greedy victims in GN / G_frzn alone": "... greedy victims in GN / G_frzn",
    "... fallback victims in GN / G_frzn only, alone": "... fallback victims in GN / G_frzn only",
    "DOGI's samples over the paper's span": "DOGI's training samples over the paper's span",
    "the paper's run length (4 TiB over 132 GiB)": "run length as the paper's (4 TiB over 132 GiB)",
    "scale 4 GiB": "scale 4 GiB",
    "... 4 GiB and the paper's run length together": "... 4 GiB and the paper's run length",
}


def test_gap_table_is_dogi_gap_json():
    """The gap to the paper by cause: DOGI vs MiDAS per workload and on the mean, the change of the
    mean against the row as configured, and what is left unexplained (dogi_gap.json)."""
    gap = results("dogi_gap")
    causes = {c["cause"]: c for c in gap["causes"]}
    rows = table("cause", ["switched", "zipf", "ycsb_a", "ycsb_f", "mean", "change"])
    assert list(rows) == [*GAP_ROWS, "left unexplained"]
    assert set(GAP_ROWS.values()) == set(causes)
    c = DocsCells(PAGE)
    for label, cause in GAP_ROWS.items():
        e, cells = causes[cause], rows[label]
        for w, cell in zip(["zipf", "ycsb_a", "ycsb_f"], cells[1:4]):
            c.eq(f"gap {label} {w}", cell, f"{-e['reduction'][w]:+.1f}")
        c.eq(f"gap {label} mean", cells[4], f"{-e['mean']:+.1f}")
        c.eq(f"gap {label} change", cells[5], "" if cause == "as configured" else f"{e['contribution']:+.1f}")
    c.eq("gap left unexplained", rows["left unexplained"][5], f"{gap['unexplained_together']:.1f}")
    c.done(8 * 5 + 1)


def test_gap_text_figures_are_dogi_gap_json():
    gap = results("dogi_gap")
    causes = {c["cause"]: c for c in gap["causes"]}
    conf, waf = causes["as configured"], gap["waf"]
    both = causes["... 4 GiB and the paper's run length"]
    scale, run = causes["scale 4 GiB"], causes["run length as the paper's (4 TiB over 132 GiB)"]
    text_, span = causes["DOGI's switches at the paper's text"], causes["DOGI's training samples over the paper's span"]
    d, sc = gap["definition"], gap["scale"]
    expected = [
        "Ours is " + " / ".join(f"{-conf['reduction'][w]:.1f}" for w in ("zipf", "ycsb_a", "ycsb_f"))
        + f"%, {-conf['mean']:.1f}% on the mean",
        f"differs from it by {abs(d['reduction_of_mean_waf'] - d['mean_of_reductions']):.1f} point here",
        f"{gap['paper_s_type_pct']} - {conf['mean']:.1f} - {both['contribution']:.1f} = {gap['unexplained_together']:.1f} point",
        f"{gap['unexplained']:.1f} if the two are added as if independent",
        f"together they gain {both['contribution']:.1f} points where alone they gain {scale['contribution']:.1f} and {run['contribution']:.1f}",
        f"MiDAS's YCSB WAF to {waf['ycsb_a']['midas_4g_vol31']:.2f} / {waf['ycsb_f']['midas_4g_vol31']:.2f}",
        f"DOGI is {min(both['reduction']['ycsb_a'], both['reduction']['ycsb_f']):.0f}-"
        f"{max(both['reduction']['ycsb_a'], both['reduction']['ycsb_f']):.0f}% below MiDAS on YCSB",
        f"zipf's {both['reduction']['zipf']:.1f}%",
        f"(zipf {-conf['reduction']['zipf']:.1f} -> {-scale['reduction']['zipf']:.1f})",
        f"move away* ({text_['contribution']:.1f} points)",
        f"cost DOGI {100 * (waf['zipf']['dogi_final_greedy'] / waf['zipf']['dogi'] - 1):.0f}% on zipf",
        f"fallback victims to GN and G_frzn {100 * (waf['zipf']['dogi_fallback_final'] / waf['zipf']['dogi'] - 1):.0f}%",
        f"moves away* ({span['contribution']:.1f})",
        f"the gap table measures it at {span['contribution']:.1f} points",
        f"(the gap table: {-text_['reduction']['zipf']:+.1f}% against MiDAS on zipf",
        f"the commit `{gap['commit'][:7]}` and MiDAS's commit `{gap['midas_commit'][:7]}`",
        f"`workload.write_volume={sc['zipf/dogi_vol31']['write_volume']:.0f}` (both schemes)",
        f"`workload.capacity_blocks={sc['zipf/dogi_4g']['capacity_blocks']} sim.segment_blocks={sc['zipf/dogi_4g']['segment_blocks']}` (both)",
        f"at 4 GiB over {sc['zipf/dogi_4g_vol31']['write_volume']:.0f} capacities",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


@pytest.mark.parametrize("name", ["dogi_fig11", "dogi_fig12", "dogi_fig13", "dogi_fig14"])
def test_the_sweeps_share_dogis_default_run(name):
    """The tables quote DOGI's default run from several files: each holds the same run (3.069 on
    zipf in every table), so a file regenerated alone shows up here."""
    fig10, other = results("dogi_fig10"), results(name)
    for w in other:
        assert other[w]["dogi"]["waf"] == fig10[w]["dogi"]["waf"], (name, w)
