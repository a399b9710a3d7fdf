"""DOGI's training-sample span (issue 12 §4): train_span / label_lag / censored_labels choose
the samples a retraining learns from; the default keeps every labelled sample of the ring."""

import numpy as np
import pytest

from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.generators import zipf

CAP, SEG = 16384, 64
SMALL = dict(
    retrain_every=16384,
    min_samples=100,
    max_samples=20000,
    model_params={"epochs": 2, "patience": 1},
    fallback_compare="none",
)


@pytest.fixture(scope="module")
def trace():
    return zipf(CAP, 6 * CAP, seed=5, theta=1.0)


def _history(trace, **params):
    pol = make_policy("dogi", **{**SMALL, **params})
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, chunk_blocks=16384), CAP, trace=trace)
    res = sim.run(trace.block_writes)
    return [h for h in res["training_history"] if "train_samples" in h and h["train_samples"]], res


def test_training_samples_come_from_the_span(trace):
    whole, _ = _history(trace)
    span, res = _history(trace, train_span=0.5, label_lag=0.25)
    assert whole and span and res["retrains"] >= 2
    # the whole ring reaches back over several capacities; the span ends label_lag before the
    # retraining and starts train_span before that
    assert max(h["train_span_capacities"] for h in whole) > 2.0
    for h in span:
        assert 0.25 < h["train_span_capacities"] <= 0.75 + 1e-9
        assert h["train_samples"] < h["labelled_samples"]
    # unlabelled samples labelled by their age (the authors' FILL_MAXTIME) add to the span's samples
    aged, _ = _history(trace, train_span=0.5, label_lag=0.25, censored_labels="age")
    n_span = {h["user_writes"]: h["train_samples"] for h in span}
    common = [h for h in aged if h["user_writes"] in n_span]
    assert common and all(h["train_samples"] > n_span[h["user_writes"]] for h in common)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"train_span": 0}, "policy.params.train_span=0 must be above 0 -- give e.g. policy.params.train_span=0.3"),
        ({"label_lag": -1}, "policy.params.label_lag=-1 must be >= 0 -- give e.g. policy.params.label_lag=0.3"),
        ({"censored_labels": "drop"}, "censored_labels must be long_bound or age"),
        ({"model_wait": "fifo"}, "model_wait must be none or queue"),
        ({"model_static": "frozen"}, "model_static must be none or unwritten"),
        ({"plog": "latest"}, "plog must be validation or mature"),
    ],
)
def test_bad_span_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        make_policy("dogi", **params)


def test_mature_plog_holds_every_sample_past_c10s_bound(trace):
    """plog=mature: once samples older than c10's lower bound exist (2.56 capacities), the PLog
    holds all of them (pending ones at their age), more than the latest labelled 20%."""
    whole, _ = _history(trace)
    mature, _ = _history(trace, plog="mature")
    n_val = {h["user_writes"]: h["plog_records"] for h in whole if "plog_records" in h}
    late = [h for h in mature if h.get("plog_records") and h["user_writes"] > 3 * CAP and h["user_writes"] in n_val]
    assert late and all(h["plog_records"] > n_val[h["user_writes"]] for h in late)


def test_default_span_is_the_whole_ring():
    pol = make_policy("dogi")
    assert pol.cfg["train_span"] is None and pol.cfg["censored_labels"] == "long_bound"
    assert np.isclose(pol.cfg["label_lag"], 0.0)
