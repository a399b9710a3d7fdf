"""A setting that only a mode reads is refused, naming the setting that turns the mode on, when
the user sets it (not to its default) with that mode off: the run would otherwise go on without it
(the audit's "silently ignored" settings: sim.victim_d, sim.gc_garbage_ratio,
sim.raid_chunk_timeout_us, sim.arrival, the oracle options, a stored model's export, nosep's
groups, the study's policy.params advice)."""

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_cli, small_fleet_spec

from dogi_ml.errors import ConfigError
from dogi_ml.pipeline.common import CONF_DIR, compose_config
from dogi_ml.sim import SimConfig

SMALL = [
    "+workload=zipf",
    "workload.capacity_blocks=8192",
    "workload.write_volume=4",
    "sim.segment_blocks=64",
    "progress=false",
]
SIM = {"segment_blocks": 16, "op_ratio": 0.5}


@pytest.fixture(scope="module")
def trace():
    from dogi_ml.traces.generators import zipf

    return zipf(8192, 8192, seed=1)


def build(trace, policy: dict, **sim):
    from dogi_ml.pipeline.simulate import build_simulator

    return build_simulator(trace, policy, {**SIM, **sim})[0]


def test_the_free_segment_count_and_ratio_together_are_refused(trace):
    """sim.gc_free_ratio replaces sim.gc_free_segments as the low watermark: both set, the count
    was dropped without a word (WAF as with the ratio alone). Each alone is read."""
    with pytest.raises(ConfigError) as info:
        build(trace, {"name": "nosep"}, gc_free_segments=5, gc_free_ratio=0.05)
    message = str(info.value)
    assert message.startswith("sim.gc_free_segments=5 and sim.gc_free_ratio=0.05") and "\n" not in message
    assert "drop sim.gc_free_segments, or set sim.gc_free_ratio=null" in message
    assert build(trace, {"name": "nosep"}, gc_free_segments=5).settings["gc_free_segments"] == 5
    by_ratio = build(trace, {"name": "nosep"}, gc_free_ratio=0.05).settings
    assert (by_ratio["physical_segments"], by_ratio["gc_free_segments"]) == (217, 11)  # 5% of 217


# -- sim settings of a mode that is off ---------------------------------------------------------
DEFAULTS = yaml.safe_load((Path(CONF_DIR) / "sim" / "default.yaml").read_text())


@pytest.mark.parametrize(
    ("policy", "settings", "key", "mode_on"),
    [
        ({"name": "nosep"}, {"victim_d": 3}, "sim.victim_d=3", {"victim": "d_choices"}),
        (
            {"name": "nosep"},
            {"gc_garbage_ratio": 0.5},
            "sim.gc_garbage_ratio=0.5",
            {"gc_trigger": "garbage_proportion"},
        ),
        ({"name": "nosep"}, {"raid_chunk_timeout_us": 5}, "sim.raid_chunk_timeout_us=5", {"raid_chunk_blocks": 16}),
        ({"name": "nosep"}, {"arrival": "heavy"}, "sim.arrival=heavy", {"raid_chunk_blocks": 16}),
        (
            {"name": "nosep"},
            {"arrival": 50},
            "sim.arrival=50",
            {"gc_background_free_ratio": 0.2, "gc_idle_gap_us": 1000},
        ),
    ],
)
def test_a_setting_of_a_mode_that_is_off_is_refused_and_read_with_it_on(trace, policy, settings, key, mode_on):
    """Refused with the mode off, naming the key, the setting that turns the mode on and the fix;
    with the mode on the run reads it (its effective settings carry the value); at its default
    (conf/sim/default.yaml's value) it passes with the mode off: nothing the user set."""
    name = next(iter(settings))
    with pytest.raises(ConfigError) as info:
        build(trace, policy, **settings)
    message = str(info.value)
    assert message.startswith(key) and f"drop sim.{name}" in message and "\n" not in message
    assert f"sim.{next(iter(mode_on))}" in message  # the setting that turns the mode on
    sim = build(trace, policy, **settings, **mode_on)
    assert sim.settings[name] == settings[name]
    if name == "victim_d":  # a scheme whose own rule is d-choices reads it too
        assert build(trace, {**policy, "victim": "d_choices"}, **settings).settings["victim_d"] == 3
    assert DEFAULTS[name] == SimConfig.__dataclass_fields__[name].default  # what "the default" means
    build(trace, policy, **{name: DEFAULTS[name]})


def test_simulate_command_refuses_before_reading_the_trace_and_in_a_sweep_job(tmp_path):
    proc = run_cli(["simulate", *SMALL, "policy=nosep", "sim.gc_garbage_ratio=0.5"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: sim.gc_garbage_ratio=0.5 is read only by the garbage-proportion GC trigger, and this run's is "
        "sim.gc_trigger=free_segments -- set sim.gc_trigger=garbage_proportion to use it, or drop sim.gc_garbage_ratio"
    )
    assert not (tmp_path / "cache").exists()  # refused before the workload was generated
    # a job's own override in a -m sweep
    proc = run_cli(
        ["simulate", "-m", *SMALL, "mlflow=false", "policy=nosep", "sim.victim_d=8,3"], tmp_path, check=False
    )
    assert proc.returncode == 2 and "error: sim.victim_d=3 is read only by d-choices victim selection" in proc.stderr


def _reads_checked(key: str) -> bool:
    """Whether a sweep parameter can change what the mode checks read: a sim setting, the scheme's
    own victim rule, a config group other than the workload (a scheme, an ADAPT scheme, ...)."""
    key = key.lstrip("+")
    group = (Path(CONF_DIR) / key).is_dir() and key != "workload"
    return key.startswith("sim.") or key in ("policy", "policy.victim") or group


def _sweep_jobs(params: dict) -> list[list[str]]:
    """One override list per value of each sweep parameter the checks read (:func:`_reads_checked`),
    the others at their first value: every such value is composed once, not the whole product."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    values = {}
    for key, text in params.items():
        parsed = parser.parse_override(f"{key}={text}")
        values[key] = (
            list(parsed.sweep_string_iterator()) if parsed.is_sweep_override() else [parsed.get_value_element_as_str()]
        )
    first = {k: v[0] for k, v in values.items()}
    jobs = [[f"{k}={v}" for k, v in first.items()]]
    for key, vals in values.items():
        if _reads_checked(key):
            jobs += [[f"{k}={value if k == key else first[k]}" for k in values] for value in vals[1:]]
    return jobs


@pytest.mark.slow  # ~240 compositions, 45 s on 2 cores
def test_no_preset_sets_a_setting_its_mode_does_not_read():
    """Every simulate preset's jobs pass the checks a run makes before its trace is read (each value
    of a sweep parameter that can matter once); minos_table1's sim through the oracle command's."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from dogi_ml.pipeline.common import available, sim_config
    from dogi_ml.pipeline.simulate import check_mode_settings, checked_sim_config

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        for preset in available("experiment"):
            text = (Path(CONF_DIR) / "experiment" / f"{preset}.yaml").read_text()
            if "dogi_ml train" in text:
                continue
            command = "oracle" if preset == "minos_table1" else "simulate"
            base = ["+workload=zipf", f"+experiment={preset}"]
            cfg = compose(config_name=command, overrides=base, return_hydra_config=True)
            params = dict(cfg.hydra.sweeper.get("params") or {})
            head = base[1:] if any(k.lstrip("+") == "workload" for k in params) else base
            for job in _sweep_jobs(params):
                job_cfg = compose(config_name=command, overrides=head + job)
                sim = OmegaConf.to_container(job_cfg.sim, resolve=True)
                if command == "oracle":
                    check_mode_settings(sim_config({k: v for k, v in sim.items() if v is not None}))
                else:
                    checked_sim_config(OmegaConf.to_container(job_cfg.policy, resolve=True), sim)


# -- the oracle command --------------------------------------------------------------------------
def oracle_cfg(*overrides):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose_config("oracle", list(overrides)).oracle, resolve=True)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["oracle.kind=opmin", "oracle.max_groups=4"],
            "oracle.max_groups=4 is read only by oracle.kind=nodap, and this run is oracle.kind=opmin -- "
            "set oracle.kind=nodap to use it, or drop oracle.max_groups",
        ),
        (["oracle.kind=opmin", "oracle.min_gain=0.5"], "oracle.min_gain=0.5 is read only by oracle.kind=nodap"),
        (
            ["oracle.kind=segment", "oracle.method=exact"],
            "oracle.method=exact is read only by oracle.kind=opmin|opbudget",
        ),
        (["oracle.kind=opmin", "oracle.percentile_of=invalidated"], "oracle.percentile_of=invalidated is read only"),
        (["oracle.n_user_streams=3"], "oracle.n_user_streams=3 is read only by oracle.kind=opmin"),
        (
            ["+experiment=minos_table1", "oracle.table.kinds=[segment]", "oracle.method=exact"],
            "oracle.method=exact is read only by the opmin and opbudget oracles, and oracle.table.kinds=['segment'] "
            "runs neither -- add opmin to oracle.table.kinds",
        ),
        (
            ["+experiment=minos_table1", "oracle.kind=kmeans"],
            "oracle.table (from +experiment=minos_table1) is read only by oracle.kind=minos_table1",
        ),
    ],
)
def test_an_oracle_option_of_another_kind_is_refused(overrides, line):
    from dogi_ml.pipeline.oracle import check_oracle_options

    with pytest.raises(ConfigError) as info:
        check_oracle_options(oracle_cfg(*overrides))
    assert str(info.value).startswith(line)


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["oracle.max_groups=4", "oracle.candidates=[64,1024]"],
        ["oracle.kind=opmin", "oracle.method=exact", "oracle.n_user_streams=3", "oracle.max_groups=10"],
        ["oracle.kind=percentile", "oracle.percentile_of=invalidated"],
        ["+experiment=minos_table1"],
        ["+experiment=minos_table1", "oracle.method=exact", "oracle.percentile_of=invalidated"],
    ],
)
def test_an_oracle_option_its_kind_reads_passes(overrides):
    from dogi_ml.pipeline.oracle import check_oracle_options

    check_oracle_options(oracle_cfg(*overrides))


def test_oracle_command_honours_output_and_refuses_sim_settings_it_ignores(tmp_path):
    out = tmp_path / "sub" / "opmin.json"
    proc = run_cli(["oracle", *SMALL, "oracle.kind=opmin", f"output={out}"], tmp_path)
    assert f"result: {out}" in proc.stdout and json.loads(out.read_text())["kind"] == "opmin"
    proc = run_cli(["oracle", *SMALL, "oracle.kind=opmin", "sim.victim_d=3"], tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().endswith(
        "error: sim.victim_d=3 is read only by d-choices victim selection, and the MINOS oracles' CB [SepBIT] "
        "rule chooses the victims here -- drop sim.victim_d"
    )
    proc = run_cli(["oracle", *SMALL, "oracle.max_groups=2", "sim.arrival=light"], tmp_path, check=False)
    assert proc.returncode == 2 and "error: sim.arrival=light sets the writes' wall-clock times" in proc.stderr


def test_nodap_search_writes_its_result_to_output(tmp_path):
    out = tmp_path / "nodap.json"
    run_cli(["oracle", *SMALL, "oracle.max_groups=2", f"output={out}"], tmp_path)
    assert json.loads(out.read_text())["n_groups"] >= 1


def test_the_oracle_options_table_covers_every_kind_and_option():
    """check_oracle_options reads ORACLE_READS, a table beside the oracles: a kind added to the
    MINOS oracles, or an option added to conf/oracle.yaml, must be entered there, or the first
    would be refused as unknown and the second as read by no oracle."""
    from dogi_ml.oracles.minos_oracles import KINDS
    from dogi_ml.pipeline.oracle import ORACLE_READS

    assert set(ORACLE_READS) == {"nodap", *KINDS, "minos_table1"}
    options = set(yaml.safe_load((Path(CONF_DIR) / "oracle.yaml").read_text())["oracle"]) - {"kind"}
    read = {key for keys in ORACLE_READS.values() for key in keys}
    assert options <= read and read - options <= {"table"}  # table: +experiment=minos_table1's


# -- export from a stored model -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "given"),
    [
        (["+workload=zipf"], "+workload=zipf"),
        (["model=gru"], "model=gru"),
        (["model.params.epochs=3"], "model.params.epochs=3"),
        (["data.sample_every=3"], "data.sample_every=3"),
        (["latency_budget_s=0.01"], "latency_budget_s=0.01"),
    ],
)
def test_export_of_a_stored_model_refuses_the_settings_it_ignores(overrides, given):
    from dogi_ml.pipeline.export import check_stored_model_settings

    cfg = compose_config("export", ["export.run_id=abc", *overrides])
    with pytest.raises(ConfigError) as info:
        check_stored_model_settings(cfg, "export.run_id=abc")
    key = given.split("=")[0]
    assert str(info.value).startswith(f"{given} is ignored with export.run_id=abc")
    assert str(info.value).endswith(f"drop {key}, or drop export.run_id to train a new model with it")
    # the defaults given again are no setting of the user's; seed and the export's own keys are read
    cfg = compose_config("export", ["export.run_id=abc", "model=mlp", "data.sample_every=10", "seed=3"])
    check_stored_model_settings(cfg, "export.run_id=abc")


def test_export_command_refuses_before_looking_the_run_up(tmp_path):
    proc = run_cli(["export", "export.run_id=0123456789abcdef", "+workload=zipf"], tmp_path, check=False)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("error: +workload=zipf is ignored with export.run_id=0123456789abcdef")
    )
    # a model file whose run's config.yaml is beside it: the same
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.pkl").write_bytes(b"not read")
    (run / "config.yaml").write_text("workload: {name: ycsb_a}\n")
    proc = run_cli(["export", f"export.model_path={run / 'model.pkl'}", "model=gru"], tmp_path, check=False)
    assert proc.returncode == 2 and f"error: model=gru is ignored with export.model_path={run}" in proc.stderr


def test_export_of_a_lone_model_file_refuses_a_model_setting_and_reads_workload_and_data(tmp_path):
    """A model file with no run config beside it: the export builds the dataset from this
    command's workload and data settings (read), but the model is the file's, so model=gru was
    ignored without a word."""
    from dogi_ml.pipeline.export import check_stored_model_settings

    lone = tmp_path / "model.pkl"
    lone.write_bytes(b"not read")
    proc = run_cli(["export", "+workload=zipf", f"export.model_path={lone}", "model=gru"], tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: model=gru is ignored with export.model_path={lone}: the file holds its own trained model (and "
        "no run config beside it); the export builds its dataset from this command's workload and data settings "
        "-- drop model, or drop export.model_path to train a new model with it"
    )
    source = f"export.model_path={lone}"
    with pytest.raises(ConfigError, match=r"^model.params.hidden=\[8\] is ignored"):
        check_stored_model_settings(
            compose_config("export", [source, "model.params.hidden=[8]"]), source, model_only=True
        )
    check_stored_model_settings(
        compose_config("export", [source, "+workload=zipf", "data.sample_every=3"]), source, model_only=True
    )


# -- nosep's one group ---------------------------------------------------------------------------
def test_nosep_refuses_more_than_one_group(trace):
    from dogi_ml.policies import make_policy

    with pytest.raises(ConfigError) as info:
        build(trace, {"name": "nosep", "n_groups": 4})
    assert str(info.value).startswith(
        "policy=nosep places every write in one group (no separation), so "
        "policy.n_groups=4 would leave the others empty -- drop policy.n_groups"
    )
    assert make_policy("nosep", 1).n_groups == make_policy("nosep").n_groups == 1


@pytest.mark.parametrize(
    ("scheme", "n_groups", "fix"),
    [
        ("sepgc", 3, "drop policy.n_groups"),
        ("sepbit", 3, "drop policy.n_groups"),
        ("adapt", 4, "drop policy.n_groups"),
        ("dac", 1, "give policy.n_groups=6 (the default)"),
        ("mida", 300, "give policy.n_groups=6 (the default)"),
        ("warcip", 1, "give policy.n_groups=6 (the default)"),
    ],
)
def test_a_scheme_with_a_fixed_number_of_groups_names_the_key_and_the_fix(scheme, n_groups, fix):
    """The schemes whose group count is fixed or bounded said 'got n_groups=3' with no fix."""
    from dogi_ml.policies import make_policy

    with pytest.raises(ConfigError) as info:
        make_policy(scheme, n_groups)
    message = str(info.value)
    assert message.startswith(f"policy={scheme} ") and f"got policy.n_groups={n_groups} -- {fix}" in message


# -- the study's policy.params advice -------------------------------------------------------------
@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    from dogi_ml.traces.fleet import generate_fleet

    return generate_fleet(tmp_path_factory.mktemp("fleet"), 2, seed=3, spec=small_fleet_spec()).parent


FAST = ["sim.segment_blocks=16", "sim.op_ratio=0.25", "hydra/launcher=basic", "mlflow=false", "plot=false"]


def study(monkeypatch, cwd: Path, capsys, *args) -> tuple[int, str]:
    """``python -m dogi_ml study ARGS`` in this process (as tests/test_study.py): (status, stderr)."""
    from dogi_ml import cli

    monkeypatch.chdir(cwd)
    monkeypatch.setenv("DOGI_ML_CACHE", str(cwd / "cache"))
    monkeypatch.setattr("dogi_ml.pipeline.study.code_version", lambda: "v1")
    capsys.readouterr()
    try:
        cli.main(["study", *args, *FAST])
        status = 0
    except SystemExit as exc:
        status = exc.code
    return status, capsys.readouterr().err


def test_study_params_advice_leads_to_a_study_that_runs(fleet, tmp_path, monkeypatch, capsys):
    """policy.params.variant with sepbit (which has it) and nosep (which has not): the advice was
    to add + (then: to remove it), round and round; now it says what composes, and that runs."""
    args = [f"fleet={fleet}", f"out={tmp_path / 'out'}"]
    for spelling in ("policy.params.variant=paper", "+policy.params.variant=paper"):
        status, err = study(monkeypatch, tmp_path, capsys, *args, "policy=sepbit,nosep", spelling)
        assert status == 2 and len(err.strip().splitlines()) == 1, err
        assert err.startswith(
            "error: policy.params.variant is in the config of sepbit and not of nosep, and a study gives each "
            "policy.params override to every scheme"
        )
        assert "run sepbit with policy.params.variant=paper in one study and nosep in another" in err
    # the advice followed: each study runs
    status, err = study(monkeypatch, tmp_path, capsys, *args, "policy=sepbit", "policy.params.variant=paper")
    assert status == 0, err
    status, err = study(monkeypatch, tmp_path, capsys, f"fleet={fleet}", f"out={tmp_path / 'o2'}", "policy=nosep")
    assert status == 0, err
    # a + on a key every scheme has: the advice is to drop it, and that runs
    status, err = study(monkeypatch, tmp_path, capsys, *args, "policy=sepbit,dac", "+policy.params.variant=paper")
    assert status == 2 and "give policy.params.variant=paper without the leading +" in err
    status, err = study(monkeypatch, tmp_path, capsys, *args, "policy=sepbit,dac", "policy.params.variant=paper")
    assert status == 0, err


def test_study_refuses_a_sim_setting_of_a_mode_that_is_off_before_any_job(fleet, tmp_path, monkeypatch, capsys):
    status, err = study(
        monkeypatch,
        tmp_path,
        capsys,
        f"fleet={fleet}",
        f"out={tmp_path / 'out'}",
        "policy=sepbit,nosep",
        "sim.victim_d=3",
    )
    assert status == 2 and err.startswith("error: sim.victim_d=3 is read only by d-choices victim selection")
    assert not (tmp_path / "out").exists()
