"""Trace readers: real samples with known counts, every format on hand-written input, errors."""

import gzip
import tracemalloc

import numpy as np
import pytest
import zstandard

from dogi_ml.traces.readers import FORMATS, iter_request_chunks, read_trace
from dogi_ml.traces.trace import OP_READ, OP_TRIM, OP_WRITE, TraceFormatError

# (file, format, requests, write requests, written 4 KiB blocks, write WSS) from ../shared/data/README.md
KNOWN = [
    ("tencent_cut_490.csv", "flashnet_tencent", 50_000, 19_988, 59_717, 6_541),
    ("tencent_cut_211.csv", "flashnet_tencent", 50_000, 17_039, 50_460, 5_997),
    ("msr_cut_105.txt", "flashnet_msr", 10_000, 7_980, 14_264, 5_815),
    # raw sectors: the partition starts at sector 34, so 8-sector writes straddle two blocks
    ("blkparse_hadoop.txt", "blkparse", 15_524, 15_444, 30_888, 15_461),
    ("msn_fs_sectors.txt", "sectors_trace", 149_999, 19_516, 45_018, 43_513),
    ("mqsim_tpcc_small.trace", "mqsim", 6_999, 2_618, 7_995, 7_879),
]


@pytest.mark.parametrize("name,fmt,requests,writes,blocks,wss", KNOWN)
def test_real_samples_have_their_known_counts(shared_traces, name, fmt, requests, writes, blocks, wss):
    s = read_trace(shared_traces / name, fmt).stats()
    assert (s["requests"], s["write_requests"], s["write_blocks"], s["wss_blocks"]) == (requests, writes, blocks, wss)


def test_every_shared_file_is_covered(shared_traces):
    assert {p.name for p in shared_traces.iterdir()} <= {k[0] for k in KNOWN}


def reqs(trace):
    vol = [trace.volumes[v] for v in trace.volume]
    return list(zip(trace.op.tolist(), trace.lba.tolist(), trace.nblocks.tolist(), vol))


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_alibaba(tmp_path):
    p = write(tmp_path, "a.csv", "7,W,0,8192,1000\n7,R,4096,4096,2000\n9,w,409600,512,3000\n")
    t = read_trace(p, "alibaba")
    assert t.volumes == ["7", "9"]
    assert t.ts_us.tolist() == [1000, 2000, 3000]
    # dense remap is volume-major and order-preserving: vol 7 blocks 0,1 -> 0,1; vol 9 block 100 -> 2
    assert reqs(t) == [(OP_WRITE, 0, 2, "7"), (OP_READ, 1, 1, "7"), (OP_WRITE, 2, 1, "9")]


def test_tencent_sectors_and_seconds(tmp_path):
    p = write(tmp_path, "t.csv", "1538323200,16,8,1,1063\n1538323201,0,9,0,1063\n")
    t = read_trace(p, "tencent")
    assert t.ts_us.tolist() == [1538323200_000000, 1538323201_000000]
    # 8 sectors at sector 16 = block 2; 9 sectors at 0 touch blocks 0 and 1
    assert t.stats()["write_blocks"] == 1 and t.nblocks.tolist() == [1, 2]
    assert t.op.tolist() == [OP_WRITE, OP_READ]


def test_msr_filetime_and_host_disk_volume(tmp_path):
    p = write(tmp_path, "m.csv", "128166372003061629,hm,1,Write,4096,4096,10\n128166372003071629,src,0,Read,0,100,1\n")
    t = read_trace(p, "msr")
    assert t.volumes == ["hm_1", "src_0"]
    assert t.ts_us[1] - t.ts_us[0] == 1000  # 10,000 ticks of 100 ns
    assert t.op.tolist() == [OP_WRITE, OP_READ]


def test_spc(tmp_path):
    p = write(tmp_path, "s.csv", "0,8,4096,W,0.5\n1,0,8192,r,1.0\n")
    t = read_trace(p, "spc")
    assert t.volumes == ["0", "1"] and t.op.tolist() == [OP_WRITE, OP_READ]
    assert t.ts_us.tolist() == [500000, 1000000] and t.nblocks.tolist() == [1, 2]


def test_blkparse_events_flush_discard_and_summary(tmp_path):
    p = write(
        tmp_path,
        "b.txt",
        "\n".join(
            [
                "  8,16   0        1     0.000000000  100  A   W 42 + 8 <- (8,17) 8",
                "  8,16   0        2     0.000001000  100  Q   W 42 + 8 [proc]",
                "  8,16   0        3     0.000002000  100  G   W 42 + 8 [proc]",
                "  8,16   0        4     0.000003000  100  Q  RS 0 + 8 [proc]",
                "  8,16   0        5     0.000004000  100  Q   D 1024 + 16 [proc]",
                "  8,16   0        6     0.000005000  100  Q  FWS [kworker]",
                "  8,16   0        7     0.000006000  100  Q  WS 100 + 0 [proc]",
                "CPU0 (sdb):",
                " Reads Queued:           1,        4KiB  Writes Queued:           1,        4KiB",
                "Total (sdb):",
            ]
        )
        + "\n",
    )
    t = read_trace(p, "blkparse")
    assert t.op.tolist() == [OP_WRITE, OP_READ, OP_TRIM]
    assert t.nblocks.tolist() == [2, 1, 2]  # 8 sectors at 42 straddle two blocks
    assert t.meta["flush_requests"] == 1 and t.meta["zero_length_requests"] == 1


def test_fio_v2_and_v3(tmp_path):
    v2 = write(
        tmp_path,
        "v2.log",
        "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb write 0 8192\n"
        "/dev/sdb read 4096 4096\n/dev/sdb sync\n/dev/sdb trim 8192 4096\n/dev/sdb close\n",
    )
    t = read_trace(v2, "fio")
    assert t.op.tolist() == [OP_WRITE, OP_READ, OP_TRIM] and t.meta["flush_requests"] == 1
    v3 = write(
        tmp_path, "v3.log", "fio version 3 iolog\n0 /dev/sdb add\n5 /dev/sdb write 4096 4096\n7 /dev/sdb write 0 10\n"
    )
    t = read_trace(v3, "fio")
    assert t.ts_us.tolist() == [5000, 7000] and t.stats()["write_blocks"] == 2
    # wait is parsed with the data actions (fio's read_iolog2: its delay where the offset stands)
    waits = write(tmp_path, "w.log", "fio version 2 iolog\n/dev/sdb wait 1000 0\n/dev/sdb write 0 4096\n")
    assert read_trace(waits, "fio").op.tolist() == [OP_WRITE]
    bare = write(tmp_path, "bare.log", "fio version 2 iolog\n/dev/sdb wait\n/dev/sdb write 0 4096\n")
    with pytest.raises(TraceFormatError, match="bare.log:2: wait needs 'filename wait delay_us 0' \\(4 fields\\)"):
        read_trace(bare, "fio")
    bad = write(tmp_path, "bad.log", "0 /dev/sdb write 1 1\n")
    with pytest.raises(TraceFormatError, match="bad.log:1: missing 'fio version 2 iolog'"):
        read_trace(bad, "fio")


def test_mqsim(tmp_path):
    p = write(tmp_path, "q.trace", "1000 0 16 8 0\n2000 0 16 8 1\n")
    t = read_trace(p, "mqsim")
    assert t.op.tolist() == [OP_WRITE, OP_READ] and t.ts_us.tolist() == [1, 2]


def test_blocks_npy_and_text(tmp_path):
    np.save(tmp_path / "b.npy", np.array([5, 1, 5, 9]))
    write(tmp_path, "b.txt", "5\n1\n5\n9\n")
    a = read_trace(tmp_path / "b.npy", "blocks")
    b = read_trace(tmp_path / "b.txt", "blocks")
    assert a.block_writes.tolist() == b.block_writes.tolist() == [1, 0, 1, 2]


def test_delimited_mapping(tmp_path):
    p = write(tmp_path, "d.tsv", "# time;vol;kind;off;len\n1.5;x;PUT;0;8\n2.5;y;GET;8;8\n2.6;y;SYNC;0;0\n")
    spec = {
        "sep": ";",
        "comment": "#",
        "columns": {"ts": 0, "volume": 1, "op": 2, "offset": 3, "size": 4},
        "units": {"ts": "s", "offset": "sectors", "size": "sectors"},
        "op_map": {"PUT": "write", "GET": "read", "SYNC": "flush"},
    }
    t = read_trace(p, "delimited", delimited=spec)
    assert t.volumes == ["x", "y"] and t.op.tolist() == [OP_WRITE, OP_READ]
    assert t.nblocks.tolist() == [1, 1] and t.meta["flush_requests"] == 1
    with pytest.raises(ValueError, match="columns needs 'size'"):
        read_trace(p, "delimited", delimited={**spec, "columns": {"ts": 0, "op": 2, "offset": 3}})
    with pytest.raises(ValueError, match="needs a column/unit mapping"):
        read_trace(p, "delimited")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # a negative index was Python's from-the-end index: the offsets came from another column
        ({"columns": {"ts": 0, "op": 2, "offset": -1, "size": 4}}, "columns.offset must be a 0-based column index"),
        ({"columns": {"ts": 0, "op": 2, "offset": "abc", "size": 4}}, "columns.offset must be a 0-based column index"),
        ({"columns": {"ts": 0, "volume": [1, -2], "op": 2, "offset": 3, "size": 4}}, "columns.volume must be"),
        (
            {"columns": {"ts": 0, "op": 2, "offset": 3, "size": 4, "lenght": 4}},
            "columns has unknown field(s) ['lenght']",
        ),
        ({"columns": [0, 1, 2]}, "columns must be a mapping such as"),
        ({"units": "ms"}, "units must be a mapping such as"),
        ({"op_map": ["PUT", "GET"]}, "op_map must be a mapping such as"),
        # any non-empty string was true: "false" dropped the first data line
        ({"header": "false"}, "header must be true or false, got 'false'"),
        ({"op_case_insensitive": "yes"}, "op_case_insensitive must be true or false"),
    ],
)
def test_delimited_mapping_values_are_checked_by_name(tmp_path, change, message):
    p = write(tmp_path, "d.csv", "1.5;x;PUT;0;8\n")
    spec = {
        "sep": ";",
        "columns": {"ts": 0, "volume": 1, "op": 2, "offset": 3, "size": 4},
        "units": {"ts": "s", "offset": "sectors", "size": "sectors"},
        "op_map": {"PUT": "write", "GET": "read"},
    }
    with pytest.raises(ValueError) as info:
        read_trace(p, "delimited", delimited={**spec, **change})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unaligned_requests_cover_every_touched_block(tmp_path):
    p = write(tmp_path, "u.csv", "1,W,4095,2,0\n1,W,100,4096,1\n1,W,8192,4097,2\n")
    t = read_trace(p, "alibaba")
    assert t.nblocks.tolist() == [2, 2, 2]
    assert t.stats()["wss_blocks"] == 4  # blocks 0,1 and 2,3


def test_zero_length_requests_are_counted_not_written(tmp_path):
    p = write(tmp_path, "z.csv", "1,W,0,0,0\n1,W,0,4096,1\n1,R,0,0,2\n")
    t = read_trace(p, "alibaba")
    assert t.n_requests == 1 and t.meta["zero_length_requests"] == 2


def test_volume_filter_and_split(tmp_path):
    p = write(tmp_path, "v.csv", "1,W,0,4096,0\n2,W,409600,4096,1\n1,W,4096,4096,2\n3,R,0,4096,3\n")
    t = read_trace(p, "alibaba", volumes=["1"])
    assert t.volumes == ["1"] and t.n_requests == 2 and t.lba.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"volume\(s\) \['42'\] not in the trace; present: 1, 2, 3"):
        read_trace(p, "alibaba", volumes=["42"])
    parts = read_trace(p, "alibaba").split_volumes()
    assert sorted(parts) == ["1", "2", "3"] and parts["2"].lba.tolist() == [0]


def test_gzip_and_zstd_read_like_plain(tmp_path):
    text = "7,W,0,8192,1000\n7,R,4096,4096,2000\n9,W,409600,512,3000\n"
    plain = write(tmp_path, "p.csv", text)
    (tmp_path / "g.csv.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "z.csv.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    ref = reqs(read_trace(plain, "alibaba"))
    assert reqs(read_trace(tmp_path / "g.csv.gz", "alibaba")) == ref
    assert reqs(read_trace(tmp_path / "z.csv.zst", "alibaba")) == ref


@pytest.mark.parametrize("chunk_lines", [2, 1000])
def test_malformed_line_names_file_line_and_reason(tmp_path, chunk_lines):
    p = write(tmp_path, "bad.csv", "1,W,0,4096,0\n1,W,0,4096,1\n1,W,abc,4096,2\n1,X,0,4096,3\n1,W\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:3: offset 'abc' is not an integer"):
        read_trace(p, "alibaba", chunk_lines=chunk_lines)
    t = read_trace(p, "alibaba", skip_malformed=True, chunk_lines=chunk_lines)
    assert t.n_requests == 2 and t.meta["skipped_lines"] == 3
    assert "line 4: unknown operation 'X'" in t.meta["first_skipped"]


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown trace format 'nope'; known: .*alibaba"):
        read_trace(write(tmp_path, "x.csv", "1\n"), "nope")
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        read_trace(tmp_path / "missing.csv", "msr")
    assert {"alibaba", "tencent", "msr", "spc", "blkparse", "fio", "mqsim", "blocks", "delimited"} <= set(FORMATS)


@pytest.mark.slow
def test_large_file_streams_in_bounded_memory(tmp_path):
    n = 3_000_000
    rng = np.random.default_rng(0)
    off = rng.integers(0, 1 << 20, n) * 4096
    lines = np.char.add(np.char.add("1,W,", off.astype(str)), ",4096,0\n")
    p = tmp_path / "big.csv"
    with open(p, "w") as fh:
        for i in range(0, n, 500_000):
            fh.write("".join(lines[i : i + 500_000].tolist()))
    del lines
    text_bytes = p.stat().st_size
    tracemalloc.start()
    total = 0
    for chunk in iter_request_chunks(p, "alibaba", chunk_lines=50_000):
        total += int(chunk.nblocks.sum())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == n
    # a chunk of 50k lines costs a few MB; the file is ~60 MB
    assert peak < 40 * 2**20 < text_bytes, (peak, text_bytes)
