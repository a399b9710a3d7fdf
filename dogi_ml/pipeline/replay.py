"""The ``replay`` command: a workload replayed onto a zoned device by the C harness
(:mod:`dogi_ml.zns`), with the simulator's placement and GC; prints WAF, device writes, zone
resets, MB/s and the verify result, writes JSON, logs to MLflow, and (``zns.compare_sim``)
checks that the user, GC and reset counts equal the Numba simulator's on the same config.

``mode=bench`` adds fio writing the same device volume sequentially (4 KiB, direct I/O) on
the same backing store; ``mode=recover`` rebuilds the mapping of a device left by an abrupt stop,
checks it against the count of acknowledged writes in the run's acknowledgement journal and
verifies it. ``zns.durability`` (``flush``, every ``zns.flush_every`` writes; ``fua``; ``none``)
decides when a write counts as acknowledged; every result names it.

The exit status tells the truth (:mod:`dogi_ml.zns.exit_codes`): a verify failure, lost writes
found by recovery and counts that differ from the simulator's each end the command with their own
status and a one-line ``error:``, after the JSON and the MLflow run are written.

The learned scheme: ``mode=bundle policy=dogi policy.params.deployed=int8 [bundle=DIR]`` runs
DOGI in the simulator and writes the deployment bundle of its final int8 model and configuration;
``policy=dogi_frozen policy.params.bundle=DIR`` replays with it (the bundle's header compiled
into the harness, build cached on the headers' contents), and the parity check also compares
the learned placement counts. The hybrid's the same way: ``mode=bundle policy=hybrid
policy.params.deployed=int8`` exports it, ``policy=hybrid_frozen`` replays it."""

from __future__ import annotations

import errno
import math
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, checked_setting
from dogi_ml.pipeline.common import require_workload, sweep_dir
from dogi_ml.pipeline.simulate import simulate, write_json
from dogi_ml.policies import configured_victim, policy_class
from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.trace import Trace
from dogi_ml.traces.workload import workload_capacity
from dogi_ml.zns import exit_codes
from dogi_ml.zns import harness as zh

#: the counts a replay must share with the simulator (same trace, policy, victim, geometry)
PARITY_KEYS = ("user_writes", "gc_writes", "reclaimed_segments", "gc_spills")
_UNSUPPORTED = {
    "raid_chunk_blocks": 0,
    "gc_background_free_ratio": None,
    "gc_idle_gap_us": None,
    "gc_free_ratio": None,
    "arrival": None,
}


def trace_file(trace: Trace, cache_dir: str | Path | None) -> Path:
    """The ``.dtr`` file holding ``trace`` (the memory-mapped one it was read from, else a copy
    written under ``cache_dir/zns``)."""
    name = getattr(trace.lba, "filename", None)
    if name and Path(name).suffix == ".dtr" and Path(name).exists():
        return Path(name)
    out = Path(cache_dir or tempfile.gettempdir()) / "zns" / f"{trace.name}-{trace.n_requests}.dtr"
    write_trace(trace, out)
    return out


#: the C harness's fields: zone counts and limits are uint32, the write counts long long
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1


def check_zns(zns: Mapping) -> dict:
    """The ``zns`` settings checked by name, as the harness reads them; each bad value is one line
    naming its key and range. Before this check a negative limit or count reached the C harness's
    unsigned parse and ran as some other number without a word (``max_open=-1``: no limit,
    ``verify_every=-1``: no periodic verify, ``zones=0``: the default), a string an ``int()``
    traceback, and ``verify=abc`` counted as true."""
    zns = dict(zns)
    # the file device's zone count: null = exactly the segments the run needs (replay_args)
    zns["zones"] = checked_setting(
        zns.get("zones"), "zns.zones", minimum=1, maximum=UINT32_MAX, nullable=True, example=64
    )
    # a file device's zone resource limits; 0 = no limit, as the kernel reports a device without one
    for key in ("max_open", "max_active"):
        zns[key] = checked_setting(zns.get(key, 14), f"zns.{key}", minimum=0, maximum=UINT32_MAX, example=14)
    if zns["max_active"] and zns["max_open"] > zns["max_active"]:
        # an open zone is an active one: ZNS (and QEMU) refuse a device whose open limit exceeds its active one
        raise ConfigError(
            f"zns.max_open={zns['max_open']} exceeds zns.max_active={zns['max_active']} (an open zone is also active)",
            f"give zns.max_open <= {zns['max_active']}, or raise zns.max_active",
        )
    # GC passes between verify passes; 0 (or null) = only at the end
    zns["verify_every"] = checked_setting(
        zns.get("verify_every"), "zns.verify_every", minimum=0, maximum=INT64_MAX, nullable=True, example=0
    )
    # writes between the harness's progress reports; 0 = none (an `or` read it as 4096), null = 4096
    zns["progress_every"] = checked_setting(
        zns.get("progress_every"), "zns.progress_every", minimum=0, maximum=INT64_MAX, nullable=True, example=4096
    )
    if zns.get("flush_every") is not None:  # harness_args refuses a float such as 1e6 that names a whole number
        zns["flush_every"] = checked_setting(
            zns["flush_every"], "zns.flush_every", minimum=1, maximum=INT64_MAX, example=zh.FLUSH_EVERY
        )
    for key, default in (("keep", False), ("verify", True), ("compare_sim", True)):
        zns[key] = checked_setting(zns.get(key, default), f"zns.{key}", bool)
    return zns


def check_file_device_size(path: Path, zones: int, zone_blocks: int) -> None:
    """A file device of ``zones`` zones is a sparse file of ``zones x zone_blocks`` 4 KiB blocks;
    sized here first, so that one larger than the file system allows (zns.zones=1e8 on ext4) is
    refused naming the setting, not by the harness's "cannot size FILE: File too large"."""
    size = zones * zone_blocks * 4096
    try:
        with open(path, "ab") as fh:
            fh.truncate(size)  # sparse: no block is written (the harness sizes it again)
    except OSError as exc:
        if exc.errno not in (errno.EFBIG, errno.EINVAL):
            raise
        raise ConfigError(
            f"zns.zones={zones}: a file device of {zones} zones of {zone_blocks} blocks ({size / 2**40:.1f} TiB, "
            f"sparse) is larger than the file system of {path.parent} allows ({exc.strerror})",
            "give fewer zones, or zns.zones=null (exactly the segments the run needs)",
        ) from None


def check_device(device: str) -> None:
    """``file:`` must name a file (``device=file:`` ran the harness on the empty path)."""
    if device.startswith("file:") and not device[5:].strip():
        raise ConfigError(
            "device=file: names no file", "give the emulated device's path, e.g. device=file:/tmp/dev.zns"
        )


def check_sim_config(sim_cfg: Mapping, policy_cfg: Mapping) -> None:
    """The harness runs the free-segment trigger without the chunk layer or background GC, and the
    victim rules of :data:`dogi_ml.zns.harness.VICTIMS` (DOGI frozen: its own)."""
    if sim_cfg.get("gc_trigger", "free_segments") != "free_segments":
        raise ConfigError(
            f"the ZNS harness runs sim.gc_trigger=free_segments, not {sim_cfg.get('gc_trigger')!r}",
            "drop the sim.gc_trigger override",
        )
    for key, off in _UNSUPPORTED.items():
        if sim_cfg.get(key, off) not in (off, 0, None):
            raise ConfigError(f"the ZNS harness does not model sim.{key}={sim_cfg.get(key)!r}", f"set sim.{key}={off}")
    rule, _ = configured_victim(policy_cfg, sim_cfg)
    if policy_class(policy_cfg["name"]).selector is None and rule not in zh.VICTIMS:
        raise ConfigError(
            f"the ZNS harness runs victims {', '.join(zh.VICTIMS)}, not {rule!r}", "set sim.victim to one of them"
        )


def replay_args(trace_path: Path, device: str, capacity: int, policy_cfg: Mapping, sim_cfg: Mapping, zns: Mapping):
    """(harness arguments, segment blocks) for one run; a file device is (re)created to fit."""
    seg = int(sim_cfg.get("segment_blocks", 512))
    op = float(sim_cfg.get("op_ratio", 0.10))
    create = None
    if device.startswith("file:"):
        path = Path(device[5:])
        if zns.get("keep") and Path(f"{path}.zones").exists():
            seg = int(zh.device_info(device)["zone_capacity_blocks"])
        else:
            need = zh.segment_count(capacity, op, seg)
            zones = need if zns.get("zones") is None else zns["zones"]
            if zones < need:  # the harness's own message names no setting
                raise ConfigError(
                    f"zns.zones={zones} is fewer than the {need} zones the run needs (capacity {capacity} blocks "
                    f"x (1 + sim.op_ratio={op}) / sim.segment_blocks={seg})",
                    f"give zns.zones >= {need}, or null (exactly that)",
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            if zns.get("zones") is not None:
                check_file_device_size(path, zones, zh.file_zone_blocks(seg))
            create = (zones, zh.file_zone_blocks(seg), seg, zns.get("max_open", 14), zns.get("max_active", 14))
            check_zone_limits(policy_cfg, create[3], create[4])
    else:
        info = zh.device_info(device)
        seg = int(info["zone_capacity_blocks"])  # zones are the segments: the device decides
    args = zh.harness_args(
        trace_path,
        device,
        capacity=capacity,
        create=create,
        progress_every=4096 if zns.get("progress_every") is None else int(zns["progress_every"]),
        **_run_options(policy_cfg, sim_cfg, zns),
    )
    return args, seg


def check_zone_limits(policy_cfg: Mapping, max_open: int, max_active: int) -> None:
    """A file device made with fewer open (or active) zones than the scheme keeps open, one per
    group, is refused naming the zns setting: the harness's own message ("too few zones for the
    groups ... the device allows") names none. 0 is no limit, as in the harness."""
    groups = policy_cfg.get("n_groups")
    if groups is None:
        return
    limits = [(key, value) for key, value in (("max_open", max_open), ("max_active", max_active)) if value]
    for key, value in limits:
        if int(value) < int(groups):
            raise ConfigError(
                f"zns.{key}={value} is below the {groups} zones policy={policy_cfg['name']} keeps open (one per group)",
                f"give zns.{key} >= {groups} (or 0: no limit), or a scheme with fewer groups",
            )


def _run_options(policy_cfg: Mapping, sim_cfg: Mapping, zns: Mapping) -> dict:
    """The harness options the policy, sim and zns configs decide, on the host and in the guest alike."""
    params = policy_cfg.get("params") or {}
    return {
        "policy": policy_cfg["name"],
        "victim": configured_victim(policy_cfg, sim_cfg)[0],
        "op_ratio": float(sim_cfg.get("op_ratio", 0.10)),
        "gc_free_segments": int(sim_cfg.get("gc_free_segments", 2)),
        "gc_high_free_segments": sim_cfg.get("gc_high_free_segments"),
        "prefill": bool(sim_cfg.get("prefill", True)),
        "verify": bool(zns.get("verify", True)),
        "verify_every": int(zns.get("verify_every") or 0),
        "variant": str(params.get("variant", "code")),
        "durability": str(zns.get("durability") or "flush"),
        "flush_every": zns.get("flush_every") if zns.get("flush_every") is not None else zh.FLUSH_EVERY,
        "journal": zns.get("journal"),
    }


#: the learned schemes the harness runs, by the scheme of the bundle each deploys
LEARNED_POLICIES = {"dogi_frozen": "dogi", "hybrid_frozen": "hybrid"}


def learned_headers(policy_cfg: Mapping) -> dict | None:
    """The learned scheme's headers to compile into the harness (``policy=dogi_frozen`` or
    ``hybrid_frozen``: its bundle's model header and frozen configuration, checked against the
    bundle's manifest); ``None`` for the other policies."""
    name = policy_cfg.get("name")
    if name not in LEARNED_POLICIES:
        return None
    from dogi_ml.policies._dogi_bundle import load_bundle, write_command

    scheme = LEARNED_POLICIES[name]
    bundle_dir = (policy_cfg.get("params") or {}).get("bundle")
    if not bundle_dir:
        raise ConfigError(
            f"policy={name} needs its deployment bundle",
            f"add policy.params.bundle=DIR (write one with: {write_command(scheme)})",
        )
    b = load_bundle(bundle_dir, scheme)
    return {name: b.path(role) for name, role in zh.LEARNED_HEADERS.items()}


def _set_on_command_line(key: str) -> bool:
    """Whether this command line's overrides set ``key`` (False outside a Hydra run)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return False
        return any(o.split("=", 1)[0].lstrip("+~") == key for o in HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - no Hydra run: no command line to read
        return False


def check_device_segments(seg: int, sim_cfg: Mapping, device: str) -> None:
    """A kept file device's or a real device's zones are the segments: a ``sim.segment_blocks``
    the user set that differs is refused (it was replaced without a word); the default, which
    nobody chose, gives way with a note."""
    configured = int(sim_cfg.get("segment_blocks", 512))
    if configured == seg:
        return
    kept = device.startswith("file:")
    why = "the kept file device's zones hold" if kept else "the device's zones hold"
    if _set_on_command_line("sim.segment_blocks"):
        raise ConfigError(
            f"sim.segment_blocks={configured}, but {why} {seg} blocks (zones are the segments)",
            f"give sim.segment_blocks={seg}" + (", or drop zns.keep to recreate the file device" if kept else ""),
        )
    print(f"note: segments are {device}'s zones: {seg} blocks (not sim.segment_blocks={configured})", file=sys.stderr)


def replay(
    trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, device: str, zns: Mapping, progress=True, cache_dir=None
):
    """Replay ``trace`` onto ``device``; the harness's result (plus the simulator's counts and
    a parity verdict with ``zns.compare_sim``)."""
    check_sim_config(sim_cfg, policy_cfg)
    check_device(device)
    zns = check_zns(zns)
    capacity = int(sim_cfg.get("capacity_blocks") or workload_capacity(trace))
    path = trace_file(trace, cache_dir)
    mode = zns.get("mode", "replay")
    if mode == "recover":
        zns = {**zns, "keep": True}  # the device as the stop left it: never recreate it
    exe = zh.build(learned=learned_headers(policy_cfg))
    args, seg = replay_args(path, device, capacity, policy_cfg, sim_cfg, zns)
    check_device_segments(seg, sim_cfg, device)
    if mode == "recover":
        args = [a for a in args if not a.startswith(("--create", "--progress"))] + ["--recover"]
        return zh.run(args, exe)
    from dogi_ml.progress import bar, enabled

    total = (capacity if sim_cfg.get("prefill", True) else 0) + int(trace.block_writes.size)
    with bar(total, f"replay {policy_cfg['name']}", "blk", requested=progress, unit_scale=True) as pbar:
        seen = [0]

        def tick(done, _total):
            pbar.update(done - seen[0])
            seen[0] = done

        result = zh.run(args, exe, progress=tick if enabled(progress) else None)
    result["workload"] = trace.name
    if zns.get("compare_sim", True):
        sim_cfg = {**sim_cfg, "segment_blocks": seg, "capacity_blocks": capacity}
        compare_with_simulator(result, simulate(trace, policy_cfg, sim_cfg, progress=False))
    return result


def compare_with_simulator(result: dict, sim: dict) -> None:
    """``result["simulator"]`` and ``result["parity"]``: the counts the harness shares with the
    simulator's run ``sim``, and for the learned scheme its placement counts too (hot writes,
    writes per predicted category, Frozen-Filter GC writes, expired victims)."""
    keys = PARITY_KEYS + (("learned",) if result.get("learned") is not None or "learned" in sim else ())
    result["simulator"] = {k: sim.get(k) for k in (*keys, "waf", "physical_segments")}
    mismatch = {k: (result.get(k), sim.get(k)) for k in keys if result.get(k) != sim.get(k)}
    result["parity"] = {"ok": not mismatch, "mismatch": mismatch}


def export_dogi_bundle(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, out: Path, progress=False) -> dict:
    """``mode=bundle``: run DOGI (``policy=dogi``, ``model.deployed=int8``) over the workload and
    write the deployment bundle of its final model and configuration to ``out``
    (:func:`dogi_ml.policies.dogi_frozen.export_bundle`), for ``policy=dogi_frozen``; or the
    hybrid (``policy=hybrid``, ``deployed=int8``: the hybrid runs its float model, whose final
    state is quantised at the end, :func:`dogi_ml.policies.hybrid_frozen.export_bundle`), for
    ``policy=hybrid_frozen``."""
    from dogi_ml.pipeline.simulate import build_simulator

    name = policy_cfg.get("name")
    params = dict(policy_cfg.get("params") or {})
    if name not in ("dogi", "hybrid") or params.get("deployed") != "int8":
        raise ConfigError(
            "mode=bundle exports the deployed int8 model of a DOGI run (or of a hybrid run)",
            "use policy=dogi (or policy=hybrid) policy.params.deployed=int8",
        )
    if name == "hybrid":
        # the hybrid's planner reads its float model's probabilities (it refuses deployed=int8 in
        # the loop): deployed=int8 asks for the int8 export of its final model
        from dogi_ml.policies.hybrid_frozen import export_bundle

        params.pop("deployed")
        policy_cfg = {**policy_cfg, "params": params}
    else:
        from dogi_ml.policies.dogi_frozen import export_bundle
    sim, writes = build_simulator(trace, policy_cfg, sim_cfg)
    if sim.timed:
        raise ConfigError(
            "mode=bundle runs DOGI without the chunk layer or background GC",
            "leave sim.raid_chunk_blocks=0 and sim.gc_background_free_ratio=null (the defaults)",
        )
    from dogi_ml.progress import bar, enabled

    sim.prefill()
    with bar(writes.size, f"{name} (bundle)", "blk", requested=progress, unit_scale=True) as pbar:
        sim.feed(writes, progress=pbar.update if enabled(progress) else None)
    r = sim.result()
    source = {"workload": trace.name, "waf": r["waf"], "user_writes": r["user_writes"], "retrains": r["retrains"]}
    if name == "hybrid":
        path = export_bundle(sim.policy, out, trace=trace, source=source)
    else:
        path = export_bundle(sim.policy, out, source=source)
    keep = ("waf", "retrains", "configuration", "hot_threshold", "mode")
    return {"bundle": str(path), "scheme": name, **{k: r[k] for k in keep}, "mu": r["hot_threshold"]}


def replay_in_guest(trace: Trace, policy_cfg: Mapping, sim_cfg: Mapping, zns: Mapping, cache_dir=None) -> dict:
    """``device=qemu``: the replay on the NVMe ZNS namespace of a QEMU guest sized to the run
    (zone capacity = ``sim.segment_blocks``, zone size twice that, the segments plus 8 zones);
    with ``mode=bench`` fio then writes the same volume there."""
    from dogi_ml.zns import qemu

    check_sim_config(sim_cfg, policy_cfg)
    zns = check_zns(zns)
    capacity = int(sim_cfg.get("capacity_blocks") or workload_capacity(trace))
    seg = int(sim_cfg.get("segment_blocks", 512))
    op = float(sim_cfg.get("op_ratio", 0.10))
    nseg = zh.segment_count(capacity, op, seg)
    path = trace_file(trace, cache_dir)
    args = zh.harness_args(
        "/trace.dtr", "/dev/nvme0n1", capacity=capacity, segments=nseg, **_run_options(policy_cfg, sim_cfg, zns)
    )  # the journal: ./nvme0n1.journal in the guest's root (it stays up for the run only)
    geometry = {"zones": nseg + 8, "zone_mb": 2 * seg / 256, "cap_mb": seg / 256}
    if zns.get("mode") == "bench":
        # fio writes the replay's whole device volume in one pass: zones enough for WAF <= 8
        # (the backing file is sparse; the replay uses the first nseg zones only)
        total = (capacity if sim_cfg.get("prefill", True) else 0) + int(trace.block_writes.size)
        geometry["zones"] = max(nseg + 8, math.ceil(8 * total / seg) + 1)
        bench = qemu.guest_bench(path, args, **geometry, learned=learned_headers(policy_cfg))
        result = bench.pop("replay")
        result["bench"] = {
            "fio_mb_s": bench["fio"]["mb_s"],
            "replay_user_mb_s": result["user_mb_s"],
            "replay_device_mb_s": result["device_mb_s"],
            "device_over_fio": bench["device_over_fio"],
            "user_over_fio": bench["user_over_fio"],
            "fio": bench["fio"],
        }
    else:
        run = qemu.run_guest(
            path.read_bytes(),
            [("replay", "/zns_replay " + " ".join(args))],
            zones=geometry["zones"],
            zone_size_mb=geometry["zone_mb"],
            zone_capacity_mb=geometry["cap_mb"],
            memory_mb=1024,
            learned=learned_headers(policy_cfg),
        )
        result = run["results"].get("replay")
        if not result:
            raise zh.HarnessError(f"the guest printed no result:\n{run['log'][-3000:]}")
        result["exit_status"] = run["exit_statuses"].get("replay")
    result["device"] = "qemu:/dev/nvme0n1"
    result["workload"] = trace.name
    if zns.get("compare_sim", True):
        compare_with_simulator(
            result, simulate(trace, policy_cfg, {**sim_cfg, "capacity_blocks": capacity}, progress=False)
        )
    return result


def print_summary(r: dict) -> None:
    if r.get("mode") == "recover":
        j = r["journal"]
        print(
            f"recover {r['device']}: journal {j['path']} {j['status']}"
            + (f" ({j['detail']})" if j["detail"] else "")
            + f", durability {r['durability']}\n"
            f"  {r['acknowledged_writes']} writes acknowledged, {r['live_lbas']} live LBAs: {r['intact_lbas']} intact, "
            f"lost {r['lost']}"
            + (f" (newest lost: write {r['newest_lost_seq']})" if r["lost"] else "")
            + f", corrupt {r['corrupt']}, phantom {r['phantom']}, foreign {r['foreign']}; "
            f"{r['unacknowledged_found']} LBAs hold a write issued after the last acknowledgement; "
            f"verify {'ok' if r['verify']['ok'] else 'FAILED'}; {'ok' if r['ok'] else 'NOT OK'}"
        )
        return
    v = r["verify"]
    lines = [
        f"replay {r['policy']} / {r['victim']} on {r['device']} ({r['backend']}, direct I/O {r['direct_io']})",
        f"  WAF            {r['waf']:.4f}",
        f"  user writes    {r['user_writes']}",
        f"  GC writes      {r['gc_writes']}",
        f"  device writes  {r['device_write_blocks']} blocks ({r['device_write_blocks'] * 4096 / 2**20:.1f} MiB)",
        f"  zone resets    {r['zone_resets']}",
        f"  MB/s           user {r['user_mb_s']:.1f}, device {r['device_mb_s']:.1f}",
        f"  durability     {r['durability']}"
        + (
            f" (a device flush every {r['flush_every']} user writes and at every zone filled: "
            f"{r['device_flushes']} flushes, {r['durability_s']:.2f} s of {r['elapsed_s']:.2f} s in them and the "
            f"journal's syncs; {r['acknowledged_writes']} writes acknowledged)"
            if r["durability"] == "flush"
            else f" (every write with FUA; {r['acknowledged_writes']} writes acknowledged)"
            if r["durability"] == "fua"
            else " -- NOTHING WAS MADE DURABLE: a power loss may lose any write"
        ),
        f"  verify         {'ok' if v['ok'] else 'FAILED'} ({v['checked']} live LBAs read back, "
        f"{v['lost']} lost, {v['corrupt']} corrupt, {v['passes']} passes)",
    ]
    if r.get("learned"):
        ln = r["learned"]
        lines.append(
            f"  learned        {ln['hot_writes']} hot writes, per predicted category {ln['class_writes']}, "
            f"{ln['frozen_gc_writes']} Frozen-Filter GC writes, {ln['expired_victims']} expired victims"
            + (f", {ln['table_gc_writes']} GC writes by the relocation table" if "table_gc_writes" in ln else "")
        )
    if "parity" in r:
        p = r["parity"]
        lines.append("  simulator      " + ("counts equal" if p["ok"] else f"MISMATCH {p['mismatch']}"))
    if "bench" in r:
        b = r["bench"]
        ratio = b["device_over_fio"]
        lines.append(
            f"  fio seq write  {b['fio_mb_s']:.1f} MB/s; replay device/fio {ratio:.2f}, user/fio {b['user_over_fio']:.2f}"
            if ratio
            else "  fio: no figure"
        )
    print("\n".join(lines))


def run_replay(cfg, out_dir: Path) -> float:
    """The ``replay`` command; returns the WAF."""
    from omegaconf import OmegaConf

    from dogi_ml.traces.workload import load_workload

    require_workload(cfg)
    device = cfg.get("device")
    zns = OmegaConf.to_container(cfg.zns, resolve=True)
    zns["mode"] = cfg.get("mode", "replay")
    if zns["mode"] not in ("replay", "bench", "recover", "bundle"):
        raise ConfigError(
            f"unknown replay mode {zns['mode']!r}", "use mode=replay, mode=bench, mode=recover or mode=bundle"
        )
    zns = check_zns(zns)  # before the workload is read: a bad setting fails at once
    if device:
        check_device(str(device))
    if zns["mode"] == "bundle":
        trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
        where = Path(cfg.get("bundle") or out_dir / "bundle")
        r = export_dogi_bundle(
            trace,
            OmegaConf.to_container(cfg.policy, resolve=True),
            OmegaConf.to_container(cfg.sim, resolve=True),
            where,
            progress=cfg.progress,
        )
        label = {"dogi": "DOGI", "hybrid": "hybrid"}[r["scheme"]]
        print(
            f"{label} deployment bundle: {r['bundle']}\n  from a {label} run on {trace.name}: WAF {r['waf']:.4f}, "
            f"{r['retrains']} retrainings, configuration {r['configuration']}, mu {r['mu']}\n"
            f"  replay it: python -m dogi_ml replay +workload=NAME policy={r['scheme']}_frozen "
            f"policy.params.bundle={r['bundle']} device=file:PATH"
        )
        return float(r["waf"])
    tmpdir = None
    if not device:
        if zns["mode"] != "bench":
            raise ConfigError(
                "no device given",
                "add device=file:PATH (file-emulated zoned device), device=/dev/nvmeXnY (ZNS) or device=qemu "
                "(the ZNS namespace of a QEMU guest)",
            )
        tmpdir = tempfile.mkdtemp(prefix="dogi_zns_", dir=out_dir)
        device = f"file:{tmpdir}/dev.zns"
    try:
        return _run(cfg, out_dir, zns, str(device))
    except zh.HarnessError as exc:
        if exc.exit_status in (None, exit_codes.USAGE):
            raise  # the command line's one-line error, exit status 2
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        raise SystemExit(exc.exit_status if exc.exit_status > 0 else exit_codes.INTERNAL) from None
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _run(cfg, out_dir: Path, zns: dict, device: str) -> float:
    """The replay, recovery or bench on ``device``: JSON, summary, MLflow, then the exit status."""
    from omegaconf import OmegaConf

    from dogi_ml.traces.workload import load_workload

    trace = load_workload(cfg.workload, cache_dir=cfg.cache_dir)
    policy_cfg = OmegaConf.to_container(cfg.policy, resolve=True)
    sim_cfg = OmegaConf.to_container(cfg.sim, resolve=True)
    if device == "qemu":
        if zns["mode"] == "recover":
            raise ConfigError("mode=recover runs on a file or block device", "use device=file:PATH or /dev/...")
        result = replay_in_guest(trace, policy_cfg, sim_cfg, zns, cache_dir=cfg.cache_dir)
    else:
        result = replay(trace, policy_cfg, sim_cfg, device, zns, progress=cfg.progress, cache_dir=cfg.cache_dir)
    if zns["mode"] == "bench" and device != "qemu":
        from dogi_ml.zns.bench import compare, fio_sequential

        where = Path(device[5:]).parent if device.startswith("file:") else Path(device)
        fio = fio_sequential(where, result["device_write_blocks"] * 4096, zoned=not device.startswith("file:"))
        result["bench"] = {**compare(result, fio), "fio": fio}
    result["workload_config"] = OmegaConf.to_container(cfg.workload, resolve=True)
    out = Path(cfg.output) if cfg.get("output") else out_dir / "replay.json"
    write_json(result, out)
    print_summary(result)
    print(f"result: {out}")
    if cfg.get("mlflow", True):
        _log(cfg, result, out)
    status, message = verdict(result)
    if status != exit_codes.OK:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(status)
    waf = result.get("waf")
    return float(waf) if isinstance(waf, (int, float)) and math.isfinite(waf) else float("nan")


def verdict(result: dict) -> tuple[int, str]:
    """(exit status, one line) of a replay or recovery result: lost writes
    (:data:`~dogi_ml.zns.exit_codes.LOST_WRITES`), a verify failure
    (:data:`~dogi_ml.zns.exit_codes.VERIFY`), counts that differ from the simulator's
    (:data:`~dogi_ml.zns.exit_codes.PARITY`), else OK."""
    if result.get("mode") == "recover":
        if result.get("ok"):
            return exit_codes.OK, ""
        j = result["journal"]
        why = (
            f"the acknowledgement journal {j['path']} is {j['status']} ({j['detail']})"
            if j["status"] != "ok"
            else f"{result['lost']} of {result['live_lbas']} acknowledged LBAs lost "
            f"(newest acknowledged write lost: {result['newest_lost_seq']}), {result['corrupt']} corrupt, "
            f"{result['phantom']} phantom, {result['foreign']} foreign blocks"
        )
        return exit_codes.LOST_WRITES, f"recovery of {result['device']}: {why} -- see the result JSON"
    v = result.get("verify") or {}
    if v and not v.get("ok") and v.get("passes", 1):
        return exit_codes.VERIFY, (
            f"verify FAILED on {result.get('device')}: {v.get('lost')} lost and {v.get('corrupt')} corrupt of "
            f"{v.get('mapped')} live LBAs ({v.get('failed_passes')} of {v.get('passes')} passes failed) -- the "
            "device does not hold what was written; see the result JSON"
        )
    parity = result.get("parity")
    if parity is not None and not parity.get("ok"):
        return exit_codes.PARITY, (
            f"the replay's counts differ from the simulator's: {parity['mismatch']} (replay, simulator) -- the "
            "harness and the simulator no longer run the same placement and GC"
        )
    return exit_codes.OK, ""


def _log(cfg, result: dict, out: Path) -> None:
    from omegaconf import OmegaConf

    from dogi_ml.tracking import flatten, mlflow_run

    policy = result.get("policy", cfg.policy.name)
    tags = {
        "workload": str(result.get("workload")),
        "policy": str(policy),
        "command": "replay",
        "backend": str(result.get("backend")),
        "mode": str(result.get("mode")),
        "durability": str(result.get("durability")),
    }
    with mlflow_run("replay", f"{policy} on {result.get('workload')} (zns)", sweep_dir=sweep_dir(), tags=tags) as (
        mlflow,
        _,
    ):
        params = {
            k: v
            for k, v in flatten(OmegaConf.to_container(cfg, resolve=True)).items()
            if k.split(".")[0] in ("policy", "sim", "workload", "zns", "device", "mode")
        }
        mlflow.log_params({k: (str(v)[:500] if v is not None else "null") for k, v in params.items()})
        flat = flatten({k: v for k, v in result.items() if k not in ("workload_config",)})
        metrics = {k: float(v) for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        metrics.update({k: float(v) for k, v in flat.items() if isinstance(v, bool)})
        mlflow.log_metrics({k.replace("[", "_").replace("]", ""): v for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_artifact(str(out))
