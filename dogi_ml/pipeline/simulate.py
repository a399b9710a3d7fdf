"""The ``simulate`` stage: workload + policy + sim config -> WAF and friends."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.trace import Trace
from dogi_ml.traces.workload import workload_capacity


def simulation_writes(trace: Trace, capacity: int | None) -> tuple[np.ndarray, int]:
    """The user-write stream and logical capacity for a run.

    Written LBAs are compacted (order-preserving) to ``0..wss-1`` when they would not fit the
    capacity, e.g. a file trace whose dense address space also holds read-only blocks."""
    writes = trace.block_writes
    cap = int(capacity) if capacity else workload_capacity(trace)
    if writes.size and int(writes.max()) >= cap:
        uniq, dense = np.unique(writes, return_inverse=True)
        if uniq.size > cap:
            raise ValueError(f"sim.capacity_blocks={cap} is smaller than the trace's write working set "
                             f"({uniq.size} distinct blocks); raise it or leave it null")
        writes = dense.astype(np.int64)
    return np.ascontiguousarray(writes, dtype=np.int64), cap


def build_simulator(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping) -> tuple[Simulator, np.ndarray]:
    """A ready :class:`Simulator` and the writes to feed it."""
    config = SimConfig.from_mapping(sim_cfg)
    writes, cap = simulation_writes(trace, config.capacity_blocks)
    params = dict(policy_cfg.get("params") or {})
    n_groups = policy_cfg.get("n_groups")
    search_info = None
    if policy_cfg["name"] == "nodap" and params.get("bounds") == "search":
        # NoDaP's offline configuration search (grow N until WAF improves < 5%) on this very trace
        from dogi_ml.oracles.nodap import search
        search_info = search(writes, cap, config, max_groups=int(params.pop("max_groups", 8)),
                             min_gain=float(params.pop("min_gain", 0.05)))
        params["bounds"] = search_info["bounds"]
        n_groups = search_info["n_groups"]
    params.pop("max_groups", None)
    params.pop("min_gain", None)
    policy = make_policy(policy_cfg["name"], n_groups, **params)
    policy.search_info = search_info
    stream = writes if policy.needs_future else None
    sim = Simulator(policy, config, cap, stream=stream, trace=trace)
    return sim, writes


def simulate(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, progress: bool = True) -> dict:
    """Run one policy over a trace; returns the result dict (see ``Simulator.result``)."""
    sim, writes = build_simulator(trace, policy_cfg, sim_cfg)
    sim.prefill()
    if progress:
        from tqdm import tqdm
        with tqdm(total=writes.size, unit="blk", unit_scale=True, desc=f"{sim.policy.name}",
                  leave=False, dynamic_ncols=True) as bar:
            sim.feed(writes, progress=bar.update)
    else:
        sim.feed(writes)
    result = sim.result()
    result["workload"] = trace.name
    if getattr(sim.policy, "search_info", None):
        result["nodap_search"] = sim.policy.search_info
    return result


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
