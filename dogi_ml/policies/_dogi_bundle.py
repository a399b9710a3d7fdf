"""DOGI's deployment bundle: what a frozen copy of a DOGI run needs to place writes, in the
simulator (:mod:`dogi_ml.policies.dogi_frozen`) and in the ZNS harness's C (``dogi_ml/zns/dogi_place.h``);
and the hybrid's (``scheme: hybrid``, :mod:`dogi_ml.policies.hybrid_frozen`, ``dogi_ml/zns/hybrid_place.h``),
the same bundle with the hybrid's tables instead of DOGI's survivor and victim settings.

A bundle is an export directory (:mod:`dogi_ml.export.manifest`: ``manifest.json``, the int8
MLP's C header ``dogi_model.h``, ``quantized.npz``) with two more artefacts, both listed in the
manifest with their SHA-256:

* ``deploy.json``: the frozen configuration: the features (names, window, chunk), the hot
  threshold ``mu`` (DOGI's value at the end of the run, no longer adapted), the categories'
  groups (``cat2group``, 1..N), per group of the compact layout (0 = G_hot, 1..N = G1..GN,
  N+1 = G_frzn) its expiry age (``null``: none) and whether it is a fallback-victim group, the
  Frozen Filter's clock and the fallback victim score;
* ``deploy.h``: the same numbers as C constants, compiled into the harness with the model header.

A hybrid bundle (``scheme: hybrid``) keeps the features, ``mu``, the group count, ``cat2group``
(the class -> group table the planner's thresholds fold into: each class's lifetime centre's
bucket, the group the final plan gives that bucket), the groups' expiry ages, the Frozen Filter's
clock and the capacity, and adds the groups' upper bounds ``group_hi`` (blocks), the relocation
table ``reloc_dest`` (per class and age-grid column ``age_grid``: the destination group of a
survivor, ``-1`` where the class has no remaining-lifetime estimate and the age stands for it),
``reloc_floor``, ``frozen_filter``, ``expiry_victims`` and the victim rule ``victim_rule``. Every
value is an integer (the rule a name): the placement runs without floating point.

A hybrid count bundle (``lifetimes: counts``; ``model``, the default, is the above) places the
non-hot user writes and the survivors by each LBA's decayed write count instead of the class:
it adds the counts' half-life ``count_halflife_blocks`` and ``count_total_inf`` (null: no decay),
the Q16 power tables ``count_pow`` (fractions of a half-life: high byte, low byte), the buckets' upper bounds ``bucket_hi``, the final plan's
``bucket2group`` and ``relocation`` (``predicted``: by the count estimate, or ``age``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dogi_ml.export.integer import ExportError

FORMAT = "dogi_ml-deploy"
VERSION = 1
#: what a bundle deploys: DOGI's frozen placement, or the hybrid's (policies/hybrid.py)
SCHEMES = ("dogi", "hybrid")
DEPLOY = "deploy.json"
DEPLOY_HEADER = "deploy.h"
MODEL_HEADER = "dogi_model.h"
N_CAT = 10
#: features the C harness computes per write (dogi_place.h), in dogi_ml.features.extract's order
C_FEATURES = ("lba", "prev_lba", "freq", "chunk_freq", "recency_freq", "latest_inv", "write_count")
#: the command that writes a bundle (named by the errors of a run that lacks one)
WRITE_BUNDLE = "python -m dogi_ml replay mode=bundle +workload=NAME policy=dogi policy.params.deployed=int8 bundle=DIR"
#: (``++``: conf/policy/hybrid.yaml lists no ``deployed``, the hybrid's loop runs the float model)
WRITE_HYBRID_BUNDLE = WRITE_BUNDLE.replace("policy=dogi policy.params.", "policy=hybrid ++policy.params.")
#: where a hybrid bundle's lifetimes come from: its int8 MLP's class, or per-LBA write counts
LIFETIMES = ("model", "counts")
#: a count bundle's fixed point: a count of one write (Q16)
COUNT_ONE = 1 << 16
#: its power table: two halves of 256 entries, 2^(-i/256) for the fraction of a half-life's high
#: byte and 2^(-j/65536) for its low byte, in Q16, each starting at 1.0
COUNT_POW_STEPS = 256
COUNT_POW = 2 * COUNT_POW_STEPS
#: a count bundle's relocation of a survivor: its count estimate, or its age
COUNT_RELOCATION = ("predicted", "age")
#: the keys each scheme adds to the common ones
_SCHEME_KEYS = {
    "dogi": ("group_final", "final_greedy"),
    "hybrid": ("group_hi", "age_grid", "reloc_dest", "reloc_floor", "frozen_filter", "expiry_victims", "victim_rule"),
}
_C_INDEX = {"lba": 0, "prev_lba": 1, "freq": 2, "chunk_freq": 3, "recency_freq": 4, "latest_inv": 5, "write_count": 11}


class BundleError(ExportError):
    """A deployment bundle that is missing, altered or does not fit the run."""


@dataclass
class Bundle:
    directory: Path
    deploy: dict
    exported: object  # dogi_ml.export.manifest.ExportedModel

    @property
    def qmodel(self):
        return self.exported.qmodel

    @property
    def n_intermediate(self) -> int:
        return int(self.deploy["n_intermediate"])

    @property
    def n_groups(self) -> int:
        return self.n_intermediate + 2

    @property
    def scheme(self) -> str:
        return scheme_of(self.deploy)

    def path(self, role: str) -> Path:
        return self.exported.artifact(role)

    def feature_columns(self) -> np.ndarray:
        """Indices of the bundle's features in :data:`dogi_ml.features.extract.FEATURES`."""
        return np.array([_C_INDEX[f] for f in self.deploy["features"]], np.int64)


def scheme_of(d: dict) -> str:
    """The scheme a configuration deploys (bundles written before the hybrid's have no key: DOGI)."""
    return d.get("scheme", "dogi")


def write_command(scheme: str) -> str:
    return WRITE_HYBRID_BUNDLE if scheme == "hybrid" else WRITE_BUNDLE


def check_deploy(d: dict, where: str = "deploy.json") -> dict:
    """``d`` if it is a complete, consistent frozen configuration; else a :class:`BundleError`."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        got = f"format {d.get('format')!r}" if isinstance(d, dict) else f"a JSON {type(d).__name__}"
        raise BundleError(f"{where}: not a DOGI deployment configuration ({got}); re-export the bundle")
    if d.get("version") != VERSION:
        raise BundleError(
            f"{where}: version {d.get('version')} is not supported (this dogi_ml reads {VERSION}); re-export"
        )
    scheme = scheme_of(d)
    if scheme not in SCHEMES:
        raise BundleError(f"{where}: scheme {scheme!r} is not one of {', '.join(SCHEMES)}; re-export the bundle")
    need = (
        "features", "feature_window", "feature_chunk_blocks", "mu", "n_intermediate", "cat2group",
        "group_expiry", "frozen_clock", "capacity_blocks", *_SCHEME_KEYS[scheme],
    )  # fmt: skip
    missing = [k for k in need if k not in d]
    if missing:
        raise BundleError(f"{where}: lacks {', '.join(missing)} (an incomplete bundle; re-export it)")
    bad = [f for f in d["features"] if f not in C_FEATURES]
    if bad:
        raise BundleError(
            f"{where}: features {bad} are not computed by the ZNS harness; use features from {C_FEATURES}"
        )
    n = int(d["n_intermediate"])
    if not 1 <= n <= N_CAT:
        raise BundleError(f"{where}: n_intermediate must lie in [1, {N_CAT}], got {n}")
    if len(d["cat2group"]) != N_CAT or any(not 1 <= int(g) <= n for g in d["cat2group"]):
        raise BundleError(f"{where}: cat2group must map the {N_CAT} categories to groups 1..{n}, got {d['cat2group']}")
    per_group = ("group_expiry", *(k for k in ("group_final", "group_hi") if k in _SCHEME_KEYS[scheme]))
    for key in per_group:
        if len(d[key]) != n + 2:
            raise BundleError(f"{where}: {key} needs {n + 2} entries (G_hot, G1..G{n}, G_frzn), got {len(d[key])}")
    for key in ("feature_window", "feature_chunk_blocks", "frozen_clock", "capacity_blocks"):
        if int(d[key]) < 1:
            raise BundleError(f"{where}: {key} must be >= 1, got {d[key]}")
    if int(d["mu"]) < 0:
        raise BundleError(f"{where}: mu must be >= 0, got {d['mu']}")
    if scheme == "hybrid":
        _check_hybrid(d, n, where)
    return d


def _check_hybrid(d: dict, n: int, where: str) -> None:
    """The hybrid's tables: increasing integer bounds of the bounded groups, an increasing age grid,
    one relocation row per class with a group (or -1) per grid column, a known victim rule."""
    hi = d["group_hi"][1:n]
    if any(not isinstance(b, int) for b in hi) or any(b >= c for b, c in zip(hi, hi[1:])):
        raise BundleError(f"{where}: group_hi of G1..G{n - 1} must be increasing integers, got {hi}")
    grid = d["age_grid"]
    if not grid or any(not isinstance(a, int) for a in grid) or any(a > b for a, b in zip(grid, grid[1:])):
        raise BundleError(f"{where}: age_grid must be a non-empty, non-decreasing list of integer ages")
    rows = d["reloc_dest"]
    if len(rows) != N_CAT or any(len(r) != len(grid) or any(g != -1 and not 1 <= g <= n for g in r) for r in rows):
        raise BundleError(
            f"{where}: reloc_dest needs {N_CAT} rows of {len(grid)} groups in 1..{n} (or -1: no estimate)"
        )
    from dogi_ml.sim.victims import GENERAL_VICTIMS

    if d["victim_rule"] not in GENERAL_VICTIMS:
        raise BundleError(f"{where}: victim_rule {d['victim_rule']!r} is not one of {', '.join(GENERAL_VICTIMS)}")
    lifetimes = d.get("lifetimes", "model")
    if lifetimes not in LIFETIMES:
        raise BundleError(
            f"{where}: lifetimes {lifetimes!r} is not one of {', '.join(LIFETIMES)}; re-export the bundle"
        )
    if lifetimes == "counts":
        _check_counts(d, n, where)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_list(d: dict, key: str, size: int, where: str) -> list:
    v = d[key]
    if not isinstance(v, list) or len(v) != size or not all(_is_int(x) for x in v):
        got = f"{len(v)} entries" if isinstance(v, list) else repr(v)
        raise BundleError(f"{where}: {key} must be a list of {size} integers, got {got}; re-export the bundle")
    return v


def _check_counts(d: dict, n: int, where: str) -> None:
    """A count bundle's keys: the counts' decay (half-life and the Q16 total of an endless trace,
    both null without decay), the Q16 power table, the buckets' bounds and groups, the relocation."""
    missing = [
        k for k in ("count_halflife_blocks", "count_total_inf", "count_pow", "bucket_hi", "bucket2group", "relocation")
        if k not in d
    ]  # fmt: skip
    if missing:
        raise BundleError(f"{where}: a count bundle (lifetimes counts) lacks {', '.join(missing)}; re-export it")
    half, total = d["count_halflife_blocks"], d["count_total_inf"]
    if half is not None and (not _is_int(half) or half < 1):
        raise BundleError(f"{where}: count_halflife_blocks must be an integer >= 1 or null (no decay), got {half!r}")
    if half is None and total is not None:
        raise BundleError(
            f"{where}: count_total_inf must be null when count_halflife_blocks is (no decay), got {total!r}"
        )
    if half is not None and (not _is_int(total) or total < 1):
        raise BundleError(
            f"{where}: count_total_inf must be an integer >= 1 (Q16) with count_halflife_blocks {half}, got {total!r}"
        )
    from .hybrid import N_BUCKETS  # the hybrid's lifetime buckets (the last, NEVER_BUCKET, unbounded)

    pw = _int_list(d, "count_pow", COUNT_POW, where)
    for part in (pw[:COUNT_POW_STEPS], pw[COUNT_POW_STEPS:]):
        if part[0] != COUNT_ONE or any(a < b for a, b in zip(part, part[1:])):
            raise BundleError(
                f"{where}: count_pow's two halves of {COUNT_POW_STEPS} must each start at {COUNT_ONE} (1.0 in Q16) "
                "and not increase; re-export the bundle"
            )
    hi = _int_list(d, "bucket_hi", N_BUCKETS - 1, where)
    if hi[0] != 1 or any(a > b for a, b in zip(hi, hi[1:])):  # (buckets 1..3 hold no integer lifetime: 1, 1, 1)
        raise BundleError(f"{where}: bucket_hi must start at 1 and not decrease; re-export the bundle")
    b2g = _int_list(d, "bucket2group", N_BUCKETS, where)
    if any(not 1 <= g <= n for g in b2g):
        raise BundleError(f"{where}: bucket2group must map the {N_BUCKETS} buckets to groups 1..{n}, got {b2g}")
    if d["relocation"] not in COUNT_RELOCATION:
        raise BundleError(
            f"{where}: relocation {d['relocation']!r} is not one of {', '.join(COUNT_RELOCATION)}; re-export the bundle"
        )


def _c_int64s(values) -> str:
    return ", ".join("DL_INF" if e is None else f"INT64_C({int(e)})" for e in values)


def deploy_header(d: dict, n_classes: int) -> str:
    """``deploy.h``: the frozen configuration as C constants (every one is used by dogi_place.h,
    and for a hybrid bundle by hybrid_place.h)."""
    n = int(d["n_intermediate"])
    hybrid = scheme_of(d) == "hybrid"
    expiry = _c_int64s(d["group_expiry"])
    lines = [
        f"/* {'The hybrid' if hybrid else 'DOGI'}'s frozen deployment configuration (generated by "
        "dogi_ml.policies._dogi_bundle; do not edit). */",
        "#ifndef DL_DEPLOY_H",
        "#define DL_DEPLOY_H",
        f"#define DL_N_INTERMEDIATE {n}",
        f"#define DL_N_FEATURES {len(d['features'])}",
        f"#define DL_N_CLASSES {int(n_classes)}",
        f"#define DL_MU INT64_C({int(d['mu'])})",
        f"#define DL_WINDOW INT64_C({int(d['feature_window'])})",
        f"#define DL_CHUNK INT64_C({int(d['feature_chunk_blocks'])})",
        f"#define DL_FROZEN_CLOCK INT64_C({int(d['frozen_clock'])})",
        f"#define DL_CAPACITY INT64_C({int(d['capacity_blocks'])})",
        "/* feature columns: indices into dogi_ml.features.extract.FEATURES */",
        "static const int dl_columns[DL_N_FEATURES] = {" + ", ".join(str(_C_INDEX[f]) for f in d["features"]) + "};",
        "static const int dl_cat2group[10] = {" + ", ".join(str(int(g)) for g in d["cat2group"]) + "};",
        f"static const int64_t dl_expiry[{n + 2}] = {{{expiry}}};",
    ]
    if hybrid:
        grid = d["age_grid"]
        rule = d["victim_rule"]
        rows = ",\n    ".join("{" + ", ".join(str(int(g)) for g in r) + "}" for r in d["reloc_dest"])
        lines += [
            "#define DL_HYBRID 1",
            f"#define HL_RELOC_FLOOR {int(bool(d['reloc_floor']))}",
            f"#define HL_FROZEN_FILTER {int(bool(d['frozen_filter']))}",
            f"#define HL_EXPIRY_VICTIMS {int(bool(d['expiry_victims']))}",
            f'#define HL_RULE "{rule}"',
            f"#define HL_N_AGES {len(grid)}",
            "/* upper bounds of the groups (G_hot, G1..GN, G_frzn; DL_INF: open-ended), blocks */",
            f"static const int64_t hl_group_hi[{n + 2}] = {{{_c_int64s(d['group_hi'])}}};",
            "/* the relocation table's ages (ascending) and, per class and age column, the survivor's group */",
            f"static const int64_t hl_age_grid[HL_N_AGES] = {{{_c_int64s(grid)}}};",
            f"static const int8_t hl_reloc_dest[10][HL_N_AGES] = {{\n    {rows}}};",
        ]
        if d.get("lifetimes", "model") == "counts":
            from .hybrid import N_BUCKETS

            half, total = d["count_halflife_blocks"], d["count_total_inf"]
            lines += [
                "#define HL_COUNTS 1",
                f"#define HL_RELOC_AGE {int(d['relocation'] == 'age')}",
                "/* the counts' half-life (user writes; 0: no decay) and the Q16 decayed writes of an endless trace */",
                f"#define HL_COUNT_HALF INT64_C({int(half or 0)})",
                f"#define HL_COUNT_TOTAL_INF INT64_C({int(total or 0)})",
                "/* Q16: round(65536 * 2^(-i/256)), then round(65536 * 2^(-j/65536)); the buckets' longest lifetimes;",
                "   the final plan's bucket -> group */",
                f"static const int64_t hl_count_pow[{COUNT_POW}] = {{{_c_int64s(d['count_pow'])}}};",
                f"static const int64_t hl_bucket_hi[{N_BUCKETS - 1}] = {{{_c_int64s(d['bucket_hi'])}}};",
                f"static const int hl_bucket2group[{N_BUCKETS}] = {{"
                + ", ".join(str(int(g)) for g in d["bucket2group"])
                + "};",
            ]
        else:
            lines.append("#define HL_COUNTS 0")
    else:
        lines += [
            f"#define DL_FINAL_GREEDY {int(bool(d['final_greedy']))}",
            f"static const int dl_final[{n + 2}] = {{" + ", ".join(str(int(bool(x))) for x in d["group_final"]) + "};",
        ]
    lines += ["#endif", ""]
    return "\n".join(lines)


def write_bundle(out_dir: str | Path, qmodel, model, deploy: dict, source: dict | None = None) -> Path:
    """Write a bundle (the int8 MLP ``qmodel`` of the float ``model``, the frozen ``deploy``
    configuration); returns its directory."""
    from dogi_ml.export.c_header import emit_header
    from dogi_ml.export.manifest import write_manifest

    deploy = check_deploy({"format": FORMAT, "version": VERSION, **deploy}, "the deployment configuration")
    if getattr(qmodel, "kind", None) != "mlp":
        raise BundleError(f"a DOGI bundle holds the int8 MLP, got {getattr(qmodel, 'kind', type(qmodel).__name__)}")
    label = "the hybrid's" if scheme_of(deploy) == "hybrid" else "DOGI"
    if qmodel.n_features != len(deploy["features"]) or qmodel.n_classes != N_CAT:
        raise BundleError(
            f"the model takes {qmodel.n_features} features to {qmodel.n_classes} classes; the configuration has "
            f"{len(deploy['features'])} features and {N_CAT} categories"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MODEL_HEADER).write_text(emit_header(qmodel, "dogi", source=f"{label} deployment bundle"))
    np.savez(out / "quantized.npz", **qmodel.arrays())
    (out / DEPLOY).write_text(json.dumps(deploy, indent=2))
    (out / DEPLOY_HEADER).write_text(deploy_header(deploy, qmodel.n_classes))
    arts = {"header": MODEL_HEADER, "arrays": "quantized.npz", "deploy": DEPLOY, "deploy_header": DEPLOY_HEADER}
    bounds = deploy.get("bounds")
    write_manifest(out, qmodel, model, arts, source=source, bounds=bounds)
    return out


def load_bundle(path: str | Path, scheme: str = "dogi") -> Bundle:
    """Load and check a bundle of ``scheme``: the manifest and every artefact's SHA-256
    (:func:`dogi_ml.export.manifest.load_export`), the configuration, and that the model, the
    configuration and ``deploy.h`` agree."""
    from dogi_ml.export.manifest import load_export

    p = Path(path)
    label = {"dogi": "DOGI", "hybrid": "hybrid"}[scheme]
    if not p.exists():
        raise BundleError(f"{label} bundle not found: {p} (write one with: {write_command(scheme)})")
    exported = load_export(p)
    arts = exported.manifest["artifacts"]
    for role in ("header", "deploy", "deploy_header"):
        if role not in arts:
            raise BundleError(
                f"{exported.directory}: an export, not a DOGI bundle: its manifest lists no {role} artefact"
            )
    deploy = check_deploy(json.loads(exported.artifact("deploy").read_text()), str(exported.artifact("deploy")))
    if scheme_of(deploy) != scheme:
        raise BundleError(
            f"{exported.directory}: a {scheme_of(deploy)} bundle, not a {scheme} one: policy {scheme}_frozen deploys "
            f"a {label} bundle (write one with: {write_command(scheme)})"
        )
    q = exported.qmodel
    if q.kind != "mlp" or q.n_features != len(deploy["features"]):
        raise BundleError(
            f"{exported.directory}: manifest mismatch: the model takes {q.n_features} features, deploy.json lists "
            f"{len(deploy['features'])}"
        )
    if list(exported.feature_names) != list(deploy["features"]):
        raise BundleError(
            f"{exported.directory}: manifest mismatch: the manifest's features {exported.feature_names} are not "
            f"deploy.json's {deploy['features']}"
        )
    if exported.artifact("deploy_header").read_text() != deploy_header(deploy, q.n_classes):
        raise BundleError(f"{exported.directory}: deploy.h does not match deploy.json; re-export the bundle")
    return Bundle(exported.directory, deploy, exported)
