"""Readers for public block-trace formats, streaming in bounded memory.

Every reader turns a file (plain, ``.gz`` or ``.zst``, detected by magic bytes) into chunks of
compact request arrays, then :func:`read_trace` concatenates them into a :class:`Trace` in 4 KiB
blocks with dense, order-preserving LBAs. Text is parsed ``chunk_lines`` lines at a time: CSV-like
formats with pyarrow (fast path), falling back to a per-line parse of a chunk only to name the
exact bad line.

Formats (``FORMATS``):

==================  =================================================================================
``alibaba``         ``device_id,opcode,offset,length,timestamp``; R/W; bytes; µs; many volumes
``tencent``         ``Timestamp,Offset,Size,IOType,VolumeID``; s; 512 B sectors; 0 = read, 1 = write
``msr``             ``Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime``; Windows
                    filetime (100 ns); Read/Write; bytes; volume = ``Hostname_DiskNumber``
``spc``             ``ASU,LBA,Size,Opcode,Timestamp``; LBA in sectors, size in bytes; r/w; s
``blkparse``        blkparse default text; ``Q`` (queued) events only; rwbs R/W/D(iscard)/F(lush)
``fio``             fio iolog v2 / v3 (v3 lines start with a timestamp in ms)
``mqsim``           ``time_ns device lba_sectors size_sectors type``; 0 = write, 1 = read
``blocks``          ``.npy`` array of LBAs or text with one LBA per line; each a 4 KiB block write
``delimited``       any delimited text, mapped by a config (see :class:`DelimitedSpec`)
``flashnet_tencent``  FlashNet's Tencent cuts: ``ts_ms,latency_us,io_type,size,offset,...``; 1 = read
``flashnet_msr``    FlashNet/Heimdall MSR cuts: ``ts_ms dev offset_bytes size_bytes io_type``; 1 = read
``sectors_trace``   ``ts_ms dev offset_sectors size_sectors io_type``; 1 = read, 0 = write
==================  =================================================================================

Semantics: an unaligned request covers every 4 KiB block it touches; zero-length requests are
counted (``meta["zero_length_requests"]``) and dropped; flush/sync requests are counted
(``meta["flush_requests"]``) and carry no blocks; trims/discards are kept as ``OP_TRIM``.
A malformed line raises :class:`TraceFormatError` naming the file, the line and the reason;
with ``skip_malformed=True`` it is skipped and counted (``meta["skipped_lines"]``).

A ``delimited`` mapping (``workload.delimited`` / ``ingest delimited=...``)::

    sep: ","                 # one character; " " also accepts runs of whitespace
    header: false            # skip the first line
    comment: "#"             # lines starting with this are ignored (optional)
    columns: {ts: 0, offset: 4, size: 3, op: 2, volume: 1}   # volume optional (a list joins columns)
    units: {ts: ms, offset: bytes, size: bytes}   # ts: s|ms|us|ns|filetime; offset/size: bytes|sectors|blocks
    op_map: {"0": write, "1": read}               # values: read|write|trim|flush|ignore
    op_case_insensitive: false
"""

from __future__ import annotations

import gzip
import io
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dogi_ml.progress import bar as progress_bar

from .trace import BLOCK_SIZE, OP_READ, OP_TRIM, OP_WRITE, SECTOR_SIZE, Trace, TraceFormatError, remap_dense

TS_TO_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "filetime": 0.1}
ADDR_UNIT = {"bytes": 1, "sectors": SECTOR_SIZE, "blocks": BLOCK_SIZE}
OP_KINDS = {"read", "write", "trim", "flush", "ignore"}
_KIND_CODE = {"read": OP_READ, "write": OP_WRITE, "trim": OP_TRIM, "flush": 254, "ignore": 255}
FLUSH, IGNORE = 254, 255


# -- opening files --------------------------------------------------------------------------------
def open_text(path: str | Path):
    """Open a trace as text, decompressing gzip or zstd by magic bytes."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    if magic == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _raw_position(fh) -> int | None:
    """Bytes of the file on disk read so far under a text handle (compressed bytes for .gz/.zst)."""
    raw = getattr(fh, "buffer", None)
    for obj in (getattr(raw, "fileobj", None), getattr(raw, "_fp", None), raw):
        tell = getattr(obj, "tell", None)
        if tell is None:
            continue
        try:
            return int(tell())
        except (OSError, ValueError, AttributeError):
            continue
    return None


def _tracked(chunks: Iterator[Chunk], fh, acc: _Acc) -> Iterator[Chunk]:
    """``chunks`` unchanged; reports the file position after each one to ``acc.on_bytes``."""
    for chunk in chunks:
        if acc.on_bytes is not None:
            pos = _raw_position(fh)
            if pos is not None:
                acc.on_bytes(pos)
        yield chunk


# -- request chunks -------------------------------------------------------------------------------
@dataclass
class Chunk:
    """Requests parsed from one chunk of lines, addresses in 4 KiB blocks (original space)."""

    ts_us: np.ndarray
    lba: np.ndarray
    nblocks: np.ndarray
    op: np.ndarray
    volume: np.ndarray  # indices into the reader's volume list
    skipped: int = 0
    zero_length: int = 0
    flushes: int = 0


@dataclass
class _Acc:
    """Volume names seen so far (shared by a file's chunks) and malformed-line bookkeeping."""

    path: Path
    skip: bool
    volumes: dict = field(default_factory=dict)
    first_skipped: list = field(default_factory=list)
    on_bytes: object = None  # called with the bytes of the file read so far (a progress bar)

    def vol(self, name: str) -> int:
        idx = self.volumes.get(name)
        if idx is None:
            idx = self.volumes[name] = len(self.volumes)
        return idx

    def bad(self, lineno: int, reason: str) -> None:
        if not self.skip:
            raise TraceFormatError(f"{self.path}:{lineno}: {reason}")
        if len(self.first_skipped) < 5:
            self.first_skipped.append(f"line {lineno}: {reason}")


def _finish(acc: _Acc, ts_us, offset_bytes, size_bytes, kinds, vols, skipped) -> Chunk:
    """Byte ranges + op kinds -> block requests; zero-length and flushes counted, not kept."""
    ts_us = np.asarray(ts_us, np.int64)
    offset_bytes = np.asarray(offset_bytes, np.int64)
    size_bytes = np.asarray(size_bytes, np.int64)
    kinds = np.asarray(kinds, np.uint8)
    vols = np.asarray(vols, np.int32)
    flushes = int((kinds == FLUSH).sum())
    data = kinds <= OP_TRIM
    zero = data & (size_bytes == 0)
    keep = data & ~zero
    first = offset_bytes // BLOCK_SIZE
    last = (offset_bytes + np.maximum(size_bytes, 1) - 1) // BLOCK_SIZE
    return Chunk(
        ts_us=ts_us[keep],
        lba=first[keep],
        nblocks=(last - first + 1)[keep].astype(np.int32),
        op=kinds[keep],
        volume=vols[keep],
        skipped=skipped,
        zero_length=int(zero.sum()),
        flushes=flushes,
    )


def _line_chunks(fh, chunk_lines: int) -> Iterator[tuple[int, list[str]]]:
    """(1-based number of the chunk's first line, lines) in chunks."""
    lineno = 1
    while True:
        lines = list(itertools.islice(fh, chunk_lines))
        if not lines:
            return
        yield lineno, lines
        lineno += len(lines)


# -- delimited (and the CSV presets) --------------------------------------------------------------
@dataclass
class DelimitedSpec:
    """Column/unit mapping of a delimited trace (see the module docstring)."""

    columns: dict
    units: dict
    op_map: dict
    sep: str = ","
    header: bool = False
    comment: str | None = None
    op_case_insensitive: bool = False

    @classmethod
    def from_mapping(cls, cfg: Mapping) -> DelimitedSpec:
        cfg = dict(cfg)
        missing = [k for k in ("columns", "units", "op_map") if k not in cfg]
        if missing:
            raise ValueError(
                f"delimited format needs {missing} in its mapping; e.g. columns: "
                "{ts: 0, offset: 1, size: 2, op: 3}, units: {ts: s, offset: bytes, size: bytes}, "
                "op_map: {R: read, W: write}"
            )
        known = {"columns", "units", "op_map", "sep", "header", "comment", "op_case_insensitive"}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"delimited mapping: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        spec = cls(**cfg)
        spec.validate()
        return spec

    def validate(self) -> None:
        cols = dict(self.columns)
        for need in ("offset", "size", "op"):
            if need not in cols:
                raise ValueError(f"delimited mapping: columns needs {need!r} (a 0-based column index)")
        units = dict(self.units)
        if "ts" in cols and units.get("ts", "s") not in TS_TO_US:
            raise ValueError(f"delimited mapping: units.ts must be one of {sorted(TS_TO_US)}, got {units.get('ts')!r}")
        for k in ("offset", "size"):
            if units.get(k, "bytes") not in ADDR_UNIT:
                raise ValueError(
                    f"delimited mapping: units.{k} must be one of {sorted(ADDR_UNIT)}, got {units.get(k)!r}"
                )
        for v, kind in dict(self.op_map).items():
            if kind not in OP_KINDS:
                raise ValueError(f"delimited mapping: op_map[{v!r}] = {kind!r}; use one of {sorted(OP_KINDS)}")
        if len(self.sep) != 1:
            raise ValueError(f"delimited mapping: sep must be one character, got {self.sep!r}")

    @property
    def vol_cols(self) -> list[int]:
        v = self.columns.get("volume")
        if v is None:
            return []
        return [int(c) for c in v] if isinstance(v, (list, tuple)) else [int(v)]

    @property
    def ncols(self) -> int:
        idx = [int(c) for k, c in self.columns.items() if k != "volume"] + self.vol_cols
        return max(idx) + 1

    def op_lookup(self) -> dict:
        m = {str(k).strip(): _KIND_CODE[v] for k, v in self.op_map.items()}
        if self.op_case_insensitive:
            m = {k.lower(): v for k, v in m.items()}
        return m


PRESETS: dict[str, dict] = {
    "alibaba": dict(
        sep=",",
        columns={"volume": 0, "op": 1, "offset": 2, "size": 3, "ts": 4},
        units={"ts": "us", "offset": "bytes", "size": "bytes"},
        op_map={"R": "read", "W": "write"},
        op_case_insensitive=True,
    ),
    "tencent": dict(
        sep=",",
        columns={"ts": 0, "offset": 1, "size": 2, "op": 3, "volume": 4},
        units={"ts": "s", "offset": "sectors", "size": "sectors"},
        op_map={"0": "read", "1": "write"},
    ),
    "msr": dict(
        sep=",",
        columns={"ts": 0, "volume": [1, 2], "op": 3, "offset": 4, "size": 5},
        units={"ts": "filetime", "offset": "bytes", "size": "bytes"},
        op_map={"read": "read", "write": "write"},
        op_case_insensitive=True,
    ),
    "spc": dict(
        sep=",",
        columns={"volume": 0, "offset": 1, "size": 2, "op": 3, "ts": 4},
        units={"ts": "s", "offset": "sectors", "size": "bytes"},
        op_map={"r": "read", "w": "write"},
        op_case_insensitive=True,
    ),
    "mqsim": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ns", "offset": "sectors", "size": "sectors"},
        op_map={"0": "write", "1": "read"},
    ),
    "flashnet_tencent": dict(
        sep=",",
        columns={"ts": 0, "op": 2, "size": 3, "offset": 4},
        units={"ts": "ms", "offset": "bytes", "size": "bytes"},
        op_map={"1": "read", "0": "write"},
    ),
    "flashnet_msr": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ms", "offset": "bytes", "size": "bytes"},
        op_map={"1": "read", "0": "write"},
    ),
    "sectors_trace": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ms", "offset": "sectors", "size": "sectors"},
        op_map={"1": "read", "0": "write"},
    ),
}


def _parse_number(text: str, what: str, integer: bool):
    text = text.strip()
    try:
        return int(text) if integer else float(text)
    except ValueError:
        if integer:
            try:
                v = float(text)
                if v == int(v):
                    return int(v)
            except ValueError:
                pass
        raise ValueError(f"{what} {text!r} is not {'an integer' if integer else 'a number'}") from None


def _delimited_lines(spec: DelimitedSpec, acc: _Acc, start: int, lines: list[str]) -> Chunk:
    """Per-line parse (exact error positions); also the fallback of the pyarrow path."""
    ops = spec.op_lookup()
    ts_mul = TS_TO_US[spec.units.get("ts", "s")]
    off_mul = ADDR_UNIT[spec.units.get("offset", "bytes")]
    size_mul = ADDR_UNIT[spec.units.get("size", "bytes")]
    c = spec.columns
    ts_col = c.get("ts")
    filetime = spec.units.get("ts") == "filetime"
    ncols = spec.ncols
    ts, off, size, kind, vol = [], [], [], [], []
    skipped = 0
    for k, line in enumerate(lines):
        lineno = start + k
        s = line.strip()
        if not s or (spec.comment and s.startswith(spec.comment)) or (spec.header and lineno == 1):
            continue
        parts = s.split() if spec.sep == " " else s.split(spec.sep)
        try:
            if len(parts) < ncols:
                raise ValueError(f"expected at least {ncols} fields separated by {spec.sep!r}, got {len(parts)}")
            o = _parse_number(parts[int(c["offset"])], "offset", True) * off_mul
            n = _parse_number(parts[int(c["size"])], "size", True) * size_mul
            if o < 0 or n < 0:
                raise ValueError(f"negative offset or size ({o}, {n})")
            op_text = parts[int(c["op"])].strip()
            code = ops.get(op_text.lower() if spec.op_case_insensitive else op_text)
            if code is None:
                raise ValueError(f"unknown operation {op_text!r} (known: {', '.join(map(str, spec.op_map))})")
            if ts_col is None:
                t = float(lineno)
            elif filetime:  # 100 ns ticks since 1601: too large for a float's precision
                t = _parse_number(parts[int(ts_col)], "timestamp", True) // 10
            else:
                t = _parse_number(parts[int(ts_col)], "timestamp", False) * ts_mul
        except ValueError as exc:
            acc.bad(lineno, str(exc))
            skipped += 1
            continue
        if code == IGNORE:
            continue
        ts.append(int(round(t)))
        off.append(o)
        size.append(n)
        kind.append(code)
        vol.append(acc.vol("_".join(parts[i].strip() for i in spec.vol_cols) or "0"))
    return _finish(acc, ts, off, size, kind, vol, skipped)


def _dict_encode(column) -> tuple[list, np.ndarray]:
    """(distinct values, index of each row's value) of a pyarrow string column."""
    import pyarrow as pa

    enc = pa.chunked_array(column).combine_chunks().dictionary_encode()
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False)


def _delimited_arrow(spec: DelimitedSpec, acc: _Acc, start: int, lines: list[str]) -> Chunk | None:
    """Vectorised parse of a chunk with pyarrow; None when anything looks off (the caller then
    parses the chunk line by line, which names the bad line)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if spec.comment or (spec.header and start == 1):
        return None  # comments and headers: leave them to the line parser
    if spec.sep == " " and any(ln[:1] == " " or "  " in ln or "\t" in ln for ln in lines):
        return None  # runs of whitespace: the line parser splits on any whitespace
    ncols = spec.ncols
    used = {int(v) for k, v in spec.columns.items() if k != "volume"} | set(spec.vol_cols)
    types = {f"c{i}": pa.string() for i in range(ncols)}
    types[f"c{spec.columns['offset']}"] = pa.int64()
    types[f"c{spec.columns['size']}"] = pa.int64()
    filetime = spec.units.get("ts") == "filetime"
    if "ts" in spec.columns:
        types[f"c{spec.columns['ts']}"] = pa.int64() if filetime else pa.float64()
    data = "".join(lines).encode()
    try:
        # all columns are read (extra trailing columns are tolerated via invalid_row_handler=None
        # failing -> fallback); only the used ones are converted
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, block_size=1 << 26),
            parse_options=pacsv.ParseOptions(delimiter=spec.sep),
            convert_options=pacsv.ConvertOptions(
                column_types={f"f{i}": types[f"c{i}"] for i in range(ncols)},
                include_columns=[f"f{i}" for i in sorted(used)],
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError, KeyError):
        return None
    if table.num_rows != sum(1 for ln in lines if ln.strip()):
        return None
    if any(table.column(f"f{i}").null_count for i in used):
        return None
    off = table.column(f"f{spec.columns['offset']}").to_numpy() * ADDR_UNIT[spec.units.get("offset", "bytes")]
    size = table.column(f"f{spec.columns['size']}").to_numpy() * ADDR_UNIT[spec.units.get("size", "bytes")]
    if (off < 0).any() or (size < 0).any():
        return None
    uniq, inv = _dict_encode(table.column(f"f{spec.columns['op']}"))
    lookup = spec.op_lookup()
    codes = []
    for u in uniq:
        key = str(u).strip()
        code = lookup.get(key.lower() if spec.op_case_insensitive else key)
        if code is None:
            return None
        codes.append(code)
    kinds = np.asarray(codes, np.uint8)[inv]
    if "ts" in spec.columns:
        raw = table.column(f"f{spec.columns['ts']}").to_numpy()
        ts = raw // 10 if filetime else np.rint(raw * TS_TO_US[spec.units.get("ts", "s")])
    else:
        ts = np.arange(start, start + table.num_rows, dtype=np.float64)
    if spec.vol_cols:
        if len(spec.vol_cols) == 1:
            vu, vinv = _dict_encode(table.column(f"f{spec.vol_cols[0]}"))
        else:
            joined = pc.binary_join_element_wise(*[table.column(f"f{i}") for i in spec.vol_cols], "_")
            vu, vinv = _dict_encode(joined)
        vols = np.asarray([acc.vol(str(v).strip()) for v in vu], np.int32)[vinv]
    else:
        vols = np.full(table.num_rows, acc.vol("0"), np.int32)
    keep = kinds != IGNORE
    return _finish(acc, ts[keep], off[keep], size[keep], kinds[keep], vols[keep], 0)


def _iter_delimited(spec: DelimitedSpec, acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    for start, lines in _line_chunks(fh, chunk_lines):
        chunk = _delimited_arrow(spec, acc, start, lines)
        yield chunk if chunk is not None else _delimited_lines(spec, acc, start, lines)


# -- blkparse ---------------------------------------------------------------------------------------
def _iter_blkparse(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    """Default blkparse text; only ``Q`` (queued) events count, so each request counts once.
    The summary blkparse prints at the end (``CPU0 (...)``, ``Total (...)``, ``Reads Queued``...)
    is not an event and is ignored."""
    in_summary = False
    for start, lines in _line_chunks(fh, chunk_lines):
        ts, off, size, kind, vol = [], [], [], [], []
        skipped = 0
        for k, line in enumerate(lines):
            lineno = start + k
            parts = line.split()
            if not parts:
                continue
            dev = parts[0]
            if not (dev.count(",") == 1 and dev.replace(",", "").isdigit()):
                if in_summary or dev.startswith(("CPU", "Total")) or ":" in line:
                    in_summary = True
                    continue
                acc.bad(lineno, "not a blkparse event line (expected 'maj,min cpu seq time pid action rwbs ...')")
                skipped += 1
                continue
            try:
                if len(parts) < 7:
                    raise ValueError(f"expected at least 7 fields, got {len(parts)}")
                if parts[5] != "Q":
                    continue
                rwbs = parts[6]
                t = _parse_number(parts[3], "time", False)
                if len(parts) >= 10 and parts[8] == "+":
                    sector = _parse_number(parts[7], "sector", True)
                    nsec = _parse_number(parts[9], "sector count", True)
                else:
                    sector, nsec = 0, 0
                if "D" in rwbs:
                    code = OP_TRIM
                elif "W" in rwbs:
                    code = OP_WRITE
                elif "R" in rwbs:
                    code = OP_READ
                elif "F" in rwbs or "N" in rwbs:
                    code = FLUSH
                else:
                    raise ValueError(f"unknown rwbs {rwbs!r}")
                if "F" in rwbs and nsec == 0:
                    code = FLUSH
            except ValueError as exc:
                acc.bad(lineno, str(exc))
                skipped += 1
                continue
            ts.append(int(round(t * 1e6)))
            off.append(sector * SECTOR_SIZE)
            size.append(nsec * SECTOR_SIZE)
            kind.append(code)
            vol.append(acc.vol(dev))
        yield _finish(acc, ts, off, size, kind, vol, skipped)


# -- fio iolog v2/v3 --------------------------------------------------------------------------------
_FIO_ACTIONS = {"read": OP_READ, "write": OP_WRITE, "trim": OP_TRIM, "sync": FLUSH, "datasync": FLUSH}
_FIO_FILE_ACTIONS = {"add", "open", "close", "wait"}


def _iter_fio(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    version = None
    for start, lines in _line_chunks(fh, chunk_lines):
        ts, off, size, kind, vol = [], [], [], [], []
        skipped = 0
        for k, line in enumerate(lines):
            lineno = start + k
            s = line.strip()
            if not s:
                continue
            if version is None:
                if s.startswith("fio version") and s.endswith("iolog"):
                    v = s.split()[2]
                    if v not in ("2", "3"):
                        raise TraceFormatError(f"{acc.path}:{lineno}: fio iolog version {v} is not supported (2 or 3)")
                    version = int(v)
                    continue
                raise TraceFormatError(f"{acc.path}:{lineno}: missing 'fio version 2 iolog' (or 3) header")
            parts = s.split()
            try:
                if version == 3:
                    if len(parts) < 3:
                        raise ValueError(
                            f"expected 'timestamp filename action [offset length]', got {len(parts)} fields"
                        )
                    t = _parse_number(parts[0], "timestamp", True) * 1000
                    parts = parts[1:]
                else:
                    t = lineno  # v2 has no timing: keep the order
                if len(parts) < 2:
                    raise ValueError("expected 'filename action [offset length]'")
                fname, action = parts[0], parts[1]
                if action in _FIO_FILE_ACTIONS:
                    continue
                code = _FIO_ACTIONS.get(action)
                if code is None:
                    raise ValueError(
                        f"unknown action {action!r} (known: {', '.join(sorted(_FIO_ACTIONS) + sorted(_FIO_FILE_ACTIONS))})"
                    )
                if code == FLUSH:
                    o, n = 0, 0
                else:
                    if len(parts) < 4:
                        raise ValueError(f"{action} needs offset and length")
                    o = _parse_number(parts[2], "offset", True)
                    n = _parse_number(parts[3], "length", True)
                    if o < 0 or n < 0:
                        raise ValueError(f"negative offset or length ({o}, {n})")
            except ValueError as exc:
                acc.bad(lineno, str(exc))
                skipped += 1
                continue
            ts.append(int(t))
            off.append(o)
            size.append(n)
            kind.append(code)
            vol.append(acc.vol(fname))
        yield _finish(acc, ts, off, size, kind, vol, skipped)


# -- plain block streams ----------------------------------------------------------------------------
def _iter_blocks(acc: _Acc, path: Path, chunk_lines: int) -> Iterator[Chunk]:
    """One LBA per entry, each a single 4 KiB block write (``.npy`` or text)."""
    if path.suffix == ".npy":
        arr = np.load(path, mmap_mode="r")
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise TraceFormatError(
                f"{path}: a blocks .npy must be a 1-D integer array of LBAs, got {arr.dtype} {arr.shape}"
            )
        for i in range(0, arr.size, chunk_lines):
            lbas = np.asarray(arr[i : i + chunk_lines], np.int64)
            if (lbas < 0).any():
                j = int(np.flatnonzero(lbas < 0)[0])
                raise TraceFormatError(f"{path}: entry {i + j}: negative LBA {lbas[j]}")
            n = lbas.size
            if acc.on_bytes is not None:
                acc.on_bytes(int(arr.offset) + (i + n) * arr.itemsize)
            yield Chunk(
                np.arange(i, i + n, dtype=np.int64),
                lbas,
                np.ones(n, np.int32),
                np.full(n, OP_WRITE, np.uint8),
                np.full(n, acc.vol("0"), np.int32),
            )
        return
    with open_text(path) as fh:
        yield from _tracked(_iter_block_lines(acc, fh, chunk_lines), fh, acc)


def _iter_block_lines(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    """The text form of ``blocks``: one LBA a line (``#`` comments and blank lines skipped)."""
    for start, lines in _line_chunks(fh, chunk_lines):
        vals, idx = [], []
        skipped = 0
        for k, line in enumerate(lines):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                v = int(s)
                if v < 0:
                    raise ValueError(f"negative LBA {v}")
            except ValueError as exc:
                acc.bad(start + k, str(exc) if "negative" in str(exc) else f"LBA {s!r} is not an integer")
                skipped += 1
                continue
            vals.append(v)
            idx.append(start + k)
        n = len(vals)
        yield Chunk(
            np.asarray(idx, np.int64),
            np.asarray(vals, np.int64),
            np.ones(n, np.int32),
            np.full(n, OP_WRITE, np.uint8),
            np.full(n, acc.vol("0"), np.int32),
            skipped=skipped,
        )


FORMATS = {
    **{name: f"preset of delimited: {spec['columns']}" for name, spec in PRESETS.items()},
    "blkparse": "blkparse default text (Q events)",
    "fio": "fio iolog v2/v3",
    "blocks": ".npy or text, one LBA (4 KiB block write) per entry",
    "delimited": "any delimited text with a column/unit mapping",
}


def iter_request_chunks(
    path: str | Path,
    fmt: str,
    *,
    skip_malformed: bool = False,
    delimited: Mapping | None = None,
    chunk_lines: int = 1_000_000,
    _acc: _Acc | None = None,
) -> Iterator[Chunk]:
    """Parse ``path`` chunk by chunk (bounded memory): yields :class:`Chunk` request arrays."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown trace format {fmt!r}; known: {', '.join(sorted(FORMATS))}")
    if chunk_lines < 1:
        raise ValueError(f"chunk_lines must be >= 1, got {chunk_lines}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    acc = _acc or _Acc(path=path, skip=skip_malformed)
    if fmt == "blocks":
        yield from _iter_blocks(acc, path, chunk_lines)
        return
    if fmt == "delimited":
        if not delimited:
            raise ValueError(
                "format=delimited needs a column/unit mapping (workload.delimited / delimited=...); "
                "see dogi_ml.traces.readers for the keys"
            )
        spec = DelimitedSpec.from_mapping(delimited)
    elif fmt in PRESETS:
        spec = DelimitedSpec(**PRESETS[fmt])
    else:
        spec = None
    with open_text(path) as fh:
        if spec is not None:
            chunks = _iter_delimited(spec, acc, fh, chunk_lines)
        elif fmt == "blkparse":
            chunks = _iter_blkparse(acc, fh, chunk_lines)
        else:
            chunks = _iter_fio(acc, fh, chunk_lines)
        yield from _tracked(chunks, fh, acc)


def read_trace(
    path: str | Path,
    fmt: str,
    volumes=None,
    skip_malformed: bool = False,
    delimited: Mapping | None = None,
    chunk_lines: int = 1_000_000,
    progress: bool | None = None,
) -> Trace:
    """Read a whole trace: requests in 4 KiB blocks, LBAs remapped dense (order-preserving).

    ``volumes``: keep only these volume names (an unknown name is an error listing the ones
    present). Statistics of what was not kept are in ``meta``. A bar over the file's bytes shows
    on a terminal (``progress=False`` or ``--quiet`` turns it off; see :mod:`dogi_ml.progress`)."""
    path = Path(path)
    acc = _Acc(path=path, skip=skip_malformed)
    parts = {k: [] for k in ("ts_us", "lba", "nblocks", "op", "volume")}
    skipped = zero = flushes = 0
    size = path.stat().st_size if path.exists() else None
    with progress_bar(size, f"ingest {path.name}", "B", requested=progress, unit_scale=True, unit_divisor=1024) as bar:
        acc.on_bytes = lambda pos: bar.update(min(pos, size or pos) - bar.n)
        for chunk in iter_request_chunks(
            path, fmt, skip_malformed=skip_malformed, delimited=delimited, chunk_lines=chunk_lines, _acc=acc
        ):
            for k in parts:
                parts[k].append(getattr(chunk, k))
            skipped += chunk.skipped
            zero += chunk.zero_length
            flushes += chunk.flushes
    arrays = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in parts.items()}
    names = list(acc.volumes) or ["0"]
    trace = Trace(**arrays, volumes=names, name=path.name.split(".")[0])
    if volumes:
        wanted = [str(v) for v in volumes]
        missing = [v for v in wanted if v not in acc.volumes]
        if missing:
            raise ValueError(
                f"{path}: volume(s) {missing} not in the trace; present: "
                f"{', '.join(names[:50])}{' ...' if len(names) > 50 else ''}"
            )
        keep = np.isin(trace.volume, [acc.volumes[v] for v in wanted])
        trace = trace.select(keep)
        # re-index the kept volumes 0..k-1 in the order asked for
        new_idx = np.full(len(names), -1, np.int32)
        for i, v in enumerate(wanted):
            new_idx[acc.volumes[v]] = i
        trace.volume = new_idx[trace.volume]
        trace.volumes = wanted
    trace.meta.update(
        {
            "format": fmt,
            "source": str(path),
            "skipped_lines": skipped,
            "zero_length_requests": zero,
            "flush_requests": flushes,
        }
    )
    if acc.first_skipped:
        trace.meta["first_skipped"] = "; ".join(acc.first_skipped)
    return remap_dense(trace)
