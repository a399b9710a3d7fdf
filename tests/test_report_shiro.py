"""Shiro's report (``dogi_ml.report_shiro``): the paper's WAF (G / U), Shiro's cut against every
other scheme, background-GC runs kept apart, and the files and console output it writes."""

import json

import pytest

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
