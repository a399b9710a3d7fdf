"""Shiro's report (``dogi_ml.report_shiro``): the paper's WAF (G / U), Shiro's cut against every
other scheme, background-GC runs kept apart, and the files and console output it writes."""

import json

import pytest
from helpers import REPO

from dogi_ml.plotting import data_digest, figure_source
from dogi_ml.report_shiro import main, reductions, shiro_summary, write_report


def _r(scheme, waf, workload="zipf", bg=False):
    config = {"gc_background_free_ratio": 0.25, "gc_idle_gap_us": 1000} if bg else {}
    return {
        "policy": scheme.split("[")[0],
        "scheme": scheme,
        "waf": waf,
        "victim": "adjusted_greedy",
        "workload": workload,
        "config": config,
    }


def test_cut_is_on_the_papers_waf_and_background_runs_compare_among_themselves():
    results = [_r("sepbit", 3.0), _r("shiro", 2.7), _r("shiro", 2.2, bg=True), _r("sepbit", 2.6, bg=True)]
    s = shiro_summary(results)
    assert set(s["zipf"]) == {"sepbit", "shiro", "shiro+bg", "sepbit+bg"}
    assert s["zipf"]["shiro"]["paper_waf"] == pytest.approx(1.7)
    cut = reductions(s)["zipf"]
    # (F - U) / U: 1 - 1.7 / 2.0 = 15%; the background runs: 1 - 1.2 / 1.6 = 25%
    assert cut == pytest.approx({"sepbit": 15.0, "sepbit+bg": 25.0})


def test_files_and_labels_as_text(tmp_path, capsys):
    results = [_r("sepbit", 3.0), _r("shiro", 2.7), _r("shiro[cb]", 2.9)]
    payload = write_report(results, tmp_path / "rep", "Shiro test", bench=False)
    for ext in (".json", ".md", ".png"):
        assert (tmp_path / f"rep{ext}").stat().st_size > 0
    assert (
        json.loads((tmp_path / "rep.json").read_text())["shiro_paper_waf_cut_pct"] == payload["shiro_paper_waf_cut_pct"]
    )
    assert payload["shiro_paper_waf_cut_pct"]["zipf"]["shiro[cb]"] == pytest.approx(100 * (1 - 1.7 / 1.9))
    # a label such as "shiro[cb]" is printed whole (rich would take "[cb]" for markup)
    assert "shiro[cb]" in (tmp_path / "rep.md").read_text() and "shiro[cb]" in capsys.readouterr().out


def test_cli_needs_results(tmp_path):
    with pytest.raises(SystemExit, match="no \\*/result.json under"):
        main([str(tmp_path / "p"), str(tmp_path)])


def _run(scheme, waf, victim, workload="zipf", prefill=True, reserve=8, policy=None):
    return {
        "policy": policy or scheme.split("[")[0],
        "scheme": scheme,
        "waf": waf,
        "victim": victim,
        "workload": workload,
        "user_writes": 8 * 1024,
        "settings": {
            "victim": victim,
            "gc_free_segments": reserve,
            "prefill": prefill,
            "capacity_blocks": 1024,
            "op_ratio": 0.07,
            "segment_blocks": 64,
        },
    }


def test_readings_cut_against_both_rules_and_the_ordering(tmp_path):
    """A Shiro row is cut against SepBIT / PHFTL with cost-benefit (the paper's rule for them) and
    with its own rule family (greedy for Adjusted Greedy); the ordering holds when it is below both;
    setups (reserve, prefill) are kept apart; the JSON records the command, commit and scale."""
    from dogi_ml.report_shiro import readings_cuts, readings_report, readings_summary

    results = [
        _run("sepbit", 3.0, "cost_benefit"),
        _run("sepbit", 4.0, "greedy"),
        _run("phftl", 3.2, "cost_benefit"),
        _run("phftl", 3.6, "greedy"),
        _run("shiro", 2.8, "adjusted_greedy"),  # below both greedy runs, above no cost-benefit one
        _run("shiro[cost_benefit]", 1.9, "cost_benefit"),
        _run("shiro", 2.0, "adjusted_greedy", prefill=False),  # another setup, without baselines
    ]
    s = readings_summary(results)
    assert set(s) == {"reserve 8, prefilled", "reserve 8, fresh"}
    rows = s["reserve 8, prefilled"]
    assert set(rows) == {"sepbit (cost_benefit)", "sepbit (greedy)", "phftl (cost_benefit)", "phftl (greedy)",
                         "shiro", "shiro[cost_benefit]"}  # fmt: skip
    cuts = readings_cuts(s)
    c = cuts["reserve 8, prefilled"]["shiro"]["zipf"]
    # paper WAF: shiro 1.8 vs sepbit 2.0 / 3.0, phftl 2.2 / 2.6
    assert c["vs_sepbit"] == pytest.approx(10.0) and c["vs_phftl"] == pytest.approx(100 * (1 - 1.8 / 2.2))
    assert c["vs_sepbit_same"] == pytest.approx(40.0) and c["vs_phftl_same"] == pytest.approx(100 * (1 - 1.8 / 2.6))
    assert c["ordering"] is True and c["ordering_same"] is True
    cb = cuts["reserve 8, prefilled"]["shiro[cost_benefit]"]["zipf"]
    assert cb["vs_sepbit"] == cb["vs_sepbit_same"] == pytest.approx(100 * (1 - 0.9 / 2.0))
    fresh = cuts["reserve 8, fresh"]["shiro"]["zipf"]
    assert fresh["vs_sepbit"] is None and fresh["ordering"] is None
    payload = readings_report(results, tmp_path / "r", "readings test", "python -m dogi_ml simulate -m +experiment=x")
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["command"] == "python -m dogi_ml simulate -m +experiment=x" and saved["commit"]
    assert saved["scale"]["zipf"] == {"capacity_blocks": 1024, "writes_per_capacity": 8.0, "op_ratio": 0.07,
                                      "segment_blocks": 64}  # fmt: skip
    assert saved["cuts"] == json.loads(json.dumps(payload["cuts"]))
    md = (tmp_path / "r.md").read_text()
    assert "| shiro | +10.0 / +18.2 (+40.0 / +30.8) | 1/1 | 1/1 |" in md


def test_readings_cli_reads_the_sweeps_command(tmp_path):
    """``--readings`` rebuilds the readings report from a finished sweep, its command from Hydra's
    ``multirun.yaml``."""
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - +experiment=shiro_readings\n")
    (sweep / "0" / "result.json").write_text(json.dumps(_run("sepbit", 3.0, "cost_benefit")))
    main([str(tmp_path / "out"), str(sweep), "--readings"])
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["command"] == "python -m dogi_ml simulate -m +experiment=shiro_readings"
    assert saved["summary"]["reserve 8, prefilled"]["sepbit (cost_benefit)"]["zipf"]["paper_waf"] == 2.0


#: the docs/results reports with a figure (the readings reports have none)
FIGURE_REPORTS = sorted(
    p.stem
    for p in (REPO / "docs/results").glob("shiro_*.json")
    if "shiro_paper_waf_cut_pct" in json.loads(p.read_text())
)


@pytest.mark.parametrize("name", FIGURE_REPORTS)
def test_docs_results_figures_and_tables_are_their_json(name):
    """Each docs/results/NAME.json report_shiro wrote has its NAME.md and NAME.png drawn from it:
    the markdown is the one the JSON gives (title and note from NAME.md), and the figure carries
    the digest of the JSON's summary (``python -m dogi_ml.report_shiro --redraw docs/results/NAME``
    redraws both)."""
    from dogi_ml.report_shiro import read_report, report_markdown, title_and_note

    stem = REPO / "docs/results" / name
    payload = read_report(stem)
    title, note = title_and_note(stem.with_suffix(".md"))
    assert report_markdown(payload, title, note) == stem.with_suffix(".md").read_text()
    assert figure_source(stem.with_suffix(".png")) == data_digest(payload["summary"]), f"redraw {stem}.png"


def test_redraw_draws_from_the_json_alone(tmp_path, capsys):
    """--redraw: PREFIX.md and PREFIX.png anew from PREFIX.json, the title and note kept from
    PREFIX.md; a missing JSON, a readings report, a JSON whose stored cut is not its summary's and
    sweeps given beside --redraw are refused."""
    out = tmp_path / "rep"
    write_report([_r("sepbit", 3.0), _r("shiro", 2.7)], out, "Small report", note="A note.", bench=False)
    first = figure_source(out.with_suffix(".png"))
    data = json.loads(out.with_suffix(".json").read_text())
    assert first == data_digest(data["summary"])

    # SepBIT's WAF changed in the JSON (and the cut made anew), then redrawn
    data["summary"]["zipf"]["sepbit"].update(waf=3.5, paper_waf=2.5)
    data["shiro_paper_waf_cut_pct"] = json.loads(json.dumps(reductions(data["summary"])))
    out.with_suffix(".json").write_text(json.dumps(data))
    main(["--redraw", str(out)])
    md = out.with_suffix(".md").read_text()
    assert md.startswith("# Small report\n\nA note.\n\n## ") and "| zipf | 2.500 | **1.700** |" in md
    assert "| zipf | +32.0 |" in md  # Shiro's cut: 1 - 1.7 / 2.5
    assert figure_source(out.with_suffix(".png")) == data_digest(data["summary"]) != first

    data["summary"]["zipf"]["shiro"]["paper_waf"] = 1.6  # the stored cut is no longer the summary's
    out.with_suffix(".json").write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="shiro_paper_waf_cut_pct is not the one its summary gives"):
        main(["--redraw", str(out)])
    with pytest.raises(SystemExit, match="^error: --redraw .*: no .*missing.json to draw from"):
        main(["--redraw", str(tmp_path / "missing")])
    (tmp_path / "readings.json").write_text(json.dumps({"summary": {}, "cuts": {}}))
    with pytest.raises(SystemExit, match="is a readings report, which has no figure"):
        main(["--redraw", str(tmp_path / "readings")])
    with pytest.raises(SystemExit):
        main(["--redraw", str(out), str(tmp_path)])
    assert "give no sweep directory" in capsys.readouterr().err
