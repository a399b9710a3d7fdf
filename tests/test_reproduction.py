"""The reproduction scoreboard: ``docs/reproduction.md`` is what ``docs/claims.yaml`` and
``docs/results/*.json`` give (regenerated and compared), verdicts come from the numbers (golden
cases), the extraction language reads what it says (checked against plain arithmetic on the
JSON), and nothing is left blank: a missing file or a path that does not resolve stops the build
with one line naming the claim and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from dogi_ml import report_reproduction as rr
from dogi_ml.report_reproduction import ClaimError, verdict

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproduction.md"


# -- the committed page -----------------------------------------------------------------------------
def test_committed_page_is_what_the_registry_and_results_give():
    page, rows = rr.build(rr.DEFAULT_CLAIMS, rr.DEFAULT_RESULTS)
    assert PAGE.read_text() == page, "docs/reproduction.md is stale: run python -m dogi_ml report reproduction"
    assert {r.claim.paper for r in rows} == {"sepbit", "dogi", "minos", "shiro", "adapt", "peers"}


def test_check_passes_on_the_committed_page_and_fails_on_drift(tmp_path, capsys):
    assert rr.main(["reproduction", "check=true"]) == 0
    assert "is up to date" in capsys.readouterr().out
    stale = tmp_path / "reproduction.md"
    stale.write_text(PAGE.read_text().replace("**reproduced**", "**not**", 1))
    assert rr.main(["reproduction", f"out={stale}", "--check"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"check failed: {stale} differs from what the registry and results give -- run: ")
    assert rr.main(["reproduction", f"out={tmp_path / 'absent.md'}", "check=true"]) == 1
    assert "does not exist" in capsys.readouterr().err
    # writing it makes the check pass, and the page written is the committed one
    assert rr.main(["reproduction", f"out={stale}"]) == 0
    assert stale.read_text() == PAGE.read_text()
    assert rr.main(["reproduction", f"out={stale}", "check=true"]) == 0


def test_command_line(tmp_path):
    """Through ``python -m dogi_ml`` from an unrelated directory: exit 1 and one line on drift,
    2 and one line on a usage error."""
    out = tmp_path / "page.md"
    proc = run_cli(["report", "reproduction", f"out={out}"], tmp_path)
    assert out.read_text() == PAGE.read_text() and proc.stdout.startswith(f"wrote {out}: ")
    out.write_text("edited by hand\n")
    proc = run_cli(["report", "reproduction", f"out={out}", "check=true"], tmp_path, check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli(["report"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: report needs a kind (reproduction, figures) -- {rr.USAGE}"]
    proc = run_cli(["report", "reproduction", "check=maybe"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: check='maybe' is not true or false -- use check=true or check=false"


# -- verdicts -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("paper", "ours", "compare", "label", "distance"),
    [
        (19.7, 18.0, "value", "reproduced", 1.7),  # within the tolerance (2)
        (19.7, 21.7, "value", "reproduced", 2.0),  # on the tolerance
        (19.7, 13.3, "value", "partly", 6.4),  # DOGI vs MiDAS on S-type: within the partly band (10)
        (19.7, 9.7, "value", "partly", 10.0),  # on the partly band
        (19.7, 3.0, "value", "not", 16.7),  # beyond it
        (7.8, -0.2, "value", "not", 8.0),  # a cut that is a rise: never reproduced, whatever the distance
        (-19.7, -18.0, "value", "reproduced", 1.7),  # a negative claim keeps its sign
        ([1.034, 1.017], [1.035, 1.017], "value", "reproduced", 0.001),  # a row, element by element
        ([9.1, 20.2], [13.6, 19.0], "range", "reproduced", 0.0),  # inside the range
        ([9.1, 20.2], [13.6, 0.2, 8.4], "range", "partly", 8.9),  # the furthest element decides
        ([3.8, 8.8], 21.0, "range", "not", 12.2),  # above the range counts too
        (100, 100, "at_least", "reproduced", 0.0),
        (100, 50, "at_least", "not", 50.0),
        (0, 0.7, "at_most", "reproduced", 0.7),
        (0, 3.0, "at_most", "partly", 3.0),
    ],
)
def test_verdict_golden_cases(paper, ours, compare, label, distance):
    tol, partly = (2.0, 10.0) if compare != "at_least" else (0.0, 40.0)
    if compare == "value" and isinstance(paper, list):
        tol, partly = 0.01, 0.05
    if compare == "at_most":
        tol, partly = 1.0, 5.0
    v = verdict(paper, ours, compare, tol, partly)
    assert v.label == label
    assert v.distance == pytest.approx(distance, abs=1e-9)
    assert v.opposite_sign == (label == "not" and paper == 7.8)


def test_verdict_compares_the_number_shown(tmp_path):
    """Ours is rounded to the claim's digits before the verdict: 21.74 shows as 21.7 and is within
    2 of 19.7, as the page reads."""
    results = _results(tmp_path, {"r.json": {"x": 21.74}})
    claim = {"ours": {"file": "r.json", "measure": "value", "args": {"x": ["x"]}}, "paper_value": 19.7}
    (row,) = _rows(tmp_path, [claim], results)
    assert row.ours.value == 21.7 and row.verdict.label == "reproduced"


# -- the extraction language against plain arithmetic --------------------------------------------------
def test_extraction_on_the_committed_results():
    """Ours for three DOGI / SepBIT claims equals the same arithmetic done by hand on the JSON; the
    S-type figure is also the one docs/dogi.md states (12.2%)."""
    fig10 = json.loads((ROOT / "docs/results/dogi_fig10.json").read_text())
    more = json.loads((ROOT / "docs/results/dogi_fig10_more_baselines.json").read_text())
    reg = rr.load_registry(rr.DEFAULT_CLAIMS)
    claims = {c.id: c for c in reg["claims"]}
    results = rr.Results(rr.DEFAULT_RESULTS)

    stype = ["zipf", "ycsb_a", "ycsb_f"]
    by_hand = sum(100 * (1 - fig10[w]["dogi"]["waf"] / fig10[w]["midas"]["waf"]) for w in stype) / 3
    assert rr.measure_claim(claims["dogi-stype-vs-midas"], results).value == pytest.approx(by_hand, rel=1e-12)
    assert round(by_hand, 1) == 12.2

    wls = ["zipf", "ycsb_a", "ycsb_f", "varmail", "phase_shift"]
    pooled = 100 * (1 - sum(fig10[w]["sepbit"]["waf"] for w in wls) / sum(fig10[w]["nosep"]["waf"] for w in wls))
    assert rr.measure_claim(claims["sepbit-vs-nosep"], results).value == pytest.approx(pooled, rel=1e-12)

    per_scheme = [
        100 * (1 - sum(fig10[w]["sepbit"]["waf"] for w in wls) / sum(more[w][s]["waf"] for w in wls))
        for s in ("sepgc", "dac", "warcip")
    ]
    assert rr.measure_claim(claims["sepbit-vs-existing"], results).value == pytest.approx(per_scheme, rel=1e-12)

    lowest = [fig10[w]["sepbit"]["waf"] < min(more[w][s]["waf"] for s in ("sepgc", "dac", "warcip")) for w in wls]
    lowest = [a and fig10[w]["sepbit"]["waf"] < fig10[w]["nosep"]["waf"] for a, w in zip(lowest, wls)]
    assert rr.measure_claim(claims["sepbit-lowest"], results).value == 100 * sum(lowest) / len(wls)


def test_extraction_language(tmp_path):
    doc = {
        "rows": [
            {"workload": "a", "seg": 512, "table": {"0.15": 1.2, "0.2": 1.1}},
            {"workload": "a", "seg": 128, "table": {"0.15": 1.5, "0.2": 1.4}},
        ],
        "w1": {"s": 2.0, "b": 4.0, "t": True},
        "w2": {"s": 1.0, "b": 1.0, "t": False},
    }
    results = _results(tmp_path, {"d.json": doc, "e.json": {"w1": {"b": 8.0}}})
    cases = [
        # a selector keeps the value's type (segment 512 is an integer), "{op}" names a key
        (
            {
                "measure": "value",
                "args": {"x": ["rows", {"workload": "a", "seg": "{seg}"}, "table", "{op}"]},
                "over": {"seg": [512, 128], "op": ["0.15"]},
                "aggregate": {"seg": "each", "op": "mean"},
            },
            [1.2, 1.5],
        ),
        # mean of per-setting cuts vs the cut of the pooled sums
        (
            {
                "measure": "reduction_pct",
                "args": {"new": ["{w}", "s"], "base": ["{w}", "b"]},
                "over": {"w": ["w1", "w2"]},
                "aggregate": {"w": "mean"},
            },
            25.0,
        ),
        (
            {
                "measure": "reduction_pct",
                "args": {"new": ["{w}", "s"], "base": ["{w}", "b"]},
                "over": {"w": ["w1", "w2"]},
                "aggregate": {"w": "pooled"},
            },
            40.0,
        ),
        # a truth value per setting, as a share; a ref into another file
        (
            {"measure": "holds", "args": {"x": ["{w}", "t"]}, "over": {"w": ["w1", "w2"]}, "aggregate": {"w": "share"}},
            50,
        ),
        (
            {
                "measure": "reduction_vs_best_pct",
                "args": {"new": ["w1", "s"], "bases": [["w1", "b"], {"file": "e.json", "path": ["w1", "b"]}]},
            },
            50.0,
        ),
        ({"measure": "gc_reduction_pct", "args": {"new": ["w1", "s"], "base": ["w1", "b"]}}, 100 * (1 - 1 / 3)),
        ({"measure": "ratio", "args": {"a": ["w1", "b"], "b": 8}}, 0.5),
        # the parity rows: the largest |a / b - 1| over the settings (w1: 50%, w2: 0%)
        (
            {
                "measure": "abs_change_pct",
                "args": {"a": ["{w}", "s"], "b": ["{w}", "b"]},
                "over": {"w": ["w1", "w2"]},
                "aggregate": {"w": "max"},
            },
            50.0,
        ),
    ]
    for ours, expected in cases:
        claim = {"paper_value": expected, "digits": 6, "ours": {"file": "d.json", **ours}}
        (row,) = _rows(tmp_path, [claim], results)
        assert row.ours.value == pytest.approx(expected), ours


# -- nothing silent --------------------------------------------------------------------------------------
def test_missing_file_names_the_claim_and_the_file(tmp_path):
    results = _results(tmp_path, {})
    claim = {"id": "c-missing", "ours": {"file": "absent.json", "measure": "value", "args": {"x": ["x"]}}}
    with pytest.raises(ClaimError, match=r"claim c-missing: .*absent\.json does not exist"):
        _rows(tmp_path, [claim], results)


def test_unresolved_path_names_the_claim_the_file_and_the_step(tmp_path):
    results = _results(tmp_path, {"r.json": {"zipf": {"dogi": {"waf": 3.0}}}})
    claim = {"id": "c-path", "ours": {"file": "r.json", "measure": "value", "args": {"x": ["zipf", "midas", "waf"]}}}
    with pytest.raises(ClaimError, match=r"claim c-path: .*r\.json: zipf has no key 'midas' \(it has: dogi\)"):
        _rows(tmp_path, [claim], results)
    claim["ours"]["args"]["x"] = ["zipf", "dogi"]
    with pytest.raises(ClaimError, match=r"claim c-path: .*r\.json \['zipf', 'dogi'\]: .* is not a number"):
        _rows(tmp_path, [claim], results)


def test_pending_claim_shows_until_its_file_exists(tmp_path):
    results = _results(tmp_path, {})
    claim = {"id": "c-pend", "pending": "a helper is making it", "ours": {"file": "later.json"}}
    (row,) = _rows(tmp_path, [claim], results)
    assert row.verdict.label == "pending"
    assert "pending: a helper is making it" in rr._row(row)
    (results / "later.json").write_text("{}")
    with pytest.raises(ClaimError, match=r"claim c-pend: .*later\.json exists now -- write the claim's ours"):
        _rows(tmp_path, [claim], results)
    # with its extraction written, the claim resolves once the file is there, like any other
    claim["ours"] = {"file": "later.json", "measure": "value", "args": {"x": ["x"]}}
    (results / "later.json").write_text('{"x": 19.0}')
    (row,) = _rows(tmp_path, [claim], results)
    assert row.verdict.label == "reproduced" and row.ours.value == 19.0


def test_the_registry_cannot_state_a_verdict_or_omit_a_reason(tmp_path):
    results = _results(tmp_path, {"r.json": {"x": 3.0}})
    claim = {"id": "c-v", "verdict": "reproduced", "ours": {"file": "r.json", "measure": "value", "args": {"x": ["x"]}}}
    with pytest.raises(ClaimError, match="unknown key.*verdict.*computed from the numbers"):
        _rows(tmp_path, [claim], results)
    del claim["verdict"]
    with pytest.raises(ClaimError, match="claim c-v: the verdict is not and the registry gives no reason"):
        _rows(tmp_path, [claim], results)


def test_a_results_file_needs_a_command(tmp_path):
    results = _results(tmp_path, {"r.json": {"x": 19.7}})
    claim = {"id": "c-cmd", "ours": {"file": "r.json", "measure": "value", "args": {"x": ["x"]}}}
    with pytest.raises(ClaimError, match=r"claim c-cmd: no command for r\.json -- add sources\.r\.json\.command"):
        _rows(tmp_path, [claim], results, sources={})
    # a file that records its command is the record: the registry may not contradict it
    (results / "r.json").write_text('{"x": 19.7, "command": "python -m dogi_ml simulate X", "scale": {"zipf": 1}}')
    (row,) = _rows(tmp_path, [claim], results, sources={})
    assert row.sources == [("r.json", "python -m dogi_ml simulate X", "zipf: 1")]
    with pytest.raises(ClaimError, match=r"r\.json records its command and sources\.r\.json\.command"):
        _rows(tmp_path, [claim], results, sources={"r.json": {"command": "other"}})
    # a per-workload scale reads as one line, workloads with the same settings sharing an entry
    scale = {"zipf": {"capacity_blocks": 65536, "op": 0.07}, "ycsb_a": {"capacity_blocks": 65536, "op": 0.07}, "x": 1}
    assert rr._scale_text(scale) == "zipf, ycsb_a: capacity_blocks=65536, op=0.07; x: 1"


# -- helpers ---------------------------------------------------------------------------------------------
def _results(tmp_path: Path, files: dict) -> Path:
    d = tmp_path / "results"
    d.mkdir(exist_ok=True)
    for name, doc in files.items():
        (d / name).write_text(json.dumps(doc))
    return d


def _rows(tmp_path: Path, claims: list[dict], results: Path, sources: dict | None = None) -> list:
    """Build the rows of a registry holding ``claims`` (defaults filled in) over ``results``."""
    full = []
    for i, c in enumerate(claims):
        full.append(
            {
                "id": f"c{i}",
                "paper": "p",
                "claim": "a claim",
                "where": "§1",
                "paper_value": 19.7,
                "unit": "%",
                "tolerance": 2,
                "partly": 10,
                **c,
            }
        )
    if sources is None:
        sources = {f.name: {"command": f"python -m dogi_ml make {f.name}", "scale": "tiny"} for f in results.glob("*")}
    registry = tmp_path / "claims.yaml"
    registry.write_text(json.dumps({"papers": {"p": {"title": "P"}}, "sources": sources, "claims": full}))
    return rr.build_rows(rr.load_registry(registry), rr.Results(results))
