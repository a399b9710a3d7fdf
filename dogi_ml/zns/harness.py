"""Build and run the C replay harness (``zns_replay.c``, ``zdev.c``): the system compiler,
cached by the sources' content; a run is a subprocess whose last stdout line is its JSON."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from dogi_ml.errors import DogiMLError

from . import exit_codes

SOURCES = (
    "zns_replay.c", "zdev.c", "zdev.h", "crc32c.h", "dogi_place.h", "hybrid_place.h", "dtr_load.h", "exit_codes.h",
)  # fmt: skip
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off"]
#: the simulator's policies and victim selectors the harness mirrors
POLICIES = ("nosep", "sepgc", "sepbit", "dogi_frozen", "hybrid_frozen")
#: the learned schemes' own victim selectors: the simulator's name -> the C harness's ``--victim``
LEARNED_VICTIMS = {"dogi_frozen": "dogi", "hybrid_frozen": "hybrid"}
VICTIMS = ("greedy", "cost_benefit", "cost_benefit_sepbit", "fifo")
#: what a write needs before it counts as acknowledged (``--durability``; docs/deployment.md)
DURABILITY = ("flush", "fua", "none")
#: ``--flush-every``'s default in zns_replay.c: user writes between acknowledgements
FLUSH_EVERY = 1024
#: the learned scheme's files compiled in (dogi_place.h includes them), from its bundle
LEARNED_HEADERS = {"dogi_model.h": "header", "dogi_deploy.h": "deploy_header"}


class HarnessError(DogiMLError):
    """The harness could not be built, refused its input or failed (the message is the harness's
    own); ``exit_status`` is the harness's exit status (:mod:`dogi_ml.zns.exit_codes`), None when
    it did not run."""

    def __init__(self, problem: str, fix: str | None = None, exit_status: int | None = None):
        super().__init__(problem, fix)
        self.exit_status = exit_status


def source_dir() -> Path:
    return Path(__file__).resolve().parent


def build_dir() -> Path:
    """``$DOGI_ML_CACHE/zns`` (default ``~/.cache/dogi_ml/zns``): compiled harnesses by key."""
    root = os.environ.get("DOGI_ML_ZNS_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "dogi_ml" / "zns" / "build"


def find_cc() -> str:
    """The compiler the exported headers are built with too (``$CC``, else gcc, cc or clang)."""
    from dogi_ml.export.cbuild import find_compiler

    cc = find_compiler()
    if cc is None:
        raise HarnessError("no C compiler found for the ZNS harness", "install gcc or set CC")
    return cc


def build(static: bool = False, out_dir: str | Path | None = None, learned: dict | None = None) -> Path:
    """The compiled harness (``static``: a statically linked binary for a guest), rebuilt only
    when a source, the flags or the compiler change. ``learned``: ``{file name: path}`` of the
    learned scheme's headers (:data:`LEARNED_HEADERS`, from a DOGI bundle), compiled in: the
    binary is then keyed on their contents too."""
    cc = find_cc()
    src = source_dir()
    flags = [*CFLAGS, *(["-static"] if static else [])]
    h = hashlib.sha256(" ".join([cc, *flags]).encode())
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (src / name).read_bytes())
    texts = {}
    if learned:
        if set(learned) != set(LEARNED_HEADERS):
            raise HarnessError(
                f"the learned scheme needs the headers {sorted(LEARNED_HEADERS)}, got {sorted(learned)}",
                "pass learned=dogi_ml.pipeline.replay.learned_headers(policy_cfg) (a DOGI bundle's model header "
                "and deploy.h)",
            )
        for name in sorted(learned):
            texts[name] = Path(learned[name]).read_bytes()
            h.update(name.encode() + b"\0" + texts[name])
    key = h.hexdigest()[:16]
    out = Path(out_dir) if out_dir else build_dir()
    out.mkdir(parents=True, exist_ok=True)
    exe = out / f"zns_replay-{'static-' if static else ''}{'dogi-' if learned else ''}{key}"
    if exe.exists():
        return exe
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    if texts:
        inc = out / f"include-{key}"
        inc.mkdir(exist_ok=True)
        for name, text in texts.items():
            (inc / name).write_bytes(text)
        flags += ["-DDOGI_LEARNED", f"-I{inc}"]
    cmd = [cc, *flags, str(src / "zns_replay.c"), str(src / "zdev.c"), "-lm", "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"compiling the ZNS harness failed:\n{proc.stderr.strip()}", "check the C compiler")
    os.replace(tmp, exe)
    return exe


def segment_count(capacity: int, op_ratio: float, segment_blocks: int) -> int:
    """Physical segments (zones) of a run, as the simulator computes them."""
    return int(math.floor(capacity * (1.0 + op_ratio) / segment_blocks))


def file_zone_blocks(segment_blocks: int) -> int:
    """Zone size of a file-emulated device: the next power of two above the capacity, so zone
    capacity < zone size as on ZNS drives (the address gap costs nothing: the file is sparse)."""
    return 1 << int(segment_blocks).bit_length()


def harness_args(
    trace: str | Path,
    device: str,
    *,
    capacity: int,
    policy: str = "sepbit",
    victim: str | None = None,
    op_ratio: float = 0.10,
    gc_free_segments: int = 2,
    gc_high_free_segments: int | None = None,
    prefill: bool = True,
    create: tuple[int, int, int, int, int] | None = None,
    verify: bool = True,
    verify_every: int = 0,
    progress_every: int = 0,
    segments: int | None = None,
    variant: str = "code",
    durability: str = "flush",
    flush_every: int | None = None,
    journal: str | Path | None = None,
) -> list[str]:
    """The command line of one harness run (see ``zns_replay --help``)."""
    if policy not in POLICIES:
        raise HarnessError(f"the ZNS harness runs policies {', '.join(POLICIES)}, not {policy!r}", "pick one of them")
    if policy in LEARNED_VICTIMS:
        if victim not in (None, policy):
            raise HarnessError(f"policy {policy} runs its own victims ({policy}), not {victim!r}", "drop sim.victim")
        victim = LEARNED_VICTIMS[policy]  # the C harness's name for the scheme's expiry-first selector
    elif victim is None:
        victim = "greedy"  # sim.victim's default for schemes without a rule of their own
    elif victim not in VICTIMS:
        raise HarnessError(f"the ZNS harness runs victims {', '.join(VICTIMS)}, not {victim!r}", "set sim.victim")
    if durability not in DURABILITY:
        raise HarnessError(
            f"zns.durability={durability!r} is not one of {', '.join(DURABILITY)}",
            "use zns.durability=flush (the default), fua or none",
        )
    if flush_every is not None and (
        isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1
    ):
        raise HarnessError(
            f"zns.flush_every={flush_every!r}: it must be a whole number of user writes, at least 1",
            f"use e.g. zns.flush_every={FLUSH_EVERY} (the default)",
        )
    name = "sepbit_paper" if policy == "sepbit" and variant == "paper" else policy
    args = [
        f"--trace={trace}",
        f"--device={device}",
        f"--capacity={int(capacity)}",
        f"--policy={name}",
        f"--victim={victim}",
        f"--op-ratio={op_ratio!r}",
        f"--gc-free={int(gc_free_segments)}",
        f"--gc-high={int(gc_high_free_segments or 0)}",
        f"--durability={durability}",
        f"--flush-every={int(flush_every or FLUSH_EVERY)}",
    ]
    if journal:
        args.append(f"--journal={journal}")
    if segments:
        args.append(f"--segments={int(segments)}")
    if not prefill:
        args.append("--no-prefill")
    if create:
        args.append("--create=" + ",".join(str(int(x)) for x in create))
    if not verify:
        args.append("--no-verify")
    if verify_every:
        args.append(f"--verify-every={int(verify_every)}")
    if progress_every:
        args.append(f"--progress={int(progress_every)}")
    return args


def run(
    args: list[str], exe: Path | None = None, progress: Callable[[int, int], None] | None = None, timeout=None
) -> dict:
    """Run the harness; its JSON line as a dict, with its ``exit_status`` and, for a failed check
    (verify, :data:`~dogi_ml.zns.exit_codes.VERIFY`; recovery,
    :data:`~dogi_ml.zns.exit_codes.LOST_WRITES`), its one-line ``error``. ``progress(done,
    total)`` sees every progress line (writes acknowledged). Any other failure (a refusal, bad
    input, an I/O error, a kill) raises :class:`HarnessError` with the harness's message and exit
    status."""
    exe = exe or build()
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors = []
    for line in proc.stderr:
        if line.startswith("progress "):
            if progress is not None:
                _, done, total = line.split()
                progress(int(done), int(total))
        else:
            errors.append(line.rstrip())
    out = proc.stdout.read()
    rc = proc.wait(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    failures = [e.removeprefix("error: ") for e in errors if e.startswith("error: ")]
    if rc not in (exit_codes.OK, exit_codes.VERIFY, exit_codes.LOST_WRITES) or not lines:
        msg = "\n".join(failures or errors) or (f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
        raise HarnessError(f"zns_replay: {msg}", exit_status=rc)
    result = json.loads(lines[-1])
    result["exit_status"] = rc
    if failures:
        result["error"] = failures[-1]
    return result


def device_info(device: str, exe: Path | None = None) -> dict:
    """A device's zone geometry (``--info``)."""
    return run([f"--device={device}", "--info"], exe)


def temp_device(prefix: str = "zns") -> str:
    """A ``file:`` device spec in a fresh temporary directory (the caller removes it)."""
    return "file:" + str(Path(tempfile.mkdtemp(prefix=prefix)) / "dev.zns")
