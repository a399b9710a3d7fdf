"""Engine operations: retiring a group (sealing its open segment) and GC bursts up to a high
watermark of free segments."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest
from helpers import zipf_writes

from dogi_ml.policies import make_policy
from dogi_ml.sim import InvariantError, SimConfig, SimulationError, Simulator, check_invariants
from dogi_ml.sim.kernels import retire_group
from dogi_ml.sim.state import C_FREE, C_NOW, C_RECLAIMED, C_WRITTEN, SEG_FREE, SEG_OPEN, SEG_SEALED

CAP = 8192
SEG = 64


@pytest.fixture(scope="module")
def zipf_small():
    return zipf_writes(CAP, 8 * CAP, theta=1.0, seed=11)


def make(policy: str, **cfg) -> Simulator:
    return Simulator(make_policy(policy), SimConfig(segment_blocks=SEG, **cfg), CAP)


def half_written_group(sim: Simulator) -> int:
    """A group whose open segment is partly written (the test needs one to retire)."""
    for g, seg in enumerate(sim.state.open_seg):
        if seg >= 0 and 0 < sim.state.seg_wp[seg] < SEG:
            return g
    raise AssertionError("no group has a partly written open segment")


# -- retire_group ---------------------------------------------------------------------------


def test_retire_seals_exactly_the_open_segment(zipf_small):
    sim = make("sepgc", debug_invariants=True)
    sim.prefill()
    sim.feed(zipf_small[:5000])
    s = sim.state
    g = half_written_group(sim)
    seg = int(s.open_seg[g])
    before = {name: getattr(s, name).copy() for name in s._fields}
    assert sim.retire_group(g) == seg
    assert s.open_seg[g] == -1 and s.seg_state[seg] == SEG_SEALED
    assert s.seg_seal_time[seg] == s.ctr[C_NOW]
    # nothing else moved: the mapping, the counters, every other segment and group
    changed = {name for name in s._fields if not np.array_equal(before[name], getattr(s, name))}
    assert changed == {"open_seg", "seg_state", "seg_seal_time"}
    assert np.flatnonzero(before["seg_state"] != s.seg_state).tolist() == [seg]
    assert np.flatnonzero(before["open_seg"] != s.open_seg).tolist() == [g]
    check_invariants(s)
    # a group with no open segment: nothing to do
    assert sim.retire_group(g) == -1
    check_invariants(s)


def test_retired_group_reopens_on_its_next_write(zipf_small):
    sim = make("sepgc", debug_invariants=True)
    sim.prefill()
    sim.feed(zipf_small[:5000])
    s = sim.state
    seg = sim.retire_group(0)  # SepGC: group 0 takes every user write
    assert 0 < s.seg_wp[seg] < SEG
    reclaimed = int(s.ctr[C_RECLAIMED])
    sim.feed(zipf_small[5000:5001])
    new = int(s.open_seg[0])
    assert new >= 0 and new != seg and s.seg_state[new] == SEG_OPEN and s.seg_wp[new] == 1
    # the retired segment stays sealed as it was, unless the GC this write triggered took it
    if int(s.ctr[C_RECLAIMED]) == reclaimed:
        assert s.seg_state[seg] == SEG_SEALED and 0 < s.seg_wp[seg] < SEG
    else:
        assert s.seg_state[seg] == SEG_FREE
    sim.feed(zipf_small[5001:20000])
    check_invariants(s)


def test_retired_segment_is_reclaimed_by_gc(zipf_small):
    sim = make("nosep", debug_invariants=True)
    sim.prefill()
    sim.feed(zipf_small[:3000])
    s = sim.state
    seg = sim.retire_group(0)
    assert 0 < s.seg_wp[seg] < SEG
    reclaimed = int(s.ctr[C_RECLAIMED])
    # Overwrite what the retired segment holds: it becomes the emptiest sealed segment, so the
    # greedy selector must take it (and its unwritten tail counts as space freed).
    lbas = s.p2l[seg * SEG : seg * SEG + s.seg_wp[seg]]
    sim.feed(lbas[lbas >= 0].astype(np.int64))
    sim.feed(zipf_small[3000:12000])
    assert s.seg_state[seg] != SEG_SEALED or s.seg_wp[seg] == SEG, "the retired segment was never reclaimed"
    assert int(s.ctr[C_RECLAIMED]) > reclaimed
    check_invariants(s)


def test_fully_valid_retired_segment_still_frees_space():
    """A retired segment whose blocks are all valid is still worth reclaiming (its unwritten tail
    is space): with no garbage anywhere, GC must take it rather than report "no gain"."""
    cap = 16 * SEG
    sim = Simulator(
        make_policy("nosep"), SimConfig(segment_blocks=SEG, op_ratio=0.5, prefill=False, debug_invariants=True), cap
    )
    sim.prefill()  # prefill off: compiles only
    for step in range(40):  # 8 fresh LBAs per segment, then retire it: no overwrites
        sim.feed(np.arange(8 * step, 8 * step + 8, dtype=np.int64))
        sim.retire_group(0)
    s = sim.state
    r = sim.result()
    assert r["reclaimed_segments"] > 0 and r["gc_writes"] > 0
    assert int(s.ctr[C_FREE]) >= 2
    assert r["invalid_blocks"] == 0  # nothing was ever garbage
    check_invariants(s)


def test_retire_group_rejects_bad_groups():
    sim = make("sepgc")
    with pytest.raises(ValueError, match=r"group 2 is outside \[0, 2\).*sepgc"):
        sim.retire_group(2)
    with pytest.raises(ValueError, match="outside"):
        sim.retire_groups([0, -1])
    with pytest.raises(TypeError, match="integer"):
        sim.retire_group(0.5)


def test_retire_groups_seals_several(zipf_small):
    sim = make("sepbit", debug_invariants=True)
    sim.prefill()
    sim.feed(zipf_small[:20000])
    open_before = [int(x) for x in sim.state.open_seg]
    assert sim.retire_groups(range(sim.n_groups)) == open_before
    assert np.all(sim.state.open_seg == -1)
    assert np.all(sim.state.seg_state[[x for x in open_before if x >= 0]] == SEG_SEALED)
    check_invariants(sim.state)
    sim.feed(zipf_small[20000:])
    check_invariants(sim.state)


@nb.njit(cache=True)
def _retire_from_numba(s, group, now):
    return retire_group(s, group, now)


def test_retire_group_is_numba_callable(zipf_small):
    sim = make("sepgc")
    sim.prefill()
    sim.feed(zipf_small[:4000])
    s = sim.state
    seg = int(s.open_seg[0])
    assert _retire_from_numba(s, 0, int(s.ctr[C_NOW])) == seg
    assert s.seg_state[seg] == SEG_SEALED
    check_invariants(s)


def test_retiring_a_never_written_segment_frees_it(zipf_small):
    sim = make("nosep")
    sim.prefill()
    s = sim.state
    seg = int(s.open_seg[0])
    # rewind the open segment to empty (as if opened and never written), keeping the books right
    lbas = s.p2l[seg * SEG : seg * SEG + s.seg_wp[seg]].copy()
    assert np.all(lbas >= 0)
    s.p2l[seg * SEG : seg * SEG + s.seg_wp[seg]] = -1
    s.l2p[lbas] = -1
    s.ctr[C_WRITTEN] -= s.seg_wp[seg]  # the blocks in open and sealed segments (garbage-proportion trigger)
    s.seg_valid[seg] = 0
    s.seg_wp[seg] = 0
    check_invariants(s)
    free = int(s.ctr[C_FREE])
    assert sim.retire_group(0) == -1
    assert s.seg_state[seg] == SEG_FREE and int(s.ctr[C_FREE]) == free + 1
    check_invariants(s)


def test_invariant_checker_catches_an_empty_sealed_segment(zipf_small):
    sim = make("nosep")
    sim.prefill()
    s = sim.state
    seg = int(s.free_stack[int(s.ctr[C_FREE]) - 1])
    s.ctr[C_FREE] -= 1
    s.seg_state[seg] = SEG_SEALED
    with pytest.raises(InvariantError, match="sealed segment holds no block"):
        check_invariants(s)


# -- GC bursts (high watermark) ----------------------------------------------------------------

# Golden GC writes of the test trace without a high watermark (as in tests/test_sim.py's GOLDEN).
NO_BURST = {"nosep": 492220, "sepgc": 342971, "sepbit": 309022}


@pytest.mark.parametrize("policy", sorted(NO_BURST))
@pytest.mark.parametrize("high", [None, 0, 2])
def test_no_high_watermark_is_bit_identical(policy, high, zipf_small):
    sim = make(policy, gc_high_free_segments=high)
    r = sim.run(zipf_small)
    assert r["gc_writes"] == NO_BURST[policy]
    assert 0 < r["gc_bursts"] <= r["reclaimed_segments"]


def _bursts(sim: Simulator, writes: np.ndarray):
    """Feed one write at a time; yield the free segments after each write that ran GC."""
    s = sim.state
    for i in range(writes.size):
        reclaimed = int(s.ctr[C_RECLAIMED])
        sim.feed(writes[i : i + 1])
        if int(s.ctr[C_RECLAIMED]) > reclaimed:
            yield int(s.ctr[C_FREE])


def test_burst_collects_up_to_the_high_watermark(zipf_small):
    high = 8
    sim = make("sepgc", gc_high_free_segments=high)
    sim.prefill()
    after = list(_bursts(sim, zipf_small[:15000]))
    assert len(after) > 5
    assert min(after) >= high
    assert int(sim.state.ctr[C_FREE]) >= sim.cfg.gc_free_segments
    r = sim.result()
    assert r["reclaimed_segments"] > 3 * r["gc_bursts"]  # several victims per trigger
    # SepGC: the relocated blocks fill the GC group's own segments, never the user group's
    assert r["groups"][1]["user_writes"] == 0 and r["groups"][0]["gc_writes"] == 0
    check_invariants(sim.state)


def test_without_high_watermark_gc_stops_at_the_low_one(zipf_small):
    sim = make("sepgc")
    sim.prefill()
    after = list(_bursts(sim, zipf_small[:15000]))
    assert len(after) > 5 and max(after) == sim.cfg.gc_free_segments


def test_bursts_change_waf_and_keep_invariants(zipf_small):
    sim = make("nosep", gc_high_free_segments=10, debug_invariants=True, chunk_blocks=4096)
    r = sim.run(zipf_small)
    assert r["gc_writes"] != NO_BURST["nosep"]
    assert r["reclaimed_segments"] > r["gc_bursts"] > 0
    assert int((sim.state.l2p >= 0).sum()) == CAP and int(sim.state.seg_valid.sum()) == CAP


def test_high_watermark_at_the_limit_runs(zipf_small):
    sim = make("sepgc")
    limit = sim.n_segments - CAP // SEG - sim.n_groups - 1
    sim = make("sepgc", gc_high_free_segments=limit, debug_invariants=True)
    r = sim.run(zipf_small[:20000])
    assert r["gc_writes"] > 0


def test_high_watermark_below_low_is_explained():
    with pytest.raises(
        SimulationError,
        match=r"gc_high_free_segments=1 is below the low watermark "
        r"sim.gc_free_segments=2.*at least 2, or null",
    ):
        make("nosep", gc_high_free_segments=1)


def test_unreachable_high_watermark_is_explained():
    n_segments = int(CAP * 1.1 // SEG)  # 140
    limit = n_segments - CAP // SEG - 2 - 1  # sepgc: 2 open groups, one segment of garbage
    make("sepgc", gc_high_free_segments=limit)
    with pytest.raises(
        SimulationError,
        match=rf"gc_high_free_segments={limit + 1} cannot be reached.*"
        rf"at most {limit} can be free; lower it or raise sim.op_ratio",
    ):
        make("sepgc", gc_high_free_segments=limit + 1)
    with pytest.raises(SimulationError, match="cannot be reached"):
        make("nosep", gc_high_free_segments=10 * n_segments)


def test_high_watermark_must_be_whole():
    with pytest.raises(SimulationError, match="whole number of segments or null, got 2.5"):
        make("nosep", gc_high_free_segments=2.5)
