"""MINOS evaluation tables: GC writes (WAF - 1), the best non-oracle baseline per setting,
MINOS's cut, sensitivity settings, the Fig. 18/19 plots from real runs, and every figure drawn
from its JSON alone (bar charts, Fig. 18's time panel, Fig. 19's mapping)."""

import json

import pytest
from helpers import CAP, REPO, SEG, zipf_writes

from dogi_ml.plotting import data_digest, figure_source, figure_title
from dogi_ml.policies import make_policy
from dogi_ml.report_minos import (
    clustering_data,
    figure_data,
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


@pytest.fixture(scope="module")
def real_runs():
    """SepBIT and MINOS (with its mapping log) on the same Zipf writes, read as a ``phase_shift``
    run of one-capacity phases (so Figs. 18 and 19 have phase boundaries to draw)."""
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
    return results


def test_files_and_clustering_plot_from_a_real_run(tmp_path, real_runs):
    summary = write_minos(real_runs, tmp_path / "out", title="t")
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["settings"]["zipf"]["best_baseline"] == "sepbit" and set(saved["waf_series"]) == {"sepbit", "minos"}
    assert summary["settings"]["zipf"]["minos_waf"] == real_runs[1]["waf"]
    assert (tmp_path / "out.png").stat().st_size > 0
    out = clustering_data(real_runs[1])
    assert 1 <= len(out["moments"]) <= 2 and all(len(m["mapping"]) == 16 for m in out["moments"])
    assert plot_clustering(out, tmp_path / "fig19.png").stat().st_size > 0
    with pytest.raises(ValueError, match="mapping_log=N"):
        clustering_data(real_runs[0])


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


#: MINOS figures that draw more than the summary of their JSON: Fig. 18's time panel, Fig. 19
WITH_MORE_THAN_BARS = ("minos_fig18", "minos_fig19")
BAR_CHARTS = sorted(p.stem for p in (REPO / "docs/results").glob("minos_fig*.png") if p.stem not in WITH_MORE_THAN_BARS)


@pytest.mark.parametrize("name", BAR_CHARTS)
def test_docs_results_bar_charts_are_their_json(name):
    """Each docs/results MINOS bar chart carries the digest of the summary it draws (``varied``
    and ``settings`` of NAME.json); a figure left behind by a later JSON is redrawn with
    ``python -m dogi_ml.report_minos --redraw docs/results/NAME --title T``."""
    stem = REPO / "docs/results" / name
    assert figure_source(stem.with_suffix(".png")) == data_digest(read_summary(stem.with_suffix(".json"))), (
        f"redraw {stem}.png from its JSON"
    )


def test_docs_results_fig18_and_fig19_are_their_json():
    """Fig. 18 (bars and time panel) and Fig. 19 carry the digest of all they draw, which their
    JSON holds: Fig. 18's series with their capacity and the phase boundaries beside the summary,
    Fig. 19's whole mapping log (every clustering of the run)."""
    results = REPO / "docs/results"
    fig18 = figure_data(results / "minos_fig18")
    assert set(fig18) == {"varied", "settings", "waf_series", "phase_boundaries"}
    assert figure_source(results / "minos_fig18.png") == data_digest(fig18), "redraw minos_fig18.png from its JSON"
    fig19 = figure_data(results / "minos_fig19")
    clusterings = json.loads((results / "minos_fig19.json").read_text())["clusterings"]
    assert len(fig19["mapping_log"]["user_time"]) == len(fig19["mapping_log"]["mapping"]) == clusterings
    assert figure_source(results / "minos_fig19.png") == data_digest(fig19), "redraw minos_fig19.png from its JSON"


def _edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_fig18_redraws_from_its_json_alone(tmp_path, real_runs, capsys):
    """write_minos keeps what Fig. 18's time panel draws (each series' capacity, the phase
    boundaries) and draws the PNG from the file (digest = bars' summary and series); --redraw
    draws the same image from the JSON alone and follows an edited number; a file without what
    the panel needs is refused in one line."""
    stem = tmp_path / "fig18"
    write_minos(real_runs, stem, title="Fig. 18 test")
    png = stem.with_suffix(".png")
    first, first_bytes = figure_source(png), png.read_bytes()
    data = figure_data(stem)
    assert data["phase_boundaries"] == phase_boundaries(real_runs[0]) == [2.0, 3.0]
    assert {s: v["capacity_blocks"] for s, v in data["waf_series"].items()} == {"sepbit": CAP, "minos": CAP}
    assert first == data_digest(data) != data_digest(read_summary(stem.with_suffix(".json")))

    main(["--redraw", str(stem)])
    assert png.read_bytes() == first_bytes  # the JSON alone gives the image the runs gave, title kept

    _edit_json(stem.with_suffix(".json"), lambda d: d["waf_series"]["minos"]["waf"].__setitem__(3, 9.0))
    main(["--redraw", str(stem)])
    assert figure_source(png) == data_digest(figure_data(stem)) != first
    assert figure_title(png) == "Fig. 18 test"

    # a file written before the series kept their capacity: refused, nothing drawn
    _edit_json(stem.with_suffix(".json"), lambda d: d["waf_series"]["minos"].pop("capacity_blocks"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main(["--redraw", str(stem)])
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"error: --redraw {stem}: ")
    assert "holds WAF series (Fig. 18) whose time panel cannot be drawn (minos's series has no positive " in message
    assert "wrote" not in capsys.readouterr().out


def test_fig19_redraws_from_its_json_alone(tmp_path, real_runs, capsys):
    """``--clustering RESULT.json`` writes a JSON with the run's whole mapping log and all else
    Fig. 19 draws, and the PNG drawn from it carries its digest; --redraw from the JSON alone gives
    the image drawn from the run, follows an edited number, and refuses a malformed file (e.g. one
    with a thinned list of rows, as this file once held) in one line."""
    run = real_runs[1]
    (tmp_path / "result.json").write_text(json.dumps(run))
    stem = tmp_path / "fig19"
    main([str(stem), "--clustering", str(tmp_path / "result.json")])
    png = stem.with_suffix(".png")
    first, first_bytes = figure_source(png), png.read_bytes()
    data = figure_data(stem)
    assert data["mapping_log"]["user_time"] == [e["user_time"] for e in run["minos_mapping_log"]]
    assert data["moments"] == clustering_data(run)["moments"] and len(data["moments"]) >= 1
    assert first == data_digest(data)

    # drawn from the run, from the JSON, and redrawn: one image
    plot_clustering(clustering_data(run), tmp_path / "from_run.png")
    assert (tmp_path / "from_run.png").read_bytes() == first_bytes
    capsys.readouterr()
    main(["--redraw", str(stem)])
    assert f"wrote:   {png}" in capsys.readouterr().out and png.read_bytes() == first_bytes

    _edit_json(stem.with_suffix(".json"), lambda d: d["mapping_log"]["mapping"][0].__setitem__(0, 7))
    main(["--redraw", str(stem)])
    assert figure_source(png) == data_digest(figure_data(stem)) != first

    for edit, reason in (
        (lambda d: d.update(mapping_log=run["minos_mapping_log"][::2]), "its mapping_log is a list of rows"),
        (lambda d: d.pop("capacity_blocks"), "no capacity_blocks"),
        (lambda d: d["mapping_log"]["user_time"].pop(), "its mapping_log has no user_time and mapping lists"),
    ):
        main([str(stem), "--clustering", str(tmp_path / "result.json")])
        _edit_json(stem.with_suffix(".json"), edit)
        with pytest.raises(SystemExit) as refused:
            main(["--redraw", str(stem)])
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"error: --redraw {stem}: ")
        assert f"is a Fig. 19 file that cannot be drawn ({reason}" in message and "--clustering RESULT.json" in message


def test_bar_chart_redraws_from_its_json_alone(tmp_path, capsys):
    """write_minos draws PREFIX.png from PREFIX.json as written (digest = file); --redraw draws it
    anew from the JSON alone; a missing file and sweeps beside --redraw are refused."""
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
    with pytest.raises(SystemExit):
        main(["--redraw", str(out), str(tmp_path)])
    assert "give no sweep directories" in capsys.readouterr().err
