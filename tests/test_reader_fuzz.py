"""Property-based fuzzing (Hypothesis) of every trace reader on malformed input (issue 39).

The corpus is built at run time from the real samples in ``../shared/data/traces`` (nothing of
them is copied into the repository): a window of a dozen lines of a sample, re-encoded into each
format the toolkit reads, then cut and corrupted by a few drawn mutations (truncation, garbage
bytes, an extra or a missing column, ``nan``/``inf``/non-numeric/negative/huge fields beyond
int64, lines swapped so that time stamps go backwards, a BOM, CRLF, blank and header lines, an
empty file), stored plain, as ``.gz`` or ``.zst``, whole or truncated.

Every outcome must be one of:

* a :class:`TraceFormatError` on one line that names the file and the line (``FILE:LINE:``) or the
  byte, and the fix (``-- ...``); never another exception, never a hang (each example has a
  deadline);
* a trace, with a :class:`TraceWarning` counting any skipped line or backward stamp.

For the delimited formats and the blocks text, an independent line-by-line reference parser
written here (plain Python ints, no numpy, no pyarrow) says which lines are well formed and what
they hold; the reader must then fail on the first bad line, or with ``skip_malformed=true`` skip
exactly the bad lines and return exactly the requests of the good ones (op, volume, first block,
block count, time stamp; block addresses compared by rank, as the dense remapping keeps them).
That is "nothing lost, nothing misread": a wrapped offset, a shifted column or a silently
dropped line all break the equality.

Budgets: ``MAX_EXAMPLES`` (100) examples per reader, twelve readers (the eleven text formats and
``.npy`` blocks), derandomized so that CI draws the same ones; each example reads its file with and
without ``skip_malformed``. The whole file runs in well under 90 s on a loaded 2-core VM.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import warnings

import numpy as np
import pytest
import zstandard
from helpers import shared_data_dir, skip_or_fail_in_ci
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dogi_ml.traces.readers import read_trace
from dogi_ml.traces.trace import TraceFormatError, TraceWarning

# DOGI_ML_FUZZ_EXAMPLES raises the budget and DOGI_ML_FUZZ_RANDOM=1 draws new examples each run,
# for a longer campaign than CI's
MAX_EXAMPLES = int(os.environ.get("DOGI_ML_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=10_000,  # ms per example (two reads, typically 10-50 ms): a hang fails it
    derandomize=os.environ.get("DOGI_ML_FUZZ_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
WINDOW = 12  # lines of a sample per example

TRACES = shared_data_dir() / "traces"


@pytest.fixture(scope="module", autouse=True)
def _kernels_loaded():
    """The first read in a process compiles or loads the Numba kernels (seconds on a loaded VM):
    done here, outside the examples' deadline (a 2000-example run met it as a flaky deadline).
    Without the samples every test here skips (fails under CI=true)."""
    if not TRACES.is_dir():
        skip_or_fail_in_ci(f"real trace samples not found at {TRACES} (they live in ../shared/data)")
    read_trace(TRACES / "msr_cut_105.txt", "flashnet_msr", progress=False)


# -- the corpus: windows of the real samples, in every format ----------------------------------------
def _sample(name: str, start: int) -> list[list[str]]:
    """``WINDOW`` lines of a sample from line ``start`` (wrapping), split into fields."""
    lines = (TRACES / name).read_text().splitlines()
    start %= max(1, len(lines) - WINDOW)
    return [ln.split(",") if name.endswith(".csv") else ln.split() for ln in lines[start : start + WINDOW]]


def _tencent_rows(start):  # FlashNet's Tencent cut: ts_ms,latency,io(1=read),size,offset,...
    return [(float(r[0]), int(r[2]) == 1, int(r[3]), int(r[4])) for r in _sample("tencent_cut_490.csv", start)]


def _msr_rows(start):  # ts_ms dev offset_bytes size_bytes io(1=read)
    return [(float(r[0]), r[1], int(r[2]), int(r[3]), r[4] == "1") for r in _sample("msr_cut_105.txt", start)]


def _msn_rows(start):  # ts_ms dev offset_sectors size_sectors io(1=read)
    return [(float(r[0]), r[1], int(r[2]), int(r[3]), r[4] == "1") for r in _sample("msn_fs_sectors.txt", start)]


def seed_text(fmt: str, start: int) -> str:
    """A dozen well-formed lines of ``fmt``, taken (and for the formats without a sample of their
    own, re-encoded) from the real samples."""
    join = "\n".join
    if fmt == "flashnet_tencent":
        return join(",".join(r) for r in _sample("tencent_cut_490.csv", start)) + "\n"
    if fmt == "flashnet_msr":
        return join(" ".join(r) for r in _sample("msr_cut_105.txt", start)) + "\n"
    if fmt == "sectors_trace":
        return join(" ".join(r) for r in _sample("msn_fs_sectors.txt", start)) + "\n"
    if fmt == "mqsim":
        return join(" ".join(r) for r in _sample("mqsim_tpcc_small.trace", start)) + "\n"
    if fmt == "blkparse":
        lines = (TRACES / "blkparse_hadoop.txt").read_text().splitlines()
        start %= len(lines) - WINDOW
        summary = ["CPU0 (sdb):", " Reads Queued:     1,    4KiB  Writes Queued:     2,    8KiB", "Total (sdb):"]
        return join(lines[start : start + WINDOW] + summary[: start % 4]) + "\n"
    if fmt == "alibaba":
        return (
            join(
                f"{k % 3},{'R' if read else 'W'},{off},{size},{round(ts * 1000)}"
                for k, (ts, read, size, off) in enumerate(_tencent_rows(start))
            )
            + "\n"
        )
    if fmt == "tencent":
        return (
            join(
                f"{1538323200 + int(ts / 1000)},{off},{size},{0 if read else 1},{dev}"
                for ts, dev, off, size, read in _msn_rows(start)
            )
            + "\n"
        )
    if fmt == "msr":
        return (
            join(
                f"{128166372000000000 + round(ts * 10_000)},hm,{dev},{'Read' if read else 'Write'},{off},{size},{k}"
                for k, (ts, dev, off, size, read) in enumerate(_msr_rows(start))
            )
            + "\n"
        )
    if fmt == "spc":
        return (
            join(
                f"{dev},{off},{size * 512},{'r' if read else 'W'},{ts / 1000:.6f}"
                for ts, dev, off, size, read in _msn_rows(start)
            )
            + "\n"
        )
    if fmt == "fio":
        body = [
            f"{round(ts)} /dev/sdb {'read' if read else 'write'} {off} {size}"
            for ts, _, off, size, read in _msr_rows(start)
        ]
        return (
            join(["fio version 3 iolog", "0 /dev/sdb add", "0 /dev/sdb open", *body, f"{10**9} /dev/sdb close"]) + "\n"
        )
    if fmt == "blocks":
        return join(str(off // 4096) for _, _, off, _, _ in _msr_rows(start)) + "\n"
    raise AssertionError(fmt)


TEXT_FORMATS = [
    "alibaba", "tencent", "msr", "spc", "mqsim", "flashnet_tencent", "flashnet_msr", "sectors_trace",
    "blkparse", "fio", "blocks",
]  # fmt: skip
SEPARATOR = {"alibaba": ",", "tencent": ",", "msr": ",", "spc": ",", "flashnet_tencent": ","}

# field values that have broken readers: not numbers, not finite, negative, past int64, past 2^62
BAD_VALUES = [
    "nan", "NaN", "inf", "-inf", "1e999", "abc", "", "-1", "-0", "0x10", "1e3", "4096.0", "4096.5", "1_000",
    str(2**31), str(2**54 + 8), str(2**62), str(2**63 - 1), str(2**63), str(2**64 + 5), str(2**70), "9" * 40,
    "\ufffd", "W", "R", "read",
]  # fmt: skip
GARBAGE = st.binary(min_size=1, max_size=6) | st.sampled_from(
    [b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\r", b",", b" ", b"\t", b"\n\n", b"\xc3(", b"+"]
)


@st.composite
def mutated(draw, fmt: str) -> tuple[bytes, str]:
    """(file bytes, storage) of a corrupted window of ``fmt``."""
    text = seed_text(fmt, draw(st.integers(0, 10**6)))
    sep = SEPARATOR.get(fmt, " ")
    lines = text.split("\n")[:-1]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(
            st.sampled_from(
                ["value", "extra", "missing", "swap", "garbage", "blank", "header", "duplicate", "delete", "truncate"]
            )
        )
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        fields = lines[i].split(sep) if sep != " " else lines[i].split(" ")
        j = draw(st.integers(0, max(0, len(fields) - 1)))
        if kind == "value":
            fields[j] = draw(st.sampled_from(BAD_VALUES))
        elif kind == "extra":
            fields.insert(draw(st.integers(0, len(fields))), draw(st.sampled_from(["7", "0", "x", "1.5"])))
        elif kind == "missing" and len(fields) > 1:
            del fields[j]
        elif kind == "swap":
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
            continue
        elif kind == "blank":
            lines.insert(i, draw(st.sampled_from(["", " ", "\t"])))
            continue
        elif kind == "header":
            lines.insert(0, sep.join(["timestamp", "offset", "size", "op", "volume"]))
            continue
        elif kind == "duplicate":
            lines.insert(i, lines[i])
            continue
        elif kind == "delete":
            del lines[i]
            continue
        elif kind == "truncate":
            lines = lines[: i + 1]
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
            continue
        elif kind == "garbage":
            raw = lines[i].encode("utf-8", "surrogateescape")
            at = draw(st.integers(0, len(raw)))
            lines[i] = (raw[:at] + draw(GARBAGE) + raw[at:]).decode("utf-8", "surrogateescape")
            continue
        lines[i] = sep.join(fields)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = newline.join(lines) + (newline if lines and draw(st.booleans()) else "")
    data = body.encode("utf-8", "surrogateescape")
    if draw(st.integers(0, 5)) == 0:
        data = b"\xef\xbb\xbf" + data  # a BOM
    if draw(st.integers(0, 15)) == 0:
        data = b""
    storage = draw(st.sampled_from(["plain", "plain", "plain", "gz", "zst", "gz-cut", "zst-cut"]))
    if storage.startswith("gz"):
        data = gzip.compress(data, mtime=0)
    elif storage.startswith("zst"):
        data = zstandard.ZstdCompressor().compress(data)
    if storage.endswith("-cut"):
        data = data[: draw(st.integers(0, len(data) - 1))]
    return data, storage


# -- the independent reference ---------------------------------------------------------------------
# The formats' definitions, restated here (README "Trace formats" and ../shared/data/README.md):
# (fields per line, or None when the first data line sets it; columns; ts unit in µs; offset and
# size units in bytes; ops)
REF = {
    "alibaba": (5, dict(vol=[0], op=1, off=2, size=3, ts=4), 1, 1, 1, {"r": 0, "w": 1}, True),
    "tencent": (5, dict(ts=0, off=1, size=2, op=3, vol=[4]), 1e6, 512, 512, {"0": 0, "1": 1}, False),
    "msr": (7, dict(ts=0, vol=[1, 2], op=3, off=4, size=5), "filetime", 1, 1, {"read": 0, "write": 1}, True),
    "spc": (None, dict(vol=[0], off=1, size=2, op=3, ts=4), 1e6, 512, 1, {"r": 0, "w": 1}, True),
    "mqsim": (5, dict(ts=0, vol=[1], off=2, size=3, op=4), 1e-3, 512, 512, {"0": 1, "1": 0}, False),
    "flashnet_tencent": (7, dict(ts=0, op=2, size=3, off=4, vol=[]), 1e3, 1, 1, {"1": 0, "0": 1}, False),
    "flashnet_msr": (5, dict(ts=0, vol=[1], off=2, size=3, op=4), 1e3, 1, 1, {"1": 0, "0": 1}, False),
    "sectors_trace": (5, dict(ts=0, vol=[1], off=2, size=3, op=4), 1e3, 512, 512, {"1": 0, "0": 1}, False),
}


def _int(text: str) -> int:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        f = float(text)  # ValueError propagates
        if not math.isfinite(f) or f != int(f):
            raise ValueError(text) from None
        return int(f)


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    text = text.removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def reference(fmt: str, data: bytes) -> tuple[list[tuple], list[int]]:
    """(requests of the well-formed lines as (op, volume, first block, blocks, ts µs), numbers of
    the malformed lines), by the format's definition."""
    requests, bad = [], []
    if fmt == "blocks":
        for n, line in enumerate(_lines(data), 1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                v = int(s)
                assert 0 <= v < 2**50
            except (ValueError, AssertionError):
                bad.append(n)
                continue
            requests.append((1, "0", v, 1, n))
        return requests, bad
    nfields, col, ts_unit, off_unit, size_unit, ops, fold = REF[fmt]
    sep = SEPARATOR.get(fmt, " ")
    width = nfields
    need = 1 + max([col["op"], col["off"], col["size"], col["ts"], *col["vol"]])  # fields a line needs
    for n, line in enumerate(_lines(data), 1):
        s = line.strip()
        if not s:
            continue
        parts = s.split() if sep == " " else s.split(sep)
        if width is None and len(parts) >= need:
            width = len(parts)
        try:
            if len(parts) != (width or need) or len(parts) < need:
                raise ValueError("fields")
            off = _int(parts[col["off"]]) * off_unit
            size = _int(parts[col["size"]]) * size_unit
            if off < 0 or size < 0 or size > 2**32 or off + size >= 2**62:
                raise ValueError("range")
            op_text = parts[col["op"]].strip()
            op = ops.get(op_text.lower() if fold else op_text)
            if op is None:
                raise ValueError("op")
            if ts_unit == "filetime":
                ts = _int(parts[col["ts"]]) // 10
            else:
                ts = float(parts[col["ts"]].strip()) * ts_unit
                if not math.isfinite(ts) or abs(ts) >= 2**62:
                    raise ValueError("ts")
                ts = round(ts)
            if abs(ts) >= 2**62:
                raise ValueError("ts")
        except ValueError:
            bad.append(n)
            continue
        if not all(parts[c].strip() for c in col["vol"]):
            bad.append(n)  # an empty volume id
            continue
        if size == 0:
            continue  # zero-length: counted by the reader, carries no block
        vol = "_".join(parts[c].strip() for c in col["vol"]) or "0"
        first, last = off // 4096, (off + size - 1) // 4096
        requests.append((op, vol, first, last - first + 1, ts))
    return requests, bad


def ranked(requests: list[tuple], volumes: list[str]) -> list[tuple]:
    """Requests with the first block replaced by its rank among all touched (volume, block)
    pairs, volume-major in the reader's volume order: what a dense remapping keeps. Counted
    over the touched ranges (a request may cover a million blocks)."""
    order = {v: i for i, v in enumerate(volumes)}
    ranges = sorted((order[v], first, first + n) for _, v, first, n, _ in requests)

    def rank(vol: int, block: int) -> int:
        below, seen = 0, (-1, -1)  # touched blocks before (vol, block); the last counted (volume, end)
        for rv, lo, hi in ranges:
            if (rv, lo) >= (vol, block):
                break
            top = hi if rv < vol else min(hi, block)
            start = max(lo, seen[1]) if seen[0] == rv else lo
            if top > start:
                below += top - start
                seen = (rv, top)
        return below

    return [(op, v, rank(order[v], first), n, ts) for op, v, first, n, ts in requests]


# -- the properties --------------------------------------------------------------------------------
LOCATED = re.compile(
    r"(:\d+: "  # FILE:LINE: reason
    r"|: after line \d+, byte \d+ of the file: "  # a compressed stream that breaks off
    r"|: byte \d+: |: before byte \d+: "  # .zst frames
    r"|: the file is empty|: no read, write or trim request in the file \(\d+ line"  # nothing in it
    r"|: not a readable \.npy array|: a blocks \.npy must be|: entry \d+: |: the array holds no LBA)"
)


def read(path, fmt, skip):
    """('error', message) or ('trace', trace, warnings) — anything else escapes and fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = read_trace(path, fmt, skip_malformed=skip, progress=False)
        except TraceFormatError as exc:
            msg = str(exc)
            assert "\n" not in msg and "Traceback" not in msg, msg
            assert msg.startswith(f"{path}"), msg
            assert LOCATED.match(msg[len(str(path)) :]), msg
            assert " -- " in msg, f"no fix in {msg!r}"
            return ("error", msg)
    return ("trace", trace, [str(w.message) for w in caught if issubclass(w.category, TraceWarning)])


def check_trace(trace, notes, skip):
    assert trace.n_requests >= 1
    assert (trace.nblocks >= 1).all() and (trace.lba >= 0).all()
    assert np.isin(trace.op, [0, 1, 2]).all()
    skipped = trace.meta["skipped_lines"]
    assert skip or skipped == 0
    if skipped:
        assert any(f"skipped {skipped} malformed line(s)" in n for n in notes), notes
    back = trace.meta["backward_timestamps"]
    assert back == int(np.count_nonzero(np.diff(trace.ts_us) < 0))
    if back:
        assert any(f"{back} request(s) stamped earlier" in n for n in notes), notes


def fuzz_one(tmp_path, fmt, case):
    data, storage = case
    suffix = {"plain": "", "gz": ".gz", "gz-cut": ".gz", "zst": ".zst", "zst-cut": ".zst"}[storage]
    path = tmp_path / f"fuzz.{fmt}{suffix}"
    path.write_bytes(data)
    strict, lenient = read(path, fmt, False), read(path, fmt, True)
    for out, skip in ((strict, False), (lenient, True)):
        if out[0] == "trace":
            check_trace(out[1], out[2], skip)
    if storage.endswith("-cut"):
        assert strict[0] == lenient[0] == "error", (strict, lenient)  # a cut stream is never a trace
        return
    if fmt not in REF and fmt != "blocks":
        return
    plain = data if storage == "plain" else (gzip.decompress(data) if storage == "gz" else zstandard.decompress(data))
    requests, bad = reference(fmt, plain)
    if bad:
        assert strict[0] == "error" and f"{path}:{bad[0]}: " in strict[1], (bad, strict)
    else:
        assert strict[0] == ("trace" if requests else "error"), (strict, requests)
    if not requests:
        assert lenient[0] == "error", lenient
        assert "no read, write or trim request" in lenient[1] or "the file is empty" in lenient[1], lenient
        return
    assert lenient[0] == "trace", lenient
    trace = lenient[1]
    assert trace.meta["skipped_lines"] == len(bad)
    if bad:
        assert trace.meta["first_skipped_line"] == bad[0]
    got = [
        (int(o), trace.volumes[v], int(lba), int(n), int(t))
        for o, v, lba, n, t in zip(trace.op, trace.volume, trace.lba, trace.nblocks, trace.ts_us)
    ]
    expected = ranked(requests, trace.volumes)
    if fmt in ("fio", "blocks"):  # stamps are line numbers there
        got, expected = [g[:4] for g in got], [e[:4] for e in expected]
    assert got == expected


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_text_readers_never_misread(tmp_path_factory, fmt):
    @FUZZ
    @given(case=mutated(fmt))
    def run(case):
        fuzz_one(tmp_path_factory.mktemp(fmt), fmt, case)

    run()


@st.composite
def npy_case(draw) -> bytes:
    """A ``.npy`` of LBAs derived from the MSR sample, then broken: cut, bytes flipped, another
    dtype or shape, values out of range."""
    import io

    lbas = np.asarray([off // 4096 for _, _, off, _, _ in _msr_rows(draw(st.integers(0, 10**6)))], np.int64)
    kind = draw(st.sampled_from(["good", "dtype", "shape", "value", "cut", "flip", "empty", "object"]))
    arr = lbas
    if kind == "dtype":
        arr = lbas.astype(draw(st.sampled_from([np.uint64, np.int32, np.uint8, np.float64, np.bool_, ">i8"])))
    elif kind == "shape":
        arr = lbas.reshape(2, -1)
    elif kind == "value":
        arr = lbas.astype(np.uint64)
        arr[draw(st.integers(0, arr.size - 1))] = draw(st.sampled_from([2**63, 2**64 - 1, 2**50, 2**50 - 1]))
    elif kind == "empty":
        arr = lbas[:0]
    buf = io.BytesIO()
    if kind == "object":
        np.save(buf, np.asarray([1, "x"], dtype=object), allow_pickle=True)
    else:
        np.save(buf, arr)
    data = buf.getvalue()
    if kind == "cut":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data


@FUZZ
@given(data=npy_case())
def test_blocks_npy_never_tracebacks(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("npy") / "fuzz.npy"
    path.write_bytes(data)
    out = read(path, "blocks", False)
    if out[0] == "trace":
        check_trace(out[1], out[2], False)
        arr = np.load(path)  # what it holds, read independently: every LBA, in order, ranked
        assert arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer)
        assert int(arr.min()) >= 0 and int(arr.max()) < 2**50
        ranks = np.searchsorted(np.unique(arr), arr)
        assert out[1].lba.tolist() == ranks.tolist()
