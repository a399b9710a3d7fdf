"""The Numba engine against its plain-Python twin (``tests/naive.py``): every heuristic scheme with
every general victim selector, on small traces, must give the same counts, the same per-group
traffic, the same WAF series and the same final placement of every block."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from helpers import hotcold_writes, zipf_writes

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator

SCHEMES = ["nosep", "sepgc", "sepbit", "mida", "dac", "warcip"]
VICTIMS = ["greedy", "cost_benefit", "fifo"]

# Small on purpose (the twin is slow Python): 4-8x the capacity written, 70-80 segments.
TRACES = {
    "zipf": dict(
        capacity=4096, segment_blocks=64, op_ratio=0.2, writes=lambda: zipf_writes(4096, 6 * 4096, theta=1.0, seed=11)
    ),
    "hotcold": dict(
        capacity=2048,
        segment_blocks=32,
        op_ratio=0.2,
        gc_free_segments=3,
        writes=lambda: hotcold_writes(2048, 8 * 2048, hot=0.1, hot_share=0.9, seed=3),
    ),
    # no prefill: the run starts on an empty device; 128-block segments
    "zipf-empty": dict(
        capacity=8192,
        segment_blocks=128,
        op_ratio=0.2,
        prefill=False,
        writes=lambda: zipf_writes(8192, 4 * 8192, theta=0.9, seed=5),
    ),
}

# Extra cases: the other selectors and triggers, on the Zipf trace.
EXTRA = [
    ("sepbit", "cost_benefit_sepbit", {}),
    ("nosep", "cost_benefit_sepbit", {}),
    ("sepbit", "d_choices", {}),
    ("dac", "d_choices", {"victim_d": 3, "seed": 9}),
    ("sepbit", "cost_benefit_sepbit", {"gc_trigger": "garbage_proportion", "gc_garbage_ratio": 0.12}),
    ("mida", "greedy", {"gc_trigger": "garbage_proportion", "gc_garbage_ratio": 0.10}),
    # GC bursts up to a high watermark
    ("sepbit", "greedy", {"gc_high_free_segments": 4}),
    ("nosep", "fifo", {"gc_high_free_segments": 8}),
    (
        "warcip",
        "cost_benefit",
        {"gc_high_free_segments": 5, "gc_trigger": "garbage_proportion", "gc_garbage_ratio": 0.10},
    ),
    # the SepBIT authors' Cost-Benefit (square root of the age)
    ("sepbit", "cost_benefit_sqrt", {}),
    ("dac", "cost_benefit_sqrt", {}),
    # the variants that keep a paper's text where the authors' code differs
    ("dac", "greedy", {"params": {"variant": "paper"}}),
    ("sepbit", "greedy", {"params": {"variant": "paper"}}),
    (
        "sepbit",
        "cost_benefit",
        {"params": {"variant": "paper"}, "gc_trigger": "garbage_proportion", "gc_garbage_ratio": 0.12},
    ),
]

_WRITES: dict[str, np.ndarray] = {}


def trace(name):
    if name not in _WRITES:
        _WRITES[name] = TRACES[name]["writes"]()
    return _WRITES[name]


def engine_run(policy, victim, writes, capacity, segment_blocks, prefill=True, params=None, **cfg):
    sim = Simulator(
        make_policy(policy, **(params or {})),
        SimConfig(segment_blocks=segment_blocks, victim=victim, prefill=prefill, **cfg),
        capacity,
    )
    r = sim.run(writes)
    seg = segment_blocks
    return {
        "user_writes": r["user_writes"],
        "gc_writes": r["gc_writes"],
        "reclaimed_segments": r["reclaimed_segments"],
        "gc_spills": r["gc_spills"],
        "gc_bursts": r["gc_bursts"],
        "free_segments": r["free_segments"],
        "invalid_blocks": r["invalid_blocks"],
        "groups": [
            (
                g["user_writes"],
                g["gc_writes"],
                g["reclaimed_segments"],
                round(g["victim_valid_ratio"] * g["reclaimed_segments"] * seg) if g["reclaimed_segments"] else 0,
            )
            for g in r["groups"]
        ],
        "waf_series": (r["waf_series"]["t"], r["waf_series"]["waf"]),
        "placement": np.asarray(sim.state.l2p, np.int64),
    }


def twin_run(policy, victim, writes, capacity, segment_blocks, prefill=True, params=None, **cfg):
    r = naive.simulate(policy, victim, writes, capacity, segment_blocks, prefill=prefill, params=params, **cfg)
    return _twin_dict(r, capacity)


def twin_run_store(store, writes):
    """Run a twin store set up by hand (prefill on) and format it as :func:`twin_run` does."""
    return _twin_dict(store.run(writes), store.capacity)


def _twin_dict(r, capacity):
    placement = np.full(capacity, -1, np.int64)
    for lba, phys in r["placement"].items():
        placement[lba] = phys
    return {
        "user_writes": r["user_writes"],
        "gc_writes": r["gc_writes"],
        "reclaimed_segments": r["reclaimed_segments"],
        "gc_spills": r["gc_spills"],
        "gc_bursts": r["gc_bursts"],
        "free_segments": r["free_segments"],
        "invalid_blocks": r["invalid_blocks"],
        "groups": [
            (g["user_writes"], g["gc_writes"], g["reclaimed_segments"], g["reclaimed_valid_blocks"])
            for g in r["groups"]
        ],
        "waf_series": ([t for t, _, _ in r["series"]], [round((u + g) / max(u, 1), 6) for _, u, g in r["series"]]),
        "placement": placement,
    }


def assert_same(engine, twin):
    for key in (
        "user_writes",
        "gc_writes",
        "reclaimed_segments",
        "gc_spills",
        "gc_bursts",
        "free_segments",
        "invalid_blocks",
        "groups",
        "waf_series",
    ):
        assert engine[key] == twin[key], f"{key}: engine {engine[key]} != twin {twin[key]}"
    np.testing.assert_array_equal(engine["placement"], twin["placement"], err_msg="final block placement")


@pytest.mark.parametrize("trace_name", sorted(TRACES))
@pytest.mark.parametrize("victim", VICTIMS)
@pytest.mark.parametrize("policy", SCHEMES)
def test_engine_matches_naive_twin(policy, victim, trace_name):
    spec = {k: v for k, v in TRACES[trace_name].items() if k != "writes"}
    writes = trace(trace_name)
    engine = engine_run(policy, victim, writes, **spec)
    twin = twin_run(policy, victim, writes, **spec)
    assert engine["gc_writes"] > 0 and engine["user_writes"] == writes.size
    assert_same(engine, twin)


@pytest.mark.parametrize(
    "policy,victim,cfg", EXTRA, ids=[f"{p}-{v}-{'-'.join(c) or 'free_segments'}" for p, v, c in EXTRA]
)
def test_engine_matches_naive_twin_other_selectors_and_triggers(policy, victim, cfg):
    spec = {k: v for k, v in TRACES["zipf"].items() if k != "writes"}
    writes = trace("zipf")
    engine = engine_run(policy, victim, writes, **spec, **cfg)
    twin = twin_run(policy, victim, writes, **spec, **cfg)
    assert engine["gc_writes"] > 0
    assert_same(engine, twin)


def test_warcip_parity_trace_splits_and_merges():
    """The parity traces reach WARCIP's merge and split (every 256 sealed user segments), so the
    cases above compare them too: on the Zipf trace with 16-block segments a cluster is merged
    away and a later split brings the count back, in the twin exactly as in the engine."""
    spec = dict(capacity=4096, segment_blocks=16, op_ratio=0.2)
    writes = trace("zipf")
    engine = engine_run("warcip", "greedy", writes, **spec)
    twin_pol = naive.WARCIP(6)
    store = naive.NaiveStore(twin_pol, naive.greedy, 4096, 16, op_ratio=0.2)
    merges, splits = [], []
    seal, split_merge = twin_pol._seal, twin_pol._split_and_merge

    def counting_seal(st, i):
        n = len(twin_pol.clusters)
        seal(st, i)
        if len(twin_pol.clusters) < n:
            merges.append(st.now)

    def counting_split_merge(st):
        n = len(twin_pol.clusters)
        split_merge(st)
        if len(twin_pol.clusters) > n:
            splits.append(st.now)

    twin_pol._seal, twin_pol._split_and_merge = counting_seal, counting_split_merge
    twin = twin_run_store(store, writes)
    assert merges and splits, (merges, splits)
    assert_same(engine, twin)
