"""Issue 18 (learned schemes fast): the int32 batch kernel of the deployed MLP stays bit-exact on
odd layer shapes and partial tiles; DOGI's compiled-header path, fused features and overlapped
feature thread give the same predictions, features and WAF as the plain path; the paper-scale
bench runs a learned policy."""

import numpy as np
import pytest

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
