"""PHFTL and ML-DT (DOGI's learned comparison targets): runs with invariants, WAF vs NoSep,
online accuracy, parameter errors, sequence-window parity with the train pipeline, the TCN's
regression option."""

from __future__ import annotations

import numpy as np
import pytest

from dogi_ml.policies import make_policy
from dogi_ml.policies._online import log_columns
from dogi_ml.policies._sequence import SequenceStream, log_features
from dogi_ml.policies.mldt import lifetime_bounds
from dogi_ml.policies.phftl import cdf_knee
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.traces.generators import generate

CAP = 8192
# 20 open groups (ML-DT) need room: 32-block segments, 20% OP
SIM = dict(segment_blocks=32, op_ratio=0.2, debug_invariants=True)
# small and fast: retrain every 4096 user writes on at most 2000 windows of 4 writes
FAST = dict(retrain_every=4096, sample_every=2, min_samples=200, max_train=2000, max_samples=20000, history=4)
MODEL = {"phftl": {"epochs": 2}, "mldt": {"epochs": 2, "channels": [16, 16]}}
USER_GROUPS = {"phftl": range(0, 2), "mldt": range(0, 19)}


@pytest.fixture(scope="module")
def skewed():
    # a small hot set takes most writes: lifetimes are learnable, separation pays off
    return generate("hotcold", capacity_blocks=CAP, n_writes=8 * CAP, seed=5, hot_traffic=0.8, hot_fraction=0.1)


def simulate(name, trace, **params):
    pol = make_policy(name, **params)
    sim = Simulator(pol, SimConfig(**SIM), CAP, trace=trace)
    return sim, sim.run(trace.block_writes)


@pytest.fixture(scope="module")
def nosep_waf(skewed):
    return simulate("nosep", skewed)[1]["waf"]


@pytest.mark.parametrize("name", ["phftl", "mldt"])
def test_runs_with_invariants_beats_nosep_and_reports_accuracy(name, skewed, nosep_waf):
    sim, r = simulate(name, skewed, **FAST, model_params=MODEL[name])
    assert r["user_writes"] == skewed.block_writes.size
    assert r["waf"] < nosep_waf, (name, r["waf"], nosep_waf)
    # user writes only in user groups, GC writes only in GC groups
    for g in r["groups"]:
        if g["group"] in USER_GROUPS[name]:
            assert g["gc_writes"] == 0, g
        else:
            assert g["user_writes"] == 0, g
    assert r["retrains"] >= 5 and r["train_seconds"] > 0
    assert r["mode"] == "model"
    assert r["inference_ns_per_block"] > 0 and r["inferred_blocks"] > 0
    assert 0.0 <= r["user_accuracy"] <= 1.0
    assert r["user_predictions_scored"] > 1000
    conf = np.array(r["user_confusion"])
    assert conf.sum() == r["user_predictions_scored"]
    assert r["victim"] == "cost_benefit"
    if name == "phftl":
        assert r["user_accuracy"] > 0.8  # hot/cold on hotcold is easy
        assert r["hot_threshold"] >= 1
        # GC writes cascade: the first GC group receives from the user groups
        assert r["groups"][2]["gc_writes"] > 0
    else:
        assert r["user_log2_mae"] >= 0
        assert 0.0 <= r["user_accuracy_within_one_group"] <= 1.0
        assert r["user_accuracy_within_one_group"] >= r["user_accuracy"]
        assert len(r["group_bounds"]) == 18
        assert r["user_accuracy"] > 0.1  # chance over 19 bins is ~0.05


def test_phftl_fixed_threshold_scores_against_it(skewed):
    _, r = simulate("phftl", skewed, **FAST, model_params=MODEL["phftl"], hot_threshold=500)
    assert r["hot_threshold"] == 500
    assert all(h.get("hot_threshold", 500) == 500 for h in r["training_history"])
    assert 0.0 <= r["user_accuracy"] <= 1.0


@pytest.fixture(scope="module")
def phftl_cached(skewed):
    return simulate("phftl", skewed, **FAST, model_params=MODEL["phftl"], inference="cached")


def test_phftl_cached_states_run(phftl_cached, skewed, nosep_waf):
    """``inference: cached`` (one GRU step per write from the LBA's state): same groups and
    bookkeeping as the window model, below NoSep, as accurate on hot/cold; each retraining makes
    every state stale, rebuilt at the LBA's next write."""
    sim, r = phftl_cached
    assert r["inference"] == "cached" and r["waf"] < nosep_waf
    assert r["user_accuracy"] > 0.8
    assert r["retrains"] >= 5 and r["inferred_blocks"] > 0
    # at least one rebuild per LBA written after each deployment, at most one per inferred write
    assert r["retrains"] * 100 < r["states_rebuilt"] < r["inferred_blocks"]
    assert sim.policy.generation == r["retrains"]


def _torch_states(model, windows):
    """The torch GRU's hidden state after each step of ``windows`` (scaled as the model does)."""
    import torch

    with torch.no_grad():
        out, _ = model.net.gru(torch.from_numpy(model.scaler.transform(windows)))
        return out.numpy(), model.net.head(out).numpy().argmax(axis=-1)


def test_phftl_cached_step_equals_the_torch_window_model(phftl_cached):
    """Independent reference: torch's GRU forward with the model's scaler. (1) Writes to distinct
    LBAs with stale states: each state is rebuilt over its window, the class is the window
    model's and the stored state torch's last hidden state (int16 Q15, folded scaler, rational
    tanh: within 1e-3). (2) One LBA written 40 times: its carried state after write i equals
    torch's over the whole sequence, zero padding first."""
    from dogi_ml.policies._gru import STATE_SCALE, gru_cached_classes

    sim, _ = phftl_cached
    pol = sim.policy
    data = pol.ring.collect(int(sim.state.ctr[0]), long_bound=1)
    W = pol.ring_windows[data["slot"][-400:]]  # recorded windows [n, history, F]
    hs, ref = _torch_states(pol.model, W)
    states = np.zeros((len(W), hs.shape[-1]), np.int16)
    stamps = np.zeros(len(W), np.uint16)
    out = np.empty(len(W), np.int8)
    n = gru_cached_classes(np.arange(len(W)), W, states, stamps, 1, pol.padding, *pol.gru_weights, out)
    assert n == len(W) and (stamps == 1).all()
    np.testing.assert_array_equal(out, ref[:, -1])
    np.testing.assert_allclose(states / STATE_SCALE, hs[:, -1], atol=1e-3)

    H = W.shape[1]
    rows = W[:40, -1]  # 40 rows, as one LBA's consecutive writes
    seq = np.concatenate([np.zeros((H - 1, rows.shape[1]), np.float32), rows])
    windows = np.stack([seq[i : i + H] for i in range(len(rows))])
    states = np.zeros((1, hs.shape[-1]), np.int16)
    stamps = np.zeros(1, np.uint16)
    full_h, full_cls = _torch_states(pol.model, seq[None])
    for i in range(len(rows)):  # write by write: the state carried between calls
        one = np.empty(1, np.int8)
        rebuilt = gru_cached_classes(
            np.zeros(1, np.int64), windows[i : i + 1], states, stamps, 1, pol.padding, *pol.gru_weights, one
        )
        assert rebuilt == (i == 0)
        assert one[0] == full_cls[0, H - 1 + i]
        np.testing.assert_allclose(states[0] / STATE_SCALE, full_h[0, H - 1 + i], atol=1e-3)


@pytest.mark.parametrize("inputs, hidden", [(1, 4), (2, 32), (6, 32), (8, 8), (9, 32), (17, 5), (30, 32)])
def test_gru_step_equals_torch_gru_cell(inputs, hidden):
    """The Numba step (its gate sums eight inputs per pass, then pairs, then singles) against
    torch's GRUCell at input and hidden widths on each side of those cuts, over 30 steps."""
    import torch

    from dogi_ml.policies._gru import gru_step

    torch.manual_seed(inputs * 100 + hidden)
    cell = torch.nn.GRUCell(inputs, hidden)
    w = [t.detach().numpy().astype(np.float32) for t in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    wih_t, whh_t = np.ascontiguousarray(w[0].T), np.ascontiguousarray(w[1].T)
    x = torch.randn(30, inputs, generator=torch.Generator().manual_seed(1))
    h = np.zeros(hidden, np.float32)
    ht = torch.zeros(1, hidden)
    gi, gh = np.empty(3 * hidden, np.float32), np.empty(3 * hidden, np.float32)
    for t in range(30):
        gru_step(h, x[t].numpy(), wih_t, whh_t, w[2], w[3], gi, gh)
        with torch.no_grad():
            ht = cell(x[t : t + 1], ht)
        np.testing.assert_allclose(h, ht[0].numpy(), rtol=0, atol=2e-5)


def test_phftl_cached_shares_equal_one_call(phftl_cached):
    """Two threads take disjoint LBA shares of the same windows (split inference): their calls,
    in either order, leave the same states, stamps and classes as one call, with repeated LBAs
    and stale states among them."""
    from dogi_ml.policies._gru import gru_cached_classes

    sim, _ = phftl_cached
    pol = sim.policy
    data = pol.ring.collect(int(sim.state.ctr[0]), long_bound=1)
    W = pol.ring_windows[data["slot"][-600:]]
    lbas = np.random.default_rng(3).integers(0, 97, len(W))
    results = []
    for parts in ([(0, 64)], [(0, 40), (40, 64)], [(40, 64), (0, 40)], [(0, 1), (1, 64)]):
        states = np.zeros((97, pol.padding.shape[1]), np.int16)
        stamps = np.zeros(97, np.uint16)
        stamps[::2] = 1  # half the LBAs hold a current (zero) state, half a stale one
        out = np.full(len(W), -1, np.int8)
        rebuilt = 0
        for gen, half in ((1, slice(0, 300)), (2, slice(300, None))):  # a retraining in between
            for lo, hi in parts:
                rebuilt += gru_cached_classes(
                    lbas[half], W[half], states, stamps, gen, pol.padding, *pol.gru_weights, out[half], lo, hi, 64
                )
        assert (out >= 0).all()
        results.append((rebuilt, states.tobytes(), stamps.tobytes(), out.tobytes()))
    assert all(r == results[0] for r in results[1:])
    assert 0 < results[0][0] < len(W)


@pytest.mark.parametrize("name, params", [("phftl", {"inference": "cached"}), ("mldt", {})])
def test_windows_on_a_thread_change_nothing(name, params, skewed, monkeypatch):
    """With a model deployed, a chunk's windows are built piece by piece, the next piece's on a
    second thread while the model infers this one, each piece's inference is split between the
    threads, and the next chunk's windows are built while the loop applies this one: pieces of
    512 writes (8 per chunk) give the run of windows and inference one after the other on one
    thread, to the last count."""
    import dogi_ml.policies._sequence as seq

    # each piece's inference is split between the two threads: PHFTL's cached states by LBA,
    # ML-DT's windows by rows (whole batches: 64 rows here, so a 512-row piece splits)
    monkeypatch.setattr(seq, "INFER_BATCH", 64)
    shares = []
    cls = type(make_policy(name))
    monkeypatch.setattr(cls, "INFER_BATCH", None)
    own = cls._infer_share
    monkeypatch.setattr(cls, "_infer_share", lambda self, *a: shares.append(a[-2:]) or own(self, *a))
    runs = []
    for rows in (0, 512):
        monkeypatch.setattr(seq, "PIPELINE_ROWS", rows)
        sim, r = simulate(name, skewed, **FAST, model_params=MODEL[name], **params)
        runs.append((sim, r))
    (_, a), (sim, b) = runs
    assert getattr(sim.policy, "_windows_pool", None) is not None  # the thread ran
    split = [s for s in shares if s != (0, seq.SHARES)]
    assert split and all(0 < hi - lo < seq.SHARES for lo, hi in split)
    # the windows of every chunk but the first were built while the loop applied the one before
    # (the loop's sampled windows copied before it runs); none without pieces
    assert a["windows_ahead_chunks"] == 0 and b["windows_ahead_chunks"] == sim.chunks - 1 > 0
    for key in ("waf", "gc_writes", "user_confusion", "inferred_blocks", "user_accuracy"):
        assert a[key] == b[key], key
    assert [g["user_writes"] for g in a["groups"]] == [g["user_writes"] for g in b["groups"]]


def test_windows_ahead_across_feed_calls(skewed):
    """The next chunk's windows are built ahead only within one feed() call: a run fed in
    uneven parts (chunk boundaries inside and at the ends of calls) equals one fed at once."""
    runs = []
    for cuts in ([0, len(skewed.block_writes)], [0, 1, 4097, 9000, 9001, len(skewed.block_writes)]):
        pol = make_policy("phftl", **FAST, model_params=MODEL["phftl"], inference="cached")
        sim = Simulator(pol, SimConfig(**SIM, chunk_blocks=2048), CAP, trace=skewed)
        sim.prefill()
        own, calls = pol.before_chunk, []
        pol.before_chunk = lambda s, start, n, own=own, calls=calls: calls.append(start) or own(s, start, n)
        for a, b in zip(cuts, cuts[1:]):
            sim.feed(skewed.block_writes[a:b])
        r = sim.result()
        # every chunk's windows were built ahead but the first of each feed() call
        assert r["windows_ahead_chunks"] == len(calls) - (len(cuts) - 1)
        runs.append((r["waf"], r["gc_writes"], r["user_confusion"], r["states_rebuilt"]))
    assert runs[0] == runs[1]


def test_fallback_before_the_first_model(skewed):
    # never enough samples: every user write goes to the non-hot group / the middle bin
    _, r = simulate("phftl", skewed, **{**FAST, "min_samples": 10**9})
    assert r["groups"][0]["user_writes"] == 0 and r["groups"][1]["user_writes"] == r["user_writes"]
    assert r["user_accuracy"] is None and r["inference_ns_per_block"] is None and r["retrains"] == 0
    _, r = simulate("mldt", skewed, **{**FAST, "min_samples": 10**9})
    assert r["groups"][9]["user_writes"] == r["user_writes"]


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("phftl", {"nope": 1}, r"unknown parameter\(s\) \['nope'\]"),
        ("phftl", {"n_groups": 6}, "exactly 7 groups"),
        ("phftl", {"hot_threshold": -5}, "hot_threshold must be null"),
        ("phftl", {"hot_threshold": "knee"}, "hot_threshold must be null"),
        ("phftl", {"history": 0}, "history must be >= 1"),
        ("phftl", {"retrain_every": 0}, "retrain_every must be >= 1"),
        ("phftl", {"victim": "dogi"}, r"policy=phftl cannot run with policy.victim='dogi' -- use one of greedy"),
        ("phftl", {"inference": "fast"}, "inference must be one of window, cached"),
        ("phftl", {"features": ["latest_inv", "bogus"]}, r"unknown feature\(s\) \['bogus'\]"),
        ("phftl", {"model_params": {"hiden": 3}}, r"model gru: unknown parameter\(s\) \['hiden'\]"),
        ("mldt", {"user_groups": 10}, "n_groups must be user_groups \\+ 1 = 11"),
        ("mldt", {"user_groups": 1, "n_groups": 2}, "user_groups must be an integer in"),
        ("mldt", {"top_bin": 0}, "top_bin must be > 0"),
        ("mldt", {"model_params": {"task": "classification"}}, "task must be regression"),
    ],
)
def test_bad_params_raise_clear_errors(name, params, match):
    params = dict(params)
    n_groups = params.pop("n_groups", None)
    with pytest.raises(ValueError, match=match):
        make_policy(name, n_groups, **params)


def test_needs_the_trace():
    pol = make_policy("phftl")
    with pytest.raises(ValueError, match="needs the trace"):
        Simulator(pol, SimConfig(**SIM), CAP)


def test_sequence_windows_match_the_train_pipeline(skewed):
    """The policy's streamed per-chunk windows equal ``lba_sequences`` as ``build_dataset``
    builds them (features extracted for the sampled rows and their histories only), up to the
    log transform the policy applies once per row instead of per window."""
    from dogi_ml.features.extract import FEATURES, FeatureConfig, extract_features, history_rows, lba_sequences
    from dogi_ml.oracles.annotate import annotate

    names = ["lba", "latest_inv", "freq", "write_count", "sequential", "chunk_writes"]
    H = 5
    _, prev = annotate(skewed.block_writes)
    lo, hi = 20_000, 24_096
    rows = np.arange(lo, hi)
    need = history_rows(prev, rows, H)
    feats = extract_features(skewed, FeatureConfig(capacity_blocks=CAP), rows=need)
    cols = [FEATURES.index(f) for f in names]
    ref, lengths = lba_sequences(feats[:, cols], prev, rows, H, feature_rows=need)
    assert lengths.min() >= 1 and lengths.max() == H
    stream = SequenceStream(skewed, CAP, names, H, max_rows=lo)
    stream.next(lo)  # the stream runs in time order from write 0
    assert stream.position == lo
    got = stream.next(hi - lo).copy()
    want = log_features(ref.reshape(-1, len(names)), names).reshape(ref.shape)
    np.testing.assert_array_equal(got, want)
    # chunks of any size give the same windows (memory bounded by the chunk and the capacity)
    other = SequenceStream(skewed, CAP, names, H, max_rows=3000)
    parts = [other.next(n).copy() for n in [3000] * 8 + [hi - 24_000]]
    np.testing.assert_array_equal(np.concatenate(parts)[lo:hi], got)
    with pytest.raises(ValueError, match="exceed the buffer"):
        other.next(3001)
    # pre-logging then standardising = the models' scaler (log + standardise) on raw windows
    from dogi_ml.models.base import InputScaler

    a = InputScaler(log_columns(names)).fit(ref).transform(ref)
    b = InputScaler([]).fit(got).transform(got)
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_cdf_knee_and_lifetime_bounds():
    rng = np.random.default_rng(0)
    # 80% short lifetimes (<= 100), a long uniform tail to 100K: the knee sits at the short mass
    life = np.concatenate([rng.integers(1, 101, 8000), rng.integers(101, 100_001, 2000)])
    assert 50 <= cdf_knee(life) <= 2000
    assert cdf_knee(np.array([7, 7, 7])) == 7
    b = lifetime_bounds(33_554_432, 19, 2.0)  # paper scale: 2 MiB .. 256 GiB
    assert b.size == 18 and b[0] == 512 and b[-1] == 2 * 33_554_432
    assert np.all(b[1:] == 2 * b[:-1])
    small = lifetime_bounds(1024, 19, 2.0)  # tiny capacity: bins stay non-empty
    assert np.all(np.diff(small) >= 1)


def test_tcn_regression_option():
    from dogi_ml.models import make_model

    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 4, 3)).astype(np.float32)
    y = (2 * X[:, -1, 0] + X[:, -2, 1]).astype(np.float32)
    m = make_model("tcn", 1, 3, seed=0, channels=[8, 8], epochs=6, task="regression", lr=3e-3)
    m.fit(X[:2400], y[:2400], X[2400:], y[2400:])
    pred = m.predict(X[2400:])
    assert pred.dtype == np.float32 and pred.shape == (600,)
    assert np.mean((pred - y[2400:]) ** 2) < 0.5 * np.var(y[2400:])
    with pytest.raises(ValueError, match="no class probabilities"):
        m.predict_proba(X[:5])
    # classification stays the default, with one output per class
    c = make_model("tcn", 4, 3, channels=[8])
    c.fit(X[:500], (np.arange(500) % 4))
    assert c.predict_proba(X[:5]).shape == (5, 4)
    # refused by name when the model is made (make_model checks every parameter)
    with pytest.raises(ValueError, match=r"model_params\.task='ordinal' is not one of classification, regression"):
        make_model("tcn", 1, 3, task="ordinal")
