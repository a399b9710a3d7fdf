"""Small ``.dtr`` files for the loader tests (tests/test_dtr_format.py, tests/test_dtr_fuzz.py):
a valid trace with reads, writes, trims, multi-block requests and two volumes, its version-1
form, a corpus of damaged files with the problem each must be reported as, and the C programs
that load them (the harness's loader alone, and its libFuzzer target).

Import as ``from dtr_cases import ...`` (pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import google_crc32c
import numpy as np
from helpers import skip_or_fail_in_ci

from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.trace import Trace
from dogi_ml.zns import harness as zh

ARRAYS = (("ts_us", "<i8"), ("lba", "<i8"), ("nblocks", "<i4"), ("op", "|u1"), ("volume", "<i4"))
#: the C loader's sources, for the programs built here
C_SOURCES = ("dtr_load.h", "crc32c.h", "exit_codes.h", "fuzz_dtr.c")


def require(ok: bool, why: str) -> None:
    """Skip with the reason where a tool is missing; under ``CI=true`` fail instead (``.ci/run``
    installs what the tests need, so a missing tool there is a broken setup, not a skip)."""
    if not ok:
        skip_or_fail_in_ci(why)


def small_trace(n: int = 400, seed: int = 5) -> Trace:
    """Reads, writes and trims of 1-4 blocks over 512 blocks, two volumes; the first and the last
    request are writes."""
    rng = np.random.default_rng(seed)
    op = rng.choice(np.array([1, 1, 1, 0, 2], np.uint8), n)
    op[0] = op[-1] = 1
    return Trace(
        ts_us=np.cumsum(rng.integers(0, 50, n)),
        lba=rng.integers(0, 509, n),
        nblocks=rng.integers(1, 5, n),
        op=op,
        volume=rng.integers(0, 2, n),
        volumes=["vol-a", "vol-b"],
        name="small",
        meta={"capacity_blocks": 512, "source": "tests/dtr_cases.py"},
    )


def valid_file(tmp: Path) -> bytes:
    return write_trace(small_trace(), tmp / "valid.dtr").read_bytes()


# -- taking a file apart and putting it back together ---------------------------------------
def split(data: bytes) -> tuple[int, dict, bytes]:
    """(version, header, the bytes from the arrays' start on) of a well-formed file."""
    version, hlen = struct.unpack_from("<II", data, 8)
    start = 16 if version == 1 else 24
    header = json.loads(data[start : start + hlen])
    data_start = (start + hlen + 63) // 64 * 64
    return version, header, data[data_start:]


def array_crcs(header: dict, body: bytes) -> dict:
    out = {}
    for name, dtype in ARRAYS:
        spec = header["arrays"][name]
        n = np.dtype(dtype).itemsize * max(int(spec["count"]), 0)
        out[name] = google_crc32c.value(body[spec["offset"] : spec["offset"] + n])
    return out


def pack(header: dict | bytes, body: bytes, version: int = 2, fix_crcs: bool = True) -> bytes:
    """A file of ``header`` (a dict, or the JSON text as written) and the arrays ``body``; in
    version 2, ``fix_crcs`` recomputes the arrays' CRC32Cs from the body (a file whose checksums
    vouch for what it holds, as a buggy writer would make); the header's CRC is always right."""
    if isinstance(header, dict):
        header = json.loads(json.dumps(header))
        for spec in header["arrays"].values():
            if version == 1:
                spec.pop("crc32c", None)
                if spec["dtype"] == "|u1":
                    spec["dtype"] = "u1"  # as version 1's writer had it
        if version == 2 and fix_crcs:
            for name, crc in array_crcs(header, body).items():
                header["arrays"][name]["crc32c"] = crc
        blob = json.dumps(header, sort_keys=True).encode()
    else:
        blob = header
    if version == 1:
        prefix = b"DOGITRC\0" + struct.pack("<II", 1, len(blob))
    else:
        head = struct.pack("<II", version, len(blob))
        crc = google_crc32c.extend(google_crc32c.value(head), blob)
        prefix = b"DOGITRC\0" + head + struct.pack("<II", crc, 0)
    start = len(prefix) + len(blob)
    return prefix + blob + b"\0" * ((start + 63) // 64 * 64 - start) + body


def set_entry(data: bytes, name: str, index: int, value: int, version: int | None = None) -> bytes:
    """``data`` with array ``name``'s entry ``index`` set to ``value``, checksums recomputed
    (``version``: rewritten in that version)."""
    v, header, body = split(data)
    dtype = dict(ARRAYS)[name]
    spec = header["arrays"][name]
    a = np.frombuffer(body, dtype, count=spec["count"], offset=spec["offset"]).copy()
    if index < 0:
        index += a.size
    a[index] = value
    body = body[: spec["offset"]] + a.tobytes() + body[spec["offset"] + a.nbytes :]
    return pack(header, body, version or v)


def with_header(data: bytes, version: int | None = None, **changes) -> bytes:
    """``data`` with header fields changed (None: removed), checksums recomputed; a key
    ``arrays.NAME.FIELD`` changes an array's entry."""
    v, header, body = split(data)
    for key, value in changes.items():
        where, field = header, key
        if key.startswith("arrays__"):
            _, name, field = key.split("__")
            where = header["arrays"][name]
        if value is None:
            where.pop(field)
        else:
            where[field] = value
    return pack(header, body, version or v, fix_crcs=not any(k.endswith("crc32c") for k in changes))


def flip(data: bytes, offset: int, mask: int = 0x01) -> bytes:
    b = bytearray(data)
    b[offset] ^= mask
    return bytes(b)


def body_offset(data: bytes, name: str, index: int) -> int:
    """The file offset of array ``name``'s entry ``index``."""
    version, hlen = struct.unpack_from("<II", data, 8)
    start = 16 if version == 1 else 24
    header = json.loads(data[start : start + hlen])
    data_start = (start + hlen + 63) // 64 * 64
    return data_start + header["arrays"][name]["offset"] + index * np.dtype(dict(ARRAYS)[name]).itemsize


def corpus(valid: bytes) -> list[tuple[str, bytes, str]]:
    """(case, file bytes, the problem the loaders must report) for damaged and invalid files."""
    _, h, body = split(valid)
    n, max_lba = h["requests"], h["max_lba"]
    v1 = pack(h, body, 1)
    text = json.dumps(h, sort_keys=True)
    end_of_op = body_offset(valid, "op", n)
    cases = [
        ("empty file", b"", "too short to be a dogi_ml binary trace (0 bytes)"),
        ("cut inside the prefix", valid[:10], "too short to be a dogi_ml binary trace (10 bytes)"),
        ("cut inside the header", valid[:100], "truncated header ("),
        ("cut in the arrays", valid[:-3000], f"too few for the header's {n} requests"),
        ("cut by one byte", valid[:-1], f"truncated file ({len(valid) - 1} bytes, the header accounts for"),
        ("trailing bytes", valid + b"\0" * 64, f"oversized file ({len(valid) + 64} bytes"),
        ("bad magic", b"NOTATRC\0" + valid[8:], "not a dogi_ml binary trace (bad magic)"),
        ("unknown version", valid[:8] + struct.pack("<I", 3) + valid[12:], "binary trace version 3, this dogi_ml"),
        ("flipped header byte", flip(valid, 40), "the header fails its checksum"),
        ("flipped header length", flip(valid, 12), "the header fails its checksum"),
        ("flipped reserved byte", with_reserved(valid), "reserved prefix bytes 20-23 are not zero"),
        ("flipped padding byte", flip(valid, end_of_op + 3), f"padding byte at offset {end_of_op + 3} is not zero"),
        ("requests disagree with the arrays", with_header(valid, requests=n - 1), f"array ts_us holds {n} entries"),
        ("an array's count disagrees", with_header(valid, arrays__lba__count=n + 1), f"array lba holds {n + 1}"),
        ("negative count", with_header(valid, arrays__op__count=-1), "array op holds -1 entries"),
        ("huge requests", with_header(valid, requests=2**40), f"too few for the header's {2**40} requests"),
        ("zero requests", with_header(valid, requests=0), "header field requests = 0, a trace holds at least 1"),
        ("requests beyond int64", pack(text.replace(f'"requests": {n}', '"requests": 1' + "0" * 30).encode(), body),
         'header field "requests" is not an integer'),
        ("requests as a string", with_header(valid, requests=str(n)), 'header field "requests" is not an integer'),
        ("write_blocks disagree", with_header(valid, write_blocks=h["write_blocks"] + 1),
         f"the header's write_blocks = {h['write_blocks'] + 1}, but the write requests cover {h['write_blocks']}"),
        ("write_requests disagree", with_header(valid, write_requests=h["write_requests"] - 1),
         f"the header's write_requests = {h['write_requests'] - 1}, but op marks {h['write_requests']}"),
        ("max_lba above the arrays", with_header(valid, max_lba=max_lba + 1),
         f"the header's max_lba = {max_lba + 1}, but the requests reach block {max_lba}"),
        ("max_lba below the arrays", with_header(valid, max_lba=max_lba - 1), f"the header's max_lba = {max_lba - 1}"),
        ("negative max_lba", with_header(valid, max_lba=-1), "header field max_lba = -1 is negative"),
        ("wss above write_blocks", with_header(valid, wss_blocks=h["write_blocks"] + 1), "header field wss_blocks"),
        ("array moved", with_header(valid, arrays__nblocks__offset=h["arrays"]["nblocks"]["offset"] + 64),
         "array nblocks starts at offset"),
        ("wrong dtype", with_header(valid, arrays__lba__dtype="<i4"), 'array lba has dtype "<i4", expected <i8'),
        ("missing field", with_header(valid, max_lba=None), 'header field "max_lba" is missing'),
        ("unknown field", with_header(valid, extra=1), 'unknown header field "extra"'),
        ("missing checksum", with_header(valid, arrays__lba__crc32c=None), 'header array "lba" lacks "crc32c"'),
        ("checksum out of range", with_header(valid, arrays__lba__crc32c=2**32), "crc32c = 4294967296 is not a 32-bit"),
        ("no volumes", with_header(valid, volumes=[]), "header field volumes is empty"),
        ("header not JSON", pack(b"{not json", body), "the header is not valid JSON"),
        ("NaN in the header", pack(text.replace('"meta": {', '"meta": {"x": NaN, ').encode(), body),
         "the header is not valid JSON"),
        ("header a list", pack(b"[1, 2]", body), "the header is not a JSON object"),
        ("repeated field", pack(text.replace('"name": ', '"name": "a", "name": ').encode(), body),
         'header field "name" appears twice'),
    ]  # fmt: skip
    for name, dtype in ARRAYS:
        mid = body_offset(valid, name, n // 2) + np.dtype(dtype).itemsize - 1
        cases.append((f"flipped {name} byte", flip(valid, mid, 0x40), f"array {name} fails its checksum"))
    # values out of range with their checksums right (a buggy writer), and in version 1 (no checksums)
    last = n - 1
    for version in (2, 1):
        tag = "" if version == 2 else " (version 1)"
        src = valid if version == 2 else v1
        cases += [
            (f"nblocks -1{tag}", set_entry(src, "nblocks", 5, -1), "nblocks[5] = -1, a request covers at least 1"),
            (f"nblocks -3 on the last request{tag}", set_entry(src, "nblocks", last, -3),
             f"nblocks[{last}] = -3, a request covers at least 1 block"),
            (f"nblocks 0{tag}", set_entry(src, "nblocks", 9, 0), "nblocks[9] = 0, a request covers at least 1"),
            (f"negative lba{tag}", set_entry(src, "lba", 7, -5), "lba[7] = -5 is negative"),
            (f"lba beyond max_lba{tag}", set_entry(src, "lba", 7, max_lba + 10),
             f"lba[7] = {max_lba + 10} with nblocks"),
            (f"lba near int64's end{tag}", set_entry(src, "lba", 7, 2**63 - 2), f"lba[7] = {2**63 - 2} with nblocks"),
            (f"unknown op{tag}", set_entry(src, "op", 3, 9), "op[3] = 9 is not a known operation"),
            (f"volume out of range{tag}", set_entry(src, "volume", 2, 5), "volume[2] = 5 is outside [0, 2)"),
            (f"negative volume{tag}", set_entry(src, "volume", 2, -1), "volume[2] = -1 is outside [0, 2)"),
        ]  # fmt: skip
    # a flipped bit that version 1 cannot see as such, but whose value the range check refuses
    flipped_lba = int(np.frombuffer(v1, "<i8", 1, body_offset(v1, "lba", 11))[0]) ^ (0x10 << 56)
    cases.append(("lba high byte flipped (version 1)", flip(v1, body_offset(v1, "lba", 11) + 7, 0x10),
                  f"lba[11] = {flipped_lba} with nblocks"))  # fmt: skip
    return cases


def with_reserved(data: bytes) -> bytes:
    """``data`` (version 2) with its reserved prefix word set, the header CRC still right."""
    b = bytearray(data)
    b[20] = 1
    return bytes(b)


# -- the C programs ----------------------------------------------------------------------------
def build_checker(out_dir: Path) -> Path:
    """fuzz_dtr.c's checker (``-DDTR_CHECK_MAIN``): one line per file, ``ok VERSION N HASH`` or
    ``error: MESSAGE``, with the system compiler and the harness's flags."""
    exe = out_dir / "dtr_check"
    if not exe.exists():
        src = zh.source_dir()
        cmd = [zh.find_cc(), *zh.CFLAGS, "-DDTR_CHECK_MAIN", str(src / "fuzz_dtr.c"), "-o", str(exe)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def stream_hash(writes: np.ndarray) -> str:
    """FNV-1a 64 of the LBAs as little-endian int64, as the checker prints it."""
    h = 0xCBF29CE484222325
    for b in np.asarray(writes, "<i8").tobytes():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def clang() -> str | None:
    return shutil.which("clang")
