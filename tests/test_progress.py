"""Progress bars: one rule decides (dogi_ml.progress), ``--quiet`` silences them, results never change."""

import gzip
import io
import re
import sys

import numpy as np
import pytest
from helpers import run_cli

from dogi_ml import progress
from dogi_ml.traces.readers import read_trace

SIM = ["simulate", "+workload=zipf", "policy=sepbit", "workload.capacity_blocks=8192", "workload.write_volume=4"]
SIM += ["sim.segment_blocks=64", "plot=false", "mlflow=false"]
TRAIN = ["train", "+workload=zipf", "workload.capacity_blocks=16384", "workload.write_volume=6"]
TRAIN += ["latency_budget_s=0.02", "model.params.epochs=2"]


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    monkeypatch.delenv(progress.FORCE_ENV, raising=False)
    return monkeypatch


def test_enabled_rules(clean_env):
    clean_env.setattr(sys, "stderr", _Tty())
    assert progress.enabled() and progress.enabled(True) and progress.enabled(None)
    assert not progress.enabled(False)  # the config's progress=false
    clean_env.setenv(progress.QUIET_ENV, "1")
    assert not progress.enabled() and not progress.enabled(True)  # quiet beats everything
    clean_env.setenv(progress.FORCE_ENV, "1")
    assert not progress.enabled(True)
    clean_env.delenv(progress.QUIET_ENV)
    clean_env.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert progress.enabled()  # ... but forced
    clean_env.delenv(progress.FORCE_ENV)
    assert not progress.enabled() and not progress.enabled(True)
    clean_env.setenv(progress.QUIET_ENV, "0")
    clean_env.setattr(sys, "stderr", _Tty())
    assert progress.enabled()


def test_set_quiet_is_inherited_through_the_environment(clean_env):
    progress.set_quiet()
    try:
        import os

        assert os.environ[progress.QUIET_ENV] == "1" and not progress.enabled(True)
    finally:
        progress.set_quiet(False)
    assert progress.QUIET_ENV not in __import__("os").environ


def test_a_quiet_command_run_in_process_exports_the_variable():
    """``python -m dogi_ml -q`` run in-process (cli.main) leaves DOGI_ML_QUIET=1 behind for its jobs;
    the next test must not see it (tests/conftest.py restores the environment after each test)."""
    progress.set_quiet()  # what cli.main does for -q, not undone here
    assert __import__("os").environ[progress.QUIET_ENV] == "1"


def test_the_next_test_does_not_inherit_it():
    assert progress.QUIET_ENV not in __import__("os").environ


def test_forced_bar_prints_rate_and_eta(clean_env):
    clean_env.setenv(progress.FORCE_ENV, "1")
    err = io.StringIO()
    clean_env.setattr(sys, "stderr", err)
    with progress.bar(100, "work", "blk", mininterval=0) as bar:
        for _ in range(100):
            bar.update(1)
    text = err.getvalue()
    assert "work" in text and "blk/s" in text and "<" in text  # "[elapsed<remaining, rate]"
    err2 = io.StringIO()
    clean_env.setattr(sys, "stderr", err2)
    clean_env.delenv(progress.FORCE_ENV)
    with progress.bar(100, "work", "blk") as bar:  # not a terminal: silent, same API
        bar.update(100)
    assert err2.getvalue() == ""


def _alibaba_file(tmp_path, n=50_000):
    """An Alibaba-format trace (volume,op,offset,size,ts), gzip-compressed."""
    rng = np.random.default_rng(3)
    offs, sizes, ops = rng.integers(0, 5000, n), rng.integers(1, 4, n), rng.choice(["R", "W"], n)
    text = "".join(
        f"{i % 3},{o},{int(f) * 4096},{int(k) * 4096},{i}\n" for i, (o, f, k) in enumerate(zip(ops, offs, sizes))
    )
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    return path


def test_ingest_is_bit_identical_with_and_without_the_bar(tmp_path, clean_env):
    path = _alibaba_file(tmp_path)
    err = io.StringIO()
    clean_env.setattr(sys, "stderr", err)
    clean_env.setenv(progress.FORCE_ENV, "1")
    clean_env.setattr(progress, "MIN_INTERVAL_S", 0.0)  # a fast machine ingests it within one redraw interval
    with_bar = read_trace(path, "alibaba", chunk_lines=4096)
    assert "ingest t.csv.gz" in err.getvalue() and "B/s" in err.getvalue()
    assert re.search(r" [1-9]\d*%\|", err.getvalue())  # it advanced over the compressed bytes
    without = read_trace(path, "alibaba", chunk_lines=4096, progress=False)
    for key in ("ts_us", "lba", "nblocks", "op", "volume"):
        a, b = getattr(with_bar, key), getattr(without, key)
        assert a.dtype == b.dtype and np.array_equal(a, b), key
    assert with_bar.lba.size == 50_000 and with_bar.meta == without.meta


def test_generate_and_annotate_do_not_depend_on_progress(clean_env):
    """No bar in generation or annotation (each well under a second at paper sizes' chunks);
    whatever the progress setting, the values are the same."""
    from dogi_ml import api

    clean_env.setenv(progress.FORCE_ENV, "1")
    t1 = api.generate("zipf", cache=False, capacity_blocks=8192, write_volume=2)
    a1 = api.annotate(t1)
    clean_env.setenv(progress.QUIET_ENV, "1")
    t2 = api.generate("zipf", cache=False, capacity_blocks=8192, write_volume=2)
    a2 = api.annotate(t2)
    assert t1.lba.size == 2 * 8192 and np.array_equal(t1.lba, t2.lba)
    assert a1.equals(a2)


@pytest.mark.parametrize("args, bar_text", [(SIM, "blk/s"), (TRAIN, "epoch")])
def test_quiet_removes_bars_but_keeps_the_summary(tmp_path, clean_env, args, bar_text):
    clean_env.setenv(progress.FORCE_ENV, "1")
    (tmp_path / "loud").mkdir()
    (tmp_path / "quiet").mkdir()
    loud = run_cli(args, tmp_path / "loud")
    assert bar_text in loud.stderr, loud.stderr[-2000:]
    quiet = run_cli(["--quiet", *args], tmp_path / "quiet")
    assert bar_text not in quiet.stderr and "it/s" not in quiet.stderr, quiet.stderr[-2000:]
    assert "%|" not in quiet.stderr
    for line in loud.stdout.splitlines():  # the summary and JSON paths survive, minus log lines
        if line.startswith(("result:", "metrics:")):
            key = line.split(":")[0]
            assert any(q.startswith(key + ":") for q in quiet.stdout.splitlines()), quiet.stdout
    assert ("WAF" in quiet.stdout) if args is SIM else ("accuracy" in quiet.stdout)


def test_sweep_prints_one_line_per_job_unless_quiet(tmp_path, clean_env):
    sweep = ["simulate", "-m", *SIM[1:3], "policy=nosep,sepbit", *SIM[3:]]
    sweep.remove("policy=sepbit")
    (tmp_path / "loud").mkdir()
    (tmp_path / "quiet").mkdir()
    loud = run_cli(sweep, tmp_path / "loud")
    lines = [line for line in loud.stderr.splitlines() if line.startswith("job ")]
    assert [line.split(":")[0] for line in lines] == ["job 1/2 done", "job 2/2 done"], loud.stderr[-2000:]
    assert "policy=nosep" in lines[0] and "policy=sepbit" in lines[1]
    quiet = run_cli(["-q", *sweep], tmp_path / "quiet")
    assert "job 1/2" not in quiet.stderr and "Launching" not in quiet.stdout
    assert "comparison:" in quiet.stdout  # the table's JSON path stays


def test_zipf_draws_are_bit_identical_with_the_bar(clean_env, monkeypatch):
    """Large Zipf draws (several chunks) show a bar; the samples do not depend on it."""
    from dogi_ml.traces.generators import ZipfSampler

    quiet = ZipfSampler(5000, 0.99, seed=7).sample(50_000)
    monkeypatch.setattr(ZipfSampler, "CHUNK", 4096)  # many chunks: the bar path
    clean_env.setenv(progress.FORCE_ENV, "1")
    err = io.StringIO()
    clean_env.setattr(sys, "stderr", err)
    loud = ZipfSampler(5000, 0.99, seed=7).sample(50_000)
    assert "zipf draws" in err.getvalue()
    assert loud.dtype == quiet.dtype and np.array_equal(loud, quiet)
