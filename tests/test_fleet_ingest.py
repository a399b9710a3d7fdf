"""Fleets as data (issue 41): ``ingest split=true`` and the synthetic fleet generator.

The independent references: the per-volume ``.dtr`` of a split equals what the existing
single-volume path gives (``read_trace(..., volumes=[id])``, the readers' own parser); the
manifest's columns equal a plain-Python recomputation from the CSV text; the generator's arrays
survive CSV -> split unchanged; golden counts pin the generator to the last digit."""

from __future__ import annotations

import resource
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import REPO

from dogi_ml.traces import fleet as F
from dogi_ml.traces.binfmt import read_binary
from dogi_ml.traces.readers import read_trace
from dogi_ml.traces.trace import BLOCK_SIZE, TraceFormatError, TraceWarning

ARRAYS = ("ts_us", "lba", "nblocks", "op")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A 6-volume synthetic fleet with its Alibaba CSV."""
    out = tmp_path_factory.mktemp("fleet")
    F.generate_fleet(out, 6, seed=3, csv=True)
    return out


def _split(src, fmt, out, **opts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return F.split_trace(src, fmt, out, progress=False, **opts)


def _arrays(path):
    t = read_binary(path)
    return {k: np.asarray(getattr(t, k)) for k in ARRAYS}


def _assert_same_as_single_ingest(src, fmt, manifest, **opts):
    """Every volume of the split equals the readers' own single-volume read of the file."""
    rows = F.read_fleet(manifest, verify=True)
    assert rows
    for row in rows:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            ref = read_trace(src, fmt, volumes=[row.volume], progress=False, **opts)
        got = _arrays(row.dtr)
        for k in ARRAYS:
            assert np.array_equal(got[k], getattr(ref, k)), (row.volume, k)
        stats = ref.stats()
        assert (row.requests, row.write_blocks, row.working_set_blocks) == (
            stats["requests"],
            stats["write_blocks"],
            stats["wss_blocks"],
        )
    return rows


# -- the generator --------------------------------------------------------------------------------
def test_generator_golden_counts_and_prefix(synthetic, tmp_path):
    rows = F.read_fleet(synthetic, verify=True)
    assert [r.volume for r in rows] == [str(i) for i in range(6)]
    # golden: the generator regenerates to the last digit (these are its first run's numbers)
    assert [r.requests for r in rows] == GOLDEN_REQUESTS
    assert [r.write_blocks for r in rows] == GOLDEN_WRITE_BLOCKS
    assert [r.checksum for r in rows] == GOLDEN_CHECKSUMS
    # a volume's stream is its own, (seed, index): a smaller fleet is a prefix of a larger one
    F.generate_fleet(tmp_path, 2, seed=3)
    assert [r.checksum for r in F.read_fleet(tmp_path)] == GOLDEN_CHECKSUMS[:2]
    # the drawn parameters stay inside the spec's ranges
    spec = F.FleetSpec()
    for i in range(6):
        p = F.volume_params(spec, 3, i)
        assert spec.wss_min <= p["wss_blocks"] <= spec.wss_max
        assert spec.theta_range[0] <= p["theta"] <= spec.theta_range[1]
        assert 0 < p["read_ratio"] < 1


GOLDEN_REQUESTS = [38019, 9613, 9117, 4234, 10206, 10500]
GOLDEN_WRITE_BLOCKS = [35142, 12922, 9276, 3823, 23086, 18224]
GOLDEN_CHECKSUMS = ["crc32c:a0c9fadc", "crc32c:5de839f6", "crc32c:89f310fe", "crc32c:0ae714cf", "crc32c:b2815360",
                    "crc32c:0cefe98c"]  # fmt: skip


def test_generated_burstiness_and_read_ratio_follow_the_draws():
    """Gamma gaps with coefficient of variation ``burstiness`` and reads at ``read_ratio``."""
    spec = F.FleetSpec(wss_min=20000, wss_median=30000, traffic_min=8.0)
    for i in range(3):
        p, trace = F.generate_volume(spec, 11, i)
        gaps = np.diff(trace.ts_us).astype(float)
        cv = gaps.std() / gaps.mean()
        assert cv == pytest.approx(p["burstiness"], rel=0.1)
        reads = np.count_nonzero(trace.op == 0) / trace.n_requests
        assert reads == pytest.approx(p["read_ratio"], abs=0.01)
        assert int(trace.nblocks[trace.op == 1].sum()) == round(p["wss_blocks"] * p["traffic"])


def test_round_trip_csv_split_equals_generated_arrays(synthetic, tmp_path):
    """generate CSV -> split (small blocks and spills) -> each .dtr equals the generator's."""
    manifest = _split(synthetic / "fleet.alibaba.csv", "alibaba", tmp_path, block_bytes=1 << 16, spill_bytes=1 << 16)
    meta = F.fleet_metadata(manifest)
    assert meta["spill"]["flushes"] > 10  # the spill files were used
    generated = {r.volume: r for r in F.read_fleet(synthetic)}
    split = F.read_fleet(manifest, verify=True)
    assert sorted(r.volume for r in split) == sorted(generated)
    for row in split:
        ref = generated[row.volume]
        a, b = _arrays(row.dtr), _arrays(ref.dtr)
        for k in ARRAYS:
            assert np.array_equal(a[k], b[k]), (row.volume, k)
        for column in F.MANIFEST_COLUMNS:
            if column not in ("checksum", "path"):  # the .dtr headers' meta differ (source, generator)
                assert getattr(row, column) == getattr(ref, column), (row.volume, column)


def test_conf_fleet_yaml_is_the_specs_defaults():
    conf = yaml.safe_load((REPO / "conf" / "fleet.yaml").read_text())
    assert F.FleetSpec.from_mapping(conf["spec"]) == F.FleetSpec()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"wss_mediann": 3}, "unknown key(s) ['wss_mediann']"),
        ({"theta_range": [1.0, 0.5]}, "theta_range=[1.0, 0.5] needs low <= high"),
        ({"wss_max": 10}, "spec.wss_max=10 < spec.wss_min=256 -- give spec.wss_max >= spec.wss_min"),
        ({"read_alpha": 0}, "spec.read_alpha=0 must be above 0 -- give spec.read_alpha above 0"),
        ({"wss_min": 2.5}, "wss_min=2.5 is not a whole number"),
        # TypeError's traceback at the comparison with traffic_min
        ({"traffic_max": "abc"}, "traffic_max='abc' is not a finite number"),
        # math.exp overflowed: OverflowError's traceback
        ({"wss_sigma": 1e300}, "wss_sigma=1e+300 is above 20.0"),
    ],
)
def test_fleet_spec_errors(override, message):
    with pytest.raises(F.DogiMLError, match=None) as info:
        F.FleetSpec.from_mapping(override)
    assert message in str(info.value)


def test_stamps_past_64_bits_are_an_error_not_a_wrapped_clock():
    """A mean gap of 1e300 µs gave every request the stamp -2^63, without a word."""
    with pytest.raises(F.DogiMLError, match=r"volume 0's last stamp \(.* µs, .*\) does not fit in 64 bits"):
        F.generate_volume(F.FleetSpec(interval_median_us=1e300), seed=0, index=0)


# -- the splitter against the single-volume path --------------------------------------------------
def test_split_alibaba_equals_single_volume_ingest(synthetic, tmp_path):
    _assert_same_as_single_ingest(
        synthetic / "fleet.alibaba.csv", "alibaba", _split(synthetic / "fleet.alibaba.csv", "alibaba", tmp_path)
    )


def _csv_rows(path):
    """The generated Alibaba CSV as Python tuples (volume, op, offset, length, ts)."""
    out = []
    for line in Path(path).read_text().splitlines():
        vol, op, off, length, ts = line.split(",")
        out.append((vol, op, int(off), int(length), int(ts)))
    return out


def test_split_tencent_and_msr_equal_single_volume_ingest(synthetic, tmp_path):
    """The same requests written as Tencent (s, sectors, 0/1) and MSR (filetime, host and disk)."""
    rows = _csv_rows(synthetic / "fleet.alibaba.csv")
    tencent = tmp_path / "tencent.csv"
    tencent.write_text(
        "".join(
            f"{ts // 250_000},{off // 512},{n // 512},{int(op == 'W')},{1000 + int(v)}\n" for v, op, off, n, ts in rows
        )
    )
    _assert_same_as_single_ingest(tencent, "tencent", _split(tencent, "tencent", tmp_path / "t"))
    msr = tmp_path / "msr.csv"
    msr.write_text(
        "".join(
            f"{128166372000000000 + ts * 10},{'web' if int(v) % 2 else 'src'},{int(v) // 2},"
            f"{'Write' if op == 'W' else 'Read'},{off},{n},1200\n"
            for v, op, off, n, ts in rows
        )
    )
    manifest = _split(msr, "msr", tmp_path / "m")
    rows = _assert_same_as_single_ingest(msr, "msr", manifest)
    assert sorted(r.volume for r in rows) == ["src_0", "src_1", "src_2", "web_0", "web_1", "web_2"]


def test_split_real_multi_volume_samples(shared_traces, tmp_path):
    """Real traces with a device column: MQSim's TPC-C and the MSN file server (space-separated)."""
    for name, fmt in (("mqsim_tpcc_small.trace", "mqsim"), ("msn_fs_sectors.txt", "sectors_trace")):
        manifest = _split(shared_traces / name, fmt, tmp_path / fmt, block_bytes=1 << 17)
        rows = _assert_same_as_single_ingest(shared_traces / name, fmt, manifest)
        whole = read_trace(shared_traces / name, fmt, progress=False).stats()
        assert sum(r.requests for r in rows) == whole["requests"]
        assert sum(r.write_blocks for r in rows) == whole["write_blocks"]
    devices = {line.split()[1] for line in (shared_traces / "mqsim_tpcc_small.trace").read_text().splitlines()}
    assert sorted(r.volume for r in F.read_fleet(tmp_path / "mqsim")) == sorted(devices)  # 16 devices


def test_tricky_text_takes_the_readers_rules(tmp_path):
    """Lines each fast path must hand on or read exactly as the readers do: CRLF, lone CRs, a
    byte-order mark, leading zeros (another volume), lower-case ops, fractional and negative stamps, stamps
    beyond 2^53 (rounded as the float parse rounds), blank lines, zero-length requests."""
    lines = [
        "7,W,4096,8192,100",
        "007,W,0,4096,101",
        "7,r,4096,4096,99.5",
        "8,W,512,100,-5",
        "",
        "8,W,8192,0,7",
        "9,W,0,0,8",  # volume 9: only a zero-length request
        "7,W,40960,4096,9007199254740993",
    ]
    for variant, text in (
        ("lf", "\n".join(lines) + "\n"),
        ("crlf", "\ufeff" + "\r\n".join(lines) + "\r\n"),
        ("no_final_newline", "\n".join(lines)),
        ("lone_cr", "\r".join(lines) + "\r"),  # a lone CR ends a line for the text reader
    ):
        src = tmp_path / f"{variant}.csv"
        src.write_text(text)
        for block in (16, 1 << 20):
            manifest = _split(src, "alibaba", tmp_path / f"{variant}{block}", block_bytes=block)
            rows = _assert_same_as_single_ingest(src, "alibaba", manifest)
            assert [r.volume for r in rows] == ["7", "007", "8"]
            meta = F.fleet_metadata(manifest)
            assert meta["zero_length_requests"] == 2
            assert meta["volumes_without_requests"] == ["9"]
            assert meta["backward_timestamps"] == 2  # 99.5 after 101, -5 after 99.5


def _alibaba_block(n_volumes, per_volume, seed=5):
    rng = np.random.default_rng(seed)
    n = n_volumes * per_volume
    vol = rng.permutation(np.repeat(np.arange(n_volumes), per_volume))
    return "".join(
        f"{v},{'RW'[w]},{o * BLOCK_SIZE},{BLOCK_SIZE * s},{1_600_000_000_000_000 + i}\n"
        for i, (v, w, o, s) in enumerate(
            zip(vol, rng.integers(0, 2, n), rng.integers(0, 1000, n), rng.integers(1, 4, n), strict=True)
        )
    )


def test_manifest_columns_equal_a_plain_python_recomputation(tmp_path):
    src = tmp_path / "a.csv"
    src.write_text(_alibaba_block(7, 300))
    rows = {r.volume: r for r in F.read_fleet(_split(src, "alibaba", tmp_path / "f", block_bytes=4096))}
    per = defaultdict(lambda: {"req": 0, "reads": 0, "writes": 0, "wb": 0, "rb": 0, "ws": set(), "ts": []})
    for line in src.read_text().splitlines():
        vol, op, off, length, ts = line.split(",")
        off, length, ts = int(off), int(length), int(ts)
        blocks = range(off // BLOCK_SIZE, (off + length - 1) // BLOCK_SIZE + 1)
        v = per[vol]
        v["req"] += 1
        v["ts"].append(ts)
        if op == "W":
            v["writes"] += 1
            v["wb"] += len(blocks)
            v["ws"].update(blocks)
        else:
            v["reads"] += 1
            v["rb"] += len(blocks)
    assert list(rows) == list(per)  # in order of first appearance
    for vol, v in per.items():
        r = rows[vol]
        assert r.requests == v["req"]
        assert r.read_requests == v["reads"] and r.write_requests == v["writes"] and r.trim_requests == 0
        assert r.write_blocks == v["wb"] and r.read_blocks == v["rb"]
        assert r.working_set_blocks == len(v["ws"])
        assert r.traffic_over_wss == v["wb"] / len(v["ws"])
        assert r.span_s == (max(v["ts"]) - min(v["ts"])) / 1e6
        assert r.read_ratio == v["reads"] / v["req"]
        assert r.checksum == F.file_checksum(r.dtr)
        assert r.path == f"volumes/{vol}.dtr"


def test_many_volumes_small_buffers_and_few_file_descriptors(tmp_path):
    """300 volumes, 4 KiB blocks of text, 8 KiB of buffers: the buffers go to the per-volume
    files again and again, and the split runs under a limit of 64 open files (it never holds one per volume)."""
    src = tmp_path / "many.csv"
    src.write_text(_alibaba_block(300, 8))
    script = (
        "import resource, sys, warnings\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "from dogi_ml.traces.fleet import split_trace\n"
        "split_trace(sys.argv[1], 'alibaba', sys.argv[2], block_bytes=4096, spill_bytes=8192, progress=False)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(src), str(tmp_path / "small")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    small = F.read_fleet(tmp_path / "small", verify=True)
    assert len(small) == 300
    assert F.fleet_metadata(tmp_path / "small")["spill"]["flushes"] >= 5
    big = {r.volume: r for r in F.read_fleet(_split(src, "alibaba", tmp_path / "big"))}
    for r in small:
        assert r.checksum == big[r.volume].checksum  # the same bytes, buffered or spilled
    assert resource.getrlimit(resource.RLIMIT_NOFILE)  # (the limit applied to the child only)


def test_zst_and_gz_inputs_split_as_the_text(synthetic, tmp_path):
    import gzip

    import zstandard

    src = synthetic / "fleet.alibaba.csv"
    plain = {r.volume: _arrays(r.dtr) for r in F.read_fleet(_split(src, "alibaba", tmp_path / "plain"))}
    zst = tmp_path / "a.csv.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(src.read_bytes()))
    gz = tmp_path / "a.csv.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    for path in (zst, gz):
        got = {r.volume: _arrays(r.dtr) for r in F.read_fleet(_split(path, "alibaba", tmp_path / path.suffix[1:]))}
        assert sorted(got) == sorted(plain)
        for volume, arrays in got.items():
            for k in ARRAYS:  # (the checksums differ: a .dtr's header names its source file)
                assert np.array_equal(arrays[k], plain[volume][k]), (path.name, volume, k)
    cut = tmp_path / "cut.csv.zst"
    cut.write_bytes(zst.read_bytes()[: zst.stat().st_size // 2])
    with pytest.raises(TraceFormatError, match=r"cut\.csv\.zst: byte \d+: the \.zst file ends inside a frame"):
        _split(cut, "alibaba", tmp_path / "cut", block_bytes=1 << 16)


def test_zst_of_several_frames_splits_as_the_text_and_a_cut_frame_is_refused(tmp_path):
    """A .zst of three frames (one with a checksum) and a skippable frame between them splits as
    its text; cut inside its last frame, it is refused (the splitter's zstd reader ends quietly
    there and walks the frames' block headers to tell); cut where a frame ends, it is the text of
    the frames before."""
    import struct

    import zstandard

    text = _alibaba_block(5, 400).encode()
    thirds = [text[: len(text) // 3], text[len(text) // 3 : 2 * len(text) // 3], text[2 * len(text) // 3 :]]
    thirds = [thirds[0][: thirds[0].rfind(b"\n") + 1], thirds[0][thirds[0].rfind(b"\n") + 1 :] + thirds[1], thirds[2]]
    frames = [
        zstandard.ZstdCompressor().compress(thirds[0]),
        struct.pack("<II", 0x184D2A50, 7) + b"skipped",
        zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(thirds[1]),
        zstandard.ZstdCompressor(level=1).compress(thirds[2]),
    ]
    plain = tmp_path / "a.csv"
    plain.write_bytes(text)
    zst = tmp_path / "a.csv.zst"
    zst.write_bytes(b"".join(frames))
    want = {r.volume: _arrays(r.dtr) for r in F.read_fleet(_split(plain, "alibaba", tmp_path / "plain"))}
    got = {r.volume: _arrays(r.dtr) for r in F.read_fleet(_split(zst, "alibaba", tmp_path / "zst", block_bytes=4096))}
    assert list(got) == list(want)
    for volume, arrays in got.items():
        for k in ARRAYS:
            assert np.array_equal(arrays[k], want[volume][k]), (volume, k)
    cut = tmp_path / "cut.csv.zst"
    cut.write_bytes(b"".join(frames)[: -len(frames[-1]) // 2])
    with pytest.raises(
        TraceFormatError, match=rf"cut\.csv\.zst: byte {cut.stat().st_size}: the \.zst file ends inside"
    ):
        _split(cut, "alibaba", tmp_path / "cut", block_bytes=4096)
    whole = tmp_path / "two.csv.zst"
    whole.write_bytes(b"".join(frames[:3]))
    prefix = tmp_path / "two.csv"
    prefix.write_bytes(thirds[0] + thirds[1])
    manifest = _split(whole, "alibaba", tmp_path / "two", block_bytes=4096)
    _assert_same_as_single_ingest(prefix, "alibaba", manifest)


def test_a_line_longer_than_the_read_slack_and_blocks_of_more_lines_than_the_first(tmp_path):
    """A 100 KB line (an offset zero-padded to 100,000 digits: the integer parser hands its block
    on) among short ones, cut in 4 KiB blocks, and a file whose first 64 KiB holds long lines and
    the rest four times as many short ones (the integer parser's output arrays grow): both equal
    the readers' single-volume reads."""
    lines = [f"{i % 3},W,{4096 * i},4096,{1000 + i}" for i in range(200)]
    lines[50] = f"1,W,{'0' * 100_000}8192,4096,1050"
    src = tmp_path / "long.csv"
    src.write_text("\n".join(lines) + "\n")
    _assert_same_as_single_ingest(src, "alibaba", _split(src, "alibaba", tmp_path / "long", block_bytes=4096))

    padded = [f"{i % 7},W,{4096 * i:018d},000000000000004096,{10**15 + i}" for i in range(2000)]
    short = [f"{(i * 5) % 11},R,{4096 * (i % 50)},4096,{10**15 + 2000 + i}" for i in range(20000)]
    src = tmp_path / "growing.csv"
    src.write_text("\n".join(padded + short) + "\n")
    _assert_same_as_single_ingest(src, "alibaba", _split(src, "alibaba", tmp_path / "grow", block_bytes=1 << 16))


def test_directory_of_per_volume_files(tmp_path):
    src = tmp_path / "dir"
    src.mkdir()
    (src / "alpha.csv").write_text(_alibaba_block(1, 50, seed=1))
    (src / "beta.csv").write_text(_alibaba_block(1, 40, seed=2))
    (src / "gamma.csv").write_text(_alibaba_block(2, 30, seed=3))  # two volumes inside: gamma.0, gamma.1
    rows = F.read_fleet(_split(src, "alibaba", tmp_path / "f"))
    gamma_first = (src / "gamma.csv").read_text().split(",", 1)[0]  # volumes in order of first appearance
    gamma = [f"gamma.{gamma_first}", f"gamma.{1 - int(gamma_first)}"]
    assert [r.volume for r in rows] == ["alpha", "beta", *gamma]
    for r in rows:
        file, _, inner = r.volume.partition(".")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            ref = read_trace(src / f"{file}.csv", "alibaba", volumes=[inner] if inner else None, progress=False)
        for k in ARRAYS:
            assert np.array_equal(_arrays(r.dtr)[k], getattr(ref, k)), (r.volume, k)
    (src / "alpha.csv.gz").write_text("x")
    with pytest.raises(F.DogiMLError, match="alpha.csv and alpha.csv.gz would both be volume 'alpha'"):
        _split(src, "alibaba", tmp_path / "g")


# -- malformed input and errors -------------------------------------------------------------------
def test_malformed_line_named_or_skipped_and_counted(tmp_path):
    good = _alibaba_block(3, 400).splitlines(keepends=True)
    bad_line = 700  # deep in the file: past many 4 KiB blocks
    lines = good[: bad_line - 1] + ["5,W,12x,4096,1\n"] + good[bad_line - 1 :]
    src = tmp_path / "bad.csv"
    src.write_text("".join(lines))
    with pytest.raises(TraceFormatError) as info:
        _split(src, "alibaba", tmp_path / "stop", block_bytes=4096)
    assert str(info.value).startswith(f"{src}:{bad_line}: offset '12x' is not an integer -- fix or remove the line")
    assert "skip_malformed=true" in str(info.value)
    with pytest.warns(
        TraceWarning, match=rf"skipped 1 malformed line\(s\) \(skip_malformed=true\), the first: line {bad_line}"
    ):
        manifest = F.split_trace(
            src, "alibaba", tmp_path / "skip", block_bytes=4096, skip_malformed=True, progress=False
        )
    meta = F.fleet_metadata(manifest)
    assert meta["skipped_lines"] == 1
    assert meta["first_skipped"] == [f"{src}: line {bad_line}: offset '12x' is not an integer"]
    _assert_same_as_single_ingest(src, "alibaba", manifest, skip_malformed=True)


def test_errors_name_the_problem_and_the_fix(synthetic, tmp_path):
    src = synthetic / "fleet.alibaba.csv"
    with pytest.raises(
        F.DogiMLError, match=r"volume\(s\) \['nope'\] not in the trace .* present: 2, 4, 5, 3, 1, 0 -- choose"
    ):
        _split(src, "alibaba", tmp_path / "a", volumes=["2", "nope"])
    chosen = F.read_fleet(_split(src, "alibaba", tmp_path / "b", volumes=["4", "1"]))
    assert [r.volume for r in chosen] == ["4", "1"]
    with pytest.raises(F.DogiMLError, match="already holds a fleet"):
        _split(src, "alibaba", tmp_path / "b")
    with pytest.raises(ValueError, match="unknown trace format 'alibab'"):
        _split(src, "alibab", tmp_path / "c")
    with pytest.raises(F.DogiMLError, match=r"spill_bytes=0 is not a whole number >= 1"):
        _split(src, "alibaba", tmp_path / "d", spill_bytes=0)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFormatError, match="the directory holds no trace file"):
        _split(empty, "alibaba", tmp_path / "e")
    header = tmp_path / "header.csv"
    header.write_text("device_id,opcode,offset,length,timestamp\n" + src.read_text()[:2000].rsplit("\n", 1)[0] + "\n")
    with pytest.raises(TraceFormatError, match=r"header\.csv:1: offset 'offset' is not an integer .*a header line\?"):
        _split(header, "alibaba", tmp_path / "h")


def test_manifest_reader_refuses_damage(synthetic, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    fleet = tmp_path / "fleet"
    shutil.copytree(synthetic, fleet)
    table = pq.read_table(fleet / F.MANIFEST_NAME)
    pq.write_table(table.drop_columns(["working_set_blocks"]), tmp_path / "m1.parquet")
    with pytest.raises(F.FleetFormatError, match="the manifest has no column 'working_set_blocks'"):
        F.read_fleet(tmp_path / "m1.parquet")
    rows = table.to_pylist()
    for column, value, message in (
        ("requests", 1.5, r"column 'requests' holds 1\.5 \(float\), not int64"),
        ("requests", True, r"column 'requests' holds True \(bool\), not int64"),
        ("span_s", None, r"column 'span_s' holds None \(NoneType\), not float64"),
        ("volume", 7, "column 'volume' holds a value that is not a string"),
    ):  # the manifest's writer takes no value its column's type would change or drop
        with pytest.raises(ValueError, match=message):
            F.write_fleet(tmp_path / "bad", [{**rows[0], column: value}, *rows[1:]])
    assert F.read_fleet_table(F.write_fleet(tmp_path / "same", rows)).equals(table)
    rows[0]["path"] = "../outside.dtr"
    F.write_fleet(tmp_path / "m2", rows)
    with pytest.raises(F.FleetFormatError, match="outside the fleet directory"):
        F.read_fleet(tmp_path / "m2")
    dtr = fleet / "volumes" / "1.dtr"
    data = bytearray(dtr.read_bytes())
    data[-1] ^= 1
    dtr.write_bytes(bytes(data))
    F.read_fleet(fleet)  # without verify: not read
    with pytest.raises(F.FleetFormatError, match=r"1\.dtr: checksum crc32c:[0-9a-f]{8}, the manifest says"):
        F.read_fleet(fleet, verify=True)


def test_volume_file_names_never_collide():
    assert F.volume_file_name("7") == "7.dtr"
    assert F.volume_file_name("src1_2") == "src1_2.dtr"
    odd = [F.volume_file_name(v) for v in ("a/b", "a_b", "a b", "..", ".hidden")]
    assert len(set(odd)) == len(odd) and all("/" not in n and not n.startswith(".") for n in odd)


# -- the command line -----------------------------------------------------------------------------
def test_command_line_fleet_and_split(tmp_path, capsys):
    from dogi_ml.cli import main

    main(["fleet", f"out={tmp_path / 'syn'}", "n_volumes=3", "seed=3", "csv=true"])
    out = capsys.readouterr().out
    assert (
        "synthetic fleet (3 volumes, seed 3)" in out and f"fleet manifest: {tmp_path / 'syn' / 'fleet.parquet'}" in out
    )
    main(
        [
            "ingest",
            f"path={tmp_path / 'syn' / 'fleet.alibaba.csv'}",
            "format=alibaba",
            "split=true",
            f"out={tmp_path / 's'}",
        ]
    )
    out = capsys.readouterr().out
    assert f"fleet manifest: {tmp_path / 's' / 'fleet.parquet'}" in out
    assert f"{sum(GOLDEN_REQUESTS[:3]):,}" in out  # the fleet's requests, as the generator made them
    with pytest.raises(SystemExit) as info:
        main(
            [
                "ingest",
                f"path={tmp_path / 'syn'}",
                "format=alibaba",
                "split=true",
                f"out={tmp_path / 'x'}",
                "spill_mb=0",
            ]
        )
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == "error: spill_mb=0 must be positive -- give e.g. spill_mb=256"
