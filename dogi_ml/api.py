"""dogi_ml's Python API: the commands of ``python -m dogi_ml`` as functions.

Every function composes the same Hydra config as its command (``conf/<command>.yaml``) with the
same overrides, then runs the same pipeline body, so an API call and a command line with equal
settings give equal results (``tests/test_api.py`` checks it). Keyword arguments become Hydra
overrides (``simulate(..., victim="cost_benefit")`` is ``sim.victim=cost_benefit``); anything
else can be passed as Hydra override strings in ``overrides=[...]``.

A workload is a config name (``"zipf"``), a mapping with a ``name`` and overrides of the
workload config (``{"name": "zipf", "capacity_blocks": 8192, "theta": 1.2}``; generator
parameters may be given flat or under ``params``), or, for :func:`simulate` and
:func:`annotate`, a :class:`~dogi_ml.traces.trace.Trace` already in memory.

Doctests use tiny workloads (8192 blocks written four times) so they run in seconds.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.pipeline.common import available, compose_config

__all__ = [
    "SimResult",
    "TrainResult",
    "annotate",
    "compare",
    "compose",
    "export_model",
    "generate",
    "load_trace",
    "simulate",
    "train",
]


# -- Hydra composition ----------------------------------------------------------------------------
def _value(v: Any) -> str:
    """A Python value as a Hydra override value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, Path):
        v = str(v)
    if isinstance(v, str):
        if v and all(c.isalnum() or c in "_-./:" for c in v) and v not in ("true", "false", "null"):
            return v
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{k}:{_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, Iterable):
        return "[" + ",".join(_value(x) for x in v) + "]"
    raise ConfigError(f"cannot pass {type(v).__name__} {v!r} as a setting", "use a number, string, list or dict")


def compose(command: str, overrides: Sequence[str] = ()):
    """The config ``python -m dogi_ml COMMAND OVERRIDES...`` runs with (an OmegaConf DictConfig).

    >>> cfg = compose("simulate", ["+workload=zipf", "policy=nosep", "sim.victim=fifo"])
    >>> cfg.policy.name, cfg.sim.victim, cfg.workload.capacity_blocks
    ('nosep', 'fifo', 262144)
    """
    return compose_config(command, overrides)


def _workload_overrides(workload: str | Mapping, extra: Mapping | None = None, plus: bool = True) -> list[str]:
    """``+workload=NAME`` and ``workload.KEY=VALUE`` overrides for a workload spec; generator
    parameters may be given flat (``theta=1.2``) or under ``params``."""
    if isinstance(workload, str):
        spec: dict = {"name": workload}
    elif isinstance(workload, Mapping) and workload.get("name"):
        spec = dict(workload)
    else:
        raise ConfigError(
            f"workload {workload!r} is neither a config name nor a mapping with a name",
            "pass e.g. 'zipf' or {'name': 'zipf', 'capacity_blocks': 8192}; names: " + ", ".join(available("workload")),
        )
    spec.update(extra or {})
    name = spec.pop("name")
    if name not in available("workload"):
        raise ConfigError(f"unknown workload {name!r}", "use one of: " + ", ".join(available("workload")))
    base = compose("simulate", [f"+workload={name}"]).workload
    params = dict(spec.pop("params", None) or {})
    out = [f"{'+' if plus else ''}workload={name}"]
    for key, v in spec.items():
        if key in base and key != "params":
            out.append(f"workload.{key}={_value(v)}")
        elif "params" in base and base.params is not None and key in base.params:
            params[key] = v
        else:
            known = [k for k in base if k not in ("name", "params")] + list((base.get("params") or {}).keys())
            raise ConfigError(f"workload {name!r} has no setting {key!r}", "use one of: " + ", ".join(known))
    for key, v in params.items():
        if not (base.get("params") is not None and key in base.params):
            raise ConfigError(
                f"workload {name!r} has no parameter {key!r}",
                "use one of: " + ", ".join((base.get("params") or {}).keys()),
            )
        out.append(f"workload.params.{key}={_value(v)}")
    return out


def _group_overrides(group: str, settings: Mapping, cfg) -> list[str]:
    """``GROUP.KEY=VALUE`` overrides, each key checked against the composed group."""
    out = []
    for key, v in settings.items():
        if key not in cfg[group]:
            raise ConfigError(f"{group} has no setting {key!r}", f"use one of: {', '.join(cfg[group].keys())}")
        out.append(f"{group}.{key}={_value(v)}")
    return out


@contextlib.contextmanager
def _quiet(enabled: bool):
    """Silence the commands' console summaries (the API returns the numbers instead)."""
    if not enabled:
        yield
        return
    from dogi_ml.report import console  # rich: in Jupyter it displays, bypassing sys.stdout

    was = console.quiet
    console.quiet = True
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        console.quiet = was


@contextlib.contextmanager
def _keep_plot_backend():
    """The commands' plots switch matplotlib to Agg (files only); a notebook's inline backend
    comes back afterwards, so its own figures still show."""
    import sys

    if "matplotlib.pyplot" not in sys.modules:  # the caller shows no figures of its own
        yield
        return
    import matplotlib
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()
    try:
        yield
    finally:
        if matplotlib.get_backend() != backend:
            shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
            if shell is not None and "inline" in backend:
                shell.enable_matplotlib("inline")  # also re-registers the inline figure display
            else:
                plt.switch_backend(backend)


def _check_switches(**switches) -> None:
    """The call's on/off arguments are True or False (``plot`` may be None): Python's truthiness
    read ``log="no"`` as on without a word."""
    for name, value in switches.items():
        checked_setting(value, name, bool, nullable=name == "plot")


def _is_trace(obj) -> bool:
    from dogi_ml.traces.trace import Trace

    return isinstance(obj, Trace)


# -- traces -----------------------------------------------------------------------------------------
def load_trace(path: str | Path, format: str, *, cache: bool = True, **options):  # noqa: A002 - the CLI's name
    """Read a trace file (any format of ``dogi_ml.traces.readers``) into a ``Trace``; cached in
    the binary format like ``+workload=file`` (``cache=False`` reads it afresh).

    ``options``: ``volumes``, ``skip_malformed``, ``delimited``, ``capacity_blocks``.

    >>> import dogi_ml
    >>> t = dogi_ml.load_trace(SHARED / "msr_cut_105.txt", format="flashnet_msr", cache=False)
    >>> t.block_writes.size > 0, t.name
    (True, 'msr_cut_105')
    """
    _check_switches(cache=cache)
    from dogi_ml.traces.workload import load_workload

    ov = ["+workload=file", f"workload.path={_value(str(Path(path).resolve()))}", f"workload.format={_value(format)}"]
    cfg = compose("simulate", ov)
    ov += _group_overrides("workload", options, cfg)
    cfg = compose("simulate", ov)
    return load_workload(cfg.workload, cache_dir=cfg.cache_dir if cache else None)


def generate(workload: str | Mapping = "zipf", *, cache: bool = True, **overrides):
    """Generate (or load from the trace cache) the trace of a workload config.

    ``overrides``: the workload's settings (``capacity_blocks``, ``write_volume``, ``seed``) and
    its generator's parameters (``theta``, ``hot_fraction``, ...).

    >>> import dogi_ml
    >>> t = dogi_ml.generate("zipf", capacity_blocks=8192, write_volume=4, theta=1.2)
    >>> t.block_writes.size, t.meta["capacity_blocks"]
    (32768, 8192)
    """
    _check_switches(cache=cache)
    from dogi_ml.traces.workload import load_workload

    cfg = compose("simulate", _workload_overrides(workload, overrides))
    return load_workload(cfg.workload, cache_dir=cfg.cache_dir if cache else None)


def annotate(trace):
    """Future-knowledge annotation of a trace's block writes, one row per block write: ``lba``,
    ``prev`` (index of the previous write of the LBA, -1 if none) and ``inv`` (its invalidation
    time in user-written blocks, ``inf`` if never overwritten). A pandas DataFrame.

    >>> import dogi_ml
    >>> df = dogi_ml.annotate(dogi_ml.generate("uniform", capacity_blocks=8192, write_volume=4))
    >>> list(df.columns), len(df)
    (['lba', 'prev', 'inv'], 32768)
    >>> bool((df.inv[df.prev.shift(-1) >= 0] > 0).all())
    True
    """
    import numpy as np
    import pandas as pd

    from dogi_ml.oracles.annotate import NEVER
    from dogi_ml.oracles.annotate import annotate as _annotate

    if not _is_trace(trace):
        trace = generate(trace)
    writes = trace.block_writes
    inv, prev = _annotate(writes)
    inv_f = np.where(inv >= NEVER, np.inf, inv.astype(np.float64))
    return pd.DataFrame({"lba": np.asarray(writes, dtype=np.int64), "prev": prev, "inv": inv_f})


# -- simulation -------------------------------------------------------------------------------------
@dataclass
class SimResult:
    """One simulation: ``waf``, per-group traffic (``groups``), the instantaneous WAF over time
    (``series``), the resolved ``config``, the full result dict (``raw``, as ``result.json``)
    and the MLflow run id when logged."""

    waf: float
    groups: Any  # pandas DataFrame: group, user_writes, gc_writes, ...
    series: Any  # pandas DataFrame: t (user writes incl. prefill), t_over_capacity, waf
    config: dict
    raw: dict = field(repr=False)
    run_id: str | None = None

    @property
    def scheme(self) -> str:
        return self.raw.get("scheme") or self.raw["policy"]

    def __repr__(self) -> str:
        return (
            f"SimResult(scheme={self.scheme!r}, workload={self.raw.get('workload')!r}, waf={self.waf:.4f}, "
            f"user_writes={self.raw['user_writes']}, gc_writes={self.raw['gc_writes']})"
        )


def _sim_result(result: dict, config: dict, run_id: str | None) -> SimResult:
    import pandas as pd

    groups = pd.DataFrame(result.get("groups") or [])
    s = result.get("waf_series") or {}
    cap = result.get("capacity_blocks") or 1
    series = pd.DataFrame({"t": s.get("t", []), "waf": s.get("waf", [])})
    series.insert(1, "t_over_capacity", series["t"] / cap)
    return SimResult(waf=result["waf"], groups=groups, series=series, config=config, raw=result, run_id=run_id)


def _sim_config(
    trace_or_workload,
    policy: str,
    policy_params: Mapping | None,
    overrides: Sequence[str],
    sim: Mapping,
    extra: Sequence[str] = (),
):
    if policy not in available("policy"):
        raise ConfigError(f"unknown policy {policy!r}", "use one of: " + ", ".join(available("policy")))
    ov = [f"policy={policy}", *extra]
    if not _is_trace(trace_or_workload):
        ov = _workload_overrides(trace_or_workload) + ov
    base = compose("simulate", ov)
    ov += _group_overrides("sim", sim, base)
    params = base.policy.get("params")
    for key, v in (policy_params or {}).items():
        if params is None or key not in params:
            raise ConfigError(
                f"policy {policy!r} has no parameter {key!r}",
                "use one of: " + ", ".join((params or {}).keys()) if params else "it takes none",
            )
        ov.append(f"policy.params.{key}={_value(v)}")
    ov += list(overrides)
    return compose("simulate", ov), ov


def simulate(
    trace_or_workload,
    policy: str = "sepbit",
    *,
    policy_params: Mapping | None = None,
    overrides: Sequence[str] = (),
    log: bool = False,
    plot: bool | None = None,
    progress: bool = False,
    out_dir: str | Path | None = None,
    quiet: bool = True,
    **sim,
) -> SimResult:
    """Run one placement scheme over a workload (or a Trace), as ``python -m dogi_ml simulate``.

    ``sim``: simulator settings (``victim``, ``op_ratio``, ``segment_blocks``, ...);
    ``policy_params``: the policy's ``params``; ``log=True`` records an MLflow run (the
    ``simulate`` experiment, with its plot) and writes ``result.json`` under ``out_dir``.

    >>> import dogi_ml
    >>> wl = {"name": "zipf", "capacity_blocks": 8192, "write_volume": 4}
    >>> r = dogi_ml.simulate(wl, policy="sepbit", segment_blocks=64)
    >>> round(r.waf, 3) == round((r.raw["user_writes"] + r.raw["gc_writes"]) / r.raw["user_writes"], 3)
    True
    >>> len(r.groups), int(r.groups.user_writes.sum()) == r.raw["user_writes"]
    (6, True)
    >>> list(r.series.columns)
    ['t', 't_over_capacity', 'waf']
    """
    _check_switches(log=log, plot=plot, progress=progress, quiet=quiet)
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.simulate import simulate as run_one
    from dogi_ml.pipeline.simulate import write_json
    from dogi_ml.traces.workload import load_workload
    from dogi_ml.tracking import override_labels

    cfg, ov = _sim_config(trace_or_workload, policy, policy_params, overrides, sim)
    trace = trace_or_workload if _is_trace(trace_or_workload) else load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    deployed = (cfg.get("model") or {}).get("deployed")
    if deployed:  # as run_simulate: the learned scheme places with its exported integer model
        if "deployed" not in (policy_cfg.get("params") or {}):
            raise ConfigError(
                f"model.deployed={deployed} needs a learned policy with a deployed form, "
                f"not policy={policy_cfg['name']}",
                "use policy=dogi",
            )
        policy_cfg["params"]["deployed"] = deployed
    with _quiet(quiet):
        result = run_one(trace, policy_cfg, OmegaConf.to_container(cfg.sim, resolve=True), progress=progress)
    config = OmegaConf.to_container(cfg, resolve=True)
    if "workload" in cfg:
        result["workload_config"] = config["workload"]
    run_id = None
    if log or out_dir is not None:
        with _out_dir(out_dir, "simulate") as d, _keep_plot_backend():
            out = write_json(result, Path(d) / "result.json")
            png = None
            if plot if plot is not None else True:
                from dogi_ml.report import plot_results

                png = plot_results([result], out.with_suffix(".png"))
            if log:
                from dogi_ml.pipeline.simulate import _log_simulation

                with override_labels(ov):
                    _log_simulation(cfg, result, [out, png])
                run_id = _last_run_id()
    return _sim_result(result, config, run_id)


@contextlib.contextmanager
def _out_dir(out_dir, command: str):
    """``out_dir`` (created), or a temporary directory whose files MLflow has copied by the end."""
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        yield Path(out_dir)
        return
    with tempfile.TemporaryDirectory(prefix=f"dogi_ml-{command}-") as d:
        yield Path(d)


def _last_run_id() -> str | None:
    import mlflow

    run = mlflow.last_active_run()
    return run.info.run_id if run is not None else None


def compare(
    policies: Sequence[str],
    workload,
    *,
    log: bool = False,
    overrides: Sequence[str] = (),
    quiet: bool = True,
    progress: bool = True,
    **sim,
):
    """Several schemes on one workload (with the same simulator settings): a DataFrame, one row
    per scheme, sorted by WAF. ``log=True`` nests the runs under one parent MLflow run, as a
    ``-m`` sweep does. A progress bar over the schemes shows on a terminal (``progress=False``
    hides it).

    >>> import dogi_ml
    >>> wl = {"name": "hotcold", "capacity_blocks": 8192, "write_volume": 4}
    >>> df = dogi_ml.compare(["nosep", "sepbit"], wl, segment_blocks=64)
    >>> list(df.columns)[:4], sorted(df.policy)
    (['policy', 'scheme', 'waf', 'user_writes'], ['nosep', 'sepbit'])
    >>> bool(df.waf.is_monotonic_increasing)
    True
    """
    _check_switches(log=log, quiet=quiet, progress=progress)
    import pandas as pd

    from dogi_ml.tracking import parent_run

    if isinstance(policies, str):
        policies = [policies]
    trace = workload if _is_trace(workload) else generate(workload)
    rows = []
    parent = (
        parent_run("simulate", f"compare {', '.join(policies)} on {trace.name}") if log else contextlib.nullcontext()
    )
    from dogi_ml.progress import bar as progress_bar

    # on a terminal only, never under --quiet (dogi_ml.progress decides)
    with parent, progress_bar(len(policies), desc="compare", unit="scheme", requested=progress, leave=False) as bar:
        for p in policies:
            bar.set_postfix_str(p)
            r = simulate(trace, policy=p, log=log, overrides=overrides, quiet=quiet, **sim)
            bar.update(1)
            rows.append(
                {
                    "policy": r.raw["policy"],
                    "scheme": r.scheme,
                    "waf": r.waf,
                    "user_writes": r.raw["user_writes"],
                    "gc_writes": r.raw["gc_writes"],
                    "victim": r.raw["victim"],
                    "workload": r.raw.get("workload"),
                    "appends_per_second": r.raw.get("appends_per_second"),
                    "run_id": r.run_id,
                }
            )
    return pd.DataFrame(rows).sort_values("waf", kind="stable").reset_index(drop=True)


# -- learning and deployment ------------------------------------------------------------------------
@dataclass
class TrainResult:
    """One ``train`` run: the summary (``metrics``, as ``metrics.json``), the confusion matrix
    over the model's classes as a DataFrame, the run's output directory and MLflow run id."""

    metrics: dict = field(repr=False)
    confusion: Any
    out_dir: Path
    run_id: str

    @property
    def accuracy(self) -> float:
        return self.metrics["accuracy"]

    def __repr__(self) -> str:
        return (
            f"TrainResult(model={self.metrics['model']!r}, workload={self.metrics['workload']!r}, "
            f"accuracy={self.accuracy:.4f}, run_id={self.run_id[:8]!r})"
        )


def _stamp_dir(command: str) -> Path:
    import time

    return Path("outputs") / command / time.strftime("%Y-%m-%d") / time.strftime("%H-%M-%S")


def train(
    workload,
    model: str = "mlp",
    *,
    overrides: Sequence[str] = (),
    out_dir: str | Path | None = None,
    quiet: bool = True,
    **data,
) -> TrainResult:
    """Learn block lifetimes, as ``python -m dogi_ml train``: always an MLflow run (``train``
    experiment) with its plots; files under ``out_dir`` (default ``outputs/train/<date>/<time>``).

    ``data``: the ``data`` group's settings (``sample_every``, ``features``, ``labels``, ...);
    model settings go in ``overrides`` (``["model.params.epochs=2"]``).

    >>> import dogi_ml
    >>> wl = {"name": "zipf", "capacity_blocks": 16384, "write_volume": 6}
    >>> r = dogi_ml.train(wl, model="logistic", overrides=["latency_budget_s=0.01"], out_dir=TMP / "t")
    >>> 0.0 < r.accuracy <= 1.0, r.confusion.shape == (10, 10), (r.out_dir / "model.pkl").exists()
    (True, True, True)
    """
    _check_switches(quiet=quiet)
    import pandas as pd

    from dogi_ml.pipeline.train import run_train
    from dogi_ml.tracking import override_labels

    if model not in available("model"):
        raise ConfigError(f"unknown model {model!r}", "use one of: " + ", ".join(available("model")))
    ov = _workload_overrides(workload) + [f"model={model}"]
    base = compose("train", ov)
    ov += _group_overrides("data", data, base) + list(overrides)
    cfg = compose("train", ov)
    out = Path(out_dir) if out_dir is not None else _stamp_dir("train")
    with _quiet(quiet), override_labels(ov), _keep_plot_backend():
        summary = run_train(cfg, out)
    names = summary["class_names"]
    confusion = pd.DataFrame(
        summary["confusion_matrix"], index=pd.Index(names, name="true"), columns=pd.Index(names, name="predicted")
    )
    return TrainResult(metrics=summary, confusion=confusion, out_dir=out, run_id=summary["mlflow_run_id"])


def export_model(
    source, *, overrides: Sequence[str] = (), out: str | Path | None = None, quiet: bool = True, **settings
) -> dict:
    """Deploy a trained model, as ``python -m dogi_ml export``: the integer C header, ONNX, the
    manifest and the accuracy/speed report (returned as a dict, also ``report.json``).

    ``source``: a :class:`TrainResult`, an MLflow run id of a ``train`` run or a ``model.pkl``
    path. ``settings``: the ``export`` group's (``onnx``, ``bench``, ``parity_rows``, ...).

    >>> import dogi_ml
    >>> wl = {"name": "zipf", "capacity_blocks": 16384, "write_volume": 6}
    >>> t = dogi_ml.train(wl, overrides=["model.params.epochs=2", "latency_budget_s=0.01"], out_dir=TMP / "m")
    >>> rep = dogi_ml.export_model(t, out=TMP / "x", onnx=False, bench=False, parity_rows=2000)
    >>> "int" in rep["accuracy"], rep["accuracy"]["float"] == t.accuracy
    (True, True)
    """
    _check_switches(quiet=quiet)
    from dogi_ml.pipeline.export import run_export

    if isinstance(source, TrainResult):
        ov = [f"export.model_path={_value(str(Path(source.out_dir).resolve() / 'model.pkl'))}"]
    elif isinstance(source, (str, Path)) and (str(source).endswith(".pkl") or Path(source).exists()):
        ov = [f"export.model_path={_value(str(Path(source).resolve()))}"]
    elif isinstance(source, str):
        ov = [f"export.run_id={_value(source)}"]
    else:
        raise ConfigError(f"cannot export from {source!r}", "pass a TrainResult, a train run id or a model.pkl path")
    if out is not None:
        ov.append(f"export.out={_value(str(out))}")
    base = compose("export", ov)
    ov += _group_overrides("export", settings, base) + list(overrides)
    cfg = compose("export", ov)
    with _out_dir(None, "export") as work, _quiet(quiet), _keep_plot_backend():
        report = run_export(cfg, Path(work))
    return report
