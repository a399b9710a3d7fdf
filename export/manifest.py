"""The export directory's manifest, and the loader that checks it.

An export directory holds ``manifest.json`` and the artefacts it lists (each with its SHA-256):
the C header, the ONNX files, ``quantized.npz`` (the deployed model's integer arrays) and the
parity report. :func:`load_export` refuses a directory without a manifest, an unknown format,
a missing or altered artefact, and features of the wrong width, each with a message that says
which and why.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
from pathlib import Path

import numpy as np

from .quantize import ExportError, InputQuantizer, QuantizedMLP, as_int_features

MANIFEST = "manifest.json"
FORMAT = "dogi_ml-export"
FORMAT_VERSION = 2  # 2: Q8 log2 and multiply-shift input rules (the standardisation is in layer 0)
INPUT_RULES_TEXT = (
    "Per feature f, from the raw int64 feature v: g = v for a 'linear' rule; for a 'log2' rule "
    "g = sign(v) * log2_q8(1 + |v|) (1 + |v| computed in unsigned 64-bit arithmetic), where "
    "log2_q8(u) = 256 * n + T[(m9 + 1) >> 1] with n = floor(log2 u), m9 the 9 bits below u's leading "
    "one, T[i] = round(256 * log2(1 + i/256)) for i = 0..256. Then code = ((clamp(g, lo, hi) - lo) * "
    "mul >> shift) - qmax in unsigned 64-bit arithmetic (the difference is non-negative, the "
    "product below 2^63), a value in [-qmax, qmax]. code * scale + zero approximates the model's "
    "standardised input; the first layer's integer weights and bias already include scale and zero."
)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def versions() -> dict:
    """Versions of the tools that produced an export."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("torch", "onnx", "onnxruntime", "skl2onnx", "onnxmltools", "lightgbm", "sklearn", "numba"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent or broken optional package
            out[mod] = None
    try:
        from importlib.metadata import version

        out["dogi_ml"] = version("dogi_ml")
    except Exception:  # noqa: BLE001
        out["dogi_ml"] = None
    return out


def write_manifest(
    out_dir: str | Path,
    qmodel,
    model,
    artifacts: dict,
    *,
    source: dict | None = None,
    bounds=None,
    metrics: dict | None = None,
    header_prefix: str = "dogi",
    firmware: dict | None = None,
) -> Path:
    """Write ``manifest.json`` for the artefacts ``{role: file name}`` already in ``out_dir``.
    ``bounds``: the classes' invalidation-time ranges (BIRs) when the labels have them;
    ``firmware``: per firmware target, what :func:`dogi_ml.export.firmware.firmware_check`
    measured (sizes, stack, RAM, instructions per block)."""
    out_dir = Path(out_dir)
    arts = {}
    for role, name in artifacts.items():
        p = out_dir / name
        if not p.exists():
            raise ExportError(f"artefact {role} ({p}) was not written")
        arts[role] = {"path": name, "sha256": sha256(p), "bytes": p.stat().st_size}
    feature_names = list(getattr(qmodel, "feature_names", None) or qmodel.inputs.feature_names)
    kind = qmodel.kind
    if kind in ("mlp", "gru"):
        inputs = {**qmodel.inputs.to_dict(), "rules_text": INPUT_RULES_TEXT, "log2_table_bits": 8, "raw_clamp": 1 << 62}
    else:
        inputs = {
            "feature_names": feature_names,
            "rules_text": "raw int64 features, compared with int64 thresholds (x <= threshold goes left); no scaling",
        }
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "model": {
            "name": model.name,
            "deployed": kind,
            "params": model.params,
            "sequence": bool(model.sequence),
            "n_parameters": int(model.n_parameters()),
        },
        "features": {
            "order": feature_names,
            "count": len(feature_names),
            "dtype": "int64",
            "scaler": model.scaler.to_dict(),
        },
        "inputs": inputs,
        "classes": {"names": list(qmodel.class_names), "count": int(qmodel.n_classes), "bounds": bounds},
        "quantization": qmodel.params_dict(),
        "c_api": {"prefix": header_prefix, "header": artifacts.get("header")},
        "artifacts": arts,
        "source": source or {},
        "metrics": metrics or {},
        "versions": versions(),
    }
    if firmware:
        manifest["firmware"] = {
            t: {
                k: fw[k]
                for k in (
                    "runs_on",
                    "bit_exact",
                    "vectors",
                    "text_bytes",
                    "rodata_bytes",
                    "data_bytes",
                    "bss_bytes",
                    "stack_high_water_bytes",
                    "ram_bytes",
                    "instructions_per_block",
                    "libgcc_helpers",
                    "compile",
                    "qemu",
                )
            }
            for t, fw in firmware.items()
        }
    path = out_dir / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, default=_json_default))
    return path


def _json_default(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


class ExportedModel:
    """A loaded, verified export directory."""

    def __init__(self, directory: Path, manifest: dict, qmodel):
        self.directory = directory
        self.manifest = manifest
        self.qmodel = qmodel

    @property
    def feature_names(self) -> list:
        return list(self.manifest["features"]["order"])

    @property
    def n_features(self) -> int:
        return int(self.manifest["features"]["count"])

    def artifact(self, role: str) -> Path:
        if role not in self.manifest["artifacts"]:
            raise ExportError(
                f"{self.directory}: the export has no {role} artefact (has: {', '.join(self.manifest['artifacts'])})"
            )
        return self.directory / self.manifest["artifacts"][role]["path"]

    def _x(self, X):
        X = np.asarray(X)
        if X.ndim < 2 or X.shape[-1] != self.n_features:
            raise ExportError(
                f"wrong feature count: this model takes {self.n_features} features "
                f"({', '.join(self.feature_names)}) per row, got shape {X.shape}"
            )
        return as_int_features(X, self.n_features)

    def predict(self, X) -> np.ndarray:
        """Classes of raw int64 features with the deployed integer model."""
        return self.qmodel.predict(self._x(X))

    def logits_int(self, X) -> np.ndarray:
        return self.qmodel.logits_int(self._x(X))

    def kernel_args(self) -> tuple:
        """Arrays for :mod:`dogi_ml.export.numba_kernel` (MLP exports only)."""
        if self.qmodel.kind != "mlp":
            raise ExportError(f"the Numba kernel runs the int8 MLP; this export is {self.qmodel.kind}")
        return self.qmodel.kernel_args()


def load_export(path: str | Path) -> ExportedModel:
    """Load and verify an export directory (or its manifest.json)."""
    p = Path(path)
    directory = p.parent if p.name == MANIFEST else p
    if not directory.exists():
        raise ExportError(f"export directory not found: {directory}")
    mpath = directory / MANIFEST
    if not mpath.exists():
        raise ExportError(
            f"missing manifest: {mpath} does not exist; {directory} is not a dogi_ml export "
            "(write one with: python -m dogi_ml export +workload=NAME model=mlp)"
        )
    try:
        manifest = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ExportError(f"corrupted manifest: {mpath} is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(
            f"{mpath}: not a dogi_ml export manifest (format {manifest.get('format') if isinstance(manifest, dict) else None!r})"
        )
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ExportError(
            f"{mpath}: format version {manifest.get('format_version')} is not supported "
            f"(this dogi_ml reads version {FORMAT_VERSION}); re-export the model"
        )
    for key in ("features", "classes", "artifacts", "quantization", "model"):
        if key not in manifest:
            raise ExportError(f"{mpath}: manifest lacks the {key!r} section")
    for role, art in manifest["artifacts"].items():
        f = directory / art["path"]
        if not f.exists():
            raise ExportError(f"missing artefact: {role} file {f} listed in the manifest does not exist")
        digest = sha256(f)
        if digest != art["sha256"]:
            raise ExportError(
                f"corrupted artefact: {role} file {f} has SHA-256 {digest[:12]}..., the manifest "
                f"says {art['sha256'][:12]}... (modified or truncated; re-export)"
            )
    names = manifest["features"]["order"]
    if len(names) != manifest["features"]["count"]:
        raise ExportError(
            f"{mpath}: feature count {manifest['features']['count']} does not match the {len(names)} feature names"
        )
    if "arrays" not in manifest["artifacts"]:
        raise ExportError(f"{mpath}: no 'arrays' artefact (quantized.npz) to load the model from")
    try:
        arrays = dict(np.load(directory / manifest["artifacts"]["arrays"]["path"]))
    except Exception as exc:  # noqa: BLE001 - numpy raises several types for bad files
        raise ExportError(f"corrupted artefact: cannot read the model arrays ({exc})") from exc
    kind = manifest["model"]["deployed"]
    classes = manifest["classes"]["names"]
    qp = manifest["quantization"]
    try:
        if kind == "mlp":
            q = QuantizedMLP.from_arrays(InputQuantizer.from_dict(manifest["inputs"]), qp, arrays, classes)
        elif kind == "gru":
            from .gru import QuantizedGRU

            q = QuantizedGRU.from_arrays(InputQuantizer.from_dict(manifest["inputs"]), qp, arrays, classes)
        elif kind == "trees":
            from .trees import IntTreeEnsemble

            q = IntTreeEnsemble.from_arrays(qp, arrays, classes, names)
        else:
            raise ExportError(f"{mpath}: unknown deployed model kind {kind!r}")
    except KeyError as exc:
        raise ExportError(f"{mpath}: the model arrays lack {exc} (the export is incomplete)") from exc
    if q.n_features != len(names):
        raise ExportError(f"{mpath}: the model takes {q.n_features} features, the manifest lists {len(names)}")
    return ExportedModel(directory, manifest, q)
