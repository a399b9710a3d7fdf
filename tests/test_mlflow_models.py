"""Trained models as MLflow models (issue 41): ``mlflow.pyfunc.load_model("runs:/<id>/model")``
predicts exactly what the project's model predicts, for every model kind in ``conf/model/``; the
library's own flavour (PyTorch, LightGBM, scikit-learn) loads as the bare network or estimator;
``export`` logs its header, ONNX files and manifest under the train run it exported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import REPO, run_cli

from dogi_ml.features.extract import NO_LOG
from dogi_ml.models import LifetimeModel, make_model
from dogi_ml.pipeline.train import build_dataset
from dogi_ml.traces.workload import load_workload

# the tests' small scale of DOGI's FIO workload (zipf), the train stage's default data settings
WORKLOAD = {
    "name": "zipf",
    "source": "generator",
    "generator": "zipf",
    "capacity_blocks": 16384,
    "write_volume": 6,
    "seed": 0,
    "params": {"theta": 1.0, "wss_fraction": 1.0, "request_blocks": 1},
}
# each model kind of conf/model/ at a size that trains in about a second
FAST = {
    "mlp": {"epochs": 2},
    "deepfm": {"epochs": 1},
    "gru": {"epochs": 1},
    "tcn": {"epochs": 1, "channels": [8, 8]},
    "lightgbm": {"n_estimators": 20},
    "random_forest": {"n_estimators": 5},
    "logistic": {},
}
NATIVE_FLAVOUR = {"mlp": "pytorch", "deepfm": "pytorch", "gru": "pytorch", "tcn": "pytorch"}
NATIVE_FLAVOUR.update(lightgbm="lightgbm", random_forest="sklearn", logistic="sklearn")
MODEL_KINDS = sorted(p.stem for p in (REPO / "conf" / "model").glob("*.yaml"))


def test_every_model_kind_of_the_configs_is_covered():
    assert MODEL_KINDS == sorted(FAST)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_workload(WORKLOAD, cache_dir=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def datasets(trace):
    """The workload's dataset per sequence history (None for the tabular models), built once."""
    data = yaml.safe_load((REPO / "conf" / "data" / "default.yaml").read_text())
    cache = {}

    def get(history):
        if history not in cache:
            cache[history] = build_dataset(trace, data, sequence_history=history)
        return cache[history]

    return get


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """A private tracking store (set_tracking_uri exports MLFLOW_TRACKING_URI: put back after)."""
    import os

    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlruns.db'}")
    yield mlflow
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    if before is not None:
        os.environ["MLFLOW_TRACKING_URI"] = before
    mlflow.set_tracking_uri(before)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_pyfunc_model_predicts_as_the_project_model(kind, datasets, tracking, tmp_path):
    """Logged as the train stage logs it, loaded back through runs:/<id>/model: the same class for
    every test row of the workload, and the library flavour is the very network or estimator."""
    from dogi_ml.tracking import log_lifetime_model

    mlflow = tracking
    cfg = yaml.safe_load((REPO / "conf" / "model" / f"{kind}.yaml").read_text())
    ds = datasets(cfg.get("history"))
    model = make_model(kind, len(ds.class_names), len(ds.feature_names), seed=0, **{**cfg["params"], **FAST[kind]})
    model.scaler.log_columns = [i for i, f in enumerate(ds.feature_names) if f not in NO_LOG]  # as train does
    tr, va, te = ds.splits["train"], ds.splits["val"], ds.splits["test"]
    model.fit(ds.X[tr], ds.y[tr], ds.X[va], ds.y[va])
    pickle_path = model.save(tmp_path / "model.pkl")
    exp = mlflow.set_experiment(f"models-{kind}")
    with mlflow.start_run(experiment_id=exp.experiment_id) as run:
        log_lifetime_model(model, pickle_path, ds.X[te][:5], ds.feature_names, ds.class_names)

    uri = f"runs:/{run.info.run_id}/model"
    loaded = mlflow.pyfunc.load_model(uri)
    X = ds.X[te]
    assert len(X) > 500
    want = model.predict(X)
    got = loaded.predict(X)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert len(np.unique(want)) > 1  # a model that says one class everywhere would prove little

    info = mlflow.models.get_model_info(uri)
    assert set(info.flavors) == {NATIVE_FLAVOUR[kind], "python_function"}
    assert info.flavors["python_function"]["loader_module"] == "dogi_ml.tracking"
    (spec,) = info.signature.inputs.inputs
    assert spec.shape == (-1, *X.shape[1:]) and spec.type == X.dtype
    assert info.metadata["feature_names"] == ds.feature_names and info.metadata["class_names"] == ds.class_names
    example = mlflow.models.Model.load(uri).load_input_example(mlflow.artifacts.download_artifacts(uri))
    assert np.array_equal(example, X[:5])

    # the library's flavour: the fitted network or estimator itself, on the scaled features
    scaled = model.scaler.transform(X[:200])
    if NATIVE_FLAVOUR[kind] == "pytorch":
        import torch

        net = mlflow.pytorch.load_model(uri)
        with torch.no_grad():
            assert torch.equal(net(torch.from_numpy(scaled)), model.net(torch.from_numpy(scaled)))
    else:
        est = getattr(mlflow, NATIVE_FLAVOUR[kind]).load_model(uri)
        assert type(est) is type(model.est)
        assert np.array_equal(est.predict_proba(scaled), model.est.predict_proba(scaled))


@pytest.mark.slow
def test_train_logs_the_model_and_export_logs_under_that_run(tmp_path, monkeypatch):
    """``train`` logs runs:/<id>/model (predicting as the saved model.pkl does); ``export
    export.run_id=<id>`` reads it from there and logs its header, ONNX files and manifest
    under that train run."""
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the commands' store: ./mlruns.db
    small = ["+workload=zipf", "workload.capacity_blocks=16384", "workload.write_volume=6", "latency_budget_s=0.01"]
    proc = run_cli(["train", *small, "model=mlp", "model.params.epochs=2"], tmp_path)
    run_id = re.search(r"MLflow model: runs:/(\w+)/model", proc.stdout).group(1)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns.db'}")
    (logged,) = client.search_logged_models(
        experiment_ids=[client.get_experiment_by_name("train").experiment_id], filter_string="name = 'model'"
    )
    assert logged.source_run_id == run_id
    # what the UI's run page lists under "Logged models"
    assert [m.model_id for m in client.get_run(run_id).outputs.model_outputs] == [logged.model_id]

    run_dir = next(tmp_path.glob("outputs/train/*/*"))
    saved = LifetimeModel.load(run_dir / "model.pkl")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["mlflow_run_id"] == run_id
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlruns.db'}")
    loaded = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    X = loaded.metadata.load_input_example(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/model"))
    assert X.shape == (5, saved.n_features)
    assert np.array_equal(loaded.predict(X), saved.predict(X))

    run_cli(
        [
            "export",
            f"export.run_id={run_id}",
            "export.out=exported",
            "export.bench=false",
            "export.parity_rows=2000",
        ],
        tmp_path,
    )
    exported = {p.name for p in (tmp_path / "exported").iterdir() if p.is_file()}
    under_train = {Path(a.path).name for a in client.list_artifacts(run_id, "export")}
    assert {"dogi_mlp.h", "mlp_float.onnx", "mlp_int8_qdq.onnx", "manifest.json"} <= under_train
    assert under_train == exported
    logged_manifest = Path(client.download_artifacts(run_id, "export/manifest.json", str(tmp_path / "dl")))
    assert logged_manifest.read_bytes() == (tmp_path / "exported" / "manifest.json").read_bytes()
