"""The ZNS replay harness (dogi_ml/zns): the same counts as the Numba simulator, every block read
back intact, the durability contract (flush / FUA / none, the acknowledgement journal), recovery
after a kill and after a modelled power loss, every kind of loss reported with its exit status,
the zone rules of the file-emulated device, and clear errors."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli, skip_or_fail_in_ci

from dogi_ml.errors import ConfigError
from dogi_ml.pipeline.replay import PARITY_KEYS, replay
from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import exit_codes
from dogi_ml.zns import harness as zh

CAP = 4096
SEG = 64
SIM = {"segment_blocks": SEG, "op_ratio": 0.25, "victim": "greedy", "gc_free_segments": 2}
POLICY = {
    "nosep": {"name": "nosep", "n_groups": 1, "params": {}},
    "sepgc": {"name": "sepgc", "n_groups": 2, "params": {}},
    "sepbit": {"name": "sepbit", "n_groups": 6, "params": {"variant": "code"}},
}

# the harness is C: without a compiler every test here skips (fails under CI=true)
pytestmark = pytest.mark.usefixtures("c_compiler")


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
    """Start the harness, SIGKILL it once its progress passes ``kill_at``; the last count of
    acknowledged writes it reported."""
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


# the file device's zone sidecar (zdev.h struct zdev_meta): nzones at byte 12, then from byte 40
# one 16-byte record per zone: write pointer, condition, durable write pointer, reserved
def _zones(dev: str) -> list[tuple[int, int, int]]:
    meta = Path(f"{dev[5:]}.zones").read_bytes()
    nz = struct.unpack_from("<I", meta, 12)[0]
    return [struct.unpack_from("<III", meta, 40 + 16 * z) for z in range(nz)]


def _set_write_pointer(dev: str, zone: int, wp: int) -> None:
    side = Path(f"{dev[5:]}.zones")
    meta = bytearray(side.read_bytes())
    struct.pack_into("<II", meta, 40 + 16 * zone, wp, 4 if wp else 1)  # closed, or empty
    side.write_bytes(meta)


def _zone_of_the_newest_write(dev: str, zone_blocks: int) -> tuple[int, int]:
    """(sequence number, zone) of the newest block on the device: the last block below some zone's
    write pointer."""
    best = (0, -1)
    with open(dev[5:], "rb") as fh:
        for z, (wp, _, _) in enumerate(_zones(dev)):
            if wp:
                fh.seek((z * zone_blocks + wp - 1) * 4096)
                best = max(best, (struct.unpack_from("<Q", fh.read(32), 16)[0], z))
    return best


@pytest.fixture
def fua_dir(tmp_path):
    """Where FUA runs keep their device: memory (/dev/shm) where there is one, since each 4 KiB
    RWF_DSYNC write to this VM's disk takes milliseconds (the modes' costs on disk are measured in
    docs/deployment.md); the durability model (durable write pointers) is the same."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    d = Path(tempfile.mkdtemp(prefix="dogi_zns_fua_", dir=shm)) if shm.is_dir() else tmp_path / "fua"
    d.mkdir(exist_ok=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _base_args(trace, tmp_path, where=None, **kw):
    from dogi_ml.pipeline.replay import trace_file

    dev = _device(where or tmp_path)
    nseg = zh.segment_count(CAP, 0.25, SEG)
    base = zh.harness_args(trace_file(trace, tmp_path), dev, capacity=CAP, policy="sepbit", op_ratio=0.25, **kw)
    return dev, base, [f"--create={nseg},{zh.file_zone_blocks(SEG)},{SEG},14,14"]


def test_kill_mid_replay_then_recover_loses_no_acknowledged_write(trace, tmp_path, exe):
    dev, base, create = _base_args(trace, tmp_path)
    kill_at = random.Random(os.getpid()).randrange(CAP + 1000, 4 * CAP - 500)  # inside the trace, GC running
    acked = _run_until_killed(exe, base + create + ["--progress=97"], kill_at)
    r = zh.run(base + ["--recover"], exe)
    # the count of acknowledged writes comes from the journal, not from the caller
    assert r["journal"]["status"] == "ok" and not r["journal"]["run_finished"], r["journal"]
    assert r["durability"] == "flush" and r["exit_status"] == exit_codes.OK and r["ok"]
    assert acked <= r["acknowledged_writes"] < CAP + 3 * CAP  # the kill landed before the run's end
    assert r["live_lbas"] == CAP and r["lost"] == r["corrupt"] == r["phantom"] == r["foreign"] == 0
    # every LBA holds its last acknowledged version or a write issued after it
    assert r["intact_lbas"] + r["unacknowledged_found"] == CAP
    assert r["verify"]["ok"] and r["verify"]["checked"] == CAP

    # the checker can fail: flip one payload byte of the first block of a zone holding data
    data = Path(dev[5:])
    zone_blocks = zh.device_info(dev, exe)["zone_blocks"]
    z = next(i for i, (wp, _, _) in enumerate(_zones(dev)) if wp > 0)
    with open(data, "r+b") as fh:
        fh.seek(z * zone_blocks * 4096 + 100)
        byte = fh.read(1)[0]
        fh.seek(z * zone_blocks * 4096 + 100)
        fh.write(bytes([byte ^ 0xFF]))
    r2 = zh.run(base + ["--recover"], exe)
    assert r2["corrupt"] == 1 and not r2["ok"] and r2["exit_status"] == exit_codes.LOST_WRITES
    assert r2["error"].startswith("recovery: ")


def test_recovery_reports_every_loss_never_ok(trace, tmp_path, exe):
    """After a finished run: the newest acknowledged write rolled back off the device, a torn,
    a shortened, a damaged and a missing journal, and zones that come back empty are each
    reported (exit status 5 and a one-line error), never ok; the count of acknowledged writes
    is the journal's."""
    dev, base, create = _base_args(trace, tmp_path)
    total = CAP + 3 * CAP
    done = zh.run(base + create, exe)
    assert done["acknowledged_writes"] == total and done["durability"] == "flush"
    recover = base + ["--recover"]
    r = zh.run(recover, exe)
    assert r["ok"] and r["exit_status"] == 0 and r["acknowledged_writes"] == total and r["journal"]["run_finished"]
    assert r["intact_lbas"] == r["live_lbas"] == CAP

    def lost(expect_status=None, **expect):
        r = zh.run(recover, exe)
        assert not r["ok"] and r["exit_status"] == exit_codes.LOST_WRITES, r
        assert r["error"].startswith("recovery: ")
        if expect_status:
            assert r["journal"]["status"] == expect_status, r["journal"]
        for k, v in expect.items():
            assert r[k] == v, (k, r[k], v)
        return r

    # the last zone's write pointer one block back: the newest acknowledged write is lost
    zone_blocks = zh.device_info(dev, exe)["zone_blocks"]
    seq, zone = _zone_of_the_newest_write(dev, zone_blocks)
    assert seq == total
    wp = _zones(dev)[zone][0]
    _set_write_pointer(dev, zone, wp - 1)
    lost("ok", lost=1, newest_lost_seq=total, acknowledged_writes=total)
    _set_write_pointer(dev, zone, wp)
    assert zh.run(recover, exe)["ok"]

    journal = Path(f"{dev[5:]}.journal")
    saved = journal.read_bytes()
    assert len(saved) % 32 == 0 and len(saved) // 32 == r["journal"]["records"]
    journal.write_bytes(saved[:-5])  # a torn last record
    lost("truncated")
    journal.write_bytes(saved[: 32 * 40])  # whole records gone: the device holds writes issued after them
    r = lost("truncated")
    assert r["beyond_journal"] > 0 and "records are missing" in r["journal"]["detail"]
    damaged = bytearray(saved)
    damaged[32 * 20 + 9] ^= 1  # a record in the middle
    journal.write_bytes(bytes(damaged))
    assert "damaged" in lost("corrupt")["journal"]["detail"]
    journal.unlink()
    assert lost("missing")["acknowledged_writes"] is None
    journal.write_bytes(saved)
    assert zh.run(recover, exe)["ok"]
    r = zh.run([*recover, "--no-prefill"], exe)  # the journal's run had a prefill: not this run
    assert r["journal"]["status"] == "mismatch" and r["exit_status"] == exit_codes.LOST_WRITES and not r["ok"]
    assert "the journal is another run's" in r["journal"]["detail"]
    # the journal of another run of the same trace and settings (its own tag): every block foreign
    other = tmp_path / "other"
    other.mkdir()
    odev, obase, ocreate = _base_args(trace, tmp_path, other)
    zh.run(obase + ocreate + ["--no-verify"], exe)
    journal.write_bytes(Path(f"{odev[5:]}.journal").read_bytes())
    r = lost("ok", intact_lbas=0, lost=CAP)
    assert r["foreign"] == r["blocks_scanned"] > 0
    journal.write_bytes(saved)

    # every zone empty after all those acknowledged writes
    zh.run([f"--device={dev}", "--reset-all"], exe)
    lost("ok", lost=CAP, intact_lbas=0, newest_lost_seq=total, acknowledged_writes=total)


@pytest.mark.parametrize("durability", ["flush", "fua", "none"])
def test_power_loss_without_protection(trace, tmp_path, exe, durability, fua_dir):
    """A drive without power-loss protection: the replay is killed between a write and its
    acknowledgement (--stop-after), then the device loses every block it was not asked to make
    durable (--drop-volatile). Under flush and FUA every acknowledged write survives and the only
    writes lost are later ones; under none, acknowledged writes are lost and recovery says so."""
    where = fua_dir if durability == "fua" else tmp_path
    dev, base, create = _base_args(trace, tmp_path, where, durability=durability, flush_every=256)
    stop = 2 * CAP + 333  # user writes: a kill inside the trace, GC running
    proc = subprocess.run([str(exe), *base, *create, f"--stop-after={stop}", "--progress=1"], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    progress = [int(ln.split()[1]) for ln in proc.stderr.decode().splitlines() if ln.startswith("progress ")]
    acked = progress[-1]  # what the harness last reported acknowledged
    assert acked < CAP + stop  # the kill landed before the acknowledgement of the last writes
    drop = zh.run([f"--device={dev}", "--drop-volatile"], exe)
    r = zh.run(base + ["--recover"], exe)
    assert r["acknowledged_writes"] == acked and r["journal"]["status"] == "ok" and r["durability"] == durability
    if durability == "none":
        assert drop["dropped_blocks"] > 0 and drop["dropped_min_seq"] <= acked
        assert r["lost"] > 0 and not r["ok"] and r["exit_status"] == exit_codes.LOST_WRITES
        return
    assert r["ok"] and r["lost"] == r["corrupt"] == r["phantom"] == 0 and r["exit_status"] == 0, r
    assert r["intact_lbas"] + r["unacknowledged_found"] == r["live_lbas"] == CAP
    if durability == "fua":
        assert drop["dropped_blocks"] == 0  # every write was durable when it returned
    else:
        # writes after the last flush existed and were dropped; none of them had been acknowledged
        # (a GC copy among them may carry an older sequence number: its original is still on the
        # device, its victim's reset waits for a flush)
        assert drop["dropped_blocks"] > 0 and drop["dropped_max_seq"] > acked
        assert r["max_seq_found"] < drop["dropped_max_seq"]


def test_durability_is_named_and_enforced(trace, tmp_path, exe, fua_dir):
    """Each mode in the result (with its flushes), the journal's last record the run's END; bad
    values refused with the key and the fix."""
    out = {}
    for mode in ("flush", "fua", "none"):
        sub = (fua_dir if mode == "fua" else tmp_path) / mode
        sub.mkdir()
        dev, base, create = _base_args(trace, tmp_path, sub, durability=mode, flush_every=2048)
        out[mode] = zh.run(base + create + ["--no-verify"], exe)
        r = out[mode]
        assert r["durability"] == mode and r["acknowledged_writes"] == CAP + 3 * CAP
        assert r["journal"] == f"{dev[5:]}.journal" and Path(r["journal"]).stat().st_size % 32 == 0
    assert out["flush"]["device_flushes"] >= (CAP + 3 * CAP) // 2048 and out["flush"]["zone_fill_commits"] > 0
    assert out["fua"]["device_flushes"] == out["none"]["device_flushes"] == 0
    assert 0 < out["flush"]["durability_s"] < out["flush"]["elapsed_s"] and out["none"]["durability_s"] == 0
    assert "durability_warning" in out["none"] and "durability_warning" not in out["flush"]
    # resets that waited for a flush still happen, once per GC pass: the counts stay the simulator's
    for r in out.values():
        assert r["zone_resets"] == r["reclaimed_segments"] > 0
        assert (r["user_writes"], r["gc_writes"]) == (out["none"]["user_writes"], out["none"]["gc_writes"])
    with pytest.raises(zh.HarnessError, match="zns.durability='sync' is not one of flush, fua, none"):
        zh.harness_args("t.dtr", "file:x", capacity=CAP, durability="sync")
    with pytest.raises(zh.HarnessError, match="zns.flush_every=0: .* at least 1"):
        zh.harness_args("t.dtr", "file:x", capacity=CAP, flush_every=0)
    _, base, create = _base_args(trace, tmp_path)
    with pytest.raises(zh.HarnessError, match="unknown --durability=sync") as err:
        zh.run(base + create + ["--durability=sync"], exe)
    assert err.value.exit_status == exit_codes.USAGE


def test_verify_failure_exits_4(trace, tmp_path, exe):
    """Blocks damaged on the device before the final verify pass (the harness stopped there by
    DOGI_ZNS_STOP_BEFORE_VERIFY): the JSON says which, the exit status is 4 with one error line."""
    dev, base, create = _base_args(trace, tmp_path)
    env = {**os.environ, "DOGI_ZNS_STOP_BEFORE_VERIFY": "1"}
    proc = subprocess.Popen([str(exe), *base, *create], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _wait_stopped(proc.pid)
    damaged = _damage_zones(dev, 3)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exit_codes.VERIFY, err
    r = json.loads(out.decode().splitlines()[-1])
    assert not r["verify"]["ok"] and 0 < r["verify"]["corrupt"] <= damaged and r["verify"]["lost"] == 0
    lines = [ln for ln in err.decode().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith("error: verify failed: 1 of 1 verify passes")


def _wait_stopped(pid: int, timeout: float = 120.0) -> None:
    """Until process ``pid`` is stopped (state T in /proc/PID/stat)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            raise AssertionError(f"process {pid} ended before it stopped") from None
        if state == "T":
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not stop")


def _damage_zones(dev: str, n: int) -> int:
    """Flip a payload byte of every written block of the first ``n`` zones holding data; how many
    blocks were flipped."""
    zone_blocks = struct.unpack_from("<Q", Path(f"{dev[5:]}.zones").read_bytes(), 16)[0]
    blocks = [(z, b) for z, (wp, _, _) in enumerate(_zones(dev)) if wp > 0 for b in range(wp)]
    zones = sorted({z for z, _ in blocks})[:n]
    blocks = [(z, b) for z, b in blocks if z in zones]
    with open(dev[5:], "r+b") as fh:
        for z, b in blocks:
            fh.seek((z * zone_blocks + b) * 4096 + 100)
            byte = fh.read(1)[0]
            fh.seek((z * zone_blocks + b) * 4096 + 100)
            fh.write(bytes([byte ^ 0xFF]))
    return len(blocks)


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
    """The command line: summary, JSON and an MLflow run naming the durability mode; recovery of
    the device it left (exit 0), of the same device emptied (exit 5), a verify failure (exit 4),
    each failure with one error line after its JSON and MLflow run."""
    out = tmp_path / "r.json"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'ml.db'}", "DOGI_ML_CACHE": str(tmp_path)}
    dev = f"file:{tmp_path / 'cli.zns'}"
    cmd = [
        sys.executable, "-m", "dogi_ml", "replay", "+workload=zipf", f"workload.capacity_blocks={CAP}",
        "workload.write_volume=2", "policy=sepgc", f"sim.segment_blocks={SEG}", "sim.op_ratio=0.25",
        f"device={dev}", f"output={out}", f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "counts equal" in proc.stdout and "verify         ok" in proc.stdout
    assert "durability     flush (a device flush every 1024 user writes" in proc.stdout
    r = json.loads(out.read_text())
    assert r["parity"]["ok"] and r["verify"]["ok"] and r["user_writes"] == 2 * CAP
    assert r["durability"] == "flush" and r["acknowledged_writes"] == 3 * CAP and r["exit_status"] == 0
    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["replay"])
    assert len(runs) == 1 and runs["metrics.gc_writes"][0] == r["gc_writes"]
    assert runs["tags.durability"][0] == "flush" and runs["params.zns.durability"][0] == "flush"
    bad = subprocess.run(cmd[:4] + ["+workload=zipf"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "no device given" in bad.stderr

    # mode=recover: the journal's count, every acknowledged LBA intact; then the zones emptied
    rec = [*cmd, "mode=recover", "mlflow=false"]
    proc = subprocess.run(rec, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{3 * CAP} writes acknowledged, {CAP} live LBAs: {CAP} intact, lost 0" in proc.stdout
    zh.run([f"--device={dev}", "--reset-all"])
    proc = subprocess.run(rec, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == exit_codes.LOST_WRITES, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert errors == [
        f"error: recovery of {tmp_path / 'cli.zns'}: {CAP} of {CAP} acknowledged LBAs lost (newest acknowledged "
        f"write lost: {3 * CAP}), 0 corrupt, 0 phantom, 0 foreign blocks -- see the result JSON"
    ]
    assert json.loads(out.read_text())["lost"] == CAP

    # a verify failure: blocks damaged while the harness waits before its final verify pass
    stop_env = {**env, "DOGI_ZNS_STOP_BEFORE_VERIFY": "1"}
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=stop_env, cwd=tmp_path)
    _wait_stopped(_harness_pid(dev))
    _damage_zones(dev, 3)
    os.kill(_harness_pid(dev), signal.SIGCONT)
    stdout, stderr = cli.communicate(timeout=600)
    assert cli.returncode == exit_codes.VERIFY, stderr[-2000:]
    assert "verify         FAILED" in stdout
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: verify FAILED on {tmp_path / 'cli.zns'}: 0 lost and ")
    r = json.loads(out.read_text())
    assert not r["verify"]["ok"] and r["verify"]["corrupt"] > 0 and r["exit_status"] == exit_codes.VERIFY
    assert len(mlflow.search_runs(experiment_names=["replay"])) == 2  # logged before the exit


def _harness_pid(dev: str, timeout: float = 300.0) -> int:
    """The pid of the running zns_replay process writing ``dev`` (a grandchild of the CLI)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and b"zns_replay" in argv[0] and f"--device={dev}".encode() in argv:
                return int(proc.name)
        time.sleep(0.1)
    raise AssertionError(f"no zns_replay process on {dev}")


def test_parity_mismatch_exits_6(trace, tmp_path, monkeypatch, capsys):
    """The replay's counts against a simulator run of another victim rule: the result says
    MISMATCH, the command exits with status 6 and one error line naming the counts."""
    from hydra import compose, initialize_config_dir

    import dogi_ml.pipeline.replay as rp
    from dogi_ml.pipeline.common import CONF_DIR
    from dogi_ml.pipeline.simulate import simulate

    def other_victim(trace, policy_cfg, sim_cfg, progress=False):
        return simulate(trace, policy_cfg, {**sim_cfg, "victim": "fifo"}, progress=progress)

    monkeypatch.setattr(rp, "simulate", other_victim)
    overrides = [
        "+workload=zipf", f"workload.capacity_blocks={CAP}", "workload.write_volume=2", "policy=nosep",
        f"sim.segment_blocks={SEG}", "sim.op_ratio=0.25", f"device=file:{tmp_path / 'p.zns'}",
        f"output={tmp_path / 'p.json'}", "mlflow=false", "progress=false", f"cache_dir={tmp_path}",
    ]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("replay", overrides=overrides)
    with pytest.raises(SystemExit) as exit_:
        rp.run_replay(cfg, tmp_path)
    assert exit_.value.code == exit_codes.PARITY
    err = capsys.readouterr()
    assert "simulator      MISMATCH" in err.out
    errors = [ln for ln in err.err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: the replay's counts differ from the simulator's: {")
    r = json.loads((tmp_path / "p.json").read_text())
    assert not r["parity"]["ok"] and r["verify"]["ok"]


def test_a_kept_devices_zones_are_the_segments_or_the_setting_is_refused(tmp_path, c_compiler):
    """zns.keep=true replays onto the device as it is, whose zones are the segments: a
    sim.segment_blocks set on the command line that differs is refused (it was replaced without a
    word); the default gives way with a note."""
    dev = tmp_path / "k.zns"
    base = [
        "-q", "replay", "+workload=zipf", f"workload.capacity_blocks={CAP}", "workload.write_volume=2",
        "policy=nosep", "sim.op_ratio=0.25", f"device=file:{dev}", "mlflow=false", "progress=false",
    ]  # fmt: skip
    run_cli([*base, f"sim.segment_blocks={SEG}"], tmp_path)
    proc = run_cli([*base, "zns.keep=true", f"sim.segment_blocks={SEG // 2}"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: sim.segment_blocks={SEG // 2}, but the kept file device's zones hold {SEG} blocks (zones are the "
        f"segments) -- give sim.segment_blocks={SEG}, or drop zns.keep to recreate the file device"
    )
    proc = run_cli([*base, "zns.keep=true"], tmp_path)
    assert f"note: segments are file:{dev}'s zones: {SEG} blocks (not sim.segment_blocks=512)" in proc.stderr


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


@pytest.mark.parametrize("scheme", ["sepbit", "dogi_frozen"])
def test_the_harness_builds_and_runs_with_clang(trace, bundle, tmp_path, monkeypatch, scheme):
    """``CC=clang``: the harness compiles under its -Werror flags and gives the simulator's counts.
    Clang warns where GCC does not (a group count it could not prove set, before die() was marked
    noreturn), and the warning stopped the build."""
    clang = shutil.which("clang")
    if clang is None:
        skip_or_fail_in_ci("clang is not installed (apt install clang; .ci/run installs it)")
    monkeypatch.setenv("CC", clang)
    monkeypatch.setenv("DOGI_ML_ZNS_CACHE", str(tmp_path / "build"))
    if scheme == "sepbit":
        policy, sim = POLICY["sepbit"], {**SIM, "victim": "cost_benefit"}
    else:
        policy, sim = _frozen(bundle), FROZEN_SIM
    zns = {"verify": True, "verify_every": 0, "compare_sim": True, "progress_every": 0}
    r = replay(trace, policy, sim, _device(tmp_path), zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    assert r["user_writes"] == 3 * CAP and r["gc_writes"] > 0 and r["verify"]["ok"]
    assert [p.name for p in (tmp_path / "build").iterdir() if p.name.startswith("zns_replay-")]


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
