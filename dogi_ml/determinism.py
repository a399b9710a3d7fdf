"""The floating-point code path a run takes: pinned, so that learned results repeat to the last bit
on any x86-64 CPU, and recorded in every result.

numpy (its ufunc loops), OpenBLAS (numpy's copy and scipy's, which Numba's matrix products call),
torch's ATen kernels, MKL (torch's matrix products), oneDNN (torch's convolutions) and glibc's libm
each choose machine code for the CPU they run on when they load. The paths give other last bits:
another reduction order across 8 or 16 lanes, another polynomial for exp or log2, a fused
multiply-add or not. A model trained online turns one such bit into other weights, then other
predictions, groups and WAF; docs/performance.md ("Numerics") has the measurements, per library
and per scheme, and the speed each level costs.

``DOGI_ML_NUMERICS`` chooses the level:

* ``portable`` (the default): every library on its baseline path, the one every CPU that runs
  this numpy has (x86-64-v2: SSE4.2, no AVX), so the same bits on any x86-64 CPU;
* ``avx2``: their AVX2 paths, the same bits on any CPU with AVX2 and FMA (x86-64-v3: Intel since
  Haswell, AMD since Zen), close to native speed; a one-line error on a CPU without them;
* ``native``: each library on its CPU's own path; results repeat on one CPU type only.

* :func:`pinned_environment`: a level's variables.
* :func:`pin_process`: the command line's entry calls it first. It puts the level's variables in
  the environment and, because numpy, OpenBLAS and glibc read theirs only when they load (and
  ``import dogi_ml`` has loaded numpy), runs the same command line again in their presence
  (``os.execv``; ~0.25 s of CPU). Processes the run starts (sweep jobs of the joblib and submitit
  launchers) inherit the environment. A variable the environment already holds at another value
  is replaced with a one-line warning and recorded (``replaced`` in the record).
* :func:`numerics_record`: which path this process runs (``mode`` ``portable``, ``avx2``,
  ``native`` or ``mixed``, each library's choice, the CPU's best, thread counts); every result
  JSON and MLflow run carries it as ``numerics``.
* :func:`outcome_digest`: a hash of a result without its timings (and counts of results read back
  from a journal) and without that record; two runs with equal digests had equal outcomes.

A Python API user gets the command line's numbers by starting Python in the pinned environment
(``eval "$(python -m dogi_ml.determinism env)"``), or by calling :func:`pin_process` at the top of
a script (it runs the script again, pinned). Without either, ``numerics.mode`` says ``native``
(or ``mixed``).

``python -m dogi_ml.determinism env [portable|avx2] | record | digest RESULT.json...`` prints a
level's variables (as ``export`` lines), this process's record, or results' digests.

A leaf module: it imports nothing of the project but its errors, and numpy, torch and the rest
only inside the functions that read their state.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from pathlib import Path

__all__ = [
    "MODE_ENV",
    "TIMING_KEYS",
    "cpu_best",
    "mlflow_tags",
    "machine_conflicts",
    "numerics_mode",
    "numerics_record",
    "outcome_digest",
    "pin_process",
    "pinned_environment",
    "portable_environment",
    "replaced_settings",
    "x86_64",
]

#: the environment variable that chooses the level
MODE_ENV = "DOGI_ML_NUMERICS"
#: ``portable`` (the default): every library on its baseline path, the same bits on any x86-64
#: CPU that runs numpy 2; ``avx2``: their AVX2 paths, the same bits on any CPU with AVX2 and FMA
#: (x86-64-v3); ``native``: each library on its CPU's own path
MODES = ("portable", "avx2", "native")
#: the CPUs on which each pinned level gives the same bits (the replacement warning names them)
LEVEL_SCOPE = {"portable": "any x86-64 CPU", "avx2": "any CPU with AVX2 and FMA"}
#: where :func:`pin_process` leaves the variables it replaced (JSON: name -> the environment's
#: value), for the process it runs again and the processes that one starts
REPLACED_ENV = "DOGI_ML_NUMERICS_REPLACED"

#: OpenBLAS's kernels per level: Nehalem's (SSE2/SSE3, every CPU that runs numpy 2), Haswell's
#: (AVX2 and FMA)
OPENBLAS_CORE = {"portable": "Nehalem", "avx2": "Haswell"}

#: glibc's libm picks FMA versions of exp, log, pow, sin, tanh, ... (double) on CPUs with FMA,
#: with other last bits; masking FMA keeps the others (the names of glibc < 2.33 and of later
#: versions: glibc ignores the ones it does not know). Every x86-64-v3 CPU has FMA: ``avx2``
#: needs no mask.
GLIBC_HWCAPS = "glibc.cpu.hwcaps=-FMA_Usable,-FMA4_Usable,-FMA,-FMA4"

#: numpy's SIMD targets an x86-64-v3 CPU runs (numpy >= 2.3 calls that level X86_V3; earlier
#: versions list its parts); ``avx2`` disables the others (AVX-512)
_NUMPY_AVX2 = {"X86_V3", "SSSE3", "SSE41", "POPCNT", "SSE42", "AVX", "F16C", "FMA3", "AVX2"}

#: result keys that measure time or depend on it (a background build's progress), not outcome
TIMING_KEYS = re.compile(
    r"seconds?|_s$|_s_|ns_per|elapsed|wall|latency|per_s$|int8_blocks_by_runtime|mlflow_run_id|read_back"
)


def _numpy_dispatch() -> list[str]:
    """numpy's optional SIMD targets (above its baseline) in the order it lists them."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return list(__cpu_dispatch__)


def pinned_environment(level: str = "portable") -> dict[str, str]:
    """Each library's variable and the value that holds it to ``level``'s path."""
    if level == "avx2":
        return {
            "ATEN_CPU_CAPABILITY": "avx2",
            "MKL_CBWR": "AVX2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "OPENBLAS_CORETYPE": OPENBLAS_CORE["avx2"],
            "NPY_DISABLE_CPU_FEATURES": " ".join(t for t in _numpy_dispatch() if t not in _NUMPY_AVX2),
        }
    if level != "portable":
        raise ValueError(f"no pinned environment for numerics level {level!r}")
    return {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "OPENBLAS_CORETYPE": OPENBLAS_CORE["portable"],
        "NPY_DISABLE_CPU_FEATURES": " ".join(_numpy_dispatch()),
        "GLIBC_TUNABLES": GLIBC_HWCAPS,
    }


def portable_environment() -> dict[str, str]:
    """The default level's variables (:func:`pinned_environment` ``("portable")``)."""
    return pinned_environment("portable")


def x86_64() -> bool:
    """Whether this is an x86-64 machine (the pin names x86 kernels; elsewhere it is not applied)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def numerics_mode() -> str:
    """``DOGI_ML_NUMERICS`` (``portable`` when unset); anything else is a one-line error."""
    mode = os.environ.get(MODE_ENV, "").strip().lower() or "portable"
    if mode not in MODES:
        from dogi_ml.errors import ConfigError

        raise ConfigError(
            f"{MODE_ENV}={os.environ[MODE_ENV]!r} is not a numerics mode", f"use one of {', '.join(MODES)}"
        )
    return mode


def _conflicts(want: dict[str, str]) -> dict[str, str]:
    """Pinned variables the environment holds at another value, with that value (GLIBC_TUNABLES may
    hold other tunables: only its ``glibc.cpu.hwcaps`` entry has to be ours)."""
    out = {}
    for key, value in want.items():
        have = os.environ.get(key)
        if have is None or have == value:
            continue
        if key == "GLIBC_TUNABLES":
            hwcaps = [t for t in have.split(":") if t.startswith("glibc.cpu.hwcaps=")]
            if not hwcaps or hwcaps == [value]:
                continue
        out[key] = have
    return out


def machine_conflicts(level: str = "portable") -> dict[str, str]:
    """The variables ``level`` pins that this process's environment holds at other values, with
    those values (what :func:`pin_process` would replace)."""
    return _conflicts(pinned_environment(level))


def _replacement(key: str, have: str, value: str) -> str:
    """What a conflicting variable becomes: the level's value (in GLIBC_TUNABLES, only the
    ``glibc.cpu.hwcaps`` entry is replaced; the other tunables stay)."""
    if key != "GLIBC_TUNABLES":
        return value
    return ":".join(value if t.startswith("glibc.cpu.hwcaps=") else t for t in have.split(":"))


def _missing(want: dict[str, str]) -> dict[str, str]:
    """The variables of ``want`` this process's environment does not have yet, with the value to
    set (GLIBC_TUNABLES keeps the user's other tunables)."""
    out = {}
    for key, value in want.items():
        have = os.environ.get(key)
        if key == "GLIBC_TUNABLES" and have and value not in have.split(":"):
            out[key] = f"{have}:{value}"
        elif have is None:
            out[key] = value
    return out


def replaced_settings() -> dict[str, str]:
    """The variables the pin replaced in this process (and in the process it ran again as), with
    the values the environment had: ``{}`` when it replaced none."""
    raw = os.environ.get(REPLACED_ENV)
    return json.loads(raw) if raw else {}


def pin_process() -> None:
    """Hold this process to the level ``DOGI_ML_NUMERICS`` names (``portable`` by default; nothing
    for ``native``): set its variables and, when some were missing or held another value, execute
    the same command line again with them (the process is replaced; this function returns only
    when nothing is left to set).

    A variable of the level that the environment holds at another value (a machine that exports
    ``OPENBLAS_CORETYPE=Haswell`` for every program) is replaced, never in silence: one
    ``warning:`` line on stderr names it, its value and the way to keep it
    (``DOGI_ML_NUMERICS=native``), and the run's ``numerics`` record carries it as ``replaced``.
    The level is the project's promise (the same bits on any x86-64 CPU) and the one setting of
    the project that the variables serve; refusing instead stopped every command on such a
    machine. ``avx2`` on a CPU without AVX2 and FMA, or an unknown level, is a one-line error."""
    mode = numerics_mode()
    if mode == "native" or not x86_64():
        return
    from dogi_ml.errors import ConfigError

    if mode == "avx2" and cpu_best() == "default":
        raise ConfigError(
            f"{MODE_ENV}=avx2 needs a CPU with AVX2 and FMA; this one ({_host_cpu()[0]}) has not",
            f"unset {MODE_ENV} (portable: the same bits on every x86-64 CPU)",
        )
    want = pinned_environment(mode)
    conflicts = _conflicts(want)
    if conflicts:
        replaced = {**replaced_settings(), **conflicts}
        os.environ.update({key: _replacement(key, have, want[key]) for key, have in conflicts.items()})
        os.environ[REPLACED_ENV] = json.dumps(replaced, sort_keys=True)
        theirs = ", ".join(f"{key}={have}" for key, have in conflicts.items())
        ours = ", ".join(f"{key}={os.environ[key]}" for key in conflicts)
        print(
            f"warning: {theirs} from the environment replaced by {ours} for this run ({MODE_ENV}={mode} "
            f"holds each float library to one path, the same bits on {LEVEL_SCOPE[mode]}) -- set "
            f"{MODE_ENV}=native to keep {theirs} (results then repeat on this CPU type only)",
            file=sys.stderr,
        )
    missing = _missing(want)
    os.environ.update(missing)
    if not (missing or conflicts):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # numpy (imported with dogi_ml), its OpenBLAS and glibc read their variables when they load
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


# -- the record --------------------------------------------------------------------------------
def _host_cpu() -> tuple[str, dict]:
    import llvmlite.binding as llb

    return llb.get_host_cpu_name(), dict(llb.get_host_cpu_features())


def cpu_best() -> str:
    """The CPU's best kernel level as torch names it: ``avx512`` (AVX-512 F/BW/DQ/VL and FMA),
    ``avx2`` (AVX2 and FMA) or ``default``."""
    _, f = _host_cpu()
    if f.get("fma") and all(f.get(x) for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        return "avx512"
    if f.get("fma") and f.get("avx2"):
        return "avx2"
    return "default"


def _start_environment() -> dict[str, str]:
    """The environment this process was started with (what load-time readers saw); the current
    one where /proc is not available."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _glibc_masked_at_start(at_start: str | None) -> bool:
    """Whether GLIBC_TUNABLES held our hwcaps entry when the process started. glibc cuts the
    variable's original copy (what /proc shows) after its first tunable, so that copy must start
    the current value, and the current value must hold the entry."""
    now = os.environ.get("GLIBC_TUNABLES", "")
    return bool(at_start) and now.startswith(at_start) and GLIBC_HWCAPS in now.split(":")


def _openblas() -> list[dict]:
    """Each loaded OpenBLAS: which copy, the core its kernels are for, its threads."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [
        {"library": Path(i["filepath"]).name, "core": i.get("architecture"), "threads": i.get("num_threads")}
        for i in threadpool_info()
        if i.get("internal_api") == "openblas"
    ]


def _on_level(level: str, numpy_simd: list, openblas: list, torch_info: dict | None, start: dict) -> dict:
    """Per library, whether it runs ``level``'s path in this process."""
    want = pinned_environment(level)
    disabled = set(want["NPY_DISABLE_CPU_FEATURES"].split())
    core = OPENBLAS_CORE[level]
    torch_env = all(os.environ.get(k) == want[k] for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA"))
    on = {
        "numpy": not disabled & set(numpy_simd),
        "openblas": os.environ.get("OPENBLAS_CORETYPE") == core and all(b["core"] == core for b in openblas),
        "torch": torch_env and (torch_info is None or torch_info["capability"] == want["ATEN_CPU_CAPABILITY"].upper()),
    }
    if "GLIBC_TUNABLES" in want:
        on["glibc"] = _glibc_masked_at_start(start.get("GLIBC_TUNABLES"))
    return on


def numerics_record() -> dict:
    """Which floating-point path this process runs. ``mode``: ``portable`` or ``avx2`` (every
    library on that level's path), ``native`` (asked for, or no library pinned) or ``mixed`` (the
    libraries in ``unpinned`` on their own: loaded before the pin, e.g. in a Python session
    started without it); ``requested`` (``DOGI_ML_NUMERICS``); ``replaced``: the pinned variables the
    environment held at other values, with those values (:func:`pin_process`); each library's choice; the CPU and
    its best level; thread counts. ``torch`` is null when the run did not load torch."""
    import numba
    import numpy as np
    from numpy._core._multiarray_umath import __cpu_features__

    requested = numerics_mode()
    start = _start_environment()
    numpy_simd = [t for t in _numpy_dispatch() if __cpu_features__.get(t)]
    openblas = _openblas()
    torch_info = None
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch_info = {
            "capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "version": torch.__version__,
        }
    level = "portable" if requested == "native" else requested
    on = _on_level(level, numpy_simd, openblas, torch_info, start)
    unpinned = [lib for lib, ok in on.items() if not ok]
    if requested == "native" or len(unpinned) == len(on):
        mode = "native"
    else:
        mode = "mixed" if unpinned else level
    name, _ = _host_cpu()
    return {
        "mode": mode,
        "requested": requested,
        "unpinned": unpinned if mode == "mixed" else [],
        "replaced": replaced_settings(),
        "cpu": name,
        "cpu_best": cpu_best(),
        "torch": torch_info,
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "numpy_simd": numpy_simd,
        "numpy": np.__version__,
        "openblas": openblas,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES") if start.get("GLIBC_TUNABLES") else None,
        "numba_cpu": numba.config.CPU_NAME or name,
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
    }


def mlflow_tags(record: dict | None = None) -> dict[str, str]:
    """The record as flat MLflow tags (``numerics.mode``, ``numerics.torch.capability``, ...)."""
    record = numerics_record() if record is None else record
    out = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update({f"numerics.{key}.{k}": str(v) for k, v in value.items()})
        else:
            out[f"numerics.{key}"] = json.dumps(value) if isinstance(value, list) else str(value)
    return out


# -- the digest --------------------------------------------------------------------------------
def _outcome(value):
    if isinstance(value, dict):
        return {k: _outcome(v) for k, v in value.items() if k != "numerics" and not TIMING_KEYS.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_outcome(v) for v in value]
    return value


def outcome_digest(result: dict) -> str:
    """16 hex digits of SHA-256 over ``result`` (a result JSON, as a dict) without the keys that
    measure time (:data:`TIMING_KEYS`) and without ``numerics``: floats enter as their shortest
    exact decimal (``repr``), so one different bit anywhere gives another digest."""
    text = json.dumps(_outcome(result), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _main(argv: list[str]) -> int:
    if argv[:1] == ["env"] and len(argv) <= 2:
        level = argv[1] if len(argv) == 2 else numerics_mode()
        if level not in ("portable", "avx2"):
            print(f"usage: python -m dogi_ml.determinism env [portable|avx2] (not {level!r})", file=sys.stderr)
            return 2
        for key, value in pinned_environment(level).items():
            print(f"export {key}={json.dumps(value)}")
        print(f"export {MODE_ENV}={level}")
        return 0
    if argv[:1] == ["record"] and len(argv) == 1:
        print(json.dumps(numerics_record(), indent=2))
        return 0
    if argv[:1] == ["digest"] and len(argv) > 1:
        for path in argv[1:]:
            print(f"{outcome_digest(json.loads(Path(path).read_text()))}  {path}")
        return 0
    print("usage: python -m dogi_ml.determinism env [portable|avx2] | record | digest RESULT.json...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
