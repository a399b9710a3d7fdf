"""Issue 38 (results regenerate to the last digit): the learned schemes' background work (DOGI's
feature thread, its C header built beside the run and its base-design ghost on a worker thread;
Shiro's epoch trained on a second thread; PHFTL's and ML-DT's windows and split inference) may
finish early or late, and a run's outcome must not move. Each test runs a scheme twice: once
with every worker's job done the moment it is submitted (a synchronous executor, the C build
ready at once) and once with every job late (sleeps on the worker threads, a C build that
reports ready only from its fourth query), and compares the outcome digests
(:func:`dogi_ml.determinism.outcome_digest`: every key but the timings)."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from dogi_ml.determinism import outcome_digest
from dogi_ml.export.cbuild import BackgroundBuild
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.generators import generate, zipf

#: how long a late worker sleeps before each job: many chunks' worth of the loop's time
DELAY_S = 0.05


class DoneAtOnce:
    """A ``ThreadPoolExecutor`` stand-in that runs each job as it is submitted (on the caller's
    thread): every background result is there before the loop goes on."""

    def __init__(self, *args, **kwargs):
        pass

    def submit(self, fn, *args, **kwargs):
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:
            future.set_exception(e)
        return future

    def shutdown(self, *args, **kwargs):
        pass


def _late(fn):
    """``fn`` started ``DELAY_S`` late when a worker thread runs it."""

    def late(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(DELAY_S)
        return fn(*args, **kwargs)

    return late


def _run(name, trace, capacity, sim_cfg, **params):
    sim = Simulator(make_policy(name, **params), SimConfig(**sim_cfg), capacity, trace=trace)
    return sim.run(trace.block_writes)


def _at_once_and_late(monkeypatch, run, late_methods, late_setup=None):
    """``run()`` with every worker's job done at submission, then with ``late_methods`` (``(class,
    name)`` pairs) delayed on worker threads (and ``late_setup()`` applied)."""
    with monkeypatch.context() as m:
        m.setattr(concurrent.futures, "ThreadPoolExecutor", DoneAtOnce)
        m.setattr(BackgroundBuild, "ready", BackgroundBuild.wait)
        at_once = run()
    with monkeypatch.context() as m:
        for cls, name in late_methods:
            m.setattr(cls, name, _late(getattr(cls, name)))
        if late_setup is not None:
            late_setup(m)
        late = run()
    return at_once, late


@pytest.mark.usefixtures("c_compiler")
def test_dogi_outcome_does_not_depend_on_its_background_work(monkeypatch):
    """DOGI with the integer model, the feature thread (features and predictions of the next
    chunk), the C header's background build and the base design's ghost on a worker thread,
    the fallback comparing against that ghost: the same outcome when every background result
    is there at once and when each one is late (the C header from a build's fourth query on,
    the Numba kernel before)."""
    from dogi_ml.policies.dogi import DOGI

    cap = 16384
    trace = zipf(cap, 6 * cap, seed=5, theta=1.0)
    params = dict(
        retrain_every=8192,
        min_samples=300,
        max_samples=20000,
        model_params={"epochs": 3, "patience": 2},
        deployed="int8",
        int8_runtime="auto",
        feature_thread=True,
        fallback_compare="ghost",
        ghost_process="thread",
    )

    def late_build(m):
        wait = BackgroundBuild.wait

        def ready(self):
            self.queries = getattr(self, "queries", 0) + 1
            return wait(self) if self.queries > 3 else None

        m.setattr(BackgroundBuild, "ready", ready)

    at_once, late = _at_once_and_late(
        monkeypatch,
        lambda: _run("dogi", trace, cap, dict(segment_blocks=64, chunk_blocks=4096), **params),
        [(DOGI, "_fill_features"), (Simulator, "feed")],  # Simulator.feed: the ghost's, on its thread
        late_build,
    )
    # the delays took effect: the C header throughout in one run, the Numba kernel then C in
    # the other; predictions made ahead were placed; the ghost's WAF decided fallbacks
    assert at_once["int8_blocks_by_runtime"]["numba"] == 0 < at_once["int8_blocks_by_runtime"]["c"]
    assert late["int8_blocks_by_runtime"]["numba"] > 0 and late["int8_blocks_by_runtime"]["c"] > 0
    assert at_once["inferred_ahead_used"] > 0 and at_once["mode_switches"] >= 4
    actions = {h.get("action") for h in at_once["training_history"]}
    assert {"model deployed", "fallback (measured WAF above the base design's)"} <= actions
    assert outcome_digest(late) == outcome_digest(at_once)


def test_shiro_background_epoch_serves_at_the_window_end_however_late(monkeypatch):
    """Shiro's background epoch serves from the next window's end, whether it finished at its
    submission or only then: chunks of a quarter window, so a model deployed when it is ready
    would start at another chunk in the two runs."""
    from dogi_ml.policies.shiro import Shiro

    cap = 8192
    trace = generate("hotcold", capacity_blocks=cap, n_writes=4 * cap, seed=5, hot_traffic=0.8, hot_fraction=0.1)
    params = dict(
        window=0.25,
        sample_every=2,
        min_samples=600,
        max_train=3000,
        model_params={"epochs": 4, "batch_size": 64, "patience": 2},
        background_training=True,
    )
    sim_cfg = dict(segment_blocks=32, op_ratio=0.2, chunk_blocks=512)
    at_once, late = _at_once_and_late(
        monkeypatch, lambda: _run("shiro", trace, cap, sim_cfg, **params), [(Shiro, "_epoch_job")]
    )
    background = [h for h in at_once["training_history"] if str(h.get("action", "")).startswith("one epoch (back")]
    assert len(background) >= 4
    assert outcome_digest(late) == outcome_digest(at_once)


@pytest.mark.parametrize("name, params", [("phftl", {"inference": "cached"}), ("mldt", {})])
def test_sequence_schemes_do_not_depend_on_their_window_thread(name, params, monkeypatch):
    """PHFTL and ML-DT build windows ahead and split inference with a second thread, sharing
    a piece by the seconds each side took: with that thread's jobs done at once, then late (the
    split skipped while its windows are still building, or moved), the same outcome."""
    import dogi_ml.policies._sequence as seq

    cls = type(make_policy(name))
    monkeypatch.setattr(seq, "PIPELINE_ROWS", 512)  # several pieces per chunk
    monkeypatch.setattr(seq, "INFER_BATCH", 64)  # ML-DT's rows split in whole batches of 64
    monkeypatch.setattr(cls, "INFER_BATCH", None)
    cap = 8192
    trace = generate("hotcold", capacity_blocks=cap, n_writes=5 * cap, seed=5, hot_traffic=0.8, hot_fraction=0.1)
    model = {"epochs": 2} if name == "phftl" else {"epochs": 2, "channels": [16, 16]}
    run_params = dict(retrain_every=4096, sample_every=2, min_samples=200, max_train=2000, history=4, **params)
    at_once, late = _at_once_and_late(
        monkeypatch,
        lambda: _run(name, trace, cap, dict(segment_blocks=32, op_ratio=0.2), model_params=model, **run_params),
        [(cls, "_timed_windows"), (cls, "_timed_share")],
    )
    assert at_once["retrains"] >= 4 and at_once["inferred_blocks"] > 0
    assert outcome_digest(late) == outcome_digest(at_once)
