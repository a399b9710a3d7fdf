"""MINOS's clustering gives the same bits on every x86-64 CPU (``dogi_ml/policies/_minos_cluster.py``).

Numba compiles for the host CPU. The OP distance's sum over slots runs in the order the kernel
module states (slot ``t`` into partial sum ``t % LANES``, the partial sums added pairwise), not in
an order the compiler picks for the vector width; no multiply-add is fused. Two checks: the
distances equal, bit for bit, ``tests/naive.py``'s plain-Python float32 twin of that order, and
the clustering compiled for three CPUs (SSE2 only, AVX2 with FMA, this machine: AVX-512 on the
project's VMs) gives the same distances and labels on 16 streams of 8192 slots. (With the
fast-math flags the kernels had, "reassoc" and "contract", the twin differed in the last bits
and so did the three builds from each other.) The three-CPU case needs a CPU that runs AVX2
code: elsewhere it skips, and fails under ``CI=true``. A third check reads every Numba kernel of
the project: none may ask for the fast-math flags that let LLVM pick the order or the rounding
by CPU (in the lane form above, LLVM happened to leave the order alone with them; nothing
promises it will).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import naive
import numpy as np
import pytest
from helpers import REPO, skip_or_fail_in_ci

from dogi_ml import determinism
from dogi_ml.policies import _minos_cluster as mc

# What Numba compiles for in each run: the x86-64 baseline (SSE2: four float32 lanes per
# vector, no FMA), Haswell (AVX2 and FMA: eight) and this CPU as Numba finds it (sixteen where
# it has AVX-512). An empty feature list means the CPU model's own features, not the host's.
TARGETS = {
    "x86-64": {"NUMBA_CPU_NAME": "x86-64", "NUMBA_CPU_FEATURES": ""},
    "haswell": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": ""},
    "host": {},
}


def _rings(n: int, slots: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ID-Vectors in the policy's padded layout (``2n`` rows: the spare rows for cluster sums)
    with sparse, skewed counters (zero slots, invalidations above writes as Agg8 makes them) and
    the decay weights of a ring whose newest slot is a third of the way in."""
    rng = np.random.default_rng(seed)
    W, I = mc.id_vectors(2 * n, slots)
    W[:n, :slots] = rng.poisson(rng.uniform(0.5, 40.0, (n, 1)), (n, slots))
    I[:n, :slots] = np.minimum(rng.poisson(W[:n, :slots] * rng.uniform(0.1, 0.9, (n, 1))), W[:n, :slots] + 1)
    wt = np.empty(slots, np.float32)
    mc.slot_weights(mc.decay_table(slots), slots // 3, wt)
    return W, I, wt


def _row(W, I, v, slots):
    return W[v, :slots].tolist(), I[v, :slots].tolist()


@pytest.mark.parametrize("slots", [61, 1000, 4099])
def test_distances_equal_the_float32_twin_of_the_stated_order(slots):
    # every path that sums a distance: one pair, three adjacent pairs per pass, and the merge
    # (its sum row against both neighbours, and against one); slot counts that leave a partial
    # last block of LANES
    n = 7
    W, I, wt = _rings(n, slots, seed=slots)
    w = wt.tolist()
    twin = [naive.minos_op_distance_f32(_row(W, I, v, slots), _row(W, I, v + 1, slots), w) for v in range(n - 1)]
    dist = np.zeros(n, np.float32)
    mc.adjacent_distances(W, I, n, wt, dist)  # two three-pair passes
    assert dist[: n - 1].tolist() == twin
    assert [float(mc.op_distance(W, I, v, v + 1, wt)) for v in range(n - 1)] == twin
    assert float(mc.op_distance(W, I, 5, 2, wt)) == naive.minos_op_distance_f32(
        _row(W, I, 5, slots), _row(W, I, 2, slots), w
    )
    dl, dr = mc._merge_and_measure(W, I, 2, 3, n, 1, 4, wt)
    merged = (W[n, :slots].tolist(), I[n, :slots].tolist())
    assert merged == ((W[2, :slots] + W[3, :slots]).tolist(), (I[2, :slots] + I[3, :slots]).tolist())
    assert float(dl) == naive.minos_op_distance_f32(_row(W, I, 1, slots), merged, w)
    assert float(dr) == naive.minos_op_distance_f32(merged, _row(W, I, 4, slots), w)
    dl, dr = mc._merge_and_measure(W, I, 0, 1, n + 1, -1, 2, wt)
    merged = (W[n + 1, :slots].tolist(), I[n + 1, :slots].tolist())
    assert float(dl) == 0.0 and float(dr) == naive.minos_op_distance_f32(merged, _row(W, I, 2, slots), w)


CLUSTERINGS = f"""
import hashlib, json
import numpy as np
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from test_minos_bits import _rings
from dogi_ml.policies import _minos_cluster as mc
n, slots = 16, 8192
W, I, wt = _rings(n, slots, seed=38)
dist = np.zeros(n, np.float32)
mc.adjacent_distances(W, I, n, wt, dist)
distances, labels = [dist[: n - 1].copy()], []
for k in range(1, n + 1):
    out = np.empty(n, np.int64)
    scratch = [np.empty(n, np.int64) for _ in range(3)]
    last = np.empty(n, np.float32)
    assert mc.cluster_adjacent(W, I, n, k, wt, out, *scratch, last) == k
    labels.append(out)
    distances.append(last[: n - 1])  # the distances the merges left, sum rows against neighbours
digest = lambda arrays: hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()
print(json.dumps({{"weights": digest([wt]), "distances": digest(distances), "labels": digest(labels),
                  "k6": labels[5].tolist()}}))
"""


def _runs_avx2() -> None:
    """Skip (fail under CI=true) where this CPU cannot run the AVX2 build."""
    if not determinism.x86_64() or determinism.cpu_best() == "default":
        skip_or_fail_in_ci(
            f"this CPU ({determinism._host_cpu()[0]}) cannot run code compiled for Haswell (AVX2, FMA)"
            " -- run CI on a CPU with AVX2 or AVX-512"
        )


def test_the_clustering_gives_the_same_bits_on_every_target(tmp_path):
    _runs_avx2()
    results = {}
    for name, target in TARGETS.items():
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")} | target
        # compiled here, for this target only: no kernel cached for another CPU can be reused
        env["DOGI_ML_KERNEL_CACHE"] = str(tmp_path / name / "kernels")
        env["NUMBA_CACHE_DIR"] = str(tmp_path / name / "numba")
        proc = subprocess.run(
            [sys.executable, "-c", CLUSTERINGS], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stderr}"
        results[name] = json.loads(proc.stdout)
    assert results["x86-64"] == results["haswell"] == results["host"], results
    # the clustering is not degenerate: six runs of adjacent streams, numbered in order
    k6 = results["host"]["k6"]
    assert sorted(set(k6)) == list(range(6)) and k6 == sorted(k6)


# Fast-math flags that keep every result the same on any CPU: they let LLVM assume finite,
# non-NaN values and ignore the sign of zero. "reassoc" (the order of a sum), "contract" (fused
# multiply-adds where the CPU has FMA), "arcp" (reciprocal estimates), "afn" (approximate
# functions) and "fast" (all of them, as fastmath=True) make the bits depend on the target.
SAME_BITS_FLAGS = {"nnan", "ninf", "nsz"}
PROJECT_CODE = ("dogi_ml", "export", "features", "markov", "models", "oracles", "rl")


def _fastmath_flags(node: ast.expr, constants: dict[str, ast.expr]) -> set[str] | None:
    """The flags a ``fastmath=`` value asks for (a module-level name resolved), or None when
    it is not a literal this check can read."""
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return {"fast"} if node.value else set()
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in node.elts):
        return {e.value for e in node.elts}
    return None


def test_no_numba_kernel_asks_for_target_dependent_fast_math():
    found, bad = 0, []
    for folder in PROJECT_CODE:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            constants = {
                t.id: node.value
                for node in tree.body
                if isinstance(node, ast.Assign)
                for t in node.targets
                if isinstance(t, ast.Name)
            }
            for node in ast.walk(tree):
                for kw in getattr(node, "keywords", []):
                    if kw.arg != "fastmath":
                        continue
                    found += 1
                    flags = _fastmath_flags(kw.value, constants)
                    where = f"{path.relative_to(REPO)}:{kw.value.lineno}"
                    if flags is None:
                        bad.append(f"{where}: fastmath={ast.unparse(kw.value)} (not a literal set or bool)")
                    elif flags - SAME_BITS_FLAGS:
                        bad.append(f"{where}: {sorted(flags - SAME_BITS_FLAGS)}")
    assert found >= 2, "the scan found no fastmath= at all: the project moved?"
    assert not bad, "fast-math flags that make results depend on the CPU:\n" + "\n".join(bad)
