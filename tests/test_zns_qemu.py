"""The harness on a real zoned device: an NVMe ZNS namespace of a QEMU guest (TCG, Debian's cloud
kernel, busybox initramfs; ``.ci/run`` fetches them, elsewhere this skips with the reason).

One boot: the statically linked harness replays a small trace with SepBIT on ``/dev/nvme0n1``
(zone capacity 256 KiB below a 512 KiB zone size, QEMU's open/active limits), its counts must
equal the Numba simulator's and every live block must read back; then a replay is killed with
SIGKILL at a random point inside the guest (which stays up, so the drive keeps its zone state),
and recovery from the zones' write pointers must find every acknowledged write intact."""

from __future__ import annotations

import random

import pytest

from dogi_ml.pipeline.replay import PARITY_KEYS
from dogi_ml.pipeline.simulate import simulate
from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import harness as zh
from dogi_ml.zns import qemu

CAP, SEG, OP = 4096, 64, 0.25  # SEG = the zone capacity in 4 KiB blocks
ZONES = 96

assets, why = qemu.find_assets()
pytestmark = pytest.mark.skipif(assets is None, reason=f"no QEMU ZNS guest here: {why}")


def test_sepbit_on_a_qemu_zns_namespace_matches_the_simulator_and_survives_a_kill(tmp_path):
    trace = generate("zipf", capacity_blocks=CAP, n_writes=3 * CAP, seed=3, theta=1.0)
    path = write_trace(trace, tmp_path / "t.dtr")
    nseg = zh.segment_count(CAP, OP, SEG)
    args = (
        f"--trace=/trace.dtr --device=/dev/nvme0n1 --capacity={CAP} --policy=sepbit --op-ratio={OP} --segments={nseg}"
    )
    step = 97
    kill_lines = random.Random().randrange((CAP + 1000) // step, (4 * CAP - 500) // step)
    crash = (
        f"/zns_replay {args} --progress={step} > /dev/null 2> /tmp/crash.p & pid=$!; "
        f'while kill -0 $pid 2>/dev/null && [ "$(grep -c ^progress /tmp/crash.p)" -lt {kill_lines} ]; do usleep 10000; done; '
        "kill -9 $pid; wait $pid; "
        'echo "{\\"acked\\": $(grep ^progress /tmp/crash.p | tail -n 1 | cut -d" " -f2), \\"status\\": $?}"'
    )
    commands = [
        ("info", "/zns_replay --device=/dev/nvme0n1 --info"),
        ("sepbit", f"/zns_replay {args} --verify-every=50"),
        ("crash", crash),
        ("recover", f"/zns_replay {args} --recover"),
    ]
    run = qemu.run_guest(
        path.read_bytes(), commands, zones=ZONES, zone_size_mb=0.5, zone_capacity_mb=SEG * 4 / 1024, work_dir=tmp_path
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
    assert r["zone_resets"] == r["reclaimed_segments"] > 0
    assert r["device_write_blocks"] == r["user_writes"] + r["gc_writes"]
    v = r["verify"]
    assert v["ok"] and v["checked"] == CAP and v["lost"] == v["corrupt"] == 0 and v["passes"] > 1

    acked = res["crash"]["acked"]
    assert CAP < acked < CAP + 3 * CAP, res["crash"]  # killed inside the trace, after the prefill
    rec = res["recover"]
    assert rec["recovered_writes"] >= acked
    assert rec["live_lbas"] == CAP and rec["lost"] == rec["corrupt"] == rec["phantom"] == 0
    assert rec["verify"]["ok"] and rec["verify"]["checked"] == CAP
