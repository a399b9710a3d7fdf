"""Issue 18 (the learned schemes' loop): the engine's ``prefetch_lba`` hook is a cache hint only
(DOGI with and without it places every block alike), and DOGI's base-design ghost fed on a
worker thread (``ghost_process=thread``, possible since ``run_chunk`` releases the GIL) gives
the in-line ghost's counters and the same run."""

import numpy as np
import pytest

from dogi_ml.policies.dogi import DOGI, dogi_prefetch
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.policy_api import PlacementPolicy, no_prefetch_hook
from dogi_ml.traces.generators import generate

CAP, SEG = 16384, 64
SMALL = dict(retrain_every=16384, min_samples=300, max_samples=20000, model_params={"epochs": 3, "patience": 2})


class DogiWithoutPrefetch(DOGI):
    prefetch_lba = no_prefetch_hook


@pytest.fixture(scope="module")
def varmail():
    return generate("varmail", capacity_blocks=CAP, n_writes=4 * CAP, seed=2)


def _run(policy, trace):
    sim = Simulator(policy, SimConfig(segment_blocks=SEG, chunk_blocks=16384), CAP, trace=trace)
    return sim.run(trace.block_writes)


def test_prefetch_hook_must_be_a_module_level_numba_function(varmail):
    class Bad(DOGI):
        prefetch_lba = staticmethod(lambda p, lba: None)

    with pytest.raises(TypeError, match="Numba-compiled"):
        Simulator(Bad(**SMALL), SimConfig(segment_blocks=SEG), CAP, trace=varmail)


def test_prefetch_hint_and_ghost_thread_change_nothing(varmail):
    """DOGI with its prefetch hook and the ghost on a thread vs without the hook and the ghost
    in line: the same run (each change is checked by the other side being the plain path)."""
    assert DOGI.prefetch_lba is dogi_prefetch and PlacementPolicy.prefetch_lba is no_prefetch_hook
    a = _run(DOGI(deployed="int8", fallback_compare="ghost", ghost_process="thread", **SMALL), varmail)
    b = _run(DogiWithoutPrefetch(deployed="int8", fallback_compare="ghost", ghost_process=False, **SMALL), varmail)
    assert a["retrains"] > 0 and a["inferred_blocks"] > 0
    assert a["base_ghost_waf"] > 1 and a["base_ghost_waf"] == b["base_ghost_waf"]
    assert not a["base_ghost_process"]
    for k in ("waf", "gc_writes", "user_confusion", "gc_destinations", "mode", "retrains", "waf_series"):
        assert a[k] == b[k], k
    ghost = [h.get("base_ghost_waf") for h in a["training_history"]]
    assert ghost == [h.get("base_ghost_waf") for h in b["training_history"]]
    assert any(g is not None and np.isfinite(g) for g in ghost)
    with pytest.raises(ValueError, match="ghost_process must be auto, true, false or thread"):
        DOGI(ghost_process="threads")


def test_loop_cpu_time_is_reported(varmail):
    """``loop_cpu_s``: this thread's CPU time in the loop (not the waits for a core), at most
    the loop's wall time; ``appends_per_cpu_second`` divides the same appends by it."""
    from dogi_ml.policies import make_policy

    r = _run(make_policy("sepbit"), varmail)
    assert 0 < r["loop_cpu_s"] <= r["elapsed_s"] * 1.05 + 0.01
    appends = r["user_writes"] + r["gc_writes"]
    assert r["appends_per_cpu_second"] == pytest.approx(appends / r["loop_cpu_s"])
