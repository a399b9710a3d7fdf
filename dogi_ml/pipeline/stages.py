"""DVC stages: ``python -m dogi_ml stage NAME [params=params.yaml] [out=data/dvc]``.

Small steps with explicit files between them, so ``dvc repro`` reruns only what changed:

    generate  params[workload]                  -> trace.dtr
    annotate  trace.dtr                         -> annotation.npz
    features  trace.dtr annotation.npz, [data]  -> dataset.npz
    train     dataset.npz, [model, seed]        -> model.pkl
    evaluate  model.pkl dataset.npz             -> metrics.json, confusion_matrix.png, feature_report.json

Parameters come from ``params.yaml`` (the file DVC tracks), in the same shape as the Hydra
config groups (``workload``, ``data``, ``model``, ``seed``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, UsageError

STAGES = ("generate", "annotate", "features", "train", "evaluate")


#: the top-level keys of params.yaml the stages read
PARAMS_KEYS = ("workload", "data", "model", "seed", "latency_budget_s")


def _params(path: Path) -> dict:
    """params.yaml as a dict: a file that is not YAML, not a mapping, or has a top-level key no
    stage reads (a misspelt ``modle:`` would run the defaults) is refused by name."""
    import yaml
    from omegaconf import OmegaConf

    from dogi_ml.errors import checked_setting, did_you_mean

    if not path.exists():
        raise FileNotFoundError(f"parameters file not found: {path} (DVC stages read params.yaml)")
    try:
        p = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(
            f"{path}: not valid YAML{line}: {getattr(exc, 'problem', None) or exc}", "fix the file"
        ) from None
    if not isinstance(p, dict):
        raise ConfigError(
            f"{path}: the parameters are not a mapping", "give workload:, data:, model: ... as in params.yaml"
        )
    for key in p:
        if key not in PARAMS_KEYS:
            hint = did_you_mean("", str(key), PARAMS_KEYS)
            raise ConfigError(
                f"{path}: no stage reads the top-level key {key!r}",
                f"{hint + ' ' if hint else ''}the stages read {', '.join(PARAMS_KEYS)}",
            )
    # the train and evaluate stages' own numbers (int()/float() named no key; workload: and data:
    # are checked where they are read, as for the train command)
    try:
        if p.get("seed") is not None:
            checked_setting(p["seed"], "seed", int, minimum=0, example=0)
        if p.get("latency_budget_s") is not None:
            checked_setting(p["latency_budget_s"], "latency_budget_s", float, minimum=0.0, example=0.2)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return p


def generate(p: dict, out: Path) -> None:
    from dogi_ml.traces.binfmt import write_trace
    from dogi_ml.traces.workload import load_workload

    trace = load_workload(p["workload"], cache_dir=None)
    write_trace(trace, out / "trace.dtr")
    (out / "trace.stats.json").write_text(json.dumps(trace.stats(), indent=2, default=float))


def annotate(p: dict, out: Path) -> None:
    from dogi_ml.oracles.annotate import annotate as ann
    from dogi_ml.traces.binfmt import read_binary

    inv, prev = ann(read_binary(out / "trace.dtr").block_writes)
    np.savez(out / "annotation.npz", inv=inv, prev=prev)


def features(p: dict, out: Path) -> None:
    from dogi_ml.pipeline.train import build_dataset
    from dogi_ml.traces.binfmt import read_binary

    trace = read_binary(out / "trace.dtr")
    with np.load(out / "annotation.npz") as z:
        if z["inv"].size != trace.block_writes.size:
            raise ConfigError(
                f"{out / 'annotation.npz'} does not belong to {out / 'trace.dtr'}", "rerun the annotate stage"
            )
    ds = build_dataset(trace, p.get("data", {}), sequence_history=(p.get("model") or {}).get("history"), cache_dir=None)
    np.savez(
        out / "dataset.npz",
        X=ds.X,
        y=ds.y,
        rows=ds.rows,
        inv=ds.inv,
        all_features=ds.all_features,
        meta=json.dumps(
            {
                "feature_names": ds.feature_names,
                "class_names": ds.class_names,
                "splits": {k: [v.start, v.stop] for k, v in ds.splits.items()},
                "info": ds.info,
            },
            default=float,
        ),
    )


def _load_dataset(out: Path):
    from dogi_ml.pipeline.train import Dataset

    with np.load(out / "dataset.npz") as z:
        meta = json.loads(str(z["meta"]))
        return Dataset(
            X=z["X"],
            y=z["y"],
            rows=z["rows"],
            inv=z["inv"],
            feature_names=meta["feature_names"],
            class_names=meta["class_names"],
            splits={k: slice(*v) for k, v in meta["splits"].items()},
            all_features=z["all_features"],
            info=meta["info"],
        )


def train(p: dict, out: Path) -> None:
    from dogi_ml.pipeline.train import train_and_evaluate

    ds = _load_dataset(out)
    model, _ = train_and_evaluate(ds, p["model"], seed=int(p.get("seed", 0)), latency_budget_s=0.0)
    model.save(out / "model.pkl")


def evaluate(p: dict, out: Path) -> None:
    from dogi_ml.features.selection import feature_report
    from dogi_ml.models import LifetimeModel
    from dogi_ml.models.evaluate import classification_metrics, inference_latency, plot_confusion

    ds = _load_dataset(out)
    model = LifetimeModel.load(out / "model.pkl")
    te = ds.splits["test"]
    m = classification_metrics(ds.y[te], model.predict(ds.X[te]), len(ds.class_names))
    lat = inference_latency(model, ds.X[te], (1, 128), budget_s=float(p.get("latency_budget_s", 0.2)))
    metrics = {
        "accuracy": m["accuracy"],
        "macro_f1": m["macro_f1"],
        "majority_baseline": m["majority_baseline"],
        "latency_ns_per_block": lat[128],
        "latency_ns_per_block_batch1": lat[1],
        "n_test": int(te.stop - te.start),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    plot_confusion(
        m["confusion_matrix"], ds.class_names, out / "confusion_matrix.png", title=f"accuracy {m['accuracy']:.3f}"
    )
    tr = ds.splits["train"]
    (out / "feature_report.json").write_text(json.dumps(feature_report(ds.all_features[tr], ds.y[tr]), indent=2))


def run_stage(name: str, params: str | Path = "params.yaml", out: str | Path = "data/dvc") -> None:
    if name not in STAGES:
        raise UsageError(f"unknown stage {name!r}", f"use one of: {', '.join(STAGES)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    globals()[name](_params(Path(params)), out)
    print(f"stage {name}: done ({out})")
