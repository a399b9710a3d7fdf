"""The exported integer header inside an out-of-tree Linux kernel module (``kmod/``): kbuild
against the guest kernel's headers (Debian's ``linux-headers-<version>``), loaded in the QEMU
guest, where it classifies a fixed set of feature vectors at init and prints them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from .harness import HarnessError, source_dir

LINE = re.compile(r"DOGI-KMOD (\d+) (-?\d+)((?: -?\d+)*)\s*$")
INT64_MIN = -(2**63)


def kernel_version(kernel: str | Path) -> str:
    """``6.1.0-56-cloud-amd64`` from ``.../vmlinuz-6.1.0-56-cloud-amd64``."""
    return Path(kernel).name.removeprefix("vmlinuz-")


def headers_dir(version: str) -> Path | None:
    """The kbuild tree for ``version`` (``/lib/modules/<v>/build`` or ``/usr/src/linux-headers-<v>``)."""
    for d in (Path(f"/lib/modules/{version}/build"), Path(f"/usr/src/linux-headers-{version}")):
        if (d / "Makefile").exists():
            return d
    return None


def _c_int64(v: int) -> str:
    return "(-9223372036854775807LL - 1)" if v == INT64_MIN else f"{v}LL"


def vectors_header(X: np.ndarray) -> str:
    X = np.asarray(X, np.int64)
    rows = ",\n".join("    {" + ", ".join(_c_int64(int(v)) for v in row) + "}" for row in X)
    return (
        f"#define DOGI_KMOD_N {X.shape[0]}\n"
        f"static const int64_t dogi_kmod_x[DOGI_KMOD_N][DOGI_N_FEATURES] = {{\n{rows}\n}};\n"
    )


def build_module(header: str | Path, X: np.ndarray, version: str, out_dir: str | Path) -> Path:
    """Compile ``dogi_kmod.ko`` for kernel ``version`` with ``header`` (an exported MLP header,
    prefix ``dogi``) and the feature rows ``X``; the module's path."""
    kdir = headers_dir(version)
    if kdir is None:
        raise HarnessError(
            f"no kernel build tree for {version}", f"apt-get install --no-install-recommends linux-headers-{version}"
        )
    if shutil.which("make") is None:
        raise HarnessError("make is not installed", "apt-get install make")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("dogi_kmod.c", "Kbuild", "stdint.h"):
        shutil.copy(source_dir() / "kmod" / name, out / name)
    shutil.copy(header, out / "dogi_model.h")
    (out / "dogi_vectors.h").write_text(vectors_header(X))
    proc = subprocess.run(["make", "-C", str(kdir), f"M={out}", "modules"], capture_output=True, text=True)
    ko = out / "dogi_kmod.ko"
    if proc.returncode != 0 or not ko.exists():
        raise HarnessError(f"kbuild of the header module failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    warnings = [ln for ln in proc.stderr.splitlines() if "warning:" in ln]
    if warnings:
        raise HarnessError("the header module builds with warnings:\n" + "\n".join(warnings[:20]))
    return ko


def parse_log(log: str) -> dict[int, tuple[int, list[int]]]:
    """``{row: (class, logits)}`` from the module's ``DOGI-KMOD`` lines in a console log."""
    out = {}
    for line in log.splitlines():
        m = LINE.search(line)
        if m:
            out[int(m.group(1))] = (int(m.group(2)), [int(x) for x in m.group(3).split()])
    return out


def build_from_export(export_dir: str | Path, X: np.ndarray, version: str, out_dir: str | Path):
    """Verify an export directory (manifest, SHA-256 of every artefact: ``load_export``), check
    that its header is an int8 MLP with the manifest's feature and class counts and that ``X`` has
    that many columns, then build the module; ``(module path, the verified export)``, whose
    ``logits_int`` is the Python integer reference."""
    from dogi_ml.export.manifest import load_export

    exp = load_export(export_dir)
    if exp.qmodel.kind != "mlp":
        raise HarnessError(
            f"{export_dir}: the kernel module runs the int8 MLP header, this export is {exp.qmodel.kind}"
        )
    header = exp.artifact("header")
    text = header.read_text()
    for name, want in (("N_FEATURES", exp.n_features), ("N_CLASSES", len(exp.manifest["classes"]["names"]))):
        m = re.search(rf"#define DOGI_{name} (\d+)", text)
        if m is None or int(m.group(1)) != want:
            raise HarnessError(
                f"{header}: the header's DOGI_{name} is {m.group(1) if m else 'missing'}, the manifest says {want}",
                "re-export the model (python -m dogi_ml export ...) with prefix dogi",
            )
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != exp.n_features:
        raise HarnessError(
            f"feature rows of shape {X.shape} for a model of {exp.n_features} features ({', '.join(exp.feature_names)})"
        )
    return build_module(header, X, version, out_dir), exp
