"""docs/peers.md's hand-written tables and the settings its text quotes are docs/results/peer_parity.json's:
each cell is compared with its JSON entry, rounded as the page prints it, so a regenerated file
(``python tests/test_peer_parity.py --update``) cannot leave the page quoting the old numbers.

``difference`` is the JSON's ``ours / theirs - 1``, printed with two decimals and its sign.

Not checked here (no stored file holds them): the unchanged (threaded) MiDAS simulator's 4.456 and
its +0.3%, the 15 configuration searches, the UID's one count in 25,140, the FIFO run's "about 4.6"
of a 24-capacity run, the SepBIT selector that skips segments below 15% garbage (-0.07% / +0.18%)
and the test's run times (machine-dependent)."""

from __future__ import annotations

import json

import pytest
from helpers import REPO, DocsCells, docs_table, docs_text

PAGE = "docs/peers.md"  # the tests read the page through this name (a scratch copy can be put in its place)

SCHEMES = {"NoSep": "nosep", "SepGC": "sepgc", "DAC": "dac", "WARCIP": "warcip", "SepBIT": "sepbit", "FK": "fk"}


def results() -> dict:
    return json.loads((REPO / "docs/results/peer_parity.json").read_text())


def table(head: str) -> list[list[str]]:
    return docs_table(PAGE, head)


def text() -> str:
    return docs_text(PAGE)


def diff(change: float) -> str:
    return f"{100 * change:+.2f}%"


def trace(study: dict, name: str) -> dict:
    return next(t for t in study["traces"] if t["name"] == name)


def midas_runs(tr: dict) -> dict:
    """Victim rule -> its record, the rules outside the tolerance included."""
    return {**tr["rules"], **tr["rules_outside_tolerance"]}


def test_midas_table_is_peer_parity_json():
    """MiDAS's steady WAF, ours and theirs, and the difference; the row order (the FIFO rule last,
    outside the tolerance) as the page has it."""
    midas = results()["midas"]
    rows = table("| trace | victim rule | ours | theirs | difference |")
    rules = [(r[0], r[1].split(" (")[0]) for r in rows]
    assert rules == [(t, r) for t in ("zipf", "ycsb_a", "hotcold") for r in ("cost_benefit_sqrt", "greedy")] + [
        ("zipf", "fifo")
    ], rules
    assert {(t["name"], r) for t in midas["traces"] for r in midas_runs(t)} == set(rules)
    c = DocsCells(PAGE)
    for (name, rule), row in zip(rules, rows):
        run = midas_runs(trace(midas, name))[rule]
        where = f"MiDAS {name} {rule}"
        c.eq(f"{where} ours", row[2], f"{run['ours']['steady_waf']:.4f}")
        c.eq(f"{where} theirs", row[3], f"{run['theirs']['steady_waf']:.4f}")
        c.eq(f"{where} difference", row[4], diff(run["difference"]))
    # the JSON's difference is ours against theirs
    for name, rule in rules:
        run = midas_runs(trace(midas, name))[rule]
        assert run["difference"] == pytest.approx(run["ours"]["steady_waf"] / run["theirs"]["steady_waf"] - 1)
    c.done(7 * 3)


def test_sepbit_set_table_is_peer_parity_json():
    """The SepBIT set's WAF, ours, theirs and the difference, per trace and scheme."""
    sepbit = results()["sepbit"]
    rows = table("| trace | " + " | ".join(SCHEMES) + " |")
    labels = [r[0] for r in rows]
    names = ["zipf", "ycsb_a", "hotcold"]
    assert labels == [lab for t in names for lab in (f"{t}, ours", f"{t}, theirs", "difference")], labels
    c = DocsCells(PAGE)
    for i, name in enumerate(names):
        schemes = trace(sepbit, name)["schemes"]
        assert set(schemes) == set(SCHEMES.values()), name
        ours, theirs, difference = rows[3 * i : 3 * i + 3]
        for col, (label, s) in enumerate(SCHEMES.items(), start=1):
            run = schemes[s]
            c.eq(f"SepBIT set {name} {label} ours", ours[col], f"{run['ours']['waf']:.4f}")
            c.eq(f"SepBIT set {name} {label} theirs", theirs[col], f"{run['theirs']['waf']:.4f}")
            c.eq(f"SepBIT set {name} {label} difference", difference[col], diff(run["difference"]))
            assert run["difference"] == pytest.approx(run["ours"]["waf"] / run["theirs"]["waf"] - 1)
    c.done(3 * 6 * 3)


def test_peers_and_traces_tables_are_peer_parity_json():
    """The peers' commits, and each trace's generator command for either comparison."""
    data = results()
    c = DocsCells(PAGE)
    peers = {r[0].strip("`"): r[1].strip("`") for r in table("| peer | commit | build | changes in the copy run (outside this repository) |")}  # fmt: skip
    assert set(peers) == {data[k]["peer"]["repo"] for k in ("midas", "sepbit")}, peers
    for k in ("midas", "sepbit"):
        c.eq(f"{k} peer commit", peers[data[k]["peer"]["repo"]], data[k]["peer"]["commit"])
    rows = table("| trace | MiDAS comparison | SepBIT-set comparison |")
    assert [r[0].split(" (")[0] for r in rows] == ["zipf", "ycsb_a", "hotcold"]
    for row in rows:
        name = row[0].split(" (")[0]
        for col, k in ((1, "midas"), (2, "sepbit")):
            command = trace(data[k], name)["command"].removeprefix("dogi_ml.traces.generators.")
            c.eq(f"{k} trace {name} command", row[col].strip("`"), command)
    c.done(2 + 3 * 2)


def test_settings_and_text_figures_are_peer_parity_json():
    """The settings the text names (geometry, steady window, tolerances), which traces
    tests/test_peer_parity.py runs, and the figures the text quotes from the tables."""
    data = results()
    midas, sepbit = data["midas"], data["sepbit"]
    m, s = midas["settings"], sepbit["settings"]
    zipf_cb = trace(midas, "zipf")["rules"]["cost_benefit_sqrt"]
    first, last = m["steady_intervals"]
    in_test = {k: [t["name"] for t in data[k]["traces"] if t["in_test"]] for k in ("midas", "sepbit")}
    assert in_test == {"midas": ["zipf", "ycsb_a"], "sepbit": ["zipf"]}, in_test
    assert set(trace(midas, "zipf")["rules"]) == {"cost_benefit_sqrt", "greedy"}
    # the other rules (all but FIFO) agree within 0.5%
    others = [r["difference"] for t in midas["traces"] for r in t["rules"].values()]
    assert max(abs(d) for d in others) < 0.005, others
    expected = [
        f"MiDAS against `sungkyun123/MiDAS-Simulation` (its steady WAF within {100 * midas['tolerance']:.0f}%)",
        f"Java trace replayer (within {100 * sepbit['tolerance']:.0f}%)",
        f"against the synchronous {zipf_cb['theirs']['steady_waf']:.3f}",
        f"2 GB logical ({m['capacity_blocks']:,} blocks)",
        f"in {m['segments']} segments of 4 MiB ({m['segment_blocks']} blocks, OP {100 * m['op_ratio']:.2f}% as theirs",
        f"GC while fewer than {m['gc_free_segments']} segments are free",
        f"sim.capacity_blocks={m['capacity_blocks']} sim.segment_blocks={m['segment_blocks']} "
        f"sim.op_ratio={m['op_ratio']} sim.gc_free_segments={m['gc_free_segments']}` (prefill on)",
        f"each device capacity of writes ({m['segments'] * m['segment_blocks']:,} blocks,",
        f"the mean over intervals {first} to {last}",
        f"MiDAS, steady WAF (intervals {first}-{last}):",
        f"--setSystemGarbageProportionThreshold {s['gc_garbage_ratio']} --setSegmentSize {s['segment_blocks'] * 4096}",
        f"`sim.segment_blocks={s['segment_blocks']} sim.victim={s['victim']} sim.gc_trigger={s['gc_trigger']} "
        f"sim.gc_garbage_ratio={s['gc_garbage_ratio']} sim.op_ratio={s['op_ratio']}`",
        f"physical limit; {100 * s['op_ratio']:.0f}% OP keeps free space",
        f"capacity_blocks={m['capacity_blocks']}, n_writes={trace(midas, 'zipf')['write_volume']:.0f} * ",
        "checks MiDAS on zipf and ycsb_a (both rules) and the SepBIT set on zipf",
    ]
    page = text()
    missing = [e for e in expected if e not in page]
    assert not missing, missing


def test_fifo_text_figure_is_peer_parity_json():
    """The FIFO rule's paragraph: their simulator stays near its steady WAF (the table's 13.4641)."""
    fifo = trace(results()["midas"], "zipf")["rules_outside_tolerance"]["fifo"]
    assert f"stays near {fifo['theirs']['steady_waf']:.1f}." in text()
