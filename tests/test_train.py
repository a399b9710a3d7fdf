"""``python -m dogi_ml train`` end to end: MLflow run, metrics, artifacts, failures, sweeps."""
import json

import pytest

from helpers import run_cli

SMALL = ["workload.capacity_blocks=16384", "workload.write_volume=6", "latency_budget_s=0.02",
         "model.params.epochs=2"]


def runs(cwd):
    import mlflow
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{cwd / 'mlruns.db'}")
    exp = client.get_experiment_by_name("train")
    return client, exp, client.search_runs([exp.experiment_id])


def test_train_logs_a_complete_mlflow_run(tmp_path):
    proc = run_cli(["train", "+workload=ycsb_a", *SMALL], tmp_path)
    assert "accuracy (test)" in proc.stdout and "per-class accuracy" in proc.stdout
    client, exp, found = runs(tmp_path)
    assert exp.artifact_location.endswith("mlartifacts")
    assert len(found) == 1
    run = found[0]
    assert run.info.status == "FINISHED"
    for key in ("accuracy", "macro_f1", "latency_ns_per_block"):
        assert key in run.data.metrics, key
    assert 0 <= run.data.metrics["accuracy"] <= 1
    assert run.data.tags["workload"] == "ycsb_a" and run.data.tags["model"] == "mlp"
    assert run.data.params["model.name"] == "mlp" and run.data.params["workload.capacity_blocks"] == "16384"
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"confusion_matrix.png", "feature_report.json", "feature_report.png", "metrics.json", "config.yaml",
            "model"} <= top
    assert {a.path for a in client.list_artifacts(run.info.run_id, "model")} == {"model/model.pkl", "model/model.json"}
    metrics = json.loads(next(tmp_path.glob("outputs/train/*/*/metrics.json")).read_text())
    assert len(metrics["confusion_matrix"]) == 10 and metrics["mlflow_run_id"] == run.info.run_id
    # DOGI's group configuration from this model's PLog (the 512-merge Markov search)
    plog = metrics["plog_configuration"]
    assert sum(len(g) for g in plog["groups"]) == 10 and plog["groups"][0][0] == "c1"
    assert run.data.metrics["modelled_waf"] == pytest.approx(plog["waf"]) and plog["waf"] >= 1


def test_crashed_run_is_marked_failed(tmp_path):
    proc = run_cli(["train", "+workload=zipf", *SMALL, "data.features=[lba,nope]"], tmp_path, check=False)
    assert proc.returncode == 2 and "unknown feature(s) ['nope']" in proc.stderr
    _, _, found = runs(tmp_path)
    assert [r.info.status for r in found] == ["FAILED"]


def test_train_without_workload_lists_them(tmp_path):
    proc = run_cli(["train"], tmp_path, check=False)
    assert proc.returncode == 2 and "+workload=NAME" in proc.stderr and "ycsb_a" in proc.stderr


@pytest.mark.slow
def test_sweep_gets_a_parent_run_with_children(tmp_path):
    run_cli(["train", "-m", "+workload=ycsb_a,zipf", "model=mlp,logistic",
             *[f"++{o}" if o.startswith("workload") else o for o in SMALL if not o.startswith("model.")]], tmp_path)
    _, _, found = runs(tmp_path)
    parents = [r for r in found if r.data.tags.get("kind") == "sweep"]
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    assert {(c.data.tags["workload"], c.data.tags["model"]) for c in children} == \
        {("ycsb_a", "mlp"), ("ycsb_a", "logistic"), ("zipf", "mlp"), ("zipf", "logistic")}
    assert parents[0].info.status == "FINISHED" and parents[0].data.metrics["jobs"] == 4


@pytest.mark.slow
def test_submitit_local_launcher(tmp_path):
    """The SLURM launcher config, exercised with submitit's local executor."""
    run_cli(["train", "-m", "+workload=zipf", "model=logistic", "hydra/launcher=slurm_local",
             *[f"++{o}" if o.startswith("workload") else o for o in SMALL if not o.startswith("model.")]], tmp_path)
    _, _, found = runs(tmp_path)
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 1 and children[0].info.status == "FINISHED"
