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


def run_main(monkeypatch, tmp_path, capsys, *argv) -> tuple[int, str, str]:
    """``python -m dogi_ml ARGV`` in this process, from ``tmp_path``: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOGI_ML_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", ["dogi_ml", *argv])
    status = 0
    try:
        cli.main(["-q", *argv])
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    return status, out.out, out.err


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error: ")]


# -- an unknown format= -----------------------------------------------------------------------------
@pytest.mark.parametrize("split", [False, True])
def test_an_unknown_format_is_named_by_its_key_before_anything_is_written(monkeypatch, tmp_path, capsys, split):
    """``format=bogus`` said "unknown trace format 'bogus'; known: ..." without the key or a fix,
    and with ``split=true`` left ``out/volumes/`` behind."""
    (tmp_path / "x.csv").write_text(TENCENT)
    argv = ["ingest", "path=x.csv", "format=bogus", "out=o", *(["split=true"] if split else [])]
    status, _, err = run_main(monkeypatch, tmp_path, capsys, *argv)
    assert status == 2
    assert error_lines(err) == [
        f"error: format=bogus: unknown trace format 'bogus'; known: {', '.join(sorted(FORMATS))} "
        "-- give format=NAME, one of those (the formats are described in dogi_ml/traces/readers.py)"
    ]
    assert not (tmp_path / "o").exists()
    status, _, err = run_main(monkeypatch, tmp_path, capsys, "ingest", "path=x.csv", "format=flashnet_tencnt", "out=o")
    assert status == 2 and error_lines(err)[0].endswith("-- did you mean format=flashnet_tencent? (the formats "
                                                       "are described in dogi_ml/traces/readers.py)")  # fmt: skip
