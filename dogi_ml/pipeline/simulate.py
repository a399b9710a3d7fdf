"""The ``simulate`` stage: workload + policy + sim config -> WAF and friends, and the
``simulate`` command (summary, JSON, plot, one MLflow run per simulation)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import numpy as np

from dogi_ml.determinism import numerics_record
from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.pipeline.common import multirun, require_workload, sim_config, sweep_dir
from dogi_ml.policies import KEEP_VICTIM, check_policy_numbers, configured_victim, make_policy, policy_params
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.trace import Trace, lbas_to_compact
from dogi_ml.traces.workload import workload_capacity


def simulation_writes(trace: Trace, capacity: int | None) -> tuple[np.ndarray, int]:
    """The user-write stream and logical capacity for a run.

    Written LBAs are compacted (order-preserving) to ``0..wss-1`` when they would not fit the
    capacity, e.g. a file trace whose dense address space also holds read-only blocks."""
    writes = trace.block_writes
    cap = int(capacity) if capacity else workload_capacity(trace)
    uniq = lbas_to_compact(writes, cap)
    if uniq is not None:
        if uniq.size > cap:
            # the capacity is sim's when given, else the workload's (a generator's never is smaller)
            key = "sim.capacity_blocks" if capacity else "workload.capacity_blocks"
            raise ConfigError(
                f"{key}={cap} is smaller than the trace's write working set ({uniq.size} distinct blocks)",
                "raise it or leave it null",
            )
        writes = np.searchsorted(uniq, writes).astype(np.int64)
    return np.ascontiguousarray(writes, dtype=np.int64), cap


def timed_config(config: SimConfig) -> bool:
    """Whether a run of ``config`` gives every write a wall-clock time (the engine's
    ``Simulator.timed``): the chunk layer or background GC is on. Background GC with only one of
    its two keys set is the engine's error, so either key counts here."""
    return bool(config.raid_chunk_blocks) or (
        config.gc_background_free_ratio is not None or config.gc_idle_gap_us is not None
    )


def check_mode_settings(config: SimConfig, victim_rule: str | None = None, *, victims_by: str | None = None) -> None:
    """Refuse a sim setting that only a mode reads when that mode is off and the value is not the
    default: the run would go on without it and the user would read its figures as theirs
    (``sim.victim_d=3`` with greedy victims ran greedy, WAF to the last digit unchanged).

    ``victim_rule`` is the rule the run resolved (``configured_victim``; None: only ``sim.victim``
    is known). ``sim.victim_d`` passes when either names d-choices: with ``sim.victim_for=followers``
    a scheme that keeps its own rule is told so by ``kept_victim_note``, and the value still serves
    the schemes that follow. ``victims_by``: what chooses the victims in a command whose runs no
    ``sim.victim`` changes (the oracles), so nothing there reads ``sim.victim_d``. Checked here, in
    the pipeline, and not in the engine: the engine's sources are NoDaP's journal fingerprint
    (``oracles.nodap.simulation_code_version``)."""
    defaults = {f.name: f.default for f in fields(SimConfig)}

    def changed(key: str) -> bool:
        return getattr(config, key) != defaults[key]

    if changed("victim_d") and victims_by:
        raise ConfigError(
            f"sim.victim_d={config.victim_d} is read only by d-choices victim selection, and {victims_by} "
            "chooses the victims here",
            "drop sim.victim_d",
        )
    if changed("victim_d") and "d_choices" not in (config.victim, victim_rule):
        rule = victim_rule or config.victim or "greedy"
        raise ConfigError(
            f"sim.victim_d={config.victim_d} is read only by d-choices victim selection, and this run's "
            f"victim rule is {rule}",
            "set sim.victim=d_choices to use it, or drop sim.victim_d",
        )
    if changed("gc_free_segments") and config.gc_free_ratio is not None:
        raise ConfigError(
            f"sim.gc_free_segments={config.gc_free_segments} and sim.gc_free_ratio={config.gc_free_ratio} both "
            "set the foreground GC's low watermark, and the ratio replaces the count",
            "give one of them: drop sim.gc_free_segments, or set sim.gc_free_ratio=null",
        )
    if changed("gc_garbage_ratio") and config.gc_trigger != "garbage_proportion":
        raise ConfigError(
            f"sim.gc_garbage_ratio={config.gc_garbage_ratio} is read only by the garbage-proportion GC trigger, "
            f"and this run's is sim.gc_trigger={config.gc_trigger}",
            "set sim.gc_trigger=garbage_proportion to use it, or drop sim.gc_garbage_ratio",
        )
    if changed("raid_chunk_timeout_us") and not config.raid_chunk_blocks:
        raise ConfigError(
            f"sim.raid_chunk_timeout_us={config.raid_chunk_timeout_us} is read only by the RAID chunk layer "
            "(ADAPT), which is off (sim.raid_chunk_blocks=0)",
            "set sim.raid_chunk_blocks=BLOCKS (e.g. 16) to turn it on, or drop sim.raid_chunk_timeout_us",
        )
    if changed("arrival") and not timed_config(config):
        raise ConfigError(
            f"sim.arrival={config.arrival} sets the writes' wall-clock times, which only a timed run reads "
            "(the RAID chunk layer or background GC), and this run is not timed",
            "set sim.raid_chunk_blocks=BLOCKS (or sim.gc_background_free_ratio with sim.gc_idle_gap_us) to "
            "time it, or drop sim.arrival",
        )


def checked_sim_config(policy_cfg: Mapping, sim_cfg: Mapping) -> SimConfig:
    """The ``sim`` group as a :class:`SimConfig` for a run of ``policy_cfg``, every check that
    needs no trace passed: a known ``sim.arrival`` process, the victim rule the scheme resolves
    (a conflict is an error) and no setting of a mode that is off (:func:`check_mode_settings`)."""
    config = sim_config(sim_cfg)
    check_arrival(config.arrival, config.seed)  # a misspelt process is named as such first
    rule, _ = configured_victim(policy_cfg, sim_cfg)
    check_mode_settings(config, rule)
    return config


def check_arrival(arrival, seed: int = 1) -> None:
    """``sim.arrival`` is one :func:`write_times` reads: a misspelt process is an error wherever it
    is set, before :func:`check_mode_settings` says whether the run reads it at all."""
    from dogi_ml.traces.generators import density_arrivals

    if arrival is None or arrival == "spread":
        return
    try:
        density_arrivals(1, arrival if isinstance(arrival, str) else float(arrival), seed)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"sim.arrival={arrival!r}: {exc}", "use null, spread, light, medium, heavy or a mean gap in µs"
        ) from None


def write_times(trace: Trace, arrival=None, seed: int = 1) -> np.ndarray:
    """Wall-clock time (µs, non-decreasing) of every user-written block: its request's time stamp.

    ``arrival`` (``sim.arrival``): None keeps the trace's own stamps; ``spread`` spreads requests
    that share a coarse stamp evenly up to the next one; ``light``/``medium``/``heavy`` or a mean
    gap in µs replace the stamps by a seeded arrival process over the trace's requests
    (:func:`dogi_ml.traces.generators.density_arrivals`)."""
    from dogi_ml.traces.generators import GeneratorParameterError, density_arrivals, spread_ties

    if arrival is None:
        ts = trace.ts_us
    elif arrival == "spread":
        ts = spread_ties(trace.ts_us)
    else:
        check_arrival(arrival, seed)  # a bad value is refused there, by key
        try:
            ts = density_arrivals(trace.n_requests, arrival if isinstance(arrival, str) else float(arrival), seed)
        except GeneratorParameterError as exc:  # a mean gap whose clock ends past int64 on this trace
            raise ConfigError(exc.named("sim.arrival"), "give a smaller mean gap in µs") from None
    ts = np.maximum.accumulate(np.asarray(ts, dtype=np.int64))
    times = ts[trace.block_write_request]
    return np.ascontiguousarray(times - (times[0] if times.size else 0), dtype=np.int64)


#: NoDaP's offline search when ``policy.params.max_groups`` / ``min_gain`` are left null
NODAP_SEARCH_DEFAULTS = {"max_groups": 10, "min_gain": 0.05}


def check_nodap_search_knobs(params: Mapping) -> None:
    """NoDaP's ``max_groups`` and ``min_gain`` steer its offline search only: with explicit
    ``bounds`` nothing would read them, so a value set there is refused rather than ignored."""
    if params.get("bounds") == "search":
        return
    for key in NODAP_SEARCH_DEFAULTS:
        if params.get(key) is not None:
            raise ConfigError(
                f"policy.params.{key}={params[key]} steers NoDaP's offline search, which explicit "
                f"policy.params.bounds skip",
                f"drop policy.params.{key} (or set policy.params.bounds=search)",
            )


def build_simulator(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping) -> tuple[Simulator, np.ndarray]:
    """A ready :class:`Simulator` and the writes to feed it (``sim.times`` holds the writes'
    wall-clock times when the run is timed: chunk layer or background GC)."""
    config = checked_sim_config(policy_cfg, sim_cfg)  # before NoDaP's search, which takes minutes
    writes, cap = simulation_writes(trace, config.capacity_blocks)
    params = policy_params(policy_cfg)
    check_policy_numbers(policy_cfg["name"], params)
    n_groups = policy_cfg.get("n_groups")
    search_info = None
    if policy_cfg["name"] == "nodap":
        check_nodap_search_knobs(params)
    if policy_cfg["name"] == "nodap" and params.get("bounds") == "search":
        # NoDaP's offline configuration search (grow N until WAF improves < 5%) on this very trace
        from dogi_ml.oracles.nodap import search
        from dogi_ml.pipeline.cache import nodap_journal

        max_groups, min_gain = params.pop("max_groups", None), params.pop("min_gain", None)
        journal = nodap_journal(writes, cap, config)
        search_info = search(
            writes,
            cap,
            config,
            max_groups=NODAP_SEARCH_DEFAULTS["max_groups"]
            if max_groups is None
            else checked_setting(max_groups, "policy.params.max_groups", minimum=2, example=10),
            min_gain=NODAP_SEARCH_DEFAULTS["min_gain"]
            if min_gain is None
            else checked_setting(min_gain, "policy.params.min_gain", float, minimum=0.0, below=1.0, example=0.05),
            journal=journal,
        )
        if search_info["simulations_read_back"]:
            print(
                f"NoDaP search: {search_info['simulations_read_back']} simulations read back from {journal}",
                file=sys.stderr,
            )
        params["bounds"] = search_info["bounds"]
        params["sizes"] = search_info["sizes"]  # None: the shared pool won
        n_groups = search_info["n_groups"]
    if policy_cfg["name"] == "nodap":  # its search's knobs (null here: check_nodap_search_knobs), not the policy's
        params.pop("max_groups", None)
        params.pop("min_gain", None)
    policy = make_policy(policy_cfg["name"], n_groups, victim=policy_cfg.get("victim", KEEP_VICTIM), **params)
    policy.search_info = search_info
    stream = writes if policy.needs_future else None
    sim = Simulator(policy, config, cap, stream=stream, trace=trace)
    sim.times = write_times(trace, config.arrival, config.seed) if sim.timed else None
    return sim, writes


def simulate(
    trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, progress: bool = True, *, checkpoint_dir=None
) -> dict:
    """Run one policy over a trace; returns the result dict (see ``Simulator.result``).

    With ``sim.checkpoint_every`` (user writes) or ``sim.checkpoint_minutes`` set, the run saves
    its whole state into ``sim.checkpoint_dir`` (else ``checkpoint_dir``) at chunk boundaries
    and, when a checkpoint of this very job is there, resumes from it: the result is the
    uninterrupted run's to the last digit (:mod:`dogi_ml.sim.checkpoint`). A finished run deletes
    its checkpoint."""
    checkpointer = _checkpointer(trace, policy_cfg, sim_cfg, checkpoint_dir)
    restored = checkpointer.load() if checkpointer is not None else None
    if restored is not None:
        sim, position = restored
        writes = checkpointer.externals["writes"]
    else:
        sim, writes = build_simulator(trace, policy_cfg, sim_cfg)
        position = 0
        if checkpointer is not None:
            problem = getattr(sim.policy, "checkpoint_problem", lambda: None)()
            if problem:
                raise ConfigError(f"sim.checkpoint_every/checkpoint_minutes: {problem}", "or leave checkpoints off")
            checkpointer.externals["times"] = sim.times
            checkpointer.externals["stream"] = sim.ctx.stream
        times = sim.times
        sim.prefill(int(times[0]) if times is not None and times.size else 0)
    times = sim.times
    rest = writes[position:]
    rest_times = None if times is None else times[position:]
    after_chunk = None
    restore_signal = None
    if checkpointer is not None:

        def after_chunk(s, applied: int) -> None:
            checkpointer.after_chunk(s, position + applied)

        restore_signal = _defer_preemption(checkpointer)
    from dogi_ml.progress import enabled

    try:
        if enabled(progress):  # off with --quiet, when stderr is not a terminal, or progress=false
            from dogi_ml.progress import bar as progress_bar

            with progress_bar(writes.size, f"{sim.policy.name}", "blk", unit_scale=True) as bar:
                bar.update(position)
                sim.feed(rest, progress=bar.update, times=rest_times, after_chunk=after_chunk)
        else:
            sim.feed(rest, times=rest_times, after_chunk=after_chunk)
    finally:
        if restore_signal is not None:
            restore_signal()
    result = sim.result()
    result["workload"] = trace.name
    result["numerics"] = numerics_record()  # the float code path that made it (dogi_ml.determinism)
    if getattr(sim.policy, "search_info", None):
        result["nodap_search"] = sim.policy.search_info
    if checkpointer is not None:
        checkpointer.remove()
    return result


def _checkpointer(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, checkpoint_dir):
    """The run's :class:`~dogi_ml.sim.checkpoint.Checkpointer`, None when checkpoints are off.

    Its identity is what the outcome depends on: the trace (name and a digest of its writes and
    time stamps), the policy and sim settings (not the checkpoint keys, nor the output path) and
    the code version; its externals are the trace and the write stream, which a checkpoint
    refers to instead of copying."""
    from dogi_ml.sim.checkpoint import Checkpointer, array_digest, code_version, flat_identity
    from dogi_ml.sim.engine import CHECKPOINT_KEYS

    config = sim_config(sim_cfg)
    if config.checkpoint_every is None and config.checkpoint_minutes is None:
        if config.checkpoint_dir is not None:
            raise ConfigError(
                f"sim.checkpoint_dir={config.checkpoint_dir} is set but no checkpoint is taken",
                "set sim.checkpoint_every=WRITES or sim.checkpoint_minutes=MINUTES too, or leave it null",
            )
        return None
    directory = config.checkpoint_dir or checkpoint_dir
    if not directory:
        raise ConfigError(
            "sim.checkpoint_every/checkpoint_minutes need a directory for the checkpoint",
            "set sim.checkpoint_dir=PATH (one per job)",
        )
    writes, cap = simulation_writes(trace, config.capacity_blocks)
    settings = {k: v for k, v in dict(sim_cfg).items() if k not in (*CHECKPOINT_KEYS, "output")}
    identity = {
        "trace.name": json.dumps(trace.name),
        "trace.digest": array_digest(writes, trace.ts_us),
        **flat_identity("policy", dict(policy_cfg)),
        **flat_identity("sim", settings),
        "code.version": code_version(),
    }
    externals = {"trace": trace, "writes": writes}
    externals.update({f"trace.{k}": v for k, v in vars(trace).items() if isinstance(v, np.ndarray)})

    def lazy_times():
        return write_times(trace, config.arrival, config.seed)

    def lazy_stream():
        if not config.prefill:
            return writes
        return np.concatenate([np.arange(cap, dtype=np.int64), writes])

    externals["times"] = lazy_times  # built on a resume only if the checkpoint refers to them
    externals["stream"] = lazy_stream
    return Checkpointer(
        directory,
        identity,
        every_writes=config.checkpoint_every,
        every_minutes=config.checkpoint_minutes,
        externals=externals,
        random_extra={"torch": (_torch_rng_state, _set_torch_rng_state)},
    )


def _torch_rng_state():
    """torch's global generator state if torch is loaded (None: the run never touched it)."""
    import sys

    torch = sys.modules.get("torch")
    return None if torch is None else torch.random.get_rng_state()


def _set_torch_rng_state(state) -> None:
    import torch

    torch.random.set_rng_state(state)


def _defer_preemption(checkpointer):
    """Inside a submitit job (a Hydra launcher's SLURM job), its preemption signal waits for the
    next chunk boundary: the run saves a checkpoint there, then submitit requeues the job, which
    resumes from it. Returns the function that puts the handler back (None outside submitit)."""
    import os

    if "SUBMITIT_FOLDER" not in os.environ and "SUBMITIT_EXECUTOR" not in os.environ:
        return None
    try:
        import submitit

        signum = submitit.JobEnvironment()._usr_sig()
    except Exception:  # not a submitit job after all (e.g. a leftover variable)
        return None
    return checkpointer.defer_signal(signum)


def write_json(result: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=_json_default))
    return path


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_simulate(cfg, out_dir: Path) -> float:
    """The ``simulate`` command: one policy over one workload; returns the WAF (Hydra's sweep
    result)."""
    from omegaconf import OmegaConf

    from dogi_ml.report import print_sim_summary
    from dogi_ml.traces.workload import load_workload

    require_workload(cfg)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    # a victim-rule conflict or a setting of a mode that is off fails before the trace is read
    checked_sim_config(policy_cfg, OmegaConf.to_container(cfg.sim, resolve=True))
    if cfg.get("mlflow", True):
        from dogi_ml.tracking import experiment_id

        # the run is logged at its end: a tracking store MLflow will not open is refused now,
        # not after the simulation has run
        experiment_id("simulate")
    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    deployed = (cfg.get("model") or {}).get("deployed")
    if deployed:
        # model.deployed=int8: the learned scheme places with the exported integer model
        if "deployed" not in (policy_cfg.get("params") or {}):
            raise ConfigError(
                f"model.deployed={deployed} needs a learned policy with a deployed form, "
                f"not policy={policy_cfg['name']}",
                "use policy=dogi",
            )
        policy_cfg["params"]["deployed"] = deployed
    # the job's own directory: a requeued SLURM job (the submitit launcher) runs in the same one
    result = simulate(
        trace,
        policy_cfg,
        OmegaConf.to_container(cfg.sim, resolve=True),
        progress=cfg.progress,
        checkpoint_dir=out_dir / "checkpoint",
    )
    out = Path(cfg.sim.output) if cfg.sim.output else out_dir / "result.json"
    if cfg.get("output") and not multirun():
        out = Path(cfg.output)  # a single run: output=PATH.json is the result itself
    result["workload_config"] = OmegaConf.to_container(cfg.workload, resolve=True)
    # the policy as configured: two runs whose labels agree are told apart by it in the reports
    result["policy_config"] = policy_cfg
    write_json(result, out)
    print_sim_summary(result)
    print(f"result: {out}")
    png = None
    if cfg.get("plot", True):
        from dogi_ml.report import plot_results

        png = plot_results([result], out.with_suffix(".png"))
        print(f"plot:   {png}")
    if cfg.get("mlflow", True):
        _log_simulation(cfg, result, [out, png])
    return result["waf"]


def _log_simulation(cfg, result: dict, files) -> None:
    """One MLflow run per simulation (a child of the sweep's parent run under ``-m``)."""
    from omegaconf import OmegaConf

    from dogi_ml.tracking import flatten, mlflow_run

    scheme = result.get("scheme") or result["policy"]
    tags = {
        "workload": str(result.get("workload")),
        "policy": result["policy"],
        "scheme": scheme,
        "command": "simulate",
    }
    with mlflow_run("simulate", f"{scheme} on {result.get('workload')}", sweep_dir=sweep_dir(), tags=tags) as (
        mlflow,
        _,
    ):
        params = {
            k: v
            for k, v in flatten(OmegaConf.to_container(cfg, resolve=True)).items()
            if k.split(".")[0] in ("policy", "sim", "workload")
        }
        # what the run did, after defaults and the scheme's own rules (e.g. its victim rule)
        params.update({f"effective.{k}": v for k, v in flatten(result.get("settings") or {}).items()})
        mlflow.log_params({k: (str(v)[:500] if v is not None else "null") for k, v in params.items()})
        metrics = {
            k: float(result[k])
            for k in (
                "waf",
                "user_accuracy",
                "gc_accuracy",
                "mispredict_ratio",
                "inference_ns_per_block",
                "train_seconds",
                "appends_per_second",
                "elapsed_s",
                "gc_writes",
                "user_writes",
            )
            if isinstance(result.get(k), (int, float))
        }
        mlflow.log_metrics(metrics)
        series = result.get("waf_series") or {}
        for i, w in enumerate(series.get("waf", [])[:1000]):
            mlflow.log_metric("waf_window", w, step=i)
        for f in files:
            if f is not None and Path(f).exists():
                mlflow.log_artifact(str(f))
