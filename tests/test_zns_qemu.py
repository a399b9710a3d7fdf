"""The harness on a real zoned device: an NVMe ZNS namespace of a QEMU guest (TCG, Debian's cloud
kernel, busybox initramfs; ``.ci/run`` fetches them; elsewhere a missing QEMU, kernel or kbuild tree
skips with the reason, under ``CI=true`` it fails).

One boot: the statically linked harness replays a small trace with SepBIT on ``/dev/nvme0n1``
(zone capacity 256 KiB below a 512 KiB zone size, QEMU's open/active limits) under
``--durability=flush`` (NVMe FLUSH commands through the block device's fdatasync), its counts must
equal the Numba simulator's and every live block must read back; the same under ``--durability=fua``
(every write with the FUA bit); the same with the frozen
learned scheme (a DOGI run's bundle: its int8 header compiled into a second static harness,
``policy=dogi_frozen``), whose placement counts must equal the simulator's too, and likewise the
frozen hybrid (a hybrid run's bundle, ``policy=hybrid_frozen``); then a replay is
killed with SIGKILL at a random point inside the guest (which stays up, so the drive keeps its zone
state): the kill must land before the run's end, and recovery, reading the count of acknowledged
writes from the journal (not from this test), must find every one intact; last, every zone is
reset and recovery must report every acknowledged LBA lost (exit status 5)."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
from helpers import skip_or_fail_in_ci

from dogi_ml.pipeline.replay import PARITY_KEYS, learned_headers
from dogi_ml.pipeline.simulate import simulate
from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import exit_codes, qemu
from dogi_ml.zns import harness as zh

CAP, SEG, OP = 4096, 64, 0.25  # SEG = the zone capacity in 4 KiB blocks
ZONES = 96

assets, why = qemu.find_assets()


@pytest.fixture(autouse=True)
def _guest_assets():
    """QEMU, the guest kernel and busybox: a skip with the reason, a failure under CI=true."""
    if assets is None:
        skip_or_fail_in_ci(f"no QEMU ZNS guest here: {why}")


def _dogi_bundle(trace, out):
    """A DOGI run's deployment bundle (int8 MLP deployed; 32-block segments for its 18 groups)."""
    from dogi_ml.pipeline.replay import export_dogi_bundle

    params = {
        "deployed": "int8", "int8_runtime": "numba", "retrain_every": 4096, "min_samples": 300,
        "max_samples": 20000, "model_params": {"epochs": 4, "patience": 2}, "fallback_compare": "none",
        "fallback_accuracy": 0.0,
    }  # fmt: skip
    sim = {"segment_blocks": 32, "op_ratio": OP}  # DOGI's own victim rule (policy.victim=dogi)
    export_dogi_bundle(trace, {"name": "dogi", "params": params}, sim, out)
    return out


def _hybrid_bundle(trace, out):
    """A hybrid run's deployment bundle (score=argmax, int8; 32-block segments for the export run's
    18 group slots, as tests/test_hybrid_frozen.py)."""
    from dogi_ml.pipeline.replay import export_dogi_bundle

    params = {
        "deployed": "int8", "score": "argmax", "retrain_every": 4096, "min_samples": 300, "max_samples": 20000,
        "model_params": {"epochs": 4, "patience": 2}, "fallback_compare": "none", "fallback_accuracy": 0.0,
    }  # fmt: skip
    sim = {"segment_blocks": 32, "op_ratio": OP, "gc_free_segments": 2, "victim": None}
    r = export_dogi_bundle(trace, {"name": "hybrid", "params": params}, sim, out)
    assert r["mode"] == "ml" and r["retrains"] >= 2, r  # the model placed: the bundle holds a trained one
    return out


def test_sepbit_on_a_qemu_zns_namespace_matches_the_simulator_and_survives_a_kill(tmp_path):
    trace = generate("zipf", capacity_blocks=CAP, n_writes=3 * CAP, seed=3, theta=1.0)
    path = write_trace(trace, tmp_path / "t.dtr")
    nseg = zh.segment_count(CAP, OP, SEG)
    bundle = _dogi_bundle(trace, tmp_path / "bundle")
    frozen = {"name": "dogi_frozen", "n_groups": None, "params": {"bundle": str(bundle)}}
    dogi_exe = zh.build(static=True, learned=learned_headers(frozen))
    hybrid = {
        "name": "hybrid_frozen",
        "n_groups": None,
        "params": {"bundle": str(_hybrid_bundle(trace, tmp_path / "h"))},
    }
    hybrid_exe = zh.build(static=True, learned=learned_headers(hybrid))
    args = (
        f"--trace=/trace.dtr --device=/dev/nvme0n1 --capacity={CAP} --policy=sepbit --op-ratio={OP} --segments={nseg}"
    )
    step = 97
    kill_lines = random.Random().randrange((CAP + 1000) // step, (4 * CAP - 500) // step)
    # the progress file exists before the replay starts: the background job opens its own
    # redirection later, and a first check that found no file read "" as a count and killed the
    # replay before it wrote (a CI run under load: "sh: bad number", acked empty)
    crash = (
        ": > /tmp/crash.p; "
        f"/zns_replay {args} --flush-every={step} --progress={step} > /dev/null 2> /tmp/crash.p & pid=$!; "
        f'while kill -0 $pid 2>/dev/null && [ "$(grep -c ^progress /tmp/crash.p)" -lt {kill_lines} ]; do usleep 10000; done; '
        "kill -9 $pid; wait $pid; st=$?; "
        'echo "{\\"acked\\": $(grep ^progress /tmp/crash.p | tail -n 1 | cut -d" " -f2), \\"status\\": $st}"'
    )
    commands = [
        ("info", "/zns_replay --device=/dev/nvme0n1 --info"),
        ("sepbit", f"/zns_replay {args} --verify-every=50"),
        ("fua", f"/zns_replay {args} --durability=fua"),
        ("dogi", "/zns_replay_dogi " + args.replace("--policy=sepbit", "--policy=dogi_frozen --victim=dogi")),
        ("hybrid", "/zns_replay_hybrid " + args.replace("--policy=sepbit", "--policy=hybrid_frozen --victim=hybrid")),
        ("crash", crash),
        ("recover", f"/zns_replay {args} --recover"),
        ("empty", f"/zns_replay --device=/dev/nvme0n1 --reset-all > /dev/null; /zns_replay {args} --recover"),
    ]
    run = qemu.run_guest(
        path.read_bytes(),
        commands,
        zones=ZONES,
        zone_size_mb=0.5,
        zone_capacity_mb=SEG * 4 / 1024,
        work_dir=tmp_path,
        extra_files={
            "/zns_replay_dogi": (dogi_exe.read_bytes(), 0o755),
            "/zns_replay_hybrid": (hybrid_exe.read_bytes(), 0o755),
        },
    )
    res = run["results"]
    assert run["exit_status"] == 1, run["log"][-3000:]  # qexit 0 -> QEMU exits 2*0+1
    info = res["info"]
    assert info["kind"] == "zoned-block-device" and info["zones"] == ZONES
    assert info["zone_capacity_blocks"] == SEG < info["zone_blocks"] == 2 * SEG
    assert info["max_open"] == info["max_active"] == 14

    r = res["sepbit"]
    assert r is not None, run["log"][-3000:]
    sim_cfg = {"segment_blocks": SEG, "op_ratio": OP, "victim": "greedy", "capacity_blocks": CAP}
    policy = {"name": "sepbit", "n_groups": 6, "params": {"variant": "code"}}
    sim = simulate(trace, policy, sim_cfg, progress=False)
    for k in PARITY_KEYS:
        assert r[k] == sim[k], k
    assert r["backend"] == "zoned-block-device" and r["direct_io"]
    # acknowledged only after NVMe FLUSH commands (fdatasync of the block device)
    assert r["durability"] == "flush" and r["device_flushes"] > 0 and r["acknowledged_writes"] == 4 * CAP
    assert run["exit_statuses"]["sepbit"] == exit_codes.OK
    # every write with the FUA bit (RWF_DSYNC on O_DIRECT): no flush, the same counts, every block back
    f = res["fua"]
    assert f is not None, run["log"][-3000:]
    assert f["durability"] == "fua" and f["device_flushes"] == 0 and f["acknowledged_writes"] == 4 * CAP
    assert all(f[k] == sim[k] for k in PARITY_KEYS) and f["verify"]["ok"] and f["verify"]["checked"] == CAP
    assert run["exit_statuses"]["fua"] == exit_codes.OK
    assert r["zone_resets"] == r["reclaimed_segments"] > 0
    assert r["device_write_blocks"] == r["user_writes"] + r["gc_writes"]
    v = r["verify"]
    assert v["ok"] and v["checked"] == CAP and v["lost"] == v["corrupt"] == 0 and v["passes"] > 1

    # the frozen learned scheme: the same counts and placements as the simulator's dogi_frozen
    d = res["dogi"]
    assert d is not None, run["log"][-3000:]
    frozen_cfg = {k: v for k, v in sim_cfg.items() if k != "victim"}  # its own rule (policy.victim)
    fsim = simulate(trace, frozen, frozen_cfg, progress=False)
    for k in (*PARITY_KEYS, "learned"):
        assert d[k] == fsim[k], k
    assert d["policy"] == "dogi_frozen" and d["backend"] == "zoned-block-device" and d["gc_writes"] > 0
    assert d["learned"]["hot_writes"] > 0 and sum(c > 0 for c in d["learned"]["class_writes"]) >= 2
    dv = d["verify"]
    assert dv["ok"] and dv["checked"] == CAP and dv["lost"] == dv["corrupt"] == 0
    # the frozen hybrid: its counts, its table's and the Frozen Filter's placements, its victims
    h = res["hybrid"]
    assert h is not None, run["log"][-3000:]
    hsim = simulate(trace, hybrid, frozen_cfg, progress=False)
    for k in (*PARITY_KEYS, "learned"):
        assert h[k] == hsim[k], k
    assert h["policy"] == "hybrid_frozen" and h["backend"] == "zoned-block-device" and h["gc_writes"] > 0
    assert h["learned"]["table_gc_writes"] > 0
    hv = h["verify"]
    assert hv["ok"] and hv["checked"] == CAP and hv["lost"] == hv["corrupt"] == 0
    assert run["exit_statuses"]["hybrid"] == exit_codes.OK

    assert res["crash"] is not None, run["log"][-3000:]
    acked = res["crash"]["acked"]
    assert res["crash"]["status"] == 128 + 9  # SIGKILL: the replay did not finish by itself
    assert CAP < acked < CAP + 3 * CAP, res["crash"]  # killed inside the trace, after the prefill
    rec = res["recover"]
    assert rec is not None, run["log"][-3000:]
    # the journal's count: at least the last one the harness printed, short of the whole trace
    assert rec["journal"]["status"] == "ok" and not rec["journal"]["run_finished"], rec["journal"]
    assert acked <= rec["acknowledged_writes"] < CAP + 3 * CAP
    assert rec["live_lbas"] == CAP and rec["lost"] == rec["corrupt"] == rec["phantom"] == rec["foreign"] == 0
    assert rec["intact_lbas"] + rec["unacknowledged_found"] == CAP
    assert rec["ok"] and rec["verify"]["ok"] and rec["verify"]["checked"] == CAP
    assert run["exit_statuses"]["recover"] == exit_codes.OK
    # every zone reset after those acknowledged writes: each LBA lost, never ok
    empty = res["empty"]
    assert empty is not None, run["log"][-3000:]
    assert empty["acknowledged_writes"] == rec["acknowledged_writes"] and empty["lost"] == CAP
    assert not empty["ok"] and empty["intact_lbas"] == 0
    assert run["exit_statuses"]["empty"] == exit_codes.LOST_WRITES


def test_the_exported_header_runs_inside_a_kernel_module_in_the_guest(tmp_path):
    """kbuild of the exported int8 MLP header against the guest kernel's headers; loaded in the
    guest, the module classifies fixed feature vectors; classes and logits equal the Python
    integer reference."""
    from dogi_ml.export.c_header import emit_header
    from dogi_ml.export.manifest import write_manifest
    from dogi_ml.export.parity import extreme_features
    from dogi_ml.export.quantize import quantize_model
    from dogi_ml.pipeline.train import build_dataset, train_and_evaluate
    from dogi_ml.zns import kmod

    version = kmod.kernel_version(assets["kernel"])
    if kmod.headers_dir(version) is None:
        skip_or_fail_in_ci(f"no kbuild tree for the guest kernel {version} (apt-get install linux-headers-{version})")
    data = {
        "labels": "quantile",
        "features": ["lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv"],
        "sample_every": 3,
        "max_samples": 5000,
        "mu": 10,
    }
    trace = generate("hotcold", capacity_blocks=4096, n_writes=6 * 4096, seed=3, hot_traffic=0.7, hot_fraction=0.05)
    ds = build_dataset(trace, data)
    model, _ = train_and_evaluate(ds, {"name": "mlp", "params": {"epochs": 2}}, seed=0, latency_budget_s=0.005)
    q = quantize_model(model, ds.X[ds.splits["train"]], ds.class_names, ds.feature_names)
    export = tmp_path / "export"
    export.mkdir()
    (export / "dogi_mlp.h").write_text(emit_header(q))
    np.savez(export / "quantized.npz", **q.arrays())
    write_manifest(export, q, model, {"header": "dogi_mlp.h", "arrays": "quantized.npz"}, source={"test": 1})
    X = extreme_features(q.n_features, 48, seed=5, reference=ds.X[ds.splits["test"]])
    ko, exp = kmod.build_from_export(export, X, version, tmp_path / "kbuild")
    # a header that no longer matches its manifest, or rows of another width, are refused
    with pytest.raises(zh.HarnessError, match="feature rows of shape"):
        kmod.build_from_export(export, X[:, :3], version, tmp_path / "kbad")
    tampered = tmp_path / "tampered"
    shutil.copytree(export, tampered)
    (tampered / "dogi_mlp.h").write_text(
        emit_header(q).replace("#define DOGI_N_CLASSES 10", "#define DOGI_N_CLASSES 9")
    )
    with pytest.raises(ValueError, match="corrupted artefact: header file .*modified or truncated"):
        kmod.build_from_export(tampered, X, version, tmp_path / "kbad")
    # ... also when the manifest was rewritten over the altered header (the digests then agree)
    write_manifest(tampered, q, model, {"header": "dogi_mlp.h", "arrays": "quantized.npz"}, source={"test": 1})
    with pytest.raises(zh.HarnessError, match="DOGI_N_CLASSES is 9, the manifest says 10"):
        kmod.build_from_export(tampered, X, version, tmp_path / "kbad")
    run = qemu.run_guest(
        None,
        [("kmod", 'insmod /dogi_kmod.ko; echo "{\\"insmod\\": $?}"; dmesg | grep DOGI-KMOD > /dev/console')],
        extra_files={"/dogi_kmod.ko": (ko.read_bytes(), 0o644)},
        zones=4,
        zone_size_mb=1,
        zone_capacity_mb=1,
        work_dir=tmp_path,
    )
    assert run["results"]["kmod"] == {"insmod": 0}, run["log"][-3000:]
    got = kmod.parse_log(run["log"])
    assert sorted(got) == list(range(len(X))), run["log"][-3000:]
    logits = exp.logits_int(X)  # the Python integer reference, loaded from the verified export
    classes = exp.predict(X)
    for i in range(len(X)):
        assert got[i][0] == classes[i] and got[i][1] == logits[i].tolist(), i
