"""Every config in every group composes and instantiates (lightning-hydra-template style)."""

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from dogi_ml.cli import CONF_DIR, available
from dogi_ml.pipeline.common import check_preset_order
from dogi_ml.policies import make_policy, policy_names
from dogi_ml.sim import SimConfig
from dogi_ml.traces.workload import load_workload

GENERATED = [
    w
    for w in available("workload")
    if OmegaConf.load(Path(CONF_DIR) / "workload" / f"{w}.yaml").get("source") == "generator"
]


def compose_cfg(command, overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        return compose(config_name=command, overrides=overrides)


def test_every_command_config_composes():
    for command in ("train", "simulate", "ingest", "stats", "print", "bench"):
        cfg = compose_cfg(command, [])
        assert cfg is not None
    assert "workload" not in compose_cfg("simulate", [])  # chosen with +workload=NAME
    assert "workload" not in compose_cfg("train", [])


@pytest.mark.parametrize("model", available("model"))
def test_every_model_config_instantiates(model):
    from dogi_ml.models import make_model

    cfg = compose_cfg("train", [f"model={model}"])
    m = make_model(cfg.model.name, 10, len(cfg.data.features), **OmegaConf.to_container(cfg.model.params))
    assert m.name == model
    assert (cfg.model.history is not None) == m.sequence


@pytest.mark.parametrize("launcher", ["joblib", "slurm", "slurm_local"])
def test_launcher_configs_compose(launcher):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(config_name="train", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert "launcher" in cfg.hydra


@pytest.mark.parametrize("policy", available("policy"))
def test_every_policy_config_instantiates(policy):
    cfg = compose_cfg("simulate", [f"policy={policy}"])
    p = make_policy(cfg.policy.name, cfg.policy.n_groups, **OmegaConf.to_container(cfg.policy.params))
    assert p.name == cfg.policy.name == policy
    if cfg.policy.n_groups is not None:  # null: the scheme decides (e.g. NoDaP's search)
        assert p.n_groups == cfg.policy.n_groups


@pytest.mark.parametrize("scheme", available("adapt_scheme"))
def test_every_adapt_scheme_instantiates(scheme):
    """The ADAPT presets' schemes (conf/adapt_scheme), merged over the preset's policy."""
    cfg = compose_cfg("simulate", ["+workload=zipf", "+experiment=adapt_fig11", f"+adapt_scheme={scheme}"])
    p = make_policy(cfg.policy.name, cfg.policy.n_groups, **OmegaConf.to_container(cfg.policy.params))
    assert p.name == cfg.policy.name and p.n_groups == cfg.policy.n_groups
    if scheme == "adapt_ext":
        assert p.label() == "adapt[+gcagg+gccold+ghostgc+dcold]" and p.min_ghost_segment == 8


def test_every_registered_policy_has_a_config():
    assert set(policy_names()) <= set(available("policy"))


def test_sim_config_fields_match_the_dataclass():
    cfg = OmegaConf.to_container(compose_cfg("simulate", []).sim)
    known = set(SimConfig.__dataclass_fields__) | {"output"}
    assert set(cfg) <= known, f"sim config keys without a SimConfig field: {set(cfg) - known}"
    SimConfig.from_mapping(cfg)


@pytest.mark.parametrize("workload", GENERATED)
def test_every_generated_workload_builds_at_small_scale(workload):
    cfg = compose_cfg(
        "simulate", [f"+workload={workload}", "workload.capacity_blocks=4096", "workload.write_volume=1.0"]
    )
    trace = load_workload(cfg.workload, cache_dir=None)
    assert trace.block_writes.size == 4096
    assert trace.block_writes.max() < 4096


def test_file_workload_requires_path():
    from dogi_ml.traces.workload import WorkloadError

    cfg = compose_cfg("simulate", ["+workload=file"])
    with pytest.raises(WorkloadError, match="workload.path"):
        load_workload(cfg.workload, cache_dir=None)


@pytest.mark.parametrize("experiment", available("experiment"))
def test_every_experiment_composes(experiment):
    """An experiment preset composes under the command it is written for (its first line says)."""
    first = (Path(CONF_DIR) / "experiment" / f"{experiment}.yaml").read_text()
    command = "train" if "dogi_ml train" in first else "simulate"
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(
            config_name=command, overrides=["+workload=zipf", f"+experiment={experiment}"], return_hydra_config=True
        )
    if command == "simulate":
        sim = OmegaConf.to_container(cfg.sim)
        if experiment == "minos_table1":  # null placeholders that oracle.table fills per run
            sim = {**sim, "segment_blocks": 512, "prefill": False}
        SimConfig.from_mapping(sim)
    else:
        sweep = cfg.hydra.sweeper.params
        for model in sweep.model.split(","):
            assert model in available("model")
        for wl in sweep["+workload"].split(","):
            assert wl in available("workload")


@pytest.mark.parametrize("experiment", [e for e in available("experiment") if e.startswith("minos_fig")])
def test_minos_presets_run_the_papers_default_configuration(experiment):
    """MINOS §5.1: "a 512 MiB segment size and a 15% OP space" by default; only Fig. 15's preset
    (minos_fig17) varies the OP, and it includes 15%."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(
            config_name="simulate", overrides=["+workload=zipf", f"+experiment={experiment}"], return_hydra_config=True
        )
    swept = cfg.hydra.sweeper.params.get("sim.op_ratio")
    if swept is None:
        assert cfg.sim.op_ratio == pytest.approx(0.15)
    else:
        assert 0.15 in [float(x) for x in str(swept).split(",")]


REGENERATE = Path(CONF_DIR).parent / "docs" / "results" / "regenerate.sh"


def _regenerate_commands() -> list[tuple[str, list[str]]]:
    """The simulate and oracle command lines of ``docs/results/regenerate.sh``: ``(command,
    overrides)``, continuation lines joined, the MINOS layouts' loop expanded from its case arms."""
    import shlex

    text = REGENERATE.read_text().replace("\\\n", " ")
    arms = [params.split() for params in re.findall(r'^\s*\w+\) params="([^"]*)" ;;', text, re.M)]
    commands = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "sweep":
            command, args = "simulate", words[2:]
        elif words[0] == "run" and len(words) > 1 and words[1] in ("simulate", "oracle"):
            command, args = words[1], [w for w in words[2:] if w != "-m"]
        else:
            continue
        if "$params" in args:
            commands += [(command, [a for w in args for a in (arm if w == "$params" else [w])]) for arm in arms]
        else:
            commands.append((command, args))
    return commands


def test_regenerate_sh_lists_every_preset_it_should():
    commands = _regenerate_commands()
    # 7 DOGI, 14 MINOS (3 x 2 layouts), 18 Shiro (2 the count-state agent's table frozen, 3 the read
    # bit's: learning, the rules, its table frozen), 6 ADAPT,
    # 31 hybrid (4 the bound, 1 the planner, 4 at 16 GiB, 9 the lifetime source chosen online: 2 of
    # them with CB [SepBIT] behind expiry, 2 with the first plan at half a capacity, 2 with both; 1
    # the ablation of the chosen-online hybrid; 4 planning on the counts' predictions until the
    # samples mature, 2 of them with CB [SepBIT]; 2 the same with the counts restarted at detected
    # changes (count_reset); 2 the samples with cost-benefit by the square root of age)
    assert len(commands) == 76
    assert (
        "simulate",
        ["+experiment=adapt_fig11", "++workload.capacity_blocks=1048576", "output=$R/adapt_fig11_1m"],
    ) in commands


def _first_job(overrides: list[str]) -> list[str]:
    """``overrides`` with each sweep (``a,b,c``) replaced by its first value; a key given twice (a
    preset's sweep parameter the command line sets again) keeps the last value at the first one's
    place, as Hydra's BasicSweeper.split_arguments does."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    first: dict[str, str] = {}
    for parsed in OverridesParser.create().parse_overrides(overrides):
        sweep = parsed.is_sweep_override()
        value = next(iter(parsed.sweep_string_iterator())) if sweep else parsed.get_value_element_as_str()
        first[parsed.get_key_element()] = f"{parsed.get_key_element()}={value}"
    return list(first.values())


@pytest.mark.parametrize(
    "command, args", _regenerate_commands(), ids=lambda x: x if isinstance(x, str) else " ".join(x)
)
def test_every_regenerate_sh_command_composes(command, args):
    """Each command of ``make results`` composes as Hydra composes it: the primary config with the
    command line's plain overrides (a key a sweep adds later needs ``++``), then the sweep's first
    job (the preset's sweep parameters, then the command line)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [a for a in args if not a.startswith("hydra.")]
    parsed = OverridesParser.create().parse_overrides(overrides)
    plain = [o for o, p in zip(overrides, parsed, strict=True) if not p.is_sweep_override()]
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(config_name=command, overrides=plain, return_hydra_config=True)
        params = cfg.hydra.sweeper.get("params") or {}
        first = _first_job([f"{k}={v}" for k, v in params.items()] + overrides)
        job = compose(config_name=command, overrides=first)
    assert job is not None
    check_preset_order(job, first)  # no group added after the preset replaces one of its values


def test_a_group_added_after_a_preset_may_not_replace_its_values(tmp_path):
    """+workload=zipf after +experiment=shiro_agent: zipf's defaults (1 GiB, 16 capacities) would
    replace the preset's 65,536 blocks written 8 times without a word; refused with the key and the
    fix, in the API's composition and on the command line (exit 2, one line). The other order, or
    the value set explicitly, runs; a preset with nothing replaced passes."""
    import subprocess
    import sys

    from dogi_ml.errors import ConfigError
    from dogi_ml.pipeline.common import compose_config

    msg = (
        r"\+workload=zipf comes after \+experiment=shiro_agent, so its defaults replaced the preset's "
        r"workload.capacity_blocks=65536 \(the run would use 262144\) -- put \+workload=zipf before "
        r"\+experiment=shiro_agent, or set workload.capacity_blocks explicitly"
    )
    with pytest.raises(ConfigError, match=msg):
        compose_config("simulate", ["+experiment=shiro_agent", "+workload=zipf"])
    assert compose_config("simulate", ["+workload=zipf", "+experiment=shiro_agent"]).workload.capacity_blocks == 65536
    cfg = compose_config(
        "simulate",
        ["+experiment=shiro_agent", "+workload=zipf", "workload.capacity_blocks=4096", "workload.write_volume=16.0"],
    )
    assert cfg.workload.capacity_blocks == 4096
    assert compose_config("simulate", ["+experiment=hybrid_select", "+workload=zipf"]).workload.name == "zipf"
    proc = subprocess.run(
        [sys.executable, "-m", "dogi_ml", "simulate", "+experiment=shiro_agent", "+workload=zipf",
         f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if "comes after" in ln]
    assert len(lines) == 1 and "put +workload=zipf before +experiment=shiro_agent" in lines[0]
