"""Each malformed-input defect of issue 39 (Python readers, CLI and config validation), one case
each: the exact one-line error (file, line or byte, reason, fix), or the input accepted with the
warning that counts what was skipped. The inputs are a few hand-written lines in each format
(their values made up); the fuzzing over cuts of the real samples is tests/test_reader_fuzz.py."""

from __future__ import annotations

import gzip
import re
import warnings

import numpy as np
import pytest
import zstandard
from helpers import run_cli

from dogi_ml.errors import ConfigError
from dogi_ml.sim import SimConfig
from dogi_ml.traces.readers import read_trace
from dogi_ml.traces.trace import OP_READ, OP_WRITE, TraceFormatError, TraceWarning
from dogi_ml.traces.workload import load_workload

MSR_LINES = "0.000 0 8192 4096 0\n1.500 0 4096 8192 1\n2.250 0 65536 4096 0\n"  # flashnet_msr
FIX = "-- fix or remove the line, check that format="


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def error_of(path, fmt, **kw) -> str:
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, fmt, progress=False, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# (name, file name, content, format, the exact message after "<path>")
ERRORS = [
    (
        "offset beyond int64",
        "big.txt",
        f"0.0 0 8192 4096 0\n1.0 0 {2**70} 4096 0\n",
        "flashnet_msr",
        f":2: offset {2**70} + size 4096 bytes reaches past 2^62 bytes (4 EiB); check the units {FIX}flashnet_msr",
    ),
    (
        "sector offset above 2^54 (wrapped to a small LBA before)",
        "sectors.txt",
        f"0.0 5 {2**55 + 8} 16 0\n",
        "sectors_trace",
        f":1: offset {(2**55 + 8) * 512} + size 8192 bytes reaches past 2^62 bytes (4 EiB); check the units {FIX}sectors_trace",
    ),
    (
        "a line with an extra column (read shifted before)",
        "extra.txt",
        "0.0 0 8192 4096 0\n1.0 0 7 4096 4096 0\n",
        "flashnet_msr",
        f":2: expected 5 fields separated by ' ', got 6 (a column extra or missing) {FIX}flashnet_msr",
    ),
    (
        "a nan timestamp",
        "nan.csv",
        "7,W,0,4096,1000\n7,W,4096,4096,nan\n",
        "alibaba",
        f":2: timestamp 'nan' is not a finite number {FIX}alibaba",
    ),
    (
        "an infinite stamp written as an integer",
        "inf.csv",
        "1e999,hm,0,Write,0,4096,1\n",
        "msr",
        f":1: timestamp '1e999' is not an integer {FIX}msr",
    ),
    (
        "an empty file (blamed on sim.capacity_blocks before)",
        "empty.txt",
        "",
        "flashnet_msr",
        ": the file is empty -- give a trace with at least one read, write or trim request",
    ),
    (
        "a header-only file",
        "header.csv",
        "# ts;vol;op;offset;size\n",
        "delimited",
        ": no read, write or trim request in the file (1 line(s)) -- check that format=delimited is the file's "
        "format and that it holds requests beyond a header",
    ),
    (
        "a blkparse device field that is not maj,min (taken for the summary before)",
        "dev.txt",
        "  8,16   0  1  0.000001000  100  Q   W 42 + 8 [flush-8:16]\n"
        "  8;16   0  2  0.000002000  100  Q   W 50 + 8 [flush-8:16]\n",
        "blkparse",
        ":2: not a blkparse event line (expected 'maj,min cpu seq time pid action rwbs ...') " + FIX + "blkparse",
    ),
    (
        "a blkparse Q event with a column too many",
        "cols.txt",
        "  8,16   0  1  0.000001000  100  Q   W 42 + 8 9 [java]\n",
        "blkparse",
        ":1: unexpected field(s) '9 [java]' (expected 'sector + count [process]' after the rwbs) " + FIX + "blkparse",
    ),
    (
        "a size beyond the 4 GiB of a block request (one line cost gigabytes before)",
        "huge.txt",
        f"0.0 5 0 {2**31} 0\n",
        "sectors_trace",
        f":1: size of {2**40} bytes is beyond the 4 GiB a block request can have; check the units {FIX}sectors_trace",
    ),
    (
        "a blocks LBA beyond int64",
        "blocks.txt",
        f"5\n{2**64}\n",
        "blocks",
        f":2: LBA {2**64} is out of range (0 <= LBA < 2^50) {FIX}blocks",
    ),
    (
        "a fio write with a column too many",
        "fio.log",
        "fio version 2 iolog\n/dev/sdb write 0 4096 7\n",
        "fio",
        f":2: write needs 'filename write offset length', got 5 fields {FIX}fio",
    ),
]
DELIMITED = {
    "sep": ";",
    "comment": "#",
    "columns": {"ts": 0, "volume": 1, "op": 2, "offset": 3, "size": 4},
    "units": {"ts": "s", "offset": "bytes", "size": "bytes"},
    "op_map": {"W": "write", "R": "read"},
}


@pytest.mark.parametrize("name,file,content,fmt,expected", ERRORS, ids=[e[0] for e in ERRORS])
def test_malformed_input_is_one_line_naming_file_line_and_fix(tmp_path, name, file, content, fmt, expected):
    p = write(tmp_path, file, content)
    kw = {"delimited": DELIMITED} if fmt == "delimited" else {}
    msg = error_of(p, fmt, **kw)
    assert msg.startswith(str(p)) and msg[len(str(p)) :].startswith(expected), msg


def test_truncated_gz_names_the_last_whole_line_and_byte(tmp_path):
    text = "".join(f"{i}.000 0 {4096 * (i % 97)} 4096 0\n" for i in range(3000))
    data = gzip.compress(text.encode(), mtime=0)
    p = write(tmp_path, "cut.txt.gz", data[: len(data) // 2])
    msg = error_of(p, "flashnet_msr")
    assert re.fullmatch(
        rf"{re.escape(str(p))}: after line \d+, byte \d+ of the file: the compressed stream breaks off "
        r"\(truncated or corrupt: Compressed file ended before the end-of-stream marker was reached\) "
        r"-- re-download or re-compress the file \(gzip -t / zstd -t FILE checks it\)",
        msg,
    ), msg


def test_truncated_zst_is_an_error_not_an_empty_trace(tmp_path):
    data = zstandard.ZstdCompressor().compress(MSR_LINES.encode() * 50)
    p = write(tmp_path, "cut.txt.zst", data[: len(data) // 2])
    assert error_of(p, "flashnet_msr") == (
        f"{p}: byte {len(data) // 2}: the .zst file ends inside a frame (truncated) "
        "-- re-download or re-compress the file (zstd -t FILE checks it)"
    )
    # several frames back to back read as one stream
    c = zstandard.ZstdCompressor()
    two = write(tmp_path, "two.txt.zst", c.compress(MSR_LINES.encode()) + c.compress(MSR_LINES.encode()))
    assert read_trace(two, "flashnet_msr", progress=False).n_requests == 6


@pytest.mark.parametrize(
    "content,reason",
    [
        (b"\x93NUMPY\x01\x00garbage", "EOF: reading array header, expected 24935 bytes got 5"),
        ("truncated", "mmap length is greater than file size"),
        (
            b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (12,(, }" + b" " * 59 + b"\n",
            "('EOF in multi-line statement', (2, 0))",  # tokenize.TokenError, found by the fuzzing
        ),
    ],
)
def test_broken_npy_is_one_line(tmp_path, content, reason):
    if content == "truncated":
        np.save(tmp_path / "good.npy", np.arange(100, dtype=np.int64))
        content = (tmp_path / "good.npy").read_bytes()[:-20]
    p = write(tmp_path, "b.npy", content)
    assert error_of(p, "blocks") == (
        f"{p}: not a readable .npy array ({reason}) -- write the LBAs with numpy.save(path, lbas) as a 1-D integer array"
    )


def test_npy_uint64_lba_beyond_int64_does_not_wrap(tmp_path):
    np.save(tmp_path / "u.npy", np.array([3, 2**63 + 5], np.uint64))
    assert error_of(tmp_path / "u.npy", "blocks") == (
        f"{tmp_path / 'u.npy'}: entry 1: LBA {2**63 + 5} is out of range (0 <= LBA < 2^50) "
        "-- fix the array: LBAs are 4 KiB block numbers"
    )


def test_a_directory_is_not_a_trace(tmp_path):
    assert error_of(tmp_path, "msr") == f"{tmp_path} is a directory, not a trace file -- give the path of a trace file"


@pytest.mark.parametrize(
    "fmt,content",
    [
        (
            "blkparse",
            "  8,16   0  1  0.000001000  100  Q   W 42 + 8 [java]\n  8,16   0  2  0.000002  100  Q   R 0 + 8 [java]\n",
        ),
        ("fio", "fio version 2 iolog\n/dev/sdb write 0 4096\n/dev/sdb read 8192 4096\n"),
        ("blocks", "5\n1\n"),
        ("flashnet_msr", "0.0 0 0 4096 0\n1.0 0 8192 4096 1\n"),
        ("alibaba", "7,W,0,4096,1000\n7,R,8192,4096,2000\n"),
    ],
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_bom_and_crlf_are_accepted(tmp_path, fmt, content, newline):
    plain = write(tmp_path, "plain.txt", content)
    ref = read_trace(plain, fmt, progress=False)
    odd = write(tmp_path, "odd.txt", b"\xef\xbb\xbf" + content.replace("\n", newline).encode())
    t = read_trace(odd, fmt, progress=False)
    assert t.n_requests == ref.n_requests == 2 and t.meta["skipped_lines"] == 0
    assert t.lba.tolist() == ref.lba.tolist() and t.op.tolist() == ref.op.tolist()
    assert t.ts_us.tolist() == ref.ts_us.tolist()


def test_blkparse_counts_what_it_skips_and_keeps_reading(tmp_path):
    p = write(
        tmp_path,
        "b.txt",
        "  8,16   0  1  0.000001000  100  Q   W 42 + 8 [flush-8:16]\n"
        "  8;16   0  2  0.000002000  100  Q   W 50 + 8 [flush-8:16]\n"  # a bad device field
        "  8,16   0  3  0.000003000  100  Qx  W 58 + 8 [java]\n"  # an unknown action
        "  8,16   0  4  0.000004000  100  Q   W 66 + 8 [java]\n"
        "CPU0 (sdb):\n Reads Queued:  0,  0KiB  Writes Queued:  2,  8KiB\n",
    )
    with pytest.warns(TraceWarning) as caught:
        t = read_trace(p, "blkparse", skip_malformed=True, progress=False)
    assert t.n_requests == 2 and t.op.tolist() == [OP_WRITE, OP_WRITE]
    assert t.meta["skipped_lines"] == 2 and t.meta["first_skipped_line"] == 2
    assert [str(w.message) for w in caught] == [
        f"{p}: skipped 2 malformed line(s) (skip_malformed=true), the first: line 2: not a blkparse event line "
        "(expected 'maj,min cpu seq time pid action rwbs ...')"
    ]


def test_timestamps_going_backwards_are_kept_and_counted(tmp_path):
    p = write(tmp_path, "back.csv", "7,W,0,4096,3000\n7,W,4096,4096,1000\n7,R,0,4096,2000\n7,W,0,4096,500\n")
    with pytest.warns(TraceWarning) as caught:
        t = read_trace(p, "alibaba", progress=False, chunk_lines=2)  # one backward step across chunks
    assert t.ts_us.tolist() == [3000, 1000, 2000, 500] and t.op.tolist() == [OP_WRITE, OP_WRITE, OP_READ, OP_WRITE]
    assert t.meta["backward_timestamps"] == 2 and t.meta["first_backward_line"] == 2
    assert str(caught[0].message) == (
        f"{p}: 2 request(s) stamped earlier than the request before them, the first on line 2; kept in file "
        "order (a timed simulation holds its clock at the latest stamp)"
    )


def test_skipped_lines_are_reported_again_from_the_cache(tmp_path):
    p = write(tmp_path, "s.txt", MSR_LINES + "x y z\n")
    cfg = {"source": "file", "path": str(p), "format": "flashnet_msr", "skip_malformed": True}
    for _ in range(2):  # parsed, then read from the cache
        with pytest.warns(
            TraceWarning, match=r"skipped 1 malformed line\(s\) \(skip_malformed=true\), the first: line 4"
        ):
            t = load_workload(cfg, cache_dir=tmp_path / "cache")
        assert t.meta["skipped_lines"] == 1


def test_every_null_default_sim_setting_has_an_example_to_suggest():
    """Its smallest value was suggested (sim.gc_free_ratio=0, which the run then refuses)."""
    from dogi_ml.sim.engine import _NULL_DEFAULT_EXAMPLES, _SETTING_RULES

    nullable = {key for key in _SETTING_RULES if getattr(SimConfig, key) is None}
    assert nullable == set(_NULL_DEFAULT_EXAMPLES)
    for key, example in _NULL_DEFAULT_EXAMPLES.items():
        assert SimConfig.from_mapping({key: example}) is not None, key


@pytest.mark.parametrize(
    "settings,message",
    [
        (
            {"capacity_blocks": 0},
            "sim.capacity_blocks=0 must be positive -- give e.g. sim.capacity_blocks=262144 (null: the default)",
        ),
        (
            {"segment_blocks": "abc"},
            "sim.segment_blocks='abc' is not a whole number -- give a whole number, e.g. sim.segment_blocks=512",
        ),
        ({"segment_blocks": 0}, "sim.segment_blocks=0 must be positive -- give e.g. sim.segment_blocks=512"),
        ({"op_ratio": "ten"}, "sim.op_ratio='ten' is not a number -- give a number, e.g. sim.op_ratio=0.1"),
        ({"op_ratio": float("nan")}, "sim.op_ratio=nan is not a number -- give a number, e.g. sim.op_ratio=0.1"),
        (
            {"series_window": 0},
            "sim.series_window=0 must be positive -- give e.g. sim.series_window=65536 (null: the default)",
        ),
        ({"prefill": "no"}, "sim.prefill='no' is not true or false -- give sim.prefill=true or sim.prefill=false"),
        # int(1e30) ended in OverflowError's traceback in the simulator's state
        (
            {"segment_blocks": 1e30},
            "sim.segment_blocks=1e+30 does not fit in 64 bits -- give e.g. sim.segment_blocks=512",
        ),
    ],
)
def test_sim_settings_are_checked_by_name(settings, message):
    with pytest.raises(ConfigError) as info:
        SimConfig.from_mapping(settings)
    assert str(info.value) == message


def test_a_sim_or_policy_key_no_one_reads_is_refused():
    """+sim.victm=greedy and +policy.bogus=1 used to run with the key ignored."""
    from dogi_ml.pipeline.common import sim_config
    from dogi_ml.policies import policy_params

    with pytest.raises(ConfigError) as info:
        sim_config({"segment_blocks": 64, "victm": "greedy"})
    assert str(info.value) == "sim.victm: no such simulator setting -- did you mean sim.victim?"
    with pytest.raises(ConfigError, match=r"sim.zzz: no such simulator setting -- see conf/sim/default.yaml"):
        sim_config({"zzz": 1})
    assert sim_config({"segment_blocks": 64, "output": None}).segment_blocks == 64  # the pipeline's own key
    with pytest.raises(ConfigError) as info:
        policy_params({"name": "sepbit", "params": {}, "bogus": 1})
    assert str(info.value) == (
        "policy.bogus: no such policy setting (policy=sepbit) -- a scheme's parameter goes under policy.params "
        "(policy.params.bogus=...); the others are policy.name, policy.n_groups, policy.victim, policy.params"
    )
    assert policy_params({"name": "sepbit", "n_groups": 6, "victim": None, "params": {"variant": "code"}}) == {
        "variant": "code"
    }


def test_a_data_or_model_key_no_one_reads_is_refused():
    """train +data.bogus=1 and +model.bogus=1 used to train with the key ignored."""
    from dogi_ml.pipeline.train import build_dataset, train_and_evaluate
    from dogi_ml.traces.generators import generate

    trace = generate("zipf", capacity_blocks=1024, n_writes=4096, seed=1)
    with pytest.raises(ConfigError) as info:
        build_dataset(trace, {"labels": "dogi", "sample_evry": 3}, cache_dir=None)
    assert str(info.value) == "data.sample_evry: no such data setting -- did you mean data.sample_every?"
    with pytest.raises(ConfigError) as info:
        train_and_evaluate(None, {"name": "mlp", "params": {}, "zzz": 1})
    assert str(info.value) == "model.zzz: no such model setting -- a model's parameter goes under model.params"


def test_a_key_added_to_a_commands_own_section_is_refused():
    """+zns.verfy=true (replay) and +model.bogus=1 (simulate's model section) used to run with the
    key ignored: conf/COMMAND.yaml lists every key the command reads there."""
    from dogi_ml.pipeline.common import check_appended_keys, compose_config

    with pytest.raises(ConfigError) as info:
        check_appended_keys("replay", ["+workload=zipf", "+zns.verfy=true"])
    assert (
        str(info.value) == "zns.verfy: the replay command has no setting 'verfy' under zns -- did you mean zns.verify?"
    )
    with pytest.raises(ConfigError, match=r"model.bogus: the simulate command has no setting 'bogus' under model"):
        compose_config("simulate", ["+workload=zipf", "+model.bogus=1"])
    # groups check their own keys; existing keys and plain overrides pass
    check_appended_keys("simulate", ["+workload=zipf", "+workload.params.theta=0.9", "model.deployed=int8"])


def test_a_top_level_key_the_command_does_not_read_is_refused():
    """simulate +progess=false (and +bogus=1) ran with the key ignored, and so did train +title=x:
    title is simulate's setting, and any key some config declared used to pass on every command.
    A key passes only if the command's own file declares it; a group selection (+dogi_gap=dogi)
    is Hydra's to check."""
    from dogi_ml.pipeline.common import check_appended_keys, command_root_keys

    with pytest.raises(ConfigError) as info:
        check_appended_keys("simulate", ["+workload=zipf", "+progess=false"])
    assert str(info.value) == (
        "progess: the simulate command reads no top-level setting 'progess' (conf/simulate.yaml lists them), "
        "so it would ignore it -- did you mean progress?"
    )
    with pytest.raises(ConfigError, match=r"^bogus: .* a setting goes under its section \(e.g. \+policy.params.bogus"):
        check_appended_keys("simulate", ["+bogus=1"])
    with pytest.raises(ConfigError, match=r"^title: the train command reads no top-level setting 'title'"):
        check_appended_keys("train", ["+workload=zipf", "+title=x"])
    # a preset's own variable is no setting of any command
    with pytest.raises(ConfigError, match=r"^qtable_from: the simulate command reads no top-level setting"):
        check_appended_keys("simulate", ["+workload=zipf", "+qtable_from=credit"])
    assert {"report_workload", "title", "progress"} <= command_root_keys("simulate")
    assert {"progress", "output"} <= command_root_keys("oracle")
    check_appended_keys("simulate", ["+workload=zipf", "+dogi_gap=dogi"])


def test_a_preset_for_another_command_is_refused():
    """replay +experiment=hybrid ran with the preset's plot=false and title ignored (replay reads
    neither), simulate +experiment=minos_table1 with its oracle section ignored: the command now
    refuses the setting it would not read. The documented pairs still compose, and a preset's
    own variable (qtable_from, read through an interpolation) passes."""
    from dogi_ml.pipeline.common import compose_config

    with pytest.raises(ConfigError) as info:
        compose_config("replay", ["+workload=zipf", "+experiment=hybrid"])
    assert str(info.value) == (
        "plot: the replay command reads no top-level setting 'plot', yet the config sets it "
        "(a preset written for another command?) -- run the preset with the command its first comment line "
        "names, or drop the setting"
    )
    with pytest.raises(ConfigError, match=r"^oracle: the simulate command reads no top-level setting 'oracle'"):
        compose_config("simulate", ["+workload=zipf", "+experiment=minos_table1"])
    compose_config("oracle", ["+experiment=minos_table1"])
    compose_config("train", ["+experiment=fig7_models"])
    compose_config("simulate", ["+workload=zipf", "+experiment=shiro_agent_credit_deployed"])
    compose_config("simulate", ["+workload=zipf", "+experiment=hybrid_alt"])


def test_a_victim_rule_a_scheme_does_not_follow_is_reported():
    """simulate +experiment=hybrid policy=hybrid sim.victim=greedy ran the hybrid with its own
    cost-benefit rule (the preset's sim.victim_for=followers) and said nothing: the command now
    prints a note naming the rule kept and the fix; a follower (SepBIT) honours the rule silently,
    and a rule the command line did not set is the preset's own business."""
    from dogi_ml.pipeline.common import compose_config, kept_victim_note

    overrides = ["+workload=zipf", "+experiment=hybrid", "policy=hybrid", "sim.victim=greedy"]
    assert kept_victim_note(compose_config("simulate", overrides), overrides) == (
        "note: policy=hybrid keeps its own victim rule cost_benefit: sim.victim=greedy applies only to schemes "
        "that follow the run's rule (sim.victim_for=followers); set policy.victim=greedy to run hybrid with it"
    )
    own_selector = ["+workload=zipf", "+experiment=hybrid", "policy=dogi", "sim.victim=greedy"]
    assert kept_victim_note(compose_config("simulate", own_selector), own_selector).endswith(
        "keeps its own victim rule dogi: sim.victim=greedy applies only to schemes that follow the run's rule "
        "(sim.victim_for=followers); dogi cannot run with greedy"
    )
    follower = ["+workload=zipf", "+experiment=hybrid", "policy=sepbit", "sim.victim=greedy"]
    assert kept_victim_note(compose_config("simulate", follower), follower) is None
    preset_only = ["+workload=zipf", "+experiment=hybrid", "policy=hybrid"]
    assert kept_victim_note(compose_config("simulate", preset_only), preset_only) is None


def test_sim_settings_keep_good_values():
    cfg = SimConfig.from_mapping({"capacity_blocks": None, "segment_blocks": 64.0, "op_ratio": 0, "prefill": False})
    assert (cfg.capacity_blocks, cfg.segment_blocks, cfg.op_ratio, cfg.prefill) == (None, 64, 0, False)
    assert isinstance(cfg.segment_blocks, int)


@pytest.mark.parametrize(
    "workload,message",
    [
        ({"capacity_blocks": 0}, "workload.capacity_blocks=0 must be positive"),
        ({"capacity_blocks": "big"}, "workload.capacity_blocks='big' is not a whole number"),
        ({"write_volume": 0}, "workload.write_volume=0 must be above 0"),
        # "seed must be >= 0, got -1" named no key
        ({"seed": -1}, "workload.seed=-1 must be >= 0 -- give e.g. workload.seed=0"),
        # float()'s "could not convert string to float: 'abc'" named no key
        ({"generator": "zipf", "params": {"theta": "abc"}}, "workload.params.theta='abc' is not a number"),
        # a string switch ran as true without a word
        (
            {"generator": "phase_shift", "params": {"reshuffle": "maybe"}},
            "workload.params.reshuffle='maybe' is not true or false -- give workload.params.reshuffle=true or",
        ),
        ({"generator": "varmail", "params": {"emit_trims": 1}}, "workload.params.emit_trims=1 is not true or false"),
    ],
)
def test_workload_settings_are_checked_by_name(tmp_path, workload, message):
    cfg = {"name": "w", "source": "generator", "generator": "uniform", "capacity_blocks": 1024, **workload}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_workload(cfg, cache_dir=None)


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"generator": "zipf", "params": {"wss_fraction": 2.0}},
            "workload.params.wss_fraction must be in (0, 1], got 2.0 -- give e.g. workload.params.wss_fraction=1.0",
        ),
        (
            {"generator": "zipf", "params": {"request_blocks": 4096}},
            "workload.params.request_blocks=4096 is larger than the working set (1024 blocks) -- give e.g. "
            "workload.params.request_blocks=1",
        ),
        (
            {"generator": "phase_shift", "params": {"theta_b": -0.5}},
            "workload.params.theta_b must be in [0, inf), got -0.5 -- give e.g. workload.params.theta_b=0.8",
        ),
        ({"generator": "hotcold", "capacity_blocks": 1}, "workload.capacity_blocks=1: hotcold needs at least 2 blocks"),
        (
            {"generator": "varmail", "params": {"n_files": 10**6}},
            "workload.capacity_blocks=1024 is too small for 1000000 files",
        ),
    ],
)
def test_a_generators_range_error_names_the_workload_setting(workload, message):
    """The generators' range messages named their argument (``wss_fraction must be in (0, 1]``),
    not the setting the user gave (``workload.params.wss_fraction``)."""
    from dogi_ml.traces.workload import WorkloadError

    cfg = {"name": "w", "source": "generator", "capacity_blocks": 1024, **workload}
    with pytest.raises(WorkloadError) as info:
        load_workload(cfg, cache_dir=None)
    assert str(info.value).startswith(message), str(info.value)


def test_a_workload_key_its_source_does_not_read_is_refused(tmp_path):
    """+workload.thetaa=0.9 (meant: workload.params.theta) and write_volume on a file workload
    were ignored without a word."""
    from dogi_ml.traces.workload import WorkloadError

    gen = {"name": "zipf", "source": "generator", "generator": "zipf", "capacity_blocks": 1024}
    with pytest.raises(WorkloadError) as err:
        load_workload({**gen, "thetaa": 0.9}, cache_dir=None)
    assert str(err.value) == (
        "workload.thetaa: no such workload setting -- a generator's parameter goes under workload.params "
        "(workload.params.thetaa=...)"
    )
    p = write(tmp_path, "w.txt", MSR_LINES)
    file_cfg = {"source": "file", "path": str(p), "format": "flashnet_msr"}
    with pytest.raises(WorkloadError, match=r"workload.write_volume is read by generator workloads only; this one is "):
        load_workload({**file_cfg, "write_volume": 3}, cache_dir=None)
    with pytest.raises(WorkloadError, match=r"workload.path is read by file workloads only"):
        load_workload({**gen, "path": str(p)}, cache_dir=None)
    with pytest.raises(WorkloadError, match=r"workload.bogus: no such workload setting -- one of workload.name"):
        load_workload({**file_cfg, "bogus": 1}, cache_dir=None)
    assert load_workload(file_cfg, cache_dir=None).block_writes.size > 0


def test_file_workload_capacity_zero_is_not_the_default(tmp_path):
    p = write(tmp_path, "w.txt", MSR_LINES)
    cfg = {"source": "file", "path": str(p), "format": "flashnet_msr", "capacity_blocks": 0}
    with pytest.raises(ConfigError, match=re.escape("workload.capacity_blocks=0 must be positive")):
        load_workload(cfg, cache_dir=None)


def test_a_workload_capacity_below_the_working_set_names_the_workloads_key(tmp_path):
    """workload.capacity_blocks=1 was reported as sim.capacity_blocks=1, a key the user never set."""
    from dogi_ml.pipeline.simulate import simulation_writes

    p = write(tmp_path, "w.txt", MSR_LINES)
    trace = load_workload({"source": "file", "path": str(p), "format": "flashnet_msr", "capacity_blocks": 1}, None)
    with pytest.raises(ConfigError, match=r"^workload\.capacity_blocks=1 is smaller than the trace's write working"):
        simulation_writes(trace, None)
    with pytest.raises(ConfigError, match=r"^sim\.capacity_blocks=1 is smaller than the trace's write working"):
        simulation_writes(trace, 1)


# -- the command line: every error path ends in one line, exit 2 (3: a bad input file), no traceback ----
def one_line_error(proc, status: int = 2) -> str:
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


SMALL = ["+workload=uniform", "++workload.capacity_blocks=2048", "++workload.write_volume=2"]


@pytest.mark.parametrize(
    "args,expected",
    [
        (["ingest", "format=msr"], "error: ingest needs path=FILE and format=NAME -- e.g. python -m dogi_ml ingest"),
        (["stats"], "error: no path= given -- give path=FILE (a .dtr trace written by"),
        (["stats", "path={tmp}"], "error: path={tmp} is a directory -- give path=FILE (a .dtr trace written by"),
        (["print", "path={tmp}/t.dtr", "head=abc"], "error: head='abc' is not a whole number >= 0 -- give the number"),
        (["ingest", "path={tmp}/cut.txt.zst", "format=flashnet_msr", "out={tmp}/o"], "error: {tmp}/cut.txt.zst: byte "),
        (["ingest", "path={tmp}/empty.txt", "format=flashnet_msr", "out={tmp}/o"], "error: {tmp}/empty.txt: the file is empty"),
        (["simulate", *SMALL, "sim.segment_blocks=abc"], "error: sim.segment_blocks='abc' is not a whole number -- give"),
        (["simulate", *SMALL, "sim.capacity_blocks=0"], "error: sim.capacity_blocks=0 must be positive -- give"),
        (
            ["simulate", "+workload=file", "workload.path={tmp}/empty.txt", "workload.format=flashnet_msr"],
            "error: {tmp}/empty.txt: the file is empty",
        ),
        (["ingest", "path={tmp}/t.npy", "format=delimited", "out={tmp}/o", "delimited=hello"],
         "error: delimited='hello' is not a mapping -- give delimited={columns:"),
        (["ingest", "path={tmp}/t.npy", "format=alibaba", "out={tmp}/o", "delimited={columns:{offset:0}}"],
         "error: delimited= is read only with format=delimited, not format=alibaba -- drop delimited="),
        (["fleet", "out={tmp}/f", "n_volumes=1", "spec=hello"], "error: spec='hello' is not a mapping -- give spec={"),
        # a misspelt key was Hydra's seven lines suggesting +heda=3, which the run then refuses
        (["print", "path={tmp}/t.dtr", "heda=3"],
         "error: heda: the print command's config has no setting 'heda' -- did you mean head? (python -m"),
        (["simulate", *SMALL, "sim.segmnt_blocks=64"],
         "error: sim.segmnt_blocks: the simulate command's config has no setting 'sim.segmnt_blocks' -- did you mean "
         "sim.segment_blocks"),
        (["simulate", *SMALL, "policy=hybrid", "policy.params.lifetime=select"],
         "error: policy.params.lifetime: the simulate command's config has no setting 'policy.params.lifetime' -- did "
         "you mean policy.params.lifetimes? (python -m dogi_ml simulate --cfg job lists the settings); "
         "++policy.params.lifetime=VALUE adds a parameter"),
        (["simulate", *SMALL, "mlflow=abc"], "error: mlflow='abc' is not true or false -- give mlflow=true or"),
        (["simulate", "+workload=zipff"], "error: workload=zipff: no such workload option -- did you mean workload=zipf?"),
        (["simulate", *SMALL, "policy=sepbitt"], "error: policy=sepbitt: no such policy option -- did you mean policy=sepbit?"),
        # the same in a -m sweep: Hydra's five lines and status 1, or its thirty for a group option
        (["simulate", "-m", *SMALL, "policy=sepbit,nosep", "sim.victm=greedy"],
         "error: sim.victm: the simulate command's config has no setting 'sim.victm' -- did you mean sim.victim"),
        (["simulate", "-m", *SMALL, "policy=sepbit,sepbitt"],
         "error: policy=sepbitt: no such policy option -- did you mean policy=sepbit?"),
        (["oracle", *SMALL, "oracle=opmin"], "error: oracle=opmin replaces the oracle section, which is a mapping"),
        (["export", *SMALL, "export.batch=0"], "error: export.batch=0 must be positive -- give e.g. export.batch=128"),
        # "invalid literal for int() with base 10: 'abc'", after the training
        (["export", *SMALL, "export.input_bits=abc"],
         "error: export.input_bits='abc' is not a whole number -- give a whole number, e.g. export.input_bits=16"),
        (["export", *SMALL, "export.input_bits=12"],
         "error: export.input_bits=12 is not a width of the integer code -- give 8 or 16"),
        (["simulate", *SMALL, "sim.segment_blocks=16", "sim.op_ratio=0.3", "mlflow=false", "output={tmp}/t.npy/r.json"],
         "error: {tmp}/t.npy: file exists -- check the path: an input must be a file you can read, an output"),
        (["train", "+workload=zipf", "workload.capacity_blocks=4096", "workload.write_volume=8", "model=random_forest",
          "model.params.min_samples_leaf=1.5"],
         "error: model.params.min_samples_leaf for model random_forest: The 'min_samples_leaf' parameter of "
         "RandomForestClassifier must be"),
        (["oracle", *SMALL, "oracle.max_groups=abc"],
         "error: oracle.max_groups='abc' is not a whole number -- give a whole number, e.g. oracle.max_groups=10"),
        (["oracle", *SMALL, "oracle.candidates=foo"],
         "error: oracle.candidates='foo' is not a list of BIR bounds -- give e.g. oracle.candidates=[64,1024]"),
        (["export", "export.model_path={tmp}/t.npy"],
         "error: export.model_path={tmp}/t.npy is not a model a train run saved (UnpicklingError"),
        # a TypeError's traceback; capacity_blocks=abc: "Cannot specify ',' with 's'."
        (["bench", "n_writes=0"], "error: n_writes=0 must be positive -- give e.g. n_writes=20000000"),
        (["bench", "hybrid.repeats=abc"],
         "error: hybrid.repeats='abc' is not a whole number -- give a whole number, e.g. hybrid.repeats=2"),
        # float()'s and int()'s messages, no key; steps=abc was read one character at a time
        (["oracle", *SMALL, "oracle.steps=abc"],
         "error: oracle.steps='abc' is not a list of step sizes -- give e.g. oracle.steps=[1.0,0.5,0.25]"),
        (["oracle", *SMALL, "oracle.max_evals_per_n=abc"],
         "error: oracle.max_evals_per_n='abc' is not a whole number -- give a whole number, e.g. "
         "oracle.max_evals_per_n=120"),
        (["simulate", *SMALL, "policy=nodap", "policy.params.bounds=search", "policy.params.min_gain=abc"],
         "error: policy.params.min_gain='abc' is not a number -- give a number, e.g. policy.params.min_gain=0.05"),
        # OverflowError's traceback (a C long in the simulator's state)
        (["simulate", *SMALL, "sim.capacity_blocks=1e30"],
         "error: sim.capacity_blocks=1e+30 does not fit in 64 bits -- give e.g. sim.capacity_blocks=262144"),
        # numpy's "array is too big", naming nothing to lower
        (["simulate", *SMALL, "sim.segment_blocks=16", "sim.op_ratio=0.3", "policy=phftl", "policy.params.history=1000000000000000"],
         "error: out of memory: array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum "
         "possible size. -- this machine has "),
    ],
    ids=["ingest-no-path", "stats-no-path", "stats-dir", "print-head-str", "ingest-cut-zst", "ingest-empty",
         "segment-str", "capacity-0", "simulate-empty-trace", "delimited-scalar", "delimited-with-a-preset",
         "fleet-spec-scalar", "misspelt-key", "misspelt-sim-key", "misspelt-policy-param", "switch-not-bool",
         "misspelt-workload", "misspelt-policy", "sweep-misspelt-key", "sweep-misspelt-policy", "oracle-as-a-value", "export-batch-0", "export-bits-str", "export-bits-12", "output-under-a-file", "sklearn-param", "oracle-max-groups-str", "oracle-candidates-str",
         "export-not-a-pickle", "bench-writes-0", "bench-repeats-str", "oracle-steps-str", "oracle-evals-str", "nodap-min-gain-str", "capacity-beyond-64-bits",
         "history-beyond-memory"],
)  # fmt: skip
def test_cli_error_paths_are_one_line(request, tmp_path, args, expected):
    data = zstandard.ZstdCompressor().compress(MSR_LINES.encode() * 50)
    write(tmp_path, "cut.txt.zst", data[: len(data) // 2])
    write(tmp_path, "empty.txt", "")
    np.save(tmp_path / "t.npy", np.arange(4))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    # a trace file that cannot be read exits 3 (exit_codes.BAD_INPUT), text or .dtr alike
    # and so does a model file that holds no model
    bad_file = request.node.callspec.id in (
        "ingest-cut-zst",
        "ingest-empty",
        "simulate-empty-trace",
        "export-not-a-pickle",
    )
    line = one_line_error(run_cli(["-q", *args], tmp_path, check=False), 3 if bad_file else 2)
    assert line.startswith(expected.replace("{tmp}", str(tmp_path))), line


def test_a_quantiser_failure_names_the_export_settings_that_shape_it(tmp_path):
    """export.input_margin=1e300 ended in the quantiser's own message, which names no setting."""
    workload = ["+workload=zipf", "workload.capacity_blocks=4096", "workload.write_volume=4"]
    proc = run_cli(
        ["-q", "export", *workload, "export.input_margin=1e300", f"export.out={tmp_path / 'x'}"], tmp_path, check=False
    )
    line = one_line_error(proc)
    assert line.startswith("error: hidden-layer multiplier "), line
    assert line.endswith(
        "(with export.input_bits=16 export.input_margin=1e+300 export.act_percentile=99.99) -- check these export settings"
    ), line


def test_cli_ingest_reports_skipped_lines(tmp_path):
    p = write(tmp_path, "s.txt", MSR_LINES + "1.0 0 4096\n")
    proc = run_cli(
        ["-q", "ingest", f"path={p}", "format=flashnet_msr", f"out={tmp_path / 'o'}", "skip_malformed=true"], tmp_path
    )
    assert (
        f"warning: {p}: skipped 1 malformed line(s) (skip_malformed=true), the first: line 4: expected 5 fields "
        "separated by ' ', got 3 (a column extra or missing)"
    ) in proc.stdout
    assert "Traceback" not in proc.stderr
    proc = run_cli(["-q", "stats", f"path={tmp_path / 'o' / 's.dtr'}"], tmp_path)
    assert f"warning: {p}: skipped 1 malformed line(s)" in proc.stdout


def test_reads_are_the_same_with_warnings_as_errors(tmp_path):
    """A clean file raises no warning at all (so ``-W error`` runs stay clean)."""
    p = write(tmp_path, "ok.txt", MSR_LINES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = read_trace(p, "flashnet_msr", progress=False)
    assert t.op.tolist() == [OP_WRITE, OP_READ, OP_WRITE]


def test_a_missing_mandatory_setting_is_one_line():
    """Any command reading a ``???`` setting the user did not give: one line naming the key."""
    from omegaconf import OmegaConf

    from dogi_ml.cli import user_error_line

    cfg = OmegaConf.create({"path": "???"})
    with pytest.raises(Exception) as info:
        cfg.path  # noqa: B018
    assert user_error_line(info.value) == (
        "error: no value for path (the command needs it) -- give it on the command line, e.g. path=VALUE"
    )
    assert user_error_line(IsADirectoryError(21, "Is a directory", "/tmp")) == (
        "error: /tmp: is a directory -- check the path: an input must be a file you can read, an output (out=) a "
        "directory you can write"
    )


def test_dense_remap_ranks_every_touched_block():
    """remap_dense against a brute force over every touched block (volume-major ranks), on
    random overlapping, nested and adjacent requests in several volumes."""
    from dogi_ml.traces.trace import Trace, remap_dense

    rng = np.random.default_rng(5)
    for _ in range(200):
        n, nvol = int(rng.integers(1, 60)), int(rng.integers(1, 4))
        lba = rng.integers(0, int(rng.choice([8, 100, 2**45])), n)
        nblocks = rng.integers(1, int(rng.choice([2, 9, 40])), n)
        vol = rng.integers(0, nvol, n)
        t = remap_dense(Trace(np.zeros(n), lba, nblocks, np.ones(n), vol, [str(v) for v in range(nvol)]))
        touched = sorted(
            {(v, b) for v, a, k in zip(vol.tolist(), lba.tolist(), nblocks.tolist()) for b in range(a, a + k)}
        )
        rank = {key: i for i, key in enumerate(touched)}
        assert t.lba.tolist() == [rank[(v, a)] for v, a in zip(vol.tolist(), lba.tolist())]


@pytest.mark.parametrize(
    "value, message",
    [
        (0, "data.capacity_blocks=0 must be positive"),
        (-5, "data.capacity_blocks=-5 must be positive"),
        ("many", "data.capacity_blocks='many' is not a whole number"),
        (True, "data.capacity_blocks=True is not a whole number"),
    ],
)
def test_train_data_capacity_zero_is_not_the_default(value, message):
    """data.capacity_blocks: null is the trace's working set; 0, a negative or a string is refused
    by name (it used to mean the working set, like sim.capacity_blocks=0 did)."""
    from dogi_ml.pipeline.train import build_dataset
    from dogi_ml.traces.generators import generate

    trace = generate("uniform", capacity_blocks=512, n_writes=2048, seed=1)
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_dataset(trace, {"capacity_blocks": value}, log=lambda *a: None)


@pytest.mark.parametrize(
    ("policy", "params", "message"),
    [
        # the simulate pipeline popped NoDaP's search knobs from every scheme's parameters: MiDAS's
        # and the hybrid's max_groups were silently replaced by their defaults, another scheme's
        # unknown max_groups silently dropped
        ("midas", {"max_groups": -4}, "max_groups (groups after G0 the search may use) must be in [2, 60], got -4"),
        ("hybrid", {"max_groups": 11}, "max_groups must lie in [1, 10], got 11"),
        ("sepbit", {"max_groups": 3}, "unknown parameter(s) ['max_groups']"),
        ("sepbit", {"min_gain": 0.1}, "unknown parameter(s) ['min_gain']"),
    ],
)
def test_max_groups_reaches_the_scheme_that_reads_it(policy, params, message):
    from dogi_ml.pipeline.simulate import build_simulator
    from dogi_ml.traces.generators import zipf

    trace = zipf(8192, 8192, seed=1)
    with pytest.raises(ValueError) as info:
        build_simulator(trace, {"name": policy, "params": params}, {"segment_blocks": 32, "op_ratio": 0.3})
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("policy", "params", "message"),
    [
        # the schemes converted with int()/float() deep inside ("invalid literal for int() with
        # base 10: 'abc'", no key) or read the value without a word (Shiro's seed='abc')
        (
            "shiro",
            {"seed": "abc"},
            "policy.params.seed='abc' is not a whole number -- give a whole number, e.g. policy.params.seed=0",
        ),
        ("phftl", {"seed": -1}, "policy.params.seed=-1 must be >= 0 -- give e.g. policy.params.seed=0"),
        ("minos", {"agg": "x"}, "policy.params.agg='x' is not a whole number"),
        (
            "hybrid",
            {"horizon": "far"},
            "policy.params.horizon='far' is not a number -- give a number, e.g. policy.params.horizon=4.0",
        ),
        ("midas", {"max_groups": 2.5}, "policy.params.max_groups=2.5 is not a whole number"),
        ("adapt", {"n_sets": -1}, "policy.params.n_sets=-1 must be positive"),
        # a negative weight rewarded a dead slot, without a word
        ("shiro", {"credit_dead_cost": -1}, "policy.params.credit_dead_cost=-1 must be >= 0"),
        # the credit agent's settings under the paper's agent were dropped without a word
        (
            "shiro",
            {"credit_dead_cost": 0.5},
            "policy.params.credit_dead_cost=0.5 is read by agent=credit, and policy.params.agent=qlearning -- set "
            "policy.params.agent=credit or drop policy.params.credit_dead_cost",
        ),
        ("shiro", {"credit_gamma": 0.7}, "policy.params.credit_gamma=0.7 is read by agent=credit"),
        # a rule learns nothing: its learning rate was dropped without a word
        (
            "shiro",
            {"agent": "hierarchical", "alpha": 0.5},
            "policy.params.alpha=0.5 is read by agent=qlearning or agent=credit, and policy.params.agent=hierarchical",
        ),
        # dogi_ml.rl's message named "gamma", which is two settings of Shiro's
        (
            "shiro",
            {"agent": "credit", "credit_gamma": 2.0},
            "policy.params.credit_gamma=2.0 must be >= 0.0 and below 1.0",
        ),
        # a part's setting with the part off ran, ignored without a word (the same WAF)
        (
            "adapt",
            {"ghost": False, "n_sets": 4},
            "policy.params.n_sets=4 is read by ADAPT's ghost part, which policy.params.ghost=false turns off -- "
            "drop policy.params.n_sets or set policy.params.ghost=true",
        ),
        ("adapt", {"demote": False, "filter_bits": 4}, "policy.params.filter_bits=4 is read by ADAPT's demote part"),
        (
            "dogi",
            {"adapt_mu": False, "mu_window": 1000},
            "policy.params.mu_window=1000 sizes the Hot Filter's climb, which policy.params.adapt_mu=false turns off",
        ),
        (
            "hybrid",
            {"groups": "dogi", "horizon": 2.0},
            "policy.params.horizon=2.0 steers the OP-model planner, which policy.params.groups=dogi replaces by "
            "DOGI's search -- drop policy.params.horizon or set policy.params.groups=opmodel",
        ),
        # int(1e300) reached a C long: OverflowError's traceback
        ("adapt", {"n_sets": 1e300}, "policy.params.n_sets=1e+300 does not fit in 64 bits"),
        # bool() read a string as true without a word
        ("adapt", {"ghost": "maybe"}, "policy.params.ghost='maybe' is not true or false"),
        # read one character at a time: "invalid literal for int() with base 10: 'b'"
        (
            "nodap",
            {"bounds": "bogus"},
            "policy nodap: params.bounds='bogus' is neither search nor a list of block counts",
        ),
        # accepted until the first retraining, minutes in
        ("dogi", {"model": "bogus"}, "policy.params.model='bogus' is not a model -- use one of deepfm, gru,"),
        # 0 was read as unset: DOGI ran at the scaled default mu
        ("dogi", {"mu": 0}, "policy.params.mu=0 must be positive"),
    ],
)
def test_a_policy_parameter_of_the_wrong_kind_names_its_key(policy, params, message):
    from dogi_ml.pipeline.simulate import build_simulator
    from dogi_ml.traces.generators import zipf

    with pytest.raises(ConfigError) as info:
        build_simulator(
            zipf(8192, 8192, seed=1), {"name": policy, "params": params}, {"segment_blocks": 32, "op_ratio": 0.3}
        )
    assert message in str(info.value)


def test_the_bench_configs_own_numbers_pass_its_check():
    """check_bench_settings refuses by the kind of each default: the shipped config (a whole
    default for a time, mlp_training_seconds: 10) and a fractional time must pass."""
    from dogi_ml.bench import check_bench_settings
    from dogi_ml.pipeline.common import compose_config

    check_bench_settings(compose_config("bench", []))
    check_bench_settings(compose_config("bench", ["targets.mlp_training_seconds=12.5", "ingest.gb=0.5"]))


def test_dogi_checks_its_numbers_as_its_config_gives_them():
    """Two layers check DOGI's numbers: its own table (ranges; the Python API too) and the
    pipeline's kind check from conf/policy/*.yaml. A key renamed or retyped in one only must
    fail here, not leave one layer checking a parameter that no longer exists."""
    from dogi_ml.policies import policy_number_defaults
    from dogi_ml.policies.dogi import NUMERIC_PARAMS

    from_configs = policy_number_defaults("dogi")
    for key, (kind, *_range) in NUMERIC_PARAMS.items():
        if key in from_configs:  # a default of null (train_span) is not in the configs' numbers
            assert from_configs[key][0] is kind, key
    numbers_not_checked = {key for key in from_configs if key not in NUMERIC_PARAMS}
    assert numbers_not_checked == set()


@pytest.mark.parametrize(("policy", "reads"), [("dogi", "adapt_mu, censored_labels, deployed"), ("sepbit", "variant")])
def test_an_unknown_policy_parameter_names_its_key_and_what_the_scheme_reads(policy, reads):
    """DOGI's message said 'accepted: []' (its parameters were not its accepted_params), and no
    scheme's named the policy.params key or a fix."""
    from dogi_ml.policies import make_policy

    with pytest.raises(ConfigError) as info:
        make_policy(policy, foo=1)
    assert str(info.value).startswith(
        f"policy {policy}: unknown parameter(s) ['foo'] (policy.params.foo) -- drop it or check the name; "
        f"policy={policy} reads: {reads}"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # a run that is not timed ignores the write times, so a misspelt arrival process passed
        ({"arrival": "foo"}, "sim.arrival='foo': unknown density 'foo'"),
        ({"arrival": -5}, "sim.arrival=-5: arrival process needs mean_interval_us > 0"),
        # the check is [0, 100): the message said only ">= 0" for 1e9
        ({"op_ratio": 1e9}, "sim.op_ratio must be >= 0 and below 100"),
        # a timed run's clock wrapped past int64 and ran on times of -2^63, without a word
        (
            {"arrival": 1e300, "raid_chunk_blocks": 16},
            "sim.arrival=1e+300: 8192 requests end at 8.23e+303 µs, past the 64-bit clock (2^62 µs, 146,000 years) "
            "-- give a smaller mean gap in µs",
        ),
    ],
)
def test_sim_settings_a_run_does_not_use_are_still_checked(settings, message):
    from dogi_ml.pipeline.simulate import build_simulator
    from dogi_ml.traces.generators import zipf

    with pytest.raises(ValueError) as info:
        build_simulator(
            zipf(8192, 8192, seed=1), {"name": "sepbit"}, {"segment_blocks": 16, "op_ratio": 0.5, **settings}
        )
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # the test split was empty: scikit-learn's "Found array with 0 sample(s)" traceback
        ({"train_fraction": 0.95}, "data.train_fraction=0.95 + data.val_fraction=0.1 leave no test rows"),
        ({"val_fraction": 0}, "data.val_fraction=0 must be above 0"),
        ({"train_fraction": "most"}, "data.train_fraction='most' is not a number"),
        # "slice step cannot be zero", naming no key
        ({"sample_every": 0}, "data.sample_every=0 must be positive"),
    ],
)
def test_train_data_shares_are_checked_by_name(data, message):
    from dogi_ml.pipeline.train import build_dataset
    from dogi_ml.traces.generators import zipf

    with pytest.raises(ConfigError) as info:
        build_dataset(zipf(4096, 8 * 4096, seed=1), data, log=lambda *a: None)
    assert message in str(info.value)


def test_sweep_probes_try_every_value_once():
    """A sweep's overrides are checked with every value of each comma list, the others at their
    first: the sum of the lists' lengths, not their product."""
    from dogi_ml.cli import sweep_probes

    probes = sweep_probes(["+workload=zipf,ycsb_a,varmail", "policy=a,b", "sim.op_ratio=0.1"])
    assert probes == [
        ["+workload=zipf", "policy=a", "sim.op_ratio=0.1"],
        ["+workload=ycsb_a", "policy=a", "sim.op_ratio=0.1"],
        ["+workload=varmail", "policy=a", "sim.op_ratio=0.1"],
        ["+workload=zipf", "policy=b", "sim.op_ratio=0.1"],
    ]
    assert sweep_probes(["seed=range(0,3)"]) == [["seed=0"], ["seed=1"], ["seed=2"]]
    assert sweep_probes(["policy=a,b", "x=interval(0,1)"]) == []  # Hydra's to expand and report
