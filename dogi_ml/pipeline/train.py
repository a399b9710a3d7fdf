"""The ``train`` stage: workload -> annotation -> causal features -> labels -> model -> metrics.

Everything is by time: rows are sampled as DOGI does (one in ten non-hot writes after 2x the
capacity has been written), the earliest rows train, the next validate (early stopping), the
latest test. Rows whose label the trace cannot know yet (their LBA is not rewritten before the
trace ends, and the end is too close to rule out a shorter class) are left out rather than
labelled by guess.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dogi_ml.determinism import numerics_record
from dogi_ml.errors import ConfigError, checked_setting, refuse_unknown_keys
from dogi_ml.features import labels as L
from dogi_ml.features.extract import (
    FEATURES,
    NO_LOG,
    NO_PREVIOUS,
    FeatureConfig,
    extract_features,
    history_rows,
    lba_sequences,
)
from dogi_ml.oracles.annotate import NEVER, annotate_cached
from dogi_ml.traces.trace import Trace
from dogi_ml.traces.workload import workload_capacity


@dataclass
class Dataset:
    """Sampled rows of one trace with features and labels, split by time."""

    X: np.ndarray  # [n, F] or [n, history, F]
    y: np.ndarray
    rows: np.ndarray  # block-write index of each row
    inv: np.ndarray  # invalidation time of each row
    feature_names: list
    class_names: list
    splits: dict  # name -> slice into the arrays
    all_features: np.ndarray | None = None  # [n, 12] candidate features (for the report)
    info: dict = field(default_factory=dict)


def _latest_inv(prev: np.ndarray) -> np.ndarray:
    t = np.arange(prev.size, dtype=np.int64)
    return np.where(prev >= 0, t - prev, NO_PREVIOUS)


#: the keys of the ``data`` config group (conf/data/*.yaml)
DATA_KEYS = (
    "binary_threshold", "capacity_blocks", "features", "labels", "max_samples", "mu", "quantile_bins",
    "sample_every", "sample_start", "train_fraction", "val_fraction", "window_blocks",
)  # fmt: skip


def build_dataset(
    trace: Trace, cfg: dict, sequence_history: int | None = None, cache_dir: str | Path | None = None, log=print
) -> Dataset:
    """Annotate, sample, extract features and label; ``cfg`` is the ``data`` config group."""
    refuse_unknown_keys(cfg, DATA_KEYS, "data")
    writes = trace.block_writes
    n = writes.size
    # null means "the trace's working set"; 0 or a string must not quietly mean the same
    configured = checked_setting(cfg.get("capacity_blocks"), "data.capacity_blocks", int, minimum=1, nullable=True)
    capacity = configured if configured is not None else workload_capacity(trace)
    train_share = checked_setting(cfg.get("train_fraction", 0.7), "data.train_fraction", float, above=0, example=0.7)
    val_share = checked_setting(cfg.get("val_fraction", 0.1), "data.val_fraction", float, above=0, example=0.1)
    if train_share + val_share >= 1:  # the test split would be empty (scikit-learn's "0 sample(s)" traceback)
        raise ConfigError(
            f"data.train_fraction={train_share} + data.val_fraction={val_share} leave no test rows",
            "keep their sum below 1, e.g. data.train_fraction=0.7 data.val_fraction=0.1",
        )
    checked_setting(cfg.get("sample_every", 10), "data.sample_every", minimum=1, example=10)
    # null means "scaled from the paper" for these; 0 and -1 must not quietly mean the same
    # (mu=0 and binary_threshold=0 did, through an `or`) or something else (max_samples=-1
    # dropped the last row, sample_start=-1 sampled the last write only)
    checked_setting(cfg.get("mu"), "data.mu", minimum=1, nullable=True, example=200)
    checked_setting(cfg.get("window_blocks"), "data.window_blocks", minimum=1, nullable=True, example=40000)
    checked_setting(cfg.get("max_samples", 500_000), "data.max_samples", minimum=1, example=500000)
    checked_setting(cfg.get("sample_start"), "data.sample_start", minimum=0, nullable=True, example=0)
    # one bin is one class (and 0 or -1 were read as one without a word)
    checked_setting(cfg.get("quantile_bins", 10), "data.quantile_bins", minimum=2, example=10)
    checked_setting(cfg.get("binary_threshold"), "data.binary_threshold", minimum=1, nullable=True, example=1000)
    if sequence_history is not None:  # null: rows are single writes, not windows of an LBA's writes
        sequence_history = checked_setting(sequence_history, "model.history", minimum=1, example=8)
        if sequence_history > n:  # longer than the trace: the windows would not fit in memory
            raise ConfigError(
                f"model.history={sequence_history} is longer than the trace's {n} block writes",
                "give a history of a few writes, e.g. model.history=8",
            )
    t0 = time.perf_counter()
    inv, prev = annotate_cached(writes, Path(cache_dir) / "annotations" if cache_dir else None)
    t_annot = time.perf_counter() - t0
    mu = L.scaled_mu(capacity, cfg.get("mu"))
    start = cfg.get("sample_start")
    rows = L.dogi_sample(
        _latest_inv(prev),
        inv,
        capacity,
        mu=mu,
        every=int(cfg.get("sample_every", 10)),
        cap=int(cfg.get("max_samples", 500_000)),
        start=start,
    )
    kind = cfg.get("labels", "dogi")
    bounds = L.category_bounds(capacity, mu)
    # censoring: a never-rewritten row is known to be long only if the trace outlives its class bound
    known = (inv[rows] < NEVER) | (n - rows > {"dogi": bounds[-1]}.get(kind, bounds[-1]))
    dropped = int((~known).sum())
    rows = rows[known]
    if rows.size < 50:
        raise ConfigError(
            f"only {rows.size} labelled rows after sampling ({dropped} censored)",
            "write more (workload.write_volume) or lower data.sample_every",
        )
    r_inv = inv[rows]
    if kind == "dogi":
        y = np.maximum(L.dogi_classes(r_inv, capacity, mu), 1) - 1  # c1..c10 -> 0..9
        class_names = [f"c{i}" for i in range(1, L.N_CATEGORIES + 1)]
    elif kind == "quantile":
        a = int(rows.size * float(cfg.get("train_fraction", 0.7)))
        bins = int(cfg.get("quantile_bins", 10))
        if bins > a:  # more bins than rows to fill them (1e12 bins asked numpy for 7 TiB)
            raise ConfigError(
                f"data.quantile_bins={bins} exceeds the {a} training rows", "give e.g. data.quantile_bins=10"
            )
        edges = L.quantile_edges(r_inv[:a], bins)  # fit on train only
        y = L.quantile_classes(r_inv, edges)
        class_names = [f"q{i}" for i in range(len(edges) + 1)]
    elif kind == "binary":
        thr = int(cfg.get("binary_threshold") or bounds[1])
        y = L.binary_classes(r_inv, thr)
        class_names = ["short", "long"]
    else:
        raise ConfigError(f"unknown data.labels {kind!r}", "use one of: dogi, quantile, binary")
    t0 = time.perf_counter()
    fcfg = FeatureConfig(capacity_blocks=capacity, window_blocks=cfg.get("window_blocks"))
    given = cfg.get("features") or FEATURES[:6]
    if isinstance(given, str):  # data.features=lba was read letter by letter
        raise ConfigError(f"data.features={given!r} is not a list", f"give a list, e.g. data.features=[{given}]")
    names = list(given)
    unknown = [f for f in names if f not in FEATURES]
    if unknown:
        raise ConfigError(f"data.features: unknown feature(s) {unknown}", f"use names from: {', '.join(FEATURES)}")
    cols = [FEATURES.index(f) for f in names]
    if sequence_history:
        need = history_rows(prev, rows, int(sequence_history))
        feats = extract_features(trace, fcfg, rows=need)
        seq, _ = lba_sequences(feats[:, cols], prev, rows, int(sequence_history), feature_rows=need)
        all_feats = feats[np.searchsorted(need, rows)]
        X = seq
    else:
        all_feats = extract_features(trace, fcfg, rows=rows)
        X = all_feats[:, cols]
    t_feat = time.perf_counter() - t0
    m = rows.size
    a = int(m * float(cfg.get("train_fraction", 0.7)))
    b = int(m * (float(cfg.get("train_fraction", 0.7)) + float(cfg.get("val_fraction", 0.1))))
    splits = {"train": slice(0, a), "val": slice(a, b), "test": slice(b, m)}
    info = {
        "block_writes": int(n),
        "capacity_blocks": capacity,
        "mu": mu,
        "sampled_rows": int(m),
        "censored_rows": dropped,
        "annotate_s": t_annot,
        "features_s": t_feat,
        "features_blocks_per_s": n / t_feat if t_feat > 0 else None,
        "n_train": a,
        "n_val": b - a,
        "n_test": m - b,
        "labels": kind,
    }
    return Dataset(
        X=X,
        y=y.astype(np.int64),
        rows=rows,
        inv=r_inv,
        feature_names=names,
        class_names=class_names,
        splits=splits,
        all_features=all_feats,
        info=info,
    )


#: torch, numpy and scikit-learn take seeds in [0, 2**32 - 1] (seed=-1 was numpy's traceback)
SEED_MAX = 2**32 - 1


def check_train_settings(model_cfg: dict, seed, latency_budget_s) -> None:
    """The model group and the run's own settings, checked by name before the workload is read:
    a bad value is one line naming its key, not a traceback (or a model trained on nonsense)
    after the dataset was built. The model's parameters are checked by its family's rules
    (:attr:`dogi_ml.models.base.LifetimeModel.rules`)."""
    from dogi_ml.models import make_model

    refuse_unknown_keys(
        model_cfg, ("name", "params", "history"), "model", hint="a model's parameter goes under model.params"
    )
    if model_cfg.get("history") is not None:  # null: not a sequence model (the check after this names it)
        checked_setting(model_cfg["history"], "model.history", minimum=1, example=8)
    checked_setting(seed, "seed", minimum=0, maximum=SEED_MAX, example=0)
    # the seconds spent timing inference per batch size (0: one timed call each)
    checked_setting(latency_budget_s, "latency_budget_s", float, minimum=0, example=0.5)
    make_model(model_cfg["name"], 2, 1, where="model.params", **dict(model_cfg.get("params") or {}))


def _sklearn_key(message: str) -> str:
    """``model.params.KEY`` for the parameter a scikit-learn message names ("The 'C' parameter of
    LogisticRegression must be ..."), else ``model.params``."""
    import re

    found = re.search(r"The '(\w+)' parameter", message)
    key = {"n_jobs": "threads"}.get(found.group(1), found.group(1)) if found else None
    return f"model.params.{key}" if key else "model.params"


def train_and_evaluate(ds: Dataset, model_cfg: dict, seed: int = 0, latency_budget_s: float = 0.5) -> tuple:
    """Fit the model on the train split (early stopping on val), evaluate on test. The metrics
    carry the test predictions under ``_test_predictions`` (an array; pop it before logging)."""
    from dogi_ml.models import make_model
    from dogi_ml.models.evaluate import classification_metrics, inference_latency

    check_train_settings(model_cfg, seed, latency_budget_s)
    n_classes = len(ds.class_names)
    params = dict(model_cfg.get("params") or {})
    model = make_model(model_cfg["name"], n_classes, len(ds.feature_names), seed=seed, where="model.params", **params)
    seq = ds.X.ndim == 3
    if seq != model.sequence:
        raise ConfigError(
            f"model {model.name} {'needs' if model.sequence else 'does not take'} sequences",
            f"set model.history {'> 0' if model.sequence else 'to null'}",
        )
    model.scaler.log_columns = [i for i, f in enumerate(ds.feature_names) if f not in NO_LOG]
    tr, va, te = ds.splits["train"], ds.splits["val"], ds.splits["test"]
    t0 = time.perf_counter()
    try:
        model.fit(ds.X[tr], ds.y[tr], ds.X[va], ds.y[va])
    except Exception as exc:
        # scikit-learn checks its estimators' parameters at fit: a value the model's rules pass
        # and scikit-learn refuses (model.params.min_samples_leaf=1.5) is the user's to fix,
        # named by the estimator's own message
        if type(exc).__name__ != "InvalidParameterError":
            raise
        message = str(exc).splitlines()[0]
        raise ConfigError(
            f"{_sklearn_key(message)} for model {model_cfg['name']}: {message}",
            f"give a value the message accepts (conf/model/{model_cfg['name']}.yaml lists the defaults)",
        ) from None
    train_s = time.perf_counter() - t0
    pred = model.predict(ds.X[te])
    metrics = classification_metrics(ds.y[te], pred, n_classes)
    metrics.update(hot_included_metrics(ds, pred))
    metrics["_test_predictions"] = pred
    lat = inference_latency(model, ds.X[te], (1, 128), budget_s=latency_budget_s)
    metrics.update(
        {
            "train_seconds": train_s,
            "latency_ns_per_block": lat[128],
            "latency_ns_per_block_batch1": lat[1],
            "n_parameters": model.n_parameters(),
            "epochs_run": len(model.history),
        }
    )
    return model, metrics


def hot_included_metrics(ds: Dataset, pred: np.ndarray) -> dict:
    """The test rows as the paper scores them (DOGI Fig. 11): true classes hot, c1..c10 from each
    row's invalidation time against the model's c1..c10. The model's own labels fold the truly
    hot rows into c1 (they passed the hot filter as non-hot, and the model never predicts hot),
    so its ``accuracy`` counts a c1 prediction of a truly hot row as right; here it is wrong.

    ``accuracy_all_classes``: every test row, hot included (the paper's accuracy);
    ``accuracy_nonhot``: the rows truly c1..c10; ``hot_row_share``: the truly hot rows' share;
    ``all_classes``: per-class recall, precision, support and the confusion matrix over hot,
    c1..c10. Empty unless ``data.labels`` is ``dogi``."""
    if ds.info.get("labels") != "dogi":
        return {}
    from dogi_ml.models.evaluate import classification_metrics

    te = ds.splits["test"]
    true = L.dogi_classes(ds.inv[te], ds.info["capacity_blocks"], ds.info["mu"])
    said = np.asarray(pred) + 1  # model class k is c(k+1)
    full = classification_metrics(true, said, L.N_CATEGORIES + 1)
    nonhot = true > 0
    return {
        "accuracy_all_classes": full["accuracy"],
        "accuracy_nonhot": float(np.mean(true[nonhot] == said[nonhot])) if nonhot.any() else None,
        "hot_row_share": float(1.0 - nonhot.mean()) if true.size else None,
        "all_classes": {
            "class_names": ["hot", *ds.class_names],
            **{
                k: full[k]
                for k in ("per_class_recall", "per_class_precision", "support", "predicted", "confusion_matrix")
            },
        },
    }


def per_class_table(metrics: dict, class_names: list) -> dict:
    """``{recall, precision, support}`` per class name: over hot, c1..c10 when the metrics have
    them (``all_classes``), else over the model's classes."""
    src, names = metrics, class_names
    if metrics.get("all_classes"):
        src, names = metrics["all_classes"], metrics["all_classes"]["class_names"]
    return {
        key: {n: src[k][i] for i, n in enumerate(names)}
        for key, k in (("recall", "per_class_recall"), ("precision", "per_class_precision"), ("support", "support"))
    }


def plog_configuration(ds: Dataset, pred: np.ndarray) -> dict | None:
    """DOGI's group configuration for this model: PLog = <predicted category, actual
    invalidation time> of the test rows, scored over all 512 merges of c1..c10 (``markov``)."""
    if ds.info.get("labels") != "dogi":
        return None
    from dogi_ml.markov.groups import best_configuration

    cap = ds.info["capacity_blocks"]
    upper = np.append(L.category_bounds(cap, ds.info["mu"])[1:].astype(float), np.inf)
    te = ds.splits["test"]
    best = best_configuration(pred, np.minimum(ds.inv[te], 1e15).astype(float), upper, cap)
    names = ds.class_names
    return {
        "groups": [[names[c] for c in g] for g in best.groups],
        "bounds": best.bounds,
        "waf": best.waf,
        "fractions": best.fractions,
        "mispredict": best.mispredict,
    }


def run_train(cfg, out_dir: Path) -> dict:
    """The ``train`` command: build the dataset, fit, evaluate, log everything to MLflow (under
    the sweep's parent run with ``-m``)."""
    import json

    from omegaconf import OmegaConf

    from dogi_ml.features.selection import feature_report, plot_feature_report
    from dogi_ml.models.evaluate import plot_confusion
    from dogi_ml.pipeline.common import require_workload, sweep_dir
    from dogi_ml.report import console, print_feature_report, print_train_summary
    from dogi_ml.traces.workload import load_workload
    from dogi_ml.tracking import flatten, log_lifetime_model, mlflow_run

    require_workload(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    check_train_settings(resolved["model"], resolved.get("seed"), resolved.get("latency_budget_s"))
    wl, model_name = cfg.workload.name, cfg.model.name
    tags = {"workload": wl, "model": model_name, "command": "train"}
    with mlflow_run("train", f"{model_name} on {wl}", sweep_dir=sweep_dir(), tags=tags) as (mlflow, run):
        mlflow.log_params(
            {
                k: (str(v)[:500] if v is not None else "null")
                for k, v in flatten(resolved).items()
                if not k.startswith("hydra")
            }
        )
        console.print(f"[bold]train[/bold] {model_name} on {wl} (MLflow run {run.info.run_id[:8]})")
        trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
        history = cfg.model.get("history")
        ds = build_dataset(trace, resolved["data"], sequence_history=history, cache_dir=cfg.cache_dir)
        console.print(
            f"  {ds.info['block_writes']:,} block writes, {ds.info['sampled_rows']:,} sampled rows "
            f"({ds.info['n_train']:,} train / {ds.info['n_val']:,} val / {ds.info['n_test']:,} test), "
            f"features at {ds.info['features_blocks_per_s'] / 1e6:.1f} M blocks/s"
        )
        model, metrics = train_and_evaluate(
            ds, resolved["model"], seed=int(cfg.seed), latency_budget_s=float(cfg.latency_budget_s)
        )
        pred = metrics.pop("_test_predictions")
        plog_cfg = plog_configuration(ds, pred)
        if plog_cfg is not None:
            metrics["modelled_waf"] = plog_cfg["waf"]
            metrics["modelled_groups"] = len(plog_cfg["groups"])
            console.print(
                f"  PLog group configuration (DOGI §4.3, Markov model): {plog_cfg['groups']} "
                f"-> modelled WAF {plog_cfg['waf']:.3f}"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        model_path = model.save(out_dir / "model.pkl")
        full = metrics.get("all_classes")
        if full:  # the hot row shows where truly hot rows went
            cm_path = plot_confusion(
                full["confusion_matrix"],
                full["class_names"],
                out_dir / "confusion_matrix.png",
                title=f"{model_name} on {wl}: accuracy {metrics['accuracy_all_classes']:.3f} "
                f"(hot included), {metrics['accuracy_nonhot']:.3f} (non-hot)",
            )
        else:
            cm_path = plot_confusion(
                metrics["confusion_matrix"],
                ds.class_names,
                out_dir / "confusion_matrix.png",
                title=f"{model_name} on {wl}: accuracy {metrics['accuracy']:.3f}",
            )
        tr = ds.splits["train"]
        report = feature_report(ds.all_features[tr], ds.y[tr], seed=int(cfg.seed))
        report_path = out_dir / "feature_report.json"
        report_path.write_text(json.dumps(report, indent=2))
        plot_path = plot_feature_report(report, out_dir / "feature_report.png", title=f"feature relevance ({wl})")
        per_class = per_class_table(metrics, ds.class_names)
        summary = {
            "workload": wl,
            "model": model_name,
            **{k: v for k, v in metrics.items() if not isinstance(v, (dict, list))},
            "dataset": ds.info,
            "per_class": per_class,
            # the model's classes (dogi labels: truly hot rows counted as c1)
            "per_class_recall": {ds.class_names[c]: v for c, v in metrics["per_class_recall"].items()},
            "per_class_precision": {ds.class_names[c]: v for c, v in metrics["per_class_precision"].items()},
            "confusion_matrix": metrics["confusion_matrix"],
            "class_names": ds.class_names,
            "confusion_matrix_all_classes": full["confusion_matrix"] if full else None,
            "history": model.history,
            "mlflow_run_id": run.info.run_id,
            "plog_configuration": plog_cfg,
            "numerics": numerics_record(),  # the float code path that made it (dogi_ml.determinism)
        }
        metrics_path = out_dir / "metrics.json"
        metrics_path.write_text(json.dumps(summary, indent=2, default=float))
        (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        scalar = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and v is not None}
        scalar.update(
            {f"data_{k}": float(v) for k, v in ds.info.items() if isinstance(v, (int, float)) and v is not None}
        )
        scalar.update(
            {
                f"{key}_{name}": float(v)
                for key in ("recall", "precision")
                for name, v in per_class[key].items()
                if v is not None
            }
        )
        mlflow.log_metrics(scalar)
        for rec in model.history:
            for k in ("train_loss", "val_loss"):
                if k in rec:
                    mlflow.log_metric(k, rec[k], step=rec["epoch"])
        # the trained model as an MLflow model (runs:/<id>/model): its library's flavour, and a
        # python_function flavour that predicts as the model does (features scaled, classes mapped)
        model_uri = log_lifetime_model(model, model_path, ds.X[ds.splits["test"]][:5], ds.feature_names, ds.class_names)
        for path, sub in (
            (cm_path, None),
            (report_path, None),
            (plot_path, None),
            (metrics_path, None),
            (out_dir / "config.yaml", None),
        ):
            mlflow.log_artifact(str(path), artifact_path=sub)
        print_feature_report(report, ds.feature_names)
        print_train_summary(summary)
        console.print(f"metrics: {metrics_path}")
        console.print(f"MLflow model: runs:/{run.info.run_id}/model ({model_uri})")
    return summary
