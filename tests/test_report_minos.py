"""MINOS evaluation tables: GC writes (WAF - 1), the best non-oracle baseline per setting,
MINOS's cut, sensitivity settings, the Fig. 18/19 plots from real runs, and the bar charts drawn
from their JSON."""

import json

import pytest
from helpers import CAP, REPO, SEG, zipf_writes

from dogi_ml.plotting import data_digest, figure_source
from dogi_ml.policies import make_policy
from dogi_ml.report_minos import (
    main,
    minos_summary,
    phase_boundaries,
    plot_clustering,
    read_summary,
    write_minos,
)
from dogi_ml.sim import SimConfig, Simulator


def _r(policy, waf, workload="zipf_h", **kw):
    return {
        "policy": policy,
        "scheme": kw.pop("scheme", policy),
        "waf": waf,
        "workload": workload,
        "victim": "cost_benefit_sepbit",
        "op_ratio": 0.1,
        "n_groups": 6,
        "segment_blocks": 512,
        **kw,
    }


def test_cut_against_the_best_non_oracle_baseline():
    s = minos_summary(
        [
            _r("sepbit", 3.0),
            _r("midas", 3.2, n_groups=13),
            _r("minos", 2.9),
            _r("fk", 2.0),
            _r("sepbit", 1.5, "ycsb_a"),
            _r("minos", 1.6, "ycsb_a"),
        ]
    )
    z = s["settings"]["zipf_h"]
    # GC writes 2.0 (SepBIT) vs 1.9: a 5% cut; the oracle FK is never "the best baseline"
    assert z["best_baseline"] == "sepbit" and z["reduction_pct"] == pytest.approx(5.0)
    assert z["minos_lowest"] and z["schemes"]["minos"]["gc_writes_per_user"] == pytest.approx(1.9)
    y = s["settings"]["ycsb_a"]
    assert y["reduction_pct"] == pytest.approx(-20.0) and not y["minos_lowest"]
    assert s["varied"] == []


def test_sensitivity_settings_keep_fixed_count_schemes_once():
    rs = (
        [_r("mida", 3.0 + g / 100, n_groups=g) for g in (6, 8)]
        + [_r("minos", 2.9 + g / 100, n_groups=g) for g in (6, 8)]
        + [_r("midas", 3.5, n_groups=13)]
    )
    s = minos_summary(rs)
    assert s["varied"] == ["n_groups"]
    assert set(s["settings"]) == {"zipf_h streams=6", "zipf_h streams=8", "zipf_h"}
    assert s["settings"]["zipf_h streams=8"]["reduction_pct"] == pytest.approx(100 * (1 - 1.98 / 2.08))
    assert "reduction_pct" not in s["settings"]["zipf_h"]  # MiDAS alone: nothing to compare


def test_phase_boundaries_follow_the_workload():
    r = {
        "workload_config": {"generator": "phase_shift", "params": {"phase_writes": None}},
        "capacity_blocks": 100,
        "prefill_blocks": 100,
        "user_writes": 100 + 700,
    }
    assert phase_boundaries(r) == [3.0, 5.0, 7.0]
    assert phase_boundaries({"workload_config": {"generator": "zipf"}}) == []


def test_files_and_clustering_plot_from_a_real_run(tmp_path):
    writes = zipf_writes(CAP, 4 * CAP, seed=1)
    results = []
    for name, params in (("sepbit", {}), ("minos", {"mapping_log": 100000})):
        sim = Simulator(make_policy(name, **params), SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
        sim.prefill()
        sim.feed(writes)
        r = sim.result() | {
            "workload": "zipf",
            "workload_config": {"generator": "phase_shift", "params": {"phase_writes": CAP}},
        }
        results.append(r)
    summary = write_minos(results, tmp_path / "out", title="t")
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["settings"]["zipf"]["best_baseline"] == "sepbit" and set(saved["waf_series"]) == {"sepbit", "minos"}
    assert summary["settings"]["zipf"]["minos_waf"] == results[1]["waf"]
    assert (tmp_path / "out.png").stat().st_size > 0
    out = plot_clustering(results[1], tmp_path / "fig19.png")
    assert 1 <= len(out["moments"]) <= 2 and all(len(m["mapping"]) == 16 for m in out["moments"])
    with pytest.raises(ValueError, match="mapping_log=N"):
        plot_clustering(results[0], tmp_path / "x.png")


def test_cli_needs_results(tmp_path):
    with pytest.raises(SystemExit, match="run the sweep first"):
        main([str(tmp_path / "p"), str(tmp_path)])


def test_cli_drops_a_scheme_to_compare_a_variant(tmp_path, capsys):
    """``--drop minos``: the Agg1 variant's runs against the baselines of a full sweep."""
    full, agg1 = tmp_path / "full", tmp_path / "agg1"
    runs = [(full, _r("sepbit", 3.0)), (full, _r("minos", 3.1)), (agg1, _r("minos", 2.8, scheme="minos[agg1]"))]
    for k, (d, r) in enumerate(runs):
        (d / str(k)).mkdir(parents=True)
        (d / str(k) / "result.json").write_text(json.dumps(r))
    main([str(tmp_path / "p"), str(full), str(agg1), "--drop", "minos"])
    # the variant's label reaches the printed table whole (rich would read "[agg1]" as markup)
    assert "minos[agg1]" in capsys.readouterr().out
    z = json.loads((tmp_path / "p.json").read_text())["settings"]["zipf_h"]
    assert set(z["schemes"]) == {"sepbit", "minos[agg1]"}
    assert z["minos_waf"] == 2.8 and z["reduction_pct"] == pytest.approx(10.0)
    with pytest.raises(
        SystemExit, match=r"--drop agg8: no run has that scheme; the runs have minos, minos\[agg1\], sepbit"
    ):
        main([str(tmp_path / "q"), str(full), str(agg1), "--drop", "agg8"])


#: MINOS figures whose JSON lacks what they draw: they carry no digest and --redraw refuses them
DRAWN_FROM_RUNS = {
    "minos_fig18": "holds WAF series \\(Fig. 18\\), whose panel needs the runs' phase boundaries",
    "minos_fig19": "is a Fig. 19 file, whose plot needs the run's whole mapping log",
}
BAR_CHARTS = sorted(p.stem for p in (REPO / "docs/results").glob("minos_fig*.png") if p.stem not in DRAWN_FROM_RUNS)


@pytest.mark.parametrize("name", BAR_CHARTS)
def test_docs_results_bar_charts_are_their_json(name):
    """Each docs/results MINOS bar chart carries the digest of the summary it draws (``varied``
    and ``settings`` of NAME.json); a figure left behind by a later JSON is redrawn with
    ``python -m dogi_ml.report_minos --redraw docs/results/NAME --title T``."""
    stem = REPO / "docs/results" / name
    assert figure_source(stem.with_suffix(".png")) == data_digest(read_summary(stem.with_suffix(".json"))), (
        f"redraw {stem}.png from its JSON"
    )


@pytest.mark.parametrize("name", sorted(DRAWN_FROM_RUNS))
def test_docs_results_figures_drawn_from_runs_are_refused(name):
    """Figs. 18 and 19 need data their JSON does not hold: no digest is claimed for them, and
    --redraw says where they are drawn from instead (nothing is written)."""
    stem = REPO / "docs/results" / name
    assert figure_source(stem.with_suffix(".png")) is None
    with pytest.raises(SystemExit, match=f"^error: --redraw .*{name}: .*{DRAWN_FROM_RUNS[name]}"):
        main(["--redraw", str(stem)])


def test_bar_chart_redraws_from_its_json_alone(tmp_path, capsys):
    """write_minos draws PREFIX.png from PREFIX.json as written (digest = file); --redraw draws it
    anew from the JSON alone; a missing file, a Fig. 18 file (one setting with WAF series) and
    sweeps beside --redraw are refused."""
    out = tmp_path / "bars"
    write_minos([_r("sepbit", 3.0), _r("minos", 2.9), _r("sepbit", 1.5, "ycsb_a"), _r("minos", 1.6, "ycsb_a")], out)
    first = figure_source(out.with_suffix(".png"))
    assert first == data_digest(read_summary(out.with_suffix(".json")))

    data = json.loads(out.with_suffix(".json").read_text())
    data["settings"]["ycsb_a"]["schemes"]["minos"]["gc_writes_per_user"] = 0.55
    out.with_suffix(".json").write_text(json.dumps(data))
    capsys.readouterr()
    main(["--redraw", str(out)])
    assert f"wrote:   {out}.png" in capsys.readouterr().out
    assert figure_source(out.with_suffix(".png")) == data_digest(read_summary(out.with_suffix(".json"))) != first

    with pytest.raises(SystemExit, match=r"^error: --redraw .*none: no .*none\.json to draw from$"):
        main(["--redraw", str(tmp_path / "none")])
    # one setting with WAF series: the time panel draws from the runs, so the figure claims no digest
    series = {"t": [100, 200], "waf": [3.0, 3.0]}
    write_minos([_r("sepbit", 3.0, waf_series=series), _r("minos", 2.9, waf_series=series)], tmp_path / "fig18")
    assert figure_source(tmp_path / "fig18.png") is None
    with pytest.raises(SystemExit, match=r"^error: --redraw .*fig18: .*holds WAF series \(Fig. 18\)"):
        main(["--redraw", str(tmp_path / "fig18")])
    with pytest.raises(SystemExit):
        main(["--redraw", str(out), str(tmp_path)])
    assert "give no sweep directories" in capsys.readouterr().err
