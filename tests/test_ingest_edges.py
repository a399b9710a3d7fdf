"""Edges of ``python -m dogi_ml ingest`` and the trace readers where something went unsaid:
outputs of two inputs with the same name, what a directory input leaves out, the pyarrow path's
verdict on a quoted number, an unknown ``format=``, and the exit status of a bad text trace.

Inputs are built in ``tmp_path``; the command runs in this process (``dogi_ml.cli.main``)."""

from __future__ import annotations

import sys

import pytest

from dogi_ml import cli
from dogi_ml.traces.readers import FORMATS

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
