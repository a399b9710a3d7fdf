"""``python -m dogi_ml train`` end to end: MLflow run, metrics, artifacts, failures, sweeps."""

import json

import numpy as np
import pytest
from helpers import run_cli

from dogi_ml.pipeline.train import Dataset, hot_included_metrics, per_class_table

SMALL = ["workload.capacity_blocks=16384", "workload.write_volume=6", "latency_budget_s=0.02", "model.params.epochs=2"]


def runs(cwd):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{cwd / 'mlruns.db'}")
    exp = client.get_experiment_by_name("train")
    return client, exp, client.search_runs([exp.experiment_id])


def test_hot_included_accuracy_counts_a_c1_prediction_of_a_hot_row_as_wrong():
    """Capacity 100000, mu 100: hot <= 100 < c1 <= 1000 < c2 <= 2000 < c3 <= 4000. Two truly hot
    rows (predicted c1 and c2), then c1, c2, c3, c1 predicted c1, c2, c2, c3."""
    inv = np.array([50, 80, 500, 1500, 3000, 500])
    pred = np.array([0, 1, 0, 1, 1, 2])  # model classes: 0 = c1
    names = [f"c{i}" for i in range(1, 11)]
    ds = Dataset(
        X=np.zeros((6, 1)),
        y=np.array([0, 0, 0, 1, 2, 0]),
        rows=np.arange(6),
        inv=inv,
        feature_names=["lba"],
        class_names=names,
        splits={"test": slice(0, 6)},
        info={"labels": "dogi", "capacity_blocks": 100_000, "mu": 100},
    )
    m = hot_included_metrics(ds, pred)
    assert m["accuracy_all_classes"] == pytest.approx(2 / 6)  # the hot row predicted c1 is wrong here ...
    assert float(np.mean(pred == ds.y)) == pytest.approx(3 / 6)  # ... and right in the model's classes
    assert m["accuracy_nonhot"] == pytest.approx(2 / 4) and m["hot_row_share"] == pytest.approx(2 / 6)
    table = per_class_table(m, names)
    assert list(table["recall"])[:4] == ["hot", "c1", "c2", "c3"]
    assert [table["recall"][k] for k in ("hot", "c1", "c2", "c3", "c4")] == [0.0, 0.5, 1.0, 0.0, None]
    assert [table["precision"][k] for k in ("hot", "c1", "c2", "c3")] == [None, 0.5, pytest.approx(1 / 3), 0.0]
    assert [table["support"][k] for k in ("hot", "c1", "c2", "c3", "c10")] == [2, 2, 1, 1, 0]
    # other label kinds have no hot class: the table is over the model's classes
    ds.info["labels"] = "binary"
    assert hot_included_metrics(ds, pred) == {}
    assert list(
        per_class_table(
            {"per_class_recall": {0: 1.0, 1: 0.5}, "per_class_precision": {0: 0.5, 1: 1.0}, "support": {0: 1, 1: 2}},
            ["short", "long"],
        )["recall"]
    ) == ["short", "long"]


def test_train_logs_a_complete_mlflow_run(tmp_path):
    proc = run_cli(["train", "+workload=ycsb_a", *SMALL], tmp_path)
    assert "accuracy, all classes incl. hot" in proc.stdout and "accuracy, truly non-hot rows" in proc.stdout
    assert "per-class recall and precision" in proc.stdout and "per-class accuracy" not in proc.stdout
    client, exp, found = runs(tmp_path)
    assert exp.artifact_location.endswith("mlartifacts")
    assert len(found) == 1
    run = found[0]
    assert run.info.status == "FINISHED"
    for key in (
        "accuracy",
        "accuracy_all_classes",
        "accuracy_nonhot",
        "hot_row_share",
        "macro_f1",
        "latency_ns_per_block",
        "recall_hot",
    ):
        assert key in run.data.metrics, key
    assert 0 <= run.data.metrics["accuracy"] <= 1
    assert not any(k.startswith("acc_") for k in run.data.metrics)
    # hot included, a c1 prediction of a truly hot row is wrong: never above the model-class accuracy
    assert run.data.metrics["accuracy_all_classes"] <= run.data.metrics["accuracy"]
    assert run.data.tags["workload"] == "ycsb_a" and run.data.tags["model"] == "mlp"
    assert run.data.params["model.name"] == "mlp" and run.data.params["workload.capacity_blocks"] == "16384"
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {
        "confusion_matrix.png",
        "feature_report.json",
        "feature_report.png",
        "metrics.json",
        "config.yaml",
    } <= top
    # the model is an MLflow logged model of the run (runs:/<id>/model), no longer a run artifact
    (logged,) = client.search_logged_models(experiment_ids=[exp.experiment_id])
    assert logged.source_run_id == run.info.run_id and logged.name == "model"
    metrics = json.loads(next(tmp_path.glob("outputs/train/*/*/metrics.json")).read_text())
    assert len(metrics["confusion_matrix"]) == 10 and metrics["mlflow_run_id"] == run.info.run_id
    assert len(metrics["confusion_matrix_all_classes"]) == 11
    assert {
        "accuracy",
        "accuracy_all_classes",
        "accuracy_nonhot",
        "hot_row_share",
        "per_class_recall",
        "per_class_precision",
        "per_class",
    } <= set(metrics) and "per_class_accuracy" not in metrics
    assert list(metrics["per_class"]["recall"]) == ["hot"] + [f"c{i}" for i in range(1, 11)]
    assert metrics["per_class"]["recall"]["hot"] in (0.0, None)  # the model never predicts hot
    assert sum(metrics["per_class"]["support"].values()) == metrics["dataset"]["n_test"]
    for key in ("recall", "precision"):  # MLflow: one metric per class that has a value
        for name, v in metrics["per_class"][key].items():
            assert (f"{key}_{name}" in run.data.metrics) == (v is not None)
    cm = np.array(metrics["confusion_matrix_all_classes"])
    assert metrics["accuracy_all_classes"] == pytest.approx(np.trace(cm) / cm.sum())
    assert metrics["accuracy_nonhot"] == pytest.approx(np.trace(cm[1:, 1:]) / cm[1:].sum())
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
    run_cli(
        [
            "train",
            "-m",
            "+workload=ycsb_a,zipf",
            "model=mlp,logistic",
            *[f"++{o}" if o.startswith("workload") else o for o in SMALL if not o.startswith("model.")],
        ],
        tmp_path,
    )
    _, _, found = runs(tmp_path)
    parents = [r for r in found if r.data.tags.get("kind") == "sweep"]
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    assert {(c.data.tags["workload"], c.data.tags["model"]) for c in children} == {
        ("ycsb_a", "mlp"),
        ("ycsb_a", "logistic"),
        ("zipf", "mlp"),
        ("zipf", "logistic"),
    }
    assert parents[0].info.status == "FINISHED" and parents[0].data.metrics["jobs"] == 4


@pytest.mark.slow
def test_submitit_local_launcher(tmp_path):
    """The SLURM launcher config, exercised with submitit's local executor."""
    run_cli(
        [
            "train",
            "-m",
            "+workload=zipf",
            "model=logistic",
            "hydra/launcher=slurm_local",
            *[f"++{o}" if o.startswith("workload") else o for o in SMALL if not o.startswith("model.")],
        ],
        tmp_path,
    )
    _, _, found = runs(tmp_path)
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 1 and children[0].info.status == "FINISHED"


def test_a_stopped_sweep_ends_its_parent_run_killed(tmp_path):
    """SIGTERM (a scheduler, kill) to a running ``-m`` sweep: the process exits 143 through the
    interpreter's exit, and the sweep's MLflow parent run ends KILLED instead of RUNNING forever."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import mlflow
    from helpers import REPO

    sweep = tmp_path / "sweep"
    env = dict(os.environ, PYTHONPATH=str(REPO), DOGI_ML_CACHE=str(tmp_path / "cache"))
    # jobs long enough (3 x ~5 s) that the sweep cannot end on its own before the watchdog would
    args = ["simulate", "-m", "+workload=zipf", "workload.capacity_blocks=65536", "workload.write_volume=256",
            "policy=sepbit,nosep,sepgc", "plot=false", "hydra/launcher=basic", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "dogi_ml", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    parent_file = sweep / "mlflow_parent_run.json"
    deadline = time.monotonic() + 300
    while not parent_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert parent_file.exists(), proc.communicate()[1].decode()[-2000:]
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-2000:]
    run_id = json.loads(parent_file.read_text())["run_id"]
    run = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns.db'}").get_run(run_id)
    assert run.info.status == "KILLED"
    assert f"its MLflow parent run {run_id} ends KILLED" in err.decode()


def test_a_sigterm_lost_in_a_finalizer_still_ends_the_process(tmp_path):
    """A SIGTERM whose SystemExit lands inside a finalizer is dropped by Python ("Exception
    ignored in ..."); exit_on_sigterm's watchdog then runs the cleanup and ends the process with
    143 after SIGTERM_GRACE_S (here 0.5 s) instead of letting it run on."""
    import subprocess
    import sys

    from helpers import REPO

    marker = tmp_path / "cleaned"
    script = f"""
import os, signal, time
import dogi_ml.tracking as tracking
tracking.SIGTERM_GRACE_S = 0.5
signal.signal(signal.SIGTERM, tracking.exit_on_sigterm(lambda: open({str(marker)!r}, "w").close()))
class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside the finalizer
        for _ in range(1000):
            pass
Finalized()
for _ in range(100):
    time.sleep(0.1)
print("ran on")
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO)}
    )
    assert "Exception ignored" in proc.stderr and "SystemExit: 143" in proc.stderr
    assert proc.returncode == 143 and marker.exists() and "ran on" not in proc.stdout
