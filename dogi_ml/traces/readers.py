"""Readers for public block-trace formats, streaming in bounded memory.

Every reader turns a file (plain, ``.gz`` or ``.zst``, detected by magic bytes) into chunks of
compact request arrays, then :func:`read_trace` concatenates them into a :class:`Trace` in 4 KiB
blocks with dense, order-preserving LBAs. Text is parsed ``chunk_lines`` lines at a time: CSV-like
formats with pyarrow (fast path), falling back to a per-line parse of a chunk only to name the
exact bad line; both accept, skip or refuse the same lines, whatever the chunking.

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
A malformed line raises :class:`TraceFormatError` naming the file, the line, the reason and the
fix; with ``skip_malformed=True`` it is skipped, counted (``meta["skipped_lines"]``, the first one
in ``meta["first_skipped_line"]``) and reported in a :class:`TraceWarning`. Malformed means: a
field that does not parse (``nan``/``inf`` stamps included; fields are read as they stand, without
CSV quoting, so ``"4096"`` is no number), a line with more or fewer fields than
the format has (or than the file's first data line, for formats with optional trailing fields), a
negative offset or size, an address at or past 2^62 bytes, a request over 4 GiB, a
stamp past +-2^62 µs. Time stamps going backwards are kept in file order, counted
(``meta["backward_timestamps"]``, ``meta["first_backward_line"]``) and reported in a warning. A
truncated or corrupt ``.gz``/``.zst``, an unreadable ``.npy``, a directory and a file without a
single request are errors naming the file (and the line or byte). A UTF-8 byte-order mark is
skipped and CRLF line ends are accepted.

A ``delimited`` mapping (``workload.delimited`` / ``ingest delimited=...``)::

    sep: ","                 # one character; " " also accepts runs of whitespace
    header: false            # skip the first line
    comment: "#"             # lines starting with this are ignored (optional)
    columns: {ts: 0, offset: 4, size: 3, op: 2, volume: 1}   # volume optional (a list joins columns)
    units: {ts: ms, offset: bytes, size: bytes}   # ts: s|ms|us|ns|filetime; offset/size: bytes|sectors|blocks
    op_map: {"0": write, "1": read}               # values: read|write|trim|flush|ignore
    op_case_insensitive: false
    fields: 5                # optional: the exact number of fields a line has (default: the
                             # first data line's count; every line must have as many)
"""

from __future__ import annotations

import gzip
import io
import itertools
import math
import re
import warnings
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dogi_ml.errors import UsageError
from dogi_ml.progress import bar as progress_bar

from .trace import (
    BLOCK_SIZE,
    MAX_BYTES,
    MAX_REQUEST_BYTES,
    MAX_TS_US,
    OP_READ,
    OP_TRIM,
    OP_WRITE,
    SECTOR_SIZE,
    Trace,
    TraceFormatError,
    TraceWarning,
    remap_dense,
)

TS_TO_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "filetime": 0.1}
ADDR_UNIT = {"bytes": 1, "sectors": SECTOR_SIZE, "blocks": BLOCK_SIZE}
OP_KINDS = {"read", "write", "trim", "flush", "ignore"}
_KIND_CODE = {"read": OP_READ, "write": OP_WRITE, "trim": OP_TRIM, "flush": 254, "ignore": 255}
FLUSH, IGNORE = 254, 255
BOM = "\ufeff"  # a UTF-8 byte-order mark, as Windows editors write it at the start of a file
MAX_BLOCK_LBA = MAX_BYTES // BLOCK_SIZE  # LBAs of the blocks format stay below this


# -- opening files --------------------------------------------------------------------------------
def open_text(path: str | Path):
    """Open a trace as text, decompressing gzip or zstd by magic bytes."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    if path.is_dir():
        raise TraceFormatError(f"{path} is a directory, not a trace file", "give the path of a trace file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    if magic == b"\x28\xb5\x2f\xfd":
        raw = io.BufferedReader(_ZstdFile(path), buffer_size=1 << 20)
        return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


class _ZstdFile(io.RawIOBase):
    """The decompressed bytes of a ``.zst`` file (one frame or several), failing on a frame cut
    short: zstandard's own stream reader ends quietly there, so a truncated file read as a shorter
    (or empty) trace."""

    def __init__(self, path: Path):
        import zstandard

        self.path = path
        self.fileobj = open(path, "rb")  # ``fileobj``: where _raw_position finds the compressed offset
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = self._dctx.decompressobj()
        self._in_frame = False  # bytes of a frame fed whose end has not come yet
        self._out = memoryview(b"")

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.fileobj.close()
        super().close()

    def readinto(self, buf) -> int:
        import zstandard

        while not len(self._out):
            data = self.fileobj.read(1 << 20)
            if not data:
                if self._in_frame:
                    raise TraceFormatError(
                        f"{self.path}: byte {self.fileobj.tell()}: the .zst file ends inside a frame (truncated)",
                        "re-download or re-compress the file (zstd -t FILE checks it)",
                    )
                return 0
            parts = []
            try:
                while data:
                    parts.append(self._frame.decompress(data))
                    self._in_frame = not self._frame.eof
                    if self._in_frame:
                        break
                    data = self._frame.unused_data  # the next frame starts here
                    self._frame = self._dctx.decompressobj()
            except zstandard.ZstdError as exc:
                raise TraceFormatError(
                    f"{self.path}: before byte {self.fileobj.tell()}: corrupt .zst data ({exc})",
                    "re-download or re-compress the file (zstd -t FILE checks it)",
                ) from None
            self._out = memoryview(b"".join(parts))
        n = min(len(buf), len(self._out))
        buf[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


def _raw_position(fh) -> int | None:
    """Bytes of the file on disk read so far under a text handle (compressed bytes for .gz/.zst)."""
    raw = getattr(fh, "buffer", None)
    inner = getattr(raw, "raw", None)
    for obj in (getattr(raw, "fileobj", None), getattr(inner, "fileobj", None), getattr(raw, "_fp", None), raw):
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
    backward: int = 0  # requests stamped earlier than the request before them in this chunk
    first_backward_line: int | None = None  # the line of the first of them
    first_line: int | None = None  # the line of the chunk's first request


@dataclass
class ChunkTally:
    """What a file's chunks report besides their requests, summed in file order (``read_trace``
    and ``fleet.split_trace`` both keep it): lines skipped as malformed, zero-length requests and
    flushes dropped, and requests stamped earlier than the request before them, also across the
    seam between two chunks, with the line of the first of them. The first skipped line is kept
    by ``_Acc.bad``, which sees the line."""

    skipped_lines: int = 0
    zero_length_requests: int = 0
    flush_requests: int = 0
    backward_timestamps: int = 0
    first_backward_line: int | None = None
    last_ts: int | None = None  # the stamp of the last request counted so far

    def add(self, chunk: Chunk) -> None:
        self.skipped_lines += chunk.skipped
        self.zero_length_requests += chunk.zero_length
        self.flush_requests += chunk.flushes
        if chunk.ts_us.size:
            if self.last_ts is not None and chunk.ts_us[0] < self.last_ts:  # across the chunks' seam
                self.backward_timestamps += 1
                self.first_backward_line = self.first_backward_line or chunk.first_line
            self.backward_timestamps += chunk.backward
            self.first_backward_line = self.first_backward_line or chunk.first_backward_line
            self.last_ts = chunk.ts_us[-1]

    def counts(self) -> dict:
        """The four counts under the names ``meta`` gives them (the fields' names)."""
        return {
            "skipped_lines": self.skipped_lines,
            "zero_length_requests": self.zero_length_requests,
            "flush_requests": self.flush_requests,
            "backward_timestamps": self.backward_timestamps,
        }


@dataclass
class _Acc:
    """Volume names seen so far (shared by a file's chunks) and malformed-line bookkeeping."""

    path: Path
    skip: bool
    fmt: str = ""
    volumes: dict = field(default_factory=dict)
    first_skipped: list = field(default_factory=list)
    first_skipped_line: int | None = None
    fields: int | None = None  # fields per line: the format's, or the file's first data line's
    fields_line: int | None = None  # the line that set ``fields`` (None: the format fixes it)
    lines_read: int = 0
    on_bytes: object = None  # called with the bytes of the file read so far (a progress bar)

    def vol(self, name: str) -> int:
        idx = self.volumes.get(name)
        if idx is None:
            idx = self.volumes[name] = len(self.volumes)
        return idx

    def bad(self, lineno: int, reason: str) -> None:
        if not self.skip:
            fix = f"fix or remove the line, check that format={self.fmt} is the file's format"
            if lineno == 1:
                fix += " (a header line? only format=delimited with header: true skips one)"
            raise TraceFormatError(
                f"{self.path}:{lineno}: {reason}", fix + ", or set skip_malformed=true to skip and count such lines"
            )
        if self.first_skipped_line is None:
            self.first_skipped_line = lineno
        if len(self.first_skipped) < 5:
            self.first_skipped.append(f"line {lineno}: {reason}")


def _check_bytes(offset: int, size: int) -> None:
    """A request's byte range is one a trace can hold (see the limits in ``trace.py``)."""
    if offset < 0 or size < 0:
        raise ValueError(f"negative offset or size ({offset}, {size})")
    if size > MAX_REQUEST_BYTES:
        raise ValueError(f"size of {size} bytes is beyond the 4 GiB a block request can have; check the units")
    if offset + size >= MAX_BYTES:
        raise ValueError(f"offset {offset} + size {size} bytes reaches past 2^62 bytes (4 EiB); check the units")


def _check_ts(ts_us: float, text: str) -> None:
    if not math.isfinite(ts_us):
        raise ValueError(f"timestamp {text!r} is not a finite number")
    if abs(ts_us) >= MAX_TS_US:
        raise ValueError(f"timestamp {text!r} is beyond +-2^62 µs")


def _finish(acc: _Acc, ts_us, offset_bytes, size_bytes, kinds, vols, skipped, line_of) -> Chunk:
    """Byte ranges + op kinds -> block requests; zero-length and flushes counted, not kept.
    ``line_of(i)``: the line the ``i``-th entry came from (to name the first backward stamp)."""
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
    kept_ts = ts_us[keep]
    backward, first_backward, first_line = 0, None, None
    if kept_ts.size:
        rows = np.flatnonzero(keep)
        first_line = line_of(int(rows[0]))
        back = kept_ts[1:] < kept_ts[:-1]
        backward = int(np.count_nonzero(back))
        if backward:
            first_backward = line_of(int(rows[int(np.argmax(back)) + 1]))
    return Chunk(
        ts_us=kept_ts,
        lba=first[keep],
        nblocks=(last - first + 1)[keep].astype(np.int32),
        op=kinds[keep],
        volume=vols[keep],
        skipped=skipped,
        zero_length=int(zero.sum()),
        flushes=flushes,
        backward=backward,
        first_backward_line=first_backward,
        first_line=first_line,
    )


def _line_chunks(fh, chunk_lines: int, acc: _Acc) -> Iterator[tuple[int, list[str]]]:
    """(1-based number of the chunk's first line, lines) in chunks; a byte-order mark at the start
    is dropped; a compressed stream that breaks off is an error naming the last whole line."""
    lineno = 1
    while True:
        lines: list[str] = []
        try:
            lines.extend(itertools.islice(fh, chunk_lines))  # keeps what was read if it raises
        except (EOFError, OSError, zlib.error) as exc:
            pos = _raw_position(fh)
            at = f", byte {pos} of the file" if pos is not None else ""
            raise TraceFormatError(
                f"{acc.path}: after line {lineno + len(lines) - 1}{at}: the compressed stream breaks off "
                f"(truncated or corrupt: {exc})",
                "re-download or re-compress the file (gzip -t / zstd -t FILE checks it)",
            ) from None
        if not lines:
            return
        if lineno == 1 and lines[0].startswith(BOM):
            lines[0] = lines[0][1:]
        acc.lines_read += len(lines)
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
    fields: int | None = None  # exact fields per line; None: as many as the first data line

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
        known = {"columns", "units", "op_map", "sep", "header", "comment", "op_case_insensitive", "fields"}
        unknown = set(cfg) - known
        if unknown:
            raise ValueError(f"delimited mapping: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        spec = cls(**cfg)
        spec.validate()
        return spec

    def validate(self) -> None:
        for key, example in (
            ("columns", "{ts: 0, offset: 1, size: 2, op: 3}"),
            ("units", "{ts: s, offset: bytes, size: bytes}"),
            ("op_map", "{R: read, W: write}"),
        ):
            if not isinstance(getattr(self, key), Mapping):
                raise ValueError(
                    f"delimited mapping: {key} must be a mapping such as {example}, got {getattr(self, key)!r}"
                )
        for key in ("header", "op_case_insensitive"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"delimited mapping: {key} must be true or false, got {getattr(self, key)!r}")
        cols = dict(self.columns)
        unknown = sorted(set(cols) - {"ts", "offset", "size", "op", "volume"})
        if unknown:
            raise ValueError(
                f"delimited mapping: columns has unknown field(s) {unknown}; map ts, offset, size, op, volume"
            )
        for name, index in cols.items():
            for i in index if name == "volume" and isinstance(index, (list, tuple)) else [index]:
                if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                    raise ValueError(
                        f"delimited mapping: columns.{name} must be a 0-based column index (a whole number >= 0), got {i!r}"
                    )
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
        if self.fields is not None and (
            isinstance(self.fields, bool) or not isinstance(self.fields, int) or self.fields < self.ncols
        ):
            raise ValueError(
                f"delimited mapping: fields must be a whole number >= {self.ncols} (the columns mapped), "
                f"got {self.fields!r}"
            )

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
        fields=5,
    ),
    "tencent": dict(
        sep=",",
        columns={"ts": 0, "offset": 1, "size": 2, "op": 3, "volume": 4},
        units={"ts": "s", "offset": "sectors", "size": "sectors"},
        op_map={"0": "read", "1": "write"},
        fields=5,
    ),
    "msr": dict(
        sep=",",
        columns={"ts": 0, "volume": [1, 2], "op": 3, "offset": 4, "size": 5},
        units={"ts": "filetime", "offset": "bytes", "size": "bytes"},
        op_map={"read": "read", "write": "write"},
        op_case_insensitive=True,
        fields=7,
    ),
    "spc": dict(
        sep=",",
        columns={"volume": 0, "offset": 1, "size": 2, "op": 3, "ts": 4},
        units={"ts": "s", "offset": "sectors", "size": "bytes"},
        op_map={"r": "read", "w": "write"},
        op_case_insensitive=True,  # SPC lines may carry optional fields after these five
    ),
    "mqsim": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ns", "offset": "sectors", "size": "sectors"},
        op_map={"0": "write", "1": "read"},
        fields=5,
    ),
    "flashnet_tencent": dict(
        sep=",",
        columns={"ts": 0, "op": 2, "size": 3, "offset": 4},
        units={"ts": "ms", "offset": "bytes", "size": "bytes"},
        op_map={"1": "read", "0": "write"},
        fields=7,
    ),
    "flashnet_msr": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ms", "offset": "bytes", "size": "bytes"},
        op_map={"1": "read", "0": "write"},
        fields=5,
    ),
    "sectors_trace": dict(
        sep=" ",
        columns={"ts": 0, "volume": 1, "offset": 2, "size": 3, "op": 4},
        units={"ts": "ms", "offset": "sectors", "size": "sectors"},
        op_map={"1": "read", "0": "write"},
        fields=5,
    ),
}


def _parse_number(text: str, what: str, integer: bool):
    text = text.strip()
    try:
        return int(text) if integer else float(text)
    except ValueError:
        if integer:
            try:  # "1e3", "4096.0": integers written as floats
                v = float(text)
                if v == int(v):
                    return int(v)
            except (ValueError, OverflowError):  # nan, inf
                pass
        quoted = text[:1] in "\"'" and len(text) > 1 and text[-1:] == text[:1]
        note = " (fields are read as they stand: a quoted number is not one)" if quoted else ""
        raise ValueError(f"{what} {text!r} is not {'an integer' if integer else 'a number'}{note}") from None


def _check_fields(spec: DelimitedSpec, acc: _Acc, lineno: int, n: int) -> None:
    """A line has as many fields as the format (or, when the format allows optional trailing
    fields, as the file's first data line): an extra or missing column would shift the fields."""
    if acc.fields is None:
        if n < spec.ncols:
            raise ValueError(f"expected at least {spec.ncols} fields separated by {spec.sep!r}, got {n}")
        if spec.fields is None:
            acc.fields, acc.fields_line = n, lineno
        else:
            acc.fields = spec.fields
    if n != acc.fields:
        if acc.fields_line is None:
            raise ValueError(
                f"expected {acc.fields} fields separated by {spec.sep!r}, got {n} (a column extra or missing)"
            )
        raise ValueError(
            f"{n} fields separated by {spec.sep!r} where line {acc.fields_line} has {acc.fields} "
            "(a column extra or missing; every line needs the same columns)"
        )


def _delimited_lines(spec: DelimitedSpec, acc: _Acc, start: int, lines: list[str]) -> Chunk:
    """Per-line parse (exact error positions); also the fallback of the pyarrow path."""
    ops = spec.op_lookup()
    ts_mul = TS_TO_US[spec.units.get("ts", "s")]
    off_mul = ADDR_UNIT[spec.units.get("offset", "bytes")]
    size_mul = ADDR_UNIT[spec.units.get("size", "bytes")]
    c = spec.columns
    ts_col = c.get("ts")
    filetime = spec.units.get("ts") == "filetime"
    ts, off, size, kind, vol, line_no = [], [], [], [], [], []
    skipped = 0
    for k, line in enumerate(lines):
        lineno = start + k
        s = line.strip()
        if not s or (spec.comment and s.startswith(spec.comment)) or (spec.header and lineno == 1):
            continue
        parts = s.split() if spec.sep == " " else s.split(spec.sep)
        try:
            _check_fields(spec, acc, lineno, len(parts))
            o = _parse_number(parts[int(c["offset"])], "offset", True) * off_mul
            n = _parse_number(parts[int(c["size"])], "size", True) * size_mul
            _check_bytes(o, n)
            op_text = parts[int(c["op"])].strip()
            code = ops.get(op_text.lower() if spec.op_case_insensitive else op_text)
            if code is None:
                raise ValueError(f"unknown operation {op_text!r} (known: {', '.join(map(str, spec.op_map))})")
            names = [parts[i].strip() for i in spec.vol_cols]
            if not all(names):
                raise ValueError(f"empty volume field (column {spec.vol_cols[names.index('')]})")
            name = "_".join(names) or "0"
            if ts_col is None:
                t = float(lineno)
            elif filetime:  # 100 ns ticks since 1601: too large for a float's precision
                t = _parse_number(parts[int(ts_col)], "timestamp", True) // 10
            else:
                t = _parse_number(parts[int(ts_col)], "timestamp", False) * ts_mul
            if ts_col is not None:
                _check_ts(t, parts[int(ts_col)].strip())
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
        vol.append(acc.vol(name))
        line_no.append(lineno)
    return _finish(acc, ts, off, size, kind, vol, skipped, line_no.__getitem__)


def arrow_dictionary(column) -> tuple[list, np.ndarray]:
    """(distinct values in order of first appearance, index of each row's value) of a pyarrow
    string column. Shared with ``fleet``'s splitter."""
    import pyarrow as pa

    enc = pa.chunked_array(column).combine_chunks().dictionary_encode()
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False)


def arrow_unsafe(spec: DelimitedSpec, data: bytes) -> bool:
    """Whether a block of a delimited file holds what pyarrow reads otherwise than the line parser:
    with a space separator a run of whitespace or a line starting with one (the line parser splits
    on any), or a hexadecimal number (pyarrow reads 0x10 as 16; the formats' numbers are decimal).
    The caller then hands the block to the line parser. Shared with ``fleet``'s splitter."""
    if spec.sep == " " and (data[:1] == b" " or b"  " in data or b"\t" in data or b"\n " in data or b"\r " in data):
        return True
    return (b"x" in data and b"0x" in data) or (b"X" in data and b"0X" in data)  # "x" first: "0" is everywhere


def arrow_columns(table, spec: DelimitedSpec, acc: _Acc, start: int, first_line: int, n_fields: int):
    """(offsets, sizes, kinds, op codes, time stamps, volume ids) of a chunk pyarrow parsed, its
    rows numbered from line ``start``, or None when one of them breaks the line parser's rules
    (which then names the line); a chunk taken records its field count (``n_fields``, first seen
    on line ``first_line``) in ``acc`` as the line parser does. Shared with ``fleet``'s splitter."""
    extents = arrow_extents(table, spec)
    if extents is None:
        return None
    kinds, codes = arrow_op_kinds(*arrow_dictionary(table.column(f"f{spec.columns['op']}")), spec)
    if kinds is None:
        return None
    ts = arrow_timestamps(table, spec, start)
    if ts is None:
        return None
    vols = arrow_volume_ids(table, spec, acc)
    if vols is None:
        return None  # an empty volume field: malformed, the line parser says where
    if acc.fields is None and spec.fields is None:
        acc.fields_line = first_line
    acc.fields = n_fields
    return (*extents, kinds, codes, ts, vols)


def arrow_timestamps(table, spec: DelimitedSpec, start: int) -> np.ndarray | None:
    """Each row's time stamp in µs from a chunk pyarrow parsed (FILETIME's 100 ns units floored,
    the others scaled and rounded to nearest), or the row's line number (``start`` on) for a format
    without one; None when one is not finite or beyond ``MAX_TS_US`` (the line parser names it).
    Integer stamps in µs within 2^53 are taken as they are: what the float path gives them.
    Shared with ``fleet``'s splitter."""
    if "ts" not in spec.columns:
        return np.arange(start, start + table.num_rows, dtype=np.float64)
    raw = table.column(f"f{spec.columns['ts']}").to_numpy()
    ts_mul = TS_TO_US[spec.units.get("ts", "s")]
    if spec.units.get("ts") == "filetime":
        return raw // 10
    if raw.dtype == np.int64 and ts_mul == 1.0 and -(2**53) <= raw.min() and raw.max() <= 2**53:
        return raw  # whole µs that a float64 holds exactly: what the float path below gives
    ts = raw.astype(np.float64) * ts_mul
    if not np.isfinite(ts).all() or np.abs(ts).max() >= MAX_TS_US:
        return None
    return np.rint(ts)


def arrow_volume_ids(table, spec: DelimitedSpec, acc: _Acc) -> np.ndarray | None:
    """Each row's volume id (``acc.vol``, volumes numbered in order of first appearance) from the
    volume columns of a chunk pyarrow parsed: each column's values stripped as the line parser
    strips them, several columns joined with ``_``; None when a volume field is empty (the line
    parser then names the line). Shared with ``fleet``'s splitter."""
    n_rows = table.num_rows
    if not spec.vol_cols:
        return np.full(n_rows, acc.vol("0"), np.int32)
    names, combo = [], np.zeros(n_rows, np.int64)
    for i in spec.vol_cols:
        values, index = arrow_dictionary(table.column(f"f{i}"))
        stripped = [str(v).strip() for v in values]
        if not all(stripped):
            return None
        names.append(stripped)
        combo = combo * len(stripped) + index
    if len(names) == 1:
        joined, inverse = names[0], combo
        order = range(len(joined))  # dictionary order is the order of first appearance
    else:
        combos, first_row, inverse = np.unique(combo, return_index=True, return_inverse=True)
        joined = []
        for code in combos.tolist():
            parts = []
            for stripped in reversed(names):
                code, k = divmod(code, len(stripped))
                parts.append(stripped[k])
            joined.append("_".join(reversed(parts)))
        order = np.argsort(first_row, kind="stable")
    ids = np.empty(len(joined), np.int32)
    for j in order:
        ids[j] = acc.vol(joined[j])
    return ids[inverse.reshape(-1)]


#: bytes pyarrow parses at a time within a chunk of lines (its ``block_size``); the verdict on
#: every line is the same whatever it is (tests/test_ingest_edges.py reads with a tiny one)
ARROW_BLOCK_BYTES = 1 << 26


def _delimited_arrow(spec: DelimitedSpec, acc: _Acc, start: int, lines: list[str]) -> Chunk | None:
    """Vectorised parse of a chunk with pyarrow; None when anything looks off (the caller then
    parses the chunk line by line, which names the bad line)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if spec.comment or (spec.header and start == 1):
        return None  # comments and headers: leave them to the line parser
    text = "".join(lines)
    if text[:1] == BOM:
        return None  # a second byte-order mark: pyarrow would drop it, the line parser reads it as data
    data = text.encode()
    if arrow_unsafe(spec, data):
        return None
    # pyarrow takes the column count from the chunk's first line and fails on any row with
    # another; that line must have the format's count (or the file's first line's)
    head = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    if head is None:
        return None
    n_fields = lines[head].rstrip("\r\n").count(spec.sep) + 1
    if n_fields != (acc.fields or spec.fields or max(n_fields, spec.ncols)):
        return None
    ncols = spec.ncols
    used = {int(v) for k, v in spec.columns.items() if k != "volume"} | set(spec.vol_cols)
    types = {f"c{i}": pa.string() for i in range(ncols)}
    types[f"c{spec.columns['offset']}"] = pa.int64()
    types[f"c{spec.columns['size']}"] = pa.int64()
    filetime = spec.units.get("ts") == "filetime"
    if "ts" in spec.columns:
        types[f"c{spec.columns['ts']}"] = pa.int64() if filetime else pa.float64()
    try:
        # rows with another column count fail the read (-> fallback); only the used columns are
        # converted. No quoting: pyarrow's default took '"4096"' as 4096, which the line parser
        # refuses, so a quoted number was read or refused by whether another line of its chunk
        # sent the chunk to the line parser
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, block_size=ARROW_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=spec.sep, quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={f"f{i}": types[f"c{i}"] for i in range(ncols)},
                include_columns=[f"f{i}" for i in sorted(used)],
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError, KeyError):
        return None
    n_rows = table.num_rows
    # one row per non-blank line (counted only when some line gave no row)
    if n_rows == 0 or (n_rows != len(lines) and n_rows != sum(1 for ln in lines if ln.strip())):
        return None
    if any(table.column(f"f{i}").null_count for i in used):
        return None
    columns = arrow_columns(table, spec, acc, start, start + head, n_fields)
    if columns is None:
        return None
    off, size, kinds, _, ts, vols = columns
    keep = kinds != IGNORE
    rows = np.flatnonzero(keep)

    def line_of(i: int) -> int:  # row -> line: rows are the chunk's non-blank lines
        row = int(rows[i])
        if n_rows == len(lines):
            return start + row
        return start + [k for k, ln in enumerate(lines) if ln.strip()][row]

    return _finish(acc, ts[keep], off[keep], size[keep], kinds[keep], vols[keep], 0, line_of)


def arrow_extents(table, spec: DelimitedSpec):
    """(offsets, sizes) in bytes of a chunk pyarrow parsed, or None when one breaks the limits of
    ``_check_bytes`` (checked before multiplying, so that nothing wraps around): the caller then
    hands the chunk to the line parser, which names the line. Shared with ``fleet``'s splitter."""
    off_mul = ADDR_UNIT[spec.units.get("offset", "bytes")]
    size_mul = ADDR_UNIT[spec.units.get("size", "bytes")]
    off = table.column(f"f{spec.columns['offset']}").to_numpy()
    size = table.column(f"f{spec.columns['size']}").to_numpy()
    if (
        off.min() < 0
        or size.min() < 0
        or off.max() >= MAX_BYTES // off_mul
        or size.max() > MAX_REQUEST_BYTES // size_mul
    ):
        return None
    off = off * off_mul
    size = size * size_mul
    if (off + size).max() >= MAX_BYTES:
        return None
    return off, size


def arrow_op_kinds(values, index, spec: DelimitedSpec):
    """(each row's kind, the kind of each distinct value) from an op column's distinct ``values``
    and each row's ``index`` into them; ``(None, None)`` when a value is no op of the format (the
    line parser then names the line)."""
    lookup = spec.op_lookup()
    codes = []
    for value in values:
        key = str(value).strip()
        code = lookup.get(key.lower() if spec.op_case_insensitive else key)
        if code is None:
            return None, None
        codes.append(code)
    return np.asarray(codes, np.uint8)[index], codes


def _iter_delimited(spec: DelimitedSpec, acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    for start, lines in _line_chunks(fh, chunk_lines, acc):
        chunk = _delimited_arrow(spec, acc, start, lines)
        yield chunk if chunk is not None else _delimited_lines(spec, acc, start, lines)


# -- blkparse ---------------------------------------------------------------------------------------
_BLK_ACTIONS = frozenset("A B C D F G I M P Q R S T U UT X m".split())  # blkparse's action letters
_BLK_RWBS_LETTERS = "ABDEFMNRSW"  # read write discard none flush sync meta readahead ...
_MAX_SECTOR = MAX_BYTES // SECTOR_SIZE  # _check_bytes' limits in sectors
_MAX_REQUEST_SECTORS = MAX_REQUEST_BYTES // SECTOR_SIZE
_BLK_SUMMARY = re.compile(r"(CPU\d+|Total) \(")  # where blkparse's closing summary starts


def _iter_blkparse(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    """Default blkparse text; only ``Q`` (queued) events count, so each request counts once.
    The summary blkparse prints at the end (``CPU0 (...)``, ``Total (...)``, then ``Key: value``
    lines) is not an event and is ignored; any other line that is not an event is malformed, as
    is an event with an unknown action or rwbs, a Q event of data without ``sector + count``, or
    fields after the count other than the ``[process]``."""
    in_summary = False
    # module constants as locals: this loop runs once per line of text
    actions, letters, max_ts = _BLK_ACTIONS, _BLK_RWBS_LETTERS, float(MAX_TS_US)  # a float: t is one
    max_sector, max_count = _MAX_SECTOR, _MAX_REQUEST_SECTORS
    rwbs_seen = set()  # rwbs strings already checked (a trace uses a handful)
    for start, lines in _line_chunks(fh, chunk_lines, acc):
        ts, off, size, kind, vol, line_no = [], [], [], [], [], []
        skipped = 0
        for k, line in enumerate(lines):
            parts = line.split(None, 7)  # the fixed fields and the rest (only a Q event's rest is split)
            if not parts:
                continue
            dev = parts[0]
            if not (dev.count(",") == 1 and dev.replace(",", "").isdigit()):
                if _BLK_SUMMARY.match(line):
                    in_summary = True
                    continue
                if in_summary and ":" in line:
                    continue
                acc.bad(start + k, "not a blkparse event line (expected 'maj,min cpu seq time pid action rwbs ...')")
                skipped += 1
                continue
            try:
                n_parts = len(parts)
                if n_parts < 7:
                    raise ValueError(
                        f"expected at least 7 fields (maj,min cpu seq time pid action rwbs), got {n_parts}"
                    )
                action = parts[5]
                if action != "Q":
                    if action not in actions:
                        raise ValueError(f"unknown action {action!r} (blkparse's: {' '.join(sorted(actions))})")
                    continue
                # the checks below are written for speed (a Q line is most of the work): plain
                # int()/float() and chained comparisons first, the helpers only to word an error
                rwbs = parts[6]
                if rwbs not in rwbs_seen:
                    if rwbs.strip(letters):
                        raise ValueError(f"unknown rwbs {rwbs!r} (letters of {letters})")
                    rwbs_seen.add(rwbs)
                try:
                    t = float(parts[3]) * 1e6
                except ValueError:
                    t = _parse_number(parts[3], "time", False)  # raises, naming the field
                if not -max_ts < t < max_ts:  # false for nan too
                    _check_ts(t, parts[3])
                rest = parts[7].split() if n_parts == 8 else []
                if len(rest) >= 3 and rest[1] == "+":
                    try:
                        sector, nsec = int(rest[0]), int(rest[2])
                    except ValueError:
                        sector = _parse_number(rest[0], "sector", True)
                        nsec = _parse_number(rest[2], "sector count", True)
                    tail = 3
                else:
                    sector = nsec = None
                    tail = 0
                if len(rest) > tail and not (rest[tail][0] == "[" and rest[-1][-1] == "]"):
                    raise ValueError(
                        f"unexpected field(s) {' '.join(rest[tail:])!r} "
                        "(expected 'sector + count [process]' after the rwbs)"
                    )
                if "D" in rwbs:
                    code = OP_TRIM
                elif "W" in rwbs:
                    code = OP_WRITE
                elif "R" in rwbs:
                    code = OP_READ
                elif "F" in rwbs or "N" in rwbs:
                    code = FLUSH
                else:
                    raise ValueError(f"rwbs {rwbs!r} names no operation")
                if "F" in rwbs and not nsec:
                    code = FLUSH
                if sector is None:
                    if code != FLUSH:
                        raise ValueError(f"a {rwbs} event without 'sector + count'")
                    sector = nsec = 0
                if not (sector >= 0 and 0 <= nsec <= max_count and sector + nsec < max_sector):
                    _check_bytes(sector * SECTOR_SIZE, nsec * SECTOR_SIZE)
            except ValueError as exc:
                acc.bad(start + k, str(exc))
                skipped += 1
                continue
            ts.append(int(round(t)))
            off.append(sector * SECTOR_SIZE)
            size.append(nsec * SECTOR_SIZE)
            kind.append(code)
            vol.append(acc.vol(dev))
            line_no.append(k)  # the line is start + k (added only when asked: this loop is hot)
        yield _finish(acc, ts, off, size, kind, vol, skipped, lambda i, s=start, rows=line_no: s + rows[i])


# -- fio iolog v2/v3 --------------------------------------------------------------------------------
_FIO_ACTIONS = {"read": OP_READ, "write": OP_WRITE, "trim": OP_TRIM, "sync": FLUSH, "datasync": FLUSH}
_FIO_FILE_ACTIONS = {"add", "open", "close"}
_FIO_HEADER = re.compile(r"fio version (\S+) iolog$")


def _iter_fio(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    """fio iolog: ``filename action [offset length]`` (v3: a timestamp in ms first); a file
    action has no offset and length, a data action has both, a sync may have them (as zeros).
    ``wait`` has both fields too (fio's read_iolog2 parses it with the data actions: its delay
    where the offset stands) and moves no block, so it is read and dropped."""
    version = None
    for start, lines in _line_chunks(fh, chunk_lines, acc):
        ts, off, size, kind, vol, line_no = [], [], [], [], [], []
        skipped = 0
        for k, line in enumerate(lines):
            lineno = start + k
            s = line.strip()
            if not s:
                continue
            if version is None:
                m = _FIO_HEADER.match(s)
                if m is None:
                    raise TraceFormatError(
                        f"{acc.path}:{lineno}: missing 'fio version 2 iolog' (or 3) header",
                        "give a fio iolog (write_iolog=FILE) or the format the file is in",
                    )
                if m.group(1) not in ("2", "3"):
                    raise TraceFormatError(
                        f"{acc.path}:{lineno}: fio iolog version {m.group(1)} is not supported",
                        "give an iolog of version 2 or 3",
                    )
                version = int(m.group(1))
                continue
            parts = s.split()
            try:
                if version == 3:
                    if len(parts) < 3:
                        raise ValueError(
                            f"expected 'timestamp filename action [offset length]', got {len(parts)} fields"
                        )
                    t = _parse_number(parts[0], "timestamp", True) * 1000
                    _check_ts(t, parts[0])
                    if t < 0:
                        raise ValueError(f"negative timestamp {parts[0]!r}")
                    parts = parts[1:]
                else:
                    t = lineno  # v2 has no timing: keep the order
                if len(parts) < 2:
                    raise ValueError("expected 'filename action [offset length]'")
                fname, action = parts[0], parts[1]
                if action in _FIO_FILE_ACTIONS:
                    if len(parts) != 2:
                        raise ValueError(f"{action} takes no offset or length, got {len(parts)} fields")
                    continue
                if action == "wait":
                    if len(parts) != 4:
                        raise ValueError(f"wait needs 'filename wait delay_us 0' (4 fields), got {len(parts)} fields")
                    _parse_number(parts[2], "wait delay", True)
                    continue
                code = _FIO_ACTIONS.get(action)
                if code is None:
                    raise ValueError(
                        f"unknown action {action!r} (known: "
                        f"{', '.join(sorted(_FIO_ACTIONS) + sorted(_FIO_FILE_ACTIONS) + ['wait'])})"
                    )
                if len(parts) not in ((2, 4) if code == FLUSH else (4,)):
                    raise ValueError(f"{action} needs 'filename {action} offset length', got {len(parts)} fields")
                if code == FLUSH:
                    o, n = 0, 0
                else:
                    o = _parse_number(parts[2], "offset", True)
                    n = _parse_number(parts[3], "length", True)
                    _check_bytes(o, n)
            except ValueError as exc:
                acc.bad(lineno, str(exc))
                skipped += 1
                continue
            ts.append(int(t))
            off.append(o)
            size.append(n)
            kind.append(code)
            vol.append(acc.vol(fname))
            line_no.append(lineno)
        yield _finish(acc, ts, off, size, kind, vol, skipped, line_no.__getitem__)


# -- plain block streams ----------------------------------------------------------------------------
def _load_npy(path: Path):
    """A blocks ``.npy`` as a memory map; an unreadable file is a TraceFormatError."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a damaged header makes numpy raise almost anything
        # (ValueError, TypeError, OverflowError, SyntaxError, tokenize.TokenError, EOFError...)
        raise TraceFormatError(
            f"{path}: not a readable .npy array ({' '.join(str(exc).split())})",
            "write the LBAs with numpy.save(path, lbas) as a 1-D integer array",
        ) from None
    if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise TraceFormatError(
            f"{path}: a blocks .npy must be a 1-D integer array of LBAs, got "
            f"{getattr(arr, 'dtype', type(arr).__name__)} {getattr(arr, 'shape', '')}",
            "save the LBAs with numpy.save(path, np.asarray(lbas, np.int64))",
        )
    return arr


def _iter_blocks(acc: _Acc, path: Path, chunk_lines: int) -> Iterator[Chunk]:
    """One LBA per entry, each a single 4 KiB block write (``.npy`` or text)."""
    if path.suffix == ".npy":
        arr = _load_npy(path)
        for i in range(0, arr.size, chunk_lines):
            raw = np.asarray(arr[i : i + chunk_lines])
            bad = (raw < 0) | (raw >= MAX_BLOCK_LBA)  # in the array's own dtype: uint64 cannot wrap
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise TraceFormatError(
                    f"{path}: entry {i + j}: LBA {raw[j]} is out of range (0 <= LBA < 2^50)",
                    "fix the array: LBAs are 4 KiB block numbers",
                )
            lbas = raw.astype(np.int64)
            n = lbas.size
            if acc.on_bytes is not None:
                acc.on_bytes(int(arr.offset) + (i + n) * arr.itemsize)
            yield Chunk(
                np.arange(i, i + n, dtype=np.int64),
                lbas,
                np.ones(n, np.int32),
                np.full(n, OP_WRITE, np.uint8),
                np.full(n, acc.vol("0"), np.int32),
                first_line=i,
            )
        return
    with open_text(path) as fh:
        yield from _tracked(_iter_block_lines(acc, fh, chunk_lines), fh, acc)


def _iter_block_lines(acc: _Acc, fh, chunk_lines: int) -> Iterator[Chunk]:
    """The text form of ``blocks``: one LBA a line (``#`` comments and blank lines skipped)."""
    for start, lines in _line_chunks(fh, chunk_lines, acc):
        vals, idx = [], []
        skipped = 0
        for k, line in enumerate(lines):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                v = int(s)
            except ValueError:
                acc.bad(start + k, f"LBA {s!r} is not an integer")
                skipped += 1
                continue
            if not 0 <= v < MAX_BLOCK_LBA:
                acc.bad(start + k, f"LBA {v} is out of range (0 <= LBA < 2^50)")
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
            first_line=idx[0] if idx else None,
        )


FORMATS = {
    **{name: f"preset of delimited: {spec['columns']}" for name, spec in PRESETS.items()},
    "blkparse": "blkparse default text (Q events)",
    "fio": "fio iolog v2/v3",
    "blocks": ".npy or text, one LBA (4 KiB block write) per entry",
    "delimited": "any delimited text with a column/unit mapping",
}


def check_format(fmt, key: str = "format") -> str:
    """``fmt`` when it names a reader of ``FORMATS``; else a :class:`UsageError` on one line naming
    the setting (``key``: ``format`` for ``ingest``, ``workload.format`` for a file workload), the
    known formats and the nearest one. Callers check before they read or write anything."""
    if isinstance(fmt, str) and fmt in FORMATS:
        return fmt
    import difflib

    known = sorted(FORMATS)
    close = difflib.get_close_matches(str(fmt), known, n=1)
    fix = f"did you mean {key}={close[0]}?" if close else f"give {key}=NAME, one of those"
    raise UsageError(
        f"{key}={fmt}: unknown trace format {fmt!r}; known: {', '.join(known)}",
        f"{fix} (the formats are described in dogi_ml/traces/readers.py)",
    )


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
    check_format(fmt)
    if chunk_lines < 1:
        raise ValueError(f"chunk_lines must be >= 1, got {chunk_lines}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    if path.is_dir():
        raise TraceFormatError(f"{path} is a directory, not a trace file", "give the path of a trace file")
    acc = _acc or _Acc(path=path, skip=skip_malformed)
    acc.fmt = fmt
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


def input_warnings(meta: Mapping) -> list[str]:
    """What a read accepted with something to report (skipped lines, stamps going backwards),
    one message each, from a trace's ``meta`` (also a cached trace's)."""
    source = meta.get("source", "the trace")
    out = []
    skipped = int(meta.get("skipped_lines") or 0)
    if skipped:
        first = meta.get("first_skipped", "")
        out.append(
            f"{source}: skipped {skipped} malformed line(s) (skip_malformed=true), the first: {first.split('; ')[0]}"
        )
    backward = int(meta.get("backward_timestamps") or 0)
    if backward:
        out.append(
            f"{source}: {backward} request(s) stamped earlier than the request before them, the first on line "
            f"{meta.get('first_backward_line')}; kept in file order (a timed simulation holds its clock at the latest stamp)"
        )
    return out


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
    present). Statistics of what was not kept are in ``meta``; skipped lines and time stamps
    going backwards are reported in a :class:`TraceWarning` (see :func:`input_warnings`). A file
    without a single read, write or trim request is a :class:`TraceFormatError`. A bar over the
    file's bytes shows on a terminal (``progress=False`` or ``--quiet`` turns it off; see
    :mod:`dogi_ml.progress`)."""
    path = Path(path)
    acc = _Acc(path=path, skip=skip_malformed)
    parts = {k: [] for k in ("ts_us", "lba", "nblocks", "op", "volume")}
    tally = ChunkTally()
    size = path.stat().st_size if path.exists() and path.is_file() else None
    with progress_bar(size, f"ingest {path.name}", "B", requested=progress, unit_scale=True, unit_divisor=1024) as bar:
        acc.on_bytes = lambda pos: bar.update(min(pos, size or pos) - bar.n)
        for chunk in iter_request_chunks(
            path, fmt, skip_malformed=skip_malformed, delimited=delimited, chunk_lines=chunk_lines, _acc=acc
        ):
            for k in parts:
                parts[k].append(getattr(chunk, k))
            tally.add(chunk)
    arrays = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in parts.items()}
    if arrays["lba"].size == 0:
        raise TraceFormatError(*_no_requests(path, fmt, acc, tally))
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
        if not keep.any():
            raise TraceFormatError(
                f"{path}: volume(s) {wanted} hold no read, write or trim request (only zero-length ones or flushes)",
                "choose other volumes",
            )
        trace = trace.select(keep)
        # re-index the kept volumes 0..k-1 in the order asked for
        new_idx = np.full(len(names), -1, np.int32)
        for i, v in enumerate(wanted):
            new_idx[acc.volumes[v]] = i
        trace.volume = new_idx[trace.volume]
        trace.volumes = wanted
    trace.meta.update({"format": fmt, "source": str(path), **tally.counts()})
    if acc.first_skipped:
        trace.meta["first_skipped"] = "; ".join(acc.first_skipped)
        trace.meta["first_skipped_line"] = acc.first_skipped_line
    if tally.backward_timestamps:
        trace.meta["first_backward_line"] = tally.first_backward_line
    for message in input_warnings(trace.meta):
        warnings.warn(message, TraceWarning, stacklevel=2)
    return remap_dense(trace)


def _no_requests(path: Path, fmt: str, acc: _Acc, tally: ChunkTally) -> tuple[str, str]:
    """(problem, fix) for a file that gave no request."""
    if path.stat().st_size == 0:
        return f"{path}: the file is empty", "give a trace with at least one read, write or trim request"
    if fmt == "blocks" and path.suffix == ".npy":
        return f"{path}: the array holds no LBA", "give an array with at least one LBA"
    seen = [f"{acc.lines_read} line(s)"]
    seen += [
        f"{n} {what}"
        for n, what in (
            (tally.skipped_lines, "malformed, skipped"),
            (tally.zero_length_requests, "zero-length"),
            (tally.flush_requests, "flushes"),
        )
        if n
    ]
    return (
        f"{path}: no read, write or trim request in the file ({', '.join(seen)})",
        f"check that format={fmt} is the file's format and that it holds requests beyond a header",
    )
