"""The Python API (dogi_ml.api): its docstring examples, parity with the command line, MLflow
runs it records, and its errors."""

import doctest
import json

import pytest
from helpers import run_cli, shared_data_dir, skip_or_fail_in_ci

SMALL_WL = {"name": "zipf", "capacity_blocks": 8192, "write_volume": 4}
SMALL_CLI = [
    "+workload=zipf",
    "workload.capacity_blocks=8192",
    "workload.write_volume=4",
    "sim.segment_blocks=64",
    "progress=false",
    "plot=false",
    "mlflow=false",
]


def test_docstring_examples(tmp_path, monkeypatch):
    """Every example in dogi_ml.api runs (tiny workloads; a private working directory)."""
    traces = shared_data_dir() / "traces"
    if not (traces / "msr_cut_105.txt").exists():
        skip_or_fail_in_ci(f"real trace samples not found at {traces} (load_trace's example reads one)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOGI_ML_CACHE", raising=False)
    import dogi_ml.api as api

    res = doctest.testmod(
        api, extraglobs={"SHARED": traces, "TMP": tmp_path}, optionflags=doctest.ELLIPSIS, report=True
    )
    assert res.attempted >= 25
    assert res.failed == 0, f"{res.failed} docstring example(s) of dogi_ml.api failed (see the output above)"


def test_reexported_from_the_package():
    import dogi_ml
    import dogi_ml.api as api

    for name in ("load_trace", "generate", "annotate", "simulate", "train", "compare"):
        assert getattr(dogi_ml, name) is getattr(api, name)
        assert name in dir(dogi_ml)
    # dogi_ml.export is the deployment subpackage, a plain module; the API's function is export_model
    import types

    from dogi_ml.export import quantize

    assert dogi_ml.export.quantize is quantize and type(dogi_ml.export) is types.ModuleType
    assert dogi_ml.export_model is api.export_model and "export_model" in dir(dogi_ml)
    from dogi_ml.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot export from 3"):
        dogi_ml.export_model(3)
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        dogi_ml.simulat  # noqa: B018


@pytest.mark.parametrize(
    "policy, extra_cli, sim",
    [
        ("sepbit", ["sim.victim=cost_benefit"], {"victim": "cost_benefit"}),
        ("mida", ["sim.op_ratio=0.2", "workload.params.theta=1.2"], {"op_ratio": 0.2}),
    ],
)
def test_api_and_cli_agree(tmp_path, monkeypatch, policy, extra_cli, sim):
    """Same settings, same numbers: the API composes the command's Hydra config."""
    out = tmp_path / "r.json"
    run_cli(["simulate", f"policy={policy}", f"sim.output={out}", *SMALL_CLI, *extra_cli], tmp_path)
    cli = json.loads(out.read_text())
    monkeypatch.chdir(tmp_path)  # the same trace cache as the CLI run
    import dogi_ml

    wl = dict(SMALL_WL, theta=1.2) if "workload.params.theta=1.2" in extra_cli else SMALL_WL
    r = dogi_ml.simulate(wl, policy=policy, segment_blocks=64, **sim)
    assert r.raw["user_writes"] == cli["user_writes"] and r.raw["gc_writes"] == cli["gc_writes"]
    assert r.waf == cli["waf"]
    assert r.groups.to_dict("records") == cli["groups"]
    assert r.series.waf.tolist() == cli["waf_series"]["waf"]
    assert r.config["sim"] == cli["config"] | {k: v for k, v in r.config["sim"].items() if k not in cli["config"]}
    assert r.config["workload"] == cli["workload_config"]


def test_a_trace_in_memory_gives_the_workloads_result(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import dogi_ml

    trace = dogi_ml.generate(SMALL_WL)
    a = dogi_ml.simulate(trace, policy="sepgc", segment_blocks=64)
    b = dogi_ml.simulate(SMALL_WL, policy="sepgc", segment_blocks=64)
    assert (a.waf, a.raw["gc_writes"]) == (b.waf, b.raw["gc_writes"])
    assert "workload" not in a.config and b.config["workload"]["capacity_blocks"] == 8192


def _private_tracking(monkeypatch, tmp_path) -> str:
    """This test's own MLflow database (mlflow.set_tracking_uri exports the variable, so a
    previous test's database would otherwise leak into this one and its subprocesses)."""
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from dogi_ml import tracking

    monkeypatch.setattr(tracking, "_USER_URI", uri)
    return uri


def test_logged_runs_are_named_tagged_and_nested(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = _private_tracking(monkeypatch, tmp_path)
    import mlflow

    import dogi_ml

    r = dogi_ml.simulate(SMALL_WL, policy="sepbit", segment_blocks=64, victim="fifo", log=True)
    df = dogi_ml.compare(["nosep", "sepgc"], SMALL_WL, segment_blocks=64, log=True)
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(r.run_id)
    assert (
        run.info.run_name
        == f"{r.scheme} on zipf [capacity_blocks=8192, write_volume=4, segment_blocks=64, victim=fifo]"
    )
    assert run.data.tags["dogi_ml.source"] == "api" and run.data.tags["scheme"] == r.scheme == "sepbit"
    assert "sim.victim=fifo" in run.data.tags["overrides"]
    assert run.data.metrics["waf"] == pytest.approx(r.waf)
    assert {a.path for a in client.list_artifacts(r.run_id)} == {"result.json", "result.png"}
    children = [client.get_run(i) for i in df.run_id]
    parents = {c.data.tags["mlflow.parentRunId"] for c in children}
    assert len(parents) == 1
    parent = client.get_run(parents.pop())
    assert parent.info.status == "FINISHED" and parent.data.metrics["jobs"] == 2
    assert parent.info.run_name == "compare nosep, sepgc on zipf"


def test_cli_runs_get_their_overrides_in_the_name(tmp_path, monkeypatch):
    uri = _private_tracking(monkeypatch, tmp_path)
    run_cli(["simulate", "policy=nosep", *[o for o in SMALL_CLI if o != "mlflow=false"], "sim.victim=fifo"], tmp_path)
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("simulate").experiment_id])
    assert [r.info.run_name for r in runs] == [
        "nosep on zipf [capacity_blocks=8192, write_volume=4, segment_blocks=64, victim=fifo]"
    ]
    assert runs[0].data.tags["dogi_ml.source"] == "cli"


def test_bad_settings_name_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import dogi_ml
    from dogi_ml.errors import ConfigError

    with pytest.raises(ConfigError, match="sim has no setting 'victm'.*use one of: .*victim"):
        dogi_ml.simulate(SMALL_WL, victm="fifo")
    with pytest.raises(ConfigError, match="workload 'zipf' has no setting 'thta'.*theta"):
        dogi_ml.generate("zipf", thta=1.2)
    with pytest.raises(ConfigError, match="unknown policy 'sepbits'.*sepbit"):
        dogi_ml.simulate(SMALL_WL, policy="sepbits")
    with pytest.raises(ConfigError, match="unknown workload 'zipff'"):
        dogi_ml.generate("zipff")
    with pytest.raises(ConfigError, match="policy 'sepbit' has no parameter 'varient'.*variant"):
        dogi_ml.simulate(SMALL_WL, policy_params={"varient": "paper"})
    # Python's truthiness read log="no" as on (an MLflow run), without a word
    with pytest.raises(ConfigError, match="^log='no' is not true or false"):
        dogi_ml.simulate(SMALL_WL, log="no")
    with pytest.raises(ConfigError, match="^cache='no' is not true or false"):
        dogi_ml.generate("zipf", cache="no")
