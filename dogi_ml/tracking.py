"""MLflow tracking: one local database per working directory unless MLFLOW_TRACKING_URI says
otherwise; artifacts in ``mlartifacts/`` beside it; crashed runs end FAILED; sweeps get a
parent run with one child per job."""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

PARENT_FILE = "mlflow_parent_run.json"
# read once: mlflow.set_tracking_uri() itself exports MLFLOW_TRACKING_URI
_USER_URI = os.environ.get("MLFLOW_TRACKING_URI")


def tracking_uri() -> str:
    return _USER_URI or f"sqlite:///{Path.cwd() / 'mlruns.db'}"


def _mlflow():
    import logging

    import mlflow
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    mlflow.set_tracking_uri(tracking_uri())
    return mlflow


def experiment_id(name: str) -> str:
    """Get or create the experiment (artifacts under ./mlartifacts for a local database)."""
    mlflow = _mlflow()
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    location = None
    if _USER_URI is None:
        location = (Path.cwd() / "mlartifacts").resolve().as_uri()
    return mlflow.create_experiment(name, artifact_location=location)


def flatten(d, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
    return out


@contextmanager
def mlflow_run(experiment: str, run_name: str, sweep_dir: Path | None = None, tags: dict | None = None):
    """Start a run (a child of the sweep's parent run when ``sweep_dir`` holds one). An
    exception inside marks the run FAILED and propagates."""
    mlflow = _mlflow()
    exp_id = experiment_id(experiment)
    tags = dict(tags or {})
    if sweep_dir is not None and (Path(sweep_dir) / PARENT_FILE).exists():
        tags["mlflow.parentRunId"] = json.loads((Path(sweep_dir) / PARENT_FILE).read_text())["run_id"]
    run = mlflow.start_run(experiment_id=exp_id, run_name=run_name, tags=tags)
    try:
        yield mlflow, run
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run(status="FINISHED")


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


class SweepParentRun(Callback):
    """Hydra callback: a ``-m`` sweep gets one parent MLflow run; each job logs a child."""

    def __init__(self, experiment: str = "train"):
        self.experiment = experiment

    def on_multirun_start(self, config, **kwargs) -> None:
        mlflow = _mlflow()
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        client = mlflow.MlflowClient()
        run = client.create_run(experiment_id(self.experiment), run_name=f"sweep {sweep_dir.name}",
                                tags={"sweep_dir": str(sweep_dir), "kind": "sweep"})
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run.info.run_id}))

    def on_multirun_end(self, config, **kwargs) -> None:
        path = Path(config.hydra.sweep.dir) / PARENT_FILE
        if not path.exists():
            return
        mlflow = _mlflow()
        run_id = json.loads(path.read_text())["run_id"]
        client = mlflow.MlflowClient()
        children = client.search_runs([experiment_id(self.experiment)],
                                      filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
        failed = sum(r.info.status == "FAILED" for r in children)
        client.log_metric(run_id, "jobs", len(children))
        client.log_metric(run_id, "failed_jobs", failed)
        client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")
