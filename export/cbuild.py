"""Compile a generated header with the system compiler: the strict freestanding check, and a
shared library (the header plus a small driver) called through ctypes for parity and timing."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .c_header import COMPILE_FLAGS
from .quantize import ExportError

CXX_FLAGS = ["-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffreestanding", "-nostdlib", "-c"]


def find_compiler(cxx: bool = False) -> str | None:
    """``$CC``/``$CXX`` or the first of gcc/cc/clang (g++/c++/clang++) on PATH."""
    env = os.environ.get("CXX" if cxx else "CC")
    if env and shutil.which(env):
        return shutil.which(env)
    for name in ("g++", "c++", "clang++") if cxx else ("gcc", "cc", "clang"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _need(cxx: bool = False) -> str:
    cc = find_compiler(cxx)
    if cc is None:
        raise ExportError(f"no {'C++' if cxx else 'C'} compiler found (set {'CXX' if cxx else 'CC'} or install gcc)")
    return cc


def strict_compile(header: str | Path, cxx: bool = False, workdir: str | Path | None = None) -> dict:
    """Compile a translation unit that includes ``header`` with the strict freestanding flags
    (``-std=c99 ... -ffreestanding -nostdlib -c``, or C++11 with ``cxx``). Returns ``{ok,
    command, stderr, undefined}``; ``undefined`` lists symbols the object needs from outside
    (none expected: no libc)."""
    cc = _need(cxx)
    header = Path(header).resolve()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        src = Path(tmp) / ("use.cpp" if cxx else "use.c")
        # exported wrappers force code generation for every inline entry point
        src.write_text(f'#include "{header}"\n' + _instantiate(header.read_text()))
        obj = Path(tmp) / "use.o"
        cmd = [cc, *(CXX_FLAGS if cxx else COMPILE_FLAGS), "-O2", str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        undefined = []
        if proc.returncode == 0 and shutil.which("nm"):
            nm = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True)
            undefined = [ln.split()[-1] for ln in nm.stdout.splitlines() if ln.strip()]
    return {
        "ok": proc.returncode == 0,
        "command": " ".join(cmd[:-3] + ["use.c", "-o", "use.o"]),
        "stderr": proc.stderr,
        "undefined": undefined,
    }


def _prefix_of(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#define ") and line.split()[1].endswith("_N_FEATURES"):
            return line.split()[1][: -len("_N_FEATURES")].lower()
    raise ExportError("not a dogi_ml header (no *_N_FEATURES define)")


def _instantiate(text: str) -> str:
    P = _prefix_of(text)
    if f"{P}_gru_step_batch" in text:
        return (
            f"void use_step(const int64_t *f, int16_t *h, int32_t n, int32_t *c, int32_t *l)"
            f" {{ {P}_gru_step_batch(f, h, n, c, l); }}\n"
            f"int32_t use_seq(const int64_t *f, int32_t t, int32_t *l) {{ return {P}_gru_predict_sequence(f, t, l); }}\n"
        )
    return (
        f"void use_batch(const int64_t *f, int32_t n, int32_t *c, int32_t *l) {{ {P}_predict_batch(f, n, c, l); }}\n"
        f"int32_t use_one(const int64_t *f, int32_t *l) {{ return {P}_predict_one(f, l); }}\n"
    )


_DRIVER = r"""
#define _POSIX_C_SOURCE 199309L
#include <time.h>
#include "@HEADER@"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
"""

_DRIVER_FLAT = r"""
void drv_predict_batch(const int64_t *f, int32_t n, int32_t *classes, int32_t *logits)
{ @P@_predict_batch(f, n, classes, logits); }

int32_t drv_predict_one(const int64_t *f, int32_t *logits) { return @P@_predict_one(f, logits); }

/* ns per block of @P@_predict_batch over batches of `batch` rows cycling through f[n] */
double drv_bench(const int64_t *f, int32_t n, int32_t batch, int64_t reps, int32_t *classes)
{
    int64_t r, nb = n / batch;
    double t0 = now_ns(), t1;
    for (r = 0; r < reps; ++r)
        @P@_predict_batch(f + (r % nb) * batch * @PU@_N_FEATURES, batch, classes, 0);
    t1 = now_ns();
    return (t1 - t0) / ((double)reps * batch);
}
"""

_DRIVER_MLP = r"""
void drv_quantize(const int64_t *f, int32_t n, int32_t *codes)
{
    int32_t r;
    for (r = 0; r < n; ++r) @P@_quantize_inputs(f + (int64_t)r * @PU@_N_FEATURES, codes + (int64_t)r * @PU@_N_FEATURES);
}

/* classes of n blocks straight into int8 (a simulator's per-write prediction buffer), no logits */
void drv_classes_i8(const int64_t *f, int64_t n, int8_t *out)
{
    int32_t buf[1024];
    int64_t r, k;
    for (r = 0; r < n; r += 1024) {
        const int32_t m = (int32_t)(n - r < 1024 ? n - r : 1024);
        @P@_predict_batch(f + r * @PU@_N_FEATURES, m, buf, 0);
        for (k = 0; k < m; ++k) out[r + k] = (int8_t)buf[k];
    }
}

/* which batch path @P@_predict_batch takes in this build on this CPU: 2 AVX2, 1 SSE2, 0 portable */
int32_t drv_batch_path(void)
{
#if @PU@_SIMD && @PU@_AVX2
    if (@P@_use_avx2()) return 2;
#endif
    return @PU@_SIMD ? 1 : 0;
}
"""

BATCH_PATHS = {2: "avx2", 1: "sse2", 0: "portable"}

_DRIVER_GRU = r"""
void drv_gru_step_batch(const int64_t *f, int16_t *h, int32_t n, int32_t *classes, int32_t *logits)
{ @P@_gru_step_batch(f, h, n, classes, logits); }

void drv_gru_sequences(const int64_t *f, int32_t n, int32_t t, int32_t *classes, int32_t *logits)
{
    int32_t r;
    for (r = 0; r < n; ++r)
        classes[r] = @P@_gru_predict_sequence(f + (int64_t)r * t * @PU@_N_FEATURES, t,
                                              logits + (int64_t)r * @PU@_N_CLASSES);
}

double drv_bench(const int64_t *f, int32_t n, int32_t batch, int64_t reps, int32_t *classes)
{
    static int16_t h[128 * @PU@_HIDDEN];
    int64_t r, nb = n / batch;
    double t0 = now_ns(), t1;
    if (batch > 128) return -1.0;
    for (r = 0; r < reps; ++r)
        @P@_gru_step_batch(f + (r % nb) * batch * @PU@_N_FEATURES, h, batch, classes, 0);
    t1 = now_ns();
    return (t1 - t0) / ((double)reps * batch);
}
"""


class CModel:
    """A compiled header loaded through ctypes (see :func:`build_shared`)."""

    def __init__(self, lib_path: Path, prefix: str, n_features: int, n_classes: int, kind: str, hidden: int = 0):
        self.path = lib_path
        self.lib = ctypes.CDLL(str(lib_path))
        self.prefix, self.n_features, self.n_classes, self.kind, self.hidden = (
            prefix,
            n_features,
            n_classes,
            kind,
            hidden,
        )
        self.lib.drv_bench.restype = ctypes.c_double

    @staticmethod
    def _p(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    def _x(self, X) -> np.ndarray:
        X = np.ascontiguousarray(X, dtype=np.int64)
        if X.shape[-1] != self.n_features:
            raise ExportError(f"expected {self.n_features} features per row, got shape {X.shape}")
        return X

    def predict_batch(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Classes and int32 logits of raw features ``[n, F]``."""
        X = self._x(X)
        n = X.shape[0]
        classes = np.empty(n, np.int32)
        logits = np.empty((n, self.n_classes), np.int32)
        self.lib.drv_predict_batch(self._p(X), ctypes.c_int32(n), self._p(classes), self._p(logits))
        return classes, logits

    def predict_one(self, x) -> tuple[int, np.ndarray]:
        x = self._x(np.asarray(x).reshape(1, -1))
        logits = np.empty(self.n_classes, np.int32)
        c = self.lib.drv_predict_one(self._p(x), self._p(logits))
        return int(c), logits

    def classes_into(self, X: np.ndarray, out: np.ndarray) -> None:
        """Classes of raw features ``X [n, F]`` (C-contiguous int64) into ``out`` (int8 ``[n]``):
        one ctypes call per batch, nothing allocated, the GIL released while it runs (MLP builds)."""
        if X.dtype != np.int64 or not X.flags.c_contiguous or X.ndim != 2 or X.shape[1] != self.n_features:
            raise ExportError(f"X must be a C-contiguous int64 array [n, {self.n_features}], got {X.dtype} {X.shape}")
        if out.dtype != np.int8 or not out.flags.c_contiguous or out.shape != (X.shape[0],):
            raise ExportError(f"out must be a C-contiguous int8 array of shape ({X.shape[0]},)")
        self.lib.drv_classes_i8(self._p(X), ctypes.c_int64(X.shape[0]), self._p(out))

    @property
    def batch_path(self) -> str | None:
        """The MLP batch path this build takes on this CPU: ``avx2``, ``sse2`` or ``portable``."""
        fn = getattr(self.lib, "drv_batch_path", None)
        return None if fn is None else BATCH_PATHS[int(fn())]

    def codes(self, X) -> np.ndarray:
        X = self._x(X)
        out = np.empty(X.shape, np.int32)
        self.lib.drv_quantize(self._p(X), ctypes.c_int32(X.shape[0]), self._p(out))
        return out

    def gru_step_batch(self, X, h) -> tuple[np.ndarray, np.ndarray]:
        """One GRU step for n blocks; ``h`` (int16 ``[n, hidden]``) is updated in place."""
        X = self._x(X)
        if h.dtype != np.int16 or not h.flags.c_contiguous or h.shape != (X.shape[0], self.hidden):
            raise ExportError(f"h must be a C-contiguous int16 array of shape ({X.shape[0]}, {self.hidden})")
        n = X.shape[0]
        classes = np.empty(n, np.int32)
        logits = np.empty((n, self.n_classes), np.int32)
        self.lib.drv_gru_step_batch(self._p(X), self._p(h), ctypes.c_int32(n), self._p(classes), self._p(logits))
        return classes, logits

    def gru_sequences(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Classes and logits of histories ``[n, T, F]`` from a zero state."""
        X = self._x(X)
        n, t = X.shape[0], X.shape[1]
        classes = np.empty(n, np.int32)
        logits = np.empty((n, self.n_classes), np.int32)
        self.lib.drv_gru_sequences(self._p(X), ctypes.c_int32(n), ctypes.c_int32(t), self._p(classes), self._p(logits))
        return classes, logits

    def bench(self, X, batch: int = 128, min_seconds: float = 0.3) -> float:
        """Nanoseconds per block of the batch entry point (timed inside C)."""
        X = self._x(X)
        if X.shape[0] < batch:
            X = np.ascontiguousarray(np.resize(X, (batch, self.n_features)))
        classes = np.empty(batch, np.int32)

        def run(reps: int) -> float:
            return self.lib.drv_bench(
                self._p(X), ctypes.c_int32(X.shape[0]), ctypes.c_int32(batch), ctypes.c_int64(reps), self._p(classes)
            )

        reps = 16
        while True:  # a repetition count that runs about min_seconds
            ns = run(reps)
            if ns * reps * batch > min_seconds * 1e9 / 4 or reps > 1 << 24:
                break
            reps *= 4
        reps = max(reps, int(min_seconds * 1e9 / max(ns * batch, 1e-3)))
        run(reps)  # warm-up at full length (clock, caches, predictors)
        return float(min(run(reps) for _ in range(3)))


class BackgroundBuild:
    """A header compiled on another thread (``gcc`` runs as a child process, so the caller's
    thread and the simulator keep going): :attr:`model` is the loaded :class:`CModel` once the
    build has finished, ``None`` before (or if it failed: :attr:`error`). :meth:`wait` blocks."""

    def __init__(self, header_text: str, kind: str, n_features: int, n_classes: int, build_dir=None, **kw):
        import threading

        self.model: CModel | None = None
        self.error: Exception | None = None
        self._done = threading.Event()
        d = Path(build_dir) if build_dir else Path(tempfile.gettempdir()) / "dogi_ml_cbuild"
        d.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(header_text.encode()).hexdigest()[:16]
        self.header = d / f"hdr_{key}.h"
        if not self.header.exists():
            tmp = self.header.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(header_text)
            os.replace(tmp, self.header)
        args = (self.header, kind, n_features, n_classes)

        def run():
            try:
                self.model = build_shared(*args, build_dir=d, **kw)
            except Exception as e:  # reported through .error; the caller keeps its fallback
                self.error = e
            finally:
                self._done.set()

        threading.Thread(target=run, name="dogi_ml-cbuild", daemon=True).start()

    def ready(self) -> CModel | None:
        """The compiled model if the build has finished (never blocks)."""
        return self.model if self._done.is_set() else None

    def wait(self) -> CModel:
        """Block until the build ends; the model, or the build's error raised."""
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.model


def build_shared(
    header: str | Path,
    kind: str,
    n_features: int,
    n_classes: int,
    hidden: int = 0,
    opt: str = "-O2",
    extra_flags: tuple = (),
    build_dir: str | Path | None = None,
) -> CModel:
    """Compile ``header`` + a driver into a shared library (cached by content) and load it."""
    cc = _need()
    header = Path(header).resolve()
    text = header.read_text()
    P = _prefix_of(text)
    driver = _DRIVER.replace("@HEADER@", str(header))
    driver += {"gru": _DRIVER_GRU, "mlp": _DRIVER_FLAT + _DRIVER_MLP}.get(kind, _DRIVER_FLAT)
    driver = driver.replace("@PU@", P.upper()).replace("@P@", P)
    flags = [opt, *extra_flags, "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]
    key = hashlib.sha256((text + driver + " ".join(flags) + cc).encode()).hexdigest()[:16]
    out_dir = Path(build_dir) if build_dir else Path(tempfile.gettempdir()) / "dogi_ml_cbuild"
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"{P}_{key}.so"
    if not lib.exists():
        src = out_dir / f"{P}_{key}.c"
        src.write_text(driver)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([cc, *flags, str(src), "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ExportError(f"compiling {header.name} failed:\n{proc.stderr.strip()}")
        os.replace(tmp, lib)
    return CModel(lib, P, n_features, n_classes, kind, hidden)
