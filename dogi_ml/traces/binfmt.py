"""The binary trace format (``.dtr``), read through ``numpy.memmap``.

Layout (version 2)::

    0   8 bytes   magic  b"DOGITRC\\0"
    8   uint32    format version (2)
    12  uint32    header length H (bytes of UTF-8 JSON)
    16  uint32    CRC32C of bytes [8, 16) and of the header JSON
    20  uint32    0 (reserved)
    24  H bytes   header JSON: counts (requests, write requests, write blocks), write WSS,
                  max LBA, volumes, name, meta, content hash, and each array's dtype, offset,
                  count and CRC32C
    ..  padding to 64 bytes, then the arrays (ts_us int64, lba int64, nblocks int32, op uint8,
        volume int32), one entry per request, each 64-byte aligned right after the one before,
        little-endian

Version 1 (no header CRC, so the JSON starts at byte 16, and no array CRCs) is still read, with a
:class:`DtrVersionWarning` saying that its arrays are not checksummed.

The header is self-describing, so ``stats`` reads it without touching the arrays. Loading checks
everything before the data is used, in the same order and with the same messages as the ZNS
harness's C loader (``dogi_ml/zns/dtr_load.h``): the header is strict JSON with exactly the
writer's fields, the counts and offsets agree with each other and with the file's size, each
array matches its CRC32C, every request covers 1 or more blocks inside ``[0, max_lba]``, ops are
read/write/trim, volumes index the header's list, and the header's write counts and ``max_lba``
equal what the arrays hold. A failed check raises :class:`DtrFormatError`, one line naming the
file, the field or array (with the entry's index and value) and the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
import warnings
from pathlib import Path

import google_crc32c
import numba as nb
import numpy as np

from dogi_ml.errors import DogiMLError, UsageError

# BAD_INPUT_EXIT: the exit status of every bad trace file, .dtr or text (re-exported: the tests
# and callers have found it here)
from .trace import BAD_INPUT_EXIT as BAD_INPUT_EXIT
from .trace import OP_WRITE, Trace, TraceFormatError

MAGIC = b"DOGITRC\x00"
VERSION = 2
#: versions this module reads (1 with a warning: it has no checksums)
READ_VERSIONS = (1, 2)
_PREFIX = struct.Struct("<8sII")  # magic, version, header length: every version
_PREFIX_V2 = struct.Struct("<8sIIII")  # ... + CRC32C of bytes [8, 16) and the JSON, reserved
_ALIGN = 64
_WRITE_SLICE = 1 << 22
#: entries per CRC32C call when checking an array
_CHECK_SLICE = 1 << 24
_ARRAYS = (("ts_us", "<i8"), ("lba", "<i8"), ("nblocks", "<i4"), ("op", "|u1"), ("volume", "<i4"))
_DTYPES = dict(_ARRAYS)
_INT_FIELDS = ("max_lba", "requests", "write_blocks", "write_requests", "wss_blocks")
#: the header's fields, each checked for presence and type
_FIELDS = ("arrays", "content_hash", "max_lba", "meta", "name", "requests", "volumes", "write_blocks",
           "write_requests", "wss_blocks")  # fmt: skip
_ARRAY_FIELDS = ("count", "crc32c", "dtype", "offset")
#: the smallest request's bytes over the five arrays: bounds any count by the file's size
_REQUEST_BYTES = sum(np.dtype(d).itemsize for _, d in _ARRAYS)
_INT64 = (-(2**63), 2**63 - 1)
_INT64_MAX = np.int64(2**63 - 1)
_FIX = "the file is damaged or was not written by dogi_ml: re-run `python -m dogi_ml ingest` on the source trace"


class DtrFormatError(TraceFormatError):
    """A ``.dtr`` file that cannot be read as it is: the message names the file, the field or
    array (and the entry) and the fix. The command line exits with :data:`BAD_INPUT_EXIT`
    (``exit_status``, inherited: the status of every bad trace file, text or binary)."""

    def __init__(self, path, problem: str, fix: str = _FIX):
        super().__init__(f"{path}: {problem}", fix)


class DtrVersionWarning(UserWarning):
    """A version-1 ``.dtr`` file: read, but it carries no checksums."""


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


def _header_crc(version: int, blob: bytes) -> int:
    return google_crc32c.extend(google_crc32c.value(struct.pack("<II", version, len(blob))), blob)


def _slices(a: np.ndarray, dtype: str):
    """``a`` as contiguous slices of ``dtype``: a paper-scale column is GBs, and a constant one
    (a generator's request sizes) is a broadcast view."""
    for i in range(0, a.size, _WRITE_SLICE):
        yield np.ascontiguousarray(a[i : i + _WRITE_SLICE], dtype=dtype)


def write_trace(trace: Trace, path: str | Path, content_hash: str | None = None, stats: dict | None = None) -> Path:
    """Write ``trace`` to ``path`` (atomically: a temporary file renamed into place), with a
    CRC32C of the header and of each array. The arrays pass the loader's checks first, so a
    checksum never vouches for data the loader would refuse. ``stats``: ``trace.stats()``, when
    the caller has it already (fleet.split_trace: not computed twice)."""
    path = Path(path)
    if trace.n_requests == 0:
        raise DogiMLError(
            f"trace {trace.name!r} holds no requests, so there is nothing to write to {path}",
            "check the trace's source and any volume selection",
        )
    _check_arrays(
        f"trace {trace.name!r} (being written to {path})",
        {name: getattr(trace, name) for name, _ in _ARRAYS},
        trace.max_lba,
        len(trace.volumes),
        fix="the trace is invalid: report the reader or generator that made it",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if stats is None:
        stats = trace.stats()
    arrays = []
    offset = 0
    for name, dtype in _ARRAYS:
        a = getattr(trace, name)
        arrays.append((name, dtype, a, offset))
        offset = _aligned(offset + a.size * np.dtype(dtype).itemsize)
    crcs = {}
    for name, dtype, a, _off in arrays:
        crc = 0
        for chunk in _slices(a, dtype):
            crc = google_crc32c.extend(crc, chunk)
        crcs[name] = crc
    header = {
        "name": trace.name,
        "requests": trace.n_requests,
        "write_requests": stats["write_requests"],
        "write_blocks": stats["write_blocks"],
        "wss_blocks": stats["wss_blocks"],
        "max_lba": trace.max_lba,
        "volumes": [str(v) for v in trace.volumes],
        "content_hash": content_hash,
        "meta": _jsonable(trace.meta),
        "arrays": {
            name: {"dtype": dtype, "offset": off, "count": int(a.size), "crc32c": crcs[name]}
            for name, dtype, a, off in arrays
        },
    }
    blob = json.dumps(header, sort_keys=True).encode()
    data_start = _aligned(_PREFIX_V2.size + len(blob))
    # a name per writer: parallel sweep jobs may write the same trace at once
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(_PREFIX_V2.pack(MAGIC, VERSION, len(blob), _header_crc(VERSION, blob), 0))
            fh.write(blob)
            fh.write(b"\0" * (data_start - _PREFIX_V2.size - len(blob)))
            for _name, dtype, a, off in arrays:
                fh.seek(data_start + off)
                for chunk in _slices(a, dtype):
                    fh.write(chunk)
            fh.truncate(data_start + offset)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# -- reading ---------------------------------------------------------------------------------
class _Object(dict):
    """A JSON object that remembers its members in file order, repeats included."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _is_int(v) -> bool:
    return type(v) is int and _INT64[0] <= v <= _INT64[1]


def _parse_header_json(path, blob: bytes, version: int) -> dict:
    """The header's fields, each present once and of its type, checked in the file's order (as
    the C loader does, so both report the same first problem)."""
    try:
        top = json.loads(blob.decode("utf-8"), object_pairs_hook=_Object, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DtrFormatError(path, "the header is not valid JSON") from None
    if not isinstance(top, _Object):
        raise DtrFormatError(path, "the header is not a JSON object")
    seen = set()
    for key, value in top.pairs:
        if key not in _FIELDS:
            raise DtrFormatError(path, f'unknown header field "{key[:64]}"')
        if key in seen:
            raise DtrFormatError(path, f'header field "{key}" appears twice')
        seen.add(key)
        if key == "arrays":
            _check_array_entries(path, value, version)
        elif key == "name" and not isinstance(value, str):
            raise DtrFormatError(path, 'header field "name" is not a string')
        elif key == "content_hash" and not (value is None or isinstance(value, str)):
            raise DtrFormatError(path, 'header field "content_hash" is not a string or null')
        elif key == "meta" and not isinstance(value, dict):
            raise DtrFormatError(path, 'header field "meta" is not an object')
        elif key == "volumes" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise DtrFormatError(path, 'header field "volumes" is not a list of strings')
        elif key in _INT_FIELDS and not _is_int(value):
            raise DtrFormatError(path, f'header field "{key}" is not an integer')
    for key in _FIELDS:
        if key not in seen:
            raise DtrFormatError(path, f'header field "{key}" is missing')
    return dict(top)


def _check_array_entries(path, arrays, version: int) -> None:
    if not isinstance(arrays, dict):
        raise DtrFormatError(path, 'header field "arrays" is not an object')
    seen = set()
    for name, entry in arrays.pairs:
        if name not in _DTYPES:
            raise DtrFormatError(path, f'unknown header array "{name[:64]}"')
        if name in seen:
            raise DtrFormatError(path, f'header array "{name}" appears twice')
        seen.add(name)
        if not isinstance(entry, dict):
            raise DtrFormatError(path, f'header array "{name}" is not an object')
        fields = set()
        for key, value in entry.pairs:
            if key not in _ARRAY_FIELDS or (key == "crc32c" and version < 2):
                raise DtrFormatError(path, f'header array "{name}" has an unknown field "{key[:64]}"')
            if key in fields:
                raise DtrFormatError(path, f'header array "{name}" repeats "{key}"')
            fields.add(key)
            if key == "dtype":
                if not isinstance(value, str):
                    raise DtrFormatError(path, f'header array "{name}": dtype is not a string')
                # "u1" is what version 1's writer put for op
                if value != _DTYPES[name] and not (name == "op" and value == "u1"):
                    raise DtrFormatError(path, f'array {name} has dtype "{value[:16]}", expected {_DTYPES[name]}')
            elif not _is_int(value):
                raise DtrFormatError(path, f'header array "{name}": {key} is not an integer')
            elif key == "crc32c" and not 0 <= value <= 0xFFFFFFFF:
                raise DtrFormatError(path, f'header array "{name}": crc32c = {value} is not a 32-bit value')
        for key in _ARRAY_FIELDS:
            if key not in fields and not (key == "crc32c" and version < 2):
                raise DtrFormatError(path, f'header array "{name}" lacks "{key}"')
    for name, _ in _ARRAYS:
        if name not in seen:
            raise DtrFormatError(path, f'header array "{name}" is missing')


def read_header(path: str | Path) -> dict:
    """The header of a ``.dtr`` file, checked against itself and the file's size (no array is
    read); :class:`DtrFormatError` for anything else."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"binary trace not found: {path}")
    if not path.is_file():
        raise UsageError(f"{path} is not a regular file", "give the path of a .dtr file")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        prefix = fh.read(_PREFIX_V2.size)
        if len(prefix) < _PREFIX.size:
            raise DtrFormatError(path, f"too short to be a dogi_ml binary trace ({size} bytes)")
        magic, version, hlen = _PREFIX.unpack_from(prefix)
        if magic != MAGIC:
            raise DtrFormatError(
                path,
                "not a dogi_ml binary trace (bad magic)",
                "convert text traces with `python -m dogi_ml ingest path=... format=...`",
            )
        if version not in READ_VERSIONS:
            raise DtrFormatError(
                path,
                f"binary trace version {version}, this dogi_ml reads versions 1 and 2",
                "re-run `python -m dogi_ml ingest` on the source trace with this dogi_ml",
            )
        start = _PREFIX.size if version == 1 else _PREFIX_V2.size
        if size < start:
            raise DtrFormatError(path, f"too short to be a dogi_ml binary trace ({size} bytes)")
        if hlen > size - start:
            raise DtrFormatError(path, f"truncated header ({hlen} bytes announced, {size - start} in the file)")
        fh.seek(start)
        blob = fh.read(hlen)
    if version >= 2:
        _, _, _, stored, reserved = _PREFIX_V2.unpack(prefix)
        got = _header_crc(version, blob)
        if got != stored:
            raise DtrFormatError(path, f"the header fails its checksum (CRC32C 0x{got:08x}, stored 0x{stored:08x})")
        if reserved:
            raise DtrFormatError(path, "reserved prefix bytes 20-23 are not zero")
    header = _parse_header_json(path, blob, version)
    _check_counts(path, header, size, _aligned(start + hlen))
    _check_padding(path, header, size, start + hlen, _aligned(start + hlen))
    header["data_start"] = _aligned(start + hlen)
    header["version"] = version
    return header


def _check_counts(path, h: dict, size: int, data_start: int) -> None:
    """The header's counts against each other, the layout and the file's size."""
    n = h["requests"]
    if n < 1:
        raise DtrFormatError(path, f"header field requests = {n}, a trace holds at least 1 request")
    if n > (size - data_start) // _REQUEST_BYTES:
        raise DtrFormatError(path, f"truncated file ({size} bytes, too few for the header's {n} requests)")
    wr, wb, wss = h["write_requests"], h["write_blocks"], h["wss_blocks"]
    if not 0 <= wr <= n:
        raise DtrFormatError(path, f"header field write_requests = {wr} is outside [0, requests = {n}]")
    if not wr <= wb <= min(wr * (2**31 - 1), _INT64[1]):
        raise DtrFormatError(path, f"header field write_blocks = {wb} is outside [write_requests, {wr} x 2147483647]")
    if not int(wb > 0) <= wss <= wb:
        raise DtrFormatError(path, f"header field wss_blocks = {wss} is outside [{int(wb > 0)}, write_blocks = {wb}]")
    if h["max_lba"] < 0:
        raise DtrFormatError(path, f"header field max_lba = {h['max_lba']} is negative")
    if not h["volumes"]:
        raise DtrFormatError(path, "header field volumes is empty, a trace names at least 1 volume")
    if len(h["volumes"]) > 2**31 - 1:
        raise DtrFormatError(
            path, f"header field volumes has {len(h['volumes'])} entries, more than an int32 index reaches"
        )
    expect = 0
    for name, dtype in _ARRAYS:
        spec = h["arrays"][name]
        if spec["count"] != n:
            raise DtrFormatError(path, f"array {name} holds {spec['count']} entries, the header's requests = {n}")
        if spec["offset"] != expect:
            raise DtrFormatError(
                path, f"array {name} starts at offset {spec['offset']}, the layout puts it at {expect}"
            )
        expect = _aligned(expect + n * np.dtype(dtype).itemsize)
    if size != data_start + expect:
        kind = "truncated" if size < data_start + expect else "oversized"
        raise DtrFormatError(path, f"{kind} file ({size} bytes, the header accounts for {data_start + expect})")


def _check_padding(path, h: dict, size: int, header_end: int, data_start: int) -> None:
    """The padding after the header and after each array: zeros, as the writer leaves it."""
    gaps, start = [], header_end
    for name, dtype in _ARRAYS:
        spec = h["arrays"][name]
        gaps.append((start, data_start + spec["offset"]))
        start = data_start + spec["offset"] + spec["count"] * np.dtype(dtype).itemsize
    gaps.append((start, size))
    with open(path, "rb") as fh:
        for lo, hi in gaps:
            fh.seek(lo)
            pad = fh.read(hi - lo)
            zeros = len(pad) - len(pad.lstrip(b"\0"))
            if zeros < len(pad):
                raise DtrFormatError(path, f"padding byte at offset {lo + zeros} is not zero")


@nb.njit(cache=True, nogil=True)
def _scan(lba, nblocks, op, volume, max_lba, n_volumes):
    """One pass over the arrays: the first bad entry of each kind (-1: none; nblocks < 1, op
    beyond trim, lba negative or ending beyond max_lba, volume outside [0, n_volumes)), the
    highest block a request reaches, the write requests and the blocks they cover."""
    bad_nb = bad_op = bad_lba = bad_vol = -1
    reach = -1
    write_requests = write_blocks = 0
    for i in range(lba.shape[0]):
        n = np.int64(nblocks[i])
        a = np.int64(lba[i])
        if n < 1:
            if bad_nb < 0:
                bad_nb = i
            continue
        if op[i] > 2 and bad_op < 0:
            bad_op = i
        if (a < 0 or a > max_lba - (n - 1)) and bad_lba < 0:  # no overflow: n >= 1, max_lba >= 0
            bad_lba = i
        elif a + n - 1 > reach:
            reach = a + n - 1
        if (volume[i] < 0 or volume[i] >= n_volumes) and bad_vol < 0:
            bad_vol = i
        if op[i] == OP_WRITE:  # the blocks saturate at int64's top (more than any header says), as in C
            write_requests += 1
            write_blocks = _INT64_MAX if n > _INT64_MAX - write_blocks else write_blocks + n
    return bad_nb, bad_op, bad_lba, bad_vol, reach, write_requests, write_blocks


def _check_arrays(where, arrays: dict, max_lba: int, n_volumes: int, fix: str = _FIX, header: dict | None = None):
    """Every entry in range; with ``header``, its write counts and max_lba must equal what the
    arrays hold. The problem reported is the C loader's first (it checks all of nblocks, then
    op, then lba, then volume, then the counts)."""
    lba, nblocks, op, volume = arrays["lba"], arrays["nblocks"], arrays["op"], arrays["volume"]
    bad_nb, bad_op, bad_lba, bad_vol, reach, write_requests, write_blocks = _scan(
        lba, nblocks, op, volume, max_lba, n_volumes
    )

    def fail(problem):
        raise DtrFormatError(where, problem, fix)

    if bad_nb >= 0:
        fail(f"nblocks[{bad_nb}] = {int(nblocks[bad_nb])}, a request covers at least 1 block")
    if bad_op >= 0:
        fail(f"op[{bad_op}] = {int(op[bad_op])} is not a known operation (0 read, 1 write, 2 trim)")
    if bad_lba >= 0:
        a, n = int(lba[bad_lba]), int(nblocks[bad_lba])
        if a < 0:
            fail(f"lba[{bad_lba}] = {a} is negative")
        fail(f"lba[{bad_lba}] = {a} with nblocks {n} ends beyond the header's max_lba = {max_lba}")
    if bad_vol >= 0:
        fail(f"volume[{bad_vol}] = {int(volume[bad_vol])} is outside [0, {n_volumes}) (the header's volumes)")
    if header is None:
        return
    if reach != header["max_lba"]:
        fail(f"the header's max_lba = {header['max_lba']}, but the requests reach block {reach}")
    if write_requests != header["write_requests"]:
        fail(
            f"the header's write_requests = {header['write_requests']}, but op marks {write_requests} requests as writes"
        )
    if write_blocks != header["write_blocks"]:
        fail(
            f"the header's write_blocks = {header['write_blocks']}, but the write requests cover {write_blocks} blocks"
        )


def read_binary(path: str | Path) -> Trace:
    """Load a ``.dtr`` trace, every check passed (see the module's docstring); arrays are
    read-only memory maps of the file."""
    header = read_header(path)
    arrays = {}
    for name, dtype in _ARRAYS:
        spec = header["arrays"][name]
        arrays[name] = np.memmap(
            path, dtype=dtype, mode="r", offset=header["data_start"] + spec["offset"], shape=(spec["count"],)
        )
        if header["version"] >= 2:
            crc = 0
            for i in range(0, spec["count"], _CHECK_SLICE):
                crc = google_crc32c.extend(crc, arrays[name][i : i + _CHECK_SLICE])
            if crc != spec["crc32c"]:
                raise DtrFormatError(
                    path,
                    f"array {name} fails its checksum (CRC32C 0x{crc:08x}, the header says 0x{spec['crc32c']:08x})",
                )
    _check_arrays(path, arrays, header["max_lba"], len(header["volumes"]), header=header)
    if header["version"] < 2:
        warnings.warn(
            f"{path}: binary trace version {header['version']} has no checksums, so damage to its arrays may go "
            f"unseen -- re-run `python -m dogi_ml ingest` on the source trace (or delete it from the trace cache) "
            f"to rewrite it as version {VERSION}",
            DtrVersionWarning,
            stacklevel=2,
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


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # a link or another spelling of the same file too
    except OSError:  # one of them is gone: compare the paths
        return a.resolve() == b.resolve()


def _earlier_source(binary: Path, stats_path: Path) -> tuple[Path | None, str | None]:
    """(the input an earlier ``ingest`` wrote ``binary`` from, None when unknown; why it is
    unknown, None when nothing is there). Its statistics name it (``source_path``, absolute,
    since this change; ``source`` as given), else the ``.dtr``'s header."""
    if not binary.exists() and not stats_path.exists():
        return None, None
    try:
        stats = json.loads(stats_path.read_text())
        source = stats.get("source_path") or stats["source"]
        return Path(source), None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        return Path(read_header(binary)["meta"]["source"]), None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{binary.name} and {stats_path.name} name no source ({' '.join(str(exc).split())[:120]})"


def ingest(path: str | Path, fmt: str, out_dir: str | Path, **opts) -> tuple[Path, dict]:
    """Convert a trace to ``out_dir/<name>.dtr`` plus ``<name>.stats.json`` (``<name>``: the file's
    name before its first dot); a file whose content hash (and options) match an existing output
    is not parsed again.

    An output written from another input with the same name (``a/x.csv`` then ``b/x.csv``, or
    ``x.csv`` then ``x.txt``) is not overwritten: a :class:`UsageError` names both inputs before
    anything is read or written. One written from this input with other content or options is
    replaced, and ``stats["replaced"]`` says so (as it does for an output that names no source)."""
    from .readers import read_trace

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    out_dir = Path(out_dir)
    stem = path.name.split(".")[0]
    binary = out_dir / f"{stem}.dtr"
    stats_path = out_dir / f"{stem}.stats.json"
    earlier, unknown = _earlier_source(binary, stats_path)
    if earlier is not None and not _same_file(earlier, path):
        raise UsageError(
            f"{binary} holds the trace of {earlier}; path={path} would overwrite it (both are named {stem!r}: "
            "an output takes its input's name before the first dot)",
            f"give another out= directory for one of them, rename one of the inputs, or delete {binary} "
            f"and {stats_path} to replace it",
        )
    key = content_hash(path, {"format": fmt, **opts})
    if binary.exists() and stats_path.exists():
        try:
            if read_header(binary).get("content_hash") == key:
                stats = json.loads(stats_path.read_text())
                stats["cached"] = True
                return binary, stats
        except ValueError:
            pass  # unreadable old output: rebuilt below
    trace = read_trace(path, fmt, **opts)
    write_trace(trace, binary, content_hash=key)
    stats = {
        **trace.stats(),
        "format": fmt,
        "source": str(path),
        "source_path": str(path.resolve()),  # what a later run with the same name is compared with
        "content_hash": key,
        "cached": False,
    }
    for k in ("skipped_lines", "zero_length_requests", "flush_requests", "first_skipped"):
        if k in trace.meta:
            stats[k] = trace.meta[k]
    stats_path.write_text(json.dumps(_jsonable(stats), indent=2))
    if unknown is not None:
        stats["replaced"] = f"replaced {binary}, which an earlier run left: {unknown}"
    elif earlier is not None:
        stats["replaced"] = f"replaced {binary}, written before from {path} with other content or options"
    return binary, stats
