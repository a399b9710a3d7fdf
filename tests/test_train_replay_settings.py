"""Nothing silent in train's and replay's settings: each model parameter, data setting, train's
own settings and each ``zns`` setting of replay is honoured or refused in one line naming its key
and the valid range (the CLI: ``error: <problem> -- <fix>``, exit status 2), never accepted as
nonsense (``lr=-1``, ``epochs=0``, ``max_open=-1``) nor a traceback (``hidden=32``,
``dropout=1.5``)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_cli

from dogi_ml.errors import ConfigError
from dogi_ml.models import MODELS, make_model, model_names
from dogi_ml.pipeline.train import Dataset, build_dataset, train_and_evaluate
from dogi_ml.traces.generators import generate

SMALL = ["+workload=ycsb_a", "workload.capacity_blocks=16384", "workload.write_volume=6", "latency_budget_s=0.02"]
REPLAY = [
    "+workload=zipf", "workload.capacity_blocks=4096", "workload.write_volume=2", "policy=sepgc",
    "sim.segment_blocks=64", "sim.op_ratio=0.25", "mlflow=false", "progress=false",
]  # fmt: skip


def one_error_line(proc) -> str:
    """The run's one stderr line (exit status 2, no traceback)."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


# -- the audit's commands, through the command line ----------------------------------------------
@pytest.mark.parametrize(
    "override,message",
    [
        ("model.params.lr=-1", "error: model.params.lr=-1 must be above 0 -- give e.g. model.params.lr=0.0003"),
        ("model.params.epochs=0", "error: model.params.epochs=0 must be positive -- give e.g. model.params.epochs=15"),
        ("latency_budget_s=-1", "error: latency_budget_s=-1 must be >= 0 -- give e.g. latency_budget_s=0.5"),
        (
            "model.params.hidden=32",
            "error: model.params.hidden=32 is not a list of layer widths -- give a list, e.g. model.params.hidden=[32,32]",
        ),
        (
            "model.params.dropout=1.5",
            "error: model.params.dropout=1.5 must be >= 0 and below 1 -- give e.g. model.params.dropout=0.2",
        ),
        (
            "model.params.batch_size=0",
            "error: model.params.batch_size=0 must be positive -- give e.g. model.params.batch_size=128",
        ),
    ],
)
def test_train_refuses_a_bad_setting_in_one_line(tmp_path, override, message):
    """lr=-1, epochs=0 and latency_budget_s=-1 trained and reported metrics; hidden=32 and
    dropout=1.5 were tracebacks, batch_size=0 'range() arg 3 must not be zero'."""
    assert one_error_line(run_cli(["train", *SMALL, override], tmp_path, check=False)) == message


@pytest.mark.parametrize(
    "override,message",
    [
        ("zns.max_open=-1", "error: zns.max_open=-1 must be >= 0 and <= 4294967295 -- give e.g. zns.max_open=14"),
        (
            "zns.verify_every=-1",
            "error: zns.verify_every=-1 must be >= 0 and <= 9223372036854775807 -- give e.g. zns.verify_every=0 "
            "(null: the default)",
        ),
        (
            "zns.zones=-1",
            "error: zns.zones=-1 must be >= 1 and <= 4294967295 -- give e.g. zns.zones=64 (null: the default)",
        ),
        (
            "device=file:",
            "error: device=file: names no file -- give the emulated device's path, e.g. device=file:/tmp/dev.zns",
        ),
    ],
)
def test_replay_refuses_a_bad_setting_in_one_line(tmp_path, override, message):
    """max_open=-1 and verify_every=-1 replayed (no limit, no periodic verify), zones=-1 was the
    harness's 'cannot size FILE: File too large', device=file: its 'cannot open : No such file'."""
    args = ["replay", *REPLAY, f"device=file:{tmp_path / 'd.zns'}", override]
    assert one_error_line(run_cli(args, tmp_path, check=False)) == message


@pytest.mark.parametrize(
    "limits,message",
    [
        (
            ["zns.max_open=4", "zns.max_active=4"],
            "error: zns.max_open=4 is below the 6 zones policy=sepbit keeps open (one per group) -- give "
            "zns.max_open >= 6 (or 0: no limit), or a scheme with fewer groups",
        ),
        (
            ["zns.max_open=0", "zns.max_active=5"],
            "error: zns.max_active=5 is below the 6 zones policy=sepbit keeps open (one per group) -- give "
            "zns.max_active >= 6 (or 0: no limit), or a scheme with fewer groups",
        ),
    ],
)
def test_replay_names_the_zone_limit_below_the_schemes_groups(tmp_path, limits, message):
    """A file device with fewer open/active zones than the scheme's groups got the harness's 'too
    few zones for the groups ... the device allows 4 open / 4 active', which names no setting."""
    args = ["replay", *REPLAY, "policy=sepbit", f"device=file:{tmp_path / 'd.zns'}", *limits]
    assert one_error_line(run_cli(args, tmp_path, check=False)) == message


# -- every model parameter: wrong type, zero, negative, NaN, huge --------------------------------
NAN = float("nan")
#: (model, parameter, value) that must be refused naming model.params.<parameter>
BAD_PARAMS = [
    *[
        (model, key, value)
        for model in ("mlp", "deepfm", "gru", "tcn")
        for key, values in {
            "lr": ("abc", 0, -1, NAN),
            "weight_decay": ("abc", -1, NAN),
            "batch_size": ("abc", 0, -1, NAN, 2.5),
            "epochs": ("abc", 0, -1, NAN),
            "patience": ("abc", 0, -1, NAN),
            "threads": ("abc", 0, -1, NAN),
        }.items()
        for value in values
    ],
    *[(m, "dropout", v) for m in ("mlp", "deepfm", "tcn") for v in ("abc", -1, 1, 1.5, NAN, 1e12)],
    *[(m, "hidden", v) for m in ("mlp", "deepfm") for v in ("abc", 0, 32, -1, NAN, [32, 0], [32, -1], [32, 2.5])],
    *[("mlp", "backend", v) for v in ("abc", 0, NAN)],
    *[("deepfm", "embedding", v) for v in ("abc", 0, -1, NAN)],
    *[("gru", "hidden", v) for v in ("abc", 0, -1, NAN, [32])],
    *[("tcn", "channels", v) for v in ("abc", 0, -1, NAN, [], [64, 0])],
    *[("tcn", "kernel", v) for v in ("abc", 0, -1, NAN)],
    *[("tcn", "task", v) for v in ("abc", 0)],
    *[("lightgbm", "n_estimators", v) for v in ("abc", 0, -1, NAN, 1e12)],
    *[("lightgbm", "num_leaves", v) for v in ("abc", 0, 1, -1, NAN, 1e12)],
    *[("lightgbm", "learning_rate", v) for v in ("abc", 0, -1, NAN)],
    *[("lightgbm", "early_stopping", v) for v in ("abc", 0, -1, NAN, 1e12)],
    *[("random_forest", "n_estimators", v) for v in ("abc", 0, -1, NAN, 1e12)],
    *[("random_forest", "max_depth", v) for v in ("abc", 0, -1, NAN)],
    *[("random_forest", "min_samples_leaf", v) for v in ("abc", 0, -1, NAN)],
    *[("logistic", "C", v) for v in ("abc", 0, -1, NAN)],
    *[("logistic", "max_iter", v) for v in ("abc", 0, -1, NAN)],
    *[(m, "threads", v) for m in ("lightgbm", "random_forest") for v in ("abc", 0, -1)],
]


@pytest.mark.parametrize("model,key,value", BAD_PARAMS, ids=[f"{m}-{k}={v}" for m, k, v in BAD_PARAMS])
def test_a_bad_model_parameter_is_refused_naming_it(model, key, value):
    """Before the fix these trained on nonsense (epochs=0: no training, batch_size=-1: no batch,
    patience=0: one epoch, dropout=nan, embedding=0, max_iter=0, early_stopping=0: off) or failed
    deep in PyTorch, LightGBM or numba without the key."""
    with pytest.raises(ConfigError, match=rf"^model\.params\.{key}=") as err:
        make_model(model, 3, 4, where="model.params", **{key: value})
    assert "\n" not in str(err.value) and " -- give " in str(err.value)


def test_every_model_parameter_has_a_rule():
    """A parameter added to a model's defaults without a rule would be read unchecked."""
    for name in model_names():
        cls = MODELS[name]
        assert set(cls.rules) == set(cls.defaults), name


def test_good_values_pass_and_whole_floats_are_read_as_counts():
    model = make_model("mlp", 3, 4, where="model.params", epochs=1e3, hidden=[16.0], dropout=0, backend="torch")
    assert model.params["epochs"] == 1000 and model.params["hidden"] == [16] and model.params["dropout"] == 0
    assert make_model("random_forest", 3, 4, max_depth=None).params["max_depth"] is None
    assert make_model("mlp", 3, 4, hidden=[]).params["hidden"] == []  # a linear model


def test_the_policies_key_is_the_default():
    """The learned policies pass their model_params without naming where they came from."""
    with pytest.raises(ConfigError, match=r"^model_params\.epochs=0 must be positive"):
        make_model("gru", 2, 4, epochs=0)


def _rows(sequence: bool = False):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 1000, (600, 5, 4) if sequence else (600, 4))
    return X[:500], rng.integers(0, 3, 500), X[500:], rng.integers(0, 3, 100)


@pytest.mark.parametrize("name,params", [("mlp", {}), ("mlp", {"backend": "torch"}), ("deepfm", {}), ("tcn", {})])
def test_a_diverged_training_is_refused_naming_the_learning_rate(name, params):
    """lr=1e12 trained to a NaN loss and a model predicting one class, without a word."""
    model = make_model(name, 3, 4, where="model.params", lr=1e12, epochs=2, **params)
    with pytest.raises(
        ConfigError, match=r"training diverged: the training loss is (nan|inf) .* lower model\.params\.lr"
    ):
        model.fit(*_rows(sequence=model.sequence))


@pytest.mark.parametrize(
    "name,params,named",
    [
        ("mlp", {"hidden": [10**12]}, "model.params.hidden=[1000000000000]"),
        ("mlp", {"hidden": [10**12], "backend": "torch"}, "model.params.hidden=[1000000000000]"),
        ("deepfm", {"embedding": 10**12}, "model.params.embedding=1000000000000"),
        ("gru", {"hidden": 10**12}, "model.params.hidden=1000000000000"),
        ("tcn", {"kernel": 10**12}, "model.params.kernel=1000000000000"),
    ],
)
def test_a_network_too_large_for_memory_names_its_sizes(name, params, named):
    """Terabyte-sized networks (the allocator refuses them at once) were PyTorch's or numpy's traceback."""
    model = make_model(name, 3, 4, where="model.params", epochs=1, **params)
    with pytest.raises(ConfigError, match="does not fit in memory") as err:
        model.fit(*_rows(sequence=model.sequence))
    assert named in str(err.value)


def test_scikit_learns_refusal_names_the_key():
    """A value the rules pass and scikit-learn refuses: its message, under the key's name."""
    X, y, Xv, yv = _rows()
    n = len(X) + len(Xv)
    ds = Dataset(
        X=np.concatenate([X, Xv, Xv]),
        y=np.concatenate([y, yv, yv]),
        rows=np.arange(n + len(Xv)),
        inv=np.ones(n + len(Xv), np.int64),
        feature_names=["lba", "prev_lba", "freq", "chunk_freq"],
        class_names=["a", "b", "c"],
        splits={"train": slice(0, 500), "val": slice(500, 600), "test": slice(600, 700)},
    )
    cfg = {"name": "random_forest", "history": None, "params": {"min_samples_leaf": 1.5}}
    with pytest.raises(
        ConfigError, match=r"^model\.params\.min_samples_leaf for model random_forest: The 'min_samples_leaf'"
    ):
        train_and_evaluate(ds, cfg, latency_budget_s=0.0)


@pytest.mark.parametrize(
    "model_cfg,seed,budget,message",
    [
        ({"name": "mlp"}, "abc", 0.5, r"^seed='abc' is not a whole number"),
        ({"name": "mlp"}, -1, 0.5, r"^seed=-1 must be >= 0 and <= 4294967295"),
        ({"name": "mlp"}, 0, NAN, r"^latency_budget_s=nan is not a number"),
        ({"name": "gru", "history": 0}, 0, 0.5, r"^model\.history=0 must be positive -- give e\.g\. model\.history=8$"),
        ({"name": "gru", "history": "abc"}, 0, 0.5, r"^model\.history='abc' is not a whole number"),
    ],
)
def test_trains_own_settings_are_checked_by_name(model_cfg, seed, budget, message):
    """seed=abc was 'invalid literal for int()', seed=-1 numpy's traceback, history=abc an int() error."""
    from dogi_ml.pipeline.train import check_train_settings

    with pytest.raises(ConfigError, match=message):
        check_train_settings(model_cfg, seed, budget)


# -- data settings -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace():
    """2048 blocks written six times over: some 800 sampled rows."""
    return generate("zipf", capacity_blocks=2048, n_writes=6 * 2048, seed=1, theta=0.8)


@pytest.mark.parametrize(
    "data,message",
    [
        ({"mu": 0}, r"^data\.mu=0 must be positive"),  # an `or` read it as null
        ({"mu": NAN}, r"^data\.mu=nan is not a whole number"),
        ({"window_blocks": -1}, r"^data\.window_blocks=-1 must be positive"),
        ({"max_samples": -1}, r"^data\.max_samples=-1 must be positive"),  # dropped the last row
        ({"max_samples": "abc"}, r"^data\.max_samples='abc' is not a whole number"),
        ({"sample_start": -1}, r"^data\.sample_start=-1 must be >= 0"),
        ({"labels": "quantile", "quantile_bins": 1}, r"^data\.quantile_bins=1 must be >= 2"),  # one class
        (
            {"labels": "quantile", "quantile_bins": 10**12},
            r"^data\.quantile_bins=1000000000000 exceeds the \d+ training rows",
        ),
        ({"labels": "binary", "binary_threshold": 0}, r"^data\.binary_threshold=0 must be positive"),
        ({"features": "lba"}, r"^data\.features='lba' is not a list -- give a list, e\.g\. data\.features=\[lba\]"),
        ({"features": ["lba", "nope"]}, r"^data\.features: unknown feature\(s\) \['nope'\]"),
    ],
)
def test_a_bad_data_setting_is_refused_naming_it(trace, data, message):
    with pytest.raises(ConfigError, match=message):
        build_dataset(trace, data, log=lambda *a: None)


@pytest.mark.parametrize(
    "history,message",
    [(0, r"^model\.history=0 must be positive"), (10**12, r"^model\.history=1000000000000 is longer than the trace's")],
)
def test_a_bad_history_is_refused_before_the_windows_are_built(trace, history, message):
    """history=1e12 asked numpy for the windows' memory."""
    with pytest.raises(ConfigError, match=message):
        build_dataset(trace, {}, sequence_history=history)


# -- replay's zns settings -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "zns,message",
    [
        ({"max_open": -1}, r"^zns\.max_open=-1 must be >= 0 and <= 4294967295"),
        ({"max_open": 1e12}, r"^zns\.max_open=1000000000000 must be >= 0 and <= 4294967295"),  # cut to 32 bits
        ({"max_open": "abc"}, r"^zns\.max_open='abc' is not a whole number"),
        ({"max_active": -1}, r"^zns\.max_active=-1 must be >= 0"),
        ({"max_open": 20}, r"^zns\.max_open=20 exceeds zns\.max_active=14 \(an open zone is also active\)"),
        ({"verify_every": -1}, r"^zns\.verify_every=-1 must be >= 0"),
        (
            {"verify_every": 1e20},
            r"^zns\.verify_every=1e\+20 does not fit in 64 bits -- give e\.g\. zns\.verify_every=0",
        ),
        ({"zones": 0}, r"^zns\.zones=0 must be >= 1"),  # an `or` read it as null
        ({"zones": NAN}, r"^zns\.zones=nan is not a whole number"),
        ({"progress_every": -1}, r"^zns\.progress_every=-1 must be >= 0"),  # a report after every write
        ({"verify": "abc"}, r"^zns\.verify='abc' is not true or false"),
        ({"keep": "abc"}, r"^zns\.keep='abc' is not true or false"),
        ({"compare_sim": "abc"}, r"^zns\.compare_sim='abc' is not true or false"),
    ],
)
def test_a_bad_zns_setting_is_refused_naming_it(zns, message):
    from dogi_ml.pipeline.replay import check_zns

    with pytest.raises(ConfigError, match=message):
        check_zns(zns)


def test_zns_values_the_harness_reads_pass():
    from dogi_ml.pipeline.replay import check_zns

    z = check_zns({"zones": None, "max_open": 0, "max_active": 0, "verify_every": None, "flush_every": 1e3})
    assert z["max_open"] == 0 and z["verify_every"] is None and z["flush_every"] == 1000  # 0: no limit


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    from dogi_ml.traces.binfmt import read_binary, write_trace

    t = generate("zipf", capacity_blocks=4096, n_writes=2 * 4096, seed=3, theta=1.0)
    t.name = "zipf4k"
    t = read_binary(write_trace(t, tmp_path_factory.mktemp("trace") / "zipf4k.dtr"))
    t.meta["capacity_blocks"] = 4096
    return t


SIM = {"segment_blocks": 64, "op_ratio": 0.25, "victim": "greedy", "gc_free_segments": 2}
SEPGC = {"name": "sepgc", "n_groups": 2, "params": {}}


def test_progress_every_0_means_no_progress_reports(small_trace, tmp_path):
    """An `or` read zns.progress_every=0 as 4096."""
    from dogi_ml.pipeline.replay import replay_args, trace_file

    path = trace_file(small_trace, tmp_path)
    dev = f"file:{tmp_path / 'd.zns'}"
    args, _ = replay_args(path, dev, 4096, SEPGC, SIM, {"progress_every": 0})
    assert not [a for a in args if a.startswith("--progress")], args
    args, _ = replay_args(path, dev, 4096, SEPGC, SIM, {"progress_every": None})
    assert "--progress=4096" in args


def test_too_few_zones_for_the_run_name_zns_zones(small_trace, tmp_path, c_compiler):
    """The harness's 'the trace does not fit the device' named no setting."""
    from dogi_ml.pipeline.replay import replay

    with pytest.raises(
        ConfigError, match=r"^zns\.zones=10 is fewer than the 80 zones the run needs .* zns\.zones >= 80"
    ):
        replay(small_trace, SEPGC, SIM, f"file:{tmp_path / 'd.zns'}", {"zones": 10}, progress=False)
    with pytest.raises(ConfigError, match=r"^device=file: names no file"):
        replay(small_trace, SEPGC, SIM, "file:", {}, progress=False)


def test_a_file_device_larger_than_its_file_system_names_zns_zones(small_trace, tmp_path, c_compiler):
    """zns.zones=2**32-1 (2 PiB, sparse) was the harness's 'cannot size FILE: File too large'."""
    from dogi_ml.pipeline.replay import replay

    zones = 2**32 - 1
    probe = tmp_path / "probe"
    try:
        with open(probe, "ab") as fh:
            fh.truncate(zones * 128 * 4096)
    except OSError:
        pass
    else:
        pytest.skip(f"the file system of {tmp_path} takes a 2 PiB sparse file")
    with pytest.raises(ConfigError, match=rf"^zns\.zones={zones}: a file device of {zones} zones .* is larger than"):
        replay(small_trace, SEPGC, SIM, f"file:{tmp_path / 'd.zns'}", {"zones": zones}, progress=False)
