"""``python -m dogi_ml bench``: simulator and annotation throughput, with ratios to targets."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import psutil
from rich.table import Table

from dogi_ml.determinism import numerics_mode, numerics_record
from dogi_ml.oracles.annotate import annotate
from dogi_ml.policies import KEEP_VICTIM, check_policy_numbers, make_policy, policy_params
from dogi_ml.report import console
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.generators import ZipfSampler


def _pin_one_core() -> str:
    """Targets are per core: pin the process to one CPU where the OS allows it."""
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def bench_policies(
    writes: np.ndarray, capacity: int, segment_blocks: int, op_ratio: float, policies, victims
) -> list[dict]:
    rows = []
    for name in policies:
        for victim in victims:
            # policy.victim=null: the row runs the named rule, also for a scheme with a rule of its own
            policy = make_policy(name, victim=None)
            cfg = SimConfig(
                segment_blocks=segment_blocks, op_ratio=op_ratio, victim=victim, chunk_blocks=max(1 << 20, writes.size)
            )
            sim = Simulator(policy, cfg, capacity, stream=writes if policy.needs_future else None)
            sim.prefill()
            sim.feed(writes)
            r = sim.result()
            rows.append(
                {
                    "policy": name,
                    "victim": victim,
                    "waf": r["waf"],
                    "user_writes": r["user_writes"],
                    "gc_writes": r["gc_writes"],
                    "elapsed_s": r["elapsed_s"],
                    "compile_s": r["compile_s"],
                    "appends_per_second": r["appends_per_second"],
                }
            )
            console.print(
                f"  {name:<8} {victim:<14} WAF {r['waf']:.3f}  {r['appends_per_second'] / 1e6:6.1f} M appends/s"
            )
    return rows


def bench_annotation(writes: np.ndarray, repeats: int = 3) -> dict:
    annotate(writes[:1000])  # compile outside the timing
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        annotate(writes)
        best = min(best, time.perf_counter() - t0)
    return {"blocks": int(writes.size), "elapsed_s": best, "blocks_per_second": writes.size / best}


def bench_features(writes: np.ndarray, capacity: int, every: int = 10) -> dict:
    """DOGI feature extraction over the whole stream (state updated for every block write,
    rows kept for one in ``every``, as training samples them)."""
    from dogi_ml.features.extract import FeatureConfig, extract_features
    from dogi_ml.traces.trace import OP_WRITE, Trace

    n = writes.size
    trace = Trace(
        np.arange(n, dtype=np.int64),
        writes,
        np.ones(n, np.int32),
        np.full(n, OP_WRITE, np.uint8),
        np.zeros(n, np.int32),
    )
    cfg = FeatureConfig(capacity_blocks=capacity)
    rows = np.arange(0, n, every, dtype=np.int64)
    extract_features(trace, cfg, rows=rows[:10])  # compile outside the timing
    t0 = time.perf_counter()
    extract_features(trace, cfg, rows=rows)
    el = time.perf_counter() - t0
    return {"blocks": int(n), "elapsed_s": el, "blocks_per_second": n / el}


def bench_mlp_training(n: int = 300_000, epochs: int = 10, seed: int = 0) -> dict:
    """The DOGI MLP (6 -> 32 -> 32 -> 10, batch 128, Adam) on ``n`` samples for ``epochs``."""
    from dogi_ml.models import make_model

    rng = np.random.Generator(np.random.PCG64(seed))
    X = rng.normal(size=(n, 6))
    y = np.clip((X[:, 0] * 2 + X[:, 1] + rng.normal(scale=0.5, size=n)).round() + 5, 0, 9).astype(np.int64)
    model = make_model("mlp", 10, 6, seed=seed, epochs=epochs, patience=epochs)
    model.scaler.log_columns = []
    small = make_model("mlp", 10, 6, seed=seed, epochs=1)
    small.scaler.log_columns = []
    small.fit(X[:1000], y[:1000])  # compile outside the timing
    t0 = time.perf_counter()
    model.fit(X, y)
    el = time.perf_counter() - t0
    return {
        "samples": n,
        "epochs": epochs,
        "elapsed_s": el,
        "parameters": model.n_parameters(),
        "train_accuracy": float((model.predict(X[:20000]) == y[:20000]).mean()),
    }


def _learned(policy) -> bool:
    """Whether a policy computes features of the trace (it then needs the whole trace)."""
    from dogi_ml.policies._sequence import SequencePolicy
    from dogi_ml.policies.dogi import DOGI

    return isinstance(policy, (DOGI, SequencePolicy))


def _peak_rss_bytes() -> int:
    """The process's peak resident set size (``ru_maxrss``; the current RSS where unavailable)."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux
    except (ImportError, OSError):
        return int(psutil.Process().memory_info().rss)


def zipf_workload(capacity: int, write_volume: float, theta: float, seed: int) -> dict:
    """``conf/workload/zipf.yaml`` at this capacity, volume, exponent and seed: the workload (and so
    the cached trace) ``simulate +workload=zipf`` with those settings uses."""
    from omegaconf import OmegaConf

    import dogi_ml.conf

    conf_dir = Path(dogi_ml.conf.__file__).resolve().parent
    wl = OmegaConf.to_container(OmegaConf.load(conf_dir / "workload" / "zipf.yaml"), resolve=True)
    wl.update(capacity_blocks=int(capacity), write_volume=float(write_volume), seed=int(seed))
    wl["params"] = {**wl["params"], "theta": float(theta)}
    return wl


def bench_paper_scale(
    pcfg, theta: float, op_ratio: float, seed: int, policy_cfg=None, cache_dir: str | None = None
) -> dict:
    """A paper-scale Zipf run. Heuristic schemes stream a generated trace through the simulator
    chunk by chunk (bounded memory); a learned scheme (DOGI, PHFTL, ML-DT, Shiro: features of
    the trace) runs on the cached trace ``simulate +workload=zipf`` uses (generated and written
    once, memory-mapped after), as does any scheme with ``paper_scale.trace=cached``. The
    scheme is the ``policy`` group (``policy=dogi policy.params.deployed=int8``) unless
    ``paper_scale.policy`` names one (its defaults)."""
    from omegaconf import OmegaConf

    cap = int(pcfg.capacity_blocks)
    if pcfg.get("policy"):
        name, n_groups, params, victim = str(pcfg.policy), None, {}, KEEP_VICTIM
    elif policy_cfg is not None:
        pc = OmegaConf.to_container(policy_cfg, resolve=True) if OmegaConf.is_config(policy_cfg) else dict(policy_cfg)
        name, n_groups, params = pc["name"], pc.get("n_groups"), policy_params(pc)
        check_policy_numbers(name, params)
        victim = pc.get("victim", KEEP_VICTIM)
    else:
        name, n_groups, params, victim = "sepbit", None, {}, KEEP_VICTIM
    policy = make_policy(name, n_groups, victim=victim, **params)
    mode = str(pcfg.get("trace", "auto"))
    if mode not in ("auto", "stream", "cached"):
        raise ValueError(f"bench: paper_scale.trace must be auto, stream or cached, got {mode!r}")
    cached = mode == "cached" or (mode == "auto" and _learned(policy))
    if mode == "stream" and _learned(policy):
        raise ValueError(f"bench: policy {name} computes features of the trace; use paper_scale.trace=cached or auto")
    cfg = SimConfig(
        segment_blocks=int(pcfg.segment_blocks),
        op_ratio=op_ratio,
        victim=pcfg.victim,
        chunk_blocks=int(pcfg.chunk_writes),
    )
    t0 = time.perf_counter()
    total = int(pcfg.n_writes)
    gen_s = 0.0
    trace = None
    if cached:
        from dogi_ml.traces.workload import load_workload

        g0 = time.perf_counter()
        trace = load_workload(zipf_workload(cap, total / cap, theta, seed), cache_dir=cache_dir, log=console.print)
        gen_s = time.perf_counter() - g0
    sim = Simulator(policy, cfg, cap, trace=trace)
    sim.prefill()
    sampler = None if cached else ZipfSampler(cap, theta, seed)
    writes = trace.block_writes if cached else None
    total = int(writes.size) if cached else total
    done = 0
    from dogi_ml.progress import bar as progress_bar

    with progress_bar(total, desc="paper scale", unit="blk", unit_scale=True, leave=False) as bar:
        while done < total:
            k = min(int(pcfg.chunk_writes), total - done)
            if cached:
                chunk = writes[done : done + k]
            else:
                g0 = time.perf_counter()
                chunk = sampler.sample(k)
                gen_s += time.perf_counter() - g0
            sim.feed(chunk)
            done += k
            bar.update(k)
    r = sim.result()
    out = {
        "capacity_blocks": cap,
        "segment_blocks": int(pcfg.segment_blocks),
        "user_writes": done,
        "policy": name,
        "scheme": r["scheme"],
        "victim": r["victim"],
        "trace": "cached" if cached else "streamed",
        "waf": r["waf"],
        "sim_elapsed_s": r["elapsed_s"],
        "generation_s": gen_s,
        "wall_s": time.perf_counter() - t0,
        "appends_per_second": r["appends_per_second"],
        "loop_cpu_s": r["loop_cpu_s"],
        "appends_per_cpu_second": r["appends_per_cpu_second"],
        "state_bytes": r["state_bytes"],
        "peak_rss_bytes": _peak_rss_bytes(),
    }
    for k in (
        "feature_ns_per_block",
        "feature_wait_ns_per_block",
        "window_ns_per_block",
        "inference_ns_per_block",
        "states_rebuilt",
        "inferred_blocks",
        "inference_ahead_ns_per_block",
        "inferred_ahead_blocks",
        "inferred_ahead_used",
        "int8_blocks_by_runtime",
        "train_seconds",
        "background_train_seconds",
        "training_wait_seconds",
        "retrains",
        "base_ghost_waf",
        "base_ghost_seconds",
    ):
        if r.get(k) is not None:
            out[k] = r[k]
    return out


def print_paper_scale(ps: dict) -> None:
    console.print(
        f"paper scale: {ps['scheme']}, {ps['user_writes']:,} writes over {ps['capacity_blocks']:,} blocks "
        f"({ps['trace']} trace), WAF {ps['waf']:.4f}, simulator loop {ps['sim_elapsed_s']:.0f} s "
        f"({ps['appends_per_second'] / 1e6:.1f} M appends/s; CPU {ps['loop_cpu_s']:.0f} s, "
        f"{(ps['appends_per_cpu_second'] or 0) / 1e6:.1f} M appends/s), wall {ps['wall_s']:.0f} s, "
        f"state {ps['state_bytes'] / 2**30:.2f} GiB, peak RSS {ps['peak_rss_bytes'] / 2**30:.2f} GiB"
    )
    if any(k in ps for k in ("feature_ns_per_block", "window_ns_per_block", "inference_ns_per_block")):
        f, w, i = (ps.get(k) for k in ("feature_ns_per_block", "feature_wait_ns_per_block", "inference_ns_per_block"))
        console.print(
            "  learned: features "
            + (f"{f:.0f} ns/block" if f is not None else "-")
            + (f" (the loop waited {w:.0f} ns/block)" if w is not None else "")
            + (f", windows {ps['window_ns_per_block']:.0f} ns/block" if ps.get("window_ns_per_block") else "")
            + ", inference "
            + (f"{i:.0f} ns/block" if i is not None else "-")
            + (
                f" (and {ps['inference_ahead_ns_per_block']:.0f} ns/block for "
                f"{ps['inferred_ahead_blocks']:,} blocks on the feature thread, "
                f"{ps.get('inferred_ahead_used', 0):,} of them placed)"
                if ps.get("inferred_ahead_blocks")
                else ""
            )
            + (
                f" ({ps['states_rebuilt']:,} of {ps['inferred_blocks']:,} states rebuilt from their window)"
                if ps.get("states_rebuilt") is not None
                else ""
            )
            + (
                f", training {ps['train_seconds']:.0f} s over {ps.get('retrains', 0)} retrainings"
                if "train_seconds" in ps
                else ""
            )
            + (
                f" ({ps['background_train_seconds']:.0f} s on the second thread, "
                f"{ps.get('training_wait_seconds', 0):.0f} s waited for)"
                if ps.get("background_train_seconds")
                else ""
            )
        )


def bench_export(ecfg) -> dict:
    """The deployed DOGI MLP at batch ``ecfg.batch``: the C header (-O2, its SSE2 pass alone, and
    -O2 -march=native),
    the Numba kernel, PyTorch float and onnxruntime (one thread), in ns per block."""
    from dogi_ml.export.bench import run_export_bench

    res = run_export_bench(batch=int(ecfg.batch), min_seconds=float(ecfg.seconds))
    target = float(ecfg.target_ns_per_block)
    table = Table(title=f"deployed DOGI MLP, ns per block at batch {res['batch']} (one core)")
    for col in ("implementation", "ns/block", "vs C -O2", "vs target"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    base = res.get("c_O2")
    for k, v in res.items():
        if isinstance(v, float):
            table.add_row(k, f"{v:,.1f}", f"{v / base:.2f}x" if base else "-", f"{v / target:.2f}x")
    console.print(table)
    if base:
        native, sse2 = res.get("c_O2_march_native"), res.get("c_O2_sse2_only")
        path = res.get("c_batch_paths", {}).get("c_O2")
        console.print(
            f"export: C header -O2 {base:.1f} ns/block ({path} pass; {base / target:.2f}x the "
            f"{target:.0f} ns target)"
            + (f", SSE2 pass only {sse2:.1f} ns/block ({sse2 / target:.2f}x)" if sse2 else "")
            + (f", -O2 -march=native {native:.1f} ns/block ({native / target:.2f}x)" if native else "")
            + f"; PyTorch float takes {res['torch_float'] / base:.2f}x and onnxruntime float "
            f"{res['onnxruntime_float'] / base:.2f}x the -O2 header's time"
        )
    return res


def bench_tcn_inference(tcfg, cpus=None) -> dict:
    """ML-DT's TCN (its default shape, 8-write windows of 6 features) at inference, per batch
    size: ns per window on one thread, and ns of wall per window with two threads inferring
    at once (what the split pipeline gets; the Python glue between torch's small products holds
    the GIL, so small batches serialise). ``cpus``: the cores the two threads may use."""
    import threading

    import torch

    from dogi_ml.models import make_model
    from dogi_ml.policies.mldt import MLDT

    n = int(tcfg.windows)
    batches = [int(b) for b in tcfg.batches]
    if n < 1 or not batches or min(batches) < 1:
        raise ValueError(
            f"bench tcn_inference: windows and every batch must be positive integers, got windows={n}, "
            f"batches={batches}; e.g. tcn_inference.batches=[1024,4096] tcn_inference.windows=65536"
        )
    params = {**MLDT.COMMON, **MLDT.DEFAULTS}
    history, features = int(params["history"]), len(params["features"])
    net = make_model("tcn", 1, features, seed=0, **MLDT.MODEL_DEFAULTS).build().eval()
    X = torch.randn(n, history, features, generator=torch.Generator().manual_seed(0))
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    pinned = os.sched_getaffinity(0) if cpus is not None else None

    def infer(batch):
        with torch.no_grad():
            for i in range(0, n, batch):
                net(X[i : i + batch])

    res = {"windows": n, "one_thread_ns": {}, "two_threads_wall_ns": {}}
    try:
        for batch in batches:
            infer(batch)  # warm: plans and scratch buffers
            t0 = time.perf_counter()
            infer(batch)
            res["one_thread_ns"][batch] = (time.perf_counter() - t0) / n * 1e9
            if cpus is not None:
                os.sched_setaffinity(0, cpus)
            pair = [threading.Thread(target=infer, args=(batch,)) for _ in range(2)]
            t0 = time.perf_counter()
            for t in pair:
                t.start()
            for t in pair:
                t.join()
            res["two_threads_wall_ns"][batch] = (time.perf_counter() - t0) / (2 * n) * 1e9
            if pinned is not None:
                os.sched_setaffinity(0, pinned)
    finally:
        torch.set_num_threads(threads_before)
        if pinned is not None:
            os.sched_setaffinity(0, pinned)
    table = Table(title=f"ML-DT's TCN at inference, ns per window ({n:,} windows of {history} x {features})")
    for col in ("batch", "one thread", "two threads at once (wall)"):
        table.add_column(col, justify="right")
    for batch, one in res["one_thread_ns"].items():
        table.add_row(f"{batch:,}", f"{one:,.0f}", f"{res['two_threads_wall_ns'][batch]:,.0f}")
    console.print(table)
    return res


def minos_vs_sepbit(writes: np.ndarray, capacity: int, segment_blocks: int, op_ratio: float, repeats: int = 3) -> dict:
    """MINOS's and SepBIT's appends (user + GC writes) per CPU second on ``writes``, back to back
    in this process, best of ``repeats`` each, both with MINOS's victim rule (cost-benefit
    ``gp/(1-gp)*age``; the simulator rows give SepBIT another selector). CPU time, not wall
    time: on a shared machine another job's time slices would count against whichever ran."""
    best = {"sepbit": 0.0, "minos": 0.0}
    waf = {}
    for _ in range(repeats):
        for name in best:
            cfg = SimConfig(
                segment_blocks=segment_blocks,
                op_ratio=op_ratio,
                victim="cost_benefit_sepbit",
                chunk_blocks=max(1 << 20, writes.size),
            )
            sim = Simulator(make_policy(name), cfg, capacity)
            sim.compile()
            sim.prefill()
            t0 = time.process_time()
            sim.feed(writes)
            cpu = time.process_time() - t0
            r = sim.result()
            best[name] = max(best[name], (r["user_writes"] + r["gc_writes"]) / max(cpu, 1e-9))
            waf[name] = r["waf"]
    return {
        "writes": int(writes.size),
        "appends_per_cpu_second": best,
        "waf": waf,
        "ns_per_append": {k: 1e9 / v for k, v in best.items()},
        "slowdown": best["sepbit"] / best["minos"],
    }


def bench_minos(mcfg, rows: list[dict], writes=None, cfg=None) -> dict:
    """MINOS's clustering step in microseconds per call (its Table 4) and its per-write cost
    against SepBIT's: with ``writes`` (the bench trace; its first ``mcfg.compare_writes``) a
    back-to-back run of both with the same victim rule (:func:`minos_vs_sepbit`), else the
    ratio from the simulator rows."""
    from dogi_ml.policies.minos import bench_clustering, bench_distance_floor

    segments = tuple(int(x) for x in mcfg.segments)
    res = bench_clustering(segments=segments, n=int(mcfg.n_virtual))
    # the arithmetic floor: the kernel's rate with its rows in L1, times the terms Algorithm 3
    # computes, says how far a faster kernel (rather than fewer terms) could go
    floor = bench_distance_floor(segments=segments, n=res["n"], k=res["k"])
    res["floor"] = floor
    table = Table(title=f"MINOS clustering, {res['n']} virtual -> {res['k']} physical streams (us per call)")
    for col in ("segments", "us", "L1 floor us", "ps per term"):
        table.add_column(col, justify="right")
    for segs, us in res["us"].items():
        per_term = us * 1e6 / (floor["passes"] * segs)
        table.add_row(f"{segs:,}", f"{us:.1f}", f"{floor['floor_us'][segs]:.1f}", f"{per_term:.0f}")
    console.print(table)
    console.print(
        f"  OP-distance term with its rows in L1: {floor['ps_per_term']:.0f} ps; a clustering computes at "
        f"most {floor['passes']} distances over the ring (L1 floor = {floor['passes']} x segments x that)"
    )
    us_max = res["us"].get(8192)
    if us_max is not None:
        target = float(mcfg.target_us_at_8192)
        need_ps = target * 1e6 / (floor["passes"] * 8192)
        console.print(
            f"MINOS clustering at 8192 segments: {us_max:.1f} us ({us_max / target:.2f}x the "
            f"{target:.0f} us target; the paper: 117.9 us with SIMD). The target needs <= {need_ps:.0f} ps "
            f"per term, {floor['ps_per_term'] / need_ps:.1f}x below this CPU's L1 rate"
        )
    limit = float(mcfg.target_slowdown_vs_sepbit)
    if writes is not None and cfg is not None:
        n = int(mcfg.get("compare_writes", 4_000_000))
        cmp_ = minos_vs_sepbit(writes[:n], int(cfg.capacity_blocks), int(cfg.segment_blocks), float(cfg.op_ratio))
        ns = cmp_["ns_per_append"]
        console.print(
            f"MINOS per append costs {cmp_['slowdown']:.2f}x SepBIT's (both cost_benefit_sepbit, "
            f"{cmp_['writes']:,} writes, best of 3 in CPU time: {ns['minos']:.1f} vs {ns['sepbit']:.1f} ns; "
            f"target <= {limit:.1f}x)"
        )
        return {**res, "vs_sepbit": cmp_, "slowdown_vs_sepbit": {"cost_benefit_sepbit": cmp_["slowdown"]}}
    aps = {(r["policy"], r["victim"]): r["appends_per_second"] for r in rows}
    ratios = {
        v: aps[("sepbit", v)] / aps[("minos", v)]
        for (p, v) in aps
        if p == "minos" and ("sepbit", v) in aps and aps[("minos", v)] > 0
    }
    for v, ratio in ratios.items():
        console.print(f"MINOS per append costs {ratio:.2f}x SepBIT's ({v} victims; target <= {limit:.1f}x)")
    return {**res, "slowdown_vs_sepbit": ratios}


# -- the hybrid's per-block cost against DOGI's (issue 40) ---------------------------------------
def per_block_cost(trace, capacity: int, segment_blocks: int, op_ratio: float, schemes: dict, repeats: int = 2) -> dict:
    """Appends (user + GC writes) per CPU second of the engine's per-block loop for each of
    ``schemes`` (label -> ``{"name": ..., "params": {...}}``, each with its own victim rule) on
    ``trace``, back to back in this process, best of ``repeats``. The loop's CPU time
    (``loop_cpu_s``) excludes features, inference and training, which run outside it; CPU time,
    not wall time, so another job's time slices do not count against whichever ran."""
    best = {label: 0.0 for label in schemes}
    waf, cpu = {}, {}
    writes = trace.block_writes
    for _ in range(repeats):
        for label, spec in schemes.items():
            policy = make_policy(str(spec["name"]), **dict(spec.get("params") or {}))
            cfg = SimConfig(segment_blocks=segment_blocks, op_ratio=op_ratio, victim=None)
            sim = Simulator(policy, cfg, capacity, stream=writes if policy.needs_future else None, trace=trace)
            r = sim.run(writes)
            aps = r["appends_per_cpu_second"] or 0.0
            if aps > best[label]:
                best[label], cpu[label] = aps, r["loop_cpu_s"]
            waf[label] = r["waf"]
    return {"appends_per_cpu_second": best, "loop_cpu_s": cpu, "waf": waf}


def bench_hybrid(hcfg, seed: int, cache_dir: str | None = None) -> dict:
    """The hybrid's per-block cost against DOGI's (issue 40's target: within ``hcfg.target_vs_dogi``
    times), on the cached Zipf trace ``simulate +workload=zipf`` would use at ``hcfg``'s capacity
    and write volume: :func:`per_block_cost` of ``hcfg.schemes``, the ratio of ``hcfg.reference``'s
    appends per CPU second to each other scheme's."""
    from omegaconf import OmegaConf

    from dogi_ml.traces.workload import load_workload

    cap = int(hcfg.capacity_blocks)
    workload = zipf_workload(cap, float(hcfg.write_volume), float(hcfg.theta), seed)
    schemes = OmegaConf.to_container(hcfg.schemes, resolve=True)
    ref = str(hcfg.reference)
    if isinstance(hcfg.repeats, bool) or not isinstance(hcfg.repeats, int) or hcfg.repeats < 1:
        raise ValueError(f"bench: hybrid.repeats must be a whole number >= 1, got {hcfg.repeats!r}")
    for label, spec in schemes.items():
        if not isinstance(spec, dict) or "name" not in spec:
            raise ValueError(
                f"bench: hybrid.schemes.{label} needs a name (e.g. {{name: hybrid, params: {{...}}}}), got {spec!r}"
            )
    if ref not in schemes:
        raise ValueError(f"bench: hybrid.reference={ref!r} is not one of hybrid.schemes ({', '.join(schemes)})")
    for spec in schemes.values():  # an unknown scheme or parameter fails here, before the trace is made
        make_policy(str(spec["name"]), **dict(spec.get("params") or {}))
    trace = load_workload(workload, cache_dir=cache_dir, log=console.print)
    res = per_block_cost(trace, cap, int(hcfg.segment_blocks), float(hcfg.op_ratio), schemes, repeats=int(hcfg.repeats))
    aps = res["appends_per_cpu_second"]
    res["cost_vs_reference"] = {k: aps[ref] / v for k, v in aps.items() if v > 0}
    res["reference"] = ref
    res["target_vs_reference"] = float(hcfg.target_vs_dogi)
    res["trace"] = {"capacity_blocks": cap, "user_writes": int(trace.block_writes.size), "theta": float(hcfg.theta)}
    table = Table(
        title=f"per-block cost against {ref} (Zipf {hcfg.theta} over {cap:,} blocks, "
        f"{trace.block_writes.size:,} writes; loop CPU, best of {hcfg.repeats}; inference and training excluded)"
    )
    for col in ("scheme", "WAF", "loop CPU s", "M appends/CPU s", f"cost vs {ref}"):
        table.add_column(col, justify="left" if col == "scheme" else "right")
    limit = res["target_vs_reference"]
    for label in schemes:
        ratio = res["cost_vs_reference"].get(label)
        mark = "" if label == ref or ratio is None else (" (ok)" if ratio <= limit else " (over)")
        table.add_row(
            label,
            f"{res['waf'][label]:.4f}",
            f"{res['loop_cpu_s'].get(label, float('nan')):.3f}",
            f"{aps[label] / 1e6:.1f}",
            (f"{ratio:.2f}x" if ratio is not None else "-") + mark,
        )
    console.print(table)
    console.print(f"  target: each scheme's cost per block <= {limit:.1f}x {ref}'s")
    return res


# -- ingest: splitting a multi-volume trace (issue 41) -------------------------------------------
#: the measured process: imports only the splitter, splits, reports its own CPU time and peak RSS
_INGEST_CHILD = """
import json, resource, sys, time
from dogi_ml.traces.fleet import split_trace

path, out = sys.argv[1], sys.argv[2]
before = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
split_trace(path, "alibaba", out, progress=False)
wall = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF)
status = open("/proc/self/status").read().split("\\n")
hwm = [int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")]
print(json.dumps({
    "wall_s": wall,
    "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    "user_s": after.ru_utime - before.ru_utime,
    "system_s": after.ru_stime - before.ru_stime,
    "peak_rss_bytes": hwm[0] if hwm else after.ru_maxrss * 1024,
}))
"""


def _split_in_child(path: Path, out: Path) -> dict:
    """Split ``path`` in a fresh process (peak RSS is a process's high-water mark, so each
    measurement needs its own) and return what it measured."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _INGEST_CHILD, str(path), str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the ingest bench's split of {path} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_ingest(icfg) -> dict:
    """``ingest split=true``'s speed and memory on generated Alibaba-format CSV: a file of
    ``icfg.gb`` GB (10^9 bytes) and one a quarter of it, each with ``icfg.volumes_per_gb``
    volumes per GB (so the largest volume, which is loaded whole when its .dtr is written, is
    the same size in both: the peak RSS should not grow with the file), and the larger one's
    ``.zst``. MB/s per core is CSV bytes (decompressed, for the .zst) over the splitting
    process's CPU seconds (user + system); it runs pinned to one CPU, so that is also its rate
    on an idle core. The machine's load average is recorded: on a shared machine the CPU
    seconds grow with it."""
    import shutil
    import tempfile

    import zstandard

    from dogi_ml.traces.fleet import write_synthetic_alibaba_csv

    big = float(icfg.gb)
    target_mbps = float(icfg.target_mb_per_s_per_core)
    target_rss = float(icfg.target_rss_gib) * 2**30
    rows = []
    tmp_root = str(icfg.tmp_dir) if icfg.get("tmp_dir") else None
    with tempfile.TemporaryDirectory(prefix="dogi_ml-ingest-bench-", dir=tmp_root) as tmp:
        tmp = Path(tmp)
        for gb in (big / 4, big):
            csv = tmp / f"alibaba_{gb:g}gb.csv"
            volumes = max(1, round(gb * int(icfg.volumes_per_gb)))
            t0 = time.perf_counter()
            made = write_synthetic_alibaba_csv(csv, int(gb * 1e9), volumes, seed=int(icfg.seed))
            console.print(
                f"  ingest: wrote {csv.name} ({made['bytes'] / 1e9:.2f} GB) in {time.perf_counter() - t0:.0f} s"
            )
            inputs = [(csv, "csv")]
            if gb == big and icfg.zst:
                zst = csv.with_name(csv.name + ".zst")
                with open(csv, "rb") as src, open(zst, "wb") as dst:
                    zstandard.ZstdCompressor(level=3).copy_stream(src, dst)
                inputs.append((zst, "zst"))
            for path, kind in inputs:
                out = tmp / f"fleet_{path.name}"
                load = os.getloadavg()[0]
                got = _split_in_child(path, out)
                shutil.rmtree(out)
                mbps = made["bytes"] / 1e6 / got["cpu_s"]
                row = {
                    "input": kind,
                    "csv_bytes": made["bytes"],
                    "file_bytes": path.stat().st_size,
                    "requests": made["requests"],
                    "volumes": volumes,
                    **got,
                    "mb_per_s_per_core": mbps,
                    "mb_per_s_wall": made["bytes"] / 1e6 / got["wall_s"],
                    "vs_target_mb_per_s": mbps / target_mbps,
                    "vs_target_rss": got["peak_rss_bytes"] / target_rss,
                    "load_average_1min": load,
                }
                rows.append(row)
            csv.unlink()
            for path, _ in inputs[1:]:
                path.unlink()
    table = Table(title="ingest split=true, generated Alibaba CSV (one core)")
    for col in (
        "input",
        "GB of CSV",
        "volumes",
        "CPU s (user+sys)",
        "MB/s per core",
        "vs target",
        "wall MB/s",
        "peak RSS",
        "vs target",
        "load",
    ):
        table.add_column(col, justify="left" if col == "input" else "right")
    for r in rows:
        table.add_row(
            r["input"],
            f"{r['csv_bytes'] / 1e9:.2f}",
            f"{r['volumes']:,}",
            f"{r['cpu_s']:.2f} ({r['user_s']:.2f}+{r['system_s']:.2f})",
            f"{r['mb_per_s_per_core']:.0f}",
            f"{r['vs_target_mb_per_s']:.2f}x",
            f"{r['mb_per_s_wall']:.0f}",
            f"{r['peak_rss_bytes'] / 2**20:.0f} MiB",
            f"{r['vs_target_rss']:.2f}x",
            f"{r['load_average_1min']:.1f}",
        )
    console.print(table)
    console.print(
        f"  targets: >= {target_mbps:.0f} MB/s of CSV per core, peak RSS < {icfg.target_rss_gib} GiB whatever the "
        "file's size (RSS 'vs target' below 1.00x meets it)"
    )
    return {
        "rows": rows,
        "targets": {"mb_per_s_per_core": target_mbps, "peak_rss_bytes": target_rss},
        "settings": {"gb": big, "volumes_per_gb": int(icfg.volumes_per_gb), "seed": int(icfg.seed)},
    }


def _all_cpus():
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None


def _write_result(cfg, out_dir: Path, result: dict) -> dict:
    """``result`` as JSON at ``cfg.output`` (default ``<run dir>/bench.json``); returns it."""
    out = Path(cfg.output) if cfg.output else out_dir / "bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    console.print(f"bench: {out}")
    return result


#: bench settings that may be 0 (the others are sizes, counts, seconds or targets: above 0)
_BENCH_ZERO_OK = ("seed", "op_ratio", "theta")


def _bench_numbers(node, prefix: str = ""):
    """(key, default) of every number in conf/bench.yaml's tree (switches, lists and strings
    left out), keys dotted as on the command line (``hybrid.repeats``)."""
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if key != "schemes":  # the hybrid's scheme table: a scheme's params are its own to check
                yield from _bench_numbers(value, f"{path}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value


def check_bench_settings(cfg) -> None:
    """Every number of the bench config, by key, before anything runs: a string reached int() or
    a format code ('Cannot specify ',' with 's'.', no key), n_writes=0 a TypeError's traceback."""
    from omegaconf import OmegaConf

    import dogi_ml.conf
    from dogi_ml.errors import checked_setting

    defaults = OmegaConf.to_container(OmegaConf.load(Path(dogi_ml.conf.__file__).parent / "bench.yaml"))
    for key, default in _bench_numbers({k: v for k, v in defaults.items() if k not in ("hydra", "defaults")}):
        value = OmegaConf.select(cfg, key)
        if value is None:
            continue  # a section the run does not have
        leaf = key.rsplit(".", 1)[-1]
        zero_ok = leaf in _BENCH_ZERO_OK
        # a target, a time or a size in GB is a number, even where its default is whole (mlp_training_seconds: 10)
        whole = isinstance(default, int) and not (
            leaf.startswith("target") or leaf.endswith(("seconds", "second")) or leaf == "gb"
        )
        if whole:
            checked_setting(value, key, int, minimum=0 if zero_ok else 1, example=default)
        else:
            bound = {"minimum": 0.0} if zero_ok else {"above": 0.0}
            checked_setting(value, key, float, example=default, **bound)


def run_bench(cfg, out_dir: Path) -> dict:
    check_bench_settings(cfg)
    cpus = _all_cpus()
    pin = _pin_one_core()
    ingest_cfg = cfg.get("ingest")
    if ingest_cfg is not None and ingest_cfg.enabled and ingest_cfg.only:
        result = {"cpu": pin, "ingest": bench_ingest(ingest_cfg)}
        return _write_result(cfg, out_dir, result)
    hybrid_cfg = cfg.get("hybrid")
    if hybrid_cfg is not None and hybrid_cfg.enabled and hybrid_cfg.get("only"):
        result = {"cpu": pin, "hybrid": bench_hybrid(hybrid_cfg, int(cfg.seed), cache_dir=cfg.get("cache_dir"))}
        result["numerics"] = numerics_record()
        return _write_result(cfg, out_dir, result)
    console.print(
        f"bench: Zipf({cfg.theta}) over {cfg.capacity_blocks:,} blocks, "
        f"{cfg.n_writes:,} user writes, segments of {cfg.segment_blocks}, OP {cfg.op_ratio:.0%} ({pin}; "
        f"numerics {numerics_mode()}: DOGI_ML_NUMERICS=native for each library's own fastest path)"
    )
    t0 = time.perf_counter()
    writes = ZipfSampler(int(cfg.capacity_blocks), float(cfg.theta), int(cfg.seed)).sample(int(cfg.n_writes))
    console.print(f"  generated the trace in {time.perf_counter() - t0:.1f} s")
    rows = bench_policies(
        writes,
        int(cfg.capacity_blocks),
        int(cfg.segment_blocks),
        float(cfg.op_ratio),
        list(cfg.policies),
        list(cfg.victims),
    )
    ann = bench_annotation(writes)
    target_aps = float(cfg.targets.appends_per_second)
    target_ann = float(cfg.targets.annotation_blocks_per_second)

    table = Table(title="simulator throughput (one core)")
    for col in ("policy", "victim", "WAF", "M appends/s", "vs target"):
        table.add_column(col, justify="right" if col not in ("policy", "victim") else "left")
    for r in rows:
        table.add_row(
            r["policy"],
            r["victim"],
            f"{r['waf']:.3f}",
            f"{r['appends_per_second'] / 1e6:.1f}",
            f"{r['appends_per_second'] / target_aps:.2f}x",
        )
    console.print(table)
    console.print(
        f"annotation: {ann['blocks_per_second'] / 1e6:.1f} M blocks/s "
        f"({ann['blocks_per_second'] / target_ann:.2f}x the {target_ann / 1e6:.0f} M target)"
    )
    feats = bench_features(writes, int(cfg.capacity_blocks))
    target_feat = float(cfg.targets.feature_blocks_per_second)
    console.print(
        f"features: {feats['blocks_per_second'] / 1e6:.1f} M block writes/s "
        f"({feats['blocks_per_second'] / target_feat:.2f}x the {target_feat / 1e6:.0f} M target)"
    )
    mlp = bench_mlp_training()
    target_mlp = float(cfg.targets.mlp_training_seconds)
    console.print(
        f"MLP training: {mlp['samples']:,} samples x {mlp['epochs']} epochs in {mlp['elapsed_s']:.1f} s "
        f"(target <= {target_mlp:.0f} s; {mlp['parameters']:,} parameters)"
    )
    minos_res = None
    if cfg.get("minos") is not None and cfg.minos.enabled:
        minos_res = bench_minos(cfg.minos, rows, writes, cfg)
    export_res = None
    if cfg.get("export") is not None and cfg.export.enabled:
        export_res = bench_export(cfg.export)
    tcn_res = None
    if cfg.get("tcn_inference") is not None and cfg.tcn_inference.enabled:
        tcn_res = bench_tcn_inference(cfg.tcn_inference, cpus)
    ingest_res = None
    if ingest_cfg is not None and ingest_cfg.enabled:
        ingest_res = bench_ingest(ingest_cfg)
    hybrid_res = None
    if cfg.get("hybrid") is not None and cfg.hybrid.enabled:
        hybrid_res = bench_hybrid(cfg.hybrid, int(cfg.seed), cache_dir=cfg.get("cache_dir"))
    result = {
        "config": {k: cfg[k] for k in ("capacity_blocks", "n_writes", "theta", "segment_blocks", "op_ratio", "seed")},
        "cpu": pin,
        "simulator": rows,
        "annotation": ann,
        "features": feats,
        "mlp_training": mlp,
        "targets": {
            "appends_per_second": target_aps,
            "annotation_blocks_per_second": target_ann,
            "feature_blocks_per_second": target_feat,
            "mlp_training_seconds": target_mlp,
        },
    }
    if minos_res is not None:
        result["minos"] = minos_res
    if tcn_res is not None:
        result["tcn_inference"] = tcn_res
    if ingest_res is not None:
        result["ingest"] = ingest_res
    if hybrid_res is not None:
        result["hybrid"] = hybrid_res
    if export_res is not None:
        result["export"] = export_res
        result["targets"]["export_c_ns_per_block"] = float(cfg.export.target_ns_per_block)
    if cfg.paper_scale.enabled:
        if cpus is not None:
            # a learned scheme's feature thread and ghost process use the other cores
            os.sched_setaffinity(0, cpus)
        ps = bench_paper_scale(
            cfg.paper_scale,
            float(cfg.theta),
            float(cfg.op_ratio),
            int(cfg.seed),
            policy_cfg=cfg.get("policy"),
            cache_dir=cfg.get("cache_dir"),
        )
        ps["cpus"] = len(cpus) if cpus is not None else None
        result["paper_scale"] = ps
        print_paper_scale(ps)
    result["numerics"] = numerics_record()  # speed depends on the code path: portable is the slowest
    return _write_result(cfg, out_dir, result)
