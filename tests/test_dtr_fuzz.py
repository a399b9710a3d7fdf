"""The C .dtr loader under libFuzzer (dogi_ml/zns/fuzz_dtr.c, clang's -fsanitize=fuzzer with
AddressSanitizer and UndefinedBehaviorSanitizer) for a fixed budget with zero findings, and the
replay harness built with ASan + UBSan replaying a small trace on the file backend cleanly.

The budget is ``DOGI_ML_FUZZ_SECONDS`` (default 60). clang and its sanitizer runtimes come from
Debian (``clang``, ``libclang-rt-dev``; ``.ci/run`` installs them): without them the fuzz test
skips with the reason, and fails under ``CI=true``."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
from dtr_cases import clang, corpus, pack, require, small_trace, split, valid_file

from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import harness as zh

FUZZ_SECONDS = int(os.environ.get("DOGI_ML_FUZZ_SECONDS", "60"))
#: libFuzzer's seed: fixed, so a CI finding replays (DOGI_ML_FUZZ_SEED=N explores elsewhere)
FUZZ_SEED = int(os.environ.get("DOGI_ML_FUZZ_SEED", "1"))
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]
#: any AddressSanitizer or UBSan report stops the program with a non-zero status; the fuzzer
#: checks for leaks too (the loader frees what it allocates), the harness does not (it keeps its
#: tables until exit by design)
FUZZ_ENV = {"ASAN_OPTIONS": "halt_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
SAN_ENV = {**FUZZ_ENV, "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1"}
#: libFuzzer dictionary: the header's keys and dtypes, the magic, versions, integer edges
DICTIONARY = [
    *(f'"\\"{key}\\""' for key in ("arrays", "content_hash", "max_lba", "meta", "name", "requests", "volumes",
                                   "write_blocks", "write_requests", "wss_blocks", "count", "crc32c", "dtype",
                                   "offset", "<i8", "<i4", "|u1", "u1")),
    '"DOGITRC\\x00"', '"\\x01\\x00\\x00\\x00"', '"\\x02\\x00\\x00\\x00"', '"-9223372036854775808"',
    '"9223372036854775807"', '"1e5"', '"null"', '"\\\\u00e9"',
]  # fmt: skip


def _seeds(directory) -> int:
    """Small valid traces (version 2 and 1, single- and multi-block, one and two volumes) and the
    damaged corpus of tests/dtr_cases.py, as the fuzzer's starting inputs."""
    directory.mkdir()
    files = {}
    valid = valid_file(directory)
    _, header, body = split(valid)
    files["valid_v2"] = valid
    files["valid_v1"] = pack(header, body, 1)
    for name, t in {
        "zipf_single_blocks": generate("zipf", capacity_blocks=64, n_writes=96, seed=1),
        "tiny_mixed": small_trace(n=12, seed=2),
    }.items():
        data = write_trace(t, directory / f"{name}.tmp.dtr").read_bytes()
        files[f"{name}_v2"] = data
        files[f"{name}_v1"] = pack(split(data)[1], split(data)[2], 1)
        (directory / f"{name}.tmp.dtr").unlink()
    for i, (_name, data, _expect) in enumerate(corpus(valid)):
        files[f"damaged_{i:02d}"] = data
    (directory / "valid.dtr").unlink()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return len(files)


def test_fuzz_the_c_loader_with_zero_findings(tmp_path):
    cc = clang()
    require(cc is not None, "clang not found: the libFuzzer target needs Debian's clang and libclang-rt-dev")
    src = zh.source_dir()
    exe = tmp_path / "fuzz_dtr"
    build = subprocess.run(
        [cc, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsanitize=fuzzer", *SANITIZE,
         str(src / "fuzz_dtr.c"), "-o", str(exe)],
        capture_output=True, text=True,
    )  # fmt: skip
    require(
        build.returncode == 0 or "cannot find" not in build.stderr,
        f"clang cannot link libFuzzer / the sanitizers (install libclang-rt-dev): {build.stderr.strip()[-300:]}",
    )
    assert build.returncode == 0, build.stderr
    corpus_dir = tmp_path / "corpus"
    n_seeds = _seeds(corpus_dir)
    artifacts = tmp_path / "findings"
    artifacts.mkdir()
    dictionary = tmp_path / "dtr.dict"
    dictionary.write_text("\n".join(DICTIONARY) + "\n")
    proc = subprocess.run(
        # no RSS limit: Linux keeps a process's peak RSS across fork and exec, so the fuzzer started
        # from a pytest worker that once held 2.3 GB reported "out-of-memory" at its first check
        # (an empty unit, live heap tiny; reproduced by starting it from a process holding 2.6 GB).
        # One allocation above 2 GiB is still a finding (malloc_limit_mb); the loader caps its own.
        [str(exe), f"-max_total_time={FUZZ_SECONDS}", f"-seed={FUZZ_SEED}", "-print_final_stats=1",
         "-rss_limit_mb=0", "-malloc_limit_mb=2048", "-timeout=10",
         "-max_len=65536", f"-dict={dictionary}", f"-artifact_prefix={artifacts}/", str(corpus_dir)],
        capture_output=True, text=True, env={**os.environ, **FUZZ_ENV}, timeout=FUZZ_SECONDS + 300,
    )  # fmt: skip
    findings = sorted(p.name for p in artifacts.iterdir())
    tail = proc.stderr[-3000:]
    assert proc.returncode == 0 and not findings, f"libFuzzer findings {findings}:\n{tail}"
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", proc.stderr))
    runs, per_s = int(stats["number_of_executed_units"]), int(stats["average_exec_per_sec"])
    corpus_now = len(list(corpus_dir.iterdir()))
    print(f"fuzz_dtr: {runs} runs in {FUZZ_SECONDS} s ({per_s}/s), corpus {n_seeds} seeds -> {corpus_now} inputs")
    # the budget was spent fuzzing, not stopped early: at least a thousand inputs a second
    assert runs >= 1000 * FUZZ_SECONDS and corpus_now >= n_seeds


def test_harness_under_asan_and_ubsan_replays_a_small_trace_cleanly(tmp_path):
    """The whole harness (loader, placement, GC, verify) with AddressSanitizer and UBSan, built by
    the harness's compiler with its flags, on the file backend: exit 0, the simulator's counts
    where they are known (every user write placed), verify ok, no sanitizer report."""
    src = zh.source_dir()
    exe = tmp_path / "zns_replay_asan"
    build = subprocess.run(
        [zh.find_cc(), *zh.CFLAGS, *SANITIZE, str(src / "zns_replay.c"), str(src / "zdev.c"), "-lm", "-o", str(exe)],
        capture_output=True, text=True,
    )  # fmt: skip
    require(
        build.returncode == 0 or "cannot find" not in build.stderr,
        f"the C compiler cannot link the sanitizers (libasan / libubsan): {build.stderr.strip()[-300:]}",
    )
    assert build.returncode == 0, build.stderr
    t = small_trace(n=2000, seed=9)
    trace = write_trace(t, tmp_path / "t.dtr")
    nseg = zh.segment_count(512, 0.75, 32)
    args = zh.harness_args(
        trace, f"file:{tmp_path / 'dev.zns'}", capacity=512, policy="sepbit", op_ratio=0.75,
        create=(nseg, 64, 32, 14, 14), verify_every=4,
    )  # fmt: skip
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env={**os.environ, **SAN_ENV}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    result = zh.json.loads(proc.stdout.splitlines()[-1])
    assert result["user_writes"] == int(np.sum(t.nblocks[t.op == 1])) and result["gc_writes"] > 0
    assert result["verify"]["ok"] and result["verify"]["passes"] > 1
