"""DOGI's S-type gap report (``dogi_ml.report_dogi``): reductions against MiDAS per cause, their
mean and change against the row as configured, the two readings of an average, the remainder,
and the sweep jobs' options read back from Hydra's overrides."""

import json
from pathlib import Path

import pytest

from dogi_ml.report_dogi import CAUSES, S_TYPE, collect_gap_runs, gap_report, gap_table


def _run(option, workload, waf):
    return {"policy": option.split("_")[0], "workload": workload, "waf": waf, "gap_option": option,
            "settings": {"capacity_blocks": 1024, "segment_blocks": 2, "op_ratio": 0.1, "gc_free_segments": 2},
            "workload_config": {"write_volume": 16.0}}  # fmt: skip


def test_causes_are_changes_of_the_mean_reduction(tmp_path):
    runs = []
    for wl, (d, m) in zip(S_TYPE, [(3.0, 4.0), (2.0, 2.5), (2.4, 3.0)]):  # 25%, 20%, 20%
        runs += [_run("dogi", wl, d), _run("midas", wl, m)]
        runs += [_run("dogi_vol31", wl, d * 0.9), _run("midas_vol31", wl, m)]  # 10% less DOGI WAF, same MiDAS
        runs += [_run("dogi_text", wl, d * 1.1)]  # moves away from the paper
        runs += [_run("dogi_4g", wl, d * 0.95), _run("midas_4g", wl, m)]  # 5% less
        runs += [_run("dogi_4g_vol31", wl, d * 0.9), _run("midas_4g_vol31", wl, m * 0.98)]  # both: not additive
    t = gap_table(runs)
    rows = {c["cause"]: c for c in t["causes"]}
    base = rows["as configured"]
    assert base["reduction"] == pytest.approx({"zipf": 25.0, "ycsb_a": 20.0, "ycsb_f": 20.0})
    assert base["mean"] == pytest.approx(65 / 3) and base["contribution"] == 0
    vol = rows["run length as the paper's (4 TiB over 132 GiB)"]
    # 1 - 0.9 d / m = 1 - 0.9 (1 - r): 32.5, 28, 28
    assert vol["mean"] == pytest.approx((32.5 + 28 + 28) / 3) and vol["contribution"] == pytest.approx(
        88.5 / 3 - 65 / 3
    )
    text = rows["DOGI's switches at the paper's text"]
    assert text["contribution"] < 0
    assert rows["DOGI's training samples over the paper's span"]["mean"] is None  # no run
    # only whole causes that move towards 19.7 count against it: run length and 4 GiB alone ...
    vol_change, cap_change = 88.5 / 3 - 65 / 3, (28.75 + 24 + 24) / 3 - 65 / 3
    assert rows["scale 4 GiB"]["contribution"] == pytest.approx(cap_change)
    assert t["unexplained"] == pytest.approx(19.7 - 65 / 3 - vol_change - cap_change)
    # ... or measured together (1 - 0.9 d / (0.98 m)), replacing both
    both = sum(100 * (1 - 0.9 * (1 - r / 100) / 0.98) for r in (25, 20, 20)) / 3 - 65 / 3
    assert t["unexplained_together"] == pytest.approx(19.7 - 65 / 3 - both)
    # the reduction of the mean WAF: 1 - 7.4 / 9.5
    assert t["definition"]["reduction_of_mean_waf"] == pytest.approx(100 * (1 - 7.4 / 9.5))
    payload = gap_report(runs, tmp_path / "gap", "gap test", "python -m dogi_ml simulate -m +experiment=dogi_gap")
    saved = json.loads((tmp_path / "gap.json").read_text())
    assert saved["command"].endswith("+experiment=dogi_gap") and saved["midas_commit"] and saved["commit"]
    assert saved["unexplained"] == pytest.approx(payload["unexplained"])
    assert saved["scale"]["zipf/dogi"]["write_volume"] == 16.0
    md = (tmp_path / "gap.md").read_text()
    assert "| as configured | " in md and "| -25.0 | -20.0 | -20.0 | -21.7 | +0.0 |" in md


def test_sweep_jobs_are_read_with_their_option(tmp_path):
    job = tmp_path / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- +workload=zipf\n- +dogi_gap=dogi_vol31\n")
    (job / "result.json").write_text(json.dumps({"workload": "zipf", "waf": 3.0, "policy": "dogi"}))
    (runs,) = collect_gap_runs(tmp_path)
    assert runs["gap_option"] == "dogi_vol31"


def test_every_cause_has_its_runs_in_the_preset():
    """Each run a cause compares is a conf/dogi_gap option, and the preset sweeps exactly those."""
    from omegaconf import OmegaConf

    from dogi_ml.cli import CONF_DIR

    options = {p.stem for p in (Path(CONF_DIR) / "dogi_gap").glob("*.yaml")}
    named = {c[1] for c in CAUSES} | {c[2] for c in CAUSES}
    assert named == options
    preset = OmegaConf.load(Path(CONF_DIR) / "experiment" / "dogi_gap.yaml")
    assert set(preset.hydra.sweeper.params["+dogi_gap"].split(",")) == options
    assert preset.hydra.sweeper.params["+workload"].split(",") == list(S_TYPE)
