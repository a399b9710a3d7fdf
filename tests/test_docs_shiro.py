"""docs/shiro.md's tables are written by hand from docs/results/shiro_*.json (dogi_ml/report_shiro.py's
reports): each checked cell must be the number its results file holds, rounded as the page prints it,
so that a regenerated file or an edited page cannot leave the page quoting another number.

GC writes per user write are the paper's WAF, ``paper_waf`` = WAF - 1; a percentage is one scheme's
paper WAF against another's, ``a / b - 1``, positive where the first writes more. Cells from runs the
page says were measured and not kept (one-off settings, the half-life and quantile grids' other
cells, the other states) are in no file and are not checked."""

from __future__ import annotations

import json
import re

import pytest
from helpers import REPO, docs_percent, table_cells

PAGE = REPO / "docs/shiro.md"  # module globals, so that a check can be pointed at an altered copy
RESULTS = REPO / "docs/results"
WORKLOADS = ["zipf", "ycsb_a", "varmail", "phase_shift"]
TRACES = ["tencent_cut_211", "tencent_cut_490"]


def page_table(anchor: str) -> list[list[str]]:
    """The body rows (cells, ``**`` dropped) of the first table after ``anchor``, which the page must
    hold once: tables with the same header (Fig. 7's two, the two state tables) are told apart by
    the text before them."""
    text = PAGE.read_text()
    assert text.count(anchor) == 1, f"{PAGE} holds {anchor!r} {text.count(anchor)} times"
    lines = text[text.index(anchor) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("|"))
    return [[c.replace("**", "") for c in cells] for cells in table_cells(lines, start)]


def page_rows(anchor: str) -> dict[str, list[str]]:
    """``page_table`` as first cell -> the other cells (first cells unique)."""
    rows = page_table(anchor)
    labels = [r[0] for r in rows]
    assert len(set(labels)) == len(labels), labels
    return {r[0]: r[1:] for r in rows}


def summary(name: str) -> dict:
    """docs/results/NAME.json's ``summary``: workload -> run -> its record (readings files: setup ->
    row -> workload -> record)."""
    return json.loads((RESULTS / f"{name}.json").read_text())["summary"]


def gc(run: dict) -> float:
    """GC writes per user write: the paper's WAF."""
    return run["paper_waf"]


def f3(x: float) -> str:
    return f"{x:.3f}"


def pct(a: float, b: float) -> str:
    """``a`` against ``b`` as the page prints it: ``+5.4%``."""
    return docs_percent(a / b - 1) + "%"


def check(cells: dict[str, list[str]], expected: dict[tuple[str, int], str]) -> list[str]:
    """Every (row label, column index) cell against its expected text; the mismatches, described."""
    bad = []
    for (label, col), want in expected.items():
        assert label in cells, f"no row {label!r} (rows: {list(cells)})"
        got = cells[label][col]
        if got != want:
            bad.append(f"{label!r} column {col}: page {got!r}, results {want!r}")
    return bad


def test_docs_credit_agent_tables_are_the_results_files():
    """The credit agent's two tables (GC writes per user write, then the changes against the rule
    and SepBIT's ages): docs/results/shiro_agent_credit.json."""
    runs = summary("shiro_agent_credit")
    wafs, cuts = {}, {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        credit, rule, ages = r["shiro[credit]"], r["shiro[hierarchical]"], r["shiro[sepbit_age]"]
        oracle_table, ages_table = r[f"shiro[credit,float,{w}_oracle]"], r[f"shiro[credit,float,{w}_sepbit_age]"]
        frozen = f"{f3(r[f'shiro[credit,float,{w}_credit]'])} / {f3(r[f'shiro[credit,int8,{w}_credit]'])}"
        for col, x in enumerate([credit, r["shiro"], rule, ages, r["shiro[oracle]"], oracle_table, ages_table]):
            wafs[w, col] = f3(x)
        wafs[w, 7] = frozen
        changes = [(credit, rule), (credit, ages), (oracle_table, rule), (oracle_table, ages)]
        changes += [(ages_table, ages), (r["shiro[oracle]"], ages)]
        for col, (a, b) in enumerate(changes):
            cuts[w, col] = pct(a, b)
    bad = check(page_rows("| workload | **credit agent** |"), wafs)
    bad += check(page_rows("| workload | credit vs rule |"), cuts)
    assert not bad, bad
    assert len(wafs) + len(cuts) == 4 * 8 + 4 * 6


def test_docs_count_state_table_is_the_results_files():
    """The count state's table (frequency rule, the credit agent's count-state variants):
    docs/results/shiro_agent_counts.json."""
    runs = summary("shiro_agent_counts")
    columns = [
        "shiro[frequency]",
        "shiro[credit,state=counts]",
        "shiro[credit,state=counts,start=frequency]",
        "shiro[credit,state=counts,reward=segment,start=frequency]",
        "shiro[credit,reward=segment]",
        "shiro[hierarchical]",
        "shiro[sepbit_age]",
        "shiro[oracle]",
    ]
    expected = {(w, col): f3(gc(runs[w][run])) for w in WORKLOADS for col, run in enumerate(columns)}
    bad = check(page_rows("| workload | frequency rule | credit, count state |"), expected)
    assert not bad, bad
    assert len(expected) == 32


HINDSIGHT = "shiro[credit,state=counts,reward=hindsight,alpha=0.001,epsilon=0.0]"
DECAY = "shiro[credit,state=counts,reward=hindsight,alpha=0.001,epsilon=0.0,halflife=0.25]"


def test_docs_hindsight_table_is_the_results_files():
    """The hindsight credit's table: docs/results/shiro_agent_counts.json."""
    runs = summary("shiro_agent_counts")
    expected = {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        table_one = r["shiro[credit,reward=hindsight,alpha=0.001,epsilon=0.0]"]
        frozen = f"{f3(r[f'shiro[credit,float,{w}_credit_hindsight]'])} / {f3(r[f'shiro[credit,int8,{w}_credit_hindsight]'])}"
        cells = [f3(r[HINDSIGHT]), f3(table_one), frozen]
        cells += [f3(r[k]) for k in ("shiro[frequency]", "shiro[hierarchical]", "shiro[sepbit_age]", "shiro[oracle]")]
        expected.update({(w, col): cell for col, cell in enumerate(cells)})
    bad = check(page_rows("| workload | hindsight, count state | hindsight, Table I |"), expected)
    assert not bad, bad
    assert len(expected) == 28


def test_docs_halflife_tables_are_the_results_files():
    """``count_halflife``'s table, and the stored cells of the half-life grid (H = 0.25 and none;
    its other columns are one-off runs): docs/results/shiro_agent_counts.json."""
    runs = summary("shiro_agent_counts")
    decay, grid = {}, {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        rule, ages = r["shiro[hierarchical]"], r["shiro[sepbit_age]"]
        cells = [f3(r[DECAY]), pct(r[DECAY], rule), pct(r[DECAY], ages), f3(r[HINDSIGHT])]
        cells += [f3(r["shiro[frequency,halflife=0.25]"]), f3(r["shiro[frequency]"])]
        decay.update({(w, col): cell for col, cell in enumerate(cells)})
        grid[w, 1], grid[w, 6] = f3(r[DECAY]), f3(r[HINDSIGHT])  # columns H = 0.25 and none
    bad = check(page_rows("| workload | hindsight, count state, H = 0.25 |"), decay)
    bad += check(page_rows("| H (capacities) | 0.125 |"), grid)
    assert not bad, bad
    assert len(decay) + len(grid) == 24 + 8


def variant_cells(w: str, runs: dict) -> str:
    """The stored H = 0.25 hindsight variant as the quantile and state tables print it:
    ``4.503 (-5.0%)``, against SepBIT's ages."""
    r = runs[w]
    return f"{f3(gc(r[DECAY]))} ({pct(gc(r[DECAY]), gc(r['shiro[sepbit_age]']))})"


def workloads_below_both(runs: dict) -> str:
    """How many workloads the variant is at least 3% below both the rule and SepBIT's ages on."""
    below = [
        all(
            gc(runs[w][DECAY]) / gc(runs[w][base]) - 1 <= -0.03 for base in ("shiro[hierarchical]", "shiro[sepbit_age]")
        )
        for w in WORKLOADS
    ]
    return str(sum(below))


@pytest.mark.parametrize(
    "anchor, label",
    [
        ("- **With the quantile**", None),  # the row H = 0.25, q = 0.5; the others are one-off runs
        ("- **How many writes the count rests on**", "count, age, segment type (the variant)"),
        ("- **Three more states**", "count, age, segment type (the variant)"),
    ],
)
def test_docs_variant_rows_are_the_results_files(anchor, label):
    """The one stored row of the quantile grid and of the two state tables (the stored H = 0.25
    variant; their other rows were measured and not kept): docs/results/shiro_agent_counts.json."""
    runs = summary("shiro_agent_counts")
    if label is None:
        rows = [r for r in page_table(anchor) if r[:2] == ["0.25", "0.5"]]
        assert len(rows) == 1, rows
        cells = {"H = 0.25, q = 0.5": rows[0][2:]}
        label = "H = 0.25, q = 0.5"
    else:
        cells = page_rows(anchor)
    expected = {(label, col): variant_cells(w, runs) for col, w in enumerate(WORKLOADS)}
    expected[label, 4] = workloads_below_both(runs)
    bad = check(cells, expected)
    assert not bad, bad
    assert len(expected) == 5


def test_docs_deployed_count_table_is_the_results_files():
    """The count-state table frozen, float and int8: docs/results/shiro_agent_counts_deployed.json
    (the baselines: shiro_agent_counts.json)."""
    runs, base = summary("shiro_agent_counts_deployed"), summary("shiro_agent_counts")
    expected = {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        tail = f"{w}_credit_counts_hindsight_decay,state=counts,halflife=0.25]"
        frozen, int8 = r[f"shiro[credit,float,{tail}"], r[f"shiro[credit,int8,{tail}"]
        cells = [f3(r[DECAY]), f3(frozen), f3(int8)]
        cells += [pct(frozen, gc(base[w]["shiro[sepbit_age]"])), pct(frozen, gc(base[w]["shiro[hierarchical]"]))]
        expected.update({(w, col): cell for col, cell in enumerate(cells)})
    bad = check(page_rows("- **Its table frozen, float and int8.**"), expected)
    assert not bad, bad
    assert len(expected) == 20


READ = "shiro[credit,state=counts_read,reward=hindsight,alpha=0.001,epsilon=0.0,halflife=0.25]"


def test_docs_read_state_table_is_the_results_file():
    """The read bit's table: docs/results/shiro_agent_read.json (the agent with and without the bit,
    the rule and SepBIT's ages, all rerun in that file), and the frozen tables the bullet quotes."""
    runs = summary("shiro_agent_read")
    expected = {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        sep, rule = r["shiro[sepbit_age]"], r["shiro[hierarchical]"]
        cells = [f"{f3(r[READ])} ({pct(r[READ], sep)})", f"{f3(r[DECAY])} ({pct(r[DECAY], sep)})", f3(rule), f3(sep)]
        cells += [pct(r[READ], rule), f"{runs[w][READ]['read_decisions']:,}"]
        expected.update({(w, col): cell for col, cell in enumerate(cells)})
    bad = check(page_rows("`shiro_agent_counts`' runs). GC writes per user write, in brackets"), expected)
    assert not bad, bad
    assert len(expected) == 24
    tail = "credit_counts_read_hindsight_decay,state=counts_read,halflife=0.25]"
    frozen = [gc(runs[w][f"shiro[credit,float,{w}_{tail}"]) for w in WORKLOADS]
    int8 = [gc(runs[w][f"shiro[credit,int8,{w}_{tail}"]) for w in WORKLOADS]
    assert frozen == int8
    text = " ".join(PAGE.read_text().split())
    quoted = f"{', '.join(f3(x) for x in frozen[:3])} and {f3(frozen[3])} GC writes per user write"
    assert quoted in text, quoted
    ycsb = runs["ycsb_a"]
    assert f"({gc(ycsb[READ]):.4f} against {gc(ycsb[DECAY]):.4f})" in text
    varmail = runs["varmail"][READ]
    assert f"{varmail['read_decisions']:,} of {varmail['agent_counters']['decisions']:,} decisions" in text


FIG7 = ["nosep", "sepgc", "sepbit", "midas", "phftl", "shiro", "shiro[cost_benefit]"]


@pytest.mark.parametrize(
    "anchor, name, workloads",
    [
        ("**Fig. 7, generated workloads**", "shiro_fig7", WORKLOADS),
        ("**Fig. 7, the trace samples**", "shiro_fig7_traces", TRACES),
    ],
)
def test_docs_fig7_tables_are_the_results_files(anchor, name, workloads):
    """Fig. 7's tables: every scheme's paper WAF and Shiro's against SepBIT, MiDAS and PHFTL."""
    runs = summary(name)
    expected = {}
    for w in workloads:
        r = {k: gc(v) for k, v in runs[w].items()}
        cells = [f3(r[s]) for s in FIG7] + [pct(r["shiro"], r[s]) for s in ("sepbit", "midas", "phftl")]
        expected.update({(w, col): cell for col, cell in enumerate(cells)})
    bad = check(page_rows(anchor), expected)
    assert not bad, bad
    assert len(expected) == 10 * len(workloads)


def test_docs_fig9_table_is_the_results_file():
    """Fig. 9's table (-NG): docs/results/shiro_fig9.json."""
    runs = summary("shiro_fig9")
    expected = {}
    for w in WORKLOADS:
        r = {k: gc(v) for k, v in runs[w].items()}
        cells = [f3(r[s]) for s in ("sepbit", "sepbit-NG", "phftl", "phftl-NG", "shiro", "shiro-NG")]
        expected.update({(w, col): cell for col, cell in enumerate([*cells, pct(r["shiro"], r["shiro-NG"])])})
    bad = check(page_rows("**Fig. 9, GC separation removed**"), expected)
    assert not bad, bad
    assert len(expected) == 28


def test_docs_agent_table_is_the_results_file():
    """The agent's table: docs/results/shiro_agent.json."""
    runs = summary("shiro_agent")
    columns = ["shiro", "shiro[hierarchical]", "shiro[sepbit_age]", "shiro-NG"]
    expected = {(w, col): f3(gc(runs[w][s])) for w in WORKLOADS for col, s in enumerate(columns)}
    bad = check(page_rows("**The agent** (`docs/results/shiro_agent.json`)"), expected)
    assert not bad, bad
    assert len(expected) == 16


def test_docs_classifier_table_is_the_results_file():
    """Table V: docs/results/shiro_table5.json's online scores, the mean over the six workloads."""
    runs = summary("shiro_table5")
    columns = [*WORKLOADS, *TRACES]
    metrics = {"accuracy": "user_accuracy", "precision": "user_precision", "recall": "user_recall", "F1": "user_f1"}
    expected = {}
    for metric, key in metrics.items():
        for label, scheme in (("Shiro", "shiro"), ("PHFTL", "phftl")):
            values = [runs[w][scheme][key] for w in columns]
            for col, v in enumerate([*values, sum(values) / len(values)]):
                expected[f"{metric}, {label}", col] = f3(v)
    bad = check(page_rows("**The page classifier**"), expected)
    assert not bad, bad
    assert len(expected) == 8 * 7


def test_docs_bggc_table_is_the_results_file():
    """GC in idle gaps: docs/results/shiro_bggc.json."""
    runs = summary("shiro_bggc")
    expected = {}
    for w in TRACES:
        r = {k: gc(v) for k, v in runs[w].items()}
        cells = [f3(r[s]) for s in ("sepbit", "shiro", "sepbit+bg", "shiro+bg")]
        cells += [pct(r["shiro"], r["sepbit"]), pct(r["shiro+bg"], r["sepbit+bg"])]
        expected.update({(w, col): cell for col, cell in enumerate(cells)})
    bad = check(page_rows("**GC triggers in idle gaps**"), expected)
    assert not bad, bad
    assert len(expected) == 12


def held(cuts: dict, workloads: list[str], key: str) -> str:
    """A readings row's ``ordering held`` cell: ``n/N``, from the file's ``cuts``."""
    return f"{sum(bool(cuts[w][key]) for w in workloads)}/{len(workloads)}"


def readings(name: str) -> tuple[dict, dict]:
    data = json.loads((RESULTS / f"{name}.json").read_text())
    return data["summary"], data["cuts"]


def test_docs_readings_table_is_the_results_file():
    """The readings at the Fig. 7 scale: docs/results/shiro_readings.json's paper WAF per row and the
    workloads where the ordering holds (the workloads a cell names must be those)."""
    setups, cuts = readings("shiro_readings")
    runs, cuts = setups["reserve 8, prefilled"], cuts["reserve 8, prefilled"]
    rows = {
        "sepbit (cost_benefit)": "sepbit (cost_benefit)",
        "sepbit (greedy)": "sepbit (greedy)",
        "phftl (cost_benefit)": "phftl (cost_benefit)",
        "phftl (greedy)": "phftl (greedy)",
        "shiro (the text)": "shiro",
        "shiro[life=any]": "shiro[life=any]",
        "shiro[counts=recent]": "shiro[counts=recent]",
        "shiro[eq1=short_pages]": "shiro[eq1=short_pages]",
        "shiro[clock=flash]": "shiro[clock=flash]",
        "shiro[all four]": "shiro[life=any,counts=recent,eq1=short_pages,clock=flash]",
        "shiro[eq1=all] (outside the text)": "shiro[eq1=all]",
        "shiro[cost_benefit] (outside)": "shiro[cost_benefit]",
        "shiro[sepbit_age,cost_benefit] (outside)": "shiro[sepbit_age,cost_benefit]",
    }
    page = page_rows("**Fig. 7 scale** (`docs/results/shiro_readings.json`")
    expected = {}
    for label, row in rows.items():
        expected.update({(label, col): f3(gc(runs[row][w])) for col, w in enumerate(WORKLOADS)})
        if row in cuts:
            for col, key in ((4, "ordering"), (5, "ordering_same")):
                count, named = re.fullmatch(r"(\d/\d)(?: \((.*)\))?", page[label][col]).groups()
                expected[label, col] = page[label][col].replace(count, held(cuts[row], WORKLOADS, key), 1)
                if named:  # the workloads a cell names are those where the ordering holds
                    holds = [w for w in WORKLOADS if cuts[row][w][key]]
                    assert [w for w in re.split(r", ", named) if w in WORKLOADS] == holds, (label, named)
    bad = check(page, expected)
    assert not bad, bad
    assert len(expected) == 13 * 4 + 9 * 2


def test_docs_watermarks_table_is_the_results_file():
    """The watermarks: docs/results/shiro_watermarks.json, Shiro vs SepBIT / PHFTL per setup."""
    setups, cuts = readings("shiro_watermarks")
    rows = {
        "prefilled, 8": "reserve 8, prefilled",
        "prefilled, 5% (55)": "reserve 55, prefilled",
        "fresh, 8": "reserve 8, fresh",
        "fresh, 5% (55)": "reserve 55, fresh",
    }
    expected = {}
    for label, setup in rows.items():
        r = setups[setup]
        for col, w in enumerate(WORKLOADS):
            expected[label, col] = " vs ".join(
                [
                    f3(gc(r["shiro"][w])),
                    f"{f3(gc(r['sepbit (cost_benefit)'][w]))} / {f3(gc(r['phftl (cost_benefit)'][w]))}",
                ]
            )
        expected[label, 4] = held(cuts[setup]["shiro"], WORKLOADS, "ordering")
    bad = check(page_rows("**The watermarks**"), expected)
    assert not bad, bad
    assert len(expected) == 4 * 5


def test_docs_default_scale_table_is_the_results_file():
    """The default scale: docs/results/shiro_readings_default.json (zipf, ycsb_a)."""
    setups, cuts = readings("shiro_readings_default")
    runs, cuts = setups["reserve 2, prefilled"], cuts["reserve 2, prefilled"]
    workloads = ["zipf", "ycsb_a"]
    expected = {}
    for label, scheme in (("sepbit (cost_benefit) / (greedy)", "sepbit"), ("phftl (cost_benefit) / (greedy)", "phftl")):
        for col, w in enumerate(workloads):
            expected[label, col] = (
                f"{f3(gc(runs[f'{scheme} (cost_benefit)'][w]))} / {f3(gc(runs[f'{scheme} (greedy)'][w]))}"
            )
    rows = {
        "shiro (the text)": "shiro",
        "shiro[life=any]": "shiro[life=any]",
        "shiro[eq1=short_pages]": "shiro[eq1=short_pages]",
        "shiro[eq1=all] (outside the text)": "shiro[eq1=all]",
        "shiro[sepbit_age,cost_benefit] (outside)": "shiro[sepbit_age,cost_benefit]",
    }
    for label, row in rows.items():
        expected.update({(label, col): f3(gc(runs[row][w])) for col, w in enumerate(workloads)})
        expected[label, 2] = held(cuts[row], workloads, "ordering")
        expected[label, 3] = held(cuts[row], workloads, "ordering_same")
    bad = check(page_rows("**Default scale**"), expected)
    assert not bad, bad
    assert len(expected) == 2 * 2 + 5 * 4


def test_docs_shared_runs_are_the_same_in_each_file():
    """Where the page says two files hold the same runs, they do, to the last digit: the credit
    table's paper agent, rule and SepBIT's ages are the ``shiro_agent`` sweep's, the count tables'
    Table I rows ``shiro_agent_credit``'s, Fig. 9's full schemes Fig. 7's."""
    agent, credit, counts = summary("shiro_agent"), summary("shiro_agent_credit"), summary("shiro_agent_counts")
    fig7, fig9 = summary("shiro_fig7"), summary("shiro_fig9")
    pairs = [(agent, credit, s) for s in ("shiro", "shiro[hierarchical]", "shiro[sepbit_age]", "shiro-NG")]
    pairs += [
        (credit, counts, s)
        for s in ("shiro", "shiro[hierarchical]", "shiro[sepbit_age]", "shiro[credit]", "shiro[oracle]")
    ]
    pairs += [(fig7, fig9, s) for s in ("sepbit", "phftl", "shiro")]
    read = summary("shiro_agent_read")
    pairs += [(credit, read, s) for s in ("shiro[hierarchical]", "shiro[sepbit_age]")] + [(counts, read, DECAY)]
    for a, b, s in pairs:
        assert [a[w][s]["waf"] for w in WORKLOADS] == [b[w][s]["waf"] for w in WORKLOADS], s


def test_docs_prose_figures_are_the_results_files():
    """Figures the bullet text quotes straight from a file (WAF to four decimals, counters)."""
    text = " ".join(PAGE.read_text().split())  # the page's lines wrap anywhere
    counts = summary("shiro_agent_counts")
    zipf = counts["zipf"][HINDSIGHT]
    stored = [f"{counts[w][HINDSIGHT]['waf']:.4f}" for w in WORKLOADS]
    assert f"against {', '.join(stored[:3])} and {stored[3]}." in text, stored
    counters = zipf["agent_counters"]
    share = 100 * counters["censored"] / counters["decisions"]
    dropped = f"is {zipf['waf']:.4f} with {counters['censored']:,} of {counters['decisions']:,} decisions, {share:.1f}%, dropped"
    assert dropped in text, dropped
    assert f"the 3% line is {0.97 * gc(counts['ycsb_a']['shiro[sepbit_age]']):.4f}" in text
    assert (
        f"{summary('shiro_fig7')['zipf']['shiro']['qtable_int8_bytes']:,} bytes as int8 (`qtable_int8_bytes`)" in text
    )
    table5 = summary("shiro_table5")
    phftl, shiro = table5["zipf"]["phftl"]["hot_threshold"], table5["zipf"]["shiro"]["hot_threshold"]
    assert f"{phftl:,} blocks on zipf against Shiro's {shiro})" in text
    ends = " / ".join(f"{table5[w]['shiro']['hot_threshold']:,}" for w in WORKLOADS)
    assert f"T = {ends} blocks on zipf / ycsb_a / varmail / phase_shift" in text, ends
    assert f"{table5['tencent_cut_211']['shiro']['hot_threshold']} on tencent_cut_211" in text
