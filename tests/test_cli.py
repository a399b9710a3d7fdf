"""The command line as other tools script it: ``python -m dogi_ml <command> ...``.

Each test runs in a fresh temporary working directory (commands must work from anywhere)."""

import json
import re

import pytest
from helpers import REPO, run_cli

from dogi_ml.errors import DogiMLError

SMALL = ["workload.capacity_blocks=8192", "workload.write_volume=4", "sim.segment_blocks=64", "progress=false"]


def test_simulate_writes_the_documented_json(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli(
        ["simulate", "+workload=zipf", "policy=sepbit", "sim.victim=cost_benefit", f"sim.output={out}", *SMALL],
        tmp_path,
    )
    assert f"result: {out}" in proc.stdout
    r = json.loads(out.read_text())
    for key in ("waf", "user_writes", "gc_writes", "appends_per_second", "elapsed_s", "groups"):
        assert key in r, key
    assert r["user_writes"] == 4 * 8192
    assert r["waf"] == pytest.approx((r["user_writes"] + r["gc_writes"]) / r["user_writes"])
    assert len(r["groups"]) == 6
    assert sum(g["user_writes"] for g in r["groups"]) == r["user_writes"]
    assert sum(g["gc_writes"] for g in r["groups"]) == r["gc_writes"]
    assert r["physical_segments"] == int(8192 * 1.10) // 64
    assert "WAF" in proc.stdout  # the human summary
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_simulate_sim_overrides(tmp_path):
    out = tmp_path / "r.json"
    run_cli(
        [
            "simulate",
            "+workload=uniform",
            "policy=nosep",
            f"sim.output={out}",
            *SMALL,
            "sim.capacity_blocks=10000",
            "sim.op_ratio=0.25",
            "sim.segment_blocks=128",
        ],
        tmp_path,
    )
    r = json.loads(out.read_text())
    assert r["capacity_blocks"] == 10000
    assert r["physical_segments"] == int(10000 * 1.25) // 128
    assert r["segment_blocks"] == 128


def test_simulate_without_workload_lists_them(tmp_path):
    proc = run_cli(["simulate"], tmp_path, check=False)
    assert proc.returncode == 2
    assert "+workload=NAME" in proc.stderr
    for name in ("zipf", "ycsb_a", "varmail", "file"):
        assert name in proc.stderr


def test_simulate_impossible_config_is_one_clear_line(tmp_path):
    proc = run_cli(["simulate", "+workload=zipf", "policy=sepbit", "sim.op_ratio=0.001", *SMALL], tmp_path, check=False)
    assert proc.returncode == 2
    assert "impossible configuration" in proc.stderr and "Traceback" not in proc.stderr


def test_simulate_unknown_victim(tmp_path):
    proc = run_cli(["simulate", "+workload=zipf", "sim.victim=best", *SMALL], tmp_path, check=False)
    assert proc.returncode == 2 and "unknown victim selection 'best'" in proc.stderr


def test_multirun_prints_one_comparison_table(tmp_path):
    proc = run_cli(["simulate", "-m", "+workload=zipf", "policy=nosep,sepgc,sepbit", *SMALL], tmp_path)
    tables = list(tmp_path.glob("multirun/simulate/*/*/comparison.json"))
    assert len(tables) == 1
    rows = json.loads(tables[0].read_text())
    assert {r["policy"] for r in rows} == {"nosep", "sepgc", "sepbit"}
    assert "comparison" in proc.stdout.lower()
    assert tables[0].with_name("comparison.png").exists()
    by = {r["policy"]: r["waf"] for r in rows}
    assert by["sepbit"] < by["nosep"]


def test_ingest_stats_and_print(tmp_path):
    src = tmp_path / "tiny.csv"
    # MSR Cambridge: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
    src.write_text(
        "128166372003061629,hm,0,Write,8192,8192,100\n"
        "128166372003061729,hm,0,Read,0,4096,100\n"
        "128166372003061829,hm,0,Write,10000,100,100\n"
    )
    out = tmp_path / "bin"
    proc = run_cli(["ingest", f"path={src}", "format=msr", f"out={out}"], tmp_path)
    stats = json.loads((out / "tiny.stats.json").read_text())
    assert stats["requests"] == 3 and stats["write_requests"] == 2
    assert stats["write_blocks"] == 3  # 8 KiB aligned = 2 blocks; 100 B at 10000 = 1 block
    assert stats["wss_blocks"] == 2  # the unaligned write falls in block 2 again
    binary = next(out.glob("*.dtr"))
    assert str(binary) in proc.stdout
    proc = run_cli(["stats", f"path={binary}"], tmp_path)
    assert "wss_blocks" in proc.stdout
    proc = run_cli(["print", f"path={binary}", "head=2"], tmp_path)
    assert "write" in proc.stdout and "1 more requests" in proc.stdout


def test_ingest_malformed_line_names_file_and_line(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("128166372003061629,hm,0,Write,8192,8192,100\nnot,a,valid,line\n")
    proc = run_cli(["ingest", f"path={src}", "format=msr", f"out={tmp_path}"], tmp_path, check=False)
    assert proc.returncode == 3  # a bad input file (exit_codes.BAD_INPUT), as a damaged .dtr
    assert "bad.csv" in proc.stderr and ":2" in proc.stderr
    proc = run_cli(["ingest", f"path={src}", "format=msr", f"out={tmp_path}", "skip_malformed=true"], tmp_path)
    assert "skipped 1" in proc.stdout


def test_ingest_missing_file_and_unknown_format(tmp_path):
    proc = run_cli(["ingest", "path=nope.csv", "format=msr", f"out={tmp_path}"], tmp_path, check=False)
    assert proc.returncode == 2 and "nope.csv" in proc.stderr
    src = tmp_path / "x.csv"
    src.write_text("1,2,3\n")
    proc = run_cli(["ingest", f"path={src}", "format=foo", f"out={tmp_path}"], tmp_path, check=False)
    assert proc.returncode == 2 and "msr" in proc.stderr  # lists the known formats


def test_oracle_search_then_simulate_nodap(tmp_path):
    small = ["workload.capacity_blocks=8192", "workload.write_volume=6", "sim.segment_blocks=64"]
    proc = run_cli(["oracle", "+workload=zipf", *small, "oracle.max_groups=4"], tmp_path)
    res = json.loads(next(tmp_path.glob("outputs/oracle/*/*/nodap.json")).read_text())
    assert res["n_groups"] == len(res["bounds"]) + 1 and res["waf"] >= 1
    assert "policy=nodap" in proc.stdout
    out = tmp_path / "r.json"
    sizes = [] if res["sizes"] is None else [f"policy.params.sizes={res['sizes']}"]
    assert ("policy.params.sizes=" in proc.stdout) == bool(sizes)
    run_cli(
        [
            "simulate",
            "+workload=zipf",
            *small,
            "policy=nodap",
            f"policy.params.bounds={res['bounds']}",
            *sizes,
            f"policy.n_groups={res['n_groups']}",
            f"sim.output={out}",
            "progress=false",
        ],
        tmp_path,
    )
    assert json.loads(out.read_text())["waf"] == pytest.approx(res["waf"])


# -- the error guard: user errors are one line with the fix, bugs keep their traceback ----------
def test_bad_config_is_one_line_with_the_fix(tmp_path):
    proc = run_cli(
        ["simulate", "+workload=zipf", "policy=sepbit", "model.deployed=int8", *SMALL], tmp_path, check=False
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "error: model.deployed=int8 needs a learned policy with a deployed form, not policy=sepbit -- use policy=dogi"
    ], proc.stderr


def test_unknown_command_lists_the_known_ones(tmp_path):
    from dogi_ml.cli import COMMANDS

    proc = run_cli(["simlate", "+workload=zipf"], tmp_path, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: unknown command 'simlate' -- use one of: ")
    assert all(name in line for name in COMMANDS) and {"simulate", "train", "export", "cache"} <= set(COMMANDS)


def test_stage_usage_errors(tmp_path):
    proc = run_cli(["stage", "bogus"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: unknown stage 'bogus' -- use one of: generate, annotate, features, train, evaluate"
    )
    proc = run_cli(["stage", "annotate", "params=missing.yaml", f"out={tmp_path}"], tmp_path, check=False)
    assert proc.returncode == 2 and "missing.yaml" in proc.stderr and "Traceback" not in proc.stderr


def test_stage_params_are_checked(tmp_path):
    """params.yaml that is not YAML was a ParserError traceback; a misspelt top-level key ran
    every stage on the defaults."""
    from dogi_ml.pipeline.stages import _params

    (tmp_path / "bad.yaml").write_text("workload: {name: [\n")
    with pytest.raises(DogiMLError, match=r"bad.yaml: not valid YAML \(line 2\)"):
        _params(tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text("workload: {name: zipf}\nmodle: {name: mlp}\n")
    with pytest.raises(DogiMLError, match="no stage reads the top-level key 'modle' -- did you mean model?"):
        _params(tmp_path / "typo.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(DogiMLError, match="the parameters are not a mapping"):
        _params(tmp_path / "list.yaml")
    assert set(_params(REPO / "params.yaml")) <= {"workload", "data", "model", "seed", "latency_budget_s"}
    # int()'s message at the train stage, after the three stages before it
    (tmp_path / "seed.yaml").write_text("workload: {name: zipf}\nseed: abc\n")
    with pytest.raises(
        DogiMLError, match=r"seed.yaml: seed='abc' is not a whole number -- give a whole number, e\.g\. seed=0$"
    ):
        _params(tmp_path / "seed.yaml")


def test_cache_command_dispatches(tmp_path):
    proc = run_cli(["cache", "--help"], tmp_path)
    assert "info" in proc.stdout and "clear" in proc.stdout
    proc = run_cli(["cache", "bogus"], tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def _main_in_process(monkeypatch, tmp_path, argv):
    """``dogi_ml.cli.main(argv)`` in this process from ``tmp_path``; returns the exit status."""
    import sys

    from dogi_ml import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOGI_ML_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", ["dogi_ml", *argv])
    try:
        cli.main(argv)
    except SystemExit as exc:
        return exc.code
    return 0


def test_internal_error_keeps_its_traceback(monkeypatch, tmp_path, capsys):
    import dogi_ml.pipeline.simulate as sim_pipeline

    def broken(cfg, out_dir):
        raise RuntimeError("a bug in the pipeline")

    monkeypatch.setattr(sim_pipeline, "run_simulate", broken)
    status = _main_in_process(monkeypatch, tmp_path, ["simulate", "+workload=zipf", *SMALL])
    err = capsys.readouterr().err
    assert status == 1
    assert "Traceback" in err and "RuntimeError: a bug in the pipeline" in err and "in broken" in err
    assert "error: a bug" not in err


def test_library_value_error_keeps_its_traceback(monkeypatch, tmp_path, capsys):
    """A ValueError from inside a library is a bug here, not bad input."""
    import numpy as np

    import dogi_ml.pipeline.simulate as sim_pipeline

    def broken(cfg, out_dir):
        return np.ones(3) + np.ones(4)  # numpy raises ValueError (shapes)

    monkeypatch.setattr(sim_pipeline, "run_simulate", broken)
    status = _main_in_process(monkeypatch, tmp_path, ["simulate", "+workload=zipf", *SMALL])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" in err and "could not be broadcast" in err


def test_user_error_line():
    from dogi_ml.cli import user_error_line
    from dogi_ml.errors import ConfigError, DogiMLError
    from dogi_ml.policies import make_policy
    from dogi_ml.sim import SimulationError
    from dogi_ml.traces.trace import TraceFormatError

    assert user_error_line(ConfigError("bad x", "set x=1")) == "error: bad x -- set x=1"
    assert user_error_line(DogiMLError("two\nlines")) == "error: two lines"
    for cls in (TraceFormatError, SimulationError):
        assert issubclass(cls, DogiMLError)
        assert user_error_line(cls("bad input")) == "error: bad input"
    assert issubclass(SimulationError, RuntimeError)  # callers that caught RuntimeError still do
    assert user_error_line(FileNotFoundError("trace file not found: x.csv")).startswith(
        "error: trace file not found: x.csv -- check the path"
    )
    # a plain ValueError raised by dogi_ml's own checks (not yet a DogiMLError) is still bad input
    with pytest.raises(ValueError) as info:
        make_policy("no_such_policy")
    assert user_error_line(info.value).startswith("error: unknown policy 'no_such_policy'; known:")
    with pytest.raises(ValueError) as info:
        int("x")
    assert user_error_line(info.value) is None
    assert user_error_line(RuntimeError("bug")) is None and user_error_line(KeyError("k")) is None
    # an allocation past the machine's memory was a traceback; outside a Hydra job no settings are named
    line = user_error_line(MemoryError("Unable to allocate 7.79 GiB for an array"))
    assert re.fullmatch(
        r"error: out of memory: Unable to allocate 7\.79 GiB for an array -- this machine has \d+ GiB: "
        r"lower the size setting that asks for more",
        line,
    ), line


def test_project_warnings_print_as_one_line(monkeypatch):
    import io
    import warnings
    from pathlib import Path

    import dogi_ml
    from dogi_ml.cli import show_project_warnings

    shown = []  # what Python's own printer would have been given
    monkeypatch.setattr(warnings, "showwarning", lambda *args: shown.append(args))
    show_project_warnings()
    installed = warnings.showwarning
    show_project_warnings()  # main() run twice in one process: not wrapped twice
    assert warnings.showwarning is installed
    ours = str(Path(dogi_ml.__file__).parent / "sim" / "engine.py")
    buf = io.StringIO()
    warnings.showwarning("policy x: slots\nare sparse", UserWarning, ours, 1, buf)
    warnings.showwarning("from a library", UserWarning, "/elsewhere/lib.py", 7, buf)
    assert buf.getvalue() == "warning: policy x: slots are sparse\n"
    assert shown == [("from a library", UserWarning, "/elsewhere/lib.py", 7, buf, None)]  # Python's format


def test_a_tracking_store_mlflow_refuses_is_one_line(tmp_path, monkeypatch):
    """MLFLOW_TRACKING_URI=file:... (a file store, which MLflow 3 refuses) ended every tracked
    command in MLflow's traceback."""
    from dogi_ml import tracking

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # mlflow.set_tracking_uri exports it: restored after
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.setattr(tracking, "_USER_URI", uri)
    with pytest.raises(DogiMLError) as info:
        tracking.experiment_id("refused")
    assert str(info.value).startswith(
        f"MLFLOW_TRACKING_URI={uri}: MLflow cannot use it (The filesystem tracking backend"
    ), str(info.value)
    assert str(info.value).endswith(
        "-- unset MLFLOW_TRACKING_URI to track in ./mlruns.db, or give mlflow=false where the command has it"
    )


def test_simulate_refuses_a_tracking_store_before_it_runs(tmp_path, monkeypatch):
    """A single simulate run logs at its end: with a store MLflow will not open it simulated
    first and then failed, leaving a result nothing recorded."""
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    out = tmp_path / "r.json"
    args = ["-q", "simulate", "+workload=zipf", "workload.capacity_blocks=4096", "workload.write_volume=2"]
    proc = run_cli([*args, "sim.segment_blocks=32", "plot=false", f"output={out}"], tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: MLFLOW_TRACKING_URI={uri}: MLflow cannot use it")
    assert not out.exists()  # nothing simulated
