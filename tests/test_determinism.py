"""Learned results repeat to the last bit whatever SIMD level the CPU has (``dogi_ml.determinism``).

The end-to-end cases run one command line in subprocesses as on two CPUs: ``default``, a CPU
without AVX (each float library told by its own variable to take its baseline path, as it would
there), and this machine as it is (its best level: AVX-512 on the project's VMs). With the pin
(the default) the outcome digests are equal; this machine with ``DOGI_ML_NUMERICS=native``, the
control, gives another digest, so the case can tell (at these sizes: other trained weights, and
ML-DT's predicted lifetimes off in their last bits; docs/performance.md has WAFs moving at larger
ones). Numba, which the pin leaves to the host, is shown target-independent where the project
asks it for fast math (the GRU step) by compiling it for three CPUs.
Where the machine's best is the baseline itself there are not two levels to compare: the cases
skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys

import pytest
from helpers import REPO, skip_or_fail_in_ci

from dogi_ml import determinism
from dogi_ml.errors import ConfigError

# Numba compiling for three CPUs: this one, an AVX2 one (x86-64-v3), one without AVX or FMA (x86-64-v2)
NUMBA_TARGETS = {
    "host": {},
    "x86-64-v3": {
        "NUMBA_CPU_NAME": "x86-64-v3",
        "NUMBA_CPU_FEATURES": "+sse4.2,+popcnt,+avx,+avx2,+fma,+bmi,+bmi2,+f16c",
    },
    "x86-64-v2": {
        "NUMBA_CPU_NAME": "x86-64-v2",
        "NUMBA_CPU_FEATURES": "+sse4.2,+popcnt,+cx16,-avx,-avx2,-fma,-avx512f",
    },
}
PINNED = [
    *determinism.pinned_environment("portable"),
    *determinism.pinned_environment("avx2"),
    "NUMBA_CPU_NAME",
    "NUMBA_CPU_FEATURES",
    determinism.MODE_ENV,
    determinism.REPLACED_ENV,
]

SMALL_SIM = ["workload.capacity_blocks=4096", "workload.write_volume=8", "sim.segment_blocks=16"]
SMALL_TRAIN = [
    "workload.capacity_blocks=4096",
    "workload.write_volume=6",
    "latency_budget_s=0.01",
    "model.params.epochs=3",
]


def cpu_env(cpu: str, mode: str, cwd) -> dict:
    """The environment of a run on ``cpu`` (``default``: no AVX; ``best``: this machine) with
    numerics ``mode``; the trace cache shared between the runs of one case."""
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        DOGI_ML_CACHE=str(cwd / "cache"),
        DOGI_ML_QUIET="1",
        MLFLOW_TRACKING_URI=f"sqlite:///{cwd / 'mlruns.db'}",
    )
    env[determinism.MODE_ENV] = mode
    if cpu == "default":
        env.update(determinism.portable_environment())
    return env


def dogi_ml(args: list[str], env: dict, cwd) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dogi_ml", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def simulate_digest(cpu: str, mode: str, cwd) -> tuple[str, dict]:
    out = cwd / f"{cpu}-{mode}.json"
    args = ["simulate", "+workload=zipf", "policy=mldt", *SMALL_SIM, "mlflow=false", "plot=false", f"sim.output={out}"]
    dogi_ml([*args, f"hydra.run.dir={cwd / 'hydra' / out.stem}"], cpu_env(cpu, mode, cwd), cwd)
    result = json.loads(out.read_text())
    return determinism.outcome_digest(result), result["numerics"]


def train_digest(cpu: str, mode: str, cwd) -> tuple[str, dict]:
    """The main job's digest: its metrics (losses per epoch, confusion, accuracies) and the
    trained weights."""
    run_dir = cwd / "hydra" / f"train-{cpu}-{mode}"
    dogi_ml(["train", "+workload=ycsb_a", *SMALL_TRAIN, f"hydra.run.dir={run_dir}"], cpu_env(cpu, mode, cwd), cwd)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    model = pickle.loads((run_dir / "model.pkl").read_bytes())
    weights = {k: v.numpy().tobytes().hex() for k, v in model.net.state_dict().items()}
    return determinism.outcome_digest({"metrics": metrics, "weights": weights}), metrics["numerics"]


def two_levels() -> None:
    """Skip (fail under CI=true) where the machine's best level is the baseline itself."""
    if not determinism.x86_64() or determinism.cpu_best() == "default":
        skip_or_fail_in_ci(
            f"no SIMD level above the baseline to compare with on this CPU ({determinism._host_cpu()[0]})"
            " -- run CI on a CPU with AVX2 or AVX-512"
        )


@pytest.mark.parametrize("case", [simulate_digest, train_digest], ids=["simulate-mldt", "train-mlp"])
def test_same_digest_without_avx_and_at_the_machines_best(case, tmp_path):
    two_levels()
    default, rec_default = case("default", "portable", tmp_path)
    best, rec_best = case("best", "portable", tmp_path)
    assert best == default  # the same bits without AVX and at this machine's best
    assert rec_best["mode"] == rec_default["mode"] == "portable", (rec_best, rec_default)
    assert rec_best["cpu_best"] == determinism.cpu_best()
    # the control: this machine with each library on its own path (a CPU without AVX takes the
    # portable path by itself: the digests above) gives another digest, so the case can tell
    native_best, rec = case("best", "native", tmp_path)
    assert rec["mode"] == "native" and rec["numpy_simd"] and native_best != best


GRU_STEPS = """
import hashlib, numpy as np
from dogi_ml.policies._gru import gru_step
rng = np.random.default_rng(0)
H, F = 32, 6
wih_t, whh_t = (rng.standard_normal((n, 3 * H)).astype(np.float32) * 0.3 for n in (F, H))
bih, bhh = (rng.standard_normal(3 * H).astype(np.float32) * 0.1 for _ in range(2))
gi, gh, h = np.empty(3 * H, np.float32), np.empty(3 * H, np.float32), np.zeros(H, np.float32)
states = []
for x in rng.standard_normal((3000, F)).astype(np.float32):
    gru_step(h, x, wih_t, whh_t, bih, bhh, gi, gh)
    states.append(h.copy())
print(hashlib.sha256(np.array(states).tobytes()).hexdigest())
"""


def test_the_gru_step_gives_the_same_bits_on_every_target(tmp_path):
    """Shiro's and PHFTL's GRU step (Numba, fast math) compiled for AVX-512, AVX2 and SSE4.2:
    the same 3000 states to the last bit. (With every fast-math flag, LLVM fused multiply-adds
    and used reciprocal estimates as each CPU allowed: three different digests.)"""
    two_levels()
    digests = {}
    for name, target in NUMBA_TARGETS.items():
        env = {k: v for k, v in os.environ.items() if k not in PINNED} | target
        env["DOGI_ML_KERNEL_CACHE"] = str(tmp_path / "kernels")  # compiled here, for this target
        proc = python(GRU_STEPS, env)
        assert proc.returncode == 0, proc.stderr
        digests[name] = proc.stdout.strip()
    assert len(set(digests.values())) == 1, digests


def test_the_digest_ignores_timings_and_the_record_and_sees_one_bit():
    result = {"waf": 1.25, "groups": [{"gc_writes": 3}], "elapsed_s": 1.0, "training_history": [{"train_seconds": 2}]}
    same = dict(result, elapsed_s=9.0, training_history=[{"train_seconds": 7}], numerics={"mode": "native"})
    assert determinism.outcome_digest(result) == determinism.outcome_digest(same)
    one_bit = dict(result, waf=math.nextafter(1.25, 2.0))
    assert determinism.outcome_digest(one_bit) != determinism.outcome_digest(result)
    assert determinism.outcome_digest(dict(result, groups=[{"gc_writes": 4}])) != determinism.outcome_digest(result)


def python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


#: a child that pins itself, then prints its record and GLIBC_TUNABLES
PIN_AND_RECORD = (
    "import json, os; from dogi_ml import determinism as d; d.pin_process(); "
    "print(json.dumps([d.numerics_record(), os.environ['GLIBC_TUNABLES']]))"
)


def test_pin_process_runs_the_command_again_pinned_and_keeps_other_tunables():
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    env["GLIBC_TUNABLES"] = "glibc.malloc.arena_max=2"
    code = PIN_AND_RECORD
    proc = python(code, env)
    assert proc.returncode == 0, proc.stderr
    record, tunables = json.loads(proc.stdout)
    assert record["mode"] == "portable" and record["unpinned"] == [] and record["numpy_simd"] == []
    assert {b["core"] for b in record["openblas"]} == {determinism.OPENBLAS_CORE["portable"]}
    assert tunables == "glibc.malloc.arena_max=2:" + determinism.GLIBC_HWCAPS
    # native: the process stays as it started, and says so
    code = code.replace("os.environ['GLIBC_TUNABLES']", "0")
    proc = python(code, {**env, determinism.MODE_ENV: "native"})
    record, _ = json.loads(proc.stdout)
    assert record["mode"] == "native" and record["requested"] == "native" and record["numpy_simd"]
    # avx2: AVX2's paths (where the CPU has them), torch's included
    if determinism.cpu_best() != "default":
        proc = python(
            code.replace("d.pin_process();", "d.pin_process(); import torch;"), {**env, determinism.MODE_ENV: "avx2"}
        )
        record, _ = json.loads(proc.stdout)
        assert record["mode"] == "avx2" and record["torch"]["capability"] == "AVX2", record
        assert {b["core"] for b in record["openblas"]} == {"Haswell"} and "X86_V4" not in record["numpy_simd"]


def test_a_conflicting_variable_is_replaced_with_a_warning_and_recorded():
    """A machine may export a pinned variable for every program (OPENBLAS_CORETYPE=Haswell was
    set on a whole class of the project's CI machines, where refusing it stopped every command):
    the level replaces it, says so in one warning line naming the value and how to keep it, and
    the record carries it; GLIBC_TUNABLES loses only its hwcaps entry."""
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    env |= {"OPENBLAS_CORETYPE": "Haswell", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.cpu.hwcaps=-AVX2"}
    code = PIN_AND_RECORD
    proc = python(code, env)
    assert proc.returncode == 0, proc.stderr
    record, tunables = json.loads(proc.stdout)
    assert record["mode"] == "portable" and record["unpinned"] == [], record
    assert {b["core"] for b in record["openblas"]} == {"Nehalem"}
    assert record["replaced"] == {"OPENBLAS_CORETYPE": "Haswell", "GLIBC_TUNABLES": env["GLIBC_TUNABLES"]}
    assert tunables == "glibc.malloc.arena_max=2:" + determinism.GLIBC_HWCAPS
    warning = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert warning == [
        f"warning: OPENBLAS_CORETYPE=Haswell, GLIBC_TUNABLES={env['GLIBC_TUNABLES']} from the environment "
        f"replaced by OPENBLAS_CORETYPE=Nehalem, GLIBC_TUNABLES={tunables} for this run (DOGI_ML_NUMERICS=portable "
        "holds each float library to one path, the same bits on any x86-64 CPU) -- set DOGI_ML_NUMERICS=native to "
        f"keep OPENBLAS_CORETYPE=Haswell, GLIBC_TUNABLES={env['GLIBC_TUNABLES']} (results then repeat on this CPU "
        "type only)"
    ], proc.stderr
    # native keeps the environment's value, and nothing is replaced
    proc = python(code.replace("os.environ['GLIBC_TUNABLES']", "0"), {**env, determinism.MODE_ENV: "native"})
    record, _ = json.loads(proc.stdout)
    assert record["replaced"] == {} and {b["core"] for b in record["openblas"]} == {"Haswell"}
    assert "warning" not in proc.stderr


def test_an_unknown_mode_is_a_one_line_error_and_the_command_line_warns_once(monkeypatch, tmp_path):
    monkeypatch.setenv(determinism.MODE_ENV, "fast")
    with pytest.raises(ConfigError, match="DOGI_ML_NUMERICS='fast' is not a numerics mode.*portable, avx2, native"):
        determinism.pin_process()
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    proc = subprocess.run(
        [sys.executable, "-m", "dogi_ml", "simulate"],
        cwd=tmp_path,
        env=env | {"ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
    )
    # the warning once (the command line ran again pinned, with nothing left to replace), then
    # the command's own one-line error
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("warning: ATEN_CPU_CAPABILITY=avx2 from the environment replaced by "), proc.stderr
    assert sum(line.startswith("warning: ") for line in lines) == 1
    assert proc.returncode == 2 and lines[1].startswith("error: no workload given -- add +workload=NAME"), proc.stderr
