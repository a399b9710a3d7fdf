"""Deployment export: the integer reference, the Numba kernel and the compiled C header agree bit
for bit; the header builds freestanding as C99 and C++; ONNX checks and agrees; quantisation
costs little accuracy; bad export directories fail clearly."""

import json
import math
import platform
import re

import numpy as np
import pytest
from helpers import odd_shape_mlp

from dogi_ml.export import fixedpoint as fx
from dogi_ml.export.c_header import emit_header
from dogi_ml.export.cbuild import build_shared, find_compiler, strict_compile
from dogi_ml.export.manifest import load_export, write_manifest
from dogi_ml.export.numba_kernel import int8_mlp_classes, int8_mlp_logits, int8_mlp_predict_one, mlp_scratch
from dogi_ml.export.parity import extreme_features, parity
from dogi_ml.export.quantize import ExportError, quantize_model
from dogi_ml.pipeline.train import build_dataset, train_and_evaluate
from dogi_ml.traces.generators import generate

# the C and C++ builds: without the compilers these tests skip (fail under CI=true)
needs_cc = pytest.mark.usefixtures("c_compiler", "cxx_compiler")
DATA = {
    "labels": "quantile",
    "features": ["lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv"],
    "sample_every": 3,
    "max_samples": 20000,
    "mu": 10,
}
FAST = {
    "mlp": {"epochs": 8},
    "gru": {"epochs": 3},
    "lightgbm": {"n_estimators": 30},
    "random_forest": {"n_estimators": 10},
}


@pytest.fixture(scope="module")
def trace():
    return generate("hotcold", capacity_blocks=8192, n_writes=12 * 8192, seed=3, hot_traffic=0.7, hot_fraction=0.05)


@pytest.fixture(scope="module")
def ds(trace):
    return build_dataset(trace, DATA)


@pytest.fixture(scope="module")
def seq_ds(trace):
    return build_dataset(trace, DATA, sequence_history=4)


def _train(ds, name):
    model, _ = train_and_evaluate(ds, {"name": name, "params": FAST[name]}, seed=0, latency_budget_s=0.005)
    q = quantize_model(model, ds.X[ds.splits["train"]], ds.class_names, ds.feature_names)
    return model, q


@pytest.fixture(scope="module")
def mlp(ds):
    return _train(ds, "mlp")


@pytest.fixture(scope="module")
def header_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("headers")


def _cpu_has(flag: str) -> bool:
    """Whether /proc/cpuinfo lists ``flag`` (False where there is no /proc)."""
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and flag in line.split() for line in fh)
    except OSError:
        return False


def _compiler_is_gcc() -> bool:
    """Whether the C compiler the builds use is GCC: the header's SIMD passes are GCC's (under
    clang, by design, it takes the portable paths)."""
    import subprocess

    out = subprocess.run([find_compiler(), "--version"], capture_output=True, text=True).stdout
    return "clang" not in out.lower()


def _header(q, directory, name, prefix="dogi"):
    path = directory / f"{name}.h"
    path.write_text(emit_header(q, prefix))
    return path


# -- fixed point -------------------------------------------------------------------------------
def test_fixed_point_log2_and_sigmoid_track_the_float_functions():
    rng = np.random.default_rng(0)
    u = np.unique(
        np.concatenate(
            [rng.integers(1, 1 << 62, 5000), 1 << np.arange(62), (1 << np.arange(1, 62)) - 1, np.arange(1, 2000)]
        )
    ).astype(np.int64)
    got = fx.log2_q8(u) / 256.0
    want = np.log2(u.astype(np.float64))
    assert np.abs(got - want).max() < 1.5 / 256  # 1.5 Q8 units
    # every int64 has a log: |v| + 1 in unsigned arithmetic, within +-LOG2_Q8_MAX
    ext = np.array([-(1 << 63), -(1 << 63) + 1, -1, 0, 1, (1 << 63) - 1], np.int64)
    assert fx.signed_log2_q8(ext).tolist() == [-16128, -16128, -256, 0, 256, 16128]
    assert np.abs(fx.signed_log2_q8(ext)).max() == fx.LOG2_Q8_MAX
    a = np.arange(-40000, 40000, 7)
    sig = fx.sigmoid_q15(a) / 32768.0
    assert np.abs(sig - 1 / (1 + np.exp(-np.clip(a, -32768, 32767) / 4096.0))).max() < 2e-4
    assert np.abs(fx.tanh_q15(a) / 32768.0 - np.tanh(np.clip(a, -16384, 16383) / 4096.0)).max() < 5e-4
    # rounding half away from zero, symmetric
    assert fx.rshift_round(np.array([5, -5, 6, -6, 7, -7]), 1).tolist() == [3, -3, 3, -3, 4, -4]
    m, s = fx.quantize_multiplier(0.3)
    assert 2**30 <= m <= 2**31 and abs(m / 2**s - 0.3) < 1e-9


def test_input_codes_follow_the_models_scaler(ds, mlp):
    model, q = mlp
    X = ds.X[ds.splits["test"]]
    codes = q.codes(X)
    z = np.asarray(model.scaler.transform(X), np.float64)
    inside = np.abs(codes) < q.inputs.qmax
    assert inside.mean() > 0.999  # the margin keeps test rows unsaturated
    err = np.abs(q.inputs.dequantize(codes) - z)[inside].reshape(-1)
    lc = model.scaler.log_columns
    logs = np.ones(6, bool) if lc is None else np.isin(np.arange(6), lc)
    # a code stands for z within a step (linear) or within the Q8 log2's resolution (log)
    bound = np.where(logs, 1.5 / (256 * q.inputs.std), 0.0) + q.inputs.scale
    assert (np.abs(q.inputs.dequantize(codes) - z) <= bound + 1e-6)[inside].all(), err.max()
    assert np.abs(codes).max() <= q.inputs.qmax
    ext = extreme_features(6, 5000, seed=2)
    assert np.abs(q.codes(ext)).max() <= q.inputs.qmax  # any int64 saturates cleanly


# -- the MLP: accuracy and bit-exactness -------------------------------------------------------
def test_quantised_mlp_accuracy_within_one_point(ds, mlp):
    model, q = mlp
    te = ds.splits["test"]
    acc_f = (model.predict(ds.X[te]) == ds.y[te]).mean()
    acc_i = (q.predict(ds.X[te]) == ds.y[te]).mean()
    assert acc_f > 0.12  # a model that learned something (10 classes)
    assert acc_f - acc_i <= 0.01, (acc_f, acc_i)
    assert (model.predict(ds.X[te]) == q.predict(ds.X[te])).mean() > 0.98


@needs_cc
def test_mlp_python_numba_and_c_agree_bit_for_bit_on_100k_vectors(ds, mlp, header_dir):
    _, q = mlp
    X = extreme_features(6, 100_000, seed=0, reference=ds.X)
    assert {0, fx.RAW_LIMIT, -(1 << 63), (1 << 63) - 1} <= set(np.unique(X).tolist())
    assert (np.abs(q.codes(X)) == q.inputs.qmax).any()  # saturation is exercised
    ref = q.logits_int(X)
    assert ref.dtype == np.int32
    args = q.kernel_args()
    nb_logits = np.empty_like(ref)
    int8_mlp_logits(X, *args, nb_logits)
    np.testing.assert_array_equal(nb_logits, ref)
    nb_cls = np.empty(len(X), np.int64)
    int8_mlp_classes(X, *args, nb_cls)
    np.testing.assert_array_equal(nb_cls, ref.argmax(axis=1))
    scratch = mlp_scratch(args)
    assert all(int8_mlp_predict_one(X[i], *args, scratch) == ref[i].argmax() for i in range(0, len(X), 997))
    path = _header(q, header_dir, "mlp")
    cm = build_shared(path, "mlp", 6, q.n_classes)
    # every batch path (on x86-64 with GCC the AVX2 pass where the CPU has it, else SSE2; the SSE2 pass;
    # without either block by block, and the portable tiles) and an optimised native build
    x86 = platform.machine() in ("x86_64", "AMD64") and _compiler_is_gcc()
    expect = {
        (): ("avx2" if _cpu_has("avx2") else "sse2") if x86 else "portable",
        ("-DDOGI_NO_AVX2",): "sse2" if x86 else "portable",
        ("-DDOGI_NO_SIMD", "-DDOGI_BATCH_TILES=0"): "portable",
        ("-DDOGI_NO_SIMD", "-DDOGI_BATCH_TILES=1"): "portable",
        ("-O3", "-march=native"): None,
    }
    for flags, path_taken in expect.items():
        built = build_shared(path, "mlp", 6, q.n_classes, extra_flags=flags)
        assert path_taken is None or built.batch_path == path_taken, (flags, built.batch_path)
        c_cls, c_logits = built.predict_batch(X)
        np.testing.assert_array_equal(c_logits, ref)
        np.testing.assert_array_equal(c_cls, ref.argmax(axis=1))
        for n in (1, 7, 31, 33, 1001):  # partial passes at the batch's end
            c_cls, c_logits = built.predict_batch(X[-n:])
            np.testing.assert_array_equal(c_logits, ref[-n:])
            np.testing.assert_array_equal(c_cls, ref[-n:].argmax(axis=1))
    np.testing.assert_array_equal(cm.codes(X), q.codes(X))
    for i in range(0, len(X), 4999):  # the single-block entry point
        c, lg = cm.predict_one(X[i])
        assert c == ref[i].argmax() and np.array_equal(lg, ref[i])
    # saturation is exercised: some codes at +-qmax, some logits large
    assert (np.abs(q.codes(X)) == q.inputs.qmax).any()
    rep = parity(q, X[:5000], cm)
    assert rep["python_vs_numba"]["identical"] and rep["python_vs_c"]["identical"]


@needs_cc
def test_header_builds_freestanding_as_c99_and_cxx(mlp, header_dir):
    _, q = mlp
    path = _header(q, header_dir, "strict", prefix="lifetime")
    text = path.read_text()
    assert re.findall(r"#include\s*<([^>]+)>", text) == ["stdint.h"]
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    assert not re.search(r"\b(float|double|malloc|free|memcpy|memset)\b", code)
    assert "static inline int32_t lifetime_predict_one(" in text
    assert "static inline void lifetime_predict_batch(" in text
    for cxx in (False, True):
        r = strict_compile(path, cxx=cxx)
        assert r["ok"], r["stderr"]
        assert r["undefined"] == [], r["undefined"]  # no libc, no helper calls
    assert "-ffreestanding" in r["command"] and "-nostdlib" in r["command"]


# -- GRU and trees -----------------------------------------------------------------------------
@needs_cc
def test_gru_step_is_bit_exact_and_close_to_float(seq_ds, header_dir):
    model, q = _train(seq_ds, "gru")
    te = seq_ds.splits["test"]
    pf, pq, y = model.predict(seq_ds.X[te]), q.predict(seq_ds.X[te]), seq_ds.y[te]
    assert (pf == y).mean() - (pq == y).mean() <= 0.01
    # this briefly trained GRU has many near-ties; the integer form differs only on those
    proba = np.sort(model.predict_proba(seq_ds.X[te]), axis=1)
    assert (pf == pq).mean() > 0.9 and np.all((proba[:, -1] - proba[:, -2])[pf != pq] < 0.02)
    cm = build_shared(_header(q, header_dir, "gru", "phftl"), "gru", 6, q.n_classes, hidden=q.hidden)
    c_cls, c_logits = cm.gru_sequences(seq_ds.X[te])
    np.testing.assert_array_equal(c_logits, q.logits_int(seq_ds.X[te]))
    rep = parity(q, extreme_features(6, 20_000, seed=5, reference=seq_ds.X.reshape(-1, 6)), cm)
    assert rep["python_vs_c"]["identical"], rep
    assert strict_compile(header_dir / "gru.h")["ok"] and strict_compile(header_dir / "gru.h", cxx=True)["ok"]


@needs_cc
@pytest.mark.parametrize("name", ["lightgbm", "random_forest"])
def test_integer_trees_match_the_float_model_exactly(ds, name, header_dir):
    model, q = _train(ds, name)
    X = np.concatenate([ds.X, extreme_features(6, 20_000, seed=7, reference=ds.X)])
    np.testing.assert_array_equal(q.predict(X), model.predict(X))  # exact integer thresholds
    cm = build_shared(_header(q, header_dir, name), "trees", 6, q.n_classes)
    c_cls, c_logits = cm.predict_batch(X)
    np.testing.assert_array_equal(c_logits, q.logits_int(X))
    np.testing.assert_array_equal(c_cls, q.predict(X))
    assert strict_compile(header_dir / f"{name}.h")["ok"]


# -- ONNX --------------------------------------------------------------------------------------
def test_onnx_float_and_qdq_agree(ds, mlp, tmp_path):
    from dogi_ml.export import onnx_export as ox

    model, q = mlp
    X = ds.X[ds.splits["test"]]
    f = ox.export_float(model, tmp_path / "mlp.onnx")
    ox.check(f)
    cls, logits = ox.run(ox.session(f), X, 6)
    assert logits.shape == (len(X), q.n_classes)
    assert (cls == ox.torch_classes(model, X)).mean() >= 0.999
    i8 = ox.export_qdq(q, model.scaler, tmp_path / "mlp_int8.onnx")
    ox.check(i8)
    import onnx

    ops = {n.op_type for n in onnx.load(str(i8)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "MatMul"} <= ops
    qcls, _ = ox.run(ox.session(i8), X, 6)
    assert (qcls == q.predict(X)).mean() >= 0.99


@pytest.mark.parametrize("name", ["lightgbm", "random_forest"])
def test_tree_onnx_agrees(ds, name, tmp_path):
    from dogi_ml.export import onnx_export as ox

    model, _ = _train(ds, name)
    X = ds.X[ds.splits["test"]]
    cls, _ = ox.run(ox.session(ox.export_float(model, tmp_path / f"{name}.onnx")), X, 6)
    assert (cls == model.predict(X)).mean() >= 0.999


def test_bad_onnx_file_is_reported(tmp_path):
    from dogi_ml.export import onnx_export as ox

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ExportError, match="ONNX check failed"):
        ox.check(bad)


@needs_cc
def test_odd_layer_shapes_are_bit_exact_on_every_batch_path(header_dir):
    """An odd feature count, odd hidden widths and an odd class count exercise the passes'
    padding (half-empty input pairs, a lone last output) and every partial pass."""
    q, X = odd_shape_mlp(6000)
    assert q.dims == [5, 7, 9, 5]
    ext = np.concatenate([X[:2000], extreme_features(5, 3000, seed=9, reference=X)])
    ref = q.logits_int(ext)
    path = _header(q, header_dir, "odd_mlp", prefix="odd")
    for flags in (
        (),
        ("-DODD_NO_AVX2",),
        ("-DODD_NO_SIMD", "-DODD_BATCH_TILES=1"),
        ("-DODD_NO_SIMD", "-DODD_BATCH_TILES=0"),
    ):
        built = build_shared(path, "mlp", 5, 5, extra_flags=flags)
        for n in (len(ext), 1, 15, 17, 33, 999):
            c_cls, c_logits = built.predict_batch(ext[:n])
            np.testing.assert_array_equal(c_logits, ref[:n])
            np.testing.assert_array_equal(c_cls, ref[:n].argmax(axis=1))
    assert strict_compile(path)["ok"] and strict_compile(path, cxx=True)["ok"]


# -- the export directory ----------------------------------------------------------------------
@pytest.fixture
def export_dir(tmp_path, mlp):
    model, q = mlp
    (tmp_path / "dogi_mlp.h").write_text(emit_header(q))
    np.savez(tmp_path / "quantized.npz", **q.arrays())
    write_manifest(
        tmp_path,
        q,
        model,
        {"header": "dogi_mlp.h", "arrays": "quantized.npz"},
        source={"mlflow_run_id": "test"},
        bounds={"upper_bounds": [1, 2]},
    )
    return tmp_path


def test_export_directory_round_trips(export_dir, ds, mlp):
    _, q = mlp
    exp = load_export(export_dir)
    X = ds.X[:500]
    np.testing.assert_array_equal(exp.predict(X), q.predict(X))
    np.testing.assert_array_equal(exp.logits_int(X), q.logits_int(X))
    args = exp.kernel_args()
    assert all(np.array_equal(a, b) for a, b in zip(args, q.kernel_args()))
    m = exp.manifest
    assert m["features"]["order"] == ds.feature_names and m["classes"]["names"] == ds.class_names
    assert m["inputs"]["rules"][0]["kind"] in ("linear", "log2") and "log2_q8" in m["inputs"]["rules_text"]
    assert m["versions"]["onnx"] and m["source"]["mlflow_run_id"] == "test"
    assert load_export(export_dir / "manifest.json").n_features == 6


def test_bad_export_directories_fail_clearly(export_dir, tmp_path_factory):
    exp = load_export(export_dir)
    with pytest.raises(ExportError, match=r"wrong feature count: this model takes 6 features \(lba, prev_lba"):
        exp.predict(np.zeros((3, 5), np.int64))
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(ExportError, match="missing manifest"):
        load_export(empty)
    with pytest.raises(ExportError, match="export directory not found"):
        load_export(empty / "nope")
    npz = export_dir / "quantized.npz"
    good = npz.read_bytes()
    npz.write_bytes(good[:-10])
    with pytest.raises(ExportError, match="corrupted artefact: arrays file .* SHA-256"):
        load_export(export_dir)
    npz.write_bytes(good)
    (export_dir / "dogi_mlp.h").unlink()
    with pytest.raises(ExportError, match="missing artefact: header"):
        load_export(export_dir)
    m = json.loads((export_dir / "manifest.json").read_text())
    (export_dir / "manifest.json").write_text("{ not json")
    with pytest.raises(ExportError, match="not valid JSON"):
        load_export(export_dir)
    m["format_version"] = 99
    (export_dir / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ExportError, match="format version 99 is not supported"):
        load_export(export_dir)


def test_unsupported_models_and_inputs_fail_clearly(ds, mlp):
    model, q = mlp
    with pytest.raises(ExportError, match=r"expected 6 features per row, got shape \(4, 3\)"):
        q.predict(np.zeros((4, 3), np.int64))
    with pytest.raises(ExportError, match="raw features are integers"):
        q.predict(np.full((2, 6), 0.5))
    from dogi_ml.models import make_model

    with pytest.raises(ExportError, match="no integer export for model 'logistic'"):
        quantize_model(make_model("logistic", 2, 6), ds.X[:10])


# -- the command -------------------------------------------------------------------------------
@needs_cc
@pytest.mark.slow
def test_export_command_end_to_end(tmp_path):
    from helpers import run_cli

    small = [
        "workload.capacity_blocks=16384",
        "workload.write_volume=6",
        "latency_budget_s=0.01",
        "model.params.epochs=3",
        "export.parity_rows=20000",
        "export.bench_seconds=0.05",
    ]
    proc = run_cli(["export", "+workload=ycsb_a", *small], tmp_path)
    out = re.search(r"export: (\S+)", proc.stdout.split("export: mlp on ycsb_a")[-1]).group(1)
    d = tmp_path / out
    assert d.parent.name == "export" and d.name.startswith("run-mlp-ycsb_a-")
    names = {p.name for p in d.iterdir()}
    assert {
        "dogi_mlp.h",
        "mlp_float.onnx",
        "mlp_int8_qdq.onnx",
        "quantized.npz",
        "report.json",
        "manifest.json",
    } <= names
    rep = json.loads((d / "report.json").read_text())
    assert rep["parity"]["all_identical"] and rep["parity"]["vectors"] == 20000
    assert rep["onnx"]["float_vs_pytorch"] >= 0.999
    assert rep["ns_per_block"]["c_O2"] > 0 and rep["ns_per_block"]["batch"] == 128
    assert abs(rep["accuracy"]["loss_points"]) <= 2
    exp = load_export(d)
    assert exp.manifest["classes"]["bounds"]["upper_bounds"] and exp.manifest["source"]["mlflow_run_id"]
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns.db'}")
    runs = client.search_runs([client.get_experiment_by_name("export").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert "accuracy_int" in runs[0].data.metrics
    # a second export from the trained model's MLflow run, into a chosen directory
    src = rep["source"]["mlflow_run_id"]
    proc = run_cli(
        [
            "export",
            f"export.run_id={src}",
            "export.out=again",
            "export.bench=false",
            "export.onnx=false",
            "export.parity_rows=2000",
        ],
        tmp_path,
    )
    assert (tmp_path / "again" / "manifest.json").exists()
    bad = run_cli(["export", "export.run_id=0123456789abcdef"], tmp_path, check=False)
    assert bad.returncode == 2 and "not found" in bad.stderr


def test_export_without_workload_says_how(tmp_path):
    from helpers import run_cli

    proc = run_cli(["export"], tmp_path, check=False)
    assert proc.returncode == 2 and "+workload=NAME" in proc.stderr
    proc = run_cli(["export", "export.model_path=nope.pkl"], tmp_path, check=False)
    assert proc.returncode == 2 and "model file not found: nope.pkl" in proc.stderr


def test_log2_table_is_the_documented_one():
    assert fx.LOG2_TABLE[0] == 0 and fx.LOG2_TABLE[-1] == 256
    assert all(fx.LOG2_TABLE[i] == round(256 * math.log2(1 + i / 256)) for i in range(257))


def test_a_failed_optional_build_is_said_not_dropped(capsys):
    """The -march=native build only adds a timing row: when the compiler refuses it, the export goes
    on, and the report and the console say so (it used to vanish without a word)."""
    from dogi_ml.export.quantize import ExportError
    from dogi_ml.pipeline.export import optional_build

    def refuse():
        raise ExportError("cc: error: unrecognized -march=native")

    report_c: dict = {}
    assert optional_build(report_c, "march_native", refuse) is None
    assert report_c == {"march_native_skipped": "cc: error: unrecognized -march=native"}
    assert "the march_native build failed, its row skipped" in capsys.readouterr().out
    assert optional_build(report_c, "other", lambda: 7) == 7 and "other_skipped" not in report_c
