"""Issue 18 (learned schemes fast): the deployed MLP's batch kernels (the int32 logits kernel and
the int16-pair classes kernel) stay bit-exact on odd layer shapes, partial tiles and extreme
constants; DOGI's compiled-header path, fused features and overlapped
feature thread give the same predictions, features and WAF as the plain path; the paper-scale
bench runs a learned policy."""

import numpy as np
import pytest
from helpers import odd_shape_mlp

from dogi_ml.export.numba_kernel import TILE, batch_scratch, int8_mlp_classes, int8_mlp_classes_into, int8_mlp_logits
from dogi_ml.export.parity import extreme_features


@pytest.fixture(scope="module")
def odd_q():
    """An odd feature count, odd hidden widths and an odd class count."""
    q, X = odd_shape_mlp(4000)
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


def _extreme_requantisation(args, seed=3):
    """``args`` with requantisation constants at their limits: hidden multipliers 4096..8191 and
    shifts 0..31 (``hidden_multiplier``), last-layer multipliers up to 2**31, shifts 0..62 and
    biases that push logits past int32 (both saturations, and ties at INT32_MAX / INT32_MIN)."""
    pre, table, dims, w, b, mul, shift = args
    rng = np.random.default_rng(seed)
    b, mul, shift = b.copy(), mul.copy(), shift.copy()
    n_hidden = int(np.sum(dims[1:-1]))
    mul[:n_hidden] = rng.integers(4096, 8192, n_hidden)
    shift[:n_hidden] = rng.choice([0, 1, 7, 16, 30, 31], n_hidden)
    n_cls = int(dims[-1])
    mul[n_hidden:] = rng.choice([1, 3, (1 << 30) + 12345, 1 << 31], n_cls)
    shift[n_hidden:] = rng.choice([0, 1, 20, 31, 45, 62], n_cls)
    b[n_hidden:] = rng.choice([-(1 << 30), -5, 0, 7, 1 << 30], n_cls)
    return pre, table, dims, w, b, mul, shift


def test_classes_kernel_matches_the_logits_and_row_kernels_at_extreme_constants(odd_q):
    """The pair kernel (``int8_mlp_classes``) against two other implementations, the int32
    logits kernel's argmax and the one-row kernel, where the requantisation saturates."""
    from dogi_ml.export.numba_kernel import int8_mlp_predict_one, mlp_scratch

    q, X = odd_q
    ties = 0
    for seed in (3, 4, 5):
        args = _extreme_requantisation(q.kernel_args(), seed)
        logits = np.empty((len(X), q.n_classes), np.int32)
        int8_mlp_logits(X, *args, logits)
        limits = [np.iinfo(np.int32).min, np.iinfo(np.int32).max]
        saturated = np.isin(logits, limits)
        assert 0 < saturated.sum() < saturated.size  # the constants reach both regimes
        ties += int(((logits == limits[1]).sum(axis=1) > 1).sum())  # first max wins at INT32_MAX
        cls = np.empty(len(X), np.int64)
        int8_mlp_classes(X, *args, cls)
        np.testing.assert_array_equal(cls, logits.argmax(axis=1))
        one = mlp_scratch(args)
        rows = [int8_mlp_predict_one(X[i], *args, one) for i in range(0, len(X), 7)]
        np.testing.assert_array_equal(cls[::7], rows)
    assert ties > 0


def test_classes_kernel_scratch_follows_the_model_and_rejects_other_shapes(odd_q):
    """The scratch keeps the packed weights between calls: a model changed in place, or another
    model of the same shape, is packed again; a scratch of other layer widths is an error."""
    q, X = odd_q
    args = q.kernel_args()
    scratch = batch_scratch(args)
    cls = np.empty(len(X), np.int64)
    int8_mlp_classes_into(X, *args, scratch, cls)
    np.testing.assert_array_equal(cls, q.logits_int(X).argmax(axis=1))
    for changed in (_extreme_requantisation(args), tuple(a.copy() for a in args)):
        logits = np.empty((len(X), q.n_classes), np.int32)
        int8_mlp_logits(X, *changed, logits)
        int8_mlp_classes_into(X, *changed, scratch, cls)
        np.testing.assert_array_equal(cls, logits.argmax(axis=1))
    w = args[3].copy()
    args[3][:] = -args[3]  # in place: same arrays, other values
    try:
        logits = np.empty((len(X), q.n_classes), np.int32)
        int8_mlp_logits(X, *args, logits)
        int8_mlp_classes_into(X, *args, scratch, cls)
        np.testing.assert_array_equal(cls, logits.argmax(axis=1))
    finally:
        args[3][:] = w
    other = (args[0], args[1], np.array([5, 8, 9, 5]), *args[3:])
    with pytest.raises(ValueError, match="scratch made for other layer widths"):
        int8_mlp_classes_into(X, *args, batch_scratch(other), cls)
    with pytest.raises(ValueError, match="features' columns"):
        int8_mlp_classes_into(np.ascontiguousarray(X[:, :4]), *args, scratch, cls)
    with pytest.raises(ValueError, match="output array is shorter"):
        int8_mlp_classes_into(X, *args, scratch, cls[:-1])
    with pytest.raises(ValueError, match="requantisation constants"):
        int8_mlp_classes_into(X, *args[:5], args[5][:-1], args[6], scratch, cls)


_PORTABLE_RUN = """
import sys
import numpy as np
import dogi_ml.export.numba_kernel as K
assert not K.PMADDWD, "DOGI_ML_INT8_PORTABLE=1 should select the portable IR"
data = np.load(sys.argv[1])
X, out = data["X"], {}
for a in range(2):
    args = tuple(data[f"a{a}_{i}"] for i in range(7))
    for n in (1, K.TILE + 1, len(X)):
        cls = np.empty(n, np.int64)
        K.int8_mlp_classes_into(X[:n], *args, K.batch_scratch(args), cls)
        out[f"{a}_{n}"] = cls
np.savez(sys.argv[2], **out)
"""


def test_classes_kernel_portable_ir_is_bit_exact(odd_q, tmp_path):
    """The pair kernel's IR without ``pmaddwd`` (what a CPU without AVX2 compiles;
    ``DOGI_ML_INT8_PORTABLE=1`` forces it) gives the logits kernel's classes, on odd shapes,
    partial tiles and saturating constants. A fresh kernel cache: this CPU's cached machine code
    would otherwise be loaded."""
    import os
    import subprocess
    import sys

    q, X = odd_q
    sets = [q.kernel_args(), _extreme_requantisation(q.kernel_args())]
    np.savez(tmp_path / "in.npz", X=X, **{f"a{a}_{i}": v for a, args in enumerate(sets) for i, v in enumerate(args)})
    env = dict(os.environ, DOGI_ML_INT8_PORTABLE="1", DOGI_ML_KERNEL_CACHE=str(tmp_path / "kernels"))
    cmd = [sys.executable, "-c", _PORTABLE_RUN, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    for a, args in enumerate(sets):
        logits = np.empty((len(X), q.n_classes), np.int32)
        int8_mlp_logits(X, *args, logits)
        for n in (1, TILE + 1, len(X)):
            np.testing.assert_array_equal(got[f"{a}_{n}"], logits[:n].argmax(axis=1))


def test_the_portable_switch_is_part_of_the_kernel_cache_key(monkeypatch):
    """Setting ``DOGI_ML_INT8_PORTABLE`` gives every kernel a new cache key, so machine code
    compiled without it is not loaded (and keys without it stay as they were)."""
    from dogi_ml import numba_cache

    numba_cache.versions.cache_clear()
    monkeypatch.delenv("DOGI_ML_INT8_PORTABLE", raising=False)
    plain = numba_cache.versions()
    numba_cache.versions.cache_clear()
    monkeypatch.setenv("DOGI_ML_INT8_PORTABLE", "1")
    try:
        assert numba_cache.versions() == plain + "; DOGI_ML_INT8_PORTABLE=1"
    finally:
        numba_cache.versions.cache_clear()
        monkeypatch.delenv("DOGI_ML_INT8_PORTABLE")
        assert numba_cache.versions() == plain


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


def _dogi(trace, chunk=16384, **params):
    from dogi_ml.policies import make_policy
    from dogi_ml.sim import SimConfig, Simulator

    small = dict(retrain_every=16384, min_samples=300, max_samples=20000, model_params={"epochs": 3, "patience": 2})
    pol = make_policy("dogi", **{**small, **params})
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, chunk_blocks=chunk), CAP, trace=trace)
    return sim.run(trace.block_writes)


@pytest.mark.usefixtures("c_compiler")
def test_dogi_c_header_and_feature_thread_change_nothing(varmail):
    """deployed=int8 run by the compiled C header (ctypes, one call per chunk) with the feature
    thread (features and predictions of the next chunk) and the base design's ghost in a child process places every write as the Numba
    kernel with in-line features and an in-process ghost: same WAF, same confusion, same GC
    destinations, same retraining history; the float model likewise with and without the
    thread."""
    # chunks of 4096 writes, a retraining every 4th chunk at most: the other chunks' predictions
    # made ahead on the feature thread are placed
    a = _dogi(
        varmail,
        4096,
        deployed="int8",
        int8_runtime="c",
        feature_thread=True,
        fallback_compare="ghost",
        ghost_process=True,
    )
    b = _dogi(
        varmail,
        4096,
        deployed="int8",
        int8_runtime="numba",
        feature_thread=False,
        fallback_compare="ghost",
        ghost_process=False,
    )
    assert a["base_ghost_process"] and not b["base_ghost_process"]
    assert a["base_ghost_waf"] == b["base_ghost_waf"]
    assert a["int8_blocks_by_runtime"]["numba"] == 0 and a["int8_blocks_by_runtime"]["c"] > 0
    # the feature thread predicted chunks ahead (those no retraining made stale), b none
    assert a["inferred_ahead_used"] > 0 and b["inferred_ahead_blocks"] == 0
    assert a["inferred_ahead_used"] + a["inferred_blocks"] == b["inferred_blocks"]
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
    with pytest.raises(ValueError, match="ghost_process"):
        _dogi(varmail, ghost_process="yes")


def test_paper_scale_bench_runs_a_learned_policy(tmp_path):
    """``bench paper_scale.enabled=true policy=dogi`` (tiny capacity and writes): DOGI runs on the
    cached Zipf trace ``simulate +workload=zipf`` would use, reports features/inference ns per
    block and appends/s, and gets the WAF of a plain simulator run on that trace."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from dogi_ml.bench import bench_paper_scale
    from dogi_ml.pipeline.common import CONF_DIR
    from dogi_ml.policies import make_policy
    from dogi_ml.sim import SimConfig, Simulator
    from dogi_ml.traces.workload import load_workload

    small = {"retrain_every": 16384, "min_samples": 300, "max_samples": 20000, "fallback_compare": "none"}
    overrides = [
        "paper_scale.enabled=true",
        "policy=dogi",
        f"paper_scale.capacity_blocks={CAP}",
        f"paper_scale.segment_blocks={SEG}",
        f"paper_scale.n_writes={4 * CAP}",
        "paper_scale.chunk_writes=16384",
        f"cache_dir={tmp_path}",
        "policy.params.model_params.epochs=3",
        *(f"policy.params.{k}={v}" for k, v in small.items()),
    ]
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(config_name="bench", overrides=overrides)
    ps = bench_paper_scale(
        cfg.paper_scale, cfg.theta, cfg.op_ratio, cfg.seed, policy_cfg=cfg.policy, cache_dir=cfg.cache_dir
    )
    assert ps["policy"] == "dogi" and ps["trace"] == "cached" and ps["user_writes"] == 4 * CAP
    assert ps["feature_ns_per_block"] > 0 and ps["inference_ns_per_block"] > 0 and ps["appends_per_second"] > 0
    assert ps["peak_rss_bytes"] > 0 and list(tmp_path.glob("zipf-*.dtr"))
    trace = load_workload(
        {"name": "zipf", "generator": "zipf", "capacity_blocks": CAP, "write_volume": 4.0, "params": {"theta": 1.0}},
        cache_dir=tmp_path,
    )
    params = OmegaConf.to_container(cfg.policy.params)
    sim = Simulator(make_policy("dogi", **params), SimConfig(segment_blocks=SEG, chunk_blocks=16384), CAP, trace=trace)
    assert sim.run(trace.block_writes)["waf"] == ps["waf"]
    with pytest.raises(ValueError, match="features of the trace"):
        bench_paper_scale(
            OmegaConf.merge(cfg.paper_scale, {"trace": "stream"}),
            1.0,
            0.1,
            0,
            policy_cfg=cfg.policy,
            cache_dir=tmp_path,
        )


def test_tcn_inference_bench_reports_each_batch_and_restores_torch_threads():
    """``bench``'s ML-DT TCN section: ns per window for every configured batch, on one thread and
    two at once; torch's thread count is put back afterwards; bad sizes get a clear error."""
    import torch
    from omegaconf import OmegaConf

    from dogi_ml.bench import bench_tcn_inference

    before = torch.get_num_threads()
    res = bench_tcn_inference(OmegaConf.create({"batches": [256, 1024], "windows": 2048}))
    assert res["windows"] == 2048
    assert sorted(res["one_thread_ns"]) == sorted(res["two_threads_wall_ns"]) == [256, 1024]
    assert all(v > 0 for v in [*res["one_thread_ns"].values(), *res["two_threads_wall_ns"].values()])
    assert torch.get_num_threads() == before
    for bad in ({"batches": [0], "windows": 16}, {"batches": [], "windows": 16}, {"batches": [8], "windows": 0}):
        with pytest.raises(ValueError, match="tcn_inference: windows and every batch must be positive"):
            bench_tcn_inference(OmegaConf.create(bad))
