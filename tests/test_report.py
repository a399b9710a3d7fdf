"""The sweep comparison (``dogi_ml.report``): one row per run, named by its scheme label; the
DOGI paper figures drawn from their JSON."""

import json

import pytest
from helpers import REPO

from dogi_ml.report import (
    comparison_rows,
    paper_summary,
    plot_results,
    print_comparison,
    print_paper_tables,
    print_sim_summary,
)


def _r(policy, scheme, waf):
    return {
        "policy": policy,
        "scheme": scheme,
        "victim": "cost_benefit_sepbit",
        "workload": "zipf_h",
        "waf": waf,
        "gc_writes": int((waf - 1) * 1000),
        "user_writes": 1000,
        "appends_per_second": 2e7,
        "capacity_blocks": 100,
        "waf_series": {"t": [100, 200], "waf": [waf, waf]},
    }


def test_variants_of_one_policy_stay_apart(tmp_path, capsys):
    # a sweep over a policy's switches: the rows carry the labels, and the table prints them whole
    # ("minos[agg1]" would otherwise read as rich markup and print as "minos")
    results = [_r("minos", "minos", 2.3), _r("minos", "minos[agg1]", 2.2), _r("sepbit", "sepbit", 2.4)]
    rows = comparison_rows(results)
    assert [r["scheme"] for r in rows] == ["minos[agg1]", "minos", "sepbit"]  # by WAF
    assert [r["policy"] for r in rows] == ["minos", "minos", "sepbit"]
    print_comparison(results)
    out = capsys.readouterr().out
    assert "minos[agg1]" in out and "sepbit" in out
    assert plot_results(results, tmp_path / "c.png").stat().st_size > 0


def test_one_run_is_titled_by_its_scheme_label(capsys):
    r = _r("minos", "minos[idsblock]", 2.3) | {
        "reclaimed_segments": 5,
        "victim_valid_ratio": 0.5,
        "physical_segments": 10,
        "state_bytes": 1 << 20,
        "elapsed_s": 0.1,
        "groups": [],
    }
    print_sim_summary(r)
    assert "minos[idsblock]" in capsys.readouterr().out


def test_paper_tables_print_labels_and_workload_names_whole(capsys):
    # a trace file named "ssd[east].csv" is the workload "ssd[east]"; rich would print it as "ssd"
    runs = [
        _r("sepbit", "sepbit[paper]", 2.4) | {"workload": "ssd[east]"},
        _r("dogi", "dogi", 2.1) | {"workload": "ssd[east]", "user_accuracy": 0.8, "inference_ns_per_block": 90.0},
    ]
    print_paper_tables(paper_summary(runs))
    out = capsys.readouterr().out
    assert out.count("ssd[east]") == 3  # the WAF, accuracy and inference tables
    assert "vs sepbit[paper]" in out  # the best baseline named whole


def test_paper_files_carry_every_figure_the_docs_cite(tmp_path):
    """A DOGI preset's ``output=PATH.json`` writes the summary, DOGI's reductions and its accuracy
    details beside it (docs/results/dogi_fig10_*.json came from these writers, not a hand script),
    each entry with the effective settings the run used."""
    import json

    from dogi_ml.report import write_paper_files

    settings = {"victim": "cost_benefit", "op_ratio": 0.1, "segment_blocks": 512, "prefill": True}
    dogi = _r("dogi", "dogi", 2.0) | {
        "workload": "zipf",
        "settings": {**settings, "victim": "dogi"},
        "user_accuracy": 0.6,
        "user_recall_per_class": {"hot": 0.9},
        "numerics": {"mode": "portable"},
    }
    base = _r("sepbit", "sepbit", 2.5) | {"workload": "zipf", "settings": settings, "numerics": {"mode": "portable"}}
    summary = paper_summary([dogi, base])
    written = write_paper_files([dogi, base], summary, tmp_path / "fig.json", tmp_path)
    assert [p.name for p in written] == ["fig.json", "fig_reductions.json", "fig_accuracy.json", "fig.png"]
    assert json.loads((tmp_path / "fig.json").read_text())["zipf"]["dogi"]["settings"] == {
        **settings,
        "victim": "dogi",
        "numerics": "portable",
    }
    red = json.loads((tmp_path / "fig_reductions.json").read_text())["zipf"]
    assert red["best_baseline"] == "sepbit" and red["reduction_pct"] == 100 * (1 - 2.0 / 2.5)
    acc = json.loads((tmp_path / "fig_accuracy.json").read_text())["zipf"]
    assert acc == {"waf": 2.0, "user_accuracy": 0.6, "user_recall_per_class": {"hot": 0.9}}


def test_runs_differing_only_in_their_victim_rule_are_told_apart_where_rows_are_keyed_by_scheme(tmp_path, capsys):
    """The hybrid's table (rows keyed by scheme) kept one of two select/auto runs whose only
    difference was policy.victim (cost_benefit / cost_benefit_sepbit), without a word: they are
    named by the rule each ran; a report that keys its rows by the victim rule itself (ADAPT's) keeps
    the labels."""
    import json

    from dogi_ml.report import collect_results

    for i, (victim, waf) in enumerate((("cost_benefit", 2.895), ("cost_benefit_sepbit", 2.855))):
        r = _r("hybrid", "hybrid[lifetimes=select]", waf)
        r["victim"] = f"hybrid({victim})"
        r["policy_config"] = {"name": "hybrid", "victim": victim, "params": {"lifetimes": "select"}}
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "result.json").write_text(json.dumps(r))
    assert [r["scheme"] for r in collect_results(tmp_path, rows_by_victim=False)] == [
        "hybrid[lifetimes=select]{victim=hybrid(cost_benefit)}",
        "hybrid[lifetimes=select]{victim=hybrid(cost_benefit_sepbit)}",
    ]
    assert [r["scheme"] for r in collect_results(tmp_path)] == ["hybrid[lifetimes=select]"] * 2
    assert capsys.readouterr().err == ""
    # a rerun with the same rule is still checked against its twin
    twin = json.loads((tmp_path / "1" / "result.json").read_text())
    twin["waf"] = 2.86
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "result.json").write_text(json.dumps(twin))
    collect_results(tmp_path, rows_by_victim=False)
    assert "configured alike give different WAFs (2.855, 2.86)" in capsys.readouterr().err
    (tmp_path / "2" / "result.json").unlink()
    (tmp_path / "2").rmdir()
    # a result written before policy_config was recorded still names its rule
    old = json.loads((tmp_path / "0" / "result.json").read_text())
    del old["policy_config"]
    (tmp_path / "0" / "result.json").write_text(json.dumps(old))
    assert [r["scheme"] for r in collect_results(tmp_path, rows_by_victim=False)][0] == (
        "hybrid[lifetimes=select]{victim=hybrid(cost_benefit)}"
    )


def test_runs_whose_labels_agree_are_told_apart_by_their_configuration(tmp_path, capsys):
    """A sweep over a parameter the label does not name (Shiro's epsilon) used to leave one row per
    workload in every table keyed by scheme (the last run). collect_results names the differing
    settings in each such run's label; an output path (save_qtable) does not count; runs configured
    alike with different WAFs are reported; results without policy_config are left alone."""
    import json

    from dogi_ml.report import collect_results

    def run(i, sweep, eps, waf, save=None, configured=True):
        r = _r("shiro", "shiro", waf)
        if configured:
            r["policy_config"] = {"name": "shiro", "params": {"epsilon": eps, "save_qtable": save, "alpha": 0.1}}
        d = tmp_path / sweep / str(i)
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r))

    run(0, "a", 0.01, 5.2, save="x.npy")
    run(1, "a", 0.1, 5.4)
    run(0, "b", 0.01, 5.2, save="y.npy")  # the same run in another sweep, saving its table elsewhere
    results = collect_results(tmp_path / "a", tmp_path / "b")
    assert [r["scheme"] for r in results] == [
        "shiro{params.epsilon=0.01}",
        "shiro{params.epsilon=0.1}",
        "shiro{params.epsilon=0.01}",
    ]
    summary = paper_summary(results)
    assert {k: v["waf"] for k, v in summary["zipf_h"].items()} == {
        "shiro{params.epsilon=0.01}": 5.2,
        "shiro{params.epsilon=0.1}": 5.4,
    }
    # configured alike, different WAFs: kept as they are, and said
    run(0, "c", 0.01, 5.2)
    run(1, "c", 0.01, 5.3)
    assert [r["scheme"] for r in collect_results(tmp_path / "c")] == ["shiro", "shiro"]
    assert "runs of shiro on zipf_h configured alike give different WAFs (5.2, 5.3)" in capsys.readouterr().err
    # a sweep over what the results carry themselves (MINOS's streams, policy.n_groups; an OP ratio):
    # labels kept, and no alarm
    for i, (groups, op) in enumerate(((6, 0.1), (7, 0.1), (6, 0.2))):
        r = _r("minos", "minos", 2.0 + i / 10)
        r.update(n_groups=groups, op_ratio=op, policy_config={"name": "minos", "n_groups": groups, "params": {}})
        r["settings"] = {"op_ratio": op}
        (tmp_path / "e" / str(i)).mkdir(parents=True)
        (tmp_path / "e" / str(i) / "result.json").write_text(json.dumps(r))
    assert [r["scheme"] for r in collect_results(tmp_path / "e")] == ["minos"] * 3
    assert capsys.readouterr().err == ""
    # results written before policy_config was recorded: nothing to tell them apart by
    run(0, "d", 0.01, 5.2, configured=False)
    run(1, "d", 0.1, 5.4, configured=False)
    assert [r["scheme"] for r in collect_results(tmp_path / "d")] == ["shiro", "shiro"]


PAPER_FIGURES = sorted(p.stem for p in (REPO / "docs/results").glob("dogi_fig*.png"))


@pytest.mark.parametrize("name", PAPER_FIGURES)
def test_docs_results_paper_figures_are_their_json(name):
    """Each docs/results/dogi_figNN.png carries the digest of the summary it draws, dogi_figNN.json,
    and each dogi_figNN_gc_destinations.png (Fig. 12b) that of its runs' matrices; a figure left
    behind by a later JSON is redrawn with ``python -m dogi_ml.report --redraw docs/results/NAME``."""
    from dogi_ml.plotting import data_digest, figure_source

    stem = REPO / "docs/results" / name
    data = json.loads(stem.with_suffix(".json").read_text())
    assert figure_source(stem.with_suffix(".png")) == data_digest(data), f"redraw {stem}.png from its JSON"


@pytest.mark.parametrize("name", [n for n in PAPER_FIGURES if not n.endswith("_gc_destinations")])
def test_docs_results_gc_destinations_are_the_runs_the_summary_quotes(name):
    """Fig. 12b's matrices come from the runs whose WAF the figure's summary quotes: one entry per
    DOGI run of the summary, each with that run's WAF to the last digit, and GC writes in every
    matrix."""
    from dogi_ml.policies.dogi import N_GROUPS
    from dogi_ml.report import GC_GROUP_NAMES

    assert len(GC_GROUP_NAMES) == N_GROUPS  # every group of a matrix has its name on the axes
    results = REPO / "docs/results"
    summary = json.loads((results / f"{name}.json").read_text())
    dogi = {(w, s) for w, row in summary.items() for s in row if s.startswith("dogi")}
    gc_file = results / f"{name}_gc_destinations.json"
    if not dogi:  # the baselines alone (dogi_fig10_more_baselines): none reports GC destinations
        assert not gc_file.exists()
        return
    runs = json.loads(gc_file.read_text())
    assert {(r["workload"], r["scheme"]) for r in runs} == dogi and len(runs) == len(dogi)
    for r in runs:
        assert r["waf"] == summary[r["workload"]][r["scheme"]]["waf"], (r["workload"], r["scheme"])
        m = r["gc_destinations"]
        assert len(m) == len(m[0]) == N_GROUPS and sum(map(sum, m)) > 0


def test_paper_figure_redraws_from_its_json_alone(tmp_path, capsys):
    """write_paper_files draws PATH.png from PATH.json as written (digest = file); --redraw draws
    it anew from the JSON alone, and refuses a missing file and one that is not a paper summary."""
    from dogi_ml.plotting import data_digest, figure_source, figure_title
    from dogi_ml.report import main, write_paper_files

    runs = [_r("dogi", "dogi", 2.0) | {"workload": "zipf", "user_accuracy": 0.6}, _r("sepbit", "sepbit", 2.5)]
    runs[1]["workload"] = "zipf"
    stem = tmp_path / "fig"
    write_paper_files(runs, paper_summary(runs), stem.with_suffix(".json"), tmp_path, title="t")
    first = figure_source(stem.with_suffix(".png"))
    assert first == data_digest(json.loads(stem.with_suffix(".json").read_text()))

    summary = json.loads(stem.with_suffix(".json").read_text())
    summary["zipf"]["sepbit"]["waf"] = 2.6
    stem.with_suffix(".json").write_text(json.dumps(summary))
    main(["--redraw", str(stem)])  # no --title: the one the figure recorded
    assert f"wrote:   {stem}.png" in capsys.readouterr().out
    assert figure_source(stem.with_suffix(".png")) == data_digest(summary) != first
    assert figure_title(stem.with_suffix(".png")) == "t"
    main(["--redraw", str(stem), "--title", "another"])
    assert figure_title(stem.with_suffix(".png")) == "another"

    # Fig. 12b: from its runs' matrices, with the runs' WAF and names
    matrix = [[0] * 18 for _ in range(18)]
    matrix[0][1], matrix[1][2] = 5, 7
    gc_runs = [dict(runs[0], gc_destinations=matrix, scheme="dogi")]
    written = write_paper_files(gc_runs, paper_summary(gc_runs), tmp_path / "gc.json", tmp_path)
    assert [p.name for p in written][-2:] == ["gc_gc_destinations.json", "gc_gc_destinations.png"]
    gc = json.loads((tmp_path / "gc_gc_destinations.json").read_text())
    assert gc == [{"workload": "zipf", "scheme": "dogi", "waf": 2.0, "gc_destinations": matrix}]
    assert figure_source(tmp_path / "gc_gc_destinations.png") == data_digest(gc)
    gc[0]["gc_destinations"][1][2] = 9
    (tmp_path / "gc_gc_destinations.json").write_text(json.dumps(gc))
    main(["--redraw", str(tmp_path / "gc_gc_destinations")])
    assert figure_source(tmp_path / "gc_gc_destinations.png") == data_digest(gc)
    gc[0]["gc_destinations"] = [[1, 2]]  # not square
    (tmp_path / "gc_gc_destinations.json").write_text(json.dumps(gc))
    with pytest.raises(SystemExit, match=r"gc_gc_destinations\.json is not a list of GC-destination runs"):
        main(["--redraw", str(tmp_path / "gc_gc_destinations")])

    with pytest.raises(SystemExit, match=r"^error: --redraw .*nofig: no .*nofig\.json to draw from$"):
        main(["--redraw", str(tmp_path / "nofig")])
    # DOGI's accuracies beside the summary: not what the figure draws
    with pytest.raises(
        SystemExit, match=r"^error: --redraw .*fig_accuracy: .*fig_accuracy\.json is not a paper summary"
    ):
        main(["--redraw", str(tmp_path / "fig_accuracy")])
