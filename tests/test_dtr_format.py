"""The .dtr format's loaders, C (dogi_ml/zns/dtr_load.h) and Python (dogi_ml/traces/binfmt.py),
on damaged and invalid files: each case is refused by both with the same one-line message
(file, field or array entry, fix), the harness exits 3, the command line too without a
traceback; random corruptions of a valid file (Hypothesis) give the loaders' error or exactly
the original data, and the two loaders agree on every one of them."""

from __future__ import annotations

import re
import subprocess
import tempfile
import warnings
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from dtr_cases import (
    build_checker,
    corpus,
    pack,
    small_trace,
    split,
    stream_hash,
    valid_file,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dogi_ml.errors import DogiMLError
from dogi_ml.traces import binfmt
from dogi_ml.traces.binfmt import DtrFormatError, DtrVersionWarning, read_binary, read_header, write_trace
from dogi_ml.zns import exit_codes
from dogi_ml.zns import harness as zh


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dtr")


@pytest.fixture(scope="module")
def corpus_files(work):
    """The corpus on disk: [(case, path, expected problem)]."""
    out = []
    for i, (name, data, expect) in enumerate(corpus(valid_file(work))):
        path = work / f"case{i:02d}.dtr"
        path.write_bytes(data)
        out.append((name, path, expect))
    return out


@pytest.fixture(scope="module")
def checker(work):
    return build_checker(work)


def _python_verdict(path: Path) -> str:
    """``error: MESSAGE`` as the command line prints it, or ``ok VERSION N HASH`` as the checker."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DtrVersionWarning)
            trace = read_binary(path)
            version = read_header(path)["version"]
    except DtrFormatError as exc:
        return "error: " + str(exc)
    return f"ok {version} {trace.block_writes.size} {stream_hash(trace.block_writes)}"


def test_exit_code_tables_agree():
    """exit_codes.h (C) and exit_codes.py hold the same table; binfmt repeats BAD_INPUT (its
    layer sits below dogi_ml.zns)."""
    text = (zh.source_dir() / "exit_codes.h").read_text()
    c_table = {name: int(v) for name, v in re.findall(r"#define DOGI_EXIT_(\w+)\s+(\d+)", text)}
    py_table = {k: v for k, v in vars(exit_codes).items() if k.isupper()}
    assert c_table == py_table == {
        "OK": 0, "INTERNAL": 1, "USAGE": 2, "BAD_INPUT": 3, "VERIFY": 4, "LOST_WRITES": 5, "PARITY": 6
    }  # fmt: skip
    assert binfmt.BAD_INPUT_EXIT == DtrFormatError.exit_status == exit_codes.BAD_INPUT


def test_version_2_round_trip_and_version_1_read_with_a_warning(work, checker):
    t = small_trace()
    path = write_trace(t, work / "rt.dtr")
    data = path.read_bytes()
    version, header, body = split(data)
    assert version == binfmt.VERSION == 2
    for name, dtype in (("ts_us", "<i8"), ("lba", "<i8"), ("nblocks", "<i4"), ("op", "|u1"), ("volume", "<i4")):
        a = np.ascontiguousarray(getattr(t, name), dtype)
        assert header["arrays"][name]["crc32c"] == google_crc32c.value(a.tobytes())
    back = read_binary(path)
    for name in ("ts_us", "lba", "nblocks", "op", "volume"):
        np.testing.assert_array_equal(getattr(back, name), getattr(t, name))
    assert back.volumes == ["vol-a", "vol-b"] and back.meta["capacity_blocks"] == 512
    # version 1 (as the old writer made it): the same data, and a warning naming the missing checksums
    old = work / "v1.dtr"
    old.write_bytes(pack(header, body, 1))
    with pytest.warns(DtrVersionWarning, match=r"v1.dtr: binary trace version 1 has no checksums"):
        back1 = read_binary(old)
    np.testing.assert_array_equal(back1.block_writes, t.block_writes)
    # the C loader accepts both and derives the same block-write stream
    lines = subprocess.run([str(checker), str(path), str(old)], capture_output=True, text=True).stdout.splitlines()
    assert lines == [
        f"ok 2 {t.block_writes.size} {stream_hash(t.block_writes)}",
        f"ok 1 {t.block_writes.size} {stream_hash(t.block_writes)}",
    ]


def test_python_loader_refuses_each_damaged_file_in_one_line(corpus_files):
    assert len(corpus_files) >= 55
    for name, path, expect in corpus_files:
        with pytest.raises(DtrFormatError) as err:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DtrVersionWarning)
                read_binary(path)
        msg = str(err.value)
        assert msg.startswith(f"{path}: ") and expect in msg and " -- " in msg, (name, msg)
        assert "\n" not in msg, name


def test_c_loader_gives_the_python_loaders_message_for_each_damaged_file(corpus_files, checker):
    out = subprocess.run(
        [str(checker), *(str(p) for _, p, _ in corpus_files)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == len(corpus_files)
    for (name, path, expect), line in zip(corpus_files, out, strict=True):
        assert line == _python_verdict(path), name
        assert expect in line, name


def _harness(exe, trace: Path, device: Path, capacity: int) -> subprocess.CompletedProcess:
    nseg = zh.segment_count(capacity, 1.0, 64)
    args = zh.harness_args(trace, f"file:{device}", capacity=capacity, policy="nosep", op_ratio=1.0,
                           create=(nseg, 128, 64, 14, 14))  # fmt: skip
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def test_harness_exits_3_with_the_loaders_line_on_each_damaged_file(corpus_files, work):
    """The replay harness itself: exit status 3 (exit_codes.BAD_INPUT) and one stderr line, the
    Python loader's message; before issue 39, nblocks -1 replayed another stream and printed
    "verify ok", -3 on the last request overflowed the heap, a negative LBA was "beyond the
    logical capacity", and a flipped body byte or a header count that disagrees passed."""
    exe = zh.build()
    for i, (name, path, _expect) in enumerate(corpus_files):
        proc = _harness(exe, path, work / f"dev{i}.zns", 512)
        assert proc.returncode == exit_codes.BAD_INPUT, (name, proc.returncode, proc.stderr)
        assert proc.stderr.splitlines() == [_python_verdict(path)], name
        assert proc.stdout == "", name


def test_harness_replays_version_2_and_warns_on_version_1(work):
    exe = zh.build()
    t = small_trace()
    path = write_trace(t, work / "ok.dtr")
    _, header, body = split(path.read_bytes())
    old = work / "ok_v1.dtr"
    old.write_bytes(pack(header, body, 1))
    for trace, warned in ((path, False), (old, True)):
        proc = _harness(exe, trace, work / f"dev-{trace.stem}.zns", 512)
        assert proc.returncode == 0, proc.stderr
        result = zh.json.loads(proc.stdout.splitlines()[-1])
        assert result["user_writes"] == t.block_writes.size and result["verify"]["ok"]
        warnings_seen = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
        assert warnings_seen == (
            [f"warning: {old}: binary trace version 1 has no checksums, so damage to its arrays may go unseen -- "
             "re-run `python -m dogi_ml ingest` on the source trace to rewrite it as version 2"]
            if warned else []
        )  # fmt: skip


def test_crc32c_of_c_and_python_agree(work):
    """crc32c.h (SSE4.2 path and table path) against google-crc32c on the same bytes: lengths
    around the hardware path's 3 x 1360-byte rounds, unaligned starts."""
    src = work / "crc.c"
    src.write_text(
        '#include <stdio.h>\n#include <stdlib.h>\n#include "crc32c.h"\n'
        "int main(void) {\n"
        "    static unsigned char buf[1 << 16]; size_t n = fread(buf, 1, sizeof buf, stdin);\n"
        "    size_t cut[] = {0, 1, 7, 8, 9, 63, 4080, 4088, 4096, 4097, 8191, 12345};\n"
        "    for (size_t k = 0; k < sizeof cut / sizeof *cut; ++k) for (size_t off = 0; off < 3; ++off) {\n"
        "        if (off + cut[k] > n) continue;\n"
        "        crc32c_uses_hw(); uint32_t hw = crc32c(0, buf + off, cut[k]);\n"
        "        crc32c_hw = 0; uint32_t sw = crc32c(0, buf + off, cut[k]); crc32c_hw = -1;\n"
        '        printf("%zu %zu %u %u\\n", off, cut[k], hw, sw);\n'
        "    }\n    return 0;\n}\n"
    )
    exe = work / "crc"
    subprocess.run([zh.find_cc(), *zh.CFLAGS, f"-I{zh.source_dir()}", str(src), "-o", str(exe)], check=True)
    data = np.random.default_rng(2).integers(0, 256, 20_000, dtype=np.uint8).tobytes()
    lines = subprocess.run([str(exe)], input=data, capture_output=True, check=True).stdout.decode().splitlines()
    assert len(lines) == 36
    for line in lines:
        off, n, hw, sw = map(int, line.split())
        assert hw == sw == google_crc32c.value(data[off : off + n]), (off, n)


def test_writer_refuses_what_the_loader_would_refuse(work):
    t = small_trace()
    t.nblocks[4] = -1
    with pytest.raises(DogiMLError, match=r"nblocks\[4\] = -1, a request covers at least 1 block"):
        write_trace(t, work / "bad.dtr")
    empty = small_trace()
    empty = empty.select(np.zeros(empty.n_requests, bool))
    with pytest.raises(DogiMLError, match="holds no requests"):
        write_trace(empty, work / "empty.dtr")
    assert not (work / "bad.dtr").exists() and not (work / "empty.dtr").exists()
    assert not list(work.glob("*.tmp"))


def test_command_line_exits_3_in_one_line(corpus_files, tmp_path):
    from helpers import run_cli

    for name, path, expect in [c for c in corpus_files if c[0] in ("flipped lba byte", "nblocks -1 (version 1)")]:
        proc = run_cli(["stats", f"path={path}"], tmp_path, check=False)
        assert proc.returncode == exit_codes.BAD_INPUT, (name, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert lines[-1] == _python_verdict(path) and expect in lines[-1], name
        assert "Traceback" not in proc.stderr, name


# -- random corruption ---------------------------------------------------------------------------
_VALID_DIR = Path(tempfile.mkdtemp(prefix="dtr-valid-"))
VALID = valid_file(_VALID_DIR)
ORIGINAL = read_binary(_VALID_DIR / "valid.dtr")
_, _VALID_HEADER, _VALID_BODY = split(VALID)
VALID_V1 = pack(_VALID_HEADER, _VALID_BODY, 1)

corruption = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, len(VALID) - 1)),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), min_size=1,
                                        max_size=8)),
    st.tuples(st.just("overwrite"), st.integers(0, len(VALID) - 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("insert"), st.integers(0, len(VALID)), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=128)),
)  # fmt: skip


def _corrupt(data: bytes, how) -> bytes:
    kind = how[0]
    if kind == "truncate":
        return data[: min(how[1], len(data))]
    if kind == "flip":
        b = bytearray(data)
        for off, mask in how[1]:
            b[off % len(b)] ^= mask
        return bytes(b)
    if kind == "overwrite":
        off = how[1] % len(data)
        return data[:off] + how[2] + data[off + len(how[2]) :]
    if kind == "insert":
        return data[: how[1]] + how[2] + data[how[1] :]
    return data + how[1]


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(how=corruption, version=st.sampled_from([2, 1]))
def test_random_corruption_is_refused_or_harmless_and_both_loaders_agree(how, version, work, checker):
    """Version 2: the Python loader raises DtrFormatError or returns exactly the original trace
    (never another exception, never other data). Both versions: the C loader gives the same
    verdict, the same message or the same block-write stream."""
    data = _corrupt(VALID if version == 2 else VALID_V1, how)
    path = work / "random.dtr"
    path.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DtrVersionWarning)
            trace = read_binary(path)
    except DtrFormatError as exc:
        verdict = "error: " + str(exc)
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
    else:
        if version == 2:
            for name in ("ts_us", "lba", "nblocks", "op", "volume"):
                np.testing.assert_array_equal(getattr(trace, name), getattr(ORIGINAL, name))
            assert (trace.name, trace.volumes, trace.meta) == (ORIGINAL.name, ORIGINAL.volumes, ORIGINAL.meta)
        verdict = f"ok {read_header(path)['version']} {trace.block_writes.size} {stream_hash(trace.block_writes)}"
    out = subprocess.run([str(checker), str(path)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [verdict]
