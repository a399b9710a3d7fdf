"""Firmware builds of a deployed model: its C header cross-compiled for SSD-controller-class Arm
cores without an FPU, linked into a small newlib-free test image and run under QEMU on the
export's parity vectors, bit for bit against the Python reference.

Targets (:data:`TARGETS`):

* ``cortex-m4``: ``arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=soft``, run on QEMU's
  ``mps2-an386`` board (a Cortex-M4), instructions counted with SysTick under ``-icount shift=0``
  (one instruction per nanosecond of virtual time; SysTick ticks at 25 MHz, so one tick is 40
  instructions, measured on a known loop, not assumed).
* ``cortex-r5``: ``-mcpu=cortex-r5 -marm -mfloat-abi=soft``. ``qemu-system-arm`` has no R-profile
  machine; the image runs on the ``virt`` machine with a Cortex-A15, an ARMv7 core that executes
  the R5's ARM-state instruction set, hardware divide included, and has the same PMU interface:
  instructions are counted exactly by the PMU's INST_RETIRED event under ``-icount shift=0``.

Both builds use ``-std=c99 -Wall -Wextra -Werror -pedantic -ffreestanding -nostdlib -O2``, the
startup, linker script and driver in ``export/firmware/``, and libgcc only for the compiler's own
helpers (64-bit division). :func:`firmware_check` builds, runs and compares; any difference
raises :class:`FirmwareMismatch` naming the first differing row. It reports .text and .rodata
of the model, its .data/.bss, the stack high-water mark of a model call (painted stack, checked
against GCC's ``-fstack-usage``), the RAM it needs, and instructions per block (worst, mean).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .integer import ExportError

SOURCES = Path(__file__).resolve().parent / "firmware"
CC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"
HOST_TARGET = "x86_64"
COMMON_FLAGS = (
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-ffreestanding",
    "-nostdlib",
    "-O2",
    "-ffunction-sections",
    "-fdata-sections",
)
#: the driver's known workload: turns of a two-instruction loop (driver.c FW_KNOWN_LOOP_TURNS)
KNOWN_LOOP_TURNS = 100_000
META_MAGIC = 0x46574D31
KINDS = {"mlp": 1, "trees": 1, "gru": 2, "qtable": 3}


@dataclass(frozen=True)
class Target:
    """One firmware target: how it is compiled and where QEMU runs it."""

    name: str
    cflags: tuple
    startup: str
    linker_script: str
    qemu_machine: str
    qemu_cpu: str
    runs_on: str
    counter: str


TARGETS = {
    "cortex-m4": Target(
        name="cortex-m4",
        cflags=("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft"),
        startup="startup_cortex_m.c",
        linker_script="cortex-m4.ld",
        qemu_machine="mps2-an386",
        qemu_cpu="cortex-m4",
        runs_on="QEMU mps2-an386 (Cortex-M4, ARMv7E-M)",
        counter="SysTick at 25 MHz under -icount shift=0",
    ),
    "cortex-r5": Target(
        name="cortex-r5",
        cflags=("-mcpu=cortex-r5", "-marm", "-mfloat-abi=soft"),
        startup="startup_cortex_r.c",
        linker_script="cortex-r5.ld",
        qemu_machine="virt",
        qemu_cpu="cortex-a15",
        runs_on="QEMU virt with a Cortex-A15 (ARMv7-A; no R-profile machine in qemu-system-arm)",
        counter="PMU event INST_RETIRED under -icount shift=0",
    ),
}
VALID_TARGETS = (HOST_TARGET, *TARGETS)


class FirmwareMismatch(ExportError):
    """The firmware image's predictions differ from the Python reference."""


def toolchain_problem() -> str | None:
    """Why firmware builds cannot run here (``None`` when the cross compiler, binutils and QEMU
    are all on PATH)."""
    tools = (CC, "arm-none-eabi-objdump", "arm-none-eabi-size", "arm-none-eabi-nm", QEMU)
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return (
            f"{', '.join(missing)} not found on PATH: firmware builds need Debian's gcc-arm-none-eabi "
            "and qemu-system-arm (apt-get install gcc-arm-none-eabi qemu-system-arm)"
        )
    return None


def _need_toolchain() -> None:
    why = toolchain_problem()
    if why:
        raise ExportError(why)


# -- the model's side of the image ------------------------------------------------------------
def layout(q) -> dict:
    """The driver's row layout for the deployed model ``q``: int64 words in, int32 words out
    (the last one the counter's ticks), and the model's sizes."""
    kind = getattr(q, "kind", None)
    if kind not in KINDS:
        raise ExportError(f"no firmware build for deployed kind {kind!r} (known: {', '.join(KINDS)})")
    if kind == "qtable":
        return {"kind": kind, "code": 3, "in_words": 6, "out_words": 3, "n_features": 6, "n_classes": 0, "hidden": 0}
    F, C = int(q.n_features), int(q.n_classes)
    H = int(q.hidden) if kind == "gru" else 0
    return {
        "kind": kind,
        "code": KINDS[kind],
        "in_words": F + H,
        "out_words": 2 + C + H,
        "n_features": F,
        "n_classes": C,
        "hidden": H,
    }


def _prefix_of(header_text: str) -> str:
    m = re.search(r"^#define (\w+)_MODEL_H$", header_text, re.M)
    if not m:
        raise ExportError("not a dogi_ml header (no *_MODEL_H include guard)")
    return m.group(1).lower()


def model_source(kind: str, header: Path) -> str:
    """The model's translation unit: the header and external ``fw_model_*`` wrappers of its entry
    points (the header's functions are ``static inline``; the wrappers make them one function
    each, whose sections are the model's size and whose ``-fstack-usage`` is its stack)."""
    P = _prefix_of(header.read_text())
    out = f'#include "{header.resolve()}"\n\n'
    if kind in ("mlp", "trees"):
        out += (
            "int32_t fw_model_predict_one(const int64_t *features, int32_t *logits);\n"
            "int32_t fw_model_predict_one(const int64_t *features, int32_t *logits)\n"
            f"{{ return {P}_predict_one(features, logits); }}\n"
        )
    elif kind == "gru":
        out += (
            "int32_t fw_model_gru_step(const int64_t *features, int16_t *h, int32_t *logits);\n"
            "int32_t fw_model_gru_step(const int64_t *features, int16_t *h, int32_t *logits)\n"
            f"{{ return {P}_gru_step(features, h, logits); }}\n"
        )
    else:
        args = "int64_t l, int64_t v, int64_t s, int32_t t, int32_t p, int32_t q"
        for fn in ("encode_state", "relocate"):
            out += (
                f"int32_t fw_model_{fn}({args});\n"
                f"int32_t fw_model_{fn}({args}) {{ return {P}_{fn}(l, v, s, t, p, q); }}\n"
            )
    return out


@dataclass
class FirmwareBuild:
    """A linked test image and what its build measured."""

    target: Target
    elf: Path
    workdir: Path
    layout: dict
    model_sections: dict
    image_sections: dict
    stack_usage: dict
    model_undefined: list
    commands: list = field(default_factory=list)


def _run(cmd: list, what: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise ExportError(f"{what} failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stderr.strip()}")
    return proc


def section_sizes(path: Path) -> dict:
    """Bytes per kind of section (``text``, ``rodata``, ``data``, ``bss``) of an object or image,
    from ``arm-none-eabi-size -A`` (``.vectors``/``.entry`` count as text)."""
    proc = _run(["arm-none-eabi-size", "-A", str(path)], "arm-none-eabi-size")
    sizes = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[1].isdigit():
            continue
        name, size = parts[0], int(parts[1])
        for kind in sizes:
            if name == f".{kind}" or name.startswith(f".{kind}."):
                sizes[kind] += size
        if name in (".vectors", ".entry"):
            sizes["text"] += size
    return sizes


def _stack_usage(su_file: Path) -> dict:
    """GCC's ``-fstack-usage`` of the model's functions: ``{function: [bytes, qualifier]}``."""
    out = {}
    for line in su_file.read_text().splitlines():
        loc, size, qual = line.split("\t")
        out[loc.rsplit(":", 1)[-1]] = [int(size), qual]
    return out


VFP = re.compile(r"^v[a-z]|fpscr|fpexc", re.I)


def fpu_instructions(elf: Path) -> list:
    """Floating-point (VFP/NEON) instructions in the image's code, from ``objdump -d``: none
    expected."""
    proc = _run(["arm-none-eabi-objdump", "-d", str(elf)], "arm-none-eabi-objdump")
    found = []
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and re.match(r"^\s*[0-9a-f]+:$", parts[0]):
            insn = parts[2].strip()
            if VFP.search(insn.split()[0] if insn else "") or "fpscr" in line:
                found.append(line.strip())
    return found


def build_image(q, header: str | Path, target: str, workdir: str | Path) -> FirmwareBuild:
    """Compile ``header`` (the deployed model ``q``'s) with the driver and the target's startup
    into ``workdir/image.elf``; any warning fails (``-Werror``)."""
    _need_toolchain()
    if target not in TARGETS:
        raise ExportError(f"unknown firmware target {target!r} (known: {', '.join(TARGETS)})")
    t = TARGETS[target]
    lay = layout(q)
    header = Path(header).resolve()
    wd = Path(workdir).resolve()
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "model.c").write_text(model_source(lay["kind"], header))
    flags = [*COMMON_FLAGS, *t.cflags]
    defs = [
        f"-DFW_KIND={lay['code']}",
        f"-DFW_IN_WORDS={lay['in_words']}",
        f"-DFW_OUT_WORDS={lay['out_words']}",
        f"-DFW_N_FEATURES={lay['n_features']}",
        f"-DFW_N_CLASSES={lay['n_classes']}",
        f"-DFW_HIDDEN={max(lay['hidden'], 1)}",
    ]
    commands = []
    objs = []
    for src, extra in (
        (wd / "model.c", ["-fstack-usage"]),
        (SOURCES / "driver.c", [*defs, f"-I{SOURCES}"]),
        (SOURCES / t.startup, [f"-I{SOURCES}"]),
    ):
        obj = wd / (src.stem + ".o")
        cmd = [CC, *flags, *extra, "-c", str(src), "-o", str(obj)]
        _run(cmd, f"{target} build of {src.name}", cwd=wd)
        commands.append(" ".join(cmd))
        objs.append(obj)
    elf = wd / "image.elf"
    link = [CC, *flags, "-T", str(SOURCES / t.linker_script), *map(str, objs), "-lgcc", "-Wl,--gc-sections"]
    link += [f"-Wl,-Map={wd / 'image.map'}", "-o", str(elf)]
    _run(link, f"{target} link", cwd=wd)
    commands.append(" ".join(link))
    nm = _run(["arm-none-eabi-nm", "-u", str(wd / "model.o")], "arm-none-eabi-nm")
    return FirmwareBuild(
        target=t,
        elf=elf,
        workdir=wd,
        layout=lay,
        model_sections=section_sizes(wd / "model.o"),
        image_sections=section_sizes(elf),
        stack_usage=_stack_usage(wd / "model.su"),
        model_undefined=[ln.split()[-1] for ln in nm.stdout.splitlines() if ln.strip()],
        commands=commands,
    )


# -- vectors and the reference ------------------------------------------------------------------
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def qtable_vectors(n: int, seed: int = 0) -> np.ndarray:
    """``n`` rows ``(lifetime, valid, segment_blocks, segment_type, prediction, previous)``: every
    state's categories in range and out of it, lifetimes of every magnitude and sign (int64
    limits included), valid counts and segment sizes including 0, negatives and values up to
    2^57 (``valid * 25`` must fit int64, as the header's arithmetic assumes)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    mag = rng.integers(0, 64, n)
    life = rng.integers(0, INT64_MAX, n, dtype=np.int64) >> (63 - mag).clip(0, 63)
    life = np.where(rng.random(n) < 0.1, -life, life)
    life[: min(n, 4)] = [INT64_MAX, INT64_MIN, 0, 1][: min(n, 4)]
    seg = rng.choice(np.array([1, 2, 64, 128, 256, 1024, 1 << 20, 1 << 57, 0, -1, -64]), n)
    valid = (rng.random(n) * np.maximum(seg, 1) * 1.1).astype(np.int64)
    valid = np.where(rng.random(n) < 0.05, rng.choice(np.array([0, -1, 1 << 57, -(1 << 57)]), n), valid)
    cats = np.stack([rng.integers(-1, 9, n), rng.integers(-1, 4, n), rng.integers(-1, 7, n)], axis=1)
    inside = rng.random(n) < 0.9  # most rows name a real state
    cats[inside] = np.stack([rng.integers(0, 8, n), rng.integers(0, 3, n), rng.integers(0, 6, n)], axis=1)[inside]
    return np.ascontiguousarray(np.column_stack([life, valid, seg, cats]).astype(np.int64))


def firmware_inputs(q, X: np.ndarray | None, n: int, seed: int = 0) -> np.ndarray:
    """The driver's input rows: the parity feature vectors ``X`` (MLP, trees), with a random
    int16 state per row appended for the GRU step, or :func:`qtable_vectors` for a Q-table."""
    lay = layout(q)
    if lay["kind"] == "qtable":
        return qtable_vectors(n, seed)
    if X is None:
        raise ExportError(f"a {lay['kind']} model needs its parity feature vectors (X) for the firmware run")
    X = np.ascontiguousarray(np.asarray(X, np.int64).reshape(-1, lay["n_features"])[:n])
    if lay["kind"] == "gru":
        rng = np.random.Generator(np.random.PCG64(seed + 1))
        h = rng.integers(-(1 << 15), 1 << 15, size=(X.shape[0], lay["hidden"]), dtype=np.int64)
        h[:4] = [[-(1 << 15)], [(1 << 15) - 1], [0], [-1]][: min(4, len(h))]
        X = np.concatenate([X, h], axis=1)
    return np.ascontiguousarray(X)


def reference_rows(q, inputs: np.ndarray) -> np.ndarray:
    """The Python reference's answer to each input row, as the driver writes it (without the
    counter word): class and logits (and the new GRU state), or state and action (Q-table)."""
    lay = layout(q)
    if lay["kind"] == "qtable":
        from dogi_ml.rl.qlearning import encode_state, greedy_action

        table = np.asarray(q.table)
        out = np.empty((inputs.shape[0], 2), np.int64)
        for r, (lt, v, s, t, p, pr) in enumerate(inputs.tolist()):
            state = encode_state(lt, v, s, t, p, pr)
            out[r] = state, greedy_action(table, state)
        return out
    F = lay["n_features"]
    if lay["kind"] == "gru":
        logits, h = q.step(inputs[:, :F], inputs[:, F:])
        return np.column_stack([logits.argmax(axis=1), logits, h]).astype(np.int64)
    logits = np.asarray(q.logits_int(inputs), np.int64)
    return np.column_stack([logits.argmax(axis=1), logits])


def first_difference(reference: np.ndarray, got: np.ndarray) -> tuple[int, int] | None:
    """(row, column) of the first difference, or ``None``."""
    if reference.shape != got.shape:
        raise FirmwareMismatch(f"firmware wrote {got.shape} words, the reference has {reference.shape}")
    rows = np.flatnonzero((reference != got).any(axis=1))
    if rows.size == 0:
        return None
    r = int(rows[0])
    return r, int(np.flatnonzero(reference[r] != got[r])[0])


# -- running under QEMU ---------------------------------------------------------------------------
def qemu_command(target: Target, elf: Path) -> list:
    return [
        QEMU,
        "-M",
        target.qemu_machine,
        "-cpu",
        target.qemu_cpu,
        "-nographic",
        "-monitor",
        "none",
        "-serial",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-icount",
        "shift=0",
        "-kernel",
        str(elf),
    ]


def run_image(build: FirmwareBuild, inputs: np.ndarray, timeout: float = 600.0) -> tuple[np.ndarray, dict]:
    """Run the image under QEMU on ``inputs`` (int64 rows); (output rows int64 ``[n,
    out_words]``, the driver's meta record). A non-zero exit or a missing file raises."""
    lay = build.layout
    inputs = np.ascontiguousarray(inputs, dtype="<i8")
    if inputs.ndim != 2 or inputs.shape[1] != lay["in_words"]:
        raise ExportError(f"firmware inputs must be [n, {lay['in_words']}] int64, got {inputs.shape}")
    wd = build.workdir
    for name in ("fw_out.bin", "fw_meta.bin"):
        (wd / name).unlink(missing_ok=True)
    inputs.tofile(wd / "fw_in.bin")
    cmd = qemu_command(build.target, build.elf)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ExportError(f"{build.target.name} image did not finish within {timeout:.0f} s: {' '.join(cmd)}") from exc
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise ExportError(
            f"{build.target.name} image exited {proc.returncode} under QEMU ({' '.join(cmd)})"
            + (" (70: a fault)" if proc.returncode == 70 else "")
            + f"\n{proc.stderr.strip()[-2000:]}"
        )
    meta_w = np.fromfile(wd / "fw_meta.bin", dtype="<u4")
    if meta_w.size != 10 or meta_w[0] != META_MAGIC:
        raise ExportError(f"{build.target.name} image wrote no valid fw_meta.bin")
    out = np.fromfile(wd / "fw_out.bin", dtype="<i4").astype(np.int64)
    if out.size != inputs.shape[0] * lay["out_words"] or int(meta_w[1]) != inputs.shape[0]:
        raise ExportError(
            f"{build.target.name} image wrote {out.size} words for {inputs.shape[0]} rows of {lay['out_words']}"
        )
    meta = {
        "rows": int(meta_w[1]),
        "stack_high_water_bytes": int(meta_w[3]),
        "known_loop_turns": int(meta_w[4]),
        "known_loop_ticks": int(meta_w[5]),
        "empty_window_ticks": float(meta_w[6]) / 16,  # the mean of 16 windows
        "stack_region_bytes": int(meta_w[7]),
        "counter_mask": int(meta_w[8]),
        "qemu_seconds": seconds,
        "qemu_command": " ".join(cmd[:-1] + ["image.elf"]),
    }
    return out.reshape(inputs.shape[0], lay["out_words"]), meta


def instructions_per_tick(meta: dict) -> int:
    """Instructions per counter tick, from the known loop (2 instructions a turn): 1 for the PMU,
    40 for SysTick at 25 MHz with one instruction per virtual nanosecond. The known loop's count
    must match a whole number of instructions per tick to 1%, else the counting is not trusted."""
    ticks = meta["known_loop_ticks"] - meta["empty_window_ticks"]
    want = 2 * meta["known_loop_turns"]
    if ticks <= 0:
        raise ExportError(f"the instruction counter did not advance over the known loop ({meta})")
    per = max(1, round(want / ticks))
    if abs(ticks * per - want) > 0.01 * want:
        raise ExportError(f"the counter's ticks over the known loop ({ticks}) are no whole fraction of {want}")
    return per


def firmware_check(
    q, header: str | Path, target: str, X: np.ndarray | None, workdir: str | Path, n: int | None = None, seed: int = 0
) -> dict:
    """Build ``header`` for ``target``, run it under QEMU on the parity vectors (``X``; a Q-table
    makes its own, ``n`` of them) and compare every output word with the Python reference;
    raises :class:`FirmwareMismatch` on the first difference. Returns the target's report."""
    build = build_image(q, header, target, workdir)
    fpu = fpu_instructions(build.elf)
    if fpu:
        raise ExportError(f"{target} image uses floating-point instructions: {fpu[:3]}")
    rows = int(n) if n is not None else (len(X) if X is not None else 0)
    inputs = firmware_inputs(q, X, rows, seed)
    want = reference_rows(q, inputs)
    got, meta = run_image(build, inputs)
    diff = first_difference(want, got[:, :-1])
    if diff is not None:
        r, c = diff
        raise FirmwareMismatch(
            f"{target} firmware differs from the Python reference at row {r} (word {c}): "
            f"got {got[r, :-1].tolist()}, want {want[r].tolist()}; input {inputs[r].tolist()}"
        )
    return summarize(build, meta, got[:, -1], rows)


def summarize(build: FirmwareBuild, meta: dict, ticks: np.ndarray, rows: int) -> dict:
    """The target's report from a build and a run."""
    per = instructions_per_tick(meta)
    insns = (ticks - meta["empty_window_ticks"]).clip(0) * per
    ms, su = build.model_sections, build.stack_usage
    stack = int(meta["stack_high_water_bytes"])
    # GCC's frame sizes along the model's one call chain (the wrapper and what it calls): the
    # stack reserved, where the painted mark sees only the words written (a frame's padding
    # may never be written)
    static = sum(size for size, _ in su.values())
    return {
        "target": build.target.name,
        "runs_on": build.target.runs_on,
        "bit_exact": True,
        "vectors": int(rows),
        "text_bytes": ms["text"],
        "rodata_bytes": ms["rodata"],
        "data_bytes": ms["data"],
        "bss_bytes": ms["bss"],
        "stack_high_water_bytes": stack,
        "stack_usage_gcc": su,
        "stack_static_bytes": static,
        "ram_bytes": ms["data"] + ms["bss"] + max(stack, static),
        "instructions_per_block": {
            "worst": int(round(float(insns.max()))) if rows else 0,
            "mean": float(insns.mean()) if rows else 0.0,
            "resolution": per,
            "counter": build.target.counter,
        },
        "image_sections": build.image_sections,
        "libgcc_helpers": build.model_undefined,
        "compile": build.commands[0],
        "qemu": meta["qemu_command"],
        "qemu_seconds": round(meta["qemu_seconds"], 2),
        "counter_check": {
            "known_loop_instructions": 2 * meta["known_loop_turns"],
            "known_loop_ticks": meta["known_loop_ticks"],
            "empty_window_ticks": meta["empty_window_ticks"],
        },
    }


def function_ranges(elf: Path) -> dict:
    """``{name: (start, end)}`` of the image's functions (``nm -S``; Thumb bit cleared)."""
    proc = _run(["arm-none-eabi-nm", "-S", "--defined-only", str(elf)], "arm-none-eabi-nm")
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            start = int(parts[0], 16) & ~1
            out[parts[3]] = (start, start + int(parts[1], 16))
    return out


def _one_instruction_per_block() -> list:
    """QEMU's switch for one guest instruction per translated block: ``-singlestep`` up to 8.0,
    ``-accel tcg,one-insn-per-tb=on`` from 8.1 (where ``-singlestep`` was deprecated)."""
    out = _run([QEMU, "--version"], "qemu-system-arm --version").stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    if m and (int(m.group(1)), int(m.group(2))) >= (8, 1):
        return ["-accel", "tcg,one-insn-per-tb=on"]
    return ["-singlestep"]


def traced_instructions(build: FirmwareBuild, inputs: np.ndarray, timeout: float = 300.0) -> np.ndarray:
    """Instructions executed in the model's code per input row, counted from QEMU's own
    execution trace in single-step mode (``-singlestep -d exec,nochain``: one trace line per
    instruction): every instruction whose address lies outside the driver's and startup's
    functions, between a row's two counter reads. The reference the counter-based figures are
    checked against (a few rows only: the trace is large)."""
    ranges = function_ranges(build.elf)
    driver = set()
    for obj in ("driver.o", f"{Path(build.target.startup).stem}.o"):
        nm = _run(["arm-none-eabi-nm", "--defined-only", str(build.workdir / obj)], "arm-none-eabi-nm")
        driver |= {ln.split()[-1] for ln in nm.stdout.splitlines() if ln.split()[1:2] and ln.split()[1] in "tT"}
    counter = ranges["fw_counter"]
    host = [r for name, r in ranges.items() if name in driver]
    inputs = np.ascontiguousarray(inputs, dtype="<i8")
    inputs.tofile(build.workdir / "fw_in.bin")
    log = build.workdir / "exec.log"
    cmd = qemu_command(build.target, build.elf)
    cmd[-2:-2] = [*_one_instruction_per_block(), "-d", "exec,nochain", "-D", str(log)]
    proc = subprocess.run(cmd, cwd=build.workdir, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ExportError(f"traced run exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    pc_re = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
    counts, in_counter, reads, n, last = [], False, 0, 0, -1
    with open(log) as fh:
        for line in fh:
            m = pc_re.match(line)
            if not m:
                continue
            pc = int(m.group(1), 16)
            if pc == last:
                # the same one-instruction block logged twice: QEMU logs a block before running
                # it, and under -icount a block whose instruction budget has run out exits
                # before its instruction and is entered again (no code here jumps to itself)
                continue
            last = pc
            now = counter[0] <= pc < counter[1]
            if now and not in_counter:  # entering fw_counter: a window opens or closes
                reads += 1
                if reads % 2 == 0:
                    counts.append(n)
                n = 0
            in_counter = now
            if reads % 2 == 1 and not now and not any(a <= pc < b for a, b in host):
                n += 1
    log.unlink()
    # the windows of the known loop and the empty ones come first (driver.c): 16 + 1
    return np.array(counts[17:], np.int64)


def scratch_dir() -> Path:
    """A fresh directory for a build when the caller gives none."""
    return Path(tempfile.mkdtemp(prefix="dogi_ml_fw_"))
