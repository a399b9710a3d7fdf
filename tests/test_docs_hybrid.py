"""docs/hybrid.md's hand-written tables and the figures its text quotes are docs/results/hybrid*.json's
(and dogi_fig10.json's): each cell is compared with its JSON entry, rounded as the page prints it, so
a regenerated result cannot leave the page quoting the old one (and an edited cell cannot drift from
its file).

Checked elsewhere: the tables of every seed scheme and the oracles (verbatim from the report's .md,
tests/test_hybrid.py), the causal ablation's rows but NoDaP's, the early_plan rows of
hybrid_select_early.json (tests/test_hybrid.py) and the count_reset row (tests/test_hybrid_reset.py).

Not checked here (no JSON holds them): one-off runs the page says were run once, tried or measured
and not kept (the mu grids "in hindsight" and by paired windows beyond their stored first row, the
`mu_rule=sepbit` rows and the mu at the end, the seed-1 figures of the text, `score=argmax`'s bundle,
the hindsight credit's bands, the ghost and sampling variants), the frozen table's plan groups and
placed shares, the bench's loop times, the GC-write counts of the samples (their user writes are not
in the JSON) and the planner's inputs of "The planner's WAF model" (captured from one run).

GC-write changes are ``(WAF_a - 1) / (WAF_b - 1) - 1``; WAF changes ``WAF_a / WAF_b - 1``; the share of
a gap closed ``(WAF_ref - WAF) / (WAF_ref - WAF_NoDaP)``."""

from __future__ import annotations

import json

import pytest
from helpers import REPO, DocsCells, docs_percent, docs_results, docs_text, table_cells

PAGE = "docs/hybrid.md"  # the tests read the page through this name (a scratch copy can be put in its place)

WORKLOADS = ["zipf", "ycsb_a", "ycsb_f", "varmail", "phase_shift"]
ALT = "zipf_hc_alternating"
TRACES = ["tencent_cut_490", "tencent_cut_211", "msr_cut_105"]
NAMES = {"dogi": "DOGI", "minos": "MINOS", "shiro": "Shiro", "sepbit": "SepBIT", "midas": "MiDAS"}
SELECT = "hybrid[lifetimes=select,hot_filter=auto]{victim=hybrid(cost_benefit)}"
SELECT_SB = "hybrid[lifetimes=select,hot_filter=auto]{victim=hybrid(cost_benefit_sepbit)}"
HALF = "hybrid[lifetimes=select,hot_filter=auto,min_horizon=0.5]{victim=hybrid(cost_benefit)}"
HALF_SB = "hybrid[lifetimes=select,hot_filter=auto,min_horizon=0.5]{victim=hybrid(cost_benefit_sepbit)}"
EARLY_SB = "hybrid[lifetimes=select,hot_filter=auto,early_plan=True]{victim=hybrid(cost_benefit_sepbit)}"
RESET = "hybrid[lifetimes=select,hot_filter=auto,early_plan=True,count_reset=50]"


def results(name: str):
    return json.loads((REPO / "docs/results" / f"{name}.json").read_text())


def page_table(anchor: str) -> list[list[str]]:
    """The body rows (cells, ``**`` dropped) of the first table after ``anchor``, which the page must
    hold once (several tables share a header row)."""
    text = (REPO / PAGE).read_text()
    assert text.count(anchor) == 1, f"{PAGE} holds {anchor!r} {text.count(anchor)} times"
    lines = text[text.index(anchor) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("|"))
    return [[c.replace("**", "") for c in cells] for cells in table_cells(lines, start)]


def page_rows(anchor: str, width: int) -> dict[str, list[str]]:
    """``page_table`` as first cell -> the other cells, padded with empty cells to ``width``."""
    rows = {}
    for label, *cells in page_table(anchor):
        assert label not in rows and len(cells) <= width, (label, cells)
        rows[label] = cells + [""] * (width - len(cells))
    return rows


def f3(x: float) -> str:
    return f"{x:.3f}"


def f4(x: float) -> str:
    return f"{x:.4f}"


def gc(a: float, b: float) -> float:
    """GC writes of WAF ``a`` against WAF ``b``."""
    return (a - 1) / (b - 1) - 1


def signed(change: float) -> str:
    """A change with its sign always, ``+0.0`` and ``-0.0`` as they come (the tables that print
    those)."""
    return f"{100 * change:+.1f}"


def closed(waf: float, ref: float, nodap: float) -> float:
    return (ref - waf) / (ref - nodap)


def missing(expected: list[str]) -> list[str]:
    text = docs_text(PAGE)
    return [e for e in expected if e not in text]


# --- Ablation (hybrid_ablation.json) -------------------------------------------------------------

ABLATION = {
    "`hybrid`": "hybrid",
    "`hybrid[score=argmax]`": "hybrid[score=argmax]",
    "`hybrid[groups=dogi]`": "hybrid[groups=dogi]",
    "`hybrid[relocation=age]`": "hybrid[relocation=age]",
    "`hybrid[relocation=dogi]`": "hybrid[relocation=dogi]",
    "`hybrid[groups=dogi,relocation=age]`": "hybrid[groups=dogi,relocation=age]",
    "`hybrid[victims=rule]`": "hybrid[victims=rule]",
    "`hybrid[lifetimes=oracle,hot_filter=False]`": "hybrid[lifetimes=oracle,hot_filter=False]",
    "`dogi`": "dogi",
    "`nodap`": "nodap",
}


def test_ablation_table_is_hybrid_ablation_json():
    """Each run's WAF, its GC writes against DOGI's and the share of the DOGI-to-NoDaP gap it closes,
    on zipf, ycsb_a and varmail (a run not in the file: empty cells)."""
    abl = results("hybrid_ablation")
    rows = page_rows("| run | what changes |", 10)
    assert list(rows) == list(ABLATION)
    c = DocsCells(PAGE)
    for label, run in ABLATION.items():
        for i, w in enumerate(["zipf", "ycsb_a", "varmail"]):
            cells = rows[label][1 + 3 * i : 4 + 3 * i]
            runs = abl[w]
            if run not in runs:
                c.eq(f"ablation {label} {w}", " ".join(cells).strip(), "")
                continue
            waf, dogi, nodap = runs[run]["waf"], runs["dogi"]["waf"], runs["nodap"]["waf"]
            c.eq(f"ablation {label} {w} WAF", cells[0], f3(waf))
            c.eq(f"ablation {label} {w} GC vs DOGI", cells[1], signed(gc(waf, dogi)) + "%")
            c.eq(f"ablation {label} {w} gap closed", cells[2], f"{100 * closed(waf, dogi, nodap):.1f}%")
    c.done(9 * 9 + 3 + 2)


def test_ablation_text_figures():
    """The text under the ablation and "Where the shortfall comes from": each part against the full
    default, the oracle's gap closed, the argmax's WAF cost, DOGI's groups."""
    abl = results("hybrid_ablation")
    w3 = ["zipf", "ycsb_a", "varmail"]

    def vs_full(run, w):
        return gc(abl[w][run]["waf"], abl[w]["hybrid"]["waf"])

    def pcts(run, sign=True):
        return [(signed if sign else lambda x: f"{100 * x:.1f}")(vs_full(run, w)) + "%" for w in w3]

    z, y = abl["zipf"], abl["ycsb_a"]
    oracle = "hybrid[lifetimes=oracle,hot_filter=False]"
    gd = "hybrid[groups=dogi]"
    expected = [
        "cost-benefit alone: {}, {} and {} GC writes".format(*pcts("hybrid[victims=rule]")),
        "over the argmax class {}, {} and {};".format(*pcts("hybrid[score=argmax]")),
        "is {}, {} and {} better".format(*[f"{-100 * vs_full(gd, w):.1f}%" for w in w3]),
        f"`hybrid.json`'s {abl['varmail']['hybrid']['waf']!r} to the last digit",
        f"reach **{f3(z[oracle]['waf'])}** on zipf and **{f3(y[oracle]['waf'])}** on ycsb_a: "
        f"{100 * closed(z[oracle]['waf'], z['dogi']['waf'], z['nodap']['waf']):.0f}% and "
        f"{100 * closed(y[oracle]['waf'], y['dogi']['waf'], y['nodap']['waf']):.0f}% of the gap between DOGI "
        f"({f3(z['dogi']['waf'])}, {f3(y['dogi']['waf'])}) and NoDaP ({f3(z['nodap']['waf'])}, {f3(y['nodap']['waf'])})",
        f"rather than the argmax class ({f3(z['hybrid[score=argmax]']['waf'])}) gains "
        f"{100 * (z['hybrid[score=argmax]']['waf'] / z['hybrid']['waf'] - 1):.1f}% only",
        f"give {f3(z[gd]['waf'])} on zipf and {f3(y[gd]['waf'])} on ycsb_a (GC writes "
        f"{signed(gc(z[gd]['waf'], z['dogi']['waf']))}% and {signed(gc(y[gd]['waf'], y['dogi']['waf']))}% against DOGI)",
        f"with relocation by age as well {f3(z['hybrid[groups=dogi,relocation=age]']['waf'])} on zipf "
        f"({signed(gc(z['hybrid[groups=dogi,relocation=age]']['waf'], z['dogi']['waf']))}%)",
        f"true lifetimes close {100 * closed(z[oracle]['waf'], z['dogi']['waf'], z['nodap']['waf']):.1f}% of the "
        "DOGI-to-NoDaP gap on zipf",
        f"Relocation by the Kaplan-Meier remaining lifetime of the block's class (`relocation= predicted`) is worse "
        f"than by its age on zipf ({f3(z['hybrid']['waf'])} vs {f3(z['hybrid[relocation=age]']['waf'])})",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


def test_causal_ablation_nodap_row_is_the_results_file():
    """The causal ablation's NoDaP row (its other rows: tests/test_hybrid.py)."""
    res = docs_results("hybrid_select", "hybrid_ablation_select")
    rows = page_rows("| run | what is taken out |", 6)
    c = DocsCells(PAGE)
    for w, cell in zip(WORKLOADS, rows["NoDaP"][1:]):
        c.eq(f"causal ablation NoDaP {w}", cell, f4(res[w][0]["nodap"]["waf"]))
    c.done(5)


# --- What limits the hybrid (hybrid_bound*.json) -------------------------------------------------

BOUND = {
    "model (`hybrid`, HF)": "hybrid",
    "frequency, causal, no HF": "hybrid[lifetimes=frequency,hot_filter=False]",
    "frequency, causal, HF": "hybrid[lifetimes=frequency]",
    "frequency, causal, half-life 1 capacity, HF": "hybrid[lifetimes=frequency,frequency_halflife=1.0]",
    "frequency, causal, half-life 0.5 capacity, HF": "hybrid[lifetimes=frequency,frequency_halflife=0.5]",
    "frequency, causal, half-life 1 capacity, no HF": "hybrid[lifetimes=frequency,hot_filter=False,frequency_halflife=1.0]",
    "frequency, causal, half-life 0.5 capacity, no HF": "hybrid[lifetimes=frequency,hot_filter=False,frequency_halflife=0.5]",
    "popularity from the generator, no HF": "hybrid[lifetimes=popularity,hot_filter=False,popularity_from=generator]",
    "popularity from the generator, HF": "hybrid[lifetimes=popularity,popularity_from=generator]",
    "popularity, whole-trace counts, no HF": "hybrid[lifetimes=popularity,hot_filter=False]",
    "popularity, whole-trace counts, HF": "hybrid[lifetimes=popularity]",
    "popularity, counts per phase (2 capacities), no HF": "hybrid[lifetimes=popularity,hot_filter=False,popularity_window=2.0]",
    "popularity, counts per phase (2 capacities), HF": "hybrid[lifetimes=popularity,popularity_window=2.0]",
    "true lifetimes (`oracle`), no HF": "hybrid[lifetimes=oracle,hot_filter=False]",
}  # fmt: skip


def bound_cell(bound: dict, w: str, run: str) -> str:
    """``WAF (GC writes against the best seed)`` from hybrid_bound.json; empty for a run not made."""
    if run not in bound[w]:
        return ""
    waf, best = bound[w][run]["waf"], bound["_summary"][w]["best_seed_waf"]
    return f"{f3(waf)} ({signed(gc(waf, best))}%)"


def test_bound_table_is_hybrid_bound_json():
    """ "GC writes against the best seed scheme" per lifetime source, and the best seed schemes its
    lead-in names."""
    bound = results("hybrid_bound")
    rows = page_rows("| lifetimes | zipf | ycsb_a | ycsb_f | varmail | phase_shift |", 5)
    assert list(rows) == list(BOUND)
    c = DocsCells(PAGE)
    for label, run in BOUND.items():
        for w, cell in zip(WORKLOADS, rows[label]):
            c.eq(f"bound {label} {w}", cell, bound_cell(bound, w, run))
    c.done(14 * 5)
    s = bound["_summary"]
    lead = (
        f"best seed: DOGI {f3(s['zipf']['best_seed_waf'])}, {f3(s['ycsb_a']['best_seed_waf'])}, "
        f"{f3(s['ycsb_f']['best_seed_waf'])} on zipf, ycsb_a, ycsb_f; Shiro {f3(s['varmail']['best_seed_waf'])} on "
        f"varmail; MINOS {f3(s['phase_shift']['best_seed_waf'])} on phase_shift"
    )
    assert [s[w]["best_seed"] for w in WORKLOADS] == ["dogi", "dogi", "dogi", "shiro", "minos"]
    assert not missing([lead]), lead


def test_bound_text_figures():
    """The text of "What limits the hybrid": the per-workload figures and the short half-life's."""
    b = results("hybrid_bound")
    s = b["_summary"]

    def cell(w, run):
        return bound_cell(b, w, run)

    def waf(w, run):
        return f3(b[w][run]["waf"])

    def ch(w, run):
        return signed(gc(b[w][run]["waf"], s[w]["best_seed_waf"])) + "%"

    gen, freq, pop = BOUND["popularity from the generator, no HF"], BOUND["frequency, causal, no HF"], BOUND["popularity, whole-trace counts, no HF"]  # fmt: skip
    model = b["zipf"]["hybrid"]["waf"]
    q = "hybrid[lifetimes=frequency,frequency_halflife=0.25]"
    expected = [
        f"The bound (the generator's `p`) is {waf('zipf', gen)}, {-100 * gc(b['zipf'][gen]['waf'], s['zipf']['best_seed_waf']):.1f}% fewer GC writes than DOGI",
        f"reaches {waf('zipf', freq)}, {ch('zipf', freq)}, through the same planner",
        f"from {f3(model)} (model) to {waf('zipf', gen)} (bound), of which plain counting takes",
        f"Whole-trace counts ({waf('zipf', pop)}) beat the generator's exact law ({waf('zipf', gen)})",
        f"The rate alone is worse than the model ({waf('ycsb_a', pop)}: {ch('ycsb_a', pop)})",
        f"reaches {ch('ycsb_a', BOUND['popularity, whole-trace counts, HF'])} / {ch('ycsb_f', BOUND['popularity, whole-trace counts, HF'])}",
        f"with the Hot Filter gets {ch('ycsb_a', BOUND['frequency, causal, HF'])} / {ch('ycsb_f', BOUND['frequency, causal, HF'])}",
        f"Counting, no Hot Filter: {waf('varmail', freq)}, {-100 * gc(b['varmail'][freq]['waf'], s['varmail']['best_seed_waf']):.1f}% fewer GC writes than Shiro "
        f"(the rate known: {waf('varmail', pop)}, {ch('varmail', pop)})",
        f"(+{100 * gc(b['varmail'][BOUND['frequency, causal, HF']]['waf'], s['varmail']['best_seed_waf']):.1f}%, "
        f"+{100 * gc(b['varmail'][BOUND['popularity, whole-trace counts, HF']]['waf'], s['varmail']['best_seed_waf']):.1f}%)",
        f"gives {ch('phase_shift', gen)} (the generator's law) and {ch('phase_shift', BOUND['popularity, counts per phase (2 capacities), no HF'])} (counts per phase)",
        f"whole-trace rates ({ch('phase_shift', pop)})",
        f"the Hot Filter, {cell('phase_shift', BOUND['frequency, causal, half-life 0.5 capacity, HF']).replace('(', '').replace(')', '').replace(' ', ', ')}, the best causal",
        f"(0.25 capacity: {waf('phase_shift', q)}, {ch('phase_shift', q)})",
        f"the same half-life costs {ch('varmail', q)[:-3]}%)",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


def test_memoryless_table_is_hybrid_bound_shape_json():
    """ "Which workloads are memoryless": P(u > 1), the mean remaining at 1 and at 4; the z-scores
    and the variance the rate explains, quoted in the text."""
    shape = results("hybrid_bound_shape")
    rows = page_rows("| workload | generator (", 4)
    assert list(rows) == WORKLOADS
    c = DocsCells(PAGE)
    for w in WORKLOADS:
        ages = shape[w]["ages"]
        c.eq(f"memoryless {w} P(u>1)", rows[w][1], f3(ages["1"]["survival"]))
        c.eq(f"memoryless {w} E[u-1]", rows[w][2], f"{ages['1']['mean_remaining']:.2f}")
        c.eq(f"memoryless {w} E[u-4]", rows[w][3], f"{ages['4']['mean_remaining']:.2f}")
    c.done(15)
    z, p = shape["zipf"]["counts_against_generator"], shape["phase_shift"]["counts_against_generator"]
    expected = [
        f"mean {z['z_mean']:+.4f} and variance {z['z_var']:.4f} over zipf's {z['n']:,} LBAs",
        f"{p['z_mean']:+.4f} and {p['z_var']:.4f} over phase_shift's {p['windows']} phases",
        f"the rate explains {100 * shape['zipf']['explained_by_rate']:.1f}% of the variance of log2 t, with the last "
        f"interval as well still {100 * shape['zipf']['explained_by_rate_and_last_interval']:.1f}%",
        f"a survivor of one expected lifetime has {shape['ycsb_a']['ages']['1']['mean_remaining']:.1f} of them left",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


def test_closed_form_text_is_hybrid_bound_closed_form_json():
    """ "The planner's WAF model vs a closed form": the one-group checks and the popularity plans."""
    cf = {(e["workload"], e["scheme"]): e for e in results("hybrid_bound_closed_form")}
    uni, zipf = cf[("uniform", "nosep")], cf[("zipf", "nosep")]
    pop = cf[("zipf", "hybrid[lifetimes=popularity,hot_filter=False]")]
    gen = cf[("zipf", "hybrid[lifetimes=popularity,hot_filter=False,popularity_from=generator]")]
    expected = [
        f"(uniform {f4(uni['closed_form_waf'])} vs {f4(uni['simulated_waf'])}, zipf {f4(zipf['closed_form_waf'])} vs "
        f"{f4(zipf['simulated_waf'])})",
        f"({f3(gen['closed_form_waf'])} with the generator's law) where the run "
        f"measures {f3(pop['simulated_waf'])} ({f3(gen['simulated_waf'])};",
        f"own modelled WAF is {f3(pop['planner_modelled_waf'])} ({f3(gen['planner_modelled_waf'])})",
    ]  # fmt: skip
    worst = max(abs(e["closed_form_waf"] / e["simulated_waf"] - 1) for e in (uni, zipf))
    assert round(100 * worst, 2) <= 0.25, worst  # "within 0.25%"
    assert not missing(expected), missing(expected)


def test_bound_text_share_of_the_headroom_counting_takes():
    """The share of zipf's headroom (model to the generator's bound) that counting takes."""
    b = results("hybrid_bound")["zipf"]
    model = b["hybrid"]["waf"]
    gen = b[BOUND["popularity from the generator, no HF"]]["waf"]
    taken = (model - b[BOUND["frequency, causal, no HF"]]["waf"]) / (model - gen)
    expected = [f"of which plain counting takes {100 * taken:.0f}%."]
    assert not missing(expected), missing(expected)


def test_closed_form_waf_of_the_popularity_plan():
    """The closed form's WAF for the plan of the popularity lifetimes on zipf."""
    cf = {(e["workload"], e["scheme"]): e for e in results("hybrid_bound_closed_form")}
    pop = cf[("zipf", "hybrid[lifetimes=popularity,hot_filter=False]")]
    expected = [f"on zipf it gives {f3(pop['closed_form_waf'])} (2.847 with the generator's law)"]
    assert not missing(expected), missing(expected)


# --- The planner's WAF model (hybrid_bound_planner.json) -----------------------------------------

PLANNER = [
    ("model (`hybrid`, HF)", "opmodel", "hybrid"),
    ("model (`hybrid`, HF)", "fifo", "hybrid"),
    ("popularity, no HF", "opmodel", "hybrid[lifetimes=popularity,hot_filter=False]"),
    ("popularity, no HF", "fifo", "hybrid[lifetimes=popularity,hot_filter=False]"),
    ("popularity, HF", "opmodel", "hybrid[lifetimes=popularity]"),
    ("popularity, HF", "fifo", "hybrid[lifetimes=popularity]"),
    ("frequency, no HF", "opmodel", "hybrid[lifetimes=frequency,hot_filter=False]"),
    ("frequency, no HF", "fifo", "hybrid[lifetimes=frequency,hot_filter=False]"),
    ("frequency, HF", "opmodel", "hybrid[lifetimes=frequency]"),
    ("frequency, HF", "fifo", "hybrid[lifetimes=frequency]"),
]


def fifo_runs() -> dict:
    """(workload, run) -> the FIFO planner's entry (run ``hybrid[groups=fifo]`` read as ``hybrid``)."""
    return {
        (e["workload"], e["scheme"].replace("[groups=fifo]", "")): e
        for e in results("hybrid_bound_planner")
        if e["planner"] == "fifo"
    }


def test_planner_table_is_hybrid_bound_planner_json():
    """The FIFO planner's runs against the OP model's: opmodel rows from hybrid_bound.json, fifo rows
    from hybrid_bound_planner.json (``waf``), each against the best seed; empty: not run."""
    bound, fifo = results("hybrid_bound"), fifo_runs()
    table = page_table("| lifetimes (same settings as above) | planner |")
    assert [tuple(r[:2]) for r in table] == [p[:2] for p in PLANNER]
    c = DocsCells(PAGE)
    for (label, planner, run), row in zip(PLANNER, table):
        cells = row[2:] + [""] * (7 - len(row))
        for w, cell in zip(WORKLOADS, cells):
            if planner == "opmodel":
                want = bound_cell(bound, w, run) if cell or run == "hybrid" else ""
            elif (w, run) in fifo:
                waf = fifo[(w, run)]["waf"]
                want = f"{f3(waf)} ({signed(gc(waf, bound['_summary'][w]['best_seed_waf']))}%)"
            else:
                want = ""
            c.eq(f"planner {label} {planner} {w}", cell, want)
    c.done(10 * 5)


def test_planner_text_figures():
    """The text around the planner tables: the OP model's last plans, the FIFO plans' gains and their
    gaps closed, and the ranges of modelled over measured WAF."""
    bound, fifo = results("hybrid_bound"), fifo_runs()
    entries = results("hybrid_bound_planner")
    op = {(e["workload"], e["scheme"]): e for e in entries if e["planner"] == "opmodel"}
    s = bound["_summary"]
    ratio = {key: e["modelled_over_measured"] for key, e in fifo.items()}

    def gain(w):
        return f"{-100 * gc(fifo[(w, 'hybrid')]['waf'], bound[w]['hybrid']['waf']):.1f}%"

    def gap(w):
        return f"{100 * closed(fifo[(w, 'hybrid')]['waf'], s[w]['best_seed_waf'], s[w]['nodap_waf']):.1f}%"

    def was(w):
        return f"{100 * s[w]['gap_closed']:.1f}%"

    zm = op[("zipf", "hybrid")]
    pops = {w: [e for e in entries if e["workload"] == w and e["planner"] == "opmodel"] for w in WORKLOADS}
    frac = [e["modelled_over_measured"] for w in WORKLOADS if w != "varmail" for e in pops[w] if "oracle" not in e["scheme"]]  # fmt: skip
    orac = [e["modelled_over_measured"] for w in WORKLOADS if w != "varmail" for e in pops[w] if "oracle" in e["scheme"]]  # fmt: skip
    var = [e["modelled_over_measured"] for e in pops["varmail"] if "oracle" not in e["scheme"]]
    zipf_fifo = [r for (w, _), r in ratio.items() if w == "zipf"]
    ycsb_hf = [ratio[(w, f"hybrid[lifetimes={x}]")] for w in ("ycsb_a", "ycsb_f") for x in ("popularity", "frequency") if (w, f"hybrid[lifetimes={x}]") in ratio]  # fmt: skip
    ycsb_rates = [ratio[(w, "hybrid[lifetimes=popularity,hot_filter=False]")] for w in ("ycsb_a", "ycsb_f")]
    expected = [
        f"its last ten plans model {zm['modelled_waf']:.2f} where the periods they ran measure {zm['measured_waf']:.2f} "
        f"on zipf (`docs/results/hybrid_bound_planner.md`; the run's WAF {zm['waf']:.2f})",
        f"({min(frac):.2f}-{max(frac):.2f}; {min(orac):.2f}-{max(orac):.2f} with true lifetimes; "
        f"{min(var):.2f}-{max(var):.2f} on varmail, {op[('varmail', 'hybrid[lifetimes=oracle,hot_filter=False]')]['modelled_over_measured']:.2f} there",
        f"on zipf ({min(zipf_fifo):.3f}-{max(zipf_fifo):.3f} of the measured WAF for every source), on ycsb_a with the "
        f"model's lifetimes ({ratio[('ycsb_a', 'hybrid')]:.3f}) and on phase_shift ({ratio[('phase_shift', 'hybrid')]:.3f})",
        f"gain {gain('zipf')} of GC writes on zipf (the gap to NoDaP closed: {gap('zipf')}, from {was('zipf')}), "
        f"{gain('ycsb_a')} on ycsb_a ({gap('ycsb_a')}, from {was('ycsb_a')}) and {gain('phase_shift')} on phase_shift "
        f"({gap('phase_shift')}, from {was('phase_shift')}), and lose {100 * gc(fifo[('varmail', 'hybrid')]['waf'], bound['varmail']['hybrid']['waf']):.1f}% "
        f"on varmail ({gap('varmail')}, from {was('varmail')})",
        f"(modelled {fifo[('varmail', 'hybrid')]['modelled_waf']:.2f} against {fifo[('varmail', 'hybrid')]['measured_waf']:.2f} measured)",
        f"(modelled/measured {min(ycsb_hf):.2f}-{max(ycsb_hf):.2f} with the Hot Filter; without it "
        f"{min(ycsb_rates):.2f}-{max(ycsb_rates):.2f} with the rates, {ratio[('ycsb_a', 'hybrid[lifetimes=frequency,hot_filter=False]')]:.2f} with the counts",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


# --- Choosing the lifetime source online (hybrid_select*.json) -----------------------------------

SELECT_ROWS = [  # label, run (None: the WAF row of the run above)
    ("the model's (default)", "hybrid"),
    ("`lifetimes=select`", "hybrid[lifetimes=select]"),
    ("`lifetimes=select hot_filter=false`", "hybrid[lifetimes=select,hot_filter=False]"),
    ("`lifetimes=select hot_filter=auto`", SELECT),
    ("its WAF (best seed's)", None),
    ("`select`/`auto`, CB [SepBIT] behind expiry", SELECT_SB),
    ("its WAF", None),
    ("`select`/`auto`, first plan at half a capacity (`min_horizon=0.5`)", HALF),
    ("its WAF", None),
    ("the same with CB [SepBIT] behind expiry", HALF_SB),
    ("its WAF", None),
]


def test_select_table_is_hybrid_select_json():
    """GC writes against the best seed per `select` setting (the summary's ``variants``), and their
    WAFs (the first with the best seed's)."""
    res = docs_results("hybrid_select", "hybrid_select_alt")
    table = page_table("| hybrid | zipf | ycsb_a | ycsb_f | varmail | phase_shift | alternating Zipf-H/C |")
    assert [r[0] for r in table] == [label for label, _ in SELECT_ROWS]
    c = DocsCells(PAGE)
    above = None
    for (label, run), row in zip(SELECT_ROWS, table):
        cells = row[1:] + [""] * (7 - len(row))
        for w, cell in zip([*WORKLOADS, ALT], cells):
            runs, summary = res[w]
            if run is None:
                waf = f3(runs[above]["waf"])
                if above == SELECT:
                    waf += f" ({NAMES[summary['best_seed']]} {f3(summary['best_seed_waf'])})"
                want = waf
            else:
                want = docs_percent(summary["variants"][run]) + "%" if run in runs else ""
            c.eq(f"select {label} ({above if run is None else run}) {w}", cell, want)
        above = run or above
    c.done(11 * 6)


def test_early_plan_table_rows_above_are_the_select_rows():
    """The early_plan table's two `min_horizon=0.5` rows repeat the select table's."""
    res = docs_results("hybrid_select", "hybrid_select_alt")
    c = DocsCells(PAGE)
    for label, run in [("cost-benefit, `min_horizon=0.5` (above)", HALF), ("CB [SepBIT], `min_horizon=0.5` (above)", HALF_SB)]:  # fmt: skip
        cells = page_rows("the first one-off runs to the last digit), GC writes against the best", 6)[label]
        for w, cell in zip([*WORKLOADS, ALT], cells):
            c.eq(f"early_plan {label} {w}", cell, docs_percent(res[w][1]["variants"][run]) + "%")
    c.done(12)


def test_select_text_figures():
    """Figures the select section's text quotes from its files: the min_horizon WAF margins, the
    early_plan runs at 0.5, the seed-0 ycsb_a and DOGI figures, the Hot Filter off on varmail and
    the rule behind expiry's WAF on varmail."""
    res = docs_results("hybrid_select", "hybrid_select_alt")
    early = docs_results("hybrid_select_early")
    v, y = res["varmail"], res["ycsb_a"]

    def wafpct(w, run, digits=2):
        runs, s = res[w]
        return f"{100 * (runs[run]['waf'] / s['best_seed_waf'] - 1):+.{digits}f}%"

    expected = [
        f"varmail {wafpct('varmail', HALF)}, ycsb_a {wafpct('ycsb_a', HALF)}, ycsb_f {wafpct('ycsb_f', HALF)}. The gain",
        f"(ycsb_f {wafpct('ycsb_f', HALF_SB)}, varmail {wafpct('varmail', HALF_SB)}), and GC writes",
        f"(zipf {f4(early['zipf'][0][HALF]['waf'])}, varmail {f4(early['varmail'][0][HALF]['waf'])})",
        f"(select {f4(y[0][SELECT]['waf'])},",
        f"against DOGI {f4(y[0]['dogi']['waf'])},",
        f"(WAF {f3(v[0][SELECT_SB]['waf'])}, {wafpct('varmail', SELECT_SB)[1:]} above Shiro's)",
        f"`select` gives {f4(v[0]['hybrid[lifetimes=select,hot_filter=False]']['waf'])} and",
        f"(Shiro: {f3(v[1]['best_seed_waf'])})",
        f"{f4(v[0][SELECT]['waf'])} against {f4(v[0]['hybrid[lifetimes=select]']['waf'])} with the filter on",
        f"(3.013, against {f4(y[0][SELECT]['waf'])} with DOGI's hill climb); on ycsb_f 3.022 ({f3(res['ycsb_f'][0][SELECT]['waf'])}); "
        f"on zipf it moved between 4096 and 11585 and gave 3.049 ({f3(res['zipf'][0][SELECT]['waf'])})",
        f"gives ycsb_a 2.9954 (DOGI {f4(y[0]['dogi']['waf'])})",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


def test_stored_first_rows_of_the_one_off_grids():
    """The one-off grids (mu in hindsight, mu by paired windows, mu_rule=sepbit) each start with the
    stored setting: `select`/`auto`, `early_plan`, CB [SepBIT] (hybrid_select{,_alt}_early.json; with
    count_reset on phase_shift in the mu_rule table: hybrid_select_reset.json)."""
    early = docs_results("hybrid_select_early", "hybrid_select_alt_early")
    reset = docs_results("hybrid_select_reset")
    grids = {
        "mu in hindsight": ("  | mu | zipf |", "DOGI's climb (the setting itself)", False),
        "paired windows": ("  | mu rule | zipf |", "DOGI's climb (the setting itself)", False),
        "mu_rule generated": ("phase_shift with `count_reset=50`; seed 0; WAF", "the climb (stored)", True),
    }
    c = DocsCells(PAGE)
    for name, (anchor, label, with_reset) in grids.items():
        for w, cell in zip([*WORKLOADS, ALT], page_rows(anchor, 6)[label]):
            res, run = (reset, RESET) if with_reset and w == "phase_shift" else (early, EARLY_SB)
            runs, s = res[w]
            c.eq(f"{name} {label} {w}", cell, f"{f4(runs[run]['waf'])} ({docs_percent(s['variants'][run])}%)")
    c.done(3 * 6)


# --- The samples under MiDAS's rule (hybrid_traces{,_sqrt}.json) ---------------------------------


def test_traces_sqrt_table_is_hybrid_traces_sqrt_json():
    """The rule's effect on the samples: the hybrid's GC-write change (not its counts: the user
    writes are not in the files), SepBIT's and FK's WAFs under both rules, the best seed scheme
    under the square root and the hybrid against it; and the climb's row of the mu_rule table."""
    cb, sq = docs_results("hybrid_traces"), docs_results("hybrid_traces_sqrt")
    rows = page_rows("| | tencent_cut_490 | tencent_cut_211 | msr_cut_105 |", 3)
    c = DocsCells(PAGE)
    for i, w in enumerate(TRACES):
        a, b = cb[w][0]["hybrid"]["waf"], sq[w][0]["hybrid"]["waf"]
        cell = rows["hybrid's GC writes, cost-benefit -> square root"][i]
        c.eq(f"sqrt hybrid GC {w}", cell.rsplit("(", 1)[1], f"{signed(gc(b, a))}%)")
        for label, s in [("SepBIT's WAF, the same change", "sepbit"), ("FK's WAF, the same change", "fk")]:
            c.eq(f"sqrt {label} {w}", rows[label][i], f"{f3(cb[w][0][s]['waf'])} -> {f3(sq[w][0][s]['waf'])}")
        s = sq[w][1]
        c.eq(f"sqrt best {w}", rows["best seed scheme under the square root"][i], f"{NAMES[s['best_seed']]} {f3(s['best_seed_waf'])}")  # fmt: skip
        c.eq(
            f"sqrt hybrid vs best {w}",
            rows["hybrid under the square root, WAF (GC writes) vs the best"][i],
            f"{signed(s['waf_change_vs_best'])}% ({signed(s['gc_change_vs_best'])}%)",
        )
        assert len({round(v, 12) for v in s["variants"].values()}) == 1, w  # the four hybrid rows equal
    c.done(3 * 5)
    climb = page_rows("| hybrid (the default) | tencent_cut_490 |", 3)["the climb (stored)"]
    c = DocsCells(PAGE)
    for w, cell in zip(TRACES, climb):
        s = sq[w][1]
        c.eq(f"mu_rule samples climb {w}", cell, f"{f3(s['hybrid_waf'])} ({signed(s['waf_change_vs_best'])}%)")
    c.done(3)


# --- At 16 GiB (hybrid_16g.json) -----------------------------------------------------------------

SIXTEEN = {
    "SepBIT": "sepbit",
    "MiDAS": "midas",
    "DOGI": "dogi",
    "MINOS": "minos",
    "Shiro": "shiro",
    "ADAPT": "adapt",
    "PHFTL": "phftl",
    "ML-DT": "mldt",
    "hybrid (default)": "hybrid",
    "hybrid `lifetimes=select hot_filter=auto`": "hybrid[lifetimes=select,hot_filter=auto]",
    "hybrid `lifetimes=select hot_filter=auto min_horizon=0.5`": HALF,
    "... with CB [SepBIT] behind expiry": HALF_SB,
    "FK": "fk",
    "OP-Minimized oracle": "kstream_oracle[opmin]",
    "NoDaP": "nodap",
}


def test_16g_table_is_hybrid_16g_json():
    """Every scheme's WAF at 16 GiB, the hybrids' with their GC writes against DOGI."""
    g = results("hybrid_16g")
    rows = page_rows("| scheme | zipf | ycsb_a |\n", 2)
    assert list(rows) == list(SIXTEEN)
    c = DocsCells(PAGE)
    for label, run in SIXTEEN.items():
        for w, cell in zip(["zipf", "ycsb_a"], rows[label]):
            waf = g[w][run]["waf"]
            want = f3(waf)
            if run.startswith("hybrid"):
                want += f" ({signed(gc(waf, g[w]['dogi']['waf']))}%)"
            c.eq(f"16g {label} {w}", cell, want)
    c.done(15 * 2)
    assert all(g["_summary"][w]["best_seed"] == "dogi" for w in ("zipf", "ycsb_a"))


def test_16g_text_figures():
    """The 16 GiB text and the targets' row: DOGI's lead over SepBIT at both sizes, NoDaP's full
    searches, the gap closed by each hybrid."""
    g, one = results("hybrid_16g"), results("hybrid")

    def lead(r, w):
        return f"{100 * (1 - r[w]['dogi']['waf'] / r[w]['sepbit']['waf']):.1f}%"

    def gap(w, run, r=g):
        return f"{100 * closed(r[w][run]['waf'], r[w]['dogi']['waf'], r[w]['nodap']['waf']):.1f}%"

    sel = "hybrid[lifetimes=select,hot_filter=auto]"
    z, y = g["zipf"], g["ycsb_a"]
    expected = [
        f"(zipf {lead(one, 'zipf')} -> {lead(g, 'zipf')}, ycsb_a {lead(one, 'ycsb_a')} -> {lead(g, 'ycsb_a')})",
        f"gives {y['nodap']['waf']!r} again, to the last digit",
        f"gives {z['nodap']['waf']!r} again, to the last digit",
        f"closes **{gap('ycsb_a', sel)}** of the gap between DOGI and NoDaP ({f4(y['dogi']['waf'])} -> "
        f"{f4(y[sel]['waf'])} of {f4(y['dogi']['waf'])} -> {f4(y['nodap']['waf'])}), and the default hybrid "
        f"{gap('ycsb_a', 'hybrid')}",
        f"closes **{gap('zipf', sel)}** of the gap between DOGI (the best seed) and NoDaP ({f4(z['dogi']['waf'])} -> "
        f"{f4(z[sel]['waf'])} of {f4(z['dogi']['waf'])} -> {f4(z['nodap']['waf'])}; at 1 GiB "
        f"{gap('zipf', SELECT, results('hybrid_select'))}, {f4(one['zipf']['dogi']['waf'])} -> "
        f"{f4(results('hybrid_select')['zipf'][SELECT]['waf'])} of {f4(one['zipf']['dogi']['waf'])} -> "
        f"{f4(one['zipf']['nodap']['waf'])}), with `min_horizon=0.5` {gap('zipf', HALF)} and with CB [SepBIT] as well "
        f"{gap('zipf', HALF_SB)}; the default hybrid {gap('zipf', 'hybrid')}",
        f"The OP-Minimized oracle ({f3(z['kstream_oracle[opmin]']['waf'])}) is not the bound",
        f"ycsb_a {gap('ycsb_a', sel)} (NoDaP's search run to its end: {f4(y['nodap']['waf'])}), zipf {gap('zipf', sel)} "
        f"(NoDaP's search run to its end: {f4(z['nodap']['waf'])})",
        f"gap closed ycsb_a {gap('ycsb_a', HALF)}, zipf {gap('zipf', HALF)}. With CB [SepBIT] as well",
        f"gap closed ycsb_a {gap('ycsb_a', HALF_SB)}, zipf {gap('zipf', HALF_SB)} |",
        f"1.2814 against {f4(one['ycsb_a']['nodap']['waf'])} on ycsb_a (`dogi_fig10.json`) and 1.2962 against "
        f"{f4(one['zipf']['nodap']['waf'])} on zipf",
        f"against the full search's {f4(y['nodap']['waf'])}",
        f"WAF {f3(z[sel]['waf'])} and {f3(y[sel]['waf'])} against {f3(z['dogi']['waf'])} and {f3(y['dogi']['waf'])}",
        f"WAF {f3(z[HALF]['waf'])} and {f3(y[HALF]['waf'])}; gap closed",
        f"WAF {f3(z[HALF_SB]['waf'])} and {f3(y[HALF_SB]['waf'])}; gap closed",
        f"2.4751 (-9.5% GC writes against DOGI, {signed(gc(z[sel]['waf'], z['dogi']['waf']))}% at 1) and ycsb_a "
        f"{f4(y[HALF]['waf'])} ({signed(gc(y[HALF]['waf'], y['dogi']['waf']))}%, {signed(gc(y[sel]['waf'], y['dogi']['waf']))}% at",
        f"zipf {f4(z[HALF]['waf'])} ({signed(gc(z[HALF]['waf'], z['dogi']['waf']))}% GC writes against DOGI",
        f"nothing is found either: {f4(z[HALF_SB]['waf'])} and {f4(y[HALF_SB]['waf'])}",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


# --- Per-block cost, deployment (dogi_fig10, hybrid, hybrid_select, hybrid_frozen*_seeds.json) ---


def test_bench_and_frozen_table_wafs():
    """The bench table's WAFs (the schemes' 1 GiB zipf runs) and the frozen table's online and
    in-sample WAFs (its `score=argmax` online run: hybrid_ablation.json; the argmax bundle's WAF,
    the plans' groups and the placed shares are in no file)."""
    fig10, one, sel = results("dogi_fig10"), results("hybrid"), results("hybrid_select")
    abl, seeds = results("hybrid_ablation"), results("hybrid_frozen_seeds")["workloads"]
    bench = page_rows("| scheme | WAF | loop CPU |", 4)
    frozen = page_rows("| trace | hybrid (online, float) |", 4)
    c = DocsCells(PAGE)
    c.eq("bench DOGI", bench["DOGI"][0], f4(fig10["zipf"]["dogi"]["waf"]))
    c.eq("bench hybrid", bench["hybrid (default)"][0], f4(one["zipf"]["hybrid"]["waf"]))
    c.eq("bench select", bench["hybrid, `lifetimes=select hot_filter=auto`"][0], f4(sel["zipf"][SELECT]["waf"]))
    for label, w in [("zipf 1 GiB", "zipf"), ("ycsb_a 1 GiB", "ycsb_a")]:
        c.eq(f"frozen {label} online", frozen[label][0], f4(one[w]["hybrid"]["waf"]))
        c.eq(f"frozen {label} online (bundle's run)", frozen[label][0], f4(seeds[w]["bundles"]["hybrid_frozen"]["run_waf"]))  # fmt: skip
        c.eq(f"frozen {label} frozen", frozen[label][3], f4(seeds[w]["deployed"]["hybrid_frozen"]["in_sample"]["waf"]))
    c.eq(
        "frozen argmax online", frozen["zipf 1 GiB, `score=argmax`"][0], f4(abl["zipf"]["hybrid[score=argmax]"]["waf"])
    )
    c.done(3 + 6 + 1)
    a, m = abl["zipf"]["hybrid[score=argmax]"]["waf"], one["zipf"]["hybrid"]["waf"]
    expected = [
        f"the fold costs the online hybrid {100 * (a / m - 1):.1f}% ({f4(a)} vs {f4(m)})",
        f"(2.9602, {seeds['zipf']['deployed']['hybrid_frozen']['in_sample']['gc_writes']} GC writes)",
        f"and its bundle {f4(seeds['ycsb_a']['deployed']['hybrid_frozen']['in_sample']['waf'])} in sample, in the "
        f"simulator and in the ZNS harness alike ({seeds['ycsb_a']['deployed']['hybrid_frozen']['in_sample']['gc_writes']} GC writes",
    ]  # fmt: skip
    assert not missing(expected), missing(expected)


SEED_WORKLOADS = ["zipf", "ycsb_a", "phase_shift", "varmail"]


def best_online(entry: dict) -> tuple[str, dict]:
    """The best seed scheme among the file's online schemes (the hybrid is none)."""
    return min(((s, r) for s, r in entry["online"].items() if s != "hybrid"), key=lambda sr: sr[1]["waf"])


def test_frozen_seeds_table_is_hybrid_frozen_seeds_json():
    """The model bundles learned on seed 0 and deployed on seeds 0 and 1, against the online schemes
    on seed 1."""
    seeds = results("hybrid_frozen_seeds")["workloads"]
    rows = page_rows("| workload | hybrid_frozen, seed 0 (in) |", 10)
    assert list(rows) == SEED_WORKLOADS
    c = DocsCells(PAGE)
    for w in SEED_WORKLOADS:
        e, cells = seeds[w], rows[w]
        for k, frozen in enumerate(["hybrid_frozen", "dogi_frozen"]):
            d = e["deployed"][frozen]
            i, o = d["in_sample"], d["out_of_sample"]
            c.eq(f"seeds {w} {frozen} in", cells[3 * k], f4(i["waf"]))
            c.eq(f"seeds {w} {frozen} out", cells[3 * k + 1], f4(o["waf"]))
            c.eq(f"seeds {w} {frozen} out/in", cells[3 * k + 2], signed(o["gc_writes"] / i["gc_writes"] - 1) + "%")
        c.eq(f"seeds {w} online", cells[6], f4(e["online"]["hybrid"]["waf"]))
        name, best = best_online(e)
        c.eq(f"seeds {w} best", cells[7], f"{NAMES[name]} {f4(best['waf'])}")
        out = e["deployed"]["hybrid_frozen"]["out_of_sample"]["gc_writes"]
        c.eq(f"seeds {w} out vs best", cells[8], signed(out / best["gc_writes"] - 1) + "%")
    c.done(4 * 9)


def test_frozen_seeds_text_figures():
    """The bullets under the model bundles' table: the frozen hybrid against the online one on seed 1,
    varmail against Shiro and MINOS, and the hot sets of zipf's two seeds."""
    seeds = results("hybrid_frozen_seeds")["workloads"]

    def vs_online(w):
        return 1 - seeds[w]["deployed"]["hybrid_frozen"]["out_of_sample"]["gc_writes"] / seeds[w]["online"]["hybrid"]["gc_writes"]  # fmt: skip

    v = seeds["varmail"]
    vin, vout = (v["deployed"]["hybrid_frozen"][k]["gc_writes"] for k in ("in_sample", "out_of_sample"))
    hot = seeds["zipf"]["hot_set"]
    learned = seeds["zipf"]["deployed"]
    expected = [
        f"on seed 1: {100 * vs_online('zipf'):.1f}% fewer GC writes than the online hybrid on zipf, "
        f"{100 * vs_online('ycsb_a'):.1f}% on ycsb_a, {100 * vs_online('phase_shift'):.1f}% on phase_shift",
        f"+{100 * (vout / v['online']['hybrid']['gc_writes'] - 1):.1f}% GC writes against the online hybrid, "
        f"+{100 * (vout / v['online']['shiro']['gc_writes'] - 1):.0f}% against Shiro "
        f"(+{100 * (vout / v['online']['minos']['gc_writes'] - 1):.0f}% against MINOS)",
        f"share {100 * hot['hot_sets_shared']:.1f}% of their addresses, and seed 0's hot set takes "
        f"{100 * hot['learn_hot_share_of_deploy_writes']:.1f}% of seed 1's writes "
        f"({100 * hot['deploy_hot_share_of_deploy_writes']:.1f}% of seed 1's writes go to its own hot set)",
        f"the bundles give {f4(learned['hybrid_frozen']['out_of_sample_learned_hot_set']['waf'])} (`hybrid_frozen`) and "
        f"{f4(learned['dogi_frozen']['out_of_sample_learned_hot_set']['waf'])} (`dogi_frozen`)",
        f"({100 * seeds['ycsb_a']['hot_set']['deploy_hot_share_of_deploy_writes']:.1f}% and "
        f"{100 * v['hot_set']['deploy_hot_share_of_deploy_writes']:.1f}% of writes)",
    ]  # fmt: skip
    assert vin > 0
    assert seeds["ycsb_a"]["hot_set"]["hot_sets_shared"] == v["hot_set"]["hot_sets_shared"] == 1.0  # "the same"
    assert not missing(expected), missing(expected)


COUNT_SOURCES = {"zipf": "counts, no decay", "ycsb_a": "counts, no decay", "phase_shift": "counts, half-life 0.5 capacities", "varmail": "counts, no decay"}  # fmt: skip


def test_count_bundle_table_is_hybrid_frozen_counts_seeds_json():
    """The count bundles (select/auto learned on seed 0): the online runs, the bundle in and out of
    sample, the best seed scheme on seed 1 and the model bundle out of sample
    (hybrid_frozen_seeds.json)."""
    counts = results("hybrid_frozen_counts_seeds")["workloads"]
    model = results("hybrid_frozen_seeds")["workloads"]
    rows = page_rows("| workload | last plan's source |", 9)
    assert list(rows) == SEED_WORKLOADS
    c = DocsCells(PAGE)
    for w in SEED_WORKLOADS:
        e, cells = counts[w], rows[w]
        d = e["deployed"]["hybrid_frozen"]
        c.eq(f"counts {w} source", cells[0], COUNT_SOURCES[w])  # the source is in no file: the page's own
        c.eq(f"counts {w} online seed 0", cells[1], f4(e["bundles"]["hybrid_frozen"]["run_waf"]))
        c.eq(f"counts {w} in", cells[2], f4(d["in_sample"]["waf"]))
        c.eq(f"counts {w} out", cells[3], f4(d["out_of_sample"]["waf"]))
        c.eq(f"counts {w} online seed 1", cells[4], f4(e["online"]["hybrid"]["waf"]))
        name, best = best_online(e)
        c.eq(f"counts {w} best", cells[5], f"{NAMES[name]} {f4(best['waf'])}")
        c.eq(f"counts {w} out vs best", cells[6], signed(d["out_of_sample"]["gc_writes"] / best["gc_writes"] - 1) + "%")
        c.eq(f"counts {w} model bundle", cells[7], f4(model[w]["deployed"]["hybrid_frozen"]["out_of_sample"]["waf"]))
    c.done(4 * 8)


def test_count_bundle_text_figures():
    """The bullets under the count bundles' table, and the harness figures of zipf in sample."""
    counts = results("hybrid_frozen_counts_seeds")["workloads"]
    model = results("hybrid_frozen_seeds")["workloads"]
    sel = results("hybrid_select")

    def d(w, k):
        return counts[w]["deployed"]["hybrid_frozen"][k]["gc_writes"]

    def run_gc(w):
        return (counts[w]["bundles"]["hybrid_frozen"]["run_waf"] - 1) * 4194304

    def fewer(vals):
        return ", ".join(f"{100 * x:.1f}%" for x in vals[:-1]) + f" and {100 * vals[-1]:.1f}%"

    in_vs_run = [1 - d(w, "in_sample") / run_gc(w) for w in SEED_WORKLOADS]
    out_vs_online = [1 - d(w, "out_of_sample") / counts[w]["online"]["hybrid"]["gc_writes"] for w in SEED_WORKLOADS]
    out_vs_best = [1 - d(w, "out_of_sample") / best_online(counts[w])[1]["gc_writes"] for w in SEED_WORKLOADS]
    vs_model = {w: d(w, "out_of_sample") / model[w]["deployed"]["hybrid_frozen"]["out_of_sample"]["gc_writes"] - 1 for w in SEED_WORKLOADS}  # fmt: skip
    out_in = {w: d(w, "out_of_sample") / d(w, "in_sample") - 1 for w in SEED_WORKLOADS}
    z = counts["zipf"]["deployed"]["hybrid_frozen"]["in_sample"]
    expected = [
        f"In sample the bundle has {fewer(in_vs_run)} fewer GC writes than the online run",
        f"{fewer(out_vs_online)} fewer than the online run on seed 1",
        f"the bundle has {fewer(out_vs_best)} fewer GC writes on seed 1",
        f"the count bundle has {-100 * vs_model['zipf']:.1f}% fewer GC writes than the model bundle on zipf, "
        f"{-100 * vs_model['phase_shift']:.1f}% fewer on phase_shift and {-100 * vs_model['varmail']:.1f}% fewer on "
        f"varmail",
        f"It has {100 * vs_model['ycsb_a']:.1f}% more on ycsb_a",
        f"and {-100 * out_in['varmail']:.1f}% lower on varmail",
        f"({', '.join(f4(sel[w][SELECT]['waf']) for w in ('zipf', 'ycsb_a', 'phase_shift'))}, {f4(sel['varmail'][SELECT]['waf'])})",
        f"On zipf: {z['gc_writes']:,} GC writes in both, WAF {z['waf']:.6f}",
        f"{100 * min(in_vs_run):.1f}-{100 * max(in_vs_run):.1f}% fewer GC writes than the run that made it",
    ]  # fmt: skip
    assert max(abs(out_in[w]) for w in ("zipf", "ycsb_a", "phase_shift")) < 0.004  # "within 0.4%"
    assert not missing(expected), missing(expected)


@pytest.mark.parametrize("name", ["hybrid_select", "hybrid_select_alt"])
def test_select_files_hold_the_main_tables_runs(name):
    """The select files reuse the main tables' runs (the select table's default row is the main
    table's comparison): their seed schemes and the default hybrid equal hybrid{,_alt}.json's."""
    main = results("hybrid_alt" if name.endswith("alt") else "hybrid")
    sel = results(name)
    for w in sel["_summary"]:
        for s, r in main[w].items():
            assert sel[w][s]["waf"] == r["waf"], (name, w, s)


def test_targets_row_figures_are_the_select_files():
    """The targets table's first two rows: `select`/`auto`'s and the default's changes against the best
    seed scheme (GC writes, then WAF) on the six generated workloads, and `min_horizon=0.5`'s."""
    res = docs_results("hybrid_select", "hybrid_select_alt")
    order = [("zipf", "zipf"), (ALT, "alternating"), ("phase_shift", "phase_shift"), ("varmail", "varmail"), ("ycsb_a", "ycsb_a"), ("ycsb_f", "ycsb_f")]  # fmt: skip

    def gcs(run):
        return [docs_percent(res[w][1]["variants"][run]) + "%" for w, _ in order]

    def wafs(run, digits):
        return [f"{100 * (res[w][0][run]['waf'] / res[w][1]['best_seed_waf'] - 1):+.{digits}f}%" for w, _ in order]

    sel, half = gcs(SELECT), wafs(HALF, 2)
    expected = [
        "`lifetimes=select hot_filter=auto`: zipf {}, alternating Zipf-H/C {}, phase_shift {}, varmail {}, ycsb_a {}, ycsb_f {}.".format(*sel),
        "The default (the model's lifetimes): {}, {}, {}, {}, {}, {}.".format(*gcs("hybrid")),
        "`select`/`auto`, WAF: zipf {}, alternating {}, phase_shift {}, varmail {}, ycsb_a {}, ycsb_f {};".format(
            *wafs(SELECT, 1)[:3], *wafs(SELECT, 2)[3:]
        ),
        "The default: {}, {}, {}, {}, {}, {} |".format(*wafs("hybrid", 1)),
        "(zipf {}, alternating {}, phase_shift {}, varmail {}, ycsb_a {}, ycsb_f {})".format(*half),
        "(`min_horizon=0.5`): zipf {}, alternating {}, phase_shift {}, varmail {}, ycsb_a {}, ycsb_f {};".format(*gcs(HALF)),
        "with CB [SepBIT] behind expiry as well: {}, {}, {}, {}, {}, {}.".format(*gcs(HALF_SB)),
    ]  # fmt: skip
    assert not missing(expected), missing(expected)
