"""The binary trace format (``.dtr``), read through ``numpy.memmap``.

Layout::

    0   8 bytes   magic  b"DOGITRC\\0"
    8   uint32    format version
    12  uint32    header length H (bytes of UTF-8 JSON)
    16  H bytes   header JSON: counts (requests, write requests, write blocks), write WSS,
                  max LBA, volumes, name, meta, content hash, and each array's dtype/offset
    ..  padding to 64 bytes, then the arrays (ts_us int64, lba int64, nblocks int32, op uint8,
        volume int32), each 64-byte aligned, little-endian

The header is self-describing, so ``stats`` reads it without touching the arrays.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
from pathlib import Path

import numpy as np

from .trace import Trace

MAGIC = b"DOGITRC\x00"
VERSION = 1
_PREFIX = struct.Struct("<8sII")
_ALIGN = 64
_WRITE_SLICE = 1 << 22
_ARRAYS = (("ts_us", "<i8"), ("lba", "<i8"), ("nblocks", "<i4"), ("op", "u1"), ("volume", "<i4"))


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def write_trace(trace: Trace, path: str | Path, content_hash: str | None = None) -> Path:
    """Write ``trace`` to ``path`` (atomically: a temporary file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = trace.stats()
    arrays = []
    offset = 0
    for name, dtype in _ARRAYS:
        a = getattr(trace, name)
        arrays.append((name, dtype, a, offset))
        offset = _aligned(offset + a.size * np.dtype(dtype).itemsize)
    header = {
        "name": trace.name,
        "requests": trace.n_requests,
        "write_requests": stats["write_requests"],
        "write_blocks": stats["write_blocks"],
        "wss_blocks": stats["wss_blocks"],
        "max_lba": trace.max_lba,
        "volumes": list(trace.volumes),
        "content_hash": content_hash,
        "meta": _jsonable(trace.meta),
        "arrays": {name: {"dtype": dtype, "offset": off, "count": int(a.size)} for name, dtype, a, off in arrays},
    }
    blob = json.dumps(header, sort_keys=True).encode()
    data_start = _aligned(_PREFIX.size + len(blob))
    # a name per writer: parallel sweep jobs may write the same trace at once
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(_PREFIX.pack(MAGIC, VERSION, len(blob)))
        fh.write(blob)
        fh.write(b"\0" * (data_start - _PREFIX.size - len(blob)))
        for _name, dtype, a, off in arrays:
            fh.seek(data_start + off)
            # in slices: a paper-scale column is GBs, and a constant one is a broadcast view
            for i in range(0, a.size, _WRITE_SLICE):
                fh.write(np.ascontiguousarray(a[i : i + _WRITE_SLICE], dtype=dtype).tobytes())
        fh.truncate(data_start + offset)
    tmp.replace(path)
    return path


def read_header(path: str | Path) -> dict:
    """The header of a ``.dtr`` file (no array is read); clear errors for non-trace files."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"binary trace not found: {path}")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        prefix = fh.read(_PREFIX.size)
        if len(prefix) < _PREFIX.size:
            raise ValueError(f"{path}: too short to be a dogi_ml binary trace ({size} bytes)")
        magic, version, hlen = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise ValueError(
                f"{path}: not a dogi_ml binary trace (bad magic {magic!r}); "
                "convert text traces with `python -m dogi_ml ingest path=... format=...`"
            )
        if version != VERSION:
            raise ValueError(
                f"{path}: binary trace version {version}, this dogi_ml reads version {VERSION}; "
                "re-run ingest on the source trace"
            )
        blob = fh.read(hlen)
    if len(blob) < hlen:
        raise ValueError(f"{path}: truncated header ({len(blob)} of {hlen} bytes)")
    header = json.loads(blob)
    header["data_start"] = _aligned(_PREFIX.size + hlen)
    need = max(
        (
            header["data_start"] + a["offset"] + a["count"] * np.dtype(a["dtype"]).itemsize
            for a in header["arrays"].values()
        ),
        default=0,
    )
    if size < need:
        raise ValueError(f"{path}: truncated file ({size} bytes, the header promises {need}); re-run ingest")
    header["version"] = version
    return header


def read_binary(path: str | Path) -> Trace:
    """Load a ``.dtr`` trace; arrays are read-only memory maps of the file."""
    header = read_header(path)
    arrays = {}
    for name, spec in header["arrays"].items():
        if spec["count"] == 0:
            arrays[name] = np.empty(0, spec["dtype"])
        else:
            arrays[name] = np.memmap(
                path,
                dtype=spec["dtype"],
                mode="r",
                offset=header["data_start"] + spec["offset"],
                shape=(spec["count"],),
            )
    trace = Trace.__new__(Trace)
    # bypass __post_init__'s copies: memmaps already have the right dtypes and are contiguous
    trace.ts_us, trace.lba, trace.nblocks = arrays["ts_us"], arrays["lba"], arrays["nblocks"]
    trace.op, trace.volume = arrays["op"], arrays["volume"]
    trace.volumes = header["volumes"]
    trace.name = header["name"]
    trace.meta = dict(header["meta"])
    trace.meta.setdefault("wss_blocks", header["wss_blocks"])
    trace._writes = None
    trace._write_req = None
    return trace


def content_hash(path: str | Path, opts: dict | None = None) -> str:
    """blake2b of the file's bytes and the reader options (so a cache entry matches both)."""
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    h.update(json.dumps(_jsonable(opts or {}), sort_keys=True).encode())
    h.update(f"dtr{VERSION}".encode())
    return h.hexdigest()


def ingest(path: str | Path, fmt: str, out_dir: str | Path, **opts) -> tuple[Path, dict]:
    """Convert a trace to ``out_dir/<name>.dtr`` plus ``<name>.stats.json``; a file whose
    content hash (and options) match an existing output is not parsed again."""
    from .readers import read_trace

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    out_dir = Path(out_dir)
    key = content_hash(path, {"format": fmt, **opts})
    stem = path.name.split(".")[0]
    binary = out_dir / f"{stem}.dtr"
    stats_path = out_dir / f"{stem}.stats.json"
    if binary.exists() and stats_path.exists():
        try:
            if read_header(binary).get("content_hash") == key:
                stats = json.loads(stats_path.read_text())
                stats["cached"] = True
                return binary, stats
        except ValueError:
            pass  # unreadable old output: rebuild it
    trace = read_trace(path, fmt, **opts)
    write_trace(trace, binary, content_hash=key)
    stats = {**trace.stats(), "format": fmt, "source": str(path), "content_hash": key, "cached": False}
    for k in ("skipped_lines", "zero_length_requests", "flush_requests", "first_skipped"):
        if k in trace.meta:
            stats[k] = trace.meta[k]
    stats_path.write_text(json.dumps(_jsonable(stats), indent=2))
    return binary, stats
