"""Firmware builds (issue 42): every deployed model kind cross-compiled for Cortex-M4 and
Cortex-R5 with -Werror, linked with the newlib-free startup and run under qemu-system-arm on
parity vectors, bit-exact with the Python reference; sizes, stack and instruction counts checked
against independent references (GCC's -fstack-usage, a two-instruction loop of known length);
a wrong prediction is caught by row; ``export.targets`` is checked and reaches report and manifest.

Without Debian's gcc-arm-none-eabi and qemu-system-arm these tests skip with the reason, and fail
under CI=true (.ci/run installs both)."""

import json
import re
import subprocess

import numpy as np
import pytest
from helpers import run_cli, skip_or_fail_in_ci

from dogi_ml.export import firmware as fw
from dogi_ml.export.c_header import emit_header
from dogi_ml.export.parity import extreme_features
from dogi_ml.export.quantize import quantize_model
from dogi_ml.pipeline.train import build_dataset, train_and_evaluate
from dogi_ml.rl.export import quantize_table
from dogi_ml.rl.qlearning import N_ACTIONS, N_STATES
from dogi_ml.traces.generators import generate

TARGETS = list(fw.TARGETS)
KINDS = ["mlp", "random_forest", "lightgbm", "gru", "qtable"]
ROWS = {"mlp": 10000, "random_forest": 5000, "lightgbm": 5000, "gru": 5000, "qtable": 5000}
DATA = {
    "labels": "quantile",
    "features": ["lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv"],
    "sample_every": 3,
    "max_samples": 5000,
    "mu": 10,
}
FAST = {
    "mlp": {"epochs": 3},  # the default shape, 6 -> 32 -> 32 -> classes
    "gru": {"epochs": 1},
    "lightgbm": {"n_estimators": 10},
    "random_forest": {"n_estimators": 5},
}


@pytest.fixture(scope="module", autouse=True)
def toolchain():
    why = fw.toolchain_problem()
    if why:
        skip_or_fail_in_ci(why)


@pytest.fixture(scope="module")
def trace():
    return generate("hotcold", capacity_blocks=8192, n_writes=6 * 8192, seed=3, hot_traffic=0.7, hot_fraction=0.05)


@pytest.fixture(scope="module")
def deployed(trace, tmp_path_factory):
    """kind -> (deployed integer model, its header, the parity vectors)."""
    d = tmp_path_factory.mktemp("fw_headers")
    out = {}
    flat = build_dataset(trace, DATA)
    seq = None
    for kind in KINDS:
        if kind == "qtable":
            table = np.random.default_rng(5).normal(size=(N_STATES, N_ACTIONS))
            q, X = quantize_table(table), None
        else:
            ds = flat
            if kind == "gru":  # fewer histories: a GRU epoch is the slow part of this file
                seq = seq or build_dataset(trace, {**DATA, "max_samples": 1500}, sequence_history=4)
                ds = seq
            model, _ = train_and_evaluate(ds, {"name": kind, "params": FAST[kind]}, seed=0, latency_budget_s=0.002)
            q = quantize_model(model, ds.X[ds.splits["train"]], ds.class_names, ds.feature_names)
            ref = ds.X[ds.splits["test"]].reshape(-1, q.n_features)
            X = extreme_features(q.n_features, ROWS[kind], seed=0, reference=ref)
        header = d / f"{kind}.h"
        header.write_text(emit_header(q, "shiro" if kind == "qtable" else "dogi"))
        out[kind] = (q, header, X)
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("target", TARGETS)
def test_every_kind_builds_with_werror_and_runs_bit_exact_under_qemu(deployed, kind, target, tmp_path):
    q, header, X = deployed[kind]
    rep = fw.firmware_check(q, header, target, X, tmp_path, n=ROWS[kind])
    assert rep["bit_exact"] and rep["vectors"] == ROWS[kind]
    assert "-Werror" in rep["compile"] and "-mfloat-abi=soft" in rep["compile"]
    assert fw.fpu_instructions(tmp_path / "image.elf") == []
    # the model alone: code and tables, nothing writable (the tables are const)
    assert rep["text_bytes"] > 0 and rep["rodata_bytes"] > 0
    assert rep["data_bytes"] == rep["bss_bytes"] == 0
    # the painted stack's high-water mark against GCC's static stack sizes of the model's
    # functions (one call chain: the wrapper, at most one header function it calls): a libgcc
    # helper and the driver's call add a few words, a frame's never-written padding takes some
    assert all(qual == "static" for _, qual in rep["stack_usage_gcc"].values())
    static = sum(size for size, _ in rep["stack_usage_gcc"].values())
    assert rep["stack_static_bytes"] == static
    assert static - 8 <= rep["stack_high_water_bytes"] <= static + 64, rep
    assert rep["ram_bytes"] == max(static, rep["stack_high_water_bytes"])
    # 64-bit division only in the Q-table (valid * 25 / segment_blocks), from libgcc
    assert rep["libgcc_helpers"] == (["__aeabi_ldivmod"] if kind == "qtable" else [])
    # the counter on the known loop: 2 instructions a turn; the PMU exactly (plus the call),
    # SysTick one tick per 40 instructions (25 MHz, 1 ns per instruction)
    ck = rep["counter_check"]
    ipb = rep["instructions_per_block"]
    if target == "cortex-r5":
        assert ipb["resolution"] == 1
        assert 0 < ck["known_loop_ticks"] - ck["empty_window_ticks"] - ck["known_loop_instructions"] <= 8
    else:
        assert ipb["resolution"] == 40
        assert abs(ck["known_loop_ticks"] * 40 - ck["known_loop_instructions"]) <= 40
    assert 0 < ipb["mean"] <= ipb["worst"]
    if kind == "mlp":  # the budget for the default MLP
        assert rep["text_bytes"] + rep["rodata_bytes"] < 64 * 1024 and rep["ram_bytes"] < 4096


@pytest.mark.parametrize("target", TARGETS)
def test_instruction_counts_match_qemus_own_execution_trace(deployed, target, tmp_path):
    """The counter's instructions per block against QEMU's single-step execution trace (one
    line per executed instruction) of the model's code on the same rows: the PMU's count is the
    trace's plus the same few instructions of the driver's call every row (6 with GCC 12);
    SysTick's is within one tick (40 instructions) of it."""
    q, header, X = deployed["mlp"]
    build = fw.build_image(q, header, target, tmp_path)
    inputs = fw.firmware_inputs(q, X, 8)
    got, meta = fw.run_image(build, inputs)
    per = fw.instructions_per_tick(meta)
    counted = (got[:, -1] - meta["empty_window_ticks"]) * per
    traced = fw.traced_instructions(build, inputs)
    assert traced.shape == (8,) and traced.min() > 1000  # 6 -> 32 -> 32 -> classes: thousands
    if target == "cortex-r5":
        extra = counted - traced
        assert np.all(extra == extra[0]) and 0 <= extra[0] <= 8, (counted, traced)
    else:
        assert np.all(np.abs(counted - traced) <= per + 8), (counted, traced)


@pytest.mark.parametrize("target", TARGETS)
def test_a_wrong_weight_is_caught_by_row(deployed, target, tmp_path):
    q, header, X = deployed["mlp"]
    text = header.read_text()
    # the first weight of the first layer, one step off: the image no longer matches the reference
    m = re.search(r"static const int16_t dogi_w0\[\d+\]\[\d+\] = \{\n    \{(-?\d+)", text)
    bad = tmp_path / "bad.h"
    bad.write_text(text[: m.start(1)] + str(int(m.group(1)) + 1) + text[m.end(1) :])
    with pytest.raises(fw.FirmwareMismatch, match=rf"{target} firmware differs from the Python reference at row \d+"):
        fw.firmware_check(q, bad, target, X, tmp_path / "build", n=2000)


def test_first_difference_names_the_row_and_word():
    ref = np.arange(12).reshape(4, 3)
    got = ref.copy()
    assert fw.first_difference(ref, got) is None
    got[2, 1] += 1
    got[3, 0] -= 1
    assert fw.first_difference(ref, got) == (2, 1)


def test_fpu_detector_sees_hardware_float(tmp_path):
    """The objdump check that proves the builds use no FPU finds VFP code where there is some."""
    src = tmp_path / "f.c"
    src.write_text("float scale(float x, float y);\nfloat scale(float x, float y) { return x * y + 1.0f; }\n")
    for abi, expect in (("hard", True), ("soft", False)):
        obj = tmp_path / f"f_{abi}.o"
        flags = ["-mcpu=cortex-m4", "-mthumb", f"-mfloat-abi={abi}"] + (["-mfpu=fpv4-sp-d16"] if abi == "hard" else [])
        subprocess.run([fw.CC, *flags, "-O2", "-c", str(src), "-o", str(obj)], check=True)
        assert bool(fw.fpu_instructions(obj)) is expect


def test_unknown_target_is_a_one_line_error(tmp_path):
    proc = run_cli(["export", "+workload=ycsb_a", "export.targets=[x86_64,cortex-m7]"], tmp_path, check=False)
    assert proc.returncode == 2
    err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(err) == 1 and "export.targets" in err[0] and "'cortex-m7'" in err[0]
    assert "x86_64, cortex-m4, cortex-r5" in err[0]


@pytest.mark.slow
def test_export_command_builds_runs_and_records_firmware(tmp_path):
    small = [
        "workload.capacity_blocks=8192",
        "workload.write_volume=4",
        "latency_budget_s=0.01",
        "model.params.epochs=2",
        "export.parity_rows=5000",
        "export.bench=false",
        "export.onnx=false",
        "export.out=fw",
        "export.targets=[cortex-m4,cortex-r5]",
    ]
    run_cli(["export", "+workload=ycsb_a", *small], tmp_path)
    d = tmp_path / "fw"
    rep = json.loads((d / "report.json").read_text())
    assert rep["c"] == {"skipped": "export.targets has no x86_64"}
    man = json.loads((d / "manifest.json").read_text())
    for t in TARGETS:
        f = rep["firmware"][t]
        assert f["bit_exact"] and f["vectors"] == 5000
        assert man["firmware"][t]["text_bytes"] == f["text_bytes"] > 0
        assert man["firmware"][t]["instructions_per_block"] == f["instructions_per_block"]
        assert man["artifacts"][f"firmware_{t}"]["path"] == f"firmware/{t}/image.elf"
        assert (d / "firmware" / t / "image.elf").exists() and not (d / "firmware" / t / "fw_in.bin").exists()
