"""The group-configuration model (markov.groups) against the chain oracle (oracles.chain: the
model's configuration run with perfect placement) on the paper's workloads at a small scale
(32 Ki blocks, 64-block segments, 16x written), where the model's assumptions hold:

- zipf: stationary; modelled WAF within 3%, and with ``reclaim_wait="queue"`` the hot group's
  copies match the simulated ones (reclaim at expiry over-counts them about twofold);
- phase_shift: not stationary (its distribution changes every 2 capacities), so each settled
  half-phase is modelled on its own PLog and compared with the WAF simulated over it;
- ycsb_a: at 64 Ki blocks (at 32 Ki its InnoDB-like layout leaves the model 7% high, its last
  group's valid ratio 0.873 against 0.864: GN's FIFO term is that sensitive);
- varmail: 86% of its space is never rewritten after the prefill, in whole files, so whole
  segments of the last group never hold garbage and the FIFO passes over them; the model takes
  that data out of its FIFO (``static="segments"``, the default); left in, the model is 14% high.
  Zipf's never-written blocks are scattered among rewritten ones and the FIFO keeps copying
  them: taking them out too (``static="unwritten"``) leaves the model 6% low.
"""

import numpy as np
import pytest

from dogi_ml.oracles.annotate import NEVER
from dogi_ml.oracles.chain import model_vs_simulator, static_segment_blocks
from dogi_ml.sim import SimConfig
from dogi_ml.traces.generators import generate

CAP, SEG, VOLUME = 32768, 64, 16


def _writes(kind: str, cap: int = CAP) -> np.ndarray:
    return np.asarray(generate(kind, capacity_blocks=cap, n_writes=VOLUME * cap, seed=0).block_writes, np.int64)


def _run(writes, cap: int = CAP, seg: int = SEG, **kw):
    return model_vs_simulator(writes, cap, SimConfig(segment_blocks=seg), **kw)


def test_zipf_agrees_and_the_reclaim_wait_fixes_the_hot_copies():
    writes = _writes("zipf")
    at_expiry = _run(writes)
    waited = _run(writes, reclaim_wait="queue")
    for res in (at_expiry, waited):
        assert len(res["groups"]) >= 3 and res["hot_share"] > 0.3
        assert res["model_waf"] == pytest.approx(res["sim_waf"], rel=0.03), res["rel_error"]
    # copies per user write out of G_hot: modelled at expiry vs after the queue's wait
    sim_hot = waited["sim_copies"][0]
    assert at_expiry["model_copies"][0] > 1.5 * sim_hot
    assert waited["model_copies"][0] == pytest.approx(sim_hot, rel=0.25)
    # the simulated copies per group account for every GC copy (the model's last term is its WAF's
    # remainder by construction, so only the simulated side can be checked this way)
    assert 1 + sum(waited["sim_copies"]) == pytest.approx(waited["sim_waf"], rel=1e-9)


def test_ycsb_a_agrees():
    cap = 2 * CAP
    res = _run(_writes("ycsb_a", cap), cap, 2 * SEG)
    assert len(res["groups"]) >= 3 and res["hot_share"] > 0.4
    assert res["model_waf"] == pytest.approx(res["sim_waf"], rel=0.03), res["rel_error"]


def test_phase_shift_agrees_per_stationary_period():
    writes = _writes("phase_shift")
    phase = 2 * CAP
    settled = [(s + phase // 2, s + phase) for s in range(0, VOLUME * CAP, phase)]
    res = _run(writes, periods=settled)
    errors = [p["rel_error"] for p in res["periods"]]
    assert len(errors) == VOLUME // 2 and all(abs(e) <= 0.03 for e in errors), errors
    # the phases alternate Zipf 1.01 and Zipf 0.8: different hot shares and WAFs per period
    hot = [p["hot_share"] for p in res["periods"]]
    assert min(hot[0::2]) > 2 * max(hot[1::2])
    assert min(p["sim_waf"] for p in res["periods"][1::2]) > max(p["sim_waf"] for p in res["periods"][0::2])


def test_varmail_agrees_once_its_static_segments_are_known():
    writes = _writes("varmail")
    res = _run(writes)
    assert res["static_blocks"] > 0.8 * CAP
    assert res["model_waf"] == pytest.approx(res["sim_waf"], rel=0.03), res["rel_error"]
    blind = _run(writes, static="none")
    assert blind["rel_error"] > 0.1  # the uniform FIFO over static data: the broken assumption
    with pytest.raises(ValueError, match="static must be one of"):
        _run(writes[:100], static="frozen")


def test_static_data_mixed_with_rewritten_data_stays_in_the_fifo():
    res = _run(_writes("zipf"), static="unwritten")
    assert res["static_blocks"] > 0.05 * CAP  # zipf leaves ~8% of its blocks unwritten ...
    assert res["rel_error"] < -0.04  # ... but scattered: the FIFO copies them, the model must too


def test_static_segments_are_whole_last_group_segments_of_never_rewritten_blocks():
    # prefill of 12 LBAs, 2-block segments; the last group takes inv > 5 (1 and 4 go elsewhere):
    # its prefill sequence is LBAs 0, 2, 3, 5, 6, 7, 8, 9, 10, 11 -> segments (0,2) (3,5) (6,7)
    # (8,9) (10,11); all-never: (6,7) and (10,11); (0,2) holds LBA 2, rewritten late (inv 50)
    inv = np.array([NEVER, 3, 50, NEVER, 4, 9, NEVER, NEVER, NEVER, 7, NEVER, NEVER, 1, 2])
    assert static_segment_blocks(inv, 12, 5, 2) == 4
    assert static_segment_blocks(inv, 12, 5, 20) == 0  # no whole segment
    assert static_segment_blocks(inv, 12, 100, 1) == 7  # every never-rewritten block, one per segment
