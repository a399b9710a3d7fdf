"""Replay on a real NVMe ZNS namespace: a small Linux guest under QEMU (TCG), Debian's cloud
kernel (zoned block devices and NVMe built in), a busybox initramfs holding the statically linked
harness and the trace (see ``../shared/notes/zns-qemu.md``). The guest prints one JSON line per
run on the serial console and ends through ``isa-debug-exit``.

Assets: ``qemu-system-x86_64`` on PATH, the kernel and busybox unpacked (``apt-get download`` +
``dpkg-deb -x``, never installed) under ``$DOGI_ML_ZNS_ASSETS`` (default
``~/.cache/dogi_ml/zns/root``); ``.ci/run`` fetches them."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import harness as zh

#: one line per guest command: ``ZNS-JSON <name> <json>``, then ``ZNS-RC <name> <exit status>``
MARK = "ZNS-JSON"
RC_MARK = "ZNS-RC"


def asset_dir() -> Path:
    root = os.environ.get("DOGI_ML_ZNS_ASSETS")
    return Path(root) if root else Path.home() / ".cache" / "dogi_ml" / "zns" / "root"


def find_assets() -> tuple[dict | None, str]:
    """``({qemu, kernel, busybox}, "")`` or ``(None, why not)``."""
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        return None, "qemu-system-x86_64 is not installed (apt-get install --no-install-recommends qemu-system-x86)"
    root = asset_dir()
    kernels = sorted((root / "boot").glob("vmlinuz-*-cloud-amd64"))
    if not kernels:
        return None, f"no cloud kernel under {root}/boot (apt-get download linux-image-<ver>-cloud-amd64; dpkg-deb -x)"
    busybox = root / "bin" / "busybox"
    if not busybox.exists():
        return None, f"no busybox under {root}/bin (apt-get download busybox-static; dpkg-deb -x)"
    return {"qemu": qemu, "kernel": str(kernels[-1]), "busybox": str(busybox)}, ""


def _newc(entries) -> bytes:
    """A cpio archive in the kernel's ``newc`` format: (name, mode, data, rdev) entries."""
    out = io.BytesIO()

    def pad(n):
        out.write(b"\0" * ((4 - n % 4) % 4))

    for ino, (name, mode, data, rdev) in enumerate([*entries, ("TRAILER!!!", 0, b"", (0, 0))], start=1):
        nm = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nm), 0]
        hdr = b"070701" + b"".join(f"{f:08X}".encode() for f in fields)
        out.write(hdr + nm)
        pad(len(hdr) + len(nm))
        out.write(data)
        pad(len(data))
    return out.getvalue()


def build_initramfs(busybox: str, files: dict[str, tuple[bytes, int]], init: str, out: Path) -> Path:
    """A gzip'd newc initramfs: busybox, ``files`` ({guest path: (bytes, mode)}), ``/init``."""
    dirs = {"bin", "dev", "proc", "sys", "tmp", "sbin", "usr", "usr/bin", "usr/sbin"}
    for path in files:  # parent directories of every file (shared libraries' included)
        parts = path.strip("/").split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    entries = [(d, 0o040755, b"", (0, 0)) for d in sorted(dirs)]
    entries.append(("dev/console", 0o020600, b"", (5, 1)))  # stdio of /init before devtmpfs
    entries.append(("bin/busybox", 0o100755, Path(busybox).read_bytes(), (0, 0)))
    entries.append(("bin/sh", 0o120777, b"busybox", (0, 0)))
    for path, (data, mode) in files.items():
        entries.append((path.lstrip("/"), 0o100000 | mode, data, (0, 0)))
    entries.append(("init", 0o100755, init.encode(), (0, 0)))
    out.write_bytes(gzip.compress(_newc(entries), compresslevel=1))
    return out


def build_guest_tools(out_dir: Path, learned: dict | None = None) -> dict[str, Path]:
    """The statically linked harness (with ``learned``: the learned scheme's headers compiled
    in, :func:`dogi_ml.zns.harness.build`) and ``qexit``."""
    exe = zh.build(static=True, out_dir=out_dir, learned=learned)
    qexit = out_dir / "qexit"
    if not qexit.exists():
        cc = zh.find_cc()
        proc = subprocess.run(
            [cc, "-O2", "-static", str(zh.source_dir() / "qexit.c"), "-o", str(qexit)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise zh.HarnessError(f"compiling qexit failed: {proc.stderr.strip()}", "check gcc and glibc's static libc")
    return {"harness": exe, "qexit": qexit}


def guest_script(commands: list[tuple[str, str]], scheduler: str = "mq-deadline") -> str:
    """``/init``: mount, pick the zoned device's scheduler, run each ``(name, shell command)``
    printing ``ZNS-JSON name <its last stdout line>`` and ``ZNS-RC name <its exit status>``, then
    exit QEMU with status 0."""
    lines = [
        "#!/bin/sh",
        "/bin/busybox --install -s /bin",
        "mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev",
        f"echo {scheduler} > /sys/block/nvme0n1/queue/scheduler 2>/dev/null",
        "echo ZNS-GUEST-UP zoned=$(cat /sys/block/nvme0n1/queue/zoned) "
        'sched="$(cat /sys/block/nvme0n1/queue/scheduler)"',
    ]
    for name, cmd in commands:
        lines += [
            f"( {cmd} ) > /tmp/{name}.out 2> /tmp/{name}.err",
            f'echo "{RC_MARK} {name} $?"',
            f'echo "{MARK} {name} $(grep "^{{" /tmp/{name}.out | tail -n 1)"',
            f'grep -v "^progress" /tmp/{name}.err | tail -n 5 | sed "s/^/[{name}] /"',
        ]
    lines += ["/qexit 0", "poweroff -f"]
    return "\n".join(lines) + "\n"


def boot(
    assets: dict,
    initramfs: Path,
    disk: Path,
    *,
    zone_size: str,
    zone_capacity: str,
    max_open: int = 14,
    max_active: int = 14,
    memory_mb: int = 512,
    timeout: float = 240,
) -> tuple[int, str]:
    """Boot the guest with ``disk`` as a zoned NVMe namespace; (QEMU exit status, serial log)."""
    cmd = [
        assets["qemu"],
        "-accel", "tcg", "-cpu", "max", "-m", str(memory_mb), "-smp", "2",
        "-nographic", "-no-reboot",
        "-kernel", assets["kernel"], "-initrd", str(initramfs),
        "-append", "console=ttyS0 quiet panic=-1 rdinit=/init",
        "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-device", "nvme,id=nvme0,serial=deadbeef,zoned.zasl=5",
        "-drive", f"file={disk},id=zns,format=raw,if=none",
        "-device",
        f"nvme-ns,drive=zns,bus=nvme0,nsid=1,logical_block_size=4096,physical_block_size=4096,zoned=true,"
        f"zoned.zone_size={zone_size},zoned.zone_capacity={zone_capacity},"
        f"zoned.max_open={max_open},zoned.max_active={max_active}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return proc.returncode, proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")


def parse_results(log: str) -> dict[str, dict | None]:
    """``{name: the guest command's JSON (None if it printed none)}`` from a serial log."""
    out: dict[str, dict | None] = {}
    for line in log.splitlines():
        line = line.strip()
        if line.startswith(MARK + " "):
            _, name, *rest = line.split(" ", 2)
            text = rest[0] if rest else ""
            try:
                out[name] = json.loads(text) if text.startswith("{") else None
            except json.JSONDecodeError:
                out[name] = None
    return out


def parse_exit_statuses(log: str) -> dict[str, int]:
    """``{name: the guest command's exit status}`` from a serial log."""
    out = {}
    for line in log.splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3 and parts[0] == RC_MARK and parts[2].isdigit():
            out[parts[1]] = int(parts[2])
    return out


def run_guest(
    trace_bytes: bytes | None,
    commands: list[tuple[str, str]],
    *,
    extra_files: dict[str, tuple[bytes, int]] | None = None,
    zones: int,
    zone_size_mb: float,
    zone_capacity_mb: float,
    work_dir: str | Path | None = None,
    timeout: float = 240,
    memory_mb: int = 512,
    learned: dict | None = None,
) -> dict:
    """Boot a guest whose ``/trace.dtr`` is ``trace_bytes`` (and ``extra_files``: {guest path:
    (bytes, mode)}), run ``commands`` (they may use ``/zns_replay`` and ``/dev/nvme0n1``);
    ``{exit_status, results, exit_statuses, log}``. ``learned``: the harness is built with the learned
    scheme's headers (``policy=dogi_frozen``)."""
    assets, why = find_assets()
    if assets is None:
        raise zh.HarnessError(f"cannot boot the ZNS guest: {why}", "run .ci/run (it installs and unpacks them)")
    own = work_dir is None  # a temporary directory of ours: removed afterwards (the disk image is large)
    work = Path(work_dir or tempfile.mkdtemp(prefix="dogi_zns_qemu_"))
    try:
        tools = build_guest_tools(zh.build_dir(), learned)
        files = {
            "/zns_replay": (tools["harness"].read_bytes(), 0o755),
            "/qexit": (tools["qexit"].read_bytes(), 0o755),
        }
        if trace_bytes is not None:
            files["/trace.dtr"] = (trace_bytes, 0o644)
        files.update(extra_files or {})
        initramfs = build_initramfs(assets["busybox"], files, guest_script(commands), work / "initramfs.gz")
        disk = work / "zns.raw"
        zone_bytes = int(zone_size_mb * 2**20)
        with open(disk, "wb") as fh:
            fh.truncate(zones * zone_bytes)  # sparse
        rc, log = boot(
            assets,
            initramfs,
            disk,
            zone_size=f"{int(zone_size_mb * 1024)}K",
            zone_capacity=f"{int(zone_capacity_mb * 1024)}K",
            timeout=timeout,
            memory_mb=memory_mb,
        )
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return {"exit_status": rc, "results": parse_results(log), "exit_statuses": parse_exit_statuses(log), "log": log}


def host_program_files(program: str) -> dict[str, tuple[bytes, int]]:
    """A dynamically linked host program and every shared library it loads (per ``ldd``), as
    initramfs files: Debian's fio runs unchanged in the guest, whose kernel is Debian's too."""
    path = shutil.which(program)
    if path is None:
        raise zh.HarnessError(f"{program} is not installed", f"apt-get install --no-install-recommends {program}")
    files = {f"/bin/{program}": (Path(path).read_bytes(), 0o755)}
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        lib = parts[2] if "=>" in parts and len(parts) > 2 and parts[2].startswith("/") else parts[0]
        if lib.startswith("/"):
            files[lib] = (Path(lib).resolve().read_bytes(), 0o755)
    return files


def guest_bench(
    trace_path: str | Path,
    harness_args: list[str],
    *,
    zones: int,
    zone_mb: float,
    cap_mb: float,
    fio_bytes: int | None = None,
    timeout: float = 900,
    learned: dict | None = None,
) -> dict:
    """The replay in the guest on the ZNS namespace, then fio writing the same device volume
    sequentially there (4 KiB, direct I/O, ``zonemode=zbd``, after a reset of every zone):
    ``{replay, fio, device_over_fio, user_over_fio}``. ``harness_args`` name ``/trace.dtr`` and
    ``/dev/nvme0n1``."""
    replay_cmd = "/zns_replay " + " ".join(harness_args)
    # fio's volume is the replay's device writes, read from its JSON in the guest
    cap_blocks = int(cap_mb * 256)
    zone_bytes = int(zone_mb * 2**20)
    fio_cmd = (
        "/zns_replay --device=/dev/nvme0n1 --reset-all > /dev/null; "
        "n=$(grep -o 'device_write_blocks.: [0-9]*' /tmp/replay.out | grep -o '[0-9]*$'); "
        # no volume (the replay failed): no fio either, or it would write the whole device
        '[ -n "$n" ] || { echo "skipped: the replay wrote nothing" >&2; exit 0; }; '
        f"z=$(( (n + {cap_blocks - 1}) / {cap_blocks} )); "
        "fio --name=seq --filename=/dev/nvme0n1 --rw=write --bs=4k --direct=1 --ioengine=psync --iodepth=1 "
        f"--zonemode=zbd --size=$((z * {zone_bytes})) --io_size=$((n * 4096)) --output-format=json | tr -d '\\n'; echo"
    )
    extra = host_program_files("fio")
    run = run_guest(
        Path(trace_path).read_bytes(),
        [("replay", replay_cmd), ("fio", fio_cmd)],
        extra_files=extra,
        zones=zones,
        zone_size_mb=zone_mb,
        zone_capacity_mb=cap_mb,
        timeout=timeout,
        memory_mb=1536,
        learned=learned,
    )
    replay = run["results"].get("replay")
    fio = run["results"].get("fio")
    if not replay or not fio:
        errors = [ln for ln in run["log"].splitlines() if "error" in ln.lower()]
        raise zh.HarnessError(
            "the guest bench printed no result"
            + ("; the guest said:\n" + "\n".join(errors[-20:]) if errors else f"; the log ends:\n{run['log'][-3000:]}"),
            "run the same replay on the host (device=file:PATH) to see its error, e.g. too little OP for the groups",
        )
    job = fio["jobs"][0]["write"]
    fio_mb_s = job["io_bytes"] / 2**20 / (job["runtime"] / 1000.0) if job["runtime"] else None
    return {
        "replay": replay,
        "fio": {"mb_s": fio_mb_s, "bytes": job["io_bytes"], "seconds": job["runtime"] / 1000.0},
        "device_over_fio": replay["device_mb_s"] / fio_mb_s if fio_mb_s else None,
        "user_over_fio": replay["user_mb_s"] / fio_mb_s if fio_mb_s else None,
    }
