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
