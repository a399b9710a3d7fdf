"""Issue 18 (learned schemes fast): the int32 batch kernel of the deployed MLP stays bit-exact on
odd layer shapes and partial tiles; DOGI's compiled-header path, fused features and overlapped
feature thread give the same predictions, features and WAF as the plain path; the paper-scale
bench runs a learned policy."""

import numpy as np
import pytest

from dogi_ml.export.cbuild import find_compiler
from dogi_ml.export.numba_kernel import TILE, batch_scratch, int8_mlp_classes, int8_mlp_classes_into, int8_mlp_logits
from dogi_ml.export.parity import extreme_features
from dogi_ml.export.quantize import quantize_model


@pytest.fixture(scope="module")
def odd_q():
    """An odd feature count, odd hidden widths and an odd class count."""
    from dogi_ml.models import make_model

    rng = np.random.default_rng(4)
    X = np.stack(
        [
            rng.integers(0, 1 << 20, 4000),
            rng.geometric(0.2, 4000),
            rng.integers(-500, 500, 4000),
            rng.pareto(1.1, 4000).astype(np.int64) * 100,
            rng.integers(0, 64, 4000),
        ],
        axis=1,
    ).astype(np.int64)
    y = (np.log2(X[:, 3] + 1).astype(np.int64) + X[:, 1]) % 5
    model = make_model("mlp", 5, 5, seed=0, epochs=2, patience=2, hidden=[7, 9])
    model.scaler.log_columns = [1, 3]
    model.fit(X, y)
    q = quantize_model(model, X)
    assert q.dims == [5, 7, 9, 5]
    return q, np.concatenate([X[:1500], extreme_features(5, 1500, seed=9, reference=X)])


def test_batch_kernel_is_bit_exact_on_odd_shapes_and_partial_tiles(odd_q):
    q, X = odd_q
    ref = q.logits_int(X)
    args = q.kernel_args()
    scratch = batch_scratch(args)
    for n in (1, TILE - 1, TILE, TILE + 1, 2 * TILE + 3, len(X)):
        logits = np.empty((n, q.n_classes), np.int32)
        int8_mlp_logits(X[:n], *args, logits)
        np.testing.assert_array_equal(logits, ref[:n])
        cls = np.empty(n, np.int64)
        int8_mlp_classes(X[:n], *args, cls)
        np.testing.assert_array_equal(cls, ref[:n].argmax(axis=1))
        cls8 = np.full(n, -1, np.int8)  # DOGI's prediction buffer, scratch reused across calls
        int8_mlp_classes_into(X[:n], *args, scratch, cls8)
        np.testing.assert_array_equal(cls8, ref[:n].argmax(axis=1))


# -- DOGI's features and deployed model ---------------------------------------------------------
CAP, SEG = 16384, 64


@pytest.fixture(scope="module")
def varmail():
    from dogi_ml.traces.generators import generate

    # reads, multi-block requests, a working set below capacity
    return generate("varmail", capacity_blocks=CAP, n_writes=4 * CAP, seed=2)


def test_fused_features_equal_extract_features(varmail):
    """``FeatureStream.next_into`` (chosen columns written straight into a reused buffer, in
    uneven pieces) gives ``extract_features``' values."""
    from dogi_ml.features.extract import FeatureConfig, FeatureStream, extract_features

    cfg = FeatureConfig(capacity_blocks=CAP)
    ref = extract_features(varmail, cfg)
    cols = np.array([5, 0, 3, 11, 2])
    stream = FeatureStream(varmail, cfg)
    buf = np.full((5000, cols.size), -7, np.int64)
    pos = 0
    for n in (1, 999, 5000, 4097, 10**9):
        n = min(n, buf.shape[0], ref.shape[0] - pos)
        assert stream.next_into(buf[:n], cols) == n
        np.testing.assert_array_equal(buf[:n], ref[pos : pos + n][:, cols])
        pos += n
    while pos < ref.shape[0]:
        n = stream.next_into(buf, cols)
        np.testing.assert_array_equal(buf[:n], ref[pos : pos + n][:, cols])
        pos += n
    assert stream.next_into(buf, cols) == 0  # the trace's end
    with pytest.raises(ValueError, match="C-contiguous int64"):
        stream.next_into(buf[:, :2], cols)
    with pytest.raises(ValueError, match="feature indices"):
        stream.next_into(buf, np.array([0, 99]))


def _dogi(trace, **params):
    from dogi_ml.policies import make_policy
    from dogi_ml.sim import SimConfig, Simulator

    small = dict(retrain_every=16384, min_samples=300, max_samples=20000, model_params={"epochs": 3, "patience": 2})
    pol = make_policy("dogi", **{**small, **params})
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, chunk_blocks=16384), CAP, trace=trace)
    return sim.run(trace.block_writes)


@pytest.mark.skipif(find_compiler() is None, reason="no C compiler")
def test_dogi_c_header_and_feature_thread_change_nothing(varmail):
    """deployed=int8 run by the compiled C header (ctypes, one call per chunk) with the feature
    thread places every write as the Numba kernel with in-line features: same WAF, same
    confusion, same GC destinations, same retraining history; the float model likewise with and
    without the thread."""
    a = _dogi(varmail, deployed="int8", int8_runtime="c", feature_thread=True, fallback_compare="ghost")
    b = _dogi(varmail, deployed="int8", int8_runtime="numba", feature_thread=False, fallback_compare="ghost")
    assert a["int8_blocks_by_runtime"]["numba"] == 0 and a["int8_blocks_by_runtime"]["c"] > 0
    assert b["int8_blocks_by_runtime"]["c"] == 0 and b["int8_blocks_by_runtime"]["numba"] > 0
    for k in ("waf", "user_confusion", "gc_destinations", "mode", "retrains"):
        assert a[k] == b[k], k
    assert [h.get("action") for h in a["training_history"]] == [h.get("action") for h in b["training_history"]]
    f = _dogi(varmail, feature_thread=True, fallback_compare="none")
    g = _dogi(varmail, feature_thread=False, fallback_compare="none")
    assert f["waf"] == g["waf"] and f["user_confusion"] == g["user_confusion"] and f["inferred_blocks"] > 0
    assert f["feature_ns_per_block"] > 0 and f["feature_wait_ns_per_block"] >= 0
    with pytest.raises(ValueError, match="int8_runtime"):
        _dogi(varmail, int8_runtime="gpu")
