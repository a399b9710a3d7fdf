"""Fleets of volumes as data: one ``.dtr`` per volume plus a Parquet manifest.

A fleet directory holds::

    DIR/fleet.parquet          the manifest, one row per volume (columns: MANIFEST_COLUMNS)
    DIR/volumes/<id>.dtr       each volume's requests (the .dtr v2 format of binfmt.py, CRC32C-checked)

:func:`generate_fleet` draws a synthetic fleet, optionally also as one Alibaba-format CSV so
that the trace splitter can be checked against it.

API (what other modules build on)::

    read_fleet(path, verify=False) -> list[FleetVolume]   # path: the fleet directory or its .parquet
    read_fleet_table(path) -> pyarrow.Table               # the manifest as written (checked columns)
    fleet_metadata(path) -> dict                          # source, format, generator settings, counts
    write_fleet(out_dir, rows, metadata) -> Path          # rows: dicts with MANIFEST_COLUMNS
    volume_row(volume, dtr_path, fleet_dir) -> dict       # a manifest row from a written .dtr
    file_checksum(path) -> str                            # "crc32c:xxxxxxxx" of a file's bytes
    generate_fleet(out_dir, n_volumes, seed, spec=None, csv=False) -> Path   # the manifest's path

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

import json
import math
import os
import re
import secrets
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import google_crc32c
import numpy as np

from dogi_ml.errors import DogiMLError

from .binfmt import read_binary, write_trace
from .trace import BLOCK_SIZE, OP_READ, OP_WRITE, Trace, remap_dense

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
    """``crc32c:`` and the 8 hex digits of the CRC32C of the file's bytes."""
    crc = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            crc = google_crc32c.extend(crc, block)
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
    table = pa.Table.from_pylist([{c: row[c] for c in MANIFEST_COLUMNS} for row in rows], schema=_schema())
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
                raise DogiMLError(f"fleet spec: {key}={v!r} is not a finite number", f"give a number for {key}")
            if (lo is not None and v < lo) or (above is not None and v <= above):
                bound = f">= {lo}" if lo is not None else f"above {above}"
                raise DogiMLError(f"fleet spec: {key}={v} must be {bound}", f"give {key} {bound}")

        def pair(key, lo=None, above=None):
            v = getattr(self, key)
            if not (isinstance(v, tuple) and len(v) == 2):
                raise DogiMLError(f"fleet spec: {key}={v!r} is not a [low, high] pair", f"give {key}=[low,high]")
            for x in v:
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                    raise DogiMLError(f"fleet spec: {key}={list(v)} holds a non-number", f"give {key}=[low,high]")
            if v[0] > v[1] or (lo is not None and v[0] < lo) or (above is not None and v[0] <= above):
                bound = f">= {lo}" if lo is not None else f"above {above}"
                raise DogiMLError(
                    f"fleet spec: {key}={list(v)} needs low <= high, both {bound}", f"give {key}=[low,high]"
                )

        for key in ("wss_median", "traffic_median", "interval_median_us", "read_alpha", "read_beta"):
            number(key, above=0)
        for key in ("wss_sigma", "traffic_sigma", "interval_sigma"):
            number(key, lo=0)
        number("wss_min", lo=1)
        number("max_request_blocks", lo=1)
        number("traffic_min", above=0)
        for key in ("wss_min", "wss_max", "max_request_blocks"):
            if not isinstance(getattr(self, key), int):
                raise DogiMLError(f"fleet spec: {key}={getattr(self, key)!r} is not a whole number", f"give {key}=N")
        if self.wss_max < self.wss_min:
            raise DogiMLError(f"fleet spec: wss_max={self.wss_max} < wss_min={self.wss_min}", "give wss_max >= wss_min")
        if self.traffic_max < self.traffic_min:
            raise DogiMLError(
                f"fleet spec: traffic_max={self.traffic_max} < traffic_min={self.traffic_min}",
                "give traffic_max >= traffic_min",
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
    ts = np.floor(np.cumsum(gaps)).astype(np.int64)
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
        trace.meta = {"generator": "fleet", "seed": seed, "volume_index": i, **params}
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
