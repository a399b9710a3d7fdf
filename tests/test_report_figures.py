"""``report figures``: every figure of docs/results against the JSON it is drawn from, and one
command that redraws them all (dogi_ml.report_figures)."""

import json
import shutil

from helpers import REPO, run_cli

from dogi_ml.plotting import data_digest, figure_source
from dogi_ml.report_figures import FAMILIES, survey

RESULTS = REPO / "docs/results"


def test_every_published_figure_is_covered_or_says_why():
    """Each docs/results PNG is either drawn from its JSON with the digest recorded, or listed
    with the reason it cannot be (its data in no JSON): none is passed over in silence. The
    reports' own tests check each family; this one checks that the families cover the folder."""
    covered, not_covered = survey(RESULTS)
    names = {stem.name for stem, _, _ in covered} | {line.split(".png:")[0] for line in not_covered}
    assert names == {p.stem for p in RESULTS.glob("*.png")}
    # 15 hybrid, 9 shiro, 6 adapt, 11 MINOS figures, Table 1, 6 DOGI figures and their 5 GC
    # destinations, the fleet CDF: every figure of the folder
    assert len(covered) >= 54
    assert {f.report for _, f, _ in covered} == {f.report for f in FAMILIES}
    for stem, _, data in covered:
        assert figure_source(stem.with_suffix(".png")) == data_digest(data), stem.name
    assert not_covered == []


def test_check_names_a_stale_figure_and_the_redraw_mends_it(tmp_path):
    """A JSON rewritten without its figure (a row added to a hybrid table, as four figures once
    were) fails ``check=true`` with one line naming it; ``report figures NAME`` redraws it, and
    the check passes. An unknown name is a usage error."""
    from dogi_ml.report_hybrid import summarise

    results = tmp_path / "results"
    results.mkdir()
    for name in ("hybrid_select", "shiro_fig7"):
        for f in RESULTS.glob(f"{name}.*"):
            shutil.copy(f, results / f.name)
    # a figure whose data is in no JSON, and one whose JSON its report cannot draw from
    shutil.copy(RESULTS / "minos_fig19.png", results / "minos_fig19.png")
    shutil.copy(RESULTS / "minos_fig19.png", results / "minos_fig20.png")
    (results / "minos_fig20.json").write_text('{"settings": {}}')
    proc = run_cli(["report", "figures", f"results={results}", "--check"], tmp_path)
    assert proc.stdout.startswith("2 figures are drawn from their JSON; 2 not covered")
    assert "not covered: minos_fig19.png: no minos_fig19.json beside it (its data is in no JSON)" in proc.stdout
    assert "not covered: minos_fig20.png: dogi_ml.report_minos cannot draw it" in proc.stdout

    js = results / "hybrid_select.json"
    data = json.loads(js.read_text())
    data["zipf"]["sepbit"] = {**data["zipf"]["sepbit"], "waf": 3.0}
    table = {w: row for w, row in data.items() if not w.startswith("_")}
    data["_summary"] = json.loads(json.dumps(summarise(table), default=float))
    js.write_text(json.dumps(data, indent=2))
    proc = run_cli(["report", "figures", f"results={results}", "check=true"], tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "check failed: 1 of 2 figures are not drawn from their JSON: hybrid_select "
        "-- run: python -m dogi_ml report figures hybrid_select"
    ]

    proc = run_cli(["report", "figures", f"results={results}", "hybrid_select"], tmp_path)
    assert proc.stdout.splitlines()[0] == f"redrew:  {results / 'hybrid_select.png'} (dogi_ml.report_hybrid)"
    assert "| sepbit | 3.000 |" in (results / "hybrid_select.md").read_text()
    run_cli(["report", "figures", f"results={results}", "--check"], tmp_path)

    proc = run_cli(["report", "figures", f"results={results}", "--chek"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[0].startswith("error: report figures: unknown option '--chek'")
    proc = run_cli(["report", "figures", f"results={results}", "nosuch"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[0].startswith(f"error: report figures: no nosuch figure in {results}")
