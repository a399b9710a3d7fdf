"""Edges of ``python -m dogi_ml ingest`` and the trace readers where something went unsaid:
outputs of two inputs with the same name, what a directory input leaves out, the pyarrow path's
verdict on a quoted number, an unknown ``format=``, and the exit status of a bad text trace.

Inputs are built in ``tmp_path``; the command runs in this process (``dogi_ml.cli.main``)."""

from __future__ import annotations

import random
import sys
import warnings

import pytest

from dogi_ml import cli
from dogi_ml.traces import readers
from dogi_ml.traces.readers import FORMATS, read_trace
from dogi_ml.traces.trace import TraceFormatError, TraceWarning

# a few lines of FlashNet's Tencent cut (format A of ../shared/data/README.md)
TENCENT = "0.000,120,1,4096,4923392,0.091,4096\n0.000,146,0,8192,4923392,0.093,8192\n1.000,136,0,4096,0,1.152,4096\n"


@pytest.fixture
def dogi(monkeypatch, tmp_path, capsys):
    """``dogi(*ARGV)``: ``python -m dogi_ml -q ARGV`` in this process, from ``tmp_path``; returns
    (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOGI_ML_CACHE", str(tmp_path / "cache"))

    def run(*argv) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["dogi_ml", *argv])
        status = 0
        try:
            cli.main(["-q", *argv])
        except SystemExit as exc:
            status = exc.code
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error: ")]


# -- an unknown format= -----------------------------------------------------------------------------
@pytest.mark.parametrize("split", [False, True])
def test_an_unknown_format_is_named_by_its_key_before_anything_is_written(dogi, tmp_path, split):
    """``format=bogus`` said "unknown trace format 'bogus'; known: ..." without the key or a fix,
    and with ``split=true`` left ``out/volumes/`` behind."""
    (tmp_path / "x.csv").write_text(TENCENT)
    argv = ["ingest", "path=x.csv", "format=bogus", "out=o", *(["split=true"] if split else [])]
    status, _, err = dogi(*argv)
    assert status == 2
    assert error_lines(err) == [
        f"error: format=bogus: unknown trace format 'bogus'; known: {', '.join(sorted(FORMATS))} "
        "-- give format=NAME, one of those (the formats are described in dogi_ml/traces/readers.py)"
    ]
    assert not (tmp_path / "o").exists()
    status, _, err = dogi("ingest", "path=x.csv", "format=flashnet_tencnt", "out=o")
    assert status == 2
    assert error_lines(err)[0].endswith(
        "-- did you mean format=flashnet_tencent? (the formats are described in dogi_ml/traces/readers.py)"
    )


# -- the exit status of a bad trace file --------------------------------------------------------------
def test_a_malformed_text_trace_exits_3_as_a_damaged_dtr_does(dogi, tmp_path):
    """A damaged .dtr exited 3 (exit_codes.BAD_INPUT, "a bad input file") but a malformed text
    trace 2, the status of a bad command line; both are bad input files now. A path to nothing
    and a bad setting stay 2."""
    from dogi_ml.traces.binfmt import BAD_INPUT_EXIT, DtrFormatError
    from dogi_ml.traces.trace import TraceFormatError
    from dogi_ml.zns import exit_codes

    (tmp_path / "bad.csv").write_text(TENCENT + "not,a,line\n")
    status, _, err = dogi("ingest", "path=bad.csv", "format=flashnet_tencent", "out=o")
    assert status == exit_codes.BAD_INPUT
    assert error_lines(err) == [
        "error: bad.csv:4: expected 7 fields separated by ',', got 3 (a column extra or missing) -- fix or remove "
        "the line, check that format=flashnet_tencent is the file's format, or set skip_malformed=true to skip and "
        "count such lines"
    ]
    (tmp_path / "empty.csv").write_text("")
    status, _, err = dogi("ingest", "path=empty.csv", "format=flashnet_tencent", "out=o")
    assert status == exit_codes.BAD_INPUT and error_lines(err)[0].startswith("error: empty.csv: the file is empty")
    # the .dtr that a good file gives, damaged: the same status
    (tmp_path / "good.csv").write_text(TENCENT)
    assert dogi("ingest", "path=good.csv", "format=flashnet_tencent", "out=o")[0] == 0
    dtr = tmp_path / "o" / "good.dtr"
    data = bytearray(dtr.read_bytes())
    data[30] ^= 0xFF  # inside the header: its checksum fails
    dtr.write_bytes(bytes(data))
    status, _, err = dogi("stats", f"path={dtr}")
    assert status == exit_codes.BAD_INPUT and "the header fails its checksum" in err
    # the command line's own errors: 2
    status, _, err = dogi("ingest", "path=nope.csv", "format=flashnet_tencent", "out=o")
    assert status == exit_codes.USAGE and "trace file not found: nope.csv" in err
    status, _, _ = dogi("ingest", "path=good.csv", "format=flashnet_tencent", "out=o", "skip_malformed=maybe")
    assert status == exit_codes.USAGE
    assert TraceFormatError.exit_status == DtrFormatError.exit_status == BAD_INPUT_EXIT == exit_codes.BAD_INPUT


# -- the pyarrow path and the line parser agree, line for line --------------------------------------
def _lines(fmt: str, n: int, seed: int) -> list[str]:
    """``n`` lines of ``fmt``, a quarter of them with one field written oddly: quoted (the case
    that pyarrow read and the line parser refused), padded, signed, as a float, empty, ..."""
    rng = random.Random(seed)
    odd = ['"{}"', "'{}'", " {} ", "+{}", "{}.0", "{}e0", "", "nan", "zzz", "0x1{}", "{}_0", "-{}"]
    lines = []
    for i in range(n):
        size, offset = rng.choice([512, 4096, 8192, 12288]), rng.randrange(0, 1 << 24, 512)
        if fmt == "flashnet_tencent":  # ts_ms,latency_us,io_type,size,offset,ts_submit_ms,size_after
            fields = [f"{i * 0.5:.3f}", "120", rng.choice("01"), str(size), str(offset), "0.1", str(size)]
            numeric = [0, 2, 3, 4]
        else:  # alibaba: device_id,opcode,offset,length,timestamp (µs)
            fields = [rng.choice(["7", "8", "9"]), rng.choice("RWrw"), str(offset), str(size), str(1000 + 10 * i)]
            numeric = [2, 3, 4]
        if i in (3, n - 5):  # at least one quoted number and one quoted op in each file
            k = numeric[1] if i == 3 else (1 if fmt == "alibaba" else 2)
            fields[k] = f'"{fields[k]}"'
        elif rng.random() < 0.25:
            k = rng.choice([*numeric, 1 if fmt == "alibaba" else 2])  # a number, or the op
            fields[k] = rng.choice(odd).format(fields[k])
        if rng.random() < 0.03:
            fields.pop()  # a column missing
        lines.append(",".join(fields) + "\n")
    lines.insert(n // 2, "\n")  # a blank line: skipped, not counted
    return lines


def _read(path, fmt, skip, chunk_lines=1_000_000) -> tuple:
    """What a read gives: its arrays, volumes and counts, or its error's message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        try:
            t = read_trace(path, fmt, skip_malformed=skip, progress=False, chunk_lines=chunk_lines)
        except TraceFormatError as exc:
            return ("error", str(exc))
    counts = {k: t.meta.get(k) for k in ("skipped_lines", "first_skipped", "first_skipped_line", "backward_timestamps")}
    return (*(getattr(t, k).tolist() for k in ARRAYS), t.volumes, counts)


ARRAYS = ("ts_us", "lba", "nblocks", "op", "volume")


@pytest.mark.parametrize("fmt", ["flashnet_tencent", "alibaba"])
@pytest.mark.parametrize("skip", [True, False])
def test_fast_and_line_paths_agree_line_for_line(monkeypatch, tmp_path, fmt, skip):
    """The same file read by the line parser alone, and by the pyarrow path with chunks of 1 to
    all lines and pyarrow blocks of 64 bytes and 64 MiB, gives the same requests, volumes and
    skip counts (or, without skip_malformed, the same first error). Before, a quoted number was
    read as a number by pyarrow when its chunk was otherwise clean and refused by the line
    parser when another line of the chunk was bad."""
    for seed in range(4):
        path = tmp_path / f"{fmt}-{seed}.csv"
        path.write_text("".join(_lines(fmt, 120, seed)))
        with monkeypatch.context() as m:  # the line parser only
            m.setattr(readers, "_delimited_arrow", lambda *a: None)
            reference = _read(path, fmt, skip, chunk_lines=7)
        assert reference[0] == "error" or reference[-1]["skipped_lines"] >= 2  # the quoted lines at least
        for block in (64, 1 << 26):
            for chunk_lines in (1, 5, 64, 1_000_000):
                with monkeypatch.context() as m:
                    m.setattr(readers, "ARROW_BLOCK_BYTES", block, raising=False)
                    assert _read(path, fmt, skip, chunk_lines) == reference, (seed, block, chunk_lines)


@pytest.mark.parametrize("skip", [True, False])
def test_the_fleet_splitter_agrees_with_the_readers_on_odd_fields(tmp_path, skip):
    """``ingest split=true``'s byte-block path reads the same file as ``ingest`` does, with big
    and tiny blocks: the same requests and skip counts, or the same first error. Before, a
    quoted number in an otherwise clean file was a request to ``ingest`` and a skipped line to
    the splitter."""
    from dogi_ml.traces.binfmt import read_binary
    from dogi_ml.traces.fleet import fleet_metadata, read_fleet, split_trace

    quoted = TENCENT + '2.000,120,0,"4096",8192,2.1,4096\n' + TENCENT  # else clean: pyarrow read it whole
    for seed in range(-1, 4):
        path = tmp_path / f"t{seed}.csv"
        path.write_text(quoted if seed < 0 else "".join(_lines("flashnet_tencent", 120, seed)))
        reference = _read(path, "flashnet_tencent", skip)
        for block in (64, 1 << 20):
            out = tmp_path / f"split-{seed}-{block}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TraceWarning)
                try:
                    manifest = split_trace(
                        path, "flashnet_tencent", out, skip_malformed=skip, block_bytes=block, progress=False
                    )
                except TraceFormatError as exc:
                    assert reference == ("error", str(exc)), (seed, block)
                    continue
            assert reference[0] != "error", (seed, block)
            (row,) = read_fleet(manifest)
            t = read_binary(row.dtr)
            assert [getattr(t, k).tolist() for k in ARRAYS[:4]] == list(reference[:4]), (seed, block)
            meta = fleet_metadata(manifest)
            assert meta["skipped_lines"] == reference[-1]["skipped_lines"], (seed, block)


# -- what a directory input leaves out --------------------------------------------------------------
def test_a_directory_split_counts_and_reports_what_it_leaves_out(dogi, tmp_path):
    """``split=true`` on a directory skipped subdirectories, hidden files and FIFOs without a
    word; now one warning line counts and names them, and the manifest's metadata lists them.
    A file there that is no trace (a README) stops the split naming it, and the fix says that
    every regular, non-hidden file is read."""
    import os

    from dogi_ml.traces.fleet import fleet_metadata, read_fleet

    d = tmp_path / "traces"
    (d / "sub").mkdir(parents=True)
    (d / ".git").mkdir()
    for name in ("v1.csv", "v2.csv", "sub/v3.csv", ".v4.csv"):
        (d / name).write_text(TENCENT)
    os.mkfifo(d / "pipe")
    status, out, err = dogi("ingest", "path=traces", "format=flashnet_tencent", "split=true", "out=f")
    assert status == 0, err
    assert [ln for ln in out.splitlines() if ln.startswith("warning: ")] == [
        "warning: traces: skipped 2 subdirectories (.git, sub), 1 hidden file (.v4.csv) and 1 other entry (pipe); "
        "a directory input reads the regular, non-hidden files directly in it, one volume each"
    ]
    assert [r.volume for r in read_fleet(tmp_path / "f")] == ["v1", "v2"]
    meta = fleet_metadata(tmp_path / "f")
    assert meta["left_out_count"] == 4
    assert meta["left_out"] == {
        "subdirectories": [".git", "sub"],
        "hidden files": [".v4.csv"],
        "other entries": ["pipe"],
    }

    (d / "README.md").write_text("# the traces of our cluster\n")
    for extra in ([], ["skip_malformed=true"]):
        status, _, err = dogi("ingest", "path=traces", "format=flashnet_tencent", "split=true", "out=f2", *extra)
        (line,) = error_lines(err)
        assert status == 3 and line.startswith("error: traces/README.md")
        assert line.endswith(
            "; or, if README.md is no trace, move it out of traces: every regular, non-hidden file directly in it "
            "is read as one volume"
        )

    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    status, _, err = dogi("ingest", "path=empty", "format=flashnet_tencent", "split=true", "out=f3")
    assert status == 3 and error_lines(err) == [
        "error: empty: the directory holds no trace file (skipped 1 subdirectory (sub)) -- give a directory of "
        "per-volume traces (the regular, non-hidden files directly in it are read)"
    ]


def test_a_failed_split_leaves_out_as_it_found_it(dogi, tmp_path):
    """A split that failed on its second file left ``out/volumes/`` behind (empty: the volumes
    are written once every file is read), with no manifest. Now out= is as it was: removed
    when the split made it, and an out= that existed keeps only what it held."""
    d = tmp_path / "traces"
    d.mkdir()
    (d / "v1.csv").write_text(TENCENT)
    (d / "v2.csv").write_text(TENCENT + "not,a,line\n")
    status, _, err = dogi("ingest", "path=traces", "format=flashnet_tencent", "split=true", "out=fresh")
    assert status == 3 and error_lines(err)[0].startswith("error: traces/v2.csv")
    assert not (tmp_path / "fresh").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    status, _, _ = dogi("ingest", "path=traces", "format=flashnet_tencent", "split=true", "out=kept")
    assert status == 3 and sorted(p.name for p in kept.iterdir()) == ["notes.txt"]
    (d / "v2.csv").write_text(TENCENT)  # fixed: the split runs into the same out=
    status, _, _ = dogi("ingest", "path=traces", "format=flashnet_tencent", "split=true", "out=kept")
    assert status == 0 and sorted(p.name for p in (kept / "volumes").iterdir() if p.suffix == ".dtr") == [
        "v1.dtr",
        "v2.dtr",
    ]


# -- two inputs with the same name, one out= ----------------------------------------------------------
def test_an_output_of_another_input_with_the_same_name_is_not_overwritten(dogi, tmp_path):
    """``ingest path=a/x.csv out=o`` then ``path=b/x.csv out=o`` (or ``path=x.txt``) replaced
    o/x.dtr without a word: both outputs are named by the file's name before its first dot. Now
    the second is refused before anything is read or written, naming both inputs and the fix;
    the same input again is the cached output, and with other options is replaced with a note."""
    for name, lines in (("a/x.csv", TENCENT), ("b/x.csv", TENCENT * 2), ("x.txt", TENCENT * 3)):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(lines)
    ingest = ("ingest", "format=flashnet_tencent", "out=o")
    assert dogi(*ingest, "path=a/x.csv")[0] == 0
    written = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir()}
    assert set(written) == {"x.dtr", "x.stats.json"}
    for other in ("b/x.csv", "x.txt"):
        status, _, err = dogi(*ingest, f"path={other}")
        assert status == 2
        assert error_lines(err) == [
            f"error: o/x.dtr holds the trace of {tmp_path / 'a' / 'x.csv'}; path={other} would overwrite it (both "
            "are named 'x': an output takes its input's name before the first dot) -- give another out= directory "
            "for one of them, rename one of the inputs, or delete o/x.dtr and o/x.stats.json to replace it"
        ]
        assert {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir()} == written
    # the same input: by another spelling of its path, the cached output
    status, out, _ = dogi(*ingest, f"path={tmp_path / 'a' / '..' / 'a' / 'x.csv'}")
    assert status == 0 and "note:" not in out
    assert {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir()} == written
    # with other options: replaced, and said
    status, out, _ = dogi(*ingest, "path=a/x.csv", "skip_malformed=true")
    assert status == 0 and "note: replaced o/x.dtr, written before from a/x.csv with other content or options" in out
    assert dogi(*ingest[:-1], "out=o2", "path=b/x.csv")[0] == 0  # another out=: no conflict
