"""The binary trace format: round trip, header, errors, content-hash caching."""

import json

import numpy as np
import pytest

from dogi_ml.traces.binfmt import MAGIC, ingest, read_binary, read_header, write_trace
from dogi_ml.traces.generators import generate


def test_round_trip_and_header(tmp_path):
    t = generate("ycsb_a", capacity_blocks=4096, n_writes=20_000, seed=1)
    path = write_trace(t, tmp_path / "t.dtr")
    assert path.read_bytes()[:8] == MAGIC
    back = read_binary(path)
    for name in ("ts_us", "lba", "nblocks", "op", "volume"):
        np.testing.assert_array_equal(getattr(back, name), getattr(t, name))
    assert isinstance(back.lba, np.memmap)
    h = read_header(path)
    s = t.stats()
    assert (h["requests"], h["write_requests"], h["write_blocks"], h["wss_blocks"], h["max_lba"]) == (
        s["requests"],
        s["write_requests"],
        s["write_blocks"],
        s["wss_blocks"],
        t.max_lba,
    )
    assert back.meta["capacity_blocks"] == 4096
    np.testing.assert_array_equal(back.block_writes, t.block_writes)


def test_bad_files_are_explained(tmp_path):
    (tmp_path / "x.dtr").write_bytes(b"hello world, not a trace at all")
    with pytest.raises(ValueError, match="not a dogi_ml binary trace"):
        read_header(tmp_path / "x.dtr")
    t = generate("uniform", capacity_blocks=1024, n_writes=5000)
    path = write_trace(t, tmp_path / "t.dtr")
    data = path.read_bytes()
    (tmp_path / "cut.dtr").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated file"):
        read_binary(tmp_path / "cut.dtr")
    with pytest.raises(FileNotFoundError):
        read_header(tmp_path / "none.dtr")


def test_ingest_writes_stats_and_caches_by_content(tmp_path):
    src = tmp_path / "vol.csv"
    src.write_text("1,W,0,8192,0\n1,R,0,4096,1\n1,W,4096,4096,2\n")
    out = tmp_path / "out"
    binary, stats = ingest(src, "alibaba", out)
    assert binary == out / "vol.dtr" and not stats["cached"]
    on_disk = json.loads((out / "vol.stats.json").read_text())
    assert (on_disk["requests"], on_disk["write_requests"], on_disk["write_blocks"], on_disk["wss_blocks"]) == (
        3,
        2,
        3,
        2,
    )
    assert {"traffic_over_wss", "time_span_s", "content_hash"} <= set(on_disk)
    _, again = ingest(src, "alibaba", out)
    assert again["cached"]
    src.write_text("1,W,0,8192,0\n")
    _, changed = ingest(src, "alibaba", out)
    assert not changed["cached"] and changed["requests"] == 1


def _write_same_trace(path: str) -> None:
    t = generate("ycsb_a", capacity_blocks=4096, n_writes=50_000, seed=3)
    for _ in range(40):
        write_trace(t, path)


def test_parallel_writers_of_one_trace_never_collide(tmp_path):
    # a Hydra joblib sweep once had two jobs share one temp file: the second rename found it gone
    import multiprocessing as mp

    path = tmp_path / "same.dtr"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_same_trace, args=(str(path),)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    t = generate("ycsb_a", capacity_blocks=4096, n_writes=50_000, seed=3)
    np.testing.assert_array_equal(read_binary(path).lba, t.lba)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["same.dtr"]  # no temp file left behind
