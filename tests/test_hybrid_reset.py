"""The hybrid's count_reset (docs/hybrid.md, "Counts that restart at a change"): the undecayed
counts of lifetimes=select restart where Page's CUSUM test finds the write stream changed.
The kernel's change times must be its plain-Python twin's (tests/naive.py count_changes) and lie
just after phase_shift's phase boundaries (the generator's own, an independent reference);
a stationary stream must detect nothing and run to the last digit as without the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import DOGI_SMALL, docs_percent, docs_results, docs_row, run_stopped
from naive import count_changes

from dogi_ml.policies import make_policy
from dogi_ml.policies._dogi_bundle import BundleError
from dogi_ml.policies.hybrid import CH_N, NEVER, _frequency_lifetime
from dogi_ml.policies.hybrid_frozen import export_bundle
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.policy_api import record
from dogi_ml.traces.generators import generate

CAP, SEG = 16384, 64
PHASE = 3 * CAP  # user writes per phase of the phase_shift trace
THRESHOLD, DRIFT = 50.0, 0.3


def _run(trace, **params):
    pol = make_policy("hybrid", **{**DOGI_SMALL, "lifetimes": "select", **params})
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, chunk_blocks=16384), CAP, trace=trace)
    return sim, sim.run(trace.block_writes)


@pytest.fixture(scope="module")
def phases():
    return generate("phase_shift", capacity_blocks=CAP, n_writes=12 * CAP, seed=7, phase_writes=PHASE)


@pytest.fixture(scope="module")
def phase_run(phases):
    return _run(phases, count_reset=THRESHOLD)


FASTEST = math.log(2.0) / (0.5 * CAP)  # the decay of select_halflives' shortest half-life, 0.5 capacity


def _twin(trace, threshold=THRESHOLD, drift=DRIFT):
    return count_changes(trace.block_writes, CAP, CAP, FASTEST, threshold, drift)


def test_changes_are_the_twins_and_follow_the_phase_boundaries(phases, phase_run):
    """Each of the three phase boundaries (the prefill, then every PHASE writes) is found within
    5% of a capacity after it, nothing else is, and the kernel's times are its twin's."""
    _, res = phase_run
    boundaries = [CAP + PHASE * j for j in (1, 2, 3)]
    assert res["count_changes"] == 3
    assert res["count_change_at"] == _twin(phases)
    delays = [t - b for t, b in zip(res["count_change_at"], boundaries, strict=True)]
    assert all(0 < d < 0.05 * CAP for d in delays), delays


def test_a_sensitive_test_rests_between_changes(phases):
    """With a low threshold and no drift allowed, changes follow each other as soon as the test
    has rested (1 / lambda writes): the kernel's times are still its twin's."""
    _, res = _run(phases, count_reset=5, count_reset_drift=0)
    times = res["count_change_at"]
    assert len(times) >= 5 and times == _twin(phases, threshold=5, drift=0)
    gaps = np.diff(times)
    assert gaps.min() >= 1 / FASTEST and (gaps < 1 / FASTEST + 0.05 * CAP).any()


def test_the_epoch_restarts_the_undecayed_counts_only(phases, phase_run):
    """After the run, an LBA last written before the last change reads an undecayed count of 0
    (its estimate is NEVER), and the decayed variants keep their counts."""
    sim, res = phase_run
    p = sim.policy.state
    last = res["count_change_at"][-1]
    rows = p.counts
    before = np.flatnonzero((rows[:, 0] > 0) & (rows[:, 0] < last))
    assert before.size > 100
    now = int(rows[:, 0].max())  # the last user write's time
    undecayed = sim.policy.count_halflives.index(None)
    for lba in before[:50]:
        assert _frequency_lifetime(p, undecayed, int(lba), int(now)) == NEVER
    assert (rows[before, 1 + sim.policy.count_halflives.index(0.5)] > 0).all()


def test_a_stationary_stream_detects_nothing_and_runs_as_without():
    """zipf: no change, and the WAF is the one without count_reset to the last digit."""
    trace = generate("zipf", capacity_blocks=CAP, n_writes=8 * CAP, seed=5, theta=1.0)
    _, with_test = _run(trace, count_reset=THRESHOLD)
    _, without = _run(trace)
    assert with_test["count_changes"] == 0 and with_test["count_change_at"] == []
    assert with_test["waf"] == without["waf"]
    assert _twin(trace) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"count_reset": 0}, "count_reset must be > 0 and <= 700"),
        ({"count_reset": 701}, "count_reset must be > 0 and <= 700"),
        ({"count_reset": "50"}, "count_reset must be > 0 and <= 700"),
        ({"count_reset": True}, "count_reset must be > 0 and <= 700"),
        ({"count_reset": 50, "count_reset_drift": -0.1}, "count_reset_drift must be >= 0"),
        ({"count_reset_drift": 0.1}, "count_reset_drift=0.1 is read only by the change test of count_reset"),
        ({"count_reset": 50, "select_halflives": [1.0, 0.5]}, "select_halflives must hold null and at least one"),
        ({"count_reset": 50, "select_halflives": [None]}, "select_halflives must hold null and at least one"),
    ],
)
def test_bad_settings_are_refused_in_one_line(params, message):
    with pytest.raises(ValueError, match=message) as err:
        make_policy("hybrid", lifetimes="select", **params)
    assert "\n" not in str(err.value) and "policy hybrid:" in str(err.value)


def test_count_reset_needs_lifetimes_select():
    with pytest.raises(ValueError, match="restarts the undecayed counts of lifetimes=select, not lifetimes=frequency"):
        make_policy("hybrid", lifetimes="frequency", count_reset=50)


def test_a_bundle_of_restarted_undecayed_counts_is_refused(phase_run, tmp_path):
    """A count bundle counts from the first write: a run whose last plan placed by undecayed
    counts that restarted cannot be deployed as one (here the last plan's source is set to the
    undecayed counts, as a longer run's could be)."""
    sim, _ = phase_run
    policy = sim.policy
    hr = record(policy.state.hyb)
    saved = (int(hr.frequency), int(hr.variant))
    hr.frequency, hr.variant = 1, policy.count_halflives.index(None)
    try:
        assert policy.state.count_change[CH_N] == 3
        with pytest.raises(BundleError, match="restarted at 3 detected changes"):
            export_bundle(policy, tmp_path)
    finally:
        hr.frequency, hr.variant = saved


def test_docs_table_is_the_results_files():
    """docs/hybrid.md's count_reset row is written by hand: each cell's GC-write change and WAF
    must be the ones docs/results/hybrid_select{,_alt}_reset.json hold, against the best seed
    scheme those files name, and the runs found 7 changes on phase_shift and none elsewhere."""
    import re

    columns = ["zipf", "ycsb_a", "ycsb_f", "varmail", "phase_shift", "zipf_hc_alternating"]
    results = docs_results("hybrid_select_reset", "hybrid_select_alt_reset")
    cells = docs_row("CB [SepBIT], `early_plan`, `count_reset=50`")
    assert len(cells) == len(columns)
    run = "hybrid[lifetimes=select,hot_filter=auto,early_plan=True,count_reset=50]"
    for workload, cell in zip(columns, cells, strict=True):
        change, waf = re.fullmatch(r"([+-]\d+\.\d)% \((\d\.\d{4})\)", cell).groups()
        table, summary = results[workload]
        assert waf == f"{table[run]['waf']:.4f}", workload
        assert change == docs_percent(summary["variants"][run]), workload
        assert table[run]["count_changes"] == (7 if workload == "phase_shift" else 0), workload


def test_a_run_stopped_after_a_change_resumes_to_the_same_result(phases, tmp_path, monkeypatch):
    """The change test's state (its statistic, the epoch, the times found) is part of the
    checkpoint: stopped at the checkpoint after the first change and rerun, the run detects the
    same changes and ends at the same WAF as the uninterrupted one."""
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.sim import checkpoint as ckpt

    policy = {"name": "hybrid", "params": {**DOGI_SMALL, "lifetimes": "select", "count_reset": THRESHOLD}}
    sim_cfg = {"capacity_blocks": CAP, "segment_blocks": SEG, "chunk_blocks": 16384}
    reference = simulate(phases, policy, sim_cfg, progress=False)
    first_change = reference["count_change_at"][0]
    every = 16384
    stopped = {**sim_cfg, "checkpoint_every": every, "checkpoint_dir": str(tmp_path / "ckpt")}
    run_stopped(phases, policy, stopped, -(-first_change // every), monkeypatch)  # the first checkpoint after it
    assert ckpt.Checkpointer(tmp_path / "ckpt", {}).header()["position"] > first_change
    resumed = simulate(phases, policy, {**stopped, "checkpoint_every": 10**9}, progress=False)
    assert resumed["count_change_at"] == reference["count_change_at"]
    assert resumed["waf"] == reference["waf"]
