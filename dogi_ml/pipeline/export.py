"""The ``export`` command: a trained model -> its deployed forms, checked and logged.

Source model: trained now through the ``train`` pipeline (default), or taken from an MLflow run
(``dogi_ml.export.run_id``) or a file (``dogi_ml.export.model_path``; the run's ``config.yaml`` beside it tells
the workload and data). The same dataset as training is rebuilt for calibration (train split)
and evaluation (test split). Written to ``export/run-<model>-<workload>-<run>/`` (or
``dogi_ml.export.out``): the C header, ``quantized.npz``, the float and int8 ONNX files, ``report.json``
(accuracy, parity, ONNX agreement, timings) and ``manifest.json``; all logged to MLflow
(experiment ``export``). ``export.targets`` chooses the builds: ``x86_64`` (the host C build,
its parity and ns/block) and the firmware targets of :mod:`dogi_ml.export.firmware`
(``cortex-m4``, ``cortex-r5``: cross-compiled, run under QEMU on the parity vectors, bit-exact,
with sizes, stack and instructions per block in the report and the manifest).
"""

from __future__ import annotations

import json
import pickle
import tempfile
import time
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, InputFileError, checked_setting
from dogi_ml.pipeline.common import require_workload

EXPERIMENT = "export"


def _first_difference(given, default, prefix: str) -> str | None:
    """``KEY=VALUE`` of the first leaf where ``given`` (a config section as plain data) differs
    from ``default``, None when they agree."""
    if isinstance(given, dict) and isinstance(default, dict):
        for key in [*default, *(k for k in given if k not in default)]:
            found = _first_difference(given.get(key), default.get(key), f"{prefix}.{key}")
            if found:
                return found
        return None
    return None if given == default else f"{prefix}={given}"


def check_stored_model_settings(cfg, source: str, *, model_only: bool = False) -> None:
    """Refuse a workload, model, data or training setting given with a stored model (``source``:
    ``export.run_id=ID``, or ``export.model_path=FILE`` with its run's config.yaml beside it): the
    export takes the model as trained and rebuilds its dataset from the run's own config, so
    ``+workload=zipf model=gru`` exported the run's MLP on its workload and said nothing. A section
    equal to its default (conf/export.yaml's groups) is no setting of the user's and passes.

    ``model_only``: a model file with no run config beside it, whose dataset the export builds
    from this command's workload and data settings (those are read), but whose model is the
    file's, so only a model setting would be ignored."""
    import yaml
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.common import CONF_DIR

    conf = Path(CONF_DIR)
    primary = yaml.safe_load((conf / "export.yaml").read_text())
    groups = {k: v for entry in primary["defaults"] if isinstance(entry, dict) for k, v in entry.items()}
    given = None
    if cfg.get("workload") is not None and not model_only:
        given = f"+workload={cfg.workload.get('name')}"
    for group in ("model",) if model_only else ("model", "data"):
        if given is None and group in cfg:
            default = OmegaConf.to_container(OmegaConf.load(conf / group / f"{groups[group]}.yaml"), resolve=True)
            mine = OmegaConf.to_container(cfg[group], resolve=True)
            if group == "model" and mine.get("name") != default.get("name"):
                given = f"model={mine.get('name')}"
            else:
                given = _first_difference(mine, default, group)
    if given is None and not model_only and cfg.get("latency_budget_s") != primary["latency_budget_s"]:
        given = f"latency_budget_s={cfg.latency_budget_s}"  # a training setting
    if given is not None and model_only:
        key = given.split("=", 1)[0]
        raise ConfigError(
            f"{given} is ignored with {source}: the file holds its own trained model (and no run config "
            "beside it); the export builds its dataset from this command's workload and data settings",
            f"drop {key}, or drop export.model_path to train a new model with it",
        )
    if given is not None:
        key = given.split("=", 1)[0]
        raise ConfigError(
            f"{given} is ignored with {source}: the export takes that run's trained model and rebuilds its "
            "dataset from the run's own config (workload, model, data)",
            f"drop {key}, or drop {source.split('=', 1)[0]} to train a new model with it",
        )


def _source(cfg, work_dir: Path, log) -> tuple:
    """``(model, source config, source info)`` for the configured source."""
    from omegaconf import OmegaConf

    from dogi_ml.models import LifetimeModel

    e = cfg.export
    if e.model_path and e.run_id:
        raise ConfigError("export.model_path and export.run_id both given", "give one of them, not both")
    if e.run_id:
        check_stored_model_settings(cfg, f"export.run_id={e.run_id}")
    elif e.model_path and (Path(e.model_path).parent / "config.yaml").exists():
        check_stored_model_settings(cfg, f"export.model_path={e.model_path}")
    elif e.model_path:
        check_stored_model_settings(cfg, f"export.model_path={e.model_path}", model_only=True)
    if e.model_path:
        path = Path(e.model_path)
        try:
            model = LifetimeModel.load(path)
        except (pickle.UnpicklingError, EOFError, ValueError, AttributeError, ImportError) as exc:
            # not a pickle, a truncated one, or another object (LifetimeModel.load's ValueError)
            raise InputFileError(
                f"export.model_path={path} is not a model a train run saved ({type(exc).__name__}: {exc})",
                "give the model.pkl a train run wrote (its run directory), or export.run_id=ID",
            ) from None
        conf = path.parent / "config.yaml"
        src_cfg = OmegaConf.load(conf) if conf.exists() else cfg
        run_id = None
        if conf.exists():
            metrics = path.parent / "metrics.json"
            if metrics.exists():
                run_id = json.loads(metrics.read_text()).get("mlflow_run_id")
        return (
            model,
            src_cfg,
            {
                "model_path": str(path.resolve()),
                "mlflow_run_id": run_id,
                "config": str(conf) if conf.exists() else None,
            },
        )
    if e.run_id:
        from dogi_ml.tracking import LIFETIME_MODEL_FILE, _mlflow

        mlflow = _mlflow()
        try:
            mlflow.MlflowClient().get_run(str(e.run_id))
        except Exception as exc:  # noqa: BLE001 - MLflow raises its own exception types
            raise ConfigError(
                f"MLflow run {e.run_id!r} not found in {mlflow.get_tracking_uri()} ({exc})",
                "give the id of a train run in this tracking store (mlflow ui lists them)",
            ) from exc
        dst = Path(tempfile.mkdtemp(dir=work_dir))
        try:
            model_file = mlflow.artifacts.download_artifacts(
                run_id=str(e.run_id), artifact_path=f"model/{LIFETIME_MODEL_FILE}", dst_path=str(dst)
            )
            conf_file = mlflow.artifacts.download_artifacts(
                run_id=str(e.run_id), artifact_path="config.yaml", dst_path=str(dst)
            )
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(
                f"MLflow run {e.run_id} has no model/{LIFETIME_MODEL_FILE} and config.yaml artifacts ({exc})",
                "give the id of a train run",
            ) from exc
        return LifetimeModel.load(model_file), OmegaConf.load(conf_file), {"mlflow_run_id": str(e.run_id)}
    from dogi_ml.pipeline.train import run_train

    require_workload(cfg)
    log(
        "[bold]export[/bold]: training the model first (the train pipeline; export.run_id=ID or "
        "export.model_path=FILE reuses one)"
    )
    train_dir = work_dir / "train"
    summary = run_train(cfg, train_dir)
    model = LifetimeModel.load(train_dir / "model.pkl")
    return (
        model,
        cfg,
        {"mlflow_run_id": summary["mlflow_run_id"], "model_path": str((train_dir / "model.pkl").resolve())},
    )


def _targets(e) -> list:
    """``export.targets`` checked: a list of known build targets, in the given order, once each."""
    from omegaconf import ListConfig

    from dogi_ml.export.firmware import VALID_TARGETS

    raw = e.get("targets")
    valid = ", ".join(VALID_TARGETS)
    if not isinstance(raw, (list, tuple, ListConfig)) or len(raw) == 0:
        raise ConfigError(f"export.targets={raw!r} is not a list of targets", f"give e.g. export.targets=[{valid}]")
    unknown = [t for t in raw if t not in VALID_TARGETS]
    if unknown:
        raise ConfigError(
            f"export.targets: unknown target {unknown[0]!r}", f"choose from {valid} (e.g. export.targets=[{valid}])"
        )
    return list(dict.fromkeys(str(t) for t in raw))


def _bounds(ds) -> dict | None:
    if ds.info.get("labels") != "dogi":
        return None
    from dogi_ml.features.labels import category_bounds

    b = category_bounds(ds.info["capacity_blocks"], ds.info["mu"])
    return {
        "hot_threshold_mu": int(b[0]),
        "upper_bounds": [int(v) for v in b[1:]],
        "meaning": "class c1 covers invalidation times (mu, upper[0]], c_i (upper[i-2], upper[i-1]], "
        "c10 above upper[8]; times in user-written blocks",
    }


def optional_build(report_c: dict, name: str, build):
    """``build()``, or None when it fails with an ExportError: an optional build (the host-tuned
    ``-march=native`` one only adds a timing row) is said, in ``report_c[name + "_skipped"]`` and on
    the console, not fatal."""
    from dogi_ml.export.quantize import ExportError
    from dogi_ml.report import console

    try:
        return build()
    except ExportError as err:
        report_c[f"{name}_skipped"] = str(err)[-500:]
        console.print(f"  [yellow]the {name} build failed, its row skipped: {str(err)[-200:]}[/yellow]")
        return None


def _check_export_settings(e) -> None:
    """The export's switches and sizes, by key, before anything is built (``export.batch=0``
    stopped the C benchmark with a floating-point exception, no message)."""
    for key in ("onnx", "bench"):
        checked_setting(e[key], f"export.{key}", bool)
    checked_setting(e.batch, "export.batch", minimum=1, example=128)
    checked_setting(e.parity_rows, "export.parity_rows", minimum=1, example=100000)
    checked_setting(e.bench_seconds, "export.bench_seconds", float, above=0, example=0.3)
    checked_setting(e.target_ns_per_block, "export.target_ns_per_block", float, above=0, example=50)
    # int() and float() named no key (input_bits=abc: "invalid literal for int()"); a bit width
    # other than the two the integer code has, and its 100-digit int(1e300), no fix
    bits = checked_setting(e.input_bits, "export.input_bits", example=16)
    if bits not in (8, 16):
        raise ConfigError(f"export.input_bits={bits} is not a width of the integer code", "give 8 or 16")
    checked_setting(e.input_margin, "export.input_margin", float, minimum=1.0, example=4.0)
    percentile = checked_setting(e.act_percentile, "export.act_percentile", float, above=0, example=99.99)
    if percentile > 100:
        raise ConfigError(f"export.act_percentile={percentile} is above 100", "give a percentile, e.g. 99.99")


def run_export(cfg, work_dir: Path) -> dict:
    """The ``export`` command body (see the module docstring)."""
    from omegaconf import OmegaConf

    from dogi_ml.export import onnx_export as ox
    from dogi_ml.export.bench import bench_deployed
    from dogi_ml.export.c_header import emit_header
    from dogi_ml.export.cbuild import build_shared, find_compiler, strict_compile
    from dogi_ml.export.manifest import load_export, write_manifest
    from dogi_ml.export.parity import all_identical, extreme_features, parity
    from dogi_ml.export.quantize import ExportError, quantize_model
    from dogi_ml.pipeline.train import build_dataset
    from dogi_ml.report import console
    from dogi_ml.traces.workload import load_workload
    from dogi_ml.tracking import flatten, log_artifacts_to_run, mlflow_run

    e = cfg.export
    _check_export_settings(e)
    targets = _targets(e)
    firmware_targets = [t for t in targets if t != "x86_64"]
    if firmware_targets:
        from dogi_ml.export.firmware import toolchain_problem

        why = toolchain_problem()
        if why:
            raise ConfigError(f"export.targets={targets}: {why}", "install them, or drop the Arm targets")
    work_dir.mkdir(parents=True, exist_ok=True)
    model, src_cfg, source = _source(cfg, work_dir, console.print)
    if "workload" not in src_cfg or src_cfg.workload is None:
        raise ConfigError(
            "the source model's workload is unknown (no config.yaml beside it)",
            "add +workload=NAME with the data settings it was trained with",
        )
    wl = src_cfg.workload.name
    run_tag = (source.get("mlflow_run_id") or time.strftime("%Y%m%d-%H%M%S"))[:8]
    out = Path(e.out) if e.out else Path("export") / f"run-{model.name}-{wl}-{run_tag}"
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]export[/bold] {model.name} on {wl} -> {out}")

    trace = load_workload(src_cfg.workload, cache_dir=cfg.cache_dir)
    history = src_cfg.model.get("history") if "model" in src_cfg else None
    data_cfg = OmegaConf.to_container(src_cfg.data, resolve=True)
    ds = build_dataset(trace, data_cfg, sequence_history=history if model.sequence else None, cache_dir=cfg.cache_dir)
    if ds.X.shape[-1] != model.n_features:
        raise ExportError(f"the dataset has {ds.X.shape[-1]} features, the model takes {model.n_features}")
    tr, te = ds.splits["train"], ds.splits["test"]
    X_test, y_test = ds.X[te], ds.y[te]
    report: dict = {"model": model.name, "workload": wl, "source": source, "test_rows": int(len(y_test))}

    # -- deployed integer form ----------------------------------------------------------------
    t0 = time.perf_counter()
    opts = {
        "input_bits": int(e.input_bits),
        "input_margin": float(e.input_margin),
        "act_percentile": float(e.act_percentile),
    }
    try:
        q = quantize_model(
            model, ds.X[tr], ds.class_names, ds.feature_names, **(opts if model.name in ("mlp", "gru") else {})
        )
    except ExportError as exc:
        q = None
        if model.name in ("mlp", "gru"):
            # the quantiser's own message names no setting (input_margin=1e300: "hidden-layer
            # multiplier ... too large"); these three are the ones that shape its scales
            given = " ".join(f"export.{key}={value:g}" for key, value in opts.items())
            problem, _, fix = str(exc).partition(" -- ")  # keep a fix the quantiser gave
            raise ExportError(f"{problem} (with {given})", fix or "check these export settings") from None
        if model.name not in ("tcn", "deepfm"):
            raise
        console.print(f"  {model.name}: no integer form (float ONNX only)")
    pred_float = model.predict(X_test)
    acc_float = float((pred_float == y_test).mean())
    report["accuracy"] = {"float": acc_float}
    files = {}
    if q is not None:
        pred_int = q.predict(X_test)
        acc_int = float((pred_int == y_test).mean())
        report["accuracy"].update(
            {
                "int": acc_int,
                "loss_points": 100 * (acc_float - acc_int),
                "float_int_agreement": float((pred_float == pred_int).mean()),
                "target_loss_points": 1.0,
            }
        )
        console.print(
            f"  quantised in {time.perf_counter() - t0:.1f} s: test accuracy float {acc_float:.4f}, "
            f"integer {acc_int:.4f} ({100 * (acc_float - acc_int):+.2f} points), "
            f"agreement {report['accuracy']['float_int_agreement']:.4f}"
        )
        header = f"{e.prefix}_{model.name}.h"
        (out / header).write_text(
            emit_header(q, e.prefix, source=source.get("mlflow_run_id") or source.get("model_path"))
        )
        np.savez(out / "quantized.npz", **q.arrays())
        files.update({"header": header, "arrays": "quantized.npz"})

    # -- ONNX -----------------------------------------------------------------------------------
    if e.onnx:
        f_onnx = ox.export_float(model, out / f"{model.name}_float.onnx", seq_len=history)
        files["onnx_float"] = f_onnx.name
        sess = ox.session(f_onnx)
        onnx_cls, _ = ox.run(sess, X_test, model.n_features)
        ref = ox.torch_classes(model, X_test) if getattr(model, "net", None) is not None else pred_float
        agree = float((onnx_cls == ref).mean())
        report["onnx"] = {
            "float_vs_" + ("pytorch" if getattr(model, "net", None) is not None else "model"): agree,
            "target": 0.999,
            "rows": int(len(ref)),
        }
        if q is not None and q.kind == "mlp":
            i_onnx = ox.export_qdq(q, model.scaler, out / f"{model.name}_int8_qdq.onnx")
            files["onnx_int8"] = i_onnx.name
            qcls, _ = ox.run(ox.session(i_onnx), X_test, model.n_features)
            report["onnx"]["int8_qdq_vs_integer_reference"] = float((qcls == pred_int).mean())
            report["onnx"]["int8_qdq_vs_float"] = float((qcls == pred_float).mean())
        console.print(
            "  ONNX (onnx.checker ok): "
            + ", ".join(f"{k} {v:.4%}" for k, v in report["onnx"].items() if isinstance(v, float) and k != "target")
        )

    # -- C: strict build, parity, timing --------------------------------------------------------
    cmodels = {}
    if firmware_targets and q is None:
        raise ConfigError(
            f"export.targets={targets}: {model.name} has no integer form to build as firmware",
            "export an mlp, gru, lightgbm or random_forest model, or give export.targets=[x86_64]",
        )
    if q is not None:
        if "x86_64" not in targets:
            report["c"] = {"skipped": "export.targets has no x86_64"}
        elif find_compiler() is None:
            report["c"] = {"skipped": "no C compiler (set CC)"}
            console.print("  [yellow]no C compiler: header not compiled, C parity skipped[/yellow]")
        else:
            checks = {"c99": strict_compile(out / header), "c++": strict_compile(out / header, cxx=True)}
            report["c"] = {
                k: {
                    "ok": v["ok"],
                    "command": v["command"],
                    "undefined_symbols": v["undefined"],
                    "errors": v["stderr"][-2000:],
                }
                for k, v in checks.items()
            }
            if not all(v["ok"] for v in checks.values()):
                raise ExportError(f"the generated header does not build strictly: {report['c']}")
            hidden = getattr(q, "hidden", 0)
            cmodels["c_O2"] = build_shared(out / header, q.kind, q.n_features, q.n_classes, hidden=hidden)
            if q.kind == "mlp":  # the x86-64 SSE2 pass alone (what a CPU without AVX2 runs)
                cmodels["c_O2_sse2_only"] = build_shared(
                    out / header, q.kind, q.n_features, q.n_classes, extra_flags=(f"-D{e.prefix.upper()}_NO_AVX2",)
                )
            native = optional_build(
                report["c"],
                "march_native",
                lambda: build_shared(
                    out / header, q.kind, q.n_features, q.n_classes, hidden=hidden, extra_flags=("-march=native",)
                ),
            )
            if native is not None:
                cmodels["c_O2_march_native"] = native
        flat_ref = X_test.reshape(-1, model.n_features)
        X_par = extreme_features(model.n_features, int(e.parity_rows), seed=int(cfg.seed), reference=flat_ref)
        t0 = time.perf_counter()
        par = parity(
            q,
            X_par,
            cmodels.get("c_O2"),
            other_builds={"sse2_only": cmodels["c_O2_sse2_only"]} if "c_O2_sse2_only" in cmodels else None,
        )
        if q.kind == "gru" and "c_O2" in cmodels:
            c_cls, c_logits = cmodels["c_O2"].gru_sequences(X_test)
            ref_logits = q.logits_int(X_test)
            par["sequences_python_vs_c"] = {
                "classes_equal": int((c_cls == ref_logits.argmax(1)).sum()),
                "logits_equal_rows": int((c_logits == ref_logits).all(1).sum()),
                "identical": bool(np.array_equal(c_logits, ref_logits)),
                "histories": int(len(X_test)),
            }
        par["all_identical"] = all_identical(par)
        report["parity"] = par
        console.print(
            f"  parity on {par['vectors']:,} feature vectors (extremes included) in "
            f"{time.perf_counter() - t0:.1f} s: "
            + ", ".join(
                f"{k} {v['classes_equal']:,} classes / {v['logits_equal_rows']:,} logit rows equal"
                for k, v in par.items()
                if isinstance(v, dict)
            )
        )
        if not par["all_identical"]:
            raise ExportError(f"integer implementations disagree: {par}")
        if firmware_targets:
            report["firmware"] = _firmware(q, out, files, header, firmware_targets, X_par, int(cfg.seed), console)

    if e.bench:
        onnx_paths = {}
        if "onnx_float" in files:
            onnx_paths["onnxruntime_float"] = out / files["onnx_float"]
        if "onnx_int8" in files:
            onnx_paths["onnxruntime_int8_qdq"] = out / files["onnx_int8"]
        bench_rows = X_test if not model.sequence else X_test[:, -1, :]
        if model.sequence:  # per-step timing for the GRU; the float models take whole histories
            onnx_paths = {}
        report["ns_per_block"] = bench_deployed(
            model if not model.sequence else None,
            q,
            np.ascontiguousarray(bench_rows),
            batch=int(e.batch),
            cmodels=cmodels,
            onnx_paths=onnx_paths,
            min_seconds=float(e.bench_seconds),
        )
        report["ns_per_block"]["target_c"] = float(e.target_ns_per_block)

    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    files["report"] = "report.json"
    if q is not None:
        write_manifest(
            out,
            q,
            model,
            files,
            source={**source, "workload": wl, "data": OmegaConf.to_container(src_cfg.data, resolve=True)},
            bounds=_bounds(ds),
            metrics=report.get("accuracy"),
            header_prefix=e.prefix,
            firmware=report.get("firmware"),
        )
        load_export(out)  # the loader accepts what was written
    else:
        from dogi_ml.export.manifest import FORMAT, FORMAT_VERSION, sha256, versions

        (out / "manifest.json").write_text(
            json.dumps(
                {
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "model": {"name": model.name, "deployed": None},
                    "features": {"order": ds.feature_names, "count": len(ds.feature_names)},
                    "classes": {"names": ds.class_names, "count": len(ds.class_names), "bounds": _bounds(ds)},
                    "artifacts": {r: {"path": f, "sha256": sha256(out / f)} for r, f in files.items()},
                    "source": source,
                    "versions": versions(),
                },
                indent=2,
            )
        )

    with mlflow_run(
        EXPERIMENT,
        f"export {model.name} on {wl}",
        tags={
            "command": "export",
            "model": model.name,
            "workload": wl,
            "source_run_id": str(source.get("mlflow_run_id")),
        },
    ) as (mlflow, run):
        mlflow.log_params(
            {k: str(v)[:500] for k, v in flatten(OmegaConf.to_container(e, resolve=True), "export.").items()}
        )
        metrics = {"accuracy_float": report["accuracy"]["float"]}
        if q is not None:
            metrics.update(
                {
                    "accuracy_int": report["accuracy"]["int"],
                    "accuracy_loss_points": report["accuracy"]["loss_points"],
                    "float_int_agreement": report["accuracy"]["float_int_agreement"],
                }
            )
            for k, v in report.get("parity", {}).items():
                if isinstance(v, dict):
                    metrics[f"parity_{k}_classes_equal"] = v["classes_equal"]
                    metrics[f"parity_{k}_logits_equal_rows"] = v["logits_equal_rows"]
        for k, v in report.get("onnx", {}).items():
            if isinstance(v, float) and k != "target":
                metrics[f"onnx_{k}"] = v
        for k, v in report.get("ns_per_block", {}).items():
            if isinstance(v, float) and not k.startswith("target"):
                metrics[f"ns_per_block_{k}"] = v
        for t, fw in report.get("firmware", {}).items():
            name = t.replace("-", "_")
            for k in ("text_bytes", "rodata_bytes", "stack_high_water_bytes", "ram_bytes"):
                metrics[f"firmware_{name}_{k}"] = fw[k]
            metrics[f"firmware_{name}_instructions_worst"] = fw["instructions_per_block"]["worst"]
            metrics[f"firmware_{name}_instructions_mean"] = fw["instructions_per_block"]["mean"]
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        mlflow.log_artifacts(str(out), artifact_path="export")
        report["mlflow_run_id"] = run.info.run_id
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    if q is not None:  # report.json changed (run id): refresh its digest
        m = json.loads((out / "manifest.json").read_text())
        from dogi_ml.export.manifest import sha256

        m["artifacts"]["report"]["sha256"] = sha256(out / "report.json")
        m["artifacts"]["report"]["bytes"] = (out / "report.json").stat().st_size
        m["source"]["export_mlflow_run_id"] = report["mlflow_run_id"]
        (out / "manifest.json").write_text(json.dumps(m, indent=2))
    if e.run_id or not e.model_path:  # the train run it exported gets the files too (issue 41)
        log_artifacts_to_run(source["mlflow_run_id"], out, "export")
    _print_summary(report, out, console)
    return report


def _firmware(q, out: Path, files: dict, header: str, targets: list, X_par, seed: int, console) -> dict:
    """Each firmware target built from the header and run under QEMU on the parity vectors
    (:func:`dogi_ml.export.firmware.firmware_check`); the images stay in ``out/firmware/<target>/``
    (the vectors and raw outputs are removed) and join the manifest's artefacts."""
    from dogi_ml.export.firmware import firmware_check

    reports = {}
    for t in targets:
        t0 = time.perf_counter()
        fw = firmware_check(q, out / header, t, X_par, out / "firmware" / t, seed=seed)
        for name in ("fw_in.bin", "fw_out.bin", "fw_meta.bin"):
            (out / "firmware" / t / name).unlink(missing_ok=True)
        files[f"firmware_{t}"] = f"firmware/{t}/image.elf"
        reports[t] = fw
        ipb = fw["instructions_per_block"]
        console.print(
            f"  firmware {t} ({fw['runs_on']}): bit-exact on {fw['vectors']:,} vectors in "
            f"{time.perf_counter() - t0:.1f} s; .text {fw['text_bytes']:,} B, .rodata {fw['rodata_bytes']:,} B, "
            f"stack {fw['stack_high_water_bytes']:,} B, RAM {fw['ram_bytes']:,} B, instructions/block "
            f"worst {ipb['worst']:,} mean {ipb['mean']:,.1f}"
        )
    return reports


def _print_summary(r: dict, out: Path, console) -> None:
    from rich.table import Table

    t = Table(title=f"export: {r['model']} on {r['workload']}", show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    acc = r["accuracy"]
    t.add_row("test accuracy, float", f"{acc['float']:.4f}")
    if "int" in acc:
        t.add_row("test accuracy, integer", f"{acc['int']:.4f} ({-acc['loss_points']:+.2f} points; target >= -1)")
    par = r.get("parity")
    if par:
        who = sorted(
            {
                name
                for k in par
                if isinstance(par[k], dict)
                for name in k.replace("python_vs_", "").split("_")
                if name in ("numba", "c")
            }
        )
        label = "bit-exact (Python/" + "/".join(w.capitalize() if w == "numba" else "C" for w in who) + ")"
        t.add_row(label, f"{'yes' if par['all_identical'] else 'NO'} on {par['vectors']:,} vectors")
    if "float_int_agreement" in acc:
        t.add_row("float/integer class agreement", f"{acc['float_int_agreement']:.4%}")
    for k, v in r.get("onnx", {}).items():
        if isinstance(v, float) and k != "target":
            t.add_row(f"ONNX {k.replace('_', ' ')}", f"{v:.4%}")
    for tname, fw in r.get("firmware", {}).items():
        ipb = fw["instructions_per_block"]
        t.add_row(
            f"firmware {tname}: .text+.rodata / stack / instr. per block (worst, mean)",
            f"{fw['text_bytes'] + fw['rodata_bytes']:,} B / {fw['stack_high_water_bytes']:,} B / "
            f"{ipb['worst']:,}, {ipb['mean']:,.0f}",
        )
    nb = r.get("ns_per_block", {})
    if nb:
        t.add_row(f"ns/block, batch {nb['batch']}, one core", "")
    for k, v in nb.items():
        if isinstance(v, float) and not k.startswith("target"):
            t.add_row(f"  {k}", f"{v:,.1f}")
    console.print(t)
    if "c_O2" in nb and r["model"] == "mlp":
        path = r.get("parity", {}).get("python_vs_c", {}).get("batch_path")
        console.print(
            f"C header (-O2, one core{', ' + path + ' pass' if path else ''}): {nb['c_O2']:.1f} ns/block "
            f"at batch {nb['batch']} "
            f"(target <= {nb['target_c']:.0f}: {'met' if nb['c_O2'] <= nb['target_c'] else 'not met'})"
        )
    console.print(f"export: {out}")
    console.print(f"report: {out / 'report.json'}")
