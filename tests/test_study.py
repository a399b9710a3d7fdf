"""The fleet study (``python -m dogi_ml study``, issue 41): one job per (volume, scheme) through a
Hydra launcher, skip-if-done, failures listed and rerun alone, the papers' volume filters, and
aggregates checked against a plain-Python recomputation from the per-job records."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import small_fleet_spec
from omegaconf import OmegaConf

from dogi_ml.pipeline.common import CONF_DIR
from dogi_ml.traces.fleet import generate_fleet, read_fleet

# five volumes of 2-3K blocks written about three times over: a job simulates in milliseconds
SPEC = small_fleet_spec()  # tests/helpers.py
SCHEMES = ["sepbit", "nosep", "dac"]
# Hydra's in-process launcher keeps the tests fast; test_joblib_launcher_gives_the_same_rows
# runs the default one
FAST = ["sim.segment_blocks=16", "sim.op_ratio=0.25", "hydra/launcher=basic", "mlflow=false", "plot=false"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    return generate_fleet(tmp_path_factory.mktemp("fleet"), 5, seed=3, spec=SPEC).parent


def study(monkeypatch, cwd: Path, capsys, *args, code: str = "v1") -> tuple[int, str, str]:
    """``python -m dogi_ml study ARGS`` in this process from ``cwd``: (status, stdout, stderr)."""
    from dogi_ml import cli

    monkeypatch.chdir(cwd)
    monkeypatch.setenv("DOGI_ML_CACHE", str(cwd / "cache"))
    # the code version is the checkout's, which other work in a shared tree may change between
    # two runs of a test; test_a_new_code_version_reruns_every_job changes it on purpose
    monkeypatch.setattr("dogi_ml.pipeline.study.code_version", lambda: code)
    capsys.readouterr()
    try:
        cli.main(["study", *args])
        status = 0
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "jobs").glob("*/*.json"))]


# -- an independent reference: plain Python over the records, no numpy ----------------------------
def plain_percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, written out."""
    xs = sorted(values)
    rank = q / 100 * (len(xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def recompute(recs: list[dict], schemes: list[str], baseline: str) -> dict:
    waf = {(r["volume"], r["scheme"]): r["waf"] for r in recs if r["status"] == "ok"}
    volumes = sorted({v for v, _ in waf if all((v, s) in waf for s in schemes)})
    ok = [r for r in recs if r["status"] == "ok" and r["volume"] in volumes]
    overall = {}
    for s in schemes:
        mine = [r for r in ok if r["scheme"] == s]
        overall[s] = sum(r["user_writes"] + r["gc_writes"] for r in mine) / sum(r["user_writes"] for r in mine)
    winners = {s: sum(waf[v, s] == min(waf[v, t] for t in schemes) for v in volumes) for s in schemes}
    per_volume_red = {s: [100 * (waf[v, baseline] - waf[v, s]) / waf[v, baseline] for v in volumes] for s in schemes}
    return {"volumes": volumes, "overall": overall, "winners": winners, "reduction": per_volume_red, "waf": waf}


# -- the study end to end -------------------------------------------------------------------------
def test_study_runs_each_job_once_and_aggregates_as_recomputed(fleet, tmp_path, monkeypatch, capsys):
    out = tmp_path / "st"
    args = [f"fleet={fleet}", "policy=" + ",".join(SCHEMES), f"out={out}", *FAST, "plot=true"]
    status, stdout, err = study(monkeypatch, tmp_path, capsys, *args)
    assert status == 0, err
    assert "15 jobs (5 volumes x 3 schemes: sepbit, nosep, dac); 15 to run, 0 already done (skipped)" in stdout
    recs = records(out)
    assert len(recs) == 15 and {r["status"] for r in recs} == {"ok"}
    for r in recs:
        assert r["waf"] == (r["user_writes"] + r["gc_writes"]) / r["user_writes"]
        assert r["settings"]["segment_blocks"] == 16 and r["config"]["sim"]["segment_blocks"] == 16
    checksums = {v.volume: v.checksum for v in read_fleet(fleet)}
    assert all(r["trace_checksum"] == checksums[r["volume"]] for r in recs)

    # one job against the simulator called directly on its volume: the study runs what it says
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.traces.binfmt import read_binary

    vol = read_fleet(fleet)[2]
    policy = OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "policy" / "dac.yaml"))
    sim = {
        **OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "sim" / "default.yaml")),
        "segment_blocks": 16,
        "op_ratio": 0.25,
    }
    direct = simulate(read_binary(vol.dtr), policy, sim, progress=False)
    (job,) = [r for r in recs if r["volume"] == vol.volume and r["scheme"] == "dac"]
    assert (job["user_writes"], job["gc_writes"]) == (direct["user_writes"], direct["gc_writes"])

    # the table: one row per job, the effective settings in it
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert len(table) == 15
    assert {(t["volume"], t["scheme"]): t["waf"] for t in table} == {(r["volume"], r["scheme"]): r["waf"] for r in recs}
    assert all(json.loads(t["settings"])["segment_blocks"] == 16 for t in table)

    # the aggregate against the plain-Python recomputation over the jobs' JSON records
    agg = json.loads((out / "aggregate.json").read_text())
    ref = recompute(recs, SCHEMES, "sepbit")
    assert agg["volumes"] == len(ref["volumes"]) == 5 and agg["baseline"] == "sepbit"
    for s in SCHEMES:
        assert agg["overall"][s]["waf"] == pytest.approx(ref["overall"][s], rel=1e-12)
        wafs = [ref["waf"][v, s] for v in ref["volumes"]]
        for q in (10, 25, 50, 75, 90):
            assert agg["per_volume"][s][f"p{q}"] == pytest.approx(plain_percentile(wafs, q), rel=1e-12)
            assert agg["reduction"][s][f"per_volume_p{q}_pct"] == pytest.approx(
                plain_percentile(ref["reduction"][s], q), rel=1e-9, abs=1e-9
            )
        base = ref["overall"]["sepbit"]
        assert agg["reduction"][s]["overall_pct"] == pytest.approx(100 * (base - ref["overall"][s]) / base, abs=1e-9)
    assert agg["winners"] == ref["winners"] and agg["winners_online"] == ref["winners"] and agg["oracles"] == []
    assert sum(agg["winners"].values()) >= 5
    md = (out / "aggregate.md").read_text()
    assert f"| nosep | {agg['overall']['nosep']['waf']:.4f} |" in md
    assert (out / "waf_cdf.png").stat().st_size > 10_000
    # the CDF is drawn from its data file, each scheme's per-volume WAFs as the jobs recorded them
    from dogi_ml.plotting import data_digest, figure_source

    cdf = json.loads((out / "waf_cdf.json").read_text())
    assert cdf["schemes"] == SCHEMES and cdf["oracles"] == []
    assert cdf["curves"] == {s: sorted(ref["waf"][v, s] for v in ref["volumes"]) for s in SCHEMES}
    assert figure_source(out / "waf_cdf.png") == data_digest(cdf)

    # second run: every job is done, none runs
    before = {p: p.stat().st_mtime_ns for p in (out / "jobs").glob("*/*.json")}
    status, stdout, err = study(monkeypatch, tmp_path, capsys, *args)
    assert status == 0, err
    assert "15 to run" not in stdout and "0 to run, 15 already done (skipped)" in stdout
    assert "ran 0 jobs, skipped 15 already done, 0 failed" in stdout
    assert {p: p.stat().st_mtime_ns for p in (out / "jobs").glob("*/*.json")} == before
    assert json.loads((out / "aggregate.json").read_text())["overall"] == agg["overall"]

    # a changed setting makes other jobs: they run (here on one volume), the old records are stale
    first = read_fleet(fleet)[0].volume
    status, stdout, err = study(monkeypatch, tmp_path, capsys, *args, "sim.gc_free_segments=3", f"volume={first}")
    assert status == 0, err
    assert "3 to run, 0 already done (skipped), 12 not selected" in stdout
    assert {r["volume"] for r in records(out) if r["config"]["sim"]["gc_free_segments"] == 3} == {first}
    agg = json.loads((out / "aggregate.json").read_text())
    assert agg["volumes"] == 1 and len(agg["not_run"]) == 12  # aggregates only use current records
    # one more scheme: only its job runs
    status, stdout, err = study(
        monkeypatch,
        tmp_path,
        capsys,
        *args[:1],
        "policy=sepbit,nosep,dac,sepgc",
        *args[2:],
        "sim.gc_free_segments=3",
        f"volume={first}",
    )
    assert status == 0, err
    assert (
        "20 jobs (5 volumes x 4 schemes: sepbit, nosep, dac, sepgc); 1 to run, 3 already done (skipped), 16 not selected"
        in stdout
    )


def test_a_failed_job_is_listed_fails_the_command_and_reruns_alone(fleet, tmp_path, monkeypatch, capsys):
    import shutil

    broken = tmp_path / "fleet"
    shutil.copytree(fleet, broken)
    victim = read_fleet(broken)[1]
    good = victim.dtr.read_bytes()
    victim.dtr.write_bytes(good[: len(good) // 2])  # a truncated trace: its jobs fail, the others run
    out = tmp_path / "st"
    args = [f"fleet={broken}", "policy=sepbit,nosep", f"out={out}", *FAST]
    status, stdout, err = study(monkeypatch, tmp_path, capsys, *args)
    assert status == 1
    failed = [ln for ln in err.splitlines() if ln.startswith("failed: ")]
    assert len(failed) == 2 and all(f"on volume {victim.volume}: DtrFormatError" in ln for ln in failed), err
    assert "rerun them alone with: python -m dogi_ml study" in err and err.rstrip().endswith("only=failed")
    agg = json.loads((out / "aggregate.json").read_text())
    assert agg["volumes"] == 4 and {(f["volume"], f["scheme"]) for f in agg["failed"]} == {
        (victim.volume, "sepbit"),
        (victim.volume, "nosep"),
    }
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["status"] for r in rows) == ["failed"] * 2 + ["ok"] * 8
    assert all(r["error"].startswith("DtrFormatError") for r in rows if r["status"] == "failed")

    # still broken: the failures stay and the status stays 1
    status, stdout, _ = study(monkeypatch, tmp_path, capsys, *args, "only=failed")
    assert status == 1 and "2 to run, 0 already done (skipped), 8 not selected" in stdout
    # repaired: only the two failed jobs run, and the study is whole
    victim.dtr.write_bytes(good)
    status, stdout, err = study(monkeypatch, tmp_path, capsys, *args, "only=failed")
    assert status == 0, err
    assert "ran 2 jobs, skipped 0 already done, 0 failed" in stdout
    assert json.loads((out / "aggregate.json").read_text())["volumes"] == 5
    # volume=ID selects one volume's jobs (all done now)
    status, stdout, _ = study(monkeypatch, tmp_path, capsys, *args, f"volume={victim.volume}")
    assert status == 0 and "0 to run, 2 already done (skipped), 8 not selected" in stdout


# -- volume filters -------------------------------------------------------------------------------
class Vol:
    def __init__(self, volume, wss_gib, traffic_over_wss):
        self.volume = volume
        self.working_set_blocks = int(wss_gib * (1 << 30) // 4096)
        self.write_blocks = int(round(self.working_set_blocks * traffic_over_wss))


def preset(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "study_filter" / f"{name}.yaml"))


def test_filter_presets_follow_the_papers_rules():
    from dogi_ml.pipeline.study import select_volumes

    vols = [
        Vol("at10", 10, 3),  # SepBIT: WSS *above* 10 GiB -> out
        Vol("big", 10.5, 3),
        Vol("ratio2", 20, 2),  # SepBIT: traffic *above* 2x WSS -> out; MINOS at 50 GiB: >= 2x
        Vol("at50", 50, 2),  # MINOS: >= 50 GiB and >= 2x -> in
        Vol("small", 1, 10),
        Vol("idle", 0, 0),
    ]
    kept, dropped = select_volumes(vols, preset("sepbit"))
    assert [v.volume for v in kept] == ["big"]  # at50 has traffic exactly 2x: not above it
    assert dropped == {
        "no writes": ["idle"],
        "sepbit: write working set not > 10 GiB": ["at10", "small"],
        "sepbit: write traffic not > 2 x working set": ["ratio2", "at50"],
    }
    kept, dropped = select_volumes(vols, preset("minos"))
    assert [v.volume for v in kept] == ["at50"]
    kept, _ = select_volumes(vols, preset("none"))
    assert [v.volume for v in kept] == ["at10", "big", "ratio2", "at50", "small"]


def test_filter_on_the_command_line(fleet, tmp_path, monkeypatch, capsys):
    vols = read_fleet(fleet)
    status, _, err = study(monkeypatch, tmp_path, capsys, f"fleet={fleet}", "policy=nosep", "filter=sepbit", *FAST)
    assert status == 2
    assert err.strip() == (
        "error: filter=sepbit keeps none of the fleet's 5 volumes -- use filter=none or lower "
        "study_filter.min_write_wss_gib / min_traffic_over_wss"
    )
    # the rule with thresholds scaled to this fleet: the kept volumes are the manifest's own
    ratio = sorted(v.write_blocks / v.working_set_blocks for v in vols)[2]
    expected = sorted(v.volume for v in vols if v.write_blocks / v.working_set_blocks > ratio)
    status, stdout, err = study(
        monkeypatch,
        tmp_path,
        capsys,
        f"fleet={fleet}",
        "policy=nosep",
        "filter=sepbit",
        "study_filter.min_write_wss_gib=0.001",
        f"study_filter.min_traffic_over_wss={ratio}",
        f"out={tmp_path / 'f'}",
        *FAST,
    )
    assert status == 0, err
    assert f"filter=sepbit keeps {len(expected)} (3 sepbit: write traffic not > {ratio:g} x working set)" in stdout
    assert sorted(r["volume"] for r in records(tmp_path / "f")) == expected


# -- errors: one line naming the key and the fix ----------------------------------------------------
@pytest.mark.parametrize(
    "args, line",
    [
        (["policy=nosep", "bogus=1"], "error: study has no setting 'bogus' -- use fleet=, policy=, filter="),
        (
            ["policy=nosep", "filter=paper"],
            "error: filter=paper is not one of the study_filter configs -- use one of: minos, none, sepbit",
        ),
        (["policy=nosep,sepbt"], "error: policy=sepbt is not one of the policy configs -- use one of: adapt, dac,"),
        (
            ["policy=nosep,dac", "study.baseline=sepbit"],
            "error: study.baseline=sepbit is not one of the study's schemes (nosep, dac) -- add it to policy=",
        ),
        (["policy=nosep", "only=done"], "error: only='done' is not a job selection -- use only=failed"),
        # read as true (per-job bars; plot=maybe drew the CDF) without a word
        (
            ["policy=nosep", "progress=maybe"],
            "error: progress='maybe' is not true or false -- give progress=true or progress=false",
        ),
        (["policy=nosep", "volume=77"], "error: volume=77 is not in the fleet"),
        (
            ["policy=nosep", "sim.op_ratio=0.1,0.2"],
            "error: sim.op_ratio: a study sweeps schemes (policy=a,b,c) and volumes only -- run one study per value of sim.op_ratio",
        ),
        (
            ["policy=nosep", "study.percentiles=[50,120]"],
            "error: study.percentiles holds 120 -- give numbers from 0 to 100",
        ),
        (
            ["policy=nosep,dogi_frozen"],
            "error: policy=dogi_frozen deploys a dogi bundle and none is given -- set study.frozen_bundle=same_trace",
        ),
        (
            ["policy=nosep", "study.frozen_bundle=same_trace"],
            "error: study.frozen_bundle=same_trace is set and no scheme of policy= deploys a bundle",
        ),
        (
            ["policy=dogi_frozen", "study.frozen_bundle=trained"],
            "error: study.frozen_bundle='trained' is not a bundle source -- use study.frozen_bundle=same_trace",
        ),
        (
            ["policy=dogi_frozen", "study.frozen_bundle=same_trace", "policy.params.bundle=/some/dir"],
            "error: policy.params.bundle=/some/dir and study.frozen_bundle=same_trace both say where",
        ),
    ],
)
def test_bad_settings_are_one_line_with_the_fix(fleet, tmp_path, monkeypatch, capsys, args, line):
    status, stdout, err = study(monkeypatch, tmp_path, capsys, f"fleet={fleet}", *args, *FAST)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith(line), err
    assert not (tmp_path / "studies").exists()  # nothing ran


def test_missing_fleet_is_named(tmp_path, monkeypatch, capsys):
    status, _, err = study(monkeypatch, tmp_path, capsys, "policy=nosep", *FAST)
    assert status == 2 and err.strip() == (
        "error: no value for fleet -- give fleet=PATH (a fleet directory or its fleet.parquet)"
    )


def test_a_study_leaves_hydra_free_for_the_next_user(fleet, tmp_path, monkeypatch, capsys):
    """The study composes through Hydra's process-wide instance; after it (finished or refused),
    the Python API composes again in the same process (tests/test_api.py ran after this file on one
    CI worker and failed with 'GlobalHydra is already initialized')."""
    from hydra.core.global_hydra import GlobalHydra

    from dogi_ml.api import compose
    from dogi_ml.pipeline.common import multirun

    status, _, err = study(
        monkeypatch,
        tmp_path,
        capsys,
        f"fleet={fleet}",
        "policy=nosep",
        f"out={tmp_path / 'st'}",
        "volume=" + read_fleet(fleet)[0].volume,
        *FAST,
    )
    assert status == 0, err
    assert not GlobalHydra.instance().is_initialized()
    assert multirun() is False  # no job's HydraConfig left behind either (the API's train read it)
    status, _, _ = study(monkeypatch, tmp_path, capsys, "policy=nosep", *FAST)  # refused: no fleet
    assert status == 2 and not GlobalHydra.instance().is_initialized()
    assert compose("simulate", ["+workload=zipf"]).policy.name


# -- other launchers and MLflow ------------------------------------------------------------------------
def test_joblib_launcher_and_mlflow_parent_run(fleet, tmp_path, monkeypatch, capsys):
    """The default launcher (joblib, worker processes) gives the basic launcher's rows to the last
    digit; the study is one MLflow parent run with a child per job and the aggregates as its
    artifacts."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlruns.db'}")
    import importlib

    import dogi_ml.tracking

    importlib.reload(dogi_ml.tracking)  # it reads MLFLOW_TRACKING_URI once, at import
    vols = [v.volume for v in read_fleet(fleet)[:2]]
    common = [
        f"fleet={fleet}",
        "policy=sepbit,nosep",
        f"volume=[{','.join(vols)}]",
        "sim.segment_blocks=16",
        "sim.op_ratio=0.25",
        "plot=true",
    ]
    status, _, err = study(
        monkeypatch, tmp_path, capsys, *common, f"out={tmp_path / 'b'}", "hydra/launcher=basic", "mlflow=false"
    )
    assert status == 0, err
    status, stdout, err = study(
        monkeypatch, tmp_path, capsys, *common, f"out={tmp_path / 'j'}", "hydra.launcher.n_jobs=1"
    )
    assert status == 0, err
    key = ("volume", "scheme", "user_writes", "gc_writes", "waf", "settings", "config", "trace_checksum", "key")

    def rows(d):
        return [{k: r[k] for k in key} for r in pq.read_table(tmp_path / d / "results.parquet").to_pylist()]

    assert rows("j") == rows("b") and len(rows("j")) == 4

    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    exp = client.get_experiment_by_name("study")
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and len(children) == 4
    assert {(c.data.tags["volume"], c.data.tags["scheme"]) for c in children} == {
        (v, s) for v in vols for s in ("sepbit", "nosep")
    }
    assert all(c.data.params["effective.segment_blocks"] == "16" for c in children)
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"aggregate.json", "aggregate.md", "results.parquet", "waf_cdf.png"} <= arts
    agg = json.loads((tmp_path / "j" / "aggregate.json").read_text())
    assert parent.data.metrics["overall_waf.sepbit"] == pytest.approx(agg["overall"]["sepbit"]["waf"])
    from dogi_ml.pipeline.common import multirun

    # the joblib launcher left its last job's HydraConfig in this process: the Python API's train
    # then read it as its own ('NoneType' object has no attribute 'name' in tests/test_api.py)
    assert multirun() is False


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_a_stopped_study_ends_its_mlflow_parent_killed(fleet, tmp_path, monkeypatch, capsys, stop):
    """A study stopped while its jobs run (Ctrl-C, or SIGTERM from a scheduler or kill) ends its
    MLflow parent run KILLED, not RUNNING forever, says so, and stops (SIGTERM: exit 143); the
    SIGTERM handler is the previous one again afterwards."""
    import os
    import signal

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlruns.db'}")
    import importlib

    import dogi_ml.tracking

    importlib.reload(dogi_ml.tracking)  # it reads MLFLOW_TRACKING_URI once, at import

    def interrupted(hydra, master, job_overrides):
        if stop == "ctrl-c":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises first
        return None

    monkeypatch.setattr("dogi_ml.pipeline.study._launch", interrupted)
    before = signal.getsignal(signal.SIGTERM)
    vol = read_fleet(fleet)[0].volume
    args = [f"fleet={fleet}", "policy=sepbit", f"volume=[{vol}]", f"out={tmp_path / 'o'}", *FAST[:3]]
    if stop == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            study(monkeypatch, tmp_path, capsys, *args)
        err = capsys.readouterr().err
    else:
        status, _, err = study(monkeypatch, tmp_path, capsys, *args)
        assert status == 143
    assert signal.getsignal(signal.SIGTERM) == before
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    exp = client.get_experiment_by_name("study")
    (parent,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("kind") == "sweep"]
    assert parent.info.status == "KILLED"
    assert f"its MLflow parent run {parent.info.run_id} ends KILLED" in err


def test_winners_without_oracles():
    """Wins among the schemes that do not read the future, beside the wins of all."""
    from dogi_ml.pipeline.study import aggregate

    waf = {"a": {"fk": 1.1, "sepbit": 1.5, "nosep": 1.6}, "b": {"fk": 1.2, "sepbit": 1.4, "nosep": 1.4}}
    rows = [
        {"volume": v, "scheme": s, "user_writes": 1000, "gc_writes": round((w - 1) * 1000), "waf": w}
        for v, per in waf.items()
        for s, w in per.items()
    ]
    agg = aggregate(rows, ["fk", "sepbit", "nosep"], "sepbit", oracles=["fk"])
    assert agg["winners"] == {"fk": 2, "sepbit": 0, "nosep": 0} and agg["ties"] == 0
    assert agg["winners_online"] == {"sepbit": 2, "nosep": 1} and agg["oracles"] == ["fk"]
    assert agg["overall"]["nosep"]["waf"] == (1000 + 600 + 1000 + 400) / 2000


def test_a_new_code_version_reruns_every_job(fleet, tmp_path, monkeypatch, capsys):
    args = [f"fleet={fleet}", "policy=nosep", f"volume={read_fleet(fleet)[0].volume}", *FAST]
    status, stdout, _ = study(monkeypatch, tmp_path, capsys, *args, code="v1")
    assert status == 0 and "1 to run, 0 already done" in stdout
    status, stdout, _ = study(monkeypatch, tmp_path, capsys, *args, code="v1")
    assert status == 0 and "0 to run, 1 already done" in stdout
    status, stdout, _ = study(monkeypatch, tmp_path, capsys, *args, code="v2")
    assert status == 0 and "1 to run, 0 already done" in stdout
    (rec,) = records(tmp_path / "studies" / fleet.name)
    assert rec["code_version"] == "v2"


def test_code_version_is_the_checkouts():
    """The git commit of the code, and a digest of the uncommitted changes when there are any."""
    from dogi_ml.pipeline.study import CODE_PATHS, code_version
    from dogi_ml.provenance import code_commit

    stamp = code_commit(CODE_PATHS)
    version = code_version()
    assert version.startswith(stamp) and version == code_version()
    if stamp.endswith("uncommitted changes"):
        assert len(version.rsplit(" ", 1)[1]) == 12


def test_job_identity_includes_code_and_trace():
    from dogi_ml.pipeline.study import job_key

    base = job_key({"name": "sepbit"}, {"op_ratio": 0.1, "output": None}, "crc32c:1", "abc", "portable")
    assert job_key({"name": "sepbit"}, {"op_ratio": 0.1, "output": "x.json"}, "crc32c:1", "abc", "portable") == base
    for other in (
        job_key({"name": "sepbit"}, {"op_ratio": 0.2, "output": None}, "crc32c:1", "abc", "portable"),
        job_key({"name": "sepbit"}, {"op_ratio": 0.1, "output": None}, "crc32c:2", "abc", "portable"),
        job_key({"name": "sepbit"}, {"op_ratio": 0.1, "output": None}, "crc32c:1", "abd", "portable"),
        job_key({"name": "sepbit"}, {"op_ratio": 0.1, "output": None}, "crc32c:1", "abc", "native"),
    ):
        assert other != base


def test_dogi_frozen_deploys_the_bundle_its_volume_exports(tmp_path, monkeypatch, capsys):
    """``study.frozen_bundle=same_trace``: each dogi_frozen job first runs DOGI (int8, model kept
    on) over its volume and deploys the bundle that run exports; the record names the bundle, and
    the frozen WAF equals ``simulate policy=dogi_frozen`` given the same bundle directory (a second
    path through the code: the simulate pipeline, no study)."""
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.traces.binfmt import read_binary
    from dogi_ml.traces.fleet import FleetSpec

    # one volume long enough for DOGI's first model (2,000 labelled samples) and small enough
    # to simulate in seconds: ~3.4K blocks written about ten times over
    spec = FleetSpec(
        wss_median=4096,
        wss_min=4096,
        wss_max=4096,
        traffic_median=9.0,
        traffic_min=9.0,
        traffic_max=9.0,
        theta_range=(0.8, 0.8),
    )
    fleet = generate_fleet(tmp_path / "fleet", 1, seed=5, spec=spec).parent
    out = tmp_path / "out"
    status, stdout, err = study(
        monkeypatch,
        tmp_path,
        capsys,
        f"fleet={fleet}",
        "policy=sepbit,dogi_frozen,hybrid_frozen",
        "study.frozen_bundle=same_trace",
        f"out={out}",
        *FAST,
    )
    assert status == 0, err
    rec = json.loads((out / "jobs" / "0" / "dogi_frozen.json").read_text())
    assert rec["status"] == "ok"
    assert rec["config"]["policy"]["params"]["bundle"] == "same_trace"
    bundle = rec["bundle"]
    assert bundle["source"] == "same_trace" and Path(bundle["path"]) == out / "bundles" / "0"
    assert bundle["run"] == "dogi" and bundle["run_mode"] == "ml" and bundle["run_retrains"] >= 1
    assert bundle["run_params"] == {"deployed": "int8", "fallback_accuracy": 0.0, "fallback_compare": "none"}
    trace = read_binary(read_fleet(fleet)[0].dtr)
    trace.name = "0"
    sim_cfg = dict(rec["config"]["sim"])
    direct = simulate(
        trace,
        {"name": "dogi_frozen", "n_groups": None, "victim": "dogi_frozen", "params": {"bundle": bundle["path"]}},
        sim_cfg,
    )
    assert rec["waf"] == direct["waf"] and rec["gc_writes"] == direct["gc_writes"]
    # the hybrid's frozen form the same way, from a hybrid run on the volume
    rec = json.loads((out / "jobs" / "0" / "hybrid_frozen.json").read_text())
    assert rec["status"] == "ok" and rec["bundle"]["run"] == "hybrid"
    assert Path(rec["bundle"]["path"]) == out / "bundles" / "hybrid" / "0"
    hybrid_cfg = {"name": "hybrid_frozen", "n_groups": None, "victim": "hybrid_frozen"}
    direct = simulate(trace, {**hybrid_cfg, "params": {"bundle": rec["bundle"]["path"]}}, sim_cfg)
    assert rec["waf"] == direct["waf"] and rec["gc_writes"] == direct["gc_writes"]
    # the marker is the study's: simulate refuses it, naming where it comes from
    with pytest.raises(ValueError, match="policy.params.bundle=same_trace is made by the study command"):
        simulate(
            trace,
            {"name": "dogi_frozen", "n_groups": None, "victim": "dogi_frozen", "params": {"bundle": "same_trace"}},
            sim_cfg,
        )
    with pytest.raises(ValueError, match="policy hybrid_frozen: policy.params.bundle=same_trace is made by the study"):
        simulate(trace, {**hybrid_cfg, "params": {"bundle": "same_trace"}}, sim_cfg)
