"""Model zoo: every registered model learns a learnable workload; determinism; bad input."""

import numpy as np
import pytest

from dogi_ml.models import LifetimeModel, make_model, model_names
from dogi_ml.pipeline.train import build_dataset, train_and_evaluate
from dogi_ml.traces.generators import generate

FAST = {
    "mlp": {"epochs": 8},
    "deepfm": {"epochs": 6},
    "gru": {"epochs": 4},
    "tcn": {"epochs": 3, "channels": [16, 16]},
    "lightgbm": {"n_estimators": 60},
    "random_forest": {"n_estimators": 20},
    "logistic": {},
}
HISTORY = {"gru": 4, "tcn": 4}


@pytest.fixture(scope="module")
def hotcold_trace():
    # two populations with very different lifetimes: the class is learnable from the features
    return generate("hotcold", capacity_blocks=8192, n_writes=16 * 8192, seed=3, hot_traffic=0.7, hot_fraction=0.05)


DATA = {
    "labels": "binary",
    "features": ["lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv"],
    "sample_every": 3,
    "max_samples": 20000,
    "mu": 10,
    "binary_threshold": 2000,
}


def test_every_model_is_covered():
    assert set(model_names()) == set(FAST)


@pytest.mark.parametrize("name", sorted(FAST))
def test_model_beats_majority_baseline(name, hotcold_trace):
    ds = build_dataset(hotcold_trace, DATA, sequence_history=HISTORY.get(name))
    model, m = train_and_evaluate(ds, {"name": name, "params": FAST[name]}, seed=0, latency_budget_s=0.02)
    assert m["accuracy"] > m["majority_baseline"] + 0.05, (name, m["accuracy"], m["majority_baseline"])
    assert m["latency_ns_per_block"] > 0 and m["latency_ns_per_block_batch1"] > 0


@pytest.mark.parametrize("name", ["mlp", "lightgbm"])
def test_training_is_deterministic(name, hotcold_trace, tmp_path):
    ds = build_dataset(hotcold_trace, DATA)
    a, _ = train_and_evaluate(ds, {"name": name, "params": FAST[name]}, seed=1, latency_budget_s=0.01)
    b, _ = train_and_evaluate(ds, {"name": name, "params": FAST[name]}, seed=1, latency_budget_s=0.01)
    test = ds.X[ds.splits["test"]]
    np.testing.assert_array_equal(a.predict_proba(test), b.predict_proba(test))
    path = a.save(tmp_path / "m.pkl")
    np.testing.assert_array_equal(LifetimeModel.load(path).predict_proba(test), a.predict_proba(test))


def test_mlp_matches_dogi_size():
    m = make_model("mlp", 10, 6)
    m.fit(np.random.default_rng(0).normal(size=(300, 6)), np.arange(300) % 10)
    assert m.n_parameters() == 6 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10  # 1,610


def test_bad_model_input():
    with pytest.raises(ValueError, match="unknown model 'nope'; known: .*mlp"):
        make_model("nope", 10, 6)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_model("mlp", 10, 6, hiden=[3])
    m = make_model("logistic", 2, 6)
    with pytest.raises(ValueError, match=r"expected \[n, 6\] features, got shape \(5, 4\)"):
        m.fit(np.zeros((5, 4)), np.zeros(5))
    with pytest.raises(FileNotFoundError):
        LifetimeModel.load("/nonexistent/model.pkl")


def test_numba_mlp_step_matches_pytorch_autograd():
    """One Adam step of the Numba trainer equals PyTorch's from the same weights."""
    import torch

    from dogi_ml.models.mlp_numba import init_weights, one_step_reference

    rng = np.random.default_rng(0)
    X = rng.normal(size=(128, 6)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    Ws, bs = init_weights([6, 32, 32, 10], 0)
    loss, W2, b2 = one_step_reference(X, y, Ws, bs, 3e-4, 1e-5)
    net = torch.nn.Sequential(
        torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
    )
    lins = [net[0], net[2], net[4]]
    with torch.no_grad():
        for lin, w, b in zip(lins, Ws, bs):
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b))
    opt = torch.optim.Adam(net.parameters(), lr=3e-4, weight_decay=1e-5)
    ref = torch.nn.functional.cross_entropy(net(torch.from_numpy(X)), torch.from_numpy(y))
    ref.backward()
    opt.step()
    assert loss == pytest.approx(float(ref.detach()), abs=1e-5)
    for lin, w, b in zip(lins, W2, b2):
        np.testing.assert_allclose(lin.weight.detach().numpy().T, w, atol=1e-7)
        np.testing.assert_allclose(lin.bias.detach().numpy(), b, atol=1e-7)


def test_mlp_torch_backend_also_learns(hotcold_trace):
    ds = build_dataset(hotcold_trace, DATA)
    _, m = train_and_evaluate(
        ds, {"name": "mlp", "params": {"epochs": 4, "backend": "torch"}}, seed=0, latency_budget_s=0.01
    )
    assert m["accuracy"] > m["majority_baseline"] + 0.05


def test_gru_one_step_inference_keeps_the_lba_state(hotcold_trace):
    """Feeding an LBA's writes one step at a time with the kept hidden state gives the same
    logits as the sequence forward pass (what a deployed GRU does per block)."""
    import torch

    ds = build_dataset(hotcold_trace, DATA, sequence_history=4)
    model, _ = train_and_evaluate(ds, {"name": "gru", "params": {"epochs": 1}}, seed=0, latency_budget_s=0.01)
    X = model.scaler.transform(ds.X[:256])
    with torch.no_grad():
        full = model.net(torch.from_numpy(X)).numpy()
    h = None
    for t in range(X.shape[1]):
        logits, h = model.step(np.ascontiguousarray(X[:, t]), h)
    np.testing.assert_allclose(logits, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "channels, kernel, T", [([32, 32], 3, 8), ([16, 16, 16], 3, 8), ([8], 2, 5), ([16, 16], 3, 3), ([8, 8], 4, 20)]
)
def test_tcn_last_position_forward_equals_every_position(channels, kernel, T):
    """In eval mode the TCN computes only what the last position's output depends on (fewer
    convolution outputs, as matrix products): the same output as the full causal convolutions,
    windows shorter and longer than the receptive field included; training mode keeps the full one."""
    import torch

    model = make_model("tcn", 3, 6, seed=1, channels=channels, kernel=kernel)
    net = model.build().eval()
    x = torch.randn(300, T, 6, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = net.forward_all(x)
        np.testing.assert_allclose(net(x).numpy(), full.numpy(), rtol=1e-5, atol=1e-5)
    y = net(x)  # eval mode with autograd on: the full forward, differentiable
    assert y.requires_grad and torch.equal(y, net.forward_all(x))
    net.train()
    torch.manual_seed(0)
    a = net(x)
    torch.manual_seed(0)
    assert torch.equal(a, net.forward_all(x))  # dropout active: the full forward


def test_tcn_inference_on_two_threads_at_once():
    """The last-position forward keeps its activations in per-thread scratch: two threads
    inferring with one network at once, at different batch sizes, get what each gets alone,
    and an output is not overwritten by the next call."""
    import threading

    import torch

    model = make_model("tcn", 1, 6, seed=1, channels=[16, 16], kernel=3)
    net = model.build().eval()
    gen = torch.Generator().manual_seed(4)
    inputs = [torch.randn(n, 8, 6, generator=gen) for n in (700, 300)]
    with torch.no_grad():
        alone = [net(x).clone() for x in inputs]
        first = net(inputs[0])
        net(inputs[1])
        assert torch.equal(first, alone[0])
    got = [[], []]

    def infer(k):
        with torch.no_grad():
            for _ in range(40):
                got[k].append(net(inputs[k]))

    threads = [threading.Thread(target=infer, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        assert len(got[k]) == 40 and all(torch.equal(y, alone[k]) for y in got[k])


def test_tcn_onnx_export_keeps_any_window_length(tmp_path):
    """The ONNX graph is traced from the full forward (the pruned one bakes the positions of one
    window length): exported at 4 writes, it gives the full forward's logits at 8."""
    import onnxruntime as ort
    import torch

    from dogi_ml.export import onnx_export as ox

    model = make_model("tcn", 3, 6, seed=1, channels=[16, 16], kernel=3)
    model.net = model.build().eval()
    model.scaler.mean, model.scaler.std, model.scaler.log_columns = np.zeros(6), np.ones(6), []
    path = ox.export_float(model, tmp_path / "tcn.onnx", seq_len=4)
    x = np.random.default_rng(3).standard_normal((50, 8, 6)).astype(np.float32)
    got = ort.InferenceSession(str(path)).run(["logits"], {"features": x.astype(np.float64)})[0]
    with torch.no_grad():
        want = model.net.forward_all(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_per_class_recall_and_precision_on_a_known_confusion_matrix():
    """Rows are true classes, columns predictions: recall divides by the row, precision by the column."""
    from dogi_ml.models.evaluate import classification_metrics

    cm = np.array(
        [
            [5, 3, 2, 0],  # class 0: 10 rows, 5 right
            [1, 8, 1, 0],  # class 1: 10 rows, 8 right
            [0, 0, 0, 0],  # class 2: never true (predicted twice + once)
            [0, 4, 0, 6],
        ]
    )  # class 3: 10 rows, 6 right
    true = np.repeat(np.repeat(np.arange(4), 4), cm.ravel())
    pred = np.repeat(np.tile(np.arange(4), 4), cm.ravel())
    m = classification_metrics(true, pred, 4)
    assert m["confusion_matrix"] == cm.tolist()
    assert m["per_class_recall"] == {0: 0.5, 1: 0.8, 2: None, 3: 0.6}
    assert m["per_class_precision"] == {0: 5 / 6, 1: 8 / 15, 2: 0.0, 3: 1.0}
    assert m["support"] == {0: 10, 1: 10, 2: 0, 3: 10} and m["predicted"] == {0: 6, 1: 15, 2: 3, 3: 6}
    assert m["accuracy"] == pytest.approx(19 / 30) and m["majority_baseline"] == pytest.approx(1 / 3)
    assert "per_class_accuracy" not in m
