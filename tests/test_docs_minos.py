"""docs/minos.md's hand-written tables and the figures its text quotes are docs/results/minos_*.json's:
each cell is compared with its JSON entry, rounded as the page prints it, so a regenerated result
cannot leave the page quoting the old one (and an edited cell cannot drift from its file).

Not checked here (no JSON holds them): Table 5's memory (computed by ``minos.metadata_mib_per_tib``),
the k-means timing, the P² sampling's effect, the slot-density single runs, the speed figures
(``bench``, "not in docs/results/") and whatever the page sends to docs/history/minos.md."""

from __future__ import annotations

import json
import re

import numpy as np
from helpers import REPO, DocsCells, docs_text, table_cells

PAGE = "docs/minos.md"  # the tests read the page through this name (a scratch copy can be put in its place)

NAMES = {"sepgc": "SepGC", "mida": "MiDA", "midas": "MiDAS", "sepbit": "SepBIT", "minos": "MINOS"}
BASELINES = ["sepgc", "mida", "midas", "sepbit"]  # the page's column order, MINOS last


def results(name: str) -> dict:
    return json.loads((REPO / "docs/results" / f"{name}.json").read_text())


def table(header: str, columns: list[str] | None = None) -> list[list[str]]:
    """The rows of the page's table whose header row starts with ``| header |`` (and, given
    ``columns``, has those cells after the first); an empty first cell takes the label of the row
    above."""
    lines = (REPO / PAGE).read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {header} |")), None)
    assert start is not None, f"{PAGE} has no table headed {header!r}"
    if columns is not None:
        assert [c.strip() for c in lines[start].strip().strip("|").split("|")][1:] == columns, lines[start]
    rows, label = [], ""
    for cells in table_cells(lines, start):
        label = cells[0] or label
        rows.append([label, *cells[1:]])
    return rows


def text() -> str:
    return docs_text(PAGE)


def plain(cell: str) -> str:
    return cell.replace("**", "")


def gc(entry: dict) -> str:
    return f"{entry['gc_writes_per_user']:.3f}"


def cut(pct: float) -> str:
    return f"{pct:+.1f}%"


TABLE1_KINDS = {
    "Segment": "segment",
    "Percentile": "percentile",
    "K-Means": "kmeans",
    "OP-Minimized": "opmin",
    "OP-budget plan (not the paper's)": "opbudget",
}


def table1_rows() -> dict:
    data = results("minos_table1")
    return data, {(r["workload"], r["mode"], r["segment_blocks"]): r for r in data["rows"]}


def test_table1_zipf_is_minos_table1_json():
    """Table 1 (Zipf 1.01): every oracle's simulated WAF per segment size, OP and device mode, and
    the paper's rows, are minos_table1.json's ``table[kind][op].waf`` and ``paper``."""
    data, rows = table1_rows()
    ops = [f"{op:g}" for op in data["ops"]]
    pcts = [f"{100 * op:.0f}%" for op in data["ops"]]
    header = ["segment (blocks)", f"empty: {pcts[0]}", *pcts[1:], f"prefilled: {pcts[0]}", *pcts[1:]]
    c = DocsCells(PAGE)
    seen = []
    for label, segment, *cells in table("oracle | segment (blocks)", header):
        kind = TABLE1_KINDS[label]
        seen.append((label, segment))
        assert len(cells) == 10, (label, segment, cells)
        if segment == "paper":
            for op, cell in zip(ops, cells[:5]):
                c.eq(
                    f"Table 1 {label} paper OP {op}",
                    cell,
                    f"**{rows['zipf_1.01', 'empty', 512]['paper'][kind][ops.index(op)]:.3f}**",
                )
            assert cells[5:] == [""] * 5
            continue
        for i, cell in enumerate(cells):
            mode = "empty" if i < 5 else "prefilled"
            r = rows["zipf_1.01", mode, int(segment)]
            c.eq(
                f"Table 1 {label} {segment} {mode} OP {ops[i % 5]}", cell, f"{r['table'][kind][ops[i % 5]]['waf']:.3f}"
            )
    assert len(seen) == 4 * 4 + 3
    c.done(4 * 3 * 10 + 4 * 5 + 3 * 10)


def test_table1_real_samples_are_minos_table1_json():
    """The real samples' OP-Min / K-Means WAF, their ``ordering`` relation (its first character)
    and the segments per capacity are minos_table1.json's rows."""
    data, rows = table1_rows()
    ops = [f"{op:g}" for op in data["ops"]]
    c = DocsCells(PAGE)
    pcts = [f"{100 * op:.0f}%" for op in data["ops"]]
    header = ["mode", "segment (blocks)", "segments per capacity", f"OP-Min / K-Means at {pcts[0]}", *pcts[1:]]
    page = table("trace | mode", header)
    assert {(r[0], r[1], r[2]) for r in page} == {(w, m, str(s)) for (w, m, s) in rows if w != "zipf_1.01"}
    for trace, mode, segment, per_capacity, *cells in page:
        r = rows[trace, mode, int(segment)]
        where = f"real samples {trace} {mode} {segment}"
        c.eq(f"{where} segments per capacity", per_capacity, f"{r['segments_per_capacity']:.0f}")
        for op, cell in zip(ops, cells, strict=True):
            t = r["table"]
            c.eq(
                f"{where} OP {op}",
                cell,
                f"{t['opmin'][op]['waf']:.3f} {r['ordering'][op][0]} {t['kmeans'][op]['waf']:.3f}",
            )
    c.done(12 * 6)


def test_table1_text_figures_are_minos_table1_json():
    """Figures the Table 1 text quotes: segments per capacity, the trace's size, OP-Min's thresholds,
    Algorithm 1's WAF-1 OP, OP-Min's distance to the paper, and the OP-budget plan against K-Means."""
    data, rows = table1_rows()
    z = rows["zipf_1.01", "empty", 512]
    page = text()
    per_cap = {s: rows["zipf_1.01", "empty", s]["segments_per_capacity"] for s in (512, 340, 64)}
    samples = [r for (w, _, _), r in rows.items() if w != "zipf_1.01"]
    by_seg = {
        s: sorted(round(r["segments_per_capacity"]) for r in samples if r["segment_blocks"] == s) for s in (64, 8)
    }
    opmin = [z["table"]["opmin"][f"{op:g}"]["waf"] for op in data["ops"]]
    paper = z["paper"]["opmin"]
    opmin64 = [rows["zipf_1.01", "empty", 64]["table"]["opmin"][f"{op:g}"]["waf"] for op in data["ops"]]
    pre = rows["zipf_1.01", "prefilled", 512]["table"]
    gap = [  # every oracle's simulated cell against the paper's, empty device, every segment size
        round(r["table"][k][f"{op:g}"]["waf"], 3) - p
        for (w, m, _), r in rows.items()
        if w == "zipf_1.01" and m == "empty"
        for k, ps in r["paper"].items()
        for op, p in zip(data["ops"], ps)
    ]
    expected = [
        f"{z['user_writes']:,} writes over a working set of {z['capacity_blocks']:,} blocks",
        f"512-block segments give {per_cap[512]:.0f} segments per capacity",
        f"340-block {per_cap[340]:.0f}",
        f"64-block {per_cap[64]:,.0f}",
        f"64-block ({by_seg[64][0]}-{by_seg[64][-1]} per capacity)",
        f"8-block segments ({by_seg[8][0]}-{by_seg[8][-1]})",
        f"({pre['opbudget']['0.15']['waf']:.3f} vs {pre['kmeans']['0.15']['waf']:.3f} at 512 blocks)",
        "(`thresholds_blocks`: " + " / ".join(f"{t:,}" for t in z["table"]["opmin"]["0.15"]["thresholds_blocks"]),
        f"sim.capacity_blocks={z['capacity_blocks']}",
        "OP-Min " + " / ".join(f"{round(s, 3) - p:+.3f}" for s, p in zip(opmin, paper)) + " at 512 blocks",
        f"{round(opmin64[0], 3) - paper[0]:+.3f} ... {round(opmin64[-1], 3) - paper[-1]:+.3f} at 64 blocks",
        f"need {100 * z['waf1_op_ratio']['opmin']:.1f}% OP for WAF 1 in the model",
        f"need {100 * z['waf1_op_ratio']['opmin']:.1f}% OP for WAF 1 on this trace",
        "is " + " / ".join(f"{100 * rows[t, 'empty', 64]['waf1_op_ratio']['opmin']:.1f}%" for t in ("tencent_cut_211", "tencent_cut_490", "msr_cut_105")),
        f"are {min(gap):.3f}-{max(gap):.2f} above the paper's",
    ]  # fmt: skip
    # OP-Min beats K-Means (ordering "<") only on tencent_cut_490 at 64 blocks, from the OP the text names
    beats = {(w, m, s): [op for op in r["ordering"] if r["ordering"][op][0] == "<"] for (w, m, s), r in rows.items()}
    assert {k[0::2] for k, v in beats.items() if v and k[0] != "zipf_1.01"} == {("tencent_cut_490", 64)}
    first = {m: f"{100 * float(beats['tencent_cut_490', m, 64][0]):.0f}%" for m in ("empty", "prefilled")}
    expected.append(f"at 64 blocks, from {first['empty']} OP (empty) and {first['prefilled']} (prefilled)")
    missing = [e for e in expected if e not in page]
    assert not missing, f"{PAGE} does not quote minos_table1.json's figures: {missing}"


def fig11_settings() -> dict:
    out = {}
    for name in ("minos_fig11", "minos_fig11_traces", "minos_fig18"):
        out.update(results(name)["settings"])
    return out


FIG11_ROWS = {
    "Zipf-H (1.01)": "zipf_h",
    "Zipf-C (0.8)": "zipf_c",
    "ycsb_a": "ycsb_a",
    "varmail": "varmail",
    "Zipf 1.01/0.8 alternating (`minos_fig18`)": "phase_shift",
    "Tencent cut 490": "tencent_cut_490",
    "Tencent cut 211": "tencent_cut_211",
    "MSR Cambridge cut 105": "msr_cut_105",
}


def test_fig11_table_is_the_fig11_json():
    """Fig. 11: GC writes per user write of each scheme (bold: the lowest), the best baseline and
    MINOS's cut are minos_fig11{,_traces}.json's and minos_fig18.json's."""
    settings = fig11_settings()
    page = {r[0]: r[1:] for r in table("workload | SepGC")}
    assert list(page) == list(FIG11_ROWS)
    c = DocsCells(PAGE)
    for label, workload in FIG11_ROWS.items():
        e = settings[workload]
        cells = page[label]
        assert len(cells) == 7, (label, cells)
        schemes = [*BASELINES, "minos"]
        lowest = min(schemes, key=lambda s: e["schemes"][s]["gc_writes_per_user"])
        for scheme, cell in zip(schemes, cells):
            value = gc(e["schemes"][scheme])
            c.eq(f"Fig. 11 {label} {NAMES[scheme]}", cell, f"**{value}**" if scheme == lowest else value)
        c.eq(f"Fig. 11 {label} best baseline", cells[5], NAMES[e["best_baseline"]])
        c.eq(f"Fig. 11 {label} MINOS's cut", cells[6], cut(e["reduction_pct"]))
    c.done(8 * 7)


LAYOUTS = [("minos_fig11", "minos"), ("minos_fig11_ids8", "minos[idsblock]"),
           ("minos_fig11_ids32", "minos[agg32,idsblock]"), ("minos_fig11_agg1", "minos[agg1]")]  # fmt: skip


def test_layouts_table_is_the_layout_jsons():
    """The metadata layouts: the best baseline and each layout's MINOS GC writes and cut are
    minos_fig11{,_ids8,_ids32,_agg1}.json's (the traces' from minos_fig11_traces.json for the default)."""
    settings = fig11_settings()
    files = [results(name)["settings"] for name, _ in LAYOUTS[1:]]
    c = DocsCells(PAGE)
    rows = {k: v for k, v in FIG11_ROWS.items() if v != "phase_shift"}
    page = {r[0]: r[1:] for r in table("workload | best baseline")}
    assert list(page) == list(rows)
    for label, workload in rows.items():
        cells = page[label]
        assert len(cells) == 5, (label, cells)
        base = settings[workload]
        c.eq(
            f"layouts {label} best baseline",
            cells[0],
            f"{NAMES[base['best_baseline']]} {gc(base['schemes'][base['best_baseline']])}",
        )
        for (name, scheme), data, cell in zip(LAYOUTS, [settings, *files], cells[1:]):
            e = data[workload]
            assert e["best_baseline"] == base["best_baseline"], (name, workload)
            c.eq(f"layouts {label} {name}", cell, f"{gc(e['schemes'][scheme])} ({cut(e['reduction_pct'])})")
    c.done(7 * 5)


def sweep(name: str) -> dict:
    """A one-parameter sweep's settings by the parameter's value (``zipf_h op=0.1`` -> ``0.1``)."""
    return {k.rsplit("=", 1)[1]: v for k, v in results(name)["settings"].items()}


def test_op_segment_and_stream_tables_are_the_fig17_jsons():
    """Figs. 14-16 on Zipf-H: SepBIT, MiDAS (MiDA) and MINOS per OP, segment size and physical
    stream count, and MINOS's cut, are minos_fig17{,_segment,_streams}.json's."""
    c = DocsCells(PAGE)
    for header, name, columns, schemes in [
        ("Zipf-H, 1 GiB", "minos_fig17", ["OP 10%", "15%", "20%"], ["sepbit", "midas", "minos"]),
        ("Zipf-H, 1 GiB, 15% OP", "minos_fig17_segment", ["32", "64", "128", "256", "512", "1024 blocks"], ["sepbit", "midas", "minos"]),
        ("Zipf-H, 1 GiB, 15% OP", "minos_fig17_streams", ["6 physical streams", "7", "8", "9", "10"], ["mida", "minos"]),
    ]:  # fmt: skip
        data = sweep(name)
        keys = sorted(data, key=float)
        shown = [f"{100 * float(k):.0f}%" for k in keys] if name == "minos_fig17" else keys
        assert [re.search(r"\d+%?", col).group() for col in columns] == shown, name  # the sweep's values, in order
        page = table(f"{header} | {columns[0]}", columns)
        labels = [NAMES[s] for s in schemes] + (["MINOS's cut"] if name != "minos_fig17_streams" else [])
        assert [r[0] for r in page] == labels, (name, [r[0] for r in page])
        for label, *cells in page:
            assert len(cells) == len(keys), (name, label)
            for key, cell in zip(keys, cells):
                e = data[key]
                expected = (
                    cut(e["reduction_pct"])
                    if label == "MINOS's cut"
                    else gc(e["schemes"][schemes[labels.index(label)]])
                )
                c.eq(f"{name} {label} {key}", plain(cell), expected)
    c.done(4 * 3 + 4 * 6 + 2 * 5)


def test_text_figures_are_the_fig11_fig17_and_fig19_jsons():
    """Figures the Fig. 11-19 text quotes: the 64 KiB writes, the layouts' MSR lead, the cut's range
    over OP, MINOS's fall from six to ten streams and the Fig. 19 mappings."""
    page = text()
    k64 = results("minos_fig11_64k")["settings"]
    streams = sweep("minos_fig17_streams")
    op = sweep("minos_fig17")
    msr = [results(n)["settings"]["msr_cut_105"]["reduction_pct"] for n in ("minos_fig11_ids8", "minos_fig11_agg1")]
    moments = results("minos_fig19")["moments"]
    seg1024 = sweep("minos_fig17_segment")["1024"]["schemes"]
    fall = (
        1
        - streams["10"]["schemes"]["minos"]["gc_writes_per_user"]
        / streams["6"]["schemes"]["minos"]["gc_writes_per_user"]
    )

    def row64(w):
        e = k64[w]
        return " / ".join(gc(e["schemes"][s]) for s in BASELINES) + f" / **{gc(e['schemes']['minos'])}**"

    expected = [
        f"Zipf-H {row64('zipf_h')} (cut {cut(k64['zipf_h']['reduction_pct'])})",
        f"Zipf-C {row64('zipf_c')} ({cut(k64['zipf_c']['reduction_pct'])})",
        f"widens the lead to {msr[0]:.1f}-{msr[1]:.1f}%",
        f"grows with OP ({op['0.1']['reduction_pct']:.1f}% to {op['0.2']['reduction_pct']:.1f}%)",
        f"GC writes fall {100 * fall:.1f}% from six to ten streams",
        f"(Agg8; ycsb_a by {results('minos_fig11_ids8')['settings']['ycsb_a']['reduction_pct']:.1f}%)",
        f"ycsb_a {-results('minos_fig11_ids32')['settings']['ycsb_a']['reduction_pct']:.1f}% above SepBIT",
        f"MiDAS is {float(gc(seg1024['sepbit'])) - float(gc(seg1024['midas'])):.3f} lower",
        f"at the end of the first Zipf {moments[0]['theta']} phase is `{json.dumps(moments[0]['mapping'], separators=(',', ':'))}`",
        f"at the end of the first Zipf {moments[1]['theta']} phase `{json.dumps(moments[1]['mapping'], separators=(',', ':'))}`",
    ]  # fmt: skip
    missing = [e for e in expected if e not in page]
    assert not missing, f"{PAGE} does not quote the results' figures: {missing}"


def test_fig18_phase_means_are_the_fig18_waf_series():
    """Fig. 18: the mean instantaneous WAF over the last 1.5 capacities of each phase (``waf_series``
    points after the phase's first half capacity, up to its end) of MINOS, SepBIT and MiDAS."""
    data = results("minos_fig18")
    run = data["settings"]["phase_shift"]["schemes"]["minos"]["settings"]
    cap, phase = run["capacity_blocks"], 2  # phases of 2 capacities after a prefill of one
    assert run["prefill"]

    def means(scheme):
        s = data["waf_series"][scheme]
        t, w = np.asarray(s["t"]) / cap, np.asarray(s["waf"])
        out = []
        for k in range(8):
            end = 1 + phase * (k + 1)
            out.append(f"{w[(t > end - 1.5) & (t <= end)].mean():.3f}")
        return out[0::2], out[1::2]  # Zipf 1.01 phases, Zipf 0.8 phases

    (m1, m8), (s1, s8), (d1, d8) = means("minos"), means("sepbit"), means("midas")
    expected = [
        "Zipf 1.01 phases " + " / ".join(m1) + " against SepBIT's " + " / ".join(s1),
        "Zipf 0.8 phases " + " / ".join(m8) + " against " + " / ".join(s8),
        "climbing: " + " / ".join(d1) + " in the Zipf 1.01 phases, " + " / ".join(d8) + " in the Zipf 0.8 ones",
    ]
    missing = [e for e in expected if e not in text()]
    assert not missing, f"{PAGE} does not quote minos_fig18.json's phase means: {missing}"
