"""The ``study`` command: every scheme on every volume of a fleet, aggregated as the papers do.

``python -m dogi_ml study fleet=PATH policy=a,b,c [filter=NAME] [volume=ID] [only=failed]``
reads a fleet (a manifest of per-volume ``.dtr`` traces, :mod:`dogi_ml.traces.fleet`), keeps the
volumes a paper's rule keeps (``conf/study_filter/``), and runs one job per (volume, scheme)
through the Hydra launcher of the user's choice (``hydra/launcher=joblib``, the default, or
``slurm``): each job composes ``conf/study.yaml`` with its scheme's ``conf/policy/`` config exactly
as a sweep job does, runs :func:`dogi_ml.pipeline.simulate.simulate` on its volume and writes one
record, ``OUT/jobs/<volume>/<scheme>.json`` (the result, or the error), atomically.

A job whose record says it ran on the same trace (the manifest's checksum), with the same
resolved ``policy`` and ``sim`` settings, the same code (git commit, plus a digest of uncommitted
changes) and numerics level is done and is skipped; a failed one is listed with its error and is
rerun with ``only=failed`` (or ``volume=ID``). After the jobs, the records become
``OUT/results.parquet`` (one row per job, the effective settings included) and the aggregates
(:func:`aggregate`): the overall WAF of each scheme (all writes over all user writes across the
volumes, SepBIT's "overall WA"), the per-volume WAF distribution (percentiles and a CDF plot),
per-volume winners and the reduction against a baseline scheme with its spread; written as
``OUT/aggregate.json``, ``OUT/aggregate.md`` and ``OUT/waf_cdf.png`` (drawn from ``OUT/waf_cdf.json``,
whose digest it records: ``report figures`` redraws it) and logged as the artifacts of
the study's MLflow parent run (each job is a child run). Any failed job makes the command exit
with status 1 after the aggregates are written.

The jobs go through Hydra's launcher API (the one a sweeper uses: ``launcher.launch(job
overrides)``), so only the jobs left to do are launched, whatever the launcher.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import traceback
from pathlib import Path

from dogi_ml.errors import ConfigError, UsageError, checked_setting

BLOCK_BYTES = 4096
GIB = 1 << 30
#: the code whose version a job's identity includes (docs and results excluded)
CODE_PATHS = ("dogi_ml", "conf", "features", "models", "export", "markov", "rl", "oracles")
RECORD_VERSION = 1
#: the run that exports a volume's bundle for ``study.frozen_bundle=same_trace``: its scheme per
#: frozen scheme, and the settings it runs with over that scheme's config
BUNDLE_SOURCE = {"dogi_frozen": "dogi", "hybrid_frozen": "hybrid"}
BUNDLE_RUN_PARAMS = {"deployed": "int8", "fallback_accuracy": 0.0, "fallback_compare": "none"}


# -- the code and the job's identity -------------------------------------------------------------
def code_version() -> str:
    """The git commit of the code (``CODE_PATHS``), with a digest of its uncommitted changes when
    there are any (two different dirty trees never share a version)."""
    from dogi_ml.provenance import ROOT, code_commit

    stamp = code_commit(CODE_PATHS)
    if stamp.startswith("unknown"):
        from importlib.metadata import version

        return f"dogi_ml {version('dogi_ml')} (not a git checkout)"
    if stamp.endswith("uncommitted changes"):
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", *CODE_PATHS], cwd=ROOT, capture_output=True, check=True
        ).stdout
        stamp += f" {hashlib.blake2b(diff, digest_size=6).hexdigest()}"
    return stamp


def job_key(policy_cfg: dict, sim_cfg: dict, checksum: str, code: str, numerics: str) -> str:
    """What a job's outcome depends on, as 24 hex digits: the resolved policy and sim settings
    (the output path aside), the trace's checksum, the code version and the numerics level."""
    sim = {k: v for k, v in sim_cfg.items() if k != "output"}
    payload = {"policy": policy_cfg, "sim": sim, "trace": checksum, "code": code, "numerics": numerics}
    return hashlib.blake2b(json.dumps(payload, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


def record_path(out: Path, volume: str, scheme: str) -> Path:
    from dogi_ml.traces.fleet import volume_file_name

    return Path(out) / "jobs" / Path(volume_file_name(volume)).stem / f"{scheme}.json"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def read_record(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


# -- one job: one scheme on one volume -----------------------------------------------------------
def study_job(cfg) -> dict:
    """A Hydra task: the job ``cfg.study.job`` names. Its record (result or error) is written
    whatever happens; the return value is a short summary for the launcher."""
    from omegaconf import OmegaConf

    from dogi_ml.determinism import numerics_mode
    from dogi_ml.traces.fleet import read_fleet

    job = cfg.study.job
    volume = str(job.volume)
    scheme = str(cfg.study.job.scheme)
    out = Path(cfg.out)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    sim_cfg = OmegaConf.to_container(cfg.sim, resolve=True)
    record = {
        "record_version": RECORD_VERSION,
        "volume": volume,
        "scheme": scheme,
        "batch": job.batch,
        "code_version": job.code_version,
        "numerics_mode": numerics_mode(),
        "config": {"policy": policy_cfg, "sim": sim_cfg},
    }
    started = time.perf_counter()
    try:
        entry = {v.volume: v for v in read_fleet(cfg.fleet)}.get(volume)
        if entry is None:
            raise UsageError(f"volume {volume!r} is not in the fleet {cfg.fleet}", "check volume=")
        record["trace_checksum"] = entry.checksum
        record["key"] = job_key(policy_cfg, sim_cfg, entry.checksum, job.code_version, record["numerics_mode"])
        if cfg.mlflow and job.parent_run:
            result = _run_logged(cfg, entry, policy_cfg, sim_cfg, record)
        else:
            result = _run(cfg, entry, policy_cfg, sim_cfg, record)
        record.update(_result_fields(result))
        record["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a job's failure is recorded and listed, not fatal to the study
        record["status"] = "failed"
        record["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        record["traceback"] = traceback.format_exc()[-4000:]
    record["elapsed_s"] = round(time.perf_counter() - started, 3)
    _write_atomic(record_path(out, volume, scheme), json.dumps(record, indent=1, sort_keys=True, default=_plain))
    word = f"WAF {record['waf']:.4f}" if record["status"] == "ok" else f"FAILED: {record['error']}"
    if os.environ.get("DOGI_ML_QUIET", "") != "1":
        print(f"study job {scheme} on volume {volume}: {word} ({record['elapsed_s']:.1f} s)", file=sys.stderr)
    return {"volume": volume, "scheme": scheme, "status": record["status"]}


def _run(cfg, entry, policy_cfg: dict, sim_cfg: dict, record: dict) -> dict:
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.policies.dogi_frozen import SAME_TRACE
    from dogi_ml.traces.binfmt import read_binary

    trace = read_binary(entry.dtr)
    trace.name = entry.volume
    if policy_cfg.get("name") in BUNDLE_SOURCE and (policy_cfg.get("params") or {}).get("bundle") == SAME_TRACE:
        policy_cfg = _same_trace_bundle(cfg, trace, policy_cfg, sim_cfg, record)
    return simulate(trace, policy_cfg, sim_cfg, progress=cfg.progress)


def _same_trace_bundle(cfg, trace, policy_cfg: dict, sim_cfg: dict, record: dict) -> dict:
    """``study.frozen_bundle=same_trace``: a DOGI run (``conf/policy/dogi.yaml``, its int8
    deployed model) over the job's own volume exports the bundle ``dogi_frozen`` then deploys,
    under ``OUT/bundles/<volume>/`` (for ``hybrid_frozen``: a hybrid run, ``conf/policy/hybrid.yaml``,
    under ``OUT/bundles/hybrid/<volume>/``). That run keeps its model on to the end
    (``fallback_accuracy=0``, ``fallback_compare=none``): a frozen deployment has no base design
    to fall back to, and a run that ended in DOGI's fallback would have no learned configuration
    to export. The record says where the bundle came from and with which settings (the frozen
    model has seen the trace it places: an in-sample deployment, not a held-out one)."""
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.common import CONF_DIR
    from dogi_ml.pipeline.replay import export_dogi_bundle
    from dogi_ml.traces.fleet import volume_file_name

    source = BUNDLE_SOURCE[policy_cfg["name"]]
    run_cfg = OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "policy" / f"{source}.yaml"), resolve=True)
    run_cfg["params"].update(BUNDLE_RUN_PARAMS)
    where = (
        Path(cfg.out) / "bundles" / ("" if source == "dogi" else source) / Path(volume_file_name(record["volume"])).stem
    )
    made = export_dogi_bundle(trace, run_cfg, sim_cfg, where)
    record["bundle"] = {
        "source": "same_trace",
        "path": made["bundle"],
        "run": source,
        "run_waf": made["waf"],
        "run_retrains": made["retrains"],
        "run_mode": made["mode"],
        "run_params": BUNDLE_RUN_PARAMS,
    }
    return {**policy_cfg, "params": {**policy_cfg["params"], "bundle": made["bundle"]}}


def _run_logged(cfg, entry, policy_cfg: dict, sim_cfg: dict, record: dict) -> dict:
    """The job as an MLflow child run of the study's parent run."""
    from dogi_ml.tracking import flatten, mlflow_run, override_labels

    scheme = record["scheme"]
    tags = {
        "mlflow.parentRunId": cfg.study.job.parent_run,
        "dogi_ml.source": "cli",
        "command": "study",
        "volume": entry.volume,
        "scheme": scheme,
        "policy": policy_cfg["name"],
        "trace_checksum": entry.checksum,
        "code_version": str(cfg.study.job.code_version),
        "job_key": record["key"],
    }
    with override_labels([]), mlflow_run("study", f"{scheme} on volume {entry.volume}", tags=tags) as (mlflow, run):
        record["mlflow_run_id"] = run.info.run_id
        result = _run(cfg, entry, policy_cfg, sim_cfg, record)
        params = {f"policy.{k}": v for k, v in flatten(policy_cfg).items()}
        params.update({f"sim.{k}": v for k, v in flatten(sim_cfg).items()})
        params.update({f"effective.{k}": v for k, v in flatten(result.get("settings") or {}).items()})
        mlflow.log_params({k: (str(v)[:500] if v is not None else "null") for k, v in params.items()})
        mlflow.log_metrics(
            {k: float(result[k]) for k in ("waf", "user_writes", "gc_writes", "elapsed_s") if result.get(k) is not None}
        )
    return result


def _result_fields(result: dict) -> dict:
    user, gc = int(result["user_writes"]), int(result["gc_writes"])
    return {
        "user_writes": user,
        "gc_writes": gc,
        "total_writes": user + gc,
        "waf": float(result["waf"]),
        "scheme_label": result.get("scheme") or result["policy"],
        "settings": result.get("settings") or {},
        "simulate_elapsed_s": result.get("elapsed_s"),
        "numerics": result.get("numerics"),
    }


def _plain(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# -- volume selection ----------------------------------------------------------------------------
def select_volumes(volumes: list, rule: dict) -> tuple[list, dict]:
    """The volumes a ``study_filter`` rule keeps, and why the others went: ``(kept, dropped)``
    with ``dropped = {reason: [volume ids]}``. Volumes without writes always go (no WAF)."""
    name = rule.get("name", "?")
    min_wss = checked_setting(rule.get("min_write_wss_gib"), "study_filter.min_write_wss_gib", float, minimum=0)
    min_ratio = checked_setting(rule.get("min_traffic_over_wss"), "study_filter.min_traffic_over_wss", float, minimum=0)
    inclusive = checked_setting(rule.get("inclusive"), "study_filter.inclusive", bool)

    def passes(value: float, bound: float) -> bool:
        return value >= bound if inclusive else value > bound

    kept, dropped = [], {}
    op = ">=" if inclusive else ">"
    for v in volumes:
        if v.write_blocks == 0 or v.working_set_blocks == 0:
            dropped.setdefault("no writes", []).append(v.volume)
        elif not passes(v.working_set_blocks * BLOCK_BYTES / GIB, min_wss):
            dropped.setdefault(f"{name}: write working set not {op} {min_wss:g} GiB", []).append(v.volume)
        elif not passes(v.write_blocks / v.working_set_blocks, min_ratio):
            dropped.setdefault(f"{name}: write traffic not {op} {min_ratio:g} x working set", []).append(v.volume)
        else:
            kept.append(v)
    return kept, dropped


# -- aggregates ----------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default ``linear`` method)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def aggregate(
    rows: list[dict], schemes: list[str], baseline: str, percentiles=(10, 25, 50, 75, 90), oracles=()
) -> dict:
    """The papers' fleet figures from the completed jobs' rows (dicts with ``volume``,
    ``scheme``, ``user_writes``, ``gc_writes``, ``waf``), over the volumes every scheme
    completed, so each scheme is measured on the same volumes:

    - ``overall``: per scheme, all writes over all user writes summed across those volumes
      (SepBIT §4.2's "overall WA");
    - ``per_volume``: per scheme, the per-volume WAF's mean, min, max and ``percentiles``;
    - ``winners``: per scheme, the volumes where its WAF is the lowest (a tie counts for each
      tied scheme; ``ties`` counts the volumes with one); ``winners_online``: the same among the
      schemes that are not ``oracles`` (those that read the future: FK, NoDaP, MINOS's oracles),
      as the papers compare schemes "except FK";
    - ``reduction``: per scheme, against ``baseline``: of the overall WAF,
      ``(WAF_base - WAF) / WAF_base`` in percent (positive: fewer writes than the baseline), and
      the same per volume, its mean and ``percentiles``.
    """
    by_volume: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_volume.setdefault(str(r["volume"]), {})[r["scheme"]] = r
    complete = sorted(v for v, per in by_volume.items() if all(s in per for s in schemes))
    out = {
        "schemes": list(schemes),
        "baseline": baseline,
        "percentiles": list(percentiles),
        "volumes": len(complete),
        "incomplete_volumes": sorted(set(by_volume) - set(complete)),
        "overall": {},
        "per_volume": {},
        "oracles": [s for s in schemes if s in oracles],
        "winners": {s: 0 for s in schemes},
        "ties": 0,
        "winners_online": {s: 0 for s in schemes if s not in oracles},
        "reduction": {},
    }
    if not complete:
        return out
    for s in schemes:
        user = sum(int(by_volume[v][s]["user_writes"]) for v in complete)
        gc = sum(int(by_volume[v][s]["gc_writes"]) for v in complete)
        wafs = [float(by_volume[v][s]["waf"]) for v in complete]
        out["overall"][s] = {"user_writes": user, "gc_writes": gc, "total_writes": user + gc, "waf": (user + gc) / user}
        out["per_volume"][s] = {
            "mean": sum(wafs) / len(wafs),
            "min": min(wafs),
            "max": max(wafs),
            **{f"p{q:g}": percentile(wafs, q) for q in percentiles},
        }
    online = [s for s in schemes if s not in oracles]
    for v in complete:
        best = min(float(by_volume[v][s]["waf"]) for s in schemes)
        winners = [s for s in schemes if float(by_volume[v][s]["waf"]) == best]
        out["ties"] += len(winners) > 1
        for s in winners:
            out["winners"][s] += 1
        if online:
            best = min(float(by_volume[v][s]["waf"]) for s in online)
            for s in online:
                out["winners_online"][s] += float(by_volume[v][s]["waf"]) == best
    base = out["overall"][baseline]["waf"]
    for s in schemes:
        per = [
            100.0
            * (float(by_volume[v][baseline]["waf"]) - float(by_volume[v][s]["waf"]))
            / float(by_volume[v][baseline]["waf"])
            for v in complete
        ]
        out["reduction"][s] = {
            "overall_pct": 100.0 * (base - out["overall"][s]["waf"]) / base,
            "per_volume_mean_pct": sum(per) / len(per),
            **{f"per_volume_p{q:g}_pct": percentile(per, q) for q in percentiles},
        }
    return out


def aggregate_markdown(agg: dict, title: str) -> str:
    """The aggregate as a Markdown table (WAFs to 4 decimals, reductions to 0.1%)."""
    pcts = agg["percentiles"]
    base = agg["baseline"]
    head = ["scheme", "overall WAF", f"vs {base} (overall)"]
    head += [f"per-volume WAF p{q:g}" for q in pcts]
    head += ["wins"] + (["wins without oracles"] if agg["oracles"] else [])
    head += [f"vs {base} per volume p{pcts[0]:g} / p50 / p{pcts[-1]:g}"]
    lines = [f"## {title}", "", f"{agg['volumes']} volumes (every scheme completed on each)", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in agg["schemes"]:
        if s not in agg["overall"]:
            continue
        red = agg["reduction"][s]
        cells = [s, f"{agg['overall'][s]['waf']:.4f}", f"{red['overall_pct']:+.1f}%"]
        cells += [f"{agg['per_volume'][s][f'p{q:g}']:.4f}" for q in pcts]
        spread = [red[f"per_volume_p{q:g}_pct"] for q in (pcts[0], 50, pcts[-1])]
        cells += [str(agg["winners"][s])]
        if agg["oracles"]:
            cells += [str(agg["winners_online"].get(s, "oracle"))]
        cells += [" / ".join(f"{x:+.1f}%" for x in spread)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Overall WAF: all writes (user + GC) over all user writes, summed across the volumes. "
        f"vs {base}: (WAF of {base} - WAF) / WAF of {base}, positive = fewer writes. "
        f"Wins: volumes where the scheme's WAF is the lowest ({agg['ties']} volumes with a tie count for each tied scheme)"
        + (
            f"; without oracles: the same among the schemes that do not read the future "
            f"(oracles: {', '.join(agg['oracles'])})."
            if agg["oracles"]
            else "."
        ),
    ]
    return "\n".join(lines) + "\n"


def cdf_data(rows: list[dict], schemes: list[str], volumes: list[str], title: str, oracles: tuple = ()) -> dict:
    """What the per-volume WAF CDF draws (``OUT/waf_cdf.json``): ``title``; ``schemes``, those of
    ``schemes`` with a WAF on one of ``volumes`` in their order (which gives each its colour);
    ``oracles``, those of them that read the future; and ``curves``, each scheme's WAFs over
    ``volumes``, sorted."""
    keep = set(volumes)
    curves = {}
    for s in schemes:
        wafs = sorted(float(r["waf"]) for r in rows if r["scheme"] == s and str(r["volume"]) in keep)
        if wafs:
            curves[s] = wafs
    return {"title": title, "schemes": list(curves), "oracles": [s for s in oracles if s in curves], "curves": curves}


def plot_cdf(data: dict, path: Path) -> Path:
    """The per-volume WAF CDF of each scheme (:func:`cdf_data`), as the papers draw it. With
    oracles among many schemes, a second panel zooms on the others (the oracles' curves sit far
    to the left and squeeze the rest into a sliver). The PNG records the digest of ``data``
    (:func:`dogi_ml.plotting.data_digest`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dogi_ml.plotting import data_digest, save_figure

    schemes, curves, oracles = data["schemes"], data["curves"], set(data["oracles"])
    online = [s for s in schemes if s not in oracles]
    zoom = bool(oracles) and len(online) >= 2
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(12 if zoom else 7.5, 4.8), squeeze=False)
    # 20 distinct colours, then the same colours with another line style (tab10 alone repeats
    # its colours from the 11th scheme on)
    colours = plt.get_cmap("tab20").colors
    styles = ("-", "--", "-.", ":")
    panels = [(axes[0][0], schemes, "every scheme")]
    if zoom:
        panels.append((axes[0][1], online, "without the oracles"))
    for ax, names, what in panels:
        for s in names:
            i = schemes.index(s)
            wafs = curves[s]
            n = len(wafs)
            ax.step(
                wafs,
                [(k + 1) / n for k in range(n)],
                where="post",
                label=s,
                lw=1.3,
                color=colours[i % 20],
                ls=styles[i // 20 % 4],
            )
        ax.set_xlabel("per-volume WAF")
        ax.set_ylabel("fraction of volumes")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if zoom:
            ax.set_title(what, fontsize=10)
    last = panels[-1][0]
    handles, labels = panels[0][0].get_legend_handles_labels()
    last.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(data["title"])
    return save_figure(fig, path, source=data_digest(data), title=data["title"])


def figure_data(prefix: str | Path) -> dict:
    """What the CDF ``PREFIX.png`` draws, read from ``PREFIX.json`` (``OUT/waf_cdf.json``, in
    docs/results ``fleet_study_waf_cdf.json``), or a clear exit: no such file, or one that is not
    a CDF's data (:func:`cdf_data`; the study's ``aggregate.json`` is not)."""
    from dogi_ml.plotting import redraw_source

    _, js, data = redraw_source(prefix)
    if not (
        isinstance(data, dict)
        and {"title", "schemes", "oracles", "curves"} <= data.keys()
        and isinstance(data["curves"], dict)
        and list(data["curves"]) == list(data["schemes"])
        and all(isinstance(w, list) and w for w in data["curves"].values())
    ):
        raise SystemExit(
            f"error: --redraw {prefix}: {js} is not a per-volume WAF CDF's data ({{title, schemes, oracles, "
            "curves}}, a study's OUT/waf_cdf.json); rerun the study (its jobs are skipped) to write it"
        )
    return data


def redraw(prefix: str | Path) -> Path:
    """``PREFIX.png`` anew from ``PREFIX.json`` alone (:func:`figure_data`); the title is the data's."""
    from dogi_ml.plotting import redraw_stem

    stem = redraw_stem(prefix)
    return plot_cdf(figure_data(stem), stem.with_suffix(".png"))


# -- the command ---------------------------------------------------------------------------------
def _normalise(argv: list[str]) -> list[str]:
    """The command line as Hydra overrides: ``filter=NAME`` is ``study_filter=NAME``; ``-m`` is
    implied (a study is always a sweep)."""
    out = []
    for a in argv:
        if a in ("-m", "--multirun"):
            continue
        if a.startswith("filter="):
            a = "study_filter=" + a[len("filter=") :]
        out.append(a)
    return out


def _composition_error(exc: Exception) -> ConfigError:
    """Hydra's multi-line composition errors as one line naming the key and the fix."""
    from hydra.errors import MissingConfigException

    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if isinstance(exc, MissingConfigException) or "Could not find" in first:
        options = [ln.strip() for ln in text.splitlines()[1:] if ln.startswith("\t") and "provider=" not in ln]
        group = first.split("Could not find '")[-1].split("/")[0] if "Could not find '" in first else "?"
        name = first.split("Could not find '")[-1].split("/", 1)[-1].rstrip("'") if "/" in first else "?"
        shown = "filter" if group == "study_filter" else group
        return ConfigError(f"{shown}={name} is not one of the {group} configs", f"use one of: {', '.join(options)}")
    if first.startswith("Could not override '"):
        key = first.split("'")[1]
        return ConfigError(
            f"study has no setting {key!r}",
            "use fleet=, policy=, filter=, volume=, only=, out=, study.baseline=, sim.* or policy.* "
            "(conf/study.yaml); a new policy.params key takes a leading +",
        )
    return ConfigError(f"study: {' '.join(text.split())}", "check the overrides against conf/study.yaml")


def _split_sweep(overrides: list[str]) -> tuple[list[str], list[str]]:
    """``(fixed overrides, policies)``: the ``policy=a,b,c`` sweep taken out; any other sweep is
    an error (a study sweeps schemes and volumes only)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed, policies = [], []
    for o, text in zip(parsed, overrides, strict=True):
        key = o.get_key_element()
        if key == "policy":
            policies = [str(v) for v in (o.sweep_iterator() if o.is_sweep_override() else [o.value()])]
        elif o.is_sweep_override():
            raise ConfigError(
                f"{key}: a study sweeps schemes (policy=a,b,c) and volumes only",
                f"run one study per value of {key}, each with its own out=DIR",
            )
        else:
            fixed.append(text)
    return fixed, policies


def _scheme_has(policy: str, path: list[str]) -> bool:
    """Whether scheme ``policy``'s config (``conf/policy/POLICY.yaml``) holds ``policy.<path>``."""
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.common import CONF_DIR

    node = OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "policy" / f"{policy}.yaml"), resolve=False)
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _default_policy() -> str:
    """The scheme conf/study.yaml runs when no policy= is given."""
    import yaml

    from dogi_ml.pipeline.common import CONF_DIR

    for entry in yaml.safe_load((Path(CONF_DIR) / "study.yaml").read_text())["defaults"]:
        if isinstance(entry, dict) and "policy" in entry:
            return str(entry["policy"])
    raise ConfigError("conf/study.yaml names no default policy", "give policy=NAME")


def check_params_overrides(fixed: list[str], policies: list[str]) -> None:
    """A ``policy.params.KEY=...`` override goes to every scheme of the study, and Hydra takes a
    key a scheme's config holds without a leading ``+`` and a new one only with it. Refuse, with
    advice that works, an override that would fail to compose for some scheme: ``KEY`` in some
    schemes' configs and not in the others' (no spelling composes for all; the advice was to add
    a ``+`` for the ones without it, then to drop it for the ones with it), a ``+`` on a key every
    scheme has, none on a key no scheme has. ``++`` (add or override) is the user's explicit
    choice and passes; a scheme that does not read the key refuses it in its jobs, naming it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from dogi_ml.pipeline.common import available

    if not set(policies) <= set(available("policy")):
        return  # an unknown scheme: the composition names it with the known ones
    for text, o in zip(fixed, OverridesParser.create().parse_overrides(fixed), strict=True):
        raw = o.get_key_element()
        key = raw.lstrip("+~")
        if not key.startswith("policy.params.") or raw.startswith(("++", "~")):
            continue
        value = text.split("=", 1)[1] if "=" in text else ""
        path = key.split(".")[1:]
        have = [p for p in policies if _scheme_has(p, path)]
        lack = [p for p in policies if p not in have]
        plus = raw.startswith("+")
        if have and lack:
            # without +, the schemes that lack the key fail to compose; with +, those that have it
            one = len(lack) == 1
            raise ConfigError(
                f"{key} is in the config of {', '.join(have)} and not of {', '.join(lack)}, and a study gives "
                "each policy.params override to every scheme: neither spelling, with or without +, composes for all",
                f"run {', '.join(have)} with {key}={value} in one study and {', '.join(lack)} in another (each "
                f"with its own out=); or, if {', '.join(lack)} {'reads' if one else 'read'} the parameter though "
                f"{'its config leaves' if one else 'their configs leave'} it out, give ++{key}={value}",
            )
        if plus and not lack:
            raise ConfigError(
                f"+{key}: {', '.join(have)} already {'has' if len(have) == 1 else 'have'} the setting {key}, "
                "and + adds a new key only",
                f"give {key}={value} without the leading +",
            )
        if not plus and not have:
            raise ConfigError(
                f"{key}: the config of {', '.join(lack)} has no such setting",
                f"check the name (conf/policy/{lack[0]}.yaml lists the scheme's parameters); a parameter "
                f"the scheme reads but its config leaves out takes a leading +: +{key}={value}",
            )


def _quoted(value: str) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_study(argv: list[str]) -> int:
    """The ``study`` command; returns the exit status (1 when a job of the study failed)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    try:
        return _study(argv)
    finally:
        # the study composes through Hydra's global instance and an in-process launcher sets the
        # last job's HydraConfig; left behind, they break the next Hydra use in the same process
        # (the Python API reads that job's config as its own: a test run after this one)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None


def _study(argv: list[str]) -> int:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from hydra.types import RunMode
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    from dogi_ml.determinism import numerics_mode
    from dogi_ml.pipeline.common import CONF_DIR, check_root_switches
    from dogi_ml.pipeline.simulate import checked_sim_config
    from dogi_ml.policies import policy_class
    from dogi_ml.policies.dogi_frozen import SAME_TRACE
    from dogi_ml.traces.fleet import manifest_path, read_fleet

    wall = time.perf_counter()
    overrides = _normalise(argv)
    if os.environ.get("DOGI_ML_QUIET", "") == "1":  # --quiet: Hydra's launcher lines too
        overrides += ["hydra.job_logging.root.level=WARNING", "hydra.hydra_logging.root.level=WARNING"]
    try:
        fixed, policies = _split_sweep(overrides)
    except HydraException as exc:
        raise _composition_error(exc) from None
    check_params_overrides(fixed, policies or [_default_policy()])
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2("study", create_config_search_path(CONF_DIR))
    try:
        master = hydra.compose_config("study", overrides, run_mode=RunMode.MULTIRUN, with_log_configuration=True)
        fleet_path = master.fleet
    except MissingMandatoryValue:
        raise ConfigError("no value for fleet", "give fleet=PATH (a fleet directory or its fleet.parquet)") from None
    except HydraException as exc:
        raise _composition_error(exc) from None
    if not policies:
        policies = [str(master.hydra.runtime.choices.policy)]
    if len(set(policies)) != len(policies):
        raise ConfigError(f"policy={','.join(policies)} names a scheme twice", "name each scheme once")
    baseline = master.study.baseline or ("sepbit" if "sepbit" in policies else policies[0])
    if baseline not in policies:
        raise ConfigError(
            f"study.baseline={baseline} is not one of the study's schemes ({', '.join(policies)})",
            f"add it to policy= or set study.baseline= to one of {', '.join(policies)}",
        )
    check_root_switches(master)  # plot=maybe ran as true (the CDF drawn) without a word
    only = master.only
    if only not in (None, "failed"):
        raise ConfigError(
            f"only={only!r} is not a job selection", "use only=failed, or leave it out (every job not done)"
        )
    percentiles = list(master.study.percentiles)
    for q in percentiles:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
            raise ConfigError(f"study.percentiles holds {q!r}", "give numbers from 0 to 100, e.g. [10,50,90]")
    if 50 not in percentiles:
        percentiles = sorted([*percentiles, 50])

    fleet = read_fleet(fleet_path)
    rule = OmegaConf.to_container(master.study_filter, resolve=True)
    kept, dropped = select_volumes(fleet, rule)
    wanted = master.volume
    if wanted is not None:
        wanted = [str(v) for v in (wanted if OmegaConf.is_list(wanted) else [wanted])]
        ids = {v.volume for v in fleet}
        kept_ids = {v.volume for v in kept}
        for v in wanted:
            if v not in ids:
                raise ConfigError(f"volume={v} is not in the fleet {fleet_path}", "give a volume id of its manifest")
            if v not in kept_ids:
                raise ConfigError(
                    f"volume={v} is left out by filter={rule.get('name')}",
                    "choose another volume, or filter=none",
                )
    if not kept:
        raise ConfigError(
            f"filter={rule.get('name')} keeps none of the fleet's {len(fleet)} volumes",
            "use filter=none or lower study_filter.min_write_wss_gib / min_traffic_over_wss",
        )
    fleet_dir = manifest_path(fleet_path).parent.resolve()
    out = (Path(master.out) if master.out else Path("studies") / fleet_dir.name).resolve()
    code = code_version()
    numerics = numerics_mode()
    batch = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"

    # every job of the study and its identity; a scheme's settings do not depend on the volume
    frozen_bundle = master.study.frozen_bundle
    if frozen_bundle not in (None, SAME_TRACE):
        raise ConfigError(
            f"study.frozen_bundle={frozen_bundle!r} is not a bundle source",
            f"use study.frozen_bundle={SAME_TRACE}, or leave it null and give policy.params.bundle=DIR",
        )
    scheme_cfg, scheme_overrides = {}, {}
    for p in policies:
        extra = []
        try:
            jc = hydra.config_loader.load_sweep_config(master, [*fixed, f"policy={p}"])
            if jc.policy.name in BUNDLE_SOURCE and frozen_bundle:
                if jc.policy.params.bundle:
                    raise ConfigError(
                        f"policy.params.bundle={jc.policy.params.bundle} and study.frozen_bundle={frozen_bundle} "
                        f"both say where {jc.policy.name}'s bundle comes from",
                        "keep one of them",
                    )
                extra = [f"policy.params.bundle={SAME_TRACE}"]
                jc = hydra.config_loader.load_sweep_config(master, [*fixed, f"policy={p}", *extra])
        except HydraException as exc:
            raise _composition_error(exc) from None
        pc = OmegaConf.to_container(jc.policy, resolve=True)
        sc = OmegaConf.to_container(jc.sim, resolve=True)
        if pc["name"] in BUNDLE_SOURCE and not (pc.get("params") or {}).get("bundle"):
            raise ConfigError(
                f"policy={p} deploys a {BUNDLE_SOURCE[pc['name']]} bundle and none is given",
                f"set study.frozen_bundle={SAME_TRACE} (a {BUNDLE_SOURCE[pc['name']]} run on each volume exports its bundle) or "
                "policy.params.bundle=DIR (one bundle, exported at the volumes' capacity)",
            )
        # a victim-rule conflict or a setting of a mode that is off stops the study before any job
        checked_sim_config(pc, sc)
        scheme_cfg[p] = (pc, sc)
        scheme_overrides[p] = extra
    if frozen_bundle and not any(pc["name"] in BUNDLE_SOURCE for pc, _ in scheme_cfg.values()):
        raise ConfigError(
            f"study.frozen_bundle={frozen_bundle} is set and no scheme of policy= deploys a bundle",
            f"add {' or '.join(BUNDLE_SOURCE)} to policy=, or leave study.frozen_bundle out",
        )
    plan = []  # (volume entry, scheme, key, previous record)
    for v in kept:
        for p in policies:
            key = job_key(*scheme_cfg[p], v.checksum, code, numerics)
            plan.append((v, p, key, read_record(record_path(out, v.volume, p))))

    def done(rec, key):
        return rec is not None and rec.get("status") == "ok" and rec.get("key") == key

    selected = {str(x) for x in wanted} if wanted is not None else None
    to_run, skipped = [], 0
    for v, p, key, rec in plan:
        if selected is not None and v.volume not in selected:
            continue
        if only == "failed":
            if rec is not None and rec.get("status") == "failed":
                to_run.append((v, p))
        elif done(rec, key):
            skipped += 1
        else:
            to_run.append((v, p))
    dropped_n = sum(len(x) for x in dropped.values())
    print(
        f"study: fleet {fleet_path}: {len(fleet)} volumes, filter={rule.get('name')} keeps {len(kept)}"
        + (f" ({'; '.join(f'{len(ids)} {why}' for why, ids in dropped.items())})" if dropped_n else "")
    )
    print(
        f"study: {len(plan)} jobs ({len(kept)} volumes x {len(policies)} schemes: {', '.join(policies)}); "
        f"{len(to_run)} to run, {skipped} already done (skipped)"
        + (f", {len(plan) - len(to_run) - skipped} not selected" if len(plan) - len(to_run) - skipped else "")
    )

    from dogi_ml.tracking import SigtermExit, end_parent_killed

    parent = _parent_run(master, out, policies, fleet_path, batch) if master.mlflow else None
    try:
        # a Ctrl-C or a kill (SIGTERM, as a scheduler's) ends the parent run KILLED, not RUNNING
        # forever; SIGTERM raises SystemExit(143) in here, with a watchdog should it be lost
        with SigtermExit(lambda: end_parent_killed(parent, "study") if parent else None):
            launch_error = None
            if to_run:
                # the user's settings (paths made absolute), then the job's own
                settings = [o for o in fixed if o.split("=", 1)[0] not in ("fleet", "out", "volume", "only")]
                job_overrides = [
                    [
                        *settings,
                        f"policy={p}",
                        *scheme_overrides[p],
                        f"fleet={_quoted(Path(fleet_path).resolve())}",
                        f"out={_quoted(out)}",
                        f"study.job.volume={_quoted(v.volume)}",
                        f"study.job.scheme={_quoted(p)}",
                        f"study.job.batch={_quoted(batch)}",
                        f"study.job.code_version={_quoted(code)}",
                        f"study.job.parent_run={_quoted(parent) if parent else 'null'}",
                    ]
                    for v, p in to_run
                ]
                launch_error = _launch(hydra, master, job_overrides)
                for v, p in to_run:  # a job that died before writing its record (killed, out of memory)
                    rec = read_record(record_path(out, v.volume, p))
                    if rec is None or rec.get("batch") != batch:
                        why = launch_error or "the launcher returned no result"
                        _write_atomic(
                            record_path(out, v.volume, p),
                            json.dumps(
                                {
                                    "volume": v.volume,
                                    "scheme": p,
                                    "batch": batch,
                                    "status": "failed",
                                    "error": f"no record: {why}",
                                }
                            ),
                        )

            # the study's state: every job's record, current or not
            rows, failed, missing = [], [], []
            for v, p, key, _ in plan:
                rec = read_record(record_path(out, v.volume, p))
                if rec is not None and rec.get("status") == "failed":
                    failed.append(rec)
                elif done(rec, key):
                    rows.append(rec)
                else:
                    missing.append((v.volume, p))
            oracles = [p for p in policies if getattr(policy_class(scheme_cfg[p][0]["name"]), "needs_future", False)]
            agg = aggregate(rows, policies, baseline, percentiles, oracles)
            agg.update(
                {
                    "fleet": str(Path(fleet_path).resolve()),
                    "fleet_volumes": len(fleet),
                    "filter": {**rule, "kept": len(kept), "dropped": {why: len(ids) for why, ids in dropped.items()}},
                    "code_version": code,
                    "numerics_mode": numerics,
                    "jobs": len(plan),
                    "failed": [{"volume": r["volume"], "scheme": r["scheme"], "error": r.get("error")} for r in failed],
                    "not_run": [{"volume": v, "scheme": p} for v, p in missing],
                }
            )
            files = _write_outputs(out, rows + failed, agg, policies, master.plot, fleet_path)
            wall = time.perf_counter() - wall
            _print_summary(agg, files, len(to_run), skipped, wall)
            if parent:
                _close_parent(parent, files, agg, len(to_run), skipped, wall)
    except BaseException:
        if parent:
            end_parent_killed(parent, "study")
        raise
    if failed:
        again = " ".join(a for a in argv if not a.startswith("only="))
        print(
            f"study: {len(failed)} job(s) failed; rerun them alone with: python -m dogi_ml study {again} only=failed",
            file=sys.stderr,
        )
        return 1
    return 0


def _launch(hydra, master, job_overrides: list[list[str]]) -> str | None:
    """Run the jobs through the configured Hydra launcher (what a sweeper does with a batch);
    returns the launcher's error, if it raised one (the jobs' records say which finished)."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.plugins import Plugins
    from hydra.types import HydraContext

    launcher = Plugins.instance().instantiate_launcher(
        hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks(master)),
        task_function=study_job,
        config=master,
    )
    try:
        launcher.launch(job_overrides, initial_job_idx=0)
    except Exception as exc:  # noqa: BLE001 - e.g. submitit's FailedJobError: the records tell the rest
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
    return None


def results_table(records: list[dict]):
    """The jobs' records as a ``pyarrow.Table``, one row per job (nested settings as JSON)."""
    import pyarrow as pa

    columns = {
        "volume": pa.string(),
        "scheme": pa.string(),
        "status": pa.string(),
        "user_writes": pa.int64(),
        "gc_writes": pa.int64(),
        "total_writes": pa.int64(),
        "waf": pa.float64(),
        "scheme_label": pa.string(),
        "settings": pa.string(),
        "config": pa.string(),
        "trace_checksum": pa.string(),
        "code_version": pa.string(),
        "numerics_mode": pa.string(),
        "key": pa.string(),
        "error": pa.string(),
        "elapsed_s": pa.float64(),
        "mlflow_run_id": pa.string(),
    }
    rows = []
    for r in sorted(records, key=lambda r: (_volume_order(r["volume"]), r["scheme"])):
        row = {c: r.get(c) for c in columns}
        for c in ("settings", "config"):
            row[c] = json.dumps(r[c], sort_keys=True) if r.get(c) is not None else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=pa.schema(list(columns.items())))


def _volume_order(volume: str):
    """Numeric ids in numeric order, others after them in text order."""
    return (0, int(volume), "") if str(volume).isdigit() else (1, 0, str(volume))


def _write_outputs(out: Path, records: list[dict], agg: dict, schemes: list[str], plot: bool, fleet_path) -> dict:
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    files = {}
    table = results_table(records)
    tmp = out / f"results.parquet.{os.getpid()}.tmp"
    pq.write_table(table, tmp)
    tmp.replace(out / "results.parquet")
    files["table"] = out / "results.parquet"
    title = f"fleet study: {Path(fleet_path).resolve().name}"
    _write_atomic(out / "aggregate.json", json.dumps(agg, indent=1, default=_plain) + "\n")
    files["json"] = out / "aggregate.json"
    _write_atomic(out / "aggregate.md", aggregate_markdown(agg, title))
    files["markdown"] = out / "aggregate.md"
    volumes = sorted({str(r["volume"]) for r in records} - set(agg["incomplete_volumes"]))
    if plot and agg["volumes"]:
        ok = [r for r in records if r.get("status") == "ok"]
        data = cdf_data(ok, schemes, volumes, f"{title} ({agg['volumes']} volumes)", tuple(agg["oracles"]))
        _write_atomic(out / "waf_cdf.json", json.dumps(data, indent=1) + "\n")
        files["plot_data"] = out / "waf_cdf.json"
        # drawn from the file as read back, so the figure's digest is the file's
        files["plot"] = plot_cdf(json.loads(files["plot_data"].read_text()), out / "waf_cdf.png")
    return files


def _print_summary(agg: dict, files: dict, ran: int, skipped: int, wall: float) -> None:
    print(f"study: ran {ran} jobs, skipped {skipped} already done, {len(agg['failed'])} failed ({wall:.1f} s)")
    if agg["volumes"]:
        base = agg["baseline"]
        width = max(len(s) for s in agg["schemes"])
        online = " wins w/o oracles" if agg["oracles"] else ""
        print(f"{'scheme':<{width}}  overall WAF  vs {base}  median per-volume WAF  wins{online}")
        for s in agg["schemes"]:
            o, red = agg["overall"][s], agg["reduction"][s]
            wins = f"{agg['winners_online'].get(s, 'oracle'):>17}" if online else ""
            print(
                f"{s:<{width}}  {o['waf']:11.4f}  {red['overall_pct']:+6.1f}%  "
                f"{agg['per_volume'][s]['p50']:21.4f}  {agg['winners'][s]:4d}{wins}"
            )
        print(f"over {agg['volumes']} volumes")
    if agg["incomplete_volumes"]:
        print(f"study: {len(agg['incomplete_volumes'])} volumes left out of the aggregates (a scheme not done on them)")
    for f in agg["failed"]:
        print(f"failed: {f['scheme']} on volume {f['volume']}: {f['error']}", file=sys.stderr)
    for name, path in files.items():
        print(f"{name}: {path}")


def _parent_run(master, out: Path, policies: list[str], fleet_path, batch: str) -> str:
    """The study's MLflow parent run (its children are the jobs); returns its id."""
    import mlflow

    from dogi_ml.tracking import experiment_id

    exp = experiment_id("study")  # also points mlflow at the project's tracking URI
    client = mlflow.MlflowClient()
    run = client.create_run(
        exp,
        run_name=f"study {Path(fleet_path).resolve().name} [{','.join(policies)}]",
        tags={"kind": "sweep", "command": "study", "dogi_ml.source": "cli", "study_out": str(out), "batch": batch},
    )
    return run.info.run_id


def _close_parent(run_id: str, files: dict, agg: dict, ran: int, skipped: int, wall: float) -> None:
    import mlflow

    from dogi_ml.tracking import experiment_id

    experiment_id("study")  # points mlflow at the project's tracking URI
    client = mlflow.MlflowClient()
    for path in files.values():
        client.log_artifact(run_id, str(path))
    client.log_metric(run_id, "jobs_run", ran)
    client.log_metric(run_id, "jobs_skipped", skipped)
    client.log_metric(run_id, "failed_jobs", len(agg["failed"]))
    client.log_metric(run_id, "wall_s", wall)
    for s, o in agg["overall"].items():
        client.log_metric(run_id, f"overall_waf.{s}", o["waf"])
    client.set_terminated(run_id, status="FAILED" if agg["failed"] else "FINISHED")
