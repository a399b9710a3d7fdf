"""MLflow tracking: one local database per working directory unless MLFLOW_TRACKING_URI says
otherwise; artifacts in ``mlartifacts/`` beside it; crashed runs end FAILED; sweeps get a
parent run with one child per job, which ends KILLED if the sweep is stopped (Ctrl-C, SIGTERM)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np

from dogi_ml.callbacks import reported
from dogi_ml.determinism import mlflow_tags as numerics_tags
from dogi_ml.errors import ConfigError

PARENT_FILE = "mlflow_parent_run.json"
# set by the Python API (dogi_ml.api): the overrides of the call, and the parent run of compare()
_API_OVERRIDES: ContextVar[list | None] = ContextVar("dogi_ml_api_overrides", default=None)
_API_PARENT: ContextVar[str | None] = ContextVar("dogi_ml_api_parent", default=None)
# overrides that change no result (or are in the run name already) stay out of the name
_NOT_IN_NAME = (
    "workload",
    "policy",
    "model",
    "progress",
    "plot",
    "mlflow",
    "output",
    "title",
    "cache_dir",
    "sim.output",
    "export.out",
    "hydra",
    "latency_budget_s",
)
_SHORT = ("workload.params.", "policy.params.", "model.params.", "workload.", "sim.", "data.")
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


@contextmanager
def _file_lock(path: Path):
    """An exclusive lock (``flock``) on the file ``path``, made with its folder if missing, held
    while the block runs: what two processes must not do at once."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _store_lock():
    """For a SQLite store, :func:`_file_lock` on ``STORE.lock`` beside it while a process opens the
    store and gets or creates an experiment. Two commands started at once in a fresh folder each
    created ``mlruns.db`` and ran MLflow's schema migrations on it, and all but one failed
    (``duplicate column name: step``, ``Online migration expected to match one row``; 7 of 9
    processes in three trials of three); two creating the same experiment race the same way."""
    uri = tracking_uri()
    if not uri.startswith("sqlite:///"):
        yield
        return
    with _file_lock(Path(uri.removeprefix("sqlite:///") + ".lock")):
        yield


def experiment_id(name: str) -> str:
    """Get or create the experiment (artifacts under ./mlartifacts for a local database); a SQLite
    store is opened under :func:`_store_lock`."""
    with _store_lock():
        return _experiment_id(name)


def _experiment_id(name: str) -> str:
    mlflow = _mlflow()
    try:  # the first call that opens the store
        exp = mlflow.get_experiment_by_name(name)
    except mlflow.exceptions.MlflowException as exc:
        # MLFLOW_TRACKING_URI names a store MLflow will not open (a file store, which MLflow 3
        # refuses; a server that is down): MLflow's traceback, through ours, told the user less
        first = str(exc.message).strip().split(". ")[0]
        raise ConfigError(
            f"MLFLOW_TRACKING_URI={tracking_uri()}: MLflow cannot use it ({first})",
            "unset MLFLOW_TRACKING_URI to track in ./mlruns.db, or give mlflow=false where the command has it",
        ) from None
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


def _hydra_overrides() -> list:
    """The command line's overrides of the current Hydra job; [] outside Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):
        return []


def run_overrides() -> list:
    """The overrides of the current run: the API call's, else the Hydra command line's."""
    api = _API_OVERRIDES.get()
    return list(api) if api is not None else _hydra_overrides()


def key_overrides(overrides: list) -> list:
    """The overrides worth a place in a run's name, with short keys (``sim.victim=fifo`` ->
    ``victim=fifo``): those that change the result and are not the scheme, workload or model."""
    out = []
    for o in overrides:
        key, sep, value = str(o).lstrip("+~").partition("=")
        if not sep or key in _NOT_IN_NAME or key.split(".")[0] in ("hydra",) or key in ("sim.output",):
            continue
        for prefix in _SHORT:
            if key.startswith(prefix):
                key = key[len(prefix) :]
                break
        out.append(f"{key}={value}")
    return out


def readable_name(base: str, overrides: list, limit: int = 120) -> str:
    """``base`` plus its key overrides in brackets, cut at ``limit`` characters."""
    keys = key_overrides(overrides)
    name = f"{base} [{', '.join(keys)}]" if keys else base
    return name if len(name) <= limit else name[: limit - 1] + "…"


@contextmanager
def override_labels(overrides: list):
    """Name and tag the runs started inside by these overrides (the Python API's calls)."""
    token = _API_OVERRIDES.set(list(overrides))
    try:
        yield
    finally:
        _API_OVERRIDES.reset(token)


@contextmanager
def parent_run(experiment: str, run_name: str, tags: dict | None = None):
    """A parent run for the runs started inside (the API's ``compare``), as a ``-m`` sweep has;
    it ends FAILED if a child failed or an exception escapes."""
    mlflow = _mlflow()
    client = mlflow.MlflowClient()
    run = client.create_run(
        experiment_id(experiment), run_name=run_name, tags={"kind": "sweep", "dogi_ml.source": "api", **(tags or {})}
    )
    token = _API_PARENT.set(run.info.run_id)
    status = "FINISHED"
    try:
        yield run
    except BaseException:
        status = "FAILED"
        raise
    finally:
        _API_PARENT.reset(token)
        children = client.search_runs(
            [experiment_id(experiment)], filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'"
        )
        failed = sum(r.info.status == "FAILED" for r in children)
        client.log_metric(run.info.run_id, "jobs", len(children))
        client.log_metric(run.info.run_id, "failed_jobs", failed)
        client.set_terminated(run.info.run_id, status="FAILED" if failed else status)


@contextmanager
def mlflow_run(experiment: str, run_name: str, sweep_dir: Path | None = None, tags: dict | None = None):
    """Start a run (a child of the sweep's parent run when ``sweep_dir`` holds one, or of the
    API's :func:`parent_run`). Its name gets the key overrides (``sepbit on zipf [victim=fifo]``);
    its tags the full overrides and where it came from (``dogi_ml.source``: cli or api). An
    exception inside marks the run FAILED and propagates."""
    mlflow = _mlflow()
    exp_id = experiment_id(experiment)
    tags = dict(tags or {})
    overrides = run_overrides()
    tags.setdefault("overrides", " ".join(overrides)[:5000])
    tags.setdefault("dogi_ml.source", "api" if _API_OVERRIDES.get() is not None else "cli")
    tags.update(numerics_tags())  # the float code path of the run (dogi_ml.determinism)
    if sweep_dir is not None and (Path(sweep_dir) / PARENT_FILE).exists():
        tags["mlflow.parentRunId"] = json.loads((Path(sweep_dir) / PARENT_FILE).read_text())["run_id"]
        tags.setdefault("sweep", Path(sweep_dir).name)
    elif _API_PARENT.get() is not None:
        tags["mlflow.parentRunId"] = _API_PARENT.get()
    run = mlflow.start_run(experiment_id=exp_id, run_name=readable_name(run_name, overrides), tags=tags)
    try:
        yield mlflow, run
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run(status="FINISHED")


def log_artifacts_to_run(run_id: str, local_dir: Path, artifact_path: str) -> None:
    """Log a directory's files under another run than the active one (``export`` adds its
    header, ONNX files and manifest to the train run it exported)."""
    _mlflow().MlflowClient().log_artifacts(str(run_id), str(local_dir), artifact_path=artifact_path)


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


def _sweep_size(config) -> int | None:
    """Jobs in a basic ``-m`` sweep, counted as Hydra's basic sweeper makes them: the sweeper's
    ``params`` (a preset's ``hydra.sweeper.params``) then the command line's overrides, the last
    value of each key winning, and the product of the comma lists and ranges; None if unknown."""
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        params = OmegaConf.select(config, "hydra.sweeper.params") or {}
        texts = [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)
        sizes = {}
        for o in OverridesParser.create().parse_overrides(texts):
            sizes[o.get_key_element()] = len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1
        return int(np.prod(list(sizes.values()), dtype=np.int64))
    except Exception:  # noqa: BLE001 - glob() sweeps or another sweeper: count unknown
        return None


#: a sweep folder's record of its finished jobs: one empty file per job, named by its number
JOBS_DONE = ".jobs_done"


def _count_finished(sweep_dir: Path, job_num) -> int:
    """Record job ``job_num`` of the sweep in ``sweep_dir`` as finished and return how many are.
    Under the joblib (or SLURM) launcher each job ends in a process of its own, with its own copy
    of the callback, so a count kept in the callback said "job 1/3" for every job; the record is
    on disk, and a lock keeps two jobs that end together from counting the same total."""
    done = sweep_dir / JOBS_DONE
    with _file_lock(done / ".lock"):
        (done / str(job_num)).touch()
        return sum(1 for p in done.iterdir() if p.name != ".lock")


class SweepParentRun(Callback):
    """Hydra callback: a ``-m`` sweep gets one parent MLflow run; each job logs a child. With
    ``mlflow=false`` (simulate, replay) nothing is logged: no parent either."""

    def __init__(self, experiment: str = "train"):
        self.experiment = experiment
        self._jobs: int | None = None
        self._open_run: str | None = None  # the parent run until on_multirun_end closes it
        self._sigterm: SigtermExit | None = None

    def __getstate__(self) -> dict:
        # a launcher (joblib) pickles the callbacks for its workers: the signal handling (a lock
        # inside) stays in this process, where the sweep runs
        return {**self.__dict__, "_sigterm": None}

    def _close_if_stopped(self) -> None:
        """At exit: a parent run the sweep's end never closed (Ctrl-C, SIGTERM) ends KILLED
        instead of RUNNING forever."""
        run_id, self._open_run = self._open_run, None
        if self._sigterm is not None:
            self._sigterm.handled()  # the process is ending through its exit: no watchdog
        if run_id is None:
            return
        try:
            end_parent_killed(run_id, "sweep")
        except Exception as exc:  # noqa: BLE001 - at exit: say so, do not mask the stop
            print(f"sweep stopped: could not end its MLflow parent run {run_id}: {exc}", file=sys.stderr)

    @reported
    def on_multirun_start(self, config, **kwargs) -> None:
        self._jobs = _sweep_size(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(sweep_dir / JOBS_DONE, ignore_errors=True)  # an earlier sweep's in this folder
        # a parent file left by an earlier sweep in this folder is not this sweep's
        (sweep_dir / PARENT_FILE).unlink(missing_ok=True)
        if not config.get("mlflow", True):
            return  # mlflow=false: nothing goes to MLflow, not even an empty parent run
        mlflow = _mlflow()
        client = mlflow.MlflowClient()
        run = client.create_run(
            experiment_id(self.experiment),
            run_name=f"sweep {sweep_dir.name}",
            tags={"sweep_dir": str(sweep_dir), "kind": "sweep"},
        )
        self._open_run = run.info.run_id
        atexit.register(self._close_if_stopped)
        # SIGTERM (a scheduler, kill) exits through the interpreter's exit, so the parent is closed
        self._sigterm = SigtermExit(self._close_if_stopped).install()
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run.info.run_id}))

    @reported
    def on_job_end(self, config, job_return, **kwargs) -> None:
        """One line per finished sweep job on stderr (``job 3/8 done: policy=sepbit``: the third of
        eight to finish); ``--quiet`` drops it."""
        if os.environ.get("DOGI_ML_QUIET", "") == "1":
            return
        if str(config.hydra.get("mode", "")) not in ("RunMode.MULTIRUN", "MULTIRUN"):
            return
        finished = _count_finished(Path(config.hydra.sweep.dir), config.hydra.job.num)
        of = f"/{self._jobs}" if self._jobs else ""
        status = getattr(getattr(job_return, "status", None), "name", "COMPLETED")
        word = "done" if status == "COMPLETED" else "failed"
        overrides = " ".join(config.hydra.overrides.task)
        print(f"job {finished}{of} {word}: {overrides}", file=sys.stderr, flush=True)

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        # the sweep ended: its parent is closed below, not at exit
        self._open_run = None
        shutil.rmtree(Path(config.hydra.sweep.dir) / JOBS_DONE, ignore_errors=True)
        atexit.unregister(self._close_if_stopped)
        if self._sigterm is not None:
            self._sigterm.restore()
            self._sigterm = None
        path = Path(config.hydra.sweep.dir) / PARENT_FILE
        if not path.exists():
            return
        mlflow = _mlflow()
        run_id = json.loads(path.read_text())["run_id"]
        client = mlflow.MlflowClient()
        children = client.search_runs(
            [experiment_id(self.experiment)], filter_string=f"tags.mlflow.parentRunId = '{run_id}'"
        )
        failed = sum(r.info.status == "FAILED" for r in children)
        client.log_metric(run_id, "jobs", len(children))
        client.log_metric(run_id, "failed_jobs", failed)
        client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


#: seconds a SIGTERM's SystemExit has to end the process before the watchdog ends it
SIGTERM_GRACE_S = 5.0


def exit_on_sigterm(cleanup):
    """A SIGTERM handler that raises ``SystemExit(128 + signum)`` (so ``finally`` blocks, ``except``
    clauses and ``atexit`` run) and starts a watchdog thread: Python drops an exception raised while
    a finalizer or a weakref callback runs ("Exception ignored in ..."), and a signal can land
    there, so unless ``handler.handled()`` is called within ``SIGTERM_GRACE_S`` (where the
    SystemExit's own cleanup runs) the watchdog calls ``cleanup`` and ends the process with the
    same status (``os._exit``)."""

    handled = threading.Event()

    def handler(signum, frame):
        def force():
            if handled.wait(SIGTERM_GRACE_S):
                return  # the SystemExit reached its handlers: the process is ending as it should
            try:
                cleanup()
            finally:
                os._exit(128 + signum)

        threading.Thread(target=force, daemon=True, name="sigterm-watchdog").start()
        raise SystemExit(128 + signum)

    handler.handled = handled.set  # the caller's cleanup ran: call this, and no watchdog fires
    return handler


class SigtermExit:
    """:func:`exit_on_sigterm` as the process's SIGTERM handler while installed: ``install()`` (in
    the main thread only, the one a handler can be set in), ``handled()`` once the cleanup ran,
    ``restore()`` the previous handler (the SIGTERM, if any, handled). Also a context manager."""

    def __init__(self, cleanup):
        self.handler = exit_on_sigterm(cleanup)
        self._previous = None
        self._installed = False

    def install(self) -> SigtermExit:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self.handler)
            self._installed = True
        return self

    def handled(self) -> None:
        self.handler.handled()

    def restore(self) -> None:
        self.handled()
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def __enter__(self) -> SigtermExit:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.restore()


def end_parent_killed(run_id: str, what: str) -> None:
    """End the parent run ``run_id`` KILLED (its ``what``, a sweep or a study, was stopped before
    its end closed it) and say so on stderr."""
    _mlflow().MlflowClient().set_terminated(run_id, status="KILLED")
    print(f"{what} stopped: its MLflow parent run {run_id} ends KILLED", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Trained lifetime models as MLflow models: ``mlflow.pyfunc.load_model("runs:/<id>/model")``
# predicts exactly as the project's model does.

MODEL_NAME = "model"  # the logged model's name: runs:/<run id>/model
LIFETIME_MODEL_FILE = "lifetime_model.pkl"  # the project's own model inside it (export reads it)


def _native_flavour(model):
    """(MLflow flavour module, the object it saves, its save options) of a trained lifetime model:
    the network of a PyTorch model (``net``), else the fitted estimator (``est``: LightGBM's
    scikit-learn API or scikit-learn's). Both take the *scaled* features (``model.scaler``)."""
    if hasattr(model, "net"):
        import mlflow.pytorch

        # the whole module pickled (its classes are dogi_ml's), not MLflow's "pt2" default, whose
        # torch.export tracing fails on the GRU fed the raw integer features of the input example
        return mlflow.pytorch, model.net, {"serialization_format": "pickle"}
    if not hasattr(model, "est"):
        raise ValueError(f"model {model.name}: not trained (no network or estimator to log)")
    if model.name == "lightgbm":
        import mlflow.lightgbm

        return mlflow.lightgbm, model.est, {"serialization_format": "cloudpickle"}
    import mlflow.sklearn

    # cloudpickle, not MLflow's default skops (which refuses a random forest's trees unless
    # told to trust them): the python_function flavour's own model is a pickle anyway
    return mlflow.sklearn, model.est, {"serialization_format": "cloudpickle"}


def _pip_requirements(flavour) -> list[str]:
    """The pinned libraries the model needs (given, so MLflow does not load the model in a
    subprocess to guess them). The python_function flavour also needs dogi_ml itself."""
    from importlib.metadata import version

    libs = {"pytorch": ["torch"], "lightgbm": ["lightgbm", "scikit-learn", "cloudpickle"]}
    name = flavour.__name__.rsplit(".", 1)[-1]
    return [f"{lib}=={version(lib)}" for lib in ("mlflow", "numpy", *libs.get(name, ["scikit-learn", "cloudpickle"]))]


class _LifetimeModelFlavour:
    """What :meth:`mlflow.models.Model.log` calls ``save_model`` on: the library's own flavour
    (loadable with ``mlflow.pytorch/lightgbm/sklearn.load_model``: the bare network or estimator,
    on scaled features), and a ``python_function`` flavour that loads the project's model (this
    module's ``_load_pyfunc``), so pyfunc's ``predict`` scales the features and maps classes
    exactly as :meth:`dogi_ml.models.LifetimeModel.predict` does."""

    def __init__(self, model, pickle_path: Path):
        self.model = model
        self.pickle_path = Path(pickle_path)
        self.native, self.native_object, self.options = _native_flavour(model)
        self.__name__ = self.native.__name__  # the logged model's flavour in MLflow's UI

    def save_model(self, path, mlflow_model, signature=None, input_example=None, metadata=None, **_):
        import shutil

        import mlflow.pyfunc

        self.native.save_model(
            self.native_object,
            path,
            mlflow_model=mlflow_model,
            signature=signature,
            input_example=input_example,
            metadata=metadata,
            pip_requirements=_pip_requirements(self.native),
            **self.options,
        )
        shutil.copyfile(self.pickle_path, Path(path) / LIFETIME_MODEL_FILE)
        shutil.copyfile(self.pickle_path.with_suffix(".json"), Path(path) / "lifetime_model.json")
        # the library flavour's python_function would predict on unscaled features: replaced
        env = mlflow_model.flavors.pop("python_function", {}).get("env", {})
        mlflow.pyfunc.add_to_model(
            mlflow_model,
            loader_module=__name__,
            data=LIFETIME_MODEL_FILE,
            conda_env=env.get("conda"),
            python_env=env.get("virtualenv"),
        )
        mlflow_model.save(str(Path(path) / "MLmodel"))


def log_lifetime_model(model, pickle_path: Path, X_example, feature_names: list, class_names: list) -> str:
    """Log a trained lifetime model (saved by ``model.save(pickle_path)``) to the active run as
    the MLflow model ``model``, with the library's flavour, a signature (the raw feature array in,
    the class index out) and ``X_example`` as its input example. Returns the model's URI."""
    import mlflow
    from mlflow.models import Model, ModelSignature
    from mlflow.types import Schema, TensorSpec

    X_example = np.ascontiguousarray(X_example)
    signature = ModelSignature(
        inputs=Schema([TensorSpec(X_example.dtype, (-1, *X_example.shape[1:]))]),
        outputs=Schema([TensorSpec(np.dtype(np.int64), (-1,))]),
    )
    metadata = {
        "dogi_ml_model": model.name,
        "feature_names": list(feature_names),
        "class_names": list(class_names),
        "input": "raw features as the train stage extracts them; python_function scales them",
    }
    info = Model.log(
        None,  # artifact_path: deprecated for name
        name=MODEL_NAME,
        flavor=_LifetimeModelFlavour(model, pickle_path),
        signature=signature,
        input_example=X_example,
        metadata=metadata,
        run_id=mlflow.active_run().info.run_id,
    )
    return info.model_uri


class _PyfuncLifetimeModel:
    """The python_function face of a project model: ``predict`` is the model's own."""

    def __init__(self, model):
        self.model = model

    def predict(self, model_input, params=None):
        X = model_input.to_numpy() if hasattr(model_input, "to_numpy") else np.asarray(model_input)
        return self.model.predict(X)

    def get_raw_model(self):
        return self.model


def _load_pyfunc(path: str):
    """MLflow's python_function loader for models logged by :func:`log_lifetime_model`."""
    from dogi_ml.models import LifetimeModel

    return _PyfuncLifetimeModel(LifetimeModel.load(path))
