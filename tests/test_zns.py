"""The ZNS replay harness (dogi_ml/zns): the same counts as the Numba simulator, every block read
back intact, recovery after a kill, the zone rules of the file-emulated device, and clear errors."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dogi_ml.errors import ConfigError
from dogi_ml.pipeline.replay import PARITY_KEYS, replay
from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import harness as zh

CAP = 4096
SEG = 64
SIM = {"segment_blocks": SEG, "op_ratio": 0.25, "victim": "greedy", "gc_free_segments": 2}
POLICY = {
    "nosep": {"name": "nosep", "n_groups": 1, "params": {}},
    "sepgc": {"name": "sepgc", "n_groups": 2, "params": {}},
    "sepbit": {"name": "sepbit", "n_groups": 6, "params": {"variant": "code"}},
}

pytestmark = pytest.mark.skipif(
    zh.shutil.which("gcc") is None and zh.shutil.which("cc") is None, reason="no C compiler"
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A skewed 4K-block workload written 3 times over (12K writes), as a .dtr file."""
    t = generate("zipf", capacity_blocks=CAP, n_writes=3 * CAP, seed=3, theta=1.0)
    t.name = "zipf4k"
    path = write_trace(t, tmp_path_factory.mktemp("trace") / "zipf4k.dtr")
    from dogi_ml.traces.binfmt import read_binary

    t = read_binary(path)
    t.meta["capacity_blocks"] = CAP
    return t


@pytest.fixture(scope="module")
def exe():
    return zh.build()


def _device(tmp_path) -> str:
    return f"file:{tmp_path / 'dev.zns'}"


@pytest.mark.parametrize(
    "policy,victim",
    [("nosep", "greedy"), ("sepgc", "greedy"), ("sepbit", "greedy"), ("sepbit", "cost_benefit"), ("nosep", "fifo")],
)
def test_counts_equal_the_simulator_and_every_block_reads_back(trace, tmp_path, policy, victim):
    sim = {**SIM, "victim": victim}
    zns = {"verify": True, "verify_every": 25, "compare_sim": True, "progress_every": 0}
    r = replay(trace, POLICY[policy], sim, _device(tmp_path), zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    for k in PARITY_KEYS:
        assert r[k] == r["simulator"][k]
    assert r["user_writes"] == 3 * CAP and r["gc_writes"] > 0
    # every GC pass resets exactly its victim; every block written reached the device once
    assert r["zone_resets"] == r["reclaimed_segments"] > 0
    assert r["device_write_blocks"] == r["user_writes"] + r["gc_writes"]
    assert r["physical_segments"] == r["simulator"]["physical_segments"] == int(CAP * 1.25 // SEG)
    assert r["segment_blocks"] == SEG < r["zone_blocks"]  # zone capacity below zone size
    v = r["verify"]
    assert v["ok"] and v["checked"] == v["mapped"] == CAP and v["lost"] == v["corrupt"] == 0
    assert v["passes"] > 1  # the periodic passes during GC ran too
    assert r["waf"] == pytest.approx(r["simulator"]["waf"], abs=1e-9)


def _run_until_killed(exe, args, kill_at: int) -> int:
    """Start the harness, SIGKILL it once its progress passes ``kill_at``; the last write it
    reported acknowledged."""
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    acked = 0
    for line in proc.stderr:
        if line.startswith("progress "):
            acked = int(line.split()[1])
            if acked >= kill_at:
                os.kill(proc.pid, signal.SIGKILL)
                break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the replay ended before the kill"
    return acked


def test_kill_mid_replay_then_recover_loses_no_acknowledged_write(trace, tmp_path, exe):
    from dogi_ml.pipeline.replay import trace_file

    path = trace_file(trace, tmp_path)
    dev = _device(tmp_path)
    nseg = zh.segment_count(CAP, 0.25, SEG)
    base = zh.harness_args(path, dev, capacity=CAP, policy="sepbit", op_ratio=0.25)
    create = [f"--create={nseg},{zh.file_zone_blocks(SEG)},{SEG},14,14", "--progress=97"]
    kill_at = random.Random(os.getpid()).randrange(CAP + 1000, 4 * CAP - 500)  # inside the trace, GC running
    acked = _run_until_killed(exe, base + create, kill_at)
    r = zh.run(base + ["--recover"], exe)
    assert r["recovered_writes"] >= acked >= kill_at
    assert r["live_lbas"] == CAP
    assert r["lost"] == r["corrupt"] == r["phantom"] == 0
    assert r["verify"]["ok"] and r["verify"]["checked"] == CAP

    # the checker can fail: flip one payload byte of the first block of a zone holding data
    data = Path(dev[5:])
    zone_blocks = zh.device_info(dev, exe)["zone_blocks"]
    meta = Path(f"{data}.zones").read_bytes()  # struct zdev_meta: nzones at 12, zones at 40
    nz = struct.unpack_from("<I", meta, 12)[0]
    z = next(i for i in range(nz) if struct.unpack_from("<I", meta, 40 + 8 * i)[0] > 0)
    with open(data, "r+b") as fh:
        fh.seek(z * zone_blocks * 4096 + 100)
        byte = fh.read(1)[0]
        fh.seek(z * zone_blocks * 4096 + 100)
        fh.write(bytes([byte ^ 0xFF]))
    r2 = zh.run(base + ["--recover"], exe)
    assert r2["corrupt"] == 1 and not r2["verify"]["ok"]


def test_file_device_enforces_the_zone_rules(tmp_path, exe):
    r = zh.run([f"--device={_device(tmp_path)}", "--create=8,16,12,3,4", "--selftest"], exe)
    assert r["ok"], r["checks"]
    by = {c["step"]: c for c in r["checks"]}
    assert "only at the write pointer" in by["write behind the write pointer"]["message"]
    assert "capacity" in by["write crossing the zone capacity"]["message"]
    assert "full zone" in by["write to a full zone"]["message"]
    assert "active" in by["open one zone more than max_active"]["message"]
    assert r["implicit_closes"] >= 1  # max_open 3 < max_active 4: a zone was implicitly closed


def test_bad_input_is_a_clear_error(trace, tmp_path, exe):
    from dogi_ml.pipeline.replay import trace_file

    path = trace_file(trace, tmp_path)
    plain = tmp_path / "plain.img"
    plain.write_bytes(b"\0" * 8192)
    with pytest.raises(zh.HarnessError, match="not a zoned block device.*device=file:"):
        zh.run(zh.harness_args(path, str(plain), capacity=CAP), exe)
    with pytest.raises(zh.HarnessError, match="not a zoned block device"):
        zh.run(zh.harness_args(path, "/dev/null", capacity=CAP), exe)
    nseg = zh.segment_count(CAP, 0.25, SEG)
    geo = (nseg, 128, SEG, 4, 4)
    with pytest.raises(zh.HarnessError, match="too few zones for the groups: policy sepbit keeps 6 zones open"):
        zh.run(zh.harness_args(path, _device(tmp_path), capacity=CAP, op_ratio=0.25, create=geo), exe)
    with pytest.raises(zh.HarnessError, match="too few zones for the groups: .* raise the op ratio"):
        zh.run(
            zh.harness_args(path, _device(tmp_path), capacity=CAP, op_ratio=0.05, create=(nseg, 128, SEG, 14, 14)), exe
        )
    with pytest.raises(zh.HarnessError, match="does not fit the device: .* the device has 10"):
        zh.run(
            zh.harness_args(path, _device(tmp_path), capacity=CAP, op_ratio=0.25, create=(10, 128, SEG, 14, 14)), exe
        )
    with pytest.raises(zh.HarnessError, match="not a file-emulated zoned device"):
        zh.run(zh.harness_args(path, f"file:{tmp_path / 'nothing'}", capacity=CAP, op_ratio=0.25), exe)
    with pytest.raises(zh.HarnessError, match="not a dogi_ml binary trace"):
        zh.run(
            zh.harness_args(plain, _device(tmp_path), capacity=CAP, op_ratio=0.25, create=(nseg, 128, SEG, 14, 14)), exe
        )
    with pytest.raises(zh.HarnessError, match="runs policies nosep, sepgc, sepbit"):
        zh.harness_args(path, _device(tmp_path), capacity=CAP, policy="dogi")
    with pytest.raises(ConfigError, match="chunk"):
        replay(trace, POLICY["nosep"], {**SIM, "raid_chunk_blocks": 16}, _device(tmp_path), {}, progress=False)


def _conventional_block_device() -> str | None:
    """A non-zoned block device this process may read (the harness asks its zone model on a
    read-only descriptor and stops: nothing is written)."""
    for q in sorted(Path("/sys/block").glob("*/queue/zoned")):
        dev = Path("/dev") / q.parent.parent.name
        if q.read_text().strip() == "none" and dev.exists() and os.access(dev, os.R_OK):
            return str(dev)
    return None


def test_a_conventional_block_device_is_refused(trace, tmp_path, exe):
    dev = _conventional_block_device()
    if dev is None:
        pytest.skip("no conventional block device accessible here")
    with pytest.raises(zh.HarnessError, match="is not zoned .*host-managed zoned device"):
        zh.device_info(dev, exe)


def test_replay_command(trace, tmp_path):
    """The command line: summary, JSON and an MLflow run."""
    out = tmp_path / "r.json"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'ml.db'}", "DOGI_ML_CACHE": str(tmp_path)}
    cmd = [
        sys.executable, "-m", "dogi_ml", "replay", "+workload=zipf", f"workload.capacity_blocks={CAP}",
        "workload.write_volume=2", "policy=sepgc", f"sim.segment_blocks={SEG}", "sim.op_ratio=0.25",
        f"device=file:{tmp_path / 'cli.zns'}", f"output={out}", f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "counts equal" in proc.stdout and "verify         ok" in proc.stdout
    r = json.loads(out.read_text())
    assert r["parity"]["ok"] and r["verify"]["ok"] and r["user_writes"] == 2 * CAP
    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["replay"])
    assert len(runs) == 1 and runs["metrics.gc_writes"][0] == r["gc_writes"]
    bad = subprocess.run(cmd[:4] + ["+workload=zipf"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "no device given" in bad.stderr


# -- the learned scheme (issue 15): DOGI's deployed int8 MLP and configuration, frozen --------
FROZEN_SIM = {**SIM, "victim": None}  # DOGI's expiry-first victims are its own (a set sim.victim is refused)


@pytest.fixture(scope="module")
def bundle(trace, tmp_path_factory):
    """The deployment bundle of a DOGI run (int8 MLP deployed, two retrainings on 12K writes;
    32-block segments: DOGI keeps 18 group slots open)."""
    from dogi_ml.pipeline.replay import export_dogi_bundle

    params = {
        "deployed": "int8", "int8_runtime": "numba", "retrain_every": 4096, "min_samples": 300,
        "max_samples": 20000, "model_params": {"epochs": 4, "patience": 2}, "fallback_compare": "none",
        "fallback_accuracy": 0.0,
    }  # fmt: skip
    out = tmp_path_factory.mktemp("bundle") / "dogi"
    r = export_dogi_bundle(trace, {"name": "dogi", "params": params}, {**FROZEN_SIM, "segment_blocks": 32}, out)
    assert r["mode"] == "ml" and r["retrains"] >= 2
    return out


def _frozen(bundle) -> dict:
    return {"name": "dogi_frozen", "n_groups": None, "params": {"bundle": str(bundle)}}


def test_learned_scheme_counts_equal_the_simulator_and_every_block_reads_back(trace, bundle, tmp_path):
    """The frozen learned scheme in C (features, the exported header's MLP, groups, Frozen
    Filter, expiry-first victims) and in the Numba simulator: the same user, GC, reset counts and
    the same placement counts (hot writes, writes per predicted category, Frozen-Filter copies)."""
    zns = {"verify": True, "verify_every": 25, "compare_sim": True, "progress_every": 0}
    r = replay(trace, _frozen(bundle), FROZEN_SIM, _device(tmp_path), zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    for k in (*PARITY_KEYS, "learned"):
        assert r[k] == r["simulator"][k]
    assert r["policy"] == "dogi_frozen" and r["victim"] == "dogi"
    assert r["user_writes"] == 3 * CAP and r["gc_writes"] > 0 and r["zone_resets"] == r["reclaimed_segments"] > 0
    learned = r["learned"]
    # the model's categories spread over several groups; the Hot Filter and the Frozen Filter both act
    assert learned["hot_writes"] > 0 and learned["frozen_gc_writes"] > 0 and learned["expired_victims"] > 0
    assert sum(c > 0 for c in learned["class_writes"]) >= 2
    assert learned["hot_writes"] + sum(learned["class_writes"]) == r["user_writes"]
    v = r["verify"]
    assert v["ok"] and v["checked"] == v["mapped"] == CAP and v["lost"] == v["corrupt"] == 0 and v["passes"] > 1


def test_frozen_placements_equal_the_integer_reference(trace, bundle, tmp_path, monkeypatch):
    """The model's category of every write, from the policy (features by FeatureStream, the
    Numba int8 kernel) and from the C harness (its own features, the exported header), equals
    export/integer.py's reference (QuantizedMLP: input rules, integer layers, first largest
    logit) on the trace's features."""
    import numpy as np

    from dogi_ml.features.extract import FEATURES, FeatureConfig, extract_features
    from dogi_ml.policies import make_policy

    pol = make_policy("dogi_frozen", bundle=str(bundle))
    d = pol.bundle.deploy
    assert d["features"] == list(FEATURES[:6]) and pol.n_groups == d["n_intermediate"] + 2 <= 12
    assert d["n_intermediate"] >= 2 and d["group_expiry"][1] is not None  # bounded groups: expiry victims
    cfg = FeatureConfig(CAP, window_blocks=d["feature_window"], chunk_blocks=d["feature_chunk_blocks"])
    X = extract_features(trace, cfg)[:, pol.bundle.feature_columns()]
    ref = pol.bundle.qmodel.predict(X)
    got = pol.classify(X)
    assert np.array_equal(got, ref)
    assert len(np.unique(ref)) >= 2
    from dogi_ml.pipeline.replay import learned_headers, trace_file

    exe = zh.build(learned=learned_headers(_frozen(bundle)))
    dump = tmp_path / "classes.bin"
    monkeypatch.setenv("DOGI_ZNS_CLASSES", str(dump))
    nseg = zh.segment_count(CAP, 0.25, SEG)
    args = zh.harness_args(
        trace_file(trace, tmp_path), _device(tmp_path), capacity=CAP, policy="dogi_frozen", op_ratio=0.25
    )
    zh.run(args + [f"--create={nseg},128,{SEG},14,14", "--no-verify"], exe)
    c_classes = np.fromfile(dump, np.int8)
    assert c_classes.size == 3 * CAP and np.array_equal(c_classes, ref)


def test_bad_bundle_is_a_clear_error(trace, bundle, tmp_path, exe):
    import shutil

    from dogi_ml.export.integer import ExportError
    from dogi_ml.pipeline.replay import learned_headers, trace_file

    with pytest.raises(ExportError, match="DOGI bundle not found"):
        replay(trace, _frozen(tmp_path / "none"), FROZEN_SIM, _device(tmp_path), {}, progress=False)
    with pytest.raises(ConfigError, match="needs its deployment bundle"):
        replay(trace, {"name": "dogi_frozen", "params": {}}, FROZEN_SIM, _device(tmp_path), {}, progress=False)
    # an altered header or configuration no longer matches the manifest
    for name, edit in (("dogi_model.h", "/* edited */\n"), ("deploy.json", " ")):
        bad = tmp_path / f"bad-{name}"
        shutil.copytree(bundle, bad)
        with open(bad / name, "a") as fh:
            fh.write(edit)
        with pytest.raises(ExportError, match=f"corrupted artefact: .*{name}"):
            replay(trace, _frozen(bad), FROZEN_SIM, _device(tmp_path), {}, progress=False)
    # a bundle of another capacity: refused by the simulator's policy and by the harness itself
    from dogi_ml.pipeline.simulate import simulate

    with pytest.raises(ExportError, match="exported for a capacity of 4096 blocks.*this run has 8192"):
        simulate(trace, _frozen(bundle), {**FROZEN_SIM, "capacity_blocks": 2 * CAP}, progress=False)
    path = trace_file(trace, tmp_path)
    with pytest.raises(zh.HarnessError, match="needs the headers .* pass learned="):
        zh.build(learned={"dogi_model.h": bundle / "dogi_model.h"})
    learned_exe = zh.build(learned=learned_headers(_frozen(bundle)))
    args = zh.harness_args(path, _device(tmp_path), capacity=2 * CAP, policy="dogi_frozen", op_ratio=0.25)
    nseg = zh.segment_count(2 * CAP, 0.25, SEG)
    with pytest.raises(zh.HarnessError, match="exported for a capacity of 4096 blocks.*this replay has 8192"):
        zh.run(args + [f"--create={nseg},128,{SEG},14,14"], learned_exe)
    # mode=bundle exports a DOGI run's deployed int8 model only
    from dogi_ml.pipeline.replay import export_dogi_bundle

    for pol in ({"name": "sepbit", "params": {}}, {"name": "dogi", "params": {"deployed": "float"}}):
        with pytest.raises(ConfigError, match="mode=bundle exports the deployed int8 model of a DOGI run"):
            export_dogi_bundle(trace, pol, SIM, tmp_path / "b")
    timed = {**FROZEN_SIM, "segment_blocks": 32, "raid_chunk_blocks": 16, "raid_chunk_timeout_us": 100}
    with pytest.raises(ConfigError, match="without the chunk layer .* leave sim.raid_chunk_blocks=0"):
        export_dogi_bundle(trace, {"name": "dogi", "params": {"deployed": "int8"}}, timed, tmp_path / "b")
    # a harness built without a model refuses the scheme
    with pytest.raises(zh.HarnessError, match="built without a learned model"):
        zh.run(zh.harness_args(path, _device(tmp_path), capacity=CAP, policy="dogi_frozen", op_ratio=0.25), exe)


def test_learned_scheme_on_a_sparse_trace_with_reads(trace, bundle, tmp_path, monkeypatch):
    """Addresses beyond the capacity (both sides compact them; the features see them as
    written), reads between the writes and two-block requests: the same counts, and the C
    harness's category of every write equals the integer reference."""
    import numpy as np

    from dogi_ml.features.extract import FeatureConfig, extract_features
    from dogi_ml.policies._dogi_bundle import load_bundle
    from dogi_ml.traces.trace import Trace

    rng = np.random.default_rng(1)
    w = trace.block_writes
    nb = np.where(rng.random(w.size) < 0.1, 2, 1).astype(np.int32)
    op = np.where(rng.random(w.size) < 0.2, 0, 1).astype(np.uint8)
    z = np.zeros(w.size, np.int32)
    sparse = Trace(ts_us=np.arange(w.size), lba=w * 3 + 100_000, nblocks=nb, op=op, volume=z, name="sparse")
    dump = tmp_path / "classes.bin"
    monkeypatch.setenv("DOGI_ZNS_CLASSES", str(dump))
    zns = {"verify": True, "compare_sim": True, "progress_every": 0}
    sim = {**FROZEN_SIM, "capacity_blocks": CAP}
    r = replay(sparse, _frozen(bundle), sim, _device(tmp_path), zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    assert r["compacted"] and r["gc_writes"] > 0 and r["verify"]["ok"] and r["verify"]["lost"] == 0
    b = load_bundle(bundle)
    cfg = FeatureConfig(CAP, window_blocks=b.deploy["feature_window"], chunk_blocks=b.deploy["feature_chunk_blocks"])
    X = extract_features(sparse, cfg)[:, b.feature_columns()]
    assert np.array_equal(np.fromfile(dump, np.int8), b.qmodel.predict(X))


def test_deploy_configuration_is_checked():
    """deploy.json that is not a configuration, of another version or incomplete: a BundleError
    naming the problem and asking for a re-export (never an AttributeError or KeyError)."""
    from dogi_ml.policies._dogi_bundle import FORMAT, VERSION, BundleError, check_deploy

    cases = (
        ([1], "not a DOGI deployment configuration \\(a JSON list\\); re-export"),
        ({"format": "x"}, "not a DOGI deployment configuration \\(format 'x'\\); re-export"),
        ({"format": FORMAT, "version": VERSION + 1}, "is not supported .*re-export"),
        ({"format": FORMAT, "version": VERSION, "mu": 3}, "lacks features, .*re-export it"),
    )
    for bad, match in cases:
        with pytest.raises(BundleError, match=match):
            check_deploy(bad)
