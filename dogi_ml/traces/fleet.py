"""Fleets of volumes as data: one ``.dtr`` per volume plus a Parquet manifest.

A fleet directory holds::

    DIR/fleet.parquet          the manifest, one row per volume (columns: MANIFEST_COLUMNS)
    DIR/volumes/<id>.dtr       each volume's requests (the .dtr v2 format of binfmt.py, CRC32C-checked)

Two things write it: :func:`split_trace` (``python -m dogi_ml ingest ... split=true``) cuts a
multi-volume trace (Alibaba, Tencent, MSR by host and disk, any delimited preset or format, or a
directory of per-volume files) into per-volume ``.dtr`` files in one streaming pass, and
:func:`generate_fleet` (``python -m dogi_ml fleet``, ``conf/fleet.yaml``) draws a synthetic fleet,
optionally also as one Alibaba-format CSV so that the splitter can be checked against it.

API (what other modules build on)::

    read_fleet(path, verify=False) -> list[FleetVolume]   # path: the fleet directory or its .parquet
    read_fleet_table(path) -> pyarrow.Table               # the manifest as written (checked columns)
    fleet_metadata(path) -> dict                          # source, format, generator settings, counts
    write_fleet(out_dir, rows, metadata) -> Path          # rows: dicts with MANIFEST_COLUMNS
    volume_row(volume, dtr_path, fleet_dir) -> dict       # a manifest row from a written .dtr
    file_checksum(path) -> str                            # "crc32c:xxxxxxxx" of a file's bytes
    generate_fleet(out_dir, n_volumes, seed, spec=None, csv=False) -> Path   # the manifest's path
    split_trace(path, fmt, out_dir, volumes=None, skip_malformed=False, ...) -> Path   # the manifest's path

Manifest columns (``MANIFEST_COLUMNS``): ``volume`` (the trace's volume id, a string), ``path``
(the ``.dtr`` relative to the manifest's directory), ``requests``, ``read_requests``,
``write_requests``, ``trim_requests``, ``read_blocks``, ``write_blocks`` (4 KiB blocks written),
``working_set_blocks`` (distinct 4 KiB blocks written), ``traffic_over_wss`` (write_blocks /
working_set_blocks, 0 without writes), ``span_s`` (last stamp - first stamp, seconds),
``read_ratio`` (read requests / requests) and ``checksum`` (CRC32C of the ``.dtr`` file's bytes,
``crc32c:`` and 8 hex digits: the same file gives the same value, a changed one almost surely
another). Every count is the volume's ``Trace.stats()`` (trace.py) after the readers' rules
(dense LBAs, zero-length requests and flushes dropped).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import secrets
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import google_crc32c
import numba as nb
import numpy as np

from dogi_ml.errors import DogiMLError

from .binfmt import read_binary, write_trace
from .trace import BLOCK_SIZE, OP_READ, OP_TRIM, OP_WRITE, Trace, _max_end, remap_dense

MANIFEST_NAME = "fleet.parquet"
VOLUMES_DIR = "volumes"
#: the manifest's version, in its Parquet metadata (key ``dogi_ml.fleet``)
FLEET_VERSION = 1
_META_KEY = b"dogi_ml.fleet"

#: column -> pyarrow type name (kept as strings so this module imports without pyarrow loaded)
MANIFEST_COLUMNS = {
    "volume": "string",
    "path": "string",
    "requests": "int64",
    "read_requests": "int64",
    "write_requests": "int64",
    "trim_requests": "int64",
    "read_blocks": "int64",
    "write_blocks": "int64",
    "working_set_blocks": "int64",
    "traffic_over_wss": "float64",
    "span_s": "float64",
    "read_ratio": "float64",
    "checksum": "string",
}


class FleetFormatError(DogiMLError):
    """A manifest or fleet directory that cannot be used as it is (the message names the file)."""


@dataclass(frozen=True)
class FleetVolume:
    """One manifest row; ``dtr`` is ``path`` resolved against the manifest's directory."""

    volume: str
    path: str
    requests: int
    read_requests: int
    write_requests: int
    trim_requests: int
    read_blocks: int
    write_blocks: int
    working_set_blocks: int
    traffic_over_wss: float
    span_s: float
    read_ratio: float
    checksum: str
    dtr: Path = field(compare=False)


# -- manifest ------------------------------------------------------------------------------------
def _schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in MANIFEST_COLUMNS.items()])


def manifest_path(path: str | Path) -> Path:
    """The manifest of ``path``: a fleet directory (its ``fleet.parquet``) or the file itself."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    if not path.exists():
        raise FileNotFoundError(f"fleet manifest not found: {path}")
    return path


def file_checksum(path: str | Path) -> str:
    """``crc32c:`` and the 8 hex digits of the CRC32C of the file's bytes (read through a memory
    map: no copy of the file, which split_trace has just written and the page cache holds)."""
    import mmap

    crc = 0
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                data = np.frombuffer(mapped, np.uint8)
                for start in range(0, size, 1 << 24):
                    crc = google_crc32c.extend(crc, data[start : start + (1 << 24)])
                del data  # before the map closes
    return f"crc32c:{crc:08x}"


def volume_file_name(volume: str) -> str:
    """A file name for a volume id: the id itself when it is made of letters, digits, ``._-``
    (and does not start with a dot), else a cleaned form plus a hash of the id, so that two ids
    never share a file."""
    if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,100}", volume):
        return f"{volume}.dtr"
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", volume)[:60]
    digest = google_crc32c.value(volume.encode("utf-8"))
    return f"{clean}-{digest:08x}.dtr"


def stats_row(stats: dict) -> dict:
    """The manifest's counts from a ``Trace.stats()`` dict."""
    requests = int(stats["requests"])
    wss = int(stats["wss_blocks"])
    return {
        "requests": requests,
        "read_requests": int(stats["read_requests"]),
        "write_requests": int(stats["write_requests"]),
        "trim_requests": int(stats["trim_requests"]),
        "read_blocks": int(stats["read_blocks"]),
        "write_blocks": int(stats["write_blocks"]),
        "working_set_blocks": wss,
        "traffic_over_wss": float(stats["write_blocks"]) / wss if wss else 0.0,
        "span_s": float(stats["time_span_s"]),
        "read_ratio": int(stats["read_requests"]) / requests if requests else 0.0,
    }


def volume_row(volume: str, dtr_path: str | Path, fleet_dir: str | Path, stats: dict | None = None) -> dict:
    """The manifest row of a written ``.dtr`` (``stats``: its trace's ``stats()``, else read back)."""
    dtr_path, fleet_dir = Path(dtr_path), Path(fleet_dir)
    if stats is None:
        stats = read_binary(dtr_path).stats()
    return {
        "volume": str(volume),
        "path": dtr_path.relative_to(fleet_dir).as_posix(),
        **stats_row(stats),
        "checksum": file_checksum(dtr_path),
    }


def _manifest_column(name: str, values: list):
    """One column of the manifest as a pyarrow array made from its buffers: ``pa.array`` and
    ``Table.from_pylist`` import pandas to look for its types (a third of a CPU second, a tenth
    of a small file's split). Strings must be str, int64 whole numbers, float64 numbers (no
    missing values: every row has every column)."""
    import pyarrow as pa

    kind = MANIFEST_COLUMNS[name]
    if kind == "string":
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"fleet manifest column {name!r} holds a value that is not a string")
        data = [v.encode("utf-8") for v in values]
        offsets = np.zeros(len(data) + 1, np.int32)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        return pa.Array.from_buffers(
            pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
        )
    allowed = (int, np.integer) if kind == "int64" else (int, float, np.integer, np.floating)
    for v in values:
        if not isinstance(v, allowed) or isinstance(v, (bool, np.bool_)):
            raise ValueError(f"fleet manifest column {name!r} holds {v!r} ({type(v).__name__}), not {kind}")
    array = np.asarray(values, kind)
    return pa.Array.from_buffers(getattr(pa, kind)(), len(values), [None, pa.py_buffer(array)])


def write_fleet(out_dir: str | Path, rows: list[dict], metadata: dict | None = None) -> Path:
    """Write ``out_dir/fleet.parquet`` (atomically) from ``rows`` (dicts with every column of
    :data:`MANIFEST_COLUMNS`); ``metadata`` goes into the Parquet metadata as JSON."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, row in enumerate(rows):
        missing = [c for c in MANIFEST_COLUMNS if c not in row]
        if missing:
            raise ValueError(f"fleet manifest row {i} ({row.get('volume')!r}) lacks {missing}")
    columns = [_manifest_column(name, [row[name] for row in rows]) for name in MANIFEST_COLUMNS]
    table = pa.Table.from_arrays(columns, schema=_schema())
    meta = {"version": FLEET_VERSION, **(metadata or {})}
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta, sort_keys=True).encode()})
    out = out_dir / MANIFEST_NAME
    tmp = out.with_name(f"{out.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        pq.write_table(table, tmp)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def read_fleet_table(path: str | Path):
    """The manifest as a ``pyarrow.Table``, its columns and types checked."""
    import pyarrow.parquet as pq

    mpath = manifest_path(path)
    try:
        table = pq.read_table(mpath)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise FleetFormatError(
            f"{mpath}: not a readable Parquet file ({' '.join(str(exc).split())[:200]})",
            "re-run `python -m dogi_ml ingest ... split=true` (or the generator) to rewrite the fleet",
        ) from None
    expected = _schema()
    for name in MANIFEST_COLUMNS:
        if name not in table.column_names:
            raise FleetFormatError(
                f"{mpath}: the manifest has no column {name!r} (columns: {', '.join(table.column_names)})",
                "re-run `python -m dogi_ml ingest ... split=true` to write a current manifest",
            )
        if table.schema.field(name).type != expected.field(name).type:
            raise FleetFormatError(
                f"{mpath}: column {name!r} is {table.schema.field(name).type}, expected {expected.field(name).type}",
                "re-run `python -m dogi_ml ingest ... split=true` to write a current manifest",
            )
    return table


def fleet_metadata(path: str | Path) -> dict:
    """The JSON metadata written with the manifest (source, format, counts, generator settings)."""
    import pyarrow.parquet as pq

    mpath = manifest_path(path)
    raw = (pq.read_schema(mpath).metadata or {}).get(_META_KEY)
    return json.loads(raw) if raw else {}


def read_fleet(path: str | Path, verify: bool = False) -> list[FleetVolume]:
    """The manifest's rows in file order. Every ``path`` must stay inside the fleet directory and
    name an existing file; ``verify=True`` also recomputes each file's checksum."""
    mpath = manifest_path(path)
    root = mpath.parent.resolve()
    table = read_fleet_table(mpath)
    out = []
    seen = set()
    for row in table.to_pylist():
        if row["volume"] in seen:
            raise FleetFormatError(f"{mpath}: volume {row['volume']!r} appears twice", "rewrite the manifest")
        seen.add(row["volume"])
        rel = Path(row["path"])
        dtr = (root / rel).resolve()
        if rel.is_absolute() or root not in dtr.parents:
            raise FleetFormatError(
                f"{mpath}: volume {row['volume']!r} has path {row['path']!r}, outside the fleet directory",
                "paths are relative to the manifest's directory; rewrite the manifest",
            )
        if not dtr.is_file():
            raise FleetFormatError(
                f"{mpath}: volume {row['volume']!r}: {dtr} is missing",
                "copy the fleet directory whole (manifest and volumes/), or re-run the split",
            )
        if verify:
            got = file_checksum(dtr)
            if got != row["checksum"]:
                raise FleetFormatError(
                    f"{dtr}: checksum {got}, the manifest says {row['checksum']} (volume {row['volume']!r})",
                    "the file changed after the split: re-run the split",
                )
        out.append(FleetVolume(**{k: row[k] for k in MANIFEST_COLUMNS}, dtr=dtr))
    return out


# -- synthetic fleets ----------------------------------------------------------------------------
#: the largest log-sd of the spec's log-normals: e^20 is a factor of 5e8 per standard deviation,
#: well past any fleet's spread, and exp(sigma x z) stays finite for any z numpy draws
MAX_LOG_SIGMA = 20.0


@dataclass
class FleetSpec:
    """Distributions a synthetic fleet's volumes are drawn from (each volume's own seed is
    ``(seed, volume index)``, so the first k volumes of a fleet of n are those of a fleet of k).

    - ``wss_blocks``: the volume's address space (4 KiB blocks), log-normal with median
      ``wss_median`` and log-sd ``wss_sigma``, clipped to ``[wss_min, wss_max]``;
    - ``traffic``: blocks written / ``wss_blocks``, log-normal (``traffic_median``,
      ``traffic_sigma``), clipped to ``[traffic_min, traffic_max]``;
    - ``theta``: Zipf skew of the written (and read) addresses, uniform in ``theta_range``
      (0 = uniform);
    - ``read_ratio``: read requests / requests, Beta(``read_alpha``, ``read_beta``);
    - ``burstiness``: the coefficient of variation of inter-arrival times (Gamma-distributed
      gaps: 1 = Poisson, above 1 bursty), uniform in ``burstiness_range``; mean gap log-normal
      (``interval_median_us``, ``interval_sigma``);
    - request sizes: geometric (>= 1 block) with a mean uniform in ``request_blocks_range``,
      at most ``max_request_blocks``.
    """

    wss_median: float = 4096.0
    wss_sigma: float = 1.0
    wss_min: int = 256
    wss_max: int = 65536
    traffic_median: float = 4.0
    traffic_sigma: float = 0.5
    traffic_min: float = 1.0
    traffic_max: float = 32.0
    theta_range: tuple = (0.0, 1.2)
    read_alpha: float = 2.0
    read_beta: float = 3.0
    burstiness_range: tuple = (1.0, 4.0)
    interval_median_us: float = 1000.0
    interval_sigma: float = 0.5
    request_blocks_range: tuple = (1.0, 4.0)
    max_request_blocks: int = 64

    @classmethod
    def from_mapping(cls, cfg) -> FleetSpec:
        """A spec from a mapping (``conf/fleet.yaml``'s ``spec``); unknown keys are an error."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise DogiMLError(
                f"fleet spec: unknown key(s) {unknown}", f"use the keys of conf/fleet.yaml: {', '.join(sorted(known))}"
            )
        spec = cls(**{k: (tuple(v) if isinstance(getattr(cls, k), tuple) else v) for k, v in cfg.items()})
        spec.validate()
        return spec

    def validate(self) -> None:
        def number(key, lo=None, above=None):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise DogiMLError(f"spec.{key}={v!r} is not a finite number", f"give a number for spec.{key}")
            if (lo is not None and v < lo) or (above is not None and v <= above):
                bound = f">= {lo}" if lo is not None else f"above {above}"
                raise DogiMLError(f"spec.{key}={v} must be {bound}", f"give spec.{key} {bound}")

        def pair(key, lo=None, above=None):
            v = getattr(self, key)
            if not (isinstance(v, tuple) and len(v) == 2):
                raise DogiMLError(f"spec.{key}={v!r} is not a [low, high] pair", f"give spec.{key}=[low,high]")
            for x in v:
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                    raise DogiMLError(f"spec.{key}={list(v)} holds a non-number", f"give spec.{key}=[low,high]")
            if v[0] > v[1] or (lo is not None and v[0] < lo) or (above is not None and v[0] <= above):
                bound = f">= {lo}" if lo is not None else f"above {above}"
                raise DogiMLError(
                    f"spec.{key}={list(v)} needs low <= high, both {bound}", f"give spec.{key}=[low,high]"
                )

        for key in ("wss_median", "traffic_median", "interval_median_us", "read_alpha", "read_beta"):
            number(key, above=0)
        for key in ("wss_sigma", "traffic_sigma", "interval_sigma"):
            number(key, lo=0)
            if getattr(self, key) > MAX_LOG_SIGMA:  # exp(sigma x z) overflowed: OverflowError's traceback
                raise DogiMLError(
                    f"spec.{key}={getattr(self, key)} is above {MAX_LOG_SIGMA} (a factor e^{MAX_LOG_SIGMA:g} "
                    "per standard deviation)",
                    f"give spec.{key} <= {MAX_LOG_SIGMA}",
                )
        number("wss_min", lo=1)
        number("wss_max", lo=1)
        number("max_request_blocks", lo=1)
        number("traffic_min", above=0)
        number("traffic_max", above=0)  # a string ended in TypeError's traceback at the comparison below
        for key in ("wss_min", "wss_max", "max_request_blocks"):
            if not isinstance(getattr(self, key), int):
                raise DogiMLError(f"spec.{key}={getattr(self, key)!r} is not a whole number", f"give spec.{key}=N")
        if self.wss_max < self.wss_min:
            raise DogiMLError(
                f"spec.wss_max={self.wss_max} < spec.wss_min={self.wss_min}", "give spec.wss_max >= spec.wss_min"
            )
        if self.traffic_max < self.traffic_min:
            raise DogiMLError(
                f"spec.traffic_max={self.traffic_max} < spec.traffic_min={self.traffic_min}",
                "give spec.traffic_max >= spec.traffic_min",
            )
        pair("theta_range", lo=0)
        pair("burstiness_range", above=0)
        pair("request_blocks_range", lo=1)


def volume_params(spec: FleetSpec, seed: int, index: int) -> dict:
    """The drawn parameters of volume ``index`` (its own stream: ``(seed, index)``)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(index), 0])))
    wss = round(spec.wss_median * math.exp(spec.wss_sigma * rng.standard_normal()))
    wss = int(min(max(wss, spec.wss_min), spec.wss_max))
    traffic = spec.traffic_median * math.exp(spec.traffic_sigma * rng.standard_normal())
    traffic = float(min(max(traffic, spec.traffic_min), spec.traffic_max))
    return {
        "wss_blocks": wss,
        "traffic": traffic,
        "theta": float(rng.uniform(*spec.theta_range)),
        "read_ratio": float(rng.beta(spec.read_alpha, spec.read_beta)),
        "burstiness": float(rng.uniform(*spec.burstiness_range)),
        "mean_interval_us": float(spec.interval_median_us * math.exp(spec.interval_sigma * rng.standard_normal())),
        "mean_request_blocks": float(rng.uniform(*spec.request_blocks_range)),
    }


def generate_volume(spec: FleetSpec, seed: int, index: int) -> tuple[dict, Trace]:
    """(parameters, trace) of synthetic volume ``index``: requests in the volume's original
    address space (not yet remapped), stamps in µs from 0."""
    from .generators import ZipfSampler

    p = volume_params(spec, seed, index)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(index), 1])))
    wss = p["wss_blocks"]
    cap = min(spec.max_request_blocks, wss)
    target_blocks = max(1, round(wss * p["traffic"]))

    def sizes(n):
        return np.minimum(rng.geometric(1.0 / p["mean_request_blocks"], n), cap).astype(np.int64)

    # write requests until the written blocks reach the target (the last one cut to fit)
    write_sizes = sizes(int(target_blocks / p["mean_request_blocks"] * 1.5) + 16)
    ends = np.cumsum(write_sizes)
    while ends[-1] < target_blocks:  # sizes capped well below their mean: draw more
        write_sizes = np.concatenate([write_sizes, sizes(write_sizes.size)])
        ends = np.cumsum(write_sizes)
    n_writes = int(np.searchsorted(ends, target_blocks) + 1)
    write_sizes = write_sizes[:n_writes].copy()
    write_sizes[-1] -= int(ends[n_writes - 1]) - target_blocks
    r = p["read_ratio"]
    n_reads = round(n_writes * r / (1.0 - r)) if r < 1.0 else 0
    n = n_writes + n_reads
    op = np.full(n, OP_WRITE, np.uint8)
    op[rng.permutation(n)[:n_reads]] = OP_READ
    nblocks = np.empty(n, np.int64)
    nblocks[op == OP_WRITE] = write_sizes
    nblocks[op == OP_READ] = sizes(n_reads)
    starts = ZipfSampler(wss, p["theta"], seed=int(rng.integers(2**63))).sample(n)
    lba = np.minimum(starts, wss - nblocks)  # a request stays inside the volume
    shape = 1.0 / p["burstiness"] ** 2  # Gamma gaps: coefficient of variation = burstiness
    gaps = rng.gamma(shape, p["mean_interval_us"] / shape, n)
    clock = np.floor(np.cumsum(gaps))
    if not clock[-1] < 2.0**63:  # past int64 the cast gave every stamp -2^63, without a word
        raise DogiMLError(
            f"fleet: volume {index}'s last stamp ({clock[-1]:.3g} µs, a mean gap of {p['mean_interval_us']:.3g} µs) "
            "does not fit in 64 bits",
            "lower spec.interval_median_us or spec.interval_sigma",
        )
    ts = clock.astype(np.int64)
    trace = Trace(ts, lba, nblocks.astype(np.int32), op, np.zeros(n, np.int32), volumes=[str(index)], name=str(index))
    return p, trace


def generate_fleet(
    out_dir: str | Path,
    n_volumes: int,
    seed: int = 0,
    spec: FleetSpec | None = None,
    csv: bool = False,
) -> Path:
    """Write a synthetic fleet of ``n_volumes`` volumes (ids ``"0"``.. ``"n-1"``) to ``out_dir``:
    ``volumes/<id>.dtr`` and ``fleet.parquet`` (the layout :func:`split_trace` writes); with
    ``csv=True`` also ``fleet.alibaba.csv``, every volume's requests interleaved by time stamp
    in Alibaba's format (``device_id,opcode,offset,length,timestamp``, bytes and µs), whose split
    gives the same per-volume arrays. Returns the manifest's path."""
    if isinstance(n_volumes, bool) or not isinstance(n_volumes, int) or n_volumes < 1:
        raise DogiMLError(f"n_volumes={n_volumes!r} is not a whole number >= 1", "give e.g. n_volumes=100")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DogiMLError(f"seed={seed!r} is not a whole number >= 0", "give e.g. seed=0")
    spec = spec or FleetSpec()
    spec.validate()
    out_dir = Path(out_dir)
    vol_dir = out_dir / VOLUMES_DIR
    vol_dir.mkdir(parents=True, exist_ok=True)
    rows, csv_parts = [], []
    for i in range(n_volumes):
        params, raw = generate_volume(spec, seed, i)
        if csv:
            csv_parts.append(raw)
        trace = remap_dense(raw)
        # drawn parameters under their own names: Trace.stats() lets meta override its counts
        trace.meta = {"generator": "fleet", "generator_seed": seed, "volume_index": i}
        trace.meta.update({f"drawn_{k}": v for k, v in params.items()})
        dtr = write_trace(trace, vol_dir / volume_file_name(str(i)))
        rows.append(volume_row(str(i), dtr, out_dir, trace.stats()))
    metadata = {"source": "synthetic", "generator": {"n_volumes": n_volumes, "seed": seed, "spec": asdict(spec)}}
    if csv:
        write_alibaba_csv(out_dir / "fleet.alibaba.csv", csv_parts)
        metadata["csv"] = "fleet.alibaba.csv"
    return write_fleet(out_dir, rows, metadata)


def write_alibaba_csv(path: str | Path, traces: list[Trace]) -> Path:
    """Write single-volume traces as one Alibaba-format CSV (``device_id`` = each trace's volume
    name), interleaved by time stamp; a volume's requests keep their order (ties by volume)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    ts = np.concatenate([t.ts_us for t in traces])
    vol = np.concatenate([np.full(t.n_requests, i, np.int64) for i, t in enumerate(traces)])
    order = np.lexsort((vol, ts))  # by stamp, then volume; stable within a volume
    names = np.array([t.volumes[0] for t in traces], dtype=object)
    lba = np.concatenate([t.lba for t in traces])[order]
    nb = np.concatenate([t.nblocks for t in traces]).astype(np.int64)[order]
    op = np.concatenate([t.op for t in traces])[order]
    table = pa.table(
        {
            "device_id": pa.array(names[vol[order]], pa.string()),
            "opcode": pa.array(np.where(op == OP_WRITE, "W", "R"), pa.string()),
            "offset": lba * BLOCK_SIZE,
            "length": nb * BLOCK_SIZE,
            "timestamp": ts[order],
        }
    )
    path = Path(path)
    pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path


# -- splitting a multi-volume trace --------------------------------------------------------------
#: one request in a spill file: what a .dtr keeps of it besides the volume (packed, 21 bytes)
_RECORD = np.dtype([("ts_us", "<i8"), ("lba", "<i8"), ("nblocks", "<i4"), ("op", "u1")])
_UTF8_BOM = b"\xef\xbb\xbf"
#: lines per retry when a block of the fast path needs the line parser (only that slice pays for it)
_RETRY_LINES = 1 << 16


@nb.njit(cache=True, nogil=True)
def _key_starts(volume, key_of, n_keys, seen):
    """Where each key's requests start when grouped by key (``key_of[volume[i]]``, -1: not
    kept), ``n_keys + 1`` entries, the last the requests kept; marks ``seen[v]`` for every volume
    with a request in the chunk, kept or not."""
    starts = np.zeros(n_keys + 1, np.int64)
    for i in range(volume.shape[0]):
        seen[volume[i]] = True
        key = key_of[volume[i]]
        if key >= 0:
            starts[key + 1] += 1
    for k in range(n_keys):
        starts[k + 1] += starts[k]
    return starts


@nb.njit(cache=True, nogil=True)
def _bucket(volume, key_of, starts, ts_us, lba, nblocks, op, out):
    """The kept requests grouped by key into ``out``, each group in file order (the placing pass
    of a counting sort whose counts :func:`_key_starts` took)."""
    fill = starts[:-1].copy()
    for i in range(volume.shape[0]):
        key = key_of[volume[i]]
        if key < 0:
            continue
        j = fill[key]
        fill[key] = j + 1
        out[j]["ts_us"] = ts_us[i]
        out[j]["lba"] = lba[i]
        out[j]["nblocks"] = nblocks[i]
        out[j]["op"] = op[i]


@nb.njit(cache=True, nogil=True)
def _dense_lba(lba, nblocks, order):
    """trace.py's ``_dense_starts`` for one volume, its result scattered back to file order:
    each request's first block among the touched blocks (the union of the requests' ranges),
    from requests visited in address order."""
    out = np.empty(lba.shape[0], np.int64)
    done = 0
    cur_start = cur_end = 0
    for k in range(order.shape[0]):
        i = order[k]
        start = lba[i]
        end = start + nblocks[i]
        if k == 0 or start > cur_end:  # a new merged range begins
            done += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
        out[i] = done + (start - cur_start)
    return out


@nb.njit(cache=True, nogil=True)
def _address_order(lba):
    """The requests' indices in address order (any order among equal addresses): an LSD radix
    sort on 11-bit digits, as many passes as the highest address needs (3 below 2^33 blocks),
    each a sequential read and a scatter into 2048 buckets; about 4x faster than np.argsort on a
    volume's requests."""
    n = lba.shape[0]
    top = 0
    for i in range(n):
        if lba[i] > top:
            top = lba[i]
    keys = lba.copy()
    order = np.arange(n)
    keys_out = np.empty_like(keys)
    order_out = np.empty_like(order)
    shift = 0
    while shift == 0 or (top >> shift) > 0:
        counts = np.zeros(2049, np.int64)
        for i in range(n):
            counts[((keys[i] >> shift) & 2047) + 1] += 1
        for d in range(2048):
            counts[d + 1] += counts[d]
        for i in range(n):
            d = (keys[i] >> shift) & 2047
            j = counts[d]
            counts[d] = j + 1
            keys_out[j] = keys[i]
            order_out[j] = order[i]
        keys, keys_out = keys_out, keys
        order, order_out = order_out, order
        shift += 11
    return order


def _remap_volume(trace: Trace) -> Trace:
    """``remap_dense`` for a one-volume trace (the same LBAs and meta): one radix sort by address
    instead of a sort on two keys, and no gathers of the ends; a request's dense start depends on the
    merged ranges before it, not on how requests at the same address are ordered."""
    order = _address_order(trace.lba)
    lba = _dense_lba(trace.lba, trace.nblocks, order)
    meta = dict(trace.meta)
    meta["remapped"] = 1
    meta["original_max_lba"] = int(_max_end(trace.lba, trace.nblocks))
    return Trace(trace.ts_us, lba, trace.nblocks, trace.op, trace.volume, list(trace.volumes), trace.name, meta)


@nb.njit(cache=True, nogil=True)
def _fill_columns(records, at, ts_us, lba, nblocks, op):
    """Records into the four arrays of a trace from index ``at`` on, in one pass over them (numpy
    would make one strided pass per field)."""
    for i in range(records.shape[0]):
        ts_us[at + i] = records[i]["ts_us"]
        lba[at + i] = records[i]["lba"]
        nblocks[at + i] = records[i]["nblocks"]
        op[at + i] = records[i]["op"]


class _Spill:
    """Per-volume request records, buffered in memory up to ``budget`` bytes in all, then
    appended to one file per volume under ``tmp`` (each opened only while it is written, so
    thousands of volumes never hold thousands of descriptors)."""

    def __init__(self, tmp: Path, budget: int):
        self.tmp = tmp
        self.budget = budget
        self.buffers: dict[int, list[np.ndarray]] = {}
        self.buffered = 0
        self.spilled_bytes = 0
        self.flushes = 0
        self.in_use: list[np.ndarray] = []  # the record arrays the buffers are views of
        self.free: list[np.ndarray] = []  # those the last flush emptied, to be written again

    def _records(self, n: int) -> np.ndarray:
        """An array for ``n`` records: one the last flush emptied when it is large enough (memory
        written again costs nothing more, fresh memory costs the kernel a page zeroing each time),
        else a new one with a quarter more room, so that the next chunks, of about the same size,
        fit in it again. A new one is an anonymous memory map rather than np.empty: numpy asks
        the kernel for huge pages for arrays of 4 MiB and more, and on a machine whose memory is
        full of page cache the kernel then compacts memory at each first touch, in this process's
        system time (measured: 0.4 of the 1.1 system CPU seconds of a 0.5 GB file's split)."""
        import mmap

        while self.free:
            records = self.free.pop()
            if records.size >= n:
                break
        else:
            records = np.frombuffer(mmap.mmap(-1, (n + n // 4) * _RECORD.itemsize), _RECORD)
        self.in_use.append(records)
        return records[:n]

    def add(self, chunk, key_of: np.ndarray, n_keys: int, seen: np.ndarray) -> None:
        """Append the chunk's requests to the buffer of their volume's key (``key_of[volume]``,
        below ``n_keys``; -1: the volume is not kept); marks ``seen[volume]`` for every volume
        with a request in the chunk, kept or not."""
        starts = _key_starts(chunk.volume, key_of, n_keys, seen)
        n = int(starts[-1])
        if n == 0:
            return
        records = self._records(n)
        _bucket(chunk.volume, key_of, starts, chunk.ts_us, chunk.lba, chunk.nblocks, chunk.op, records)
        for key in np.flatnonzero(starts[1:] > starts[:-1]).tolist():
            self.buffers.setdefault(key, []).append(records[starts[key] : starts[key + 1]])
        self.buffered += records.nbytes
        if self.buffered >= self.budget:
            self.flush()

    def _file(self, key: int) -> Path:
        return self.tmp / f"{key}.rec"

    def flush(self) -> None:
        for key, parts in self.buffers.items():
            with open(self._file(key), "ab") as fh:
                for part in parts:
                    fh.write(part.data)
        self.spilled_bytes += self.buffered
        self.flushes += 1
        self.buffers.clear()
        self.buffered = 0
        self.free, self.in_use = self.in_use, []

    def take(self, key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every record of ``key`` in order (spilled ones first), freeing them, as (ts_us, lba,
        nblocks, op). The spilled ones are read through a memory map of their file (no copy of
        it in memory)."""
        import mmap

        self.free.clear()  # nothing is added once records are taken: the buffers alone keep theirs
        self.in_use.clear()
        parts = self.buffers.pop(key, [])
        spilled = self._file(key)
        mapped = None
        if spilled.exists():
            with open(spilled, "rb") as fh:
                if os.fstat(fh.fileno()).st_size:
                    mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            spilled.unlink()  # the map keeps the data until it is closed
        if mapped is not None:
            parts.insert(0, np.frombuffer(mapped, _RECORD))
        n = sum(part.size for part in parts)
        columns = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.uint8))
        at = 0
        for part in parts:
            _fill_columns(part, at, *columns)
            at += part.size
        if mapped is not None:
            del part, parts  # the array that views the map goes before the map closes
            mapped.close()
        return columns


def _binary_stream(path: Path):
    """The file's decompressed bytes (gzip and zstd by magic bytes, as readers.open_text)."""
    import gzip

    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic == b"\x28\xb5\x2f\xfd":
        return _ZstdBlocks(path)
    return open(path, "rb")


class _ZstdBlocks:
    """A ``.zst`` file's decompressed bytes, decompressed straight into the caller's buffer
    (zstandard's stream reader: a third less CPU than readers._ZstdFile, which copies each
    decompressed piece once more), with readers._ZstdFile's errors: the stream reader ends
    quietly where the file ends inside a frame, so at the end the frames' structure is walked
    (:func:`_zst_frames_end`) to tell a whole file from a truncated one."""

    def __init__(self, path: Path):
        import zstandard

        self.path = path
        self.fileobj = open(path, "rb")  # ``fileobj``: where _compressed_position finds the offset
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            self.fileobj, read_size=1 << 20, read_across_frames=True, closefd=False
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()
        self.fileobj.close()

    def readinto(self, buf) -> int:
        import zstandard

        from .trace import TraceFormatError

        try:
            got = self._reader.readinto(buf)
        except zstandard.ZstdError as exc:
            raise TraceFormatError(
                f"{self.path}: before byte {self.fileobj.tell()}: corrupt .zst data ({exc})",
                "re-download or re-compress the file (zstd -t FILE checks it)",
            ) from None
        if not got:
            size = self.path.stat().st_size
            if _zst_frames_end(self.path) != size:
                raise TraceFormatError(
                    f"{self.path}: byte {size}: the .zst file ends inside a frame (truncated)",
                    "re-download or re-compress the file (zstd -t FILE checks it)",
                )
        return got


def _zst_frames_end(path: Path) -> int:
    """Where the last whole frame of a ``.zst`` file ends: the file's size when every frame is
    whole, less when the file ends inside one. Walks the headers of the frames and their blocks
    (the zstd format, RFC 8878 section 3.1), seeking past each block's content: a few reads per
    megabyte of compressed data."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        pos = 0
        while pos < size:
            fh.seek(pos)
            head = fh.read(18)  # magic, frame header descriptor and at most 13 more header bytes
            if len(head) < 4:
                return pos
            magic = int.from_bytes(head[:4], "little")
            if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: 4-byte size, then its data
                if len(head) < 8:
                    return pos
                end = pos + 8 + int.from_bytes(head[4:8], "little")
                if end > size:
                    return pos
                pos = end
                continue
            if magic != 0xFD2FB528 or len(head) < 5:
                return pos  # not a frame (the decompressor would have said so) or cut in its header
            descriptor = head[4]
            single_segment = (descriptor >> 5) & 1
            content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
            header = 5 + (not single_segment) + (0, 1, 2, 4)[descriptor & 3] + content_size_bytes
            at = pos + header
            while True:  # the frame's blocks: a 3-byte header (last flag, type, size), then content
                fh.seek(at)
                block = fh.read(3)
                if len(block) < 3:
                    return pos
                bits = int.from_bytes(block, "little")
                kind = (bits >> 1) & 3
                at += 3 + (1 if kind == 1 else bits >> 3)  # an RLE block holds one byte
                if kind == 3 or at > size:
                    return pos
                if bits & 1:
                    break
            at += 4 * ((descriptor >> 2) & 1)  # the content checksum
            if at > size:
                return pos
            pos = at
    return pos


def _compressed_position(fh) -> int | None:
    """Bytes of the file on disk read so far (compressed bytes for .gz and .zst)."""
    for obj in (getattr(fh, "fileobj", None), getattr(getattr(fh, "raw", None), "fileobj", None), fh):
        try:
            return int(obj.tell())
        except (AttributeError, OSError, ValueError):
            continue
    return None


def _line_blocks(fh, path: Path, block_bytes: int, lines: list):
    """Decompressed text in blocks that end at a line end (or at the end of the file), as
    (buffer, length): a block is the next ``block_bytes`` bytes of the text and the rest of its
    last line. One buffer is reused for every block (the consumer is done with a block before it
    asks for the next); what was read past a block's end is moved to the buffer's start for the
    next. ``lines[0]``: the lines the caller has consumed, for the message when a compressed
    stream breaks off (the readers' one-line error)."""
    import zlib

    from .trace import TraceFormatError

    slack = 1 << 16  # read past block_bytes to find the block's last line end
    buf = bytearray(block_bytes + slack)
    view = memoryview(buf)
    held = 0  # bytes at the buffer's start already read: the start of the next block
    at_end = False
    first = True
    while True:
        n = held
        cut = -1  # the block's end (after its last line end), once found
        while True:
            if n >= block_bytes:
                cut = buf.find(b"\n", block_bytes - 1, n)
                if cut >= 0:
                    cut += 1
                    break
            if at_end:
                cut = n
                break
            if n == len(buf):  # a line longer than the slack: a larger buffer for it and later blocks
                view.release()
                buf = buf + bytes(len(buf))
                view = memoryview(buf)
            try:
                got = fh.readinto(view[n : block_bytes if n < block_bytes else len(buf)])
            except (EOFError, OSError, zlib.error) as exc:
                pos = _compressed_position(fh)
                at = f", byte {pos} of the file" if pos is not None else ""
                raise TraceFormatError(
                    f"{path}: after line {lines[0]}{at}: the compressed stream breaks off (truncated or corrupt: {exc})",
                    "re-download or re-compress the file (gzip -t / zstd -t FILE checks it)",
                ) from None
            if got:
                n += got
            else:
                at_end = True
        if first:
            first = False
            if buf.startswith(_UTF8_BOM):  # a byte-order mark at the start is dropped, as the readers do
                view[: n - len(_UTF8_BOM)] = bytes(view[len(_UTF8_BOM) : n])
                n -= len(_UTF8_BOM)
                cut -= len(_UTF8_BOM)
        if not cut:
            return
        yield buf, cut
        held = n - cut
        if held:
            view[:held] = bytes(view[cut:n])


def _fast_chunk(spec, acc, start: int, data, n_lines: int, state: dict):
    """A block of whole lines parsed with pyarrow straight from bytes, the checks and results of
    ``readers._delimited_arrow`` (which parses a list of lines); None when anything looks off, so
    the caller hands the block to the line parser, which names the bad line.

    Stamps are parsed as integers while they are (Alibaba's µs, Tencent's s: 1.6x faster than
    as floats) and converted to float64 before scaling, which rounds them as parsing the text as
    a float does (both round to nearest); after a block with a fractional stamp
    (``state["float_ts"]``) the file's later blocks parse them as floats."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from .readers import IGNORE, _finish, arrow_columns, arrow_unsafe

    sep = spec.sep.encode()
    if b"\xef" in data and _UTF8_BOM in data:  # (the first test is a fast memchr)
        return None  # a byte-order mark inside the file: the line parser reads it as data
    if arrow_unsafe(spec, data):
        return None
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # a lone CR ends a line for the text reader: let it count the lines
    head_end = data.find(b"\n")
    n_fields = data[: head_end if head_end >= 0 else len(data)].rstrip(b"\r").count(sep) + 1
    if n_fields != (acc.fields or spec.fields or max(n_fields, spec.ncols)):
        return None
    ncols = spec.ncols
    used = {int(v) for k, v in spec.columns.items() if k != "volume"} | set(spec.vol_cols)
    types = {i: pa.string() for i in range(ncols)}
    types[int(spec.columns["offset"])] = pa.int64()
    types[int(spec.columns["size"])] = pa.int64()
    filetime = spec.units.get("ts") == "filetime"
    int_ts = "ts" in spec.columns and (filetime or not state.get("float_ts"))
    if "ts" in spec.columns:
        types[int(spec.columns["ts"])] = pa.int64() if int_ts else pa.float64()

    def parse():
        return pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, block_size=len(data) + 1, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=spec.sep, quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={f"f{i}": types[i] for i in range(ncols)},
                include_columns=[f"f{i}" for i in sorted(used)],
                strings_can_be_null=False,
            ),
        )

    try:
        table = parse()
    except (pa.ArrowInvalid, pa.ArrowKeyError, KeyError):
        if not int_ts or filetime:
            return None
        types[int(spec.columns["ts"])] = pa.float64()  # a fractional stamp (or a bad line)
        try:
            table = parse()
        except (pa.ArrowInvalid, pa.ArrowKeyError, KeyError):
            return None
        state["float_ts"] = True
    n_rows = table.num_rows
    if (
        n_rows == 0
        or (n_lines is not None and n_rows != n_lines)
        or any(table.column(f"f{i}").null_count for i in used)
    ):
        return None  # blank lines (the line parser skips them and counts lines) or empty fields
    columns = arrow_columns(table, spec, acc, start, start, n_fields)
    if columns is None:
        return None
    off, size, kinds, codes, ts, vols = columns
    if max(codes) <= OP_TRIM and size.min() > 0:
        return _data_chunk(ts, off, size, kinds, vols, start)
    keep = kinds != IGNORE
    rows = np.flatnonzero(keep)
    return _finish(acc, ts[keep], off[keep], size[keep], kinds[keep], vols[keep], 0, lambda i: start + int(rows[i]))


def _data_chunk(ts, off, size, kinds, vols, start: int):
    """``readers._finish`` for a block whose every line is a read, write or trim of at least one
    byte (nothing to drop or count): the same arrays, without its masks and copies."""
    from .readers import Chunk

    ts = ts.astype(np.int64)
    first = off // BLOCK_SIZE
    nblocks = ((off + size - 1) // BLOCK_SIZE - first + 1).astype(np.int32)
    back = ts[1:] < ts[:-1]
    backward = int(np.count_nonzero(back))
    return Chunk(
        ts_us=ts,
        lba=first,
        nblocks=nblocks,
        op=kinds,
        volume=vols,
        backward=backward,
        first_backward_line=start + int(np.argmax(back)) + 1 if backward else None,
        first_line=start,
    )


def _fast_delimited_chunks(spec, acc, path: Path, block_bytes: int, on_bytes=None):
    """Chunks of a delimited file read as raw byte blocks (the fast path); a block pyarrow does
    not take as it is goes, in slices of ``_RETRY_LINES`` lines, to the line parser's rules."""
    import io

    from .readers import _delimited_lines

    line = 1
    state = {}
    consumed = [0]
    with _binary_stream(path) as fh:
        for buf, size in _line_blocks(fh, path, block_bytes, consumed):
            chunk, n_lines = _int_chunk(spec, acc, line, buf, size, state)
            if chunk is None:
                n_lines = buf.count(b"\n", 0, size) + (buf[size - 1] != 10)
                data = bytes(memoryview(buf)[:size])
                chunk = _fast_chunk(spec, acc, line, data, n_lines, state)
            if chunk is not None:
                acc.lines_read += n_lines
                line += n_lines
                yield chunk
            else:
                # the text readers' own line splitting (universal newlines, undecodable bytes replaced)
                lines = io.StringIO(data.decode("utf-8", errors="replace"), newline="").readlines()
                del data
                for k in range(0, len(lines), _RETRY_LINES):
                    part = lines[k : k + _RETRY_LINES]
                    raw = "".join(part).encode()
                    chunk = _fast_chunk(spec, acc, line, raw, len(part), state)
                    acc.lines_read += len(part)
                    yield chunk if chunk is not None else _delimited_lines(spec, acc, line, part)
                    line += len(part)
            consumed[0] = line - 1
            if on_bytes is not None:
                pos = _compressed_position(fh)
                if pos is not None:
                    on_bytes(pos)


def _request_chunks(path: Path, fmt: str, acc, delimited, block_bytes: int, chunk_lines: int, on_bytes=None):
    """The file's request chunks: delimited formats (Alibaba, Tencent, MSR, ...) through the
    byte-block fast path, every other format through ``readers.iter_request_chunks``."""
    from .readers import PRESETS, DelimitedSpec, check_format, iter_request_chunks

    check_format(fmt)
    acc.fmt = fmt
    spec = None
    if fmt in PRESETS:
        spec = DelimitedSpec(**PRESETS[fmt])
    elif fmt == "delimited" and delimited:
        spec = DelimitedSpec.from_mapping(delimited)
    if spec is None or spec.header or spec.comment:
        acc.on_bytes = on_bytes
        yield from iter_request_chunks(
            path, fmt, skip_malformed=acc.skip, delimited=delimited, chunk_lines=chunk_lines, _acc=acc
        )
        return
    yield from _fast_delimited_chunks(spec, acc, path, block_bytes, on_bytes)


def _input_files(path: Path) -> tuple[list[Path], dict[str, list[str]]]:
    """The trace files of a directory input (regular files, not hidden, by name) and what it
    leaves out, by kind (``subdirectories``, ``hidden files``, ``other entries``: a FIFO, a
    socket, a broken link), each a sorted list of names, so that the caller reports them."""
    from .trace import TraceFormatError

    files, left_out = [], {"subdirectories": [], "hidden files": [], "other entries": []}
    for p in sorted(path.iterdir()):
        if p.is_dir():  # hidden ones too (.git): a subdirectory is never read
            left_out["subdirectories"].append(p.name)
        elif not p.is_file():
            left_out["other entries"].append(p.name)
        elif p.name.startswith("."):
            left_out["hidden files"].append(p.name)
        else:
            files.append(p)
    if not files:
        what = _left_out_text(left_out)
        raise TraceFormatError(
            f"{path}: the directory holds no trace file{f' ({what})' if what else ''}",
            "give a directory of per-volume traces (the regular, non-hidden files directly in it are read)",
        )
    stems: dict[str, Path] = {}
    for f in files:
        stem = f.name.split(".")[0]
        if stem in stems:
            raise TraceFormatError(
                f"{path}: {stems[stem].name} and {f.name} would both be volume {stem!r}",
                "keep one file per volume (the volume is the name before the first dot)",
            )
        stems[stem] = f
    return files, left_out


def _directory_fix(fix: str, file: Path, directory: Path) -> str:
    """The fix of an error in ``file`` of a directory input, which may be no trace at all (a
    README, a leftover ``.stats.json``): every regular, non-hidden file there is read as one."""
    return (
        f"{fix}; or, if {file.name} is no trace, move it out of {directory}: every regular, non-hidden file "
        "directly in it is read as one volume"
    )


def _said_of_a_directory(chunks, file: Path, directory: Path):
    """``chunks`` unchanged; a TraceFormatError they raise gets :func:`_directory_fix`'s fix."""
    from .trace import TraceFormatError

    try:
        yield from chunks
    except TraceFormatError as exc:
        raise TraceFormatError(exc.problem, _directory_fix(exc.fix, file, directory)) from None


_ONE_OF = {"subdirectories": "subdirectory", "hidden files": "hidden file", "other entries": "other entry"}


def _left_out_text(left_out: dict[str, list[str]]) -> str:
    """``"skipped 2 subdirectories (a, b) and 1 hidden file (.x)"``; empty when nothing was."""
    parts = []
    for kind, names in left_out.items():
        if names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            label = kind if len(names) > 1 else _ONE_OF[kind]
            parts.append(f"{len(names)} {label} ({shown})")
    if not parts:
        return ""
    return "skipped " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def _remove_spill(tmp: Path) -> None:
    """Remove a split's spill directory (its files only), if it is still there."""
    if tmp.exists():
        for leftover in tmp.iterdir():
            leftover.unlink()
        tmp.rmdir()


def _undo_split(out_dir: Path, vol_dir: Path, tmp: Path, made_out: bool, made_vol: bool) -> None:
    """Remove what a failed split wrote: the volumes written so far, its spill directory (first:
    it lies in ``out=``), and ``volumes/`` and ``out=`` when the split made them (and they are
    empty then)."""
    for written in vol_dir.iterdir():
        written.unlink()
    _remove_spill(tmp)
    if made_vol:
        vol_dir.rmdir()
    if made_out and not any(out_dir.iterdir()):
        out_dir.rmdir()


def split_trace(
    path: str | Path,
    fmt: str,
    out_dir: str | Path,
    *,
    volumes=None,
    skip_malformed: bool = False,
    delimited=None,
    block_bytes: int = 32 << 20,
    chunk_lines: int = 1_000_000,
    spill_bytes: int = 256 << 20,
    progress: bool | None = None,
) -> Path:
    """Split a multi-volume trace into ``out_dir/volumes/<id>.dtr`` (one per volume, dense LBAs
    as ``read_trace`` gives them for that volume alone) and ``out_dir/fleet.parquet``, in one
    streaming pass; returns the manifest's path.

    ``path`` is a trace file (plain, .gz or .zst), its volumes those the format names (Alibaba's
    device, Tencent's volume, MSR's host and disk), or a directory whose every file is one volume
    (named by the file's name before its first dot; a file naming several volumes inside gives
    ``<file>.<volume>``). ``volumes``: keep only these (an unknown one is an error).

    Memory: parsed requests are buffered per volume up to ``spill_bytes`` in all, then appended to
    one temporary file per volume under ``out_dir`` (opened only while written); a volume is
    loaded whole when its ``.dtr`` is written. So memory is bounded by ``block_bytes`` of text,
    ``spill_bytes`` of buffers and the largest volume (21 bytes per request and the copies
    ``remap_dense`` and the writer make), whatever the file's size. Malformed lines follow the
    readers' rules (an error naming the file and line, or with ``skip_malformed`` skipped and
    counted); what was skipped or dropped is in the manifest's metadata (:func:`fleet_metadata`)
    and, for a volume, in its ``.dtr`` header's ``meta``."""
    import warnings

    from dogi_ml.progress import bar as progress_bar

    from .readers import ChunkTally, _Acc, _no_requests, check_format, input_warnings
    from .trace import TraceFormatError, TraceWarning

    path, out_dir = Path(path), Path(out_dir)
    check_format(fmt)  # before out_dir/volumes is made
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    for key, value in (("block_bytes", block_bytes), ("spill_bytes", spill_bytes), ("chunk_lines", chunk_lines)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DogiMLError(f"{key}={value!r} is not a whole number >= 1", f"give e.g. {key}={1 << 20}")
    vol_dir = out_dir / VOLUMES_DIR
    if (out_dir / MANIFEST_NAME).exists() or (vol_dir.is_dir() and any(vol_dir.iterdir())):
        raise DogiMLError(
            f"out={out_dir} already holds a fleet ({MANIFEST_NAME} or files in {VOLUMES_DIR}/)",
            "give a new or empty directory for the split, or delete the old fleet first",
        )
    files, left_out = _input_files(path) if path.is_dir() else ([path], {})
    wanted = None if not volumes else [str(v) for v in volumes]
    made_out, made_vol = not out_dir.exists(), not vol_dir.exists()
    vol_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".split-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    spill = _Spill(tmp, spill_bytes)
    keys: list[tuple[int, str]] = []  # spill key -> (input file, the volume named inside it)
    counts = {"skipped_lines": 0, "zero_length_requests": 0, "flush_requests": 0, "backward_timestamps": 0}
    first_skipped, first_backward, messages = [], [], []
    empty_volumes = []  # named in the trace, but with no read, write or trim request
    present = []  # (file, volume) with requests, kept or not
    inner_counts = []  # volumes named inside each file
    total = sum(f.stat().st_size for f in files)
    done = 0
    try:
        with progress_bar(
            total, f"split {path.name}", "B", requested=progress, unit_scale=True, unit_divisor=1024
        ) as bar:
            for file_index, file in enumerate(files):
                acc = _Acc(path=file, skip=skip_malformed)
                key_of: list[int] = []  # the file's volume index -> spill key (-1: not kept)
                tally = ChunkTally()
                seen_data = np.zeros(0, bool)

                def on_bytes(pos, base=done):
                    bar.update(min(base + pos, total) - bar.n)

                chunks = _request_chunks(file, fmt, acc, delimited, block_bytes, chunk_lines, on_bytes)
                if path.is_dir():
                    chunks = _said_of_a_directory(chunks, file, path)
                for chunk in chunks:
                    for name in itertools.islice(acc.volumes, len(key_of), None):  # first seen in this chunk
                        # a single file's unwanted volumes are dropped here (-1); a directory's
                        # are named only once each file is read, so they are dropped at the end
                        keep = wanted is None or path.is_dir() or name in wanted
                        key_of.append(len(keys) if keep else -1)
                        if keep:
                            keys.append((file_index, name))
                    tally.add(chunk)
                    if len(seen_data) < len(key_of):
                        seen_data = np.concatenate([seen_data, np.zeros(len(key_of) - len(seen_data), bool)])
                    spill.add(chunk, np.asarray(key_of, np.int64), len(keys), seen_data)
                done += file.stat().st_size
                names = list(acc.volumes)
                inner_counts.append(len(names))
                if not seen_data.any():
                    problem, fix = _no_requests(file, fmt, acc, tally)
                    raise TraceFormatError(problem, _directory_fix(fix, file, path) if path.is_dir() else fix)
                for what, n in tally.counts().items():
                    counts[what] += n
                backward = tally.backward_timestamps
                if acc.first_skipped:
                    first_skipped.append(f"{file}: {acc.first_skipped[0]}")
                if backward:
                    first_backward.append(f"{file}:{tally.first_backward_line}")
                meta = {"source": str(file), "skipped_lines": tally.skipped_lines, "backward_timestamps": backward}
                if acc.first_skipped:
                    meta["first_skipped"] = "; ".join(acc.first_skipped)
                if backward:
                    meta["first_backward_line"] = tally.first_backward_line
                messages += input_warnings(meta)
                empty_volumes += [(file_index, names[i]) for i in range(len(names)) if not seen_data[i]]
                present += [(file_index, names[i]) for i in range(len(names)) if seen_data[i]]
        empty = set(empty_volumes)

        # the fleet's volume ids, each volume's spill key, in order of first appearance
        def volume_id(file_index: int, inner: str) -> str:
            if not path.is_dir():
                return inner
            stem = files[file_index].name.split(".")[0]
            return stem if inner_counts[file_index] == 1 else f"{stem}.{inner}"

        fleet: list[tuple[str, int, Path]] = []
        for key, (file_index, inner) in enumerate(keys):
            if (file_index, inner) not in empty:
                fleet.append((volume_id(file_index, inner), key, files[file_index]))
        if wanted is not None:
            names = [volume_id(*p) for p in present]
            missing = [v for v in wanted if v not in set(names)]
            if missing:
                raise DogiMLError(
                    f"{path}: volume(s) {missing} not in the trace (or without a read, write or trim request); "
                    f"present: {', '.join(names[:50])}{' ...' if len(names) > 50 else ''}",
                    "choose volumes from that list, or drop volumes= to split them all",
                )
            order = {v: i for i, v in enumerate(wanted)}
            fleet = sorted((f for f in fleet if f[0] in order), key=lambda f: order[f[0]])
        rows = []
        for volume, key, source in fleet:
            ts_us, lba, nblocks, op = spill.take(key)
            trace = Trace(
                ts_us,
                lba,
                nblocks,
                op,
                np.zeros(ts_us.size, np.int32),
                volumes=[volume],
                name=volume,
                meta={"format": fmt, "source": str(source), "volume": volume},
            )
            del ts_us, lba, nblocks, op
            trace = _remap_volume(trace)
            stats = trace.stats()
            dtr = write_trace(trace, vol_dir / volume_file_name(volume), stats=stats)
            rows.append(volume_row(volume, dtr, out_dir, stats))
            del trace
    except BaseException:
        # a split that fails leaves out= as it found it: volumes/ was empty or absent (checked
        # above), so what is in it now is this split's, a part of a fleet with no manifest
        _undo_split(out_dir, vol_dir, tmp, made_out, made_vol)
        raise
    finally:
        _remove_spill(tmp)
    left_out_text = _left_out_text(left_out)
    if left_out_text:  # said first: the files read depend on it
        messages.insert(
            0,
            f"{path}: {left_out_text}; a directory input reads the regular, non-hidden files directly in it, "
            "one volume each",
        )
    metadata = {
        "source": str(path),
        "format": fmt,
        "volumes_named": len(present) + len(empty_volumes),
        "volumes_without_requests": [volume_id(*p) for p in empty_volumes[:100]],
        "volumes_without_requests_count": len(empty_volumes),
        **counts,
        "first_skipped": first_skipped[:10],
        "first_backward": first_backward[:10],
        "spill": {"bytes": spill.spilled_bytes, "flushes": spill.flushes},
    }
    if volumes:
        metadata["volumes_selected"] = wanted
    if path.is_dir():  # what the directory held besides the files read, by kind (names: the first 100)
        metadata["left_out"] = {kind: names[:100] for kind, names in left_out.items()}
        metadata["left_out_count"] = sum(len(names) for names in left_out.values())
    for message in messages:
        warnings.warn(message, TraceWarning, stacklevel=2)
    return write_fleet(out_dir, rows, metadata)


def write_synthetic_alibaba_csv(
    path: str | Path, n_bytes: int, n_volumes: int, seed: int = 0, rows_per_chunk: int = 1 << 20
) -> dict:
    """Write about ``n_bytes`` of Alibaba-format CSV (whole lines) in bounded memory, for
    throughput and memory measurements: each request's volume uniform over ``n_volumes`` ids
    (so a volume's share, and the largest volume, stay the same size for a file twice as large
    with twice the volumes), 70% writes, 4 KiB-aligned offsets over 64 GiB per volume (one in
    ten shifted by 512 bytes), sizes of 1 to 16 blocks (geometric, mean 2), stamps rising by 0
    to 19 µs. Returns ``{"bytes", "requests", "volumes"}``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.Generator(np.random.PCG64(seed))
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    names = pa.array([str(v) for v in range(n_volumes)], pa.string())
    opcodes = pa.array(["R", "W"], pa.string())
    written = requests = 0
    stamp = 1_577_808_000_000_000  # 2020-01-01 in µs, as Alibaba's stamps look
    with open(path, "wb") as fh:
        while written < n_bytes:
            n = rows_per_chunk
            vol = rng.integers(0, n_volumes, n)
            op = (rng.random(n) < 0.7).astype(np.int64)
            offset = rng.integers(0, 1 << 24, n) * BLOCK_SIZE + np.where(rng.random(n) < 0.1, 512, 0)
            length = np.minimum(rng.geometric(0.5, n), 16) * BLOCK_SIZE
            ts = stamp + np.cumsum(rng.integers(0, 20, n))
            stamp = int(ts[-1])
            table = pa.table({"d": names.take(vol), "o": opcodes.take(op), "off": offset, "len": length, "ts": ts})
            sink = pa.BufferOutputStream()
            pacsv.write_csv(table, sink, write_options=options)
            data = sink.getvalue().to_pybytes()
            if written + len(data) > n_bytes:  # the last chunk: whole lines up to the size
                cut = data.rfind(b"\n", 0, max(1, n_bytes - written)) + 1
                data = data[:cut] if cut else data[: data.find(b"\n") + 1]
                n = data.count(b"\n")
            fh.write(data)
            written += len(data)
            requests += n
    return {"bytes": written, "requests": requests, "volumes": n_volumes}


# -- the integer-CSV fast path ---------------------------------------------------------------------
#: hash-table slots for volume ids seen by the integer parser (a fleet with more volumes than a
#: quarter of this falls back to the pyarrow path)
_ID_SLOTS = 1 << 20
_OK, _NOT_MINE, _FULL = 0, 1, 2
#: the dtypes of _int_csv's outputs: volume slot, lba, nblocks, op, stamp
_INT_OUT = (np.int64, np.int64, np.int32, np.uint8, np.int64)


@nb.njit(cache=True, nogil=True)
def _int_csv(data, sep, n_fields, c_vol, c_op, c_off, c_size, c_ts, op_keys, op_codes, fold_case,
             off_mul, size_mul, ts_mul, ts_filetime, slot_keys, slot_vals, new_slots,
             out_slot, out_lba, out_nb, out_op, out_ts):  # fmt: skip
    """Parse lines of ``n_fields`` fields separated by ``sep`` whose volume field is a canonical
    decimal integer (no sign, no leading zero), offset and size are decimal integers, the stamp a
    decimal integer and the op one of ``op_keys`` (ASCII bytes packed little-endian, folded to
    lower case with ``fold_case``), into block requests, in one pass over the bytes.

    Returns (status, rows kept, lines, zero-length rows, new volume slots, backward stamps, row of
    the first backward stamp, first kept row). Status 1: a line this parser does not take as it
    is (anything else, including what the readers call malformed): the caller then parses the
    block with the general path, which accepts or names the line. Status 2: more requests than
    the output arrays hold (the caller gives larger ones and calls again). With status 0 every
    byte was parsed, so ``lines`` is the block's line count. Volume ids go through an
    open-addressing table (``slot_keys``: id + 1, 0 = empty; ``slot_vals``: the caller's index
    or -1 until the caller assigns it); ``new_slots`` lists the slots first filled by this call."""
    n = data.shape[0]
    pos = 0
    line = 0
    kept = 0
    zero = 0
    n_new = 0
    backward = 0
    first_back = -1
    first_kept = -1
    last_ts = np.int64(0)
    mask = slot_keys.shape[0] - 1
    while pos < n:
        field = 0
        vol = np.int64(-1)
        op = -1
        off = np.int64(-1)
        size = np.int64(-1)
        ts = np.int64(0)
        have_ts = False
        while True:  # one field
            if field == c_vol or field == c_off or field == c_size or field == c_ts:
                # a decimal integer, parsed as it is scanned (one pass over its bytes)
                k = pos
                negative = False
                if field == c_ts and k < n and data[k] == 45:
                    negative = True
                    k += 1
                first_digit = k
                v = np.int64(0)
                while k < n:
                    d = np.int64(data[k]) - 48
                    if d < 0 or d > 9:
                        break
                    v = v * 10 + d
                    k += 1
                digits = k - first_digit
                if k < n and data[k] == 13 and (k + 1 >= n or data[k + 1] == 10):
                    k += 1  # CRLF
                if digits < 1 or digits > 18 or (k < n and data[k] != sep and data[k] != 10):
                    return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
                pos = k
                if field == c_vol:
                    if data[first_digit] == 48 and digits > 1:  # "007" is not volume "7"
                        return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
                    vol = v
                elif field == c_off:
                    off = v
                elif field == c_size:
                    size = v
                else:
                    ts = -v if negative else v
                    have_ts = True
                field += 1
                if pos >= n or data[pos] == 10:
                    pos += 1
                    break
                pos += 1  # the separator
                continue
            start = pos
            while pos < n and data[pos] != sep and data[pos] != 10:
                pos += 1
            end = pos
            if end > start and data[end - 1] == 13 and (pos >= n or data[pos] == 10):
                end -= 1  # CRLF
            if field == c_op:
                if end - start < 1 or end - start > 7:
                    return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
                key = np.int64(0)
                for k in range(end - 1, start - 1, -1):
                    b = np.int64(data[k])
                    if fold_case and 65 <= b <= 90:
                        b += 32
                    key = key * 256 + b
                for j in range(op_keys.shape[0]):
                    if op_keys[j] == key:
                        op = op_codes[j]
                if op < 0:
                    return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
            else:  # a column the format does not use: anything but a lone CR
                for k in range(start, end):
                    if data[k] == 13:
                        return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
            field += 1
            if pos >= n or data[pos] == 10:
                pos += 1
                break
            pos += 1  # the separator
        if field != n_fields:
            return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
        # the readers' limits (trace.py): offsets and ends below 2^62 bytes, requests up to 4 GiB
        if off >= (np.int64(1) << 62) // off_mul or size > (np.int64(1) << 32) // size_mul:
            return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
        off *= off_mul
        size *= size_mul
        if off + size >= (np.int64(1) << 62):
            return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
        if have_ts:
            if ts_filetime:
                ts = ts // 10
            elif not (ts_mul == 1.0 and -(np.int64(1) << 53) <= ts <= (np.int64(1) << 53)):
                t = np.rint(np.float64(ts) * ts_mul)
                if not abs(t) < 4.611686018427388e18:  # 2^62 µs
                    return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
                ts = np.int64(t)
        else:
            ts = np.int64(line)
        # the volume's slot (linear probing on a multiplicative hash)
        h = (vol * np.int64(-7046029254386353131)) >> 40
        s = h & mask
        while slot_keys[s] != 0 and slot_keys[s] != vol + 1:
            s = (s + 1) & mask
        if slot_keys[s] == 0:
            if n_new >= new_slots.shape[0]:
                return _NOT_MINE, 0, line, 0, n_new, 0, -1, -1
            slot_keys[s] = vol + 1
            slot_vals[s] = -1
            new_slots[n_new] = s
            n_new += 1
        if size == 0:
            zero += 1  # counted and dropped, as readers._finish does (its volume is named all the same)
        else:
            if kept == out_slot.shape[0]:
                return _FULL, 0, line, 0, n_new, 0, -1, -1
            first = off // 4096
            out_slot[kept] = s
            out_lba[kept] = first
            out_nb[kept] = (off + size - 1) // 4096 - first + 1
            out_op[kept] = op
            out_ts[kept] = ts
            if kept > 0 and ts < last_ts:
                backward += 1
                if first_back < 0:
                    first_back = line
            if first_kept < 0:
                first_kept = line
            last_ts = ts
            kept += 1
        line += 1
    return _OK, kept, line, zero, n_new, backward, first_back, first_kept


def _int_plan(spec, acc) -> dict | None:
    """What :func:`_int_csv` needs for this format, or None when it does not apply (space-
    separated text, no stamp column, a volume made of several columns, ops that are not read,
    write or trim, a field count not yet known)."""
    from .readers import ADDR_UNIT, TS_TO_US

    n_fields = acc.fields or spec.fields
    if spec.sep == " " or "ts" not in spec.columns or len(spec.vol_cols) != 1 or n_fields is None:
        return None
    keys, codes = [], []
    for text, code in spec.op_lookup().items():
        raw = text.encode("utf-8")
        if code > OP_TRIM or not 1 <= len(raw) <= 7 or not raw.isascii():
            return None
        keys.append(int.from_bytes(raw, "little"))
        codes.append(code)
    return {
        "sep": spec.sep.encode()[0],
        "n_fields": int(n_fields),
        "columns": [int(spec.vol_cols[0])] + [int(spec.columns[k]) for k in ("op", "offset", "size", "ts")],
        "op_keys": np.asarray(keys, np.int64),
        "op_codes": np.asarray(codes, np.int64),
        "fold_case": bool(spec.op_case_insensitive),
        "off_mul": ADDR_UNIT[spec.units.get("offset", "bytes")],
        "size_mul": ADDR_UNIT[spec.units.get("size", "bytes")],
        "ts_mul": float(TS_TO_US[spec.units.get("ts", "s")]),
        "filetime": spec.units.get("ts") == "filetime",
        "slot_keys": np.zeros(_ID_SLOTS, np.int64),
        "slot_vals": np.full(_ID_SLOTS, -1, np.int32),
        "filled": 0,
    }


def _int_chunk(spec, acc, start: int, buf, size: int, state: dict):
    """The block through :func:`_int_csv` (formats whose volumes, addresses, sizes and stamps
    are decimal integers: Alibaba, Tencent), as (chunk, the block's lines); (None, None) when it
    does not take the block as it is. The chunk's arrays are views of buffers the next block
    reuses: consume it first."""
    from .readers import Chunk

    if "int_plan" not in state:
        state["int_plan"] = _int_plan(spec, acc)
    plan = state["int_plan"]
    if plan is None:
        return None, None
    data = np.frombuffer(buf, np.uint8, count=size)
    new_slots = np.empty(max(0, _ID_SLOTS // 4 - plan["filled"]), np.int64)
    c_vol, c_op, c_off, c_size, c_ts = plan["columns"]
    while True:
        out_slot, out_lba, out_nb, out_op, out_ts = plan.get("out") or tuple(np.empty(0, d) for d in _INT_OUT)
        status, kept, lines, zero, n_new, backward, first_back, first_kept = _int_csv(
            data, plan["sep"], plan["n_fields"], c_vol, c_op, c_off, c_size, c_ts, plan["op_keys"],
            plan["op_codes"], plan["fold_case"], plan["off_mul"], plan["size_mul"], plan["ts_mul"],
            plan["filetime"], plan["slot_keys"], plan["slot_vals"], new_slots,
            out_slot, out_lba, out_nb, out_op, out_ts,
        )  # fmt: skip
        slots = new_slots[:n_new]
        if status != _OK:
            # the ids this call added are the table's newest: removing them leaves every older
            # id's probe sequence as it was
            plan["slot_keys"][slots] = 0
        if status != _FULL:
            break
        # output arrays for a quarter more lines than this block's, kept for the next blocks
        # (written again rather than allocated: no page faults); counting lines costs a pass
        # over the bytes, paid only here
        capacity = buf.count(b"\n", 0, size) * 5 // 4 + 1024
        plan["out"] = tuple(np.empty(capacity, d) for d in _INT_OUT)
        plan["volume"] = np.empty(capacity, np.int32)
    if status != _OK:
        return None, None
    plan["filled"] += n_new
    for s in slots.tolist():  # volumes numbered in order of first appearance, as the readers do
        plan["slot_vals"][s] = acc.vol(str(int(plan["slot_keys"][s]) - 1))
    if acc.fields is None:
        acc.fields = plan["n_fields"]
    return Chunk(
        ts_us=out_ts[:kept],
        lba=out_lba[:kept],
        nblocks=out_nb[:kept],
        op=out_op[:kept],
        # each request's volume index, into an array kept for the next blocks too ("clip":
        # the slots are in range, and numpy would buffer the output to check them)
        volume=np.take(plan["slot_vals"], out_slot[:kept], out=plan["volume"][:kept], mode="clip"),
        zero_length=zero,
        backward=backward,
        first_backward_line=start + first_back if first_back >= 0 else None,
        first_line=start + first_kept if first_kept >= 0 else None,
    ), lines
